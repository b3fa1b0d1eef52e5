// zeromem: how much GPU, host and NVMe memory a DeepSpeed ZeRO run needs.
// The only translation unit that includes CLI11.
#include "zeromem/gpu.h"
#include "zeromem/model.h"
#include "zeromem/planner.h"
#include "zeromem/speed.h"
#include "zeromem/report.h"
#include "zeromem/request.h"
#include "zeromem/util.h"

#include "options.h"
#include "planner_commands.h"
#include "check_command.h"

#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>

namespace {

const char* kEstimateExamples = R"(
Examples:
  zeromem estimate --params 7e9 --gpus 8 --stage 3
  zeromem estimate --model llama-2-7b --gpus 8 --gpu A100-80GB --stage 2 --micro-batch 4 --seq-len 4096
  zeromem estimate --model llama-3-8b --gpus 8 --ds-config data/ds_configs/ds_zero3_config.json --micro-batch 2 --explain
  zeromem estimate --hf-config path/to/config.json --gpus 16 --nodes 2 --stage 3 --offload-optimizer cpu --format json
  zeromem estimate --params 7e9 --largest-layer-params 131072000 --gpus 8 --stage 3 --convention deepspeed
  zeromem estimate --model llama-2-13b --gpus 8 --gpu V100-32GB --stage 3 --lora-rank 16 --gradient-checkpointing full
  zeromem estimate --model llama-2-70b --gpus 64 --nodes 8 --tp 8 --pp 2 --stage 1 --sequence-parallel

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

Exit status 1 when nothing fits, 2 for bad input.
)";

const char* kFitExamples = R"(
Examples:
  zeromem fit --gpus 64 --gpu-memory 32GB --convention paper      # largest model per option (ZeRO paper)
  zeromem fit --model llama-2-70b --gpu A100-80GB --host-memory 1TB  # fewest GPUs per option
)";


}  // namespace

int main(int argc, char** argv) {
    using namespace zeromem;
    using namespace zeromem_cli;
    CLI::App app{"zeromem: GPU, host and NVMe memory of DeepSpeed ZeRO stages and offload options, before launch."};
    app.set_version_flag("--version", std::string("zeromem ") + version());
    app.require_subcommand(1);
    app.footer("\nSubcommands: estimate, compare, plan, fit, check, models, gpus, interconnects. Run `zeromem estimate --help` for the options.\n"
               "Example: zeromem estimate --params 7e9 --gpus 8 --stage 3");

    Request req;
    std::string format = "table";
    bool explain = false;
    auto* est = app.add_subcommand("estimate", "Per-GPU and per-node memory of one ZeRO configuration");
    est->footer(kEstimateExamples);

    add_request_options(est, req);
    est->add_option("--format", format, "table (default), json, csv or md")->group("Output")->type_name("FORMAT");
    est->add_flag("--explain", explain, "Print each formula with numbers and its source, and where each setting came from")->group("Output");

    // compare / plan / fit: the same options plus the speed model's.
    SpeedFlags sf;
    auto* cmp = app.add_subcommand("compare", "Rank every ZeRO stage / offload option by modelled throughput at its largest fitting micro batch");
    cmp->footer(kCompareExamples);
    auto* pln = app.add_subcommand("plan", "Walk the seed's 12-step tuning recipe as a search; --emit writes a DeepSpeed config for the winner");
    pln->footer(kPlanExamples);
    auto* fit = app.add_subcommand("fit", "Largest model per option on --gpus GPUs, or (without --gpus) the fewest GPUs for the model");
    fit->footer(kFitExamples);
    for (CLI::App* sub : {cmp, pln}) {
        add_request_options(sub, req);
        add_speed_options(sub, sf);
        sub->add_option("--format", format, "table (default) or json")->group("Output")->type_name("FORMAT");
    }
    pln->add_option("--emit", sf.emit, "Write the winner's DeepSpeed config to PATH")->group("Output")->type_name("PATH");
    pln->add_option("--for", sf.target, "deepspeed (default: every value explicit) or hf-trainer (batch sizes \"auto\")")
        ->group("Output")->type_name("TARGET");
    add_request_options(fit, req);
    fit->add_option("--gpus-per-node", sf.gpus_per_node, "GPUs per node when searching the fewest GPUs (default 8)")
        ->group("Cluster")->type_name("N");
    fit->add_option("--format", format, "table (default) or json")->group("Output")->type_name("FORMAT");

    CheckFlags chkf;
    auto* chk = add_check_command(app, req, chkf);
    auto* models = app.add_subcommand("models", "List the model presets in data/models");
    models->footer("\nExample: zeromem models");
    auto* gpus = app.add_subcommand("gpus", "List the GPU presets in data/gpus");
    gpus->footer("\nExample: zeromem gpus");
    auto* ics = app.add_subcommand("interconnects", "List the interconnect presets in data/interconnects");
    ics->footer("\nExample: zeromem interconnects");

    if (argc > 1 && argv[1][0] != '-') {
        const std::string sub = argv[1];
        bool known = false;
        for (const auto* s : app.get_subcommands([](const CLI::App*) { return true; }))
            known = known || s->get_name() == sub;
        if (!known) {
            std::cerr << "zeromem: error: unknown subcommand '" << sub
                      << "' (use estimate, compare, plan, fit, check, models, gpus or interconnects; see zeromem --help)\n";
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
        std::cerr << "zeromem: error: " << msg << " (see zeromem --help)\n";
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
        const Format fmt = parse_format(format);
        const Resolved res = resolve_request(req, dir);
        for (const auto& w : res.warnings) std::cerr << "zeromem: warning: " << w << "\n";
        const Estimate e = estimate(res.input, explain);
        for (const auto& n : res.notes) std::cerr << "zeromem: note: " << n << "\n";
        std::cout << render(e, res, fmt, explain);
        return 0;
    } catch (const InputError& e) {
        std::cerr << "zeromem: error: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "zeromem: internal error: " << e.what() << "\n";
        return 3;
    }
}

