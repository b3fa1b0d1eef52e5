// compare, plan and fit: thin faces over the planner (see planner_commands.h).
#include "planner_commands.h"

#include "planner_tables.h"
#include "compare_table.h"
#include "replay_progress.h"

#include "zeromem/optimizer_state.h"
#include "zeromem/gpu.h"
#include "zeromem/model.h"
#include "zeromem/planner.h"
#include "zeromem/process_terms.h"
#include "zeromem/speed.h"
#include "zeromem/report.h"
#include "zeromem/request.h"
#include "zeromem/simulator.h"
#include "zeromem/util.h"
#include "zeromem/verdict_band.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace zeromem_cli {

namespace {

/// compare, plan and fit replay one option after another (the fragmentation
/// allowance), each producing and freeing a few MB of events: glibc hands
/// that memory back to the kernel after each replay (heap trimming, mmap for
/// blocks over 128 KiB) and faults it in again, about 4,800 page faults and a
/// third of `compare`'s CPU time for llama-2-7b. This short-lived process
/// keeps it instead (glibc mallopt; no effect elsewhere). Only when the
/// replay is wired (no --fragmentation).
void keep_freed_heap_for_replays(const zeromem::EstimateInput& in) {
#if defined(__GLIBC__)
    if (!in.residual.fragmentation_provider) return;
    mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 256 * 1024 * 1024);
#else
    (void)in;
#endif
}

/// plan's re-check of its winner: the simulator's replay of exactly the
/// candidate's input (2 optimizer steps, at most 3 micro steps each:
/// fragmentation_replay_input) through the caching allocator with the GPU
/// capacity less the per-process terms, as `simulate` gives it
/// (replay.cpp simulate). nullopt for a case the simulator does not replay.
zeromem::ReplayFits simulator_replay() {
    using namespace zeromem;
    return [](const EstimateInput& in) -> std::optional<ReplayVerdict> {
        if (!in.model.arch || !in.cluster.gpu_memory) return std::nullopt;
        try {
            sim::SimOptions opt;
            const EstimateInput at = sim::fragmentation_replay_input(in, opt);
            opt.alloc = sim::parse_alloc_conf(in.residual.alloc_conf);
            opt.record_spans = false;
            const sim::EventLog log = sim::produce_events(at, opt);
            const sim::SimResult r = sim::replay(log, opt, sim::fragmentation_capacity(at));
            ReplayVerdict v;
            v.peak_reserved = r.peak_reserved;
            v.peak_allocated = r.peak_allocated;
            v.fits = !r.oom;
            if (r.oom) {
                const sim::OomInfo& m = r.oom->info;
                v.requested = m.requested;
                v.reason = std::string(sim::to_string(r.oom->phase)) + ", " + r.oom->term + " in " + r.oom->module +
                           " (Tried to allocate " + gib(m.requested) + " GiB; " + gib(m.reserved - m.allocated) +
                           " GiB reserved but unallocated)";
            }
            return v;
        } catch (const InputError&) {
            return std::nullopt;  // a case the event producer refuses
        }
    };
}

/// --host and its overrides: the preset, then each flag, then the derived
/// PCIe share and CPU Adam rate (speed.h apply_host).
void apply_host_flags(zeromem::SpeedHardware& hw, const SpeedFlags& f, const std::string& dir) {
    using namespace zeromem;
    const bool overrides = f.host_cores || f.pcie_gen || f.pcie_lanes || f.gpus_per_pcie_link || f.host_memory_bandwidth;
    if (f.host.empty()) {
        if (overrides)
            throw InputError("--host: the --host-cores/--pcie-gen/--pcie-lanes/--gpus-per-pcie-link/"
                             "--host-memory-bandwidth flags override a host preset; name one with --host");
        return;
    }
    HostSpec h = load_host_preset(f.host, dir, "--host");
    auto positive = [](int64_t v, const char* flag) {
        if (v <= 0) throw InputError(std::string(flag) + ": must be positive");
        return v;
    };
    if (f.host_cores) h.cores = positive(*f.host_cores, "--host-cores");
    if (f.pcie_gen) {
        if (*f.pcie_gen < 1 || *f.pcie_gen > 7) throw InputError("--pcie-gen: must be 1..7");
        h.pcie_gen = int(*f.pcie_gen);
    }
    if (f.pcie_lanes) h.pcie_lanes_per_gpu = int(positive(*f.pcie_lanes, "--pcie-lanes"));
    if (f.gpus_per_pcie_link) h.gpus_per_pcie_link = int(positive(*f.gpus_per_pcie_link, "--gpus-per-pcie-link"));
    if (f.host_memory_bandwidth) {
        h.memory_bandwidth = double(parse_bytes(*f.host_memory_bandwidth, "--host-memory-bandwidth"));
        if (h.memory_bandwidth <= 0) throw InputError("--host-memory-bandwidth: must be positive");
    }
    apply_host(hw, h, SpeedConstants{});
}

bool any_fits(const std::vector<zeromem::Candidate>& rows) {
    return std::any_of(rows.begin(), rows.end(), [](const zeromem::Candidate& c) { return c.fits; });
}

// The exit status of compare: 0 when an option fits with the margin, 4 when
// the options that fit are all tight, 1 when none fits (README "Exit status").
int compare_exit_status(const std::vector<zeromem::Candidate>& rows) {
    const bool with_margin =
        std::any_of(rows.begin(), rows.end(), [](const zeromem::Candidate& c) { return c.fits && !c.tight; });
    return with_margin ? 0 : any_fits(rows) ? kExitTight : 1;
}

// A node's host RAM that a plan may take for granted when --host-memory is
// not given: 512 GiB, a common 8-GPU training node (e.g. NVIDIA DGX A100
// ships with 1 TB, many cloud 8-GPU nodes with 1-2 TB, smaller ones 256-512 GB).
constexpr uint64_t kTypicalNodeHostRam = uint64_t(512) << 30;

// After the winner: the settings written that the user should check, the
// HF Trainer arguments the plan assumed, and a host RAM warning.
void warn_host_ram(const zeromem::Candidate& w, const zeromem::EstimateInput& in) {
    if (!in.cluster.host_memory && w.memory.per_node.host_memory > kTypicalNodeHostRam)
        std::fprintf(stderr,
                     "zeromem: warning: the winner needs %s GiB of host RAM per node, more than a typical node's "
                     "%s GiB, and --host-memory was not given: pass it to plan within your nodes\n",
                     gib(w.memory.per_node.host_memory).c_str(), gib(kTypicalNodeHostRam).c_str());
}

void print_winner_notes(const zeromem::Candidate& w, const SpeedFlags& f) {
    using namespace zeromem;
    if (f.emit.empty()) return;
    if (f.target == "hf-trainer") {
        std::printf("\nThe emitted config leaves to the HF Trainer (\"auto\"): batch sizes, gradient_clipping, "
                    "fp16/bf16, optimizer lr/betas/eps/weight_decay.\nTrainer arguments this plan assumed: "
                    "--per_device_train_batch_size %lld --gradient_accumulation_steps %lld%s%s --deepspeed %s\n",
                    (long long)w.micro_batch, (long long)w.grad_accum,
                    w.dtype == Dtype::bf16 ? " --bf16" : w.dtype == Dtype::fp16 ? " --fp16" : "",
                    w.option.checkpointing != Checkpointing::none ? " --gradient_checkpointing" : "", f.emit.c_str());
    } else {
        std::printf("\nThe emitted config sets the optimizer AdamW with lr 1e-5, betas (0.9, 0.999), eps 1e-8 and "
                    "weight_decay 0.0: placeholders for the memory plan, set them to your training's values.\n");
    }
}

// With --for hf-trainer at ZeRO-3: whether the emitted config gathers the 16-bit weights at save, and what it
// costs or what is lost.
void print_gather_on_save(const zeromem::PlanResult& r) {
    using namespace zeromem;
    if (r.gather_on_save.empty() || r.winner->option.stage != 3) return;
    if (r.gather_on_save == "on") {
        const auto& z = r.winner->memory.rank0_only;
        std::printf("stage3_gather_16bit_weights_on_model_save on, so trainer.save_model() writes consolidated 16-bit "
                    "weights: it costs rank 0's node %s GiB of host RAM in checkpoint_save, inside the host figure above.\n",
                    gib(z ? z->host_bytes : 0).c_str());
    } else {
        std::printf("stage3_gather_16bit_weights_on_model_save off: with it on nothing fits (rank 0's host RAM at "
                    "save), so trainer.save_model() writes a DeepSpeed checkpoint only; recover the weights with its "
                    "zero_to_fp32.py.\n");
    }
}

}  // namespace

// `compare --convention deepspeed`: the table DeepSpeed users know from
// estimate_zero{2,3}_model_states_mem_needs_all_live, in GiB.
int run_compare_deepspeed(const zeromem::Request& req, const std::string& format, const std::string& dir) {
    using namespace zeromem;
    const Resolved res = resolve_request(req, dir);
    require_single_model(res, "compare --convention deepspeed");
    for (const auto& w : res.warnings) std::cerr << "zeromem: warning: " << w << "\n";
    const EstimateInput& in = res.input;
    const auto rows = deepspeed_all_options(in);
    const auto cap = in.cluster.gpu_memory;
    bool any = !cap;
    for (const auto& r : rows) any = any || r.per_gpu <= *cap;
    auto options = [](const ConventionRow& r) {
        if (r.stage == 2) return std::string("offload_optimizer=") + to_string(r.offload_optimizer);
        return std::string("offload_param=") + to_string(r.offload_param) + ", offload_optimizer=" +
               to_string(r.offload_optimizer) + ", zero_init=" + (r.zero_init ? "1" : "0");
    };
    if (format == "json") {
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& r : rows)
            arr.push_back({{"stage", r.stage}, {"offload_optimizer", to_string(r.offload_optimizer)},
                           {"offload_param", to_string(r.offload_param)}, {"zero_init", r.zero_init},
                           {"per_gpu", r.per_gpu}, {"per_cpu", r.per_cpu},
                           {"fits_gpu", cap ? nlohmann::json(r.per_gpu <= *cap) : nlohmann::json(nullptr)}});
        std::cout << arr.dump(2) << "\n";
        return any ? 0 : 1;
    }
    std::printf("%s: %llu params, largest layer %llu params; %lld node%s x %lld GPUs; DeepSpeed's estimators "
                "(model states only)\n",
                in.model.name.c_str(), (unsigned long long)in.model.params,
                (unsigned long long)in.model.largest_layer_params, (long long)in.cluster.nodes,
                in.cluster.nodes > 1 ? "s" : "", (long long)in.cluster.gpus_per_node());
    std::printf("Stages 0 and 1 and NVMe offload are not covered by DeepSpeed's estimators: left out. DeepSpeed "
                "prints these figures as \"GB\" but divides by 2^30: they are GiB.\n\n");
    std::printf("%-7s %10s %10s%s  %s\n", "stage", "per CPU", "per GPU", cap ? "  fits" : "", "options");
    for (const auto& r : rows)
        std::printf("ZeRO-%d  %10s %10s%s  %s\n", r.stage, gib(r.per_cpu).c_str(), gib(r.per_gpu).c_str(),
                    cap ? (r.per_gpu <= *cap ? "  yes " : "  no  ") : "", options(r).c_str());
    if (!any) std::fprintf(stderr, "zeromem: compare: no option fits\n");
    return any ? 0 : 1;
}

namespace {

/// One compare/plan row as json: option, memory, each step-time term, and
/// the constants the terms rest on (speed.h calibration_notes).
nlohmann::json candidate_json(const zeromem::Candidate& c, const zeromem::EstimateInput& in,
                              const zeromem::SpeedHardware& hw) {
    using namespace zeromem;
    EstimateInput ci = in;
    apply_candidate(c, ci);
    nlohmann::json cal = nlohmann::json::array();
    for (const auto& n : calibration_notes(ci, hw, c.time))
        cal.push_back({{"term", n.term}, {"constant", n.constant}, {"basis", n.basis}});
    nlohmann::json j = nlohmann::json{{"option", c.option.label()},
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
                          {"tight", c.tight},
                          {"step_time_s", c.time.total},
                          {"compute_s", c.time.compute},
                          {"exposed_comm_s", c.time.exposed_comm},
                          {"moe_all_to_all_s", c.time.moe_all_to_all},
                          {"optimizer_s", c.time.optimizer},
                          {"offload_s", c.time.offload},
                          {"per_param_s", c.time.per_param},
                          {"overhead_s", c.time.overhead},
                          {"parameter_tensors", c.time.parameter_tensors},
                          // ZeRO-3 collectives per step, bytes (ZeRO++ paper accounting, zeromem/zeropp.h)
                          {"comm_bytes", {{"forward_gather", c.time.comm_bytes_forward},
                                          {"backward_gather", c.time.comm_bytes_backward},
                                          {"gradients", c.time.comm_bytes_gradients},
                                          {"cross_node", c.time.comm_bytes_cross_node}}},
                          {"cpu_optimizer", c.option.offload_optimizer == OffloadDevice::none ? "none"
                                            : c.time.torch_cpu_optimizer ? "torch AdamW" : "DeepSpeedCPUAdam"},
                          {"calibrated_terms", cal},
                          {"tokens_per_s", c.time.tokens_per_s},
                          {"tflops_per_gpu", c.time.tflops_per_gpu},
                          {"mfu", c.time.mfu}};
    // ZeRO-Infinity host-RAM settings plan's step 10 chose (zero_optimization paths, as emitted)
    if (c.offload_param_buffer_size) j["offload_param_buffer_size"] = *c.offload_param_buffer_size;
    if (c.sub_group_size) j["sub_group_size"] = *c.sub_group_size;
    if (c.offload_optimizer_pin_memory) j["offload_optimizer_pin_memory"] = *c.offload_optimizer_pin_memory;
    if (c.generation)
        j["generation"] = {{"num_beams", c.generation->num_beams},
                           {"eval_batch", c.generation->eval_batch},
                           {"max_new_tokens", c.generation->max_new_tokens},
                           {"prompt_len", c.generation->prompt_len.value_or(ci.train.seq_len)}};
    return j;
}

// What compare and plan share: the resolved request, the speed model's
// hardware and the global batch.
struct SpeedRun {
    zeromem::Resolved res;
    zeromem::SpeedHardware hw;
    int64_t global = 0;
};

SpeedRun prepare_speed_run(const std::string& cmd, const zeromem::Request& req, const SpeedFlags& f,
                           const std::string& format, const std::string& dir) {
    using namespace zeromem;
    if (format != "table" && format != "json" && !tabular_format(format))
        throw InputError("--format: '" + format + "' is not table, json, csv or md for " + cmd);
    if (f.target != "deepspeed" && f.target != "hf-trainer")
        throw InputError("--for: '" + f.target + "' is not deepspeed or hf-trainer");
    if (!req.gpu) throw InputError("--gpu: " + cmd + " needs a GPU preset for the speed model (see `zeromem gpus`)");
    if (!f.emit.empty()) {  // before the search: a bad path fails in a moment, not after it
        std::error_code ec;  // a FIFO would block the open, a device swallow the file: only regular files
        const bool existed = std::filesystem::exists(f.emit, ec);
        if (existed && !std::filesystem::is_regular_file(f.emit, ec))
            throw InputError("--emit: " + f.emit + " is not a regular file");
        std::ofstream probe(f.emit, std::ios::app);
        if (!probe) throw InputError("--emit: cannot write " + f.emit);
        probe.close();
        if (!existed) std::remove(f.emit.c_str());
    }
    SpeedRun run;
    run.res = resolve_request(req, dir);
    sim::use_replayed_fragmentation(run.res.input, req.fragmentation.has_value() || run.res.fragmentation_fitted);  // the replay's allowance
    keep_freed_heap_for_replays(run.res.input);
    show_replay_progress(run.res.input, cmd == "compare" ? "compare" : "plan");
    const Resolved& res = run.res;
    for (const auto& w : res.warnings) std::cerr << "zeromem: warning: " << w << "\n";
    const EstimateInput& in = res.input;
    SpeedHardware& hw = run.hw;
    hw = speed_hardware(*res.gpu, in.train.dtype, f.interconnect, f.network, dir);
    if (in.cluster.nodes > 1 && f.network.empty())
        throw InputError("--network: the cluster spans " + std::to_string(in.cluster.nodes) +
                         " nodes; name the inter-node network (see `zeromem interconnects`)");
    apply_host_flags(hw, f, dir);
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
    run.global = f.global_batch ? *f.global_batch
                                : search_global_batch(in, req.micro_batch.has_value() || req.grad_accum.has_value());
    std::vector<std::string> ignored;  // flags given that the search replaces: warnings, the answer does not use them
    if (f.global_batch && (req.micro_batch || req.grad_accum))
        ignored.push_back("--global-batch " + std::to_string(*f.global_batch) + " sets the batch " + cmd +
                        " searches; --micro-batch / --grad-accum are not used (" + cmd +
                        " picks the micro batch and the accumulation that make it up)");
    if (req.stage || req.offload_optimizer || req.offload_param)
        ignored.push_back(cmd + " evaluates every ZeRO stage and offload option; --stage / --offload-optimizer / "
                                "--offload-param are not used (give them to estimate)");
    if (cmd == "compare" && req.checkpointing)
        ignored.push_back("compare evaluates every option with and without gradient checkpointing; "
                          "--gradient-checkpointing is not used (plan keeps it, estimate takes it)");
    print_diagnostics(ignored, {}, f.verbose);
    return run;
}

// --explain of compare and plan: the chosen option's full estimate with its formulas, as estimate --explain
// prints it for the same settings (table only; the other formats carry no prose).
void print_explained(const zeromem::Candidate& c, const zeromem::Resolved& res, const char* which,
                     bool as_emitted = false, bool gather_on_save = false) {
    using namespace zeromem;
    Resolved at = res;
    if (as_emitted) {  // plan's winner: the settings of the file it writes, as its Winner line
        apply_as_emitted(c, at.input);
        if (gather_on_save) at.input.zero.stage3_gather_16bit_weights_on_model_save = true;
    } else {
        apply_candidate(c, at.input);
    }
    const Estimate e = estimate(at.input, /*explain=*/true);
    std::cout << "\n" << which << " (" << c.option.label() << ", micro batch " << c.micro_batch << " x accumulation "
              << c.grad_accum << "), explained:\n"
              << render(e, at, Format::table, /*explain=*/true);
}

int run_compare(const SpeedRun& run, const std::string& format, bool wide, bool explain) {
    using namespace zeromem;
    const bool json_out = format == "json";
    const EstimateInput& in = run.res.input;
    const SpeedHardware& hw = run.hw;
    const int64_t global = run.global;
    const auto rows = compare_options(in, hw, global, {});
    end_replay_progress();
    if (tabular_format(format)) {
        std::cout << render_tabular(compare_table_rows(rows), format);
        return compare_exit_status(rows);
    }
    if (json_out) {
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& c : rows) arr.push_back(candidate_json(c, in, hw));
        std::cout << arr.dump(2) << "\n";
        return compare_exit_status(rows);
    }
    print_compare_table(rows, run.res, hw, global, wide);
    if (explain && !rows.empty()) print_explained(rows.front(), run.res, "The first-ranked option");
    if (!any_fits(rows)) std::fprintf(stderr, "zeromem: compare: no option fits\n");
    return compare_exit_status(rows);
}

// The exit status of fit: 0 when an option answers with the margin, 4 when
// every answer is tight, 1 when no option answers.
int fit_exit_status(const std::vector<zeromem::FitRow>& rows, bool answered) {
    const bool with_margin = std::any_of(rows.begin(), rows.end(), [](const zeromem::FitRow& r) {
        return r.with_margin || r.unbounded || (r.value && !r.tight);
    });
    return with_margin ? 0 : answered ? kExitTight : 1;
}

int run_plan(const SpeedRun& run, const SpeedFlags& f, const std::string& format) {
    const bool json_out = format == "json" || tabular_format(format);  // the prose lines are the table's only
    using namespace zeromem;
    const EstimateInput& in = run.res.input;
    const SpeedHardware& hw = run.hw;
    const int64_t global = run.global;
    const Resolved& res = run.res;
    PlanSpace space;
    // --for hf-trainer: trainer.save_model() writes consolidated weights only with the 16-bit gather at save, so
    // plan keeps it on where the host has room, unless the user set it.
    space.prefer_gather_on_save =
        f.target == "hf-trainer" && !res.provenance.count("zero_optimization.stage3_gather_16bit_weights_on_model_save");
    const PlanResult r = plan(in, hw, global, space, SpeedConstants{}, simulator_replay());
    end_replay_progress();
    if (tabular_format(format)) {
        std::cout << render_tabular(plan_table_rows(r), format);
    } else if (json_out) {
        nlohmann::json j;
        j["steps"] = nlohmann::json::array();
        for (const auto& s : r.steps) {
            nlohmann::json sj = {{"recipe_step", s.recipe_step}, {"action", s.action}, {"outcome", s.outcome}};
            if (s.candidate) sj["candidate"] = candidate_json(*s.candidate, in, hw);
            j["steps"].push_back(sj);
        }
        j["candidates_evaluated"] = r.candidates;
        j["replays"] = r.replays;
        j["winner_replayed"] = r.winner_replayed;
        j["winner"] = r.winner ? candidate_json(*r.winner, in, hw) : nlohmann::json(nullptr);
        if (!r.gather_on_save.empty())  // --for hf-trainer: the 16-bit gather at save the emitted config carries
            j["stage3_gather_16bit_weights_on_model_save"] = r.gather_on_save == "on";
        std::cout << j.dump(2) << "\n";
    } else {
        std::printf("%s (%.2f B params), %lld x %s, global batch %lld, seq %lld tokens: the ZeRO tuning recipe, step by step\n%s\n\n",
                    in.model.name.c_str(), double(in.model.params) / 1e9, (long long)in.cluster.gpus,
                    hw.gpu_name.c_str(), (long long)global, (long long)in.train.seq_len,
                    compare_settings(res, "Settings given (steps 1-11 keep them; step 12 tunes overlap_comm and the "
                                          "buckets, and the Winner line names what plan writes)").c_str());
        for (const auto& s : r.steps)
            std::printf("step %2d  %s\n         -> %s\n", s.recipe_step, s.action.c_str(), s.outcome.c_str());
        if (!r.replays.empty()) std::printf("\nRe-check with the simulator (GPU capacity %s GiB):\n", gib(*in.cluster.gpu_memory).c_str());
        for (const auto& line : r.replays) std::printf("  %s\n", line.c_str());
        if (r.winner) {
            const Candidate& w = *r.winner;
            std::printf("\nWinner: %s, micro batch %lld, accumulation %lld; %s GiB per GPU, %s GiB host per node; "
                        "step %.3f s (compute %.3f s, exposed comm %.3f s, optimizer %.3f s, offload + per-parameter + other %.3f s); "
                        "%.0f tokens/s, %.1f TFLOP/s per GPU, MFU %.1f%%\n",
                        w.option.label().c_str(), (long long)w.micro_batch, (long long)w.grad_accum,
                        gib(w.memory.per_gpu.total).c_str(), gib(w.memory.per_node.host_memory).c_str(), w.time.total,
                        w.time.compute, w.time.exposed_comm, w.time.optimizer, w.time.offload + w.time.per_param + w.time.overhead,
                        w.time.tokens_per_s, w.time.tflops_per_gpu, w.time.mfu * 100);
            std::printf("This is the estimate of the configuration plan writes (reduce bucket %lld, overlap_comm %s, "
                        "DeepSpeed's optimizer block, the HF Trainer's stage-3 bucket rules); `compare` lists the "
                        "option at the settings given (buckets, overlap_comm, optimizer): give it the emitted file "
                        "(--ds-config%s) for this same figure.\n",
                        (long long)w.reduce_bucket_size, w.overlap_comm ? "on" : "off",
                        f.target == "hf-trainer" && w.dtype != Dtype::fp32 ? (std::string(" with --dtype ") + to_string(w.dtype) +
                                                    ", the Trainer's --" + to_string(w.dtype) + " for its \"auto\"")
                                                       .c_str()
                                                 : "");
            if (w.tight) std::printf("The winner is %s; plan found no option that fits with the margin.\n", tight_words(w.memory).c_str());
            if (w.generation)
                std::printf("Generation during evaluation: num_beams %lld, eval batch %lld, max_new_tokens %lld "
                            "(HF: --predict_with_generate --generation_num_beams %lld --per_device_eval_batch_size %lld; "
                            "GenerationConfig max_new_tokens=%lld)\n",
                            (long long)w.generation->num_beams, (long long)w.generation->eval_batch,
                            (long long)w.generation->max_new_tokens, (long long)w.generation->num_beams,
                            (long long)w.generation->eval_batch, (long long)w.generation->max_new_tokens);
        }
    }
    if (!r.winner && !r.no_winner.empty()) {
        std::cerr << "zeromem: plan: nothing emitted: " << r.no_winner << "\n";
        return 1;
    }
    if (!r.winner) {
        std::cerr << "zeromem: plan: nothing fits; the model does not fit even with ZeRO-Infinity (NVMe offload) at "
                     "micro batch 1: "
                  << (r.steps.empty() ? std::string("no option evaluated") : r.steps.back().outcome) << "\n";
        return 1;
    }
    warn_host_ram(*r.winner, in);
    if (r.winner->tight)
        std::fprintf(stderr, "zeromem: warning: the winner is %s (%s GiB per GPU of %s GiB); plan found no option "
                             "that fits with the margin%s\n",
                     tight_words(r.winner->memory).c_str(), gib(r.winner->memory.per_gpu.total).c_str(),
                     gib(*in.cluster.gpu_memory).c_str(), f.emit.empty() ? "" : ", and it is what --emit writes");
    if (!json_out) print_winner_notes(*r.winner, f);
    if (!json_out) print_gather_on_save(r);
    if (f.explain) print_explained(*r.winner, res, "The winner", true, r.gather_on_save == "on");
    if (!f.emit.empty()) {
        EstimateInput emitted = in;
        if (r.gather_on_save == "on") emitted.zero.stage3_gather_16bit_weights_on_model_save = true;
        const nlohmann::json cfg = emit_ds_config(*r.winner, emitted, f.target == "hf-trainer");
        std::ofstream out(f.emit);
        if (!out) throw InputError("--emit: cannot write " + f.emit);
        out << cfg.dump(2) << "\n";
        out.close();  // the write reaches the file (or fails) only when the buffer is flushed
        if (out.fail()) throw InputError("--emit: cannot write " + f.emit);
        std::fprintf(stderr, "zeromem: wrote %s%s\n", f.emit.c_str(),
                     r.winner->option.checkpointing != Checkpointing::none
                         ? std::string("; enable gradient checkpointing (").append(to_string(r.winner->option.checkpointing))
                               .append(") in the model, it is not a DeepSpeed config key").c_str()
                         : "");
    }
    return r.winner->tight ? kExitTight : 0;
}

}  // namespace

int run_compare_or_plan(const std::string& cmd, const zeromem::Request& req, const SpeedFlags& f,
                        const std::string& format, const std::string& dir) {
    using namespace zeromem;
    if (cmd == "compare" && req.convention && to_lower(*req.convention) == "deepspeed" &&
        (format == "table" || format == "json"))
        return run_compare_deepspeed(req, format, dir);
    const SpeedRun run = prepare_speed_run(cmd, req, f, format, dir);
    if (f.explain && format != "table") throw InputError("--explain: " + cmd + " explains with --format table only");
    return cmd == "compare" ? run_compare(run, format, f.wide, f.explain) : run_plan(run, f, format);
}

int run_fit(zeromem::Request req, const SpeedFlags& f, const std::string& format, const std::string& dir,
            const std::vector<std::string>& unused_notes) {
    using namespace zeromem;
    if (format != "table" && format != "json" && !tabular_format(format))
        throw InputError("--format: '" + format + "' is not table, json, csv or md for fit");
    // docs/compare-plan-fit.md, "Fit": a model (--model, --hf-config, --params, --module-tree) asks for the fewest
    // GPUs, up to --gpus when given; --gpus alone asks for the largest model.
    const bool has_model = req.params || req.model || req.hf_config || req.module_tree;
    const bool largest = !has_model;
    if (!has_model && !req.gpus)
        throw InputError("fit: give --gpus (largest model per option) or a model (fewest GPUs per option)");
    const int64_t max_gpus = has_model && req.gpus ? *req.gpus : 65536;
    if (has_model) {  // the GPU count is searched below
        req.gpus = req.tp.value_or(1) * req.pp.value_or(1) * req.ep_size.value_or(1);  // placeholder (tp x pp x ep); searched below
        req.nodes.reset();
    } else {
        req.params = "1e9";  // placeholder; the parameter count is searched below
    }
    Resolved res = resolve_request(req, dir);
    sim::use_replayed_fragmentation(res.input, req.fragmentation.has_value() || res.fragmentation_fitted);  // the replay's allowance
    keep_freed_heap_for_replays(res.input);
    show_replay_progress(res.input, "fit");
    const auto rows = largest ? largest_model(res.input) : fewest_gpus(res.input, f.gpus_per_node, max_gpus);
    end_replay_progress();
    std::vector<std::string> warnings = res.warnings;
    if (req.stage || req.offload_optimizer || req.offload_param)
        warnings.push_back("fit gives one row per ZeRO stage and offload option; --stage / --offload-optimizer / "
                           "--offload-param are not used (give them to estimate)");
    print_diagnostics(warnings, unused_notes, f.verbose);
    auto reason = [&](const FitRow& r) {
        if (!r.note.empty() || r.value) return r.note;
        return largest ? std::string("not even a million parameters fit")
                       : "does not fit on up to " + std::to_string(max_gpus) + " GPUs";
    };
    const bool answered = std::any_of(rows.begin(), rows.end(), [](const FitRow& r) { return r.value || r.unbounded; });
    auto verdict = [](const FitRow& r) { return !r.value ? nlohmann::json(nullptr) : nlohmann::json(r.tight ? "tight" : "fits"); };
    auto optional_count = [](uint64_t v) { return v ? nlohmann::json(v) : nlohmann::json(nullptr); };
    if (tabular_format(format)) {
        std::cout << render_tabular(fit_table_rows(rows, largest, reason), format);
        return fit_exit_status(rows, answered);
    }
    if (format == "json") {
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& r : rows)
            arr.push_back({{"option", r.option.label()},
                           {"stage", r.option.stage},
                           {"offload_optimizer", to_string(r.option.offload_optimizer)},
                           {"offload_param", to_string(r.option.offload_param)},
                           {largest ? "max_params" : "min_gpus", optional_count(r.value)},
                           {"per_gpu_total", r.value ? nlohmann::json(r.per_gpu_total) : nlohmann::json(nullptr)},
                           {"verdict", verdict(r)},
                           {largest ? "max_params_with_margin" : "min_gpus_with_margin", optional_count(r.with_margin)},
                           {"unbounded", r.unbounded},
                           {"note", reason(r)}});
        std::cout << arr.dump(2) << "\n";
        return fit_exit_status(rows, answered);
    }
    if (res.input.workload && res.input.workload->kind != Workload::sft)
        std::printf("%s\n", workload_summary(*res.input.workload).c_str());
    if (!res.calibration.empty()) std::printf("%s\n", res.calibration.c_str());
    if (largest)
        std::printf("Largest model (parameters, model states and buffers; no activations without an architecture) on "
                    "%lld GPUs of %s GiB, convention %s; \"with margin\" also leaves room for the activations of a "
                    "dense decoder of that size; options that fit with the margin first, then the tight ones\n\n"
                    "%-44s %16s %-7s %12s %20s\n",
                    (long long)res.input.cluster.gpus, gib(*res.input.cluster.gpu_memory).c_str(),
                    to_string(res.input.convention), "option", "max params (B)", "verdict", "GPU GiB",
                    "with margin (B)");
    else
        std::printf("Fewest GPUs (%s GiB each, %lld per node) for %s, convention %s; options that fit with the margin "
                    "first, then the tight ones\n\n%-44s %16s %-7s %12s %20s\n",
                    gib(*res.input.cluster.gpu_memory).c_str(), (long long)f.gpus_per_node,
                    res.input.model.name.c_str(), to_string(res.input.convention), "option", "GPUs", "verdict",
                    "GPU GiB", "GPUs with margin");
    bool any_tight = false;
    for (const auto& r : rows) {
        const std::string note = reason(r).empty() ? "" : "  (" + reason(r) + ")";
        const char* word = !r.value ? "-" : r.tight ? "tight" : "fits";
        any_tight = any_tight || r.tight;
        char margin[32] = "-";
        if (r.with_margin && largest) std::snprintf(margin, sizeof margin, "%.3f", double(r.with_margin) / 1e9);
        else if (r.with_margin) std::snprintf(margin, sizeof margin, "%llu", (unsigned long long)r.with_margin);
        if (largest && r.value)
            std::printf("%-44s %16.3f %-7s %12s %20s%s\n", r.option.label().c_str(), double(r.value) / 1e9, word,
                        gib(r.per_gpu_total).c_str(), margin, note.c_str());
        else if (largest)
            std::printf("%-44s %16s %-7s %12s %20s%s\n", r.option.label().c_str(), "-", word, "-", margin, note.c_str());
        else if (r.value)
            std::printf("%-44s %16llu %-7s %12s %20s%s\n", r.option.label().c_str(), (unsigned long long)r.value, word,
                        gib(r.per_gpu_total).c_str(), margin, note.c_str());
        else
            std::printf("%-44s %16s %-7s %12s %20s%s\n", r.option.label().c_str(),
                        ("> " + std::to_string(max_gpus)).c_str(), word, "-", margin, note.c_str());
    }
    if (any_tight)
        std::printf("\n%s; \"with margin\" is the %s that fits outside it.\n",
                    tight_meaning(res.input, largest).c_str(),
                    largest ? "largest model" : "fewest GPUs");
    if (!answered) std::fprintf(stderr, "zeromem: fit: no option fits\n");
    return fit_exit_status(rows, answered);
}

}  // namespace zeromem_cli
