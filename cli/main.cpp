// zeromem: how much GPU, host and NVMe memory a DeepSpeed ZeRO run needs.
// Lean: links neither MPI nor CUDA; `measure` and `validate` of a fresh run
// exec the zeromem-measure helper (measure_exec.cpp).
#include "zeromem/gpu.h"
#include "zeromem/model.h"
#include "zeromem/planner.h"
#include "zeromem/preset_listing.h"
#include "zeromem/speed.h"
#include "zeromem/report.h"
#include "zeromem/launch_file.h"
#include "zeromem/request.h"
#include "zeromem/simulator.h"
#include "zeromem/util.h"

#include "options.h"
#include "planner_commands.h"
#include "simulate_command.h"
#include "measure_command.h"
#include "check_command.h"
#include "calibrate_command.h"
#include "parse.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <vector>

namespace {

const char* kEstimateExamples = R"(
Examples:
  zeromem estimate --params 7e9 --gpus 8 --stage 3
  zeromem estimate --model llama-2-7b --gpus 8 --gpu A100-80GB --stage 2 --micro-batch 4 --seq-len 4096
  zeromem estimate --model llama-3-8b --gpus 8 --ds-config data/ds_configs/ds_zero3_config.json --optimizer-impl fused --micro-batch 2 --explain
  zeromem estimate --hf-config path/to/config.json --gpus 16 --nodes 2 --stage 3 --offload-optimizer cpu --format json
  zeromem estimate --params 7e9 --largest-layer-params 131072000 --gpus 8 --stage 3 --convention deepspeed
  zeromem estimate --module-tree tree.json --gpus 8 --stage 3   # tree.json from python -m zeromem.tree (python/README.md)
  zeromem estimate --model llama-2-13b --gpus 8 --gpu V100-32GB --stage 3 --lora-rank 16 --gradient-checkpointing full
  zeromem estimate --model llama-2-70b --gpus 64 --nodes 8 --tp 8 --pp 2 --stage 1 --sequence-parallel
  zeromem estimate --model llama-2-7b --gpus 8 --gpu A100-80GB --stage 3 --workload dpo --micro-batch 2 --seq-len 1024
  zeromem estimate --model opt-6.7b --gpus 8 --gpu A100-80GB --stage 3 --workload ppo --critic-model opt-1.3b --rollout-prompt-len 256 --rollout-new-tokens 256

Sizes accept GB/MB/TB (powers of 1000) and GiB/MiB/TiB (powers of 1024); counts accept 7e9, 7B, 1.3b.
Output is in GiB (2^30 bytes); --format json gives integer bytes.
Software stack: the deepspeed, torch and transformers installed in $VIRTUAL_ENV (else $CONDA_PREFIX) are
followed, read from their .dist-info/.egg-info metadata; --stack auto also reads the python3 on PATH,
--stack-from FILE a `pip freeze` output, --stack defaults (or ZEROMEM_STACK=defaults) pins the built-in
DeepSpeed 0.19.6, torch 2.8, transformers 5.0. The second output line says where each version came from.
)";


const char* kCompareExamples = R"(
Examples:
  zeromem compare --model llama-2-7b --gpus 8 --gpu A100-80GB --host-memory 1TiB --global-batch 64 --seq-len 4096
  zeromem compare --model llama-3-70b --gpus 32 --nodes 4 --gpu H100-80GB --network ib-ndr400 --global-batch 256 --format json

Every option (stages 0-3, optimizer offload cpu/nvme, parameter offload cpu/nvme for stage 3, with and without
gradient checkpointing) at its own largest micro batch that fits and divides the per-GPU batch; sorted by
tokens/s. Memory in GiB (2^30 bytes), time in seconds; --format json gives bytes and seconds.
)";

const char* kPlanExamples = R"(
Examples:
  zeromem plan --model llama-2-7b --gpus 8 --gpu A100-80GB --host-memory 1TiB --global-batch 64 --seq-len 4096
  zeromem plan --model llama-2-13b --gpus 8 --gpu A100-40GB --global-batch 32 --emit ds_config.json
  zeromem plan --model llama-3-8b --gpus 8 --gpu H100-80GB --global-batch 64 --emit ds.json --for hf-trainer
)";

const char* kExitStatus = R"(
Exit status (every subcommand, as grep and diff do):
  0  answered, and it fits (compare, fit: at least one option fits with the margin; plan: its winner
     does), or no capacity was given
  1  answered, and it does not fit (compare, plan, fit: no option fits)
  2  bad input (unknown flag or key, malformed value or file), or the answer could not be written
  3  internal error
  4  answered, and it fits only inside the error band ("tight"; compare, fit: every option that fits is
     tight; plan: its winner is tight; estimate: the margin is smaller than the
     largest underestimate on zeromem's ledger of public runs, docs/accuracy.md)
)";

const char* kFitExamples = R"(
Examples:
  zeromem fit --gpus 64 --gpu-memory 32GB --convention paper      # largest model per option (ZeRO paper)
  zeromem fit --model llama-2-70b --gpu A100-80GB --host-memory 1TiB  # fewest GPUs per option
  zeromem fit --model llama-2-70b --gpu A100-80GB --gpus 64          # fewest GPUs, searching up to 64

With a model (--model, --hf-config, --module-tree or --params) fit searches the fewest GPUs, up to --gpus when given;
with --gpus and no model, the largest model. An option that never fits has no number ("null" in json)
and says why.
)";


}  // namespace

namespace {

using namespace zeromem;
using namespace zeromem_cli;

const char* const kSubcommands[] = {"estimate", "compare", "plan", "fit", "check", "calibrate", "simulate", "measure",
                                    "validate", "models", "gpus", "interconnects", "hosts"};

/// What the command line fills in, and the subcommands it may name.
struct Cli {
    Request req;
    std::string format = "table";
    bool explain = false, verbose = false;
    SpeedFlags sf;
    SimulateFlags simf;
    MeasureFlags mf;
    CheckFlags chkf;
    CalibrateFlags calf;
    CLI::App *est = nullptr, *cmp = nullptr, *pln = nullptr, *fit = nullptr, *simc = nullptr, *meas = nullptr,
             *val = nullptr, *chk = nullptr, *cal = nullptr, *models = nullptr, *gpus = nullptr, *ics = nullptr, *hosts = nullptr;
};

// estimate: the request options plus --format and --explain.
void add_estimate_command(CLI::App& app, Cli& c, bool with_options) {
    c.est = app.add_subcommand("estimate", "Per-GPU and per-node memory of one ZeRO configuration");
    c.est->footer(std::string(kEstimateExamples) + kExitStatus);
    if (!with_options) return;
    add_request_options(c.est, c.req);
    add_speed_options(c.est, c.sf, kUnusedSpeedGroup);  // one command line for estimate, compare and plan
    c.est->add_option("--format", c.format, "table (default), json, csv or md")->group("Output")->type_name("FORMAT");
    c.est->add_flag("--explain", c.explain, "Print each formula with numbers and its source, and where each setting came from")
        ->group("Output");
    add_verbose_flag(c.est, c.verbose);
}

// compare / plan / fit: the request options plus the speed model's.
template <class Wants>
void add_planner_commands(CLI::App& app, Cli& c, const Wants& wants) {
    c.cmp = app.add_subcommand("compare", "Rank every ZeRO stage / offload option by modelled throughput at its largest fitting micro batch");
    c.cmp->footer(std::string(kCompareExamples) + kExitStatus);
    c.pln = app.add_subcommand("plan", "Walk the ZeRO tuning recipe (12 steps, cheapest change first) as a search; --emit writes a DeepSpeed config for the winner");
    c.pln->footer(std::string(kPlanExamples) + kExitStatus);
    c.fit = app.add_subcommand("fit", "Fewest GPUs per option for a model, or (with --gpus and no model) the largest model per option");
    c.fit->footer(std::string(kFitExamples) + kExitStatus);
    for (CLI::App* sub : {c.cmp, c.pln}) {
        if (!wants(sub->get_name().c_str())) continue;
        add_request_options(sub, c.req);
        add_speed_options(sub, c.sf);
        sub->add_option("--format", c.format, "table (default), json, csv or md (one row per option or plan step)")->group("Output")->type_name("FORMAT");
        sub->add_flag("--explain", c.sf.explain,
                      sub == c.cmp ? "Then the first-ranked option's estimate with every formula, its numbers and source"
                                   : "Then the winner's estimate with every formula, its numbers and source")
            ->group("Output");
        add_verbose_flag(sub, c.sf.verbose);
    }
    if (wants("compare"))
        c.cmp->add_flag("--wide", c.sf.wide,
                        "Also the step time's terms (compute, comm, optim, offload, per-param, other) and TFLOP/s as "
                        "columns; rows are then wider than 120 columns")
            ->group("Output");
    if (wants("plan")) {
        c.pln->add_option("--emit", c.sf.emit, "Write the winner's DeepSpeed config to PATH")->group("Output")->type_name("PATH");
        c.pln->add_option("--for", c.sf.target, "deepspeed (default: every value explicit) or hf-trainer (batch sizes \"auto\")")
            ->group("Output")->type_name("TARGET");
    }
    if (wants("fit")) {
        add_request_options(c.fit, c.req);
        add_speed_options(c.fit, c.sf, kUnusedSpeedGroup);
        c.fit->add_option("--gpus-per-node", c.sf.gpus_per_node, "GPUs per node when searching the fewest GPUs (default 8)")
            ->group("Cluster")->type_name("N");
        c.fit->add_option("--format", c.format, "table (default), json, csv or md (one row per option)")->group("Output")->type_name("FORMAT");
        add_verbose_flag(c.fit, c.sf.verbose);
    }
}

// models, gpus, interconnects, hosts: preset listings; --format table or json.
void add_listing_commands(CLI::App& app, Cli& c) {
    c.models = app.add_subcommand("models", "List the model presets in data/models");
    c.models->footer("\nExample: zeromem models");
    c.gpus = app.add_subcommand("gpus", "List the GPU presets in data/gpus");
    c.gpus->footer("\nExample: zeromem gpus");
    c.ics = app.add_subcommand("interconnects", "List the interconnect presets in data/interconnects");
    c.ics->footer("\nExample: zeromem interconnects");
    c.hosts = app.add_subcommand("hosts", "List the host presets in data/hosts (for --host)");
    c.hosts->footer("\nExample: zeromem hosts");
    for (CLI::App* sub : {c.models, c.gpus, c.ics, c.hosts})
        sub->add_option("--format", c.format, "table (default) or json (sizes in bytes, rates in bytes/s)")
            ->group("Output")->type_name("FORMAT");
}

// Every subcommand. Start-up cost: only the named subcommand gets its
// options (CLI11 builds every option eagerly); `zeromem --help` and the
// like get all.
void add_subcommands(CLI::App& app, Cli& c, const std::string& named) {
    auto wants = [&named](const char* sub) {
        for (const char* s : kSubcommands)
            if (named == s) return named == sub;
        return true;
    };
    add_estimate_command(app, c, wants("estimate"));
    add_planner_commands(app, c, wants);
    c.simc = add_simulate_command(app, c.req, c.simf, wants("simulate"));
    add_measure_commands(app, c.req, c.mf, c.meas, c.val, wants("measure"), wants("validate"));
    c.chk = add_check_command(app, c.req, c.chkf, wants("check"));
    c.cal = add_calibrate_command(app, c.req, c.calf, wants("calibrate"));
    add_listing_commands(app, c);
}

// Answers given before parsing: the usage without arguments (exit 2), an
// unknown subcommand (exit 2).
std::optional<int> answer_before_parsing(CLI::App& app, int argc, char** argv) {
    if (argc == 1) {
        std::cerr << app.help();
        return 2;
    }
    if (argv[1][0] == '-') return std::nullopt;
    const std::string sub = argv[1];
    for (const auto* s : app.get_subcommands([](const CLI::App*) { return true; }))
        if (s->get_name() == sub) return std::nullopt;
    std::cerr << "zeromem: error: unknown subcommand '" << sub
              << "' (use estimate, compare, plan, fit, check, calibrate, simulate, measure, validate, models, gpus, interconnects or hosts; see zeromem --help)\n";
    return 2;
}

// The preset listings: models, gpus, interconnects, hosts (the text and JSON
// come from the library's render_preset_listing).
int list_presets(const Cli& c, const std::string& dir) {
    if (c.format != "table" && c.format != "json")
        throw InputError("--format: '" + c.format + "' is not a listing format (table or json)");
    const PresetKind kind = *c.models ? PresetKind::models
                            : *c.gpus ? PresetKind::gpus
                            : *c.ics  ? PresetKind::interconnects
                                      : PresetKind::hosts;
    std::cout << render_preset_listing(kind, dir, c.format == "json");
    return 0;
}

// estimate: one configuration, or the models of a --workload, rendered in
// the chosen format; exit 1 when it does not fit.
int run_estimate(const Cli& c, const std::string& dir) {
    const Format fmt = parse_format(c.format);
    Resolved res = resolve_request(c.req, dir);
    sim::use_replayed_fragmentation(res.input, c.req.fragmentation.has_value() || res.fragmentation_fitted);  // the replay's allowance
    std::vector<std::string> notes = res.notes;
    for (auto& n : unused_flag_notes(c.est, kUnusedSpeedGroup)) notes.push_back(std::move(n));
    if (res.workload.kind != Workload::sft) {  // several models per GPU (workload.h)
        const WorkloadEstimate w = estimate_workload(res.input, res.workload, c.explain);
        print_diagnostics(res.warnings, notes, c.verbose);
        std::cout << render_workload(w, res, fmt, c.explain);
        return (w.fits_gpu == false || w.fits_host == false) ? 1 : 0;
    }
    const Estimate e = estimate(res.input, c.explain);  // bad input: one error line, no warnings before it
    print_diagnostics(res.warnings, notes, c.verbose);
    std::cout << render(e, res, fmt, c.explain, c.verbose);
    if (e.fits_gpu == false || e.fits_host == false) return 1;
    return (e.gpu_verdict == "tight" || e.host_verdict == "tight") ? kExitTight : 0;
}

// The parsed subcommand, run; bad input is one error line and exit 2.
// measure, and validate without --measurement, replace this process by the
// zeromem-measure helper with the same argv.
int run(Cli& c, int argc, char** argv) {
    try {
        const std::string dir = data_dir();
        if (c.req.from && !*c.chk)  // every subcommand then sees the file's values as if given as flags
            c.req = merge_launch_file(c.req, read_launch_file(*c.req.from, dir));
        if (*c.models || *c.gpus || *c.ics || *c.hosts) return list_presets(c, dir);
        if (*c.cmp || *c.pln) return run_compare_or_plan(*c.cmp ? "compare" : "plan", c.req, c.sf, c.format, dir);
        if (*c.fit) return run_fit(c.req, c.sf, c.format, dir, unused_flag_notes(c.fit, kUnusedSpeedGroup));
        if (*c.simc) return run_simulate(c.req, c.simf, dir);
        if (*c.meas || (*c.val && c.mf.measurement.empty())) return exec_measure_helper(argc, argv);
        if (*c.val) return run_validate_file(c.req, c.mf, dir);
        if (*c.chk) return run_check(c.req, c.chkf, dir);
        if (*c.cal) return run_calibrate(c.req, c.calf, dir);
        return run_estimate(c, dir);
    } catch (const InputError& e) {
        std::cerr << "zeromem: error: " << e.what() << launch_file_origin(c.req, e.what()) << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "zeromem: internal error: " << e.what() << "\n";
        return 3;
    }
}

// The environment variables the installed software stack is read from
// (zeromem/stack_detect.h); the library reads none itself.
StackEnvironment stack_environment() {
    auto get = [](const char* name) {
        const char* v = std::getenv(name);
        return std::string(v ? v : "");
    };
    return StackEnvironment{get("VIRTUAL_ENV"), get("CONDA_PREFIX"), get("PATH"), get("PYENV_VERSION"),
                            get("ZEROMEM_STACK")};
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i)  // --version anywhere, after a subcommand too; before any option is built
        if (std::string(argv[i]) == "--version") {
            std::cout << "zeromem " << zeromem::version() << "\n";
            return 0;
        }
    CLI::App app{"zeromem: GPU, host and NVMe memory of DeepSpeed ZeRO stages and offload options, before launch.",
                 "zeromem"};
    app.set_version_flag("--version", std::string("zeromem ") + zeromem::version());
    app.require_subcommand(1);
    app.footer(std::string("\nSubcommands: estimate, compare, plan, fit, check, calibrate, simulate, measure, validate, models, gpus, interconnects, hosts. Run `zeromem estimate --help` for the options.\n"
               "Example: zeromem estimate --params 7e9 --gpus 8 --stage 3\n") + kExitStatus);
    Cli c;
    add_subcommands(app, c, argc > 1 ? argv[1] : "");
    if (const auto done = answer_before_parsing(app, argc, argv)) return *done;
    if (const auto done = parse_command_line(app, argc, argv)) return *done;
    c.req.environment = stack_environment();
    const int rc = run(c, argc, argv);
    std::cout.flush();  // an answer that never reached its reader (a full disk, a closed pipe) is not an answer
    if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
        std::fprintf(stderr, "zeromem: error: cannot write the answer to standard output\n");
        return 2;
    }
    return rc;
}
