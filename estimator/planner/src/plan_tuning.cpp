// Plan's step 12 (the ZeRO tuning recipe's last step): every option x checkpointing x micro batch x
// overlap_comm x bucket size, ranked by the closed forms, the head of the ranking re-checked with the
// replayed allowance and replayed through the simulator before it is emitted.
#include "zeromem/planner.h"
#include "planner_search.h"
#include "zeromem/recipe.h"
#include "zeromem/verdict_band.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace zeromem::planner_detail {

namespace {

// "ZeRO-3 + optimizer cpu, micro batch 4 x accumulation 2, overlap_comm off,
// reduce bucket 16777216": the settings that tell two candidates apart.
std::string describe(const Candidate& c) {
    return c.option.label() + ", micro batch " + std::to_string(c.micro_batch) + " x accumulation " +
           std::to_string(c.grad_accum) + ", overlap_comm " + (c.overlap_comm ? "on" : "off") + ", reduce bucket " +
           std::to_string(c.reduce_bucket_size);
}

// Step 12's grid: one point per configuration that fits by the closed forms, ranked by its keys.
struct GridPoint {
    int templ = -1;  ///< index into Grid::templates; -1: step 11's candidate, kept whole
    int64_t micro_batch = 1, grad_accum = 1;
    bool fits = false, tight = false;
    double tokens_per_s = 0;
};
struct Grid {
    EstimateInput input;                  ///< the grid's working input (the fixed fragmentation fraction)
    Candidate first;                      ///< step 11's candidate, with its estimate
    std::vector<Candidate> templates;     ///< option, checkpointing, overlap_comm and bucket of each point
    /// input.train.optimizer_builder when each template began
    std::vector<std::optional<OptimizerBuilder>> builder_before;
    std::vector<GridPoint> points;

    /// The point as a candidate. Without `replayed` (which estimates it again itself) it is estimated as the
    /// grid estimated it, with the optimizer builder of that moment.
    Candidate candidate(const GridPoint& p, bool replayed, const SpeedHardware& hw, const SpeedConstants& k) {
        if (p.templ < 0) return first;
        Candidate c = templates[size_t(p.templ)];
        c.micro_batch = p.micro_batch;
        c.grad_accum = p.grad_accum;
        if (!replayed) {
            input.train.optimizer_builder = builder_before[size_t(p.templ)];
            evaluate(c, input, hw, k);
        }
        return c;
    }
};

// The first of `g.points` (ranks_before order) that fits with the replayed
// allowance when one is wired (`replayed`: each re-evaluated with `in`) and,
// with `replay_fits`, replays without running out of memory; at most
// kMaxPlanReplays replays, each a line of r.replays. A candidate that the
// replayed allowance makes tight waits while the next kMaxTightLookahead ones
// are looked at for one that fits with the margin (ranks_before: tight after
// fitting), and is tried only when none does.
std::optional<Candidate> first_that_replays(Grid& g, EstimateInput& in, bool replayed,
                                                   const ReplayFits& replay_fits, const SpeedHardware& hw,
                                                   const SpeedConstants& k, PlanResult& r) {
    constexpr int kMaxTightLookahead = 64;
    int replays = 0;
    std::string pending;  // the last out-of-memory line, finished by the next candidate's name
    // Those that ran out of memory, with the bytes the failing allocation
    // asked for. A candidate of the same option and micro batch (the same
    // activations) that the closed forms put less than that below the one
    // that overflowed (another bucket size) is not replayed: the replay ran
    // short by at least what was asked for beyond the free memory, and the
    // candidate saves less than the request.
    std::vector<std::pair<const Candidate*, uint64_t>> failed;
    size_t skipped = 0;
    auto saves_too_little = [&](const Candidate& c) {
        return std::any_of(failed.begin(), failed.end(), [&](const auto& f) {
            return f.first->option.label() == c.option.label() && f.first->micro_batch == c.micro_batch &&
                   c.memory.per_gpu.total + f.second > f.first->memory.per_gpu.total;
        });
    };
    enum class Tried { winner, next, stop };
    // Tries one fitting candidate: the replay decides, when there is one.
    auto attempt = [&](Candidate& c) {
        if (!replay_fits) return Tried::winner;
        if (saves_too_little(c)) {
            ++skipped;
            return Tried::next;
        }
        if (replays == kMaxPlanReplays) {
            r.no_winner = pending + "; " + std::to_string(kMaxPlanReplays) +
                          " replays ran out of memory, no more are tried: nothing emitted";
            r.replays.push_back(r.no_winner);
            return Tried::stop;
        }
        if (!pending.empty())
            r.replays.push_back(pending + "; falling back to " + describe(c) +
                                (skipped ? " (skipped " + std::to_string(skipped) +
                                               " of an option and micro batch that ran out of memory, saving less "
                                               "than the failed allocation by the closed forms)"
                                         : std::string()));
        pending.clear();
        skipped = 0;
        EstimateInput at = in;
        apply_candidate(c, at);
        const std::optional<ReplayVerdict> v = replay_fits(at);
        ++replays;
        if (!v) {
            r.replays.push_back("replayed: " + describe(c) +
                                ": the simulator does not replay this case; the closed forms decide");
            return Tried::winner;
        }
        if (v->fits) {
            r.replays.push_back("replayed: " + describe(c) + ": fits (peak allocated " + gib(v->peak_allocated) +
                                ", the closed forms " + gib(c.memory.per_gpu.allocated) + "; peak reserved " +
                                gib(v->peak_reserved) + " of " + gib(*in.cluster.gpu_memory) +
                                ", which keeps the wholly free cached segments PyTorch releases before an "
                                "out-of-memory, the closed forms' reserved " + gib(c.memory.per_gpu.reserved) +
                                " leaves them out)");
            r.winner_replayed = true;
            return Tried::winner;
        }
        failed.emplace_back(&c, v->requested);
        pending = "replayed: " + describe(c) + " runs out of memory at " + v->reason + " (the closed forms gave " +
                  gib(c.memory.per_gpu.total) + ")";
        return Tried::next;
    };
    std::vector<Candidate*> tight;  // fit, but only inside the band: tried after those that fit with the margin
    int looked = 0;
    std::deque<Candidate> seen;  // the candidates reached, in ranking order (pointers into it stay valid)
    for (const GridPoint& p : g.points) {
        if (replayed && !tight.empty() && ++looked > kMaxTightLookahead) break;  // each look is a replay
        Candidate& c = seen.emplace_back(g.candidate(p, replayed, hw, k));
        if (replayed) {
            evaluate(c, in, hw, k);  // the replayed allowance decides
            ++r.candidates;
        }
        if (!c.fits) continue;
        if (c.tight) {
            tight.push_back(&c);
            continue;
        }
        const Tried t = attempt(c);
        if (t == Tried::winner) return c;
        if (t == Tried::stop) return std::nullopt;
    }
    for (Candidate* c : tight) {
        const Tried t = attempt(*c);
        if (t == Tried::winner) return *c;
        if (t == Tried::stop) return std::nullopt;
    }
    if (!pending.empty()) {
        r.no_winner = pending + "; no candidate left to fall back to: nothing emitted";
        r.replays.push_back(r.no_winner);
    }
    return std::nullopt;
}

}  // namespace

// Step 12: de-escalates and re-tunes (every option x checkpointing x micro
// batch x overlap_comm x bucket size); sets r.winner to the first in the
// ranking (ranks_before) that fits and, with `replay_fits`, replays, and
// appends the step.
void tune_for_speed(const EstimateInput& base, EstimateInput& in, const EstimateInput& plan_base,
                           const Candidate& fit, const std::vector<int64_t>& divs, int64_t per_gpu,
                           const SpeedHardware& hw, const PlanSpace& space, const SpeedConstants& k,
                           const ReplayFits& replay_fits, PlanResult& r) {
    // The grid evaluates about a thousand configurations: it uses the fixed
    // fragmentation fraction, and only the first in the ranking are
    // re-checked with the replayed allowance (residual.fragmentation_provider)
    // when one is wired, until one still fits.
    Grid g;
    g.input = in;
    EstimateInput& grid = g.input;
    const bool replayed = static_cast<bool>(grid.residual.fragmentation_provider);
    grid.residual.fragmentation_provider = nullptr;
    g.first = *r.first_fit;
    // Each grid point keeps its keys, not its estimate (about 1 KiB a candidate, ten thousand of them): the
    // ranking's head is estimated again when first_that_replays reaches it, with the grid input as it was
    // (apply_candidate turns a client optimizer into DeepSpeed's at the first optimizer-offload option and
    // leaves it so), which gives the grid's figures back.
    g.points.push_back({-1, r.first_fit->micro_batch, r.first_fit->grad_accum, r.first_fit->fits,
                        r.first_fit->tight, r.first_fit->time.tokens_per_s});  // first among equals
    const int64_t bucket0 = model_bucket(base);
    // The templates in order, each with the optimizer builder the walk in order gives it (apply_candidate,
    // the first thing each template's first estimate does, switches a client optimizer to DeepSpeed's at
    // the first optimizer-offload option and leaves it so).
    EstimateInput walk = grid;
    for (ZeroOption o : stage_offload_options()) {
        // Skip what DeepSpeed refuses with the settings given.
        if (!option_allowed(base, o, base.cluster.data_parallel())) continue;
        for (Checkpointing ck : space.checkpointing) {
            o.checkpointing = ck;
            for (bool ov : space.overlap_comm) {
                for (double m : space.bucket_multipliers) {
                    Candidate c = base_candidate(plan_base, o);
                    c.dtype = fit.dtype;
                    c.overlap_comm = ov;
                    c.reduce_bucket_size = std::max<int64_t>(1, int64_t(std::llround(double(bucket0) * m)));
                    g.templates.push_back(c);
                    g.builder_before.push_back(walk.train.optimizer_builder);
                    apply_candidate(c, walk);
                }
            }
        }
    }
    // Then every template's micro batches, the templates side by side (for_each_index), each from the grid
    // input with its builder: the points and the count are those of the walk in order.
    std::vector<std::vector<GridPoint>> points(g.templates.size());
    std::vector<uint64_t> evaluated(g.templates.size(), 0);
    for_each_index(g.templates.size(), [&](size_t t) {
        EstimateInput local = grid;
        local.train.optimizer_builder = g.builder_before[t];
        Candidate c = g.templates[t];
        for (int64_t mb : divs) {
            c.micro_batch = mb;
            c.grad_accum = per_gpu / mb;
            evaluate(c, local, hw, k);
            ++evaluated[t];
            if (!c.fits) break;  // larger micro batches need more memory
            points[t].push_back({int(t), mb, c.grad_accum, c.fits, c.tight, c.time.tokens_per_s});
        }
    });
    for (size_t t = 0; t < points.size(); ++t) {
        r.candidates += evaluated[t];
        g.points.insert(g.points.end(), points[t].begin(), points[t].end());
    }
    std::stable_sort(g.points.begin(), g.points.end(), [](const GridPoint& a, const GridPoint& b) {
        return ranks_before_by(a.fits, a.tight, a.tokens_per_s, b.fits, b.tight, b.tokens_per_s);
    });
    const std::optional<Candidate> chosen = first_that_replays(g, in, replayed, replay_fits, hw, k, r);
    r.winner = chosen;
    std::string outcome;
    if (chosen) {
        const Candidate& best = *chosen;
        char buf[128];
        std::snprintf(buf, sizeof buf, " (%+.0f%% vs step 11)",
                      (best.time.tokens_per_s / r.first_fit->time.tokens_per_s - 1) * 100);
        outcome = describe(best) + ": " + tok_s(best.time.tokens_per_s) + buf +
                  (best.tight ? "; " + tight_words(best.memory) : std::string());
    } else {
        outcome = "no configuration both fits by the closed forms and replays without running out of memory";
    }
    r.steps.push_back({12, std::string(recipe_step(12).action) + " (" +
                               std::to_string(r.candidates) + " configurations evaluated" +
                               (replayed ? "; the grid with the fixed fragmentation fraction, the fastest re-checked "
                                           "with the simulator's replayed allowance where the simulator replays the input"
                                         : "") +
                               (replay_fits ? "; the winner replayed through the simulator with the GPU capacity, "
                                              "falling back to the next in the ranking when it runs out of memory"
                                            : "") +
                               ")",
                       outcome, chosen});
}

}  // namespace zeromem::planner_detail
