// Mixture-of-experts and multi-head latent attention pieces of the event
// producer (internal to the simulator library): which MoE inputs are
// replayed, and the activations each MoE/MLA module saves for backward.
#pragma once

#include "zeromem/input.h"
#include "zeromem/moe.h"
#include "zeromem/simulator.h"

#include <cstdint>
#include <vector>

namespace zeromem::sim {

/// One tensor a module saves for its backward: allocation name and bytes.
struct SavedTensor {
    const char* term;
    uint64_t bytes;
};

/// Throws InputError naming the key for the MoE inputs the producer does not
/// replay: --ep-size (DeepSpeed-MoE's capacity, dispatch and all-to-all
/// buffers and the expert-data-parallel partition) and fused_experts (all
/// experts of a block as one module, gpt-oss and Llama 4). Dense models and
/// Hugging Face's dropless MoE blocks pass.
void refuse_unreplayed_moe(const EstimateInput& in);

/// Rows (tokens) routed to expert `expert` of a block with `experts` experts,
/// top-k, for `tokens` = micro batch x sequence tokens: the k x tokens routed
/// copies spread evenly, the first (k x tokens) mod E experts one more.
/// Assumption (not a DeepSpeed or transformers fact): routing is balanced;
/// every expert gets tokens whenever k x tokens >= E, so transformers' loop
/// over the experts that received tokens runs every expert.
uint64_t expert_tokens(uint64_t tokens, int64_t experts, int64_t k, int expert);

/// Appends the activations module `m` saves for backward when its role is a
/// MoE or MLA role (moe_router, expert_*, shared_expert_*, mla_*, q_norm,
/// k_norm, shared_expert_gate, attention_sinks) and returns true; false for
/// any other role. `tokens` = s x b, `bm` the model dtype's bytes, `sc` the
/// Korthikanti scale (1 for 16-bit activations, 2 for fp32). Terms and bytes
/// (per block, as zeromem/moe.h moe_activation_terms and estimate.cpp
/// layer_activation_bytes with f = k·f_e + f_shared count them):
///   router: mlp_input 2·S·h·sc, mlp_dropout_mask S·h·sc, moe_router_logits
///     S·E·b_m, moe_router_probabilities S·E·4 (fp32 softmax);
///   expert j (n_j rows): moe_routed_tokens n_j·h·b_m (hidden_states[token_idx]),
///     mlp_gate / mlp_up / mlp_activation / mlp_product 2·n_j·f_e·sc each,
///     moe_expert_output n_j·h·b_m (kept for the routing-weight product);
///   shared expert: mlp_gate / mlp_up / mlp_activation / mlp_product 2·S·f_s·sc;
///   MLA: attention_input (q_a_proj), query (q_b_proj), key
///     (kv_a_proj_with_mqa), value (kv_b_proj) with Korthikanti's widths for
///     head_dim = qk_nope + qk_rope and kv heads = heads, as the estimator.
bool moe_saved_tensors(const SimModule& m, const ModelArch& a, uint64_t tokens, uint64_t bm, uint64_t sc,
                       std::vector<SavedTensor>& out);

}  // namespace zeromem::sim
