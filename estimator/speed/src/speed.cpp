// Step-time model (speed.h): the collectives DeepSpeed issues per stage
// (engine.py allreduce_gradients, stage_1_and_2.py average_tensor, stage3.py)
// costed by the ring alpha-beta model with nccl-tests' bus-bandwidth factors
// (NVIDIA/nccl-tests doc/PERFORMANCE.md).
#include "zeromem/speed.h"

#include "zeromem/model.h"
#include "zeromem/util.h"
#include "zeromem/zero3_comm.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>

namespace zeromem {

namespace fs = std::filesystem;

namespace {

double ceil_div(double a, double b) { return std::max(1.0, std::ceil(a / b)); }

std::string format_number(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", x);
    return buf;
}

/// A collective as the ring model sees it: bus bandwidth at large size,
/// per-launch latency and S_half.
struct Link {
    double busbw = 0;
    double latency = 0;
    double half = 0;
};

enum class Coll { all_reduce, all_gather, reduce_scatter };

/// Bus bandwidth, latency and S_half of one collective kind over n ranks on
/// g GPUs per node and k nodes: one node uses the intra
/// figures; several nodes are bounded by the NICs, whose per-GPU rate x
/// (n-1)/(k-1) is the bus bandwidth they sustain (only (k-1)/(n-1) of the
/// bytes leave a node; NCCL drives every NIC of a node at once: 4 x 8 B200
/// measured ~2x below one node, stas00/ml-engineering network/README.md).
Link link_for(Coll c, const SpeedHardware& hw, int64_t n, int64_t g, int64_t k) {
    Link l;
    l.busbw = c == Coll::all_reduce   ? hw.intra.allreduce_busbw
              : c == Coll::all_gather ? hw.intra.allgather_busbw
                                      : hw.intra.reducescatter_busbw;
    l.latency = hw.intra.latency;
    l.half = hw.intra.half_size;
    if (k > 1 && hw.inter) {
        const Interconnect& net = *hw.inter;
        const double per_gpu = net.links_per_node == 0 ? net.link_bw : net.link_bw * net.links_per_node / double(g);
        const double bus = net.efficiency * per_gpu * double(n - 1) / double(k - 1);
        l.busbw = std::min(l.busbw, bus);
        l.latency += net.latency;
        l.half = std::max(l.half, net.half_size);
    }
    return l;
}

/// Time of `launches` collectives that together move `bytes` (the full
/// tensor size S summed over launches): each launch costs
/// alpha + factor (S_i + S_half) / B_max, i.e. busbw(S) = B_max S/(S + S_half)
/// (a fit to measured nccl-tests sweeps); factor 2(n-1)/n for all-reduce,
/// (n-1)/n otherwise (NVIDIA/nccl-tests doc/PERFORMANCE.md).
double coll_time(Coll c, double bytes, double launches, const Link& l, int64_t n) {
    if (n <= 1 || bytes <= 0) return 0;
    const double nn = double(n);
    const double factor = c == Coll::all_reduce ? 2.0 * (nn - 1) / nn : (nn - 1) / nn;
    return launches * l.latency + factor * (bytes + launches * l.half) / l.busbw;
}

double gpu_adam_time(double params, const SpeedHardware& hw, const SpeedConstants& k) {
    return params * k.adam_bytes_per_param / (k.adam_hbm_efficiency * hw.hbm_bandwidth);
}

}  // namespace

std::vector<std::string> list_interconnect_presets(const std::string& data_dir) {
    return list_presets(data_dir, "interconnects");
}

Interconnect load_interconnect_preset(const std::string& name, const std::string& data_dir, const std::string& flag) {
    const auto names = list_interconnect_presets(data_dir);
    std::string found;
    for (const auto& n : names)
        if (to_lower(n) == to_lower(name)) found = n;
    if (found.empty()) throw InputError(unknown_preset_message(flag + ": unknown interconnect", name, names, ""));
    const std::string path = (fs::path(data_dir) / "interconnects" / (found + ".json")).string();
    Interconnect ic;
    try {
        const nlohmann::json j = nlohmann::json::parse(read_text_file(path));
        ic.name = j.at("name").get<std::string>();
        const std::string kind = j.at("kind").get<std::string>();
        if (kind != "intra" && kind != "inter") throw InputError(path + ": kind must be intra or inter");
        ic.inter_node = kind == "inter";
        if (ic.inter_node) {
            ic.link_bw = j.at("link_bytes_per_s").get<double>();
            ic.links_per_node = j.at("links_per_node").get<int>();
            ic.efficiency = j.at("efficiency").get<double>();
        } else {
            ic.allreduce_busbw = j.at("allreduce_busbw_bytes_per_s").get<double>();
            ic.allgather_busbw = j.at("allgather_busbw_bytes_per_s").get<double>();
            ic.reducescatter_busbw = j.at("reducescatter_busbw_bytes_per_s").get<double>();
        }
        ic.latency = j.at("latency_s").get<double>();
        ic.half_size = j.at("half_size_bytes").get<double>();
        ic.source = j.at("source").get<std::string>();
    } catch (const nlohmann::json::exception& e) {
        throw InputError(path + ": " + e.what());
    }
    return ic;
}

SpeedHardware speed_hardware(const GpuSpec& gpu, Dtype dtype, const std::string& intra_name,
                             const std::string& inter_name, const std::string& data_dir) {
    SpeedHardware hw;
    hw.gpu_name = gpu.name;
    const std::optional<double> tf = dtype == Dtype::bf16   ? gpu.bf16_tflops
                                     : dtype == Dtype::fp16 ? gpu.fp16_tflops
                                                            : gpu.fp32_tflops;
    if (!tf)
        throw InputError(std::string("--dtype: ") + gpu.name + " has no " + to_string(dtype) + " peak in data/gpus" +
                         (dtype == Dtype::bf16 ? " (no bf16 tensor cores; use --dtype fp16)" : ""));
    hw.peak_flops = *tf * 1e12;
    hw.hbm_bandwidth = gpu.hbm_bandwidth;
    if (gpu.compute_efficiency) hw.compute_efficiency = *gpu.compute_efficiency;
    if (gpu.pcie_bandwidth) hw.pcie_bandwidth = *gpu.pcie_bandwidth;
    const std::string intra = intra_name.empty() ? gpu.intra_interconnect : intra_name;
    if (intra.empty())
        throw InputError("--interconnect: " + gpu.name + " has no default intra-node interconnect; give one");
    hw.intra = load_interconnect_preset(intra, data_dir, "--interconnect");
    if (hw.intra.inter_node)
        throw InputError("--interconnect: '" + intra + "' is an inter-node network; give it with --network");
    if (!inter_name.empty()) {
        hw.inter = load_interconnect_preset(inter_name, data_dir, "--network");
        if (!hw.inter->inter_node)
            throw InputError("--network: '" + inter_name + "' is an intra-node interconnect; give it with --interconnect");
    }
    return hw;
}

double model_flops_per_token(const ModelInfo& model, int64_t seq_len) {
    if (!model.arch) return 6.0 * double(model.params);
    const ModelArch& a = *model.arch;
    const std::shared_ptr<const ParamCount> counted = shared_param_count(a);
    const ParamCount& pc = *counted;
    // Lookups do no matmul: an untied input embedding (and learned positions)
    // are excluded; a tied one is the LM head and stays.
    double mm = double(pc.active);  // MoE: the experts a token is routed to (== total for dense models)
    if (!a.tied_embeddings) mm -= double(pc.embedding);
    else if (a.learned_positions)
        mm -= double(a.max_position_embeddings + a.position_offset) * double(a.hidden_size);
    return 6.0 * mm + 12.0 * double(a.num_layers) * double(a.hidden_size) * double(seq_len);
}

SpeedConstants speed_constants_era2021() {
    // speed.h documents both values and their sources.
    constexpr double ERA2021_STAGE3_FETCH_COST = 1.1e-3;  // s per ZeRO-3 launch, synchronous fetch
    SpeedConstants k;
    k.stage3_overlap = 0.0;
    k.stage3_launch_cost = ERA2021_STAGE3_FETCH_COST;
    return k;
}

std::vector<std::string> list_host_presets(const std::string& data_dir) { return list_presets(data_dir, "hosts"); }

HostSpec load_host_preset(const std::string& name, const std::string& data_dir, const std::string& flag) {
    const auto names = list_host_presets(data_dir);
    std::string found;
    for (const auto& n : names)
        if (to_lower(n) == to_lower(name)) found = n;
    if (found.empty()) throw InputError(unknown_preset_message(flag + ": unknown host", name, names, ""));
    const std::string path = (fs::path(data_dir) / "hosts" / (found + ".json")).string();
    HostSpec h;
    try {
        const nlohmann::json j = nlohmann::json::parse(read_text_file(path));
        h.name = j.at("name").get<std::string>();
        h.cores = j.at("cores").get<int64_t>();
        h.sockets = j.at("sockets").get<int64_t>();
        h.memory_bandwidth = j.at("memory_bandwidth_bytes_per_s").get<double>();
        h.pcie_gen = j.at("pcie_gen").get<int>();
        h.pcie_lanes_per_gpu = j.at("pcie_lanes_per_gpu").get<int>();
        h.gpus_per_pcie_link = j.at("gpus_per_pcie_link").get<int>();
        h.source = j.at("source").get<std::string>();
    } catch (const nlohmann::json::exception& e) {
        throw InputError(path + ": " + e.what());
    }
    if (h.cores <= 0 || h.sockets <= 0 || h.memory_bandwidth <= 0 || h.pcie_lanes_per_gpu <= 0 ||
        h.gpus_per_pcie_link <= 0 || h.pcie_gen < 1)
        throw InputError(path + ": cores, sockets, memory_bandwidth_bytes_per_s, pcie_gen, pcie_lanes_per_gpu and "
                                "gpus_per_pcie_link must be positive");
    return h;
}

double host_pcie_bandwidth(const HostSpec& host) {
    // x16 spec per direction: gen3 15.75, gen4 31.5, gen5 63 GB/s, doubling
    // per generation (PCIe spec); 88% reached (nvbandwidth gen5 55.4 / 63,
    // stas00/ml-engineering network/README.md).
    constexpr double PCIE_EFFECTIVE_FRACTION = 0.88;
    const double x16 = 15.75e9 * std::pow(2.0, double(host.pcie_gen - 3));
    return PCIE_EFFECTIVE_FRACTION * x16 * double(host.pcie_lanes_per_gpu) / 16.0 / double(host.gpus_per_pcie_link);
}

double host_cpu_adam_rate(const HostSpec& host, const SpeedConstants& k) {
    const double by_cores = double(host.cores) * k.cpu_adam_params_per_core;
    const double by_dram = k.cpu_adam_memory_efficiency * host.memory_bandwidth / k.cpu_adam_bytes_per_param;
    return std::min(by_cores, by_dram);
}

void apply_host(SpeedHardware& hw, const HostSpec& host, const SpeedConstants& k) {
    hw.host = host;
    hw.pcie_bandwidth = std::min(hw.pcie_bandwidth, host_pcie_bandwidth(host));
    hw.cpu_adam_rate = host_cpu_adam_rate(host, k);
}

double nvme_effective_bandwidth(double peak, int64_t queue_depth, int64_t block_size, const SpeedConstants& k) {
    if (queue_depth <= 0 || block_size <= 0) return peak;
    const double in_flight = double(queue_depth) * double(block_size);
    return peak * in_flight / (in_flight + peak * k.nvme_request_latency);
}

namespace {

/// What every term of one step needs: cluster shape, sizes, the
/// forward+backward time of one micro-step.
struct StepCtx {
    int64_t n = 1, g = 1, nodes = 1;
    int stage = 0;
    double gas = 1, psi = 0, w = 2, tok = 0, t_fb = 0;
    double trainable = 0;  ///< parameters with gradients (frozen ones are only stored and gathered)
    double local = 0;      ///< trainable parameters this rank updates (stages >= 1)
};

/// Forward+backward(+recompute) of one micro-step: hardware FLOPs over peak
/// x eta(tok).
void compute_term(const EstimateInput& in, const SpeedHardware& hw, const SpeedConstants& k, StepCtx& c,
                  StepTime& r) {
    const double fpt = model_flops_per_token(in.model, in.train.seq_len);
    double hw_flops = c.tok * fpt;
    if (in.train.checkpointing == Checkpointing::full) {
        hw_flops *= k.full_recompute_factor;
    } else if (in.train.checkpointing == Checkpointing::selective && in.model.arch) {
        // One more forward of the attention core: 4 L h s per token.
        hw_flops += c.tok * 4.0 * double(in.model.arch->num_layers) * double(in.model.arch->hidden_size) *
                    double(in.train.seq_len);
    }
    const double eta = hw.compute_efficiency * c.tok / (c.tok + k.half_efficiency_tokens);
    c.t_fb = hw_flops / (hw.peak_flops * eta);
    r.compute_efficiency = eta;
    r.compute = c.gas * c.t_fb;
    r.model_flops_per_token = fpt;
}

/// Times of one ZeRO-3 micro-step's collectives.
struct Zero3Times {
    double forward = 0, backward = 0, gradients = 0;  ///< per micro-step
    /// Full checkpointing's recompute gathers, per micro-step: the checkpointed blocks run their forward again in
    /// backward (torch/utils/checkpoint.py CheckpointFunction.backward, or the non-reentrant recompute hooks), and
    /// DeepSpeed's pre-forward hook fetches each of their modules again (parameter_offload.py _pre_forward_module_hook
    /// -> partitioned_param_coordinator.py fetch_sub_module), the forward's gather once more. Selective
    /// recompute replays the attention core only, which holds no parameters.
    double recompute = 0;
    double replica = 0;  ///< MiCS replica all-reduce, once per step (at the accumulation boundary)
};

/// Link of a collective inside a group of `ranks` contiguous ranks: the
/// intra-node figures when the group fits in one node, else the NICs of
/// the nodes it spans.
Link group_link(Coll coll, const SpeedHardware& hw, int64_t ranks, int64_t g) {
    const int64_t spanned = ranks > g ? (ranks + g - 1) / g : 1;
    return link_for(coll, hw, ranks, std::min(ranks, g), spanned);
}

/// The ZeRO-3 collectives of one micro-step (zeromem/zeropp.h
/// zero3_comm_volume for the bytes; coll_time for the cost):
/// forward gather in the partition group (N_d, or MiCS shard), backward
/// gather in the hpZ group when hpZ is on (partition_parameters.py
/// all_gather_coalesced uses ds_secondary_tensor over
/// zero_param_process_group), gradients by reduce-scatter or, with qgZ on
/// several nodes, an intra-node then an inter-node int4 all-to-all
/// (coalesced_collectives.py all_to_all_quant_reduce; an all-to-all moves
/// (n-1)/n of its bytes like a reduce-scatter), plus MiCS's all-reduce of
/// the gradient partitions across replicas (mics.py
/// allreduce_mics_shard_grads). Records the per-step volumes in `r`.
Zero3Times zero3_collectives(const EstimateInput& in, const SpeedHardware& hw, const StepCtx& c, double fetched,
                             double reduce_launches, StepTime& r) {
    const Zero3CommVolume v = zero3_comm_volume(in, c.trainable);
    Zero3Times t;
    t.forward = coll_time(Coll::all_gather, v.forward_gather, fetched,
                          group_link(Coll::all_gather, hw, v.gather_group, c.g), v.gather_group);
    t.backward = coll_time(Coll::all_gather, v.backward_gather, fetched,
                           group_link(Coll::all_gather, hw, v.backward_group, c.g), v.backward_group);
    if (in.train.checkpointing == Checkpointing::full) t.recompute = t.forward;
    if (v.qgz) {
        t.gradients = coll_time(Coll::reduce_scatter, v.gradient_reduce, reduce_launches,
                                group_link(Coll::reduce_scatter, hw, c.g, c.g), c.g) +
                      coll_time(Coll::reduce_scatter, v.gradient_reduce / double(c.g), reduce_launches,
                                link_for(Coll::reduce_scatter, hw, c.nodes, c.g, c.nodes), c.nodes);
    } else {
        t.gradients = coll_time(Coll::reduce_scatter, v.gradient_reduce, reduce_launches,
                                group_link(Coll::reduce_scatter, hw, v.gather_group, c.g), v.gather_group);
    }
    if (v.replicas > 1) {  // allreduce_mics_shard_grads runs at the accumulation boundary only
        const int64_t spanned = std::min<int64_t>(v.replicas, c.nodes);
        t.replica = coll_time(Coll::all_reduce, v.replica_allreduce, reduce_launches,
                                 link_for(Coll::all_reduce, hw, v.replicas, c.g, spanned), v.replicas);
    }
    r.comm_bytes_forward = c.gas * v.forward_gather * (t.recompute > 0 ? 2.0 : 1.0);
    r.comm_bytes_backward = c.gas * v.backward_gather;
    r.comm_bytes_gradients = c.gas * v.gradient_reduce + v.replica_allreduce;
    r.comm_bytes_cross_node = c.gas * (v.cross_node - v.replica_cross_node) + v.replica_cross_node;
    return t;
}

/// Collectives (as DeepSpeed issues them per stage, costed by coll_time)
/// and the per-tensor / per-module costs of each stage. Returns the ZeRO-3
/// collectives of one micro-step (what the parameter-offload copies compete
/// with for overlap).
double comm_terms(const EstimateInput& in, const SpeedHardware& hw, const SpeedConstants& k, const StepCtx& c,
                  StepTime& r) {
    const double G = c.trainable * c.w;    // gradients and updated parameters
    const Link ar = link_for(Coll::all_reduce, hw, c.n, c.g, c.nodes);
    const Link ag = link_for(Coll::all_gather, hw, c.n, c.g, c.nodes);
    const double reduce_launches = ceil_div(c.trainable, double(in.zero.reduce_bucket_size));
    const double gather_launches = ceil_div(c.trainable, double(in.zero.allgather_bucket_size));
    const double ov = in.zero.overlap_comm_effective() ? k.overlap_fraction : 0.0;
    // Tensors with gradients (hooks fire only for them).
    const double tensors = c.stage == 0 ? 0.0 : parameter_tensor_count(in.model, k) * c.trainable / c.psi;
    r.parameter_tensors = tensors;
    double s3_comm = 0;
    if (c.stage == 0) {
        // buffered_allreduce_fallback after the boundary backward, not overlapped.
        r.comm_total = coll_time(Coll::all_reduce, G, reduce_launches, ar, c.n);
        r.exposed_comm = (1.0 - k.stage0_overlap) * r.comm_total;
    } else if (c.stage == 1 || c.stage == 2) {
        // Per-bucket all-reduce (use_multi_rank_bucket_allreduce), then an
        // all-gather of the updated 16-bit parameters after the step.
        const double t_ar = coll_time(Coll::all_reduce, G, reduce_launches, ar, c.n);
        const double t_ag = coll_time(Coll::all_gather, G, gather_launches, ag, c.n);
        const double reductions = c.stage == 1 ? 1.0 : c.gas;  // z2 reduces every micro-step
        r.comm_total = reductions * t_ar + t_ag;
        r.exposed_comm = reductions * (1.0 - ov) * t_ar + t_ag;
        if (c.stage == 2) r.overhead += c.gas * k.stage2_overhead_fraction * c.t_fb;  // c2
        r.overhead += k.zero12_step_overhead_per_param * c.local;
        // Each tensor's gradient passes a hook and the IPG bucket: every
        // micro-step in ZeRO-2 (reduce_ready_partitions_and_remove_grads),
        // once at the boundary in ZeRO-1 (stage_1_and_2.py).
        r.per_param += reductions * tensors * k.zero12_per_tensor_cost;
    } else {
        // Two gathers (forward, backward) per fetched tensor and a
        // reduce-scatter per bucket, every micro-step; prefetch hides them
        // behind compute except the first fetch; each fetch/release is a
        // launch per module with a fixed cost, and every tensor's gradient
        // passes a hook.
        const double fetched = fetched_tensor_count(in.model, in.zero.stage3_param_persistence_threshold, k);
        r.fetched_modules = fetched;
        // ZeRO++ (qwZ, hpZ, qgZ) and MiCS change the bytes and the groups
        // (zero3_collectives); plain ZeRO-3 gathers S twice (three times under
        // full checkpointing) and reduces G.
        const Zero3Times z3 = zero3_collectives(in, hw, c, fetched, reduce_launches, r);
        const double fetch = z3.forward + z3.recompute + z3.backward;
        const double t_rs = z3.gradients;
        const double first = z3.forward / fetched;
        s3_comm = fetch + t_rs;
        // MiCS's replica all-reduce, once per step, counted as exposed.
        r.comm_total = c.gas * s3_comm + z3.replica;
        r.exposed_comm = c.gas * (first + std::max(0.0, s3_comm - first - k.stage3_overlap * c.t_fb)) + z3.replica;
        // The recompute's fetch is one launch more per fetched module.
        const double launches = k.stage3_launches_per_tensor + (z3.recompute > 0 ? 1.0 : 0.0);
        r.per_param += c.gas * (fetched * launches * k.stage3_launch_cost + tensors * k.zero12_per_tensor_cost);
        r.overhead += c.gas * k.stage2_overhead_fraction * c.t_fb;  // c2: gradients partitioned too
    }
    return s3_comm;
}

/// DeepSpeed-MoE all-to-all (--ep-size E_p > 1): per MoE block two in
/// forward (dispatch, combine) and two in backward, each moving the
/// dispatched tokens E x C x h x b_m of which (E_p-1)/E_p leave the rank
/// (deepspeed/moe/sharded_moe.py MOELayer.forward, _AllToAll). The group is
/// E_p consecutive ranks (utils/groups.py _create_expert_and_data_parallel),
/// costed with the all-gather link (same (n-1)/n bus factor in nccl-tests).
/// On the critical path: added to comm_total and exposed_comm.
void moe_all_to_all_term(const EstimateInput& in, const SpeedHardware& hw, const StepCtx& c, StepTime& r) {
    const int64_t ep = in.moe.ep();
    if (ep <= 1 || !in.model.arch || in.model.arch->num_experts <= 0 || in.model.arch->num_moe_layers <= 0) return;
    const ModelArch& a = *in.model.arch;
    const double cap = double(moe_capacity(in.train.micro_batch * in.train.seq_len, a.num_experts,
                                           a.num_experts_per_tok, in.moe.capacity_factor, in.moe.min_capacity));
    const double bytes = double(a.num_experts) * cap * double(a.hidden_size) * double(dtype_bytes(in.train.dtype));
    const int64_t g = std::min<int64_t>(c.g, ep);
    const int64_t nodes = (ep + c.g - 1) / c.g;
    const Link l = link_for(Coll::all_gather, hw, ep, g, nodes);
    r.moe_all_to_all = c.gas * 4.0 * double(a.num_moe_layers) * coll_time(Coll::all_gather, bytes, 1.0, l, ep);
    r.comm_total += r.moe_all_to_all;
    r.exposed_comm += r.moe_all_to_all;
}

/// Optimizer step and optimizer-offload copies (ZeRO-Offload,
/// arXiv:2101.06840): the CPU optimizer on the node's partitions at the host's rate (torch AdamW
/// when the client optimizer runs there), fp32 gradients down (each
/// micro-step once gradients are partitioned, overlapping backward when
/// overlap_comm is on) and 16-bit parameters up after the step (exposed).
void optimizer_terms(const EstimateInput& in, const SpeedHardware& hw, const SpeedConstants& k, const StepCtx& c,
                     StepTime& r) {
    const double updated = c.stage == 0 ? c.trainable : c.local;
    if (in.zero.offload_optimizer == OffloadDevice::none) {
        r.optimizer = gpu_adam_time(updated, hw, k);
        return;
    }
    r.torch_cpu_optimizer = !in.train.fused_optimizer && !in.zero.zero_force_ds_cpu_optimizer;
    double rate = hw.cpu_adam_rate;
    if (r.torch_cpu_optimizer) rate /= k.torch_cpu_adam_slowdown;
    r.cpu_optimizer_rate = rate;
    const double per_node = c.local * double(c.g);  // the node's ranks share one host
    double t_cpu = per_node / rate;
    if (in.zero.offload_optimizer == OffloadDevice::nvme) {
        const double rd = nvme_effective_bandwidth(hw.nvme_read, in.zero.aio_queue_depth, in.zero.aio_block_size, k);
        const double wr = nvme_effective_bandwidth(hw.nvme_write, in.zero.aio_queue_depth, in.zero.aio_block_size, k);
        t_cpu = std::max(t_cpu, per_node * k.nvme_optimizer_read_bytes / rd + per_node * k.nvme_optimizer_write_bytes / wr);
    }
    r.optimizer = t_cpu;
    const double grad_copies = c.stage >= 2 ? c.gas : 1.0;  // D2H each micro-step when grads are partitioned
    const double hide = c.stage == 1 ? 0.0
                        : c.stage == 3 ? std::min(1.0, k.stage3_overlap)
                                       : (in.zero.overlap_comm_effective() ? k.overlap_fraction : 0.0);
    const double d2h = grad_copies * c.local * 4.0 / hw.pcie_bandwidth;  // fp32 gradient partitions
    const double h2d = c.local * c.w / hw.pcie_bandwidth;                  // updated 16-bit parameters
    r.offload += h2d + d2h - std::min(hide * d2h, c.gas * c.t_fb);
}

/// ZeRO-3 parameter offload: every fetch copies the rank's 16-bit
/// partition of the module from pinned host memory (or NVMe) over PCIe, in
/// forward, in full checkpointing's recompute and again in backward. The fetch is synchronous within a module:
/// at most the prefetched part (stage3_prefetch_bucket_size elements ahead)
/// times param_copy_overlap (0: the copy blocks) hides behind compute, and
/// only in the overlap budget the collectives leave. Each synchronous fetch
/// of a tensor costs param_fetch_sync_cost.
void param_offload_term(const EstimateInput& in, const SpeedHardware& hw, const SpeedConstants& k,
                        const StepCtx& c, double s3_comm, StepTime& r) {
    if (c.stage != 3 || in.zero.offload_param == OffloadDevice::none) return;
    const double partition = c.psi / double(in.zero.partition_size(c.n));  // every parameter, frozen or not, is fetched
    const double passes = in.train.checkpointing == Checkpointing::full ? 3.0 : 2.0;
    double t_in = passes * partition * c.w / hw.pcie_bandwidth;
    if (in.zero.offload_param == OffloadDevice::nvme) {
        const double rd = nvme_effective_bandwidth(hw.nvme_read, in.zero.aio_queue_depth, in.zero.aio_block_size, k);
        t_in = std::max(t_in, passes * partition * double(c.g) * c.w / rd);
    }
    const double fetched = r.fetched_modules;
    const double per_module = c.psi / fetched;
    const double prefetched = std::min(1.0, double(in.zero.stage3_prefetch_bucket_size) / per_module);
    const double budget_left = std::max(0.0, k.stage3_overlap * c.t_fb - s3_comm);
    const double hidden = prefetched * k.param_copy_overlap * std::min(t_in, budget_left);
    r.offload += c.gas * (t_in - hidden);
    r.per_param += c.gas * passes * fetched * k.param_fetch_sync_cost;
}

}  // namespace

StepTime step_time(const EstimateInput& in, const SpeedHardware& hw, const SpeedConstants& k) {
    StepTime r;
    StepCtx c;
    c.n = in.cluster.gpus;
    c.nodes = in.cluster.nodes;
    c.g = in.cluster.gpus_per_node();
    if (c.nodes > 1 && !hw.inter)
        throw InputError("--network: the cluster spans " + std::to_string(c.nodes) +
                         " nodes; name the inter-node network (e.g. ib-ndr400)");
    c.stage = in.zero.stage;
    c.gas = double(in.train.grad_accum);
    c.psi = double(in.model.params);
    c.w = double(dtype_bytes(in.train.communication_dtype.value_or(in.train.dtype)));
    c.tok = double(in.train.micro_batch) * double(in.train.seq_len);
    c.trainable = std::min(c.psi, double(in.train.trainable_params.value_or(in.model.params)));
    if (in.train.lora_rank > 0 && in.model.arch)  // the adapters train; the base is only stored (and gathered)
        c.trainable = std::min(c.psi, double(lora_params(*in.model.arch, in.train.lora_rank, in.train.lora_targets)));
    // MiCS: each rank updates 1/mics_shard_size of the states (mics.py).
    c.local = c.trainable / double(in.zero.partition_size(c.n));
    r.overhead = k.fixed_step_overhead;
    r.pcie_bandwidth = hw.pcie_bandwidth;

    compute_term(in, hw, k, c, r);
    const double s3_comm = comm_terms(in, hw, k, c, r);
    moe_all_to_all_term(in, hw, c, r);
    optimizer_terms(in, hw, k, c, r);
    param_offload_term(in, hw, k, c, s3_comm, r);
    r.total = r.compute + r.exposed_comm + r.optimizer + r.offload + r.per_param + r.overhead;

    r.tokens_per_step = double(c.n) * c.gas * c.tok;
    r.tokens_per_s = r.tokens_per_step / r.total;
    r.tokens_per_s_per_gpu = r.tokens_per_s / double(c.n);
    r.tflops_per_gpu = r.model_flops_per_token * r.tokens_per_s_per_gpu / 1e12;
    r.mfu = r.model_flops_per_token * r.tokens_per_s_per_gpu / hw.peak_flops;
    return r;
}

std::vector<CalibrationNote> calibration_notes(const EstimateInput& in, const SpeedHardware& hw, const StepTime& t,
                                               const SpeedConstants& k) {
    std::vector<CalibrationNote> v;
    const SpeedConstants era = speed_constants_era2021();
    v.push_back({"compute", "compute_efficiency (eta_max " + format_number(hw.compute_efficiency) + ")",
                 "est. from the measured MFU of G5/G6 (llm-foundry MPT-7B)"});
    v.push_back({"compute", "half_efficiency_tokens", "est. ~1024, not fitted"});
    if (in.zero.stage == 3) {
        v.push_back({"exposed_comm", "stage3_overlap",
                     k.stage3_overlap == era.stage3_overlap ? "0 for 2021 DeepSpeed (DeepSpeed#1069)"
                                                            : "est. 1 (prefetch)"});
        v.push_back({"per_param", "stage3_launch_cost",
                     k.stage3_launch_cost == era.stage3_launch_cost ? "fitted on G1 and G3 (2021 z3 - z2 gaps)"
                                                                    : "fitted on G7 (Llama-3-70B ZeRO-3, 32x H100)"});
    } else if (in.zero.stage == 0 && k.stage0_overlap > 0) {
        v.push_back({"exposed_comm", "stage0_overlap", "torch DDP overlap, est. as overlap_fraction, not fitted"});
    } else if (in.zero.stage > 0 && in.zero.overlap_comm_effective()) {
        v.push_back({"exposed_comm", "overlap_fraction", "est. 0.8, not fitted"});
    }
    if (in.zero.stage >= 1) v.push_back({"per_param", "zero12_per_tensor_cost", "est. 20 us, bounded by G3"});
    if (in.zero.stage >= 2 && t.overhead > 0)
        v.push_back({"overhead", "stage2_overhead_fraction", "est. from the z2 - z1 gaps of section 4 (G1-G3 data)"});
    if (k.fixed_step_overhead > 0) v.push_back({"overhead", "fixed_step_overhead", "fitted on G9"});
    if (in.zero.offload_optimizer != OffloadDevice::none) {
        if (hw.host)
            v.push_back({"optimizer", "cpu_adam_memory_efficiency", "fitted on G8 (DGX H100 host, 2.2e9 params/s)"});
        else
            v.push_back({"optimizer", "cpu_adam_rate " + format_number(hw.cpu_adam_rate),
                         "default, derived from G8, G11 and DeepSpeed#6834"});
        if (t.torch_cpu_optimizer)
            v.push_back({"optimizer", "torch_cpu_adam_slowdown", "6: midpoint of the tutorial's 5-7x, not fitted"});
    } else {
        v.push_back({"optimizer", "adam_hbm_efficiency", "est. 0.7, not fitted"});
    }
    if (in.zero.offload_param != OffloadDevice::none) {
        v.push_back({"per_param", "param_fetch_sync_cost", "fitted on G1 and G3 (2021 synchronous fetches)"});
        v.push_back({"offload", "param_copy_overlap", "0: blocking copy (partition_parameters.py), not fitted"});
    }
    if (in.zero.offload_optimizer == OffloadDevice::nvme || in.zero.offload_param == OffloadDevice::nvme)
        v.push_back({"optimizer", "nvme_request_latency", "est. 100 us, not fitted"});
    return v;
}

}  // namespace zeromem
