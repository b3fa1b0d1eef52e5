// Speed of the simulator: a 70B, 80-layer model (llama-2-70b preset), ZeRO
// stage 3 on 64 GPUs, 8 micro steps (gradient accumulation) and one
// optimizer step: event production plus replay through the allocator model.
// Target: <= 50 ms on one core. Also scales the layer count to show time
// linear in the number of modules.
#include "zeromem/gpu.h"
#include "zeromem/model.h"
#include "zeromem/planner.h"
#include "zeromem/simulator.h"
#include "zeromem/speed.h"
#include "zeromem/util.h"

#include <benchmark/benchmark.h>

namespace {

zeromem::EstimateInput llama70b(int64_t layers) {
    zeromem::EstimateInput in;
    zeromem::ModelArch a;
    a.name = "llama-2-70b";
    a.family = "llama";
    a.hidden_size = 8192;
    a.num_layers = layers;
    a.num_heads = 64;
    a.num_kv_heads = 8;
    a.head_dim = 128;
    a.ffn_size = 28672;
    a.vocab_size = 32000;
    a.gated_mlp = true;
    in.model.arch = a;
    in.model.params = zeromem::count_params(a).total;
    in.cluster.gpus = 64;
    in.cluster.nodes = 8;
    in.train.grad_accum = 8;
    in.train.seq_len = 4096;
    in.zero.stage = 3;
    return in;
}

void BM_Simulate70BStage3(benchmark::State& state) {
    const auto in = llama70b(state.range(0));
    zeromem::sim::SimOptions opt;
    opt.steps = 1;
    size_t events = 0;
    for (auto _ : state) {
        const auto r = zeromem::sim::simulate(in, opt);
        events = r.timeline.size();
        benchmark::DoNotOptimize(r.peak_allocated);
    }
    state.counters["events"] = double(events);
}
BENCHMARK(BM_Simulate70BStage3)->Arg(20)->Arg(40)->Arg(80)->Unit(benchmark::kMillisecond);

}  // namespace

namespace {

// The event producer alone (the part of a replay that a cache keyed on the
// event log could not skip).
void BM_Produce70BStage3(benchmark::State& state) {
    const auto in = llama70b(80);
    zeromem::sim::SimOptions opt;
    opt.steps = 1;
    for (auto _ : state) benchmark::DoNotOptimize(zeromem::sim::produce_events(in, opt).events.size());
}
BENCHMARK(BM_Produce70BStage3)->Unit(benchmark::kMillisecond);

// The fragmentation allowance the faces feed the estimator: a replay of 2
// optimizer steps with at most 3 micro steps (simulator.h
// fragmentation_replay_input), 70B stage 3.
void BM_ReplayFragmentation70BStage3(benchmark::State& state) {
    const auto in = llama70b(80);
    for (auto _ : state) benchmark::DoNotOptimize(zeromem::sim::replay_fragmentation(in));
}
BENCHMARK(BM_ReplayFragmentation70BStage3)->Unit(benchmark::kMillisecond);

// One estimate of the 70B model: 0 with the fixed fraction, 1 with the
// replay injected (what `zeromem estimate --model llama-2-70b` computes), 2
// with the faces' cached provider answering the same input again (what the
// planner's repeated evaluations cost).
void BM_Estimate70BStage3(benchmark::State& state) {
    auto in = llama70b(80);
    if (state.range(0) == 1) in.residual.fragmentation_provider = zeromem::sim::replay_fragmentation_allowance;
    if (state.range(0) == 2) zeromem::sim::use_replayed_fragmentation(in, false);
    for (auto _ : state) benchmark::DoNotOptimize(zeromem::estimate(in).per_gpu.total);
}
BENCHMARK(BM_Estimate70BStage3)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

}  // namespace

namespace {

// `compare` of every option with the replayed fragmentation allowance, as
// `zeromem compare` runs it (a fresh cached provider per run, so every
// distinct option is replayed once): arg 0 = llama-2-7b, 8 x A100-80GB,
// global batch 64, seq 4096 (the compare example of docs/compare-plan-fit.md, 22 options, 16
// distinct replays); arg 1 = llama-2-70b, 64 GPUs (--nodes left at 1, as
// `zeromem compare --model llama-2-70b --gpus 64` runs), global batch 512,
// seq 4096 (22 options, 17 distinct replays).
zeromem::EstimateInput compare_input(bool big) {
    using namespace zeromem;
    EstimateInput in;
    const char* name = big ? "llama-2-70b" : "llama-2-7b";
    in.model.arch = load_model_preset(name, data_dir());
    const ParamCount pc = count_params(*in.model.arch);
    in.model.params = pc.total;
    in.model.largest_layer_params = pc.largest_module;
    in.model.name = name;
    in.cluster.gpus = big ? 64 : 8;
    in.cluster.gpu_memory = 85899345920ull;
    in.cluster.host_memory = big ? 2000000000000ull : 1000000000000ull;
    in.train.seq_len = 4096;
    return in;
}

void BM_CompareWithReplay(benchmark::State& state) {
    using namespace zeromem;
    const bool big = state.range(0) == 1;
    const EstimateInput base = compare_input(big);
    const SpeedHardware hw =
        speed_hardware(load_gpu_preset("A100-80GB", data_dir()), Dtype::bf16, "", "", data_dir());
    for (auto _ : state) {
        EstimateInput in = base;
        sim::use_replayed_fragmentation(in, false);
        benchmark::DoNotOptimize(compare_options(in, hw, big ? 512 : 64));
    }
}
BENCHMARK(BM_CompareWithReplay)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

namespace {

// The mixture-of-experts presets, where (transformers 4.x) every expert projection is its own
// module (qwen3-30b-a3b: 48 layers x 128 experts x 3 projections, about
// 18.8k modules): arg 0 = qwen3-30b-a3b, 1 = mixtral-8x7b,
// 2 = deepseek-v2-lite; 8 x H100-80GB, sequence length and micro batch at
// their defaults. Second argument 1: the packed experts of transformers >= 5
// (one module per block, ModelArch::fused_experts, as the built-in stack resolves
// them); 0: the per-expert modules of transformers 4.x.
zeromem::EstimateInput moe_input(int64_t which, int64_t packed) {
    using namespace zeromem;
    const char* const names[] = {"qwen3-30b-a3b", "mixtral-8x7b", "deepseek-v2-lite"};
    const char* name = names[which];
    EstimateInput in;
    in.model.arch = load_model_preset(name, data_dir());
    in.model.arch->fused_experts = packed != 0;
    const ParamCount pc = count_params(*in.model.arch);
    in.model.params = pc.total;
    in.model.largest_layer_params = pc.largest_module;
    in.model.name = name;
    in.cluster.gpus = 8;
    in.cluster.gpu_memory = load_gpu_preset("H100-80GB", data_dir()).memory_bytes;
    return in;
}

// One fragmentation replay of a MoE preset at ZeRO stage 3 (what `zeromem
// estimate --model qwen3-30b-a3b --gpus 8 --gpu H100-80GB --stage 3`
// replays once), events produced afresh each time.
void BM_ReplayFragmentationMoEStage3(benchmark::State& state) {
    auto in = moe_input(state.range(0), state.range(1));
    in.zero.stage = 3;
    for (auto _ : state) benchmark::DoNotOptimize(zeromem::sim::replay_fragmentation(in));
}
BENCHMARK(BM_ReplayFragmentationMoEStage3)->ArgsProduct({{0, 1, 2}, {0, 1}})->Unit(benchmark::kMillisecond);

// `compare` of every option of a MoE preset with the replayed allowance
// (a fresh cached provider per run, as `zeromem compare --model
// qwen3-30b-a3b --gpus 8 --gpu H100-80GB --global-batch 64` runs it).
void BM_CompareMoEWithReplay(benchmark::State& state) {
    using namespace zeromem;
    const EstimateInput base = moe_input(state.range(0), state.range(1));
    const SpeedHardware hw = speed_hardware(load_gpu_preset("H100-80GB", data_dir()), Dtype::bf16, "", "", data_dir());
    for (auto _ : state) {
        EstimateInput in = base;
        sim::use_replayed_fragmentation(in, false);
        benchmark::DoNotOptimize(compare_options(in, hw, 64));
    }
}
BENCHMARK(BM_CompareMoEWithReplay)->ArgsProduct({{0, 1, 2}, {0, 1}})->Unit(benchmark::kMillisecond);

// `fit` (fewest GPUs per option) of a MoE preset with the replayed allowance,
// a fresh cached provider per run, as `zeromem fit --model qwen3-30b-a3b
// --gpu H100-80GB` runs it.
void BM_FitMoEWithReplay(benchmark::State& state) {
    using namespace zeromem;
    const EstimateInput base = moe_input(state.range(0), state.range(1));
    for (auto _ : state) {
        EstimateInput in = base;
        sim::use_replayed_fragmentation(in, false);
        benchmark::DoNotOptimize(fewest_gpus(in, 8));
    }
}
BENCHMARK(BM_FitMoEWithReplay)->ArgsProduct({{0, 1, 2}, {0, 1}})->Unit(benchmark::kMillisecond);

}  // namespace
