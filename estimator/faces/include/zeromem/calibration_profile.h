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
///    negative). Applied as an addition to the per-process cuda_context
///    term, which it joins as memory every phase carries.
///  - "reserved_share": {"fraction", "log", "source_line",
///    "measured_peak_allocated", "measured_reserved"} or null: (reserved -
///    peak allocated) / peak allocated at the reading with the largest peak
///    (allocated where a reading gives no peak), the caching allocator's
///    reserved-but-unallocated share; null when it is not below 1. Applied
///    as the fragmentation fraction.
struct CalibrationProfile {
    std::string gpu;
    SoftwareStack stack;
    nlohmann::json inputs = nlohmann::json::object();
    std::optional<int64_t> process_baseline;
    std::optional<double> reserved_share;
    nlohmann::json process_baseline_evidence;  ///< the object written under "process_baseline"
    nlohmann::json reserved_share_evidence;    ///< the object written under "reserved_share"
};

/// Fits the profile from `c` (calibrate's rows for `in`), naming `logs` among
/// its inputs. Throws InputError naming --gpu when `in` has no GPU preset
/// (the profile must say which GPU type it was fitted on).
CalibrationProfile fit_calibration_profile(const Calibration& c, const EstimateInput& in,
                                           const std::vector<std::string>& logs);

nlohmann::json calibration_profile_json(const CalibrationProfile& p);

/// Reads a profile file; InputError naming the file and field when it is not one.
CalibrationProfile read_calibration_profile(const std::string& path);

/// Applies `p` to `in`: cuda_context += process baseline (not below 0), the
/// fragmentation fraction = reserved share (replacing fixed bytes and the
/// replay's provider). Throws InputError naming --calibration when `p` was
/// fitted on another GPU type or stack, unless `force`. Returns one note per
/// term taken from the profile; writes where each came from into `prov`
/// under "cuda_context" and "fragmentation".
std::vector<std::string> apply_calibration_profile(const CalibrationProfile& p, const std::string& path, bool force,
                                                   EstimateInput& in, Provenance& prov);

}  // namespace zeromem
