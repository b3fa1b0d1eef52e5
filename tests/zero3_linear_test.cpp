// zero_optimization.memory_efficient_linear false under ZeRO-3: the Linear
// weights kept for backward (terms.h zero3_retained_linear_weights). Every
// expected value is arithmetic written out here from the code path the
// comment names, never pasted from a zeromem run.
//
// The mechanism (DeepSpeed v0.19.6): with the default true, zero.Init
// replaces torch.nn.functional.linear with zero3_linear_wrap
// (runtime/zero/partition_parameters.py Init.__init__ ->
// _enable_mem_efficient_linear), whose LinearFunctionForZeroStage3 saves the
// parameter itself for backward (runtime/zero/linear.py setup_context). With
// false, torch's own linear records weight.t(); autograd keeps that view as
// is (torch/csrc/autograd/saved_variable.cpp: a saved tensor that is not the
// node's output is stored without a copy), and the view keeps the gathered
// storage that DeepSpeed's release drops from param.data, until the module's
// backward: "the standard Linear implementation can retain the gathered
// weight storage until backward completes" (DeepSpeed PR #8189).
#include "zeromem/estimate.h"
#include "zeromem/terms.h"

#include "estimate_inputs.h"

#include <gtest/gtest.h>

using namespace zeromem;
using testinputs::phase;

namespace {

// Llama-2-7B (data/models/llama-2-7b.json: h 4096, 32 layers, MHA, f 11008,
// V 32000, untied LM head):
//   one decoder layer = 4·4096² + 3·4096·11008 + 2·4096 (norms) = 202,383,360
//   Ψ = 32 · 202,383,360 + 2 · 32000·4096 + 4096 (final norm) = 6,738,415,616
//   V·h = 131,072,000
// Linear weights: every parameter outside the input embedding, plus the LM
// head's V·h (here the LM head itself): Ψ - V·h = 6,607,343,616 (the norms,
// 32·2·4096 + 4096 = 266,240, are counted with them: a bound).
constexpr uint64_t kLayer = 202383360;
constexpr uint64_t kHead = 131072000;
constexpr uint64_t kLinear = 6607343616;

EstimateInput llama_stage3(bool memory_efficient_linear, Checkpointing ck) {
    EstimateInput in = testinputs::preset_input("llama-2-7b", 8, 3, Dtype::bf16);
    in.zero.memory_efficient_linear = memory_efficient_linear;
    in.train.checkpointing = ck;
    return in;
}

/// Temporary buffers of `phase_name` with memory_efficient_linear false,
/// minus the same with true.
uint64_t added(const EstimateInput& off, const char* phase_name) {
    EstimateInput on = off;
    on.zero.memory_efficient_linear = true;
    return phase(estimate(off), phase_name).per_gpu.temporary_buffers -
           phase(estimate(on), phase_name).per_gpu.temporary_buffers;
}

}  // namespace

TEST(Zero3LinearWeights, WithoutRecomputeEveryLinearWeightStaysFromForwardToBackward) {
    ASSERT_EQ(count_params(load_model_preset("llama-2-7b", ZEROMEM_SOURCE_DATA_DIR)).total,
              32 * kLayer + 2 * kHead + 4096);
    const EstimateInput in = llama_stage3(false, Checkpointing::none);
    // b_m = 2 (bf16): 2 · 6,607,343,616 = 13,214,687,232 B, in forward and backward.
    EXPECT_EQ(added(in, "forward"), 2 * kLinear);
    EXPECT_EQ(added(in, "backward"), 2 * kLinear);
    EXPECT_EQ(added(in, "steady_backward"), 2 * kLinear);
    EXPECT_EQ(added(in, "optimizer_step"), 0u);  // backward has run: every view was released
    EXPECT_EQ(added(in, "load"), 0u);
}

TEST(Zero3LinearWeights, WithFullRecomputeOnlyTheLmHeadAndOneBlock) {
    // Full checkpointing: the blocks' forwards record nothing (torch
    // checkpoint), so at the end of forward only the LM head's view is kept:
    // 2 · 131,072,000 = 262,144,000 B.
    EstimateInput in = llama_stage3(false, Checkpointing::full);
    EXPECT_EQ(added(in, "forward"), 2 * kHead);
    // In backward each recomputed block keeps its weights until its own
    // backward, but with the default stage3_max_reuse_distance (1e9 >= one
    // layer) DeepSpeed keeps that block gathered from recompute to backward
    // anyway (partitioned_param_coordinator.py __params_to_release), so the
    // views add nothing there: still the LM head only.
    EXPECT_EQ(added(in, "backward"), 2 * kHead);
    // With stage3_max_reuse_distance 0 the block is released after its
    // recompute and its views hold it: max(V·h, layer) · 2 = 404,766,720 B.
    in.zero.stage3_max_reuse_distance = 0;
    EXPECT_EQ(added(in, "backward"), 2 * kLayer);
}

TEST(Zero3LinearWeights, OnlyStageThreeReadsIt) {
    // DeepSpeed reads memory_efficient_linear in zero.Init only, which runs
    // for ZeRO-3 only: at stage 2 false changes nothing.
    EstimateInput in = llama_stage3(false, Checkpointing::none);
    in.zero.stage = 2;
    EstimateInput on = in;
    on.zero.memory_efficient_linear = true;
    const Estimate a = estimate(in), b = estimate(on);
    for (std::size_t i = 0; i < a.phases.size(); ++i)
        EXPECT_EQ(a.phases[i].per_gpu.total, b.phases[i].per_gpu.total) << a.phases[i].name;
}

TEST(Zero3LinearWeights, TheTermNamesItsSource) {
    terms::Sizes s;
    s.stage = 3;
    s.memory_efficient_linear = false;
    s.linear_weights = kLinear;
    s.bm = 2;
    const terms::Term t = terms::zero3_retained_linear_weights(s, true);
    EXPECT_EQ(t.bytes, 2 * kLinear);
    EXPECT_NE(std::string(t.source).find("#8189"), std::string::npos) << t.source;
    s.memory_efficient_linear = true;
    EXPECT_EQ(terms::zero3_retained_linear_weights(s, true).bytes, 0u);
}
