// The host allocator model and the host replay (host_allocator.h).
#include "zeromem/host_allocator.h"

#include "zeromem/stack_facts.h"
#include "zeromem/types.h"

#include <algorithm>
#include <stdexcept>

namespace zeromem::sim {

HostAllocatorConfig host_allocator_config(const std::string& torch_version) {
    SoftwareStack stack;  // the torch version alone decides; the rest stays the built-in stack
    stack.torch = torch_version;
    const StackFacts f = stack_facts(stack);
    HostAllocatorConfig c;
    c.round_pinned = f.rounds_pinned_to_power_of_two;
    c.same_size_reuse = f.reuses_pinned_same_size_only;
    return c;
}

HostAllocator::HostAllocator(HostAllocatorConfig cfg) : cfg_(cfg) {}

uint64_t HostAllocator::pinned_block_size(uint64_t bytes) const {
    if (!cfg_.round_pinned || bytes <= 1) return bytes;
    uint64_t p = 1;  // c10::llvm::PowerOf2Ceil
    while (p < bytes) p <<= 1;
    return p;
}

const char* to_string(HostKind k) {
    switch (k) {
        case HostKind::pageable: return "pageable";
        case HostKind::pinned: return "pinned";
        case HostKind::locked: return "locked";
    }
    return "pageable";
}

uint32_t HostAllocator::malloc(uint64_t bytes, HostKind kind) {
    Block b;
    b.requested = bytes;
    b.kind = kind;
    b.live = true;
    allocated_ += bytes;
    if (kind != HostKind::pinned) {
        b.size = bytes;
        (kind == HostKind::locked ? pinned_ : pageable_) += bytes;
        blocks_.push_back(b);
        return static_cast<uint32_t>(blocks_.size());
    }
    const uint64_t size = pinned_block_size(bytes);
    // CachingHostAllocator.h allocate: a cached block first (same size bucket
    // from torch 2.5, best fit before), else a new pinned block.
    auto it = cfg_.same_size_reuse ? free_pinned_.find(size) : free_pinned_.lower_bound(size);
    if (it != free_pinned_.end()) {
        const uint32_t idx = it->second;
        free_pinned_.erase(it);
        cached_ -= blocks_[idx].size;
        blocks_[idx].requested = bytes;
        blocks_[idx].live = true;
        return idx + 1;
    }
    b.size = size;
    pinned_ += size;
    blocks_.push_back(b);
    return static_cast<uint32_t>(blocks_.size());
}

void HostAllocator::free(uint32_t handle) {
    if (handle == 0 || handle > blocks_.size() || !blocks_[handle - 1].live)
        throw std::logic_error("HostAllocator::free: unknown or freed handle " + std::to_string(handle));
    Block& b = blocks_[handle - 1];
    b.live = false;
    allocated_ -= b.requested;
    if (b.kind != HostKind::pinned) {
        (b.kind == HostKind::locked ? pinned_ : pageable_) -= b.size;
        return;
    }
    // CachingHostAllocator.h free: the block goes back to the free list,
    // still pinned; only empty_cache() releases it.
    cached_ += b.size;
    free_pinned_.emplace(b.size, handle - 1);
}

uint64_t HostResult::peak_in(std::initializer_list<Phase> ps) const {
    uint64_t m = 0;
    for (const auto& p : phases)
        for (Phase q : ps)
            if (p.phase == q) m = std::max(m, p.peak_resident);
    return m;
}

namespace {

void note_host_peaks(HostResult& r, const HostEventLog& log, const HostEvent& e, const HostAllocator& a, uint64_t t) {
    if (a.resident() > r.peak_per_rank) {
        r.peak_per_rank = a.resident();
        r.peak_t = t;
        r.peak_event = e.term;
        r.peak_module = log.modules[e.module];
        r.peak_phase = e.phase;
    }
    r.peak_pinned = std::max(r.peak_pinned, a.pinned());
    HostPhasePeak& p = r.phases[static_cast<size_t>(e.phase)];
    p.seen = true;
    p.peak_resident = std::max(p.peak_resident, a.resident());
    p.peak_pinned = std::max(p.peak_pinned, a.pinned());
}

}  // namespace

HostResult replay_host(const HostEventLog& log, HostAllocatorConfig cfg) {
    HostResult r;
    r.modules = log.modules;
    r.ranks_per_node = std::max<uint64_t>(1, log.ranks_per_node);
    r.phases.resize(kPhaseCount);
    for (int i = 0; i < kPhaseCount; ++i) r.phases[static_cast<size_t>(i)].phase = static_cast<Phase>(i);
    HostAllocator a(cfg);
    std::vector<uint32_t> handle(log.events.size() + 1, 0);
    std::map<uint64_t, uint64_t> nvme_files;  // tensor id -> file size
    uint64_t nvme = 0;
    r.timeline.reserve(log.events.size());
    for (const HostEvent& e : log.events) {
        const uint64_t t = r.timeline.size();
        int64_t signed_bytes = 0;
        switch (e.action) {
            case HostAction::alloc:
                if (handle.size() <= e.tensor) handle.resize(e.tensor + 1, 0);
                handle[e.tensor] = a.malloc(e.bytes, e.kind);
                signed_bytes = static_cast<int64_t>(e.bytes);
                break;
            case HostAction::free:
                a.free(handle.at(e.tensor));
                signed_bytes = -static_cast<int64_t>(e.bytes);
                break;
            case HostAction::nvme_write: {
                uint64_t& f = nvme_files[e.tensor];
                nvme = nvme - f + std::max(f, e.bytes);  // a swap file never shrinks
                f = std::max(f, e.bytes);
                break;
            }
            case HostAction::phase_begin: break;
        }
        r.timeline.push_back({t, e.term, e.phase, e.module, signed_bytes, e.kind, a.allocated(), a.resident(), a.pinned(), nvme});
        note_host_peaks(r, log, e, a, t);
    }
    r.nvme = nvme;
    std::vector<HostPhasePeak> seen;
    for (const auto& p : r.phases)
        if (p.seen) seen.push_back(p);
    r.phases = std::move(seen);
    return r;
}

HostResult simulate_host(const EstimateInput& in, int64_t steps, std::optional<Phase> stop_after) {
    HostEventLog log = produce_host_events(in, steps);
    if (stop_after) {
        const auto later = std::find_if(log.events.begin(), log.events.end(),
                                        [&](const HostEvent& e) { return e.phase > *stop_after; });
        log.events.erase(later, log.events.end());
    }
    HostResult r = replay_host(log, host_allocator_config(in.stack.torch));
    r.stopped_at = stop_after;
    return r;
}

std::optional<HostOom> find_host_oom(const HostResult& r, uint64_t capacity_per_node) {
    for (const auto& p : r.timeline) {
        const uint64_t per_node = p.resident * r.ranks_per_node;
        if (per_node > capacity_per_node)
            return HostOom{p.t, p.term, r.modules.at(p.module), p.phase, per_node, capacity_per_node};
    }
    return std::nullopt;
}

}  // namespace zeromem::sim
