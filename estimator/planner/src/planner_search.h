// The search helpers compare, plan (planner.cpp) and fit (fit.cpp) share; private to the library.
#pragma once

#include "zeromem/advice.h"
#include "zeromem/planner.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zeromem::planner_detail {

/// Runs f(0), ..., f(n-1), independent evaluations that write their results by index, on up to the
/// machine's cores (ZEROMEM_THREADS caps them; 1 runs them in order on this thread), so the outcome is the
/// sequential one. After all have run, the exception of the lowest index is rethrown: the one the loop in
/// order would have thrown first.
void for_each_index(size_t n, const std::function<void(size_t)>& f);
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
/// ranks_before on the three keys it reads (fits, tight, tokens/s), for rankings that keep no estimate.
bool ranks_before_by(bool a_fits, bool a_tight, double a_tok_s, bool b_fits, bool b_tight, double b_tok_s);
/// Plan's step 12 (plan_tuning.cpp): de-escalates and re-tunes over `space` from step 11's first fit
/// (r.first_fit), sets r.winner to the first in the ranking that fits and, with `replay_fits`, replays,
/// and appends the step to r.
void tune_for_speed(const EstimateInput& base, EstimateInput& in, const EstimateInput& plan_base,
                    const Candidate& fit, const std::vector<int64_t>& divs, int64_t per_gpu,
                    const SpeedHardware& hw, const PlanSpace& space, const SpeedConstants& k,
                    const ReplayFits& replay_fits, PlanResult& r);
/// The settings the emitted config sets (HF Trainer stage-3 bucket rules, DeepSpeed's optimizer), applied to `in`.
void apply_emitted_settings(EstimateInput& in);

/// One set of ZeRO-Infinity host-RAM knobs (nvme_host_knobs.cpp).
struct NvmeHostKnobs {
    std::vector<SettingChange> changes;  ///< DeepSpeed config paths and values, as the user writes them
    std::string why;
    bool (*apply)(EstimateInput& in);    ///< applies the set to `in`; false when it changes nothing there
};
/// The sets, in the order tried: what `estimate`'s host advice proposes and
/// plan's step 10 searches when the GPU fits but the node's RAM does not.
const std::vector<NvmeHostKnobs>& nvme_host_knobs();
/// Plan's step 10 when `failed` (the ZeRO-Infinity rung at micro batch 1)
/// fits the GPU but not the node's RAM: tries each nvme_host_knobs set, one
/// plan step each, and returns the first candidate that fits, carrying the
/// settings it changed; `in` and `plan_base` then keep them for steps 11-12.
std::optional<Candidate> shrink_host_buffers(const Candidate& failed, EstimateInput& in, EstimateInput& plan_base,
                                             const SpeedHardware& hw, const SpeedConstants& k, PlanResult& r);
/// Copies the host-RAM settings `from` changed (Candidate's optional fields) onto `to`.
void carry_host_knobs(const Candidate& from, Candidate& to);

}  // namespace zeromem::planner_detail
