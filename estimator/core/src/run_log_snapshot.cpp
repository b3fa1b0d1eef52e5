// PyTorch's memory snapshot (see run_log.h): the pickle
// torch.cuda.memory._dump_snapshot writes (torch/cuda/memory.py: pickle.dump
// of _snapshot(), Python's default protocol, 4 on Python 3.8-3.13), or the
// protocol-2 one of torch/csrc/cuda/memory_snapshot.cpp
// _memory_snapshot_pickled, read by the restricted unpickler
// (pickle_reader.h). The dict (torch/cuda/memory.py _snapshot docstring,
// torch/csrc/cuda/Module.cpp THCPModule_memorySnapshot):
//   segments: [{device, address, total_size, allocated_size, active_size,
//     requested_size, stream, segment_type, blocks: [{address, size,
//     requested_size, state: active_allocated | active_pending_free |
//     inactive, frames: [{filename, line, name}]}]}]
//   device_traces: per device [{action, addr, size, stream, frames, ...}]
// memory_allocated() counts the active_allocated blocks' sizes (the
// allocator's free() lowers allocated_bytes by block->size at the
// free_requested, c10/cuda/CUDACachingAllocator.cpp), memory_reserved() the
// segments' total_size. The trace's segment_alloc / segment_map add a
// segment's bytes and segment_free / segment_unmap remove them; its alloc and
// free_requested carry the requested size, not the block's, so the trace
// gives the reserved peak exactly but not the allocated one.
#include "pickle_reader.h"
#include "run_log_lines.h"

#include "zeromem/types.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <unordered_map>

namespace zeromem::run_log_detail {

namespace {

using pickle::Document;
using pickle::Kind;

constexpr int64_t kMaxBytes = int64_t(1) << 62;
constexpr int64_t kMaxDevices = 1 << 16;

// A string of the file as an error or the table shows it: control bytes as
// \xNN (an error stays one line), at most `limit` bytes.
std::string printable(std::string_view s, std::size_t limit = 80) {
    std::string out;
    for (const char ch : s.substr(0, limit)) {
        const auto c = static_cast<unsigned char>(ch);
        if (c >= 0x20 && c != 0x7f) {
            out.push_back(ch);
        } else {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", c);
            out += hex;
        }
    }
    return s.size() > limit ? out + "..." : out;
}

// The snapshot's fields, read with errors "<path>: byte N: memory snapshot:
// <field> <what>".
struct Fields {
    const Document& d;
    const std::string& path;

    [[noreturn]] void fail(uint32_t n, const std::string& field, const std::string& what) const {
        throw InputError(path + ": byte " + std::to_string(d.at(n).offset) + ": memory snapshot: " + field + " " + what);
    }
    uint32_t of_kind(uint32_t n, Kind k, const std::string& field) const {
        if (d.at(n).kind != k) fail(n, field, std::string("is ") + pickle::to_string(d.at(n).kind) + ", not " + pickle::to_string(k));
        return n;
    }
    std::optional<uint32_t> get(uint32_t dict, const char* key) const {
        const int64_t v = d.find(dict, key);
        return v < 0 ? std::nullopt : std::optional<uint32_t>(static_cast<uint32_t>(v));
    }
    uint32_t need(uint32_t dict, const char* key, const std::string& field) const {
        const auto v = get(dict, key);
        if (!v) fail(dict, field, std::string("has no '") + key + "'");
        return *v;
    }
    int64_t integer(uint32_t n, const std::string& field, int64_t low, int64_t high) const {
        of_kind(n, Kind::integer, field);
        const int64_t v = d.at(n).value;
        if (v < low || v > high) fail(n, field, "is " + std::to_string(v) + ", outside " + std::to_string(low) + ".." + std::to_string(high));
        return v;
    }
    uint64_t bytes(uint32_t n, const std::string& field) const { return static_cast<uint64_t>(integer(n, field, 0, kMaxBytes)); }
    std::string_view text(uint32_t n, const std::string& field) const { return d.text(of_kind(n, Kind::string, field)); }
    const std::vector<uint32_t>& list(uint32_t n, const std::string& field) const { return d.children(of_kind(n, Kind::list, field)); }
};

// The segments, blocks and trace entries read, held to the number of values the pickle holds: each is a
// dict of its own in a snapshot torch writes, so more can only come from one list referenced many times
// through the memo (BINGET), which would make a few kilobytes read as billions of blocks.
struct Budget {
    std::size_t left;
    void spend(const Fields& f, uint32_t list, std::size_t items, const std::string& field) {
        if (items > left)
            f.fail(list, field, "brings the segments, blocks and trace entries read beyond the " +
                                    std::to_string(f.d.nodes.size()) + " values the pickle holds: a list is "
                                    "referenced more than once through the pickle memo, which a snapshot torch "
                                    "writes never does");
        left -= items;
    }
};

// torch/cuda/_memory_viz.py _frame_filter: the unwinder's and the
// interpreter's own frames are not the allocation's.
bool kept_frame(std::string_view name, std::string_view filename) {
    static const char* const omit_functions[] = {"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
                                                 "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"};
    static const char* const omit_filenames[] = {"core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
                                                 "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
                                                 "cpython/abstract.h"};
    for (const char* f : omit_functions)
        if (name.find(f) != std::string_view::npos) return false;
    for (const char* f : omit_filenames)
        if (filename.find(f) != std::string_view::npos) return false;
    return true;
}

// The first kept frame of the frames list `n` (innermost first, as torch records them).
std::optional<SnapshotFrame> top_frame(const Fields& f, uint32_t n, const std::string& field) {
    const auto& frames = f.list(n, field);
    for (std::size_t k = 0; k < frames.size(); ++k) {
        const std::string at = field + "[" + std::to_string(k) + "]";
        const uint32_t fr = f.of_kind(frames[k], Kind::dict, at);
        SnapshotFrame s;
        s.filename = printable(f.text(f.need(fr, "filename", at), at + ".filename"), std::string_view::npos);
        s.name = printable(f.text(f.need(fr, "name", at), at + ".name"), std::string_view::npos);
        if (const auto line = f.get(fr, "line")) s.line = f.integer(*line, at + ".line", INT32_MIN, INT32_MAX);
        if (kept_frame(s.name, s.filename)) return s;
    }
    return std::nullopt;
}

// An allocated block before the largest are chosen.
struct Candidate {
    SnapshotBlock block;
    std::optional<uint32_t> frames;  // its frames list node
    std::string field;
};

// What one device's segments hold.
struct Device {
    uint64_t allocated = 0, reserved = 0;
    std::size_t segments = 0;
    std::vector<Candidate> blocks;
};

void read_block(const Fields& f, uint32_t n, const std::string& field, uint64_t& allocated, Device& dev) {
    f.of_kind(n, Kind::dict, field);
    const uint64_t size = f.bytes(f.need(n, "size", field), field + ".size");
    const std::string_view state = f.text(f.need(n, "state", field), field + ".state");
    if (state == "inactive" || state == "active_pending_free" || state == "active_awaiting_free") return;
    if (state != "active_allocated")
        f.fail(n, field + ".state", "is '" + printable(state) + "', not active_allocated, active_pending_free or inactive");
    allocated += size;
    Candidate c;
    c.block.size = size;
    if (const auto a = f.get(n, "address")) c.block.address = f.bytes(*a, field + ".address");
    if (const auto r = f.get(n, "requested_size")) c.block.requested = f.bytes(*r, field + ".requested_size");
    c.frames = f.get(n, "frames");
    c.field = field;
    dev.blocks.push_back(std::move(c));
}

// Every segment, by device.
std::map<int64_t, Device> read_segments(const Fields& f, uint32_t root, Budget& budget) {
    std::map<int64_t, Device> devices;
    const uint32_t list = f.need(root, "segments", "the snapshot");
    const auto& segments = f.list(list, "segments");
    budget.spend(f, list, segments.size(), "segments");
    for (std::size_t i = 0; i < segments.size(); ++i) {
        const std::string field = "segments[" + std::to_string(i) + "]";
        const uint32_t s = f.of_kind(segments[i], Kind::dict, field);
        Device& dev = devices[f.integer(f.need(s, "device", field), field + ".device", 0, kMaxDevices)];
        const uint64_t total = f.bytes(f.need(s, "total_size", field), field + ".total_size");
        uint64_t allocated = 0;
        const uint32_t block_list = f.need(s, "blocks", field);
        const auto& blocks = f.list(block_list, field + ".blocks");
        budget.spend(f, block_list, blocks.size(), field + ".blocks");
        for (std::size_t k = 0; k < blocks.size(); ++k) read_block(f, blocks[k], field + ".blocks[" + std::to_string(k) + "]", allocated, dev);
        // torch's snapshot() sums allocated_size over the same blocks.
        if (const auto a = f.get(s, "allocated_size"); a && f.bytes(*a, field + ".allocated_size") != allocated)
            f.fail(*a, field + ".allocated_size", "is " + std::to_string(f.d.at(*a).value) + ", but its active_allocated blocks hold " +
                                                      std::to_string(allocated) + " bytes");
        dev.allocated += allocated;
        dev.reserved += total;
        if (dev.allocated > uint64_t(kMaxBytes) || dev.reserved > uint64_t(kMaxBytes)) f.fail(s, field, "brings the device beyond 2^62 bytes");
        ++dev.segments;
    }
    return devices;
}

// One device's trace: the reserved peak and, for blocks without frames, the
// frames of the alloc that made them.
struct Trace {
    std::size_t entries = 0, unknown = 0;
    int64_t net = 0, high = 0;  // reserved bytes added by the trace, and its highest running sum
    std::unordered_map<uint64_t, uint32_t> live_alloc;  // address -> the trace entry of its alloc
};

Trace read_trace(const Fields& f, uint32_t list, const std::string& field, Budget& budget) {
    Trace t;
    const auto& entries = f.list(list, field);
    budget.spend(f, list, entries.size(), field);
    t.entries = entries.size();
    for (std::size_t k = 0; k < entries.size(); ++k) {
        const std::string at = field + "[" + std::to_string(k) + "]";
        const uint32_t e = f.of_kind(entries[k], Kind::dict, at);
        const std::string_view action = f.text(f.need(e, "action", at), at + ".action");
        const bool grows = action == "segment_alloc" || action == "segment_map";
        const bool shrinks = action == "segment_free" || action == "segment_unmap";
        if (grows || shrinks) {
            const auto size = static_cast<int64_t>(f.bytes(f.need(e, "size", at), at + ".size"));
            t.net += grows ? size : -size;
            if (t.net > kMaxBytes || t.net < -kMaxBytes) f.fail(e, at, "brings the trace's reserved bytes beyond 2^62");
            t.high = std::max(t.high, t.net);
        } else if (action == "alloc" || action == "free_requested") {
            const uint64_t addr = f.bytes(f.need(e, "addr", at), at + ".addr");
            if (action == "alloc") t.live_alloc[addr] = e;
            else t.live_alloc.erase(addr);
        } else if (action != "free_completed" && action != "oom" && action != "snapshot" && action != "annotate") {
            ++t.unknown;
        }
    }
    return t;
}

std::string gib(int64_t b) { return format_gib(static_cast<double>(b)) + " GiB"; }

// The reserved peak of the trace, when it starts from an empty allocator.
void trace_peak(const Trace& t, const Device& dev, int64_t device, MemoryObservation& o, RunLog& log) {
    auto& notes = log.notes;
    const std::string who = log.path + ": device " + std::to_string(device) + ": ";
    if (t.unknown)
        notes.push_back(who + std::to_string(t.unknown) + " trace entries with actions zeromem does not know were skipped");
    const int64_t start = static_cast<int64_t>(dev.reserved) - t.net;
    if (start < 0) {
        notes.push_back(who + "device_traces gives back " + gib(-start) + " more than the segments hold; no reserved peak read from it");
    } else if (start > 0) {
        notes.push_back(who + "the trace begins with " + gib(start) +
                        " already reserved (recording began after the first segments, or the ring buffer of "
                        "_record_memory_history(max_entries=...) dropped older entries), so its peak is not the run's: "
                        "max_reserved not read");
    } else {
        o.max_reserved = Reading{t.high, t.high, t.high};
        o.peak_window = PeakWindow::since_start;
    }
}

// The kSnapshotBlocks largest blocks with their top frames (a block without
// frames takes those of its alloc in the trace, when the sizes agree).
void largest_blocks(const Fields& f, Device& dev, const Trace* t, MemoryObservation& o) {
    auto& c = dev.blocks;
    const std::size_t n = std::min(c.size(), kSnapshotBlocks);
    std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(n), c.end(), [](const Candidate& a, const Candidate& b) {
        return a.block.size != b.block.size ? a.block.size > b.block.size : a.block.address < b.block.address;
    });
    for (std::size_t k = 0; k < n; ++k) {
        SnapshotBlock b = c[k].block;
        if (c[k].frames) b.frame = top_frame(f, *c[k].frames, c[k].field + ".frames");
        if (!b.frame && t) {
            const auto it = t->live_alloc.find(b.address);
            if (it != t->live_alloc.end()) {
                const auto size = f.get(it->second, "size");
                const auto frames = f.get(it->second, "frames");
                const bool same = size && (!b.requested || f.d.at(*size).value == static_cast<int64_t>(*b.requested));
                if (same && frames) b.frame = top_frame(f, *frames, "device_traces alloc at " + std::to_string(b.address) + ".frames");
                b.frame_from_trace = b.frame.has_value();
            }
        }
        o.largest_blocks.push_back(std::move(b));
    }
}

}  // namespace

void read_memory_snapshot(const std::string& data, const std::string& path, RunLog& log) {
    const Document d = pickle::parse(data, path);
    const Fields f{d, path};
    const uint32_t root = f.of_kind(d.root, Kind::dict, "the snapshot");
    Budget budget{d.nodes.size()};
    std::map<int64_t, Device> devices = read_segments(f, root, budget);
    std::vector<uint32_t> traces;
    if (const auto t = f.get(root, "device_traces")) {
        traces = f.list(*t, "device_traces");
        if (traces.size() > std::size_t(kMaxDevices) + 1)
            f.fail(*t, "device_traces", "has " + std::to_string(traces.size()) + " lists, one per device: more than " +
                                            std::to_string(kMaxDevices + 1) + " devices");
    }
    bool any_trace = false;
    for (std::size_t i = 0; i < traces.size(); ++i)
        if (!f.list(traces[i], "device_traces[" + std::to_string(i) + "]").empty()) {
            devices[static_cast<int64_t>(i)];  // a device whose segments were all given back is still a reading
            any_trace = true;
        }
    if (devices.empty())
        throw InputError(path + ": memory snapshot: no segments and no trace (nothing was allocated when it was taken)");
    for (auto& [device, dev] : devices) {
        MemoryObservation o;
        o.format = LogFormat::torch_memory_snapshot;
        o.line = 1;
        o.message = "snapshot, device " + std::to_string(device);
        o.allocated = Reading{int64_t(dev.allocated), int64_t(dev.allocated), int64_t(dev.allocated)};
        o.reserved = Reading{int64_t(dev.reserved), int64_t(dev.reserved), int64_t(dev.reserved)};
        std::optional<Trace> t;
        if (static_cast<std::size_t>(device) < traces.size()) {
            const std::string field = "device_traces[" + std::to_string(device) + "]";
            if (!f.list(traces[static_cast<std::size_t>(device)], field).empty()) {
                t = read_trace(f, traces[static_cast<std::size_t>(device)], field, budget);
                trace_peak(*t, dev, device, o, log);
            }
        }
        largest_blocks(f, dev, t ? &*t : nullptr, o);
        log.observations.push_back(std::move(o));
    }
    if (!any_trace)
        log.notes.push_back(path + ": the snapshot has no trace (torch.cuda.memory._record_memory_history was off): "
                                   "allocated and reserved at the moment it was taken, no peak");
}

}  // namespace zeromem::run_log_detail
