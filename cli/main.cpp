// zeromem: how much GPU, host and NVMe memory a DeepSpeed ZeRO run needs.
// The only translation unit that includes CLI11.
#include "zeromem/gpu.h"
#include "zeromem/model.h"
#include "zeromem/planner.h"
#include "zeromem/speed.h"
#include "zeromem/report.h"
#include "zeromem/request.h"
#include "zeromem/simulator.h"
#include "zeromem/util.h"

#include "options.h"
#include "planner_commands.h"
#include "simulate_command.h"
#include "measure_command.h"
#include "check_command.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <fstream>
#include <iostream>

namespace {

const char* kEstimateExamples = R"(
Examples:
  zeromem estimate --params 7e9 --gpus 8 --stage 3
  zeromem estimate --model llama-2-7b --gpus 8 --gpu A100-80GB --stage 2 --micro-batch 4 --seq-len 4096
  zeromem estimate --model llama-3-8b --gpus 8 --ds-config data/ds_configs/ds_zero3_config.json --optimizer-impl fused --micro-batch 2 --explain
  zeromem estimate --hf-config path/to/config.json --gpus 16 --nodes 2 --stage 3 --offload-optimizer cpu --format json
  zeromem estimate --params 7e9 --largest-layer-params 131072000 --gpus 8 --stage 3 --convention deepspeed
  zeromem estimate --model llama-2-13b --gpus 8 --gpu V100-32GB --stage 3 --lora-rank 16 --gradient-checkpointing full
  zeromem estimate --model llama-2-70b --gpus 64 --nodes 8 --tp 8 --pp 2 --stage 1 --sequence-parallel
  zeromem estimate --model llama-2-7b --gpus 8 --gpu A100-80GB --stage 3 --workload dpo --micro-batch 2 --seq-len 1024
  zeromem estimate --model opt-6.7b --gpus 8 --gpu A100-80GB --stage 3 --workload ppo --critic-model opt-1.3b --rollout-prompt-len 256 --rollout-new-tokens 256

Sizes accept GB/MB/TB (powers of 1000) and GiB/MiB/TiB (powers of 1024); counts accept 7e9, 7B, 1.3b.
Output is in GiB (2^30 bytes); --format json gives integer bytes.
)";


const char* kCompareExamples = R"(
Examples:
  zeromem compare --model llama-2-7b --gpus 8 --gpu A100-80GB --host-memory 1TB --global-batch 64 --seq-len 4096
  zeromem compare --model llama-3-70b --gpus 32 --nodes 4 --gpu H100-80GB --network ib-ndr400 --global-batch 256 --format json

Every option (stages 0-3, optimizer offload cpu/nvme, parameter offload cpu/nvme for stage 3, with and without
gradient checkpointing) at its own largest micro batch that fits and divides the per-GPU batch; sorted by
tokens/s. Memory in GiB (2^30 bytes), time in seconds; --format json gives bytes and seconds.
)";

const char* kPlanExamples = R"(
Examples:
  zeromem plan --model llama-2-7b --gpus 8 --gpu A100-80GB --host-memory 1TB --global-batch 64 --seq-len 4096
  zeromem plan --model llama-2-13b --gpus 8 --gpu A100-40GB --global-batch 32 --emit ds_config.json
  zeromem plan --model llama-3-8b --gpus 8 --gpu H100-80GB --global-batch 64 --emit ds.json --for hf-trainer
)";

const char* kExitStatus = R"(
Exit status (every subcommand, as grep and diff do):
  0  answered, and it fits (compare, plan, fit: at least one option fits), or no capacity was given
  1  answered, and it does not fit (compare, plan, fit: no option fits)
  2  bad input (unknown flag or key, malformed value or file)
  3  internal error
)";

const char* kFitExamples = R"(
Examples:
  zeromem fit --gpus 64 --gpu-memory 32GB --convention paper      # largest model per option (ZeRO paper)
  zeromem fit --model llama-2-70b --gpu A100-80GB --host-memory 1TB  # fewest GPUs per option
  zeromem fit --model llama-2-70b --gpu A100-80GB --gpus 64          # fewest GPUs, searching up to 64

With a model (--model, --hf-config or --params) fit searches the fewest GPUs, up to --gpus when given;
with --gpus and no model, the largest model. An option that never fits has no number ("null" in json)
and says why.
)";


// The flags `sub` accepts, long and short forms.
std::vector<std::string> flag_names(const CLI::App* sub) {
    std::vector<std::string> names;
    for (const CLI::Option* o : sub->get_options()) {
        for (const auto& l : o->get_lnames()) names.push_back("--" + l);
        for (const auto& f : o->get_fnames()) names.push_back("--" + f);
    }
    return names;
}

// "unknown option --gpu-mem (did you mean --gpu-memory?)" for the first
// argument `sub` does not take; empty when every flag is known.
std::string unknown_flag_message(const CLI::App* sub, int argc, char** argv) {
    const auto names = flag_names(sub);
    for (int i = 2; i < argc; ++i) {
        std::string a = argv[i];
        if (a.rfind("--", 0) != 0) continue;
        if (const auto eq = a.find('='); eq != std::string::npos) a.resize(eq);
        if (std::find(names.begin(), names.end(), a) != names.end()) continue;
        std::string msg = "unknown option '" + a + "' for " + sub->get_name();
        std::vector<std::string> close;  // flags that start with what was typed, else the nearest
        for (const auto& n : names)
            if (n.rfind(a, 0) == 0 && close.size() < 2) close.push_back(n);
        if (close.empty()) close = zeromem::closest_names(a, names, 2);
        if (!close.empty()) {
            msg += " (did you mean ";
            for (std::size_t k = 0; k < close.size(); ++k) msg += (k ? " or " : "") + close[k];
            msg += "?)";
        }
        return msg + "; see zeromem " + sub->get_name() + " --help";
    }
    return {};
}

}  // namespace

int main(int argc, char** argv) {
    using namespace zeromem;
    using namespace zeromem_cli;
    CLI::App app{"zeromem: GPU, host and NVMe memory of DeepSpeed ZeRO stages and offload options, before launch.",
                 "zeromem"};
    app.set_version_flag("--version", std::string("zeromem ") + version());
    app.require_subcommand(1);
    app.footer(std::string("\nSubcommands: estimate, compare, plan, fit, check, simulate, measure, validate, models, gpus, interconnects, hosts. Run `zeromem estimate --help` for the options.\n"
               "Example: zeromem estimate --params 7e9 --gpus 8 --stage 3\n") + kExitStatus);

    Request req;
    std::string format = "table";
    bool explain = false;
    auto* est = app.add_subcommand("estimate", "Per-GPU and per-node memory of one ZeRO configuration");
    est->footer(std::string(kEstimateExamples) + kExitStatus);

    // Start-up cost: only the named subcommand gets its options (CLI11
    // builds every option eagerly); `zeromem --help` and the like get all.
    const std::string named = argc > 1 ? argv[1] : "";
    auto wants = [&named](const char* sub) {
        for (const char* s : {"estimate", "compare", "plan", "fit", "check", "simulate", "measure", "validate", "models", "gpus", "interconnects", "hosts"})
            if (named == s) return named == sub;
        return true;
    };
    if (wants("estimate")) {
        add_request_options(est, req);
        est->add_option("--format", format, "table (default), json, csv or md")->group("Output")->type_name("FORMAT");
        est->add_flag("--explain", explain, "Print each formula with numbers and its source, and where each setting came from")->group("Output");
    }

    // compare / plan / fit: the same options plus the speed model's.
    SpeedFlags sf;
    auto* cmp = app.add_subcommand("compare", "Rank every ZeRO stage / offload option by modelled throughput at its largest fitting micro batch");
    cmp->footer(std::string(kCompareExamples) + kExitStatus);
    auto* pln = app.add_subcommand("plan", "Walk the ZeRO tuning recipe (12 steps, cheapest change first) as a search; --emit writes a DeepSpeed config for the winner");
    pln->footer(std::string(kPlanExamples) + kExitStatus);
    auto* fit = app.add_subcommand("fit", "Fewest GPUs per option for a model, or (with --gpus and no model) the largest model per option");
    fit->footer(std::string(kFitExamples) + kExitStatus);
    for (CLI::App* sub : {cmp, pln}) {
        if (!wants(sub->get_name().c_str())) continue;
        add_request_options(sub, req);
        add_speed_options(sub, sf);
        sub->add_option("--format", format, "table (default) or json")->group("Output")->type_name("FORMAT");
    }
    if (wants("plan")) pln->add_option("--emit", sf.emit, "Write the winner's DeepSpeed config to PATH")->group("Output")->type_name("PATH");
    if (wants("plan")) pln->add_option("--for", sf.target, "deepspeed (default: every value explicit) or hf-trainer (batch sizes \"auto\")")
        ->group("Output")->type_name("TARGET");
    if (wants("fit")) {
        add_request_options(fit, req);
        fit->add_option("--gpus-per-node", sf.gpus_per_node, "GPUs per node when searching the fewest GPUs (default 8)")
            ->group("Cluster")->type_name("N");
        fit->add_option("--format", format, "table (default) or json")->group("Output")->type_name("FORMAT");
    }

    SimulateFlags simf;
    auto* simc = add_simulate_command(app, req, simf, wants("simulate"));

    MeasureFlags mf;
    CLI::App *meas = nullptr, *val = nullptr;
    add_measure_commands(app, req, mf, meas, val, wants("measure"), wants("validate"));

    CheckFlags chkf;
    auto* chk = add_check_command(app, req, chkf, wants("check"));
    auto* models = app.add_subcommand("models", "List the model presets in data/models");
    models->footer("\nExample: zeromem models");
    auto* gpus = app.add_subcommand("gpus", "List the GPU presets in data/gpus");
    gpus->footer("\nExample: zeromem gpus");
    auto* ics = app.add_subcommand("interconnects", "List the interconnect presets in data/interconnects");
    ics->footer("\nExample: zeromem interconnects");
    auto* hosts = app.add_subcommand("hosts", "List the host presets in data/hosts (for --host)");
    hosts->footer("\nExample: zeromem hosts");

    if (argc == 1) {  // no arguments: the usage, as a bad-input exit
        std::cerr << app.help();
        return 2;
    }
    for (int i = 1; i < argc; ++i)  // --version anywhere, after a subcommand too
        if (std::string(argv[i]) == "--version") {
            std::cout << "zeromem " << version() << "\n";
            return 0;
        }
    if (argc > 1 && argv[1][0] != '-') {
        const std::string sub = argv[1];
        bool known = false;
        for (const auto* s : app.get_subcommands([](const CLI::App*) { return true; }))
            known = known || s->get_name() == sub;
        if (!known) {
            std::cerr << "zeromem: error: unknown subcommand '" << sub
                      << "' (use estimate, compare, plan, fit, check, simulate, measure, validate, models, gpus, interconnects or hosts; see zeromem --help)\n";
            return 2;
        }
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        // One line, exit status 2, like every other input error.
        std::string msg = e.what();
        if (const auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
        for (const auto* s : app.get_subcommands())
            if (const std::string u = unknown_flag_message(s, argc, argv); !u.empty()) {
                std::cerr << "zeromem: error: " << u << "\n";
                return 2;
            }
        const auto subs = app.get_subcommands();
        std::cerr << "zeromem: error: " << msg << " (see zeromem "
                  << (subs.empty() ? std::string() : subs.front()->get_name() + " ") << "--help)\n";
        return 2;
    }

    try {
        const std::string dir = data_dir();
        if (*models) {
            for (const auto& n : list_model_presets(dir)) {
                const ModelArch a = load_model_preset(n, dir);
                std::printf("%-14s %8.2f B params  (h=%lld, L=%lld, heads=%lld, kv=%lld, vocab=%lld)\n", n.c_str(),
                            double(count_params(a).total) / 1e9, (long long)a.hidden_size, (long long)a.num_layers,
                            (long long)a.num_heads, (long long)a.num_kv_heads, (long long)a.vocab_size);
            }
            return 0;
        }
        if (*gpus) {
            for (const auto& n : list_gpu_presets(dir)) {
                const GpuSpec g = load_gpu_preset(n, dir);
                std::printf("%-14s %8s GiB\n", n.c_str(), format_gib(double(g.memory_bytes)).c_str());
            }
            return 0;
        }
        if (*cmp || *pln) return run_compare_or_plan(*cmp ? "compare" : "plan", req, sf, format, dir);
        if (*fit) return run_fit(req, sf, format, dir);
        if (*simc) return run_simulate(req, simf, dir);
        if (*meas) return run_measure(req, mf, dir);
        if (*val) return run_validate(req, mf, dir);
        if (*chk) return run_check(req, chkf, dir);
        if (*ics) {
            for (const auto& n : list_interconnect_presets(dir)) {
                const Interconnect ic = load_interconnect_preset(n, dir);
                if (ic.inter_node)
                    std::printf("%-20s inter-node  %7.1f GB/s per link, %s\n", n.c_str(), ic.link_bw / 1e9,
                                ic.links_per_node == 0 ? "one link per GPU" : "links shared by the node");
                else
                    std::printf("%-20s intra-node  all-reduce busbw %7.1f GB/s, latency %.0f us\n", n.c_str(),
                                ic.allreduce_busbw / 1e9, ic.latency * 1e6);
            }
            return 0;
        }
        if (*hosts) {
            for (const auto& n : list_host_presets(dir)) {
                const HostSpec h = load_host_preset(n, dir);
                std::printf("%-20s %4lld cores, DRAM %6.1f GB/s, PCIe gen%d x%d, %d GPU(s) per uplink: %5.1f GB/s per GPU, "
                            "CPU Adam %.2g params/s per node\n",
                            n.c_str(), (long long)h.cores, h.memory_bandwidth / 1e9, h.pcie_gen, h.pcie_lanes_per_gpu,
                            h.gpus_per_pcie_link, host_pcie_bandwidth(h) / 1e9, host_cpu_adam_rate(h, SpeedConstants{}));
            }
            return 0;
        }
        const Format fmt = parse_format(format);
        Resolved res = resolve_request(req, dir);
        sim::use_replayed_fragmentation(res.input, req.fragmentation.has_value());  // the replay's allowance
        if (res.workload.kind != Workload::sft) {  // several models per GPU (workload.h)
            const WorkloadEstimate w = estimate_workload(res.input, res.workload, explain);
            for (const auto& wn : res.warnings) std::cerr << "zeromem: warning: " << wn << "\n";
            for (const auto& n : res.notes) std::cerr << "zeromem: note: " << n << "\n";
            std::cout << render_workload(w, res, fmt, explain);
            return (w.fits_gpu == false || w.fits_host == false) ? 1 : 0;
        }
        const Estimate e = estimate(res.input, explain);  // bad input: one error line, no warnings before it
        for (const auto& w : res.warnings) std::cerr << "zeromem: warning: " << w << "\n";
        for (const auto& n : res.notes) std::cerr << "zeromem: note: " << n << "\n";
        std::cout << render(e, res, fmt, explain);
        return (e.fits_gpu == false || e.fits_host == false) ? 1 : 0;
    } catch (const InputError& e) {
        std::cerr << "zeromem: error: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "zeromem: internal error: " << e.what() << "\n";
        return 3;
    }
}

