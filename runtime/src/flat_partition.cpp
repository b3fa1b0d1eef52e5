// Stages 1 and 2: the flat 16-bit parameters, the fp32 master partition, the
// optimizer step and the post-step all-gather (see flat_partition.h).
#include "flat_partition.h"

#include <algorithm>

namespace zeromem::runtime {

void FlatPartitioned::init() {
    const auto& ps = c_.model->params();
    offs_.resize(ps.size());
    int64_t n = 0;
    for (size_t i = 0; i < ps.size(); ++i) {
        offs_[i] = n;
        n += ps[i].numel();
        largest_ = std::max(largest_, ps[i].numel());
    }
    total_ = n;
    const int64_t align = 2 * be_.world();  // nccl_start_alignment_factor * N_d
    padded_ = (n + align - 1) / align * align;
    part_ = padded_ / be_.world();
    flat_ = be_.alloc(padded_, c_.model_dtype, Category::parameters);
    be_.fill_random(flat_, 1234, 0.02f);
    views_.resize(ps.size());
    for (size_t i = 0; i < ps.size(); ++i) views_[i] = view(flat_, offs_[i], ps[i].numel());
    const Where w = offload() ? Where::host : Where::device;
    master_ = be_.alloc(part_, DType::f32, Category::optimizer_states, w);
    be_.copy(master_, 0, flat_, lo(), part_);
    if (offload()) {
        grad32_host_ = be_.alloc(part_, DType::f32, Category::gradients, Where::pinned);
        staging16_ = be_.alloc(part_, c_.model_dtype, Category::buffers, Where::pinned);
        cpu_tmp_ = be_.alloc(largest_, c_.model_dtype, Category::buffers, Where::pinned);
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
        // The flattened partition gradient in the accumulation dtype, then its
        // fp32 copy (stage_1_and_2.py step: single_grad_partition).
        Tensor flat = be_.alloc(part_, c_.accum_dtype, Category::buffers);
        gather_partition_grads(flat);
        Tensor g32 = be_.alloc(part_, DType::f32, Category::buffers);
        be_.copy(g32, 0, flat, 0, part_);
        be_.free(flat);
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
    for (Tensor* t : {&flat_, &master_, &m_, &v_, &grad32_host_, &staging16_, &cpu_tmp_}) be_.free(*t);
}

}  // namespace zeromem::runtime
