// Dropout masks only where the model's config has non-zero dropout in
// training. Which dropout exists where is the family's transformers modeling
// file; the probabilities are its config keys (data/architectures/
// families.json "dropout"). A mask is 1 byte per element (at::native_dropout
// returns a bool mask) and exists only when p > 0: at p = 0 at::dropout
// returns its input (aten/src/ATen/native/Dropout.cpp _dropout_impl).
// Expected bytes: Korthikanti et al. 2022 Eq. 1 (sbh(34 + 5as/h) per layer,
// of which the masks are the attention residual and MLP residual sbh each
// and the attention-probability mask as²b) less the masks absent.
#include "estimate_inputs.h"
#include "input_error.h"
#include "zeromem/estimate.h"
#include "zeromem/model.h"
#include "zeromem/types.h"

#include "published_configs.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

using namespace zeromem;
using zeromem::testing::contains;
using zeromem::testing::error_of;
using zeromem::testing::kPub;
using zeromem::testing::read_json;

namespace {


bool explain_names_dropout_mask(const Estimate& e) {
    for (const auto& t : e.terms)
        if (contains(t.component, "dropout mask") || contains(t.formula, "dropout mask") ||
            contains(t.substituted, "dropout mask"))
            return true;
    return false;
}

}  // namespace

// modeling_llama.py: LlamaAttention passes dropout=0.0 if not self.training
// else self.attention_dropout (LlamaConfig default 0.0) to the attention
// function; LlamaDecoderLayer and LlamaModel have no other dropout.
TEST(DropoutMasks, LlamaHasNone) {
    const ModelArch a = load_model_preset("llama-2-7b", ZEROMEM_SOURCE_DATA_DIR);
    EXPECT_EQ(a.embedding_dropout, 0.0);
    EXPECT_EQ(a.attention_dropout, 0.0);
    EXPECT_EQ(a.attention_residual_dropout, 0.0);
    EXPECT_EQ(a.mlp_residual_dropout, 0.0);
    // Llama-2-7B (h 4096, a = kv = 32, gated f 11008), s 4096, b 2, t 1:
    // Korthikanti's 10 outside the TP region less the two residual masks = 8;
    // Q 2 + K, V 2 each + output projection input 2 = 8; gated MLP
    // 8f/h = 8 · 11008/4096 = 21.5; eager scores 5as/h less the mask = 4as/h.
    const double s = 4096, b = 2, h = 4096, heads = 32;
    const double sbh = s * b * h;
    EXPECT_NEAR(double(layer_activation_bytes(a, 4096, 2, 1, Checkpointing::none, true, false)),
                sbh * (8.0 + 8.0 + 21.5), 1.0);
    EXPECT_NEAR(double(layer_activation_bytes(a, 4096, 2, 1, Checkpointing::none, false, false)),
                sbh * (8.0 + 8.0 + 21.5 + 4.0 * heads * s / h), 1.0);
    EXPECT_EQ(attention_score_factor(a), 4.0);
}

// `estimate --explain` for llama-2-7b names no dropout mask.
TEST(DropoutMasks, LlamaExplainNamesNoMask) {
    EstimateInput in = testinputs::preset_input("llama-2-7b", 8, 2, Dtype::bf16);
    in.train.seq_len = 4096;
    in.train.micro_batch = 2;
    for (bool flash : {false, true}) {
        in.train.flash_attention = flash;
        const Estimate e = estimate(in, true);
        EXPECT_FALSE(explain_names_dropout_mask(e)) << "flash " << flash;
        bool said = false;
        for (const auto& t : e.terms)
            if (t.component == "activations") said = contains(t.substituted, "no dropout");
        EXPECT_TRUE(said);
    }
}

// modeling_bert.py: BertEmbeddings, BertSelfOutput and BertOutput apply
// nn.Dropout(hidden_dropout_prob); BertSelfAttention applies
// nn.Dropout(attention_probs_dropout_prob) to the probabilities. With both
// 0.1 (bert-base-uncased) every Korthikanti mask is there: BERT-base (MHA,
// plain GeLU MLP f = 4h) is exactly Eq. 1.
TEST(DropoutMasks, BertWithHiddenDropoutHasAllFour) {
    const ModelArch a = load_hf_config(kPub + "bert-base-uncased.json");
    EXPECT_DOUBLE_EQ(a.embedding_dropout, 0.1);
    EXPECT_DOUBLE_EQ(a.attention_dropout, 0.1);
    EXPECT_DOUBLE_EQ(a.attention_residual_dropout, 0.1);
    EXPECT_DOUBLE_EQ(a.mlp_residual_dropout, 0.1);
    const double s = 512, b = 8, h = 768, heads = 12;
    const double sbh = s * b * h;
    EXPECT_NEAR(double(layer_activation_bytes(a, 512, 8, 1, Checkpointing::none, false, false)),
                sbh * (34.0 + 5.0 * heads * s / h), 1.0);
    EXPECT_EQ(layer_activation_bytes(a, 512, 8, 1, Checkpointing::none, false, false),
              activation_bytes_per_layer(512, 8, 768, 12, 1, Checkpointing::none, false));

    EstimateInput in = testinputs::params_input(0, 1, 0, Dtype::bf16);
    in.model.arch = a;
    in.model.params = count_params(a).total;
    in.model.largest_layer_params = count_params(a).largest_module;
    in.train.seq_len = 512;
    in.train.micro_batch = 8;
    const Estimate e = estimate(in, true);
    EXPECT_TRUE(explain_names_dropout_mask(e));
}

// With the dropouts at 0 the same BERT stores no mask: 32 sbh + 4as²b, the
// embedding mask (sbh) goes from the first stage too.
TEST(DropoutMasks, BertWithZeroDropoutHasNone) {
    nlohmann::json cfg = read_json(kPub + "bert-base-uncased.json");
    cfg["hidden_dropout_prob"] = 0.0;
    cfg["attention_probs_dropout_prob"] = 0.0;
    const ModelArch a = arch_from_hf_config(cfg, "bert-zero.json");
    const double s = 512, b = 8, h = 768, heads = 12;
    const double sbh = s * b * h;
    EXPECT_NEAR(double(layer_activation_bytes(a, 512, 8, 1, Checkpointing::none, false, false)),
                sbh * (32.0 + 4.0 * heads * s / h), 1.0);

    // Only the hidden dropout: the two residual masks and the embedding
    // mask, no attention-probability mask: 34 sbh + 4as²b.
    cfg["hidden_dropout_prob"] = 0.1;
    const ModelArch hid = arch_from_hf_config(cfg, "bert-hidden.json");
    EXPECT_DOUBLE_EQ(hid.embedding_dropout, 0.1);
    EXPECT_EQ(hid.attention_dropout, 0.0);
    EXPECT_NEAR(double(layer_activation_bytes(hid, 512, 8, 1, Checkpointing::none, false, false)),
                sbh * (34.0 + 4.0 * heads * s / h), 1.0);
}

// A Llama config that sets attention_dropout 0.1 stores the probability
// mask (as²b) and nothing else: Llama has no residual dropout.
TEST(DropoutMasks, LlamaAttentionDropoutAddsOnlyTheProbabilityMask) {
    nlohmann::json cfg = read_json(kPub + "llama-2-7b-hf.json");
    const ModelArch none = arch_from_hf_config(cfg, "llama.json");
    cfg["attention_dropout"] = 0.1;
    const ModelArch with = arch_from_hf_config(cfg, "llama-dropout.json");
    EXPECT_DOUBLE_EQ(with.attention_dropout, 0.1);
    EXPECT_EQ(with.attention_residual_dropout, 0.0);
    EXPECT_EQ(with.mlp_residual_dropout, 0.0);
    const double s = 2048, b = 1, heads = 32;
    const double mask = heads * s * s * b;  // a·s²·b bytes
    EXPECT_NEAR(double(layer_activation_bytes(with, 2048, 1, 1, Checkpointing::none, false, false)) -
                    double(layer_activation_bytes(none, 2048, 1, 1, Checkpointing::none, false, false)),
                mask, 1.0);
    // Flash attention keeps no s x s tensor: no difference.
    EXPECT_EQ(layer_activation_bytes(with, 2048, 1, 1, Checkpointing::none, true, false),
              layer_activation_bytes(none, 2048, 1, 1, Checkpointing::none, true, false));
}

// GPT-2 (GPT2Config embd_pdrop, attn_pdrop, resid_pdrop, all 0.1 by
// default; the GPT-3 preset is written with GPT-2 keys and none of them) and
// OPT (OPTConfig dropout 0.1 on both residuals, attention_dropout 0.0).
TEST(DropoutMasks, FamilyDefaultsFromTheConfigClass) {
    const ModelArch g = load_model_preset("gpt3-175b", ZEROMEM_SOURCE_DATA_DIR);
    EXPECT_DOUBLE_EQ(g.embedding_dropout, 0.1);
    EXPECT_DOUBLE_EQ(g.attention_dropout, 0.1);
    EXPECT_DOUBLE_EQ(g.attention_residual_dropout, 0.1);
    EXPECT_DOUBLE_EQ(g.mlp_residual_dropout, 0.1);
    const ModelArch o = load_hf_config(kPub + "opt-1.3b.json");
    EXPECT_EQ(o.embedding_dropout, 0.0);
    EXPECT_EQ(o.attention_dropout, 0.0);
    EXPECT_DOUBLE_EQ(o.attention_residual_dropout, 0.1);
    EXPECT_DOUBLE_EQ(o.mlp_residual_dropout, 0.1);
}

// A probability that is not a number in [0, 1] is refused, naming the key
// and the file.
TEST(DropoutMasks, BadProbabilityIsRefused) {
    nlohmann::json cfg = read_json(kPub + "bert-base-uncased.json");
    cfg["hidden_dropout_prob"] = 1.5;
    const std::string e1 = error_of([&] { (void)arch_from_hf_config(cfg, "bad.json"); });
    EXPECT_TRUE(contains(e1, "bad.json") && contains(e1, "hidden_dropout_prob")) << e1;
    cfg["hidden_dropout_prob"] = "0.1";
    const std::string e2 = error_of([&] { (void)arch_from_hf_config(cfg, "bad.json"); });
    EXPECT_TRUE(contains(e2, "bad.json") && contains(e2, "hidden_dropout_prob")) << e2;
}

// Every family read by its own rules says which dropout it has (a wrapper
// takes its text model's; same_as points at one that has).
TEST(DropoutMasks, EveryFamilyHasADropoutRule) {
    std::ifstream f(std::string(ZEROMEM_SOURCE_DATA_DIR) + "/architectures/families.json");
    const nlohmann::json doc = nlohmann::json::parse(f);
    for (const auto& [name, fam] : doc.at("families").items()) {
        if (fam.contains("same_as") || fam.value("reader", "") == "vision_language") continue;
        EXPECT_TRUE(fam.contains("dropout")) << name;
    }
}
