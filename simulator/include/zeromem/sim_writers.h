// Writers of a SimResult: table, JSON, CSV timeline, Chrome trace-event JSON
// (Perfetto) and the torch.cuda.memory._dump_snapshot pickle.
#pragma once

#include "zeromem/run_log.h"
#include "zeromem/simulator.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace zeromem::sim {

/// Human table: peak allocated/reserved (GiB = 2^30 B) with event and module,
/// per-phase peaks, reserved minus allocated at the peak, and the OOM line as
/// PyTorch prints it.
std::string render_table(const SimResult& r);

/// JSON object with "peak_allocated", "peak_reserved", "peak_event",
/// "peak_module", "oom" (null or {"requested","allocated","reserved",
/// "capacity","event","module","phase","t"}), "phases" (list of
/// {"name","peak_allocated","peak_reserved"}) and "timeline" (list of
/// {"t","event","phase","module","stream","bytes","allocated","reserved"});
/// all sizes integer bytes, "bytes" negative for a free.
nlohmann::json to_json(const SimResult& r);

/// The timeline as CSV with the header
/// t,event,phase,module,stream,bytes,allocated,reserved.
std::string render_csv(const SimResult& r);

/// Chrome trace-event JSON ({"traceEvents":[...]}) that Perfetto opens: "M"
/// metadata naming process and stream threads, "C" counters "allocated" and
/// "reserved" (args {"bytes": N}), one "X" span per module per pass on the
/// compute thread. ts = event index in microseconds (simulated time).
/// Source: the Trace Event Format as Perfetto reads it (google/perfetto
/// src/trace_processor/importers/json/json_trace_parser_impl.cc,
/// docs/getting-started/other-formats.md).
nlohmann::json chrome_trace(const SimResult& r);

/// The pickle (protocol 2) torch.cuda.memory._dump_snapshot writes: a dict
/// with "segments" (final allocator state: address, total_size, blocks that
/// tile the segment with state active_allocated or inactive, ...),
/// "device_traces" (one list for device 0: alloc, free_requested,
/// free_completed, segment_alloc, segment_free, segment_map, segment_unmap,
/// oom) and "allocator_settings". Needs r.allocator_trace (record it with
/// SimOptions::record_allocator_trace). Format: PyTorch
/// torch/csrc/cuda/memory_snapshot.cpp, as torch/utils/viz/MemoryViz.js reads it.
std::string memory_snapshot_pickle(const SimResult& r);

/// The estimator component (GpuMemory's names: parameters, gradients,
/// master_weights, momentum, variance, activations, temporary_buffers) of a
/// frame memory_snapshot_pickle writes ("<phase>:<event term>"); "" for any
/// other frame. zeromem calibrate's calibrate.h FrameComponent.
std::string snapshot_frame_component(const SnapshotFrame& frame);

/// One event term for --explain: the estimator component and term it
/// corresponds to, the DeepSpeed v0.19.6 / PyTorch code that allocates it,
/// the bytes live at the peak allocated and the largest single request.
struct EventExplanation {
    std::string term;
    const char* component = "";
    const char* estimator_term = "";
    const char* source = "";
    uint64_t bytes_at_peak = 0, largest = 0;
};

/// The allocating code of an event term (file and function), "" if unknown.
const char* event_source(const std::string& term);
/// The estimator term (terms.h function or component) an event term
/// corresponds to, "" if unknown.
const char* event_estimator_term(const std::string& term);
/// Every event term of `r` in order of first appearance.
std::vector<EventExplanation> explain(const SimResult& r);
/// --explain text: one block per event term (GiB = 2^30 B).
std::string render_explain(const SimResult& r);

/// Throws InputError naming the path and `flag` if `path` cannot be written;
/// leaves no file behind (an existing one is left unchanged).
void check_writable(const std::string& path, const std::string& flag);

/// Writes `text` to `path` through `path`.partial, renamed over it once
/// complete (a failed write leaves neither; a pipe or device such as
/// /dev/stdout is written directly); returns the bytes written.
/// Throws InputError naming the path and `flag` if it cannot be written.
uint64_t write_file(const std::string& path, const std::string& text, const std::string& flag);

/// "wrote PATH (12.3 MiB)" (KiB below 1 MiB; MiB = 2^20 bytes).
std::string wrote_line(const std::string& path, uint64_t bytes);

}  // namespace zeromem::sim
