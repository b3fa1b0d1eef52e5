#include "zeromem/report.h"

#include "zeromem/advice.h"
#include "zeromem/util.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

namespace zeromem {

namespace {

using ojson = nlohmann::ordered_json;

struct Row {
    const char* key;    // JSON / CSV key
    const char* label;  // human label
    uint64_t bytes;
    int indent;
};

std::vector<Row> gpu_rows(const PhaseMemory& p, Optimizer opt);
std::vector<Row> gpu_rows(const GpuMemory& m, Optimizer opt) {
    std::vector<Row> rows{
        {"parameters", "parameters", m.parameters, 1},
        {"gradients", "gradients", m.gradients, 1},
        {"optimizer_states", "optimizer states", m.optimizer_states, 1},
        {"master_weights", "fp32 master weights", m.master_weights, 2},
        {"momentum", opt == Optimizer::sgd ? "SGD momentum" : "Adam first moment (m)", m.momentum, 2},
    };
    if (opt != Optimizer::sgd) rows.push_back({"variance", "Adam second moment (v)", m.variance, 2});
    rows.push_back({"activations", "activations", m.activations, 1});
    rows.push_back({"temporary_buffers", "temporary buffers", m.temporary_buffers, 1});
    rows.push_back({"cuda_context", "CUDA context", m.cuda_context, 1});
    rows.push_back({"fragmentation", "fragmentation allowance", m.fragmentation, 1});
    return rows;
}

std::vector<Row> gpu_rows(const PhaseMemory& p, Optimizer opt) { return gpu_rows(p.per_gpu, opt); }
std::vector<Row> gpu_rows(const Estimate& e, Optimizer opt) { return gpu_rows(e.per_gpu, opt); }

std::vector<Row> node_rows(const Estimate& e) {
    const auto& n = e.per_node;
    return {
        {"host_memory", "host memory (peak)", n.host_memory, 1},
        {"host_pinned", "pinned (page-locked), in training", n.host_pinned, 2},
        {"host_load", "while loading the model", n.host_load, 2},
        {"host_steady", "while training", n.host_steady, 2},
        {"nvme", "NVMe", n.nvme, 1},
    };
}

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
                    const char* how) {
    if (!fits) return std::string(what) + ": capacity unknown (" + how + ")";
    const double diff = double(*cap) - double(need);
    return std::string(what) + ": " + (*fits ? "fits" : "DOES NOT FIT") + " — needs " + format_gib(double(need)) +
           " GiB of " + format_gib(double(*cap)) + " GiB (" + (*fits ? "" : "short by ") +
           format_gib(diff < 0 ? -diff : diff) + " GiB" + (*fits ? " free" : "") + ")";
}

ojson to_json(const Estimate& e, const Resolved& res, bool explain) {
    const auto& in = res.input;
    ojson j;
    j["zeromem_version"] = version();
    j["convention"] = to_string(e.convention);
    j["model"] = {{"name", in.model.name},
                  {"params", in.model.params},
                  {"largest_layer_params", in.model.largest_layer_params}};
    j["cluster"] = {{"gpus", in.cluster.gpus}, {"nodes", in.cluster.nodes},
                    {"gpus_per_node", in.cluster.gpus_per_node()}, {"gpu", in.cluster.gpu_name},
                    {"tp", in.cluster.tp}, {"pp", in.cluster.pp}, {"data_parallel", in.cluster.data_parallel()}};
    j["cluster"]["gpu_memory"] = in.cluster.gpu_memory ? ojson(*in.cluster.gpu_memory) : ojson(nullptr);
    j["cluster"]["host_memory"] = in.cluster.host_memory ? ojson(*in.cluster.host_memory) : ojson(nullptr);
    j["zero_optimization"] = {{"stage", in.zero.stage},
                              {"offload_optimizer", to_string(in.zero.offload_optimizer)},
                              {"offload_param", to_string(in.zero.offload_param)},
                              {"zero_init", in.zero.zero_init},
                              {"overlap_comm", in.zero.overlap_comm_effective()},
                              {"reduce_bucket_size", in.zero.reduce_bucket_size}};
    j["training"] = {{"dtype", to_string(in.train.dtype)},
                     {"train_micro_batch_size_per_gpu", in.train.micro_batch},
                     {"gradient_accumulation_steps", in.train.grad_accum},
                     {"seq_len", in.train.seq_len},
                     {"gradient_checkpointing", to_string(in.train.checkpointing)},
                     {"optimizer", to_string(in.train.optimizer)}};
    ojson g;
    for (const auto& r : gpu_rows(e, in.train.optimizer)) g[r.key] = r.bytes;
    g["total"] = e.per_gpu.total;
    j["per_gpu"] = g;
    ojson n;
    for (const auto& r : node_rows(e)) n[r.key] = r.bytes;
    j["per_node"] = n;
    j["fits_gpu"] = e.fits_gpu ? ojson(*e.fits_gpu) : ojson(nullptr);
    j["fits_host"] = e.fits_host ? ojson(*e.fits_host) : ojson(nullptr);
    j["peak_phase"] = e.peak_phase;
    j["host_peak_phase"] = e.host_peak_phase;
    j["first_oom_phase"] = e.first_oom_phase.empty() ? ojson(nullptr) : ojson(e.first_oom_phase);
    j["first_host_oom_phase"] = e.first_host_oom_phase.empty() ? ojson(nullptr) : ojson(e.first_host_oom_phase);
    j["trainable_params"] = e.trainable_params;
    j["frozen_params"] = e.frozen_params;
    ojson phases = ojson::array();
    for (const auto& p : e.phases) {
        ojson pg;
        for (const auto& r : gpu_rows(p, in.train.optimizer)) pg[r.key] = r.bytes;
        pg["total"] = p.per_gpu.total;
        phases.push_back({{"name", p.name},
                          {"per_gpu", pg},
                          {"per_node", {{"host_memory", p.per_node.host_memory},
                                        {"host_pinned", p.per_node.host_pinned},
                                        {"nvme", p.per_node.nvme}}},
                          {"fits_gpu", p.fits_gpu ? ojson(*p.fits_gpu) : ojson(nullptr)},
                          {"fits_host", p.fits_host ? ojson(*p.fits_host) : ojson(nullptr)}});
    }
    j["phases"] = phases;
    ojson adv = ojson::array();
    for (const auto& a : advise(in, e))
        adv.push_back({{"resource", a.resource}, {"phase", a.phase}, {"need", a.need}, {"capacity", a.capacity},
                       {"found", a.found}, {"change", a.change}, {"why", a.why}, {"need_after", a.need_after}});
    j["advice"] = adv;
    j["notes"] = e.notes;
    if (e.convention == Convention::full) {
        const auto& st = in.stack;
        j["software"] = {{"deepspeed", st.deepspeed}, {"torch", st.torch}, {"transformers", st.transformers},
                         {"optimizer_step", e.optimizer_step_kernel}};
    }
    j["warnings"] = res.warnings;
    if (explain) {
        ojson terms = ojson::array();
        for (const auto& t : e.terms)
            terms.push_back({{"component", t.component}, {"formula", t.formula},
                             {"substituted", t.substituted}, {"bytes", t.bytes}, {"source", t.source}});
        j["explain"] = terms;
        ojson prov = ojson::object();
        for (const auto& [k, v] : res.provenance) prov[k] = v;
        j["provenance"] = prov;
    }
    return j;
}

void explain_text(std::ostringstream& o, const Estimate& e, const Resolved& res) {
    o << "\nWhere each setting came from:\n";
    for (const auto& [k, v] : res.provenance) o << "  " << k << ": " << v << "\n";
    o << "\nHow each component is computed:\n";
    for (const auto& t : e.terms) {
        o << "  " << t.component << " = " << t.formula << "\n"
          << "      with " << t.substituted << "\n"
          << "      = " << t.bytes << " B = " << format_gib(double(t.bytes)) << " GiB   [" << t.source << "]\n";
    }
}

}  // namespace

Format parse_format(const std::string& text) {
    if (text == "table") return Format::table;
    if (text == "json") return Format::json;
    if (text == "csv") return Format::csv;
    if (text == "md" || text == "markdown") return Format::md;
    throw InputError("--format: '" + text + "' is not one of table, json, csv, md");
}

// The software stack the full convention followed, each version with where
// it came from, and the optimizer implementation that runs the step.
std::string stack_line(const Estimate& e, const Resolved& res) {
    if (e.convention != Convention::full) return {};
    const auto& st = res.input.stack;
    auto from = [&](const char* key) {
        const auto it = res.provenance.find(key);
        if (it == res.provenance.end() || it->second.find("(default") != std::string::npos) return std::string(" (default)");
        const std::size_t open = it->second.find(" (");
        return open == std::string::npos ? std::string() : it->second.substr(open);
    };
    return "software: DeepSpeed " + st.deepspeed + from("stack.deepspeed") + ", torch " + st.torch + from("stack.torch") +
           ", transformers " + st.transformers + from("stack.transformers") + "; optimizer step: " +
           e.optimizer_step_kernel;
}

std::string render(const Estimate& e, const Resolved& res, Format format, bool explain) {
    const auto& in = res.input;
    std::ostringstream o;
    if (format == Format::json) {
        o << to_json(e, res, explain).dump(2) << "\n";
        return o.str();
    }
    const auto grows = gpu_rows(e, in.train.optimizer);
    const auto nrows = node_rows(e);
    if (format == Format::csv) {
        if (explain) throw InputError("--explain: not available with --format csv; use table, md or json");
        o << "scope,component,bytes,GiB\n";
        for (const auto& r : grows) o << "per_gpu," << r.key << "," << r.bytes << "," << format_gib(double(r.bytes), 3) << "\n";
        o << "per_gpu,total," << e.per_gpu.total << "," << format_gib(double(e.per_gpu.total), 3) << "\n";
        for (const auto& r : nrows) o << "per_node," << r.key << "," << r.bytes << "," << format_gib(double(r.bytes), 3) << "\n";
        for (const auto& p : e.phases) {
            o << "phase:" << p.name << ",per_gpu_total," << p.per_gpu.total << "," << format_gib(double(p.per_gpu.total), 3) << "\n";
            o << "phase:" << p.name << ",host_memory," << p.per_node.host_memory << ","
              << format_gib(double(p.per_node.host_memory), 3) << "\n";
        }
        return o.str();
    }
    const std::string head = in.model.name + " (" + params_text(in.model.params) + " params), " +
                             std::to_string(in.cluster.gpus) + " GPU" + (in.cluster.gpus > 1 ? "s" : "") + " (" +
                             std::to_string(in.cluster.nodes) + " node" + (in.cluster.nodes > 1 ? "s" : "") + " x " +
                             std::to_string(in.cluster.gpus_per_node()) + ")" +
                             (in.cluster.tp > 1 || in.cluster.pp > 1
                                  ? ", tp " + std::to_string(in.cluster.tp) + " x pp " + std::to_string(in.cluster.pp) +
                                        " (N_d " + std::to_string(in.cluster.data_parallel()) + ")"
                                  : std::string()) +
                             ", " + stage_text(in) + ", " +
                             to_string(in.train.dtype) + ", micro batch " + std::to_string(in.train.micro_batch) +
                             ", seq " + std::to_string(in.train.seq_len) + ", convention " + to_string(e.convention);
    const std::string stack = stack_line(e, res);
    const std::string total_label = "total (peak: " + e.peak_phase + ")";
    if (format == Format::md) {
        o << "**" << head << "**\n\n";
        if (!stack.empty()) o << stack << "\n\n";
        o << "| per GPU | GiB |\n|---|---:|\n";
        for (const auto& r : grows)
            o << "| " << (r.indent > 1 ? "&nbsp;&nbsp;" : "") << r.label << " | " << format_gib(double(r.bytes)) << " |\n";
        o << "| **" << total_label << "** | **" << format_gib(double(e.per_gpu.total)) << "** |\n\n";
        o << "| per node | GiB |\n|---|---:|\n";
        for (const auto& r : nrows)
            o << "| " << (r.indent > 1 ? "&nbsp;&nbsp;" : "") << r.label << " | " << format_gib(double(r.bytes)) << " |\n";
        if (!e.phases.empty()) {
            o << "\n| phase | GPU GiB | host GiB (node) |\n|---|---:|---:|\n";
            for (const auto& p : e.phases)
                o << "| " << p.name << " | " << format_gib(double(p.per_gpu.total)) << " | "
                  << format_gib(double(p.per_node.host_memory)) << " |\n";
        }
        o << "\nGiB = 2^30 bytes.\n";
        if (explain) {
            o << "\n```";
            explain_text(o, e, res);
            o << "```\n";
        }
        return o.str();
    }
    // table
    char line[160];
    o << head << "\n";
    if (!stack.empty()) o << stack << "\n";
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
    section("Per GPU", grows);
    std::snprintf(line, sizeof line, "  %-38s %12s\n", total_label.c_str(), format_gib(double(e.per_gpu.total)).c_str());
    o << line << "\n";
    section("Per node", nrows);
    if (!e.phases.empty()) {
        o << "\n";
        std::snprintf(line, sizeof line, "%-18s %14s %18s  %s\n", "Phase", "GPU GiB", "host GiB (node)", "verdict");
        o << line;
        for (const auto& p : e.phases) {
            std::string v;
            auto one = [&](const char* what, const std::optional<bool>& f, uint64_t need, std::optional<uint64_t> cap) {
                if (!f) return;
                if (!v.empty()) v += ", ";
                const double d = double(*cap) - double(need);
                v += std::string(what) + (*f ? " fits" : " OOM by " + format_gib(-d) + " GiB");
            };
            one("GPU", p.fits_gpu, p.per_gpu.total, in.cluster.gpu_memory);
            one("host", p.fits_host, p.per_node.host_memory, in.cluster.host_memory);
            std::snprintf(line, sizeof line, "%-18s %14s %18s  %s\n", p.name.c_str(),
                          format_gib(double(p.per_gpu.total)).c_str(), format_gib(double(p.per_node.host_memory)).c_str(),
                          v.c_str());
            o << line;
        }
    }
    o << "\n"
      << verdict("GPU", e.fits_gpu, e.per_gpu.total, in.cluster.gpu_memory, "pass --gpu or --gpu-memory")
      << (e.phases.empty() ? "" : (e.first_oom_phase.empty() ? " (peak at " + e.peak_phase + ")"
                                                           : " (first OOM at " + e.first_oom_phase + ")")) << "\n"
      << verdict("Host", e.fits_host, e.per_node.host_memory, in.cluster.host_memory, "pass --host-memory")
      << (e.phases.empty() ? "" : (e.first_host_oom_phase.empty() ? " (peak at " + e.host_peak_phase + ")"
                                                                : " (first OOM at " + e.first_host_oom_phase + ")")) << "\n";
    if (const auto it = res.provenance.find("cluster.gpu_memory"); it != res.provenance.end())
        o << "GPU capacity used: " << it->second << "\n";
    for (const auto& a : advise(in, e)) {
        if (a.found)
            o << "To fit the " << (a.resource == "gpu" ? "GPU" : "host") << ": " << a.change << " (" << a.why << "; needs "
              << format_gib(double(a.need_after)) << " GiB)\n";
        else
            o << "No single change from the tuning recipe makes the " << (a.resource == "gpu" ? "GPU" : "host")
              << " fit: use more GPUs or nodes, or a smaller micro batch or sequence.\n";
    }
    for (const auto& n : e.notes) o << "note: " << n << "\n";
    o << "GiB = 2^30 bytes.";
    if (e.convention == Convention::full)
        o << " Components are each at their own peak; the total is the largest phase total (see the phase "
             "table), CUDA context and fragmentation included.";
    o << "\n";
    if (explain) explain_text(o, e, res);
    return o.str();
}

}  // namespace zeromem
