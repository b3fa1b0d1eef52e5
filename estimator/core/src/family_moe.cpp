// config.json reader: the MoE layout of a decoder (read_decoder).
#include "model_families.h"

#include "zeromem/types.h"

#include <algorithm>
#include <vector>

namespace zeromem::model_detail {

namespace {

// Refuses expert counts a MoE model cannot have, naming the config key:
// no experts or a negative count (a DeepSeek n_routed_experts of null is a
// dense model and stays allowed), top-k not in 1..experts.
void check_moe_values(const ModelArch& a, const ConfigReader& r, const std::string& kind) {
    const char* key = kind == "deepseek" ? "n_routed_experts"
                      : (kind == "qwen2_moe" || kind == "qwen3_moe") ? "num_experts" : "num_local_experts";
    const bool null_experts = kind == "deepseek" && r.config().contains("n_routed_experts") &&
                              r.config()["n_routed_experts"].is_null();
    if (!null_experts && a.num_experts <= 0 && r.find({key}))
        throw InputError(r.source() + ": key '" + key + "' must be a positive number of experts, got " +
                         std::to_string(a.num_experts));
    if (a.num_experts > 2147483647)  // the bound check_sizes puts on every size, here with the key's name
        throw InputError(r.source() + ": key '" + key + "' is too large: " + std::to_string(a.num_experts) +
                         " (at most 2147483647)");
    if (a.num_experts > 0 && a.num_experts_per_tok <= 0)
        throw InputError(r.source() + ": key 'num_experts_per_tok' must be positive, got " +
                         std::to_string(a.num_experts_per_tok));
    if (a.num_experts > 0 && a.num_experts_per_tok > a.num_experts)
        throw InputError(r.source() + ": 'num_experts_per_tok' " + std::to_string(a.num_experts_per_tok) +
                         " is more than the " + std::to_string(a.num_experts) + " experts");
}

}  // namespace

// MoE layouts (which blocks are MoE, expert and shared widths), per family:
// modeling_mixtral.py MixtralSparseMoeBlock; modeling_qwen2_moe.py /
// modeling_qwen3_moe.py decoder layer (mlp_only_layers, decoder_sparse_step);
// modeling_deepseek_v3.py (first_k_dense_replace, moe_layer_freq,
// n_shared_experts); modeling_llama4.py (interleave_moe_layer_step,
// intermediate_size_mlp); modeling_gpt_oss.py (GptOssMLP).
void read_moe(ModelArch& a, const ConfigReader& r, const json& fam, const std::string& kind) {
    const int64_t L = a.num_layers;
    a.num_experts_per_tok = r.fam_integer(fam, "num_experts_per_tok");
    if (kind == "mixtral" || kind == "gpt_oss") {
        a.num_experts = r.fam_integer(fam, "num_local_experts");
        if (kind == "gpt_oss") (void)r.find({"experts_per_token"});  // the original spelling of num_experts_per_tok
        a.expert_ffn_size = a.ffn_size;
        a.num_moe_layers = L;
        if (kind == "gpt_oss") a.router_bias = a.expert_bias = a.fused_experts = true;
        else a.packs_experts_from_transformers_5 = true;
    } else if (kind == "qwen2_moe" || kind == "qwen3_moe") {
        a.num_experts = r.fam_integer(fam, "num_experts");
        a.expert_ffn_size = r.fam_integer(fam, "moe_intermediate_size");
        a.packs_experts_from_transformers_5 = true;
        const int64_t step = r.fam_integer(fam, "decoder_sparse_step", 1);
        if (step <= 0) throw InputError(r.source() + ": key 'decoder_sparse_step' must be positive");
        std::vector<int64_t> dense;
        list_length(r, "mlp_only_layers", &dense);
        for (int64_t i = 0; i < L; ++i)
            if (std::find(dense.begin(), dense.end(), i) == dense.end() && a.num_experts > 0 && (i + 1) % step == 0)
                ++a.num_moe_layers;
        if (kind == "qwen2_moe") {
            a.shared_expert_ffn_size = r.fam_integer(fam, "shared_expert_intermediate_size");
            a.shared_expert_gate = a.shared_expert_ffn_size > 0;
        }
    } else if (kind == "deepseek") {
        // The router's e_score_correction_bias (V3) is a registered buffer in
        // transformers' DeepseekV3TopkRouter, not a parameter: not counted.
        const bool dense = r.config().contains("n_routed_experts") && r.config()["n_routed_experts"].is_null();
        a.num_experts = dense ? 0 : r.fam_integer(fam, "n_routed_experts", 0);  // null: a dense model
        if (!r.given("n_routed_experts") && a.num_experts == 0)
            a.warnings.push_back(r.source() + ": 'n_routed_experts' is " + (dense ? "null" : "absent") +
                                 ": the model is read as dense, without MoE blocks (modeling_deepseek MoE only "
                                 "when n_routed_experts is not None)");
        a.expert_ffn_size = r.fam_integer(fam, "moe_intermediate_size");
        a.packs_experts_from_transformers_5 = true;
        // null: no shared experts, as modeling_deepseek_v2.py DeepseekV2MoE (n_shared_experts is not None);
        // absent: the family default (warned about) or none.
        const bool no_shared = r.config().contains("n_shared_experts") && r.config()["n_shared_experts"].is_null();
        a.shared_expert_ffn_size = no_shared ? 0 : r.fam_integer(fam, "n_shared_experts", 0) * a.expert_ffn_size;
        if (a.num_experts > 0 && !r.given("n_shared_experts") && a.shared_expert_ffn_size == 0)
            a.warnings.push_back(r.source() + ": 'n_shared_experts' is " + (no_shared ? "null" : "absent") +
                                 ": counted without shared experts");
        const int64_t first_dense = r.fam_integer(fam, "first_k_dense_replace", 0);
        if (first_dense < 0)
            throw InputError(r.source() + ": key 'first_k_dense_replace' must be >= 0, got " +
                             std::to_string(first_dense));
        const int64_t freq = r.fam_integer(fam, "moe_layer_freq", 1);
        if (freq <= 0) throw InputError(r.source() + ": key 'moe_layer_freq' must be positive");
        for (int64_t i = 0; i < L; ++i)
            if (a.num_experts > 0 && i >= first_dense && i % freq == 0) ++a.num_moe_layers;
        if (const json* m = r.find({"num_nextn_predict_layers"}); m && m->is_number_integer() && m->get<int64_t>() > 0)
            a.warnings.push_back(r.source() + ": 'num_nextn_predict_layers' = " + m->dump() +
                                 ": the multi-token-prediction layers stored in the checkpoint are not counted "
                                 "(transformers' DeepseekV3ForCausalLM does not build them)");
    } else if (kind == "llama4") {
        a.num_experts = r.fam_integer(fam, "num_local_experts");
        a.expert_ffn_size = a.ffn_size;                  // intermediate_size: one expert and the shared expert
        a.shared_expert_ffn_size = a.ffn_size;
        a.ffn_size = r.fam_integer(fam, "intermediate_size_mlp");  // dense blocks
        a.fused_experts = true;
        (void)r.find({"use_qk_norm"});  // Llama4TextL2Norm: no weights
        std::vector<int64_t> moe_layers;
        if (list_length(r, "moe_layers", &moe_layers) > 0) {
            a.num_moe_layers = static_cast<int64_t>(moe_layers.size());
        } else {
            const int64_t step = r.fam_integer(fam, "interleave_moe_layer_step", 1);
            if (step <= 0) throw InputError(r.source() + ": key 'interleave_moe_layer_step' must be positive");
            a.num_moe_layers = a.num_experts > 0 ? L / step : 0;
        }
    }
    check_moe_values(a, r, kind);
}

}  // namespace zeromem::model_detail
