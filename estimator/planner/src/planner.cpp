// compare / plan / fit: searches over ZeRO options. Memory comes from
// estimate(), time from step_time(); nothing is re-derived here.
#include "zeromem/planner.h"
#include "planner_search.h"
#include "zeromem/recipe.h"
#include "zeromem/workload.h"
#include "zeromem/optimizer_wrapper.h"

#include "zeromem/util.h"
#include "zeromem/verdict_band.h"
#include "zeromem/zeropp.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace zeromem {

namespace planner_detail {

std::vector<int64_t> divisors(int64_t v) {
    std::vector<int64_t> d;
    for (int64_t i = 1; i * i <= v; ++i)
        if (v % i == 0) {
            d.push_back(i);
            if (i != v / i) d.push_back(v / i);
        }
    std::sort(d.begin(), d.end());
    return d;
}

bool fits_of(const Estimate& e) { return e.fits_gpu.value_or(false) && e.fits_host.value_or(true); }

bool tight_of(const Estimate& e) { return fits_of(e) && e.gpu_verdict == "tight"; }

void require_capacity(const EstimateInput& base, const char* what) {
    if (!base.cluster.gpu_memory)
        throw InputError(std::string("--gpu: ") + what + " needs the GPU memory; give --gpu NAME or --gpu-memory SIZE");
}

int64_t model_bucket(const EstimateInput& base) {
    if (base.model.arch) return base.model.arch->hidden_size * base.model.arch->hidden_size;
    return 500000000;  // DeepSpeed default reduce_bucket_size
}

/// Evaluates `c` in the working input `in` (mutated), filling memory, time, fits.
void evaluate(Candidate& c, EstimateInput& in, const SpeedHardware& hw, const SpeedConstants& k) {
    apply_candidate(c, in);
    c.memory = memory_estimate(in);
    c.fits = fits_of(c.memory);
    c.tight = tight_of(c.memory);
    c.time = step_time(in, hw, k);
}

/// Whether `c` at divs[i] fits, estimated with `in`.
bool fits_at(Candidate c, const std::vector<int64_t>& divs, int64_t i, int64_t per_gpu, EstimateInput& in) {
    c.micro_batch = divs[size_t(i)];
    c.grad_accum = per_gpu / c.micro_batch;
    apply_candidate(c, in);
    return fits_of(memory_estimate(in));
}

/// Largest micro batch among `divs` (ascending) that fits, by binary search
/// (memory grows with the micro batch); -1 if none. With a replayed
/// fragmentation allowance wired (residual.fragmentation_provider), the
/// search runs on the fixed fraction and its answer is then moved down, or
/// up, one divisor at a time until it is the largest that fits with the
/// replayed allowance: a few replays instead of one per probe.
int64_t largest_fitting(Candidate c, const std::vector<int64_t>& divs, int64_t per_gpu, EstimateInput& in) {
    EstimateInput quick = in;
    quick.residual.fragmentation_provider = nullptr;
    int64_t lo = 0, hi = int64_t(divs.size()) - 1, best = -1;
    while (lo <= hi) {
        const int64_t mid = (lo + hi) / 2;
        if (fits_at(c, divs, mid, per_gpu, quick)) {
            best = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    if (in.residual.fragmentation_provider) {
        while (best >= 0 && !fits_at(c, divs, best, per_gpu, in)) --best;
        // Up only where even no allowance at all would fit (no replay needed
        // to rule the rest out).
        EstimateInput none = quick;
        none.residual.fragmentation_fraction = 0.0;
        while (best + 1 < int64_t(divs.size()) && fits_at(c, divs, best + 1, per_gpu, none) &&
               fits_at(c, divs, best + 1, per_gpu, in))
            ++best;
    }
    return best < 0 ? -1 : divs[size_t(best)];
}

Candidate base_candidate(const EstimateInput& base, const ZeroOption& o) {
    Candidate c;
    c.option = o;
    c.dtype = base.train.dtype;
    c.overlap_comm = base.zero.overlap_comm.value_or(o.stage == 3);
    c.reduce_bucket_size = base.zero.reduce_bucket_size;
    c.generation = base.generation;
    return c;
}

std::string tok_s(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.0f tokens/s", v);
    return b;
}

std::string gib(uint64_t bytes) { return format_gib(double(bytes)) + " GiB"; }

// Why DeepSpeed refuses option `o` with `base`'s settings on `data_parallel`
// ranks, or nothing: ZeRO++ / MiCS combinations (zeropp_allows) and dtype
// mixes without ZeRO (optimizer_wrapper_refusal).
std::optional<std::string> option_refusal(const EstimateInput& base, const ZeroOption& o, int64_t data_parallel) {
    if (!zeropp_allows(base.zero, o.stage, o.offload_optimizer, o.offload_param, data_parallel))
        return std::string("not with the ZeRO++ / MiCS settings given (DeepSpeed refuses the combination, "
                           "zeromem/zeropp.h zeropp_allows)");
    if (o.stage != 0) return std::nullopt;
    EstimateInput at = base;
    at.zero.stage = o.stage;
    if (const auto why = optimizer_wrapper_refusal(at)) return why->message();
    return std::nullopt;
}

bool option_allowed(const EstimateInput& base, const ZeroOption& o, int64_t data_parallel) {
    return !option_refusal(base, o, data_parallel);
}

}  // namespace planner_detail

using namespace planner_detail;

std::string ZeroOption::label() const {
    std::string s = "ZeRO-" + std::to_string(stage);
    if (offload_optimizer != OffloadDevice::none) s += std::string(" + optimizer ") + to_string(offload_optimizer);
    if (offload_param != OffloadDevice::none) s += std::string(" + params ") + to_string(offload_param);
    if (checkpointing != Checkpointing::none) s += std::string(", checkpointing ") + to_string(checkpointing);
    return s;
}

std::vector<ZeroOption> stage_offload_options() {
    using D = OffloadDevice;
    const std::vector<std::pair<int, std::pair<D, D>>> list = {
        {0, {D::none, D::none}}, {1, {D::none, D::none}}, {2, {D::none, D::none}}, {2, {D::cpu, D::none}},
        {3, {D::none, D::none}}, {3, {D::cpu, D::none}},  {3, {D::nvme, D::none}}, {3, {D::none, D::cpu}},
        {3, {D::cpu, D::cpu}},   {3, {D::nvme, D::cpu}},  {3, {D::nvme, D::nvme}}};
    std::vector<ZeroOption> out;
    for (const auto& [stage, off] : list) {
        ZeroOption o;
        o.stage = stage;
        o.offload_optimizer = off.first;
        o.offload_param = off.second;
        out.push_back(o);
    }
    return out;
}

void apply_candidate(const Candidate& c, EstimateInput& in) {
    in.zero.stage = c.option.stage;
    in.zero.offload_optimizer = c.option.offload_optimizer;
    in.zero.offload_param = c.option.offload_param;
    // An optimizer-offload option runs DeepSpeed's optimizer (DeepSpeedCPUAdam):
    // DeepSpeed refuses ZeRO-Offload with a client optimizer
    // (engine.py _configure_optimizer), so the option implies an "optimizer" block.
    if (c.option.offload_optimizer != OffloadDevice::none && in.train.optimizer_builder == OptimizerBuilder::client &&
        in.zero.zero_force_ds_cpu_optimizer)
        in.train.optimizer_builder = OptimizerBuilder::deepspeed;
    in.train.checkpointing = c.option.checkpointing;
    in.train.micro_batch = c.micro_batch;
    in.train.grad_accum = c.grad_accum;
    in.train.train_batch_size.reset();
    in.train.dtype = c.dtype;
    in.zero.overlap_comm = c.overlap_comm;
    in.zero.reduce_bucket_size = c.reduce_bucket_size;
    in.zero.allgather_bucket_size = c.reduce_bucket_size;
    if (c.generation) in.generation = c.generation;
    if (c.offload_param_buffer_size) in.zero.offload_param_buffer_size = *c.offload_param_buffer_size;
    if (c.sub_group_size) in.zero.sub_group_size = *c.sub_group_size;
    if (c.offload_optimizer_pin_memory) in.zero.offload_optimizer_pin_memory = *c.offload_optimizer_pin_memory;
}

int64_t search_global_batch(const EstimateInput& in, bool batch_given) {
    if (in.train.train_batch_size) return *in.train.train_batch_size;
    if (batch_given) return in.train.micro_batch * in.train.grad_accum * in.cluster.gpus;
    return 16 * in.cluster.gpus;
}

int64_t per_gpu_batch(int64_t global_batch, int64_t gpus) {
    if (global_batch <= 0)
        throw InputError("--global-batch: must be a positive integer, got " + std::to_string(global_batch));
    if (global_batch % gpus != 0)
        throw InputError("--global-batch: " + std::to_string(global_batch) + " is not divisible by " +
                         std::to_string(gpus) + " GPUs (train_batch_size = micro x accum x GPUs)");
    return global_batch / gpus;
}

bool planner_detail::ranks_before_by(bool a_fits, bool a_tight, double a_tok_s, bool b_fits, bool b_tight,
                                     double b_tok_s) {
    if (a_fits != b_fits) return a_fits;
    if (a_tight != b_tight) return !a_tight;
    return a_tok_s > b_tok_s * (1 + 1e-9);
}

bool ranks_before(const Candidate& a, const Candidate& b) {
    return ranks_before_by(a.fits, a.tight, a.time.tokens_per_s, b.fits, b.tight, b.time.tokens_per_s);
}

std::vector<Candidate> compare_options(const EstimateInput& base, const SpeedHardware& hw, int64_t global_batch,
                                       const SpeedConstants& k) {
    require_capacity(base, "compare");
    const int64_t per_gpu = per_gpu_batch(global_batch, base.cluster.gpus);
    const auto divs = divisors(per_gpu);
    std::vector<ZeroOption> options;
    for (ZeroOption o : stage_offload_options()) {
        // Skip what DeepSpeed refuses with the settings given.
        if (!option_allowed(base, o, base.cluster.data_parallel())) continue;
        for (Checkpointing ck : {Checkpointing::none, Checkpointing::full}) {
            o.checkpointing = ck;
            options.push_back(o);
        }
    }
    // Each option from the base, on its own copy (apply_candidate switches an offload option to DeepSpeed's
    // optimizer, which must not carry over), so the options run side by side: a MoE preset's replays take
    // a second on one core.
    std::vector<Candidate> rows(options.size());
    for_each_index(options.size(), [&](size_t i) {
        EstimateInput in = base;
        Candidate c = base_candidate(base, options[i]);
        const int64_t mb = largest_fitting(c, divs, per_gpu, in);
        c.micro_batch = mb > 0 ? mb : 1;
        c.grad_accum = per_gpu / c.micro_batch;
        evaluate(c, in, hw, k);
        rows[i] = std::move(c);
    });
    std::stable_sort(rows.begin(), rows.end(), ranks_before);
    return rows;
}

std::vector<OrderingGroup> ordering_groups(const std::vector<Candidate>& rows) {
    // The recipe's groups, fastest first.
    struct Group {
        const char* name;
        bool (*match)(const ZeroOption&);
    };
    const Group groups[] = {
        {"stage 0", [](const ZeroOption& o) { return o.stage == 0; }},
        {"stage 1", [](const ZeroOption& o) { return o.stage == 1; }},
        {"stage 2", [](const ZeroOption& o) { return o.stage == 2 && o.offload_optimizer == OffloadDevice::none; }},
        {"stage 2 + optimizer offload",
         [](const ZeroOption& o) { return o.stage == 2 && o.offload_optimizer != OffloadDevice::none; }},
        {"stage 3",
         [](const ZeroOption& o) {
             return o.stage == 3 && o.offload_optimizer == OffloadDevice::none && o.offload_param == OffloadDevice::none;
         }},
        {"stage 3 + offload",
         [](const ZeroOption& o) {
             return o.stage == 3 && (o.offload_optimizer != OffloadDevice::none || o.offload_param != OffloadDevice::none);
         }},
    };
    std::vector<OrderingGroup> out;
    for (const auto& g : groups) {
        OrderingGroup og{g.name, -1};
        for (size_t i = 0; i < rows.size(); ++i) {
            const Candidate& r = rows[i];
            og.evaluated = og.evaluated || g.match(r.option);
            if (g.match(r.option) && r.fits &&
                (og.row < 0 || r.time.tokens_per_s > rows[size_t(og.row)].time.tokens_per_s))
                og.row = int(i);
        }
        out.push_back(og);
    }
    return out;
}

std::vector<std::string> ordering_statement(const std::vector<Candidate>& rows) {
    const std::vector<OrderingGroup> groups = ordering_groups(rows);
    std::vector<const Candidate*> best;
    for (const auto& g : groups) best.push_back(g.row < 0 ? nullptr : &rows[size_t(g.row)]);
    std::vector<std::string> out;
    out.push_back("The ZeRO tuning recipe's expected ordering, fastest first: stage 0 > 1 > 2 > 2+offload > 3 > "
                  "3+offload (less partitioning and offload, less communication and transfer per step). "
                  "Each group below is its best fitting option; ties within 5% count as agreeing. "
                  "overlap_comm is DeepSpeed's default per stage (on for stage 3, off for stages 1-2), which moves "
                  "exposed communication between the groups; only pairs where both sides fit are counted.");
    int agree = 0, total = 0;
    for (size_t i = 0; i + 1 < best.size(); ++i) {
        const char* a = groups[i].name.c_str();
        const char* b = groups[i + 1].name.c_str();
        const Candidate* x = best[i];
        const Candidate* y = best[i + 1];
        std::string s = std::string(a) + " > " + b + ": ";
        if (!groups[i].evaluated || !groups[i + 1].evaluated) {
            s += std::string(groups[i].evaluated ? b : a) +
                 " is refused by DeepSpeed with the settings given (not evaluated); not comparable.";
        } else if (!x && !y) {
            s += "neither fits; not comparable.";
        } else if (!x) {
            s += std::string(a) + " does not fit at micro batch 1, " + b + " does (" + tok_s(y->time.tokens_per_s) +
                 "); not comparable by speed.";
        } else if (!y) {
            s += std::string(b) + " does not fit, " + a + " does; not comparable by speed.";
        } else {
            ++total;
            const double tx = x->time.tokens_per_s, ty = y->time.tokens_per_s;
            char buf[256];
            if (tx >= ty) {
                std::snprintf(buf, sizeof buf, "agrees (%.0f vs %.0f tokens/s, %+.0f%%).", tx, ty, (tx / ty - 1) * 100);
                s += buf;
                ++agree;
            } else if (tx >= 0.95 * ty) {
                std::snprintf(buf, sizeof buf, "tie (%.0f vs %.0f tokens/s, within 5%%).", tx, ty);
                s += buf;
                ++agree;
            } else {
                std::snprintf(buf, sizeof buf, "disagrees - %s is faster (%.0f vs %.0f tokens/s, %+.0f%%) because ", b,
                              ty, tx, (ty / tx - 1) * 100);
                s += buf;
                // Why: the per-token difference of each component.
                const double nx = x->time.tokens_per_step, ny = y->time.tokens_per_step;
                const double dc = x->time.compute / nx - y->time.compute / ny;
                const double dm = x->time.exposed_comm / nx - y->time.exposed_comm / ny;
                const double dopt = x->time.optimizer / nx - y->time.optimizer / ny;
                const double doff = (x->time.offload + x->time.overhead) / nx - (y->time.offload + y->time.overhead) / ny;
                const double dpp = x->time.per_param / nx - y->time.per_param / ny;
                std::vector<std::pair<double, std::string>> why;
                if (y->micro_batch > x->micro_batch)
                    why.push_back({dc, "its larger micro batch fits (" + std::to_string(y->micro_batch) + " vs " +
                                           std::to_string(x->micro_batch) + "), so compute runs more efficiently"});
                else
                    why.push_back({dc, "its compute per token is lower (checkpointing / micro batch)"});
                why.push_back({dm, std::string(a) + " exposes more communication per token"});
                why.push_back({dopt, x->option.offload_optimizer != OffloadDevice::none
                                         ? std::string(a) + " runs Adam on the host CPU, shared by the node's GPUs"
                                         : std::string(a) + "'s optimizer step updates more parameters per GPU"});
                why.push_back({doff, std::string(a) + " spends more on offload transfers and bookkeeping per token"});
                why.push_back({dpp, std::string(a) + " pays more per-parameter-tensor hooks and launches per token"});
                std::sort(why.begin(), why.end(), [](const auto& p, const auto& q) { return p.first > q.first; });
                s += why.front().second + ".";
            }
        }
        out.push_back(s);
    }
    out.push_back("Agreement: " + std::to_string(agree) + " of " + std::to_string(total) + " comparable pairs.");
    return out;
}

// "fits: 30.1 GiB per GPU" or what overflowed: the GPU, the host, or both,
// each with what it needs.
static std::string fit_outcome(const Estimate& m) {
    const std::string gpu = gib(m.per_gpu.total) + " per GPU";
    const bool gpu_ok = m.fits_gpu.value_or(false);
    const bool host_ok = m.fits_host.value_or(true);
    if (gpu_ok && host_ok)
        return (tight_of(m) ? "fits, " + tight_words(m) + ": " : std::string("fits: ")) + gpu;
    std::string s;
    if (!gpu_ok) s = "GPU out of memory: " + gpu;
    if (!host_ok)
        s += (s.empty() ? "GPU fits (" + gpu + ") but host memory exceeded: " : "; host memory exceeded: ") +
             gib(m.per_node.host_memory) + " per node";
    return s;
}

// Whether the generation phase is the only one that overflows: the GPU of
// every other phase and the host fit.
static bool only_generation_overflows(const Estimate& e) {
    if (!e.fits_host.value_or(true)) return false;
    bool generation_over = false;
    for (const auto& p : e.phases) {
        if (!p.fits_gpu.has_value() || *p.fits_gpu) continue;
        if (p.name != "generation") return false;
        generation_over = true;
    }
    return generation_over;
}

// Step 8 of the recipe, "lower other defaults, e.g. the beam width": when
// `failed` (step 7) overflows in the generation phase only, lower num_beams,
// then the eval batch, then max_new_tokens, each to the largest value that
// fits (binary search: the KV cache and logits grow with each), the next one
// only once the previous is at 1. The step's candidate is set when it fits.
static PlanStep lower_generation_defaults(const Candidate& failed, EstimateInput& in, const SpeedHardware& hw,
                                          const SpeedConstants& k, uint64_t& evaluated) {
    const std::string action_text =
        std::string(recipe_step(8).action) + ": the generation beam width, then eval batch and max_new_tokens";
    const char* action = action_text.c_str();
    if (!failed.generation)
        return {8, action, "no generation during training (--eval-generate not given): nothing to lower; skipped", {}};
    if (!only_generation_overflows(failed.memory))
        return {8, action, "phases other than generation overflow too (first: " + failed.memory.first_oom_phase +
                               "): lowering the generation settings cannot fit; kept",
                {}};
    struct Knob {
        int64_t GenerationSettings::*field;
        const char* name;
        const char* hf;
    };
    const Knob knobs[] = {{&GenerationSettings::num_beams, "num_beams", "--generation_num_beams"},
                          {&GenerationSettings::eval_batch, "eval batch", "--per_device_eval_batch_size"},
                          {&GenerationSettings::max_new_tokens, "max_new_tokens", "GenerationConfig max_new_tokens"}};
    Candidate c = failed;
    GenerationSettings g = *failed.generation;
    std::string changes;
    auto fits_with = [&](const GenerationSettings& trial) {
        c.generation = trial;
        evaluate(c, in, hw, k);
        ++evaluated;
        return c.fits;
    };
    for (const Knob& kn : knobs) {
        const int64_t original = g.*kn.field;
        if (original <= 1) continue;
        int64_t lo = 1, hi = original - 1, best = 0;  // largest fitting value in [1, original)
        while (lo <= hi) {
            const int64_t mid = lo + (hi - lo) / 2;
            GenerationSettings t = g;
            t.*kn.field = mid;
            if (fits_with(t)) {
                best = mid;
                lo = mid + 1;
            } else {
                hi = mid - 1;
            }
        }
        g.*kn.field = best > 0 ? best : 1;
        changes += std::string(changes.empty() ? "" : ", ") + kn.name + " " + std::to_string(original) + " -> " +
                   std::to_string(g.*kn.field) + " (" + kn.hf + " " + std::to_string(g.*kn.field) + ")";
        if (best > 0) {
            fits_with(g);  // the candidate at the chosen settings
            return {8, action, "only the generation phase overflowed (" + gib(failed.memory.per_gpu.total) +
                                   " per GPU); " + changes + ": " + fit_outcome(c.memory),
                    c};
        }
    }
    in.generation = failed.generation;  // steps 9-10 go on with the user's settings
    return {8, action, "only the generation phase overflowed, but even " + changes +
                           " does not fit; the user's generation settings are kept",
            {}};
}

// Steps 1-10 of the recipe: escalates at micro batch 1 until an option
// fits; returns it (steps appended to r), or nothing when none fits.
static std::optional<Candidate> escalate_until_fit(const EstimateInput& base, EstimateInput& in,
                                                   EstimateInput& plan_base, const SpeedHardware& hw,
                                                   int64_t per_gpu, const SpeedConstants& k, PlanResult& r) {
    using D = OffloadDevice;
    using C = Checkpointing;
    struct Rung {
        int step;
        ZeroOption opt;
        bool mixed_precision;
        const char* action;
    };
    auto zo = [](int s, D o, D p, C c) {
        ZeroOption z;
        z.stage = s;
        z.offload_optimizer = o;
        z.offload_param = p;
        z.checkpointing = c;
        return z;
    };
    const std::string step1 = std::string(recipe_step(1).action) + ", ZeRO-0";
    const Rung ladder[] = {
        {1, zo(0, D::none, D::none, C::none), false, step1.c_str()},
        {2, zo(0, D::none, D::none, C::full), false, recipe_step(2).action},
        {3, zo(2, D::none, D::none, C::full), false, recipe_step(3).action},
        {4, zo(2, D::cpu, D::none, C::full), false, recipe_step(4).action},
        {5, zo(3, D::none, D::none, C::full), false, recipe_step(5).action},
        {6, zo(3, D::none, D::cpu, C::full), false, recipe_step(6).action},
        {7, zo(3, D::cpu, D::cpu, C::full), false, recipe_step(7).action},
        {9, zo(3, D::cpu, D::cpu, C::full), true, recipe_step(9).action},
        {10, zo(3, D::nvme, D::nvme, C::full), true, recipe_step(10).action},
    };
    // Checkpointing the settings give (--gradient-checkpointing, a launcher file) is kept from step 1 on.
    const Checkpointing given = base.train.checkpointing;
    for (Rung rung : ladder) {
        if (given != Checkpointing::none) {
            if (rung.step == 2) {
                r.steps.push_back({rung.step, rung.action,
                                   std::string("gradient checkpointing given (") + to_string(given) +
                                       "): kept from step 1; skipped",
                                   {}});
                continue;
            }
            if (rung.opt.checkpointing == Checkpointing::none) rung.opt.checkpointing = given;
        }
        if (const auto why = option_refusal(base, rung.opt, base.cluster.data_parallel())) {
            r.steps.push_back({rung.step, rung.action, *why + "; skipped", {}});
            continue;
        }
        Candidate c = base_candidate(base, rung.opt);
        c.micro_batch = 1;
        c.grad_accum = per_gpu;
        if (rung.mixed_precision) {
            if (rung.step == 9 && base.train.dtype != Dtype::fp32) {
                PlanStep s{rung.step, rung.action, std::string("already ") + to_string(base.train.dtype) + "; skipped", {}};
                r.steps.push_back(s);
                continue;
            }
            c.dtype = Dtype::bf16;
        }
        evaluate(c, in, hw, k);
        ++r.candidates;
        PlanStep s{rung.step, rung.action, "", c};
        s.outcome = fit_outcome(c.memory);
        r.steps.push_back(s);
        if (c.fits) return c;
        if (rung.step == 10)
            if (std::optional<Candidate> smaller = shrink_host_buffers(c, in, plan_base, hw, k, r)) return smaller;
        if (rung.step == 7) {
            PlanStep s8 = lower_generation_defaults(c, in, hw, k, r.candidates);
            r.steps.push_back(s8);
            if (s8.candidate) {
                plan_base.generation = s8.candidate->generation;  // steps 11-12 keep the lowered settings
                return s8.candidate;
            }
        }
    }
    return std::nullopt;
}

// Step 11: raises the micro batch of `fit` as far as it fits; sets
// r.first_fit and appends the step.
static void raise_micro_batch(const Candidate& fit, const std::vector<int64_t>& divs, int64_t per_gpu,
                              EstimateInput& in, const SpeedHardware& hw, const SpeedConstants& k,
                              PlanResult& r) {
    Candidate c = fit;
    const int64_t mb = largest_fitting(c, divs, per_gpu, in);
    r.candidates += uint64_t(std::ceil(std::log2(double(divs.size()) + 1)));
    c.micro_batch = mb;
    c.grad_accum = per_gpu / mb;
    evaluate(c, in, hw, k);
    r.first_fit = c;
    r.steps.push_back({11, recipe_step(11).action,
                       "micro batch " + std::to_string(mb) + " x accumulation " + std::to_string(c.grad_accum) +
                           ": " + tok_s(c.time.tokens_per_s) + ", " + gib(c.memory.per_gpu.total) + " per GPU" +
                           (c.tight ? "; " + tight_words(c.memory) : std::string()),
                       c});
}

PlanResult plan(const EstimateInput& base, const SpeedHardware& hw, int64_t global_batch, const PlanSpace& space,
                const SpeedConstants& k, const ReplayFits& replay_fits) {
    require_capacity(base, "plan");
    if (space.prefer_gather_on_save && !base.zero.stage3_gather_16bit_weights_on_model_save) {
        PlanSpace once = space;
        once.prefer_gather_on_save = false;
        EstimateInput on = base;
        on.zero.stage3_gather_16bit_weights_on_model_save = true;
        PlanResult r = plan(on, hw, global_batch, once, k, replay_fits);
        if (r.winner) {
            r.gather_on_save = "on";
            return r;
        }
        r = plan(base, hw, global_batch, once, k, replay_fits);
        if (r.winner) r.gather_on_save = "off";
        return r;
    }
    const int64_t per_gpu = per_gpu_batch(global_batch, base.cluster.gpus);
    const auto divs = divisors(per_gpu);
    PlanResult r;
    EstimateInput in = base;
    EstimateInput plan_base = base;  // base, with step 8's generation settings once lowered
    apply_emitted_settings(in);  // plan with exactly what --emit writes
    const std::optional<Candidate> fit = escalate_until_fit(base, in, plan_base, hw, per_gpu, k, r);
    if (!fit) {
        r.steps.back().outcome += "; nothing fits even with ZeRO-Infinity at micro batch 1: stop";
        return r;
    }
    raise_micro_batch(*fit, divs, per_gpu, in, hw, k, r);
    tune_for_speed(base, in, plan_base, *fit, divs, per_gpu, hw, space, k, replay_fits, r);
    // Step 10's host-RAM settings hold for every configuration evaluated after it (`in` carries them).
    carry_host_knobs(*fit, *r.first_fit);
    if (r.winner) carry_host_knobs(*fit, *r.winner);
    return r;
}

}  // namespace zeromem
