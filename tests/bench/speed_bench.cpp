// Benchmarks of the speed model and the planner (target: plan explores at
// least 10,000 candidate configurations in at most 50 ms on one core).
#include "zeromem/gpu.h"
#include "zeromem/model.h"
#include "zeromem/planner.h"
#include "zeromem/speed.h"
#include "zeromem/util.h"

#include <benchmark/benchmark.h>

namespace {

zeromem::EstimateInput llama7b() {
    using namespace zeromem;
    EstimateInput in;
    in.model.arch = load_model_preset("llama-2-7b", data_dir());
    const ParamCount pc = count_params(*in.model.arch);
    in.model.params = pc.total;
    in.model.largest_layer_params = pc.largest_module;
    in.model.name = "llama-2-7b";
    in.cluster.gpus = 8;
    in.cluster.gpu_memory = 85899345920ull;
    in.cluster.host_memory = 1000000000000ull;
    in.train.seq_len = 4096;
    return in;
}

zeromem::SpeedHardware a100() {
    using namespace zeromem;
    return speed_hardware(load_gpu_preset("A100-80GB", data_dir()), Dtype::bf16, "", "", data_dir());
}

void BM_StepTime(benchmark::State& state) {
    zeromem::EstimateInput in = llama7b();
    in.zero.stage = 3;
    const auto hw = a100();
    for (auto _ : state) benchmark::DoNotOptimize(zeromem::step_time(in, hw));
}
BENCHMARK(BM_StepTime);

// llama-2-7b, seq 512, on 8 x H200-141GB-sized GPUs, global batch 8 x 720: the
// per-GPU batch 720 has 30 divisors, so step 12 spans 11 options x 3
// checkpointing x 2 overlap_comm x 8 bucket sizes x the micro batches that
// fit (the walk stops at the first that does not). Reports candidates per plan.
void BM_Plan(benchmark::State& state) {
    zeromem::EstimateInput in = llama7b();
    in.cluster.gpu_memory = 151397597184ull;  // H200 141 GB label
    in.train.seq_len = 512;
    const auto hw = a100();
    zeromem::PlanSpace space;
    space.bucket_multipliers = {0.0625, 0.125, 0.25, 0.5, 1, 2, 4, 8};
    uint64_t cands = 0;
    for (auto _ : state) {
        const auto r = zeromem::plan(in, hw, 8 * 720, space);
        cands = r.candidates;
        benchmark::DoNotOptimize(r.winner);
    }
    state.counters["candidates"] = double(cands);
    state.counters["candidates_per_s"] = benchmark::Counter(double(cands), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Plan)->Unit(benchmark::kMillisecond);

void BM_Compare(benchmark::State& state) {
    const zeromem::EstimateInput in = llama7b();
    const auto hw = a100();
    for (auto _ : state) benchmark::DoNotOptimize(zeromem::compare_options(in, hw, 64));
}
BENCHMARK(BM_Compare)->Unit(benchmark::kMicrosecond);

}  // namespace
