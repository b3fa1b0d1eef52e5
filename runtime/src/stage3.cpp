// ZeRO stage 3 (DeepSpeedZeroOptimizer_Stage3, runtime/zero/stage3.py, with
// partition_parameters.py and partitioned_param_coordinator.py):
//  - each parameter padded to a multiple of N_d and partitioned
//    (ds_numel_aligned); the 16-bit partitions in one flat buffer
//    (lp_param_buffer), on the device or, with offload_param: cpu, pinned host;
//  - parameters with numel <= stage3_param_persistence_threshold (capped in
//    total by stage3_model_persistence_threshold) are kept whole on every
//    rank after their first gather (mark_persistent_parameters);
//  - fp32 master partitions per sub-group (sub_group_size elements) and Adam
//    m and v (lazily at the first step); on the host with offload_optimizer;
//  - grad_partitions_flat_buffer in the accumulation dtype, and the IPG
//    bucket (reduce_bucket_size elements, communication dtype) allocated once
//    at init when contiguous_gradients;
//  - fetch: the module's parameters all-gathered into one flat buffer, plus a
//    prefetch of the following modules up to
//    min(stage3_prefetch_bucket_size, stage3_max_live_parameters) elements;
//    released after use;
//  - backward: each module's full gradient is copied into the IPG bucket; a
//    full bucket is copied into one padded flat tensor (DeepSpeed's
//    reduce_scatter_coalesced torch.cat, a transient of the bucket's used
//    size) and reduce-scattered parameter by parameter from it into this
//    rank's gradient partitions;
//  - step per sub-group: the gradient partitions flattened (b_a) and cast
//    to fp32 (_prepare_fp32_grad_for_sub_group), Adam, master -> 16-bit.
#include "zeromem/runtime/zero.h"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

namespace zeromem::runtime {

namespace {

class Stage3 final : public ZeroStage {
public:
    using ZeroStage::ZeroStage;

    void init() override {
        const auto& ps = c_.model->params();
        const int64_t N = be_.world();
        part_.resize(ps.size());
        poff_.resize(ps.size());
        persistent_.assign(ps.size(), false);
        full_.assign(ps.size(), Tensor{});
        full_views_.assign(ps.size(), Tensor{});
        views_.assign(ps.size(), Tensor{});
        pending_.assign(ps.size(), Tensor{});
        int64_t total = 0, persist_total = 0;
        for (size_t i = 0; i < ps.size(); ++i) {
            part_[i] = (ps[i].numel() + N - 1) / N;
            poff_[i] = total;
            total += part_[i];
            if (ps[i].numel() <= c_.zero.stage3_param_persistence_threshold &&
                persist_total + ps[i].numel() <= c_.zero.stage3_model_persistence_threshold) {
                persistent_[i] = true;
                persist_total += ps[i].numel();
            }
        }
        total_part_ = total;
        const bool off_p = c_.zero.offload_param != OffloadDevice::none;
        // offload_param: cpu keeps the flat 16-bit partitions in host memory,
        // pinned when offload_param.pin_memory
        // (stage3.py _create_param_groups_fp16_flat_cpu_memory).
        const Where pw = c_.zero.offload_param_pin_memory ? Where::pinned : Where::host;
        lp_ = be_.alloc(total, c_.model_dtype, Category::parameters, off_p ? pw : Where::device);
        be_.fill_random(lp_, 1234 + static_cast<uint64_t>(be_.rank()), 0.02f);
        const Where ow = offload() ? Where::host : Where::device;
        master_ = be_.alloc(total, DType::f32, Category::optimizer_states, ow);
        be_.copy(master_, 0, lp_, 0, total);
        // Sub-groups: consecutive parameters until sub_group_size elements.
        int64_t start = 0, acc = 0;
        for (size_t i = 0; i < ps.size(); ++i) {
            acc += part_[i];
            if (acc >= c_.zero.sub_group_size || i + 1 == ps.size()) {
                groups_.push_back({start, poff_[i] + part_[i]});
                start = poff_[i] + part_[i];
                acc = 0;
            }
        }
        // stage3.py _setup_for_real_optimizer, in its order:
        // initialize_optimizer_states (on the device: the fp32 gradient_buffer
        // of the largest sub-group, freed at its end; under offload the
        // per-sub-group fp32 gradients, pinned when
        // offload_optimizer.pin_memory), then the IPG bucket, then
        // grad_partitions_flat_buffer (pinned under offload with pin_memory).
        const Where gw = c_.zero.offload_optimizer_pin_memory ? Where::pinned : Where::host;
        if (!offload()) {
            int64_t largest = 0;
            for (const auto& g : groups_) largest = std::max(largest, g.second - g.first);
            Tensor tmp = be_.alloc(largest, DType::f32, Category::buffers);
            be_.free(tmp);
        } else {
            grad32_ = be_.alloc(total, DType::f32, Category::gradients, gw);
        }
        if (c_.zero.contiguous_gradients) ipg_ = be_.alloc(c_.zero.reduce_bucket_size, c_.comm_dtype, Category::buffers);
        grads_ = be_.alloc(total, c_.accum_dtype, Category::gradients, offload() ? gw : Where::device);
        // Persistent parameters: gathered once and kept whole.
        for (size_t i = 0; i < ps.size(); ++i)
            if (persistent_[i]) {
                full_[i] = be_.alloc(part_[i] * N, c_.model_dtype, Category::parameters);
                gather_param(i, full_[i], 0);
                full_views_[i] = with_numel(full_[i], ps[i].numel());
            }
        gathered_.assign(c_.model->modules().size(), Tensor{});
    }

    void fetch(int m, bool backward) override {
        gather_module(m);
        // Prefetch the next modules in execution order within the budget.
        const int64_t budget = std::min(c_.zero.stage3_prefetch_bucket_size, c_.zero.stage3_max_live_parameters);
        int64_t ahead = 0;
        const int n = static_cast<int>(c_.model->modules().size());
        for (int k = 1; k < n; ++k) {
            const int next = backward ? m - k : m + k;
            if (next < 0 || next >= n) break;
            const int64_t need = module_gather_numel(next);
            if (ahead + need > budget) break;
            ahead += need;
            gather_module(next);
        }
    }
    void release(int m) override { be_.free(gathered_[static_cast<size_t>(m)]); }
    const Tensor& weight(int p) override {
        if (persistent_[static_cast<size_t>(p)]) return full_views_[static_cast<size_t>(p)];
        return views_.at(static_cast<size_t>(p));
    }
    Tensor& grad(int p, bool& accumulate) override {
        Tensor& g = pending_[static_cast<size_t>(p)];
        accumulate = !g.empty();
        // The module's full-size gradient from autograd (counted with the buffers).
        if (g.empty()) g = be_.alloc(part_[static_cast<size_t>(p)] * be_.world(), c_.model_dtype, Category::buffers);
        if (!accumulate) be_.fill(g, 0, g.numel, 0.0f);
        Tensor& v = grad_views_[p];
        v = with_numel(g, c_.model->params()[static_cast<size_t>(p)].numel());
        return v;
    }
    void grad_ready(int p) override {
        const size_t i = static_cast<size_t>(p);
        Tensor& g = pending_[i];
        const int64_t n = g.numel;
        if (ipg_.empty() || n > ipg_.numel) {
            reduce_into_partition(g, 0, i);
        } else {
            if (used_ + n > ipg_.numel) flush();
            be_.copy(ipg_, used_, g, 0, n);
            in_bucket_.push_back({i, used_});
            used_ += n;
        }
        be_.free(g);
        grad_views_.erase(p);
    }
    void begin_backward(int micro_step) override { micro_ = micro_step; }
    void end_backward(bool) override {
        if (used_ > 0) flush();
    }
    void step(int step) override {
        const Where ow = offload() ? Where::host : Where::device;
        if (m_.empty()) {
            m_ = be_.alloc(total_part_, DType::f32, Category::optimizer_states, ow);
            v_ = be_.alloc(total_part_, DType::f32, Category::optimizer_states, ow);
        }
        AdamParams ap = c_.adam;
        ap.step = step;
        for (const auto& [a, b] : groups_) {
            const int64_t n = b - a;
            if (offload()) {
                be_.copy(grad32_, a, grads_, a, n);
                be_.adam(master_, grad32_, m_, v_, a, n, ap);
            } else {
                Tensor flat = be_.alloc(n, c_.accum_dtype, Category::buffers);
                be_.copy(flat, 0, grads_, a, n);
                Tensor g32 = be_.alloc(n, DType::f32, Category::buffers);
                be_.copy(g32, 0, flat, 0, n);
                Tensor torch_tmp;
                if (!c_.fused_optimizer) torch_tmp = be_.alloc(n, DType::f32, Category::buffers);
                Tensor mv = view(m_, a, n), vv = view(v_, a, n), ms = view(master_, a, n);
                be_.adam(ms, g32, mv, vv, 0, n, ap);
                be_.free(torch_tmp);
                be_.free(g32);
                be_.free(flat);
            }
            be_.copy(lp_, a, master_, a, n);
        }
        be_.fill(grads_, 0, grads_.numel, 0.0f);
        for (size_t i = 0; i < persistent_.size(); ++i)
            if (persistent_[i]) gather_param(i, full_[i], 0);
    }
    void release_all() override {
        for (auto& t : gathered_) be_.free(t);
        for (auto& t : pending_) be_.free(t);
        for (auto& t : full_) be_.free(t);
        for (Tensor* t : {&lp_, &master_, &m_, &v_, &grads_, &grad32_, &ipg_}) be_.free(*t);
    }
    int64_t partition_numel() const override { return total_part_; }

private:
    bool offload() const { return c_.zero.offload_optimizer != OffloadDevice::none; }
    static Tensor with_numel(Tensor t, int64_t n) {
        t.numel = n;
        return t;
    }
    void gather_param(size_t i, Tensor& out, int64_t ooff) {
        Tensor o = out;
        o.numel = part_[i] * be_.world();
        Tensor src = view(lp_, poff_[i], part_[i]);
        if (lp_.where != Where::device) {  // offload_param: bring the partition to the device first
            Tensor dev = be_.alloc(part_[i], c_.model_dtype, Category::buffers);
            be_.copy(dev, 0, src, 0, part_[i]);
            be_.all_gather(dev, 0, o, ooff, part_[i]);
            be_.free(dev);
        } else {
            be_.all_gather(src, 0, o, ooff, part_[i]);
        }
    }
    int64_t module_gather_numel(int m) const {
        int64_t n = 0;
        for (int p : c_.model->modules()[static_cast<size_t>(m)].params)
            if (!persistent_[static_cast<size_t>(p)]) n += part_[static_cast<size_t>(p)] * be_.world();
        return n;
    }
    void gather_module(int m) {
        Tensor& buf = gathered_[static_cast<size_t>(m)];
        if (!buf.empty()) return;
        const int64_t n = module_gather_numel(m);
        if (n == 0) return;
        buf = be_.alloc(n, c_.model_dtype, Category::buffers);
        int64_t off = 0;
        for (int p : c_.model->modules()[static_cast<size_t>(m)].params) {
            const size_t i = static_cast<size_t>(p);
            if (persistent_[i]) continue;
            Tensor o = view(buf, off, part_[i] * be_.world());
            gather_param(i, o, 0);
            views_[i] = view(buf, off, c_.model->params()[i].numel());
            off += part_[i] * be_.world();
        }
    }
    // Reduce-scatter the padded full gradient at src[soff..] of parameter i
    // into its partition of grad_partitions_flat_buffer.
    void reduce_into_partition(const Tensor& src, int64_t soff, size_t i) {
        const float inv = 1.0f / static_cast<float>(be_.world());
        if (micro_ == 0 && c_.comm_dtype == c_.accum_dtype) {  // straight into the partition
            be_.reduce_scatter(src, soff, grads_, poff_[i], part_[i]);
            be_.scale(grads_, poff_[i], part_[i], inv);
            return;
        }
        Tensor out = be_.alloc(part_[i], c_.comm_dtype, Category::buffers);
        be_.reduce_scatter(src, soff, out, 0, part_[i]);
        be_.axpy(grads_, poff_[i], out, 0, part_[i], inv);
        be_.free(out);
    }
    // __avg_scatter_grads -> reduce_scatter_coalesced
    // (runtime/comm/coalesced_collectives.py): the bucket's gradients,
    // each padded to a multiple of N_d, are concatenated rank-major into one
    // new flat tensor (torch.cat) and reduce-scattered from it; the copy lives
    // for the reduction. With one rank there is no reduce-scatter copy.
    void flush() {
        Tensor cat;
        int64_t total = 0;
        for (const auto& [i, off] : in_bucket_) total += part_[i] * be_.world();
        if (be_.world() > 1 && total > 0) {
            cat = be_.alloc(total, ipg_.dtype, Category::buffers);
            int64_t o = 0;
            for (const auto& [i, off] : in_bucket_) {
                be_.copy(cat, o, ipg_, off, part_[i] * be_.world());
                o += part_[i] * be_.world();
            }
        }
        int64_t o = 0;
        for (const auto& [i, off] : in_bucket_) {
            if (cat.empty()) reduce_into_partition(ipg_, off, i);
            else reduce_into_partition(cat, o, i);
            o += part_[i] * be_.world();
        }
        be_.free(cat);
        in_bucket_.clear();
        used_ = 0;
    }

    std::vector<int64_t> part_, poff_;
    std::vector<bool> persistent_;
    std::vector<Tensor> full_, full_views_, pending_, gathered_, views_;
    std::map<int, Tensor> grad_views_;
    std::vector<std::pair<int64_t, int64_t>> groups_;
    std::vector<std::pair<size_t, int64_t>> in_bucket_;
    Tensor lp_, master_, m_, v_, grads_, grad32_, ipg_;
    int64_t total_part_ = 0, used_ = 0;
    int micro_ = 0;
};

}  // namespace

std::unique_ptr<ZeroStage> make_stage3(const StageContext& c) { return std::make_unique<Stage3>(c); }

std::unique_ptr<ZeroStage> make_stage(const StageContext& c) {
    if (c.zero.offload_optimizer == OffloadDevice::nvme || c.zero.offload_param == OffloadDevice::nvme)
        throw InputError("measure: NVMe offload (ZeRO-Infinity) is not run by the runtime; use none or cpu");
    switch (c.zero.stage) {
        case 0: return make_stage0(c);
        case 1: return make_stage1(c);
        case 2: return make_stage2(c);
        case 3: return make_stage3(c);
        default: throw InputError("zero_optimization.stage: " + std::to_string(c.zero.stage) + " is outside 0..3");
    }
}

}  // namespace zeromem::runtime
