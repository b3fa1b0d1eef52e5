#include "zeromem/gpu.h"

#include "zeromem/types.h"
#include "zeromem/util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace zeromem {

namespace fs = std::filesystem;

namespace {

// "9.0" -> 90; throws InputError naming the file otherwise.
int parse_compute_capability(const std::string& text, const std::string& path) {
    const auto dot = text.find('.');
    const bool ok = dot == 1 && text.size() == 3 && std::isdigit(static_cast<unsigned char>(text[0])) &&
                    std::isdigit(static_cast<unsigned char>(text[2]));
    if (!ok) throw InputError(path + ": compute_capability '" + text + "' is not MAJOR.MINOR (e.g. \"9.0\")");
    return (text[0] - '0') * 10 + (text[2] - '0');
}

}  // namespace

std::vector<std::string> list_gpu_presets(const std::string& data_dir) { return list_presets(data_dir, "gpus"); }

GpuSpec load_gpu_preset(const std::string& name, const std::string& data_dir) {
    const auto names = list_gpu_presets(data_dir);
    std::string found;
    for (const auto& n : names)
        if (to_lower(n) == to_lower(name)) found = n;
    if (found.empty()) {  // the part alone ("H100"): the one preset of that part, if there is only one
        std::vector<std::string> parts;
        for (const auto& n : names)
            if (!name.empty() && to_lower(n).rfind(to_lower(name) + "-", 0) == 0) parts.push_back(n);
        if (parts.size() == 1) found = parts.front();
    }
    if (found.empty())
        throw InputError(unknown_preset_message("--gpu: unknown GPU", name, names, "or give --gpu-memory"));
    const std::string path = (fs::path(data_dir) / "gpus" / (found + ".json")).string();
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(read_text_file(path));
    } catch (const nlohmann::json::exception& e) {
        throw InputError(path + ": " + e.what());
    }
    GpuSpec g;
    try {
        g.name = j.at("name").get<std::string>();
        g.memory_bytes = j.at("memory_bytes").get<uint64_t>();
        if (!j.at("bf16_tflops").is_null()) g.bf16_tflops = j.at("bf16_tflops").get<double>();
        if (!j.at("fp16_tflops").is_null()) g.fp16_tflops = j.at("fp16_tflops").get<double>();
        g.hbm_bandwidth = j.at("hbm_bandwidth_bytes_per_s").get<double>();
        g.source = j.at("source").get<std::string>();
        if (j.contains("usable_bytes")) {
            g.usable_bytes = j["usable_bytes"].get<uint64_t>();
            g.usable_source = j.at("usable_source").get<std::string>();
        }
        if (j.contains("fp32_tflops") && !j["fp32_tflops"].is_null()) g.fp32_tflops = j["fp32_tflops"].get<double>();
        if (j.contains("compute_efficiency")) g.compute_efficiency = j["compute_efficiency"].get<double>();
        if (j.contains("intra_node_interconnect"))
            g.intra_interconnect = j["intra_node_interconnect"].get<std::string>();
        if (j.contains("compute_capability")) g.compute_capability = parse_compute_capability(j["compute_capability"].get<std::string>(), path);
        if (j.contains("pcie_bandwidth_bytes_per_s"))
            g.pcie_bandwidth = j["pcie_bandwidth_bytes_per_s"].get<double>();
    } catch (const nlohmann::json::exception& e) {
        throw InputError(path + ": " + e.what());
    }
    return g;
}

}  // namespace zeromem
