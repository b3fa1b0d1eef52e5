// compare, plan and fit: thin faces over the planner (see planner_commands.h).
#include "planner_commands.h"

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

namespace zeromem_cli {

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
    if (!largest) req.gpus = req.tp.value_or(1) * req.pp.value_or(1);  // placeholder; searched below
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

}  // namespace zeromem_cli
