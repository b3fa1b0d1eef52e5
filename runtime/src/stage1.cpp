// ZeRO stage 1 (DeepSpeedZeroOptimizer with partition_gradients off,
// runtime/zero/stage_1_and_2.py): optimizer states partitioned, gradients
// not. Full 16-bit param.grad tensors (2Ψ) accumulate over micro steps and
// are reduced only at the accumulation boundary through the IPG bucket
// (reduce_bucket_size elements in the model dtype, x2 with overlap_comm;
// engine.allreduce_gradients -> reduce_gradients ->
// reduce_ready_partitions_and_remove_grads; the bucket itself is allocated at
// the first gradient hook, process_gradients -> setup_buckets). Each param.grad is copied into
// the bucket and its storage freed; after the reduction this rank's slice is
// copied into grads_in_partition (reduce_ipg_grads -> copy_grads_in_partition,
// b_m · partition bytes), the only gradient storage left after the
// epilogue (_clear_param_grad_only). The step reads it and frees it.
#include "flat_partition.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace zeromem::runtime {

namespace {

class Stage1 final : public FlatPartitioned {
public:
    using FlatPartitioned::FlatPartitioned;

    void init() override {
        FlatPartitioned::init();
        grads_.assign(c_.model->params().size(), Tensor{});
        written_.assign(grads_.size(), false);
    }
    Tensor& grad(int p, bool& accumulate) override {
        setup_buckets();
        Tensor& g = grads_[static_cast<size_t>(p)];
        if (g.empty())
            g = be_.alloc(c_.model->params()[static_cast<size_t>(p)].numel(), c_.model_dtype, Category::gradients);
        accumulate = micro_ > 0 || written_[static_cast<size_t>(p)];
        written_[static_cast<size_t>(p)] = true;
        return g;
    }
    void grad_ready(int) override {}
    void begin_backward(int micro_step) override {
        micro_ = micro_step;
        written_.assign(written_.size(), false);
    }
    void end_backward(bool boundary) override {
        if (!boundary) return;
        const bool overlap = c_.zero.overlap_comm_effective();
        const int64_t cap = c_.zero.reduce_bucket_size;
        setup_buckets();
        Tensor* buckets = buckets_;
        int cur = 0;
        int64_t used = 0;
        std::vector<std::pair<size_t, int64_t>> in_bucket;
        auto flush = [&]() {
            average_in_place(buckets[cur], 0, used);
            for (const auto& [p, o] : in_bucket) store(buckets[cur], o, p);
            in_bucket.clear();
            used = 0;
            if (overlap) cur = 1 - cur;
        };
        for (size_t p = 0; p < grads_.size(); ++p) {
            Tensor& g = grads_[p];
            if (g.empty()) continue;
            if (g.numel > cap) {  // extra-large parameter: averaged on its own (extra_large_param_to_reduce)
                average_in_place(g, 0, g.numel);
                store(g, 0, p);
                be_.free(g);
                continue;
            }
            if (used + g.numel > cap) flush();
            // reduce_independent_p_g_buckets_and_remove_grads: the gradient is
            // copied into the bucket and param.grad becomes a view of it
            // (grad_reduc.data = new_grad_tensor.data): its own storage is freed.
            be_.copy(buckets[cur], used, g, 0, g.numel);
            in_bucket.push_back({p, used});
            used += g.numel;
            be_.free(g);
        }
        if (used > 0) flush();
        // independent_gradient_partition_epilogue -> _release_ipg_buffers.
        be_.free(buckets_[0]);
        be_.free(buckets_[1]);
    }
    void release_all() override {
        be_.free(buckets_[0]);
        be_.free(buckets_[1]);
        for (auto& g : grads_) be_.free(g);
        be_.free(gip_);
        FlatPartitioned::release_all();
    }

private:
    // After the reduction only this rank's slice is kept: reduce_ipg_grads
    // (stage 1 branch) -> copy_grads_in_partition into grads_in_partition
    // (model dtype, allocated at the first copy), or the fp32 gradient
    // partition under offload; the epilogue's _clear_param_grad_only drops
    // the rest.
    void store(const Tensor& src, int64_t soff, size_t p) {
        const int64_t n = c_.model->params()[p].numel();
        if (std::max(offs_[p], lo()) >= std::min(offs_[p] + n, hi())) return;  // not in this rank's partition
        offload_norm_transient(offs_[p], offs_[p] + n);
        if (!offload() && gip_.empty()) {
            gip_ = be_.alloc(part_, c_.model_dtype, Category::gradients);
            be_.fill(gip_, 0, part_, 0.0f);
        }
        store_partition_range(src, soff, offs_[p], offs_[p] + n, gip_, false);
    }
    void gather_partition_grads(Tensor& flat) override { be_.copy(flat, 0, gip_, 0, part_); }
    void release_partition_grads() override { be_.free(gip_); }
    // The IPG buffer (x2 with overlap_comm): every gradient hook runs
    // process_gradients, whose setup_buckets allocates it at the first hook
    // of a backward; it stays over the micro steps to the boundary's epilogue.
    void setup_buckets() {
        if (!buckets_[0].empty()) return;
        buckets_[0] = be_.alloc(c_.zero.reduce_bucket_size, c_.model_dtype, Category::buffers);
        if (c_.zero.overlap_comm_effective())
            buckets_[1] = be_.alloc(c_.zero.reduce_bucket_size, c_.model_dtype, Category::buffers);
    }
    std::vector<Tensor> grads_;
    Tensor buckets_[2];
    Tensor gip_;
    std::vector<bool> written_;
    int micro_ = 0;
};

}  // namespace

std::unique_ptr<ZeroStage> make_stage1(const StageContext& c) { return std::make_unique<Stage1>(c); }

}  // namespace zeromem::runtime
