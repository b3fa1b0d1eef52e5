// Table and JSON writers of the host replay (host_allocator.h).
#include "zeromem/host_allocator.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace zeromem::sim {

namespace {
std::string gib(uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", double(b) / 1073741824.0);
    return buf;
}
}  // namespace

std::string render_host_table(const HostResult& r) {
    if (r.timeline.empty()) return "";  // not replayed (replay() alone)
    std::ostringstream o;
    o << "\nSimulated host RAM (PyTorch pinned CachingHostAllocator model), GiB = 2^30 bytes, " << r.ranks_per_node
      << " rank(s) per node\n";
    o << "  peak host RAM   " << gib(r.peak_per_rank) << " GiB per rank, " << gib(r.peak_per_node())
      << " GiB per node  at " << r.peak_event << " in " << r.peak_module << ", phase " << to_string(r.peak_phase) << "\n";
    o << "  pinned (page-locked, incl. cached blocks)  " << gib(r.peak_pinned) << " GiB per rank, "
      << gib(r.peak_pinned * r.ranks_per_node) << " GiB per node\n";
    o << "  NVMe (swap files)  " << gib(r.nvme) << " GiB per rank, " << gib(r.nvme * r.ranks_per_node) << " GiB per node\n";
    o << "  phase              host per rank    host per node\n";
    for (const auto& p : r.phases) {
        char line[128];
        std::snprintf(line, sizeof line, "  %-18s %10s GiB  %11s GiB\n", to_string(p.phase), gib(p.peak_resident).c_str(),
                      gib(p.peak_resident * r.ranks_per_node).c_str());
        o << line;
    }
    if (r.stopped_at)
        o << "  (the run stopped at the GPU out-of-memory in phase " << to_string(*r.stopped_at)
          << "; later phases were not replayed)\n";
    return o.str();
}

std::string render_host_oom(const HostOom& h) {
    return "host out of memory: " + gib(h.per_node) + " GiB per node > " + gib(h.capacity_per_node) +
           " GiB host RAM per node (--host-memory) at " + h.event + " in " + h.module + ", phase " + to_string(h.phase) +
           " (GiB = 2^30 bytes)";
}

nlohmann::json host_to_json(const HostResult& r) {
    if (r.timeline.empty()) return nullptr;  // not replayed (replay() alone)
    nlohmann::json j;
    const uint64_t g = r.ranks_per_node;
    j["peak_per_rank"] = r.peak_per_rank;
    j["peak_per_node"] = r.peak_per_node();
    j["ranks_per_node"] = g;
    j["pinned"] = r.peak_pinned;
    j["pinned_per_node"] = r.peak_pinned * g;
    j["nvme"] = r.nvme;
    j["nvme_per_node"] = r.nvme * g;
    j["peak_event"] = r.peak_event;
    j["peak_module"] = r.peak_module;
    j["peak_phase"] = to_string(r.peak_phase);
    j["stopped_at"] = r.stopped_at ? nlohmann::json(to_string(*r.stopped_at)) : nlohmann::json(nullptr);
    j["phases"] = nlohmann::json::array();
    for (const auto& p : r.phases)
        j["phases"].push_back({{"name", to_string(p.phase)}, {"peak", p.peak_resident}, {"peak_per_node", p.peak_resident * g},
                               {"pinned", p.peak_pinned}});
    auto& tl = j["timeline"] = nlohmann::json::array();
    for (const auto& p : r.timeline)
        tl.push_back({{"t", p.t}, {"event", p.term}, {"phase", to_string(p.phase)}, {"module", r.modules[p.module]},
                      {"kind", to_string(p.kind)}, {"bytes", p.bytes}, {"allocated", p.allocated},
                      {"resident", p.resident}, {"pinned", p.pinned_bytes}, {"nvme", p.nvme}});
    return j;
}

namespace {

struct HostRow {
    const char* term;
    const char* estimator;  // the estimator's host term, or the figure it belongs to
    const char* source;
};

const char* const kSame = "the host term of the same name";

const HostRow kHostRows[] = {
    {"host_process_overhead", "ResidualSettings::host_process_overhead (--host-overhead), per rank",
     "PyTorch, CUDA and NCCL libraries and the host side of the CUDA context"},
    {"model load", "host: model load (per node)",
     "transformers modeling_utils.py from_pretrained (whole model per rank without zero.Init, one module at a time "
     "under zero.Init); engine.py _configure_distributed_model moves it to the GPU"},
    {"zero.Init's per-parameter pinned partitions left in PyTorch's host cache", kSame,
     "DeepSpeed v0.19.6 runtime/zero/partition_parameters.py Init._partition_param (pin_memory per parameter); "
     "stage3.py _move_to_flat_buffer drops them into PyTorch's host cache"},
    {"16-bit parameter flat buffer", kSame, "DeepSpeed v0.19.6 runtime/zero/stage3.py _create_param_groups_fp16_flat_cpu_memory"},
    {"parameters kept in CPU memory (max_in_cpu)", kSame,
     "DeepSpeed v0.19.6 runtime/zero/stage3.py _create_param_groups_fp16_flat_cpu_memory (max_in_cpu)"},
    {"parameter NVMe swap pool", kSame,
     "DeepSpeed v0.19.6 runtime/swap_tensor/partitioned_param_swapper.py (new_cpu_locked_tensor)"},
    {"defragment staging of the 16-bit partitions", kSame, "DeepSpeed v0.19.6 runtime/zero/utils.py defragment"},
    {"16-bit parameters copied to the CPU and flattened there", kSame,
     "DeepSpeed v0.19.6 runtime/zero/stage_1_and_2.py __init__ (param.cpu_data, flatten on the CPU before 0.18.7)"},
    {"fp32 master (single_partition_of_fp32_groups)", kSame, "DeepSpeed v0.19.6 runtime/zero/stage_1_and_2.py __init__"},
    {"fp32 master's pageable source beside its pinned copy", kSame,
     "DeepSpeed v0.19.6 runtime/zero/stage_1_and_2.py __init__ (.to(cpu, fp32) then pin_memory)"},
    {"16-bit parameter staging (param_buffer_of_bit16_for_cpu_offload_groups)", kSame,
     "DeepSpeed v0.19.6 runtime/zero/stage_1_and_2.py __init__ (temp_buffer_bit16, temp_pinned)"},
    {"temp_grad_buffer_for_cpu_offload", kSame, "DeepSpeed v0.19.6 runtime/zero/stage_1_and_2.py __init__"},
    {"fp32 gradient partition", kSame, "DeepSpeed v0.19.6 runtime/zero/stage_1_and_2.py initialize_optimizer_states"},
    {"accumulation buffers, one per parameter (buffer_to_accumulate_to_in_cpu)", kSame,
     "DeepSpeed v0.19.6 runtime/zero/stage_1_and_2.py async_accumulate_grad_in_cpu_via_gpu"},
    {"pageable source of a pinned copy",
     "pageable sources of the fp32 gradient and 16-bit staging pinned copies / init gradient_buffer + pageable sources",
     "PyTorch Tensor.pin_memory() copies into a new pinned block; the source lives until its name is rebound"},
    {"fp32 master partitions", kSame, "DeepSpeed v0.19.6 runtime/zero/stage3.py _create_fp32_partitions"},
    {"fp32 master conversion + clone of one sub-group", kSame,
     "DeepSpeed v0.19.6 runtime/zero/stage3.py _create_fp32_partitions (.to(cpu, fp32), .clone())"},
    {"init gradient_buffer of the largest sub-group", "init gradient_buffer of the largest sub-group (+ pageable sources)",
     "DeepSpeed v0.19.6 runtime/zero/stage3.py initialize_optimizer_states"},
    {"fp32 gradients, one pinned buffer per sub-group", kSame,
     "DeepSpeed v0.19.6 runtime/zero/stage3.py initialize_optimizer_states"},
    {"grad_partitions_flat_buffer", kSame, "DeepSpeed v0.19.6 runtime/zero/stage3.py _setup_for_real_optimizer"},
    {"optimizer NVMe swap buffers", kSame,
     "DeepSpeed v0.19.6 runtime/swap_tensor/partitioned_optimizer_swapper.py, utils.py SwapBufferManager"},
    {"CPU Adam m and v", kSame, "DeepSpeed v0.19.6 ops/adam/cpu_adam.py step/step_subgroup (zeros_like, first step)"},
    {"CPU optimizer states", kSame, "DeepSpeed v0.19.6 ops/adam/cpu_adam.py (SGD momentum)"},
    {"DeepSpeedCPUAdam tile buffers", kSame, "DeepSpeed < 0.14.3 csrc/includes/cpu_adam.h _doubled_buffer (cudaMallocHost)"},
};

const HostRow* host_row(const std::string& term) {
    for (const auto& r : kHostRows)
        if (term == r.term) return &r;
    return nullptr;
}

}  // namespace

std::vector<HostExplanation> explain_host(const HostResult& r) {
    std::vector<HostExplanation> out;
    std::map<std::string, size_t> index;
    std::map<std::string, int64_t> live;
    for (const HostTimelinePoint& p : r.timeline) {
        if (p.bytes == 0) continue;  // phase marks, NVMe writes
        auto [it, fresh] = index.emplace(p.term, out.size());
        if (fresh) {
            HostExplanation e;
            e.term = p.term;
            e.kind = to_string(p.kind);
            const HostRow* row = host_row(p.term);
            e.estimator_term = row ? row->estimator : "";
            e.source = row ? row->source : "";
            out.push_back(e);
        }
        HostExplanation& e = out[it->second];
        if (p.bytes > 0) e.largest = std::max(e.largest, uint64_t(p.bytes));
        if (p.t <= r.peak_t) live[p.term] += p.bytes;
    }
    for (auto& e : out) e.bytes_at_peak = uint64_t(std::max<int64_t>(0, live[e.term]));
    return out;
}

std::string render_host_explain(const HostResult& r) {
    if (r.timeline.empty()) return "";
    std::string s = "\nHost terms per rank (GiB = 2^30 B; requested bytes live at the host peak, largest single request; "
                    "pinned blocks are rounded up to a power of two and stay cached when freed):\n";
    char buf[256];
    for (const HostExplanation& e : explain_host(r)) {
        std::snprintf(buf, sizeof buf, "  %-44s live %8.3f GiB  largest %8.3f GiB  [%s]\n", e.term.c_str(),
                      double(e.bytes_at_peak) / 1073741824.0, double(e.largest) / 1073741824.0, e.kind);
        s += buf;
        s += "      estimator: " + std::string(e.estimator_term) + "\n";
        s += "      source:    " + std::string(e.source) + "\n";
    }
    return s;
}

}  // namespace zeromem::sim
