// ZeRO stage 2 (DeepSpeedZeroOptimizer with partition_gradients,
// runtime/zero/stage_1_and_2.py): each gradient hook copies the fresh
// param.grad into the IPG bucket (reduce_bucket_size elements in the model
// dtype; a second bucket with overlap_comm), created at the first hook of a
// backward and released in its epilogue. A full bucket is reduced and this
// rank's slice lands in grads_in_partition (model dtype, the partition's
// numel, allocated at the first reduction; with contiguous_gradients), or in
// the pinned fp32 gradient partition under offload. A parameter larger than
// the bucket is reduced in place (extra_large_param_to_reduce). DeepSpeed
// reduces a bucket with per-rank reduces (average_tensor); the runtime
// all-reduces it: the same bytes in memory, more traffic.
#include "flat_partition.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace zeromem::runtime {

namespace {

class Stage2 final : public FlatPartitioned {
public:
    using FlatPartitioned::FlatPartitioned;

    void init() override {
        FlatPartitioned::init();
        pending_.assign(c_.model->params().size(), Tensor{});
    }
    Tensor& grad(int p, bool& accumulate) override {
        Tensor& g = pending_[static_cast<size_t>(p)];
        accumulate = !g.empty();
        // autograd's param.grad: transient until the hook copies it into the
        // bucket (reduce_independent_p_g_buckets_and_remove_grads), counted
        // with the buffers like the estimator's
        // zero2_autograd_grad_before_bucket_copy.
        if (g.empty())
            g = be_.alloc(c_.model->params()[static_cast<size_t>(p)].numel(), c_.model_dtype, Category::buffers);
        return g;
    }
    void grad_ready(int p) override {
        Tensor& g = pending_[static_cast<size_t>(p)];
        const int64_t cap = c_.zero.reduce_bucket_size;
        if (buckets_[0].empty()) {
            buckets_[0] = be_.alloc(cap, c_.model_dtype, Category::buffers);
            if (c_.zero.overlap_comm_effective()) buckets_[1] = be_.alloc(cap, c_.model_dtype, Category::buffers);
        }
        if (g.numel > cap) {  // extra_large_param_to_reduce: averaged on its own
            average_in_place(g, 0, g.numel);
            store(g, 0, p);
        } else {
            if (used_ + g.numel > cap) flush();
            be_.copy(buckets_[cur_], used_, g, 0, g.numel);
            in_bucket_.push_back({p, used_});
            used_ += g.numel;
        }
        be_.free(g);
    }
    // gradient_accumulation_steps > 1: each micro step's epilogue keeps the
    // partition in all_grad_tensors and drops grads_in_partition
    // (_release_ipg_buffers), so the next micro step's first copy allocates a
    // fresh one beside it; its epilogue adds the new gradients into the
    // kept ones and the fresh buffer dies (stage_1_and_2.py
    // independent_gradient_partition_epilogue). The fresh one is counted
    // with the buffers, like the estimator's zero2_accumulated_partition.
    void begin_backward(int micro_step) override {
        micro_ = micro_step;
        if (micro_step > 0 && !offload()) {
            kept_ = gip_;
            gip_ = Tensor{};
        }
    }
    void end_backward(bool) override {
        if (used_ > 0) flush();
        if (!kept_.empty()) {
            if (!gip_.empty()) {
                be_.axpy(kept_, 0, gip_, 0, part_, 1.0f);
                be_.free(gip_);
            }
            gip_ = kept_;
            kept_ = Tensor{};
        }
        be_.free(buckets_[0]);
        be_.free(buckets_[1]);
        cur_ = 0;
    }
    void release_all() override {
        for (auto& g : pending_) be_.free(g);
        for (Tensor* t : {&buckets_[0], &buckets_[1], &gip_, &kept_}) be_.free(*t);
        FlatPartitioned::release_all();
    }

private:
    void store(const Tensor& src, int64_t soff, int p) {
        const int64_t n = c_.model->params()[static_cast<size_t>(p)].numel();
        const int64_t a = offs_[static_cast<size_t>(p)];
        if (std::max(a, lo()) >= std::min(a + n, hi())) return;  // not in this rank's partition
        offload_norm_transient(a, a + n);
        if (!offload() && gip_.empty()) {
            gip_ = be_.alloc(part_, c_.model_dtype, kept_.empty() ? Category::gradients : Category::buffers);
            be_.fill(gip_, 0, part_, 0.0f);
        }
        store_partition_range(src, soff, offs_[static_cast<size_t>(p)], offs_[static_cast<size_t>(p)] + n, gip_,
                              offload() && micro_ > 0);
    }
    void flush() {
        average_in_place(buckets_[cur_], 0, used_);
        for (const auto& [p, off] : in_bucket_) store(buckets_[cur_], off, p);
        in_bucket_.clear();
        used_ = 0;
        if (!buckets_[1].empty()) cur_ = 1 - cur_;
    }
    void gather_partition_grads(Tensor& flat) override { be_.copy(flat, 0, gip_, 0, part_); }
    void release_partition_grads() override { be_.free(gip_); }

    std::vector<Tensor> pending_;
    std::vector<std::pair<int, int64_t>> in_bucket_;
    Tensor buckets_[2], gip_, kept_;
    int cur_ = 0, micro_ = 0;
    int64_t used_ = 0;
};

}  // namespace

std::unique_ptr<ZeroStage> make_stage2(const StageContext& c) { return std::make_unique<Stage2>(c); }

}  // namespace zeromem::runtime
