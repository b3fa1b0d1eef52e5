// GPU presets (data/gpus/<name>.json).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zeromem {

/// One GPU model. Capacities in bytes, rates in FLOP/s and bytes/s.
struct GpuSpec {
    std::string name;                 ///< preset name, e.g. "A100-80GB"
    uint64_t memory_bytes = 0;        ///< nominal capacity, label x 2^30 bytes
    /// The total the device reports (nvidia-smi / torch.cuda.mem_get_info),
    /// which verdicts use when known ("usable_bytes"); unset: only the
    /// nominal figure is known.
    std::optional<uint64_t> usable_bytes;
    std::string usable_source;        ///< where usable_bytes comes from ("usable_source")
    std::optional<double> bf16_tflops;  ///< dense peak, 1e12 FLOP/s; unset if no bf16 tensor cores
    std::optional<double> fp16_tflops;
    double hbm_bandwidth = 0;         ///< bytes/s
    std::string source;               ///< where the figures come from
    // Step-time model fields (optional in the JSON; see speed.h).
    std::optional<double> fp32_tflops;        ///< dense fp32 peak, 1e12 FLOP/s ("fp32_tflops")
    std::optional<double> compute_efficiency; ///< eta_max, best fraction of peak reached in training ("compute_efficiency")
    std::string intra_interconnect;           ///< default data/interconnects preset inside a node ("intra_node_interconnect")
    int compute_capability = 0;               ///< major x 10 + minor ("compute_capability": "9.0"); 0 unknown
    std::optional<double> pcie_bandwidth;     ///< effective GPU<->host bytes/s per direction ("pcie_bandwidth_bytes_per_s")
};

/// Loads `<data_dir>/gpus/<name>.json` (name matched case-insensitively; the
/// part alone, e.g. "H100", names the one preset "H100-<size>" when there is
/// only one). Throws InputError for an unknown or ambiguous name, listing the
/// closest presets.
GpuSpec load_gpu_preset(const std::string& name, const std::string& data_dir);

/// Names of all GPU presets, sorted.
std::vector<std::string> list_gpu_presets(const std::string& data_dir);

}  // namespace zeromem
