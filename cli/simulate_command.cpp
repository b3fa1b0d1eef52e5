#include "simulate_command.h"

#include "options.h"
#include "zeromem/sim_writers.h"

#include "replay_progress.h"
#include "zeromem/simulator.h"

#include <iostream>
#include <string>
#include <vector>

namespace zeromem_cli {

namespace {

// Settings `estimate` models but the replay does not: refused in one line
// naming the flag (exit 2) rather than silently ignored.
void refuse_unreplayed_settings(const zeromem::EstimateInput& in) {
    using zeromem::InputError;
    if (in.generation)
        throw InputError("--eval-generate (--num-beams, --max-new-tokens, --eval-batch, --prompt-len): the generation "
                         "phase is not replayed; use zeromem estimate");
    if (in.convention != zeromem::Convention::full)
        throw InputError(std::string("--convention: ") + zeromem::to_string(in.convention) +
                         " is not replayed (the simulator replays the full convention); use zeromem estimate");
    if (in.legacy_zero2_formula) throw InputError("--legacy-zero2: not replayed; use zeromem estimate");
}

// The replay walks the module list of the architecture (simulator
// module_tree.cpp build_modules), not the user's tree: a tree is replayed
// only when the two hold the same parameters, all trainable.
void refuse_unreplayed_tree(const zeromem::Request& req, const zeromem::EstimateInput& in) {
    using zeromem::InputError;
    if (!req.module_tree) return;
    if (!in.model.arch)
        throw InputError("--module-tree: the simulator replays the modules of an architecture, and the tree carries "
                         "none zeromem reads; add --model or --hf-config");
    if (in.train.trainable_params)
        throw InputError("--module-tree: the tree has frozen parameters (requires_grad false); the simulator replays "
                         "full fine-tuning only; use zeromem estimate");
    // A dense tree's own modules are replayed (sim::modules_from_tree); routed experts follow the
    // architecture's MoE blocks, which must then hold the tree's parameters.
    if (!in.model.tree || !zeromem::sim::tree_has_routed_experts(*in.model.tree)) return;
    const uint64_t listed = zeromem::count_params(*in.model.arch).total;
    if (listed != in.model.params)
        throw InputError("--module-tree: the tree's routed experts are replayed from the architecture, whose "
                         "modules hold " + std::to_string(listed) + " parameters, the tree " +
                         std::to_string(in.model.params) + "; use zeromem estimate");
}

// Notes for settings that leave the replay unchanged, and for the versions
// each side of the replay follows.
std::vector<std::string> replay_notes(const zeromem::Request& req, const zeromem::EstimateInput& in) {
    std::vector<std::string> notes;
    if (req.fragmentation)
        notes.push_back("--fragmentation: does not change the replay (the caching allocator model gives reserved - "
                        "allocated itself); it is the allowance of zeromem estimate");
    if (in.zero.stage3_gather_16bit_weights_on_model_save)
        notes.push_back("stage3_gather_16bit_weights_on_model_save (--gather-on-save): the checkpoint save is not "
                        "replayed; zeromem estimate models its gather");
    if (in.stack.deepspeed != "0.19.6")
        notes.push_back((req.deepspeed_version ? "--deepspeed-version " : "DeepSpeed ") + in.stack.deepspeed +
                        ": the GPU replay follows DeepSpeed 0.19.6; the host replay (pinned buffers, CPU-Adam states) "
                        "follows " + in.stack.deepspeed);
    return notes;
}

const char* kSimulateExamples = R"(
Examples:
  zeromem simulate --model llama-2-7b --gpus 8 --stage 3 --micro-batch 2 --seq-len 4096
  zeromem simulate --model llama-2-13b --gpus 8 --gpu A100-40GB --stage 2 --alloc-conf expandable_segments:True
  zeromem simulate --model llama-3-8b --gpus 8 --stage 3 --chrome-trace step.json --memory-snapshot step.pickle
  zeromem simulate --model gpt2-xl --gpus 4 --stage 1 --format csv > timeline.csv

Replays --steps optimizer steps (each with its gradient accumulation micro steps) of one rank, allocation by
allocation, through a model of PyTorch's caching allocator. Memory in GiB (2^30 bytes); json/csv give bytes.
Host RAM per rank and per node (a model of PyTorch's pinned CachingHostAllocator) and NVMe bytes follow the
GPU table (json: "host"); with --host-memory (bytes per node) a host out-of-memory line and exit status 1
when a node's resident host RAM exceeds it. --eval-generate, --convention other than full and --legacy-zero2 are
not replayed (exit 2; use zeromem estimate); --fragmentation and --gather-on-save leave the replay unchanged
(a note, printed with --verbose). Open --chrome-trace in ui.perfetto.dev and --memory-snapshot in
pytorch.org/memory_viz.
)";

}  // namespace

CLI::App* add_simulate_command(CLI::App& app, zeromem::Request& req, SimulateFlags& f, bool with_options) {
    auto* sim = app.add_subcommand("simulate", "Replay a training step event by event through a model of PyTorch's caching allocator");
    sim->footer(kSimulateExamples);
    if (!with_options) return sim;
    add_request_options(sim, req);
    sim->add_option("--steps", f.steps, "Optimizer steps to replay, 1 to 100 (default 2)")->group("Simulation")->type_name("N");
    sim->add_flag("--explain", f.explain,
                  "After the table, every event term: the estimator term it corresponds to and the DeepSpeed/PyTorch code "
                  "that allocates it, then every host term likewise (json: \"explain\" and \"host_explain\" lists)")
        ->group("Output");
    sim->add_option("--format", f.format, "table (default), json or csv (the timeline)")->group("Output")->type_name("FORMAT");
    sim->add_option("--chrome-trace", f.chrome_trace, "Write a Chrome trace-event JSON (Perfetto) to FILE")->group("Output")->type_name("FILE");
    sim->add_option("--memory-snapshot", f.memory_snapshot, "Write a torch.cuda.memory._dump_snapshot pickle to FILE")
        ->group("Output")->type_name("FILE");
    add_verbose_flag(sim, f.verbose);
    return sim;
}

// A Chrome trace past this size gets a warning before it is written (100 MiB).
constexpr std::size_t kLargeTraceBytes = std::size_t(100) << 20;

int run_simulate(const zeromem::Request& req, const SimulateFlags& f, const std::string& dir) {
    using namespace zeromem;
    if (f.format != "table" && f.format != "json" && f.format != "csv")
        throw InputError("--format: '" + f.format + "' is not one of table, json, csv");
    if (f.steps < 1 || f.steps > 100) throw InputError("--steps: must be between 1 and 100, got " + std::to_string(f.steps));
    // Fail early on an unwritable output file, before a long replay.
    if (!f.chrome_trace.empty()) sim::check_writable(f.chrome_trace, "--chrome-trace");
    if (!f.memory_snapshot.empty()) sim::check_writable(f.memory_snapshot, "--memory-snapshot");
    const Resolved res = resolve_request(req, dir);
    require_single_model(res, "simulate");
    refuse_unreplayed_tree(req, res.input);
    (void)estimate(res.input);  // the estimator's validation: same messages as `estimate`
    refuse_unreplayed_settings(res.input);
    sim::SimOptions opt;
    opt.steps = f.steps;
    opt.alloc = sim::parse_alloc_conf(res.input.residual.alloc_conf);  // --alloc-conf
    opt.record_allocator_trace = !f.memory_snapshot.empty();
    const sim::SimResult r = [&] {
        ElapsedProgress progress("simulate: replaying the step through the caching allocator model");
        return sim::simulate(res.input, opt);
    }();
    // Bad input is one error line: warnings and notes only after the replay succeeded.
    std::vector<std::string> notes = res.notes;
    for (auto& n : replay_notes(req, res.input)) notes.push_back(std::move(n));
    std::vector<std::string> warnings = res.warnings;
    print_diagnostics(warnings, notes, f.verbose);
    std::optional<sim::HostOom> host_oom;
    if (res.input.cluster.host_memory) host_oom = sim::find_host_oom(r.host, *res.input.cluster.host_memory);
    std::vector<std::string> wrote;  // printed after the answer
    if (!f.chrome_trace.empty()) {
        std::string trace;
        {
            ElapsedProgress progress("simulate: building the Chrome trace");
            trace = sim::chrome_trace(r).dump();
        }
        if (trace.size() > kLargeTraceBytes)
            std::cerr << "zeromem: warning: --chrome-trace " << f.chrome_trace << " is "
                      << std::to_string(trace.size() >> 20)
                      << " MiB (Perfetto's UI opens traces up to about 1 GiB in the browser); --steps 1 or a shorter "
                         "--grad-accum makes it smaller\n";
        ElapsedProgress progress("simulate: writing the Chrome trace");
        wrote.push_back(sim::wrote_line(f.chrome_trace, sim::write_file(f.chrome_trace, trace, "--chrome-trace")));
    }
    if (!f.memory_snapshot.empty())
        wrote.push_back(sim::wrote_line(
            f.memory_snapshot, sim::write_file(f.memory_snapshot, sim::memory_snapshot_pickle(r), "--memory-snapshot")));
    if (f.format == "json") {
        nlohmann::json j = sim::to_json(r);
        j["notes"] = notes;
        j["host_oom"] = nullptr;
        if (host_oom)
            j["host_oom"] = {{"event", host_oom->event}, {"module", host_oom->module}, {"phase", sim::to_string(host_oom->phase)},
                             {"t", host_oom->t}, {"per_node", host_oom->per_node}, {"capacity_per_node", host_oom->capacity_per_node}};
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
        if (host_oom) std::cout << "\n" << sim::render_host_oom(*host_oom) << "\n";
        if (f.explain) std::cout << sim::render_explain(r);
    }
    if (host_oom && f.format == "csv") std::cerr << "zeromem: " << sim::render_host_oom(*host_oom) << "\n";
    for (const auto& w : wrote) std::cerr << "zeromem: " << w << "\n";
    return (r.oom || host_oom) ? 1 : 0;
}

}  // namespace zeromem_cli
