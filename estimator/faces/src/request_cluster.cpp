// The cluster and its capacities in resolve_request (request.cpp): the GPU
// count and layout, mixture-of-experts flags, the host RAM and the GPU memory.
#include "request_detail.h"

#include "zeromem/host_capacity.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

namespace zeromem::request_detail {

namespace {

// The warning for a size written in GB/TB where the hardware is sold in
// binary units: `binary_example` says what the label means.
std::string decimal_size_warning(const std::string& flag, const std::string& text, uint64_t bytes,
                                 const std::string& binary_example) {
    return flag + " " + text + " is " + format_gib(double(bytes)) + " GiB: GB/TB are powers of 1000, while " +
           binary_example + "; write GiB/TiB if that is what you mean";
}

}  // namespace

int64_t positive(int64_t v, const char* flag) {
    if (v <= 0) throw InputError(std::string(flag) + ": must be a positive integer, got " + std::to_string(v));
    return v;
}

bool decimal_unit(const std::string& text) {
    const std::string t = to_lower(text);
    for (const char* u : {"kb", "mb", "gb", "tb"})
        if (t.size() >= 2 && t.compare(t.size() - 2, 2, u) == 0) return true;
    return false;
}

// Resolves the GPU count and layout (--gpus, --nodes, --tp, --pp) into `cluster`.
void resolve_parallelism(const Request& req, ClusterSettings& cluster, Provenance& prov) {
    if (req.gpus) {
        cluster.gpus = positive(*req.gpus, "--gpus");
        if (cluster.gpus > kMaxGpus)
            throw InputError("--gpus: " + std::to_string(cluster.gpus) + " is more than zeromem models (at most " +
                             std::to_string(kMaxGpus) + ")");
        prov["cluster.gpus"] = "--gpus";
    } else {
        prov["cluster.gpus"] = "default (1)";
    }
    if (req.nodes) {
        cluster.nodes = positive(*req.nodes, "--nodes");
        prov["cluster.nodes"] = "--nodes";
    }
    if (cluster.gpus % cluster.nodes != 0)
        throw InputError("--nodes: " + std::to_string(cluster.nodes) + " nodes do not divide " +
                         std::to_string(cluster.gpus) + " GPUs evenly");
    if (req.tp) {
        cluster.tp = positive(*req.tp, "--tp");
        prov["cluster.tp"] = "--tp";
    }
    if (req.pp) {
        cluster.pp = positive(*req.pp, "--pp");
        prov["cluster.pp"] = "--pp";
    }
    if (cluster.gpus % (cluster.tp * cluster.pp) != 0)
        throw InputError("--tp/--pp: tp x pp = " + std::to_string(cluster.tp * cluster.pp) +
                         " does not divide --gpus " + std::to_string(cluster.gpus));
}

// Resolves the mixture-of-experts flags (--ep-size, --moe-capacity-factor;
// zeromem/moe.h); they are validated with the cluster in validate_moe.
void resolve_moe_flags(const Request& req, Resolved& r) {
    if (req.ep_size) {
        r.input.moe.ep_size = *req.ep_size;
        r.provenance["moe.ep_size"] = "--ep-size (DeepSpeed-MoE, deepspeed.moe.layer.MoE ep_size)";
    }
    if (req.moe_capacity_factor) {
        r.input.moe.capacity_factor = *req.moe_capacity_factor;
        r.provenance["moe.capacity_factor"] = "--moe-capacity-factor";
        if (!req.ep_size)
            r.warnings.push_back("--moe-capacity-factor applies to DeepSpeed-MoE (--ep-size); the Hugging Face "
                                 "experts route dropless, so it changes nothing here");
    }
}

// Resolves --host-memory (the installed RAM per node) and --host-reserve:
// the capacity verdicts use is the given size less host_os_reserve
// (zeromem/host_capacity.h).
void resolve_host_capacity(const Request& req, Resolved& r) {
    ClusterSettings& cl = r.input.cluster;
    const uint64_t given = parse_bytes(*req.host_memory, "--host-memory");
    if (decimal_unit(*req.host_memory))
        r.warnings.push_back(decimal_size_warning("--host-memory", *req.host_memory, given,
                                                  "RAM sold as \"768GB\" is 768 GiB of DIMMs (JEDEC sizes are binary)"));
    std::string how;
    if (req.host_reserve) {
        // 0 is a valid reserve (--host-memory already what `free` shows).
        char* end = nullptr;
        const double lead = std::strtod(req.host_reserve->c_str(), &end);
        const bool zero = end != req.host_reserve->c_str() && lead == 0.0 &&
                          std::all_of(static_cast<const char*>(end), req.host_reserve->c_str() + req.host_reserve->size(),
                                      [](char ch) { return std::isalpha(static_cast<unsigned char>(ch)) != 0; });
        cl.host_reserve = zero ? 0 : parse_bytes(*req.host_reserve, "--host-reserve");
        how = "--host-reserve " + *req.host_reserve;
    } else {
        const HostReserve hr = host_os_reserve(given);
        cl.host_reserve = hr.total();
        how = "derived from --host-memory: " + host_os_reserve_text(hr);
    }
    if (cl.host_reserve >= given)
        throw InputError(std::string(req.host_reserve ? "--host-reserve" : "--host-memory") + ": " + *req.host_memory +
                         " (" + format_gib(double(given)) + " GiB) does not exceed host_os_reserve " +
                         format_gib(double(cl.host_reserve)) + " GiB (" + how + ")");
    cl.host_memory = given - cl.host_reserve;
    r.provenance["cluster.host_reserve"] = "host_os_reserve " + how;
    r.provenance["cluster.host_memory"] = "--host-memory " + *req.host_memory + " (" + format_gib(double(given)) +
                                          " GiB) less host_os_reserve " + format_gib(double(cl.host_reserve)) +
                                          " GiB = " + format_gib(double(*cl.host_memory)) + " GiB";
}

// Resolves the device memories (--gpu preset, --gpu-memory, --host-memory).
void resolve_device_memory(const Request& req, const std::string& data_dir, Resolved& r) {
    EstimateInput& in = r.input;
    Provenance& prov = r.provenance;
    if (req.gpu) {
        r.gpu = load_gpu_preset(*req.gpu, data_dir);
        if (to_lower(r.gpu->name) != to_lower(*req.gpu))
            r.notes.push_back("--gpu " + *req.gpu + ": the " + r.gpu->name + " preset, the only one of that part");
        in.cluster.gpu_name = r.gpu->name;
        in.cluster.compute_capability = r.gpu->compute_capability;
        in.cluster.intra_interconnect = r.gpu->intra_interconnect;
        // The verdict compares against what the card exposes when the preset
        // knows it (nvidia-smi / torch.cuda.mem_get_info total), else the label.
        in.cluster.gpu_memory = r.gpu->usable_bytes.value_or(r.gpu->memory_bytes);
        prov["cluster.gpu_memory"] =
            "--gpu " + r.gpu->name + " (data/gpus/" + r.gpu->name + ".json): " +
            (r.gpu->usable_bytes ? format_gib(double(*r.gpu->usable_bytes)) + " GiB reported by the device (" +
                                       r.gpu->usable_source + ")"
                                 : format_gib(double(r.gpu->memory_bytes)) +
                                       " GiB nominal (label x 2^30; the reported total is not in the preset)");
    }
    if (req.gpu_memory) {
        in.cluster.gpu_memory = parse_bytes(*req.gpu_memory, "--gpu-memory");
        if (decimal_unit(*req.gpu_memory))
            r.warnings.push_back(decimal_size_warning("--gpu-memory", *req.gpu_memory, *in.cluster.gpu_memory,
                                                      "a GPU sold as \"80GB\" (the A100-80GB preset) has 80 GiB"));
        prov["cluster.gpu_memory"] = "--gpu-memory " + *req.gpu_memory;
    }
    if (req.host_memory) resolve_host_capacity(req, r);
    else if (req.host_reserve)  // as --moe-capacity-factor without --ep-size: said, not silently dropped
        r.warnings.push_back("--host-reserve " + *req.host_reserve + " changes nothing without --host-memory: it is "
                             "taken from the installed RAM per node that --host-memory gives, and without it there is "
                             "no host capacity to check");
}

}  // namespace zeromem::request_detail
