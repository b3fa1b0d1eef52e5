// Training workloads with more than one model per GPU: SFT (one model, the
// default), DPO (policy + frozen reference), ORPO (policy, chosen and
// rejected pairs) and PPO (actor, critic, reward and reference, plus rollout
// generation with a KV cache). A composition layer over `estimate()`: each
// trained model is one EstimateInput estimated as usual; each frozen model is
// an "inference engine" (deepspeed.initialize without an optimizer: its
// 16-bit parameters, partitioned under ZeRO-3, no gradients, no optimizer
// states, forward-only transients). The per-GPU figure of a phase is the sum
// of every model's share plus one CUDA context (one process per GPU holds
// all of them).
#pragma once

#include "zeromem/estimate.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zeromem {

/// What is trained. sft: one model, today's estimate (default).
enum class Workload { sft, dpo, orpo, ppo };
const char* to_string(Workload w);
/// Parses "sft|dpo|orpo|ppo"; throws InputError naming `field` otherwise.
Workload parse_workload(const std::string& text, const std::string& field);

/// A frozen model run by a DeepSpeed inference engine (no optimizer):
/// `stage` 3 partitions its 16-bit parameters over N_d; stages 0-2 keep a
/// full copy on every GPU (without an optimizer there is nothing for ZeRO-1/2
/// to partition). `offload_param` cpu|nvme (stage 3 only) keeps the
/// partition off the GPU.
struct FrozenModel {
    ModelInfo model;
    int stage = 0;
    OffloadDevice offload_param = OffloadDevice::none;
    /// stage 3: stage3_prefetch_bucket_size of the engine, elements (TRL and
    /// DeepSpeed-Chat: 0.9 h^2 when the hidden size is known).
    int64_t prefetch_bucket = 50000000;
};

/// A second trained model (PPO's critic) with its own ZeRO stage and offload.
struct TrainedModel {
    ModelInfo model;
    int stage = 0;
    OffloadDevice offload_optimizer = OffloadDevice::none;
    OffloadDevice offload_param = OffloadDevice::none;
};

/// PPO rollout generation per GPU.
struct RolloutSettings {
    int64_t batch = 1;        ///< sequences generated at once per GPU (per_device_generation_batch_size)
    int64_t prompt_len = 0;   ///< prompt tokens (max_prompt_seq_len)
    int64_t new_tokens = 0;   ///< generated tokens (max_answer_seq_len)
};

/// Everything beyond the policy's EstimateInput.
struct WorkloadSettings {
    Workload kind = Workload::sft;
    /// dpo: reference log-probs computed before training
    /// (precompute_ref_log_probs): no reference model during training.
    bool precompute_ref_log_probs = false;
    FrozenModel reference;   ///< dpo, ppo: a copy of the initial policy
    TrainedModel critic;     ///< ppo
    FrozenModel reward;      ///< ppo
    RolloutSettings rollout; ///< ppo
};

/// One model's share of one phase: per-GPU bytes (its allocations and their
/// fragmentation allowance, no CUDA context) and its host RAM per node
/// beyond the training processes' baseline (offloaded partitions).
struct ModelShare {
    std::string role;        ///< "policy", "reference", "actor", "critic", "reward"
    std::string activity;    ///< what it does in this phase ("training: backward", "resident", "forward (no_grad)")
    bool trained = false;
    uint64_t gpu_bytes = 0;
    uint64_t host_bytes = 0; ///< per node
};

/// One phase of the workload: every model's share and the sums.
struct WorkloadPhase {
    std::string name;
    std::vector<ModelShare> models;
    uint64_t per_gpu = 0;        ///< Σ shares + one CUDA context, bytes
    uint64_t per_node_gpu = 0;   ///< per_gpu x GPUs per node, bytes
    uint64_t per_node_host = 0;  ///< host RAM per node, bytes
    std::optional<bool> fits_gpu;
    std::optional<bool> fits_host;
};

/// The result: phases in time order, the peak and the verdict on the sum.
struct WorkloadEstimate {
    Workload kind = Workload::sft;
    std::vector<WorkloadPhase> phases;
    std::string peak_phase;          ///< phase with the largest per_gpu
    uint64_t per_gpu = 0;            ///< peak per-GPU bytes
    uint64_t per_node_host = 0;      ///< peak host bytes per node
    std::optional<bool> fits_gpu;    ///< unset when the GPU capacity is unknown
    std::optional<bool> fits_host;   ///< unset when the host capacity is unknown
    Estimate policy;                 ///< the trained policy / actor's own estimate (at 2b for dpo, orpo)
    std::optional<Estimate> critic;  ///< ppo
    std::vector<ExplainTerm> terms;  ///< filled only when asked for
    std::vector<std::string> notes;
};

/// Forward-only working set of a frozen model under no_grad, per GPU, bytes
/// (s tokens, micro batch b, 16-bit width b_m, tensor-parallel t): autograd
/// stores nothing, so one decoder layer's live tensors at a time: the
/// residual stream input and output (2·sbh) plus the larger of attention
/// (q, k, v: sb(h + 2·kv·d)) and the MLP's up/gate outputs (sb·f, x2 gated),
/// all b_m bytes and split over t; then the logits sbV·b_m/t and their fp32
/// log-softmax sbV·4/t when `logits` (a value head gives sb·1 instead).
/// Sources: PyTorch torch.no_grad (no saved tensors); TRL dpo_trainer.py
/// compute_ref_log_probs / concatenated_forward (selective_log_softmax of
/// the logits). Throws InputError for a non-positive size.
uint64_t inference_activation_bytes(const ModelArch& a, int64_t s, int64_t b, int64_t t, uint64_t bm, bool logits);

/// KV cache of generation: beams x batch x tokens x layers x 2 (K and V) x
/// kv heads x head_dim x bytes (HF transformers DynamicCache, one K and one
/// V tensor per layer of shape [batch·beams, kv_heads, tokens, head_dim]),
/// divided over tensor-parallel t (heads are split). To be unified with the
/// KV-cache term of the generation model (--eval-generate) once merged.
uint64_t kv_cache_bytes(const ModelArch& a, int64_t beams, int64_t batch, int64_t tokens, int64_t t, uint64_t bytes);

/// Estimates `w` on the policy input `policy` (its model, cluster, training
/// and ZeRO settings are the policy's / actor's). Throws InputError for
/// impossible inputs (a frozen stage outside 0..3, offload_param below stage
/// 3, a ppo rollout without an architecture, sft). Sources per model: TRL
/// dpo_trainer.py (concatenated_forward: chosen and rejected in one batch of
/// 2b), trl/models/utils.py prepare_deepspeed (reference engine: ZeRO-3 when
/// the policy is ZeRO-3, else stage 0), DeepSpeed-Chat
/// applications/DeepSpeed-Chat/dschat/rlhf/rlhf_engine.py (_init_ref,
/// _init_reward: stage 3 if the actor's / critic's is, else 0).
WorkloadEstimate estimate_workload(const EstimateInput& policy, const WorkloadSettings& w, bool explain = false);

}  // namespace zeromem
