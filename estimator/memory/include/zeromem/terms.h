// The named memory terms of the `full` convention: one small function per
// buffer that DeepSpeed v0.19.6 (or PyTorch) allocates, each named after that
// buffer and citing the file and function that allocates it. The estimator's
// phases (estimate.cpp) are sums and maxima of these terms; a simulator that
// replays DeepSpeed's allocations can name its events alike, so a
// disagreement points at one term.
//
// Sources: DeepSpeed commit edaa722 (= v0.19.6), the file and function named
// at each term; engine.py get_data_types and _do_optimizer_sanity_check for
// the dtypes and the optimizer wrapper.
#pragma once

#include "zeromem/stack_facts.h"  // StepKernel, step_temporary_bytes_per_element

#include <cstdint>
#include <vector>

namespace zeromem {
struct EstimateInput;

namespace terms {

/// Every resolved size a term reads. Element counts are tensor elements,
/// byte counts are bytes per element. Built once per estimate by
/// `make_sizes`.
struct Sizes {
    int stage = 0;
    uint64_t N = 1;         ///< data-parallel size N_d
    uint64_t L = 0;         ///< largest module's parameters (DeepSpeed's largest_layer_params)
    uint64_t layer = 0;     ///< parameters of one decoder layer (0 without an architecture)
    uint64_t bm = 2;        ///< model (16-bit) dtype bytes
    uint64_t ba = 2;        ///< grad_accum_dtype bytes
    uint64_t bc = 2;        ///< communication_data_type bytes
    bool half = true;       ///< fp16 or bf16 training
    bool offload_optimizer = false;
    bool overlap_comm = false;
    bool contiguous_gradients = true;
    bool reduce_scatter = true;
    bool checkpointing = false;   ///< activation checkpointing (recompute in backward)
    bool full_recompute = false;  ///< full checkpointing: each block's forward runs again in backward
    /// zero_optimization.memory_efficient_linear (read at stage 3 only):
    /// false leaves torch's F.linear in place (zero3_retained_linear_weights).
    bool memory_efficient_linear = true;
    /// Weights of the Linear modules whose forward autograd records, per
    /// tensor rank: every parameter outside the input embeddings, plus the
    /// LM head's V x h matrix tied or not (norms and biases included, a
    /// bound); without an architecture every parameter of the rank.
    uint64_t linear_weights = 0;
    /// The LM head's matrix V x h per tensor rank (L without an architecture).
    uint64_t lm_head_matrix = 0;
    bool full_finetune = true;    ///< every parameter trainable (whole-module gradients exist)
    uint64_t bucket = 0;          ///< reduce_bucket_size, elements
    uint64_t prefetch = 0;        ///< min(stage3_prefetch_bucket_size, stage3_max_live_parameters), elements
    uint64_t max_live = 0;        ///< stage3_max_live_parameters, elements
    uint64_t max_reuse = 0;       ///< stage3_max_reuse_distance, elements
    /// Mean parameters of one parameter-holding module of a decoder layer
    /// (one step of the ZeRO-3 trace): layer / (attention + MLP
    /// projections); 0 without an architecture.
    uint64_t mean_module = 0;
    uint64_t Tr = 0;              ///< trainable parameters of this tensor/pipeline rank, Ψ_t
    uint64_t Tn = 0;              ///< ceil(Ψ_t / N_d): this rank's partition
    uint64_t sub = 0;             ///< ZeRO-3 sub-group: min(sub_group_size, Tn)
    int64_t grad_accum = 1;       ///< gradient_accumulation_steps
    StepKernel kernel = StepKernel::torch_foreach;
    /// The engine builds BF16_Optimizer (engine._do_optimizer_sanity_check):
    /// bf16 + ZeRO-1 + grad_accum_dtype fp32 + no CPU offload, or bf16 +
    /// stage 0 + bf16 accumulation under pipeline parallelism (pp > 1).
    bool bf16_optimizer = false;

    // --- host: pinned and pageable buffers (PyTorch CachingHostAllocator.h
    // allocate rounds pinned requests with PowerOf2Ceil) ---
    bool offload_optimizer_cpu = false;
    bool offload_optimizer_nvme = false;
    bool offload_param_cpu = false;
    bool offload_param_nvme = false;
    bool pin_optimizer = true;      ///< offload_optimizer.pin_memory
    bool pin_param = true;          ///< offload_param.pin_memory
    bool zero_init = true;          ///< model built under zero.Init (stage 3)
    /// PyTorch >= 1.11: CachingHostAllocator rounds pinned requests up to a
    /// power of two (PRs #68906/#69299).
    bool round_pinned = true;
    /// ZeRO-1/2 offload pins the fp32 master (DeepSpeed >= 0.14.1; only with
    /// pin_memory from 0.18.3, unconditionally before).
    bool master_pinned = true;
    /// ZeRO-1/2 offload pins its fp32 gradient partition (only with
    /// pin_memory from DeepSpeed 0.10.1, always before).
    bool grads_pinned = true;
    /// ZeRO-1/2 offload's 16-bit parameter staging buffer (DeepSpeed >= 0.17.0).
    bool bit16_staging = true;
    /// DeepSpeedCPUAdam pins 2 x 128 Mi fp32 elements per instance (before
    /// DeepSpeed 0.14.3, cpu_adam.h _doubled_buffer).
    bool cpu_adam_tile_buffer = false;
    /// CPU Adam's m and v appear at the first step (DeepSpeed >= 0.13.2;
    /// before, initialize_optimizer_states stepped once at init).
    bool lazy_cpu_adam_states = true;
    uint64_t optimizer_state_bytes = 8;  ///< Adam m + v (8) or SGD momentum (4) per element
    /// Exact optimizer-state bytes of this rank's partition (optimizer_state.h
    /// count_optimizer_state); 0: optimizer_state_bytes · Tn.
    uint64_t optimizer_state_partition = 0;
    uint64_t sub_group_size = 1000000000;  ///< elements
    /// ZeRO-3: each sub-group's numel in parameter order (stage3.py
    /// _create_fp16_sub_groups closes a sub-group once it reaches
    /// sub_group_size); empty: Tn cut into sub_group_size pieces.
    std::vector<uint64_t> sub_groups;
    /// Partial optimizer offload (ZeRO-3, offload_optimizer cpu, ratio < 1;
    /// stage3.py _create_fp32_partitions): of the rank's S sub-groups the first int((1 - ratio) · S) stay on the GPU. These are
    /// their elements (0 without partial offload); Tn - it are on the host.
    uint64_t partial_gpu_numel = 0;
    uint64_t partial_gpu_sub_groups = 0;  ///< how many of the first sub-groups stay on the GPU
    uint64_t partial_gpu_largest = 0;     ///< elements of the largest of them (the backup AdamW's temporary)
    /// Bytes per element of the temporary of the torch AdamW that steps the
    /// GPU sub-groups (stage3.py backup_optimizer, foreach by default).
    uint64_t partial_gpu_step_temporary = 0;
    uint64_t Pn = 0;              ///< every parameter's partition, ceil(Ψ/N_d) incl. frozen (param offload)
    uint64_t frozen_bytes_rank = 0;  ///< frozen storage in this rank's partition, bytes
    /// Σ over this rank's parameters of PowerOf2Ceil(b_m · numel_p) / Σ
    /// b_m · numel_p: the average rounding of per-parameter pinned buffers
    /// (1 without an architecture).
    double per_param_rounding = 1.0;
    /// Σ_p PowerOf2Ceil(b_m · ceil(numel_p / N_d)) over all parameters:
    /// zero.Init's per-parameter pinned partitions (0 without an architecture).
    uint64_t zero_init_partition_blocks = 0;
    /// ZeRO-1/2 init flattens the 16-bit parameters on the CPU (DeepSpeed
    /// < 0.18.7, or the flat copy does not fit the GPU): the 16-bit copies
    /// and the flat buffer, 2 · b_m · Ψ_t per rank, at load.
    bool zero12_cpu_flatten = false;
    int64_t offload_optimizer_buffer_count = 4;
    int64_t offload_param_buffer_count = 5;
    uint64_t offload_param_buffer_size = 100000000;  ///< elements
    uint64_t offload_param_max_in_cpu = 1000000000;  ///< elements

    // --- ZeRO++ and MiCS (zeropp_terms.cpp); N above is already the MiCS
    // shard size when MiCS is on (the partition group, mics.py) ---
    uint64_t g = 1;               ///< GPUs per node
    uint64_t nodes = 1;           ///< nodes
    uint64_t hpz = 1;             ///< zero_hpz_partition_size when hpZ is on (stage 3, > 1), else 1
    uint64_t hpz_numel_load = 0;  ///< elements with a secondary partition at load: all of this rank's parameters
    uint64_t hpz_numel_train = 0; ///< ... while training: the non-persistent ones (persistent ones are never re-partitioned)
    bool qwz = false;             ///< zero_quantized_weights (stage 3)
    bool bf16 = false;            ///< bf16 model: CUDAQuantizer works in fp16, so qwZ converts both ways
    bool qgz = false;             ///< zero_quantized_gradients, stage 3 and nodes > 1 (stage3.py __avg_scatter_grads)
    uint64_t qgz_groups = 0;      ///< qgZ quantization groups of the largest gradient: max(rows, cols, N)
    uint64_t mics = 0;            ///< mics_shard_size when MiCS is on (stage 3, > 0), else 0
    bool mics_hierarchical = false;  ///< mics_hierarchical_params_gather with MiCS on
};

/// One term: what DeepSpeed allocates, the formula, the allocating code and
/// the bytes (per GPU unless the name says otherwise).
struct Term {
    const char* name = "";
    const char* formula = "";
    const char* source = "";
    uint64_t bytes = 0;
};

/// A term from its name, formula and source (static strings) and its bytes.
inline Term make(const char* name, const char* formula, const char* source, uint64_t bytes) {
    return Term{name, formula, source, bytes};
}

// --- GPU model states -----------------------------------------------------

/// ZeRO-1/2 gradients held through backward. ZeRO-1: the full autograd
/// `param.grad` b_m·Ψ_t plus, at the boundary, `grads_in_partition` b_m·Tn
/// (contiguous_gradients; allocated by `copy_grads_in_partition` at the
/// first reduced bucket, rank 0's, while the later gradients wait for their
/// buckets), or with fp16 + fp32 accumulation only the fp32
/// `param.grad_accum` b_a·Ψ_t (`_fill_param_grad_accum_attribute` sets
/// param.grad = None after each hook). ZeRO-2: `grads_in_partition`
/// b_m·Tn (`copy_grads_in_partition`); with offload 0.
Term zero12_backward_gradients(const Sizes& s);

/// ZeRO-1/2 gradients while the optimizer steps: only `grads_in_partition`
/// b_m·Tn survives the boundary (`_clear_param_grad_only` in
/// `independent_gradient_partition_epilogue`); `step` frees it with
/// `free_grad_in_param_list` before `optimizer.step`, so this is live only
/// during the flatten (see zero12_step_flatten_moment).
Term grads_in_partition(const Sizes& s);

/// BF16_Optimizer's gradient accumulation buffer, b_a·Ψ_t from init (fp32,
/// 4·Ψ_t, at stage 1; bf16 at stage 0 under a pipeline), the whole flat
/// group, not a partition (bf16_optimizer.py `_setup_for_real_optimizer`,
/// `fp32_flat_buffer = zeros_like(bf16_groups_flat, dtype=grad_acc_dtype)`).
Term bf16_optimizer_fp32_grad_buffer(const Sizes& s);

// --- GPU temporaries: backward ---------------------------------------------

/// ZeRO-1/2 IPG bucket: reduce_bucket_size · b_m, doubled with overlap_comm
/// (stage_1_and_2.py `setup_buckets`, buf_0/buf_1).
Term zero12_ipg_bucket(const Sizes& s);

/// ZeRO-1/2 `allreduce_bucket` flatten of a bucket spanning several ranks'
/// slices: reduce_bucket_size · b_m, N_d > 1, no offload (stage_1_and_2.py
/// `average_tensor` -> `allreduce_and_scatter` -> `allreduce_bucket`
/// `self.flatten(bucket)`). A largest module L > reduce_bucket_size (the LM
/// head, `extra_large_param_to_reduce`) is flattened as its first slices
/// that exceed the bucket: min(L, (floor(bucket/ceil(L/N_d)) + 1) ·
/// ceil(L/N_d)) · b_m.
Term zero12_allreduce_bucket_flatten(const Sizes& s);

/// ZeRO-2 autograd gradient of one module before the hook copies it into the
/// bucket: L · b_m (`reduce_independent_p_g_buckets_and_remove_grads`).
Term zero2_autograd_grad_before_bucket_copy(const Sizes& s);

/// ZeRO-2, gradient_accumulation_steps > 1, no offload: micro-step 1's
/// partition kept in `all_grad_tensors` while the next micro-step allocates
/// a fresh `grads_in_partition`: + b_m · Tn
/// (`independent_gradient_partition_epilogue`).
Term zero2_accumulated_partition(const Sizes& s);

/// ZeRO-1/2 without optimizer offload: initialize_optimizer_states gives
/// the fp32 master partition a gradient of zeros on the GPU, 4·Tn
/// (stage_1_and_2.py `single_grad_partition = torch.zeros(partition_size,
/// dtype=fp32 master's dtype, device=self.device)`), and sets it back to
/// None before it returns: live at init beside the flat 16-bit group and the
/// fp32 master, never after. 0 with offload (the buffer is on the CPU) and
/// under BF16_Optimizer.
Term zero12_init_fp32_grad_partition(const Sizes& s);

/// ZeRO-1/2 CPU offload: `temp_grad_buffer_for_gpu_offload`, L · b_m,
/// created in `__init__` and never freed (every phase).
Term temp_grad_buffer_for_gpu_offload(const Sizes& s);

/// ZeRO-1/2 CPU offload, boundary backward: `.double().norm(2)` of the
/// largest slice (8·Lp, `set_norm_for_param_grad_in_gpu`) or the bucket
/// flatten, whichever is larger.
Term zero12_offload_boundary_transient(const Sizes& s);

/// ZeRO-0 (FP16_Optimizer / bf16 DDP) and BF16_Optimizer: the engine's
/// all-reduce flattens up to MEMORY_OPT_ALLREDUCE_SIZE = 5e8 elements
/// of gradients per bucket (engine.py `buffered_allreduce_fallback` ->
/// `allreduce_bucket` `self.flatten(bucket)`), N_d > 1.
Term engine_allreduce_bucket_flatten(const Sizes& s);

/// BF16_Optimizer: `allreduce_bucket` casts the fp32 gradient buffer to the
/// communication dtype, b_c · Ψ_t, unless that is fp32 (engine.py
/// `allreduce_bucket`, `tensor.to(self.communication_data_type)`). It runs
/// at the accumulation boundary after the backward (engine.py
/// `_backward_epilogue`), when no activation is alive: the full convention
/// counts it beside the model states, not on the activation peak.
Term bf16_optimizer_allreduce_cast(const Sizes& s);

/// ZeRO-3 IPG bucket: reduce_bucket_size · b_c, allocated at init, never
/// freed (stage3.py `_setup_for_real_optimizer`).
Term zero3_ipg_bucket(const Sizes& s);

/// ZeRO-3 `reduce_scatter_coalesced` concatenation of the padded partitions:
/// reduce_bucket_size · b_c per reduction, N_d > 1 and reduce_scatter
/// (comm/coalesced_collectives.py `reduce_scatter_coalesced`, torch.cat).
Term zero3_reduce_scatter_cat(const Sizes& s);

/// ZeRO-3 parameters gathered or in flight once the trace is recorded
/// (partitioned_param_coordinator.py `_fetch_sub_module_impl`): at every
/// fetch the coordinator prefetches at least min(stage3_prefetch_bucket_size,
/// stage3_max_live_parameters - available) more elements from the trace,
/// overshooting by at most one parameter. When a trace step (mean_module)
/// uses fewer elements than one prefetch, the look-ahead grows until the
/// available count reaches stage3_max_live_parameters: min(max_live + L,
/// Ψ_t) · b_m. Otherwise each prefetch is used up by the next module: the
/// running module (L; in backward with recomputation the decoder layer kept
/// from its recompute when stage3_max_reuse_distance covers it,
/// `__params_to_release`) plus one prefetch, at most Ψ_t, · b_m.
Term zero3_gathered_params(const Sizes& s, bool backward);

/// ZeRO-3 with memory_efficient_linear false: torch's F.linear records
/// `weight.t()` for backward, a view that torch saves as is (non-output
/// tensors, torch/csrc/autograd/saved_variable.cpp), so when DeepSpeed
/// releases the parameter by swapping `param.data` (partition_parameters.py
/// `free_param`) the view still holds the gathered 16-bit storage until that
/// module's backward (DeepSpeed PR #8189: "the standard Linear implementation
/// can retain the gathered weight storage until backward completes"). With
/// the default true, zero.Init installs `zero3_linear_wrap`, whose
/// LinearFunctionForZeroStage3 saves the parameter itself (runtime/zero/
/// linear.py), and nothing is kept. Kept: without full recompute every
/// Linear weight, linear_weights · b_m, from the end of forward into
/// backward; with full recompute the blocks' forwards record nothing, so
/// the LM head's matrix (forward) and in backward the larger of it and one
/// recomputed block (layer; 0 when stage3_max_reuse_distance keeps that
/// block gathered anyway, see zero3_gathered_params). 0 otherwise.
Term zero3_retained_linear_weights(const Sizes& s, bool backward);

/// ZeRO-3 `AllGatherCoalescedHandle.wait`: `param.data = torch.cat(...)`
/// copies the largest fetched parameter out of the coalesced all-gather
/// buffer while that buffer is alive: + L · b_m, N_d > 1
/// (partition_parameters.py).
Term zero3_allgather_cat_copy(const Sizes& s);

/// ZeRO-3 module gradient before `__add_grad_to_ipg_bucket` copies it: L · b_m.
Term zero3_module_grad(const Sizes& s);

// --- ZeRO++ (Wang et al. 2023, arXiv:2306.10209) and MiCS ------------------

/// hpZ secondary partition: every parameter also keeps b_m ·
/// aligned_numel / zero_hpz_partition_size elements on this rank
/// (partition_parameters.py `_partition_param_sec`, `ds_secondary_tensor`,
/// on the parameter's remote device: the GPU, or pinned host memory under
/// offload_param cpu). Created for every parameter when zero.Init partitions
/// it (`load`); after each step `invalidate_secondary_tensor` (stage3.py
/// `_post_step`) drops the trainable ones and the forward release rebuilds
/// them, except for persistent parameters, which are never re-partitioned:
/// b_m · ceil(numel / hpz) with numel = hpz_numel_load or hpz_numel_train.
/// 0 when hpZ is off.
Term hpz_secondary_partition(const Sizes& s, bool load);

/// qwZ gather of one fetch: the int8 all-gather output (1 B per gathered
/// element), the fp32 scales of every rank (CUDAQuantizer groups of at most
/// 8000 elements: 4 · G · ceil(ceil(n/G)/8000)) and this rank's 16-bit input
/// copy and int8 partition (3 · ceil(n/G)), with n = min(max(L,
/// prefetch), every parameter) elements and G the gather group: N_d, or the
/// hpZ group in backward (partition_parameters.py `_all_gather_coalesced`
/// quantize branch, `CUDAQuantizer.quantize`). A bf16 model also pays the
/// fp16 conversions: the input's `.to(torch.half)` (2 · ceil(n/G)) and, in
/// `AllGatherCoalescedHandle.wait`, the fp16 `torch.cat` of the largest
/// parameter before `.to(bf16)` (2 · L). The dequantized output is the
/// gathered parameter counted by zero3_gathered_params. 0 without qwZ.
Term qwz_quantized_gather(const Sizes& s, bool backward);

/// qgZ buffers of the largest gradient n = L (runtime/comm/
/// coalesced_collectives.py `all_to_all_quant_reduce`): int4 send and
/// receive buffers of the intra-node all-to-all (n/2 + n/2 B), int4
/// send/receive of the inter-node all-to-all (2 · n/(2g) B), the fp16
/// dequantized output (2n/g B) and this rank's averaged slice (2 · 2n/N B),
/// plus fp32 scales (2 · 4 · groups + 2 · 4 · groups/g). 0 without qgZ or
/// on one node (stage3.py `__avg_scatter_grads` uses the reduce-scatter).
Term qgz_all_to_all_buffers(const Sizes& s);

/// MiCS hierarchical gather: `_hierarchical_all_gather_params` (mics.py)
/// clones the inter-node all-gather output of a module before the
/// intra-node gather: b_m · ceil(L/m) · (m/g). 0 otherwise.
Term mics_hierarchical_gather_clone(const Sizes& s);

// --- GPU temporaries: optimizer step -----------------------------------------

/// The step's moments. The GPU peak of the step is the largest moment, not
/// the sum of all temporaries.
struct StepMoments {
    Term flatten;        ///< flat copy + its fp32 cast, with the 16-bit gradients alive
    Term optimizer;      ///< fp32 gradient + the optimizer kernel's temporary, 16-bit gradients freed
    Term overflow_check; ///< `_has_inf_or_nan` / `.double()` norm of the largest slice, gradients alive
    /// The 16-bit gradients are still alive in the optimizer moment (fp32
    /// training without FP16_Optimizer; BF16_Optimizer's fp32 buffer).
    bool gradients_live_at_optimizer = false;
};

/// ZeRO-1/2 `step` per parameter group (stage_1_and_2.py `step`):
///  flatten: b_m·Tn (flat copy of grads_in_partition) + 4·Tn (`.to(fp32)`)
///  optimizer: 4·Tn (fp32 grad) + T·Tn (`_optimizer_step`)
///  overflow_check: 11·Lp (`_has_inf_or_nan`, half dtypes; covers the 8·Lp
///  `get_grad_norm_direct` `.double()`), Lp = min(L, Tn).
/// The 16-bit grads_in_partition (b_m·Tn) is live in flatten and
/// overflow_check only. With offload every moment is 0 (step on the CPU).
StepMoments zero12_step(const Sizes& s);

/// ZeRO-3 `step`, one sub-group at a time (stage3.py `step`,
/// `_prepare_fp32_grad_for_sub_group`, `_optimizer_step`,
/// `_release_sub_group`): flatten (b_a + 4)·sub, then optimizer 4·sub +
/// T·sub; the b_a flat copy is freed before the optimizer runs. Under
/// optimizer offload the step runs on the CPU (every moment 0) except, with
/// partial offload, a GPU sub-group's torch AdamW step: its foreach
/// temporary partial_gpu_step_temporary · sub (the fp32 gradient is already
/// there, counted as a gradient).
StepMoments zero3_step(const Sizes& s);

/// ZeRO-3 optimizer init (stage3.py `initialize_optimizer_states`): the fp32
/// `gradient_buffer` of the largest sub-group, 4·sub, freed before the IPG
/// bucket and `grad_partitions_flat_buffer` are allocated. 0 with offload
/// (the buffer is on the CPU).
Term zero3_init_gradient_buffer(const Sizes& s);

/// ZeRO-0 FP16_Optimizer `step` (fp16/fused_optimizer.py `step`):
///  flatten: per-parameter fp32 copies (4·Ψ_t) and their flattening (4·Ψ_t)
///  with the 16-bit grads alive; optimizer: the flat fp32 grad 4·Ψ_t + T·Ψ_t
///  after p.grad = None. fp32 training: no copy, optimizer T·Ψ_t only.
StepMoments zero0_step(const Sizes& s);

/// BF16_Optimizer `step`: with an fp32 buffer the partition's gradient is a
/// view (no copy): optimizer T·Tn; with a bf16 buffer `grad_partition.to(fp32)`
/// adds 4·Tn for the optimizer's step.
StepMoments bf16_optimizer_step(const Sizes& s);

// --- host RAM, per rank -------------------------------------------------------

/// c10::llvm::PowerOf2Ceil: the bytes PyTorch's CachingHostAllocator
/// allocates and pins for a request of `bytes` (aten/src/ATen/core/
/// CachingHostAllocator.h allocate()). 0 stays 0.
uint64_t power_of_two_ceil(uint64_t bytes);

/// When a host term exists.
enum class HostLife {
    init,           ///< from deepspeed.initialize on (load phase and after)
    backward,       ///< from the first backward on (ZeRO-1/2 GAS > 1 accumulation buffers)
    lazy,           ///< from the first optimizer step / accumulation micro-step on
    load_transient, ///< only while the engine is built
    save_transient  ///< only while a checkpoint is saved
};

/// One host buffer per rank (or once per node when `once_per_node`).
struct HostTerm {
    const char* name = "";
    const char* formula = "";
    const char* source = "";
    uint64_t bytes = 0;   ///< resident bytes (pinned ones at their rounded size)
    bool pinned = false;
    HostLife life = HostLife::init;
    bool once_per_node = false;  ///< one rank of the node holds it (checkpoint writer)
    /// Only global rank 0 holds it (a multi-node job's other nodes do not): the consolidated 16-bit
    /// state dict (engine.py _zero3_consolidated_16bit_state_dict, `if dist.get_rank() == 0`).
    bool rank0_only = false;
    /// Made when zero.Init starts, so it also sits under the model load
    /// (the parameter swapper's pool under offload_param nvme).
    bool during_zero_init = false;
    /// A load transient that happens before the engine builds any other
    /// host buffer (ZeRO-1/2's CPU flatten): its own moment, not on top of
    /// the init buffers.
    bool before_init = false;
    /// Made before the ZeRO optimizer (DeepSpeedCPUAdam's tile buffers), so
    /// also present at the before_init moments.
    bool built_before_zero_optimizer = false;
};

/// Every host buffer of one rank under the sizes' stage and offload
/// settings: ZeRO-1/2 and ZeRO-3 offload buffers as DeepSpeed creates and
/// pins them (stage_1_and_2.py __init__/initialize_optimizer_states,
/// stage3.py _setup_for_real_optimizer/initialize_optimizer_states,
/// partition_parameters.py, swap_tensor/*.py), CPU Adam's states, the ZeRO-3
/// load staging (zero/utils.py defragment) and checkpoint-save copies
/// (engine.py _save_checkpoint). Pinned buffers through torch are rounded by
/// power_of_two_ceil; DeepNVMe swap pools are exact. `module_state_bytes`:
/// the 16-bit module state a stage-0-2 checkpoint writer clones to the host;
/// `largest_gpu_optimizer_tensor`: the largest GPU optimizer tensor
/// torch.save copies to the host; `gathered_state_bytes`: the consolidated
/// 16-bit state dict rank 0 gathers under
/// stage3_gather_16bit_weights_on_model_save.
std::vector<HostTerm> host_terms(const Sizes& s, uint64_t module_state_bytes, uint64_t largest_gpu_optimizer_tensor,
                                 bool gather_16bit_on_save, uint64_t gathered_state_bytes);

/// hpZ under offload_param cpu: the secondary partitions live in host
/// memory, pinned per parameter when offload_param.pin_memory
/// (partition_parameters.py _partition_param_sec: torch.empty on the remote
/// device, .pin_memory()): b_m · ceil(numel/hpz), rounded like zero.Init's
/// pinned partitions (per_param_rounding). Appends nothing without hpZ.
void zeropp_host_terms(const Sizes& s, std::vector<HostTerm>& out);

}  // namespace terms
}  // namespace zeromem
