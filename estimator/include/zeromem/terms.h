// The named memory terms of the `full` convention: one small function per
// buffer that DeepSpeed v0.19.6 (or PyTorch) allocates, each named after that
// buffer and citing the file and function that allocates it. The estimator's
// phases (estimate.cpp) are sums and maxima of these terms; a simulator that
// replays DeepSpeed's allocations can name its events alike, so a
// disagreement points at one term.
//
// Sources: ../shared/reference/deepspeed_audit.md (term table, DeepSpeed
// commit edaa722 = v0.19.6) and deepspeed_memory.md sections 4-5.
#pragma once

#include <cstdint>

namespace zeromem {
struct EstimateInput;

namespace terms {

/// Which code runs the optimizer step, and so what temporary it allocates.
///  - torch_foreach: torch.optim Adam(W) multi-tensor path, torch >= 2.1:
///    one fp32 temporary per element stepped (adam.py `_multi_tensor_adam`,
///    `exp_avg_sq_sqrt = torch._foreach_sqrt(...)`).
///  - torch_foreach_2_0: the same on torch 2.0, which also builds `denom`
///    (two temporaries).
///  - fused: DeepSpeed FusedAdam, DeepSpeedCPUAdam or torch's fused AdamW
///    (`_fused_adamw_`): updates in place, no temporary.
///  - sgd: torch SGD with momentum: no Adam temporary.
enum class StepKernel { torch_foreach, torch_foreach_2_0, fused, sgd };

/// Bytes of the step's temporary per element stepped: 4 (torch >= 2.1
/// foreach), 8 (torch 2.0 foreach), 0 (fused, SGD).
uint64_t step_temporary_bytes_per_element(StepKernel k);

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
    bool full_finetune = true;    ///< every parameter trainable (whole-module gradients exist)
    uint64_t bucket = 0;          ///< reduce_bucket_size, elements
    uint64_t prefetch = 0;        ///< min(stage3_prefetch_bucket_size, stage3_max_live_parameters), elements
    uint64_t max_live = 0;        ///< stage3_max_live_parameters, elements
    uint64_t max_reuse = 0;       ///< stage3_max_reuse_distance, elements
    uint64_t Tr = 0;              ///< trainable parameters of this tensor/pipeline rank, Ψ_t
    uint64_t Tn = 0;              ///< ceil(Ψ_t / N_d): this rank's partition
    uint64_t sub = 0;             ///< ZeRO-3 sub-group: min(sub_group_size, Tn)
    int64_t grad_accum = 1;       ///< gradient_accumulation_steps
    StepKernel kernel = StepKernel::torch_foreach;
    /// bf16 + ZeRO-1 + grad_accum_dtype fp32 + no offload: the engine builds
    /// BF16_Optimizer (engine._do_optimizer_sanity_check).
    bool bf16_optimizer = false;
};

/// One term: what DeepSpeed allocates, the formula, the allocating code and
/// the bytes (per GPU unless the name says otherwise).
struct Term {
    const char* name = "";
    const char* formula = "";
    const char* source = "";
    uint64_t bytes = 0;
};

// --- GPU model states -----------------------------------------------------

/// ZeRO-1/2 gradients held through backward. ZeRO-1: the full autograd
/// `param.grad` b_m·Ψ_t, or with fp16 + fp32 accumulation only the fp32
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

/// BF16_Optimizer's fp32 gradient buffer, 4·Ψ_t from init
/// (bf16_optimizer.py `_setup_for_real_optimizer`, `fp32_flat_buffer`).
Term bf16_optimizer_fp32_grad_buffer(const Sizes& s);

// --- GPU temporaries: backward ---------------------------------------------

/// ZeRO-1/2 IPG bucket: reduce_bucket_size · b_m, doubled with overlap_comm
/// (stage_1_and_2.py `setup_buckets`, buf_0/buf_1).
Term zero12_ipg_bucket(const Sizes& s);

/// ZeRO-1/2 `allreduce_bucket` flatten of a bucket spanning several ranks'
/// slices: reduce_bucket_size · b_m, N_d > 1, no offload (stage_1_and_2.py
/// `average_tensor` -> `allreduce_and_scatter` -> `allreduce_bucket`
/// `self.flatten(bucket)`).
Term zero12_allreduce_bucket_flatten(const Sizes& s);

/// ZeRO-2 autograd gradient of one module before the hook copies it into the
/// bucket: L · b_m (`reduce_independent_p_g_buckets_and_remove_grads`).
Term zero2_autograd_grad_before_bucket_copy(const Sizes& s);

/// ZeRO-2, gradient_accumulation_steps > 1, no offload: micro-step 1's
/// partition kept in `all_grad_tensors` while the next micro-step allocates
/// a fresh `grads_in_partition`: + b_m · Tn
/// (`independent_gradient_partition_epilogue`).
Term zero2_accumulated_partition(const Sizes& s);

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
/// `allreduce_bucket`, `tensor.to(self.communication_data_type)`).
Term bf16_optimizer_allreduce_cast(const Sizes& s);

/// ZeRO-3 IPG bucket: reduce_bucket_size · b_c, allocated at init, never
/// freed (stage3.py `_setup_for_real_optimizer`).
Term zero3_ipg_bucket(const Sizes& s);

/// ZeRO-3 `reduce_scatter_coalesced` concatenation of the padded partitions:
/// reduce_bucket_size · b_c per reduction, N_d > 1 and reduce_scatter
/// (comm/coalesced_collectives.py `reduce_scatter_coalesced`, torch.cat).
Term zero3_reduce_scatter_cat(const Sizes& s);

/// ZeRO-3 parameters gathered around the running module: the module whole
/// (L · b_m) plus the prefetch (min(prefetch bucket, max_live) · b_m)
/// (partitioned_param_coordinator.py `_fetch_sub_module_impl`). In backward
/// with recomputation, the whole decoder layer stays gathered from its
/// recompute to its backward when stage3_max_reuse_distance covers it
/// (`__params_to_release`): max(L, layer, capped by max_live) · b_m.
Term zero3_gathered_params(const Sizes& s, bool backward);

/// ZeRO-3 `AllGatherCoalescedHandle.wait`: `param.data = torch.cat(...)`
/// copies the largest fetched parameter out of the coalesced all-gather
/// buffer while that buffer is alive: + L · b_m, N_d > 1
/// (partition_parameters.py).
Term zero3_allgather_cat_copy(const Sizes& s);

/// ZeRO-3 module gradient before `__add_grad_to_ipg_bucket` copies it: L · b_m.
Term zero3_module_grad(const Sizes& s);

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
/// T·sub; the b_a flat copy is freed before the optimizer runs.
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

/// BF16_Optimizer `step`: the gradients are already fp32 (no copy):
/// optimizer T·Tn.
StepMoments bf16_optimizer_step(const Sizes& s);

}  // namespace terms
}  // namespace zeromem
