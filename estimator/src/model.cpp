// Model architectures: exact parameter counts, Hugging Face config.json
// reading, and the presets under data/models/.
//
// The counting follows the module layout of each family's Hugging Face
// transformers implementation (modeling_<family>.py). Only nn.Parameter
// tensors are counted; registered buffers (rotary inv_freq, GPT-2's causal
// mask "attn.bias", ALiBi slopes) are not parameters, even where a
// checkpoint happens to store them.
#include "zeromem/model.h"

#include "model_dropout.h"

#include "zeromem/types.h"
#include "zeromem/util.h"

#include "zeromem_families_json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <set>
#include <sstream>

namespace zeromem {

namespace {

using json = nlohmann::json;
using u64 = uint64_t;

u64 u(int64_t v) { return static_cast<u64>(v); }

void require_positive(const ModelArch& a, const char* field, int64_t v) {
    if (v <= 0)
        throw InputError("model '" + (a.name.empty() ? std::string("<unnamed>") : a.name) + "': " + field +
                         " must be positive, got " + std::to_string(v));
}

void require_non_negative(const ModelArch& a, const char* field, int64_t v) {
    if (v < 0)
        throw InputError("model '" + (a.name.empty() ? std::string("<unnamed>") : a.name) + "': " + field +
                         " must not be negative, got " + std::to_string(v));
}

// Parameters of a linear layer in -> out, with or without bias.
u64 linear(int64_t in, int64_t out, bool bias) { return u(in) * u(out) + (bias ? u(out) : 0); }

}  // namespace

namespace {

// The parts of one block, shared by the dense, MoE and T5 decoder blocks.
struct BlockParts {
    u64 attention = 0;      // self-attention incl. q/k norms and sinks
    u64 dense_mlp = 0;      // MLP of a dense block
    u64 moe = 0;            // router + all routed experts + shared expert (+ its gate)
    u64 one_expert = 0;     // one routed expert
    u64 norms = 0;          // norms of one block
    u64 largest = 0;        // largest single module inside a block
    std::string largest_name;
};

void take_larger(u64& best, std::string& best_name, u64 v, const char* name) {
    if (v > best) {
        best = v;
        best_name = name;
    }
}

// Attention of one block. Standard: q h x a*d, k and v h x kv*d, o a*d x h
// (+ q/k RMSNorm over d, + one sink per head). MLA (DeepSeek-V2/V3,
// modeling_deepseek_v3.py DeepseekV3Attention): q_a h x r_q (+ norm r_q),
// q_b r_q x a*(nope+rope) (or q_proj h x a*(nope+rope) without r_q),
// kv_a_proj_with_mqa h x (r_kv+rope) (+ norm r_kv), kv_b r_kv x a*(nope+v),
// o a*v x h.
void count_attention(const ModelArch& a, BlockParts& p) {
    const int64_t h = a.hidden_size;
    if (a.kv_lora_rank > 0) {
        const int64_t qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
        const bool b = a.attn_out_bias;  // attention_bias: q_a, kv_a and o_proj
        u64 q = 0;
        if (a.q_lora_rank > 0) {
            const u64 qa = linear(h, a.q_lora_rank, b), qb = linear(a.q_lora_rank, a.num_heads * qk, false);
            q = qa + u(a.q_lora_rank) + qb;
            take_larger(p.largest, p.largest_name, qa, "MLA q_a_proj");
            take_larger(p.largest, p.largest_name, qb, "MLA q_b_proj");
        } else {
            q = linear(h, a.num_heads * qk, false);
            take_larger(p.largest, p.largest_name, q, "MLA q_proj");
        }
        const u64 kva = linear(h, a.kv_lora_rank + a.qk_rope_head_dim, b);
        const u64 kvb = linear(a.kv_lora_rank, a.num_heads * (a.qk_nope_head_dim + a.v_head_dim), false);
        const u64 o = linear(a.num_heads * a.v_head_dim, h, b);
        p.attention = q + kva + u(a.kv_lora_rank) + kvb + o;
        take_larger(p.largest, p.largest_name, kva, "MLA kv_a_proj_with_mqa");
        take_larger(p.largest, p.largest_name, kvb, "MLA kv_b_proj");
        take_larger(p.largest, p.largest_name, o, "attention o_proj");
        return;
    }
    const int64_t q_out = a.num_heads * a.head_dim, kv_out = a.num_kv_heads * a.head_dim;
    const u64 q = linear(h, q_out, a.qkv_bias), kv = linear(h, kv_out, a.qkv_bias), o = linear(q_out, h, a.attn_out_bias);
    const u64 qk_norm = a.qk_norm ? 2 * u(a.head_dim) * (a.norm_has_bias ? 2 : 1) : 0;
    p.attention = q + 2 * kv + o + qk_norm + (a.attention_sinks ? u(a.num_heads) : 0);
    if (a.fused_qkv)
        take_larger(p.largest, p.largest_name, q + 2 * kv, "fused qkv projection");
    else
        take_larger(p.largest, p.largest_name, std::max(q, kv), q >= kv ? "attention q_proj" : "attention k_proj");
    take_larger(p.largest, p.largest_name, o, "attention o_proj");
}

u64 mlp_params(int64_t h, int64_t f, bool gated, bool bias) {
    return linear(h, f, bias) * (gated ? 2 : 1) + linear(f, h, bias);
}

void count_mlps(const ModelArch& a, BlockParts& p) {
    const int64_t h = a.hidden_size;
    p.dense_mlp = mlp_params(h, a.ffn_size, a.gated_mlp, a.mlp_bias);
    if (a.num_layers > a.num_moe_layers) {
        if (a.fused_gate_up && a.gated_mlp)
            take_larger(p.largest, p.largest_name, 2 * linear(h, a.ffn_size, a.mlp_bias), "fused gate_up_proj");
        else
            take_larger(p.largest, p.largest_name, linear(h, a.ffn_size, a.mlp_bias), "MLP up/gate projection");
        take_larger(p.largest, p.largest_name, linear(a.ffn_size, h, a.mlp_bias), "MLP down projection");
    }
    if (a.num_experts <= 0 || a.num_moe_layers <= 0) return;
    p.one_expert = mlp_params(h, a.expert_ffn_size, a.gated_mlp, a.expert_bias);
    const u64 router = linear(h, a.num_experts, a.router_bias);
    const u64 shared = a.shared_expert_ffn_size > 0 ? mlp_params(h, a.shared_expert_ffn_size, a.gated_mlp, false) : 0;
    p.moe = router + u(a.num_experts) * p.one_expert + shared + (a.shared_expert_gate ? u(h) : 0);
    if (a.fused_experts) {
        take_larger(p.largest, p.largest_name, u(a.num_experts) * p.one_expert, "fused experts (all experts of a block)");
    } else {
        take_larger(p.largest, p.largest_name, linear(h, a.expert_ffn_size, a.expert_bias), "one expert's up/gate projection");
        take_larger(p.largest, p.largest_name, linear(a.expert_ffn_size, h, a.expert_bias), "one expert's down projection");
    }
    take_larger(p.largest, p.largest_name, router, "MoE router");
    if (shared > 0) take_larger(p.largest, p.largest_name, linear(h, a.shared_expert_ffn_size, false), "shared expert projection");
}

void check_sizes(const ModelArch& a) {
    require_positive(a, "hidden_size", a.hidden_size);
    require_positive(a, "num_layers", a.num_layers);
    require_positive(a, "num_heads", a.num_heads);
    require_positive(a, "num_kv_heads", a.num_kv_heads);
    require_positive(a, "head_dim", a.head_dim);
    if (a.num_moe_layers < a.num_layers) require_positive(a, "ffn_size", a.ffn_size);
    require_positive(a, "vocab_size", a.vocab_size);
    if (a.learned_positions) require_positive(a, "max_position_embeddings", a.max_position_embeddings);
    require_non_negative(a, "norms_per_layer", a.norms_per_layer);
    require_non_negative(a, "position_offset", a.position_offset);
    require_non_negative(a, "word_embed_proj_dim", a.word_embed_proj_dim);
    require_non_negative(a, "num_moe_layers", a.num_moe_layers);
    require_non_negative(a, "num_decoder_layers", a.num_decoder_layers);
    if (a.num_moe_layers > a.num_layers || a.num_decoder_layers > a.num_layers)
        throw InputError("model '" + a.name + "': more MoE or decoder blocks than num_layers " +
                         std::to_string(a.num_layers));
    if (a.num_experts > 0 && a.num_moe_layers > 0) {
        require_positive(a, "expert_ffn_size", a.expert_ffn_size);
        require_positive(a, "num_experts_per_tok", a.num_experts_per_tok);
        if (a.num_experts_per_tok > a.num_experts)
            throw InputError("model '" + a.name + "': num_experts_per_tok " + std::to_string(a.num_experts_per_tok) +
                             " is more than num_experts " + std::to_string(a.num_experts));
    }
    if (a.kv_lora_rank > 0) {
        require_positive(a, "qk_nope_head_dim", a.qk_nope_head_dim);
        require_positive(a, "v_head_dim", a.v_head_dim);
        require_non_negative(a, "qk_rope_head_dim", a.qk_rope_head_dim);
    }
    // Each size below 2^31 keeps products of two sizes within int64.
    for (const auto& [field, v] : {std::pair<const char*, int64_t>{"hidden_size", a.hidden_size},
                                   {"num_layers", a.num_layers}, {"num_heads", a.num_heads},
                                   {"num_kv_heads", a.num_kv_heads}, {"head_dim", a.head_dim},
                                   {"ffn_size", a.ffn_size}, {"vocab_size", a.vocab_size},
                                   {"max_position_embeddings", a.max_position_embeddings},
                                   {"norms_per_layer", a.norms_per_layer}, {"position_offset", a.position_offset},
                                   {"word_embed_proj_dim", a.word_embed_proj_dim}, {"num_experts", a.num_experts},
                                   {"num_experts_per_tok", a.num_experts_per_tok},
                                   {"expert_ffn_size", a.expert_ffn_size},
                                   {"shared_expert_ffn_size", a.shared_expert_ffn_size},
                                   {"q_lora_rank", a.q_lora_rank}, {"kv_lora_rank", a.kv_lora_rank},
                                   {"qk_nope_head_dim", a.qk_nope_head_dim}, {"qk_rope_head_dim", a.qk_rope_head_dim},
                                   {"v_head_dim", a.v_head_dim}})
        if (v > 2147483647)
            throw InputError("model '" + (a.name.empty() ? std::string("<unnamed>") : a.name) + "': " + field +
                             " is too large: " + std::to_string(v) + " (at most 2147483647)");
}

// Input embedding: tokens, learned positions, token types, embedding norm,
// OPT's project_in/out.
u64 count_embedding(const ModelArch& a, u64& largest, std::string& largest_name) {
    const int64_t h = a.hidden_size;
    const int64_t e = a.word_embed_proj_dim > 0 ? a.word_embed_proj_dim : h;
    u64 emb = u(a.vocab_size) * u(e);
    if (a.learned_positions) {
        const u64 pos = u(a.max_position_embeddings + a.position_offset) * u(h);
        emb += pos;
        take_larger(largest, largest_name, pos, "position embedding");
    }
    emb += u(a.type_vocab_size) * u(h);
    if (a.embedding_norm) emb += 2 * u(h);
    if (e != h) {
        emb += 2 * u(e) * u(h);
        take_larger(largest, largest_name, u(e) * u(h), "embedding projection");
    }
    return emb;
}

// Final norm of each stack, then the LM head (untied weight, bias) or, for
// encoder-only models, the pooler and masked-LM head. Sets c.lm_head and
// appends to c.blocks; returns the parameters other than c.lm_head.
u64 count_heads(const ModelArch& a, u64 stacks, ParamCount& c, u64& largest, std::string& largest_name) {
    const int64_t h = a.hidden_size;
    const int64_t e = a.word_embed_proj_dim > 0 ? a.word_embed_proj_dim : h;
    const u64 norm = a.norm_has_bias ? 2 * u(h) : u(h);
    u64 tail = 0;
    if (a.final_norm) {
        c.blocks.push_back({"final norm", stacks, norm});
        tail += stacks * norm;
    }
    if (a.encoder_only) {
        if (a.pooler) {
            c.blocks.push_back({"pooler", 1, linear(h, h, true)});
            tail += linear(h, h, true);
        }
        if (a.mlm_head) {
            const u64 mlm = linear(h, h, true) + 2 * u(h) + u(a.vocab_size);  // decoder weight tied to the embedding
            c.blocks.push_back({"masked-LM head (decoder tied)", 1, mlm});
            tail += mlm;
        }
        return tail;
    }
    if (!a.tied_embeddings) c.lm_head = u(a.vocab_size) * u(e);
    if (a.lm_head_bias) c.lm_head += u(a.vocab_size);
    if (c.lm_head > 0) {
        c.blocks.push_back({a.tied_embeddings ? "LM head bias (weight tied)" : "LM head", 1, c.lm_head});
        take_larger(largest, largest_name, c.lm_head, "LM head");
    }
    return tail;
}

}  // namespace

// Counts the parameters in double first and refuses sizes whose integer
// count would overflow (far beyond any real model); throws InputError.
static void check_count_fits(const ModelArch& a) {
    const int64_t h = a.hidden_size;
    const int64_t e = a.word_embed_proj_dim > 0 ? a.word_embed_proj_dim : h;
    const int64_t q_out = a.num_heads * a.head_dim, kv_out = a.num_kv_heads * a.head_dim;
    const double H = double(h), Q = double(q_out), KV = double(kv_out), F = double(a.ffn_size);
    const double layer = H * (Q + 2 * KV) + Q * H + 3 * H * F + double(a.norms_per_layer) * 2 * H;
    // MoE blocks: router, every routed expert and the shared expert; MLA's
    // low-rank projections.
    const double moe = a.num_experts > 0 ? double(a.num_moe_layers) *
                                               (H * double(a.num_experts) +
                                                3 * H * (double(a.num_experts) * double(a.expert_ffn_size) +
                                                         double(a.shared_expert_ffn_size)))
                                         : 0.0;
    const double mla = double(a.num_layers) * (double(a.q_lora_rank) + double(a.kv_lora_rank)) *
                       (H + double(a.num_heads) * double(a.head_dim + a.v_head_dim));
    const double approx = double(a.num_layers) * layer + moe + mla + 2 * double(a.vocab_size) * double(e) +
                          double(a.max_position_embeddings + a.position_offset) * H + 2 * double(e) * H;
    if (!(approx < 1e17)) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3g", approx);
        throw InputError("model '" + (a.name.empty() ? std::string("<unnamed>") : a.name) +
                         "': its sizes give about " + buf + " parameters, more than zeromem counts (1e17)");
    }
}

// Layout counted (per family the fields are set by arch_from_hf_config):
//   embedding  = V x e (e = word_embed_proj_dim if set, else h)
//              + (max_position_embeddings + position_offset) x h   if learned_positions
//              + type_vocab_size x h                               (BERT token types)
//              + 2h                                                if embedding_norm (BLOOM, BERT)
//              + 2 x (e x h)                                       if e != h (OPT project_in/out, no bias)
//   attention  = q: h x (a*d) [+a*d], k and v: h x (kv*d) [+kv*d] each  (qkv_bias)
//              + o: (a*d) x h [+h]                                      (attn_out_bias)
//              + q_norm, k_norm: d each (qk_norm) + a sinks (gpt-oss); or MLA (count_attention)
//   dense MLP  = gated: gate, up h x f [+f each], down f x h [+h]       (mlp_bias)
//                plain: up h x f [+f], down f x h [+h]
//   MoE        = router h x E [+E] + E experts (MLP of width f_e) + shared MLP [+ h gate]
//   block      = attention + (dense MLP or MoE) + norms_per_layer x (h, or 2h with norm_has_bias);
//                a T5 decoder block adds cross-attention and one more norm
//   final norm = h or 2h if final_norm (twice for encoder-decoder: one per stack)
//   lm_head    = V x e [+V] unless tied; encoder-only: pooler / masked-LM head instead
//   vision     = vision_layers x vision_block_params + vision_other_params + projector_params
ParamCount count_params(const ModelArch& a) {
    check_sizes(a);
    const int64_t h = a.hidden_size;
    const int64_t e = a.word_embed_proj_dim > 0 ? a.word_embed_proj_dim : h;
    const u64 norm = a.norm_has_bias ? 2 * u(h) : u(h);

    check_count_fits(a);
    ParamCount c;
    std::string largest_name = "token embedding";
    u64 largest = u(a.vocab_size) * u(e);
    c.embedding = count_embedding(a, largest, largest_name);
    c.blocks.push_back({"embedding", 1, c.embedding});

    // Blocks.
    BlockParts p;
    count_attention(a, p);
    count_mlps(a, p);
    p.norms = u(a.norms_per_layer) * norm;
    const u64 dense_block = p.attention + p.dense_mlp + p.norms;
    const u64 moe_block = p.attention + p.moe + p.norms;
    const u64 n_moe = a.num_experts > 0 ? u(a.num_moe_layers) : 0;
    const u64 n_dec = u(a.num_decoder_layers);
    const u64 n_dense = u(a.num_layers) - n_moe - n_dec;
    u64 blocks_total = 0;
    if (n_dec > 0) {
        const u64 dec_block = dense_block + p.attention + norm;  // + cross-attention and its norm
        c.blocks.push_back({"encoder block", n_dense, dense_block});
        c.blocks.push_back({"decoder block (self + cross attention)", n_dec, dec_block});
        blocks_total = n_dense * dense_block + n_dec * dec_block;
        c.per_layer = dec_block;
    } else {
        const char* dense_name = a.encoder_only ? "encoder block" : "decoder block";
        if (n_dense > 0) c.blocks.push_back({n_moe > 0 ? "decoder block (dense MLP)" : dense_name, n_dense, dense_block});
        if (n_moe > 0) c.blocks.push_back({"decoder block (MoE)", n_moe, moe_block});
        blocks_total = n_dense * dense_block + n_moe * moe_block;
        c.per_layer = n_moe > 0 ? moe_block : dense_block;
    }
    take_larger(largest, largest_name, p.largest, p.largest_name.c_str());
    if (a.relative_attention_buckets > 0) {
        const u64 stacks = n_dec > 0 ? 2 : 1;
        c.blocks.push_back({"relative attention bias", stacks, u(a.relative_attention_buckets) * u(a.num_heads)});
        blocks_total += stacks * u(a.relative_attention_buckets) * u(a.num_heads);
    }

    const u64 tail = count_heads(a, n_dec > 0 ? 2 : 1, c, largest, largest_name);

    // Vision tower and projector.
    if (a.vision_layers > 0 || a.vision_other_params > 0 || a.projector_params > 0) {
        c.blocks.push_back({"vision block", u(a.vision_layers), a.vision_block_params});
        c.blocks.push_back({"vision embeddings, norms and mergers", 1, a.vision_other_params});
        if (a.projector_params > 0) c.blocks.push_back({"vision-to-text projector", 1, a.projector_params});
        c.vision = u(a.vision_layers) * a.vision_block_params + a.vision_other_params + a.projector_params;
        take_larger(largest, largest_name, a.vision_largest_module, "vision module");
    }

    c.total = c.embedding + blocks_total + tail + c.lm_head + c.vision;
    c.active = c.total - n_moe * u(a.num_experts - a.num_experts_per_tok) * p.one_expert;
    c.one_expert = n_moe > 0 ? p.one_expert : 0;
    c.routed_experts = n_moe * u(a.num_experts) * c.one_expert;
    c.largest_module = largest;
    c.largest_module_name = largest_name;
    return c;
}

int64_t active_ffn_width(const ModelArch& a) {
    if (a.num_experts > 0 && a.num_moe_layers > 0)
        return a.num_experts_per_tok * a.expert_ffn_size + a.shared_expert_ffn_size;
    return a.ffn_size;
}

namespace {

std::string type_name(const json& v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number_float()) return "a non-integer number";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_array()) return "an array";
    return "an object";
}

std::string show(const json& v) {
    std::string s = v.dump();
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return s;
}

// Reads a config.json the way transformers' config classes do: a key may
// have several spellings, a null value means "use the default".
class ConfigReader {
public:
    ConfigReader(const json& cfg, const std::string& source) : cfg_(cfg), source_(source) {}

    // The first of `keys` present with a non-null value, or nullptr. Every
    // key asked for is remembered as understood (see unread_count_keys).
    const json* find(std::initializer_list<const char*> keys, const char** found = nullptr) const {
        for (const char* k : keys) {
            asked_.insert(k);
            auto it = cfg_.find(k);
            if (it != cfg_.end() && !it->is_null()) {
                if (found) *found = k;
                return &*it;
            }
        }
        return nullptr;
    }

    bool has(std::initializer_list<const char*> keys) const { return find(keys) != nullptr; }

    int64_t integer(std::initializer_list<const char*> keys) const {
        const char* key = nullptr;
        const json* v = find(keys, &key);
        if (!v) {
            std::string msg = source_ + ": missing key '" + *keys.begin() + "'";
            if (keys.size() > 1) {
                msg += " (or";
                bool first = true;
                for (const char* k : keys) {
                    if (first) { first = false; continue; }
                    msg += std::string(" '") + k + "'";
                }
                msg += ")";
            }
            throw InputError(msg + " needed to size the model");
        }
        return to_int(*v, key);
    }

    int64_t integer_or(std::initializer_list<const char*> keys, int64_t fallback) const {
        const char* key = nullptr;
        const json* v = find(keys, &key);
        return v ? to_int(*v, key) : fallback;
    }

    bool boolean_or(std::initializer_list<const char*> keys, bool fallback) const {
        const char* key = nullptr;
        const json* v = find(keys, &key);
        if (!v) return fallback;
        if (!v->is_boolean())
            throw InputError(source_ + ": key '" + key + "' must be true or false, got " + type_name(*v) + " " +
                             show(*v));
        return v->get<bool>();
    }

    const std::string& source() const { return source_; }
    const json& config() const { return cfg_; }
    bool asked(const std::string& key) const { return asked_.count(key) > 0; }
    void mark_read(const std::string& key) const { asked_.insert(key); }

    // Integer for a canonical key name, looked up with the family's aliases
    // (data/architectures/families.json "aliases") and default ("defaults").
    int64_t fam_integer(const json& fam, const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
        const std::vector<std::string> keys = spellings(fam, key);
        for (const auto& k : keys) {
            asked_.insert(k);
            auto it = cfg_.find(k);
            if (it != cfg_.end() && !it->is_null()) return to_int(*it, k.c_str());
        }
        if (auto d = family_default(fam, key); d && d->is_number() && (size_defaults_ || !is_size_key(key))) {
            defaulted_.push_back(key + " = " + d->dump());
            return to_int(*d, key.c_str());
        }
        if (fallback) return *fallback;
        std::string msg = source_ + ": missing key '" + key + "'";
        if (keys.size() > 1) {
            msg += " (or";
            for (std::size_t i = 1; i < keys.size(); ++i) msg += " '" + keys[i] + "'";
            msg += ")";
        }
        throw InputError(msg + " needed to size the model");
    }

    bool fam_boolean(const json& fam, const std::string& key, bool fallback = false) const {
        asked_.insert(key);
        auto it = cfg_.find(key);
        if (it != cfg_.end() && !it->is_null()) {
            if (!it->is_boolean())
                throw InputError(source_ + ": key '" + key + "' must be true or false, got " + type_name(*it) + " " +
                                 show(*it));
            return it->get<bool>();
        }
        if (auto d = family_default(fam, key); d && d->is_boolean()) return d->get<bool>();
        return fallback;
    }

private:
    static std::vector<std::string> spellings(const json& fam, const std::string& key) {
        std::vector<std::string> keys{key};
        if (fam.contains("aliases") && fam["aliases"].contains(key))
            for (const auto& k : fam["aliases"][key]) keys.push_back(k.get<std::string>());
        return keys;
    }
    static std::optional<json> family_default(const json& fam, const std::string& key) {
        if (fam.contains("defaults") && fam["defaults"].contains(key)) return fam["defaults"][key];
        return std::nullopt;
    }

    int64_t to_int(const json& v, const char* key) const {
        // No real value comes near 2^40 (published counts included); the bound
        // keeps derived sizes such as 4h far from int64 overflow.
        constexpr int64_t kMax = int64_t(1) << 40;
        if (v.is_number_integer()) {
            if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(kMax)
                                       : (v.get<int64_t>() > kMax || v.get<int64_t>() < -kMax))
                throw InputError(source_ + ": key '" + key + "' is too large: " + show(v) + " (at most " +
                                 std::to_string(kMax) + ")");
            return v.get<int64_t>();
        }
        if (v.is_number_float()) {
            const double d = v.get<double>();
            if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) <= double(kMax)) return static_cast<int64_t>(d);
        }
        throw InputError(source_ + ": key '" + key + "' must be an integer, got " + type_name(v) + " " + show(v));
    }

    const json& cfg_;
    std::string source_;
    mutable std::set<std::string> asked_;
    mutable std::vector<std::string> defaulted_;

    bool size_defaults_ = false;

public:
    /// Keys absent from the config that took the family's documented default.
    const std::vector<std::string>& defaulted() const { return defaulted_; }
    /// Lets absent model sizes take the family defaults: only for a wrapper's
    /// text_config (LLaVA's often gives only vocab_size), with a warning; a
    /// top-level config missing a size is refused.
    void allow_size_defaults() { size_defaults_ = true; }
    static bool is_size_key(const std::string& key) {
        return key == "hidden_size" || key == "num_hidden_layers" || key == "num_attention_heads" ||
               key == "intermediate_size" || key == "vocab_size";
    }
    /// MoE and MLA keys whose family default changes the count: a default
    /// taken for one (absent or null) is warned about.
    static bool is_count_key(const std::string& key) {
        static const std::set<std::string> keys{
            "num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
            "shared_expert_intermediate_size", "n_shared_experts", "decoder_sparse_step", "first_k_dense_replace",
            "moe_layer_freq", "interleave_moe_layer_step", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
            "qk_rope_head_dim", "v_head_dim"};
        return keys.count(key) > 0;
    }
    /// True when `key` is in the config with a non-null value.
    bool given(const std::string& key) const { return cfg_.contains(key) && !cfg_[key].is_null(); }
};

// Fills the shared sizes; positive-size checks are left to count_params.
void read_heads(ModelArch& a, const ConfigReader& r, std::initializer_list<const char*> head_keys) {
    a.num_heads = r.integer(head_keys);
    if (a.num_heads <= 0)
        throw InputError(r.source() + ": key '" + *head_keys.begin() + "' must be positive, got " +
                         std::to_string(a.num_heads));
}

int64_t default_head_dim(const ModelArch& a, const ConfigReader& r) {
    if (a.hidden_size % a.num_heads != 0)
        throw InputError(r.source() + ": hidden size " + std::to_string(a.hidden_size) +
                         " is not divisible by the number of heads " + std::to_string(a.num_heads) +
                         " (set 'head_dim')");
    return a.hidden_size / a.num_heads;
}

// GPT-2 (modeling_gpt2.py): learned positions, fused c_attn, LayerNorms,
// biases everywhere, LM head tied to wte.
void read_gpt2(ModelArch& a, const ConfigReader& r) {
    a.family = "gpt2";
    a.hidden_size = r.integer({"n_embd", "hidden_size"});
    a.num_layers = r.integer({"n_layer", "num_hidden_layers"});
    read_heads(a, r, {"n_head", "num_attention_heads"});
    a.num_kv_heads = a.num_heads;
    a.head_dim = default_head_dim(a, r);
    a.ffn_size = r.integer_or({"n_inner"}, 4 * a.hidden_size);
    a.vocab_size = r.integer({"vocab_size"});
    a.max_position_embeddings = r.integer({"n_positions", "max_position_embeddings"});
    a.learned_positions = true;
    a.tied_embeddings = r.boolean_or({"tie_word_embeddings"}, true);
    a.qkv_bias = a.attn_out_bias = a.mlp_bias = true;
    a.norm_has_bias = true;
    a.norms_per_layer = 2;
    a.fused_qkv = true;
}

// OPT (modeling_opt.py): learned positions with 2 offset rows, separate
// q/k/v/out projections, fc1/fc2, optional project_in/out.
void read_opt(ModelArch& a, const ConfigReader& r) {
    a.family = "opt";
    a.hidden_size = r.integer({"hidden_size"});
    a.num_layers = r.integer({"num_hidden_layers"});
    read_heads(a, r, {"num_attention_heads"});
    a.num_kv_heads = a.num_heads;
    a.head_dim = default_head_dim(a, r);
    a.ffn_size = r.integer({"ffn_dim"});
    a.vocab_size = r.integer({"vocab_size"});
    a.max_position_embeddings = r.integer({"max_position_embeddings"});
    a.learned_positions = true;
    a.position_offset = 2;  // OPTLearnedPositionalEmbedding: num_embeddings + 2
    const int64_t proj = r.integer_or({"word_embed_proj_dim"}, a.hidden_size);
    a.word_embed_proj_dim = proj == a.hidden_size ? 0 : proj;
    a.tied_embeddings = r.boolean_or({"tie_word_embeddings"}, true);
    const bool bias = r.boolean_or({"enable_bias"}, true);
    a.qkv_bias = a.attn_out_bias = a.mlp_bias = bias;
    const bool affine = r.boolean_or({"layer_norm_elementwise_affine"}, true);
    a.norm_has_bias = true;
    a.norms_per_layer = affine ? 2 : 0;
    // The decoder's final_layer_norm exists only for pre-LN models (OPT-350m
    // is post-LN) and unless _remove_final_layer_norm is set.
    a.final_norm = affine && r.boolean_or({"do_layer_norm_before"}, true) &&
                   !r.boolean_or({"_remove_final_layer_norm"}, false);
}

// GPT-NeoX / Pythia (modeling_gpt_neox.py): rotary, fused query_key_value,
// two LayerNorms per layer (parallel residual or not), untied embed_out.
void read_gpt_neox(ModelArch& a, const ConfigReader& r) {
    a.family = "gpt_neox";
    a.hidden_size = r.integer({"hidden_size"});
    a.num_layers = r.integer({"num_hidden_layers"});
    read_heads(a, r, {"num_attention_heads"});
    a.num_kv_heads = a.num_heads;
    a.head_dim = default_head_dim(a, r);
    a.ffn_size = r.integer({"intermediate_size"});
    a.vocab_size = r.integer({"vocab_size"});
    a.max_position_embeddings = r.integer_or({"max_position_embeddings"}, 0);
    a.tied_embeddings = r.boolean_or({"tie_word_embeddings"}, false);
    a.qkv_bias = a.attn_out_bias = r.boolean_or({"attention_bias"}, true);
    a.mlp_bias = true;
    a.norm_has_bias = true;
    a.norms_per_layer = 2;  // input_layernorm and post_attention_layernorm either way
    (void)r.boolean_or({"use_parallel_residual"}, true);  // type-checked; no effect on the count
    a.fused_qkv = true;
}

// Falcon (modeling_falcon.py; RefinedWeb/RefinedWebModel are the names of
// the original remote-code configs): fused query_key_value sized by the
// attention layout, parallel attention, `bias` switches all linear biases.
void read_falcon(ModelArch& a, const ConfigReader& r, const std::string& model_type) {
    a.family = "falcon";
    a.hidden_size = r.integer({"hidden_size", "n_embd"});
    a.num_layers = r.integer({"num_hidden_layers", "n_layer"});
    read_heads(a, r, {"num_attention_heads", "n_head"});
    a.head_dim = default_head_dim(a, r);
    // The old "RefinedWeb" type (falcon-40b) is the new decoder architecture.
    const bool new_arch = r.boolean_or({"new_decoder_architecture"}, model_type == "RefinedWeb");
    const bool multi_query = r.boolean_or({"multi_query"}, model_type == "RefinedWebModel");
    if (new_arch)
        a.num_kv_heads = r.integer_or({"num_kv_heads", "n_head_kv"}, a.num_heads);
    else
        a.num_kv_heads = multi_query ? 1 : a.num_heads;
    a.ffn_size = r.integer_or({"ffn_hidden_size"}, 4 * a.hidden_size);
    a.vocab_size = r.integer({"vocab_size"});
    a.max_position_embeddings = r.integer_or({"max_position_embeddings"}, 0);
    a.tied_embeddings = r.boolean_or({"tie_word_embeddings"}, true);
    const bool bias = r.boolean_or({"bias"}, false);
    a.qkv_bias = a.attn_out_bias = a.mlp_bias = bias;
    a.norm_has_bias = true;
    const bool parallel = r.boolean_or({"parallel_attn"}, true);
    if (new_arch)
        a.norms_per_layer = r.integer_or({"num_ln_in_parallel_attn"}, 2);  // ln_attn + ln_mlp
    else
        a.norms_per_layer = parallel ? 1 : 2;  // input_layernorm (+ post_attention_layernorm)
    (void)r.boolean_or({"alibi"}, false);  // ALiBi or rotary: no parameters either way
    a.fused_qkv = true;
}

// BLOOM (modeling_bloom.py): ALiBi (no position embedding),
// word_embeddings_layernorm, fused query_key_value, MLP fixed at 4h.
void read_bloom(ModelArch& a, const ConfigReader& r) {
    a.family = "bloom";
    a.hidden_size = r.integer({"hidden_size", "n_embed"});
    a.num_layers = r.integer({"n_layer", "num_hidden_layers"});
    read_heads(a, r, {"n_head", "num_attention_heads"});
    a.num_kv_heads = a.num_heads;
    a.head_dim = default_head_dim(a, r);
    a.ffn_size = 4 * a.hidden_size;  // BloomMLP ignores n_inner
    a.vocab_size = r.integer({"vocab_size"});
    a.tied_embeddings = r.boolean_or({"tie_word_embeddings"}, true);
    a.qkv_bias = a.attn_out_bias = a.mlp_bias = true;
    a.norm_has_bias = true;
    a.norms_per_layer = 2;
    a.embedding_norm = true;
    a.fused_qkv = true;
}


// ---------------------------------------------------------------------------
// Family rules: data/architectures/families.json, embedded at build time.

const json& families_doc() {
    static const json doc = json::parse(std::string(reinterpret_cast<const char*>(kFamiliesJson), sizeof kFamiliesJson));
    return doc;
}

const json& families() { return families_doc().at("families"); }

// The family entry for `model_type`, following "same_as"; nullptr if unknown.
const json* family_rules(const std::string& model_type) {
    const json& f = families();
    auto it = f.find(model_type);
    if (it == f.end()) return nullptr;
    if (it->contains("same_as")) return family_rules((*it)["same_as"].get<std::string>());
    return &*it;
}

// A layout switch: true/false fixed, or the name of a boolean config key
// read with the family default.
bool layout_flag(const ConfigReader& r, const json& fam, const char* name, bool fallback = false) {
    if (!fam.contains("layout") || !fam["layout"].contains(name)) return fallback;
    const json& v = fam["layout"][name];
    if (v.is_boolean()) return v.get<bool>();
    return r.fam_boolean(fam, v.get<std::string>(), false);
}

int64_t layout_int(const json& fam, const char* name, int64_t fallback) {
    if (!fam.contains("layout") || !fam["layout"].contains(name)) return fallback;
    return fam["layout"][name].get<int64_t>();
}

// Length of a JSON list key (0 if absent); anything else than a list of
// integers is refused.
int64_t list_length(const ConfigReader& r, const char* key, std::vector<int64_t>* values = nullptr) {
    const json* v = r.find({key});
    if (!v) return 0;
    if (!v->is_array()) throw InputError(r.source() + ": key '" + key + "' must be a list, got " + type_name(*v));
    for (const auto& x : *v) {
        if (!x.is_number_integer())
            throw InputError(r.source() + ": key '" + key + "' must list integers, got " + show(x));
        if (values) values->push_back(x.get<int64_t>());
    }
    return static_cast<int64_t>(v->size());
}

// Refuses expert counts a MoE model cannot have, naming the config key:
// no experts or a negative count (a DeepSeek n_routed_experts of null is a
// dense model and stays allowed), top-k not in 1..experts.
void check_moe_values(const ModelArch& a, const ConfigReader& r, const std::string& kind) {
    const char* key = kind == "deepseek" ? "n_routed_experts"
                      : (kind == "qwen2_moe" || kind == "qwen3_moe") ? "num_experts" : "num_local_experts";
    const bool null_experts = kind == "deepseek" && r.config().contains("n_routed_experts") &&
                              r.config()["n_routed_experts"].is_null();
    if (!null_experts && a.num_experts <= 0 && r.find({key}))
        throw InputError(r.source() + ": key '" + key + "' must be a positive number of experts, got " +
                         std::to_string(a.num_experts));
    if (a.num_experts > 2147483647)  // the bound check_sizes puts on every size, here with the key's name
        throw InputError(r.source() + ": key '" + key + "' is too large: " + std::to_string(a.num_experts) +
                         " (at most 2147483647)");
    if (a.num_experts > 0 && a.num_experts_per_tok <= 0)
        throw InputError(r.source() + ": key 'num_experts_per_tok' must be positive, got " +
                         std::to_string(a.num_experts_per_tok));
    if (a.num_experts > 0 && a.num_experts_per_tok > a.num_experts)
        throw InputError(r.source() + ": 'num_experts_per_tok' " + std::to_string(a.num_experts_per_tok) +
                         " is more than the " + std::to_string(a.num_experts) + " experts");
}

// MoE layouts (which blocks are MoE, expert and shared widths), per family:
// modeling_mixtral.py MixtralSparseMoeBlock; modeling_qwen2_moe.py /
// modeling_qwen3_moe.py decoder layer (mlp_only_layers, decoder_sparse_step);
// modeling_deepseek_v3.py (first_k_dense_replace, moe_layer_freq,
// n_shared_experts); modeling_llama4.py (interleave_moe_layer_step,
// intermediate_size_mlp); modeling_gpt_oss.py (GptOssMLP).
void read_moe(ModelArch& a, const ConfigReader& r, const json& fam, const std::string& kind) {
    const int64_t L = a.num_layers;
    a.num_experts_per_tok = r.fam_integer(fam, "num_experts_per_tok");
    if (kind == "mixtral" || kind == "gpt_oss") {
        a.num_experts = r.fam_integer(fam, "num_local_experts");
        if (kind == "gpt_oss") (void)r.find({"experts_per_token"});  // the original spelling of num_experts_per_tok
        a.expert_ffn_size = a.ffn_size;
        a.num_moe_layers = L;
        if (kind == "gpt_oss") a.router_bias = a.expert_bias = a.fused_experts = true;
    } else if (kind == "qwen2_moe" || kind == "qwen3_moe") {
        a.num_experts = r.fam_integer(fam, "num_experts");
        a.expert_ffn_size = r.fam_integer(fam, "moe_intermediate_size");
        const int64_t step = r.fam_integer(fam, "decoder_sparse_step", 1);
        if (step <= 0) throw InputError(r.source() + ": key 'decoder_sparse_step' must be positive");
        std::vector<int64_t> dense;
        list_length(r, "mlp_only_layers", &dense);
        for (int64_t i = 0; i < L; ++i)
            if (std::find(dense.begin(), dense.end(), i) == dense.end() && a.num_experts > 0 && (i + 1) % step == 0)
                ++a.num_moe_layers;
        if (kind == "qwen2_moe") {
            a.shared_expert_ffn_size = r.fam_integer(fam, "shared_expert_intermediate_size");
            a.shared_expert_gate = a.shared_expert_ffn_size > 0;
        }
    } else if (kind == "deepseek") {
        // The router's e_score_correction_bias (V3) is a registered buffer in
        // transformers' DeepseekV3TopkRouter, not a parameter: not counted.
        const bool dense = r.config().contains("n_routed_experts") && r.config()["n_routed_experts"].is_null();
        a.num_experts = dense ? 0 : r.fam_integer(fam, "n_routed_experts", 0);  // null: a dense model
        if (!r.given("n_routed_experts") && a.num_experts == 0)
            a.warnings.push_back(r.source() + ": 'n_routed_experts' is " + (dense ? "null" : "absent") +
                                 ": the model is read as dense, without MoE blocks (modeling_deepseek MoE only "
                                 "when n_routed_experts is not None)");
        a.expert_ffn_size = r.fam_integer(fam, "moe_intermediate_size");
        // null: no shared experts, as modeling_deepseek_v2.py DeepseekV2MoE (n_shared_experts is not None);
        // absent: the family default (warned about) or none.
        const bool no_shared = r.config().contains("n_shared_experts") && r.config()["n_shared_experts"].is_null();
        a.shared_expert_ffn_size = no_shared ? 0 : r.fam_integer(fam, "n_shared_experts", 0) * a.expert_ffn_size;
        if (a.num_experts > 0 && !r.given("n_shared_experts") && a.shared_expert_ffn_size == 0)
            a.warnings.push_back(r.source() + ": 'n_shared_experts' is " + (no_shared ? "null" : "absent") +
                                 ": counted without shared experts");
        const int64_t first_dense = r.fam_integer(fam, "first_k_dense_replace", 0);
        if (first_dense < 0)
            throw InputError(r.source() + ": key 'first_k_dense_replace' must be >= 0, got " +
                             std::to_string(first_dense));
        const int64_t freq = r.fam_integer(fam, "moe_layer_freq", 1);
        if (freq <= 0) throw InputError(r.source() + ": key 'moe_layer_freq' must be positive");
        for (int64_t i = 0; i < L; ++i)
            if (a.num_experts > 0 && i >= first_dense && i % freq == 0) ++a.num_moe_layers;
        if (const json* m = r.find({"num_nextn_predict_layers"}); m && m->is_number_integer() && m->get<int64_t>() > 0)
            a.warnings.push_back(r.source() + ": 'num_nextn_predict_layers' = " + m->dump() +
                                 ": the multi-token-prediction layers stored in the checkpoint are not counted "
                                 "(transformers' DeepseekV3ForCausalLM does not build them)");
    } else if (kind == "llama4") {
        a.num_experts = r.fam_integer(fam, "num_local_experts");
        a.expert_ffn_size = a.ffn_size;                  // intermediate_size: one expert and the shared expert
        a.shared_expert_ffn_size = a.ffn_size;
        a.ffn_size = r.fam_integer(fam, "intermediate_size_mlp");  // dense blocks
        a.fused_experts = true;
        (void)r.find({"use_qk_norm"});  // Llama4TextL2Norm: no weights
        std::vector<int64_t> moe_layers;
        if (list_length(r, "moe_layers", &moe_layers) > 0) {
            a.num_moe_layers = static_cast<int64_t>(moe_layers.size());
        } else {
            const int64_t step = r.fam_integer(fam, "interleave_moe_layer_step", 1);
            if (step <= 0) throw InputError(r.source() + ": key 'interleave_moe_layer_step' must be positive");
            a.num_moe_layers = a.num_experts > 0 ? L / step : 0;
        }
    }
    check_moe_values(a, r, kind);
}

// Multi-head latent attention (modeling_deepseek_v3.py DeepseekV3Attention).
void read_mla(ModelArch& a, const ConfigReader& r, const json& fam) {
    // q_lora_rank null (DeepSeek-V2-Lite) means a direct q_proj, not the family default.
    const bool q_null = r.config().contains("q_lora_rank") && r.config()["q_lora_rank"].is_null();
    a.q_lora_rank = q_null ? 0 : r.fam_integer(fam, "q_lora_rank", 0);
    if (!q_null && r.config().contains("q_lora_rank") && a.q_lora_rank == 0)
        a.warnings.push_back(r.source() + ": 'q_lora_rank' is 0: read as null (a direct q_proj); transformers "
                                          "would build a zero-width q_a_proj");
    a.kv_lora_rank = r.fam_integer(fam, "kv_lora_rank");
    if (a.kv_lora_rank == 0)
        a.warnings.push_back(r.source() + ": 'kv_lora_rank' is 0: the attention is read as plain multi-head "
                                          "attention, without MLA (multi-head latent attention)");
    a.qk_nope_head_dim = r.fam_integer(fam, "qk_nope_head_dim");
    a.qk_rope_head_dim = r.fam_integer(fam, "qk_rope_head_dim");
    a.v_head_dim = r.fam_integer(fam, "v_head_dim");
    // Shapes for the activation model: every head gets its own expanded k, v.
    a.head_dim = a.qk_nope_head_dim + a.qk_rope_head_dim;
    a.num_kv_heads = a.num_heads;
    a.attn_out_bias = r.fam_boolean(fam, "attention_bias");
}

// Decoders with separate (or fused) q/k/v, RMSNorm or LayerNorm, gated or
// plain MLP, optional MoE or MLA: the switches come from the family's
// "layout" in data/architectures/families.json.
void read_decoder(ModelArch& a, const ConfigReader& r, const json& fam) {
    a.hidden_size = r.fam_integer(fam, "hidden_size");
    a.num_layers = r.fam_integer(fam, "num_hidden_layers");
    a.num_heads = r.fam_integer(fam, "num_attention_heads");
    if (a.num_heads <= 0)
        throw InputError(r.source() + ": key 'num_attention_heads' must be positive, got " + std::to_string(a.num_heads));
    a.num_kv_heads = r.fam_integer(fam, "num_key_value_heads", a.num_heads);
    if (a.num_kv_heads <= 0 || a.num_heads % a.num_kv_heads != 0)
        throw InputError(r.source() + ": key 'num_key_value_heads' (" + std::to_string(a.num_kv_heads) +
                         ") must be positive and divide num_attention_heads (" + std::to_string(a.num_heads) + ")");
    a.head_dim = r.fam_integer(fam, "head_dim", 0);
    if (const json* hd = r.find({"head_dim"}); hd && hd->is_number() && a.head_dim <= 0)
        throw InputError(r.source() + ": key 'head_dim' must be positive, got " + std::to_string(a.head_dim));
    if (a.head_dim == 0) a.head_dim = default_head_dim(a, r);
    const bool ffn_4h = layout_flag(r, fam, "ffn_default_4h");
    a.ffn_size = r.fam_integer(fam, "intermediate_size", ffn_4h ? std::optional<int64_t>(4 * a.hidden_size) : std::nullopt);
    a.vocab_size = r.fam_integer(fam, "vocab_size");
    a.max_position_embeddings = r.fam_integer(fam, "max_position_embeddings", 0);
    a.tied_embeddings = r.fam_boolean(fam, "tie_word_embeddings");
    a.gated_mlp = layout_flag(r, fam, "gated_mlp");
    a.norm_has_bias = layout_flag(r, fam, "norm_bias");
    a.norms_per_layer = layout_int(fam, "norms_per_layer", 2);
    a.qkv_bias = layout_flag(r, fam, "qkv_bias");
    a.attn_out_bias = layout_flag(r, fam, "attn_out_bias");
    a.mlp_bias = layout_flag(r, fam, "mlp_bias");
    a.qk_norm = layout_flag(r, fam, "qk_norm");
    a.lm_head_bias = layout_flag(r, fam, "lm_head_bias");
    a.attention_sinks = layout_flag(r, fam, "attention_sinks");
    a.fused_qkv = layout_flag(r, fam, "fused_qkv");
    a.fused_gate_up = layout_flag(r, fam, "fused_gate_up");
    a.learned_positions = layout_flag(r, fam, "learned_positions");
    if (a.learned_positions && a.max_position_embeddings <= 0)
        throw InputError(r.source() + ": missing key 'max_position_embeddings' needed to size the position embedding");
    if (fam.value("mla", false)) read_mla(a, r, fam);
    if (fam.contains("moe")) read_moe(a, r, fam, fam["moe"].get<std::string>());
}

// T5 (modeling_t5.py): shared embedding, encoder and decoder stacks of
// T5Blocks (no biases, weight-only T5LayerNorm), relative_attention_bias in
// each stack's first block, final_layer_norm per stack, lm_head tied unless
// tie_word_embeddings is false. T5EncoderModel has the encoder only.
void read_t5(ModelArch& a, const ConfigReader& r, const json& fam, bool encoder_model) {
    a.hidden_size = r.fam_integer(fam, "hidden_size");
    a.num_heads = r.fam_integer(fam, "num_attention_heads");
    if (a.num_heads <= 0) throw InputError(r.source() + ": key 'num_heads' must be positive");
    a.num_kv_heads = a.num_heads;
    a.head_dim = r.fam_integer(fam, "head_dim");
    a.ffn_size = r.fam_integer(fam, "intermediate_size");
    a.vocab_size = r.fam_integer(fam, "vocab_size");
    const int64_t enc = r.fam_integer(fam, "num_hidden_layers");
    const int64_t dec = encoder_model ? 0 : r.fam_integer(fam, "num_decoder_layers", enc);
    a.num_layers = enc + dec;
    a.num_decoder_layers = dec;
    a.relative_attention_buckets = r.fam_integer(fam, "relative_attention_num_buckets");
    a.tied_embeddings = r.fam_boolean(fam, "tie_word_embeddings");
    // feed_forward_proj "gated-gelu" (is_gated_act) selects wi_0, wi_1, wo.
    bool gated = false;
    if (const json* f = r.find({"feed_forward_proj"}); f && f->is_string())
        gated = f->get<std::string>().rfind("gated-", 0) == 0;
    a.gated_mlp = gated;
    (void)r.find({"is_gated_act"});
    (void)r.find({"is_encoder_decoder"});  // T5ForConditionalGeneration: true; the architecture decides
    a.norms_per_layer = 2;  // attention + feed-forward layer_norm (the decoder's cross-attention adds one)
    a.encoder_only = encoder_model;
    a.max_position_embeddings = r.fam_integer(fam, "n_positions", 0);
}

// BERT / RoBERTa (modeling_bert.py, modeling_roberta.py): word, position and
// token-type embeddings + LayerNorm; post-LN blocks with biases everywhere;
// the base model's pooler; *ForMaskedLM adds the LM head (its decoder weight
// tied to the word embeddings) and has no pooler.
void read_bert(ModelArch& a, const ConfigReader& r, const json& fam, const std::string& arch_name) {
    a.hidden_size = r.fam_integer(fam, "hidden_size");
    a.num_layers = r.fam_integer(fam, "num_hidden_layers");
    a.num_heads = r.fam_integer(fam, "num_attention_heads");
    if (a.num_heads <= 0) throw InputError(r.source() + ": key 'num_attention_heads' must be positive");
    a.num_kv_heads = a.num_heads;
    a.head_dim = default_head_dim(a, r);
    a.ffn_size = r.fam_integer(fam, "intermediate_size");
    a.vocab_size = r.fam_integer(fam, "vocab_size");
    a.max_position_embeddings = r.fam_integer(fam, "max_position_embeddings");
    a.type_vocab_size = r.fam_integer(fam, "type_vocab_size");
    a.learned_positions = true;
    a.embedding_norm = true;
    a.qkv_bias = a.attn_out_bias = a.mlp_bias = true;
    a.norm_has_bias = true;
    a.norms_per_layer = 2;
    a.final_norm = false;
    a.encoder_only = true;
    a.tied_embeddings = true;
    auto has = [&](const char* part) { return arch_name.find(part) != std::string::npos; };
    const bool base = arch_name.empty() || arch_name == "BertModel" || arch_name == "RobertaModel";
    a.mlm_head = has("ForMaskedLM") || has("ForPreTraining");
    a.pooler = base || has("ForPreTraining");
    if (!base && !a.mlm_head) {
        a.pooler = true;
        a.warnings.push_back(r.source() + ": architectures '" + arch_name +
                             "': its task head is not counted (counted: the base model with its pooler)");
    }
    if (has("ForPreTraining"))
        a.warnings.push_back(r.source() + ": architectures '" + arch_name +
                             "': the next-sentence head (h x 2 + 2) is not counted");
}

// ---------------------------------------------------------------------------
// Vision towers. Each sets the vision_* fields of `a` from vision_config
// `v` (which may be empty: the wrapper's default config applies).

void set_vision(ModelArch& a, const char* kind, int64_t h, int64_t layers, int64_t f, u64 block, u64 other, u64 projector,
                u64 largest) {
    a.vision_kind = kind;
    a.vision_hidden_size = h;
    a.vision_layers = layers;
    a.vision_ffn_size = f;
    a.vision_block_params = block;
    a.vision_other_params = other;
    a.projector_params = projector;
    a.vision_largest_module = largest;
}

// A ViT block with biased q, k, v, o, a biased fc1/fc2 MLP and two
// LayerNorms: CLIPEncoderLayer, SiglipEncoderLayer, Llama4VisionEncoderLayer.
u64 vit_block(int64_t h, int64_t f) { return 4 * linear(h, h, true) + mlp_params(h, f, false, true) + 4 * u(h); }

// CLIP (modeling_clip.py CLIPVisionTransformer): class embedding, patch
// Conv2d without bias, (img/p)^2 + 1 positions, pre and post LayerNorm.
// SigLIP (modeling_siglip.py): patch Conv2d with bias, (img/p)^2 positions,
// post LayerNorm, and the attention-pooling head when vision_use_head.
void read_clip_or_siglip(ModelArch& a, const ConfigReader& r, bool siglip, const json& defaults) {
    auto get = [&](const char* key, int64_t fallback) {
        return r.integer_or({key}, defaults.contains(key) ? defaults[key].get<int64_t>() : fallback);
    };
    const int64_t h = get("hidden_size", 768), f = get("intermediate_size", 3072), L = get("num_hidden_layers", 12);
    const int64_t p = get("patch_size", siglip ? 16 : 32), img = get("image_size", 224), C = get("num_channels", 3);
    (void)r.find({"num_attention_heads"});
    const int64_t grid = (img / p) * (img / p);
    u64 other = u(C * p * p) * u(h) + u(grid) * u(h) + 2 * u(h);  // patch, positions, post LayerNorm
    if (siglip) {
        other += u(h);  // patch Conv2d bias
        if (r.boolean_or({"vision_use_head"}, true))  // SiglipMultiheadAttentionPoolingHead
            other += u(h) + (3 * u(h) * u(h) + 3 * u(h)) + linear(h, h, true) + 2 * u(h) + mlp_params(h, f, false, true);
    } else {
        other += u(h) + u(h) + 2 * u(h);  // class embedding, one more position, pre LayerNorm
    }
    set_vision(a, siglip ? "siglip" : "clip", h, L, f, vit_block(h, f), other, 0,
               std::max({linear(h, f, true), linear(f, h, true), u(grid + 1) * u(h)}));
}

// Qwen2-VL (modeling_qwen2_vl.py): PatchEmbed Conv3d without bias, blocks
// with LayerNorms, fused qkv and fc1/fc2 (mlp_ratio), PatchMerger with a
// LayerNorm over embed_dim and two Linears over embed_dim * merge^2.
void read_qwen2_vl_tower(ModelArch& a, const ConfigReader& r) {
    const int64_t e = r.integer_or({"embed_dim"}, 1280), depth = r.integer_or({"depth"}, 32);
    const int64_t f = e * r.integer_or({"mlp_ratio"}, 4), out = r.integer_or({"hidden_size"}, 3584);
    const int64_t C = r.integer_or({"in_channels", "in_chans"}, 3), p = r.integer_or({"patch_size", "spatial_patch_size"}, 14);
    const int64_t t = r.integer_or({"temporal_patch_size"}, 2), m = e * r.integer_or({"spatial_merge_size"}, 2) * r.integer_or({"spatial_merge_size"}, 2);
    const u64 block = 4 * u(e) + linear(e, 3 * e, true) + linear(e, e, true) + mlp_params(e, f, false, true);
    const u64 merger = 2 * u(e) + linear(m, m, true) + linear(m, out, true);
    set_vision(a, "qwen2_vl", e, depth, f, block, u(C * t * p * p) * u(e), merger,
               std::max({linear(m, m, true), linear(m, out, true), linear(e, 3 * e, true)}));
}

// Qwen2.5-VL (modeling_qwen2_5_vl.py): as Qwen2-VL but RMSNorms, a gated
// MLP with biases (intermediate_size) and an RMSNorm ln_q in the merger.
void read_qwen2_5_vl_tower(ModelArch& a, const ConfigReader& r) {
    const int64_t h = r.integer({"hidden_size"}), depth = r.integer({"depth"}), f = r.integer({"intermediate_size"});
    const int64_t out = r.integer({"out_hidden_size"});
    const int64_t C = r.integer_or({"in_channels", "in_chans"}, 3), p = r.integer_or({"patch_size", "spatial_patch_size"}, 14);
    const int64_t t = r.integer_or({"temporal_patch_size"}, 2), s = r.integer_or({"spatial_merge_size"}, 2);
    const int64_t m = h * s * s;
    const u64 block = 2 * u(h) + linear(h, 3 * h, true) + linear(h, h, true) + mlp_params(h, f, true, true);
    const u64 merger = u(h) + linear(m, m, true) + linear(m, out, true);
    set_vision(a, "qwen2_5_vl", h, depth, f, block, u(C * t * p * p) * u(h), merger,
               std::max({linear(m, m, true), linear(m, out, true), linear(h, 3 * h, true)}));
}

// Qwen3-VL (modeling_qwen3_vl.py Qwen3VLVisionModel): Conv3d patch embed
// with bias, learned pos_embed (num_position_embeddings x h), LayerNorm
// blocks with fc1/fc2, a merger (LayerNorm over h) and one DeepStack merger
// per deepstack_visual_indexes entry (LayerNorm over h * merge^2).
void read_qwen3_vl_tower(ModelArch& a, const ConfigReader& r) {
    const int64_t h = r.integer({"hidden_size"}), depth = r.integer({"depth"}), f = r.integer({"intermediate_size"});
    const int64_t out = r.integer({"out_hidden_size"});
    const int64_t C = r.integer_or({"in_channels", "in_chans"}, 3), p = r.integer_or({"patch_size"}, 16);
    const int64_t t = r.integer_or({"temporal_patch_size"}, 2), s = r.integer_or({"spatial_merge_size"}, 2);
    const int64_t npos = r.integer_or({"num_position_embeddings"}, 2304);
    const int64_t deepstack = list_length(r, "deepstack_visual_indexes");
    const int64_t m = h * s * s;
    const u64 block = 4 * u(h) + linear(h, 3 * h, true) + linear(h, h, true) + mlp_params(h, f, false, true);
    const u64 merger_mlp = linear(m, m, true) + linear(m, out, true);
    const u64 mergers = (2 * u(h) + merger_mlp) + u(deepstack) * (2 * u(m) + merger_mlp);
    set_vision(a, "qwen3_vl", h, depth, f, block, u(C * t * p * p) * u(h) + u(h) + u(npos) * u(h), mergers,
               std::max({linear(m, m, true), linear(m, out, true), u(npos) * u(h)}));
}

// Llama 4 (modeling_llama4.py Llama4VisionModel): unfold patch Linear
// without bias, class embedding, (img/p)^2 + 1 positions, pre and post
// LayerNorm, ViT blocks, pixel-shuffle MLP (fc1 intermediate_size ->
// projector_input_dim, fc2 projector_output_dim^2, no biases), then
// Llama4MultiModalProjector vision_output_dim -> text hidden, no bias.
// Absent keys take Llama4VisionConfig's defaults.
void read_llama4_tower(ModelArch& a, const ConfigReader& r, int64_t text_hidden) {
    const int64_t h = r.integer_or({"hidden_size"}, 768), L = r.integer_or({"num_hidden_layers"}, 34);
    const int64_t f = r.integer_or({"intermediate_size"}, 5632), C = r.integer_or({"num_channels"}, 3);
    const int64_t img = r.integer_or({"image_size"}, 448), p = r.integer_or({"patch_size"}, 14);
    const int64_t pin = r.integer_or({"projector_input_dim"}, 4096), pout = r.integer_or({"projector_output_dim"}, 4096);
    const int64_t vout = r.integer_or({"vision_output_dim"}, 7680);
    const u64 npos = u((img / p) * (img / p) + 1);
    const u64 other = u(C * p * p) * u(h) + u(h) + npos * u(h) + 4 * u(h) + u(f) * u(pin) + u(pout) * u(pout);
    const u64 projector = u(vout) * u(text_hidden) + (r.boolean_or({"multi_modal_projector_bias"}, false) ? u(text_hidden) : 0);
    set_vision(a, "llama4", h, L, f, vit_block(h, f), other, projector,
               std::max({u(f) * u(pin), u(pout) * u(pout), projector, linear(h, f, true)}));
}

// ---------------------------------------------------------------------------

std::string known_types_text() {
    std::string s;
    for (const auto& [k, v] : families().items()) s += (s.empty() ? "" : ", ") + k;
    return s;
}

std::string first_architecture(const ConfigReader& r) {
    const json* v = r.find({"architectures"});
    if (v && v->is_array() && !v->empty() && v->front().is_string()) return v->front().get<std::string>();
    return "";
}

// model_type from the config, or from "architectures" when model_type is absent.
std::string resolve_model_type(const ConfigReader& r) {
    if (const json* t = r.find({"model_type"})) {
        if (!t->is_string())
            throw InputError(r.source() + ": key 'model_type' must be a string, got " + type_name(*t) + " " + show(*t));
        return t->get<std::string>();
    }
    const std::string arch = first_architecture(r);
    for (const auto& [k, v] : families().items())
        if (v.contains("architectures"))
            for (const auto& name : v["architectures"])
                if (name.get<std::string>() == arch && !arch.empty()) return k;
    return "";
}

[[noreturn]] void refuse_type(const ConfigReader& r, const std::string& model_type) {
    const std::string what = model_type.empty() ? "no 'model_type' (and no known 'architectures')"
                                                : "unknown model_type '" + model_type + "'";
    throw InputError(r.source() + ": " + what + "; zeromem reads " + known_types_text() +
                     "; for another architecture give --params N with --largest-layer-params N instead");
}

// Keys that change the count in some family (families.json "count_keys"),
// present with a value that matters, that this family's reader never asked
// for: refused ("error") or warned about ("warn") by name.
void check_unread_keys(ModelArch& a, const ConfigReader& r, const std::string& model_type) {
    for (const auto& [key, level] : families_doc().at("count_keys").items()) {
        if (key.front() == '_' || r.asked(key)) continue;
        auto it = r.config().find(key);
        if (it == r.config().end()) continue;
        const json& v = *it;
        if (v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_number() && v.get<double>() == 0.0) ||
            (v.is_array() && v.empty()) || (v.is_object() && v.empty()))
            continue;
        const std::string msg = r.source() + ": key '" + key + "' (" + show(v) + ") changes the parameter count, but " +
                                "zeromem's reader for model_type '" + model_type + "' does not use it";
        if (level.get<std::string>() == "error")
            throw InputError(msg + "; give --params N with --largest-layer-params N instead");
        a.warnings.push_back(msg + "; counted without it");
    }
}

ModelArch read_family(const ConfigReader& r, const std::string& model_type, int depth);

// Vision-language wrappers: the text model from text_config (or the flat
// top-level keys, Qwen2-VL/Qwen2.5-VL style), the tower from vision_config.
void read_vision_language(ModelArch& a, const ConfigReader& r, const json& fam, const std::string& model_type, int depth) {
    const std::string text_default = fam.at("text").get<std::string>();
    const std::string vision = fam.at("vision").get<std::string>();
    const json* vc = r.find({"vision_config"});  // read before flat text keys are checked
    const json* text = r.find({"text_config"});
    if (text && !text->is_object()) throw InputError(r.source() + ": key 'text_config' must be an object");
    if (text) {
        json tc = *text;
        // A wrapper's top-level tie_word_embeddings applies when text_config has none.
        if (!tc.contains("tie_word_embeddings"))
            if (const json* t = r.find({"tie_word_embeddings"})) tc["tie_word_embeddings"] = *t;
        ConfigReader tr(tc, r.source() + " text_config");
        tr.allow_size_defaults();
        std::string tt = tc.contains("model_type") && tc["model_type"].is_string() ? tc["model_type"].get<std::string>() : text_default;
        if (!family_rules(tt)) tt = text_default;  // e.g. "vicuna": the wrapper's text family
        const auto fam_t = family_rules(tt);
        if (fam_t && fam_t->value("reader", "") == "vision_language")
            throw InputError(r.source() + ": text_config has model_type '" + tt + "', itself a vision-language wrapper");
        a = read_family(tr, tt, depth + 1);
    } else {
        a = read_family(r, text_default, depth + 1);
    }
    if (vc && !vc->is_object()) throw InputError(r.source() + ": key 'vision_config' must be an object");
    const json empty = json::object();
    const json& v = vc ? *vc : empty;
    ConfigReader vr(v, r.source() + " vision_config");
    if (!vc)
        a.warnings.push_back(r.source() + ": no 'vision_config': the vision tower is counted with the defaults of " +
                             model_type + "'s transformers config class, which may not match the checkpoint");
    std::string vkind = vision;
    if (vision == "clip" && v.contains("model_type") && v["model_type"] == "siglip_vision_model") vkind = "siglip";
    if (vkind == "clip" || vkind == "siglip") {
        // LlavaConfig's default tower: CLIP ViT-L/14 at 336 px.
        const json llava_default = {{"hidden_size", 1024}, {"intermediate_size", 4096}, {"num_hidden_layers", 24},
                                    {"patch_size", 14}, {"image_size", 336}};
        read_clip_or_siglip(a, vr, vkind == "siglip", vc ? empty : llava_default);
        if (model_type == "gemma3") {  // Gemma3MultiModalProjector: weight (vision h, text h) + RMSNorm(vision h)
            a.projector_params = u(a.vision_hidden_size) * u(a.hidden_size) + u(a.vision_hidden_size);
        } else {  // LlavaMultiModalProjector: linear_1, GELU, linear_2
            int64_t taps = 1;
            if (const json* fl = r.find({"vision_feature_layer"}); fl && fl->is_array()) taps = static_cast<int64_t>(fl->size());
            const bool bias = r.boolean_or({"multimodal_projector_bias"}, true);
            a.projector_params = linear(a.vision_hidden_size * taps, a.hidden_size, bias) + linear(a.hidden_size, a.hidden_size, bias);
        }
        a.vision_largest_module = std::max(a.vision_largest_module, a.projector_params);
    } else if (vkind == "qwen2_vl") {
        read_qwen2_vl_tower(a, vr);
    } else if (vkind == "qwen2_5_vl") {
        read_qwen2_5_vl_tower(a, vr);
    } else if (vkind == "qwen3_vl") {
        read_qwen3_vl_tower(a, vr);
    } else if (vkind == "llama4") {
        read_llama4_tower(a, vr, a.hidden_size);
    }
    a.model_type = model_type;
    a.family = model_type;
}

ModelArch read_family(const ConfigReader& r, const std::string& model_type, int depth) {
    if (depth > 2) throw InputError(r.source() + ": config nests text_config too deeply");
    const json* fam = family_rules(model_type);
    if (!fam) refuse_type(r, model_type);
    const std::string reader = fam->at("reader").get<std::string>();
    ModelArch a;
    if (reader == "decoder") read_decoder(a, r, *fam);
    else if (reader == "gpt2") read_gpt2(a, r);
    else if (reader == "opt") read_opt(a, r);
    else if (reader == "gpt_neox") read_gpt_neox(a, r);
    else if (reader == "falcon") read_falcon(a, r, model_type);
    else if (reader == "bloom") read_bloom(a, r);
    else if (reader == "t5") read_t5(a, r, *fam, first_architecture(r) == "T5EncoderModel");
    else if (reader == "bert") read_bert(a, r, *fam, first_architecture(r));
    else if (reader == "vision_language") read_vision_language(a, r, *fam, model_type, depth);
    else throw InputError("families.json: model_type '" + model_type + "' names unknown reader '" + reader + "'");
    if (reader != "vision_language") {
        read_dropout_rates(a, r.config(), *fam, r.source());  // the wrapper's text model has them
        a.model_type = model_type;
        if (reader == "decoder" || reader == "t5" || reader == "bert") a.family = model_type;
    }
    (void)r.find({"tie_word_embeddings"});
    check_unread_keys(a, r, model_type);
    // Sizes and switches absent from the config take the defaults of the
    // family's transformers config class (families.json "defaults"); say so.
    for (const auto& d : r.defaulted()) {
        const std::string key = d.substr(0, d.find(' '));
        if (ConfigReader::is_size_key(key) || ConfigReader::is_count_key(key))
            a.warnings.push_back(r.source() + (r.config().contains(key) ? ": '" + key + "' is null" : ": no '" + key + "'") +
                                 ": the " + model_type + " config class default " + d.substr(d.find('=') + 2) +
                                 " is used");
    }
    return a;
}

}  // namespace

std::vector<std::string> known_model_types() {
    std::vector<std::string> out;
    for (const auto& [k, v] : families().items()) out.push_back(k);
    return out;
}

ModelArch arch_from_hf_config(const nlohmann::json& config, const std::string& source) {
    if (!config.is_object())
        throw InputError(source + ": expected a JSON object (a Hugging Face config.json), got " + type_name(config));
    ConfigReader r(config, source);
    ModelArch a = read_family(r, resolve_model_type(r), 0);
    if (const json* n = r.find({"_name_or_path"}); n && n->is_string()) a.name = n->get<std::string>();
    return a;
}

std::string describe_arch(const ModelArch& a) {
    const ParamCount c = count_params(a);
    std::ostringstream o;
    auto yn = [](bool b) { return b ? "yes" : "no"; };
    o << "family " << (a.family.empty() ? "(hand-built)" : a.family);
    if (!a.model_type.empty() && a.model_type != a.family) o << " (model_type " << a.model_type << ")";
    o << ": h=" << a.hidden_size << ", blocks=" << a.num_layers << ", heads=" << a.num_heads << ", kv heads=" << a.num_kv_heads
      << ", head_dim=" << a.head_dim << ", vocab=" << a.vocab_size << "\n";
    o << "  layout: tied embeddings " << yn(a.tied_embeddings) << ", "
      << (a.gated_mlp ? "gated 3-matrix MLP" : "2-matrix MLP") << " f=" << a.ffn_size << ", "
      << (a.norm_has_bias ? "LayerNorm" : "RMSNorm") << " x" << a.norms_per_layer << "/block, biases: qkv "
      << yn(a.qkv_bias) << ", out " << yn(a.attn_out_bias) << ", mlp " << yn(a.mlp_bias) << ", lm_head " << yn(a.lm_head_bias)
      << (a.qk_norm ? ", q/k norm" : "") << (a.fused_qkv ? ", fused qkv" : "") << (a.learned_positions ? ", learned positions" : "")
      << "\n";
    if (a.kv_lora_rank > 0)
        o << "  attention: MLA, q_lora_rank " << a.q_lora_rank << ", kv_lora_rank " << a.kv_lora_rank << ", qk_nope "
          << a.qk_nope_head_dim << " + qk_rope " << a.qk_rope_head_dim << ", v_head_dim " << a.v_head_dim << "\n";
    if (a.num_experts > 0 && a.num_moe_layers > 0)
        o << "  MoE: " << a.num_moe_layers << " of " << a.num_layers << " blocks, " << a.num_experts << " routed experts (top-"
          << a.num_experts_per_tok << ") of width " << a.expert_ffn_size << ", shared expert width " << a.shared_expert_ffn_size
          << "; " << c.active << " of " << c.total << " parameters active per token\n";
    if (a.num_decoder_layers > 0)
        o << "  encoder-decoder: " << (a.num_layers - a.num_decoder_layers) << " encoder + " << a.num_decoder_layers
          << " decoder blocks\n";
    if (a.encoder_only) o << "  encoder-only" << (a.pooler ? ", pooler" : "") << (a.mlm_head ? ", masked-LM head" : "") << "\n";
    if (!a.vision_kind.empty())
        o << "  vision tower: " << a.vision_kind << ", " << a.vision_layers << " blocks of width " << a.vision_hidden_size
          << ", " << c.vision << " parameters with the projector\n";
    o << "  parameters per block:\n";
    for (const auto& b : c.blocks)
        o << "    " << b.name << ": " << b.count << " x " << b.params << " = " << b.count * b.params << "\n";
    o << "  total " << c.total << "; largest module (DeepSpeed's largest_layer_params) " << c.largest_module << " ("
      << c.largest_module_name << ")\n";
    return o.str();
}

ModelArch load_hf_config(const std::string& path) {
    const std::string text = read_text_file(path);
    json cfg;
    try {
        cfg = json::parse(text);
    } catch (const json::parse_error& e) {
        // nlohmann's message reads "... parse error at line L, column C: ...".
        throw InputError(path + ": malformed JSON: " + e.what());
    } catch (const json::out_of_range& e) {  // a number beyond the double range (1e999)
        throw InputError(path + ": a number is out of range: " + e.what());
    }
    ModelArch a = arch_from_hf_config(cfg, path);
    if (a.name.empty()) a.name = std::filesystem::path(path).stem().string();
    return a;
}

std::vector<std::string> list_model_presets(const std::string& data_dir) { return list_presets(data_dir, "models"); }

ModelArch load_model_preset(const std::string& name, const std::string& data_dir) {
    const std::vector<std::string> names = list_model_presets(data_dir);
    if (std::find(names.begin(), names.end(), name) == names.end())
        throw InputError(unknown_preset_message("unknown model", name, names, "or give --params or --hf-config"));
    const std::string path = (std::filesystem::path(data_dir) / "models" / (name + ".json")).string();
    const std::string text = read_text_file(path);
    json cfg;
    try {
        cfg = json::parse(text);
    } catch (const json::parse_error& e) {
        throw InputError(path + ": malformed JSON: " + e.what());
    }
    ModelArch a = arch_from_hf_config(cfg, path);
    a.name = name;
    ConfigReader r(cfg, path);
    a.published_params = r.integer({"published_params"});
    const json* src = r.find({"published_source"});
    if (!src || !src->is_string() || src->get<std::string>().empty())
        throw InputError(path + ": key 'published_source' must be a non-empty string citing published_params");
    a.published_source = src->get<std::string>();
    return a;
}

}  // namespace zeromem
