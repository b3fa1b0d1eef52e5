// --attention auto: resolve_request takes what the software stack and the model class run
// (stack_facts.h default_attention); --attention flash|eager override it; not given, flash is assumed
// and a note says where the stack runs eager.
#include "zeromem/estimate.h"
#include "zeromem/request.h"

#include <gtest/gtest.h>

#include <string>

using namespace zeromem;

namespace {

// GPT2-XL (h = 1600, a = 25, L = 48; published config), one GPU, fp16, micro batch 1, seq 1024, no
// checkpointing, on the 2022-06 stack (torch 1.11.0, transformers 4.19.4: no SDPA in torch before 2.0).
Request gpt2_xl_2022() {
    Request r;
    r.model = "gpt2-xl";
    r.gpus = 1;
    r.gpu_memory = "80GiB";
    r.dtype = "fp16";
    r.micro_batch = 1;
    r.seq_len = 1024;
    r.stack = "deepspeed=0.7.0,torch=1.11.0,transformers=4.19.4";
    return r;
}

}  // namespace

// With --attention auto the 2022 stack runs GPT2Attention._attn (transformers 4.19 modeling_gpt2.py, its
// only path): softmax(attn_weights) in fp16 keeps its output for the backward (2 B per element),
// attn_dropout (p = attn_pdrop, 0.1 by GPT2Config's default) keeps a 1-byte mask (at::native_dropout),
// and matmul(attn_weights, value) keeps the dropout output (2 B): 5 B for each of the a·s²·b scores of
// each layer, 5 · 25 · 1024² · 1 = 131,072,000 B per layer, 48 layers: 6,291,456,000 B more activations
// than --attention flash stores. Each layer's bytes are rounded once: 1 B per layer of tolerance.
TEST(AttentionDefault, OldStackRunsEagerAndAddsTheScores) {
    Request req = gpt2_xl_2022();
    const Resolved unset = resolve_request(req, ZEROMEM_SOURCE_DATA_DIR);
    EXPECT_TRUE(unset.input.train.flash_attention);
    bool noted = false;
    for (const auto& n : unset.notes) noted = noted || n.find("pass --attention auto") != std::string::npos;
    EXPECT_TRUE(noted);
    req.attention = "auto";
    const Resolved eager = resolve_request(req, ZEROMEM_SOURCE_DATA_DIR);
    EXPECT_FALSE(eager.input.train.flash_attention);
    EXPECT_NE(eager.provenance.at("attention").find("has no SDPA default"), std::string::npos)
        << eager.provenance.at("attention");
    req.attention = "flash";
    const Resolved flash = resolve_request(req, ZEROMEM_SOURCE_DATA_DIR);
    EXPECT_TRUE(flash.input.train.flash_attention);
    EXPECT_EQ(flash.provenance.at("attention"), "--attention flash: no s^2 scores");
    const double per_layer = 5.0 * 25.0 * 1024.0 * 1024.0 * 1.0;
    EXPECT_DOUBLE_EQ(per_layer, 131072000.0);
    const double added = double(estimate(eager.input).per_gpu.activations) - double(estimate(flash.input).per_gpu.activations);
    EXPECT_NEAR(added, 48.0 * per_layer, 48.0);
}

// The same model on transformers 4.36.2 with torch 2.1.2 takes SDPA (the stack's default); T5 on the
// same stack stays eager (T5PreTrainedModel sets no _supports_sdpa); --attention eager overrides SDPA.
TEST(AttentionDefault, NewStackTakesSdpaAndTheFlagOverrides) {
    Request req = gpt2_xl_2022();
    req.stack = "deepspeed=0.12.6,torch=2.1.2,transformers=4.36.2";
    req.attention = "auto";
    EXPECT_TRUE(resolve_request(req, ZEROMEM_SOURCE_DATA_DIR).input.train.flash_attention);
    req.attention = "eager";
    const Resolved r = resolve_request(req, ZEROMEM_SOURCE_DATA_DIR);
    EXPECT_FALSE(r.input.train.flash_attention);
    EXPECT_EQ(r.provenance.at("attention"), "--attention eager: s^2 scores kept");
    Request t5;
    t5.hf_config = std::string(ZEROMEM_TEST_DATA_DIR) + "/ledger/t5-11b.json";
    t5.gpus = 1;
    t5.gpu_memory = "80GiB";
    t5.seq_len = 512;
    t5.stack = req.stack;
    t5.attention = "auto";
    const Resolved rt = resolve_request(t5, ZEROMEM_SOURCE_DATA_DIR);
    EXPECT_FALSE(rt.input.train.flash_attention);
    EXPECT_NE(rt.provenance.at("attention").find("the t5 model class has no SDPA path"), std::string::npos)
        << rt.provenance.at("attention");
}
