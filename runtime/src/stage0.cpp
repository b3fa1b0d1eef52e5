// ZeRO stage 0: plain data parallelism with DeepSpeed's FP16_Optimizer
// (runtime/fp16/fused_optimizer.py; bf16 runs it as "ddp_bf16"). Every rank
// holds the flat 16-bit parameters (2Ψ), full gradients (2Ψ), the flat fp32
// master (4Ψ, 16-bit only) and Adam m and v (8Ψ, lazily at the first step).
// Backward epilogue: engine.allreduce_gradients(bucket_size =
// MEMORY_OPT_ALLREDUCE_SIZE = 5e8 elements) -> buffered_allreduce_fallback ->
// allreduce_and_copy -> allreduce_bucket flattens up to 5e8 elements of
// gradients at a time (a transient of b_m · min(Ψ, 5e8) bytes) and
// all-reduces the flat copy. Step: per-parameter fp32 copies (4Ψ) and their
// flattening (4Ψ), the 16-bit gradients freed, Adam, master -> 16-bit.
#include "zeromem/runtime/zero.h"

#include <vector>

namespace zeromem::runtime {

namespace {

constexpr int64_t kMemoryOptAllreduceSize = 500000000;  // DeepSpeed runtime/constants.py, elements

class Stage0 final : public ZeroStage {
public:
    using ZeroStage::ZeroStage;

    void init() override {
        const auto& ps = c_.model->params();
        const int64_t n = flat_offsets(offs_);
        total_ = n;
        flat_ = be_.alloc(n, c_.model_dtype, Category::parameters);
        be_.fill_random(flat_, 1234, 0.02f);
        views_.resize(ps.size());
        for (size_t i = 0; i < ps.size(); ++i) views_[i] = view(flat_, offs_[i], ps[i].numel());
        half_ = c_.model_dtype != DType::f32;
        if (half_) {
            master_ = be_.alloc(n, DType::f32, Category::optimizer_states);
            be_.copy(master_, 0, flat_, 0, n);
        }
        grads_.assign(ps.size(), Tensor{});
        written_.assign(ps.size(), false);
    }
    void fetch(int, bool) override {}
    void release(int) override {}
    const Tensor& weight(int p) override { return views_[static_cast<size_t>(p)]; }
    Tensor& grad(int p, bool& accumulate) override {
        Tensor& g = grads_[static_cast<size_t>(p)];
        if (g.empty()) g = be_.alloc(c_.model->params()[static_cast<size_t>(p)].numel(), c_.model_dtype, Category::gradients);
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
        const int64_t cap = kMemoryOptAllreduceSize;
        Tensor bucket = be_.alloc(std::min<int64_t>(cap, total_), c_.model_dtype, Category::buffers);
        const float inv = 1.0f / static_cast<float>(be_.world());
        std::vector<size_t> in_bucket;
        int64_t used = 0;
        auto flush = [&]() {
            be_.all_reduce(bucket, 0, used);
            int64_t o = 0;
            be_.scale(bucket, 0, used, inv);
            for (size_t p : in_bucket) {
                be_.copy(grads_[p], 0, bucket, o, grads_[p].numel);
                o += grads_[p].numel;
            }
            in_bucket.clear();
            used = 0;
        };
        for (size_t p = 0; p < grads_.size(); ++p) {
            Tensor& g = grads_[p];
            if (g.numel > cap) {  // larger than a bucket: reduced in place
                be_.all_reduce(g, 0, g.numel);
                be_.scale(g, 0, g.numel, inv);
                continue;
            }
            if (used + g.numel > cap) flush();
            be_.copy(bucket, used, g, 0, g.numel);
            used += g.numel;
            in_bucket.push_back(p);
        }
        if (used > 0) flush();
        be_.free(bucket);
    }
    void step(int step) override {
        if (m_.empty()) {  // Adam's m and v: allocated by the optimizer at its first step
            m_ = be_.alloc(total_, DType::f32, Category::optimizer_states);
            v_ = be_.alloc(total_, DType::f32, Category::optimizer_states);
        }
        AdamParams ap = c_.adam;
        ap.step = step;
        Tensor torch_tmp;
        if (!c_.fused_optimizer) torch_tmp = be_.alloc(total_, DType::f32, Category::buffers);
        if (half_) {
            // fused_optimizer.py step: each gradient cast to fp32 (a list of
            // per-parameter copies, 4Ψ), then _flatten_dense_tensors of that
            // list (4Ψ) with the 16-bit gradients alive; the copies die after
            // the flatten, the 16-bit gradients are set to None.
            std::vector<Tensor> g32s(grads_.size());
            for (size_t p = 0; p < grads_.size(); ++p) {
                g32s[p] = be_.alloc(grads_[p].numel, DType::f32, Category::buffers);
                be_.copy(g32s[p], 0, grads_[p], 0, grads_[p].numel);
            }
            Tensor g32 = be_.alloc(total_, DType::f32, Category::buffers);  // flattened fp32 gradients
            for (size_t p = 0; p < grads_.size(); ++p) {
                be_.copy(g32, offs_[p], g32s[p], 0, grads_[p].numel);
                be_.free(g32s[p]);
            }
            for (auto& g : grads_) be_.free(g);
            be_.adam(master_, g32, m_, v_, 0, total_, ap);
            be_.copy(flat_, 0, master_, 0, total_);
            be_.free(g32);
        } else {
            for (size_t p = 0; p < grads_.size(); ++p) {
                Tensor mv = view(m_, offs_[p], grads_[p].numel), vv = view(v_, offs_[p], grads_[p].numel);
                be_.adam(views_[p], grads_[p], mv, vv, 0, grads_[p].numel, ap);
            }
        }
        be_.free(torch_tmp);
        for (auto& g : grads_) be_.free(g);  // zero_grad(set_to_none=True)
    }
    void release_all() override {
        for (auto& g : grads_) be_.free(g);
        for (Tensor* t : {&flat_, &master_, &m_, &v_}) be_.free(*t);
    }
    int64_t partition_numel() const override { return total_; }

private:
    std::vector<int64_t> offs_;
    std::vector<Tensor> views_, grads_;
    std::vector<bool> written_;
    Tensor flat_, master_, m_, v_;
    int64_t total_ = 0;
    bool half_ = true;
    int micro_ = 0;
};

}  // namespace

std::unique_ptr<ZeroStage> make_stage0(const StageContext& c) { return std::make_unique<Stage0>(c); }

}  // namespace zeromem::runtime
