// What only a real run can tell, fitted from its readings (calibrate.h) and
// kept as a calibration profile file that later estimates apply.
#pragma once

#include "zeromem/calibrate.h"
#include "zeromem/estimate.h"
#include "zeromem/types.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zeromem {

/// The profile. Fields of its JSON file (`--output profile.json`):
///  - "format": "zeromem calibration profile 1"
///  - "fitted_on": {"gpu", "deepspeed", "torch", "transformers"}: the GPU
///    preset and the software stack of the run; a profile applies only to
///    estimates of the same GPU type and stack unless forced.
///  - "inputs": the setup of the estimate it was fitted against (model,
///    params, gpus, nodes, stage, offload, dtype, micro_batch, seq_len) and
///    the logs it read.
///  - "process_baseline": {"bytes", "log", "source_line", "phase",
///    "measured_allocated", "estimated_allocated"} or null: bytes PyTorch held
///    beyond the modelled terms at the earliest reading that gives the
///    allocated bytes of a matched phase (measured - estimated; may be
///    negative). Applied as the process_baseline term: allocated bytes every
///    phase carries (input.h ResidualSettings::process_baseline; not below 0).
///  - "reserved_share": {"fraction", "log", "source_line",
///    "measured_peak_allocated", "measured_reserved"} or null: (reserved -
///    peak allocated) / peak allocated at the reading with the largest peak
///    (allocated where a reading gives no peak), the caching allocator's
///    reserved-but-unallocated share; null when it is not below 1. Applied
///    as the fragmentation fraction.
///  - "activation_scale": {"factor", "log", "source_line", "phase",
///    "measured_peak_allocated", "estimated_peak_allocated",
///    "estimated_activations"} or null: fitted only when the run's micro
///    batch or sequence length was not given (the estimate used defaults), at
///    the reading with the largest measured peak whose estimate is its own
///    phase's allocated bytes: (measured - baseline - (estimated -
///    activations)) / activations. Applied as a factor on the activations
///    only to estimates at the micro batch and sequence length it was fitted
///    at ("inputs"); null when the rest of the estimate already exceeds the
///    reading.
///  - "outside_allocator": {"bytes", "log", "source_line",
///    "measured_device_used", "measured_reserved"} or null: device used -
///    reserved by PyTorch at the first reading that gives both (the CUDA
///    out-of-memory message: total capacity - free, and reserved), i.e. the
///    CUDA context, NCCL buffers and anything else outside the caching
///    allocator, which no allocator counter separates. Applied as the
///    cuda_context term less the modelled NCCL buffers (not below 0).
/// An out-of-memory message is fitted for outside_allocator only: it is the
/// allocator at a failed request in an unfinished phase.
struct CalibrationProfile {
    std::string gpu;
    SoftwareStack stack;
    nlohmann::json inputs = nlohmann::json::object();
    std::optional<int64_t> process_baseline;
    std::optional<double> reserved_share;
    std::optional<double> activation_scale;
    std::optional<int64_t> outside_allocator;
    nlohmann::json process_baseline_evidence;  ///< the object written under "process_baseline"
    nlohmann::json reserved_share_evidence;    ///< the object written under "reserved_share"
    nlohmann::json activation_scale_evidence;  ///< the object written under "activation_scale"
    nlohmann::json outside_allocator_evidence; ///< the object written under "outside_allocator"
};

/// Fits the profile from `c` (calibrate's rows for `in`), naming `logs` among
/// its inputs; the activation scale only when `activations_stated` is false
/// (the micro batch or the sequence length was not given). Throws InputError
/// naming --gpu when `in` has no GPU preset (the profile must say which GPU
/// type it was fitted on).
CalibrationProfile fit_calibration_profile(const Calibration& c, const EstimateInput& in,
                                           const std::vector<std::string>& logs, bool activations_stated);

nlohmann::json calibration_profile_json(const CalibrationProfile& p);

/// Reads a profile file; InputError naming the file and field when it is not one.
CalibrationProfile read_calibration_profile(const std::string& path);
/// The same on the file's text, `path` naming it in errors.
CalibrationProfile parse_calibration_profile(const std::string& text, const std::string& path);

/// What applying a profile did: `header`, one line naming the terms taken from
/// it ("Calibration: PATH (fitted on ...): process baseline 13.14 GiB, ...")
/// for the estimate's header; `notes`, one per term taken; `warnings`, terms
/// left out and a profile applied to another GPU, stack, stage or offload.
struct CalibrationApplied {
    std::string header;
    std::vector<std::string> notes;
    std::vector<std::string> warnings;
};

/// Applies `p` to `in`: process_baseline = the fitted baseline (not below
/// 0), the fragmentation fraction = reserved share (replacing fixed bytes and
/// the replay's provider), activation_scale = the fitted factor when `in` has
/// the micro batch and sequence length it was fitted at, cuda_context = the
/// memory outside the allocator less the modelled NCCL buffers. Throws
/// InputError naming --calibration when `p` was fitted on another GPU type or
/// stack, unless `force`. Writes where each term came from into `prov` under
/// "process_baseline", "fragmentation", "activation_scale" and "cuda_context".
CalibrationApplied apply_calibration_profile(const CalibrationProfile& p, const std::string& path, bool force,
                                             EstimateInput& in, Provenance& prov);

}  // namespace zeromem
