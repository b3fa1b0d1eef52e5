// The simulator as the estimator's source of the fragmentation allowance:
// reserved minus allocated of a short replay (issue 8, "Agreement").
#include "zeromem/simulator.h"

#include "zeromem/util.h"

#include <algorithm>
#include <memory>
#include <mutex>

namespace zeromem::sim {

const char* const kFragmentationSource =
    "the simulator's replay (reserved - allocated at the allocated peak of 2 optimizer steps through the caching "
    "allocator model, wholly free segments given back as PyTorch does before an OOM)";

EstimateInput fragmentation_replay_input(const EstimateInput& in, SimOptions& opt) {
    EstimateInput r = in;
    r.residual.fragmentation_provider = nullptr;  // the copy must not call back into itself
    r.train.grad_accum = std::min<int64_t>(in.train.grad_accum, 3);
    opt.steps = 2;
    return r;
}

namespace {

// The events of the fragmentation replay, or nullopt for a case the
// producer refuses.
std::optional<EventLog> fragmentation_events(const EstimateInput& in, SimOptions& opt) {
    if (!in.model.arch) return std::nullopt;
    const EstimateInput r = fragmentation_replay_input(in, opt);
    try {
        return produce_events(r, opt);
    } catch (const InputError&) {
        return std::nullopt;  // MoE, encoder models, tp/pp, LoRA, oversized tensors, ...
    }
}

// The events up to and including timeline point `t` (spans produce no
// timeline point), then torch.cuda.empty_cache().
EventLog until_then_empty_cache(const EventLog& log, uint64_t t) {
    EventLog out;
    out.modules = log.modules;
    uint64_t points = 0;
    for (const Event& e : log.events) {
        if (points > t) break;
        out.events.push_back(e);
        if (e.action != Action::span_begin && e.action != Action::span_end) ++points;
    }
    Event ec = out.events.empty() ? Event{} : out.events.back();
    ec.action = Action::empty_cache;
    ec.bytes = 0;
    ec.term = "empty_cache";
    out.events.push_back(ec);
    return out;
}

// Reserved minus allocated at the allocated peak, without the wholly free
// segments: PyTorch gives those back (release_cached_blocks) and retries
// before it reports an OOM, so only the unallocated parts of segments in use
// are memory the job cannot have. Replays up to the peak a second time and
// ends with empty_cache.
uint64_t reserved_minus_allocated(const EventLog& log, const SimOptions& opt) {
    const SimResult res = replay(log, opt, std::nullopt);
    if (res.timeline.empty()) return 0;
    const SimResult at_peak = replay(until_then_empty_cache(log, res.peak_allocated_t), opt, std::nullopt);
    const TimelinePoint& last = at_peak.timeline.back();
    return last.reserved - std::min(last.reserved, last.allocated);
}

// A 128-bit fingerprint of what the allocator sees in a log: each event's
// action, stream, tensor id and size in order (phases, modules and names do
// not change allocated or reserved bytes). Two independent 64-bit mixes
// (word-wise FNV-1a and a rotate-xor-multiply chain) make a collision between two replays
// practically impossible.
struct LogKey {
    uint64_t fnv = 14695981039346656037ull, mix = 0x9e3779b97f4a7c15ull, count = 0;
    bool operator==(const LogKey& o) const { return fnv == o.fnv && mix == o.mix && count == o.count; }
};

LogKey log_key(const EventLog& log) {
    LogKey k;
    for (const Event& e : log.events) {
        const uint64_t words[3] = {(uint64_t(e.action) << 8) | uint64_t(e.stream), e.tensor, e.bytes};
        for (uint64_t w : words) {
            k.fnv = (k.fnv ^ w) * 1099511628211ull;  // FNV-1a, one 64-bit word at a time
            k.mix = ((k.mix << 23) | (k.mix >> 41)) ^ w;
            k.mix *= 0x9e3779b97f4a7c15ull;  // rotate-xor-multiply (golden-ratio constant)
        }
        ++k.count;
    }
    return k;
}

// The allowances of the last replays, by log fingerprint: the planner
// evaluates the same option many times (1217 estimates but about 73
// distinct replays for `plan --model llama-2-7b --gpus 8`); producing the
// events costs about a tenth of replaying them (tests/bench/simulator).
class FragmentationCache {
public:
    std::optional<uint64_t> get(const EstimateInput& in) {
        SimOptions opt;
        const std::optional<EventLog> log = fragmentation_events(in, opt);
        if (!log) return std::nullopt;
        const LogKey key = log_key(*log);
        {
            const std::lock_guard<std::mutex> lock(mu_);
            for (const auto& [k, bytes] : entries_)
                if (k == key) return bytes;
        }
        const uint64_t bytes = reserved_minus_allocated(*log, opt);
        const std::lock_guard<std::mutex> lock(mu_);
        if (entries_.size() == kEntries) entries_.erase(entries_.begin());
        entries_.emplace_back(key, bytes);
        return bytes;
    }

private:
    static constexpr size_t kEntries = 512;
    std::mutex mu_;
    std::vector<std::pair<LogKey, uint64_t>> entries_;
};

}  // namespace

std::optional<uint64_t> replay_fragmentation(const EstimateInput& in) {
    SimOptions opt;
    const std::optional<EventLog> log = fragmentation_events(in, opt);
    if (!log) return std::nullopt;
    return reserved_minus_allocated(*log, opt);
}

std::function<std::optional<uint64_t>(const EstimateInput&)> fragmentation_provider() {
    auto cache = std::make_shared<FragmentationCache>();
    return [cache](const EstimateInput& in) { return cache->get(in); };
}

void use_replayed_fragmentation(EstimateInput& in, bool explicit_fraction) {
    if (explicit_fraction) return;
    in.residual.fragmentation_provider = fragmentation_provider();
    in.residual.fragmentation_provider_source = kFragmentationSource;
}

}  // namespace zeromem::sim
