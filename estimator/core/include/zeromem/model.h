// Model architectures: presets, Hugging Face config.json, exact parameter
// counts.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zeromem {

/// A decoder, encoder or encoder-decoder transformer (dense or MoE, with an
/// optional vision tower) described the way Hugging Face config.json files
/// describe it. All sizes are element counts. Fields added for the
/// per-family readers default to "absent", so existing fields keep their
/// meaning.
struct ModelArch {
    std::string name;            ///< e.g. "llama-2-7b"
    std::string family;          ///< reader family: a model_type of data/architectures/families.json ("llama", "mixtral", "t5", "llava", ...; "falcon" for RefinedWeb*)
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
    // their meaning is documented in param_count.cpp next to the counting code.
    bool qkv_bias = false;
    bool attn_out_bias = false;
    bool mlp_bias = false;
    bool norm_has_bias = false;        ///< LayerNorm (weight+bias) vs RMSNorm (weight)
    int64_t norms_per_layer = 2;
    /// Bytes per element one RMSNorm's autograd nodes save under 16-bit training (read only when
    /// norm_has_bias is false: nn.LayerNorm saves its input and two per-row statistics): 6 for
    /// LlamaRMSNorm, its fp32 copy of the input (PowBackward0 saves self, 4) and the 16-bit normalized
    /// tensor the weight multiplies (MulBackward0, 2); 8 where the weight multiplies the fp32 result
    /// (GemmaRMSNorm, GptOssRMSNorm: 4 + 4) or T5LayerNorm's mul keeps the 16-bit input beside the 16-bit
    /// normalized tensor (4 + 2 + 2). Under fp32 training every one of them saves 8 (input and result).
    int64_t rms_norm_saved_bytes = 6;
    bool final_norm = true;
    bool embedding_norm = false;       ///< BLOOM word_embeddings_layernorm
    int64_t position_offset = 0;       ///< OPT learned positions have 2 extra rows
    int64_t word_embed_proj_dim = 0;   ///< OPT-350m style projection (0 = none)
    /// Q, K and V are one fused linear module (GPT-2 c_attn, GPT-NeoX/BLOOM/
    /// Falcon query_key_value). Changes only largest_module, not the total.
    bool fused_qkv = false;
    int64_t published_params = 0;      ///< count published by the model's authors (presets only; 0 if unknown)
    std::string published_source;      ///< where published_params comes from

    // --- Layouts beyond a uniform dense decoder (all default to "absent",
    // so an arch built by hand with the fields above counts as before). ---
    std::string model_type;            ///< config.json "model_type" as written ("" for hand-built archs)
    bool lm_head_bias = false;         ///< LM head Linear has a bias of V (Phi, GPT-J)
    bool qk_norm = false;              ///< per-layer q_norm and k_norm over head_dim (Qwen3, Gemma 3, Phi qk_layernorm)
    bool attention_sinks = false;      ///< one learned sink logit per query head (gpt-oss)
    bool fused_gate_up = false;        ///< gate and up are one Linear(h, 2f) (Phi-3); largest_module only
    // Multi-head latent attention (DeepSeek-V2/V3); kv_lora_rank > 0 selects it.
    int64_t q_lora_rank = 0;           ///< 0: q_proj is one h x a*(nope+rope) matrix
    int64_t kv_lora_rank = 0;
    int64_t qk_nope_head_dim = 0;
    int64_t qk_rope_head_dim = 0;
    int64_t v_head_dim = 0;
    // Mixture of experts; num_experts > 0 selects it for num_moe_layers blocks.
    int64_t num_experts = 0;           ///< routed experts per MoE block
    int64_t num_experts_per_tok = 0;   ///< top-k routed experts a token uses
    int64_t expert_ffn_size = 0;       ///< one routed expert's MLP width (gated like gated_mlp)
    int64_t shared_expert_ffn_size = 0;///< width of the always-on shared expert MLP (0 = none)
    int64_t num_moe_layers = 0;        ///< blocks with MoE; the other num_layers - num_moe_layers use ffn_size
    bool shared_expert_gate = false;   ///< Qwen2-MoE: sigmoid gate Linear(h, 1) on the shared expert
    bool router_bias = false;          ///< router Linear(h, E) has a bias (gpt-oss)
    bool expert_bias = false;          ///< expert linears have biases (gpt-oss)
    /// The family's transformers class packs its routed experts into one module from
    /// transformers 5 (stack_facts.h StackFacts::packs_moe_experts): Mixtral, Qwen2-MoE,
    /// Qwen3-MoE, DeepSeek. The request sets fused_experts when the stack is that new.
    bool packs_experts_from_transformers_5 = false;
    bool fused_experts = false;        ///< all experts of a block are one module (gpt-oss, Llama 4): largest_module
    // Encoder-decoder (T5) and encoder-only (BERT, RoBERTa).
    int64_t num_decoder_layers = 0;    ///< enc-dec: blocks with cross-attention; num_layers counts encoder + decoder
    int64_t relative_attention_buckets = 0;  ///< T5: one Embedding(buckets, heads) per stack
    bool encoder_only = false;         ///< no LM head unless mlm_head
    int64_t type_vocab_size = 0;       ///< BERT token_type_embeddings rows
    bool pooler = false;               ///< BERT pooler dense h x h + h
    bool mlm_head = false;             ///< masked-LM head: dense h x h + h, LayerNorm 2h, output bias V (decoder tied)
    // Dropout in training: which nn.Dropout / F.dropout sits where is the
    // family's modeling file; its probability is a config key (rules in
    // data/architectures/families.json "dropout"). A site stores its 1-byte
    // mask (at::native_dropout) only when p > 0: at p = 0 at::dropout returns
    // its input (aten/src/ATen/native/Dropout.cpp _dropout_impl). 0 also
    // means the model has no such site (Llama has attention dropout only).
    double embedding_dropout = 0.0;          ///< on the embedding output (GPT-2 embd_pdrop, BERT hidden_dropout_prob)
    double attention_dropout = 0.0;          ///< on the s x s attention probabilities (eager attention only)
    double attention_residual_dropout = 0.0; ///< on the attention block's output before the residual add
    double mlp_residual_dropout = 0.0;       ///< on the MLP's output before the residual add
    // Vision tower and projector of a vision-language model, counted by the
    // reader from vision_config (their layouts differ per family).
    std::string vision_kind;           ///< "" (none), "clip", "siglip", "qwen2_vl", "qwen2_5_vl", "qwen3_vl", "llama4"
    int64_t vision_hidden_size = 0;
    int64_t vision_layers = 0;
    int64_t vision_ffn_size = 0;
    uint64_t vision_block_params = 0;  ///< one vision transformer block
    uint64_t vision_other_params = 0;  ///< patch/position/class embeddings, norms, mergers outside the blocks
    uint64_t projector_params = 0;     ///< vision-to-text projector
    uint64_t vision_largest_module = 0;///< largest single module of the tower and projector
    /// Things the reader assumed or could not count, each naming the key;
    /// resolve_request passes them on as warnings.
    std::vector<std::string> warnings;
};

/// One kind of block in a model and how many there are.
struct BlockCount {
    std::string name;            ///< e.g. "decoder block (MoE)", "embedding", "vision block"
    uint64_t count = 0;          ///< how many
    uint64_t params = 0;         ///< parameters of one
};

/// Exact parameter counts of an architecture.
struct ParamCount {
    uint64_t total = 0;          ///< all parameters, tied weights counted once
    uint64_t embedding = 0;      ///< input embedding (+ learned positions)
    uint64_t per_layer = 0;      ///< one transformer block (the largest kind where blocks differ: MoE, T5 decoder)
    uint64_t lm_head = 0;        ///< 0 when tied
    /// The largest single module's own parameters (DeepSpeed's
    /// "largest_layer_params": max over model.modules() of its
    /// non-recursive numel, stage3.py model_to_params); usually the
    /// embedding or LM head matrix.
    uint64_t largest_module = 0;
    /// Parameters one token uses: total minus the routed experts it is not
    /// sent to (num_experts - num_experts_per_tok per MoE block). Equals
    /// total for dense models. Includes embeddings, LM head and vision tower.
    uint64_t active = 0;
    uint64_t vision = 0;         ///< vision tower + projector (0 for text models)
    /// Parameters of one routed expert (its MLP; 0 for dense models).
    uint64_t one_expert = 0;
    /// All routed experts of all MoE blocks: num_moe_layers x num_experts x
    /// one_expert. These are what DeepSpeed-MoE expert parallelism splits
    /// over ep_size ranks (deepspeed/moe/layer.py MoE: num_local_experts =
    /// num_experts / ep_size); the router and shared experts are not.
    uint64_t routed_experts = 0;
    std::string largest_module_name;   ///< which module largest_module is
    std::vector<BlockCount> blocks;    ///< every part of the model; sum of count*params == total
};

/// Counts parameters exactly (embeddings, tied weights, GQA attention,
/// gated or plain MLP, norms, biases). Throws InputError if a size is not
/// positive.
ParamCount count_params(const ModelArch& arch);

/// Every member equal (the warnings included).
bool operator==(const ModelArch& a, const ModelArch& b);
inline bool operator!=(const ModelArch& a, const ModelArch& b) { return !(a == b); }

/// count_params(arch), kept per thread for the last architecture counted: the estimator and the
/// speed model count once per configuration they evaluate, and the planner's thousands of
/// candidates share one architecture. Never changed once built; throws as count_params.
std::shared_ptr<const ParamCount> shared_param_count(const ModelArch& arch);

/// LoRA adapter parameters of rank `rank` on the projections `targets`
/// ("q,k,v,o,gate,up,down"): rank x (in + out) per targeted projection and
/// layer. Throws InputError naming --lora-rank / --lora-target for a bad value.
uint64_t lora_params(const ModelArch& arch, int64_t rank, const std::string& targets);

/// Width of the MLP one token passes through in a block, for activation
/// shapes: ffn_size for dense models; for MoE num_experts_per_tok x
/// expert_ffn_size + shared_expert_ffn_size (the routed experts' outputs a
/// token produces, not expert parallelism; see moe.h for that).
int64_t active_ffn_width(const ModelArch& arch);

/// Bytes per element one of the model's RMSNorms saves for backward: 0 for nn.LayerNorm
/// (norm_has_bias; the input it saves is the norm input Korthikanti's count already holds), else ModelArch::rms_norm_saved_bytes under 16-bit training and 8 under fp32 (the input, which
/// `.to(torch.float32)` returns as is, and the fp32 normalized tensor).
inline int64_t rms_norm_saved_bytes_per_element(const ModelArch& arch, bool fp32) {
    if (arch.norm_has_bias) return 0;
    return fp32 ? 8 : arch.rms_norm_saved_bytes;
}

/// What a pre-norm saves beyond the b_a-byte norm input Korthikanti's count (and every reading's
/// layernorm_input) already holds: rms_norm_saved_bytes_per_element - b_a, b_a = 4 under fp32 and 2
/// otherwise; 0 for nn.LayerNorm.
inline int64_t rms_norm_extra_bytes_per_element(const ModelArch& arch, bool fp32) {
    const int64_t saved = rms_norm_saved_bytes_per_element(arch, fp32);
    return saved > 0 ? saved - (fp32 ? 4 : 2) : 0;
}

/// The model_type values arch_from_hf_config reads (from
/// data/architectures/families.json), sorted.
std::vector<std::string> known_model_types();

/// A few lines for --explain: the family, the layout derived (tied
/// embeddings, biases, attention kind, experts, MLA ranks, vision tower) and
/// the parameter count of each block kind.
std::string describe_arch(const ModelArch& arch);

/// Builds a ModelArch from a parsed Hugging Face config.json with the reader
/// of its family, chosen by "model_type" (or "architectures" when
/// model_type is absent); families and their rules are listed in
/// data/architectures/families.json. Vision-language wrappers read their
/// nested text_config / vision_config. Throws InputError naming `source`
/// and the key for a missing/ill-typed key, an unknown model_type (the
/// message lists the known ones and the --params/--largest-layer-params
/// fallback) or a count-changing key the family does not understand;
/// assumptions are left in ModelArch::warnings.
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
