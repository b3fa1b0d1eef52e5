// Every architecture family read by its own rules. The oracles
// are tests/data/hf_configs/published/counts.json (published counts and
// exact counts with their citations) and arithmetic written out here from
// the transformers module layout of each family.
#include "input_error.h"
#include "zeromem/estimate.h"
#include "zeromem/model.h"
#include "zeromem/types.h"

#include "published_configs.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <string>

using namespace zeromem;

using zeromem::testing::contains;
using zeromem::testing::error_of;
using zeromem::testing::kPub;
using zeromem::testing::read_json;

namespace {


ParamCount count_file(const std::string& file) { return count_params(load_hf_config(kPub + file)); }


bool any_warning(const ModelArch& a, const std::string& part) {
    for (const auto& w : a.warnings)
        if (contains(w, part)) return true;
    return false;
}

// Parameters of a Linear in -> out with or without bias.
uint64_t lin(uint64_t in, uint64_t out, bool bias = false) { return in * out + (bias ? out : 0); }

}  // namespace

// Every config with an exact count in counts.json counts exactly; the
// others fall within the rounding of the published figure (tested below).
TEST(PublishedConfigs, ExactCountForEveryConfigWithOne) {
    const auto counts = read_json(kPub + "counts.json");
    int checked = 0;
    for (const auto& e : counts) {
        const std::string file = e["file"];
        if (e["exact_reference"].is_null()) continue;
        const uint64_t expected = e["exact_reference"]["params"].get<uint64_t>();
        SCOPED_TRACE(file + " (" + e["exact_reference"]["citation"].get<std::string>() + ")");
        EXPECT_EQ(count_file(file).total, expected);
        ++checked;
    }
    EXPECT_EQ(checked, 28);
}

TEST(PublishedConfigs, EveryFileIsReadAndNamedInCounts) {
    const auto counts = read_json(kPub + "counts.json");
    EXPECT_EQ(counts.size(), 30u);
    for (const auto& e : counts) {
        const ModelArch a = load_hf_config(kPub + e["file"].get<std::string>());
        EXPECT_EQ(a.model_type, e["model_type"].get<std::string>()) << e["file"];
        // Every key of these published configs is understood: no warning,
        // except Llama 4's copy, which lacks its vision_config.
        if (e["file"] != "llama-4-scout-17b-16e.json") {
            EXPECT_TRUE(a.warnings.empty()) << e["file"] << ": " << (a.warnings.empty() ? "" : a.warnings.front());
        }
    }
}

// Qwen2.5-VL: the Qwen2.5-7B text model (its exact count in counts.json)
// plus the vision tower, written out from modeling_qwen2_5_vl.py.
TEST(PublishedConfigs, Qwen25VlVisionTowerArithmetic) {
    const uint64_t h = 1280, f = 3420, m = 4 * h;
    const uint64_t patch = 3 * 2 * 14 * 14 * h;                              // Conv3d, no bias
    const uint64_t block = 2 * h + lin(h, 3 * h, true) + lin(h, h, true)     // norms, qkv, proj
                           + 2 * lin(h, f, true) + lin(f, h, true);          // gated MLP with biases
    const uint64_t merger = h + lin(m, m, true) + lin(m, 3584, true);
    const ParamCount c = count_file("qwen2.5-vl-7b-instruct.json");
    EXPECT_EQ(c.vision, patch + 32 * block + merger);
    EXPECT_EQ(c.total - c.vision, 7615616512ull);  // Qwen2.5-7B-Instruct, counts.json
}

// No exact count is published for Qwen3-VL-8B: within the rounding of the
// 8.8B listed (counts.json), and the text part equals Qwen3-8B's exact count.
TEST(PublishedConfigs, Qwen3VlWithinPublishedRounding) {
    const ParamCount c = count_file("qwen3-vl-8b.json");
    EXPECT_NEAR(double(c.total), 8.8e9, 0.05e9);
    EXPECT_EQ(c.total - c.vision, 8190735360ull);  // Qwen3-8B, keras-hub qwen3_8b_en
    const ModelArch a = load_hf_config(kPub + "qwen3-vl-8b.json");
    EXPECT_EQ(a.vision_kind, "qwen3_vl");
    EXPECT_EQ(a.vision_layers, 27);
}

// Llama 4 Scout: the copy in counts.json has no vision_config, so the tower
// takes Llama4VisionConfig's defaults and a warning says so. The text model
// written out from modeling_llama4.py: 48 MoE blocks of 16 fused experts +
// a shared expert (both width 8192), GQA 40/8 heads of 128, untied.
TEST(PublishedConfigs, Llama4ScoutTextAndWarnsAboutMissingVisionConfig) {
    const ModelArch a = load_hf_config(kPub + "llama-4-scout-17b-16e.json");
    EXPECT_TRUE(any_warning(a, "vision_config")) << "no warning about the absent vision_config";
    const uint64_t h = 5120, f = 8192, V = 202048;
    const uint64_t attn = 2 * lin(h, 40 * 128) + 2 * lin(h, 8 * 128);
    const uint64_t expert = 3 * h * f;
    const uint64_t block = attn + 16 * expert + expert + lin(h, 16) + 2 * h;
    const uint64_t text = 2 * V * h + 48 * block + h;
    const ParamCount c = count_params(a);
    EXPECT_EQ(c.total - c.vision, text);
    // 17B active (model card): one routed + the shared expert per block.
    const uint64_t active_text = text - 48 * 15 * expert;
    EXPECT_EQ(c.active - c.vision, active_text);
    EXPECT_NEAR(double(active_text), 17e9, 0.5e9);
}

// With the vision_config of meta-llama/Llama-4-Scout-17B-16E's config.json
// (hidden 1408, 34 layers, 336 px, vision_output_dim 4096) the total is
// within the rounding of the published 109B.
TEST(PublishedConfigs, Llama4ScoutWithVisionConfigWithinPublished109B) {
    nlohmann::json cfg = read_json(kPub + "llama-4-scout-17b-16e.json");
    cfg["vision_config"] = {{"hidden_size", 1408}, {"image_size", 336}, {"intermediate_size", 5632},
                            {"num_hidden_layers", 34}, {"num_attention_heads", 16}, {"num_channels", 3},
                            {"patch_size", 14}, {"pixel_shuffle_ratio", 0.5}, {"projector_input_dim", 4096},
                            {"projector_output_dim", 4096}, {"vision_output_dim", 4096},
                            {"multi_modal_projector_bias", false}, {"model_type", "llama4_vision_model"}};
    const ModelArch a = arch_from_hf_config(cfg, "scout.json");
    EXPECT_FALSE(any_warning(a, "vision_config"));
    const uint64_t h = 1408, f = 5632;
    const uint64_t block = 4 * lin(h, h, true) + lin(h, f, true) + lin(f, h, true) + 4 * h;
    const uint64_t other = 3 * 14 * 14 * h + h + 577 * h + 4 * h + f * 4096 + 4096 * 4096;
    const ParamCount c = count_params(a);
    EXPECT_EQ(c.vision, 34 * block + other + 4096ull * 5120);
    EXPECT_NEAR(double(c.total), 109e9, 0.5e9);
}

TEST(Families, TiedEmbeddingsCountedOnce) {
    for (const char* f : {"gemma-2b.json", "qwen3-0.6b.json", "llama-3.2-1b-instruct.json", "gpt2-large.json",
                          "t5-small.json", "bloom-176b.json"}) {
        const ModelArch a = load_hf_config(kPub + f);
        EXPECT_TRUE(a.tied_embeddings) << f;
        EXPECT_EQ(count_params(a).lm_head, 0u) << f;
    }
    // Gemma's Table 2 (arXiv:2403.08295): 524,288,000 embedding parameters.
    EXPECT_EQ(count_file("gemma-2b.json").embedding, 524288000ull);
    EXPECT_FALSE(load_hf_config(kPub + "flan-t5-large.json").tied_embeddings);
}

// Mixtral: published 12.9B (8x7B) and 39B (8x22B) active of 46.7B / 141B.
TEST(Families, MoeActiveVersusTotal) {
    const ParamCount m7 = count_file("mixtral-8x7b.json");
    EXPECT_NEAR(double(m7.active), 12.9e9, 0.05e9);
    const uint64_t expert = 3ull * 4096 * 14336;
    EXPECT_EQ(m7.total - m7.active, 32ull * 6 * expert);
    const ParamCount m22 = count_file("mixtral-8x22b.json");
    EXPECT_NEAR(double(m22.active), 39e9, 0.5e9);
    EXPECT_NEAR(double(m22.total), 141e9, 0.5e9);
    // Dense models: active == total.
    const ParamCount l = count_file("llama-3.1-8b.json");
    EXPECT_EQ(l.active, l.total);
    // The largest module of Mixtral is an expert's matrix or the embedding:
    // each expert is its own module (MixtralBlockSparseTop2MLP's w1/w2/w3).
    EXPECT_EQ(m7.largest_module, 32000ull * 4096);
}

TEST(Families, PhiBiasesLmHeadBiasAndOneNorm) {
    const ModelArch a = load_hf_config(kPub + "phi-1.json");
    EXPECT_FALSE(a.gated_mlp);
    EXPECT_TRUE(a.lm_head_bias);
    EXPECT_EQ(a.norms_per_layer, 1);
    EXPECT_EQ(count_params(a).lm_head, 50295ull * 2048 + 50295);
    // Phi-4 (phi3): fused qkv and gate_up are the largest block modules.
    nlohmann::json cfg = read_json(kPub + "phi-4.json");
    cfg["vocab_size"] = 1000;  // so a block module, not the embedding, is the largest
    const ModelArch p4 = arch_from_hf_config(cfg, "phi-4.json");
    EXPECT_TRUE(p4.fused_qkv);
    EXPECT_EQ(count_params(p4).largest_module, 2ull * 5120 * 17920);  // gate_up_proj
}

TEST(Families, EncoderDecoderAndEncoderOnly) {
    const ModelArch t5 = load_hf_config(kPub + "t5-small.json");
    EXPECT_EQ(t5.num_layers, 12);  // 6 encoder + 6 decoder blocks: activations sum both stacks
    EXPECT_EQ(t5.num_decoder_layers, 6);
    const ModelArch bert = load_hf_config(kPub + "bert-base-uncased.json");
    EXPECT_TRUE(bert.encoder_only);
    EXPECT_TRUE(bert.pooler);
    EXPECT_EQ(count_params(bert).lm_head, 0u);
}

// ---------------------------------------------------------------------------
// Families without a config in counts.json: the configs below carry the
// keys of the published config.json of the named checkpoint; the expected
// counts are the published figures and the arithmetic written out here.

namespace {

// DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json).
nlohmann::json deepseek_v3() {
    return {{"model_type", "deepseek_v3"}, {"architectures", {"DeepseekV3ForCausalLM"}}, {"hidden_size", 7168},
            {"intermediate_size", 18432}, {"moe_intermediate_size", 2048}, {"num_hidden_layers", 61},
            {"num_attention_heads", 128}, {"num_key_value_heads", 128}, {"n_shared_experts", 1},
            {"n_routed_experts", 256}, {"num_experts_per_tok", 8}, {"kv_lora_rank", 512}, {"q_lora_rank", 1536},
            {"qk_rope_head_dim", 64}, {"v_head_dim", 128}, {"qk_nope_head_dim", 128}, {"first_k_dense_replace", 3},
            {"moe_layer_freq", 1}, {"vocab_size", 129280}, {"max_position_embeddings", 163840},
            {"tie_word_embeddings", false}, {"num_nextn_predict_layers", 1}, {"n_group", 8}, {"topk_group", 4}};
}

}  // namespace

// DeepSeek-V3 technical report (arXiv:2412.19437): 671B total, 37B
// activated per token (the 14B multi-token-prediction module is extra).
TEST(Families, DeepseekV3MlaAndSharedExperts) {
    const ModelArch a = arch_from_hf_config(deepseek_v3(), "dsv3.json");
    const uint64_t h = 7168, V = 129280;
    const uint64_t mla = lin(h, 1536) + 1536 + lin(1536, 128 * 192) + lin(h, 512 + 64) + 512 + lin(512, 128 * 256) +
                         lin(128 * 128, h);
    const uint64_t expert = 3 * h * 2048;
    const uint64_t dense_block = mla + 3 * h * 18432 + 2 * h;
    const uint64_t moe_block = mla + 256 * expert + expert + 256 * h + 2 * h;
    const uint64_t total = 2 * V * h + 3 * dense_block + 58 * moe_block + h;
    const ParamCount c = count_params(a);
    EXPECT_EQ(c.total, total);
    EXPECT_NEAR(double(c.total), 671e9, 0.5e9);
    EXPECT_EQ(c.total - c.active, 58 * 248 * expert);
    // Published "37B activated" counts without the input embedding table.
    EXPECT_NEAR(double(c.active - V * h), 37e9, 0.5e9);
    EXPECT_EQ(a.num_moe_layers, 58);
    EXPECT_EQ(a.shared_expert_ffn_size, 2048);
    EXPECT_TRUE(any_warning(a, "num_nextn_predict_layers"));
    // Activations see the top-8 routed + the shared expert's width.
    EXPECT_EQ(active_ffn_width(a), 8 * 2048 + 2048);
    // DeepSeek-V2-Lite style: q_lora_rank null means a direct q_proj.
    nlohmann::json lite = deepseek_v3();
    lite["q_lora_rank"] = nullptr;
    EXPECT_EQ(arch_from_hf_config(lite, "lite.json").q_lora_rank, 0);
    EXPECT_EQ(count_params(arch_from_hf_config(lite, "lite.json")).total,
              total - 61 * (lin(h, 1536) + 1536 + lin(1536, 128 * 192) - lin(h, 128 * 192)));
}

// DeepSeek keys that change the count: a null n_routed_experts reads a
// dense model and kv_lora_rank 0 drops MLA, each with a warning; a null
// n_shared_experts means no shared expert in V2 and V3 alike
// (modeling_deepseek_v2.py DeepseekV2MoE: shared experts only when
// n_shared_experts is not None), warned; a negative first_k_dense_replace
// is refused by name.
TEST(Families, DeepseekNullAndZeroKeysWarnOrAreRefused) {
    const uint64_t h = 7168, expert = 3 * h * 2048;
    const uint64_t v3_total = count_params(arch_from_hf_config(deepseek_v3(), "dsv3.json")).total;
    nlohmann::json cfg = deepseek_v3();
    cfg["n_routed_experts"] = nullptr;
    const ModelArch dense = arch_from_hf_config(cfg, "dsv3_routed_null.json");
    EXPECT_EQ(dense.num_moe_layers, 0);
    EXPECT_TRUE(any_warning(dense, "'n_routed_experts' is null: the model is read as dense"));

    cfg = deepseek_v3();
    cfg["kv_lora_rank"] = 0;
    EXPECT_TRUE(any_warning(arch_from_hf_config(cfg, "dsv3_kvlora0.json"), "without MLA"));

    cfg = deepseek_v3();
    cfg["q_lora_rank"] = 0;  // read as null: a direct q_proj, warned
    EXPECT_TRUE(any_warning(arch_from_hf_config(cfg, "dsv3_qlora0.json"), "'q_lora_rank' is 0"));
    cfg["q_lora_rank"] = nullptr;
    EXPECT_FALSE(any_warning(arch_from_hf_config(cfg, "dsv3_qlora_null.json"), "'q_lora_rank' is 0"));

    for (const char* type : {"deepseek_v3", "deepseek_v2"}) {
        cfg = deepseek_v3();
        cfg["model_type"] = type;
        cfg["architectures"] = {std::string(type) == "deepseek_v2" ? "DeepseekV2ForCausalLM" : "DeepseekV3ForCausalLM"};
        cfg["n_shared_experts"] = nullptr;
        const ModelArch a = arch_from_hf_config(cfg, "dsv3_shared_null.json");
        SCOPED_TRACE(type);
        EXPECT_EQ(a.shared_expert_ffn_size, 0);
        EXPECT_TRUE(any_warning(a, "'n_shared_experts' is null"));
        EXPECT_EQ(count_params(a).total, v3_total - 58 * expert);  // one shared expert less in each MoE block
    }

    cfg = deepseek_v3();
    cfg.erase("n_routed_experts");  // DeepseekV3Config default 256, warned
    const ModelArch d = arch_from_hf_config(cfg, "dsv3_noroute.json");
    EXPECT_TRUE(any_warning(d, "no 'n_routed_experts'"));
    EXPECT_EQ(d.num_experts, 256);

    cfg = deepseek_v3();
    cfg["first_k_dense_replace"] = -1;
    const std::string msg = error_of([&] { arch_from_hf_config(cfg, "dsv3_fkd_neg.json"); });
    EXPECT_TRUE(contains(msg, "key 'first_k_dense_replace' must be >= 0")) << msg;
}

// Qwen3-30B-A3B (Qwen/Qwen3-30B-A3B model card: 30.5B total, 3.3B activated).
TEST(Families, Qwen3MoeTotalAndActive) {
    const nlohmann::json cfg = {{"model_type", "qwen3_moe"}, {"hidden_size", 2048}, {"intermediate_size", 6144},
                                {"moe_intermediate_size", 768}, {"num_hidden_layers", 48}, {"num_attention_heads", 32},
                                {"num_key_value_heads", 4}, {"head_dim", 128}, {"num_experts", 128},
                                {"num_experts_per_tok", 8}, {"vocab_size", 151936}, {"tie_word_embeddings", false},
                                {"decoder_sparse_step", 1}, {"mlp_only_layers", nlohmann::json::array()}};
    const uint64_t h = 2048, V = 151936, expert = 3 * h * 768;
    const uint64_t attn = 2 * lin(h, 4096) + 2 * lin(h, 512) + 2 * 128;  // + q_norm, k_norm
    const uint64_t total = 2 * V * h + 48 * (attn + 128 * expert + 128 * h + 2 * h) + h;
    const ParamCount c = count_params(arch_from_hf_config(cfg, "q3moe.json"));
    EXPECT_EQ(c.total, total);
    EXPECT_NEAR(double(c.total), 30.5e9, 0.05e9);
    EXPECT_EQ(c.active, total - 48 * 120 * expert);
    EXPECT_NEAR(double(c.active), 3.3e9, 0.1e9);
}

// Qwen1.5-MoE-A2.7B (qwen2_moe; model card: 14.3B total, 2.7B activated):
// 60 experts top-4, a shared expert of 5632 with its sigmoid gate, qkv bias.
TEST(Families, Qwen2MoeSharedExpertAndGate) {
    const nlohmann::json cfg = {{"model_type", "qwen2_moe"}, {"hidden_size", 2048}, {"intermediate_size", 5632},
                                {"moe_intermediate_size", 1408}, {"shared_expert_intermediate_size", 5632},
                                {"num_experts", 60}, {"num_experts_per_tok", 4}, {"num_hidden_layers", 24},
                                {"num_attention_heads", 16}, {"num_key_value_heads", 16}, {"vocab_size", 151936},
                                {"tie_word_embeddings", false}, {"decoder_sparse_step", 1}};
    const uint64_t h = 2048, V = 151936, expert = 3 * h * 1408;
    const uint64_t block = 3 * lin(h, h, true) + lin(h, h) + 60 * expert + 3 * h * 5632 + h + 60 * h + 2 * h;
    const ParamCount c = count_params(arch_from_hf_config(cfg, "q2moe.json"));
    EXPECT_EQ(c.total, 2 * V * h + 24 * block + h);
    EXPECT_NEAR(double(c.total), 14.3e9, 0.05e9);
    EXPECT_NEAR(double(c.active), 2.7e9, 0.05e9);
}

// gpt-oss-20b (OpenAI gpt-oss model card: 20.91B total, 3.61B active, the
// active count without the embedding table). Sinks, biased router and
// experts; the fused experts module is DeepSpeed's largest module.
TEST(Families, GptOssSinksBiasesAndFusedExperts) {
    const nlohmann::json cfg = {{"model_type", "gpt_oss"}, {"hidden_size", 2880}, {"intermediate_size", 2880},
                                {"num_hidden_layers", 24}, {"num_attention_heads", 64}, {"num_key_value_heads", 8},
                                {"head_dim", 64}, {"num_local_experts", 32}, {"num_experts_per_tok", 4},
                                {"experts_per_token", 4}, {"vocab_size", 201088}, {"tie_word_embeddings", false},
                                {"attention_bias", true}, {"sliding_window", 128}};
    const uint64_t h = 2880, f = 2880, V = 201088;
    const uint64_t expert = lin(h, 2 * f, true) + lin(f, h, true);
    const uint64_t attn = lin(h, 4096, true) + 2 * lin(h, 512, true) + lin(4096, h, true) + 64;
    const uint64_t total = 2 * V * h + 24 * (attn + lin(h, 32, true) + 32 * expert + 2 * h) + h;
    const ParamCount c = count_params(arch_from_hf_config(cfg, "oss.json"));
    EXPECT_EQ(c.total, total);
    EXPECT_NEAR(double(c.total), 20.91e9, 0.005e9);
    EXPECT_NEAR(double(c.active - V * h), 3.61e9, 0.005e9);
    EXPECT_EQ(c.largest_module, 32 * expert);
}

// Gemma 2 2B: four norms per block, tied; Gemma 3 1B adds q/k norms;
// Gemma 3 4B adds a SigLIP tower (27 x 1152, 896 px, no pooling head) and
// Gemma3MultiModalProjector. Published: 2.6B, 1B, 4B (Gemma 2 / Gemma 3
// reports); the exact totals are the arithmetic below.
TEST(Families, GemmaTwoAndThree) {
    const nlohmann::json g2 = {{"model_type", "gemma2"}, {"hidden_size", 2304}, {"intermediate_size", 9216},
                               {"num_hidden_layers", 26}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
                               {"head_dim", 256}, {"vocab_size", 256000}};
    const uint64_t g2_block = 2 * lin(2304, 2048) + 2 * lin(2304, 1024) + 3 * 2304ull * 9216 + 4 * 2304;
    EXPECT_EQ(count_params(arch_from_hf_config(g2, "g2.json")).total, 256000ull * 2304 + 26 * g2_block + 2304);
    EXPECT_EQ(count_params(arch_from_hf_config(g2, "g2.json")).total, 2614341888ull);

    const nlohmann::json g3 = {{"model_type", "gemma3_text"}, {"hidden_size", 1152}, {"intermediate_size", 6912},
                               {"num_hidden_layers", 26}, {"num_attention_heads", 4}, {"num_key_value_heads", 1},
                               {"head_dim", 256}, {"vocab_size", 262144}};
    const uint64_t g3_block = 2 * lin(1152, 1024) + 2 * lin(1152, 256) + 2 * 256 + 3 * 1152ull * 6912 + 4 * 1152;
    EXPECT_EQ(count_params(arch_from_hf_config(g3, "g3.json")).total, 262144ull * 1152 + 26 * g3_block + 1152);
    EXPECT_NEAR(double(count_params(arch_from_hf_config(g3, "g3.json")).total), 1e9, 0.05e9);

    const nlohmann::json g3mm = {
        {"model_type", "gemma3"},
        {"architectures", {"Gemma3ForConditionalGeneration"}},
        {"text_config", {{"model_type", "gemma3_text"}, {"hidden_size", 2560}, {"intermediate_size", 10240},
                         {"num_hidden_layers", 34}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
                         {"head_dim", 256}, {"vocab_size", 262208}}},
        {"vision_config", {{"model_type", "siglip_vision_model"}, {"hidden_size", 1152}, {"image_size", 896},
                           {"intermediate_size", 4304}, {"num_hidden_layers", 27}, {"num_attention_heads", 16},
                           {"patch_size", 14}, {"vision_use_head", false}}}};
    const uint64_t t_block = 2 * lin(2560, 2048) + 2 * lin(2560, 1024) + 2 * 256 + 3 * 2560ull * 10240 + 4 * 2560;
    const uint64_t text = 262208ull * 2560 + 34 * t_block + 2560;
    const uint64_t v = 1152, vf = 4304;
    const uint64_t v_block = 4 * lin(v, v, true) + lin(v, vf, true) + lin(vf, v, true) + 4 * v;
    const uint64_t vision = 3 * 14 * 14 * v + v + 4096 * v + 27 * v_block + 2 * v;
    const uint64_t projector = v * 2560 + v;
    const ParamCount c = count_params(arch_from_hf_config(g3mm, "g3mm.json"));
    EXPECT_EQ(c.total, text + vision + projector);
    EXPECT_NEAR(double(c.total), 4.3e9, 0.05e9);
}

// GPT-J-6B: rotary, q/k/v/out without bias, fc_in/fc_out with bias, one
// LayerNorm per (parallel) block, untied LM head with bias; published "6B".
TEST(Families, GptjLayout) {
    const nlohmann::json cfg = {{"model_type", "gptj"}, {"n_embd", 4096}, {"n_layer", 28}, {"n_head", 16},
                                {"rotary_dim", 64}, {"vocab_size", 50400}, {"n_positions", 2048},
                                {"n_inner", nullptr}, {"tie_word_embeddings", false}};
    const uint64_t h = 4096, V = 50400;
    const uint64_t block = 4 * h * h + lin(h, 4 * h, true) + lin(4 * h, h, true) + 2 * h;
    const uint64_t total = V * h + 28 * block + 2 * h + lin(h, V, true);
    EXPECT_EQ(count_params(arch_from_hf_config(cfg, "gptj.json")).total, total);
    EXPECT_EQ(total, 6050882784ull);
}

// StarCoder2-3B: biases everywhere (use_bias), LayerNorms, plain MLP, tied;
// published "3B".
TEST(Families, Starcoder2Layout) {
    const nlohmann::json cfg = {{"model_type", "starcoder2"}, {"hidden_size", 3072}, {"intermediate_size", 12288},
                                {"num_hidden_layers", 30}, {"num_attention_heads", 24}, {"num_key_value_heads", 2},
                                {"vocab_size", 49152}, {"use_bias", true}, {"max_position_embeddings", 16384}};
    const uint64_t h = 3072, f = 12288;
    const uint64_t block = 2 * lin(h, h, true) + 2 * lin(h, 256, true) + lin(h, f, true) + lin(f, h, true) + 4 * h;
    const ParamCount c = count_params(arch_from_hf_config(cfg, "sc2.json"));
    EXPECT_EQ(c.total, 49152 * h + 30 * block + 2 * h);
    EXPECT_NEAR(double(c.total), 3e9, 0.05e9);
}

// roberta-base as RobertaForMaskedLM: 124,697,433 is what transformers'
// num_parameters() reports for it (decoder tied, lm_head bias counted);
// RoBERTa paper: 125M.
TEST(Families, RobertaMaskedLm) {
    const nlohmann::json cfg = {{"model_type", "roberta"}, {"architectures", {"RobertaForMaskedLM"}},
                                {"hidden_size", 768}, {"intermediate_size", 3072}, {"num_hidden_layers", 12},
                                {"num_attention_heads", 12}, {"vocab_size", 50265}, {"max_position_embeddings", 514},
                                {"type_vocab_size", 1}};
    const uint64_t h = 768, f = 3072, V = 50265;
    const uint64_t emb = V * h + 514 * h + h + 2 * h;
    const uint64_t block = 4 * lin(h, h, true) + lin(h, f, true) + lin(f, h, true) + 4 * h;
    const uint64_t head = lin(h, h, true) + 2 * h + V;
    const ModelArch a = arch_from_hf_config(cfg, "roberta.json");
    EXPECT_FALSE(a.pooler);
    EXPECT_EQ(count_params(a).total, emb + 12 * block + head);
    EXPECT_EQ(count_params(a).total, 124697433ull);
}

// llava-hf/llava-1.5-7b-hf: Vicuna-7B text (vocab 32064) + CLIP ViT-L/14-336
// + two-layer projector; the Hub lists 7.06B.
TEST(Families, LlavaClipTowerAndProjector) {
    const nlohmann::json cfg = {
        {"model_type", "llava"},
        {"architectures", {"LlavaForConditionalGeneration"}},
        {"vision_feature_layer", -2},
        {"text_config", {{"model_type", "llama"}, {"hidden_size", 4096}, {"intermediate_size", 11008},
                         {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"vocab_size", 32064}}},
        {"vision_config", {{"model_type", "clip_vision_model"}, {"hidden_size", 1024}, {"image_size", 336},
                           {"intermediate_size", 4096}, {"num_hidden_layers", 24}, {"num_attention_heads", 16},
                           {"patch_size", 14}, {"projection_dim", 768}}}};
    const ParamCount c = count_params(arch_from_hf_config(cfg, "llava.json"));
    const uint64_t text = 6738415616ull + 2 * 64 * 4096;  // Llama-2-7B (counts.json) with 64 more vocabulary rows
    const uint64_t v = 1024, vf = 4096;
    const uint64_t v_block = 4 * lin(v, v, true) + lin(v, vf, true) + lin(vf, v, true) + 4 * v;
    const uint64_t vision = v + 3 * 14 * 14 * v + 577 * v + 2 * v + 24 * v_block + 2 * v;
    const uint64_t projector = lin(v, 4096, true) + lin(4096, 4096, true);
    EXPECT_EQ(c.total, text + vision + projector);
    EXPECT_NEAR(double(c.total), 7.06e9, 0.005e9);
}

// Qwen2-VL-7B-Instruct: Qwen2-7B text + the Qwen2-VL tower (embed_dim
// 1280, LayerNorms, mlp_ratio 4) and PatchMerger; the Hub lists 8.29B.
TEST(Families, Qwen2VlTower) {
    nlohmann::json cfg = read_json(kPub + "qwen2.5-vl-7b-instruct.json");
    cfg["model_type"] = "qwen2_vl";
    cfg["vision_config"] = {{"depth", 32}, {"embed_dim", 1280}, {"mlp_ratio", 4}, {"num_heads", 16},
                            {"in_chans", 3}, {"hidden_size", 3584}, {"patch_size", 14},
                            {"spatial_merge_size", 2}, {"temporal_patch_size", 2}};
    const uint64_t e = 1280, m = 4 * e;
    const uint64_t block = 4 * e + lin(e, 3 * e, true) + lin(e, e, true) + lin(e, 4 * e, true) + lin(4 * e, e, true);
    const uint64_t vision = 3 * 2 * 14 * 14 * e + 32 * block + 2 * e + lin(m, m, true) + lin(m, 3584, true);
    const ParamCount c = count_params(arch_from_hf_config(cfg, "q2vl.json"));
    EXPECT_EQ(c.total, 7615616512ull + vision);
    EXPECT_NEAR(double(c.total), 8.29e9, 0.005e9);
}

// A key that changes the count in other families is refused (MoE/MLA keys
// in a dense family) or warned about, by name; never silently ignored.
TEST(Families, UnderstoodKeysOnly) {
    nlohmann::json cfg = read_json(kPub + "llama-2-7b-hf.json");
    cfg["num_local_experts"] = 8;
    const std::string msg = error_of([&] { arch_from_hf_config(cfg, "l.json"); });
    EXPECT_TRUE(contains(msg, "'num_local_experts'")) << msg;
    EXPECT_TRUE(contains(msg, "'llama'")) << msg;
    EXPECT_TRUE(contains(msg, "--params")) << msg;

    nlohmann::json m = read_json(kPub + "mistral-7b-instruct-v0.2.json");
    m["qk_layernorm"] = true;
    const ModelArch a = arch_from_hf_config(m, "m.json");
    EXPECT_TRUE(any_warning(a, "'qk_layernorm'"));
    EXPECT_EQ(count_params(a).total, 7241732096ull);
    // A false / null value changes nothing and is not reported.
    m["qk_layernorm"] = false;
    EXPECT_TRUE(arch_from_hf_config(m, "m.json").warnings.empty());
}

// Without model_type, "architectures" picks the family.
TEST(Families, ArchitecturesSelectFamilyWithoutModelType) {
    nlohmann::json cfg = read_json(kPub + "gemma-2b.json");
    cfg.erase("model_type");
    const ModelArch a = arch_from_hf_config(cfg, "g.json");
    EXPECT_EQ(a.family, "gemma");
    EXPECT_EQ(count_params(a).total, 2506172416ull);
}

// llava-hf/llava-1.5-7b-hf's config.json gives its text_config only
// max_position_embeddings, model_type and vocab_size: the sizes are
// LlamaConfig's defaults (4096, 11008, 32 layers, 32 heads), as transformers
// fills them; zeromem uses them too and says so by name.
TEST(Families, LlavaTextConfigWithClassDefaultsWarns) {
    const nlohmann::json cfg = {
        {"model_type", "llava"},
        {"text_config", {{"model_type", "llama"}, {"max_position_embeddings", 4096}, {"vocab_size", 32064}}},
        {"vision_config", {{"model_type", "clip_vision_model"}, {"hidden_size", 1024}, {"image_size", 336},
                           {"intermediate_size", 4096}, {"num_hidden_layers", 24}, {"patch_size", 14}}}};
    const ModelArch a = arch_from_hf_config(cfg, "llava.json");
    EXPECT_NEAR(double(count_params(a).total), 7.06e9, 0.005e9);
    EXPECT_TRUE(any_warning(a, "'hidden_size'"));
    EXPECT_TRUE(any_warning(a, "'intermediate_size'"));
    EXPECT_FALSE(any_warning(a, "'vocab_size'"));
}

// GPT-Neo 1.3B (EleutherAI/gpt-neo-1.3B config.json; published "1.3B"):
// learned positions, q/k/v without bias, out_proj and MLP with bias, tied.
TEST(Families, GptNeoLearnedPositions) {
    const nlohmann::json cfg = {{"model_type", "gpt_neo"}, {"hidden_size", 2048}, {"num_layers", 24},
                                {"num_heads", 16}, {"intermediate_size", nullptr}, {"vocab_size", 50257},
                                {"max_position_embeddings", 2048}};
    const uint64_t h = 2048;
    const uint64_t block = 3 * h * h + lin(h, h, true) + lin(h, 4 * h, true) + lin(4 * h, h, true) + 4 * h;
    const ParamCount c = count_params(arch_from_hf_config(cfg, "neo.json"));
    EXPECT_EQ(c.total, 50257 * h + 2048 * h + 24 * block + 2 * h);
    EXPECT_NEAR(double(c.total), 1.3e9, 0.05e9);
}

// Activations of a MoE block follow the MLP width a token passes through:
// Mixtral's top-2 experts of 14336 act like one dense MLP of 2 x 14336
// (Korthikanti's per-layer terms with f = the active width).
TEST(Families, MoeActivationsUseActiveExpertWidth) {
    const ModelArch moe = load_hf_config(kPub + "mixtral-8x7b.json");
    ModelArch dense = moe;
    dense.num_experts = 0;
    dense.num_moe_layers = 0;
    dense.ffn_size = 2 * 14336;
    EXPECT_EQ(active_ffn_width(moe), 2 * 14336);
    EXPECT_EQ(layer_activation_bytes(moe, 4096, 1, 1, Checkpointing::none, true, false),
              layer_activation_bytes(dense, 4096, 1, 1, Checkpointing::none, true, false));
    // Encoder-decoder: both stacks' blocks hold activations.
    EXPECT_EQ(load_hf_config(kPub + "flan-t5-large.json").num_layers, 48);
}
