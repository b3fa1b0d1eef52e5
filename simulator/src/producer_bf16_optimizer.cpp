// BF16_Optimizer (producer.h): DeepSpeed v0.19.6 runtime/bf16_optimizer.py,
// which the engine builds at ZeRO stage 1 for bf16 weights with fp32
// gradient accumulation (event_producer.cpp runs_bf16_optimizer): its load,
// its backward epilogue and its step.
#include "producer.h"

namespace zeromem::sim::detail {

// BF16_Optimizer.__init__ -> _setup_for_real_optimizer (runtime/
// bf16_optimizer.py), one param group: the engine has moved the module to
// the GPU; _flatten_dense_tensors_aligned appends a zero pad (align_dense_
// tensors, to a multiple of nccl_start_alignment_factor 2 x N_d elements)
// and concatenates into bf16_groups_flat on the GPU (two 16-bit copies);
// _update_storage_to_flattened_tensor points the params into it, freeing
// the originals. The fp32 master partition is
// bf16_dp_partitions[rank].clone().float() (the 16-bit clone goes with the
// statement), and fp32_groups_gradients_flat is zeros_like(bf16_groups_flat,
// dtype=grad_acc_dtype): the whole flat group, not a partition, kept to the
// end of training (the estimator's bf16_optimizer_fp32_grad_buffer).
void Producer::bf16_optimizer_init() {
    std::vector<std::pair<uint64_t, uint32_t>> params;
    for (uint32_t i = 0; i < mods_.size(); ++i)
        for (uint64_t p : mods_[i].params) params.emplace_back(alloc("parameter", bm_ * p, Stream::compute, i + 1), i + 1);
    padded_ = ceil_div(T_, 2 * N_) * 2 * N_;
    Tn_ = padded_ / N_;
    const uint64_t pad = padded_ > T_ ? alloc("alignment_padding", bm_ * (padded_ - T_), Stream::compute, root_) : 0;
    alloc("bf16_groups_flat", bm_ * padded_, Stream::compute, root_);
    release(pad, root_);
    for (const auto& [id, m] : params) release(id, m);
    const uint64_t clone = alloc("bf16_partition_clone", bm_ * Tn_, Stream::compute, root_);
    alloc("fp32_partition", 4 * Tn_, Stream::compute, root_);
    release(clone, root_);
    alloc("bf16_optimizer_fp32_grad_buffer", ba_ * padded_, Stream::compute, root_);
}

// BF16_Optimizer.backward_epilogue -> update_hp_grads (immediate_grad_update
// false, DeepSpeed's default; engine.py _backward_epilogue calls it before
// allreduce_gradients): per parameter, _update_hp_grad adds
// lp.grad.to(fp32) into its view of the fp32 gradient buffer; the fp32 copy
// (4 B per element of that parameter) goes with the statement. The bf16
// param.grad stays: backward_prologue's clear_lp_grads zeroes it in place
// (set_to_none=False) and autograd accumulates into it.
void Producer::bf16_update_hp_grads() {
    if (ba_ == bm_) return;  // grad_acc_dtype bf16: .to() returns the tensor itself
    for (uint32_t i = 0; i < mods_.size(); ++i) {
        if (mods_[i].shares_params_with >= 0) continue;  // tied: one parameter, one grad
        for (uint64_t p : mods_[i].params) release(alloc("lp_grad_fp32_copy", ba_ * p, Stream::compute, i + 1), i + 1);
    }
}

// engine.py allreduce_gradients at the accumulation boundary (BF16_Optimizer
// has no reduce_gradients) -> buffered_allreduce_fallback with
// get_grads_for_reduction() = [fp32_groups_gradients_flat] ->
// allreduce_no_retain -> allreduce_and_copy -> allreduce_bucket: flatten of
// one tensor is a view (torch/csrc/utils/tensor_flatten.h); on the default
// stream (the engine uses no side stream here), the all-reduce
// is in place unless communication_data_type (bf16 by default with bf16)
// differs from the buffer's dtype: tensor.to(communication_data_type), the
// whole flat buffer, copied back and freed (the estimator's
// bf16_optimizer_allreduce_cast).
void Producer::bf16_allreduce_gradients(uint32_t m) {
    if (bc_ == ba_) return;
    release(alloc("bf16_optimizer_allreduce_cast", bc_ * padded_, Stream::compute, m), m);
}

// BF16_Optimizer.step: the norm and clip work per gradient view (no
// buffer), param_partition.grad = the fp32 buffer's partition view (no copy
// when grad_acc_dtype is fp32), optimizer.step() on the fp32 partition
// (m and v created at the first step; torch's foreach temporary),
// update_lp_params copies into this rank's bf16 partition and all-gathers
// in place into bf16_groups_flat (runtime/utils.py all_gather_dp_groups),
// clear_hp_grads zeroes the fp32 buffer (kept); then the engine
// (_take_model_step, bfloat16_enabled) calls optimizer.zero_grad(), whose
// clear_lp_grads(set_to_none=True) frees the bf16 param.grads.
void Producer::bf16_optimizer_step(bool first) {
    const uint32_t m = root_;
    const uint64_t cast = ba_ != 4 ? alloc("fp32_gradient_partition", 4 * Tn_, Stream::compute, m) : 0;
    adam_state_and_temporary(Tn_, first, m);
    release(cast, m);  // grad_acc_dtype not fp32: param_partition.grad = None after the step
    release_full_gradients(m);
}

}  // namespace zeromem::sim::detail
