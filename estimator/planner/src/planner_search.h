// The search helpers compare, plan (planner.cpp) and fit (fit.cpp) share; private to the library.
#pragma once

#include "zeromem/planner.h"

#include <optional>
#include <string>
#include <vector>

namespace zeromem::planner_detail {

/// The divisors of v, ascending.
std::vector<int64_t> divisors(int64_t v);
/// Fits the GPU and, where a host capacity is given, the host.
bool fits_of(const Estimate& e);
/// Fits (fits_of), but the GPU only inside the estimate's error band (gpu_verdict "tight").
bool tight_of(const Estimate& e);
/// Refuses a search without a GPU capacity, naming the subcommand.
void require_capacity(const EstimateInput& base, const char* what);
/// The reduce bucket step 12 scales: hidden^2 with an architecture, else DeepSpeed's 5e8.
int64_t model_bucket(const EstimateInput& base);
/// Evaluates `c` in the working input `in` (mutated), filling memory, time, fits and tight.
void evaluate(Candidate& c, EstimateInput& in, const SpeedHardware& hw, const SpeedConstants& k);
/// Whether `c` at divs[i] fits, estimated with `in`.
bool fits_at(Candidate c, const std::vector<int64_t>& divs, int64_t i, int64_t per_gpu, EstimateInput& in);
/// Largest micro batch among `divs` (ascending) that fits; -1 if none.
int64_t largest_fitting(Candidate c, const std::vector<int64_t>& divs, int64_t per_gpu, EstimateInput& in);
/// A candidate of option `o` with `base`'s dtype, overlap_comm, bucket and generation settings.
Candidate base_candidate(const EstimateInput& base, const ZeroOption& o);
/// "12345 tokens/s".
std::string tok_s(double v);
/// "12.34 GiB".
std::string gib(uint64_t bytes);
/// Why DeepSpeed refuses option `o` with `base`'s settings on `data_parallel` ranks, or nothing.
std::optional<std::string> option_refusal(const EstimateInput& base, const ZeroOption& o, int64_t data_parallel);
bool option_allowed(const EstimateInput& base, const ZeroOption& o, int64_t data_parallel);
/// The settings the emitted config sets (HF Trainer stage-3 bucket rules, DeepSpeed's optimizer), applied to `in`.
void apply_emitted_settings(EstimateInput& in);

}  // namespace zeromem::planner_detail
