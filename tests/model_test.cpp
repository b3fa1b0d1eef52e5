// Tests of model.h: exact parameter counts against published counts,
// Hugging Face config.json reading, presets and input errors.
#include "input_error.h"
#include "zeromem/model.h"
#include "zeromem/types.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>

using namespace zeromem;

using zeromem::testing::contains;
using zeromem::testing::error_of;

namespace {

const std::string kData = ZEROMEM_SOURCE_DATA_DIR;
const std::string kHf = std::string(ZEROMEM_TEST_DATA_DIR) + "/hf_configs/";

uint64_t preset_total(const std::string& name) { return count_params(load_model_preset(name, kData)).total; }
uint64_t hf_total(const std::string& file) { return count_params(load_hf_config(kHf + file)).total; }


}  // namespace

// A tiny Llama, summed by hand: h=8, 2 layers, 2 heads of dim 4, 1 KV head,
// ffn 16, vocab 10, untied.
TEST(CountParams, TinyLlamaByHand) {
    ModelArch a;
    a.name = "tiny";
    a.hidden_size = 8;
    a.num_layers = 2;
    a.num_heads = 2;
    a.num_kv_heads = 1;
    a.head_dim = 4;
    a.ffn_size = 16;
    a.vocab_size = 10;
    a.gated_mlp = true;
    a.norms_per_layer = 2;
    const ParamCount c = count_params(a);
    // q 8*8=64, k 8*4=32, v 32, o 8*8=64            -> 192
    // gate 8*16=128, up 128, down 16*8=128          -> 384
    // two RMSNorms 2*8                              ->  16
    EXPECT_EQ(c.per_layer, 192u + 384u + 16u);
    EXPECT_EQ(c.embedding, 80u);  // 10*8
    EXPECT_EQ(c.lm_head, 80u);    // untied
    // 80 + 2*592 + 8 (final RMSNorm) + 80
    EXPECT_EQ(c.total, 80u + 2u * 592u + 8u + 80u);
    EXPECT_EQ(c.total, 1352u);
    EXPECT_EQ(c.largest_module, 128u);  // an MLP matrix beats the 80-element embedding

    a.tied_embeddings = true;
    EXPECT_EQ(count_params(a).total, 1352u - 80u);
    EXPECT_EQ(count_params(a).lm_head, 0u);
}

TEST(CountParams, RejectsNonPositiveSizes) {
    ModelArch a;
    a.name = "bad";
    a.hidden_size = 8;
    a.num_layers = 2;
    a.num_heads = 2;
    a.num_kv_heads = 2;
    a.head_dim = 4;
    a.ffn_size = 16;
    a.vocab_size = 0;
    const std::string msg = error_of([&] { count_params(a); });
    EXPECT_TRUE(contains(msg, "vocab_size")) << msg;
    EXPECT_TRUE(contains(msg, "bad")) << msg;
    a.vocab_size = 10;
    a.num_layers = -1;
    EXPECT_THROW(count_params(a), InputError);
}

// Every preset must reproduce the count its file cites. The exact counts and
// their sources (also in each file's "published_source"):
//   llama-2-7b   6,738,415,616  KerasHub llama2_7b_en metadata
//   llama-2-13b 13,015,864,320  transformers num_parameters() of meta-llama/Llama-2-13b-hf
//   llama-2-70b 68,976,648,192  transformers num_parameters() of meta-llama/Llama-2-70b-hf
//   llama-3-8b   8,030,261,248  HF safetensors BF16 total; KerasHub llama3_8b_en
//   llama-3-70b 70,553,706,496  HF safetensors BF16 total
//   mistral-7b   7,241,732,096  HF safetensors BF16 total; KerasHub mistral_7b_en
//   qwen2.5-7b   7,615,616,512  HF safetensors BF16 total
//   qwen2.5-32b 32,763,876,352  HF safetensors BF16 total; KerasHub qwen2.5_instruct_32b_en
//   gpt2-xl      1,557,611,200  KerasHub gpt2_extra_large_en metadata
//   opt-1.3b     1,315,758,080  transformers num_parameters() of facebook/opt-1.3b
//   opt-6.7b     6,658,473,984  transformers num_parameters() of facebook/opt-6.7b
//   falcon-40b  41,303,293,952  transformers num_parameters() of tiiuae/falcon-40b
//   bloom-176b 176,247,271,424  HF safetensors BF16 total of bigscience/bloom
TEST(Presets, ExactPublishedCounts) {
    for (const std::string name : {"llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b",
                                   "mistral-7b", "qwen2.5-7b", "qwen2.5-32b", "gpt2-xl", "opt-1.3b", "opt-6.7b",
                                   "falcon-40b", "bloom-176b"}) {
        const ModelArch a = load_model_preset(name, kData);
        EXPECT_EQ(a.name, name);
        EXPECT_FALSE(a.published_source.empty()) << name;
        EXPECT_EQ(count_params(a).total, static_cast<uint64_t>(a.published_params)) << name;
    }
    // Spelled out once more so a wrong preset file cannot hide a wrong count.
    EXPECT_EQ(preset_total("llama-2-7b"), 6738415616ull);
    EXPECT_EQ(preset_total("llama-2-13b"), 13015864320ull);
    EXPECT_EQ(preset_total("llama-2-70b"), 68976648192ull);
    EXPECT_EQ(preset_total("llama-3-8b"), 8030261248ull);
    EXPECT_EQ(preset_total("llama-3-70b"), 70553706496ull);
    EXPECT_EQ(preset_total("mistral-7b"), 7241732096ull);
    EXPECT_EQ(preset_total("qwen2.5-7b"), 7615616512ull);
    EXPECT_EQ(preset_total("qwen2.5-32b"), 32763876352ull);
    EXPECT_EQ(preset_total("gpt2-xl"), 1557611200ull);
    EXPECT_EQ(preset_total("opt-1.3b"), 1315758080ull);
    EXPECT_EQ(preset_total("opt-6.7b"), 6658473984ull);
    EXPECT_EQ(preset_total("falcon-40b"), 41303293952ull);
    EXPECT_EQ(preset_total("bloom-176b"), 176247271424ull);
}

// GPT-3 175B: Brown et al. 2020, Table 2.1 prints only "175.0B". The
// GPT-2-style layout with the table's sizes gives 174,604,259,328, 0.23%
// below 175e9: outside the table's one-decimal rounding (+-0.05B) but within
// the 0.5% tolerance used here for rounded published counts.
TEST(Presets, Gpt3WithinRoundedPublishedCount) {
    const ModelArch a = load_model_preset("gpt3-175b", kData);
    EXPECT_EQ(a.published_params, 175000000000);
    const ParamCount c = count_params(a);
    EXPECT_EQ(c.total, 174604259328ull);
    EXPECT_LT(std::fabs(static_cast<double>(c.total) - 175e9), 0.005 * 175e9);
    // 50257 x 12288 embedding: the L used for 175e9 in
    // tests/data/reference/deepspeed_estimator_golden.json.
    EXPECT_EQ(c.largest_module, 617558016u);
}

// DeepSpeed's largest_layer_params for the examples in
// tests/data/reference/deepspeed_estimator_golden.json: the embedding matrix
// (stage3.py model_to_params: the largest module's own parameters).
TEST(Presets, LargestModuleMatchesDeepSpeedReference) {
    EXPECT_EQ(count_params(load_model_preset("llama-2-7b", kData)).largest_module, 131072000u);   // 32000x4096
    EXPECT_EQ(count_params(load_model_preset("llama-2-13b", kData)).largest_module, 163840000u);  // 32000x5120
    EXPECT_EQ(count_params(load_model_preset("llama-2-70b", kData)).largest_module, 262144000u);  // 32000x8192
    EXPECT_EQ(count_params(load_model_preset("opt-6.7b", kData)).largest_module, 205914112u);     // 50272x4096
}

TEST(Presets, ListAndUnknownName) {
    const auto names = list_model_presets(kData);
    EXPECT_GE(names.size(), 14u);
    EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
    const std::string msg = error_of([] { load_model_preset("llama2-7b", kData); });
    EXPECT_TRUE(contains(msg, "unknown model 'llama2-7b'")) << msg;
    EXPECT_TRUE(contains(msg, "did you mean: llama-2-7b")) << msg;
    EXPECT_TRUE(contains(msg, "known:")) << msg;
}

// Real Hugging Face config.json files, with the counts published for them:
//   gpt2            124,439,808  KerasHub gpt2_base_en metadata (HF's safetensors
//                                total also includes the attn.bias mask buffers)
//   opt-125m        125,239,296  transformers num_parameters() of facebook/opt-125m
//   pythia-160m     162,322,944  transformers num_parameters() of EleutherAI/pythia-160m
//   bloom-560m      559,214,592  HF safetensors F16 total; KerasHub bloom_560m_multi
//   Qwen2.5-0.5B    494,032,768  HF safetensors BF16 total; KerasHub qwen2.5_0.5b_en
//   TinyLlama-1.1B 1,100,048,384 transformers num_parameters() of TinyLlama/TinyLlama-1.1B
//   falcon-7b      6,921,720,704 transformers num_parameters() of tiiuae/falcon-7b
//   Mistral-7B-v0.1 7,241,732,096 as the preset
TEST(HfConfig, EachFamilyCountsExactly) {
    EXPECT_EQ(hf_total("gpt2.json"), 124439808ull);
    EXPECT_EQ(hf_total("opt-125m.json"), 125239296ull);
    EXPECT_EQ(hf_total("pythia-160m.json"), 162322944ull);
    EXPECT_EQ(hf_total("bloom-560m.json"), 559214592ull);
    EXPECT_EQ(hf_total("qwen2.5-0.5b.json"), 494032768ull);
    EXPECT_EQ(hf_total("tinyllama-1.1b.json"), 1100048384ull);
    EXPECT_EQ(hf_total("falcon-7b.json"), 6921720704ull);
    EXPECT_EQ(hf_total("mistral-7b-v0.1.json"), 7241732096ull);
    // The original remote-code Falcon configs ("RefinedWeb" = 40b layout,
    // "RefinedWebModel" = 7b layout) give the same models.
    EXPECT_EQ(hf_total("falcon-40b-refinedweb.json"), 41303293952ull);
    EXPECT_EQ(hf_total("falcon-7b-refinedwebmodel.json"), 6921720704ull);
}

TEST(HfConfig, FamilyFields) {
    const ModelArch q = load_hf_config(kHf + "qwen2.5-0.5b.json");
    EXPECT_EQ(q.family, "qwen2");
    EXPECT_EQ(q.num_kv_heads, 2);
    EXPECT_EQ(q.head_dim, 64);
    EXPECT_TRUE(q.tied_embeddings);
    EXPECT_TRUE(q.qkv_bias);
    EXPECT_FALSE(q.attn_out_bias);
    EXPECT_EQ(count_params(q).lm_head, 0u);

    const ModelArch g = load_hf_config(kHf + "gpt2.json");
    EXPECT_EQ(g.family, "gpt2");
    EXPECT_EQ(g.ffn_size, 4 * 768);  // n_inner absent
    EXPECT_TRUE(g.learned_positions);
    EXPECT_EQ(g.name, "gpt2");  // file stem when there is no _name_or_path
    EXPECT_EQ(count_params(g).largest_module, 38597376u);  // 50257x768, deepspeed_estimator_golden.json's L

    const ModelArch o = load_hf_config(kHf + "opt-125m.json");
    EXPECT_EQ(o.name, "facebook/opt-125m");
    EXPECT_EQ(o.position_offset, 2);

    const ModelArch n = load_hf_config(kHf + "pythia-160m.json");
    EXPECT_FALSE(n.tied_embeddings);
    EXPECT_EQ(count_params(n).lm_head, 50304u * 768u);

    const ModelArch f = load_hf_config(kHf + "falcon-40b-refinedweb.json");
    EXPECT_EQ(f.family, "falcon");
    EXPECT_EQ(f.num_kv_heads, 8);
    EXPECT_EQ(f.norms_per_layer, 2);  // ln_attn + ln_mlp
    EXPECT_EQ(load_hf_config(kHf + "falcon-7b.json").num_kv_heads, 1);  // multi_query
}

// OPT-350m: post-LN (no final LayerNorm) with a 512-wide embedding projected
// to h=1024 by project_in/project_out. transformers num_parameters() of
// facebook/opt-350m is 331,196,416.
TEST(HfConfig, OptProjectionAndPostLayerNorm) {
    const nlohmann::json cfg = {{"model_type", "opt"},          {"hidden_size", 1024},
                                {"num_hidden_layers", 24},      {"num_attention_heads", 16},
                                {"ffn_dim", 4096},              {"vocab_size", 50272},
                                {"max_position_embeddings", 2048}, {"word_embed_proj_dim", 512},
                                {"do_layer_norm_before", false}};
    const ModelArch a = arch_from_hf_config(cfg, "opt-350m");
    EXPECT_FALSE(a.final_norm);
    EXPECT_EQ(count_params(a).total, 331196416ull);
}

TEST(HfConfig, HeadDimAndLlamaBiases) {
    nlohmann::json cfg = {{"model_type", "llama"},   {"hidden_size", 8},      {"num_hidden_layers", 1},
                          {"num_attention_heads", 2}, {"num_key_value_heads", nullptr},
                          {"head_dim", 8},            {"intermediate_size", 4}, {"vocab_size", 3},
                          {"attention_bias", true},   {"mlp_bias", true},       {"tie_word_embeddings", true}};
    const ModelArch a = arch_from_hf_config(cfg, "x.json");
    EXPECT_EQ(a.num_kv_heads, 2);  // null => num_attention_heads
    EXPECT_EQ(a.head_dim, 8);
    // q,k,v: 8x16+16 each = 432; o: 16x8+8 = 136; gate, up: 8x4+4 = 36 each;
    // down: 4x8+8 = 40; norms 16  => 696. Embedding 24, final norm 8, tied.
    EXPECT_EQ(count_params(a).per_layer, 696u);
    EXPECT_EQ(count_params(a).total, 24u + 696u + 8u);
}

// An unknown model_type is refused in one line naming it, the
// known families and the --params/--largest-layer-params fallback, even when
// its keys look like Llama's (a silent guess was wrong by up to 94%).
TEST(HfConfig, UnknownModelTypeIsRefusedNotGuessed) {
    const nlohmann::json llama_like = {{"model_type", "my_decoder"}, {"hidden_size", 4096},
                                       {"num_hidden_layers", 32},     {"num_attention_heads", 32},
                                       {"intermediate_size", 11008},  {"vocab_size", 32000}};
    const std::string msg = error_of([&] { arch_from_hf_config(llama_like, "c.json"); });
    EXPECT_TRUE(contains(msg, "c.json")) << msg;
    EXPECT_TRUE(contains(msg, "unknown model_type 'my_decoder'")) << msg;
    EXPECT_TRUE(contains(msg, "gpt_neox")) << msg;  // lists the known types
    EXPECT_TRUE(contains(msg, "deepseek_v3")) << msg;
    EXPECT_TRUE(contains(msg, "--params")) << msg;
    EXPECT_TRUE(contains(msg, "--largest-layer-params")) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;

    // A known family with too few keys names the missing key.
    const nlohmann::json nothing = {{"model_type", "t5"}, {"d_model", 512}};
    const std::string m2 = error_of([&] { arch_from_hf_config(nothing, "t5/config.json"); });
    EXPECT_TRUE(contains(m2, "t5/config.json")) << m2;
    EXPECT_TRUE(contains(m2, "missing key")) << m2;
}

TEST(HfConfigErrors, MissingFile) {
    const std::string msg = error_of([] { load_hf_config(kHf + "no-such-config.json"); });
    EXPECT_TRUE(contains(msg, "no-such-config.json")) << msg;
}

TEST(HfConfigErrors, MalformedJsonHasLineAndColumn) {
    const std::string msg = error_of([] { load_hf_config(kHf + "malformed.json"); });
    EXPECT_TRUE(contains(msg, "malformed.json")) << msg;
    EXPECT_TRUE(contains(msg, "line 6")) << msg;
    EXPECT_TRUE(contains(msg, "column")) << msg;
}

TEST(HfConfigErrors, MissingHiddenSize) {
    const nlohmann::json cfg = {{"model_type", "llama"},        {"num_hidden_layers", 32},
                                {"num_attention_heads", 32},    {"intermediate_size", 11008},
                                {"vocab_size", 32000}};
    const std::string msg = error_of([&] { arch_from_hf_config(cfg, "cfg/config.json"); });
    EXPECT_TRUE(contains(msg, "cfg/config.json")) << msg;
    EXPECT_TRUE(contains(msg, "missing key 'hidden_size'")) << msg;

    const nlohmann::json gpt2 = {{"model_type", "gpt2"}, {"n_layer", 2}, {"n_head", 2}, {"vocab_size", 5}};
    const std::string m2 = error_of([&] { arch_from_hf_config(gpt2, "g.json"); });
    EXPECT_TRUE(contains(m2, "'n_embd'")) << m2;
}

TEST(HfConfigErrors, StringWhereIntegerExpected) {
    const nlohmann::json cfg = {{"model_type", "mistral"},      {"hidden_size", "4096"},
                                {"num_hidden_layers", 32},      {"num_attention_heads", 32},
                                {"intermediate_size", 14336},   {"vocab_size", 32000}};
    const std::string msg = error_of([&] { arch_from_hf_config(cfg, "m.json"); });
    EXPECT_TRUE(contains(msg, "m.json")) << msg;
    EXPECT_TRUE(contains(msg, "'hidden_size'")) << msg;
    EXPECT_TRUE(contains(msg, "integer")) << msg;

    nlohmann::json bad_bool = cfg;
    bad_bool["hidden_size"] = 4096;
    bad_bool["tie_word_embeddings"] = "no";
    const std::string m2 = error_of([&] { arch_from_hf_config(bad_bool, "m.json"); });
    EXPECT_TRUE(contains(m2, "'tie_word_embeddings'")) << m2;
}
