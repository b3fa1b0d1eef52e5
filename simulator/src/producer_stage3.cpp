// ZeRO stage 3 (producer.h): DeepSpeed v0.19.6 runtime/zero/stage3.py
// DeepSpeedZeroOptimizer_Stage3 and partition_parameters.py: the partitions
// at load and the IPG bucket's reduce-scatter; the parameter fetches are
// producer_param_coordinator.cpp, the step producer_step.cpp's stage 3 branch.
#include "producer.h"

#include <algorithm>
#include <utility>

namespace zeromem::sim::detail {

// Stage 3 (partition_parameters.py zero.Init, stage3.py __init__): persistent
// params stay whole; the rest are partitioned (ceil(numel/N_d) each) and
// defragmented into lp_param_buffer through host memory; then the
// grad_partitions_flat_buffer, the IPG bucket, the fp32 partitions per
// sub-group and the transient fp32 gradient_buffer.
// engine.py _configure_distributed_model without zero.Init: module.to(device)
// puts every parameter, whole, on the GPU. Returns the tensor ids per module
// and parameter.
std::vector<std::vector<uint64_t>> Producer::module_to_device() {
    std::vector<std::vector<uint64_t>> ids(mods_.size());
    for (uint32_t i = 0; i < mods_.size(); ++i)
        for (uint64_t p : mods_[i].params) ids[i].push_back(alloc("parameter", bm_ * p, Stream::compute, i + 1));
    return ids;
}

void Producer::init_zero3_partitions() {
    const auto& z = in_.zero;
    unit_.resize(mods_.size());
    unit_numel_.assign(mods_.size(), 0);
    unit_padded_.assign(mods_.size(), 0);
    unit_np_params_.assign(mods_.size(), {});
    unit_state_.assign(mods_.size(), 0);
    unit_handle_.assign(mods_.size(), 0);
    gathered_.assign(mods_.size(), {});
    uint64_t persistent_total = 0, parts = 0, sub_part = 0;
    std::vector<std::pair<uint64_t, uint32_t>> partitions;
    // Without zero.Init every rank holds the whole 16-bit module on its GPU
    // first (engine.py _configure_distributed_model, module.to(device)); the
    // estimator's load term "whole 16-bit module on every GPU before
    // partitioning". Each parameter is then partitioned in place
    // (parameter_offload.py _convert_to_zero_parameters, partition_parameters.py
    // _partition_param: the partition is made, then param.data is freed),
    // except the persistent ones, which stay whole.
    const bool no_init = !z.zero_init;
    const std::vector<std::vector<uint64_t>> whole = no_init ? module_to_device() : std::vector<std::vector<uint64_t>>{};
    for (uint32_t i = 0; i < mods_.size(); ++i) {
        unit_[i] = mods_[i].shares_params_with >= 0 ? static_cast<uint32_t>(mods_[i].shares_params_with) : i;
        for (size_t k = 0; k < mods_[i].params.size(); ++k) {
            const uint64_t p = mods_[i].params[k];
            const uint64_t part = ceil_div(p, N_);
            parts += part;
            // parameter_offload.mark_persistent_parameters
            const bool persistent = static_cast<int64_t>(p) <= z.stage3_param_persistence_threshold &&
                                    static_cast<int64_t>(persistent_total + p) <= z.stage3_model_persistence_threshold;
            if (persistent) {
                persistent_total += p;
                persistent_padded_ += ceil_div(p, N_) * N_;
                if (!no_init) alloc("persistent_parameter", bm_ * p, Stream::compute, i + 1);
            } else {
                unit_numel_[i] += p;
                unit_padded_[i] += part * N_;
                unit_np_params_[i].push_back(p);
            }
            if (!off_par_) partitions.emplace_back(alloc("param_partition", bm_ * part, Stream::compute, i + 1), i + 1);
            if (no_init && !persistent) release(whole[i][k], i + 1);
            // stage3.py _create_fp16_sub_groups: a sub-group closes once its
            // partition numel reaches sub_group_size elements.
            sub_part += part;
            if (sub_part >= static_cast<uint64_t>(z.sub_group_size)) {
                sub_groups_.push_back(sub_part);
                sub_part = 0;
            }
        }
    }
    if (sub_part > 0) sub_groups_.push_back(sub_part);
    Tn_ = parts;
    if (!off_par_) {
        // stage3.py defragment: partitions copied to a host buffer and freed,
        // gc + empty_cache, then the flat buffer is copied back to the GPU.
        for (const auto& [id, m] : partitions) release(id, m);
        log_.events.push_back({Action::empty_cache, Stream::compute, phase_, root_, 0, 0, "empty_cache"});
        alloc("lp_param_buffer", bm_ * parts, Stream::compute, root_);
    }
    zero3_setup_for_real_optimizer();
}

// stage3.py _setup_for_real_optimizer, in its order: _create_fp32_partitions
// (one fp32 partition per sub-group), initialize_optimizer_states (a zeroed
// fp32 gradient_buffer of the largest sub-group, a local freed when the
// function returns after group.grad = None), then the IPG bucket
// (contiguous_gradients) and grad_partitions_flat_buffer. The
// gradient_buffer is therefore never alive beside the bucket or the flat
// gradient buffer (the estimator's zero3_init_gradient_buffer moment).
void Producer::zero3_setup_for_real_optimizer() {
    if (!off_opt_) {
        uint64_t largest = 0;
        for (uint64_t sg : sub_groups_) {
            alloc("fp32_partition", 4 * sg, Stream::compute, root_);
            largest = std::max(largest, sg);
        }
        release(alloc("fp32_gradient_buffer", 4 * largest, Stream::compute, root_), root_);
    }
    if (in_.zero.contiguous_gradients) ipg_bucket_z3_ = alloc("ipg_bucket", bc_ * bucket_, Stream::compute, root_);
    if (!off_opt_) alloc("grad_partitions_flat_buffer", ba_ * Tn_, Stream::compute, root_);
}

// stage3.py reduce_independent_p_g_buckets_and_remove_grads: flush when the
// bucket would overflow, then copy the grad into the contiguous bucket.
void Producer::zero3_reduce_independent_p_g_buckets(uint32_t m, uint64_t numel) {
    const uint64_t padded = ceil_div(numel, N_) * N_;
    if (ipg_elements_ + padded > bucket_ && ipg_elements_ > 0) zero3_reduce_and_partition_ipg_grads(m);
    ipg_elements_ += padded;
}

// stage3.py __reduce_and_partition_ipg_grads -> reduce_scatter_coalesced
// (comm/coalesced_collectives.py): a padded, interleaved torch.cat of the
// bucket on the reduce stream; this rank's slice goes to
// grad_partitions_flat_buffer (partition_grads).
void Producer::zero3_reduce_and_partition_ipg_grads(uint32_t m) {
    if (ipg_elements_ == 0) return;
    release(alloc("reduce_scatter_concat_buffer", bc_ * ipg_elements_, rd_, m + 1), m + 1);
    ipg_elements_ = 0;
}

}  // namespace zeromem::sim::detail
