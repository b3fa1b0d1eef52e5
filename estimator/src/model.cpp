// Model architectures: exact parameter counts, Hugging Face config.json
// reading, and the presets under data/models/.
//
// The counting follows the module layout of each family's Hugging Face
// transformers implementation (modeling_<family>.py). Only nn.Parameter
// tensors are counted; registered buffers (rotary inv_freq, GPT-2's causal
// mask "attn.bias", ALiBi slopes) are not parameters, even where a
// checkpoint happens to store them.
#include "zeromem/model.h"

#include "zeromem/types.h"
#include "zeromem/util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <initializer_list>

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

// Layout counted (per family the flags are set by arch_from_hf_config):
//   embedding  = V x e (e = word_embed_proj_dim if set, else h)
//              + (max_position_embeddings + position_offset) x h   if learned_positions
//              + 2h                                                if embedding_norm (BLOOM)
//              + 2 x (e x h)                                       if e != h (OPT project_in/out, no bias)
//   per layer  = q: h x (a*d) [+a*d], k and v: h x (kv*d) [+kv*d] each  (qkv_bias)
//              + o: (a*d) x h [+h]                                      (attn_out_bias)
//              + gated MLP: gate, up h x f [+f each], down f x h [+h]   (mlp_bias)
//                plain MLP: up h x f [+f], down f x h [+h]              (mlp_bias)
//              + norms_per_layer x (h, or 2h with norm_has_bias)
//   final norm = h or 2h if final_norm
//   lm_head    = V x e unless tied_embeddings (no bias in any supported family)
ParamCount count_params(const ModelArch& a) {
    require_positive(a, "hidden_size", a.hidden_size);
    require_positive(a, "num_layers", a.num_layers);
    require_positive(a, "num_heads", a.num_heads);
    require_positive(a, "num_kv_heads", a.num_kv_heads);
    require_positive(a, "head_dim", a.head_dim);
    require_positive(a, "ffn_size", a.ffn_size);
    require_positive(a, "vocab_size", a.vocab_size);
    if (a.learned_positions) require_positive(a, "max_position_embeddings", a.max_position_embeddings);
    require_non_negative(a, "norms_per_layer", a.norms_per_layer);
    require_non_negative(a, "position_offset", a.position_offset);
    require_non_negative(a, "word_embed_proj_dim", a.word_embed_proj_dim);
    // Each size below 2^31 keeps products of two sizes within int64.
    for (const auto& [field, v] : {std::pair<const char*, int64_t>{"hidden_size", a.hidden_size},
                                   {"num_layers", a.num_layers}, {"num_heads", a.num_heads},
                                   {"num_kv_heads", a.num_kv_heads}, {"head_dim", a.head_dim},
                                   {"ffn_size", a.ffn_size}, {"vocab_size", a.vocab_size},
                                   {"max_position_embeddings", a.max_position_embeddings},
                                   {"norms_per_layer", a.norms_per_layer}, {"position_offset", a.position_offset},
                                   {"word_embed_proj_dim", a.word_embed_proj_dim}})
        if (v > 2147483647)
            throw InputError("model '" + (a.name.empty() ? std::string("<unnamed>") : a.name) + "': " + field +
                             " is too large: " + std::to_string(v) + " (at most 2147483647)");

    const int64_t h = a.hidden_size;
    const int64_t e = a.word_embed_proj_dim > 0 ? a.word_embed_proj_dim : h;
    const u64 norm = a.norm_has_bias ? 2 * u(h) : u(h);
    const int64_t q_out = a.num_heads * a.head_dim;
    const int64_t kv_out = a.num_kv_heads * a.head_dim;

    // The same count in double first: refuse sizes whose integer count
    // would overflow (far beyond any real model).
    {
        const double H = double(h), Q = double(q_out), KV = double(kv_out), F = double(a.ffn_size);
        const double layer = H * (Q + 2 * KV) + Q * H + 3 * H * F + double(a.norms_per_layer) * 2 * H;
        const double approx = double(a.num_layers) * layer + 2 * double(a.vocab_size) * double(e) +
                              double(a.max_position_embeddings + a.position_offset) * H + 2 * double(e) * H;
        if (!(approx < 1e17)) {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.3g", approx);
            throw InputError("model '" + (a.name.empty() ? std::string("<unnamed>") : a.name) +
                             "': its sizes give about " + buf + " parameters, more than zeromem counts (1e17)");
        }
    }
    ParamCount c;
    // Embeddings.
    const u64 tok = u(a.vocab_size) * u(e);
    u64 largest = tok;
    c.embedding = tok;
    if (a.learned_positions) {
        const u64 pos = u(a.max_position_embeddings + a.position_offset) * u(h);
        c.embedding += pos;
        largest = std::max(largest, pos);
    }
    if (a.embedding_norm) c.embedding += 2 * u(h);
    if (e != h) {
        c.embedding += 2 * u(e) * u(h);
        largest = std::max(largest, u(e) * u(h));
    }

    // One transformer block.
    const u64 q = linear(h, q_out, a.qkv_bias);
    const u64 kv = linear(h, kv_out, a.qkv_bias);
    const u64 o = linear(q_out, h, a.attn_out_bias);
    const u64 up = linear(h, a.ffn_size, a.mlp_bias);
    const u64 down = linear(a.ffn_size, h, a.mlp_bias);
    c.per_layer = q + 2 * kv + o + up + down + (a.gated_mlp ? up : 0) + u(a.norms_per_layer) * norm;
    largest = std::max({largest, a.fused_qkv ? q + 2 * kv : std::max(q, kv), o, up, down});

    // LM head.
    if (!a.tied_embeddings) c.lm_head = u(a.vocab_size) * u(e);

    c.total = c.embedding + u(a.num_layers) * c.per_layer + (a.final_norm ? norm : 0) + c.lm_head;
    c.largest_module = largest;
    return c;
}

namespace {

const char* const kSupportedTypes =
    "llama, mistral, qwen2, gpt2, opt, gpt_neox, falcon (also RefinedWeb, RefinedWebModel), bloom";

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

    // The first of `keys` present with a non-null value, or nullptr.
    const json* find(std::initializer_list<const char*> keys, const char** found = nullptr) const {
        for (const char* k : keys) {
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

private:
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

// Llama, Mistral, Qwen2 (modeling_llama.py and its copies): RMSNorm, gated
// SwiGLU MLP, rotary positions, GQA.
void read_llama_like(ModelArch& a, const ConfigReader& r, const std::string& family) {
    a.family = family;
    a.hidden_size = r.integer({"hidden_size"});
    a.num_layers = r.integer({"num_hidden_layers"});
    read_heads(a, r, {"num_attention_heads"});
    a.num_kv_heads = r.integer_or({"num_key_value_heads"}, a.num_heads);
    a.head_dim = r.integer_or({"head_dim"}, 0);
    if (a.head_dim == 0) a.head_dim = default_head_dim(a, r);
    a.ffn_size = r.integer({"intermediate_size"});
    a.vocab_size = r.integer({"vocab_size"});
    a.max_position_embeddings = r.integer_or({"max_position_embeddings"}, 0);
    a.gated_mlp = true;
    a.tied_embeddings = r.boolean_or({"tie_word_embeddings"}, false);
    a.norm_has_bias = false;
    a.norms_per_layer = 2;
    if (family == "qwen2") {
        a.qkv_bias = true;  // Qwen2Attention: q/k/v bias=True, o_proj bias=False
        a.attn_out_bias = false;
    } else if (family == "llama") {
        a.qkv_bias = a.attn_out_bias = r.boolean_or({"attention_bias"}, false);
        a.mlp_bias = r.boolean_or({"mlp_bias"}, false);
    }
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

}  // namespace

ModelArch arch_from_hf_config(const nlohmann::json& config, const std::string& source) {
    if (!config.is_object())
        throw InputError(source + ": expected a JSON object (a Hugging Face config.json), got " + type_name(config));
    ConfigReader r(config, source);
    ModelArch a;
    std::string model_type;
    if (const json* t = r.find({"model_type"})) {
        if (!t->is_string())
            throw InputError(source + ": key 'model_type' must be a string, got " + type_name(*t) + " " + show(*t));
        model_type = t->get<std::string>();
    }

    if (model_type == "llama" || model_type == "mistral" || model_type == "qwen2") {
        read_llama_like(a, r, model_type);
    } else if (model_type == "gpt2") {
        read_gpt2(a, r);
    } else if (model_type == "opt") {
        read_opt(a, r);
    } else if (model_type == "gpt_neox") {
        read_gpt_neox(a, r);
    } else if (model_type == "falcon" || model_type == "RefinedWeb" || model_type == "RefinedWebModel") {
        read_falcon(a, r, model_type);
    } else if (model_type == "bloom") {
        read_bloom(a, r);
    } else {
        // Unknown or absent model_type: guess the layout from the key names.
        const std::string what =
            model_type.empty() ? "no 'model_type'" : "unsupported model_type '" + model_type + "'";
        if (r.has({"n_embd"}) && r.has({"n_layer"}) && r.has({"n_head"}) && r.has({"vocab_size"}))
            read_gpt2(a, r);  // GPT-2 naming
        else if (r.has({"hidden_size"}) && r.has({"num_hidden_layers"}) && r.has({"num_attention_heads"}) &&
                 r.has({"intermediate_size"}) && r.has({"vocab_size"}))
            read_llama_like(a, r, "llama");  // Llama naming (most recent decoders)
        else
            throw InputError(source + ": " + what +
                             " and not enough known keys to guess the layout (need hidden_size, "
                             "num_hidden_layers, num_attention_heads, intermediate_size, vocab_size); "
                             "supported model_type values: " + kSupportedTypes);
    }
    if (const json* n = r.find({"_name_or_path"}); n && n->is_string()) a.name = n->get<std::string>();
    return a;
}

ModelArch load_hf_config(const std::string& path) {
    const std::string text = read_text_file(path);
    json cfg;
    try {
        cfg = json::parse(text);
    } catch (const json::parse_error& e) {
        // nlohmann's message reads "... parse error at line L, column C: ...".
        throw InputError(path + ": malformed JSON: " + e.what());
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
