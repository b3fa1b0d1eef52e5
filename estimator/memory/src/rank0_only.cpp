// Rank 0's extras (rank0_only.h): what only global rank 0 holds, and the host peak of the other nodes.
#include "rank0_only.h"

#include <algorithm>

namespace zeromem {

void set_rank0_only(Estimate& out, const std::string& phase, uint64_t host_bytes, std::vector<std::string> what,
                    uint64_t gathered_module_gpu) {
    RankZeroOnly r;
    r.phase = phase;
    r.host_bytes = host_bytes;
    r.what = std::move(what);
    r.gathered_module_gpu = gathered_module_gpu;
    for (const PhaseMemory& p : out.phases) {
        const uint64_t h = p.name == phase ? p.per_node.host_memory - std::min(host_bytes, p.per_node.host_memory)
                                           : p.per_node.host_memory;
        if (r.other_nodes_host_peak_phase.empty() || h > r.other_nodes_host_peak) {
            r.other_nodes_host_peak = h;
            r.other_nodes_host_peak_phase = p.name;
        }
    }
    out.rank0_only = std::move(r);
}

}  // namespace zeromem
