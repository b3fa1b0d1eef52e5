// config.json reader: BLOOM.
#include "model_families.h"

namespace zeromem::model_detail {

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

}  // namespace zeromem::model_detail
