// The paper and deepspeed conventions of the estimate: the ZeRO paper's model states, and
// DeepSpeed's own estimate_zero2/zero3_model_states_mem_needs (zeromem/estimate.h).
#include "estimate_detail.h"

#include "zeromem/util.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace zeromem {

using namespace estimate_detail;

namespace estimate_detail {

// ---------------------------------------------------------------------------
// paper convention
// ---------------------------------------------------------------------------
void estimate_paper(const EstimateInput& in, Estimate& out, const Explainer& ex) {
    const double P = static_cast<double>(in.model.params);
    // MiCS: stage-3 model states partitioned over mics_shard_size GPUs.
    const double N = static_cast<double>(in.zero.partition_size(in.cluster.gpus));
    const double g = static_cast<double>(in.cluster.gpus_per_node());
    const double osb = optimizer_state_bytes_per_element(in.train.optimizer);
    const double K = 4.0 + osb;
    const OptimizerInfo& oi = optimizer_info(in.train.optimizer);
    const double first_b = oi.factored ? 0.0 : (oi.states == 2 ? osb / 2 : osb);
    const int s = in.zero.stage;
    // hpZ: + a 16-bit secondary partition 2Ψ/hpz (ZeRO++ paper Sec. 3.2).
    const double hpz = in.zero.hpz_active() ? 2 * P / double(in.zero.zero_hpz_partition_size) : 0;
    const double params = (s >= 3 ? 2 * P / N : 2 * P) + hpz;
    const double grads = s >= 2 ? 2 * P / N : 2 * P;
    const double opt = s >= 1 ? K * P / N : K * P;
    auto& m = out.per_gpu;
    m.parameters = to_bytes(params);
    m.gradients = to_bytes(grads);
    const bool off_opt = in.zero.offload_optimizer != OffloadDevice::none;
    const bool off_par = in.zero.offload_param != OffloadDevice::none;
    const uint64_t opt_b = to_bytes(opt);
    m.master_weights = to_bytes(4 * P / (s >= 1 ? N : 1));
    m.momentum = to_bytes(first_b * P / (s >= 1 ? N : 1));
    m.variance = to_bytes((osb - first_b) * P / (s >= 1 ? N : 1));
    m.optimizer_states = opt_b;
    uint64_t host_rank = 0;
    if (off_opt) {
        host_rank += opt_b;
        m.optimizer_states = m.master_weights = m.momentum = m.variance = 0;
    }
    if (off_par) {
        host_rank += m.parameters;
        m.parameters = 0;
    }
    m.total = m.parameters + m.gradients + m.optimizer_states;
    out.per_node.host_steady = to_bytes(static_cast<double>(host_rank) * g);
    out.per_node.host_memory = out.per_node.host_steady;
    out.peak_phase = "model_states";
    static const char* forms[] = {"(2+2+K)Ψ", "2Ψ + 2Ψ + KΨ/N_d", "2Ψ + (2+K)Ψ/N_d", "(2+2+K)Ψ/N_d"};
    if (ex.on) ex.term("model_states", forms[s],
            "Ψ=" + num(P) + ", K=" + num(K) + ", N_d=" + num(N) + (off_opt ? " (optimizer states on host)" : ""),
            m.total, kSrcPaper);
    if (ex.on && hpz > 0) ex.term("parameters: hpZ secondary partition", "2Ψ/zero_hpz_partition_size",
            "Ψ=" + num(P) + ", zero_hpz_partition_size=" + num(double(in.zero.zero_hpz_partition_size)), to_bytes(hpz),
            "ZeRO++ paper (Wang et al. 2023, arXiv:2306.10209) Sec. 3.2; DeepSpeed partition_parameters.py _partition_param_sec");
    if (in.zero.stage == 3 && in.zero.mics_shard_size > 0)
        ex.note("MiCS: N_d in the stage-3 formula is mics_shard_size = " + num(N) + ".");
    ex.note("paper convention: model states only (ZeRO paper Sec. 3.1); residual states are not counted; "
            "K = 4 (fp32 master) + " + num(osb) + " (" + to_string(in.train.optimizer) + ")" +
            " (optimizer) bytes per parameter.");
}

// ---------------------------------------------------------------------------
// deepspeed convention: bit-exact ports, same operation order as the Python
// ---------------------------------------------------------------------------
// The inputs both of DeepSpeed's estimators read, as doubles in their
// operation order: Ψ, GPUs per node, nodes, total GPUs (nodes x GPUs per node),
// additional_buffer_factor, and whether the optimizer is offloaded.
struct DeepspeedSizes {
    double P, g, n, N, abf;
    bool cpu_offload;
};

DeepspeedSizes deepspeed_sizes(const EstimateInput& in) {
    const double g = static_cast<double>(in.cluster.gpus_per_node());
    const double n = static_cast<double>(in.cluster.nodes);
    return {static_cast<double>(in.model.params), g, n, n * g, in.additional_buffer_factor,
            in.zero.offload_optimizer != OffloadDevice::none};
}

// DeepSpeed's estimate_zero2_model_states_mem_needs: fills out.per_gpu and
// returns the host bytes per node (before truncation).
double deepspeed_zero2(const EstimateInput& in, Estimate& out, const Explainer& ex) {
    const DeepspeedSizes d = deepspeed_sizes(in);
    const double P = d.P, g = d.g, N = d.N, abf = d.abf;
    const bool cpu_offload = d.cpu_offload;
    auto& m = out.per_gpu;
    double cpu = 0;
    if (cpu_offload) {
        const double gpu = 2 * P;
        cpu = P * std::max(4 * N, 16.0) * abf;
        m.parameters = static_cast<uint64_t>(std::trunc(gpu));
        m.total = m.parameters;
        if (ex.on) ex.term("gpu", "2Ψ", "Ψ=" + num(P), m.total, kSrcDsZ2);
        if (ex.on) ex.term("host", "Ψ · max(4N, 16) · abf", "Ψ=" + num(P) + ", N=" + num(N) + ", abf=" + num(abf),
                static_cast<uint64_t>(std::trunc(cpu)), kSrcDsZ2);
    } else {
        const double part = in.legacy_zero2_formula ? std::trunc(16 * P / N) : std::trunc(18 * P / N);
        const double full = in.legacy_zero2_formula ? 4 * P : 2 * P;
        const double gpu = full + part;
        cpu = P * 4 * g * abf;
        m.total = static_cast<uint64_t>(std::trunc(gpu));
        m.parameters = static_cast<uint64_t>(2 * P);
        m.master_weights = static_cast<uint64_t>(std::trunc(4 * P / N));
        m.momentum = m.master_weights;
        m.variance = m.master_weights;
        m.optimizer_states = m.master_weights + m.momentum + m.variance;
        m.gradients = m.total - m.parameters - m.optimizer_states;
        if (ex.on) ex.term("gpu", in.legacy_zero2_formula ? "4Ψ + trunc(16Ψ/N)  (legacy, v0.4.2-v0.14.2)" : "2Ψ + trunc(18Ψ/N)",
                "Ψ=" + num(P) + ", N=" + num(N), m.total, kSrcDsZ2);
        if (ex.on) ex.term("host", "Ψ · 4 · g · abf", "Ψ=" + num(P) + ", g=" + num(g) + ", abf=" + num(abf),
                static_cast<uint64_t>(std::trunc(cpu)), kSrcDsZ2);
    }
    return cpu;
}

// DeepSpeed's estimate_zero3_model_states_mem_needs: fills out.per_gpu and
// returns the host bytes per node (before truncation).
double deepspeed_zero3(const EstimateInput& in, Estimate& out, const Explainer& ex) {
    const DeepspeedSizes d = deepspeed_sizes(in);
    const double P = d.P, g = d.g, n = d.n, N = d.N, abf = d.abf;
    const bool cpu_offload = d.cpu_offload;
    auto& m = out.per_gpu;
    double cpu = 0;
    const double L = static_cast<double>(in.model.largest_layer_params);
    const double gf = 1.0 / n;
    const double llm = 4 * L;
    const bool zi = in.zero.zero_init;
    const bool cpu_offload_params = in.zero.offload_param != OffloadDevice::none;
    double gpu = 0;
    const char* gform = "";
    const char* cform = "";
    if (cpu_offload) {
        if (cpu_offload_params) {
            gpu = llm;
            cpu = zi ? P * 18 * gf * abf : P * std::max(4 * g, 18 * gf) * abf;
            gform = "4L";
            cform = zi ? "Ψ · 18 · (1/nodes) · abf" : "Ψ · max(4g, 18/nodes) · abf";
        } else {
            gpu = llm + std::trunc(2 * P / N);
            cpu = zi ? P * 16 * gf * abf : P * std::max(4 * g, 16 * gf) * abf;
            gform = "4L + trunc(2Ψ/N)";
            cform = zi ? "Ψ · 16 · (1/nodes) · abf" : "Ψ · max(4g, 16/nodes) · abf";
        }
    } else {
        gpu = llm + std::trunc(18 * P / N);
        cpu = zi ? L * 4 * g * abf : P * 4 * g * abf;
        gform = "4L + trunc(18Ψ/N)";
        cform = zi ? "L · 4 · g · abf" : "Ψ · 4 · g · abf";
    }
    m.total = static_cast<uint64_t>(std::trunc(gpu));
    m.temporary_buffers = static_cast<uint64_t>(llm);  // largest layer: 16-bit param + grad
    const uint64_t states = m.total - m.temporary_buffers;
    if (!cpu_offload) {
        m.parameters = static_cast<uint64_t>(std::trunc(2 * P / N));
        m.master_weights = static_cast<uint64_t>(std::trunc(4 * P / N));
        m.momentum = m.variance = m.master_weights;
        m.optimizer_states = 3 * m.master_weights;
        m.gradients = states - m.parameters - m.optimizer_states;
    } else {
        m.parameters = states;
    }
    if (!ex.on) return cpu;
    const std::string subst = "Ψ=" + num(P) + ", L=" + num(L) + ", N=" + num(N) + ", g=" + num(g) +
                              ", nodes=" + num(n) + ", abf=" + num(abf) + ", zero_init=" + (zi ? "1" : "0");
    ex.term("gpu", gform, subst, m.total, kSrcDsZ3);
    ex.term("host", cform, subst, static_cast<uint64_t>(std::trunc(cpu)), kSrcDsZ3);
    return cpu;
}

void estimate_deepspeed(const EstimateInput& in, Estimate& out, const Explainer& ex) {
    const int s = in.zero.stage;
    if (s < 2)
        throw InputError("--convention deepspeed: DeepSpeed's estimators cover ZeRO stages 2 and 3 only "
                         "(estimate_zero2/3_model_states_mem_needs); use --convention full or paper for stage " +
                         std::to_string(s));
    const double cpu = s == 2 ? deepspeed_zero2(in, out, ex) : deepspeed_zero3(in, out, ex);
    out.per_node.host_memory = static_cast<uint64_t>(std::trunc(cpu));
    out.per_node.host_steady = out.per_node.host_memory;
    out.peak_phase = "model_states";
    if (in.zero.hpz_active() || in.zero.mics_shard_size > 0 || in.zero.zero_quantized_weights ||
        in.zero.zero_quantized_gradients)
        ex.note("deepspeed convention: DeepSpeed's estimators ignore ZeRO++ (hpZ, qwZ, qgZ) and MiCS; use --convention "
                "full or paper to count them.");
    ex.note("deepspeed convention: DeepSpeed's own estimator, model states only; no activations, buckets, "
            "prefetch, CUDA context or fragmentation. DeepSpeed prints these figures with the label GB but "
            "divides by 2^30 (GiB).");
}


}  // namespace estimate_detail

}  // namespace zeromem
