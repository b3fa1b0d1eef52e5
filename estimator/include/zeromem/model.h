// Model architectures: presets, Hugging Face config.json, exact parameter
// counts.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace zeromem {

/// A decoder (or encoder) transformer described the way Hugging Face
/// config.json files describe it. All sizes are element counts.
struct ModelArch {
    std::string name;            ///< e.g. "llama-2-7b"
    std::string family;          ///< "llama", "mistral", "qwen2", "gpt2", "opt", "gpt_neox", "falcon", "bloom"
    int64_t hidden_size = 0;     ///< h
    int64_t num_layers = 0;      ///< L
    int64_t num_heads = 0;       ///< a (query heads)
    int64_t num_kv_heads = 0;    ///< GQA/MQA key-value heads (== num_heads for MHA)
    int64_t head_dim = 0;        ///< usually hidden_size / num_heads
    int64_t ffn_size = 0;        ///< intermediate size of the MLP
    int64_t vocab_size = 0;      ///< V
    int64_t max_position_embeddings = 0;
    bool gated_mlp = false;      ///< SwiGLU-style: gate, up and down projections
    bool tied_embeddings = false;      ///< LM head shares the input embedding
    bool learned_positions = false;    ///< GPT-2/OPT learned absolute position embedding
    // The remaining fields let count_params() reproduce each family exactly;
    // their meaning is documented in model.cpp next to the counting code.
    bool qkv_bias = false;
    bool attn_out_bias = false;
    bool mlp_bias = false;
    bool norm_has_bias = false;        ///< LayerNorm (weight+bias) vs RMSNorm (weight)
    int64_t norms_per_layer = 2;
    bool final_norm = true;
    bool embedding_norm = false;       ///< BLOOM word_embeddings_layernorm
    int64_t position_offset = 0;       ///< OPT learned positions have 2 extra rows
    int64_t word_embed_proj_dim = 0;   ///< OPT-350m style projection (0 = none)
    /// Q, K and V are one fused linear module (GPT-2 c_attn, GPT-NeoX/BLOOM/
    /// Falcon query_key_value). Changes only largest_module, not the total.
    bool fused_qkv = false;
    int64_t published_params = 0;      ///< count published by the model's authors (presets only; 0 if unknown)
    std::string published_source;      ///< where published_params comes from
};

/// Exact parameter counts of an architecture.
struct ParamCount {
    uint64_t total = 0;          ///< all parameters, tied weights counted once
    uint64_t embedding = 0;      ///< input embedding (+ learned positions)
    uint64_t per_layer = 0;      ///< one transformer block
    uint64_t lm_head = 0;        ///< 0 when tied
    /// The largest single module's own parameters (DeepSpeed's
    /// "largest_layer_params": max over model.modules() of its
    /// non-recursive numel, stage3.py model_to_params); usually the
    /// embedding or LM head matrix.
    uint64_t largest_module = 0;
};

/// Counts parameters exactly (embeddings, tied weights, GQA attention,
/// gated or plain MLP, norms, biases). Throws InputError if a size is not
/// positive.
ParamCount count_params(const ModelArch& arch);

/// Builds a ModelArch from a parsed Hugging Face config.json. Recognises at
/// least the naming of Llama, Mistral, Qwen2, GPT-2, OPT, GPT-NeoX, Falcon and
/// BLOOM (keyed on "model_type"; falls back to the field names present).
/// Throws InputError naming `source` and the missing/ill-typed key.
ModelArch arch_from_hf_config(const nlohmann::json& config, const std::string& source);

/// Reads and parses a Hugging Face config.json file. Throws InputError on a
/// missing file or malformed JSON (with line and column).
ModelArch load_hf_config(const std::string& path);

/// Loads preset `name` from `<data_dir>/models/<name>.json`. Unknown names
/// throw InputError listing the closest preset names.
ModelArch load_model_preset(const std::string& name, const std::string& data_dir);

/// Names of all presets in `<data_dir>/models/`, sorted.
std::vector<std::string> list_model_presets(const std::string& data_dir);

}  // namespace zeromem
