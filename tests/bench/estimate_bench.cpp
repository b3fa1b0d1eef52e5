// Google Benchmark: cost of one estimate (not run by ctest).
//   ./build/tests/bench/zeromem_bench
#include "zeromem/estimate.h"
#include "zeromem/model.h"
#include "zeromem/util.h"

#include <benchmark/benchmark.h>

namespace {

zeromem::EstimateInput llama_input(zeromem::Convention c, int stage) {
    zeromem::EstimateInput in;
    const zeromem::ModelArch arch = zeromem::load_model_preset("llama-2-7b", zeromem::data_dir());
    const zeromem::ParamCount pc = zeromem::count_params(arch);
    in.model.params = pc.total;
    in.model.largest_layer_params = pc.largest_module;
    in.model.arch = arch;
    in.cluster.gpus = 8;
    in.cluster.gpu_memory = 80ull << 30;
    in.cluster.host_memory = 1000000000000ull;
    in.train.micro_batch = 4;
    in.train.seq_len = 4096;
    in.zero.stage = stage;
    in.convention = c;
    return in;
}

// One full-convention estimate (the budget: at most 2 microseconds).
void BM_FullEstimateStage3(benchmark::State& state) {
    const auto in = llama_input(zeromem::Convention::full, 3);
    for (auto _ : state) benchmark::DoNotOptimize(zeromem::estimate(in));
}
BENCHMARK(BM_FullEstimateStage3);

void BM_FullEstimateStage2Offload(benchmark::State& state) {
    auto in = llama_input(zeromem::Convention::full, 2);
    in.zero.offload_optimizer = zeromem::OffloadDevice::cpu;
    for (auto _ : state) benchmark::DoNotOptimize(zeromem::estimate(in));
}
BENCHMARK(BM_FullEstimateStage2Offload);

void BM_DeepSpeedEstimate(benchmark::State& state) {
    const auto in = llama_input(zeromem::Convention::deepspeed, 3);
    for (auto _ : state) benchmark::DoNotOptimize(zeromem::estimate(in));
}
BENCHMARK(BM_DeepSpeedEstimate);

// With --explain (formula strings built): not on the 2 us budget.
void BM_FullEstimateExplain(benchmark::State& state) {
    const auto in = llama_input(zeromem::Convention::full, 3);
    for (auto _ : state) benchmark::DoNotOptimize(zeromem::estimate(in, true));
}
BENCHMARK(BM_FullEstimateExplain);

}  // namespace
