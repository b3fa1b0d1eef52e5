// ZeRO++ (hpZ, qwZ, qgZ; Wang et al. 2023, arXiv:2306.10209) and MiCS
// (runtime/zero/mics.py) memory terms of the full convention, and the
// validation of their settings. Every term cites the DeepSpeed v0.19.6
// function that allocates it (declarations and formulas: zeromem/terms.h).
#include "zeromem/terms.h"
#include "zeromem/zeropp.h"

#include <algorithm>
#include <string>

namespace zeromem {
namespace terms {

namespace {
uint64_t cdiv(uint64_t a, uint64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

// CUDAQuantizer.target_group_size: at most 8000 elements share one fp32 scale.
constexpr uint64_t kQwzGroup = 8000;
}  // namespace

Term hpz_secondary_partition(const Sizes& s, bool load) {
    const uint64_t numel = load ? s.hpz_numel_load : s.hpz_numel_train;
    const bool on_gpu = s.hpz > 1 && !s.offload_param_cpu && !s.offload_param_nvme;
    return make(load ? "hpZ secondary partition (all parameters, zero.Init)"
                     : "hpZ secondary partition (non-persistent parameters, rebuilt each forward)",
                "b_m · ceil(numel / zero_hpz_partition_size)",
                "runtime/zero/partition_parameters.py _partition_param_sec (ds_secondary_tensor); "
                "runtime/zero/stage3.py invalidate_secondary_tensor (_post_step)",
                on_gpu ? s.bm * cdiv(numel, s.hpz) : 0);
}

Term qwz_quantized_gather(const Sizes& s, bool backward) {
    const uint64_t group = backward && s.hpz > 1 ? s.hpz : s.N;
    const uint64_t all = s.Pn * s.N;
    const uint64_t n = std::min(std::max(s.L, s.prefetch), all > 0 ? all : s.L);
    const uint64_t local = cdiv(n, group);
    const uint64_t bf16 = s.bf16 ? 2 * local + 2 * s.L : 0;
    const uint64_t bytes = n + 4 * group * cdiv(local, kQwzGroup) + 3 * local + bf16;
    return make("qwZ int8 all-gather buffer + fp32 scales",
                "n + 4 · G · ceil(ceil(n/G)/8000) + 3 · ceil(n/G) (+ 2 · ceil(n/G) + 2L for bf16), "
                "n = min(max(L, prefetch), Ψ) elements, G = gather group",
                "runtime/zero/partition_parameters.py all_gather_coalesced (_all_gather_coalesced quantize "
                "branch: int8 flat_tensor, quant_scale_buffer), CUDAQuantizer.quantize",
                s.qwz && group > 1 ? bytes : 0);
}

Term qgz_all_to_all_buffers(const Sizes& s) {
    const uint64_t n = s.full_finetune ? s.L : 0;
    const uint64_t g = std::max<uint64_t>(1, s.g);
    const uint64_t world = std::max<uint64_t>(1, s.g * s.nodes);
    const uint64_t data = n / 2 + n / 2 + 2 * cdiv(n, 2 * g) + 2 * cdiv(n, g) + 2 * 2 * cdiv(n, world);
    const uint64_t scales = 2 * 4 * s.qgz_groups + 2 * 4 * cdiv(s.qgz_groups, g);
    return make("qgZ int4 all-to-all buffers (intra- and inter-node) + fp16 output",
                "n/2 + n/2 + 2·n/(2g) + 2n/g + 4n/N + 8·groups + 8·groups/g, n = L, groups = max(rows, cols, N)",
                "runtime/comm/coalesced_collectives.py all_to_all_quant_reduce (swizzle_quant, all_to_all_single, "
                "quantized_reduction, dequantize); runtime/zero/stage3.py __avg_scatter_grads",
                s.qgz ? data + scales : 0);
}

Term mics_hierarchical_gather_clone(const Sizes& s) {
    const uint64_t spanned = s.mics > 0 ? std::max<uint64_t>(1, s.mics / std::max<uint64_t>(1, s.g)) : 0;
    return make("MiCS hierarchical gather: inter-node output clone", "b_m · ceil(L / m) · (m / g)",
                "runtime/zero/mics.py MiCS_Init._hierarchical_all_gather_params (inter_outputs[i].detach().clone())",
                s.mics_hierarchical ? s.bm * cdiv(s.L, s.mics) * spanned : 0);
}

}  // namespace terms

namespace {
std::string n2s(int64_t v) { return std::to_string(v); }
}  // namespace

void validate_zeropp(const EstimateInput& in) {
    const auto& z = in.zero;
    const int64_t gpus = in.cluster.gpus, nd = in.cluster.data_parallel(), g = in.cluster.gpus_per_node();
    if (z.zero_hpz_partition_size < 0)
        throw InputError("zero_optimization.zero_hpz_partition_size: " + n2s(z.zero_hpz_partition_size) +
                         " is negative (DeepSpeed runtime/zero/config.py: ge=0)");
    if (z.zero_hpz_partition_size > 1 && z.stage == 3) {
        // utils/groups.py _create_zero_param_parallel_group: _ensure_divisibility(world_size, min(hpz, world_size)).
        const int64_t h = std::min(z.zero_hpz_partition_size, gpus);
        if (gpus % h != 0)
            throw InputError("zero_optimization.zero_hpz_partition_size: " + n2s(z.zero_hpz_partition_size) +
                             " does not divide the " + n2s(gpus) +
                             " GPUs (DeepSpeed utils/groups.py _create_zero_param_parallel_group)");
        if (z.offload_param == OffloadDevice::nvme)
            throw InputError("zero_optimization.zero_hpz_partition_size: hpZ with offload_param nvme: zeromem does "
                             "not model where the secondary partition lives (partition_parameters.py "
                             "_partition_param_sec allocates it on the remote device)");
        if (z.mics_shard_size > 0)
            throw InputError("zero_optimization.zero_hpz_partition_size: hpZ together with mics_shard_size: zeromem "
                             "does not model the two partitions combined");
    }
    if (z.zero_quantized_gradients && z.stage == 3 && !z.reduce_scatter)
        throw InputError("zero_optimization.zero_quantized_gradients: needs reduce_scatter true (DeepSpeed "
                         "stage3.py __init__ asserts it when the all-to-all group is set)");
    if (z.mics_shard_size > 0 && z.stage == 3) {  // below stage 3 DeepSpeed ignores it (zeropp_notes)
        if (z.mics_shard_size > nd || nd % z.mics_shard_size != 0)
            throw InputError("zero_optimization.mics_shard_size: " + n2s(z.mics_shard_size) +
                             " does not divide the data-parallel size N_d = " + n2s(nd) +
                             " (DeepSpeed zero/mics_utils.py _generate_mics_config)");
        if (z.offload_optimizer != OffloadDevice::none && nd / z.mics_shard_size > 1)
            throw InputError("zero_optimization.mics_shard_size: MiCS with replicas (N_d / mics_shard_size = " +
                             n2s(nd / z.mics_shard_size) + ") and offload_optimizer: DeepSpeed raises \"Local sharding "
                             "has no support for CPU offloading\" (mics.py allreduce_mics_shard_grads)");
        if (in.cluster.tp * in.cluster.pp != 1)
            throw InputError("zero_optimization.mics_shard_size: MiCS with tensor or pipeline parallelism is not "
                             "modelled by zeromem (mics_utils.py builds shard groups over the whole world)");
        if (z.mics_hierarchical_params_gather && z.mics_shard_size <= g)
            throw InputError("zero_optimization.mics_hierarchical_params_gather: the shard group of " +
                             n2s(z.mics_shard_size) + " GPUs fits in one node of " + n2s(g) +
                             "; DeepSpeed asserts it spans more than one node (mics_utils.py create_mics_comm_groups)");
        if (z.mics_hierarchical_params_gather && z.mics_shard_size % g != 0)
            throw InputError("zero_optimization.mics_hierarchical_params_gather: the shard size " +
                             n2s(z.mics_shard_size) + " is not a multiple of the " + n2s(g) +
                             " GPUs per node (mics_utils.py create_mics_comm_groups asserts it)");
    }
}

bool zeropp_allows(const ZeroSettings& z, int stage, OffloadDevice offload_optimizer, OffloadDevice offload_param,
                   int64_t data_parallel) {
    if (stage != 3) return true;
    if (z.zero_hpz_partition_size > 1 && offload_param == OffloadDevice::nvme) return false;
    const bool replicas = z.mics_shard_size > 0 && data_parallel / z.mics_shard_size > 1;
    return !(replicas && offload_optimizer != OffloadDevice::none);
}

std::vector<std::string> zeropp_notes(const EstimateInput& in) {
    std::vector<std::string> notes;
    const auto& z = in.zero;
    if (z.stage != 3 && (z.zero_hpz_partition_size > 1 || z.zero_quantized_weights || z.zero_quantized_gradients))
        notes.push_back("ZeRO++ (zero_hpz_partition_size, zero_quantized_weights, zero_quantized_gradients) acts in "
                        "ZeRO stage 3 only; DeepSpeed ignores it at stage " + n2s(z.stage) + ".");
    if (z.stage != 3 && z.mics_shard_size > 0)
        notes.push_back("mics_shard_size acts in ZeRO stage 3 only (engine.py _configure_zero_optimizer builds "
                        "MiCS_Optimizer there); DeepSpeed ignores it at stage " + n2s(z.stage) + ".");
    if (z.stage == 3 && z.zero_quantized_gradients && in.cluster.nodes == 1)
        notes.push_back("zero_quantized_gradients on one node: DeepSpeed reduces with the plain reduce-scatter "
                        "(stage3.py __avg_scatter_grads uses all_to_all_quant_reduce only when nodes > 1).");
    if (z.stage == 3 && z.zero_quantized_gradients)
        notes.push_back("qgZ: gradients of 1-D tensors, or whose size is not a multiple of 2 x world size, fall back "
                        "to the reduce-scatter (coalesced_collectives.py all_to_all_quant_reduce); zeromem counts the "
                        "all-to-all path.");
    if (z.stage == 3 && z.mics_shard_size > 0)
        notes.push_back("MiCS: model states partitioned over " + n2s(z.mics_shard_size) + " GPUs (mics_shard_size) "
                        "instead of N_d = " + n2s(in.cluster.data_parallel()) + ", replicated " +
                        n2s(in.cluster.data_parallel() / z.mics_shard_size) +
                        " times; the gradient all-reduce across replicas uses all_reduce_coalesced (no extra buffer, "
                        "mics.py allreduce_mics_shard_grads, torch >= 1.13).");
    // engine.py _configure_zero_optimizer builds MiCS only for mics_shard_size > 0.
    if (z.mics_shard_size == 0 || z.mics_shard_size < -1)
        notes.push_back("mics_shard_size = " + n2s(z.mics_shard_size) + ": DeepSpeed enables MiCS only for a value > 0 "
                        "(engine.py _configure_zero_optimizer); this value leaves it off, as -1 does.");
    if (z.mics_hierarchical_params_gather && z.mics_shard_size <= 0)
        notes.push_back("mics_hierarchical_params_gather acts only with MiCS (mics_shard_size > 0, "
                        "mics_utils.py create_mics_comm_groups); DeepSpeed ignores it here.");
    return notes;
}

}  // namespace zeromem

namespace zeromem {
namespace terms {

void zeropp_host_terms(const Sizes& s, std::vector<HostTerm>& out) {
    if (s.hpz <= 1 || !s.offload_param_cpu) return;
    const uint64_t raw = s.bm * cdiv(s.hpz_numel_load, s.hpz);
    const bool rounded = s.pin_param && s.round_pinned;
    HostTerm t;
    t.name = "hpZ secondary partitions (offload_param cpu)";
    t.formula = "b_m · ceil(numel / zero_hpz_partition_size), pinned per parameter";
    t.source = "runtime/zero/partition_parameters.py _partition_param_sec (torch.empty on the remote device, pin_memory)";
    t.bytes = rounded ? static_cast<uint64_t>(double(raw) * s.per_param_rounding + 0.5) : raw;
    t.pinned = s.pin_param;
    t.life = HostLife::init;
    out.push_back(t);
}

}  // namespace terms
}  // namespace zeromem
