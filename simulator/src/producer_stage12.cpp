// ZeRO stages 1 and 2 (producer.h): DeepSpeed v0.19.6
// runtime/zero/stage_1_and_2.py DeepSpeedZeroOptimizer: the flattened
// bit16 groups at load, the IPG buckets of the gradient hooks, ZeRO-1's
// boundary reduction and ZeRO-2's all_grad_tensors; the step is
// producer_step.cpp's stage 1/2 branch.
#include "producer.h"

#include <algorithm>
#include <utility>

namespace zeromem::sim::detail {

// Stage 1/2 (stage_1_and_2.py __init__): the engine moves the module to the
// GPU, the optimizer flattens it into bit16_groups_flat (padded to a multiple
// of 2 x N_d elements; briefly two 16-bit copies), frees the originals and
// creates this rank's fp32 partition (single_partition_of_fp32_groups), whose
// fp32 gradient of zeros initialize_optimizer_states holds until it returns.
void Producer::init_zero12_flatten_bit16_groups() {
    std::vector<std::pair<uint64_t, uint32_t>> params;
    uint64_t largest = 0;
    for (uint32_t i = 0; i < mods_.size(); ++i)
        for (uint64_t p : mods_[i].params) {
            params.emplace_back(alloc("parameter", bm_ * p, Stream::compute, i + 1), i + 1);
            largest = std::max(largest, p);
        }
    const uint64_t padded = ceil_div(T_, 2 * N_) * 2 * N_;
    Tn_ = padded / N_;
    // The flat copy is built on the GPU when a second 16-bit copy fits
    // (capacity unknown: assumed to fit), else on the CPU after the
    // params left the GPU (stage_1_and_2.py __init__, flatten on accelerator).
    const auto cap = in_.cluster.gpu_memory;
    const bool on_gpu = !cap || bm_ * (T_ + padded) <= *cap;
    if (!on_gpu)
        for (const auto& [id, m] : params) release(id, m);
    alloc("bit16_groups_flat", bm_ * padded, Stream::compute, root_);
    if (on_gpu)
        for (const auto& [id, m] : params) release(id, m);
    if (off_opt_) {
        alloc("temp_grad_buffer_for_gpu_offload", bm_ * largest, Stream::compute, root_);
        return;
    }
    alloc("fp32_partition", 4 * Tn_, Stream::compute, root_);
    // initialize_optimizer_states: single_grad_partition = torch.zeros(
    // partition_size, fp32, device=cuda), set back to None before it returns.
    release(alloc("init_fp32_grad_partition", 4 * Tn_, Stream::compute, root_), root_);
}

// stage_1_and_2.py setup_buckets: one buffer of reduce_bucket_size elements
// in the model dtype, a second with overlap_comm (double buffering).
void Producer::zero12_setup_buckets(uint32_t m) {
    if (!ipg_buffers_.empty()) return;
    for (int i = 0; i < (overlap_ ? 2 : 1); ++i)
        ipg_buffers_.push_back(alloc("ipg_bucket", bm_ * bucket_, Stream::compute, m + 1));
}

// stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads.
void Producer::zero12_add_grad_to_ipg_bucket(uint32_t m, uint64_t numel) {
    zero12_setup_buckets(m);
    if (ipg_elements_ + numel > bucket_ && ipg_elements_ > 0) zero12_reduce_ipg_grads(m);
    ipg_elements_ += numel;
    zero12_note_partition_slice(numel);
    if (numel > bucket_) zero12_reduce_ipg_grads(m);  // extra large param: reduced directly
}

// stage_1_and_2.py reduce_ipg_grads -> average_tensor -> allreduce_bucket:
// the slices are flattened into a new tensor and all-reduced; this rank's
// part goes into grads_in_partition (allocated at the first copy, stages 1 and 2:
// copy_grads_in_partition).
void Producer::zero12_reduce_ipg_grads(uint32_t m) {
    if (ipg_elements_ == 0) return;
    const uint64_t flat = alloc("allreduce_flat_buffer", bm_ * ipg_elements_, rd_, m + 1);
    if (stage_ >= 1 && !off_opt_ && grads_in_partition_ == 0)
        grads_in_partition_ = alloc("grads_in_partition", bm_ * Tn_, Stream::compute, root_);
    release(flat, m + 1);
    ipg_elements_ = 0;
    // copy_grads_in_partition with optimizer offload, at the boundary:
    // set_norm_for_param_grad_in_gpu takes .double().norm(2) of each
    // param's slice in this rank's partition (8 B per element, transient).
    for (uint64_t slice : ipg_norm_slices_)
        if (slice > 0) release(alloc("grad_norm_double", 8 * slice, Stream::compute, m + 1), m + 1);
    ipg_norm_slices_.clear();
}

// Records, for a param entering the bucket at the boundary of an offloaded
// ZeRO-1/2 run, its slice in the last rank's partition (the flat group's
// last Tn elements, padding included, in backward order).
void Producer::zero12_note_partition_slice(uint64_t numel) {
    if (!off_opt_ || !boundary_) return;
    const uint64_t before = reduced_from_end_;
    reduced_from_end_ += numel;
    ipg_norm_slices_.push_back(before >= Tn_ ? 0 : std::min(numel, Tn_ - before));
}

void Producer::zero12_release_ipg_buffers(uint32_t m) {
    for (uint64_t id : ipg_buffers_) release(id, m);
    ipg_buffers_.clear();
}

// ZeRO-1 with contiguous_gradients: reduce_independent_p_g_buckets_and_remove_grads
// copies param.grad into the IPG bucket and points param.grad at the copy,
// so the full 16-bit gradient's storage is freed. An extra-large parameter
// (numel > reduce_bucket_size) is reduced from its own grad, which stays to
// the step (free_grad_in_param_list) unless it lies in this rank's partition.
void Producer::zero1_free_copied_gradient(uint32_t m, size_t k, uint64_t numel) {
    if (!in_.zero.contiguous_gradients || numel > bucket_) return;
    release(full_grads_[m][k], m + 1);
    full_grads_[m][k] = 0;
}

// ZeRO-1 without overlap_comm: at the accumulation boundary
// reduce_gradients walks the params through the IPG buckets after the
// backward in group order (for group in bit16_groups: for param in group),
// i.e. model order (with overlap_comm the hooks of the boundary backward do
// it, in backward order). The replayed rank is 0: its partition is the first
// Tn elements of the flat group, so the first reduced bucket holds its
// params and copy_grads_in_partition allocates grads_in_partition there,
// while every later param's full 16-bit gradient still waits for its bucket
// (stage_1_and_2.py reduce_gradients -> reduce_ipg_grads -> copy_grads_in_partition).
void Producer::zero1_reduce_gradients_at_boundary(uint32_t m) {
    reduced_from_end_ = 0;  // rank 0: counted from the start, no padding before it
    uint64_t offset = 0;    // the param's first element in the flat group
    for (uint32_t i = 0; i < static_cast<uint32_t>(mods_.size()); ++i)
        for (size_t k = 0; k < mods_[i].params.size(); ++k) {
            const uint64_t p = mods_[i].params[k];
            zero12_setup_buckets(m);
            if (ipg_elements_ + p > bucket_ && ipg_elements_ > 0) zero12_reduce_ipg_grads(m);
            ipg_elements_ += p;
            zero12_note_partition_slice(p);
            zero1_free_copied_gradient(i, k, p);
            if (p > bucket_) {
                zero12_reduce_ipg_grads(m);  // extra large param: reduced directly
                // copy_grads_in_partition points param.grad at its slice of
                // grads_in_partition when the param overlaps rank 0's partition.
                if (!off_opt_ && in_.zero.contiguous_gradients && offset < Tn_) {
                    release(full_grads_[i][k], i + 1);
                    full_grads_[i][k] = 0;
                }
            }
            offset += p;
        }
    zero12_reduce_ipg_grads(m);
    zero12_release_ipg_buffers(m);
}

// stage_1_and_2.py independent_gradient_partition_epilogue (no offload):
// all_grad_tensors keeps the param.grad views of this micro step's
// grads_in_partition, and _release_ipg_buffers sets grads_in_partition =
// None, so the next micro step's copy_grads_in_partition allocates a new one
// beside it; at the boundary all_grad_tensors = None drops the old storage.
// (With more than two micro steps the middle partitions are dropped here as
// their views are replaced; one earlier partition is kept.)
void Producer::zero2_keep_all_grad_tensors(bool boundary) {
    if (off_opt_) return;
    if (boundary) {
        release(all_grad_tensors_, root_);
        all_grad_tensors_ = 0;
        return;
    }
    if (all_grad_tensors_ == 0) all_grad_tensors_ = grads_in_partition_;
    else release(grads_in_partition_, root_);
    grads_in_partition_ = 0;
}

}  // namespace zeromem::sim::detail
