// config.json reader: OPT.
#include "model_families.h"

namespace zeromem::model_detail {

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

}  // namespace zeromem::model_detail
