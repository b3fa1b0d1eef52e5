// The module tree of a dense decoder, as DeepSpeed's per-module hooks see it
// (parameter_offload.py registers hooks on every module; a module's own
// parameters are fetched and released together, partitioned_param_coordinator.py
// fetch_sub_module / release_sub_module). Counts follow model.cpp.
#include "zeromem/simulator.h"

#include "zeromem/util.h"

namespace zeromem::sim {

using zeromem::InputError;

namespace {

uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }

void add(std::vector<SimModule>& out, std::string name, const char* role, int layer, std::vector<uint64_t> params) {
    SimModule m;
    m.name = std::move(name);
    m.role = role;
    m.layer = layer;
    m.params = std::move(params);
    out.push_back(std::move(m));
}

// weight (+ bias) of a linear in -> out.
std::vector<uint64_t> linear(uint64_t in, uint64_t out, bool bias) {
    if (bias) return {in * out, out};
    return {in * out};
}

// Multi-head latent attention as transformers' DeepseekV2Attention builds
// it (modeling_deepseek_v2.py): q_proj h x a(nope+rope), or q_a_proj h x r_q
// (+ bias), q_a_layernorm r_q, q_b_proj r_q x a(nope+rope); then
// kv_a_proj_with_mqa h x (r_kv + rope) (+ bias), kv_a_layernorm r_kv,
// kv_b_proj r_kv x a(nope + v), o_proj a·v x h (+ bias); attention_bias
// applies to q_a, kv_a and o (estimator param_count.cpp count_attention).
void add_mla_attention(std::vector<SimModule>& out, const ModelArch& a, int i) {
    const uint64_t h = u(a.hidden_size), heads = u(a.num_heads);
    const uint64_t qk = u(a.qk_nope_head_dim + a.qk_rope_head_dim), rkv = u(a.kv_lora_rank);
    const bool b = a.attn_out_bias;
    const std::string p = "model.layers." + std::to_string(i) + ".self_attn.";
    if (a.q_lora_rank > 0) {
        const uint64_t rq = u(a.q_lora_rank);
        add(out, p + "q_a_proj", "mla_q_a_proj", i, linear(h, rq, b));
        add(out, p + "q_a_layernorm", "mla_q_a_layernorm", i, {rq});
        add(out, p + "q_b_proj", "mla_q_b_proj", i, linear(rq, heads * qk, false));
    } else {
        add(out, p + "q_proj", "q_proj", i, linear(h, heads * qk, false));
    }
    add(out, p + "kv_a_proj_with_mqa", "mla_kv_a_proj_with_mqa", i, linear(h, rkv + u(a.qk_rope_head_dim), b));
    add(out, p + "kv_a_layernorm", "mla_kv_a_layernorm", i, {rkv});
    add(out, p + "kv_b_proj", "mla_kv_b_proj", i, linear(rkv, heads * u(a.qk_nope_head_dim + a.v_head_dim), false));
    add(out, p + "o_proj", "o_proj", i, linear(heads * u(a.v_head_dim), h, b));
}

// One expert MLP of width f (gate, up, down in the order its forward runs),
// each a module of its own. Mixtral names them w1 (gate), w3 (up) and w2
// (down) (modeling_mixtral.py MixtralBlockSparseTop2MLP); Qwen-MoE and
// DeepSeek gate_proj, up_proj, down_proj.
void add_expert_mlp(std::vector<SimModule>& out, const ModelArch& a, int i, const std::string& p, const char* kind,
                    uint64_t f, bool bias, int expert) {
    const uint64_t h = u(a.hidden_size);
    const bool w = a.family == "mixtral" || a.model_type == "mixtral";
    const std::string k(kind);
    if (a.gated_mlp) add(out, p + (w ? "w1" : "gate_proj"), (k + "_gate_proj").c_str(), i, linear(h, f, bias));
    add(out, p + (w ? "w3" : "up_proj"), (k + "_up_proj").c_str(), i, linear(h, f, bias));
    add(out, p + (w ? "w2" : "down_proj"), (k + "_down_proj").c_str(), i, linear(f, h, bias));
    for (size_t m = out.size() - (a.gated_mlp ? 3 : 2); m < out.size(); ++m) out[m].expert = expert;
}

// The routed experts of a block as one module of packed parameters
// (ModelArch::fused_experts: transformers >= 5 MixtralExperts / Qwen3MoeExperts,
// GptOssExperts, Llama4TextExperts): gate_up_proj E x 2f x h (E x f x h without
// a gate), its bias E x 2f, down_proj E x h x f, its bias E x h. ZeRO-3 fetches
// and releases them together, once per block and pass.
void add_packed_experts(std::vector<SimModule>& out, const ModelArch& a, int i, const std::string& name) {
    const uint64_t h = u(a.hidden_size), f = u(a.expert_ffn_size), E = u(a.num_experts);
    const uint64_t in_width = a.gated_mlp ? 2 * f : f;
    std::vector<uint64_t> params = {E * in_width * h};
    if (a.expert_bias) params.push_back(E * in_width);
    params.push_back(E * h * f);
    if (a.expert_bias) params.push_back(E * h);
    add(out, name, "experts_packed", i, std::move(params));
}

// A sparse MoE block in forward order, as transformers runs it: the router
// (gate, Linear(h, E)), every routed expert (experts.N), then the shared
// expert(s) on the block input (DeepseekV2MoE shared_experts; Qwen2-MoE
// shared_expert and its sigmoid shared_expert_gate Linear(h, 1)).
// MixtralSparseMoeBlock is block_sparse_moe; the others are mlp.
void add_moe_block(std::vector<SimModule>& out, const ModelArch& a, int i) {
    const uint64_t h = u(a.hidden_size);
    const bool mixtral = a.family == "mixtral" || a.model_type == "mixtral";
    const std::string p = "model.layers." + std::to_string(i) + (mixtral ? ".block_sparse_moe." : ".mlp.");
    add(out, p + "gate", "moe_router", i, linear(h, u(a.num_experts), a.router_bias));
    if (a.fused_experts) {
        add_packed_experts(out, a, i, p + "experts");
    } else {
        for (int e = 0; e < static_cast<int>(a.num_experts); ++e)
            add_expert_mlp(out, a, i, p + "experts." + std::to_string(e) + ".", "expert", u(a.expert_ffn_size),
                           a.expert_bias, e);
    }
    if (a.shared_expert_ffn_size <= 0) return;
    const bool qwen2 = a.shared_expert_gate;
    add_expert_mlp(out, a, i, p + (qwen2 ? "shared_expert." : "shared_experts."), "shared_expert",
                   u(a.shared_expert_ffn_size), false, -1);
    if (qwen2) add(out, p + "shared_expert_gate", "shared_expert_gate", i, {h});
}

void add_layer(std::vector<SimModule>& out, const ModelArch& a, int i) {
    const uint64_t h = u(a.hidden_size), f = u(a.ffn_size);
    const uint64_t d = u(a.head_dim > 0 ? a.head_dim : a.hidden_size / a.num_heads);
    const uint64_t q = u(a.num_heads) * d, kv = u(a.num_kv_heads) * d;
    const std::vector<uint64_t> norm = a.norm_has_bias ? std::vector<uint64_t>{h, h} : std::vector<uint64_t>{h};
    const std::string p = "model.layers." + std::to_string(i) + ".";
    if (a.norms_per_layer >= 1) add(out, p + "input_layernorm", "input_layernorm", i, norm);
    if (a.kv_lora_rank > 0) {
        add_mla_attention(out, a, i);
    } else if (a.fused_qkv) {
        add(out, p + "self_attn.query_key_value", "qkv_proj", i, linear(h, q + 2 * kv, a.qkv_bias));
    } else {
        add(out, p + "self_attn.q_proj", "q_proj", i, linear(h, q, a.qkv_bias));
        add(out, p + "self_attn.k_proj", "k_proj", i, linear(h, kv, a.qkv_bias));
        add(out, p + "self_attn.v_proj", "v_proj", i, linear(h, kv, a.qkv_bias));
    }
    if (a.kv_lora_rank <= 0 && a.qk_norm) {
        // Qwen3 / Gemma 3: RMSNorm (LayerNorm) over head_dim on q and k (modeling_qwen3_moe.py Qwen3MoeAttention).
        const std::vector<uint64_t> hn = a.norm_has_bias ? std::vector<uint64_t>{d, d} : std::vector<uint64_t>{d};
        add(out, p + "self_attn.q_norm", "q_norm", i, hn);
        add(out, p + "self_attn.k_norm", "k_norm", i, hn);
    }
    // gpt-oss: one learned sink logit per head, a direct parameter of self_attn.
    if (a.attention_sinks) add(out, p + "self_attn", "attention_sinks", i, {u(a.num_heads)});
    if (a.kv_lora_rank <= 0) add(out, p + "self_attn.o_proj", "o_proj", i, linear(q, h, a.attn_out_bias));
    if (a.norms_per_layer >= 2) add(out, p + "post_attention_layernorm", "post_attention_layernorm", i, norm);
    for (int64_t k = 2; k < a.norms_per_layer; ++k)
        add(out, p + "extra_layernorm_" + std::to_string(k), "extra_layernorm", i, norm);
    // The first num_layers - num_moe_layers blocks are dense (DeepSeek
    // first_k_dense_replace with moe_layer_freq 1; Mixtral and Qwen3-MoE have
    // none); other placements (decoder_sparse_step, moe_layer_freq > 1) only
    // reorder the same modules.
    const bool moe = a.num_experts > 0 && a.num_moe_layers > 0 && i >= a.num_layers - a.num_moe_layers;
    if (moe) {
        add_moe_block(out, a, i);
        return;
    }
    if (a.gated_mlp) add(out, p + "mlp.gate_proj", "gate_proj", i, linear(h, f, a.mlp_bias));
    add(out, p + "mlp.up_proj", "up_proj", i, linear(h, f, a.mlp_bias));
    add(out, p + "mlp.down_proj", "down_proj", i, linear(f, h, a.mlp_bias));
}

// The tree must hold exactly count_params(a).total parameters; a layout
// it does not build (vision tower, token types, relative position buckets,
// fused experts, ...) is refused rather than replayed with the wrong sizes.
void check_total(const std::vector<SimModule>& out, const ModelArch& a) {
    uint64_t total = 0;
    for (const auto& m : out)
        for (uint64_t p : m.params) total += p;
    const uint64_t expected = count_params(a).total;
    if (total != expected)
        throw InputError("model '" + a.name + "': the simulator's module tree holds " + std::to_string(total) +
                         " parameters but the model has " + std::to_string(expected) +
                         "; this layout is not replayed (use `zeromem estimate`)");
}

}  // namespace

std::vector<SimModule> build_modules(const ModelArch& a) {
    (void)count_params(a);  // validates every size (throws InputError)
    const uint64_t h = u(a.hidden_size), V = u(a.vocab_size);
    const uint64_t e = a.word_embed_proj_dim > 0 ? u(a.word_embed_proj_dim) : h;
    const std::vector<uint64_t> norm = a.norm_has_bias ? std::vector<uint64_t>{h, h} : std::vector<uint64_t>{h};
    std::vector<SimModule> out;
    out.reserve(static_cast<std::size_t>(a.num_layers) * 10 + 8);
    add(out, "model.embed_tokens", "embed_tokens", -1, {V * e});
    if (a.learned_positions)
        add(out, "model.embed_positions", "embed_positions", -1, {u(a.max_position_embeddings + a.position_offset) * h});
    if (a.embedding_norm) add(out, "model.embedding_layernorm", "embedding_layernorm", -1, {h, h});
    if (e != h) add(out, "model.project_in", "project_in", -1, {e * h});
    for (int i = 0; i < static_cast<int>(a.num_layers); ++i) add_layer(out, a, i);
    if (a.final_norm) add(out, "model.norm", "final_norm", -1, norm);
    if (e != h) add(out, "model.project_out", "project_out", -1, {h * e});
    if (a.tied_embeddings) {
        add(out, "lm_head", "lm_head", -1, a.lm_head_bias ? std::vector<uint64_t>{V} : std::vector<uint64_t>{});
        out.back().shares_params_with = 0;
    } else {
        add(out, "lm_head", "lm_head", -1, linear(e, V, a.lm_head_bias));
    }
    check_total(out, a);
    return out;
}

}  // namespace zeromem::sim
