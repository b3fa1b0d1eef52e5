// What ZeRO stages 1 and 2 share: DeepSpeed's DeepSpeedZeroOptimizer layout
// (runtime/zero/stage_1_and_2.py). Every rank keeps the full flat 16-bit
// parameters (bit16_groups_flat, padded to a multiple of 2·N_d elements:
// nccl_start_alignment_factor = 2), the fp32 master partition
// (single_partition_of_fp32_groups) and Adam m and v of its partition
// (lazily at the first step). With offload_optimizer: cpu the master, m and
// v live in host memory, the fp32 gradient partition and the 16-bit staging
// partition in pinned host memory, plus temp_grad_buffer_for_cpu_offload
// (pinned) and temp_grad_buffer_for_gpu_offload (device) of the largest
// parameter.
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
    /// Copies the averaged gradient range [lo, hi) of the flat parameter
    /// space (this rank's part of it) from `src` at element `soff` into the
    /// partition: grads_in_partition, or the pinned fp32 gradient partition
    /// under offload (through the device/host temp buffers). `add` when
    /// accumulating micro steps.
    void store_partition_range(const Tensor& src, int64_t soff, int64_t lo, int64_t hi, Tensor& partition_dst,
                               bool add);
    bool offload() const { return c_.zero.offload_optimizer != OffloadDevice::none; }
    int64_t lo() const { return static_cast<int64_t>(be_.rank()) * part_; }
    int64_t hi() const { return lo() + part_; }

    std::vector<int64_t> offs_;
    std::vector<Tensor> views_;
    Tensor flat_, master_, m_, v_;
    Tensor grad32_host_, staging16_, cpu_tmp_;  // offload: pinned fp32 grads, 16-bit staging, temp grad buffer
    int64_t total_ = 0, padded_ = 0, part_ = 0, largest_ = 0;
};

}  // namespace zeromem::runtime
