// Mixture-of-experts and MLA activations of the event producer. Sources:
// transformers modeling_mixtral.py (MixtralSparseMoeBlock.forward),
// modeling_qwen3_moe.py (Qwen3MoeSparseMoeBlock.forward),
// modeling_deepseek_v2.py (DeepseekV2MoE, DeepseekV2Attention); the
// estimator's terms in estimator/src/moe.cpp (hf_terms) and estimate.cpp
// (layer_activation_bytes).
#include "moe_events.h"

#include "zeromem/util.h"

#include <string>

namespace zeromem::sim {

void refuse_unreplayed_moe(const EstimateInput& in) {
    if (in.moe.ep_size)
        throw InputError("--ep-size: the simulator replays Hugging Face's dropless MoE blocks; DeepSpeed-MoE's "
                         "capacity, dispatch and all-to-all buffers and its expert-data-parallel partition are not "
                         "replayed (omit --ep-size, or use `zeromem estimate`)");
}

uint64_t expert_tokens(uint64_t tokens, int64_t experts, int64_t k, int expert) {
    const uint64_t routed = tokens * static_cast<uint64_t>(k), E = static_cast<uint64_t>(experts);
    return routed / E + (static_cast<uint64_t>(expert) < routed % E ? 1 : 0);
}

namespace {

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// One expert MLP's saved tensors for `rows` rows of width f (routed experts
// also keep their input copy and output).
void expert_mlp(const std::string& r, bool routed, bool gated, uint64_t rows, uint64_t h, uint64_t f, uint64_t bm,
                uint64_t sc, std::vector<SavedTensor>& out) {
    const bool first = gated ? r.size() >= 10 && r.compare(r.size() - 10, 10, "_gate_proj") == 0
                             : r.size() >= 8 && r.compare(r.size() - 8, 8, "_up_proj") == 0;
    if (routed && first) out.push_back({"moe_routed_tokens", rows * h * bm});
    if (r.size() >= 10 && r.compare(r.size() - 10, 10, "_gate_proj") == 0) {
        out.push_back({"mlp_gate", sc * 2 * rows * f});
    } else if (r.size() >= 8 && r.compare(r.size() - 8, 8, "_up_proj") == 0) {
        out.push_back({"mlp_up", sc * 2 * rows * f});
    } else {  // _down_proj
        out.push_back({"mlp_activation", sc * 2 * rows * f});
        if (gated) out.push_back({"mlp_product", sc * 2 * rows * f});
        if (routed) out.push_back({"moe_expert_output", rows * h * bm});
    }
}

}  // namespace

bool moe_saved_tensors(const SimModule& m, const ModelArch& a, uint64_t tokens, uint64_t bm, uint64_t sc,
                       std::vector<SavedTensor>& out) {
    const std::string& r = m.role;
    const uint64_t h = static_cast<uint64_t>(a.hidden_size), S = tokens;
    const uint64_t d = static_cast<uint64_t>(a.head_dim > 0 ? a.head_dim : a.hidden_size / a.num_heads);
    if (r == "moe_router") {
        out.push_back({"mlp_input", sc * 2 * S * h});
        out.push_back({"moe_router_logits", S * static_cast<uint64_t>(a.num_experts) * bm});
        out.push_back({"moe_router_probabilities", S * static_cast<uint64_t>(a.num_experts) * 4});
        if (a.mlp_residual_dropout > 0.0) out.push_back({"mlp_dropout_mask", sc * S * h});
    } else if (r == "experts_packed") {
        // One forward over the experts that received tokens (the loop of MixtralExperts.forward, transformers
        // >= 5): per expert, hidden_states[token_idx], the gate_up output [n_j, 2f] (gate and up are its
        // views), the activation and product, and the output kept for the routing-weight product.
        const uint64_t f = static_cast<uint64_t>(a.expert_ffn_size);
        for (int e = 0; e < static_cast<int>(a.num_experts); ++e) {
            const uint64_t rows = expert_tokens(S, a.num_experts, a.num_experts_per_tok, e);
            if (rows == 0) continue;
            out.push_back({"moe_routed_tokens", rows * h * bm});
            out.push_back({"mlp_gate_up", sc * 2 * rows * (a.gated_mlp ? 2 * f : f)});
            out.push_back({"mlp_activation", sc * 2 * rows * f});
            if (a.gated_mlp) out.push_back({"mlp_product", sc * 2 * rows * f});
            out.push_back({"moe_expert_output", rows * h * bm});
        }
    } else if (starts_with(r, "expert_")) {
        const uint64_t rows = expert_tokens(S, a.num_experts, a.num_experts_per_tok, m.expert);
        expert_mlp(r, true, a.gated_mlp, rows, h, static_cast<uint64_t>(a.expert_ffn_size), bm, sc, out);
    } else if (starts_with(r, "shared_expert_") && r != "shared_expert_gate") {
        expert_mlp(r, false, a.gated_mlp, S, h, static_cast<uint64_t>(a.shared_expert_ffn_size), bm, sc, out);
    } else if (r == "mla_q_a_proj") {
        out.push_back({"attention_input", sc * 2 * S * h});
    } else if (r == "mla_q_b_proj") {
        out.push_back({"query", sc * 2 * S * static_cast<uint64_t>(a.num_heads) * d});
    } else if (r == "mla_kv_a_proj_with_mqa") {
        out.push_back({"key", sc * 2 * S * static_cast<uint64_t>(a.num_kv_heads) * d});
    } else if (r == "mla_kv_b_proj") {
        out.push_back({"value", sc * 2 * S * static_cast<uint64_t>(a.num_kv_heads) * d});
    } else if (!(r == "shared_expert_gate" || r == "mla_q_a_layernorm" || r == "mla_kv_a_layernorm" ||
                 r == "attention_sinks")) {
        return false;
    }
    return true;
}

}  // namespace zeromem::sim
