// The host event producer: what DeepSpeed v0.19.6 (and transformers'
// from_pretrained, PyTorch's pin_memory) allocate in one rank's host RAM and
// write to NVMe, step by step. Each function is named after the code it
// replays; each allocation carries the name of the estimator's host term
// (estimator/src/terms.cpp host_terms) so a disagreement points at one term.
// Facts: DeepSpeed v0.19.6 (commit edaa722) runtime/zero/stage_1_and_2.py,
// stage3.py, partition_parameters.py, ops/adam/cpu_adam.py, swap_tensor/*.py;
// PyTorch aten/src/ATen/core/CachingHostAllocator.h (pinned rounding and
// caching); transformers modeling_utils.py from_pretrained (the load).
#include "zeromem/host_allocator.h"
#include "zeromem/simulator.h"

#include "zeromem/optimizer_wrapper.h"
#include "zeromem/stack_facts.h"
#include "zeromem/types.h"

#include <algorithm>

namespace zeromem::sim {

namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// DeepNVMe I/O alignment: AIO_ALIGNED_BYTES (1024) x intra_op_parallelism
// (default 1) bytes, in elements (swap_tensor/partitioned_param_swapper.py
// _io_aligned_numel, optimizer_utils.py OptimizerSwapper).
uint64_t aio_aligned(uint64_t numel, uint64_t elem_bytes) {
    const uint64_t unit = 1024 / elem_bytes;
    return ceil_div(numel, unit) * unit;
}

class HostProducer {
public:
    HostProducer(const EstimateInput& in, int64_t steps);
    HostEventLog run();

private:
    // --- load ---
    void process_baseline();
    void from_pretrained_host_copy();
    void zero_init_partition_params(bool build_modules_on_host);
    void engine_flatten_bit16_on_cpu();
    // --- deepspeed.initialize: ZeRO-1/2 (stage_1_and_2.py) ---
    void zero12_init_fp32_partition_and_bit16_staging();
    void zero12_temp_grad_buffer_for_cpu_offload();
    void zero12_initialize_optimizer_states();
    // --- deepspeed.initialize: ZeRO-3 (stage3.py) ---
    void zero3_create_fp16_partitions_with_defragmentation();
    void zero3_create_fp32_partitions();
    void zero3_initialize_optimizer_states();
    void zero3_grad_partitions_flat_buffer();
    void optimizer_swapper_buffers();
    // --- training ---
    void zero12_async_accumulate_grad_in_cpu_via_gpu();
    void optimizer_swap_out_gradients();
    void cpu_adam_step_states();
    void cpu_adam_states_of(size_t sub_group, uint64_t numel);
    void cpu_adam_tile_buffers();

    uint64_t alloc(const char* term, uint64_t bytes, HostKind kind, uint32_t module = 0);
    void release(uint64_t id);
    void nvme_write(const char* term, uint64_t file, uint64_t bytes);
    void phase(Phase p);
    // One swap file per (kind, sub-group or parameter): a rewrite replaces it.
    enum FileKind : uint64_t { kParamFiles = 1, kMasterFiles, kGradientFiles, kStateFiles };
    static uint64_t file_id(FileKind k, uint64_t i) { return (k << 40) + i; }
    // A torch CPU tensor made, then pinned: Tensor.pin_memory() copies it into
    // a new pinned block; the source is dropped when the caller rebinds the
    // name. Returns the pinned copy's id.
    uint64_t zeros_then_pin(const char* term, uint64_t bytes, uint32_t module = 0,
                            const char* source = "pageable source of a pinned copy");
    // A CPU tensor pinned when `pinned` (zeros_then_pin), else left pageable.
    uint64_t pinned_or_pageable(const char* term, uint64_t bytes, bool pinned, uint32_t module = 0,
                                const char* source = "pageable source of a pinned copy");

    const EstimateInput& in_;
    int64_t steps_;
    uint64_t cpu_state_tensors_ = 2;  // fp32 optimizer state tensors per element on the CPU
    HostEventLog log_;
    std::vector<HostEvent> allocs_;  // tensor id - 1 -> its alloc event
    std::vector<SimModule> mods_;
    Phase phase_ = Phase::load;
    int stage_ = 0;
    uint64_t N_ = 1, bm_ = 2, ba_ = 2, T_ = 0, Tn_ = 0, largest_param_ = 0, param_files_ = 0;
    bool off_opt_cpu_ = false, off_opt_nvme_ = false, off_par_cpu_ = false, off_par_nvme_ = false;
    bool pin_opt_ = true, pin_par_ = true, lazy_states_ = true;
    StackFacts facts_;  // the stack's version behaviours (stack_facts.h), as the estimator reads them
    std::vector<uint64_t> sub_groups_;  // ZeRO-3 sub-group partition numels
    std::vector<uint64_t> param_parts_;  // stage-3 per-parameter partition ids (zero.Init)
    uint64_t bit16_staging_source_ = 0;
};

HostProducer::HostProducer(const EstimateInput& in, int64_t steps)
    : in_(in), steps_(steps), facts_(stack_facts(in.stack)) {
    const auto& z = in.zero;
    // The CPU optimizer's fp32 state tensors per element: DeepSpeedCPUAdam's
    // m and v (2), DeepSpeedCPUAdagrad's or DeepSpeedCPULion's one, SGD's
    // momentum; accelerate's substitute (with_accelerate_cpu_adam) included.
    bool swapped = false;
    cpu_state_tensors_ = static_cast<uint64_t>(optimizer_state_bytes(with_accelerate_cpu_adam(in, swapped).train.optimizer)) / 4;
    stage_ = z.stage;
    N_ = static_cast<uint64_t>(std::max<int64_t>(1, in.cluster.data_parallel()));
    bm_ = static_cast<uint64_t>(dtype_bytes(in.train.dtype));
    ba_ = static_cast<uint64_t>(dtype_bytes(in.train.grad_accum_dtype.value_or(in.train.dtype)));
    off_opt_cpu_ = z.offload_optimizer == OffloadDevice::cpu;
    off_opt_nvme_ = z.offload_optimizer == OffloadDevice::nvme;
    off_par_cpu_ = z.offload_param == OffloadDevice::cpu;
    off_par_nvme_ = z.offload_param == OffloadDevice::nvme;
    pin_opt_ = z.offload_optimizer_pin_memory;
    lazy_states_ = facts_.creates_cpu_adam_states_at_first_step;
    pin_par_ = z.offload_param_pin_memory;
    mods_ = modules_of(in);
    log_.modules.push_back("model");
    for (const auto& m : mods_) log_.modules.push_back(m.name);
    for (const auto& m : mods_)
        for (uint64_t p : m.params) {
            T_ += p;
            largest_param_ = std::max(largest_param_, p);
        }
    log_.ranks_per_node = static_cast<uint64_t>(std::max<int64_t>(1, in.cluster.gpus_per_node()));
    if (stage_ == 3) {
        // stage3.py _create_fp16_sub_groups: a sub-group closes once its
        // partition numel reaches sub_group_size (as producer_stage3.cpp).
        uint64_t sub = 0;
        for (const auto& m : mods_)
            for (uint64_t p : m.params) {
                const uint64_t part = ceil_div(p, N_);
                Tn_ += part;
                sub += part;
                if (sub >= static_cast<uint64_t>(std::max<int64_t>(1, z.sub_group_size))) {
                    sub_groups_.push_back(sub);
                    sub = 0;
                }
            }
        if (sub > 0) sub_groups_.push_back(sub);
    } else {
        // stage_1_and_2.py: the flat group padded to a multiple of 2 x N_d.
        Tn_ = ceil_div(T_, 2 * N_) * 2;
    }
}

uint64_t HostProducer::alloc(const char* term, uint64_t bytes, HostKind kind, uint32_t module) {
    const uint64_t id = allocs_.size() + 1;
    allocs_.push_back({HostAction::alloc, phase_, module, id, bytes, kind, term});
    log_.events.push_back(allocs_.back());
    return id;
}

void HostProducer::release(uint64_t id) {
    const HostEvent a = allocs_.at(id - 1);  // copy: push_back may move the log
    log_.events.push_back({HostAction::free, phase_, a.module, id, a.bytes, a.kind, a.term});
}

void HostProducer::nvme_write(const char* term, uint64_t file, uint64_t bytes) {
    log_.events.push_back({HostAction::nvme_write, phase_, 0, file, bytes, HostKind::pageable, term});
}

void HostProducer::phase(Phase p) {
    phase_ = p;
    log_.events.push_back({HostAction::phase_begin, p, 0, 0, 0, HostKind::pageable, to_string(p)});
}

uint64_t HostProducer::zeros_then_pin(const char* term, uint64_t bytes, uint32_t module, const char* source) {
    const uint64_t src = alloc(source, bytes, HostKind::pageable, module);
    const uint64_t pinned = alloc(term, bytes, HostKind::pinned, module);
    release(src);
    return pinned;
}

uint64_t HostProducer::pinned_or_pageable(const char* term, uint64_t bytes, bool pinned, uint32_t module,
                                          const char* source) {
    return pinned ? zeros_then_pin(term, bytes, module, source) : alloc(term, bytes, HostKind::pageable, module);
}

// ---------------------------------------------------------------------------
// Load
// ---------------------------------------------------------------------------

// The process baseline: PyTorch, CUDA and NCCL libraries and the host side
// of the CUDA context, the estimator's named constant
// ResidualSettings::host_process_overhead (--host-overhead, per rank).
void HostProducer::process_baseline() {
    alloc("host_process_overhead", in_.residual.host_process_overhead, HostKind::pageable);
}

// transformers modeling_utils.py from_pretrained without zero.Init: every
// rank builds the whole model on the CPU in the load dtype (fp32 unless
// torch_dtype is set, before transformers 5), then engine.py
// _configure_distributed_model moves it to the GPU one parameter at a time
// (nn.Module._apply). device_map: each parameter goes straight to the
// GPU (one module on the host at a time); single_file before transformers
// 4.50: the whole 16-bit state dict is loaded first (load_state_dict).
void HostProducer::from_pretrained_host_copy() {
    const uint64_t lb = static_cast<uint64_t>(dtype_bytes(in_.residual.load_dtype));
    const LoadPath path = in_.residual.load_path.value_or(LoadPath::host_copy);
    uint64_t state_dict = 0;
    if (path == LoadPath::single_file && facts_.single_file_loads_whole_state_dict)
        state_dict = alloc("model load", 2 * T_, HostKind::pageable);
    std::vector<uint64_t> ids;
    for (uint32_t i = 0; i < mods_.size(); ++i) {
        uint64_t numel = 0;
        for (uint64_t p : mods_[i].params) numel += p;
        if (mods_[i].shares_params_with >= 0 || numel == 0) continue;
        const uint64_t id = alloc("model load", lb * numel, HostKind::pageable, i + 1);
        if (path == LoadPath::device_map) release(id);
        else ids.push_back(id);
    }
    if (state_dict) release(state_dict);
    for (uint64_t id : ids) release(id);
}

// partition_parameters.py Init: each module is built (its parameters
// materialised, at most one module in the load dtype on the host: the
// estimator's zero.Init load term) and every parameter partitioned at once
// by _partition_param: with remote_device cpu the partition is
// torch.empty(ceil(numel/N_d)) on the CPU, replaced by its pinned copy when
// pin_memory (one PowerOf2Ceil block per parameter, CachingHostAllocator.h);
// with remote_device nvme it is written to a swap file through the
// parameter swapper's locked pool. Without zero.Init the module was loaded
// on the host and moved to the GPU first (build_on_host false).
void HostProducer::zero_init_partition_params(bool build_on_host) {
    const uint64_t lb = static_cast<uint64_t>(dtype_bytes(in_.residual.load_dtype));
    for (uint32_t i = 0; i < mods_.size(); ++i) {
        if (mods_[i].shares_params_with >= 0) continue;
        uint64_t numel = 0;
        for (uint64_t p : mods_[i].params) numel += p;
        if (numel == 0) continue;
        const uint64_t built = build_on_host ? alloc("model load", lb * numel, HostKind::pageable, i + 1) : 0;
        for (uint64_t p : mods_[i].params) {
            const uint64_t part = ceil_div(p, N_);
            if (off_par_cpu_) {
                param_parts_.push_back(alloc("zero.Init's per-parameter pinned partitions left in PyTorch's host cache",
                                             bm_ * part, pin_par_ ? HostKind::pinned : HostKind::pageable, i + 1));
            } else if (off_par_nvme_) {
                nvme_write("parameter NVMe swap files", file_id(kParamFiles, param_files_++), aio_aligned(part, bm_) * bm_);
            }
        }
        if (built) release(built);
    }
}

// stage_1_and_2.py __init__ before DeepSpeed 0.18.7 (#7828), or when the
// flat copy does not fit the GPU (as producer_stage12.cpp decides): every
// 16-bit parameter copied to the CPU (param.cpu_data) and flattened there
// (flatten_dense_tensors_aligned use_cpu_data), then both freed.
void HostProducer::engine_flatten_bit16_on_cpu() {
    const uint64_t padded = ceil_div(T_, 2 * N_) * 2 * N_;
    const auto cap = in_.cluster.gpu_memory;
    const bool gpu_fits = !cap || bm_ * (T_ + padded) <= *cap;
    if (facts_.flattens_bit16_on_gpu_when_it_fits && gpu_fits) return;
    const char* term = "16-bit parameters copied to the CPU and flattened there";
    const uint64_t copies = alloc(term, bm_ * T_, HostKind::pageable);
    const uint64_t flat = alloc(term, bm_ * padded, HostKind::pageable);
    release(copies);
    release(flat);
}

// ---------------------------------------------------------------------------
// deepspeed.initialize, ZeRO-1/2 with offload_optimizer cpu
// ---------------------------------------------------------------------------

// stage_1_and_2.py __init__: weights_partition = bit16 partition
// .clone().to(cpu, fp32) (pageable), then pin_memory (DeepSpeed >= 0.14.1;
// only with pin_memory from 0.18.3); temp_buffer_bit16 = torch.full(...) on
// the CPU and its pinned copy param_buffer_of_bit16_for_cpu_offload_groups
// (DeepSpeed >= 0.17.0). The name temp_buffer_bit16 keeps the pageable
// source alive until __init__ returns (a Python local).
void HostProducer::zero12_init_fp32_partition_and_bit16_staging() {
    const bool master_pinned = facts_.pins_master_weights_only_with_pin_memory ? pin_opt_ : facts_.pins_master_weights;
    const char* master = "fp32 master (single_partition_of_fp32_groups)";
    pinned_or_pageable(master, 4 * Tn_, master_pinned, 0, "fp32 master's pageable source beside its pinned copy");
    if (!facts_.stages_bit16_params_for_offload) return;
    const char* staging = "16-bit parameter staging (param_buffer_of_bit16_for_cpu_offload_groups)";
    if (pin_opt_) {
        bit16_staging_source_ = alloc("pageable source of a pinned copy", bm_ * Tn_, HostKind::pageable);
        alloc(staging, bm_ * Tn_, HostKind::pinned);
    } else {
        alloc(staging, bm_ * Tn_, HostKind::pageable);
    }
}

// stage_1_and_2.py __init__: temp_grad_buffer_for_cpu_offload =
// torch.zeros(largest_param_numel) on the CPU, pinned when pin_memory.
void HostProducer::zero12_temp_grad_buffer_for_cpu_offload() {
    const char* term = "temp_grad_buffer_for_cpu_offload";
    pinned_or_pageable(term, bm_ * largest_param_, pin_opt_);
}

// stage_1_and_2.py initialize_optimizer_states: single_grad_partition =
// torch.zeros(partition_size, fp32) on the CPU, .grad = its pinned copy when
// pin_memory (always before DeepSpeed 0.10.1); the pageable zeros stay alive
// until the function returns (a Python local). Then __init__ returns and
// temp_buffer_bit16 goes too.
void HostProducer::zero12_initialize_optimizer_states() {
    const bool pinned = facts_.pins_grad_partition_only_with_pin_memory ? pin_opt_ : true;
    const char* term = "fp32 gradient partition";
    pinned_or_pageable(term, 4 * Tn_, pinned);
    if (bit16_staging_source_) release(bit16_staging_source_);
    bit16_staging_source_ = 0;
}

// ---------------------------------------------------------------------------
// deepspeed.initialize, ZeRO-3
// ---------------------------------------------------------------------------

// stage3.py _create_fp16_partitions_with_defragmentation. Without
// offload_param: zero/utils.py defragment copies the partitions into a
// pageable CPU buffer and back into one GPU buffer (b_m · Tn on the host
// meanwhile). With offload_param: _create_param_groups_fp16_flat_cpu_memory
// pins one flat buffer per group, get_accelerator().pin_memory(torch.empty)
// whatever pin_memory says (nvme: at most max_in_cpu elements), and
// _move_to_flat_buffer rebinds each ds_tensor into it: zero.Init's
// per-parameter blocks go back to PyTorch's host cache, still pinned.
void HostProducer::zero3_create_fp16_partitions_with_defragmentation() {
    if (!off_par_cpu_ && !off_par_nvme_) {
        release(alloc("defragment staging of the 16-bit partitions", bm_ * Tn_, HostKind::pageable));
        return;
    }
    if (off_par_cpu_) {
        alloc("16-bit parameter flat buffer", bm_ * Tn_, HostKind::pinned);
        for (uint64_t id : param_parts_) release(id);
        param_parts_.clear();
        return;
    }
    const uint64_t in_cpu = std::min(Tn_, static_cast<uint64_t>(in_.zero.offload_param_max_in_cpu));
    if (in_cpu > 0) alloc("parameters kept in CPU memory (max_in_cpu)", bm_ * in_cpu, HostKind::pinned);
}

// stage3.py _create_fp32_partitions with offload_optimizer cpu: per
// sub-group .to(cpu, fp32) then .clone(): the converted copy is dropped,
// the clone is the pageable fp32 master. With nvme the fp32 partitions are
// written to swap files through the swap buffers (initialize_parameters).
void HostProducer::zero3_create_fp32_partitions() {
    for (size_t i = 0; i < sub_groups_.size(); ++i) {
        const uint64_t n = sub_groups_[i];
        if (off_opt_nvme_) {
            nvme_write("optimizer NVMe swap files (fp32 master)", file_id(kMasterFiles, i), aio_aligned(n, 4) * 4);
            continue;
        }
        const uint64_t converted = alloc("fp32 master conversion + clone of one sub-group", 4 * n, HostKind::pageable);
        alloc("fp32 master partitions", 4 * n, HostKind::pageable);
        release(converted);
    }
}

// swap_tensor/partitioned_optimizer_swapper.py (OptimizerSwapper.__init__,
// utils.py SwapBufferManager): buffer_count page-locked buffers of the
// largest sub-group, aligned, fp32, from aio_handle.new_cpu_locked_tensor
// (exact size, outside PyTorch's cache).
void HostProducer::optimizer_swapper_buffers() {
    const uint64_t largest = sub_groups_.empty() ? 0 : *std::max_element(sub_groups_.begin(), sub_groups_.end());
    const uint64_t each = aio_aligned(largest, 4) * 4;
    for (int64_t i = 0; i < in_.zero.offload_optimizer_buffer_count; ++i)
        alloc("optimizer NVMe swap buffers", each, HostKind::locked);
}

// stage3.py initialize_optimizer_states: gradient_buffer =
// torch.zeros(largest sub-group, fp32) on the CPU for the whole function;
// with offload_optimizer cpu each sub-group gets torch.zeros(n_i) and, when
// pin_memory, its pinned copy (Σ_i PowerOf2Ceil(4 · n_i)). With nvme the
// gradients are views of gradient_buffer.
void HostProducer::zero3_initialize_optimizer_states() {
    const uint64_t largest = sub_groups_.empty() ? 0 : *std::max_element(sub_groups_.begin(), sub_groups_.end());
    const uint64_t buffer = alloc("init gradient_buffer of the largest sub-group", 4 * largest, HostKind::pageable);
    for (size_t i = 0; i < sub_groups_.size(); ++i) {
        const uint64_t n = sub_groups_[i];
        if (off_opt_cpu_) {
            const char* term = "fp32 gradients, one pinned buffer per sub-group";
            pinned_or_pageable(term, 4 * n, pin_opt_);
        }
        // Before DeepSpeed 0.13.2 (#5104) the loop also ran one
        // _optimizer_step per sub-group: CPU Adam's states appear here.
        if (!lazy_states_) cpu_adam_states_of(i, n);
    }
    release(buffer);
}

// stage3.py _setup_for_real_optimizer: grad_partitions_flat_buffer =
// torch.zeros(Tn, gradient_accumulation_dtype) on the CPU (offload_optimizer
// cpu or nvme: self.device is cpu), pinned when offload_optimizer.pin_memory.
void HostProducer::zero3_grad_partitions_flat_buffer() {
    const char* term = "grad_partitions_flat_buffer";
    pinned_or_pageable(term, ba_ * Tn_, pin_opt_);
}

// ---------------------------------------------------------------------------
// Training
// ---------------------------------------------------------------------------

// stage_1_and_2.py async_accumulate_grad_in_cpu_via_gpu (gradient
// accumulation steps > 1, first micro step): buffer_to_accumulate_to_in_cpu,
// torch.zeros(param.numel()) per parameter in this rank's partition, pinned
// when pin_memory. Rank 0's partition: the parameters that start within
// the first Tn elements of the flat group, in module order.
void HostProducer::zero12_async_accumulate_grad_in_cpu_via_gpu() {
    uint64_t offset = 0;
    for (uint32_t i = 0; i < mods_.size(); ++i)
        for (uint64_t p : mods_[i].params) {
            if (offset < Tn_) {
                const char* term = "accumulation buffers, one per parameter (buffer_to_accumulate_to_in_cpu)";
                pinned_or_pageable(term, bm_ * p, pin_opt_, i + 1);
            }
            offset += p;
        }
}

// stage3.py with offload_optimizer nvme: the fp32 gradients of each
// sub-group are swapped out at the accumulation boundary
// (partitioned_optimizer_swapper.py swap_out_gradients).
void HostProducer::optimizer_swap_out_gradients() {
    for (size_t i = 0; i < sub_groups_.size(); ++i)
        nvme_write("optimizer NVMe swap files (fp32 gradients)", file_id(kGradientFiles, i), aio_aligned(sub_groups_[i], 4) * 4);
}

// ops/adam/cpu_adam.py DeepSpeedCPUAdam.step / step_subgroup: exp_avg and
// exp_avg_sq = torch.zeros_like(p) (pageable fp32) at the first step
// (DeepSpeed >= 0.13.2; before, initialize_optimizer_states stepped once at
// init), per sub-group at stage 3; with nvme they are written to swap files.
void HostProducer::cpu_adam_step_states() {
    const std::vector<uint64_t> groups = stage_ == 3 ? sub_groups_ : std::vector<uint64_t>{Tn_};
    for (size_t i = 0; i < groups.size(); ++i) cpu_adam_states_of(i, groups[i]);
}

void HostProducer::cpu_adam_states_of(size_t i, uint64_t n) {
    if (off_opt_nvme_) {
        nvme_write("optimizer NVMe swap files (optimizer states)", file_id(kStateFiles, i),
                   aio_aligned(n, 4) * 4 * cpu_state_tensors_);
        return;
    }
    const char* term = cpu_state_tensors_ == 2 ? "CPU Adam m and v" : "CPU optimizer states";
    for (uint64_t k = 0; k < cpu_state_tensors_; ++k) alloc(term, 4 * n, HostKind::pageable);
}

// csrc/includes/cpu_adam.h before DeepSpeed 0.14.3 (#5409 removed
// _doubled_buffer): cudaMallocHost(2 x TILE x 4 B), TILE = 128 Mi elements:
// 1 GiB page-locked per optimizer instance and rank, exact, outside
// PyTorch's cache. Made when DeepSpeedCPUAdam is built.
void HostProducer::cpu_adam_tile_buffers() {
    alloc("DeepSpeedCPUAdam tile buffers", 2ull * 134217728ull * 4ull, HostKind::locked);
}

HostEventLog HostProducer::run() {
    const bool z3 = stage_ == 3, z12 = stage_ == 1 || stage_ == 2;
    const bool off_opt = off_opt_cpu_ || off_opt_nvme_;
    const bool lazy_states = lazy_states_;
    phase(Phase::load);
    process_baseline();
    // partitioned_param_swapper.py AsyncPartitionedParameterSwapper.__init__:
    // buffer_count aligned buffers of buffer_size elements, page-locked
    // (new_cpu_locked_tensor), made when zero.Init starts: before the model
    // is built under zero.Init, inside deepspeed.initialize (after the
    // host copy went to the GPU) without it.
    auto param_swap_pool = [&] {
        if (!(z3 && off_par_nvme_)) return;
        alloc("parameter NVMe swap pool",
              static_cast<uint64_t>(in_.zero.offload_param_buffer_count) *
                  aio_aligned(static_cast<uint64_t>(in_.zero.offload_param_buffer_size), bm_) * bm_,
              HostKind::locked);
    };
    if (z3 && in_.zero.zero_init) {
        param_swap_pool();
        zero_init_partition_params(true);
    } else {
        from_pretrained_host_copy();
        param_swap_pool();
        // parameter_offload.py _convert_to_zero_parameters: Init(module=...)
        // partitions the GPU-resident module the same way.
        if (z3) zero_init_partition_params(false);
    }
    // engine.py _configure_optimizer builds DeepSpeedCPUAdam before the ZeRO
    // optimizer (offload_optimizer cpu, as the estimator counts it).
    if (off_opt_cpu_ && facts_.cpu_adam_pins_tile_buffer) cpu_adam_tile_buffers();
    if (z12) {
        engine_flatten_bit16_on_cpu();
        if (off_opt_cpu_) {
            zero12_init_fp32_partition_and_bit16_staging();
            zero12_temp_grad_buffer_for_cpu_offload();
            zero12_initialize_optimizer_states();
        }
    }
    if (z3) {
        zero3_create_fp16_partitions_with_defragmentation();
        if (off_opt_nvme_) optimizer_swapper_buffers();
        if (off_opt) {
            zero3_create_fp32_partitions();
            zero3_initialize_optimizer_states();
            zero3_grad_partitions_flat_buffer();
        }
    }
    if (z12 && off_opt && !lazy_states) cpu_adam_step_states();  // stage 3: inside initialize_optimizer_states
    for (int64_t s = 0; s < steps_; ++s) {
        phase(s == 0 ? Phase::forward : Phase::steady_forward);
        phase(s == 0 ? Phase::backward : Phase::steady_backward);
        if (s == 0 && z12 && off_opt_cpu_ && in_.train.grad_accum > 1) zero12_async_accumulate_grad_in_cpu_via_gpu();
        if (z3 && off_opt_nvme_) optimizer_swap_out_gradients();
        phase(Phase::optimizer_step);
        if (s == 0 && off_opt && lazy_states) cpu_adam_step_states();
    }
    return std::move(log_);
}

}  // namespace

HostEventLog produce_host_events(const EstimateInput& in, int64_t steps) {
    if (!in.model.arch)
        throw InputError("simulate: needs the model's architecture: give --model or --hf-config (--params alone has no module tree)");
    return HostProducer(in, steps).run();
}

}  // namespace zeromem::sim
