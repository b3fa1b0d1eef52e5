// fit: the fewest GPUs per ZeRO option for a model, or the largest model on the GPUs given. Memory comes
// from estimate(); the search helpers are the planner's (planner_search.h).
#include "zeromem/planner.h"
#include "planner_search.h"

#include "zeromem/optimizer_wrapper.h"
#include "zeromem/verdict_band.h"
#include "zeromem/workload.h"
#include "zeromem/util.h"
#include "zeromem/zeropp.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace zeromem {

using namespace planner_detail;

// Sets `in` to option `o` at the user's own micro batch and accumulation.
// fit keeps everything the user gave but the stage and offload choice:
// micro batch, accumulation and gradient checkpointing included (every
// estimate flag reaches fit).
static void apply_option_at_base_batch(const EstimateInput& base, const ZeroOption& o, EstimateInput& in) {
    ZeroOption with_checkpointing = o;
    with_checkpointing.checkpointing = base.train.checkpointing;
    Candidate c = base_candidate(base, with_checkpointing);
    c.micro_batch = base.train.micro_batch;
    c.grad_accum = base.train.grad_accum;
    apply_candidate(c, in);
}

// Fits the capacity and, unlike tight_of, with the margin: the estimate's verdict is "fits".
static bool fits_with_margin(const Estimate& e) { return fits_of(e) && !tight_of(e); }

using Accept = bool (*)(const Estimate&);

bool fit_ranks_before(const FitRow& a, const FitRow& b) {
    auto rank = [](const FitRow& r) { return r.unbounded || (r.value > 0 && !r.tight) ? 0 : r.value > 0 ? 1 : 2; };
    return rank(a) < rank(b);
}

// The largest parameter count in [lo, hi) that `accept`s, `lo` accepted and `hi` not (binary search:
// the need grows with the parameters).
static uint64_t largest_accepted(EstimateInput& in, Accept accept, uint64_t lo, uint64_t hi) {
    while (hi - lo > 1) {
        const uint64_t mid = lo + (hi - lo) / 2;
        in.model.params = mid;
        (accept(memory_estimate(in)) ? lo : hi) = mid;
    }
    return lo;
}

// One option's largest model: the largest that fits the capacity, whether it is tight there, and the
// largest that fits with the margin. `in` is scratch, set to the option.
static FitRow largest_for_option(const EstimateInput& base, const ZeroOption& o, EstimateInput& in) {
    FitRow row;
    row.option = o;
    const bool offloads = o.offload_optimizer != OffloadDevice::none || o.offload_param != OffloadDevice::none;
    if (offloads && !base.cluster.host_memory)
        row.note = "offloaded states are bounded by host RAM (and NVMe space): give --host-memory";
    auto at = [&](uint64_t p) {
        in.model.params = p;
        return memory_estimate(in);
    };
    const uint64_t cap = uint64_t(1) << 52;
    uint64_t lo = 1000000, hi = lo;
    if (!fits_of(at(lo))) return row;
    while (hi < cap && fits_of(at(hi * 2))) hi *= 2;
    if (hi >= cap) {
        row.unbounded = true;
        row.note = offloads && !base.cluster.host_memory
                       ? "not bounded by GPU memory; give --host-memory to bound the offloaded states"
                       : "not bounded by GPU memory";
        return row;
    }
    row.value = largest_accepted(in, fits_of, hi, hi * 2);  // hi fits, 2 hi does not
    const Estimate e = at(row.value);
    row.per_gpu_total = e.per_gpu.total;
    row.tight = tight_of(e);
    row.with_margin = !row.tight ? row.value
                      : fits_with_margin(at(lo)) ? largest_accepted(in, fits_with_margin, lo, row.value)
                                                 : 0;
    if (!row.with_margin)
        row.note += std::string(row.note.empty() ? "" : "; ") + "tight at every size: not even a million parameters "
                    "fit with the margin";
    return row;
}

std::vector<FitRow> largest_model(const EstimateInput& base) {
    require_capacity(base, "fit");
    std::vector<FitRow> out;
    EstimateInput no_generation = base;  // no architecture, no KV cache: said in each row's note
    no_generation.generation.reset();
    EstimateInput in = no_generation;
    in.model.arch.reset();
    in.model.largest_layer_params = 0;
    for (const ZeroOption& o : stage_offload_options()) {
        // Skip what DeepSpeed refuses with the settings given.
        if (!option_allowed(base, o, base.cluster.data_parallel())) continue;
        apply_option_at_base_batch(no_generation, o, in);
        FitRow row;
        try {
            row = largest_for_option(base, o, in);
        } catch (const InputError& e) {
            row = FitRow{};
            row.option = o;
            row.note = e.what();  // e.g. the deepspeed convention has no estimator for stages 0 and 1
        }
        if (base.generation)
            row.note += std::string(row.note.empty() ? "" : "; ") +
                        "--eval-generate not counted: the largest model has no architecture for a KV cache";
        out.push_back(row);
    }
    std::stable_sort(out.begin(), out.end(), fit_ranks_before);
    return out;
}

std::string tight_meaning(const EstimateInput& in, bool largest_model) {
    if (largest_model || !in.model.arch)
        return "tight: fits, but the margin does not cover the activations a dense decoder of that size stores "
               "(no architecture: the estimate holds model states only)";
    if (in.convention != Convention::full) return "tight: never at the " + std::string(to_string(in.convention)) +
                                                  " convention (no error band is measured for it)";
    return "tight: fits, but " + band_words(verdict_band().gpu_under, verdict_band().gpu_runs);
}

// Why an option does not fit on even `max_gpus` GPUs: what is left per GPU
// when ZeRO has partitioned all it partitions. The 16-bit weights stay
// replicated below stage 3 (ZeRO paper Sec. 5.1-5.2).
static std::string why_never_fits(EstimateInput& in, int64_t max_gpus, int64_t gpus_per_node) {
    in.cluster.gpus = max_gpus;
    in.cluster.nodes = max_gpus <= gpus_per_node ? 1 : max_gpus / gpus_per_node;
    const Estimate e = memory_estimate(in);
    const uint64_t cap = in.cluster.gpu_memory.value_or(0);
    const GpuMemory& m = e.per_gpu;
    if (e.fits_gpu.value_or(false) && e.fits_host == false)
        return "host memory per node is exceeded at every size (" + format_gib(double(e.per_node.host_memory)) +
               " GiB needed)";
    if (in.zero.stage < 3 && m.parameters >= cap)
        return "the replicated 16-bit weights alone (" + format_gib(double(m.parameters)) + " GiB) exceed the GPU (" +
               format_gib(double(cap)) + " GiB)";
    return "even on " + std::to_string(max_gpus) + " GPUs each needs " + format_gib(double(m.total)) + " GiB of " +
           format_gib(double(cap)) + " GiB (what is not partitioned: activations, buffers, context)";
}

// The step between GPU counts DeepSpeed accepts for ZeRO stage `stage`:
// tp x pp x ep_size divides N_d x tp x pp (utils/groups.py
// _create_expert_and_data_parallel), and at stage 3 mics_shard_size divides
// N_d (zero/mics_utils.py _generate_mics_config). hpZ is checked per count
// (gpu_count_allowed) since DeepSpeed takes min(hpz, world size).
static int64_t gpu_count_step(const EstimateInput& base, int stage) {
    const int64_t mp = base.cluster.tp * base.cluster.pp;
    int64_t step = mp * base.moe.ep();
    if (stage == 3 && base.zero.mics_shard_size > 0) step = std::lcm(step, mp * base.zero.mics_shard_size);
    return step;
}

// Whether DeepSpeed accepts `n` GPUs for option `o`: a multiple of `step`,
// zero_hpz_partition_size dividing n when below n (utils/groups.py
// _create_zero_param_parallel_group), no MiCS replicas with offload, no
// dtype mix without ZeRO (option_allowed).
// With mics_hierarchical_params_gather the shard group spans whole nodes of
// more than one (mics_utils.py create_mics_comm_groups asserts it).
static bool gpu_count_allowed(const EstimateInput& base, const ZeroOption& o, int64_t step, int64_t n,
                              int64_t gpus_per_node) {
    if (n % step != 0) return false;
    const int64_t hpz = base.zero.zero_hpz_partition_size, m = base.zero.mics_shard_size;
    if (o.stage == 3 && hpz > 1 && n % std::min(hpz, n) != 0) return false;
    if (o.stage == 3 && m > 0 && base.zero.mics_hierarchical_params_gather &&
        (n <= gpus_per_node || m <= gpus_per_node || m % gpus_per_node != 0))
        return false;
    return option_allowed(base, o, n / (base.cluster.tp * base.cluster.pp));
}

// Why no GPU count up to `max_gpus` is one DeepSpeed accepts for the option.
static std::string no_allowed_count(const EstimateInput& base, int64_t step, int64_t max_gpus) {
    std::string why = "no GPU count up to " + std::to_string(max_gpus) + " is a multiple of " + std::to_string(step) +
                      " (tp x pp x --ep-size";
    if (base.zero.mics_shard_size > 0) why += ", mics_shard_size";
    return why + ") that DeepSpeed accepts with these settings";
}

// The fewest GPUs up to `max_gpus` whose estimate `accept`s for the option `in` is set to: accepted
// counts within one node in steps, then whole nodes by binary search (memory per GPU falls with more
// GPUs); 0 when none. `allowed` says which counts DeepSpeed accepts.
template <class Allowed>
static int64_t fewest_accepted(EstimateInput& in, Accept accept, int64_t step, int64_t node_step, int64_t gpus_per_node,
                               int64_t max_gpus, const Allowed& allowed) {
    auto accepts_in = [&](EstimateInput& e, int64_t n, Accept a) {
        e.cluster.gpus = n;
        e.cluster.nodes = n <= gpus_per_node ? 1 : n / gpus_per_node;
        return a(memory_estimate(e));
    };
    for (int64_t n = step; n <= std::min(gpus_per_node, max_gpus); n += step)
        if (allowed(n) && accepts_in(in, n, accept)) return n;
    const int64_t kmax = max_gpus / node_step;
    auto accepts_k = [&](int64_t k) {
        const int64_t n = k * node_step;
        return n > gpus_per_node && allowed(n) && accepts_in(in, n, accept);
    };
    if (kmax >= 1 && accepts_k(kmax)) {
        int64_t lo = 0, hi = kmax;  // lo does not accept (or is not a whole-node count), hi does
        while (hi - lo > 1) {
            const int64_t mid = lo + (hi - lo) / 2;
            (accepts_k(mid) ? hi : lo) = mid;
        }
        return hi * node_step;
    }
    // The largest count is refused or does not accept: where DeepSpeed
    // accepts only some counts (MiCS replicas with optimizer offload:
    // exactly the shard group) fitting is not monotonic over k, so the
    // first accepted whole-node counts are tried in order (64 at most).
    // A count that does not fit even without a fragmentation allowance
    // is ruled out without replaying it.
    EstimateInput bare = in;
    bare.residual.fragmentation_provider = nullptr;
    bare.residual.fragmentation_fraction = 0.0;
    int64_t tried = 0;
    for (int64_t k = 1; k <= kmax && tried < 64; ++k) {
        const int64_t n = k * node_step;
        if (n <= gpus_per_node || !allowed(n)) continue;
        ++tried;
        if (accepts_in(bare, n, fits_of) && accepts_in(in, n, accept)) return n;
    }
    return 0;
}

// Fewest GPUs for option `o` (fewest_gpus): the fewest that fit, whether
// the estimate there is tight, and the fewest that fit with the margin.
// `in` is scratch, set to the option.
static FitRow fewest_for_option(const EstimateInput& base, const ZeroOption& o, int64_t gpus_per_node,
                                int64_t max_gpus, EstimateInput& in) {
    FitRow row;
    row.option = o;
    if (o.stage == 0) {  // a dtype mix DeepSpeed refuses without ZeRO, whatever the count
        EstimateInput at = base;
        at.zero.stage = 0;
        if (const auto why = optimizer_wrapper_refusal(at)) {
            row.note = why->message();
            return row;
        }
    }
    apply_option_at_base_batch(base, o, in);
    const int64_t step = gpu_count_step(base, o.stage);
    auto allowed = [&](int64_t n) { return gpu_count_allowed(base, o, step, n, gpus_per_node); };
    // Whole nodes: multiples of `node_step` GPUs (of the node, step and hpZ).
    int64_t node_step = std::lcm(gpus_per_node, step);
    if (o.stage == 3 && base.zero.zero_hpz_partition_size > 1)
        node_step = std::lcm(node_step, base.zero.zero_hpz_partition_size);
    const int64_t found = fewest_accepted(in, fits_of, step, node_step, gpus_per_node, max_gpus, allowed);
    row.value = uint64_t(found);
    if (found) {
        in.cluster.gpus = found;
        in.cluster.nodes = found <= gpus_per_node ? 1 : found / gpus_per_node;
        const Estimate e = memory_estimate(in);
        row.per_gpu_total = e.per_gpu.total;
        row.tight = tight_of(e);
        row.with_margin =
            row.tight ? uint64_t(fewest_accepted(in, fits_with_margin, step, node_step, gpus_per_node, max_gpus, allowed))
                      : row.value;
        if (!row.with_margin)
            row.note = "tight on every count up to " + std::to_string(max_gpus) + " GPUs: none fits with the margin";
        return row;
    }
    const int64_t kmax = max_gpus / node_step;
    int64_t largest = 0;  // the largest accepted count up to max_gpus
    for (int64_t k = kmax; k >= 1 && !largest; --k)
        if (k * node_step > gpus_per_node && allowed(k * node_step)) largest = k * node_step;
    for (int64_t n = std::min(gpus_per_node, max_gpus) / step * step; n >= step && !largest; n -= step)
        if (allowed(n)) largest = n;
    row.note = largest ? why_never_fits(in, largest, gpus_per_node) : no_allowed_count(base, step, max_gpus);
    return row;
}

std::vector<FitRow> fewest_gpus(const EstimateInput& base, int64_t gpus_per_node, int64_t max_gpus) {
    require_capacity(base, "fit");
    if (gpus_per_node <= 0) throw InputError("--gpus-per-node: must be a positive integer");
    // Tensor/pipeline parallelism: GPU counts come in multiples of tp x pp.
    const int64_t mp = base.cluster.tp * base.cluster.pp;
    if (gpus_per_node % mp != 0)
        throw InputError("--tp/--pp: tp x pp = " + std::to_string(mp) + " does not divide " +
                         std::to_string(gpus_per_node) + " GPUs per node");
    // The options side by side, each on its own copy of the base (for_each_index): the rows and the first
    // refusal are those of the loop in order.
    const std::vector<ZeroOption> options = stage_offload_options();
    std::vector<FitRow> out(options.size());
    std::vector<std::optional<InputError>> refusals(options.size());
    for_each_index(options.size(), [&](size_t i) {
        EstimateInput in = base;
        try {
            out[i] = fewest_for_option(base, options[i], gpus_per_node, max_gpus, in);
        } catch (const InputError& e) {  // what DeepSpeed refuses for this option at the counts searched
            refusals[i] = e;
            out[i].option = options[i];
            out[i].note = e.what();
        }
    });
    std::optional<InputError> first;  // refused for every option: bad input, thrown
    size_t refused = 0;
    for (const auto& r : refusals)
        if (r) {
            if (!first) first = r;
            ++refused;
        }
    if (first && refused == out.size()) throw *first;
    std::stable_sort(out.begin(), out.end(), fit_ranks_before);
    return out;
}

}  // namespace zeromem
