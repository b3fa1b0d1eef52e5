// The memory snapshot reader (run_log.h, run_log_snapshot.cpp) on the two
// writers torch has: CPython's pickle at protocols 2 and 4 (what
// torch.cuda.memory._dump_snapshot calls; tests/data/snapshots, written by
// make_snapshots.py there) and torch's C++ Pickler (snapshot_pickle.h, as
// _memory_snapshot_pickled writes), and calibrate's block matching. Expected
// bytes are the sizes written into those files, summed here:
//  - allocated = the active_allocated blocks' sizes (CUDACachingAllocator.cpp
//    free() lowers allocated_bytes by block->size at free_requested, so an
//    active_pending_free block is not allocated);
//  - reserved = the segments' total_size;
//  - max_reserved = the reserved bytes at the trace's highest point, when the
//    trace starts from an empty allocator.
#include "snapshot_pickle.h"

#include "zeromem/calibrate.h"
#include "zeromem/run_log.h"
#include "zeromem/types.h"

#include "input_error.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <tuple>

namespace {

using namespace zeromem;
using zeromem::testing::contains;
using zeromem::testing::error_of;

constexpr int64_t kMiB = int64_t(1) << 20;

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string snapshot_file(const std::string& name) { return std::string(ZEROMEM_TEST_DATA_DIR) + "/snapshots/" + name; }

std::string frame_of(const SnapshotBlock& b) {
    return b.frame ? b.frame->filename + ":" + std::to_string(b.frame->line) + ":" + b.frame->name : "-";
}

// make_snapshots.py's snapshot, read from the file written at `protocol`.
void expect_python_snapshot(const RunLog& log) {
    ASSERT_EQ(log.observations.size(), 2u);
    ASSERT_EQ(log.formats.size(), 1u);
    EXPECT_EQ(log.formats[0], LogFormat::torch_memory_snapshot);
    const MemoryObservation& d0 = log.observations[0];
    EXPECT_EQ(d0.message, "snapshot, device 0");
    // segment A: the 8 MiB active_allocated block (the 4 MiB active_pending_free
    // and 8 MiB inactive ones are not allocated); segment B: 512 + 1024 B.
    ASSERT_TRUE(d0.allocated && d0.reserved && d0.max_reserved);
    EXPECT_EQ(d0.allocated->bytes, 8 * kMiB + 512 + 1024);
    EXPECT_EQ(d0.allocated->low, d0.allocated->high);
    EXPECT_EQ(d0.reserved->bytes, 20 * kMiB + 2 * kMiB);
    // The trace makes A (20 MiB), B (2 MiB) and D (64 MiB), then gives D back.
    EXPECT_EQ(d0.max_reserved->bytes, 20 * kMiB + 2 * kMiB + 64 * kMiB);
    EXPECT_EQ(d0.peak_window, PeakWindow::since_start);
    ASSERT_EQ(d0.largest_blocks.size(), 3u);
    const SnapshotBlock& big = d0.largest_blocks[0];
    EXPECT_EQ(big.address, 0x7F0000000000u);
    EXPECT_EQ(big.size, uint64_t(8 * kMiB));
    EXPECT_EQ(big.requested, 8388000u);
    // The first frame is the unwinder's (unwind::unwind), which _memory_viz's _frame_filter drops.
    EXPECT_EQ(frame_of(big), "/opt/conda/lib/python3.11/site-packages/torch/optim/adamw.py:150:_init_group");
    EXPECT_FALSE(big.frame_from_trace);
    // The 1024 B block has no frames of its own: those of its alloc in the trace.
    EXPECT_EQ(d0.largest_blocks[1].size, 1024u);
    EXPECT_EQ(frame_of(d0.largest_blocks[1]), "model.py:7:embed");
    EXPECT_TRUE(d0.largest_blocks[1].frame_from_trace);
    EXPECT_EQ(d0.largest_blocks[2].size, 512u);
    EXPECT_EQ(d0.largest_blocks[2].requested, 400u);
    const MemoryObservation& d1 = log.observations[1];
    EXPECT_EQ(d1.message, "snapshot, device 1");
    EXPECT_EQ(d1.allocated->bytes, 40 * kMiB);
    EXPECT_EQ(d1.reserved->bytes, 40 * kMiB);
    // Its trace begins after segment C was made: no peak from it, and a note says why.
    EXPECT_FALSE(d1.max_reserved);
    ASSERT_EQ(log.notes.size(), 1u);
    EXPECT_TRUE(contains(log.notes[0], "device 1: the trace begins with 0.04 GiB already reserved")) << log.notes[0];
}

TEST(MemorySnapshot, PythonPickleProtocolFourAsDumpSnapshotWritesIt) {
    const std::string bytes = slurp(snapshot_file("python_p4.pickle"));
    ASSERT_EQ(static_cast<unsigned char>(bytes[0]), 0x80);
    ASSERT_EQ(bytes[1], 4);  // FRAME, SHORT_BINUNICODE, MEMOIZE, BINGET, LONG_BINGET (pickletools)
    expect_python_snapshot(read_run_log_file(snapshot_file("python_p4.pickle")));
}

TEST(MemorySnapshot, PythonPickleProtocolTwoWithLongMemo) {
    const std::string bytes = slurp(snapshot_file("python_p2.pickle"));
    ASSERT_EQ(bytes[1], 2);  // BINUNICODE, BINPUT, LONG_BINPUT, BINGET, LONG_BINGET
    expect_python_snapshot(read_run_log(bytes, "p2.pickle"));
}

TEST(MemorySnapshot, ProtocolFiveWritesTheSameOpcodes) {
    // Python 3.14's default protocol 5 adds only out-of-band buffers (PEP 574),
    // which plain values never use: the protocol-4 stream with PROTO 5.
    std::string bytes = slurp(snapshot_file("python_p4.pickle"));
    bytes[1] = 5;
    expect_python_snapshot(read_run_log(bytes, "p5.pickle"));
    bytes[1] = 6;
    EXPECT_TRUE(contains(error_of([&] { read_run_log(bytes, "p6.pickle"); }),
                         "p6.pickle: byte 0: pickle: protocol 6: zeromem reads protocols 2 to 5"));
}

// One device-0 snapshot as torch's C++ Pickler writes it: a 4 MiB large
// segment with a 3 MiB block (requested 3,145,000 B) and a 512 KiB block
// sharing one frames list, a 256 KiB active_pending_free block and the
// inactive rest; a trace from empty: segment_alloc 4 MiB, the allocs, a
// 16 MiB segment made and freed, free_requested of the pending block.
std::string torch_cpp_snapshot() {
    zeromem::testing::TorchPickler p;
    p.protocol();
    p.begin_dict();
    p.str("segments");
    p.begin_list();
    p.begin_dict();
    const int64_t base = 0x7F5500000000;
    for (const auto& [k, v] : std::initializer_list<std::pair<const char*, int64_t>>{
             {"device", 0}, {"address", base}, {"total_size", 4 * kMiB}, {"allocated_size", 3 * kMiB + kMiB / 2},
             {"active_size", 3 * kMiB + kMiB / 2 + kMiB / 4}, {"requested_size", 3145000 + 524288}, {"stream", 0}}) {
        p.str(k);
        p.integer(v);
    }
    p.str("segment_type"); p.str("large");
    p.str("segment_pool_id"); p.tuple2(0, 0);
    p.str("is_expandable"); p.boolean(false);
    p.str("frames"); p.begin_list(); const uint32_t empty = p.end_shared_list();
    p.str("blocks");
    p.begin_list();
    uint32_t frames = 0;
    const int64_t sizes[] = {3 * kMiB, kMiB / 2, kMiB / 4, kMiB / 4};
    const int64_t requested[] = {3145000, 524288, 262000, kMiB / 4};
    const char* states[] = {"active_allocated", "active_allocated", "active_pending_free", "inactive"};
    int64_t addr = base;
    for (int b = 0; b < 4; ++b) {
        p.begin_dict();
        p.str("address"); p.integer(addr);
        p.str("size"); p.integer(sizes[b]);
        p.str("requested_size"); p.integer(requested[b]);
        p.str("state"); p.str(states[b]);
        p.str("frames");
        if (b == 0) {  // CapturedTraceback frames, innermost first; memory_snapshot.cpp dedups them
            p.begin_list();
            for (const auto& [file, line, name] : std::initializer_list<std::tuple<const char*, int, const char*>>{
                     {"", 0, "CapturedTraceback::gather"}, {"/usr/include/c++/ceval.c", 3, "_PyEval_EvalFrameDefault"},
                     {"/opt/torch/nn/functional.py", 2143, "linear"}}) {
                p.begin_dict();
                p.str("name"); p.str(name);
                p.str("filename"); p.str(file);
                p.str("line"); p.integer(line);
                p.end_dict();
            }
            frames = p.end_shared_list();
        } else {
            p.get(b == 1 ? frames : empty);
        }
        p.end_dict();
        addr += sizes[b];
    }
    p.end_list();
    p.end_dict();
    p.end_list();
    p.str("device_traces");
    p.begin_list();
    p.begin_list();
    const std::tuple<const char*, int64_t, int64_t> trace[] = {
        {"segment_alloc", base, 4 * kMiB}, {"alloc", base, 3145000}, {"alloc", base + 3 * kMiB, 524288},
        {"alloc", base + 3 * kMiB + kMiB / 2, 262000}, {"segment_alloc", base + 8 * kMiB, 16 * kMiB},
        {"segment_free", base + 8 * kMiB, 16 * kMiB}, {"free_requested", base + 3 * kMiB + kMiB / 2, 262000}};
    for (const auto& [action, at, size] : trace) {
        p.begin_dict();
        p.str("action"); p.str(action);
        p.str("addr"); p.integer(at);
        p.str("size"); p.integer(size);
        p.str("stream"); p.integer(0);
        p.str("time_us"); p.integer(1722000000000000);
        p.end_dict();
    }
    p.end_list();
    p.end_list();
    p.str("allocator_settings");
    p.begin_dict();
    p.str("PYTORCH_CUDA_ALLOC_CONF"); p.str("");
    p.str("garbage_collection_threshold"); p.floating(0.0);
    p.str("expandable_segments"); p.boolean(false);
    p.end_dict();
    p.end_dict();
    p.stop();
    return p.out;
}

TEST(MemorySnapshot, TorchCppPicklerWithMemoizedStringsAndFrames) {
    const RunLog log = read_run_log(torch_cpp_snapshot(), "cpp.pickle");
    ASSERT_EQ(log.observations.size(), 1u);
    const MemoryObservation& o = log.observations[0];
    EXPECT_EQ(o.allocated->bytes, 3 * kMiB + kMiB / 2);  // the two active_allocated blocks
    EXPECT_EQ(o.reserved->bytes, 4 * kMiB);
    ASSERT_TRUE(o.max_reserved);
    EXPECT_EQ(o.max_reserved->bytes, 4 * kMiB + 16 * kMiB);
    ASSERT_EQ(o.largest_blocks.size(), 2u);
    // The gather and ceval.c frames are dropped (_frame_filter); both blocks share the frames list.
    EXPECT_EQ(frame_of(o.largest_blocks[0]), "/opt/torch/nn/functional.py:2143:linear");
    EXPECT_EQ(frame_of(o.largest_blocks[1]), "/opt/torch/nn/functional.py:2143:linear");
    EXPECT_EQ(o.largest_blocks[1].requested, 524288u);
    EXPECT_TRUE(log.notes.empty());
}

TEST(MemorySnapshot, WithoutATraceNoPeakAndANote) {
    zeromem::testing::TorchPickler p;
    p.protocol();
    p.begin_dict();
    p.str("segments");
    p.begin_list();
    p.begin_dict();
    p.str("device"); p.integer(3);
    p.str("total_size"); p.integer(2 * kMiB);
    p.str("blocks");
    p.begin_list();
    p.begin_dict(); p.str("size"); p.integer(2 * kMiB); p.str("state"); p.str("active_allocated"); p.end_dict();
    p.end_list();
    p.end_dict();
    p.end_list();
    p.str("device_traces"); p.begin_list(); p.begin_list(); p.end_list(); p.end_list();
    p.end_dict();
    p.stop();
    const RunLog log = read_run_log(p.out, "state.pickle");
    ASSERT_EQ(log.observations.size(), 1u);
    EXPECT_EQ(log.observations[0].message, "snapshot, device 3");
    EXPECT_EQ(log.observations[0].allocated->bytes, 2 * kMiB);
    EXPECT_FALSE(log.observations[0].max_reserved);
    EXPECT_FALSE(log.observations[0].largest_blocks[0].requested);  // torch < 2.1 wrote no requested_size
    ASSERT_EQ(log.notes.size(), 1u);
    EXPECT_TRUE(contains(log.notes[0], "no trace (torch.cuda.memory._record_memory_history was off)"));
}

// calibrate.h: a block is its frame's component when the frame names one,
// else the components within 1% of its requested bytes.
TEST(MemorySnapshot, CalibrateMatchesBlocksByFrameThenSize) {
    Estimate e;
    PhaseMemory p;
    p.name = "steady_backward";
    p.per_gpu.parameters = 1030;            // the 1024 B block: 6 B off, within 1% (10.3 B)
    p.per_gpu.master_weights = 8 * kMiB;    // the 8 MiB block requested 8,388,000 B: 608 B off (1%: 83,886 B)
    p.per_gpu.momentum = 8 * kMiB;
    p.per_gpu.variance = 8 * kMiB;
    p.per_gpu.temporary_buffers = 500;      // the 512 B block requested 400 B: 100 B off, beyond 1% (5 B)
    p.per_gpu.allocated = 3 * 8 * kMiB + 1030 + 500;  // torch.cuda.memory_allocated's figure (estimate.h)
    p.per_gpu.total = p.per_gpu.allocated;
    e.phases = {p};
    e.peak_phase = "steady_backward";
    const EstimateInput in;
    const std::vector<RunLog> logs = {read_run_log_file(snapshot_file("python_p4.pickle"))};
    const Calibration by_size = calibrate(logs, e, in);
    ASSERT_EQ(by_size.rows.size(), 2u);
    const auto& b = by_size.rows[0].blocks;
    ASSERT_EQ(b.size(), 3u);
    EXPECT_EQ(b[0].term, "master_weights / momentum / variance");
    EXPECT_EQ(b[0].matched_by, "size");
    EXPECT_EQ(b[0].term_bytes, 8 * kMiB);
    EXPECT_EQ(b[1].term, "parameters");
    EXPECT_EQ(b[2].term, "");
    EXPECT_EQ(b[2].matched_by, "");
    const FrameComponent adam = [](const SnapshotFrame& f) { return f.name == "_init_group" ? std::string("momentum") : ""; };
    const Calibration by_frame = calibrate(logs, e, in, adam);
    EXPECT_EQ(by_frame.rows[0].blocks[0].term, "momentum");
    EXPECT_EQ(by_frame.rows[0].blocks[0].matched_by, "frame");
    EXPECT_EQ(by_frame.rows[0].phase, "steady_backward");
    EXPECT_EQ(by_frame.rows[0].measured.allocated, 8 * kMiB + 512 + 1024);
    EXPECT_EQ(by_frame.rows[0].estimated.allocated, 3 * 8 * kMiB + 1030 + 500);
    ASSERT_EQ(by_frame.notes.size(), 1u);  // the reader's note on device 1's trace
    const nlohmann::json j = calibration_json(by_frame);
    EXPECT_EQ(j["observations"][0]["blocks"][0]["frame"], "adamw.py:150:_init_group");
    EXPECT_EQ(j["observations"][0]["blocks"][0]["requested_size"], 8388000);
    EXPECT_TRUE(contains(render_calibration_table(by_frame), "adamw.py:150:_init_group"));
}

}  // namespace
