// Helpers the phase tests share (estimate_phases_test.cpp,
// estimate_phase_mechanics_test.cpp).
#pragma once

#include "zeromem/estimate.h"
#include "zeromem/model.h"

#include <cstdint>
#include <string>

namespace phasetest {

inline double d(uint64_t v) { return static_cast<double>(v); }
inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Adds LoRA adapters as request.cpp does for --lora-rank: new parameters
// beside the frozen base.
inline void add_lora(zeromem::EstimateInput& in, int64_t rank, const std::string& targets) {
    in.train.lora_rank = rank;
    in.train.lora_targets = targets;
    in.model.params += zeromem::lora_params(*in.model.arch, rank, targets);
}

}  // namespace phasetest
