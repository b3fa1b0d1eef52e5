// A host-backend training step of the ~10M-parameter test model on 4 MPI
// ranks (target: under 2 s). Not a ctest; run by hand:
//   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ./build/tests/bench/runtime/zeromem_runtime_bench
// Each iteration launches `mpirun -np 4 zeromem measure --steps 2` and
// reports the second step's forward + backward + optimizer-step seconds as
// measured by the runtime (rank 0's phase timers; the first step warms up).
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

namespace {

double step_seconds(int stage) {
    const std::string data = ZEROMEM_RUNTIME_TEST_DATA;
    const std::string cmd = std::string(ZEROMEM_MPIRUN) + " --oversubscribe -np 4 " + ZEROMEM_BINARY +
                            " measure --backend host --hf-config " + data + "/llama_10m_config.json --ds-config " +
                            data + "/ds_stage" + std::to_string(stage) + ".json --seq-len 64 --steps 2 --format json 2>/dev/null";
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
    const auto j = nlohmann::json::parse(out);
    double s = 0;
    for (const auto& ph : j["ranks"][0]["phases"])
        if (ph["step"] == 2) s += ph["seconds"].get<double>();
    return s;
}

void BM_HostStep10M4Ranks(benchmark::State& state) {
    for (auto _ : state) {
        const double s = step_seconds(static_cast<int>(state.range(0)));
        state.SetIterationTime(s);
        state.counters["step_s"] = s;
    }
}
BENCHMARK(BM_HostStep10M4Ranks)->DenseRange(0, 3)->UseManualTime()->Iterations(1)->Unit(benchmark::kSecond);

}  // namespace
