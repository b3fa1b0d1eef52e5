// Verdict helpers: which single change from the tuning recipe makes a
// configuration fit.
#pragma once

#include "zeromem/estimate.h"

#include <string>
#include <vector>

namespace zeromem {

/// One suggestion for one resource that does not fit.
struct Advice {
    std::string resource;      ///< "gpu" or "host"
    std::string phase;         ///< the phase that overflows first (the peak phase)
    uint64_t need = 0;         ///< bytes needed now (per GPU, or per node for host)
    uint64_t capacity = 0;     ///< bytes available
    bool found = false;        ///< false: no single change from the recipe fits
    std::string change;        ///< the change, spelled as zeromem flags (e.g. "--stage 3")
    std::string why;           ///< which recipe step it is and what it does
    uint64_t need_after = 0;   ///< bytes needed after the change
};

/// For each resource whose capacity is known and which does not fit (full
/// convention), tries single changes in the order of the seed's 12-step
/// tuning recipe (../shared/README.md: micro batch 1 with accumulation,
/// gradient checkpointing, ZeRO-2, ZeRO-2 + optimizer offload, ZeRO-3,
/// parameter offload, optimizer offload, bf16, NVMe) for the GPU, and
/// zero.Init, a 16-bit load dtype, ZeRO-3 with zero.Init, smaller NVMe swap
/// buffers and NVMe instead of CPU offload for the host; returns the first
/// change after which that resource fits (and the other still fits where its
/// capacity is known). Empty when everything fits or capacities are unknown.
std::vector<Advice> advise(const EstimateInput& in, const Estimate& est);

}  // namespace zeromem
