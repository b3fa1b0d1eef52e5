// Writers: JSON and CSV fields, the Chrome trace (Perfetto's required
// fields, google/perfetto json_trace_parser_impl.cc) and the snapshot pickle
// (read back by a small protocol-2 reader below; blocks must tile each
// segment, as torch/utils/viz/MemoryViz.js annotate_snapshot requires).
#include "tiny_model.h"
#include "zeromem/request.h"
#include "zeromem/sim_writers.h"
#include "zeromem/types.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <variant>
#include <vector>

using namespace zeromem;
using namespace zeromem::sim;

namespace {

EstimateInput tiny(int stage) {
    EstimateInput in;
    in.model.arch = zeromem::sim::testing::tiny_arch();
    in.model.params = 147776;
    in.cluster.gpus = 2;
    in.train.seq_len = 16;
    in.train.fused_optimizer = true;
    in.zero.stage = stage;
    in.zero.reduce_bucket_size = 20000;
    in.zero.stage3_param_persistence_threshold = 100;
    return in;
}

// --- a minimal pickle reader (protocol 2 opcodes that memory_viz accepts) ---
struct Value;
using Dict = std::map<std::string, std::shared_ptr<Value>>;
using List = std::vector<std::shared_ptr<Value>>;
struct Value {
    std::variant<std::monostate, bool, int64_t, std::string, List, Dict> v;
    const Dict& dict() const { return std::get<Dict>(v); }
    const List& list() const { return std::get<List>(v); }
    int64_t integer() const { return std::get<int64_t>(v); }
    const std::string& str() const { return std::get<std::string>(v); }
    const Value& operator[](const std::string& k) const { return *dict().at(k); }
};

std::shared_ptr<Value> unpickle(const std::string& s) {
    std::vector<std::shared_ptr<Value>> stack;
    std::vector<size_t> marks;
    size_t i = 0;
    auto u8 = [&]() { return static_cast<unsigned char>(s.at(i++)); };
    auto le = [&](int n) {
        uint64_t v = 0;
        for (int k = 0; k < n; ++k) v |= uint64_t(u8()) << (8 * k);
        return v;
    };
    auto push = [&](auto x) { stack.push_back(std::make_shared<Value>(Value{x})); };
    while (i < s.size()) {
        const unsigned char op = u8();
        switch (op) {
            case 0x80: u8(); break;                        // PROTO
            case '}': push(Dict{}); break;                 // EMPTY_DICT
            case ']': push(List{}); break;                 // EMPTY_LIST
            case '(': marks.push_back(stack.size()); break;  // MARK
            case 'X': { const size_t n = le(4); push(s.substr(i, n)); i += n; break; }
            case 'K': push(int64_t(le(1))); break;
            case 'M': push(int64_t(le(2))); break;
            case 'J': push(int64_t(int32_t(uint32_t(le(4))))); break;
            case 0x8a: {                                   // LONG1
                const int n = u8();
                push(int64_t(le(n)));
                break;
            }
            case 0x88: push(true); break;
            case 0x89: push(false); break;
            case 'N': push(std::monostate{}); break;
            case 'u': {                                    // SETITEMS
                const size_t m = marks.back(); marks.pop_back();
                Dict& d = std::get<Dict>(stack[m - 1]->v);
                for (size_t k = m; k + 1 < stack.size(); k += 2) d[stack[k]->str()] = stack[k + 1];
                stack.resize(m);
                break;
            }
            case 'e': {                                    // APPENDS
                const size_t m = marks.back(); marks.pop_back();
                List& l = std::get<List>(stack[m - 1]->v);
                for (size_t k = m; k < stack.size(); ++k) l.push_back(stack[k]);
                stack.resize(m);
                break;
            }
            case 't': {                                    // TUPLE (read as a list)
                const size_t m = marks.back(); marks.pop_back();
                List l(stack.begin() + static_cast<long>(m), stack.end());
                stack.resize(m);
                push(l);
                break;
            }
            case '.': return stack.back();                 // STOP
            default: ADD_FAILURE() << "unexpected opcode " << int(op) << " at " << i - 1; return nullptr;
        }
    }
    ADD_FAILURE() << "no STOP";
    return nullptr;
}

}  // namespace

TEST(SimWriters, JsonHasTheIssuesFields) {
    const SimResult r = simulate(tiny(3), SimOptions{});
    const auto j = to_json(r);
    for (const char* k : {"peak_allocated", "peak_reserved", "peak_event", "peak_module", "oom", "phases", "timeline"})
        EXPECT_TRUE(j.contains(k)) << k;
    EXPECT_TRUE(j["oom"].is_null());
    EXPECT_EQ(j["peak_allocated"].get<uint64_t>(), r.peak_allocated);
    ASSERT_FALSE(j["timeline"].empty());
    const std::set<std::string> want = {"t", "event", "phase", "module", "stream", "bytes", "allocated", "reserved"};
    for (const auto& p : j["timeline"]) {
        std::set<std::string> keys;
        for (auto it = p.begin(); it != p.end(); ++it) keys.insert(it.key());
        ASSERT_EQ(keys, want);
        ASSERT_TRUE(p["bytes"].is_number_integer());
    }
    for (const auto& p : j["phases"]) EXPECT_TRUE(p.contains("name") && p.contains("peak_allocated") && p.contains("peak_reserved"));
    // The timeline's running sum of bytes is the requested bytes live; the
    // allocated column is never below it (blocks are >= requests).
    int64_t live = 0;
    for (const auto& p : j["timeline"]) {
        live += p["bytes"].get<int64_t>();
        ASSERT_GE(p["allocated"].get<int64_t>(), live);
        ASSERT_GE(p["reserved"].get<int64_t>(), p["allocated"].get<int64_t>());
    }
}

TEST(SimWriters, CsvRowsMatchTimeline) {
    const SimResult r = simulate(tiny(2), SimOptions{});
    const std::string csv = render_csv(r);
    EXPECT_EQ(csv.substr(0, csv.find('\n')), "t,event,phase,module,stream,bytes,allocated,reserved");
    EXPECT_EQ(size_t(std::count(csv.begin(), csv.end(), '\n')), r.timeline.size() + 1);
}

TEST(SimWriters, OomIsReportedAsPyTorchDoes) {
    EstimateInput in = tiny(0);
    in.cluster.gpu_memory = 1048576;  // 1 MiB: the first request needs a 2 MiB small-pool segment
    const SimResult r = simulate(in, SimOptions{});
    ASSERT_TRUE(r.oom);
    EXPECT_EQ(r.oom->info.requested, 16384u);  // the embedding, 8192 x 2 B
    EXPECT_EQ(r.oom->info.allocated, 0u);
    EXPECT_EQ(r.oom->info.reserved, 0u);
    EXPECT_EQ(r.oom->module, "model.embed_tokens");
    EXPECT_EQ(r.oom->term, "parameter");
    EXPECT_TRUE(r.timeline.empty());
    EXPECT_NE(render_table(r).find("Tried to allocate 0.00 GiB"), std::string::npos);
    // No allocation succeeded: the peak lines say so instead of empty names.
    EXPECT_NE(render_table(r).find("peak allocated  0.00 GiB  (no allocation succeeded)"), std::string::npos);
    EXPECT_EQ(to_json(r)["oom"]["requested"].get<uint64_t>(), 16384u);
}

TEST(SimWriters, ChromeTraceHasPerfettoFields) {
    SimOptions opt;
    opt.steps = 1;
    const SimResult r = simulate(tiny(0), opt);
    const auto t = nlohmann::json::parse(chrome_trace(r).dump());  // round trip through text
    ASSERT_TRUE(t.contains("traceEvents"));
    size_t counters = 0, spans = 0;
    double last_end = 0;
    for (const auto& e : t["traceEvents"]) {
        ASSERT_TRUE(e.contains("name") && e.contains("ph") && e.contains("pid"));
        const std::string ph = e["ph"];
        if (ph == "C") {
            ++counters;
            ASSERT_TRUE(e["args"].is_object() && e["args"]["bytes"].is_number());
            ASSERT_TRUE(e["ts"].is_number());
        } else if (ph == "X") {
            ++spans;
            ASSERT_TRUE(e.contains("dur") && e["ts"].is_number());
            EXPECT_GE(e["ts"].get<double>(), last_end);  // slices on the compute thread do not overlap
            last_end = e["ts"].get<double>() + e["dur"].get<double>();
        } else {
            EXPECT_EQ(ph, "M");
        }
    }
    EXPECT_EQ(counters, 2 * r.timeline.size());  // allocated and reserved per event
    EXPECT_EQ(spans, 42u);                       // 21 modules, forward and backward
}

TEST(SimWriters, SnapshotPickleBlocksTileSegments) {
    SimOptions opt;
    opt.steps = 1;
    opt.record_allocator_trace = true;
    for (int stage : {0, 3}) {
        const SimResult r = simulate(tiny(stage), opt);
        const std::string bytes = memory_snapshot_pickle(r);
        ASSERT_EQ(static_cast<unsigned char>(bytes[0]), 0x80);
        ASSERT_EQ(bytes[1], 2);  // protocol 2
        const auto root = unpickle(bytes);
        ASSERT_TRUE(root);
        const auto& segs = (*root)["segments"].list();
        ASSERT_EQ(segs.size(), r.final_segments.size());
        ASSERT_FALSE(segs.empty());
        int64_t allocated = 0;
        for (const auto& s : segs) {
            int64_t addr = (*s)["address"].integer(), sum = 0, seg_alloc = 0;
            for (const auto& b : (*s)["blocks"].list()) {
                EXPECT_EQ((*b)["address"].integer(), addr);
                addr += (*b)["size"].integer();
                sum += (*b)["size"].integer();
                const std::string st = (*b)["state"].str();
                EXPECT_TRUE(st == "active_allocated" || st == "inactive") << st;
                if (st == "active_allocated") seg_alloc += (*b)["size"].integer();
            }
            EXPECT_EQ(sum, (*s)["total_size"].integer());
            EXPECT_EQ(seg_alloc, (*s)["allocated_size"].integer());
            allocated += seg_alloc;
        }
        EXPECT_EQ(uint64_t(allocated), r.timeline.back().allocated);
        const auto& traces = (*root)["device_traces"].list();
        ASSERT_EQ(traces.size(), 1u);
        const std::set<std::string> actions = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
                                               "segment_map", "segment_unmap", "oom"};
        size_t allocs = 0;
        for (const auto& e : traces[0]->list()) {
            EXPECT_TRUE(actions.count((*e)["action"].str()));
            allocs += (*e)["action"].str() == "alloc";
        }
        size_t timeline_allocs = 0;
        for (const auto& p : r.timeline) timeline_allocs += p.bytes > 0;
        EXPECT_EQ(allocs, timeline_allocs);
    }
}

// --explain: every event term the producer emits, for every stage, offload
// and checkpointing mode, names the code that allocates it and the
// estimator term it corresponds to (a new event without them fails here).
TEST(SimExplain, EveryEventTermHasASourceAndAnEstimatorTerm) {
    for (int stage = 0; stage <= 3; ++stage)
        for (const char* ck : {"none", "full", "selective"})
            for (const char* off : {"none", "cpu"}) {
                if (stage == 0 && std::string(off) == "cpu") continue;
                Request q;
                q.model = "gpt2-xl";
                q.gpus = 4;
                q.stage = stage;
                q.checkpointing = ck;
                q.offload_optimizer = off;
                if (stage == 3) q.offload_param = off;
                if (std::string(ck) == "selective") q.attention = "eager";
                const Resolved res = resolve_request(q, ZEROMEM_SOURCE_DATA_DIR);
                SimOptions opt;
                opt.steps = 1;
                const SimResult r = simulate(res.input, opt);
                for (const auto& e : explain(r)) {
                    EXPECT_STRNE(e.source, "") << e.term;
                    EXPECT_STRNE(e.estimator_term, "") << e.term;
                }
            }
    // The step's temporary names torch's foreach AdamW.
    EXPECT_NE(std::string(event_source("optimizer_temporary")).find("_multi_tensor_adamw"), std::string::npos);
    EXPECT_NE(std::string(event_estimator_term("reduce_scatter_concat_buffer")).find("zero3_reduce_scatter_cat"),
              std::string::npos);
}
