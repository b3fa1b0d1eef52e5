// The software stack's version behaviours, one table named by behaviour: which buffers
// DeepSpeed allocates and pins, how PyTorch's pinned host allocator sizes and reuses
// blocks, which optimizer kernel runs the step, what transformers loads and keeps. The
// estimator's memory part and the simulator read the same table, so a version switch is
// decided once. Each field cites the release (and the pull request or commit) the
// behaviour starts at.
#pragma once

#include "zeromem/input.h"
#include "zeromem/types.h"

#include <cstdint>
#include <string>

namespace zeromem {

/// The version-dependent behaviours of `SoftwareStack`, resolved by stack_facts(). The
/// defaults are those of the built-in stack (DeepSpeed 0.19.6, torch 2.8, transformers 5.0).
struct StackFacts {
    // --- PyTorch ---
    /// torch < 2.1: the foreach Adam(W) step (adam.py _multi_tensor_adam) keeps two fp32
    /// temporaries (exp_avg_sq_sqrt and denom); from 2.1 one.
    bool foreach_adam_keeps_two_temporaries = false;
    /// torch >= 1.11 (pytorch/pytorch#68906, #69299): CachingHostAllocator.h allocate rounds
    /// a pinned request up to PowerOf2Ceil(bytes) and pins the whole block.
    bool rounds_pinned_to_power_of_two = true;
    /// torch >= 2.5 (pytorch/pytorch#134154, per-power-of-two free lists): a cached pinned
    /// block serves only a request of the same rounded size; before, best fit.
    bool reuses_pinned_same_size_only = true;
    /// torch >= 1.13 (pytorch/pytorch#86509, torch/cuda/__init__.py _lazy_init) sets
    /// CUDA_MODULE_LOADING=LAZY when the user did not: kernels load at first use.
    bool loads_cuda_modules_lazily = true;
    /// torch >= 2.0 (aten/src/ATen/cuda/CublasHandlePool.cpp allocateCUDABlasWorkspace):
    /// cuBLAS's workspace comes from the caching allocator; before, cuBLAS's own pool.
    bool cublas_workspace_in_caching_allocator = true;

    // --- transformers (with torch) ---
    /// torch >= 2.8 and transformers >= 4.54 (huggingface/transformers#37358, merged
    /// 2025-07-10): the HF Trainer's default optimizer is adamw_torch_fused; before,
    /// adamw_torch (foreach).
    bool hf_trainer_defaults_to_fused_adamw = true;
    /// transformers < ~4.50: from_pretrained of a single (non-sharded) file loads the whole
    /// 16-bit state dict before building the model; from #36033 the model is built on the
    /// meta device and filled one parameter at a time (modeling_utils.py
    /// _load_pretrained_model).
    bool single_file_loads_whole_state_dict = false;
    /// transformers >= 4.45: generate passes num_logits_to_keep=1 (later logits_to_keep), so
    /// the prefill keeps only the last position's logits.
    bool generate_keeps_last_logits_only = true;
    /// transformers < 4.46: LlamaForCausalLM.forward upcasts the logits itself
    /// (`logits = logits.float()` after self.lm_head), so the 16-bit logits are freed at the
    /// upcast and the fp32 logits are the model's output; from 4.46 (src/transformers/loss/loss_utils.py,
    /// self.loss_function) the model returns the 16-bit logits and ForCausalLMLoss upcasts
    /// inside the loss (`logits = logits.float()`), the 16-bit tensor still held by the model's
    /// forward while the loss runs.
    bool upcasts_logits_in_model_forward = false;
    /// transformers < 4.49: the causal-LM loss shifts the logits,
    /// `shift_logits = logits[..., :-1, :].contiguous()` (LlamaForCausalLM.forward before 4.46,
    /// loss_utils.py ForCausalLMLoss from 4.46), an fp32 copy of b(s-1)V elements, and its
    /// backward (SliceBackward0) builds a zero-padded fp32 gradient of the full logits; from
    /// 4.49 (huggingface/transformers#35646, merged 2025-01-13) ForCausalLMLoss pads the
    /// labels instead (`nn.functional.pad(labels, (0, 1), value=ignore_index)`): no copy.
    bool shifts_logits_with_contiguous_copy = false;
    /// transformers >= 4.36 with torch >= 2.1.1: a model class that supports SDPA loads with
    /// attn_implementation "sdpa" when the script asks for none (modeling_utils.py
    /// PreTrainedModel._autoset_attn_implementation calls _check_and_enable_sdpa, which needs
    /// cls._supports_sdpa and utils/import_utils.py is_torch_sdpa_available, torch >= 2.1.1;
    /// huggingface/transformers#26572 and #27940, released in 4.36: "SDPA is used by default for
    /// PyTorch v2.1.1 and greater when an implementation is available", perf_infer_gpu_one.md).
    /// Before, every class runs its eager attention, which keeps s^2 scores per head.
    bool hf_default_attention_is_sdpa = true;
    /// transformers >= 5.0: a MoE block keeps its routed experts as one module of packed 3D
    /// parameters, `experts.gate_up_proj` [E, 2f, h] and `experts.down_proj` [E, h, f]
    /// (`@use_experts_implementation` MixtralExperts, Qwen2MoeExperts, Qwen3MoeExperts,
    /// DeepseekV3NaiveMoe; legacy checkpoints are converted at load); before, an nn.ModuleList
    /// of per-expert MLPs with their own Linear modules (modeling_mixtral.py
    /// MixtralBlockSparseTop2MLP, modeling_qwen3_moe.py Qwen3MoeMLP). Under ZeRO-3 the packed
    /// module is fetched, and its gradient reduced, whole. The families it applies to are
    /// marked by ModelArch::packs_experts_from_transformers_5; gpt-oss and Llama 4 always pack.
    bool packs_moe_experts = true;

    // --- DeepSpeed (ZeRO-Offload host buffers, ZeRO-1/2 init) ---
    /// DeepSpeed >= 0.10.1 (deepspeedai/DeepSpeed#4131): ZeRO-1/2 offload pins its fp32
    /// gradient partition (stage_1_and_2.py initialize_optimizer_states) only with
    /// offload_optimizer.pin_memory; before, always.
    bool pins_grad_partition_only_with_pin_memory = true;
    /// DeepSpeed >= 0.13.2 (#5104): CPU Adam's m and v appear at the first step; before,
    /// initialize_optimizer_states stepped once at init.
    bool creates_cpu_adam_states_at_first_step = true;
    /// DeepSpeed >= 0.14.1 (#5301): ZeRO-1/2 offload pins the fp32 master
    /// (single_partition_of_fp32_groups); before, pageable.
    bool pins_master_weights = true;
    /// DeepSpeed >= 0.18.3 (#7689): the fp32 master is pinned only with
    /// offload_optimizer.pin_memory (pins_master_weights unconditionally before).
    bool pins_master_weights_only_with_pin_memory = true;
    /// DeepSpeed < 0.14.3 (#5409 removed it): DeepSpeedCPUAdam pins 2 x 128 Mi fp32 elements
    /// per instance (cpu_adam.h _doubled_buffer).
    bool cpu_adam_pins_tile_buffer = false;
    /// DeepSpeed >= 0.17.0 (#7309): ZeRO-1/2 offload keeps a 16-bit parameter staging buffer
    /// (param_buffer_of_bit16_for_cpu_offload_groups).
    bool stages_bit16_params_for_offload = true;
    /// DeepSpeed >= 0.18.7 (#7828): ZeRO-1/2 init (stage_1_and_2.py __init__) flattens the
    /// 16-bit parameter groups on the GPU when the free memory holds the flat copy; before,
    /// always on the CPU.
    bool flattens_bit16_on_gpu_when_it_fits = true;
};

/// The behaviours of `st`. Throws InputError naming the flag (--torch-version,
/// --transformers-version, --deepspeed-version) for a malformed version.
StackFacts stack_facts(const SoftwareStack& st);

/// The attention a Hugging Face model runs when the script asks for none: flash (no s^2 score
/// tensor: SDPA's flash or memory-efficient kernel) or eager (the softmax output, and with
/// attention dropout p > 0 its mask and output, s^2 per head and layer), and why, for the report.
/// SDPA's math fallback (a dtype, head size or mask no fused kernel takes) would keep s^2
/// tensors; it is not modelled.
struct AttentionChoice {
    bool flash;
    std::string why;
};
/// The default for `family` (ModelArch::family, the config's model_type; empty when no
/// architecture is known) under `st`: eager without hf_default_attention_is_sdpa; eager for the
/// classes that have no SDPA path (t5: T5PreTrainedModel sets no _supports_sdpa, the SDPA path
/// came with huggingface/transformers#47014, merged 2026-07, after every release the stack table
/// covers; gptj: GPTJPreTrainedModel sets _supports_flash_attn and no _supports_sdpa); with
/// transformers >= 4.36 Falcon's own _check_and_enable_sdpa turns SDPA on from torch 2.0; otherwise
/// SDPA. Families not named here are taken to have an SDPA path (not checked per class).
AttentionChoice default_attention(const SoftwareStack& st, const StackFacts& facts, const std::string& family);

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

/// torch's foreach kernel under `facts`: torch_foreach_2_0 where the foreach step keeps two
/// temporaries, else torch_foreach.
StepKernel foreach_kernel(const StackFacts& facts);

/// The optimizer implementation that runs the step, and why (for --explain).
/// DeepSpeed does not alter a client optimizer's foreach/fused choice
/// (engine.py _configure_optimizer: basic_optimizer = client_optimizer); the
/// HF Trainer's default follows hf_trainer_defaults_to_fused_adamw.
struct StepKernelChoice {
    StepKernel kernel;
    std::string why;
};
/// The choice for `in` (after with_accelerate_cpu_adam where the caller applies it): the
/// optimizer block, torch_adam, offload, the client's fused flag, the HF Trainer default.
StepKernelChoice step_kernel(const EstimateInput& in, const StackFacts& facts);
/// step_kernel(in, stack_facts(in.stack)).kernel: the estimator and the simulator replay the
/// same temporary. Throws InputError for a malformed version string.
StepKernel step_kernel_for(const EstimateInput& in);

}  // namespace zeromem
