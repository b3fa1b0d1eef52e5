#include "simulate_command.h"

#include "options.h"
#include "zeromem/sim_writers.h"
#include "zeromem/simulator.h"

#include <iostream>

namespace zeromem_cli {

namespace {

const char* kSimulateExamples = R"(
Examples:
  zeromem simulate --model llama-2-7b --gpus 8 --stage 3 --micro-batch 2 --seq-len 4096
  zeromem simulate --model llama-2-13b --gpus 8 --gpu A100-40GB --stage 2 --alloc-conf expandable_segments:True
  zeromem simulate --model llama-3-8b --gpus 8 --stage 3 --chrome-trace step.json --memory-snapshot step.pickle
  zeromem simulate --model gpt2-xl --gpus 4 --stage 1 --format csv > timeline.csv

Replays --steps optimizer steps (each with its gradient accumulation micro steps) of one rank, allocation by
allocation, through a model of PyTorch's caching allocator. Memory in GiB (2^30 bytes); json/csv give bytes.
Host RAM per rank and per node (a model of PyTorch's pinned CachingHostAllocator) and NVMe bytes follow the
GPU table (json: "host").
Open --chrome-trace in ui.perfetto.dev and --memory-snapshot in pytorch.org/memory_viz.
)";

}  // namespace

CLI::App* add_simulate_command(CLI::App& app, zeromem::Request& req, SimulateFlags& f, bool with_options) {
    auto* sim = app.add_subcommand("simulate", "Replay a training step event by event through a model of PyTorch's caching allocator");
    sim->footer(kSimulateExamples);
    if (!with_options) return sim;
    add_request_options(sim, req);
    sim->add_option("--steps", f.steps, "Optimizer steps to replay, 1 to 100 (default 2)")->group("Simulation")->type_name("N");
    sim->add_option("--alloc-conf", f.alloc_conf, "PYTORCH_CUDA_ALLOC_CONF string, e.g. expandable_segments:True,max_split_size_mb:128")
        ->group("Simulation")->type_name("CONF");
    sim->add_flag("--explain", f.explain,
                  "After the table, every event term: the estimator term it corresponds to and the DeepSpeed/PyTorch code "
                  "that allocates it, then every host term likewise (json: \"explain\" and \"host_explain\" lists)")
        ->group("Output");
    sim->add_option("--format", f.format, "table (default), json or csv (the timeline)")->group("Output")->type_name("FORMAT");
    sim->add_option("--chrome-trace", f.chrome_trace, "Write a Chrome trace-event JSON (Perfetto) to FILE")->group("Output")->type_name("FILE");
    sim->add_option("--memory-snapshot", f.memory_snapshot, "Write a torch.cuda.memory._dump_snapshot pickle to FILE")
        ->group("Output")->type_name("FILE");
    return sim;
}

int run_simulate(const zeromem::Request& req, const SimulateFlags& f, const std::string& dir) {
    using namespace zeromem;
    if (f.format != "table" && f.format != "json" && f.format != "csv")
        throw InputError("--format: '" + f.format + "' is not one of table, json, csv");
    if (f.steps < 1 || f.steps > 100) throw InputError("--steps: must be between 1 and 100, got " + std::to_string(f.steps));
    // Fail early on an unwritable output file, before a long replay.
    if (!f.chrome_trace.empty()) sim::write_file(f.chrome_trace, "", "--chrome-trace");
    if (!f.memory_snapshot.empty()) sim::write_file(f.memory_snapshot, "", "--memory-snapshot");
    const Resolved res = resolve_request(req, dir);
    require_single_model(res, "simulate");
    for (const auto& w : res.warnings) std::cerr << "zeromem: warning: " << w << "\n";
    (void)estimate(res.input);  // the estimator's validation: same messages as `estimate`
    sim::SimOptions opt;
    opt.steps = f.steps;
    opt.alloc = sim::parse_alloc_conf(f.alloc_conf);
    opt.record_allocator_trace = !f.memory_snapshot.empty();
    const sim::SimResult r = sim::simulate(res.input, opt);
    if (!f.chrome_trace.empty()) sim::write_file(f.chrome_trace, sim::chrome_trace(r).dump(), "--chrome-trace");
    if (!f.memory_snapshot.empty()) sim::write_file(f.memory_snapshot, sim::memory_snapshot_pickle(r), "--memory-snapshot");
    if (f.format == "json") {
        nlohmann::json j = sim::to_json(r);
        if (f.explain) {
            j["explain"] = nlohmann::json::array();
            for (const auto& e : sim::explain(r))
                j["explain"].push_back({{"event", e.term}, {"component", e.component}, {"estimator_term", e.estimator_term},
                                        {"source", e.source}, {"bytes_at_peak", e.bytes_at_peak}, {"largest", e.largest}});
            j["host_explain"] = nlohmann::json::array();
            for (const auto& e : sim::explain_host(r.host))
                j["host_explain"].push_back({{"event", e.term}, {"kind", e.kind}, {"estimator_term", e.estimator_term},
                                             {"source", e.source}, {"bytes_at_peak", e.bytes_at_peak}, {"largest", e.largest}});
        }
        std::cout << j.dump(2) << "\n";
    } else if (f.format == "csv") {
        std::cout << sim::render_csv(r);
    } else {
        std::cout << sim::render_table(r);
        if (f.explain) std::cout << sim::render_explain(r);
    }
    return r.oom ? 1 : 0;
}

}  // namespace zeromem_cli
