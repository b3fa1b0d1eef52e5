// Verdict helpers: what to change so that a configuration fits, found by
// searching the ZeRO tuning recipe's options (zeromem/recipe.h).
#pragma once

#include "zeromem/estimate.h"
#include "zeromem/speed.h"

#include <string>
#include <vector>

namespace zeromem {

/// One setting the advice changes, named by its path in the DeepSpeed
/// config or the HF Trainer's arguments (e.g. "zero_optimization.stage"),
/// with the new value as the user would write it ("3", "cpu", "full").
/// The faces spell it as their own flag (setting_flags.h).
struct SettingChange {
    std::string path;
    std::string value;
};

/// One suggestion for one resource that does not fit.
struct Advice {
    std::string resource;      ///< "gpu" or "host"
    std::string phase;         ///< the phase that overflows first (the peak phase)
    uint64_t need = 0;         ///< bytes needed now (per GPU, or per node for host)
    uint64_t capacity = 0;     ///< bytes available
    bool found = false;        ///< false: no combination of the recipe's changes fits
    std::vector<SettingChange> changes;  ///< what to set, in recipe order
    std::string why;           ///< the recipe step(s) the changes are and how the choice was made
    uint64_t need_after = 0;   ///< bytes needed after the change
    bool tight = false;        ///< the change fits only within the verdict's error band
    /// Modelled step time after the change (seconds; 0 when no speed model ran).
    double step_seconds = 0;
};

/// For each resource whose capacity is known and which does not fit (full
/// convention):
/// - GPU: every combination of the recipe's memory steps reachable from the
///   user's settings (ZeRO stage and offload of stage_offload_options(),
///   gradient checkpointing, a smaller micro batch with the accumulation that
///   keeps the global batch, one beam for generation, bf16 for fp32) is
///   ranked by the speed model's step time when `hw` is given, else by the
///   recipe's order (the latest step a combination needs, then the fewest
///   changes); the first that fits with margin is the advice (a tight one
///   only when nothing fits with margin). The host must still fit where its
///   capacity is known.
/// - host: single changes in order: zero.Init, a 16-bit load dtype, ZeRO-3
///   with zero.Init, smaller NVMe swap buffers, NVMe instead of CPU offload.
/// Empty when everything fits or capacities are unknown.
std::vector<Advice> advise(const EstimateInput& in, const Estimate& est, const SpeedHardware* hw = nullptr);

}  // namespace zeromem
