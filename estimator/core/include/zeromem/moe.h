// Mixture-of-experts: expert parallelism, and the router and
// routed-token activations of one MoE block.
//
// Two implementations are modelled:
//  - Hugging Face (default, no --ep-size): the experts are ordinary
//    parameters of every rank, tokens are routed dropless (every token goes
//    to its top-k experts); transformers models/mixtral/modeling_mixtral.py
//    (MixtralSparseMoeBlock), qwen3_moe, deepseek_v2 alike.
//  - DeepSpeed-MoE (--ep-size E_p given): deepspeed.moe.layer.MoE with
//    ep_size = E_p. Each rank holds num_experts / E_p experts of every MoE
//    block (deepspeed/moe/layer.py MoE.__init__, num_local_experts); ZeRO
//    partitions the expert parameters over the expert-data-parallel group of
//    N_d / E_p ranks and the others over all N_d ranks
//    (deepspeed/utils/groups.py _create_expert_and_data_parallel;
//    runtime/zero/stage_1_and_2.py, real_dp_process_group of the MoE
//    parameter groups; stage 3 only through AutoEP, engine.py
//    _resolve_zero3_param_placement). Tokens are dispatched with a fixed
//    capacity per expert (deepspeed/moe/sharded_moe.py topkgating, _capacity).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zeromem {
struct EstimateInput;
struct ModelArch;

/// How the model's experts are placed and how tokens reach them.
struct MoeSettings {
    /// --ep-size: DeepSpeed-MoE expert-parallel size E_p. Unset: the
    /// Hugging Face implementation (experts are ordinary parameters, E_p = 1,
    /// dropless routing).
    std::optional<int64_t> ep_size;
    /// --moe-capacity-factor: DeepSpeed-MoE capacity_factor at training time
    /// (deepspeed/moe/layer.py MoE default 1.0).
    double capacity_factor = 1.0;
    /// DeepSpeed-MoE min_capacity (deepspeed/moe/layer.py MoE default 4).
    int64_t min_capacity = 4;
    /// E_p (1 when --ep-size is not given).
    int64_t ep() const { return ep_size.value_or(1); }
    /// True when DeepSpeed-MoE (deepspeed.moe.layer.MoE) runs the MoE blocks.
    bool deepspeed_moe() const { return ep_size.has_value(); }
};

/// One data-parallel rank's parameters split into routed experts and the
/// rest, under expert parallelism (tensor/pipeline size 1).
struct ExpertSplit {
    uint64_t non_expert = 0;     ///< parameters outside the routed experts (attention, router, shared experts, embeddings)
    uint64_t expert_rank = 0;    ///< routed-expert parameters this rank holds: routed_experts / E_p
    uint64_t held = 0;           ///< non_expert + expert_rank
    uint64_t expert_dp = 1;      ///< expert-data-parallel group size N_d / E_p
    /// This rank's ZeRO partition in elements: ceil(non_expert / N_d) +
    /// ceil(expert_rank / (N_d / E_p)).
    uint64_t partition = 0;
};

/// The split for `in` (its model, N_d and MoeSettings). With no
/// architecture or no MoE, everything is non-expert and partition =
/// ceil(Ψ / N_d).
ExpertSplit expert_split(const EstimateInput& in);

/// Throws InputError naming --ep-size when expert parallelism cannot run:
/// E_p < 1, --ep-size > 1 for a dense model or --params only, E_p not
/// dividing num_experts (deepspeed/moe/layer.py MoE.__init__ assert) or N_d
/// (groups.py _create_expert_and_data_parallel, _ensure_divisibility), or
/// with --tp/--pp (not modelled); a capacity factor <= 0 names
/// --moe-capacity-factor.
void validate_moe(const EstimateInput& in);

/// DeepSpeed-MoE expert capacity C in tokens: max(ceil(k · S / E ·
/// capacity_factor), min_capacity) for S tokens of one rank, E experts, top-k
/// (sharded_moe.py _capacity called by topkgating with capacity_factor · k;
/// top1gating/top2gating are k = 1, 2). Throws InputError naming
/// --moe-capacity-factor when C reaches 2^53 tokens (its bytes would
/// overflow 64 bits).
int64_t moe_capacity(int64_t tokens, int64_t experts, int64_t k, double capacity_factor, int64_t min_capacity);

/// One named activation term of a MoE block, per GPU.
struct MoeTerm {
    std::string name;
    std::string formula;
    std::string substituted;
    std::string source;
    uint64_t bytes = 0;        ///< one MoE block
    bool transient = false;    ///< live while one block runs (all-to-all buffers), not stored for backward
};

/// The router and routed-token activations of the MoE blocks for micro
/// batch b and sequence s (S = b·s tokens per rank) with model dtype bytes
/// `bm`. Hugging Face (dropless):
///   router: S·E·(b_m + 4) per block (logits, fp32 softmax)
///   routed token copies: 2·k·S·h·b_m per block (tokens gathered per expert,
///   expert outputs kept for the routing-weight product)
/// DeepSpeed-MoE (capacity C = moe_capacity):
///   router: 4·S·(h + E) per block (fp32 gate input, fp32 gates)
///   dispatch: (E·C + k·S)·h·b_m per block (expert input after the
///   all-to-all, routed outputs kept for the gate product)
///   capacity padding: max(0, E·C - k·S) rows of the routed experts' MLP
///   beyond the k·S rows the Korthikanti term counts, (4 gated | 2 plain)·
///   f_e·b_m per row
///   all-to-all buffers (transient, E_p > 1): 2·E·C·h·b_m (send and receive)
/// Bytes are per MoE block; empty for dense models. Throws InputError for a
/// non-positive batch or sequence.
std::vector<MoeTerm> moe_activation_terms(const ModelArch& arch, const MoeSettings& moe, int64_t micro_batch,
                                          int64_t seq_len, uint64_t bm);

}  // namespace zeromem
