// Agreement of the simulator's peak allocated with the estimator's `full`
// peak (CUDA context and fragmentation allowance set to 0) over presets x
// ZeRO stage x offload x checkpointing. Where they differ by more than 5%
// the difference is named in kKnownDifferences and tested on its own below.
#include "zeromem/request.h"
#include "zeromem/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

using namespace zeromem;

namespace {

struct Case {
    std::string model;
    int stage;
    std::string offload_optimizer, offload_param, checkpointing;
    int64_t grad_accum;
};

std::string name(const Case& c) {
    return c.model + " stage " + std::to_string(c.stage) + " opt=" + c.offload_optimizer + " param=" + c.offload_param +
           " ckpt=" + c.checkpointing + " gas=" + std::to_string(c.grad_accum);
}

Resolved resolve(const Case& c) {
    Request r;
    r.model = c.model;
    r.gpus = 8;
    r.stage = c.stage;
    r.offload_optimizer = c.offload_optimizer;
    r.offload_param = c.offload_param;
    r.checkpointing = c.checkpointing;
    r.grad_accum = c.grad_accum;
    r.cuda_context = "0";
    r.fragmentation = 0.0;
    return resolve_request(r, ZEROMEM_SOURCE_DATA_DIR);
}

double gib(double b) { return b / 1073741824.0; }

// Peak allocated outside the load phase, bytes.
double peak_after_load(const sim::SimResult& s) {
    uint64_t p = 0;
    for (const auto& ph : s.phases)
        if (ph.phase != sim::Phase::load) p = std::max(p, ph.peak_allocated);
    return double(p);
}

// (simulated peak allocated, estimator full peak) in bytes, with the two
// structural differences below taken out: ZeRO-3 live parameters bounded
// as the estimator bounds them (Zero3LiveParameters) and the ZeRO-1/2 load
// transient left out (Zero12FlattenTwoCopies).
std::pair<double, double> peaks(const Case& c) {
    Resolved res = resolve(c);
    if (c.stage == 3) {
        res.input.zero.stage3_max_live_parameters = res.input.zero.stage3_prefetch_bucket_size;
        res.input.zero.stage3_max_reuse_distance = 0;
    }
    const Estimate e = estimate(res.input);
    const sim::SimResult s = sim::simulate(res.input, sim::SimOptions{});
    const double sim_peak = c.stage == 1 || c.stage == 2 ? peak_after_load(s) : double(s.peak_allocated);
    return {sim_peak, double(e.per_gpu.total)};
}

// Rows where the simulator and the estimator differ by more than 5%, each
// with the term responsible and the accepted ratio range sim / estimator.
struct KnownDifference {
    const char* term;
    const char* model;  // comma-separated preset names
    int stage;
    const char* offload_optimizer;  // "" = any
    const char* checkpointing;      // "" = any
    double lo, hi;
    const char* why;
};
const KnownDifference kKnownDifferences[] = {
    {"optimizer_temporary", "llama-2-13b,llama-2-70b,llama-3-70b,qwen2.5-32b,falcon-40b,bloom-176b,gpt3-175b", 3, "none",
     "full", 0.80, 0.95,
     "models with ceil(P/N_d) > sub_group_size (1e9): the estimator counts torch AdamW's fp32 temporary over the whole "
     "partition (4 x ceil(P/N_d)); DeepSpeed's stage-3 step runs the optimizer one sub-group at a time "
     "(stage3.py _optimizer_step), so it is 4 x largest sub-group"},
    {"gradient + allreduce_flat_buffer (extra-large param)", "llama-3-8b,qwen2.5-7b", 2, "", "", 0.95, 1.12,
     "the 128256 x 4096 / 152064 x 3584 LM head is larger than reduce_bucket_size (5e8): its full gradient is reduced "
     "directly (extra_large_param_to_reduce) through a flattened copy while every activation and the fp32 logits "
     "gradient are live; the estimator counts only the IPG bucket"},
    {"allgather_flat_buffer + logits_grad_fp32", "gpt2-xl", 3, "cpu", "", 1.0, 1.09,
     "tied 50257 x 1600 embedding: the flat all-gather buffer and the per-parameter copy coexist during the wait "
     "(estimator: one copy), plus the fp32 logits gradient of the loss backward; large next to offloaded states"},
    {"allgather_flat_buffer + logits_grad_fp32", "opt-1.3b", 3, "cpu", "", 1.0, 1.07,
     "same as gpt2-xl: tied 50272 x 2048 embedding gathered twice at the lm_head backward"},
    {"gradient (largest module) + recompute", "llama-2-7b", 3, "cpu", "full", 0.92, 1.0,
     "estimator's backward adds the largest module's gathered params and gradient (lm_head, 2 x L x b_m) to one "
     "recomputed block; in the replay the lm_head backward is over before any block is recomputed"},
    {"gradient (largest module) + recompute", "mistral-7b", 3, "cpu", "full", 0.92, 1.0, "as llama-2-7b"},
    {"gradient (largest module) + recompute", "llama-2-13b,falcon-40b", 3, "cpu", "full", 0.90, 1.0, "as llama-2-7b"},
    {"ipg_bucket", "opt-1.3b", 1, "cpu", "full", 0.94, 0.96,
     "ZeRO-1 without overlap_comm reduces at the accumulation boundary (reduce_gradients), after the activations are "
     "freed; the estimator adds the IPG bucket to the backward phase"},
};

const KnownDifference* known(const Case& c) {
    for (const auto& k : kKnownDifferences)
        if (("," + std::string(k.model) + ",").find("," + c.model + ",") != std::string::npos && c.stage == k.stage && (!*k.offload_optimizer || c.offload_optimizer == k.offload_optimizer) &&
            (!*k.checkpointing || c.checkpointing == k.checkpointing))
            return &k;
    return nullptr;
}

std::vector<Case> matrix() {
    std::vector<Case> out;
    for (const std::string& m : list_model_presets(ZEROMEM_SOURCE_DATA_DIR))
        for (int stage = 0; stage <= 3; ++stage)
            for (const char* ck : {"none", "full", "selective"}) {
                std::vector<std::pair<std::string, std::string>> offloads = {{"none", "none"}};
                if (stage >= 1) offloads.push_back({"cpu", "none"});
                if (stage == 3) offloads.push_back({"cpu", "cpu"});
                for (const auto& [o, p] : offloads) out.push_back({m, stage, o, p, ck, 2});
            }
    return out;
}

}  // namespace

TEST(SimAgreement, PeakAllocatedWithinFivePercentOrNamed) {
    for (const Case& c : matrix()) {
        const auto [sim_peak, est] = peaks(c);
        const double r = sim_peak / est;
        if (const KnownDifference* k = known(c)) {
            EXPECT_TRUE(r >= k->lo && r <= k->hi) << name(c) << ": ratio " << r << " outside the named range for " << k->term;
        } else {
            EXPECT_NEAR(r, 1.0, 0.05) << name(c) << ": sim " << gib(sim_peak) << " GiB, estimator " << gib(est) << " GiB";
        }
    }
}

// Every named difference is really outside 5% for at least one row it covers (no stale entries).
TEST(SimAgreement, KnownDifferencesAreReal) {
    for (const auto& k : kKnownDifferences) {
        bool outside = false;
        for (const Case& c : matrix()) {
            if (known(c) != &k) continue;
            const auto [sim_peak, est] = peaks(c);
            outside = outside || std::fabs(sim_peak / est - 1.0) > 0.05;
        }
        EXPECT_TRUE(outside) << k.term << " for " << k.model << " stage " << k.stage;
    }
}

// ZeRO-3 live parameters: the coordinator prefetches up to
// stage3_prefetch_bucket_size more elements at every fetch, as long as the
// available + in-flight numel stays under stage3_max_live_parameters, and
// keeps params reused within stage3_max_reuse_distance
// (partitioned_param_coordinator.py). So up to max_live_parameters
// elements (1e9 by default) are gathered at once; the estimator counts
// min(prefetch_bucket, max_live) = 5e7. Hand derivation for llama-2-7b, bf16:
// (1e9 - 5e7) x 2 B = 1.9e9 B more at the backward peak.
TEST(SimAgreement, Zero3LiveParametersBoundedByMaxLive) {
    const Resolved res = resolve({"llama-2-7b", 3, "none", "none", "none", 2});
    const double est = double(estimate(res.input).per_gpu.total);
    const double sim_peak = double(sim::simulate(res.input, sim::SimOptions{}).peak_allocated);
    EXPECT_NEAR(sim_peak - est, 1.9e9, 0.1 * 1.9e9);
}

// Hand derivation for llama-2-13b, 8 GPUs, stage 3, full checkpointing (peak
// at the optimizer step): Ψ = 13,015,864,320 (count_params), partition
// ceil(Ψ/8) ~ 1.627e9 elements; sub-groups close once they reach
// sub_group_size = 1e9 partition elements, so the largest is 1e9 plus at most
// one parameter's partition (32000 x 5120 / 8 = 2.048e7). The estimator's
// temporary is 4 x 1.627e9 B, the simulator's 4 x (1e9 .. 1.0205e9) B:
// estimator - simulator = 4 x (1.627e9 - 1e9) = 2.508e9 B, minus at most 8.2e7.
TEST(SimAgreement, Zero3OptimizerTemporaryIsPerSubGroup) {
    const Resolved res = resolve({"llama-2-13b", 3, "none", "none", "full", 2});
    const double est = double(estimate(res.input).per_gpu.total);
    Resolved bounded = res;
    bounded.input.zero.stage3_max_live_parameters = bounded.input.zero.stage3_prefetch_bucket_size;
    bounded.input.zero.stage3_max_reuse_distance = 0;
    const sim::SimResult s = sim::simulate(bounded.input, sim::SimOptions{});
    EXPECT_EQ(s.peak_event, "optimizer_temporary");
    const double psi = double(count_params(*res.input.model.arch).total);
    const double expected = 4.0 * (std::ceil(psi / 8.0) - 1e9);
    EXPECT_NEAR(est - double(s.peak_allocated), expected, 8.2e7 + 0.01 * expected);
}

// ZeRO-1/2 init: the module's 16-bit params and the flat bit16_groups_flat
// coexist while flattening on the GPU (stage_1_and_2.py __init__); the
// estimator's load phase keeps one copy. llama-2-7b: Ψ = 6,738,415,616,
// padded to a multiple of 16 (already), 2 B each: 2 x 2Ψ = 26.95e9 B.
TEST(SimAgreement, Zero12FlattenHoldsTwoCopiesWhenTheyFit) {
    Resolved res = resolve({"llama-2-7b", 2, "cpu", "none", "full", 2});
    const double psi = double(count_params(*res.input.model.arch).total);
    const sim::SimResult s = sim::simulate(res.input, sim::SimOptions{});
    ASSERT_EQ(s.phases.front().phase, sim::Phase::load);
    EXPECT_NEAR(double(s.phases.front().peak_allocated), 4.0 * psi, 0.002 * 4.0 * psi);
    // With 24 GiB (< 2 copies) DeepSpeed flattens on the CPU: one copy at
    // load, plus temp_grad_buffer_for_gpu_offload = largest param (the
    // 32000 x 4096 embedding) x 2 B.
    res.input.cluster.gpu_memory = 24ULL << 30;
    const sim::SimResult one = sim::simulate(res.input, sim::SimOptions{});
    EXPECT_NEAR(double(one.phases.front().peak_allocated), 2.0 * psi + 2.0 * 32000 * 4096, 0.002 * 2.0 * psi);
}

// Stages 0/1 with one micro step per optimizer step: zero_grad(set_to_none)
// drops the gradients at each step, so in backward they grow while the
// activations are freed; the estimator counts all gradients and all
// activations at once, which only happens from the second micro step on.
TEST(SimAgreement, GradientsGrowWhileActivationsShrinkWithoutAccumulation) {
    const Resolved one = resolve({"llama-2-7b", 1, "none", "none", "none", 1});
    const double est = double(estimate(one.input).per_gpu.total);
    const double sim_peak = double(sim::simulate(one.input, sim::SimOptions{}).peak_allocated);
    EXPECT_LT(sim_peak, 0.95 * est);
    const auto [s2, e2] = peaks({"llama-2-7b", 1, "none", "none", "none", 2});
    EXPECT_NEAR(s2 / e2, 1.0, 0.02);
}

// expandable_segments:True maps pages into one growing segment per stream
// and splits any remainder >= 512 B, so far less is reserved but unallocated
// than with fixed segments (CUDACachingAllocator.cpp Note [Expandable
// Segments]); max_split_size_mb keeps large cached blocks whole, so more is.
TEST(SimAllocatorOptions, ExpandableSegmentsCutReservedOverAllocated) {
    const Resolved res = resolve({"llama-2-7b", 3, "none", "none", "none", 2});
    sim::SimOptions plain, expandable, max_split;
    expandable.alloc = sim::parse_alloc_conf("expandable_segments:True");
    max_split.alloc = sim::parse_alloc_conf("max_split_size_mb:128");
    const auto a = sim::simulate(res.input, plain);
    const auto b = sim::simulate(res.input, expandable);
    const auto c = sim::simulate(res.input, max_split);
    const double waste_a = double(a.reserved_at_peak - a.peak_allocated);
    const double waste_b = double(b.reserved_at_peak - b.peak_allocated);
    const double waste_c = double(c.reserved_at_peak - c.peak_allocated);
    EXPECT_LT(waste_b, 0.5 * waste_a);
    EXPECT_GT(waste_c, waste_a);
    // The allocator options do not change what is requested.
    EXPECT_EQ(a.peak_requested, b.peak_requested);
}
