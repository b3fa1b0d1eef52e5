// The memory snapshot pickle (protocol 2), as torch.cuda.memory._dump_snapshot
// writes it and PyTorch's memory_viz reads it. Only the opcodes memory_viz's
// unpickler accepts are used: PROTO, EMPTY_DICT, EMPTY_LIST, MARK, SETITEMS,
// APPENDS, TUPLE, BINUNICODE, BININT1/BININT2/BININT, LONG1, NEWTRUE,
// NEWFALSE, STOP; no memo (torch/utils/viz/MemoryViz.js's unpickler).
#include "zeromem/sim_writers.h"

namespace zeromem::sim {

using zeromem::InputError;

namespace {

class Pickler {
public:
    std::string out;
    void op(char c) { out.push_back(c); }
    void u32(uint32_t v) {
        for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    }
    void str(const std::string& s) {
        op('X');  // BINUNICODE
        u32(static_cast<uint32_t>(s.size()));
        out += s;
    }
    void integer(uint64_t v) {
        if (v < 256) {
            op('K');  // BININT1
            out.push_back(static_cast<char>(v));
        } else if (v < 65536) {
            op('M');  // BININT2
            out.push_back(static_cast<char>(v & 0xff));
            out.push_back(static_cast<char>((v >> 8) & 0xff));
        } else if (v < 0x80000000ULL) {
            op('J');  // BININT (signed 32)
            u32(static_cast<uint32_t>(v));
        } else {
            // LONG1: little-endian two's complement, with a 0 byte if the top bit is set.
            std::string bytes;
            uint64_t x = v;
            while (x) {
                bytes.push_back(static_cast<char>(x & 0xff));
                x >>= 8;
            }
            if (static_cast<unsigned char>(bytes.back()) & 0x80) bytes.push_back('\0');
            op('\x8a');
            out.push_back(static_cast<char>(bytes.size()));
            out += bytes;
        }
    }
    void boolean(bool b) { op(b ? '\x88' : '\x89'); }
    void begin_dict() { op('}'); op('('); }
    void end_dict() { op('u'); }
    void begin_list() { op(']'); op('('); }
    void end_list() { op('e'); }
    void key(const char* k) { str(k); }
};

void frames(Pickler& p, const std::string& module, const std::string& event) {
    p.begin_list();
    p.begin_dict();
    p.key("filename"); p.str(module);
    p.key("line"); p.integer(0);
    p.key("name"); p.str(event);
    p.end_dict();
    p.end_list();
}

void segment(Pickler& p, const SegmentInfo& s) {
    uint64_t alloc = 0, req = 0;
    for (const auto& b : s.blocks)
        if (b.allocated) { alloc += b.size; req += b.requested; }
    p.begin_dict();
    p.key("device"); p.integer(0);
    p.key("address"); p.integer(s.address);
    p.key("total_size"); p.integer(s.size);
    p.key("allocated_size"); p.integer(alloc);
    p.key("active_size"); p.integer(alloc);
    p.key("requested_size"); p.integer(req);
    p.key("stream"); p.integer(static_cast<uint64_t>(s.stream));
    p.key("segment_type"); p.str(s.small ? "small" : "large");
    p.key("segment_pool_id"); p.op('('); p.integer(0); p.integer(0); p.op('t');
    p.key("is_expandable"); p.boolean(s.expandable);
    p.key("frames"); p.op(']');
    p.key("blocks");
    p.begin_list();
    for (const auto& b : s.blocks) {
        p.begin_dict();
        p.key("address"); p.integer(b.address);
        p.key("size"); p.integer(b.size);
        p.key("requested_size"); p.integer(b.allocated ? b.requested : b.size);
        p.key("state"); p.str(b.allocated ? "active_allocated" : "inactive");
        p.key("frames"); p.op(']');
        p.end_dict();
    }
    p.end_list();
    p.end_dict();
}

void trace_entry(Pickler& p, const TraceEntry& e, const SimResult& r) {
    p.begin_dict();
    p.key("action"); p.str(e.action);
    if (std::string(e.action) == "oom") { p.key("device_free"); p.integer(0); }
    else { p.key("addr"); p.integer(e.addr); }
    p.key("size"); p.integer(e.size);
    p.key("stream"); p.integer(static_cast<uint64_t>(e.stream));
    p.key("time_us"); p.integer(e.time);
    const TimelinePoint* tp = e.time < r.timeline.size() ? &r.timeline[e.time] : nullptr;
    p.key("frames");
    if (tp) frames(p, r.modules[tp->module], std::string(to_string(tp->phase)) + ":" + tp->term);
    else p.op(']');
    p.end_dict();
}

}  // namespace

std::string memory_snapshot_pickle(const SimResult& r) {
    Pickler p;
    p.op('\x80');
    p.out.push_back('\x02');  // PROTO 2
    p.begin_dict();
    p.key("segments");
    p.begin_list();
    for (const auto& s : r.final_segments) segment(p, s);
    p.end_list();
    p.key("device_traces");
    p.begin_list();
    p.begin_list();
    for (const auto& e : r.allocator_trace) trace_entry(p, e, r);
    p.end_list();
    p.end_list();
    p.key("allocator_settings");
    p.begin_dict();
    p.key("PYTORCH_CUDA_ALLOC_CONF"); p.str("simulated by zeromem");
    p.end_dict();
    p.end_dict();
    p.op('.');  // STOP
    return p.out;
}

std::string snapshot_frame_component(const SnapshotFrame& frame) {
    const auto colon = frame.name.find(':');
    if (colon == std::string::npos) return {};
    const std::string phase = frame.name.substr(0, colon), term = frame.name.substr(colon + 1);
    bool ours = false;
    for (int p = 0; p < kPhaseCount; ++p) ours = ours || phase == to_string(static_cast<Phase>(p));
    if (!ours || term.empty()) return {};
    if (term == "fp32_partition" || term == "fp32_master") return "master_weights";
    if (term == "exp_avg" || term == "momentum_buffer") return "momentum";
    if (term == "exp_avg_sq") return "variance";
    return estimator_component(term);  // parameters, gradients, activations, temporary_buffers (optimizer_states: none left)
}

}  // namespace zeromem::sim
