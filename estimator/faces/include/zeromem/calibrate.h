// A real run's readings (run_log.h) held against the estimate of the same
// setup: each reading matched to an estimate phase, measured vs estimated in
// the same keys, the difference, and the phase's terms that may explain it.
#pragma once

#include "zeromem/estimate.h"
#include "zeromem/run_log.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zeromem {

/// The figures of one reading, or the estimate's for it, in bytes.
struct MemoryFigures {
    std::optional<int64_t> allocated, max_allocated, reserved, max_reserved, host, max_host, device_used;
};

/// One component of the estimated phase (GpuMemory's names), bytes per GPU.
struct PhaseTerm {
    std::string name;
    int64_t bytes = 0;
};

/// A memory snapshot's block held against the estimate's components.
struct BlockMatch {
    SnapshotBlock block;
    /// The estimate's component (GpuMemory's names: parameters, gradients,
    /// master_weights, momentum, variance, activations, temporary_buffers)
    /// the block belongs to; several joined by " / " when their sizes tie;
    /// empty when none matches.
    std::string term;
    std::string matched_by;  ///< "frame" (its frame names the component) or "size"; empty when none matches
    int64_t term_bytes = 0;  ///< the component's bytes in the phase (the nearest, for a tie)
};

/// The estimate's component a snapshot frame belongs to (GpuMemory's names
/// as above), or "" when the frame names none: the simulator's frames
/// (zeromem simulate --memory-snapshot) name their event terms.
using FrameComponent = std::function<std::string(const SnapshotFrame&)>;

/// One reading against the estimate.
struct CalibrationRow {
    std::string log_path;
    MemoryObservation observation;
    std::string phase;  ///< the estimate phase it is held against; empty when the message names none
    std::string why;    ///< how the phase was chosen ("message 'Engine after forward'")
    MemoryFigures measured;
    MemoryFigures estimated;
    MemoryFigures difference;       ///< measured - estimated, for each key both have
    std::vector<PhaseTerm> terms;   ///< the phase's components, largest first
    int64_t phase_allocated = 0;    ///< the phase's estimated allocated bytes (0 when no phase matches)
    std::string explained_by;       ///< the one term within 10% of the main difference, if any
    std::vector<BlockMatch> blocks; ///< memory snapshot: its largest blocks against the phase's components
};

struct Calibration {
    std::vector<CalibrationRow> rows;
    std::vector<std::string> notes;
};

/// The estimate phase (a name in `e.phases`) a reading is held against, from
/// its printer and message:
///  - see_memory_usage: "... after forward" / "before backward" -> forward,
///    "after backward" / "before step" / "before optimizer" -> backward (the
///    Max_MA printed there is the backward's peak: the counters reset at the
///    previous call), "after step" / "end step" / "after optimizer" ->
///    optimizer_step, "before forward" and the engine / ZeRO initialisation
///    messages (initialize, partitions, optimizer states) -> load;
///  - Megatron report_memory, ThroughputTimer, memory_stats, memory_summary,
///    nvidia-smi: steady_backward (their peaks count from the start, so the
///    estimate is the largest phase up to there), GNU time: the host peak phase;
///  - the allocator's out-of-memory message: the first phase whose estimate
///    overflows the GPU (else the peak phase);
///  - the Trainer's "train" deltas: the training phases less load;
///  - zeromem measure: its phase names are the estimate's;
///  - a memory snapshot: steady_backward (when in the step it was taken is
///    not recorded).
/// Empty, with `why` saying so, when nothing matches.
std::string match_phase(const MemoryObservation& o, const Estimate& e, std::string& why);

/// Every reading of `logs` against `e` (full convention: it needs e.phases;
/// throws InputError otherwise). The estimate has one figure per phase, that
/// phase's peak: allocated = total - cuda_context - fragmentation, reserved =
/// allocated + fragmentation, device_used = total, host = the node's host RAM
/// (per process: divided by the GPUs per node). A peak that counts from the
/// start is held against the largest phase up to the matched one; a Trainer
/// delta against the phase less the load phase. A memory snapshot's largest
/// blocks are matched to the phase's components: by `frame_component` of the
/// block's frame when it names one, else by size: the block's requested bytes
/// (its size without requested_size) within 1% of a model-state component
/// (parameters, gradients, master_weights, momentum, variance) or the
/// temporary buffers. At ZeRO-1/2 each model state is one flat tensor per
/// parameter group (stage_1_and_2.py single_partition_of_fp32_groups,
/// bit16_groups_flat); the largest group's differs from the whole by the
/// other groups (the HF Trainer's no-decay norms and biases: llama-2-7b
/// 266,240 of 6.74e9 parameters, GPT-2 0.1%) and by the alignment padding
/// (runtime/utils.py align_dense_tensors, under 2 N_d elements): well inside 1%.
Calibration calibrate(const std::vector<RunLog>& logs, const Estimate& e, const EstimateInput& in,
                      const FrameComponent& frame_component = {});

/// {"observations": [{"log", "format", "message", "phase", "why", "source_line",
/// "measured": {...}, "estimated": {...}, "difference": {...}, "terms": [{"name",
/// "bytes"}], "explained_by", "blocks": [{"address", "size", "requested_size",
/// "frame", "frame_from_trace", "term", "matched_by", "term_bytes"}]}],
/// "notes": [...]}; bytes, keys as MemoryFigures ("blocks" for snapshots only).
nlohmann::json calibration_json(const Calibration& c);

/// The table: one line per reading, GiB (2^30 bytes).
std::string render_calibration_table(const Calibration& c);

}  // namespace zeromem
