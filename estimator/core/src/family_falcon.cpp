// config.json reader: Falcon.
#include "model_families.h"

namespace zeromem::model_detail {

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

}  // namespace zeromem::model_detail
