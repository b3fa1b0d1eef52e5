#include "zeromem/verdict_band.h"
#include "zeromem/report.h"
#include "report_rows.h"
#include "zeromem/setting_flags.h"
#include "zeromem/optimizer_state.h"

#include "zeromem/advice.h"
#include "zeromem/util.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

namespace zeromem {

namespace {

using namespace report_detail;

std::string stage_text(const EstimateInput& in) {
    std::string s = "ZeRO-" + std::to_string(in.zero.stage);
    if (in.zero.offload_optimizer != OffloadDevice::none)
        s += std::string(", offload_optimizer=") + to_string(in.zero.offload_optimizer);
    if (in.zero.offload_param != OffloadDevice::none)
        s += std::string(", offload_param=") + to_string(in.zero.offload_param);
    return s;
}

std::string params_text(uint64_t p) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f B", double(p) / 1e9);
    return buf;
}

std::string verdict(const char* what, std::optional<bool> fits, uint64_t need, std::optional<uint64_t> cap,
                    const char* how, const std::optional<std::string>& three_way = std::nullopt,
                    double band = 0, int band_runs = 0) {
    if (!fits) return std::string(what) + ": capacity unknown (" + how + ")";
    const double diff = double(*cap) - double(need);
    const bool tight = *fits && three_way && *three_way == "tight";
    return std::string(what) + ": " + (tight ? "TIGHT" : *fits ? "fits" : "DOES NOT FIT") + " — needs " +
           format_gib(double(need)) + " GiB of " + format_gib(double(*cap)) + " GiB (" + (*fits ? "" : "short by ") +
           format_gib(diff < 0 ? -diff : diff) + " GiB" + (*fits ? " free" : "") +
           (tight ? ", " + band_words(band, band_runs) : std::string()) + ")";
}

// The GPU verdict line without an architecture: model states only, and
// "tight" when the margin does not cover the activation allowance.
std::string states_only_verdict(const Estimate& e, std::optional<uint64_t> cap) {
    const std::string allowance = format_gib(double(e.activation_allowance)) + " GiB";
    if (!e.gpu_verdict || *e.gpu_verdict == "oom")
        return verdict("GPU (model states only)", e.fits_gpu, e.per_gpu.total, cap, "pass --gpu or --gpu-memory");
    const double free = double(*cap) - double(e.per_gpu.total);
    return std::string("GPU (model states only): ") + *e.gpu_verdict + " — needs " +
           format_gib(double(e.per_gpu.total)) + " GiB of " + format_gib(double(*cap)) + " GiB (" +
           format_gib(free) + " GiB free, " + (*e.gpu_verdict == "fits" ? "covering" : "less than") +
           " the activation allowance " + allowance + ")";
}
// up to the total) and its own peak over all phases, with that phase.
struct ComponentRow {
    Row at_peak;
    uint64_t own_peak = 0;
    std::string own_peak_phase;  // empty when it peaks in the peak phase
};

std::vector<ComponentRow> component_rows(const Estimate& e, Optimizer opt) {
    const PhaseMemory* peak = peak_phase_of(e);
    const auto rows = peak ? gpu_rows(*peak, opt) : gpu_rows(e, opt);
    std::vector<ComponentRow> out;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        ComponentRow c{rows[i], rows[i].bytes, {}};
        for (const auto& p : e.phases) {
            const uint64_t b = gpu_rows(p, opt)[i].bytes;
            if (b > c.own_peak) {
                c.own_peak = b;
                c.own_peak_phase = p.name;
            }
        }
        out.push_back(c);
    }
    return out;
}

// The software stack the full convention followed, each version with where
// it came from, and the optimizer implementation that runs the step.
std::string stack_line(const Estimate& e, const Resolved& res) {
    if (e.convention != Convention::full) return {};
    const auto& st = res.input.stack;
    auto from = [&](const char* key) { return " (" + stack_source(res, key) + ")"; };
    return "software: DeepSpeed " + st.deepspeed + from("stack.deepspeed") + ", torch " + st.torch + from("stack.torch") +
           ", transformers " + st.transformers + from("stack.transformers") + "; optimizer step: " +
           e.optimizer_step_kernel;
}

// " (first OOM at X)" / " (peak at X)" after a verdict line.
std::string phase_suffix(const Estimate& e, const std::string& first_oom, const std::string& peak) {
    if (e.phases.empty()) return "";
    return first_oom.empty() ? " (peak at " + peak + ")" : " (first OOM at " + first_oom + ")";
}

// Which figure the GPU verdict gives, at the peak phase: what
// torch.cuda.max_memory_allocated and max_memory_reserved would read, and
// what nvidia-smi shows (the figure the verdict compares). Full convention only.
std::string readings_line(const Estimate& e, bool detail) {
    const PhaseMemory* peak = peak_phase_of(e);
    if (!peak) return {};
    const GpuMemory& m = peak->per_gpu;
    const uint64_t outside = m.total - m.reserved;
    const bool cublas_outside = outside > m.cuda_context + m.nccl_buffers;  // torch < 2.0: cuBLAS's own pool
    if (!detail)
        return "At the " + e.peak_phase + " peak: allocated " + format_gib(double(m.allocated)) +
               " GiB (max_memory_allocated), reserved " + format_gib(double(m.reserved)) +
               " GiB (max_memory_reserved, at least), nvidia-smi ~" + format_gib(double(m.total)) +
               " GiB, the figure the verdict compares (--verbose says what each holds)";
    return "At the " + e.peak_phase + " peak: allocated " + format_gib(double(m.allocated)) +
           " GiB (torch.cuda.max_memory_allocated), reserved " + format_gib(double(m.reserved)) +
           " GiB (allocated + the fragmentation allowance; the least max_memory_reserved reads: wholly free cached segments, "
           "which PyTorch releases before an out-of-memory, can keep it higher), nvidia-smi ~" +
           format_gib(double(m.total)) + " GiB (reserved + CUDA context + NCCL buffers" +
           (cublas_outside ? " + cuBLAS's own workspace" : "") +
           ", outside the allocator); the verdict compares the nvidia-smi figure";
}

// Rank 0's extras in a line of their own (estimate.h RankZeroOnly), so a multi-node job sees which rank
// peaks: the host bytes only rank 0 holds, the other nodes' host peak, and the gather on every GPU.
std::string rank0_line(const Estimate& e, const EstimateInput& in) {
    const RankZeroOnly& r = *e.rank0_only;
    std::string what;
    for (const auto& w : r.what) what += (what.empty() ? "" : ", ") + w;
    std::string s = "rank 0 only: " + format_gib(double(r.host_bytes)) + " GiB of host RAM in " + r.phase + ", the " +
                    what + " (zero_optimization.stage3_gather_16bit_weights_on_model_save: DeepSpeed's engine.py "
                    "_zero3_consolidated_16bit_state_dict copies each gathered module to the CPU on rank 0 alone); "
                    "the per-node figure is rank 0's node, ";
    s += in.cluster.nodes > 1 ? "a node without rank 0 peaks at " + format_gib(double(r.other_nodes_host_peak)) +
                                    " GiB (" + r.other_nodes_host_peak_phase + ")"
                              : std::string("the job's one node");
    if (r.gathered_module_gpu > 0)
        s += "; the gather itself (GatheredParameters, the largest module: " +
             format_gib(double(r.gathered_module_gpu)) + " GiB per GPU) is on every rank's GPU";
    return s;
}

// The answer in sentences: the GPU and host verdicts (need, capacity, first
// phase out of memory) and, for what does not fit, the recipe's change.
// A capacity's provenance without its sources: "--gpu A100-80GB (data/gpus/A100-80GB.json): 79.14 GiB reported
// by the device", the public reports it rests on left to --verbose.
std::string without_sources(const std::string& provenance) {
    const auto colon = provenance.find("): ");
    const auto paren = provenance.find(" (", colon == std::string::npos ? 0 : colon + 3);
    return colon == std::string::npos || paren == std::string::npos ? provenance : provenance.substr(0, paren);
}

std::vector<std::string> answer_lines(const Estimate& e, const Resolved& res, bool detail) {
    const EstimateInput& in = res.input;
    std::vector<std::string> out;
    const VerdictBand& band = verdict_band();
    if (in.model.arch)
        out.push_back(verdict("GPU", e.fits_gpu, e.per_gpu.total, in.cluster.gpu_memory, "pass --gpu or --gpu-memory",
                              e.gpu_verdict, band.gpu_under, band.gpu_runs) +
                      phase_suffix(e, e.first_oom_phase, e.peak_phase));
    else
        out.push_back(states_only_verdict(e, in.cluster.gpu_memory));
    out.push_back(verdict("Host", e.fits_host, e.per_node.host_memory, in.cluster.host_memory, "pass --host-memory",
                          e.host_verdict, band.host_under, band.host_runs) +
                  phase_suffix(e, e.first_host_oom_phase, e.host_peak_phase));
    if (e.rank0_only) out.push_back(rank0_line(e, in));
    if (!in.model.arch) out.push_back("Activation allowance (no architecture): " + e.activation_allowance_how);
    if (const auto line = readings_line(e, detail); !line.empty()) out.push_back(line);
    if (const auto it = res.provenance.find("cluster.gpu_memory"); it != res.provenance.end())
        out.push_back("GPU capacity used: " + (detail ? it->second : without_sources(it->second)));
    if (const auto it = res.provenance.find("cluster.host_memory"); it != res.provenance.end())
        out.push_back("Host capacity used: " + (detail ? it->second : without_sources(it->second)));
    for (const auto& a : advice_for(e, res)) {
        const std::string what = a.resource == "gpu" ? "GPU" : "host";
        if (a.found)
            out.push_back("To fit the " + what + ": " + flag_spelling(a.changes) + " (" + a.why + "; needs " +
                          format_gib(double(a.need_after)) + " GiB" + (a.tight ? ", tight: inside the error band" : "") +
                          ")" + (a.resource == "gpu" ? "; `zeromem plan` also tunes the micro batch, buckets and overlap_comm" : ""));
        else
            out.push_back(a.resource == "gpu"
                              ? "No combination of the tuning recipe's steps makes the GPU fit: use more GPUs or nodes, "
                                "or a shorter sequence."
                              : "No single change from the tuning recipe makes the host fit: use more GPUs or nodes, or "
                                "a smaller micro batch or sequence.");
    }
    return out;
}

// A CSV field, quoted when it holds a comma, quote or newline (RFC 4180).
std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

std::string fits_word(const std::optional<bool>& f) {
    return !f ? "capacity unknown" : *f ? "fits" : "does not fit";
}

void csv_answer(std::ostringstream& o, const Estimate& e, const Resolved& res) {
    const auto& in = res.input;
    auto cap = [&](const char* key, const std::optional<uint64_t>& c, const std::string& prov_key) {
        const auto it = res.provenance.find(prov_key);
        o << "capacity," << key << "," << (c ? std::to_string(*c) : "") << ","
          << (c ? format_gib(double(*c), 3) : "") << "," << csv_field(it == res.provenance.end() ? "" : it->second)
          << "\n";
    };
    cap("gpu_memory", in.cluster.gpu_memory, "cluster.gpu_memory");
    cap("host_memory", in.cluster.host_memory, "cluster.host_memory");
    o << "verdict,gpu," << e.per_gpu.total << "," << format_gib(double(e.per_gpu.total), 3) << ","
      << fits_word(e.fits_gpu) << "\n";
    o << "verdict,gpu_verdict,,," << e.gpu_verdict.value_or("capacity unknown") << "\n";
    o << "verdict,host_verdict,,," << e.host_verdict.value_or("capacity unknown") << "\n";
    o << "verdict,host," << e.per_node.host_memory << "," << format_gib(double(e.per_node.host_memory), 3) << ","
      << fits_word(e.fits_host) << "\n";
    o << "verdict,peak_phase,,," << e.peak_phase << "\n";
    o << "verdict,first_oom_phase,,," << e.first_oom_phase << "\n";
    o << "verdict,host_peak_phase,,," << e.host_peak_phase << "\n";
    o << "verdict,first_host_oom_phase,,," << e.first_host_oom_phase << "\n";
    if (e.rank0_only)
        o << "rank0_only,host_memory," << e.rank0_only->host_bytes << "," << format_gib(double(e.rank0_only->host_bytes), 3)
          << "," << csv_field(rank0_line(e, in)) << "\n";
    for (const auto& a : advice_for(e, res))
        o << "advice," << a.resource << "," << (a.found ? std::to_string(a.need_after) : "") << ","
          << (a.found ? format_gib(double(a.need_after), 3) : "") << ","
          << csv_field(a.found ? flag_spelling(a.changes) + " (" + a.why + ")" : "no change from the tuning recipe fits")
          << "\n";
    for (const auto& n : e.notes) o << "note,,,," << csv_field(n) << "\n";
    for (const auto& w : res.warnings) o << "warning,,,," << csv_field(w) << "\n";
}

// What decides the numbers besides the header: the dtype and where it came
// from, the optimizer implementation, overlap_comm, the save-time gather and
// the attention kind.
std::string settings_line(const Resolved& res) {
    const auto& in = res.input;
    const auto& z = in.zero;
    std::string s = "dtype " + std::string(to_string(in.train.dtype)) + " (" +
                    prov_of(res, "dtype", "default") + "); optimizer " + to_string(in.train.optimizer) + " built by " +
                    (in.train.optimizer_builder == OptimizerBuilder::deepspeed
                         ? "DeepSpeed (" + deepspeed_optimizer_class(in.train.optimizer, in.train.torch_adam) + ")"
                         : "the client (HF Trainer; the step kernel is on the software line)") +
                    "; overlap_comm " + (z.overlap_comm_effective() ? "on" : "off") +
                    (z.overlap_comm ? "" : " (DeepSpeed's default for stage " + std::to_string(z.stage) + ")");
    if (z.stage == 3)
        s += std::string("; stage3_gather_16bit_weights_on_model_save ") +
             (z.stage3_gather_16bit_weights_on_model_save ? "on" : "off");
    s += std::string("; attention ") + (in.train.flash_attention ? "flash (" : "eager (") +
         prov_of(res, "attention", in.train.flash_attention ? "no s^2 scores" : "s^2 scores kept") + ")";
    if (in.generation) s += "; " + describe_generation(*in.generation, in.train.seq_len);
    return s;
}

void explain_text(std::ostringstream& o, const Estimate& e, const Resolved& res) {
    if (res.input.model.arch) o << "\nArchitecture (parameters counted per block):\n" << describe_arch(*res.input.model.arch);
    o << "\nWhere each setting came from:\n";
    for (const auto& [k, v] : res.provenance) o << "  " << k << ": " << v << "\n";
    o << "\nHow each component is computed:\n";
    for (const auto& t : e.terms) {
        o << "  " << t.component << " = " << t.formula << "\n"
          << "      with " << t.substituted << "\n"
          << "      = " << t.bytes << " B = " << format_gib(double(t.bytes)) << " GiB   [" << t.source << "]\n";
    }
}

// The first line of the table and Markdown outputs: model, cluster, ZeRO,
// dtype, batch, sequence, convention.
std::string head_line(const Estimate& e, const EstimateInput& in) {
    std::string active;  // MoE: the parameters one token uses
    if (in.model.arch && in.model.arch->num_experts > 0 && in.model.arch->num_moe_layers > 0)
        active = ", " + params_text(count_params(*in.model.arch).active) + " active";
    if (e.trainable_params < in.model.params && in.train.lora_rank == 0)  // frozen layers (--trainable-params, a tree)
        active += ", " + params_text(e.trainable_params) + " trainable";
    return in.model.name + " (" + params_text(in.model.params) + " params" + active + "), " + std::to_string(in.cluster.gpus) +
           " GPU" + (in.cluster.gpus > 1 ? "s" : "") + " (" + std::to_string(in.cluster.nodes) + " node" +
           (in.cluster.nodes > 1 ? "s" : "") + " x " + std::to_string(in.cluster.gpus_per_node()) + ")" +
           (in.cluster.tp > 1 || in.cluster.pp > 1
                ? ", tp " + std::to_string(in.cluster.tp) + " x pp " + std::to_string(in.cluster.pp) + " (N_d " +
                      std::to_string(in.cluster.data_parallel()) + ")"
                : std::string()) +
           ", " + stage_text(in) + ", " + to_string(in.train.dtype) +
           (in.train.load_in_bits < 16 ? ", " + std::to_string(in.train.load_in_bits) + "-bit base" : std::string()) +
           (in.train.lora_rank > 0 ? ", LoRA rank " + std::to_string(in.train.lora_rank) : std::string()) +
           ", micro batch " + std::to_string(in.train.micro_batch) + ", seq " + std::to_string(in.train.seq_len) +
           (in.train.checkpointing != Checkpointing::none
                ? std::string(", checkpointing ") + to_string(in.train.checkpointing)
                : std::string()) +
           ", convention " + to_string(e.convention);
}

std::string render_csv(const Estimate& e, const Resolved& res) {
    const auto& in = res.input;
    const auto crows = component_rows(e, in.train.optimizer);
    const std::string where = peak_phase_of(e) ? "in " + e.peak_phase : "";
    std::ostringstream o;
    o << "scope,component,bytes,GiB,detail\n";
    for (const auto& c : crows)
        o << "per_gpu," << c.at_peak.key << "," << c.at_peak.bytes << "," << format_gib(double(c.at_peak.bytes), 3)
          << "," << where << "\n";
    o << "per_gpu,total," << e.per_gpu.total << "," << format_gib(double(e.per_gpu.total), 3) << "," << where << "\n";
    for (const auto& c : crows)
        if (!c.own_peak_phase.empty())
            o << "per_gpu_own_peak," << c.at_peak.key << "," << c.own_peak << "," << format_gib(double(c.own_peak), 3)
              << ",in " << c.own_peak_phase << "\n";
    for (const auto& r : node_rows(e))
        o << "per_node," << r.key << "," << r.bytes << "," << format_gib(double(r.bytes), 3) << ",\n";
    for (const auto& p : e.phases) {
        o << "phase:" << p.name << ",per_gpu_total," << p.per_gpu.total << "," << format_gib(double(p.per_gpu.total), 3)
          << "," << (p.gpu_verdict ? verdict_words(*p.gpu_verdict) : "") << "\n";
        o << "phase:" << p.name << ",host_memory," << p.per_node.host_memory << ","
          << format_gib(double(p.per_node.host_memory), 3) << "," << (p.host_verdict ? verdict_words(*p.host_verdict) : "") << "\n";
    }
    o << "settings,,,," << csv_field(settings_line(res)) << "\n";
    csv_answer(o, e, res);
    return o.str();
}

// One phase's verdicts in the words of the overall lines, by the same band rule (PhaseMemory::gpu_verdict,
// host_verdict): "GPU tight, host fits"; a phase that does not fit says by how much.
std::string phase_verdicts(const PhaseMemory& p, const EstimateInput& in) {
    std::string v;
    auto one = [&](const char* what, const std::optional<std::string>& verdict, uint64_t need,
                   std::optional<uint64_t> cap) {
        if (!verdict || !cap) return;
        if (!v.empty()) v += ", ";
        v += std::string(what) + " " + verdict_words(*verdict);
        if (*verdict == "oom") v += " (short by " + format_gib(double(need) - double(*cap)) + " GiB)";
    };
    one("GPU", p.gpu_verdict, p.per_gpu.total, in.cluster.gpu_memory);
    one("host", p.host_verdict, p.per_node.host_memory, in.cluster.host_memory);
    return v;
}

std::string render_md(const Estimate& e, const Resolved& res, bool explain) {
    const auto& in = res.input;
    const bool by_phase = peak_phase_of(e) != nullptr;
    std::ostringstream o;
    o << "**" << head_line(e, in) << "**\n\n";
    if (const std::string stack = stack_line(e, res); !stack.empty()) o << stack << "\n\n";
    o << "Settings: " << settings_line(res) << "\n\n";
    if (!res.calibration.empty()) o << res.calibration << "\n\n";
    if (by_phase) o << "| per GPU, in " << e.peak_phase << " | GiB | own peak GiB (phase) |\n|---|---:|---:|\n";
    else o << "| per GPU | GiB |\n|---|---:|\n";
    for (const auto& c : component_rows(e, in.train.optimizer)) {
        o << "| " << (c.at_peak.indent > 1 ? "&nbsp;&nbsp;" : "") << c.at_peak.label << " | "
          << format_gib(double(c.at_peak.bytes)) << " |";
        if (by_phase)
            o << " " << (c.own_peak_phase.empty() ? "" : format_gib(double(c.own_peak)) + " (" + c.own_peak_phase + ")")
              << " |";
        o << "\n";
    }
    o << "| **total (peak: " << e.peak_phase << ")** | **" << format_gib(double(e.per_gpu.total)) << "** |"
      << (by_phase ? " |" : "") << "\n\n";
    o << "| per node | GiB |\n|---|---:|\n";
    for (const auto& r : node_rows(e))
        o << "| " << (r.indent > 1 ? "&nbsp;&nbsp;" : "") << r.label << " | " << format_gib(double(r.bytes)) << " |\n";
    if (!e.phases.empty()) {
        o << "\n| phase | GPU GiB | host GiB (node) | verdict |\n|---|---:|---:|---|\n";
        for (const auto& p : e.phases)
            o << "| " << p.name << " | " << format_gib(double(p.per_gpu.total)) << " | "
              << format_gib(double(p.per_node.host_memory)) << " | " << phase_verdicts(p, in) << " |\n";
    }
    o << "\n";
    for (const auto& l : answer_lines(e, res, explain)) o << "- " << l << "\n";
    for (const auto& n : e.notes) o << "- note: " << n << "\n";
    for (const auto& w : res.warnings) o << "- warning: " << w << "\n";
    o << "\nGiB = 2^30 bytes.\n";
    if (explain) {
        o << "\n```";
        explain_text(o, e, res);
        o << "```\n";
    }
    return o.str();
}

// The phase table: each phase's GPU and host totals and its verdicts.
void phase_table(std::ostringstream& o, const Estimate& e, const EstimateInput& in) {
    char line[200];
    std::snprintf(line, sizeof line, "%-18s %14s %18s  %s\n", "Phase", "GPU GiB", "host GiB (node)", "verdict");
    o << line;
    for (const auto& p : e.phases) {
        std::snprintf(line, sizeof line, "%-18s %14s %18s  %s\n", p.name.c_str(),
                      format_gib(double(p.per_gpu.total)).c_str(), format_gib(double(p.per_node.host_memory)).c_str(),
                      phase_verdicts(p, in).c_str());
        o << line;
    }
}

std::string render_table(const Estimate& e, const Resolved& res, bool explain, bool verbose) {
    const auto& in = res.input;
    const bool by_phase = peak_phase_of(e) != nullptr;
    std::ostringstream o;
    char line[160];
    o << head_line(e, in) << "\n";
    if (const std::string stack = stack_line(e, res); !stack.empty()) o << stack << "\n";
    o << "Settings: " << settings_line(res) << "\n";
    if (!res.calibration.empty()) o << res.calibration << "\n";
    o << "\n";
    auto section = [&](const char* title, const std::vector<Row>& rows) {
        std::snprintf(line, sizeof line, "%-40s %12s\n", title, "GiB");
        o << line;
        for (const auto& r : rows) {
            std::snprintf(line, sizeof line, "%*s%-*s %12s\n", r.indent * 2, "", 40 - r.indent * 2, r.label,
                          format_gib(double(r.bytes)).c_str());
            o << line;
        }
    };
    if (by_phase) {
        std::snprintf(line, sizeof line, "%-40s %12s  %s\n", ("Per GPU, in " + e.peak_phase).c_str(), "GiB",
                      "own peak GiB (phase), where higher");
        o << line;
        for (const auto& c : component_rows(e, in.train.optimizer)) {
            const int ind = c.at_peak.indent * 2;
            const std::string own =
                c.own_peak_phase.empty() ? "" : format_gib(double(c.own_peak)) + " (" + c.own_peak_phase + ")";
            std::snprintf(line, sizeof line, "%*s%-*s %12s%s%s\n", ind, "", 40 - ind, c.at_peak.label,
                          format_gib(double(c.at_peak.bytes)).c_str(), own.empty() ? "" : "  ", own.c_str());
            o << line;
        }
    } else {
        section("Per GPU", gpu_rows(e, in.train.optimizer));
    }
    std::snprintf(line, sizeof line, "  %-38s %12s\n", ("total (peak: " + e.peak_phase + ")").c_str(),
                  format_gib(double(e.per_gpu.total)).c_str());
    o << line << "\n";
    section("Per node", node_rows(e));
    if (!e.phases.empty()) {
        o << "\n";
        phase_table(o, e, in);
    }
    o << "\n";
    for (const auto& l : answer_lines(e, res, explain || verbose)) o << l << "\n";
    for (const auto& n : e.notes) o << "note: " << n << "\n";
    o << "GiB = 2^30 bytes.";
    if (by_phase && (explain || verbose))
        o << " Per GPU: the components live in the peak phase (" << e.peak_phase
          << "), which add up to the total, the per-process terms and fragmentation included; a component that is larger in "
             "another phase shows that peak beside it.";
    o << "\n";
    if (explain) explain_text(o, e, res);
    return o.str();
}

}  // namespace

Format parse_format(const std::string& text) {
    if (text == "table") return Format::table;
    if (text == "json") return Format::json;
    if (text == "csv") return Format::csv;
    if (text == "md" || text == "markdown") return Format::md;
    throw InputError("--format: '" + text + "' is not one of table, json, csv, md");
}

std::string render(const Estimate& e, const Resolved& res, Format format, bool explain, bool verbose) {
    switch (format) {
        case Format::json: return to_json(e, res, explain).dump(2) + "\n";
        case Format::csv:
            if (explain) throw InputError("--explain: not available with --format csv; use table, md or json");
            return render_csv(e, res);
        case Format::md: return render_md(e, res, explain);
        case Format::table: break;
    }
    return render_table(e, res, explain, verbose);
}

}  // namespace zeromem
