// Step-time model: ../shared/reference/speed_model.md section 7, with the
// collectives DeepSpeed issues per stage (section 1.2) costed by the ring
// alpha-beta model of section 1.3.
#include "zeromem/speed.h"

#include "zeromem/model.h"
#include "zeromem/util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

namespace zeromem {

namespace fs = std::filesystem;

namespace {

double ceil_div(double a, double b) { return std::max(1.0, std::ceil(a / b)); }

/// A collective as the ring model sees it: bus bandwidth at large size,
/// per-launch latency and S_half.
struct Link {
    double busbw = 0;
    double latency = 0;
    double half = 0;
};

enum class Coll { all_reduce, all_gather, reduce_scatter };

/// Bus bandwidth, latency and S_half of one collective kind over n ranks on
/// g GPUs per node and k nodes (speed_model.md 1.3): one node uses the intra
/// figures; several nodes are bounded by the NICs, whose per-GPU rate x
/// (n-1)/(k-1) is the bus bandwidth they sustain (only (k-1)/(n-1) of the
/// bytes leave a node).
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
/// (speed_model.md 1.3); factor 2(n-1)/n for all-reduce, (n-1)/n otherwise.
double coll_time(Coll c, double bytes, double launches, const Link& l, int64_t n) {
    if (n <= 1 || bytes <= 0) return 0;
    const double nn = double(n);
    const double factor = c == Coll::all_reduce ? 2.0 * (nn - 1) / nn : (nn - 1) / nn;
    return launches * l.latency + factor * (bytes + launches * l.half) / l.busbw;
}

/// Parameter tensors DeepSpeed fetches one by one under ZeRO-3: every weight
/// matrix of a layer, embeddings and an untied LM head. Without an
/// architecture: Psi / params_per_tensor_unknown_arch.
double fetched_tensors(const ModelInfo& m, const SpeedConstants& k) {
    if (!m.arch) return ceil_div(double(m.params), k.params_per_tensor_unknown_arch);
    const ModelArch& a = *m.arch;
    const double attn = a.fused_qkv ? 2.0 : 4.0;  // q,k,v,o or qkv,o
    const double mlp = a.gated_mlp ? 3.0 : 2.0;
    double t = double(a.num_layers) * (attn + mlp) + 1.0;  // + input embedding
    if (!a.tied_embeddings) t += 1.0;
    if (a.learned_positions) t += 1.0;
    return t;
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
    const ParamCount pc = count_params(a);
    // Lookups do no matmul: an untied input embedding (and learned positions)
    // are excluded; a tied one is the LM head and stays (speed_model.md 2.1).
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

StepTime step_time(const EstimateInput& in, const SpeedHardware& hw, const SpeedConstants& k) {
    StepTime r;
    const int64_t n = in.cluster.gpus;
    const int64_t nodes = in.cluster.nodes;
    const int64_t g = in.cluster.gpus_per_node();
    if (nodes > 1 && !hw.inter)
        throw InputError("--network: the cluster spans " + std::to_string(nodes) +
                         " nodes; name the inter-node network (e.g. ib-ndr400)");
    const int stage = in.zero.stage;
    const double gas = double(in.train.grad_accum);
    const double psi = double(in.model.params);
    const double w = double(dtype_bytes(in.train.communication_dtype.value_or(in.train.dtype)));
    const double tok = double(in.train.micro_batch) * double(in.train.seq_len);

    // Compute (2.1, 2.2, 7).
    const double fpt = model_flops_per_token(in.model, in.train.seq_len);
    double hw_flops = tok * fpt;
    if (in.train.checkpointing == Checkpointing::full) {
        hw_flops *= k.full_recompute_factor;
    } else if (in.train.checkpointing == Checkpointing::selective && in.model.arch) {
        // One more forward of the attention core: 4 L h s per token.
        hw_flops += tok * 4.0 * double(in.model.arch->num_layers) * double(in.model.arch->hidden_size) *
                    double(in.train.seq_len);
    }
    const double eta = hw.compute_efficiency * tok / (tok + k.half_efficiency_tokens);
    const double t_fb = hw_flops / (hw.peak_flops * eta);
    r.compute_efficiency = eta;
    r.compute = gas * t_fb;

    // Collectives (1.2, 1.3).
    const double S = psi * w;
    const Link ar = link_for(Coll::all_reduce, hw, n, g, nodes);
    const Link ag = link_for(Coll::all_gather, hw, n, g, nodes);
    const Link rs = link_for(Coll::reduce_scatter, hw, n, g, nodes);
    const double reduce_launches = ceil_div(psi, double(in.zero.reduce_bucket_size));
    const double gather_launches = ceil_div(psi, double(in.zero.allgather_bucket_size));
    const double ov = in.zero.overlap_comm_effective() ? k.overlap_fraction : 0.0;
    const double local = psi / double(n);  // parameters this rank updates (stages >= 1)

    double comm = 0, exposed = 0, overhead = k.fixed_step_overhead;
    double s3_comm = 0, s3_tensors = 0;  // stage 3: gathers + reduce-scatter per micro-step, fetched tensors
    if (stage == 0) {
        // buffered_allreduce_fallback after the boundary backward, not overlapped.
        comm = coll_time(Coll::all_reduce, S, reduce_launches, ar, n);
        exposed = comm;
    } else if (stage == 1 || stage == 2) {
        // Per-bucket all-reduce (use_multi_rank_bucket_allreduce), then an
        // all-gather of the updated 16-bit parameters after the step.
        const double t_ar = coll_time(Coll::all_reduce, S, reduce_launches, ar, n);
        const double t_ag = coll_time(Coll::all_gather, S, gather_launches, ag, n);
        const double reductions = stage == 1 ? 1.0 : gas;  // z2 reduces every micro-step
        comm = reductions * t_ar + t_ag;
        exposed = reductions * (1.0 - ov) * t_ar + t_ag;
        if (stage == 2) overhead += gas * k.stage2_overhead_fraction * t_fb;  // c2
        overhead += k.zero12_step_overhead_per_param * local;
    } else {
        // Two gathers (forward, backward) per tensor and a reduce-scatter per
        // bucket, every micro-step; prefetch hides them behind compute
        // except the first fetch; each launch has a fixed cost.
        const double tensors = fetched_tensors(in.model, k);
        const double fetch = 2.0 * coll_time(Coll::all_gather, S, tensors, ag, n);
        const double t_rs = coll_time(Coll::reduce_scatter, S, reduce_launches, rs, n);
        const double first = coll_time(Coll::all_gather, S / tensors, 1.0, ag, n);
        s3_comm = fetch + t_rs;
        s3_tensors = tensors;
        comm = gas * (fetch + t_rs);
        exposed = gas * (first + std::max(0.0, fetch + t_rs - first - k.stage3_overlap * t_fb));
        overhead += gas * (tensors * k.stage3_launches_per_tensor * k.stage3_launch_cost +
                           k.stage2_overhead_fraction * t_fb);  // launches + c2 (gradients partitioned too)
    }
    r.comm_total = comm;
    r.exposed_comm = exposed;

    // Optimizer (2.1, 3.1, 7).
    const double updated = stage == 0 ? psi : local;
    double offload = 0;
    if (in.zero.offload_optimizer == OffloadDevice::none) {
        r.optimizer = gpu_adam_time(updated, hw, k);
    } else {
        const double per_node = local * double(g);  // the node's ranks share one CPU
        double t_cpu = per_node / hw.cpu_adam_rate;
        if (in.zero.offload_optimizer == OffloadDevice::nvme)
            t_cpu = std::max(t_cpu, per_node * k.nvme_optimizer_read_bytes / hw.nvme_read +
                                        per_node * k.nvme_optimizer_write_bytes / hw.nvme_write);
        r.optimizer = t_cpu;
        const double grad_copies = stage >= 2 ? gas : 1.0;  // D2H each micro-step when grads are partitioned
        offload += local * w / hw.pcie_bandwidth                   // updated params, host -> GPU
                   + grad_copies * local * w / hw.pcie_bandwidth;  // gradients, GPU -> host
    }
    if (stage == 3 && in.zero.offload_param != OffloadDevice::none) {
        // Every micro-step the partition comes up for the forward and the
        // backward gathers; prefetch overlaps it with compute.
        // The copies share the compute that hides the gathers: only the
        // overlap budget the collectives leave can hide them. Each fetched
        // tensor also pays a host-to-device copy launch.
        double t_in = 2.0 * local * w / hw.pcie_bandwidth;
        if (in.zero.offload_param == OffloadDevice::nvme)
            t_in = std::max(t_in, 2.0 * local * double(g) * w / hw.nvme_read);
        const double budget_left = std::max(0.0, k.stage3_overlap * t_fb - s3_comm);
        offload += gas * (std::max(0.0, t_in - budget_left) + 2.0 * s3_tensors * k.stage3_launch_cost);
    }
    r.offload = offload;
    r.overhead = overhead;
    r.total = r.compute + r.exposed_comm + r.optimizer + r.offload + r.overhead;

    r.tokens_per_step = double(n) * gas * tok;
    r.tokens_per_s = r.tokens_per_step / r.total;
    r.tokens_per_s_per_gpu = r.tokens_per_s / double(n);
    r.model_flops_per_token = fpt;
    r.tflops_per_gpu = fpt * r.tokens_per_s_per_gpu / 1e12;
    r.mfu = fpt * r.tokens_per_s_per_gpu / hw.peak_flops;
    return r;
}

}  // namespace zeromem
