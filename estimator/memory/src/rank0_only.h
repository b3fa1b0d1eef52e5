// Rank 0's extras of an estimate (estimate.h RankZeroOnly); private to the library.
#pragma once

#include "zeromem/estimate.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zeromem {

/// Sets out.rank0_only: `host_bytes` of host RAM in `phase` that only global rank 0 holds (already inside
/// that phase's per-node figure, the node holding rank 0), named by `what`, and the GPU bytes of the
/// gather every rank makes beside it; and the host peak of a node without rank 0 (out.phases with
/// `host_bytes` taken out of `phase`).
void set_rank0_only(Estimate& out, const std::string& phase, uint64_t host_bytes, std::vector<std::string> what,
                    uint64_t gathered_module_gpu);

}  // namespace zeromem
