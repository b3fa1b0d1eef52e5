// config.json reader: multi-head latent attention of a decoder (read_decoder).
#include "model_families.h"

namespace zeromem::model_detail {

// Multi-head latent attention (modeling_deepseek_v3.py DeepseekV3Attention).
void read_mla(ModelArch& a, const ConfigReader& r, const json& fam) {
    // q_lora_rank null (DeepSeek-V2-Lite) means a direct q_proj, not the family default.
    const bool q_null = r.config().contains("q_lora_rank") && r.config()["q_lora_rank"].is_null();
    a.q_lora_rank = q_null ? 0 : r.fam_integer(fam, "q_lora_rank", 0);
    if (!q_null && r.config().contains("q_lora_rank") && a.q_lora_rank == 0)
        a.warnings.push_back(r.source() + ": 'q_lora_rank' is 0: read as null (a direct q_proj); transformers "
                                          "would build a zero-width q_a_proj");
    a.kv_lora_rank = r.fam_integer(fam, "kv_lora_rank");
    if (a.kv_lora_rank == 0)
        a.warnings.push_back(r.source() + ": 'kv_lora_rank' is 0: the attention is read as plain multi-head "
                                          "attention, without MLA (multi-head latent attention)");
    a.qk_nope_head_dim = r.fam_integer(fam, "qk_nope_head_dim");
    a.qk_rope_head_dim = r.fam_integer(fam, "qk_rope_head_dim");
    a.v_head_dim = r.fam_integer(fam, "v_head_dim");
    // Shapes for the activation model: every head gets its own expanded k, v.
    a.head_dim = a.qk_nope_head_dim + a.qk_rope_head_dim;
    a.num_kv_heads = a.num_heads;
    a.attn_out_bias = r.fam_boolean(fam, "attention_bias");
}

}  // namespace zeromem::model_detail
