// Tests of the recipe's step 8 in plan() and of the verdict's advice with
// generation during training (--eval-generate). Expected bounds are hand
// arithmetic on the KV cache (llama-2-7b, bf16: 512 KiB per token).
#include "estimate_inputs.h"
#include "input_error.h"
#include "zeromem/advice.h"
#include "zeromem/setting_flags.h"
#include "zeromem/estimate.h"
#include "zeromem/generation.h"
#include "zeromem/gpu.h"
#include "zeromem/planner.h"
#include "zeromem/speed.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

using namespace zeromem;

using zeromem::testing::contains;

namespace {

const std::string kData = ZEROMEM_SOURCE_DATA_DIR;
constexpr uint64_t kGiB = 1024ULL * 1024 * 1024;

}  // namespace

namespace {

// llama-2-7b on one 24 GiB GPU, global batch 1, seq 512, host RAM ample:
// steps 1-6 cannot fit (16Ψ or 12Ψ of model states on one GPU, > 100 GB),
// and with 8 beams x 8 prompts x (512 + 512) tokens the KV cache alone is
// 64 x 1024 x 512 KiB = 32 GiB > 24 GiB, so step 7 cannot fit either.
EstimateInput llama_on_24gib_generating() {
    EstimateInput in = testinputs::preset_input("llama-2-7b", 1, 0, Dtype::bf16);
    in.train.seq_len = 512;
    in.cluster.gpu_memory = 24 * kGiB;
    in.cluster.host_memory = 2000000000000ULL;  // 2 TB
    GenerationSettings g;
    g.num_beams = 8;
    g.eval_batch = 8;
    g.max_new_tokens = 512;
    in.generation = g;
    return in;
}

SpeedHardware a100() { return speed_hardware(load_gpu_preset("A100-80GB", kData), Dtype::bf16, "", "", kData); }

const PlanStep* step_of(const PlanResult& r, int n) {
    for (const auto& s : r.steps)
        if (s.recipe_step == n) return &s;
    return nullptr;
}

}  // namespace

// Only step 8 makes it fit: the beam width comes down to the largest value
// that fits. Hand bound: b beams hold b x 8 x 1024 x 512 KiB = 4b GiB of
// cache, plus the 512 MiB CUDA context, within 24 GiB: b <= 5.
TEST(GenerationPlan, OnlyStep8MakesItFit) {
    const EstimateInput in = llama_on_24gib_generating();
    const PlanResult r = plan(in, a100(), 1);
    const PlanStep* s7 = step_of(r, 7);
    const PlanStep* s8 = step_of(r, 8);
    ASSERT_NE(s7, nullptr);
    ASSERT_NE(s8, nullptr);
    ASSERT_TRUE(s7->candidate.has_value());
    EXPECT_FALSE(s7->candidate->fits);
    EXPECT_EQ(s7->candidate->memory.first_oom_phase, "generation");
    ASSERT_TRUE(s8->candidate.has_value()) << s8->outcome;
    EXPECT_TRUE(s8->candidate->fits);
    ASSERT_TRUE(s8->candidate->generation.has_value());
    const int64_t b = s8->candidate->generation->num_beams;
    EXPECT_GE(b, 1);
    EXPECT_LE(b, 5);
    EXPECT_EQ(s8->candidate->generation->eval_batch, 8);       // beams first
    EXPECT_EQ(s8->candidate->generation->max_new_tokens, 512);
    EXPECT_TRUE(contains(s8->outcome, "num_beams 8 -> " + std::to_string(b)));
    EXPECT_TRUE(contains(s8->outcome, "--generation_num_beams"));
    // The largest that fits: one more beam does not.
    EstimateInput more = in;
    apply_candidate(*s8->candidate, more);
    more.generation->num_beams = b + 1;
    EXPECT_FALSE(estimate(more).fits_gpu.value_or(true));
    // No later rung was needed, and the lowered setting carries to the winner.
    EXPECT_EQ(step_of(r, 9), nullptr);
    EXPECT_EQ(step_of(r, 10), nullptr);
    ASSERT_TRUE(r.winner.has_value());
    ASSERT_TRUE(r.winner->generation.has_value());
    EXPECT_EQ(r.winner->generation->num_beams, b);
}

// When one beam is still too much, the eval batch comes down next: 1 beam x
// 64 prompts x 1024 tokens x 512 KiB = 32 GiB.
TEST(GenerationPlan, EvalBatchAfterBeams) {
    EstimateInput in = llama_on_24gib_generating();
    in.generation->num_beams = 1;
    in.generation->eval_batch = 64;
    const PlanResult r = plan(in, a100(), 1);
    const PlanStep* s8 = step_of(r, 8);
    ASSERT_NE(s8, nullptr);
    ASSERT_TRUE(s8->candidate.has_value()) << s8->outcome;
    EXPECT_EQ(s8->candidate->generation->num_beams, 1);
    // Hand bound: B prompts hold B x 1024 x 512 KiB = B/2 GiB, plus the 512 MiB
    // CUDA context, within 24 GiB: B <= 47.
    EXPECT_LE(s8->candidate->generation->eval_batch, 47);
    EXPECT_TRUE(contains(s8->outcome, "eval batch 64 -> "));
}

// Without --eval-generate step 8 is skipped and says why.
TEST(GenerationPlan, Step8SkippedWithoutGeneration) {
    EstimateInput in = llama_on_24gib_generating();
    in.generation.reset();
    in.cluster.gpu_memory = kGiB;  // nothing up to step 7 fits: the CUDA context alone is half of it
    const PlanResult r = plan(in, a100(), 1);
    const PlanStep* s8 = step_of(r, 8);
    ASSERT_NE(s8, nullptr);
    EXPECT_FALSE(s8->candidate.has_value());
    EXPECT_TRUE(contains(s8->outcome, "--eval-generate not given"));
}

// The verdict's advice names step 8 when only the beams are in the way:
// already ZeRO-3 with both offloads, 32 GiB of cache on a 24 GiB GPU; one
// beam holds 8 x 1024 x 512 KiB = 4 GiB.
TEST(GenerationAdvice, SuggestsOneBeam) {
    EstimateInput in = llama_on_24gib_generating();
    in.zero.stage = 3;
    in.zero.offload_param = OffloadDevice::cpu;
    in.zero.offload_optimizer = OffloadDevice::cpu;
    in.train.checkpointing = Checkpointing::full;
    const Estimate e = estimate(in);
    ASSERT_FALSE(e.fits_gpu.value_or(true));
    const std::vector<Advice> adv = advise(in, e);
    ASSERT_FALSE(adv.empty());
    EXPECT_TRUE(adv[0].found);
    EXPECT_EQ(flag_spelling(adv[0].changes), "--num-beams 1");
    EXPECT_TRUE(contains(adv[0].why, "recipe step 8"));
}

// fit's largest-model search drops the architecture, so it cannot size a KV
// cache: it leaves generation out (the rows still have a size) and says so.
TEST(GenerationFit, LargestModelLeavesGenerationOutAndSaysSo) {
    EstimateInput in = testinputs::preset_input("llama-2-7b", 8, 0, Dtype::bf16);
    in.cluster.gpu_memory = 80 * kGiB;
    in.generation = GenerationSettings{};
    const std::vector<FitRow> rows = largest_model(in);
    ASSERT_FALSE(rows.empty());
    for (const auto& r : rows) {
        EXPECT_TRUE(r.value > 0 || r.unbounded) << r.option.label() << ": " << r.note;
        if (!r.unbounded) {
            EXPECT_TRUE(contains(r.note, "--eval-generate not counted")) << r.note;
        }
    }
}
