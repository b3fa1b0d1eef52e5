// Readings of a run against the estimate (see zeromem/calibrate.h).
#include "zeromem/calibrate.h"

#include "zeromem/types.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>

namespace zeromem {

namespace {

bool has(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

// The see_memory_usage message's phase; empty when it names none.
std::string see_memory_usage_phase(const std::string& message) {
    const std::string m = to_lower(message);
    if (has(m, "after forward") || has(m, "before backward")) return "forward";
    if (has(m, "after backward") || has(m, "before step") || has(m, "before optimizer")) return "backward";
    if (has(m, "after step") || has(m, "end step") || has(m, "after optimizer ") || m == "after optimizer") return "optimizer_step";
    if (has(m, "before forward") || has(m, "initializ") || has(m, "partitions") || has(m, "optimizer states") ||
        has(m, "deepspeed engine") || has(m, "configure distributed"))
        return "load";
    return {};
}

int phase_index(const Estimate& e, const std::string& name) {
    for (std::size_t k = 0; k < e.phases.size(); ++k)
        if (e.phases[k].name == name) return static_cast<int>(k);
    return -1;
}

// torch.cuda.memory_allocated's and memory_reserved's figures (estimate.h GpuMemory).
int64_t allocated_of(const PhaseMemory& p) { return static_cast<int64_t>(p.per_gpu.allocated); }
int64_t reserved_of(const PhaseMemory& p) { return static_cast<int64_t>(p.per_gpu.reserved); }
int64_t device_of(const PhaseMemory& p) { return static_cast<int64_t>(p.per_gpu.total); }

std::optional<int64_t> bytes_of(const std::optional<Reading>& r) {
    return r ? std::optional<int64_t>(r->bytes) : std::nullopt;
}

MemoryFigures measured_figures(const MemoryObservation& o) {
    return {bytes_of(o.allocated), bytes_of(o.max_allocated), bytes_of(o.reserved), bytes_of(o.max_reserved),
            bytes_of(o.host),      bytes_of(o.max_host),      bytes_of(o.device_used)};
}

// The largest `f` over phases first..last (inclusive).
int64_t largest(const Estimate& e, int first, int last, const std::function<int64_t(const PhaseMemory&)>& f) {
    int64_t best = f(e.phases[std::size_t(first)]);
    for (int k = first + 1; k <= last; ++k) best = std::max(best, f(e.phases[std::size_t(k)]));
    return best;
}

// The estimate for the keys `o` has, at phase k.
MemoryFigures estimated_figures(const MemoryObservation& o, const Estimate& e, const EstimateInput& in, int k) {
    MemoryFigures est;
    const PhaseMemory& p = e.phases[std::size_t(k)];
    const int64_t ranks_per_node = std::max<int64_t>(1, in.cluster.gpus / std::max<int64_t>(1, in.cluster.nodes));
    auto host = [&](const PhaseMemory& q) {
        const auto h = static_cast<int64_t>(q.per_node.host_memory);
        return o.host_scope == HostScope::process ? h / ranks_per_node : h;
    };
    if (o.baseline == Baseline::since_start) {  // Trainer deltas: against the phase less load
        const int load = phase_index(e, "load");
        const int step = phase_index(e, "optimizer_step");
        if (load < 0 || step < 0) return est;
        const int64_t base = allocated_of(e.phases[std::size_t(load)]);
        if (o.allocated) est.allocated = allocated_of(e.phases[std::size_t(step)]) - base;
        if (o.max_allocated) est.max_allocated = largest(e, load + 1, k, allocated_of) - base;
        return est;
    }
    const bool from_start = o.peak_window == PeakWindow::since_start;
    const int first = from_start ? 0 : k;
    if (o.allocated) est.allocated = allocated_of(p);
    if (o.max_allocated) est.max_allocated = largest(e, first, k, allocated_of);
    if (o.reserved) est.reserved = reserved_of(p);
    if (o.max_reserved) est.max_reserved = largest(e, first, k, reserved_of);
    if (o.host) est.host = host(p);
    if (o.max_host) est.max_host = largest(e, first, k, host);
    if (o.device_used) est.device_used = from_start ? largest(e, 0, k, device_of) : device_of(p);
    return est;
}

MemoryFigures difference_of(const MemoryFigures& m, const MemoryFigures& e) {
    auto d = [](const std::optional<int64_t>& a, const std::optional<int64_t>& b) -> std::optional<int64_t> {
        return a && b ? std::optional<int64_t>(*a - *b) : std::nullopt;
    };
    return {d(m.allocated, e.allocated), d(m.max_allocated, e.max_allocated), d(m.reserved, e.reserved),
            d(m.max_reserved, e.max_reserved), d(m.host, e.host), d(m.max_host, e.max_host),
            d(m.device_used, e.device_used)};
}

std::vector<PhaseTerm> terms_of(const PhaseMemory& p) {
    const GpuMemory& g = p.per_gpu;
    std::vector<PhaseTerm> t = {{"parameters", int64_t(g.parameters)},   {"gradients", int64_t(g.gradients)},
                                {"optimizer_states", int64_t(g.optimizer_states)},
                                {"activations", int64_t(g.activations)}, {"temporary_buffers", int64_t(g.temporary_buffers)},
                                {"cublas_workspaces", int64_t(g.cublas_workspaces)},
                                {"process_baseline", int64_t(g.process_baseline)},
                                {"cuda_context", int64_t(g.cuda_context)}, {"nccl_buffers", int64_t(g.nccl_buffers)},
                                {"fragmentation", int64_t(g.fragmentation)}};
    t.erase(std::remove_if(t.begin(), t.end(), [](const PhaseTerm& x) { return x.bytes == 0; }), t.end());
    std::stable_sort(t.begin(), t.end(), [](const PhaseTerm& a, const PhaseTerm& b) { return a.bytes > b.bytes; });
    return t;
}

// The term within 10% of the first difference (peak first), if one is.
std::string explaining_term(const MemoryFigures& d, const std::vector<PhaseTerm>& terms) {
    std::optional<int64_t> main;
    for (const auto* v : {&d.max_allocated, &d.allocated, &d.device_used, &d.max_reserved, &d.reserved})
        if (*v) {
            main = *v;
            break;
        }
    if (!main || *main == 0) return {};
    const int64_t gap = std::llabs(*main);
    std::string best;
    int64_t best_off = gap / 10 + 1;
    for (const auto& t : terms)
        if (const int64_t off = std::llabs(t.bytes - gap); off < best_off) {
            best = t.name;
            best_off = off;
        }
    return best;
}

// The components a snapshot block may be: the model states (one flat tensor
// per parameter group at ZeRO-1/2) and the temporary buffers.
std::vector<PhaseTerm> block_terms(const PhaseMemory& p) {
    const GpuMemory& g = p.per_gpu;
    return {{"parameters", int64_t(g.parameters)},   {"gradients", int64_t(g.gradients)},
            {"master_weights", int64_t(g.master_weights)}, {"momentum", int64_t(g.momentum)},
            {"variance", int64_t(g.variance)},       {"temporary_buffers", int64_t(g.temporary_buffers)},
            {"activations", int64_t(g.activations)}};
}

// By its frame's component, else by size within 1% (calibrate.h).
BlockMatch match_block(const SnapshotBlock& b, const PhaseMemory& p, const FrameComponent& frame_component) {
    BlockMatch m;
    m.block = b;
    const std::vector<PhaseTerm> terms = block_terms(p);
    if (b.frame && frame_component) {
        const std::string c = frame_component(*b.frame);
        for (const auto& t : terms)
            if (!c.empty() && t.name == c) {
                m.term = c;
                m.matched_by = "frame";
                m.term_bytes = t.bytes;
                return m;
            }
    }
    const auto bytes = static_cast<int64_t>(b.requested.value_or(b.size));
    int64_t best = -1;
    for (const auto& t : terms) {
        if (t.name == "activations" || t.bytes <= 0) continue;  // activations are many tensors
        const int64_t off = std::llabs(bytes - t.bytes);
        if (off > t.bytes / 100) continue;
        m.term += (m.term.empty() ? "" : " / ") + t.name;
        if (best < 0 || off < best) {
            best = off;
            m.term_bytes = t.bytes;
        }
    }
    if (!m.term.empty()) m.matched_by = "size";
    return m;
}

}  // namespace

std::string match_phase(const MemoryObservation& o, const Estimate& e, std::string& why) {
    std::string phase;
    switch (o.format) {
    case LogFormat::ds_see_memory_usage:
        phase = see_memory_usage_phase(o.message);
        why = "message '" + o.message + "'";
        break;
    case LogFormat::torch_oom_message:
        phase = !e.first_oom_phase.empty() ? e.first_oom_phase : e.peak_phase;
        why = e.first_oom_phase.empty() ? "out of memory; the estimate does not overflow, held against its peak phase"
                                        : "out of memory; the first phase whose estimate overflows the GPU";
        break;
    case LogFormat::hf_trainer_metrics:
        if (o.message == "train") phase = "steady_backward";
        why = "Trainer '" + o.message + "' stage deltas";
        break;
    case LogFormat::gnu_time_verbose:
        phase = e.host_peak_phase;
        why = "peak resident set: the host peak phase";
        break;
    case LogFormat::zeromem_measure:
        phase = o.message;
        why = "zeromem measure phase";
        break;
    case LogFormat::torch_memory_snapshot:
        phase = "steady_backward";
        why = "memory snapshot: when in the step it was taken is not recorded; held against steady_backward";
        break;
    default:
        phase = "steady_backward";
        why = std::string(to_string(o.format)) + ": peaks from the start, through a training step";
        break;
    }
    if (!phase.empty() && phase_index(e, phase) < 0) phase.clear();
    if (phase.empty()) why += ": no estimate phase matches";
    return phase;
}

Calibration calibrate(const std::vector<RunLog>& logs, const Estimate& e, const EstimateInput& in,
                      const FrameComponent& frame_component) {
    if (e.phases.empty()) throw InputError("--convention: calibrate needs the full convention (its phases)");
    Calibration c;
    bool rounded_ca = false, deltas = false;
    for (const RunLog& log : logs)
        for (const MemoryObservation& o : log.observations) {
            CalibrationRow r;
            r.log_path = log.path;
            r.observation = o;
            r.measured = measured_figures(o);
            r.phase = match_phase(o, e, r.why);
            if (const int k = phase_index(e, r.phase); k >= 0) {
                r.estimated = estimated_figures(o, e, in, k);
                r.difference = difference_of(r.measured, r.estimated);
                r.terms = terms_of(e.phases[std::size_t(k)]);
                r.phase_allocated = allocated_of(e.phases[std::size_t(k)]);
                r.explained_by = explaining_term(r.difference, r.terms);
                for (const auto& b : o.largest_blocks)
                    r.blocks.push_back(match_block(b, e.phases[std::size_t(k)], frame_component));
            } else {
                for (const auto& b : o.largest_blocks) r.blocks.push_back(BlockMatch{b, {}, {}, 0});
            }
            rounded_ca = rounded_ca || (o.format == LogFormat::ds_see_memory_usage && o.max_reserved);
            deltas = deltas || o.baseline == Baseline::since_start;
            c.rows.push_back(std::move(r));
        }
    for (const RunLog& log : logs) c.notes.insert(c.notes.end(), log.notes.begin(), log.notes.end());
    if (rounded_ca)
        c.notes.push_back("see_memory_usage: Max_CA is rounded to a whole GiB (+-0.5 GiB); Max_MA and Max_CA are "
                          "the peaks since the previous call (reset_peak_memory_stats after each print)");
    if (deltas)
        c.notes.push_back("HF Trainer metrics are deltas from the start of train(): held against the estimate "
                          "less its load phase");
    return c;
}

namespace {

nlohmann::json figures_json(const MemoryFigures& f) {
    nlohmann::json j = nlohmann::json::object();
    auto put = [&](const char* k, const std::optional<int64_t>& v) {
        if (v) j[k] = *v;
    };
    put("allocated", f.allocated);
    put("max_allocated", f.max_allocated);
    put("reserved", f.reserved);
    put("max_reserved", f.max_reserved);
    put("host", f.host);
    put("max_host", f.max_host);
    put("device_used", f.device_used);
    return j;
}

std::string frame_text(const SnapshotFrame& f) {  // torch/cuda/_memory_viz.py _frame_fmt: file:line:function
    return f.filename.substr(f.filename.find_last_of('/') + 1) + ":" + std::to_string(f.line) + ":" + f.name;
}

nlohmann::json blocks_json(const std::vector<BlockMatch>& blocks) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& m : blocks) {
        const SnapshotBlock& b = m.block;
        out.push_back({{"address", b.address},
                       {"size", b.size},
                       {"requested_size", b.requested ? nlohmann::json(*b.requested) : nlohmann::json()},
                       {"frame", b.frame ? nlohmann::json(frame_text(*b.frame)) : nlohmann::json()},
                       {"frame_from_trace", b.frame_from_trace},
                       {"term", m.term.empty() ? nlohmann::json() : nlohmann::json(m.term)},
                       {"matched_by", m.matched_by.empty() ? nlohmann::json() : nlohmann::json(m.matched_by)},
                       {"term_bytes", m.term.empty() ? nlohmann::json() : nlohmann::json(m.term_bytes)}});
    }
    return out;
}

// The table's lines for a snapshot's largest blocks.
std::string blocks_table(const std::vector<BlockMatch>& blocks) {
    if (blocks.empty()) return {};
    std::string out = "    largest allocated blocks: GiB  requested GiB  top frame (file:line:function) -> estimate component GiB (matched by)\n";
    char buf[512];
    for (const auto& m : blocks) {
        const SnapshotBlock& b = m.block;
        std::string frame = b.frame ? frame_text(*b.frame) + (b.frame_from_trace ? " (from the trace)" : "") : "-";
        if (frame.size() > 70) frame = frame.substr(0, 67) + "...";
        const std::string term = m.term.empty() ? "no component of this size"
                                                : m.term + " " + format_gib(double(m.term_bytes)) + " (" + m.matched_by + ")";
        std::snprintf(buf, sizeof buf, "    %9s %9s  %-70s -> %s\n", format_gib(double(b.size)).c_str(),
                      b.requested ? format_gib(double(*b.requested)).c_str() : "-", frame.c_str(), term.c_str());
        out += buf;
    }
    return out;
}

}  // namespace

nlohmann::json calibration_json(const Calibration& c) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : c.rows) {
        nlohmann::json terms = nlohmann::json::array();
        for (const auto& t : r.terms) terms.push_back({{"name", t.name}, {"bytes", t.bytes}});
        rows.push_back({{"log", r.log_path},
                        {"format", to_string(r.observation.format)},
                        {"message", r.observation.message},
                        {"source_line", r.observation.line},
                        {"phase", r.phase.empty() ? nlohmann::json() : nlohmann::json(r.phase)},
                        {"why", r.why},
                        {"measured", figures_json(r.measured)},
                        {"estimated", figures_json(r.estimated)},
                        {"difference", figures_json(r.difference)},
                        {"terms", terms},
                        {"explained_by", r.explained_by.empty() ? nlohmann::json() : nlohmann::json(r.explained_by)}});
        if (r.observation.format == LogFormat::torch_memory_snapshot) rows.back()["blocks"] = blocks_json(r.blocks);
    }
    return {{"observations", rows}, {"notes", c.notes}};
}

std::string render_calibration_table(const Calibration& c) {
    std::string out = "Measured vs estimated per reading, GiB (2^30 bytes); difference = measured - estimated\n";
    char buf[256];
    std::snprintf(buf, sizeof buf, "%-28s %5s %-34s %-15s %-13s %9s %9s %9s  %s\n", "log", "line", "message", "phase",
                  "figure", "measured", "estimate", "diff", "near term");
    out += buf;
    auto g = [](int64_t b) { return format_gib(double(b)); };
    for (const auto& r : c.rows) {
        std::string log = r.log_path.substr(r.log_path.find_last_of('/') + 1);
        if (log.size() > 28) log = log.substr(0, 25) + "...";
        std::string msg = r.observation.message.size() > 34 ? r.observation.message.substr(0, 31) + "..." : r.observation.message;
        const std::pair<const char*, const std::optional<int64_t>*> keys[] = {
            {"allocated", &r.measured.allocated}, {"max_allocated", &r.measured.max_allocated},
            {"reserved", &r.measured.reserved},   {"max_reserved", &r.measured.max_reserved},
            {"host", &r.measured.host},           {"max_host", &r.measured.max_host},
            {"device_used", &r.measured.device_used}};
        const std::optional<int64_t>* est[] = {&r.estimated.allocated, &r.estimated.max_allocated, &r.estimated.reserved,
                                               &r.estimated.max_reserved, &r.estimated.host, &r.estimated.max_host,
                                               &r.estimated.device_used};
        bool first = true;
        for (std::size_t k = 0; k < 7; ++k) {
            if (!*keys[k].second) continue;
            const auto& m = **keys[k].second;
            const auto& e = *est[k];
            std::snprintf(buf, sizeof buf, "%-28s %5zu %-34s %-15s %-13s %9s %9s %9s  %s\n", first ? log.c_str() : "",
                          r.observation.line, first ? msg.c_str() : "", first ? (r.phase.empty() ? "-" : r.phase.c_str()) : "",
                          keys[k].first, g(m).c_str(), e ? g(*e).c_str() : "-", e ? g(m - *e).c_str() : "-",
                          first ? r.explained_by.c_str() : "");
            out += buf;
            first = false;
        }
        out += blocks_table(r.blocks);
    }
    for (const auto& n : c.notes) out += "note: " + n + "\n";
    return out;
}

}  // namespace zeromem
