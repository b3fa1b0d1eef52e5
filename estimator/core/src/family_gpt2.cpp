// config.json reader: GPT-2.
#include "model_families.h"

namespace zeromem::model_detail {

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

}  // namespace zeromem::model_detail
