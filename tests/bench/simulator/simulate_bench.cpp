// Speed of the simulator: a 70B, 80-layer model (llama-2-70b preset), ZeRO
// stage 3 on 64 GPUs, 8 micro steps (gradient accumulation) and one
// optimizer step: event production plus replay through the allocator model.
// Target: <= 50 ms on one core. Also scales the layer count to show time
// linear in the number of modules.
#include "zeromem/simulator.h"

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
