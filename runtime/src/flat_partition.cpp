// Stages 1 and 2: the flat 16-bit parameters, the fp32 master partition, the
// optimizer step and the post-step all-gather (see flat_partition.h).
#include "flat_partition.h"

#include <algorithm>
#include <vector>

namespace zeromem::runtime {

void FlatPartitioned::init() {
    const auto& ps = c_.model->params();
    const int64_t n = flat_offsets(offs_);
    for (const auto& p : ps) largest_ = std::max(largest_, p.numel());
    total_ = n;
    const int64_t align = 2 * be_.world();  // nccl_start_alignment_factor * N_d
    padded_ = (n + align - 1) / align * align;
    part_ = padded_ / be_.world();
    // The engine moves the module to the device first (engine.py
    // _configure_distributed_model, module.to(device)); stage_1_and_2.py
    // __init__ then flattens the 16-bit parameters on the device (DeepSpeed
    // >= 0.18.7 when the copy fits) into bit16_groups_flat and repoints
    // param.data at it, which frees the per-parameter storage: two 16-bit
    // copies at once.
    std::vector<Tensor> module(ps.size());
    for (size_t i = 0; i < ps.size(); ++i) {
        module[i] = be_.alloc(ps[i].numel(), c_.model_dtype, Category::parameters);
        be_.fill_random(module[i], 1234 + i, 0.02f);
    }
    flat_ = be_.alloc(padded_, c_.model_dtype, Category::parameters);
    be_.fill(flat_, 0, padded_, 0.0f);
    for (size_t i = 0; i < ps.size(); ++i) {
        be_.copy(flat_, offs_[i], module[i], 0, ps[i].numel());
        be_.free(module[i]);
    }
    views_.resize(ps.size());
    for (size_t i = 0; i < ps.size(); ++i) views_[i] = view(flat_, offs_[i], ps[i].numel());
    // Under offload every host buffer is pinned when offload_optimizer.pin_memory
    // (stage_1_and_2.py __init__: weights_partition and temp_pinned through
    // accelerator pin_memory; initialize_optimizer_states: the fp32 gradient
    // partition; temp_grad_buffer_for_cpu_offload), pageable otherwise.
    const Where host = c_.zero.offload_optimizer_pin_memory ? Where::pinned : Where::host;
    master_ = be_.alloc(part_, DType::f32, Category::optimizer_states, offload() ? host : Where::device);
    be_.copy(master_, 0, flat_, lo(), part_);
    if (!offload()) {
        // initialize_optimizer_states: the master's gradient of zeros on the
        // device (single_grad_partition), set back to None before it returns.
        Tensor init_grad = be_.alloc(part_, DType::f32, Category::gradients);
        be_.fill(init_grad, 0, part_, 0.0f);
        be_.free(init_grad);
    } else {
        grad32_host_ = be_.alloc(part_, DType::f32, Category::gradients, host);
        staging16_ = be_.alloc(part_, c_.model_dtype, Category::buffers, host);
        cpu_tmp_ = be_.alloc(largest_, c_.model_dtype, Category::buffers, host);
        // temp_grad_buffer_for_gpu_offload: created in __init__, never freed.
        gpu_tmp_ = be_.alloc(largest_, c_.model_dtype, Category::buffers);
    }
}

void FlatPartitioned::store_partition_range(const Tensor& src, int64_t soff, int64_t a, int64_t b,
                                            Tensor& partition_dst, bool add) {
    const int64_t from = std::max(a, lo()), to = std::min(b, hi());
    if (from >= to) return;
    const int64_t n = to - from;
    Tensor& dst = offload() ? grad32_host_ : partition_dst;
    if (add) be_.axpy(dst, from - lo(), src, soff + (from - a), n, 1.0f);
    else be_.copy(dst, from - lo(), src, soff + (from - a), n);
}

void FlatPartitioned::average_in_place(Tensor& src, int64_t off, int64_t n) {
    if (be_.world() == 1 || n == 0) return;
    Tensor flat = be_.alloc(n, src.dtype, Category::buffers);
    be_.copy(flat, 0, src, off, n);
    be_.all_reduce(flat, 0, n);
    be_.scale(flat, 0, n, 1.0f / static_cast<float>(be_.world()));
    be_.copy(src, off, flat, 0, n);
    be_.free(flat);
}

void FlatPartitioned::offload_norm_transient(int64_t a, int64_t b) {
    const int64_t from = std::max(a, lo()), to = std::min(b, hi());
    if (!offload() || from >= to) return;
    Tensor d = be_.alloc(8 * (to - from), DType::u8, Category::buffers);  // the fp64 copy, 8 B per element
    be_.free(d);
}

void FlatPartitioned::overflow_and_norm_transients() {
    for (size_t p = 0; p < offs_.size(); ++p) {
        const int64_t n = c_.model->params()[p].numel();
        const int64_t from = std::max(offs_[p], lo()), to = std::min(offs_[p] + n, hi());
        if (from >= to) continue;
        // _has_inf_or_nan: x.float() (4 B), isnan, isinf, logical_or (1 B
        // each), .float() (4 B): 11 B per element of the slice.
        Tensor t = be_.alloc(11 * (to - from), DType::u8, Category::buffers);
        be_.free(t);
        // get_grad_norm_direct: g.data.double(), 8 B per element.
        t = be_.alloc(8 * (to - from), DType::u8, Category::buffers);
        be_.free(t);
    }
}

void FlatPartitioned::step(int step) {
    const Where w = offload() ? Where::host : Where::device;
    if (m_.empty()) {  // the wrapped optimizer creates m and v at its first step
        m_ = be_.alloc(part_, DType::f32, Category::optimizer_states, w);
        v_ = be_.alloc(part_, DType::f32, Category::optimizer_states, w);
    }
    AdamParams ap = c_.adam;
    ap.step = step;
    if (offload()) {  // DeepSpeedCPUAdam on the pinned fp32 gradient partition
        be_.adam(master_, grad32_host_, m_, v_, 0, part_, ap);
        be_.copy(staging16_, 0, master_, 0, part_);
        be_.copy(flat_, lo(), staging16_, 0, part_);
    } else {
        overflow_and_norm_transients();
        // The flattened partition gradient in the accumulation dtype, then its
        // fp32 copy (stage_1_and_2.py step: single_grad_partition).
        Tensor flat = be_.alloc(part_, c_.accum_dtype, Category::buffers);
        gather_partition_grads(flat);
        Tensor g32 = be_.alloc(part_, DType::f32, Category::buffers);
        be_.copy(g32, 0, flat, 0, part_);
        be_.free(flat);
        // free_grad_in_param_list(averaged_gradients): the 16-bit partition
        // gradients die before _optimizer_step.
        release_partition_grads();
        Tensor torch_tmp;
        if (!c_.fused_optimizer) torch_tmp = be_.alloc(part_, DType::f32, Category::buffers);
        be_.adam(master_, g32, m_, v_, 0, part_, ap);
        be_.free(torch_tmp);
        be_.free(g32);
        be_.copy(flat_, lo(), master_, 0, part_);
    }
    // all_gather_dp_groups: all_gather_into_tensor straight into bit16_groups_flat.
    be_.all_gather(flat_, lo(), flat_, 0, part_);
}

void FlatPartitioned::release_all() {
    for (Tensor* t : {&flat_, &master_, &m_, &v_, &grad32_host_, &staging16_, &cpu_tmp_, &gpu_tmp_}) be_.free(*t);
}

}  // namespace zeromem::runtime
