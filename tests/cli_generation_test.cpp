// End-to-end tests of --eval-generate (generation during training) through
// the built binary: every subcommand takes the flags, --explain names the
// terms, bad input is one line naming the flag with exit status 2. Expected
// values are hand arithmetic written here.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace {

using cli::expect_error;
using cli::json_of;
using cli::Outcome;
using cli::zeromem;

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// llama-2-7b (32 layers x 2 x 32 KV heads x 128 x 2 B = 512 KiB per token),
// 4 beams x 16 prompts x (1024 + 256) tokens: 64 x 1280 x 512 KiB = 40 GiB.
const std::string kArgs = "--model llama-2-7b --gpus 8 --gpu A100-80GB --stage 3 --seq-len 1024 "
                          "--eval-generate --num-beams 4 --eval-batch 16 --max-new-tokens 256";
constexpr uint64_t kKv = 64ULL * 1280 * 512 * 1024;
constexpr uint64_t kLogits = 64ULL * 32000 * 10;  // V x (2 + 4 + 4) B per sequence
constexpr uint64_t kCat = 64ULL * 1280 * 32 * 128 * 2;  // torch.cat's copy of one layer's keys

}  // namespace

TEST(CliGeneration, EstimateHasAGenerationPhaseAndExplainsIt) {
    const nlohmann::json j = json_of("estimate " + kArgs + " --explain");
    bool found = false;
    for (const auto& p : j["phases"])
        if (p["name"] == "generation") {
            found = true;
            EXPECT_EQ(p["per_gpu"]["activations"].get<uint64_t>(), kKv + kCat + kLogits);
        }
    EXPECT_TRUE(found);
    EXPECT_EQ(j["peak_phase"], "generation");
    bool kv = false, logits = false;
    for (const auto& t : j["explain"]) {
        const std::string c = t.dump();
        if (has(c, "KV cache") && has(c, "DynamicCache")) kv = true;
        if (has(c, "step logits") && has(c, "GenerationMixin")) logits = true;
    }
    EXPECT_TRUE(kv);
    EXPECT_TRUE(logits);
    const Outcome text = zeromem("estimate " + kArgs);
    EXPECT_EQ(text.exit_code, 0) << text.err;
    EXPECT_TRUE(has(text.out, "generation during evaluation: 4 beams x 16 prompts per GPU, prompt 1024 + 256 new tokens"))
        << text.out;
}

TEST(CliGeneration, CompareAndFitTakeTheFlags) {
    const nlohmann::json rows = json_of("compare " + kArgs + " --global-batch 8 --host-memory 1TB", -1);
    ASSERT_TRUE(rows.is_array());
    ASSERT_FALSE(rows.empty());
    EXPECT_EQ(rows[0]["generation"]["num_beams"], 4);
    EXPECT_EQ(rows[0]["generation"]["eval_batch"], 16);
    EXPECT_EQ(rows[0]["generation"]["prompt_len"], 1024);
    const Outcome fit = zeromem("fit " + kArgs + " --host-memory 1TB");
    EXPECT_TRUE(fit.exit_code == 0 || fit.exit_code == 1) << fit.err;
}

// plan: step 8 lowers the beams on one 24 GB card (8 beams x 8 prompts x
// 1024 tokens x 512 KiB = 32 GiB of cache alone).
TEST(CliGeneration, PlanStep8IsARealStep) {
    const Outcome r = zeromem("plan --model llama-2-7b --gpus 1 --gpu RTX-4090-24GB --host-memory 512GB --seq-len 512 "
                              "--global-batch 8 --eval-generate --num-beams 8 --eval-batch 8 --max-new-tokens 512");
    // Answered: 0, or 4 when the winner is tight (README "Exit status").
    EXPECT_EQ(r.exit_code, has(r.err, "warning: the winner is tight") ? 4 : 0) << r.err;
    EXPECT_TRUE(has(r.out, "step  8")) << r.out;
    EXPECT_TRUE(has(r.out, "num_beams 8 -> ")) << r.out;
    EXPECT_TRUE(has(r.out, "--generation_num_beams")) << r.out;
}

TEST(CliGeneration, BadInputNamesTheFlag) {
    expect_error("estimate --model llama-2-7b --num-beams 4", "--num-beams: needs --eval-generate");
    expect_error("estimate --model llama-2-7b --eval-generate --num-beams 0", "--num-beams");
    expect_error("estimate --params 7B --eval-generate", "--eval-generate: needs an architecture");
    expect_error("estimate --model llama-2-7b --eval-generate --max-new-tokens x", "--max-new-tokens");
    EXPECT_EQ(zeromem("estimate --model llama-2-7b --eval-generate --eval-batch -1").exit_code, 2);
}
