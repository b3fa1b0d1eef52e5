// Which optimizer wrapper DeepSpeed builds, by version, and the dtype mixes it
// refuses without ZeRO. Expected values are read from DeepSpeed's
// deepspeed/runtime/engine.py (_do_optimizer_sanity_check, get_data_types)
// at the tags named in each case:
//  - v0.17.5: get_data_types defaults grad_accum_dtype to fp32 for bf16
//    without ZeRO; bf16 with bf16 accumulation needs a pipeline, else
//    NotImplementedError("Bfloat16 wrapper must use a gradient
//    accumulation type of fp32 ..."); bf16 with fp32 -> BFLOAT16.
//  - v0.17.6: the default becomes the model dtype; bf16 with bf16 outside a
//    pipeline -> DDP_BFLOAT16 (FP16_Optimizer).
//  - v0.18.5 (through v0.19.6): the bf16-with-fp32 branch is gone: any mix
//    without ZeRO raises NotImplementedError("unsupported mix ...").
//  - every version: ZeRO stage 1 with bf16, fp32 accumulation and no CPU
//    optimizer offload -> BFLOAT16; other ZeRO stages -> ZERO_OPTIMIZATION.
#include "estimate_inputs.h"
#include "input_error.h"
#include "zeromem/optimizer_wrapper.h"
#include "zeromem/gpu.h"
#include "zeromem/planner.h"
#include "zeromem/speed.h"

#include <gtest/gtest.h>

using namespace zeromem;
using zeromem::testing::contains;
using zeromem::testing::error_of;

namespace {

EstimateInput at(const char* deepspeed, int stage, Dtype model, std::optional<Dtype> acc, int64_t pp = 1) {
    EstimateInput in = testinputs::params_input(7000000000ULL, 8, stage, model);
    in.stack.deepspeed = deepspeed;
    in.train.grad_accum_dtype = acc;
    in.cluster.pp = pp;
    return in;
}

// A 1e9-parameter ZeRO-1 run with bf16 weights and fp32 accumulation on
// 80 GiB GPUs and 1 TiB hosts, for compare and fit.
EstimateInput planner_input() {
    EstimateInput in = at("0.19.6", 1, Dtype::bf16, Dtype::fp32);
    in.model.params = 1000000000ULL;
    in.cluster.gpu_memory = 80ULL << 30;
    in.cluster.host_memory = 1ULL << 40;
    in.residual.fragmentation_fraction = 0.05;
    return in;
}

}  // namespace

TEST(OptimizerWrapper, Deepspeed0196WithoutZero) {
    EXPECT_EQ(optimizer_wrapper(at("0.19.6", 0, Dtype::bf16, std::nullopt)), OptimizerWrapper::fp16_optimizer);
    EXPECT_EQ(effective_grad_accum_dtype(at("0.19.6", 0, Dtype::bf16, std::nullopt)), Dtype::bf16);
    EXPECT_EQ(optimizer_wrapper(at("0.19.6", 0, Dtype::bf16, Dtype::bf16, 2)), OptimizerWrapper::bf16_optimizer);
    EXPECT_EQ(optimizer_wrapper(at("0.19.6", 0, Dtype::fp16, std::nullopt)), OptimizerWrapper::fp16_optimizer);
    EXPECT_EQ(optimizer_wrapper(at("0.19.6", 0, Dtype::fp32, std::nullopt)), OptimizerWrapper::none);
    for (const auto& [model, acc] : {std::pair{Dtype::bf16, Dtype::fp32}, std::pair{Dtype::fp16, Dtype::fp32},
                                     std::pair{Dtype::fp32, Dtype::bf16}}) {
        const std::string why = error_of([&] { optimizer_wrapper(at("0.19.6", 0, model, acc)); });
        EXPECT_TRUE(contains(why, "data_types.grad_accum_dtype")) << why;
        EXPECT_TRUE(contains(why, "unsupported mix")) << why;
    }
}

TEST(OptimizerWrapper, OlderDeepspeedWithoutZero) {
    // v0.18.4: bf16 with fp32 accumulation still builds BF16_Optimizer.
    EXPECT_EQ(optimizer_wrapper(at("0.18.4", 0, Dtype::bf16, Dtype::fp32)), OptimizerWrapper::bf16_optimizer);
    EXPECT_TRUE(optimizer_wrapper_refusal(at("0.18.5", 0, Dtype::bf16, Dtype::fp32)).has_value());
    // v0.17.5: unset accumulation means fp32 for bf16 without ZeRO.
    EXPECT_EQ(effective_grad_accum_dtype(at("0.17.5", 0, Dtype::bf16, std::nullopt)), Dtype::fp32);
    EXPECT_EQ(optimizer_wrapper(at("0.17.5", 0, Dtype::bf16, std::nullopt)), OptimizerWrapper::bf16_optimizer);
    EXPECT_EQ(effective_grad_accum_dtype(at("0.17.5", 2, Dtype::bf16, std::nullopt)), Dtype::bf16);
    EXPECT_TRUE(contains(error_of([&] { optimizer_wrapper(at("0.17.5", 0, Dtype::bf16, Dtype::bf16)); }),
                         "Bfloat16 wrapper must use a gradient accumulation type of fp32"));
    EXPECT_EQ(optimizer_wrapper(at("0.17.5", 0, Dtype::bf16, Dtype::bf16, 2)), OptimizerWrapper::bf16_optimizer);
    EXPECT_EQ(optimizer_wrapper(at("0.17.6", 0, Dtype::bf16, Dtype::bf16)), OptimizerWrapper::fp16_optimizer);
}

TEST(OptimizerWrapper, ZeroStagesAcceptEveryMix) {
    EXPECT_EQ(optimizer_wrapper(at("0.19.6", 1, Dtype::bf16, Dtype::fp32)), OptimizerWrapper::bf16_optimizer);
    EstimateInput offload = at("0.19.6", 1, Dtype::bf16, Dtype::fp32);
    offload.zero.offload_optimizer = OffloadDevice::cpu;
    EXPECT_EQ(optimizer_wrapper(offload), OptimizerWrapper::zero);
    EXPECT_EQ(optimizer_wrapper(at("0.19.6", 2, Dtype::bf16, Dtype::fp32)), OptimizerWrapper::zero);
    EXPECT_EQ(optimizer_wrapper(at("0.19.6", 3, Dtype::fp16, Dtype::fp32)), OptimizerWrapper::zero);
    EXPECT_EQ(optimizer_wrapper(at("0.19.6", 1, Dtype::bf16, std::nullopt)), OptimizerWrapper::zero);
}

// estimate() refuses what DeepSpeed refuses, naming the key.
TEST(OptimizerWrapper, EstimateRefusesTheMixWithoutZero) {
    const std::string why = error_of([&] { estimate(at("0.19.6", 0, Dtype::bf16, Dtype::fp32)); });
    EXPECT_TRUE(contains(why, "data_types.grad_accum_dtype")) << why;
    EXPECT_NO_THROW(estimate(at("0.18.4", 0, Dtype::bf16, Dtype::fp32)));
}

// Before v0.17.6 plain bf16 without ZeRO ran BF16_Optimizer: the fp32
// gradient accumulation buffer, 4 B per parameter (bf16_optimizer.py
// _setup_for_real_optimizer), is a term of the estimate; from v0.17.6 it is not.
TEST(OptimizerWrapper, OldBf16WithoutZeroCountsTheFp32GradientBuffer) {
    auto buffer = [](const char* ds) {
        const Estimate e = estimate(at(ds, 0, Dtype::bf16, std::nullopt), true);
        for (const auto& t : e.terms)
            if (contains(t.component, "BF16_Optimizer gradient accumulation buffer")) return t.bytes;
        return uint64_t(0);
    };
    EXPECT_EQ(buffer("0.17.5"), 4ULL * 7000000000ULL);
    EXPECT_EQ(buffer("0.19.6"), 0u);
}

// compare skips the options DeepSpeed refuses: with bf16 and fp32
// accumulation no stage 0 row, and the ordering names the refusal.
TEST(OptimizerWrapper, CompareSkipsStageZeroForTheMix) {
    const EstimateInput in = planner_input();
    const SpeedHardware hw =
        speed_hardware(load_gpu_preset("A100-80GB", ZEROMEM_SOURCE_DATA_DIR), Dtype::bf16, "", "", ZEROMEM_SOURCE_DATA_DIR);
    const auto rows = compare_options(in, hw, 64, SpeedConstants{});
    ASSERT_FALSE(rows.empty());
    for (const auto& r : rows) EXPECT_NE(r.option.stage, 0);
    const auto groups = ordering_groups(rows);
    EXPECT_FALSE(groups[0].evaluated);
    EXPECT_TRUE(groups[1].evaluated);
    const auto text = ordering_statement(rows);
    ASSERT_GE(text.size(), 2u);
    EXPECT_TRUE(contains(text[1], "stage 0 is refused by DeepSpeed")) << text[1];
}

// fit names the refusal for stage 0 instead of "no GPU count accepted".
TEST(OptimizerWrapper, FitNamesTheRefusalForStageZero) {
    const EstimateInput in = planner_input();
    bool seen = false;
    for (const FitRow& r : fewest_gpus(in, 8, 64)) {
        if (r.option.stage != 0) continue;
        seen = true;
        EXPECT_EQ(r.value, 0u);
        EXPECT_TRUE(contains(r.note, "data_types.grad_accum_dtype")) << r.note;
    }
    EXPECT_TRUE(seen);
}
