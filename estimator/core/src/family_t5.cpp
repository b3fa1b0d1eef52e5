// config.json reader: T5.
#include "model_families.h"

#include "zeromem/types.h"

namespace zeromem::model_detail {

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
    // T5LayerNorm: the fp32 copy of the input (pow), the 16-bit input (its mul with rsqrt) and the
    // 16-bit normalized tensor the weight multiplies (modeling_t5.py T5LayerNorm.forward).
    a.rms_norm_saved_bytes = 8;
    a.encoder_only = encoder_model;
    a.max_position_embeddings = r.fam_integer(fam, "n_positions", 0);
}

}  // namespace zeromem::model_detail
