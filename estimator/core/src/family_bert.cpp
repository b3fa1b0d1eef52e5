// config.json reader: BERT / RoBERTa.
#include "model_families.h"

#include "zeromem/types.h"

namespace zeromem::model_detail {

// BERT / RoBERTa (modeling_bert.py, modeling_roberta.py): word, position and
// token-type embeddings + LayerNorm; post-LN blocks with biases everywhere;
// the base model's pooler; *ForMaskedLM adds the LM head (its decoder weight
// tied to the word embeddings) and has no pooler.
void read_bert(ModelArch& a, const ConfigReader& r, const json& fam, const std::string& arch_name) {
    a.hidden_size = r.fam_integer(fam, "hidden_size");
    a.num_layers = r.fam_integer(fam, "num_hidden_layers");
    a.num_heads = r.fam_integer(fam, "num_attention_heads");
    if (a.num_heads <= 0) throw InputError(r.source() + ": key 'num_attention_heads' must be positive");
    a.num_kv_heads = a.num_heads;
    a.head_dim = default_head_dim(a, r);
    a.ffn_size = r.fam_integer(fam, "intermediate_size");
    a.vocab_size = r.fam_integer(fam, "vocab_size");
    a.max_position_embeddings = r.fam_integer(fam, "max_position_embeddings");
    a.type_vocab_size = r.fam_integer(fam, "type_vocab_size");
    a.learned_positions = true;
    a.embedding_norm = true;
    a.qkv_bias = a.attn_out_bias = a.mlp_bias = true;
    a.norm_has_bias = true;
    a.norms_per_layer = 2;
    a.final_norm = false;
    a.encoder_only = true;
    a.tied_embeddings = true;
    auto has = [&](const char* part) { return arch_name.find(part) != std::string::npos; };
    const bool base = arch_name.empty() || arch_name == "BertModel" || arch_name == "RobertaModel";
    a.mlm_head = has("ForMaskedLM") || has("ForPreTraining");
    a.pooler = base || has("ForPreTraining");
    if (!base && !a.mlm_head) {
        a.pooler = true;
        a.warnings.push_back(r.source() + ": architectures '" + arch_name +
                             "': its task head is not counted (counted: the base model with its pooler)");
    }
    if (has("ForPreTraining"))
        a.warnings.push_back(r.source() + ": architectures '" + arch_name +
                             "': the next-sentence head (h x 2 + 2) is not counted");
}

}  // namespace zeromem::model_detail
