// config.json reader: GPT-NeoX / Pythia.
#include "model_families.h"

namespace zeromem::model_detail {

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

}  // namespace zeromem::model_detail
