// Table and JSON writers of the host replay (host_allocator.h).
#include "zeromem/host_allocator.h"

#include <cstdio>
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
    return o.str();
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

}  // namespace zeromem::sim
