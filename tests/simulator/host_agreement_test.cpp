// Agreement of the simulator's host replay (host_allocator.h) with the
// estimator's per-node host figures (Estimate phases' per_node.host_memory,
// host_pinned, nvme) over every dense preset x ZeRO stage 1-3 x
// offload_optimizer cpu/nvme x offload_param cpu/nvme x pin_memory, 8 GPUs
// on one node. Where they differ by more than 5% the difference is named in
// kHostDifferences with the responsible term and the accepted range.
#include "zeromem/host_allocator.h"
#include "zeromem/model.h"
#include "zeromem/request.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

using namespace zeromem;

namespace {

struct HostCase {
    std::string model;
    int stage;
    std::string opt, param;
    bool pin;
    int64_t gas;
};

std::string name(const HostCase& c) {
    return c.model + " stage " + std::to_string(c.stage) + " opt=" + c.opt + " param=" + c.param +
           " pin=" + (c.pin ? "true" : "false") + " gas=" + std::to_string(c.gas);
}

EstimateInput input(const HostCase& c) {
    Request r;
    r.model = c.model;
    r.gpus = 8;
    r.stage = c.stage;
    r.offload_optimizer = c.opt;
    r.offload_param = c.param;
    r.grad_accum = c.gas;
    EstimateInput in = resolve_request(r, ZEROMEM_SOURCE_DATA_DIR).input;
    in.zero.offload_optimizer_pin_memory = c.pin;
    in.zero.offload_param_pin_memory = c.pin;
    return in;
}

std::vector<HostCase> matrix() {
    std::vector<HostCase> out;
    for (const std::string& m : list_model_presets(ZEROMEM_SOURCE_DATA_DIR)) {
        if (load_model_preset(m, ZEROMEM_SOURCE_DATA_DIR).num_experts > 0) continue;  // not replayed (dense only)
        for (bool pin : {true, false}) {
            for (int stage : {1, 2})
                for (int64_t gas : {1, 2}) out.push_back({m, stage, "cpu", "none", pin, gas});
            for (const char* o : {"none", "cpu", "nvme"})
                for (const char* p : {"none", "cpu", "nvme"})
                    if (std::string(o) != "none" || std::string(p) != "none") out.push_back({m, 3, o, p, pin, 1});
        }
    }
    return out;
}

const PhaseMemory& phase(const Estimate& e, const char* n) {
    for (const auto& p : e.phases)
        if (p.name == n) return p;
    throw std::runtime_error(std::string("no phase ") + n);
}

struct Figures {
    double sim, est;
};

// quantity: "steady" (sim: peak over optimizer_step and later phases;
// estimator: the optimizer_step phase), "load", "pinned", "nvme"; per node.
Figures figures(const HostCase& c, const std::string& quantity) {
    const EstimateInput in = input(c);
    const Estimate e = estimate(in);
    const sim::HostResult h = sim::simulate_host(in, 2);
    const double g = double(h.ranks_per_node);
    using sim::Phase;
    if (quantity == "steady")
        return {g * double(h.peak_in({Phase::optimizer_step, Phase::steady_forward, Phase::steady_backward})),
                double(phase(e, "optimizer_step").per_node.host_memory)};
    if (quantity == "load") return {g * double(h.peak_in({Phase::load})), double(phase(e, "load").per_node.host_memory)};
    if (quantity == "pinned") return {g * double(h.peak_pinned), double(e.per_node.host_pinned)};
    return {g * double(h.nvme), double(e.per_node.nvme)};
}


// Differences above 5%, each named with the term responsible and the
// accepted ratio sim / estimator.
struct HostDifference {
    const char* name;
    const char* models;  // comma-separated presets
    int stage;
    const char* opt;
    bool pin;
    const char* quantity;
    double lo, hi;
    const char* why;
};

const std::vector<HostDifference> kHostDifferences = {
    // (none: the optimizer NVMe swap buffers, once sized by sub_group_size, follow the largest sub-group in
    // parameter order in both readings, stage3.py _create_fp16_sub_groups)
};

const HostDifference* known(const HostCase& c, const std::string& q) {
    for (const auto& k : kHostDifferences) {
        const std::string models = std::string(",") + k.models + ",";
        if (models.find("," + c.model + ",") != std::string::npos && k.stage == c.stage && c.opt == k.opt &&
            c.pin == k.pin && q == k.quantity)
            return &k;
    }
    return nullptr;
}

}  // namespace

TEST(HostAgreement, PerNodeHostWithinFivePercentOrNamed) {
    int checked = 0;
    for (const HostCase& c : matrix())
        for (const char* q : {"steady", "load", "pinned", "nvme"}) {
            const Figures f = figures(c, q);
            ++checked;
            if (f.est == 0 && f.sim == 0) continue;
            ASSERT_GT(f.est, 0) << name(c) << " " << q << ": estimator 0, simulator " << f.sim;
            const double r = f.sim / f.est;
            if (const HostDifference* k = known(c, q)) {
                EXPECT_GE(r, k->lo) << name(c) << " " << q << " (" << k->name << ")";
                EXPECT_LE(r, k->hi) << name(c) << " " << q << " (" << k->name << ")";
                continue;
            }
            EXPECT_NEAR(r, 1.0, 0.05) << name(c) << " " << q << ": simulator " << f.sim / 1073741824.0
                                       << " GiB per node, estimator " << f.est / 1073741824.0 << " GiB";
        }
    EXPECT_GT(checked, 500);  // 14 dense presets x 24 offload cases x 4 quantities
}

// Every named difference still occurs (a fixed one must be removed).
TEST(HostAgreement, NamedDifferencesStillOccur) {
    for (const auto& k : kHostDifferences) {
        bool seen = false;
        for (const HostCase& c : matrix())
            if (known(c, k.quantity) == &k) {
                const Figures f = figures(c, k.quantity);
                if (f.sim / f.est > 1.05 || f.sim / f.est < 0.95) seen = true;
            }
        EXPECT_TRUE(seen) << k.name;
    }
}

// The steady phase agrees exactly where no rounding or sub-group order
// enters: llama-2-7b, ZeRO-3, offload_optimizer cpu, pin_memory false, one
// sub-group per rank (Tn = 6,738,415,616 / 8 = 842,301,952 < 1e9): per rank
// 1 GiB baseline + fp32 master 4 · Tn + fp32 gradients 4 · Tn + 16-bit
// gradient flat buffer 2 · Tn + Adam m and v 8 · Tn = 18 · Tn pageable.
TEST(HostAgreement, Llama7bStage3CpuOffloadPageableSteadyByHand) {
    const HostCase c{"llama-2-7b", 3, "cpu", "none", false, 1};
    const EstimateInput in = input(c);
    const sim::HostResult h = sim::simulate_host(in, 2);
    const uint64_t params = 6738415616ull;  // published count (data/models/llama-2-7b.json: KerasHub llama2_7b_en)
    const uint64_t Tn = (params + 7) / 8;
    const uint64_t expected = 1073741824ull + 18 * Tn;
    // Per-parameter partitions round up: allow the padding of every
    // parameter (ceil(numel/8) per tensor, < 8 elements each, 291 tensors).
    const uint64_t got = h.peak_in({sim::Phase::optimizer_step});
    EXPECT_GE(got, expected);
    EXPECT_LE(got, expected + 18 * 8 * 400);
    EXPECT_EQ(h.peak_per_node(), 8 * h.peak_per_rank);
}

// The version and load switches both sides read:
// zero.Init off, DeepSpeed 0.16.3 (CPU flatten before 0.18.7, master pinned
// always before 0.18.3), 0.14.0 (CPU Adam tile buffers before 0.14.3),
// 0.10.0 (Adam states at init before 0.13.2, gradients pinned always before
// 0.10.1), torch 2.4 (best-fit reuse) and 1.10 (no rounding), device_map
// loading and 4 gradient accumulation steps: steady, load and pinned per
// node within 5%.
TEST(HostAgreement, VersionsLoadPathsAndZeroInit) {
    int checked = 0;
    for (const char* m : {"llama-2-7b", "gpt2-xl", "qwen2.5-32b"})
        for (int stage : {1, 2, 3})
            for (const char* o : {"cpu", "nvme"})
                for (const char* p : {"none", "cpu", "nvme"})
                    for (int variant = 0; variant < 8; ++variant) {
                        if (stage < 3 && (std::string(o) == "nvme" || std::string(p) != "none")) continue;
                        if (variant == 0 && stage != 3) continue;
                        EstimateInput in = input({m, stage, o, p, true, 1});
                        switch (variant) {
                            case 0: in.zero.zero_init = false; break;
                            case 1: in.stack.deepspeed = "0.16.3"; break;
                            case 2: in.stack.deepspeed = "0.14.0"; break;
                            case 3: in.stack.deepspeed = "0.10.0"; break;
                            case 4: in.stack.torch = "2.4"; break;
                            case 5: in.stack.torch = "1.10"; break;
                            case 6: in.residual.load_path = LoadPath::device_map; break;
                            default: in.train.grad_accum = 4; break;
                        }
                        const Estimate e = estimate(in);
                        const sim::HostResult h = sim::simulate_host(in, 2);
                        const double g = double(h.ranks_per_node);
                        using sim::Phase;
                        const std::string what = std::string(m) + " stage " + std::to_string(stage) + " opt=" + o +
                                                 " param=" + p + " variant " + std::to_string(variant);
                        const double steady = g * double(h.peak_in({Phase::optimizer_step, Phase::steady_forward, Phase::steady_backward}));
                        EXPECT_NEAR(steady / double(phase(e, "optimizer_step").per_node.host_memory), 1.0, 0.05) << what;
                        EXPECT_NEAR(g * double(h.peak_in({Phase::load})) / double(phase(e, "load").per_node.host_memory), 1.0, 0.05)
                            << what;
                        if (e.per_node.host_pinned > 0) {
                            EXPECT_NEAR(g * double(h.peak_pinned) / double(e.per_node.host_pinned), 1.0, 0.05) << what;
                        }
                        ++checked;
                    }
    EXPECT_GT(checked, 100);
}

// The CPU optimizer's states follow the optimizer the step runs: a client
// SGD under optimizer offload becomes DeepSpeedCPUAdam (accelerate's
// substitute: m and v, 8 B per element), a DeepSpeed "Adagrad" block runs
// DeepSpeedCPUAdagrad (one fp32 state, 4 B). llama-2-7b, 8 GPUs, ZeRO-3 with
// optimizer offload: the steady host figures agree within 5%, and Adagrad's
// is below the swapped SGD's by 8 ranks x 4 B x ceil(Ψ/8) = 4 B x Ψ (within 1%).
TEST(HostAgreement, CpuOptimizerStatesFollowTheOptimizerRun) {
    auto steady = [](Optimizer o, OptimizerBuilder b) {
        HostCase c{"llama-2-7b", 3, "cpu", "none", true, 1};
        EstimateInput in = input(c);
        in.train.optimizer = o;
        in.train.optimizer_builder = b;
        const Estimate e = estimate(in);
        const sim::HostResult h = sim::simulate_host(in, 2);
        const double sim = double(h.ranks_per_node) * double(h.peak_in({sim::Phase::optimizer_step}));
        const double est = double(phase(e, "optimizer_step").per_node.host_memory);
        EXPECT_NEAR(sim / est, 1.0, 0.05) << to_string(o);
        return sim;
    };
    const double sgd = steady(Optimizer::sgd, OptimizerBuilder::client);
    const double adagrad = steady(Optimizer::adagrad, OptimizerBuilder::deepspeed);
    EXPECT_NEAR(sgd - adagrad, 4.0 * 6738415616.0, 0.01 * 4.0 * 6738415616.0);
}

// zero.Init off with NVMe parameter offload: the parameter swap pool is made
// by Init(module=...) inside deepspeed.initialize, after the host copy of
// the model went to the GPU, so the load peak is the larger of the two, not
// their sum (gpt2-xl and opt-1.3b were 19-21% high when the pool came
// first). Load per node within 5% of the estimator's.
TEST(HostAgreement, ParamSwapPoolAfterTheHostCopyWithoutZeroInit) {
    for (const char* m : {"gpt2-xl", "opt-1.3b", "llama-2-7b"}) {
        HostCase c{m, 3, "none", "nvme", false, 1};
        EstimateInput in = input(c);
        in.zero.zero_init = false;
        const Estimate e = estimate(in);
        const sim::HostResult h = sim::simulate_host(in, 1);
        const double sim = double(h.ranks_per_node) * double(h.peak_in({sim::Phase::load}));
        EXPECT_NEAR(sim / double(phase(e, "load").per_node.host_memory), 1.0, 0.05) << m;
    }
}
