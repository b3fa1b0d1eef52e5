// zeromem: how much GPU, host and NVMe memory a DeepSpeed ZeRO run needs.
// The only translation unit that includes CLI11.
#include "zeromem/gpu.h"
#include "zeromem/model.h"
#include "zeromem/planner.h"
#include "zeromem/speed.h"
#include "zeromem/report.h"
#include "zeromem/request.h"
#include "zeromem/util.h"

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

/// Speed-model and planner flags.
// "--gpus" from a CLI11 flag list such as "-g,--gpus".
std::string option_name(const char* flags) {
    std::string f = flags;
    const auto comma = f.rfind(',');
    return comma == std::string::npos ? f : f.substr(comma + 1);
}

struct SpeedFlags {
    std::optional<int64_t> global_batch;
    std::string interconnect, network, emit, target = "deepspeed";
    std::optional<double> cpu_adam_rate, pcie_bandwidth;
    std::optional<std::string> nvme_read, nvme_write;
    int64_t gpus_per_node = 8;
};

void add_speed_options(CLI::App* sub, SpeedFlags& f) {
    const char* g = "Speed model";
    sub->add_option_function<std::string>("--global-batch", [&f](const std::string& v) {
        try {
            f.global_batch = zeromem::parse_int(v, "--global-batch");
        } catch (const zeromem::InputError& e) {
            throw CLI::ValidationError(e.what());
        }
    },
                                      "Samples per optimizer step over all GPUs (train_batch_size); default 16 per GPU")
        ->group(g)->type_name("N");
    sub->add_option("--interconnect", f.interconnect, "Intra-node interconnect preset (default: the GPU's; see `zeromem interconnects`)")
        ->group(g)->type_name("NAME");
    sub->add_option("--network", f.network, "Inter-node network preset, required with --nodes > 1 (e.g. ib-ndr400)")
        ->group(g)->type_name("NAME");
    sub->add_option_function<double>("--cpu-adam-rate", [&f](const double& v) { f.cpu_adam_rate = v; },
                                     "CPU Adam parameters/s per node under optimizer offload (default 1.5e9)")
        ->group(g)->type_name("RATE");
    sub->add_option_function<double>("--pcie-bandwidth", [&f](const double& v) { f.pcie_bandwidth = v; },
                                     "GPU<->host bytes/s per direction (default: the GPU preset's)")
        ->group(g)->type_name("BYTES_PER_S");
    sub->add_option_function<std::string>("--nvme-read", [&f](const std::string& v) { f.nvme_read = v; },
                                          "NVMe read bandwidth per node per second, e.g. 10GB (default 10GB)")
        ->group(g)->type_name("SIZE");
    sub->add_option_function<std::string>("--nvme-write", [&f](const std::string& v) { f.nvme_write = v; },
                                          "NVMe write bandwidth per node per second, e.g. 5GB (default 5GB)")
        ->group(g)->type_name("SIZE");
}

std::string gib(uint64_t b) { return zeromem::format_gib(double(b)); }

int run_compare_or_plan(const std::string& cmd, const zeromem::Request& req, const SpeedFlags& f,
                        const std::string& format, const std::string& dir) {
    using namespace zeromem;
    if (format != "table" && format != "json")
        throw InputError("--format: '" + format + "' is not table or json for " + cmd);
    if (f.target != "deepspeed" && f.target != "hf-trainer")
        throw InputError("--for: '" + f.target + "' is not deepspeed or hf-trainer");
    if (!req.gpu) throw InputError("--gpu: " + cmd + " needs a GPU preset for the speed model (see `zeromem gpus`)");
    const Resolved res = resolve_request(req, dir);
    for (const auto& w : res.warnings) std::cerr << "zeromem: warning: " << w << "\n";
    const EstimateInput& in = res.input;
    SpeedHardware hw = speed_hardware(*res.gpu, in.train.dtype, f.interconnect, f.network, dir);
    if (in.cluster.nodes > 1 && f.network.empty())
        throw InputError("--network: the cluster spans " + std::to_string(in.cluster.nodes) +
                         " nodes; name the inter-node network (see `zeromem interconnects`)");
    if (f.cpu_adam_rate) {
        if (*f.cpu_adam_rate <= 0) throw InputError("--cpu-adam-rate: must be positive");
        hw.cpu_adam_rate = *f.cpu_adam_rate;
    }
    if (f.pcie_bandwidth) {
        if (*f.pcie_bandwidth <= 0) throw InputError("--pcie-bandwidth: must be positive");
        hw.pcie_bandwidth = *f.pcie_bandwidth;
    }
    if (f.nvme_read) hw.nvme_read = double(parse_bytes(*f.nvme_read, "--nvme-read"));
    if (f.nvme_write) hw.nvme_write = double(parse_bytes(*f.nvme_write, "--nvme-write"));
    const int64_t global = f.global_batch ? *f.global_batch
                           : in.train.train_batch_size ? *in.train.train_batch_size
                                                       : 16 * in.cluster.gpus;
    const bool json_out = format == "json";
    auto row_json = [](const Candidate& c) {
        return nlohmann::json{{"option", c.option.label()},
                              {"stage", c.option.stage},
                              {"offload_optimizer", to_string(c.option.offload_optimizer)},
                              {"offload_param", to_string(c.option.offload_param)},
                              {"gradient_checkpointing", to_string(c.option.checkpointing)},
                              {"dtype", to_string(c.dtype)},
                              {"micro_batch", c.micro_batch},
                              {"grad_accum", c.grad_accum},
                              {"overlap_comm", c.overlap_comm},
                              {"reduce_bucket_size", c.reduce_bucket_size},
                              {"per_gpu_total", c.memory.per_gpu.total},
                              {"host_memory", c.memory.per_node.host_memory},
                              {"nvme", c.memory.per_node.nvme},
                              {"fits", c.fits},
                              {"step_time_s", c.time.total},
                              {"compute_s", c.time.compute},
                              {"exposed_comm_s", c.time.exposed_comm},
                              {"optimizer_s", c.time.optimizer},
                              {"offload_s", c.time.offload},
                              {"overhead_s", c.time.overhead},
                              {"tokens_per_s", c.time.tokens_per_s},
                              {"tflops_per_gpu", c.time.tflops_per_gpu},
                              {"mfu", c.time.mfu}};
    };
    auto print_row = [](const Candidate& c) {
        std::printf("%-58s %4lld x%-4lld %8s %9s %-4s %9.3f %8.3f %8.3f %8.3f %8.3f %11.0f %7.1f %5.1f\n",
                    c.option.label().c_str(), (long long)c.micro_batch, (long long)c.grad_accum,
                    gib(c.memory.per_gpu.total).c_str(), gib(c.memory.per_node.host_memory).c_str(),
                    c.fits ? "yes" : "no", c.time.total, c.time.compute, c.time.exposed_comm, c.time.optimizer,
                    c.time.offload + c.time.overhead, c.time.tokens_per_s, c.time.tflops_per_gpu, c.time.mfu * 100);
    };
    const char* header =
        "%-58s %11s %8s %9s %-4s %9s %8s %8s %8s %8s %11s %7s %5s\n";
    auto print_header = [&]() {
        std::printf(header, "option", "micro x acc", "GPU GiB", "host GiB", "fits", "step s", "compute", "comm s",
                    "optim s", "offload", "tokens/s", "TFLOP/s", "MFU%");
    };
    std::printf("%s", "");
    if (cmd == "compare") {
        const auto rows = compare_options(in, hw, global, {});
        const auto statement = ordering_statement(rows);
        if (json_out) {
            nlohmann::json arr = nlohmann::json::array();
            for (const auto& c : rows) arr.push_back(row_json(c));
            std::cout << arr.dump(2) << "\n";
            return 0;
        }
        std::printf("%s (%.2f B params), %lld x %s (%lld node%s, %s), global batch %lld, seq %lld tokens, %s\n",
                    in.model.name.c_str(), double(in.model.params) / 1e9, (long long)in.cluster.gpus,
                    hw.gpu_name.c_str(), (long long)in.cluster.nodes, in.cluster.nodes > 1 ? "s" : "",
                    hw.intra.name.c_str(), (long long)global, (long long)in.train.seq_len, to_string(in.train.dtype));
        std::printf("Times are seconds per optimizer step per GPU (comm = exposed communication; offload column = "
                    "PCIe/NVMe transfers + ZeRO bookkeeping); memory in GiB (2^30 bytes).\n\n");
        print_header();
        for (const auto& c : rows) print_row(c);
        std::printf("\n");
        for (const auto& line : statement) std::printf("%s\n", line.c_str());
        return 0;
    }
    const PlanResult r = plan(in, hw, global);
    if (json_out) {
        nlohmann::json j;
        j["steps"] = nlohmann::json::array();
        for (const auto& s : r.steps) {
            nlohmann::json sj = {{"recipe_step", s.recipe_step}, {"action", s.action}, {"outcome", s.outcome}};
            if (s.candidate) sj["candidate"] = row_json(*s.candidate);
            j["steps"].push_back(sj);
        }
        j["candidates_evaluated"] = r.candidates;
        j["winner"] = r.winner ? row_json(*r.winner) : nlohmann::json(nullptr);
        std::cout << j.dump(2) << "\n";
    } else {
        std::printf("%s (%.2f B params), %lld x %s, global batch %lld, seq %lld tokens: the seed's tuning recipe\n\n",
                    in.model.name.c_str(), double(in.model.params) / 1e9, (long long)in.cluster.gpus,
                    hw.gpu_name.c_str(), (long long)global, (long long)in.train.seq_len);
        for (const auto& s : r.steps)
            std::printf("step %2d  %s\n         -> %s\n", s.recipe_step, s.action.c_str(), s.outcome.c_str());
        if (r.winner) {
            const Candidate& w = *r.winner;
            std::printf("\nWinner: %s, micro batch %lld, accumulation %lld; %s GiB per GPU, %s GiB host per node; "
                        "step %.3f s (compute %.3f s, exposed comm %.3f s, optimizer %.3f s, offload+overhead %.3f s); "
                        "%.0f tokens/s, %.1f TFLOP/s per GPU, MFU %.1f%%\n",
                        w.option.label().c_str(), (long long)w.micro_batch, (long long)w.grad_accum,
                        gib(w.memory.per_gpu.total).c_str(), gib(w.memory.per_node.host_memory).c_str(), w.time.total,
                        w.time.compute, w.time.exposed_comm, w.time.optimizer, w.time.offload + w.time.overhead,
                        w.time.tokens_per_s, w.time.tflops_per_gpu, w.time.mfu * 100);
        }
    }
    if (!r.winner) {
        std::cerr << "zeromem: plan: the model does not fit even with ZeRO-Infinity (NVMe offload) at micro batch 1\n";
        return 1;
    }
    if (!f.emit.empty()) {
        const nlohmann::json cfg = emit_ds_config(*r.winner, in, f.target == "hf-trainer");
        std::ofstream out(f.emit);
        if (!out) throw InputError("--emit: cannot write " + f.emit);
        out << cfg.dump(2) << "\n";
        if (!out) throw InputError("--emit: cannot write " + f.emit);
        std::fprintf(stderr, "zeromem: wrote %s%s\n", f.emit.c_str(),
                     r.winner->option.checkpointing != Checkpointing::none
                         ? std::string("; enable gradient checkpointing (").append(to_string(r.winner->option.checkpointing))
                               .append(") in the model, it is not a DeepSpeed config key").c_str()
                         : "");
    }
    return 0;
}

int run_fit(zeromem::Request req, const SpeedFlags& f, const std::string& format, const std::string& dir) {
    using namespace zeromem;
    if (format != "table" && format != "json") throw InputError("--format: '" + format + "' is not table or json for fit");
    const bool largest = req.gpus.has_value();
    if (largest && !req.params && !req.model && !req.hf_config) req.params = "1e9";  // placeholder; searched below
    if (!largest && !req.params && !req.model && !req.hf_config)
        throw InputError("fit: give --gpus (largest model per option) or a model (fewest GPUs per option)");
    const Resolved res = resolve_request(req, dir);
    const auto rows = largest ? largest_model(res.input) : fewest_gpus(res.input, f.gpus_per_node);
    if (format == "json") {
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& r : rows)
            arr.push_back({{"option", r.option.label()},
                           {"stage", r.option.stage},
                           {"offload_optimizer", to_string(r.option.offload_optimizer)},
                           {"offload_param", to_string(r.option.offload_param)},
                           {largest ? "max_params" : "min_gpus", r.value},
                           {"per_gpu_total", r.per_gpu_total},
                           {"note", r.note}});
        std::cout << arr.dump(2) << "\n";
        return 0;
    }
    if (largest)
        std::printf("Largest model (parameters, model states and buffers; no activations without an architecture) on "
                    "%lld GPUs of %s GiB, convention %s\n\n%-44s %16s %12s\n",
                    (long long)res.input.cluster.gpus, gib(*res.input.cluster.gpu_memory).c_str(),
                    to_string(res.input.convention), "option", "max params (B)", "GPU GiB");
    else
        std::printf("Fewest GPUs (%s GiB each, %lld per node) for %s, convention %s\n\n%-44s %16s %12s\n",
                    gib(*res.input.cluster.gpu_memory).c_str(), (long long)f.gpus_per_node,
                    res.input.model.name.c_str(), to_string(res.input.convention), "option", "GPUs", "GPU GiB");
    for (const auto& r : rows) {
        const std::string note = r.note.empty() ? "" : "  (" + r.note + ")";
        if (largest && r.value)
            std::printf("%-44s %16.3f %12s%s\n", r.option.label().c_str(), double(r.value) / 1e9,
                        gib(r.per_gpu_total).c_str(), note.c_str());
        else if (largest)
            std::printf("%-44s %16s %12s%s\n", r.option.label().c_str(), "-", "-", note.c_str());
        else if (r.value)
            std::printf("%-44s %16llu %12s%s\n", r.option.label().c_str(), (unsigned long long)r.value,
                        gib(r.per_gpu_total).c_str(), note.c_str());
        else
            std::printf("%-44s %16s %12s%s\n", r.option.label().c_str(), "> 65536", "-", note.c_str());
    }
    return 0;
}

/// Registers the model, cluster, training and ZeRO options of `estimate` on
/// `sub` (compare, plan and fit take the same ones), writing into `req`.
void add_request_options(CLI::App* sub, zeromem::Request& req) {
    using namespace zeromem;
    // CLI11 2.1 has no std::optional binding: capture into temporaries with callbacks.
    auto opt_str = [sub](const char* flags, std::optional<std::string>& target, const char* help, const char* group) {
        return sub->add_option_function<std::string>(flags, [&target](const std::string& v) { target = v; }, help)
            ->group(group);
    };
    auto opt_int = [sub](const char* flags, std::optional<int64_t>& target, const char* help, const char* group) {
        return sub->add_option_function<std::string>(flags, [&target, flags](const std::string& v) {
                       try {
                           target = zeromem::parse_int(v, option_name(flags));
                       } catch (const zeromem::InputError& e) {
                           throw CLI::ValidationError(e.what());
                       }
                   }, help)
            ->group(group);
    };
    const char* gM = "Model";
    const char* gC = "Cluster";
    const char* gT = "Training";
    const char* gZ = "ZeRO";
    const char* gO = "Output";
    opt_str("--params", req.params, "Total parameters Ψ: 7e9, 7B, 1.3b, 7000000000", gM)->type_name("COUNT");
    opt_str("--model", req.model, "Preset in data/models (see `zeromem models`)", gM)->type_name("NAME");
    opt_str("--hf-config", req.hf_config, "Hugging Face config.json of the model", gM)->type_name("PATH");
    opt_str("--largest-layer-params", req.largest_layer_params,
            "Largest single module's own parameters (DeepSpeed's largest_layer_params)", gM)->type_name("COUNT");
    opt_int("--gpus", req.gpus, "Total GPUs N (= data-parallel degree N_d); default 1", gC)->type_name("N");
    opt_int("--nodes", req.nodes, "Nodes M (must divide --gpus); default 1", gC)->type_name("M");
    opt_int("--tp", req.tp, "Tensor-parallel size (default 1); N_d = gpus / (tp x pp)", gC)->type_name("T");
    opt_int("--pp", req.pp, "Pipeline-parallel size (default 1; ZeRO stage 0 or 1 only)", gC)->type_name("P");
    opt_str("--gpu", req.gpu, "GPU preset in data/gpus (see `zeromem gpus`)", gC)->type_name("NAME");
    opt_str("--gpu-memory", req.gpu_memory, "Memory per GPU, e.g. 80GiB (overrides --gpu)", gC)->type_name("SIZE");
    opt_str("--host-memory", req.host_memory, "Host RAM per node, e.g. 1TB", gC)->type_name("SIZE");
    opt_str("--dtype", req.dtype, "Model dtype: bf16 (default), fp16, fp32", gT)->type_name("DTYPE");
    opt_int("--micro-batch", req.micro_batch, "Micro batch per GPU (train_micro_batch_size_per_gpu); default 1", gT)->type_name("N");
    opt_int("--seq-len", req.seq_len, "Sequence length in tokens; default 2048", gT)->type_name("N");
    opt_int("--grad-accum", req.grad_accum, "Gradient accumulation steps; default 1", gT)->type_name("N");
    opt_str("--gradient-checkpointing", req.checkpointing, "none (default), full or selective", gT)->type_name("MODE");
    opt_str("--optimizer", req.optimizer, "adamw (default), adam or sgd", gT)->type_name("NAME");
    opt_str("--attention", req.attention, "flash (default: no s^2 scores kept) or eager", gT)->type_name("KIND");
    sub->add_flag("--sequence-parallel", req.sequence_parallel, "Megatron sequence parallelism (with --tp > 1)")->group(gT);
    opt_str("--trainable-params", req.trainable_params, "Parameters that are trained; the rest are frozen (no grads, no optimizer state)", gT)->type_name("COUNT");
    opt_int("--lora-rank", req.lora_rank, "Train LoRA adapters of rank R on a frozen base", gT)->type_name("R");
    opt_str("--lora-target", req.lora_targets, "Projections with adapters (default q,k,v,o; also gate,up,down)", gT)->type_name("LIST");
    opt_str("--load-in", req.load_in, "Frozen base weights quantized: 4bit (QLoRA NF4) or 8bit", gT)->type_name("BITS");
    opt_str("--optimizer-impl", req.optimizer_impl, "torch (default without a DeepSpeed \"optimizer\" block) or fused", gT)->type_name("KIND");
    sub->add_flag("--ds-checkpointing", req.ds_checkpointing,
                  "The model uses deepspeed.checkpointing, so the config's activation_checkpointing keys apply")->group(gT);
    opt_int("--stage", req.stage, "ZeRO stage 0..3; default 0 (or the DeepSpeed config's)", gZ)->type_name("0..3");
    opt_str("--offload-optimizer", req.offload_optimizer, "none, cpu or nvme", gZ)->type_name("DEVICE");
    opt_str("--offload-param", req.offload_param, "none, cpu or nvme (stage 3)", gZ)->type_name("DEVICE");
    sub->add_flag_function("--zero-init,!--no-zero-init",
                           [&req](std::int64_t count) { req.zero_init = count > 0; },
                           "Model built under deepspeed.zero.Init (default: on; --no-zero-init for a model loaded whole on every rank)")->group(gZ);
    opt_str("--ds-config", req.ds_config, "DeepSpeed config JSON; \"auto\" values resolved the HF Trainer way; flags override it", gZ)->type_name("PATH");
    opt_str("--convention", req.convention, "full (default: what DeepSpeed allocates), deepspeed (its estimator), paper (ZeRO Table 1)", gO)->type_name("NAME");
    sub->add_flag("--legacy-zero2", req.legacy_zero2_formula,
                  "deepspeed convention: ZeRO-2 formula of DeepSpeed v0.4.2-v0.14.2 (4Ψ + 16Ψ/N)")->group(gO);
    opt_str("--cuda-context", req.cuda_context, "CUDA context per process (default 512MiB)", gO)->type_name("SIZE");
    sub->add_option_function<double>("--fragmentation", [&req](const double& v) { req.fragmentation = v; },
                                      "Allocator fragmentation allowance, fraction of the peak (default 0.05)")
        ->group(gO)->type_name("FRACTION");
    opt_str("--load-dtype", req.load_dtype, "dtype of the host copy at load time (default fp32)", gO)->type_name("DTYPE");
    opt_str("--host-overhead", req.host_overhead, "Host RAM of one training process before the model (default 1GiB)", gO)->type_name("SIZE");
}

}  // namespace

int main(int argc, char** argv) {
    using namespace zeromem;
    CLI::App app{"zeromem: GPU, host and NVMe memory of DeepSpeed ZeRO stages and offload options, before launch."};
    app.set_version_flag("--version", std::string("zeromem ") + version());
    app.require_subcommand(1);
    app.footer("\nSubcommands: estimate, compare, plan, fit, models, gpus, interconnects. Run `zeromem estimate --help` for the options.\n"
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
                      << "' (use estimate, compare, plan, fit, models, gpus or interconnects; see zeromem --help)\n";
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
