// config.json reader: the decoders described by families.json "layout" (Llama-like).
#include "model_families.h"

#include "zeromem/types.h"

#include <optional>

namespace zeromem::model_detail {

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
    a.rms_norm_saved_bytes = layout_int(fam, "rms_norm_saved_bytes", 6);
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

}  // namespace zeromem::model_detail
