// Issue 15: every architecture family read by its own rules. The oracles
// are tests/data/hf_configs/published/counts.json (published counts and
// exact counts with their citations) and arithmetic written out here from
// the transformers module layout of each family.
#include "zeromem/model.h"
#include "zeromem/types.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <string>

using namespace zeromem;

namespace {

const std::string kPub = std::string(ZEROMEM_TEST_DATA_DIR) + "/hf_configs/published/";

nlohmann::json read_json(const std::string& path) {
    std::ifstream f(path);
    return nlohmann::json::parse(f);
}

ParamCount count_file(const std::string& file) { return count_params(load_hf_config(kPub + file)); }

template <class F>
std::string error_of(F f) {
    try {
        f();
    } catch (const InputError& e) {
        return e.what();
    }
    ADD_FAILURE() << "no InputError thrown";
    return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

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
