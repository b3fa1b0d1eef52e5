// The module tree of a dense decoder, as DeepSpeed's per-module hooks see it
// (parameter_offload.py registers hooks on every module; a module's own
// parameters are fetched and released together, B.3/B.4 of
// ../shared/reference/simulator_runtime_gui.md). Counts follow model.cpp.
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

void add_layer(std::vector<SimModule>& out, const ModelArch& a, int i) {
    const uint64_t h = u(a.hidden_size), f = u(a.ffn_size);
    const uint64_t d = u(a.head_dim > 0 ? a.head_dim : a.hidden_size / a.num_heads);
    const uint64_t q = u(a.num_heads) * d, kv = u(a.num_kv_heads) * d;
    const std::vector<uint64_t> norm = a.norm_has_bias ? std::vector<uint64_t>{h, h} : std::vector<uint64_t>{h};
    const std::string p = "model.layers." + std::to_string(i) + ".";
    if (a.norms_per_layer >= 1) add(out, p + "input_layernorm", "input_layernorm", i, norm);
    if (a.fused_qkv) {
        add(out, p + "self_attn.query_key_value", "qkv_proj", i, linear(h, q + 2 * kv, a.qkv_bias));
    } else {
        add(out, p + "self_attn.q_proj", "q_proj", i, linear(h, q, a.qkv_bias));
        add(out, p + "self_attn.k_proj", "k_proj", i, linear(h, kv, a.qkv_bias));
        add(out, p + "self_attn.v_proj", "v_proj", i, linear(h, kv, a.qkv_bias));
    }
    add(out, p + "self_attn.o_proj", "o_proj", i, linear(q, h, a.attn_out_bias));
    if (a.norms_per_layer >= 2) add(out, p + "post_attention_layernorm", "post_attention_layernorm", i, norm);
    for (int64_t k = 2; k < a.norms_per_layer; ++k)
        add(out, p + "extra_layernorm_" + std::to_string(k), "extra_layernorm", i, norm);
    if (a.gated_mlp) add(out, p + "mlp.gate_proj", "gate_proj", i, linear(h, f, a.mlp_bias));
    add(out, p + "mlp.up_proj", "up_proj", i, linear(h, f, a.mlp_bias));
    add(out, p + "mlp.down_proj", "down_proj", i, linear(f, h, a.mlp_bias));
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
        add(out, "lm_head", "lm_head", -1, {});
        out.back().shares_params_with = 0;
    } else {
        add(out, "lm_head", "lm_head", -1, {V * e});
    }
    return out;
}

}  // namespace zeromem::sim
