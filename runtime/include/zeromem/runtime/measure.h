// The measurement harness: runs init and training steps of the synthetic
// model under one ZeRO stage on one backend, records per-phase memory and
// time on every rank, gathers the ranks on rank 0, and sweeps the
// collectives with nccl-tests' bandwidth definitions.
#pragma once

#include "zeromem/input.h"
#include "zeromem/runtime/arch.h"  // runtime_arch
#include "zeromem/runtime/backend.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

namespace zeromem::runtime {

/// Settings of `zeromem measure` beyond the resolved input.
struct MeasureOptions {
    std::string backend = "auto";  ///< auto | host | cuda
    int64_t layers = 0;            ///< transformer blocks to build; 0 = the architecture's
    int steps = 2;                 ///< optimizer steps (each of grad_accum micro steps)
    double phase_timeout_s = 600;  ///< a phase longer than this aborts every rank
    bool progress = true;          ///< rank 0 prints "step i of n, elapsed, ETA" on stderr
};

/// Picks the backend: "host", "cuda", or "auto" (cuda when a device is
/// usable, else host; `note` then says why in one line). Throws InputError
/// for an unknown name or an unusable explicit cuda. MPI must be initialised.
std::unique_ptr<Backend> select_backend(const std::string& name, std::string& note);

/// Runs init and opt.steps optimizer steps on this rank and returns its
/// record: {"rank", "phases": [{"name","step","micro_step","seconds",
/// "peak_bytes": {where: {category: bytes, "total"}}, "end_bytes": ...,
/// "device_reported_used", "host_rss_peak"}], "oom": bool, "oom_detail"}.
/// Uses only shapes and settings of `in`, never an estimate. An allocation
/// failure is recorded as {"oom": true, "oom_detail": {phase, step,
/// requested_bytes, category, where, message}} and the run stops there.
nlohmann::json measure_rank(const EstimateInput& in, const MeasureOptions& opt, Backend& be);

/// The whole measurement: every rank's record gathered on rank 0 under
/// "ranks", plus the backend, model and settings. Other ranks get null.
nlohmann::json measure(const EstimateInput& in, const MeasureOptions& opt, Backend& be);

/// all_reduce, all_gather and reduce_scatter of fp32 data from min_bytes to
/// max_bytes (doubling), `iters` timed iterations after 2 warm-ups. Rows as
/// nccl-tests prints them: size (bytes of the full buffer: the all-gather
/// output, the reduce-scatter input), count (elements), time (us), algbw =
/// size / time, busbw = algbw · 2(n-1)/n for all-reduce and (n-1)/n for
/// all-gather and reduce-scatter (nccl-tests doc/PERFORMANCE.md). GB/s =
/// 1e9 B/s. Returns the rows on rank 0 (null elsewhere).
nlohmann::json collectives_sweep(Backend& be, int64_t min_bytes, int64_t max_bytes, int iters);

}  // namespace zeromem::runtime
