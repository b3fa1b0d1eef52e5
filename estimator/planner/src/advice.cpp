#include "zeromem/advice.h"

#include "planner_search.h"
#include "zeromem/planner.h"
#include "zeromem/recipe.h"

#include <algorithm>
#include <functional>
#include <optional>

namespace zeromem {

namespace {

using planner_detail::divisors;
using planner_detail::option_allowed;

// One configuration the GPU advice may propose: the user's input with some of
// the recipe's memory steps applied.
struct Trial {
    EstimateInput in;
    ZeroOption option;       // stage, offloads and checkpointing of the trial
    int64_t micro_batch = 1;
    std::vector<SettingChange> changes;
    std::vector<int> steps;  // recipe steps, ascending
    double seconds = 0;      // modelled step time (0 without a speed model)
};

int latest_step(const Trial& t) { return t.steps.empty() ? 0 : t.steps.back(); }

// The recipe steps moving from the user's option to `to` takes: 3 (ZeRO-2),
// 4 (ZeRO-2 + optimizer offload), 5 (ZeRO-3), 6 (parameter offload), 7
// (optimizer offload at ZeRO-3), 10 (NVMe); a lower stage or less offload
// than the user's is step 12, the speed step.
void add_option_steps(const ZeroOption& from, const ZeroOption& to, std::vector<int>& steps) {
    using D = OffloadDevice;
    if (to.stage == from.stage && to.offload_optimizer == from.offload_optimizer && to.offload_param == from.offload_param)
        return;
    const size_t before = steps.size();
    if (to.stage == 2 && from.stage < 2 && to.offload_optimizer == D::none) steps.push_back(3);
    if (to.stage == 2 && to.offload_optimizer == D::cpu && from.offload_optimizer == D::none) steps.push_back(4);
    if (to.stage == 3 && from.stage < 3) steps.push_back(5);
    if (to.offload_param == D::cpu && from.offload_param == D::none) steps.push_back(6);
    if (to.stage == 3 && to.offload_optimizer == D::cpu && from.offload_optimizer == D::none) steps.push_back(7);
    if ((to.offload_optimizer == D::nvme && from.offload_optimizer != D::nvme) ||
        (to.offload_param == D::nvme && from.offload_param != D::nvme))
        steps.push_back(10);
    if (steps.size() == before) steps.push_back(12);
}

ZeroOption option_of(const EstimateInput& in) {
    ZeroOption o;
    o.stage = in.zero.stage;
    o.offload_optimizer = in.zero.offload_optimizer;
    o.offload_param = in.zero.offload_param;
    o.checkpointing = in.train.checkpointing;
    return o;
}

// The user's input moved to option `o` (stage, offloads), checkpointing `ck`
// and micro batch `mb` with the accumulation that keeps the global batch;
// nothing when it changes nothing.
std::optional<Trial> make_trial(const EstimateInput& base, const ZeroOption& o, Checkpointing ck, int64_t mb) {
    const ZeroOption from = option_of(base);
    const int64_t per_gpu = base.train.micro_batch * base.train.grad_accum;
    Trial t{base, o, mb, {}, {}, 0};
    t.option.checkpointing = ck;
    if (mb != base.train.micro_batch) {
        t.in.train.micro_batch = mb;
        t.in.train.grad_accum = per_gpu / mb;
        t.changes.push_back({"train_micro_batch_size_per_gpu", std::to_string(mb)});
        t.changes.push_back({"gradient_accumulation_steps", std::to_string(t.in.train.grad_accum)});
        t.steps.push_back(1);
    }
    if (ck != base.train.checkpointing) {
        t.in.train.checkpointing = ck;
        t.changes.push_back({"gradient_checkpointing", to_string(ck)});
        t.steps.push_back(2);
    }
    if (o.stage != from.stage) t.changes.push_back({"zero_optimization.stage", std::to_string(o.stage)});
    if (o.offload_optimizer != from.offload_optimizer)
        t.changes.push_back({"zero_optimization.offload_optimizer.device", to_string(o.offload_optimizer)});
    if (o.offload_param != from.offload_param)
        t.changes.push_back({"zero_optimization.offload_param.device", to_string(o.offload_param)});
    add_option_steps(from, o, t.steps);
    if (t.changes.empty()) return std::nullopt;
    Candidate c = planner_detail::base_candidate(base, o);
    c.option.checkpointing = ck;
    c.micro_batch = t.in.train.micro_batch;
    c.grad_accum = t.in.train.grad_accum;
    apply_candidate(c, t.in);
    std::sort(t.steps.begin(), t.steps.end());
    return t;
}

// Beams and precision: the recipe's steps 8 and 9, applied to every trial
// when the user's input has them to lower.
void add_other_defaults(const EstimateInput& base, std::vector<Trial>& trials) {
    const size_t n = trials.size();
    for (size_t i = 0; i < n; ++i) {
        Trial t = trials[i];
        bool changed = false;
        if (base.generation && base.generation->num_beams > 1) {
            t.in.generation->num_beams = 1;
            t.changes.push_back({"generation.num_beams", "1"});
            t.steps.push_back(8);
            changed = true;
        }
        if (base.train.dtype == Dtype::fp32) {
            t.in.train.dtype = Dtype::bf16;
            t.changes.push_back({"dtype", "bf16"});
            t.steps.push_back(9);
            changed = true;
        }
        if (!changed) return;
        std::sort(t.steps.begin(), t.steps.end());
        trials.push_back(std::move(t));
    }
}

// Every trial of the recipe's memory steps from the user's input.
std::vector<Trial> gpu_trials(const EstimateInput& base) {
    std::vector<Trial> out;
    std::vector<Checkpointing> cks = {base.train.checkpointing};
    if (base.train.checkpointing != Checkpointing::full) cks.push_back(Checkpointing::full);
    std::vector<int64_t> mbs = divisors(base.train.micro_batch);
    std::reverse(mbs.begin(), mbs.end());  // the user's micro batch first
    for (const ZeroOption& o : stage_offload_options()) {
        if (!option_allowed(base, o, base.cluster.data_parallel())) continue;
        for (const Checkpointing ck : cks)
            for (const int64_t mb : mbs)
                if (auto t = make_trial(base, o, ck, mb)) out.push_back(std::move(*t));
    }
    // The user's own option with only the beams or the precision lowered:
    // a trial without changes, kept until add_other_defaults has used it.
    out.insert(out.begin(), Trial{base, option_of(base), base.train.micro_batch, {}, {}, 0});
    add_other_defaults(base, out);
    out.erase(out.begin());
    return out;
}

// The recipe's order: the latest step a trial needs, then the fewest changes.
bool recipe_before(const Trial& a, const Trial& b) {
    if (latest_step(a) != latest_step(b)) return latest_step(a) < latest_step(b);
    return a.changes.size() < b.changes.size();
}

std::string steps_text(const std::vector<int>& steps) {
    std::string s;
    for (size_t i = 0; i < steps.size(); ++i) {
        if (i) s += i + 1 == steps.size() ? " and " : ", ";
        s += recipe_step_label(steps[i]);
    }
    return s;
}

bool fits(const std::optional<bool>& f) { return !f.has_value() || *f; }

bool tight_of(const Estimate& e) { return e.gpu_verdict && *e.gpu_verdict == "tight"; }

// The search estimates with the fixed fragmentation fraction (a replay per
// trial would cost a simulator run each); the pick is then confirmed with
// the input's own allowance (the replayed one when the face wired it).
Estimate search_estimate(const EstimateInput& in) {
    EstimateInput quick = in;
    quick.residual.fragmentation_provider = nullptr;
    return estimate(quick);
}

// The trial that needs the least GPU memory: ZeRO-3 with both offloads on
// NVMe, full checkpointing, micro batch 1, with the most other defaults
// lowered; nothing when the user's settings rule it out.
const Trial* leanest(const std::vector<Trial>& trials) {
    const Trial* best = nullptr;
    for (const Trial& t : trials) {
        const ZeroOption& o = t.option;
        if (o.stage != 3 || o.offload_optimizer != OffloadDevice::nvme || o.offload_param != OffloadDevice::nvme ||
            o.checkpointing != Checkpointing::full || t.micro_batch != 1)
            continue;
        if (!best || t.changes.size() > best->changes.size()) best = &t;
    }
    return best;
}

Advice gpu_advice(const EstimateInput& in, const Estimate& est, const SpeedHardware* hw) {
    Advice a;
    a.resource = "gpu";
    a.phase = est.first_oom_phase;
    a.need = est.per_gpu.total;
    a.capacity = *in.cluster.gpu_memory;
    std::vector<Trial> trials = gpu_trials(in);
    if (hw) {
        for (Trial& t : trials) {
            try {
                t.seconds = step_time(t.in, *hw).total;
            } catch (const InputError&) {
                t.seconds = 0;  // the speed model cannot time it: ranked last
            }
        }
        std::stable_sort(trials.begin(), trials.end(), [](const Trial& x, const Trial& y) {
            if ((x.seconds > 0) != (y.seconds > 0)) return x.seconds > 0;
            return x.seconds < y.seconds;
        });
    } else {
        std::stable_sort(trials.begin(), trials.end(), recipe_before);
    }
    std::optional<std::pair<Trial, Estimate>> pick, tight;
    // Memory grows with the micro batch: once an option and checkpointing
    // mode fails at micro batch m, it fails at every larger one.
    std::vector<std::pair<ZeroOption, int64_t>> failed;
    auto known_to_fail = [&](const Trial& t) {
        for (const auto& [o, mb] : failed)
            if (o.stage == t.option.stage && o.offload_optimizer == t.option.offload_optimizer &&
                o.offload_param == t.option.offload_param && o.checkpointing == t.option.checkpointing &&
                t.micro_batch >= mb)
                return true;
        return false;
    };
    if (const Trial* lean = leanest(trials)) {  // when even it does not fit, nothing does
        try {
            const Estimate e = search_estimate(lean->in);
            if (!(fits(e.fits_gpu) && fits(e.fits_host))) return a;
        } catch (const InputError&) {
            // not a valid configuration here: search the rest
        }
    }
    // Each option and checkpointing mode is tried at micro batch 1 before a
    // larger one (when it fails there, it fails everywhere).
    std::vector<const Trial*> smallest_checked;
    auto group_fails_at_one = [&](const Trial& t) {
        if (t.micro_batch == 1) return false;
        for (const Trial& u : trials) {
            if (u.micro_batch != 1 || u.option.stage != t.option.stage ||
                u.option.offload_optimizer != t.option.offload_optimizer ||
                u.option.offload_param != t.option.offload_param || u.option.checkpointing != t.option.checkpointing ||
                u.in.train.dtype != t.in.train.dtype)
                continue;
            if (std::find(smallest_checked.begin(), smallest_checked.end(), &u) != smallest_checked.end())
                return known_to_fail(u);
            smallest_checked.push_back(&u);
            try {
                const Estimate e = search_estimate(u.in);
                if (fits(e.fits_gpu) && fits(e.fits_host)) return false;
            } catch (const InputError&) {
                return false;
            }
            failed.push_back({u.option, 1});
            return true;
        }
        return false;
    };
    for (const Trial& t : trials) {
        if (known_to_fail(t) || group_fails_at_one(t)) continue;
        Estimate e;
        try {
            e = search_estimate(t.in);
            if (fits(e.fits_gpu) && fits(e.fits_host) && t.in.residual.fragmentation_provider) e = estimate(t.in);
        } catch (const InputError&) {
            continue;  // not a valid DeepSpeed configuration
        }
        if (!(fits(e.fits_gpu) && fits(e.fits_host))) {
            failed.push_back({t.option, t.micro_batch});
            continue;
        }
        if (!tight_of(e)) {
            pick = {t, e};
            break;
        }
        if (!tight) tight = {t, e};
    }
    if (!pick) pick = tight;
    if (!pick) return a;
    const auto& [t, e] = *pick;
    a.found = true;
    a.tight = tight_of(e);
    a.changes = t.changes;
    a.need_after = e.per_gpu.total;
    a.step_seconds = t.seconds;
    a.why = steps_text(t.steps) +
            (hw ? "; the fastest combination of the recipe's steps that fits, by the speed model"
                : "; the earliest combination of the recipe's steps that fits (not ranked by speed: that needs a GPU preset "
                  "and one node; compare and plan rank several nodes with --network)");
    return a;
}

struct HostChange {
    std::vector<SettingChange> changes;
    std::string why;
    std::function<bool(EstimateInput&)> apply;  // false: not applicable
};

std::vector<HostChange> host_changes() {
    std::vector<HostChange> c;
    c.push_back({{{"zero.Init", "true"}}, "build the model under deepspeed.zero.Init so no rank materialises it whole",
                 [](EstimateInput& in) {
                     if (in.zero.stage != 3 || in.zero.zero_init) return false;
                     in.zero.zero_init = true;
                     return true;
                 }});
    c.push_back({{{"load_dtype", "bf16"}}, "load the checkpoint in 16 bits (from_pretrained(torch_dtype=...)), not fp32",
                 [](EstimateInput& in) {
                     if (in.residual.load_dtype != Dtype::fp32) return false;
                     in.residual.load_dtype = Dtype::bf16;
                     return true;
                 }});
    c.push_back({{{"zero_optimization.stage", "3"}, {"zero.Init", "true"}},
                 "ZeRO-3 with zero.Init: each rank loads one module at a time",
                 [](EstimateInput& in) {
                     if (in.zero.stage == 3 && in.zero.zero_init) return false;
                     in.zero.stage = 3;
                     in.zero.zero_init = true;
                     return true;
                 }});
    for (const planner_detail::NvmeHostKnobs& k : planner_detail::nvme_host_knobs())
        c.push_back({k.changes, k.why, k.apply});
    c.push_back({{{"zero_optimization.offload_optimizer.device", "nvme"}},
                 "ZeRO-Infinity: optimizer states on NVMe instead of host RAM",
                 [](EstimateInput& in) {
                     if (in.zero.stage != 3 || in.zero.offload_optimizer != OffloadDevice::cpu) return false;
                     in.zero.offload_optimizer = OffloadDevice::nvme;
                     return true;
                 }});
    c.push_back({{{"zero_optimization.offload_param.device", "nvme"}},
                 "ZeRO-Infinity: parameters on NVMe instead of host RAM",
                 [](EstimateInput& in) {
                     if (in.zero.offload_param != OffloadDevice::cpu) return false;
                     in.zero.offload_param = OffloadDevice::nvme;
                     return true;
                 }});
    return c;
}

Advice host_advice(const EstimateInput& in, const Estimate& est) {
    Advice a;
    a.resource = "host";
    a.phase = est.first_host_oom_phase;
    a.need = est.per_node.host_memory;
    a.capacity = *in.cluster.host_memory;
    for (const auto& c : host_changes()) {
        EstimateInput trial = in;
        if (!c.apply(trial)) continue;
        Estimate e;
        try {
            e = estimate(trial);
        } catch (const InputError&) {
            continue;  // not a valid DeepSpeed configuration (e.g. ZeRO-3 with pipeline parallelism)
        }
        if (fits(e.fits_gpu) && fits(e.fits_host)) {
            a.found = true;
            a.changes = c.changes;
            a.why = c.why;
            a.need_after = e.per_node.host_memory;
            return a;
        }
    }
    return a;
}

}  // namespace

std::vector<Advice> advise(const EstimateInput& in, const Estimate& est, const SpeedHardware* hw) {
    std::vector<Advice> out;
    if (est.convention != Convention::full) return out;
    if (est.fits_gpu.has_value() && !*est.fits_gpu) out.push_back(gpu_advice(in, est, hw));
    if (est.fits_host.has_value() && !*est.fits_host) out.push_back(host_advice(in, est));
    return out;
}

}  // namespace zeromem
