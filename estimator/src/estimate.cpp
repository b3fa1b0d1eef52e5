#include "zeromem/estimate.h"

#include "zeromem/util.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace zeromem {

namespace {

constexpr const char* kSrcPaper = "ZeRO paper (Rajbhandari et al. 2020, arXiv:1910.02054) Sec. 5.1-5.3, Fig. 1";
constexpr const char* kSrcDsZ2 = "DeepSpeed estimate_zero2_model_states_mem_needs, runtime/zero/stage_1_and_2.py";
constexpr const char* kSrcDsZ3 = "DeepSpeed estimate_zero3_model_states_mem_needs, runtime/zero/stage3.py";
constexpr const char* kSrcKorthikanti = "Korthikanti et al. 2022 (arXiv:2205.05198) Table 2 and Sec. 4.3";

std::string num(double v) {
    char buf[64];
    if (v == std::floor(v) && std::fabs(v) < 1e18)
        std::snprintf(buf, sizeof buf, "%.0f", v);
    else
        std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
}

uint64_t to_bytes(double v) { return v <= 0 ? 0 : static_cast<uint64_t>(std::llround(v)); }

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

void validate(const EstimateInput& in) {
    if (in.model.params == 0) throw InputError("--params: the model has zero parameters");
    if (in.cluster.gpus <= 0) throw InputError("--gpus: must be a positive number of GPUs");
    if (in.cluster.nodes <= 0) throw InputError("--nodes: must be a positive number of nodes");
    if (in.cluster.gpus % in.cluster.nodes != 0)
        throw InputError("--nodes: " + std::to_string(in.cluster.nodes) + " nodes do not divide " +
                         std::to_string(in.cluster.gpus) + " GPUs evenly");
    const auto& z = in.zero;
    if (z.stage < 0 || z.stage > 3)
        throw InputError("zero_optimization.stage: " + std::to_string(z.stage) + " is outside 0..3");
    if (z.offload_param != OffloadDevice::none && z.stage != 3)
        throw InputError("zero_optimization.offload_param: parameter offload needs ZeRO stage 3 (stage is " +
                         std::to_string(z.stage) + ")");
    if (z.offload_optimizer != OffloadDevice::none && z.stage == 0)
        throw InputError("zero_optimization.offload_optimizer: optimizer offload needs ZeRO stage 1, 2 or 3");
    if (z.offload_optimizer == OffloadDevice::nvme && z.stage != 3)
        throw InputError("zero_optimization.offload_optimizer.device: nvme (ZeRO-Infinity) needs ZeRO stage 3; "
                         "stages 1 and 2 offload to cpu only");
    if (in.train.micro_batch <= 0) throw InputError("--micro-batch: must be positive");
    if (in.train.seq_len <= 0) throw InputError("--seq-len: must be positive");
    if (in.train.grad_accum <= 0) throw InputError("--grad-accum: must be positive");
    if (z.reduce_bucket_size <= 0) throw InputError("zero_optimization.reduce_bucket_size: must be positive");
    if (in.residual.fragmentation_fraction < 0 || in.residual.fragmentation_fraction >= 1)
        throw InputError("--fragmentation: must be a fraction in [0, 1)");
}

// Collects --explain lines only when asked.
struct Explainer {
    Estimate* est;
    bool on;
    void term(const char* component, const std::string& formula, const std::string& substituted,
              uint64_t bytes, const char* source) const {
        if (on) est->terms.push_back({component, formula, substituted, bytes, source});
    }
    // Notes are few and short: always kept, so the CLI can show them.
    void note(const std::string& text) const { est->notes.push_back(text); }
};

// ---------------------------------------------------------------------------
// paper convention
// ---------------------------------------------------------------------------
void estimate_paper(const EstimateInput& in, Estimate& out, const Explainer& ex) {
    const double P = static_cast<double>(in.model.params);
    const double N = static_cast<double>(in.cluster.gpus);
    const double g = static_cast<double>(in.cluster.gpus_per_node());
    const double K = 4.0 + optimizer_state_bytes(in.train.optimizer);
    const int s = in.zero.stage;
    const double params = s >= 3 ? 2 * P / N : 2 * P;
    const double grads = s >= 2 ? 2 * P / N : 2 * P;
    const double opt = s >= 1 ? K * P / N : K * P;
    auto& m = out.per_gpu;
    m.parameters = to_bytes(params);
    m.gradients = to_bytes(grads);
    const bool off_opt = in.zero.offload_optimizer != OffloadDevice::none;
    const bool off_par = in.zero.offload_param != OffloadDevice::none;
    const uint64_t opt_b = to_bytes(opt);
    m.master_weights = to_bytes(4 * P / (s >= 1 ? N : 1));
    m.momentum = to_bytes(4 * P / (s >= 1 ? N : 1));
    m.variance = in.train.optimizer == Optimizer::sgd ? 0 : to_bytes(4 * P / (s >= 1 ? N : 1));
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
    ex.note("paper convention: model states only (ZeRO paper Sec. 3.1); residual states are not counted; "
            "K = 4 (fp32 master) + " + std::to_string(optimizer_state_bytes(in.train.optimizer)) +
            " (optimizer) bytes per parameter.");
}

// ---------------------------------------------------------------------------
// deepspeed convention: bit-exact ports, same operation order as the Python
// ---------------------------------------------------------------------------
void estimate_deepspeed(const EstimateInput& in, Estimate& out, const Explainer& ex) {
    const int s = in.zero.stage;
    if (s < 2)
        throw InputError("--convention deepspeed: DeepSpeed's estimators cover ZeRO stages 2 and 3 only "
                         "(estimate_zero2/3_model_states_mem_needs); use --convention full or paper for stage " +
                         std::to_string(s));
    const double P = static_cast<double>(in.model.params);
    const double g = static_cast<double>(in.cluster.gpus_per_node());
    const double n = static_cast<double>(in.cluster.nodes);
    const double N = n * g;
    const double abf = in.additional_buffer_factor;
    auto& m = out.per_gpu;
    double cpu = 0;
    const bool cpu_offload = in.zero.offload_optimizer != OffloadDevice::none;
    if (s == 2) {
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
    } else {
        const double L = static_cast<double>(in.model.largest_layer_params);
        const double gf = 1.0 / n;
        const double llm = 4 * L;
        const bool zi = in.zero.zero_init;
        const bool cpu_offload_params = in.zero.offload_param != OffloadDevice::none;
        double gpu = 0;
        std::string gform, cform;
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
        const std::string subst = "Ψ=" + num(P) + ", L=" + num(L) + ", N=" + num(N) + ", g=" + num(g) +
                                  ", nodes=" + num(n) + ", abf=" + num(abf) + ", zero_init=" + (zi ? "1" : "0");
        if (ex.on) ex.term("gpu", gform, subst, m.total, kSrcDsZ3);
        if (ex.on) ex.term("host", cform, subst, static_cast<uint64_t>(std::trunc(cpu)), kSrcDsZ3);
    }
    out.per_node.host_memory = static_cast<uint64_t>(std::trunc(cpu));
    out.per_node.host_steady = out.per_node.host_memory;
    out.peak_phase = "model_states";
    ex.note("deepspeed convention: DeepSpeed's own estimator, model states only; no activations, buckets, "
            "prefetch, CUDA context or fragmentation. DeepSpeed prints these figures with the label GB but "
            "divides by 2^30 (GiB).");
}

// ---------------------------------------------------------------------------
// full convention: what DeepSpeed v0.19.6 allocates
// ---------------------------------------------------------------------------

// Elements of parameters small enough to stay unpartitioned under ZeRO-3
// (numel <= stage3_param_persistence_threshold): norm weights/biases and
// linear biases (parameter_offload.mark_persistent_parameters).
uint64_t persistent_numel(const ModelArch& a, int64_t threshold, int64_t model_threshold) {
    uint64_t per_layer = 0;
    auto add = [&](int64_t numel, int64_t count) {
        if (numel > 0 && numel <= threshold) per_layer += static_cast<uint64_t>(numel * count);
    };
    const int64_t hd = a.head_dim > 0 ? a.head_dim : (a.num_heads > 0 ? a.hidden_size / a.num_heads : 0);
    add(a.hidden_size, a.norms_per_layer * (a.norm_has_bias ? 2 : 1));
    if (a.qkv_bias) {
        add(a.num_heads * hd, 1);
        add(a.num_kv_heads * hd, 2);
    }
    if (a.attn_out_bias) add(a.hidden_size, 1);
    if (a.mlp_bias) {
        add(a.ffn_size, a.gated_mlp ? 2 : 1);
        add(a.hidden_size, 1);
    }
    uint64_t total = per_layer * static_cast<uint64_t>(a.num_layers);
    if (a.final_norm && a.hidden_size <= threshold)
        total += static_cast<uint64_t>(a.hidden_size * (a.norm_has_bias ? 2 : 1));
    if (a.embedding_norm && a.hidden_size <= threshold)
        total += static_cast<uint64_t>(a.hidden_size * (a.norm_has_bias ? 2 : 1));
    return std::min<uint64_t>(total, static_cast<uint64_t>(model_threshold));
}

void estimate_full(const EstimateInput& in, Estimate& out, const Explainer& ex) {
    const auto& z = in.zero;
    const auto& t = in.train;
    const int s = z.stage;
    const uint64_t P = in.model.params;
    const uint64_t N = static_cast<uint64_t>(in.cluster.gpus);
    const uint64_t g = static_cast<uint64_t>(in.cluster.gpus_per_node());
    const uint64_t L = in.model.largest_layer_params;
    const uint64_t bm = static_cast<uint64_t>(dtype_bytes(t.dtype));
    const uint64_t ba = static_cast<uint64_t>(dtype_bytes(t.grad_accum_dtype.value_or(t.dtype)));
    const uint64_t bc = static_cast<uint64_t>(dtype_bytes(t.communication_dtype.value_or(t.dtype)));
    const bool half = t.dtype != Dtype::fp32;
    const uint64_t Pn = ceil_div(P, N);  // this rank's partition, elements
    const bool off_opt = z.offload_optimizer != OffloadDevice::none;
    const bool off_par = z.offload_param != OffloadDevice::none;
    const bool overlap = z.overlap_comm_effective();
    const uint64_t bucket = static_cast<uint64_t>(z.reduce_bucket_size);
    const bool sgd = t.optimizer == Optimizer::sgd;
    const std::string sP = ex.on ? num(static_cast<double>(P)) : std::string();
    const std::string sN = ex.on ? num(static_cast<double>(N)) : std::string();
    auto& m = out.per_gpu;
    const char* srcZ12 = "DeepSpeed v0.19.6 runtime/zero/stage_1_and_2.py (DeepSpeedZeroOptimizer)";
    const char* srcZ3 = "DeepSpeed v0.19.6 runtime/zero/stage3.py, partition_parameters.py";
    const char* srcZ0 = "DeepSpeed v0.19.6 runtime/fp16/fused_optimizer.py (FP16_Optimizer)";
    const char* src = s == 0 ? srcZ0 : (s == 3 ? srcZ3 : srcZ12);

    // --- parameters -------------------------------------------------------
    uint64_t persist = 0;
    if (s == 3) {
        if (in.model.arch)
            persist = persistent_numel(*in.model.arch, z.stage3_param_persistence_threshold,
                                       z.stage3_model_persistence_threshold);
        m.parameters = bm * persist + (off_par ? 0 : bm * Pn);
        if (ex.on) ex.term("parameters", off_par ? "b_m · persistent" : "b_m · (ceil(Ψ/N_d) + persistent)",
                "b_m=" + num(double(bm)) + ", Ψ=" + sP + ", N_d=" + sN + ", persistent=" + num(double(persist)) +
                    " elements (params <= stage3_param_persistence_threshold)",
                m.parameters, srcZ3);
    } else {
        m.parameters = bm * P;
        if (ex.on) ex.term("parameters", "b_m · Ψ (full 16-bit copy on every rank)", "b_m=" + num(double(bm)) + ", Ψ=" + sP,
                m.parameters, src);
    }

    // --- gradients --------------------------------------------------------
    if (s <= 1) {
        m.gradients = bm * P + (ba != bm ? ba * P : 0);
        if (ex.on) ex.term("gradients",
                ba != bm ? "b_m · Ψ + b_a · Ψ (full grads + grad_accum buffer in data_types.grad_accum_dtype)"
                         : "b_m · Ψ (full, unpartitioned gradients)",
                "b_m=" + num(double(bm)) + ", b_a=" + num(double(ba)) + ", Ψ=" + sP, m.gradients, src);
    } else if (s == 2) {
        m.gradients = off_opt ? 0 : bm * Pn;
        if (ex.on) ex.term("gradients", off_opt ? "0 (gradient partitions live in pinned host memory)" : "b_m · ceil(Ψ/N_d) (grads_in_partition)",
                "b_m=" + num(double(bm)) + ", Ψ=" + sP + ", N_d=" + sN, m.gradients, srcZ12);
    } else {
        m.gradients = off_opt ? 0 : ba * Pn;
        if (ex.on) ex.term("gradients", off_opt ? "0 (grad_partitions_flat_buffer on the host)" : "b_a · ceil(Ψ/N_d) (grad_partitions_flat_buffer)",
                "b_a=" + num(double(ba)) + ", Ψ=" + sP + ", N_d=" + sN, m.gradients, srcZ3);
    }

    // --- optimizer states -------------------------------------------------
    const uint64_t opt_numel = s == 0 ? P : Pn;
    const uint64_t master = (s == 0 && !half) ? 0 : 4 * opt_numel;
    const uint64_t mom = 4 * opt_numel;
    const uint64_t var = sgd ? 0 : 4 * opt_numel;
    if (!off_opt) {
        m.master_weights = master;
        m.momentum = mom;
        m.variance = var;
    }
    m.optimizer_states = m.master_weights + m.momentum + m.variance;
    if (ex.on) ex.term("optimizer_states",
            off_opt ? "0 (fp32 master and optimizer states offloaded)"
                    : (s == 0 ? "4Ψ master + optimizer bytes · Ψ" : "(4 + optimizer bytes) · ceil(Ψ/N_d)"),
            "Ψ=" + sP + ", N_d=" + sN + ", optimizer " + to_string(t.optimizer) + " = " +
                std::to_string(optimizer_state_bytes(t.optimizer)) + " B/param (m" + (sgd ? "" : ", v") + ")",
            m.optimizer_states, src);

    // --- activations (Korthikanti et al.) ---------------------------------
    uint64_t act = 0;
    if (in.model.arch) {
        const auto& a = *in.model.arch;
        const int64_t sq = t.seq_len, b = t.micro_batch, h = a.hidden_size;
        const uint64_t per_layer = activation_bytes_per_layer(sq, b, h, a.num_heads, 1, t.checkpointing, t.flash_attention);
        const uint64_t one_full = activation_bytes_per_layer(sq, b, h, a.num_heads, 1, Checkpointing::none, t.flash_attention);
        const uint64_t recompute = t.checkpointing == Checkpointing::full ? one_full : 0;
        // Embedding dropout mask sbh and the output layer / cross entropy
        // 4sbh(1 + V/h) (Korthikanti Sec. 4.3, p = 1).
        const double sbh = double(sq) * double(b) * double(h);
        const uint64_t io = to_bytes(sbh + 4.0 * sbh * (1.0 + double(a.vocab_size) / double(h)));
        double scale = t.dtype == Dtype::fp32 ? 2.0 : 1.0;  // fp32 activations: twice the 16-bit bytes
        act = to_bytes(scale * double(per_layer * static_cast<uint64_t>(a.num_layers) + recompute + io));
        if (ex.on) ex.term("activations",
                std::string("L · per_layer + recompute + sbh + 4sbh(1 + V/h); per_layer = ") +
                    (t.checkpointing == Checkpointing::full ? "2sbh"
                     : t.checkpointing == Checkpointing::selective ? "34sbh"
                     : (t.flash_attention ? "34sbh (flash attention: no 5as/h term)" : "sbh(34 + 5as/h)")),
                "s=" + num(double(sq)) + ", b=" + num(double(b)) + ", h=" + num(double(h)) + ", a=" +
                    num(double(a.num_heads)) + ", L=" + num(double(a.num_layers)) + ", V=" + num(double(a.vocab_size)) +
                    (scale != 1.0 ? ", x2 for fp32" : ""),
                act, kSrcKorthikanti);
    } else {
        ex.note("activations not estimated: only --params was given; give --model or --hf-config for "
                "the Korthikanti et al. activation formula.");
    }
    m.activations = act;

    // --- temporary buffers -------------------------------------------------
    uint64_t tmp_bwd = 0, tmp_step = 0;
    if (s == 0) {
        tmp_step = half ? 4 * P : 0;
        if (ex.on) ex.term("temporary_buffers (step)", "4Ψ (flattened fp32 gradient copy in FP16_Optimizer.step)",
                "Ψ=" + sP, tmp_step, srcZ0);
    } else if (s <= 2) {
        const uint64_t ipg = bucket * bm * (overlap ? 2 : 1);
        const uint64_t offload_buf = off_opt ? L * bm : 0;
        tmp_bwd = ipg + offload_buf;
        if (ex.on) ex.term("temporary_buffers (backward)",
                std::string("reduce_bucket_size · b_m") + (overlap ? " · 2 (overlap_comm double buffer)" : "") +
                    (off_opt ? " + L · b_m (temp_grad_buffer_for_gpu_offload)" : ""),
                "reduce_bucket_size=" + num(double(bucket)) + ", b_m=" + num(double(bm)) + ", L=" + num(double(L)),
                tmp_bwd, srcZ12);
        tmp_step = off_opt ? 0 : (4 + ba) * Pn;
        if (ex.on) ex.term("temporary_buffers (step)", off_opt ? "0 (optimizer step on the CPU)" : "(4 + b_a) · ceil(Ψ/N_d) (fp32 gradient copy of the partition + its source)",
                "b_a=" + num(double(ba)) + ", Ψ=" + sP + ", N_d=" + sN, tmp_step, srcZ12);
    } else {
        const uint64_t ipg = z.contiguous_gradients ? bucket * bc : 0;
        const uint64_t prefetch = static_cast<uint64_t>(
            std::min(z.stage3_prefetch_bucket_size, z.stage3_max_live_parameters));
        tmp_bwd = ipg + 2 * L * bm + prefetch * bm;
        if (ex.on) ex.term("temporary_buffers (backward)",
                "reduce_bucket_size · b_c (IPG bucket, allocated at init) + 2 · L · b_m (largest module gathered "
                "+ its full gradient) + min(stage3_prefetch_bucket_size, stage3_max_live_parameters) · b_m",
                "reduce_bucket_size=" + num(double(bucket)) + ", b_c=" + num(double(bc)) + ", L=" + num(double(L)) +
                    ", prefetch=" + num(double(prefetch)) + ", b_m=" + num(double(bm)),
                tmp_bwd, srcZ3);
        const uint64_t sub = std::min<uint64_t>(static_cast<uint64_t>(z.sub_group_size), Pn);
        tmp_step = off_opt ? 0 : sub * (4 + ba);
        if (ex.on) ex.term("temporary_buffers (step)", off_opt ? "0 (optimizer step on the CPU)" : "min(sub_group_size, ceil(Ψ/N_d)) · (4 + b_a) (fp32 gradient of one sub-group)",
                "sub_group_size=" + num(double(z.sub_group_size)) + ", b_a=" + num(double(ba)), tmp_step, srcZ3);
    }
    m.temporary_buffers = std::max(tmp_bwd, tmp_step);

    // --- phases, context, fragmentation ------------------------------------
    const uint64_t states = m.parameters + m.gradients + m.optimizer_states;
    const uint64_t fb = states + act + tmp_bwd;
    const uint64_t st = states + tmp_step;
    const uint64_t peak = std::max(fb, st);
    m.cuda_context = in.residual.cuda_context;
    m.fragmentation = to_bytes(in.residual.fragmentation_fraction * double(peak));
    m.total = peak + m.cuda_context + m.fragmentation;
    auto phase = [&](const char* name, uint64_t a, uint64_t tmp, uint64_t sum) {
        const uint64_t frag = to_bytes(in.residual.fragmentation_fraction * double(sum));
        out.phases.push_back({name, a, tmp, sum + m.cuda_context + frag});
    };
    phase("forward_backward", act, tmp_bwd, fb);
    phase("optimizer_step", 0, tmp_step, st);
    out.peak_phase = fb >= st ? "forward_backward" : "optimizer_step";
    if (ex.on) ex.term("cuda_context", "named figure (--cuda-context)", num(double(m.cuda_context)) + " B", m.cuda_context,
            "public reports: 0.4-0.6 GB per process");
    if (ex.on) ex.term("fragmentation", "fraction · allocated peak (--fragmentation)",
            num(in.residual.fragmentation_fraction) + " · " + num(double(peak)), m.fragmentation,
            "PyTorch caching allocator reserve; a few percent of capacity");

    // --- host memory and NVMe ------------------------------------------------
    uint64_t host_rank = 0, pinned_rank = 0, nvme_rank = 0;
    const bool pin_o = z.offload_optimizer_pin_memory;
    const bool pin_p = z.offload_param_pin_memory;
    if (z.offload_optimizer == OffloadDevice::cpu) {
        const uint64_t states_host = (4 + static_cast<uint64_t>(optimizer_state_bytes(t.optimizer))) * Pn;  // master + m (+ v), unpinned
        uint64_t pinned = 0;
        if (s <= 2) {
            pinned = 4 * Pn + bm * Pn + L * bm;  // fp32 grad partition, 16-bit staging, temp grad buffer
            if (t.grad_accum > 1) pinned += bm * Pn;  // async_accumulate_grad_in_cpu_via_gpu buffers
        } else {
            pinned = 4 * Pn + ba * Pn;  // fp32 grad buffers per sub-group + grad_partitions_flat_buffer
        }
        host_rank += states_host + pinned;
        if (pin_o) pinned_rank += pinned;
        if (ex.on) ex.term("host: offloaded optimizer (per rank)",
                s <= 2 ? "(4 + optimizer bytes) · Ψ/N_d + pinned (4 + b_m) · Ψ/N_d + L · b_m [+ b_m · Ψ/N_d with GAS > 1]"
                       : "(4 + optimizer bytes) · Ψ/N_d + pinned (4 + b_a) · Ψ/N_d",
                "Ψ/N_d=" + num(double(Pn)), states_host + pinned, src);
    } else if (z.offload_optimizer == OffloadDevice::nvme) {
        const uint64_t sub = std::min<uint64_t>(static_cast<uint64_t>(z.sub_group_size), Pn);
        const uint64_t pool = static_cast<uint64_t>(z.offload_optimizer_buffer_count) * sub * 4;
        const uint64_t pinned = pool + ba * Pn;
        host_rank += pinned;
        pinned_rank += pinned;
        nvme_rank += (4 + static_cast<uint64_t>(optimizer_state_bytes(t.optimizer)) + 4) * Pn;
        if (ex.on) ex.term("host: optimizer NVMe swap buffers (per rank)", "buffer_count · min(sub_group_size, Ψ/N_d) · 4 + b_a · Ψ/N_d",
                "buffer_count=" + num(double(z.offload_optimizer_buffer_count)) + ", sub=" + num(double(sub)), pinned,
                "DeepSpeed runtime/swap_tensor/optimizer_utils.py, utils.py");
    }
    if (z.offload_param == OffloadDevice::cpu) {
        host_rank += bm * Pn;
        if (pin_p) pinned_rank += bm * Pn;
        if (ex.on) ex.term("host: offloaded 16-bit parameters (per rank)", "b_m · Ψ/N_d", "Ψ/N_d=" + num(double(Pn)), bm * Pn, srcZ3);
    } else if (z.offload_param == OffloadDevice::nvme) {
        const uint64_t pool = static_cast<uint64_t>(z.offload_param_buffer_count * z.offload_param_buffer_size) * bm +
                              std::min<uint64_t>(static_cast<uint64_t>(z.offload_param_max_in_cpu), Pn) * bm;
        host_rank += pool;
        pinned_rank += pool;
        nvme_rank += bm * Pn;
        if (ex.on) ex.term("host: parameter NVMe swap pool (per rank)", "buffer_count · buffer_size · b_m + min(max_in_cpu, Ψ/N_d) · b_m",
                "buffer_count=" + num(double(z.offload_param_buffer_count)) + ", buffer_size=" +
                    num(double(z.offload_param_buffer_size)) + ", max_in_cpu=" + num(double(z.offload_param_max_in_cpu)),
                pool, "DeepSpeed runtime/swap_tensor/partitioned_param_swapper.py");
    }
    auto& node = out.per_node;
    node.host_steady = host_rank * g;
    node.host_pinned = pinned_rank * g;
    node.nvme = nvme_rank * g;
    const uint64_t lb = static_cast<uint64_t>(dtype_bytes(in.residual.load_dtype));
    const bool zero_init = s == 3 && z.zero_init;
    node.host_load = g * (zero_init ? L : P) * lb;
    if (ex.on) ex.term("host: model load (per node)",
            zero_init ? "g · L · load bytes (zero.Init: one module at a time per rank)"
                      : "g · Ψ · load bytes (every rank materialises the whole model)",
            "g=" + num(double(g)) + ", " + (zero_init ? "L=" + num(double(L)) : "Ψ=" + sP) + ", load dtype " +
                to_string(in.residual.load_dtype),
            node.host_load, "DeepSpeed estimate_zero3_model_states_mem_needs (4·g·Ψ without zero.Init)");
    node.host_memory = std::max(node.host_load, node.host_steady);
    if (s == 3 && !z.zero_init)
        ex.note("zero_init is off: every rank on a node builds the whole model in host RAM before partitioning.");
    if (!in.model.arch && s == 3)
        ex.note("no architecture: ZeRO-3 persistent (small) parameters are not counted.");
}

}  // namespace

uint64_t activation_bytes_per_layer(int64_t s, int64_t b, int64_t h, int64_t a, int64_t t,
                                    Checkpointing mode, bool flash_attention) {
    if (s <= 0 || b <= 0 || h <= 0 || a <= 0 || t <= 0)
        throw InputError("activation formula: sequence, batch, hidden, heads and tensor-parallel size must be positive");
    const double sbh = double(s) * double(b) * double(h);
    const double td = double(t);
    double factor = 0;
    switch (mode) {
        case Checkpointing::full: factor = 2.0; break;
        case Checkpointing::selective: factor = 10.0 + 24.0 / td; break;
        case Checkpointing::none:
            factor = 10.0 + 24.0 / td + (flash_attention ? 0.0 : 5.0 * double(a) * double(s) / (double(h) * td));
            break;
    }
    return to_bytes(sbh * factor);
}

Estimate estimate(const EstimateInput& in, bool explain) {
    validate(in);
    Estimate out;
    out.convention = in.convention;
    const Explainer ex{&out, explain};
    switch (in.convention) {
        case Convention::paper: estimate_paper(in, out, ex); break;
        case Convention::deepspeed: estimate_deepspeed(in, out, ex); break;
        case Convention::full: estimate_full(in, out, ex); break;
    }
    if (in.cluster.gpu_memory) out.fits_gpu = out.per_gpu.total <= *in.cluster.gpu_memory;
    if (in.cluster.host_memory) out.fits_host = out.per_node.host_memory <= *in.cluster.host_memory;
    return out;
}

}  // namespace zeromem
