// The parameter tensors of an architecture (speed.h parameter_tensor_count,
// fetched_tensor_count, parameter_tensor_numel): every nn.Parameter grouped by
// shape, as ZeRO-3 hooks, fetches and releases them one module at a time
// (partitioned_param_coordinator.py fetch_sub_module / release_sub_module).
#include "zeromem/model.h"
#include "zeromem/speed.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace zeromem {

namespace {

/// A group of `count` parameter tensors of `numel` elements each.
struct TensorGroup {
    double numel = 0;
    double count = 0;
};

/// Every nn.Parameter of an architecture, grouped by shape, as count_params() sums them (param_count.cpp)
/// but as tensors instead of a total: per layer the attention projections (fused QKV or q, k, v; MLA's
/// q_a/q_b or q_proj, kv_a_proj_with_mqa, kv_b_proj and their norms) and output, their biases, q/k norms
/// and sinks; the dense blocks' MLP matrices (gate, up or fused gate_up, down) and biases; in each MoE
/// block the router and every routed expert's matrices (one nn.Linear each, so one module each for
/// ZeRO-3's hooks and fetches: modeling_mixtral.py MixtralBlockSparseTop2MLP, modeling_qwen3_moe.py
/// Qwen3MoeMLP; fused experts, gpt-oss and Llama 4, hold all of a block's experts in gate_up_proj and
/// down_proj), the shared expert and its gate; the norms' weights (and biases); then the embeddings, their
/// norm, the final norm, an untied LM head and OPT's input/output projections. An encoder-decoder's
/// cross-attention is not listed. At most 32 groups, held without a heap allocation (the planner calls
/// this for every candidate).
struct TensorGroups {
    std::array<TensorGroup, 32> g{};
    size_t size = 0;
    void push_back(TensorGroup t) {
        if (t.count > 0 && t.numel > 0) g[size++] = t;
    }
    const TensorGroup* begin() const { return g.data(); }
    const TensorGroup* end() const { return g.data() + size; }
};

void attention_tensors(const ModelArch& a, double L, TensorGroups& g) {
    const double h = double(a.hidden_size);
    const double norm_tensors = a.norm_has_bias ? 2.0 : 1.0;
    if (a.kv_lora_rank > 0) {  // MLA (count_attention): biases on q_a, kv_a and o_proj with attention_bias
        const double heads = double(a.num_heads), qk = double(a.qk_nope_head_dim + a.qk_rope_head_dim);
        const double bias = a.attn_out_bias ? 1.0 : 0.0;
        if (a.q_lora_rank > 0) {
            const double r = double(a.q_lora_rank);
            g.push_back({h * r, L});
            g.push_back({r, L * (1 + bias)});  // q_a_layernorm (+ q_a_proj's bias)
            g.push_back({r * heads * qk, L});
        } else {
            g.push_back({h * heads * qk, L});
        }
        const double kva = double(a.kv_lora_rank + a.qk_rope_head_dim);
        g.push_back({h * kva, L});
        g.push_back({kva, L * bias});
        g.push_back({double(a.kv_lora_rank), L});  // kv_a_layernorm
        g.push_back({double(a.kv_lora_rank) * heads * double(a.qk_nope_head_dim + a.v_head_dim), L});
        g.push_back({heads * double(a.v_head_dim) * h, L});
        g.push_back({h, L * bias});
        return;
    }
    const double hd = double(a.head_dim > 0 ? a.head_dim : a.hidden_size / std::max<int64_t>(1, a.num_heads));
    const double q = double(a.num_heads) * hd;
    const double kv = double(a.num_kv_heads > 0 ? a.num_kv_heads : a.num_heads) * hd;
    if (a.fused_qkv) {
        g.push_back({h * (q + 2 * kv), L});
        if (a.qkv_bias) g.push_back({q + 2 * kv, L});
    } else {
        g.push_back({h * q, L});
        g.push_back({h * kv, 2 * L});
        if (a.qkv_bias) g.push_back({q, L}), g.push_back({kv, 2 * L});
    }
    g.push_back({q * h, L});
    if (a.attn_out_bias) g.push_back({h, L});
    if (a.qk_norm) g.push_back({hd, 2 * norm_tensors * L});
    if (a.attention_sinks) g.push_back({double(a.num_heads), L});
}

// One MLP of width f on `blocks` blocks, `copies` of it per block (the routed experts), as separate
// matrices or, `fused`, one tensor per kind holding all copies.
void mlp_tensors(const ModelArch& a, double f, double blocks, double copies, bool bias, bool fused, TensorGroups& g) {
    const double h = double(a.hidden_size);
    const double up = a.gated_mlp ? 2.0 : 1.0;
    if (fused) {
        g.push_back({copies * up * h * f, blocks});
        g.push_back({copies * f * h, blocks});
        if (bias) g.push_back({copies * up * f, blocks}), g.push_back({copies * h, blocks});
        return;
    }
    if (a.fused_gate_up && a.gated_mlp)
        g.push_back({2 * h * f, copies * blocks});
    else
        g.push_back({h * f, up * copies * blocks});
    g.push_back({f * h, copies * blocks});
    if (bias) g.push_back({f, up * copies * blocks}), g.push_back({h, copies * blocks});
}

TensorGroups tensor_groups(const ModelArch& a) {
    const double L = double(a.num_layers), h = double(a.hidden_size);
    const bool moe = a.num_experts > 0 && a.num_moe_layers > 0;
    const double moe_blocks = moe ? double(a.num_moe_layers) : 0.0;
    TensorGroups g;
    attention_tensors(a, L, g);
    mlp_tensors(a, double(a.ffn_size), L - moe_blocks, 1, a.mlp_bias, false, g);
    if (moe) {
        const double E = double(a.num_experts);
        g.push_back({h * E, moe_blocks});  // router
        if (a.router_bias) g.push_back({E, moe_blocks});
        mlp_tensors(a, double(a.expert_ffn_size), moe_blocks, E, a.expert_bias, a.fused_experts, g);
        if (a.shared_expert_ffn_size > 0)
            mlp_tensors(a, double(a.shared_expert_ffn_size), moe_blocks, 1, false, false, g);
        if (a.shared_expert_gate) g.push_back({h, moe_blocks});
    }
    const double norm_tensors = a.norm_has_bias ? 2.0 : 1.0;
    g.push_back({h, double(a.norms_per_layer) * norm_tensors * L});
    const double embed_h = a.word_embed_proj_dim > 0 ? double(a.word_embed_proj_dim) : h;
    g.push_back({double(a.vocab_size) * embed_h, 1});
    if (a.learned_positions) g.push_back({double(a.max_position_embeddings + a.position_offset) * h, 1});
    if (a.embedding_norm) g.push_back({h, norm_tensors});
    if (a.final_norm) g.push_back({h, norm_tensors});
    if (!a.tied_embeddings) g.push_back({double(a.vocab_size) * embed_h, 1});
    if (a.word_embed_proj_dim > 0) g.push_back({embed_h * h, 2});
    return g;
}

}  // namespace

double parameter_tensor_count(const ModelInfo& model, const SpeedConstants& k) {
    if (!model.arch) return std::max(1.0, std::ceil(double(model.params) / k.params_per_tensor_unknown_arch));
    double n = 0;
    for (const TensorGroup& t : tensor_groups(*model.arch)) n += t.count;
    return n;
}

double parameter_tensor_numel(const ModelArch& a) {
    double n = 0;
    for (const TensorGroup& t : tensor_groups(a)) n += t.numel * t.count;
    return n;
}

double fetched_tensor_count(const ModelInfo& model, int64_t persistence_threshold, const SpeedConstants& k) {
    if (!model.arch) return std::max(1.0, std::ceil(double(model.params) / k.params_per_tensor_unknown_arch));
    double n = 0;
    for (const TensorGroup& t : tensor_groups(*model.arch))
        if (t.numel >= double(persistence_threshold)) n += t.count;
    return std::max(1.0, n);
}

}  // namespace zeromem
