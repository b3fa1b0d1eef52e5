// The analytic memory estimate for one ZeRO configuration.
#pragma once

#include "zeromem/explain_term.h"
#include "zeromem/input.h"
#include "zeromem/generation.h"
#include "zeromem/model.h"
#include "zeromem/moe.h"
#include "zeromem/types.h"

#include <cstdint>
#include <memory>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zeromem {

/// How the model is loaded without zero.Init (input.h LoadPath).
const char* to_string(LoadPath p);
/// Parses "host-copy|low-cpu-mem|single-file|device-map" (low-cpu-mem is
/// host-copy); throws InputError naming `field`.
LoadPath parse_load_path(const std::string& text, const std::string& field);

/// Per-GPU bytes. parameters + gradients + optimizer_states are the model
/// states (ZeRO paper Sec. 3.1); the rest are residual states (Sec. 3.2).
struct GpuMemory {
    uint64_t parameters = 0;
    uint64_t gradients = 0;
    uint64_t optimizer_states = 0;  ///< = master_weights + momentum + variance
    uint64_t master_weights = 0;    ///< fp32 copy of the parameters
    uint64_t momentum = 0;          ///< Adam m (SGD momentum buffer)
    uint64_t variance = 0;          ///< Adam v
    uint64_t activations = 0;
    uint64_t temporary_buffers = 0;
    uint64_t cublas_workspaces = 0;  ///< cuBLAS/cuBLASLt workspaces (in the allocator from torch 2.0)
    uint64_t cuda_context = 0;       ///< outside the caching allocator
    uint64_t nccl_buffers = 0;       ///< NCCL communicator buffers, outside the caching allocator
    /// A calibration profile's fitted process baseline (input.h), inside the
    /// caching allocator; 0 without --calibration.
    uint64_t process_baseline = 0;
    uint64_t fragmentation = 0;
    /// torch.cuda.max_memory_allocated's reading: the tensors above, cuBLAS
    /// workspaces when the allocator holds them, the process baseline.
    uint64_t allocated = 0;
    /// torch.cuda.max_memory_reserved's reading: allocated + fragmentation.
    uint64_t reserved = 0;
    /// What nvidia-smi shows: reserved + context + NCCL (+ cuBLAS's own pool
    /// before torch 2.0): everything on the device. Verdicts compare it.
    uint64_t total = 0;
};

/// Per-node bytes of host RAM and NVMe.
struct NodeMemory {
    uint64_t host_memory = 0;   ///< peak host RAM per node
    uint64_t host_pinned = 0;   ///< of which page-locked (pinned)
    uint64_t host_load = 0;     ///< host RAM while loading the model
    uint64_t host_steady = 0;   ///< host RAM while training
    uint64_t nvme = 0;          ///< bytes written to the NVMe drive(s) of one node
};

/// One moment of a training run and what is live then: on one GPU, and in
/// the host RAM / on the NVMe of one node.
///  - load:            model materialised, DeepSpeed engine and ZeRO optimizer built
///  - forward:         end of forward (activations stored, ZeRO-3 gathers)
///  - backward:        start of backward (activations, recompute, gradient buckets)
///  - forward, backward of the first step: before Adam's m and v exist
///  - optimizer_step:  fp32 gradient copy, optimizer temporaries, Adam m and v
///                     allocated at the first step
///  - steady_backward: backward of later steps, with m and v live
///  - generation:      (with --eval-generate) model.generate between steps: the
///                     resident training states, the KV cache and logits (in
///                     activations) and ZeRO-3's per-module gathers
///  - checkpoint_save: stage3_gather_16bit_weights_on_model_save gathers on rank 0
struct PhaseMemory {
    std::string name;
    GpuMemory per_gpu;    ///< components live in this phase; total includes the process terms and fragmentation
    NodeMemory per_node;  ///< host_memory, host_pinned and nvme of this phase
    std::optional<bool> fits_gpu;
    std::optional<bool> fits_host;
    /// "fits", "tight" or "oom" for this phase by the rule of Estimate::gpu_verdict / host_verdict
    /// (verdict_band.h set_verdicts); unset when the capacity is unknown.
    std::optional<std::string> gpu_verdict;
    std::optional<std::string> host_verdict;
};

/// What only global rank 0 holds, so that a multi-node job sees which rank peaks. With
/// zero_optimization.stage3_gather_16bit_weights_on_model_save at ZeRO-3, DeepSpeed's
/// engine.py _zero3_consolidated_16bit_state_dict gathers one module's parameters at a time on every
/// rank (GatheredParameters) and copies them to the CPU on rank 0 only (`if dist.get_rank() == 0`):
/// the host 16-bit state dict is rank 0's, the gathered module's GPU transient every rank's.
struct RankZeroOnly {
    std::string phase;                 ///< the phase it lives in ("checkpoint_save")
    uint64_t host_bytes = 0;           ///< host RAM on rank 0's node, inside that phase's per-node figure
    std::vector<std::string> what;     ///< the host terms (terms.h HostTerm::rank0_only)
    uint64_t gathered_module_gpu = 0;  ///< the largest gathered module, on every rank's GPU (not rank 0's alone)
    /// The host peak per node of a node without rank 0 (its phases with host_bytes taken out of `phase`).
    uint64_t other_nodes_host_peak = 0;
    std::string other_nodes_host_peak_phase;
};

/// The result.
struct Estimate {
    Convention convention = Convention::full;
    GpuMemory per_gpu;       ///< components each at their own peak; total = peak phase
    NodeMemory per_node;
    std::vector<PhaseMemory> phases;  ///< full convention only
    std::string peak_phase;           ///< name of the phase that sets per_gpu.total
    std::string host_peak_phase;      ///< name of the phase that sets per_node.host_memory
    std::string first_oom_phase;      ///< first phase, in time order, whose GPU total exceeds the capacity
    std::string first_host_oom_phase; ///< first phase, in time order, whose host RAM exceeds the capacity
    uint64_t trainable_params = 0;    ///< parameters with gradients and optimizer state
    uint64_t frozen_params = 0;       ///< parameters stored only (LoRA base, frozen backbone)
    uint64_t params_per_rank = 0;     ///< parameters held by one tensor/pipeline rank before ZeRO
    std::optional<bool> fits_gpu;     ///< unset when the GPU capacity is unknown
    std::optional<bool> fits_host;    ///< unset when the host capacity is unknown
    /// The load phase (phases[0]) is its largest moment; its components can peak at other moments (the
    /// 16-bit module beside its flat copy while ZeRO-1/2 flattens on the GPU, the fp32 gradient of
    /// zeros initialize_optimizer_states holds after it): parameters, gradients, optimizer_states,
    /// activations and temporary_buffers each at their own peak in the load, what a measurement's
    /// per-category peaks read (the other fields are the largest moment's).
    GpuMemory load_component_peaks;
    /// Without an architecture (--params only) the estimate holds no
    /// activations: the bytes a dense decoder of that size would store at the
    /// micro batch and sequence (dense_decoder_allowance), and how.
    uint64_t activation_allowance = 0;
    std::string activation_allowance_how;
    /// "fits", "tight" or "oom"; unset when the capacity is unknown. Tight: with an architecture, the
    /// need is inside the error band below the capacity (verdict_band.h); without one, the margin does
    /// not cover activation_allowance.
    std::optional<std::string> gpu_verdict;
    /// "fits", "tight" (inside the host error band of verdict_band.h) or "oom"; unset without a host capacity.
    std::optional<std::string> host_verdict;
    /// Rank 0's extras (full convention; unset when rank 0 holds nothing the others do not).
    std::optional<RankZeroOnly> rank0_only;
    std::vector<ExplainTerm> terms;   ///< filled only when asked for
    std::vector<std::string> notes;   ///< assumptions and warnings
    /// full convention: which optimizer implementation runs the step and
    /// why (DeepSpeed's, torch foreach or fused, from the software stack).
    std::string optimizer_step_kernel;
};

/// Computes the estimate for `in` under `in.convention`.
///  - paper: ZeRO paper Sec. 5.1-5.3 model states, K = 4 + optimizer bytes
///    (12 for Adam): 16Ψ, 4Ψ+KΨ/N, 2Ψ+(2+K)Ψ/N, (4+K)Ψ/N; residual states 0.
///  - deepspeed: DeepSpeed estimate_zero2_model_states_mem_needs
///    (stage_1_and_2.py) for stage 2 and estimate_zero3_model_states_mem_needs
///    (stage3.py) for stage 3, bit-exact; stages 0 and 1 throw InputError.
///  - full: DeepSpeed v0.19.6's real allocations, one function per phase
///    built from the named terms of zeromem/terms.h (each citing the
///    DeepSpeed or PyTorch function that allocates it), following the
///    software stack in `in.stack` (DeepSpeed runtime/zero/stage_1_and_2.py
///    DeepSpeedZeroOptimizer, stage3.py DeepSpeedZeroOptimizer_Stage3,
///    PyTorch CachingHostAllocator.h for pinned host memory, transformers
///    modeling_utils.py for the load). ZeRO optimizer offload
///    with a client optimizer while zero_force_ds_cpu_optimizer is true runs
///    DeepSpeedCPUAdam, as accelerate (the HF Trainer's path) substitutes it
///    (accelerator.py _prepare_deepspeed), said in a note. Also throws
///    InputError for a malformed version string.
/// With `explain` the terms and notes are filled (slower). Throws InputError
/// for impossible inputs (zero params or GPUs, nodes not dividing GPUs, stage
/// outside 0..3, offload_param below stage 3, NVMe optimizer offload below
/// stage 3).
Estimate estimate(const EstimateInput& in, bool explain = false);

/// Korthikanti et al. 2022 (arXiv:2205.05198) Table 2: activation bytes
/// stored per transformer layer for sequence s, micro batch b, hidden h,
/// heads a, tensor-parallel size t (16-bit activations, 1-byte dropout
/// masks):
///   none:      sbh(10 + 24/t + 5as/(ht))   (t = 1: sbh(34 + 5as/h), Eq. 1)
///   none + SP: sbh(34/t + 5as/(ht))
///   selective: sbh(10 + 24/t), with SP sbh(34/t)
///   full:      2sbh (the layer input only), with SP 2sbh/t
/// With `flash_attention` the 5as/(ht) term (attention scores, softmax and
/// its dropout mask) is not stored. Returns bytes (rounded to nearest).
/// Throws InputError for a non-positive size.
uint64_t activation_bytes_per_layer(int64_t s, int64_t b, int64_t h, int64_t a, int64_t t,
                                    Checkpointing mode, bool flash_attention,
                                    bool sequence_parallel = false);

/// The same per-layer bytes for a real architecture: the Korthikanti
/// decomposition with grouped-query attention (K and V scale with
/// num_kv_heads / num_heads) and the MLP's real width (plain: 4·f/h·sbh in
/// the tensor-parallel part; gated SwiGLU: 8·f/h·sbh; for MoE f is
/// active_ffn_width: the top-k experts' plus the shared expert's). The
/// dropout masks (1 byte per element) are counted only for the model's
/// dropouts with p > 0 (ModelArch::*_dropout). Reduces to
/// activation_bytes_per_layer for multi-head attention with f = 4h and all
/// dropouts non-zero.
uint64_t layer_activation_bytes(const ModelArch& arch, int64_t s, int64_t b, int64_t t, Checkpointing mode,
                                bool flash_attention, bool sequence_parallel);

/// What a block's RMSNorms save for backward beyond Korthikanti's 16-bit norm inputs, in bytes
/// (0 for nn.LayerNorm). transformers' LlamaRMSNorm.forward runs `hidden_states.to(torch.float32)`,
/// `.pow(2).mean(-1)`, `* torch.rsqrt(...)`, then `self.weight * hidden_states.to(input_dtype)`;
/// torch's tools/autograd/derivatives.yaml makes PowBackward0 save its input (the fp32 copy, 4 B per
/// element), the MulBackward0 of the weight save the 16-bit normalized tensor (2 B), and
/// ToCopyBackward0 nothing: 6 B per element where Korthikanti counts the 2 B input
/// (ModelArch::rms_norm_saved_bytes; 8 for Gemma, GPT-OSS and T5; 8 under fp32 training). Per block:
/// min(norms, 2) x (saved - b_a) + the further norms' saved bytes, times sbh (/t with sequence
/// parallelism), + q_norm and k_norm over the query and key widths (saved x sb(a + kv)d / t).
/// MLA's q_a/kv_a layernorms are not counted (no reading counts them).
uint64_t rms_norm_saved_activation_bytes(const ModelArch& arch, int64_t s, int64_t b, int64_t t, bool sequence_parallel,
                                         bool fp32);

/// The LM head's logits and the causal-LM cross-entropy, per GPU (pipeline's last stage),
/// at three moments. n = b·s·V/t elements, n1 = b·(s-1)·V/t (the shifted logits), b_m the
/// model dtype's bytes; `half` a 16-bit model (HF upcasts its logits to fp32; an fp32 model's
/// .float() returns the tensor itself). torch's cross_entropy is log_softmax + nll_loss
/// (aten/src/ATen/native/LossNLL.cpp cross_entropy_loss_symint); LogSoftmaxBackward0 saves
/// only its output (tools/autograd/derivatives.yaml _log_softmax: result), ToCopyBackward0
/// nothing, so the upcast logits are freed when the loss returns, and the HF Trainer drops the
/// model's output (trainer.py compute_loss returns the loss only) before accelerator.backward.
///  - forward: b_m·n (16-bit logits, live to the model's return; from transformers 4.46 the
///    upcast is in loss_utils.py ForCausalLMLoss) + 4n (the upcast) [+ 4·n1, shift_logits'
///    .contiguous() copy, transformers < 4.49] + 4·(n1 or n) (the log-softmax output); before
///    4.46 (LlamaForCausalLM.forward upcasts) the 16-bit logits die at the upcast: the larger of
///    b_m·n + 4n and the rest;
///  - loss_backward: 12·(n1 or n): the saved log-softmax output, NllLossBackward0's fp32
///    gradient (nll_loss_backward: grad_input zeros of the input's shape) and
///    LogSoftmaxBackward0's (_log_softmax_backward_data) fp32 gradient of its input, beside
///    each other;
///  - head_backward: the estimator's bound for the LM head's matmul backward, no less than
///    (b_m + 8)·n (kept: with it the public LLaDA-8B ZeRO-2 offload OOM is predicted), and the
///    largest moment after those nodes: SliceBackward0's zero-padded 4n
///    beside the 4·n1 it pads (transformers < 4.49), ToCopyBackward0's b_m·n beside the fp32
///    4n it casts (16-bit models), at least the logits' gradient b_m·n that lives through the
///    LM head's matmul backward; the estimator counts the backward's temporaries (the LM
///    head's gradient, ZeRO's buckets) beside it, an upper bound: they appear from the matmul
///    backward on, after the fp32 gradient is freed.
struct LmHeadLossBytes {
    uint64_t forward = 0, loss_backward = 0, head_backward = 0;
};
LmHeadLossBytes lm_head_loss_bytes(int64_t s, int64_t b, int64_t vocab, int64_t t, uint64_t bm, bool half,
                                   bool upcasts_logits_in_model_forward, bool shifts_logits_with_contiguous_copy);

/// A dense decoder's shape for a parameter count alone: GPT-3's width-depth
/// ratio h = 128 L (Brown et al. 2020 Table 2.1: 6.7B 4096 x 32, 175B 12288
/// x 96) with 12 h^2 parameters per layer (Korthikanti et al. 2022 Sec. 2):
/// L = round(cbrt(P / (12 * 128^2))), h = round(sqrt(P / (12 L))), heads
/// round(h / 128).
struct DenseShape {
    int64_t layers = 0, hidden = 0, heads = 0;
};
DenseShape dense_decoder_shape(uint64_t params);

/// The activation bytes per GPU such a decoder stores at `in`'s micro batch,
/// sequence, checkpointing, attention, dtype and tp/pp (Korthikanti's
/// per-layer formula, activation_bytes_per_layer, for L / pp layers, one
/// recomputed layer under full checkpointing, and 5 sbh for the embedding
/// output and final norm; the logits are left out: the vocabulary is
/// unknown). Sets `how` to the derivation.
uint64_t dense_decoder_allowance(const EstimateInput& in, std::string& how);

/// The attention-score bytes per as²b that eager attention stores in a
/// layer: Korthikanti's 5 (softmax output 2, dropout output 2, dropout mask
/// 1) with attention dropout (p > 0), 4 without (no mask).
double attention_score_factor(const ModelArch& arch);

/// LoRA adapter parameters: rank r x (in + out) for each targeted projection
/// (comma list of q,k,v,o,gate,up,down) in every layer. Throws InputError
/// naming --lora-target for an unknown projection.

}  // namespace zeromem
