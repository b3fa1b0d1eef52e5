// Replays an EventLog through the CachingAllocator and records what the
// writers show: timeline, spans, peaks per phase, the OOM.
#include "zeromem/process_terms.h"
#include "zeromem/sim_writers.h"
#include "zeromem/simulator.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

namespace zeromem::sim {

using zeromem::InputError;

const char* const kComponents[kComponentCount] = {"parameters", "gradients", "optimizer_states", "activations",
                                                  "temporary_buffers"};

const char* estimator_component(const std::string& t) {
    if (t == "parameter" || t == "bit16_groups_flat" || t == "persistent_parameter" || t == "param_partition" ||
        t == "lp_param_buffer" || t == "bf16_groups_flat")
        return kComponents[0];
    if (t == "gradient" || t == "grads_in_partition" || t == "grad_partitions_flat_buffer" ||
        t == "bf16_optimizer_fp32_grad_buffer" || t == "init_fp32_grad_partition")
        return kComponents[1];
    if (t == "fp32_master" || t == "fp32_partition" || t == "exp_avg" || t == "exp_avg_sq" || t == "momentum_buffer")
        return kComponents[2];
    // Every activation term the producer writes is named in explain.cpp's tables (one list), whose
    // estimator term starts with "activations".
    if (std::strncmp(event_estimator_term(t), "activations", 11) == 0) return kComponents[3];
    return kComponents[4];
}

namespace {

int component_index(const char* term) {
    const char* c = estimator_component(term);
    for (int i = 0; i < kComponentCount; ++i)
        if (c == kComponents[i]) return i;
    return kComponentCount - 1;
}

// The events that set the allocated and reserved peaks; their names are
// copied into the result once, after the replay (set_peak_names).
struct PeakEvents {
    const Event* allocated = nullptr;
    const Event* reserved = nullptr;
};

void note_peaks(SimResult& r, PeakEvents& pe, const Event& e, const CachingAllocator& a, uint64_t t,
                const std::array<uint64_t, kComponentCount>& live) {
    r.peak_requested = std::max(r.peak_requested, a.requested());
    if (a.allocated() > r.peak_allocated) {
        r.peak_composition = live;
        r.peak_allocated = a.allocated();
        r.peak_allocated_t = t;
        pe.allocated = &e;
        r.reserved_at_peak = a.reserved();
    }
    if (a.reserved() > r.peak_reserved) {
        r.peak_reserved = a.reserved();
        r.peak_reserved_t = t;
        pe.reserved = &e;
    }
    PhasePeak& p = r.phases[static_cast<size_t>(e.phase)];
    p.seen = true;
    p.peak_allocated = std::max(p.peak_allocated, a.allocated());
    p.peak_reserved = std::max(p.peak_reserved, a.reserved());
}

void set_peak_names(SimResult& r, const EventLog& log, const PeakEvents& pe) {
    if (pe.allocated) {
        r.peak_event = pe.allocated->term;
        r.peak_module = log.modules[pe.allocated->module];
    }
    if (pe.reserved) {
        r.peak_reserved_event = pe.reserved->term;
        r.peak_reserved_module = log.modules[pe.reserved->module];
    }
}

}  // namespace

SimResult replay(const EventLog& log, const SimOptions& opt, std::optional<uint64_t> capacity) {
    SimResult r;
    r.modules = log.modules;
    r.capacity = capacity;
    r.phases.resize(kPhaseCount);
    for (int i = 0; i < kPhaseCount; ++i) r.phases[static_cast<size_t>(i)].phase = static_cast<Phase>(i);
    CachingAllocator a(opt.alloc, capacity, opt.record_allocator_trace);
    std::vector<uint32_t> handle(log.events.size() + 1, 0);
    std::vector<std::pair<uint64_t, const char*>> open(log.modules.size(), {0, nullptr});
    r.timeline.reserve(log.events.size());
    std::array<uint64_t, kComponentCount> live{};
    std::vector<int> comp_of(log.events.size() + 1, 0);  // per tensor id
    std::unordered_map<const char*, int> comp_of_term;    // terms are string literals: look each up once
    PeakEvents peak_events;
    for (const Event& e : log.events) {
        const uint64_t t = r.timeline.size();
        if (e.action == Action::span_begin) {
            open[e.module] = {t, e.term};
            continue;
        }
        if (e.action == Action::span_end) {
            r.spans.push_back({e.module, e.term, open[e.module].first, t, e.phase});
            continue;
        }
        if (e.action == Action::empty_cache) {
            a.empty_cache(t);
        } else if (e.action == Action::alloc) {
            const auto h = a.malloc(e.bytes, e.stream, t);
            if (!h) {
                r.oom = SimOom{*a.oom(), 0, e.term, log.modules[e.module], e.phase, t};
                break;
            }
            if (handle.size() <= e.tensor) {
                handle.resize(e.tensor + 1, 0);
                comp_of.resize(e.tensor + 1, 0);
            }
            handle[e.tensor] = *h;
            auto it = comp_of_term.find(e.term);
            if (it == comp_of_term.end()) it = comp_of_term.emplace(e.term, component_index(e.term)).first;
            comp_of[e.tensor] = it->second;
            live[static_cast<size_t>(comp_of[e.tensor])] += e.bytes;
        } else {
            a.free(handle[e.tensor], t);
            live[static_cast<size_t>(comp_of[e.tensor])] -= e.bytes;
        }
        const int64_t signed_bytes = e.action == Action::alloc ? static_cast<int64_t>(e.bytes)
                                     : e.action == Action::free ? -static_cast<int64_t>(e.bytes) : 0;
        r.timeline.push_back({t, e.term, e.phase, e.module, e.stream, signed_bytes, a.allocated(), a.reserved()});
        note_peaks(r, peak_events, e, a, t, live);
    }
    set_peak_names(r, log, peak_events);
    std::vector<PhasePeak> seen;
    for (const auto& p : r.phases)
        if (p.seen) seen.push_back(p);
    r.phases = std::move(seen);
    r.final_segments = a.segments();
    if (opt.record_allocator_trace) r.allocator_trace = a.trace();
    return r;
}

SimResult simulate(const EstimateInput& in, const SimOptions& opt) {
    const EventLog log = produce_events(in, opt);
    ProcessMemory proc = process_memory(in);
    const std::optional<uint64_t> capacity = fragmentation_capacity(in);
    SimResult r = replay(log, opt, capacity);
    r.fragmentation = fragmentation_report(log, opt, capacity);
    r.process = std::move(proc);
    if (r.oom && in.cluster.gpu_memory) r.oom->device_total = *in.cluster.gpu_memory;
    // The job stops at a GPU out-of-memory: the host replay stops with it.
    r.host = simulate_host(in, opt.steps, r.oom ? std::optional<Phase>(r.oom->phase) : std::nullopt);
    return r;
}

}  // namespace zeromem::sim
