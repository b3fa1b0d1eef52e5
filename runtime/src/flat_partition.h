// What ZeRO stages 1 and 2 share: DeepSpeed's DeepSpeedZeroOptimizer layout
// (runtime/zero/stage_1_and_2.py). Every rank keeps the full flat 16-bit
// parameters (bit16_groups_flat, padded to a multiple of 2·N_d elements:
// nccl_start_alignment_factor = 2), the fp32 master partition
// (single_partition_of_fp32_groups) and Adam m and v of its partition
// (lazily at the first step). With offload_optimizer: cpu, m and v live in
// pageable host memory (DeepSpeedCPUAdam's zeros_like); the fp32 master,
// the fp32 gradient partition, the 16-bit staging partition and
// temp_grad_buffer_for_cpu_offload (largest parameter) in pinned host memory
// when offload_optimizer.pin_memory (pageable otherwise), plus
// temp_grad_buffer_for_gpu_offload (device) of the largest parameter.
#pragma once

#include "zeromem/runtime/zero.h"

#include <vector>

namespace zeromem::runtime {

class FlatPartitioned : public ZeroStage {
public:
    using ZeroStage::ZeroStage;
    void init() override;
    void fetch(int, bool) override {}
    void release(int) override {}
    const Tensor& weight(int p) override { return views_[static_cast<size_t>(p)]; }
    void step(int step) override;
    void release_all() override;
    int64_t partition_numel() const override { return part_; }

protected:
    /// Fills `flat` (accum dtype, part_ elements) with this rank's averaged
    /// gradient partition (not used under offload).
    virtual void gather_partition_grads(Tensor& flat) = 0;
    /// Frees the 16-bit partition gradients (grads_in_partition) once the
    /// step has its fp32 copy.
    virtual void release_partition_grads() = 0;
    /// Copies the averaged gradient range [lo, hi) of the flat parameter
    /// space (this rank's part of it) from `src` at element `soff` into the
    /// partition: grads_in_partition, or the pinned fp32 gradient partition
    /// under offload (through the device/host temp buffers). `add` when
    /// accumulating micro steps.
    void store_partition_range(const Tensor& src, int64_t soff, int64_t lo, int64_t hi, Tensor& partition_dst,
                               bool add);
    /// Averages src[off, off+n) over the ranks the way average_tensor does
    /// with use_multi_rank_bucket_allreduce (the default): allreduce_bucket
    /// flattens the slices into a new tensor (b_m · n bytes), all-reduces and
    /// divides it, and the averaged values are copied back into src
    /// (stage_1_and_2.py allreduce_and_scatter ->
    /// allreduce_and_copy_with_multiple_ranks -> allreduce_bucket,
    /// buf.copy_(synced)); the flat copy is freed before the caller copies
    /// its slices into the partition. Nothing to do with one rank.
    void average_in_place(Tensor& src, int64_t off, int64_t n);
    /// Under offload, copy_grads_in_partition -> set_norm_for_param_grad_in_gpu
    /// takes `.double().norm(2)` of each parameter's slice in this rank's
    /// partition: a transient of 8 B per element of the slice.
    void offload_norm_transient(int64_t a, int64_t b);
    /// stage_1_and_2.py step before the flatten, the gradients alive: the
    /// overflow check (check_overflow -> has_overflow_partitioned_grads_serial
    /// -> _has_inf_or_nan; bf16.check_grad_overflow and fp16 default true)
    /// and the norm (scaled_global_norm -> get_grad_norm_direct, `.double()`)
    /// of each gradient slice in this rank's partition, one at a time.
    void overflow_and_norm_transients();
    bool offload() const { return c_.zero.offload_optimizer != OffloadDevice::none; }
    int64_t lo() const { return static_cast<int64_t>(be_.rank()) * part_; }
    int64_t hi() const { return lo() + part_; }

    std::vector<int64_t> offs_;
    std::vector<Tensor> views_;
    Tensor flat_, master_, m_, v_;
    Tensor grad32_host_, staging16_, cpu_tmp_, gpu_tmp_;  // offload: pinned fp32 grads, 16-bit staging, temp grad buffer
    int64_t total_ = 0, padded_ = 0, part_ = 0, largest_ = 0;
};

}  // namespace zeromem::runtime
