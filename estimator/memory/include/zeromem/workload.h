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
    /// Defaults that follow the trained model's ZeRO choice when the planner
    /// varies it: the reference's stage and offload follow the policy's
    /// (TRL prepare_deepspeed, DeepSpeed-Chat _init_ref), the critic's the
    /// actor's, the reward's stage the critic's (_init_reward).
    bool reference_follows = true;
    bool critic_follows = true;
    bool reward_follows = true;
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
    uint64_t per_gpu = 0;        ///< Σ shares + one process's context, NCCL and cuBLAS terms, bytes
    uint64_t per_node_gpu = 0;   ///< per_gpu x GPUs per node, bytes
    uint64_t per_node_host = 0;  ///< host RAM per node, bytes
    std::optional<bool> fits_gpu;
    std::optional<bool> fits_host;
};

/// The result: phases in time order, the peak and the verdict on the sum.
struct WorkloadEstimate {
    Workload kind = Workload::sft;
    WorkloadSettings settings;       ///< the settings in effect (defaults that follow the policy applied)
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

/// `w` with the defaults that follow the trained model applied to
/// `policy`'s ZeRO stage and offload: reference stage 3 if the policy's is 3,
/// else 0, offload_param cpu when the policy offloads parameters to the CPU;
/// critic at the actor's stage and offload; reward stage 3 if the critic's
/// is 3, else 0. Settings given by flag are kept.
WorkloadSettings effective_workload(const EstimateInput& policy, const WorkloadSettings& w);

/// The memory the planner (compare, plan, fit) judges: estimate(in) when
/// `in.workload` is null or sft; otherwise the policy's estimate with its
/// per_gpu.total, per_node.host_memory, verdicts and peak phase replaced by
/// the workload's sums (estimate_workload), and a note saying so. Throws as
/// estimate() and estimate_workload() do.
Estimate memory_estimate(const EstimateInput& in);

/// One sentence for the planner's output: which models the memory sums and
/// what the speed figures leave out. Empty for sft.
std::string workload_summary(const WorkloadSettings& w);

}  // namespace zeromem
