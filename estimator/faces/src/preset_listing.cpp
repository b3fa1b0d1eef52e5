// The preset listings: models (size, shape, mixture of experts), GPUs (the
// label's capacity and what the device reports, which verdicts use),
// interconnects and hosts.
#include "zeromem/preset_listing.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "zeromem/gpu.h"
#include "zeromem/model.h"
#include "zeromem/speed.h"
#include "zeromem/util.h"

namespace zeromem {
namespace {

template <class... Args>
std::string line(const char* fmt, Args... args) {
    char buf[512];
    std::snprintf(buf, sizeof buf, fmt, args...);
    return std::string(buf) + "\n";
}

nlohmann::json model_json(const std::string& name, const ModelArch& a) {
    const ParamCount p = count_params(a);
    nlohmann::json j = {{"name", name},           {"params", p.total},          {"hidden_size", a.hidden_size},
                        {"num_layers", a.num_layers}, {"num_heads", a.num_heads}, {"num_kv_heads", a.num_kv_heads},
                        {"vocab_size", a.vocab_size}, {"moe", a.num_experts > 0}};
    if (a.num_experts > 0) {
        j["num_experts"] = a.num_experts;
        j["num_experts_per_tok"] = a.num_experts_per_tok;
        j["active_params"] = p.active;
    }
    return j;
}

std::string model_line(const std::string& name, const ModelArch& a) {
    const ParamCount p = count_params(a);
    std::string moe;
    if (a.num_experts > 0)
        moe = line("  MoE: %lld experts, top-%lld, %.2f B active", (long long)a.num_experts,
                   (long long)a.num_experts_per_tok, double(p.active) / 1e9);
    if (!moe.empty()) moe.pop_back();
    return line("%-14s %8.2f B params  (h=%lld, L=%lld, heads=%lld, kv=%lld, vocab=%lld)%s", name.c_str(),
                double(p.total) / 1e9, (long long)a.hidden_size, (long long)a.num_layers, (long long)a.num_heads,
                (long long)a.num_kv_heads, (long long)a.vocab_size, moe.c_str());
}

nlohmann::json gpu_json(const std::string& name, const GpuSpec& g) {
    nlohmann::json j = {{"name", name}, {"memory_bytes", g.memory_bytes}};
    j["reported_bytes"] = g.usable_bytes ? nlohmann::json(*g.usable_bytes) : nlohmann::json(nullptr);
    if (g.usable_bytes) j["reported_source"] = g.usable_source;
    return j;
}

std::string gpu_line(const std::string& name, const GpuSpec& g) {
    const std::string reported =
        g.usable_bytes ? format_gib(double(*g.usable_bytes)) + " GiB reported by the device (verdicts use it)"
                       : std::string("no reported total known: verdicts use the label");
    return line("%-14s %8s GiB label, %s", name.c_str(), format_gib(double(g.memory_bytes)).c_str(), reported.c_str());
}

nlohmann::json interconnect_json(const std::string& name, const Interconnect& ic) {
    nlohmann::json j = {{"name", name}, {"kind", ic.inter_node ? "inter-node" : "intra-node"}};
    if (ic.inter_node) {
        j["link_bytes_per_s"] = ic.link_bw;
        j["links_per_node"] = ic.links_per_node;
    } else {
        j["allreduce_busbw_bytes_per_s"] = ic.allreduce_busbw;
        j["latency_s"] = ic.latency;
    }
    return j;
}

std::string interconnect_line(const std::string& name, const Interconnect& ic) {
    if (ic.inter_node)
        return line("%-20s inter-node  %7.1f GB/s per link, %s", name.c_str(), ic.link_bw / 1e9,
                    ic.links_per_node == 0 ? "one link per GPU" : "links shared by the node");
    return line("%-20s intra-node  all-reduce busbw %7.1f GB/s, latency %.0f us", name.c_str(),
                ic.allreduce_busbw / 1e9, ic.latency * 1e6);
}

nlohmann::json host_json(const std::string& name, const HostSpec& h) {
    return {{"name", name},
            {"cores", h.cores},
            {"memory_bandwidth_bytes_per_s", h.memory_bandwidth},
            {"pcie_gen", h.pcie_gen},
            {"pcie_lanes_per_gpu", h.pcie_lanes_per_gpu},
            {"gpus_per_pcie_link", h.gpus_per_pcie_link},
            {"pcie_bytes_per_s_per_gpu", host_pcie_bandwidth(h)},
            {"cpu_adam_params_per_s", host_cpu_adam_rate(h, SpeedConstants{})}};
}

std::string host_line(const std::string& name, const HostSpec& h) {
    return line("%-20s %4lld cores, DRAM %6.1f GB/s, PCIe gen%d x%d, %d GPU(s) per uplink: %5.1f GB/s per GPU, "
                "CPU Adam %.2g params/s per node",
                name.c_str(), (long long)h.cores, h.memory_bandwidth / 1e9, h.pcie_gen, h.pcie_lanes_per_gpu,
                h.gpus_per_pcie_link, host_pcie_bandwidth(h) / 1e9, host_cpu_adam_rate(h, SpeedConstants{}));
}

// One preset family: its names, a loader and the two renderings.
template <class Load, class Json, class Line>
std::string render(const std::vector<std::string>& names, bool json, Load load, Json to_json, Line to_line) {
    if (json) {
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& n : names) arr.push_back(to_json(n, load(n)));
        return arr.dump(2) + "\n";
    }
    std::string out;
    for (const auto& n : names) out += to_line(n, load(n));
    return out;
}

}  // namespace

std::string render_preset_listing(PresetKind kind, const std::string& dir, bool json) {
    switch (kind) {
    case PresetKind::models: {
        std::string out = render(list_model_presets(dir), json,
                                 [&](const std::string& n) { return load_model_preset(n, dir); }, model_json, model_line);
        if (!json)  // the presets are a few common models; every other one is its config.json
            out += "\nAny other model: --hf-config with its config.json, a model folder holding one, or a Hub id "
                   "(org/name) in the local Hugging Face cache (see `zeromem estimate --help`); --from reads it from a "
                   "LLaMA-Factory YAML's model_name_or_path.\n";
        return out;
    }
    case PresetKind::gpus:
        return render(list_gpu_presets(dir), json, [&](const std::string& n) { return load_gpu_preset(n, dir); },
                      gpu_json, gpu_line);
    case PresetKind::interconnects:
        return render(list_interconnect_presets(dir), json,
                      [&](const std::string& n) { return load_interconnect_preset(n, dir); }, interconnect_json,
                      interconnect_line);
    case PresetKind::hosts:
        break;
    }
    return render(list_host_presets(dir), json, [&](const std::string& n) { return load_host_preset(n, dir); },
                  host_json, host_line);
}

}  // namespace zeromem
