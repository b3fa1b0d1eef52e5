// ZeRO stage 1 (DeepSpeedZeroOptimizer with partition_gradients off,
// runtime/zero/stage_1_and_2.py): optimizer states partitioned, gradients
// not. Full 16-bit param.grad tensors (2Ψ) accumulate over micro steps and
// are reduced only at the accumulation boundary through the IPG bucket
// (reduce_bucket_size elements in the model dtype, x2 with overlap_comm),
// averaged in place; the step reads this rank's slice. Gradients are freed
// after the step (zero_grad with set_to_none).
#include "flat_partition.h"

#include <algorithm>
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
        Tensor buckets[2];
        buckets[0] = be_.alloc(cap, c_.model_dtype, Category::buffers);
        if (overlap) buckets[1] = be_.alloc(cap, c_.model_dtype, Category::buffers);
        Tensor gpu_tmp;  // temp_grad_buffer_for_gpu_offload
        if (offload()) gpu_tmp = be_.alloc(largest_, c_.model_dtype, Category::buffers);
        const float inv = 1.0f / static_cast<float>(be_.world());
        int cur = 0;
        int64_t used = 0;
        std::vector<size_t> in_bucket;
        auto flush = [&]() {
            Tensor& b = buckets[cur];
            be_.all_reduce(b, 0, used);
            be_.scale(b, 0, used, inv);
            int64_t o = 0;
            for (size_t p : in_bucket) {
                be_.copy(grads_[p], 0, b, o, grads_[p].numel);
                if (offload()) store_partition_range(b, o, offs_[p], offs_[p] + grads_[p].numel, grad32_host_, false);
                o += grads_[p].numel;
            }
            in_bucket.clear();
            used = 0;
            if (overlap) cur = 1 - cur;
        };
        for (size_t p = 0; p < grads_.size(); ++p) {
            Tensor& g = grads_[p];
            if (g.numel > cap) {  // extra-large parameter: reduced in place
                be_.all_reduce(g, 0, g.numel);
                be_.scale(g, 0, g.numel, inv);
                if (offload()) store_partition_range(g, 0, offs_[p], offs_[p] + g.numel, grad32_host_, false);
                continue;
            }
            if (used + g.numel > cap) flush();
            be_.copy(buckets[cur], used, g, 0, g.numel);
            used += g.numel;
            in_bucket.push_back(p);
        }
        if (used > 0) flush();
        be_.free(buckets[0]);
        be_.free(buckets[1]);
        be_.free(gpu_tmp);
    }
    void step(int step) override {
        FlatPartitioned::step(step);
        for (auto& g : grads_) be_.free(g);
    }
    void release_all() override {
        for (auto& g : grads_) be_.free(g);
        FlatPartitioned::release_all();
    }

private:
    void gather_partition_grads(Tensor& flat) override {
        be_.fill(flat, 0, flat.numel, 0.0f);
        for (size_t p = 0; p < grads_.size(); ++p) {
            const int64_t a = std::max(offs_[p], lo()), b = std::min(offs_[p] + grads_[p].numel, hi());
            if (a < b) be_.copy(flat, a - lo(), grads_[p], a - offs_[p], b - a);
        }
    }
    std::vector<Tensor> grads_;
    std::vector<bool> written_;
    int micro_ = 0;
};

}  // namespace

std::unique_ptr<ZeroStage> make_stage1(const StageContext& c) { return std::make_unique<Stage1>(c); }

}  // namespace zeromem::runtime
