// How a measurement of the runtime (zeromem-measure) is held against the
// estimate: needs neither MPI nor a device, so that `zeromem validate
// --measurement` runs in the lean zeromem binary. It reads the estimator's
// byte counts, so it lives with the faces (zeromem_cli_common), not in
// runtime/, which links the estimator's core only.
#pragma once

#include "zeromem/estimate.h"
#include "zeromem/runtime/arch.h"  // runtime_arch

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace zeromem_cli {

/// Checks that `m` has what compare_with_estimate and `validate` read from a measure result
/// (measure() JSON): objects "model" and "settings", a non-negative integer "world_size", a boolean
/// "oom" where present, and "ranks", each rank's "phases" with a string "name", an integer "step" and
/// "peak_bytes" holding byte counts at device/{parameters, gradients, optimizer_states, activations,
/// buffers}, host/total and pinned/total. Throws InputError "<where>: <JSON pointer>: <what is wrong>"
/// naming the first field that is missing or of the wrong type (e.g. "/ranks/0/phases/2/step").
void check_measurement(const nlohmann::json& m, const std::string& where);

/// Holds a full-convention estimate against a measurement (the JSON of
/// measure()): per estimator phase and component, the largest per-rank peak.
/// Phases: load <- init; forward <- step 1 forward (first micro step);
/// backward <- step 1 backward (last micro step); optimizer_step <- step 1 step; steady_backward <- step 2
/// backward. Components: parameters, gradients, optimizer_states,
/// activations, temporary_buffers (device bytes of those categories;
/// buffers for temporary_buffers), host_offload (tracked host + pinned bytes
/// per rank vs the estimate's per-node host RAM less the process overhead,
/// divided by GPUs per node; not for load), host_pinned. rel_error =
/// (measured - estimated) / estimated; 0 when both are 0, 1 when only the
/// estimate is 0. Returns {"components": [{"name","phase","estimated",
/// "measured","rel_error"}], "pass": all |rel_error| <= tolerance}.
nlohmann::json compare_with_estimate(const zeromem::Estimate& est, const zeromem::EstimateInput& in,
                                     const nlohmann::json& measured, double tolerance);

}  // namespace zeromem_cli
