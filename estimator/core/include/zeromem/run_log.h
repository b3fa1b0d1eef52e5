// Readers of the memory readings a real training run prints: DeepSpeed,
// Megatron-DeepSpeed, PyTorch, the HF Trainer, nvidia-smi and GNU time, and
// PyTorch's memory snapshot pickle. The format is recognised by content;
// every figure comes back in bytes with the range the printed digits allow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zeromem {

/// Where a reading comes from (one per printer).
enum class LogFormat {
    ds_see_memory_usage,     ///< deepspeed.runtime.utils see_memory_usage: MA / Max_MA / CA / Max_CA (GiB)
    ds_throughput_timer,     ///< deepspeed.utils.timer ThroughputTimer: MemAllocated / MaxMemAllocated (GiB)
    megatron_report_memory,  ///< Megatron report_memory: "memory (MB) | allocated: ..." (MiB)
    hf_trainer_metrics,      ///< transformers TrainerMemoryTracker: <stage>_mem_{gpu,cpu}_{alloc,peaked}_delta
    torch_memory_stats,      ///< json.dumps(torch.cuda.memory_stats()): exact bytes
    torch_memory_summary,    ///< torch.cuda.memory_summary() table
    torch_oom_message,       ///< the caching allocator's "CUDA out of memory. Tried to allocate ..."
    nvidia_smi_csv,          ///< nvidia-smi --query-gpu=memory.used[,memory.total] --format=csv
    gnu_time_verbose,        ///< /usr/bin/time -v: "Maximum resident set size (kbytes)"
    zeromem_measure,         ///< zeromem measure --output JSON
    torch_memory_snapshot,   ///< torch.cuda.memory._dump_snapshot pickle: exact bytes per segment and block
};
const char* to_string(LogFormat f);

/// One printed figure in bytes. The printer rounded or truncated it, so the
/// true value lies in [low, high]; `bytes` is the printed value itself.
struct Reading {
    int64_t bytes = 0;
    int64_t low = 0;
    int64_t high = 0;
};

/// What a figure counts from.
enum class Baseline {
    absolute,    ///< bytes in use
    since_start  ///< bytes more than at the start of the stage (HF Trainer deltas; may be negative)
};

/// Over what window a max_* figure is the peak.
enum class PeakWindow {
    since_start,    ///< torch's counters since the process start (or the last reset the log does not show)
    since_previous  ///< since the previous reading: see_memory_usage calls reset_peak_memory_stats() after printing
};

/// What a host figure covers.
enum class HostScope {
    node,    ///< the whole machine: psutil virtual_memory() total - available (see_memory_usage)
    process  ///< one process: its resident set (GNU time, the Trainer's psutil RSS deltas)
};

/// One frame of an allocation's stack trace as a memory snapshot records it
/// (torch/cuda/memory.py _snapshot: Frame {filename, line, name}).
struct SnapshotFrame {
    std::string filename;
    int64_t line = 0;
    std::string name;
};

/// One allocated block of a memory snapshot (state "active_allocated").
struct SnapshotBlock {
    uint64_t address = 0;
    uint64_t size = 0;                   ///< the block, as memory_allocated() counts it
    std::optional<uint64_t> requested;   ///< the tensor's bytes (requested_size; torch >= 2.1 writes it)
    /// The innermost frame torch/cuda/_memory_viz.py _frame_filter keeps (the
    /// unwinder's and the interpreter's own frames are skipped), if any.
    std::optional<SnapshotFrame> frame;
    bool frame_from_trace = false;       ///< the block has no frames; these are its alloc's in device_traces
};

/// The most readings one file gives: a calibration compares a few steps, and
/// a log of more (a memory printout at every step of a long run) is refused
/// at the reading past this, with the advice to cut it, rather than held.
constexpr std::size_t kMaxReadings = 50000;

/// The largest blocks a snapshot reading keeps (largest first).
constexpr std::size_t kSnapshotBlocks = 8;

/// One reading of a log: the message printed with it and whichever figures
/// the printer gives (each optional). GPU figures are of one device.
struct MemoryObservation {
    LogFormat format = LogFormat::ds_see_memory_usage;
    std::string message;   ///< the phase as the log names it ("Engine after forward", "(after 10 iterations)", "train")
    std::size_t line = 0;  ///< 1-based line of the reading in its file
    std::optional<int> rank;  ///< "[Rank N]" where the log names it
    std::optional<Reading> allocated;      ///< torch.cuda.memory_allocated
    std::optional<Reading> max_allocated;  ///< torch.cuda.max_memory_allocated
    std::optional<Reading> reserved;       ///< torch.cuda.memory_reserved
    std::optional<Reading> max_reserved;   ///< torch.cuda.max_memory_reserved
    std::optional<Reading> host;           ///< host RAM in use
    std::optional<Reading> max_host;       ///< host RAM peak
    std::optional<Reading> device_used;    ///< whole device in use (nvidia-smi; OOM: capacity - free)
    std::optional<Reading> device_total;   ///< device capacity
    std::optional<Reading> requested;      ///< OOM: the allocation that failed
    Baseline baseline = Baseline::absolute;
    PeakWindow peak_window = PeakWindow::since_start;
    HostScope host_scope = HostScope::node;
    std::vector<SnapshotBlock> largest_blocks;  ///< memory snapshot: its kSnapshotBlocks largest allocated blocks
};

/// The readings of one file, in line order.
struct RunLog {
    std::string path;
    std::vector<LogFormat> formats;  ///< the formats found, in order of first appearance
    std::vector<MemoryObservation> observations;
    std::vector<std::string> notes;  ///< what the reader could not read, and why (memory snapshot: the trace)
};

/// Reads `text` (the contents of `path`, named in errors). Bytes opening with
/// the pickle PROTO opcode (0x80) are read as a memory snapshot (one reading
/// per device: allocated = the active_allocated blocks, reserved = the
/// segments, max_reserved = the peak of device_traces when it starts from an
/// empty allocator; errors "<path>: byte <offset>: ..."). A JSON document is
/// read as torch.cuda.memory_stats() or zeromem measure output; any other
/// text line by line by every line reader. Throws InputError "<path>:<line>:
/// <format>: <what>" for a reading that is malformed or cut off, and
/// "<path>: no memory reading recognised ..." when no reader finds one, and
/// at the reading past kMaxReadings. A UTF-8 byte-order mark before the text
/// is skipped.
RunLog read_run_log(const std::string& text, const std::string& path);

/// read_run_log of a file; InputError when it cannot be read (or is larger
/// than 64 MiB, a memory snapshot 256 MiB).
RunLog read_run_log_file(const std::string& path);

}  // namespace zeromem
