// Property tests over random valid inputs (fixed seeds, so failures
// reproduce): estimates stay finite and consistent up to 1e15 parameters;
// ZeRO-3 per-GPU model states never grow with more GPUs nor when a
// component moves to offload; the deepspeed convention equals DeepSpeed's
// estimator arithmetic, written out below from DeepSpeed v0.19.6 (stage_1_and_2.py
// estimate_zero2_model_states_mem_needs, stage3.py
// estimate_zero3_model_states_mem_needs), in Python's operation order.
#include "zeromem/estimate.h"
#include "zeromem/model.h"

#include "estimate_inputs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

using namespace zeromem;

namespace {

constexpr uint64_t kSane = uint64_t(1) << 62;  // far above any real byte count; wrap-around lands beyond it

uint64_t log_uniform(std::mt19937_64& rng, double lo, double hi) {
    std::uniform_real_distribution<double> u(std::log(lo), std::log(hi));
    return static_cast<uint64_t>(std::exp(u(rng)));
}

template <class T>
T pick(std::mt19937_64& rng, const std::vector<T>& v) {
    return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)];
}

/// A random valid full-convention input: bare parameter counts up to 1e15
/// or a preset architecture; any stage, offload allowed by the stage.
EstimateInput random_input(std::mt19937_64& rng) {
    static const std::vector<std::string> presets = {"gpt2-xl", "llama-2-7b", "llama-3-8b", "opt-1.3b",
                                                     "qwen2.5-7b", "falcon-40b"};
    const int stage = std::uniform_int_distribution<int>(0, 3)(rng);
    const Dtype dtype = pick<Dtype>(rng, {Dtype::bf16, Dtype::fp16, Dtype::fp32});
    const int64_t nodes = pick<int64_t>(rng, {1, 2, 4, 16});
    const int64_t gpus = nodes * pick<int64_t>(rng, {1, 2, 4, 8});
    EstimateInput in;
    if (std::bernoulli_distribution(0.5)(rng)) {
        in = testinputs::params_input(log_uniform(rng, 1e6, 1e15), gpus, stage, dtype);
        in.model.largest_layer_params = in.model.params / log_uniform(rng, 1, 1e4);
    } else {
        in = testinputs::preset_input(pick(rng, presets), gpus, stage, dtype);
    }
    in.cluster.nodes = nodes;
    in.train.micro_batch = pick<int64_t>(rng, {1, 2, 8});
    in.train.seq_len = pick<int64_t>(rng, {512, 2048, 8192});
    in.train.checkpointing = pick<Checkpointing>(rng, {Checkpointing::none, Checkpointing::full});
    if (stage >= 1 && std::bernoulli_distribution(0.4)(rng)) in.zero.offload_optimizer = OffloadDevice::cpu;
    if (stage == 3) {
        if (std::bernoulli_distribution(0.2)(rng)) in.zero.offload_optimizer = OffloadDevice::nvme;
        in.zero.offload_param = pick<OffloadDevice>(rng, {OffloadDevice::none, OffloadDevice::cpu, OffloadDevice::nvme});
    }
    return in;
}

uint64_t model_states(const GpuMemory& m) { return m.parameters + m.gradients + m.optimizer_states; }

void expect_sane(const Estimate& e, const std::string& where) {
    for (const auto& p : e.phases) {
        const GpuMemory& m = p.per_gpu;
        for (uint64_t v : {m.parameters, m.gradients, m.optimizer_states, m.activations, m.temporary_buffers,
                           m.total, p.per_node.host_memory, p.per_node.host_pinned, p.per_node.nvme})
            EXPECT_LT(v, kSane) << p.name << " " << where;
        EXPECT_GE(m.total, model_states(m)) << p.name << " " << where;
        EXPECT_GE(p.per_node.host_memory, p.per_node.host_pinned) << p.name << " " << where;
    }
    EXPECT_GT(e.per_gpu.total, 0u) << where;
    EXPECT_LT(e.per_gpu.total, kSane) << where;
}

std::string describe(const EstimateInput& in) {
    return "P=" + std::to_string(in.model.params) + " L=" + std::to_string(in.model.largest_layer_params) +
           " gpus=" + std::to_string(in.cluster.gpus) + " nodes=" + std::to_string(in.cluster.nodes) +
           " stage=" + std::to_string(in.zero.stage) + " opt=" + to_string(in.zero.offload_optimizer) +
           " param=" + to_string(in.zero.offload_param) + " model=" + in.model.name;
}

}  // namespace

TEST(Property, EstimatesStayFiniteAndConsistentUpTo1e15Params) {
    std::mt19937_64 rng(20261130);
    for (int i = 0; i < 400; ++i) {
        const EstimateInput in = random_input(rng);
        expect_sane(estimate(in), describe(in));
    }
    // The extreme corner: 1e15 parameters on one GPU, stage 0, fp32.
    EstimateInput big = testinputs::params_input(1000000000000000ull, 1, 0, Dtype::fp32);
    const Estimate e = estimate(big);
    expect_sane(e, "1e15 on one GPU");
    EXPECT_GE(e.per_gpu.total, 16ull * 1000000000000000ull);  // 4 B weights + 4 B grads + 8 B Adam at least
}

TEST(Property, Stage3ModelStatesNeverGrowWithMoreGpus) {
    std::mt19937_64 rng(7);
    for (int i = 0; i < 200; ++i) {
        EstimateInput in = random_input(rng);
        in.zero.stage = 3;
        const Estimate a = estimate(in);
        EstimateInput more = in;
        more.cluster.gpus *= 2;
        more.cluster.nodes *= 2;  // same GPUs per node
        const Estimate b = estimate(more);
        EXPECT_LE(model_states(b.per_gpu), model_states(a.per_gpu)) << describe(in);
    }
}

TEST(Property, ModelStatesNeverGrowWhenAComponentMovesToOffload) {
    std::mt19937_64 rng(11);
    for (int i = 0; i < 200; ++i) {
        EstimateInput in = random_input(rng);
        in.zero.stage = std::uniform_int_distribution<int>(1, 3)(rng);
        in.zero.offload_optimizer = OffloadDevice::none;
        in.zero.offload_param = OffloadDevice::none;
        const uint64_t none = model_states(estimate(in).per_gpu);
        EstimateInput opt = in;
        opt.zero.offload_optimizer = OffloadDevice::cpu;
        const uint64_t with_opt = model_states(estimate(opt).per_gpu);
        EXPECT_LE(with_opt, none) << describe(opt);
        if (in.zero.stage == 3) {
            EstimateInput both = opt;
            both.zero.offload_param = OffloadDevice::cpu;
            EXPECT_LE(model_states(estimate(both).per_gpu), with_opt) << describe(both);
            EstimateInput nvme = both;
            nvme.zero.offload_optimizer = OffloadDevice::nvme;
            nvme.zero.offload_param = OffloadDevice::nvme;
            EXPECT_LE(model_states(estimate(nvme).per_gpu), with_opt) << describe(nvme);
        }
    }
}

namespace {

/// DeepSpeed's estimators (estimate_zero2/3_model_states_mem_needs) in Python's
/// order: ints stay exact until a float multiplies them; int() truncates.
struct Golden {
    uint64_t cpu = 0, gpu = 0;
};

Golden zero2(uint64_t P, int64_t g, int64_t n, bool cpu_offload, bool legacy, double abf) {
    const int64_t N = g * n;
    Golden r;
    if (cpu_offload) {
        r.gpu = 2 * P;
        r.cpu = static_cast<uint64_t>(static_cast<double>(P * static_cast<uint64_t>(std::max<int64_t>(4 * N, 16))) * abf);
    } else {
        r.gpu = legacy ? 4 * P + static_cast<uint64_t>(static_cast<double>(16 * P) / static_cast<double>(N))
                       : 2 * P + static_cast<uint64_t>(static_cast<double>(18 * P) / static_cast<double>(N));
        r.cpu = static_cast<uint64_t>(static_cast<double>(P * 4 * static_cast<uint64_t>(g)) * abf);
    }
    return r;
}

Golden zero3(uint64_t P, uint64_t L, int64_t g, int64_t n, bool cpu_offload, bool cpu_offload_params, bool zero_init,
             double abf) {
    const int64_t N = g * n;
    const double gf = 1.0 / static_cast<double>(n);
    const uint64_t llm = 4 * L;
    const double Pd = static_cast<double>(P);
    auto big = [&](double factor) {  // P * max(4*g, factor*gf) * abf; max keeps Python's int when it wins
        const double per = static_cast<double>(4 * g) >= factor * gf ? static_cast<double>(4 * g) : factor * gf;
        return static_cast<double>(4 * g) >= factor * gf ? static_cast<double>(P * static_cast<uint64_t>(4 * g)) * abf
                                                          : Pd * per * abf;
    };
    Golden r;
    if (cpu_offload && cpu_offload_params) {
        r.gpu = llm;
        r.cpu = static_cast<uint64_t>(zero_init ? static_cast<double>(P * 18) * gf * abf : big(18.0));
    } else if (cpu_offload) {
        r.gpu = llm + static_cast<uint64_t>(static_cast<double>(2 * P) / static_cast<double>(N));
        r.cpu = static_cast<uint64_t>(zero_init ? static_cast<double>(P * 16) * gf * abf : big(16.0));
    } else {
        r.gpu = llm + static_cast<uint64_t>(static_cast<double>(18 * P) / static_cast<double>(N));
        r.cpu = static_cast<uint64_t>(zero_init ? static_cast<double>(L * 4 * static_cast<uint64_t>(g)) * abf
                                                : static_cast<double>(P * 4 * static_cast<uint64_t>(g)) * abf);
    }
    return r;
}

}  // namespace

TEST(Property, DeepSpeedConventionEqualsTheEstimatorArithmetic) {
    std::mt19937_64 rng(42);
    for (int i = 0; i < 2000; ++i) {
        // 18 x P stays below 2^53, where Python's exact int division and a
        // double division agree.
        const uint64_t P = log_uniform(rng, 1e6, 4e14);
        const uint64_t L = std::max<uint64_t>(1, P / log_uniform(rng, 1, 1e4));
        const int64_t n = pick<int64_t>(rng, {1, 2, 3, 4, 8, 16, 64});
        const int64_t g = pick<int64_t>(rng, {1, 2, 4, 8, 16});
        const int stage = std::bernoulli_distribution(0.5)(rng) ? 2 : 3;
        const bool off_opt = std::bernoulli_distribution(0.5)(rng);
        const bool off_par = stage == 3 && off_opt && std::bernoulli_distribution(0.5)(rng);
        const bool zero_init = std::bernoulli_distribution(0.5)(rng);
        const bool legacy = stage == 2 && std::bernoulli_distribution(0.3)(rng);
        EstimateInput in;
        in.convention = Convention::deepspeed;
        in.model.params = P;
        in.model.largest_layer_params = L;
        in.cluster.gpus = g * n;
        in.cluster.nodes = n;
        in.zero.stage = stage;
        in.zero.offload_optimizer = off_opt ? OffloadDevice::cpu : OffloadDevice::none;
        in.zero.offload_param = off_par ? OffloadDevice::cpu : OffloadDevice::none;
        in.zero.zero_init = zero_init;
        in.legacy_zero2_formula = legacy;
        const Golden want = stage == 2 ? zero2(P, g, n, off_opt, legacy, 1.5)
                                       : zero3(P, L, g, n, off_opt, off_par, zero_init, 1.5);
        const Estimate e = estimate(in);
        EXPECT_EQ(e.per_gpu.total, want.gpu) << describe(in) << " zero_init=" << zero_init << " legacy=" << legacy;
        EXPECT_EQ(e.per_node.host_memory, want.cpu) << describe(in) << " zero_init=" << zero_init;
    }
}
