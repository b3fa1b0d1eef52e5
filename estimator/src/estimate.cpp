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

// Rounds an element count up so the buffer is a multiple of the aio block
// alignment: 1024 B x intra_op_parallelism (1) / element size
// (DeepSpeed swap_tensor/utils.py).
uint64_t align_aio(uint64_t numel, uint64_t elem_bytes) {
    const uint64_t unit = 1024 / elem_bytes;
    return ceil_div(numel, unit) * unit;
}

void validate(const EstimateInput& in) {
    if (in.model.params == 0) throw InputError("--params: the model has zero parameters");
    if (in.cluster.gpus <= 0) throw InputError("--gpus: must be a positive number of GPUs");
    if (in.cluster.nodes <= 0) throw InputError("--nodes: must be a positive number of nodes");
    if (in.cluster.gpus % in.cluster.nodes != 0)
        throw InputError("--nodes: " + std::to_string(in.cluster.nodes) + " nodes do not divide " +
                         std::to_string(in.cluster.gpus) + " GPUs evenly");
    if (in.cluster.tp <= 0 || in.cluster.pp <= 0) throw InputError("--tp/--pp: must be positive");
    if (in.cluster.gpus % (in.cluster.tp * in.cluster.pp) != 0)
        throw InputError("--tp/--pp: tp x pp = " + std::to_string(in.cluster.tp * in.cluster.pp) +
                         " does not divide " + std::to_string(in.cluster.gpus) + " GPUs");
    if (in.cluster.pp > 1 && in.zero.stage >= 2)
        throw InputError("--pp: DeepSpeed's pipeline engine supports ZeRO stage 0 or 1 only; stage " +
                         std::to_string(in.zero.stage) + " with pipeline parallelism is rejected (runtime/pipe/engine.py)");
    if (in.train.load_in_bits != 16 && in.train.load_in_bits != 8 && in.train.load_in_bits != 4)
        throw InputError("--load-in: must be 4bit or 8bit");
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
    // Products in double: sizes from a config.json can be large enough to
    // overflow int64, and only numels <= threshold are added.
    const double limit = static_cast<double>(threshold);
    double per_layer = 0;
    auto add = [&](double numel, double count) {
        if (numel > 0 && numel <= limit) per_layer += numel * count;
    };
    const double h = static_cast<double>(a.hidden_size);
    const int64_t hd_i = a.head_dim > 0 ? a.head_dim : (a.num_heads > 0 ? a.hidden_size / a.num_heads : 0);
    const double hd = static_cast<double>(hd_i);
    const double q = static_cast<double>(a.num_heads) * hd, kv = static_cast<double>(a.num_kv_heads) * hd;
    const double norm_count = static_cast<double>(a.norms_per_layer) * (a.norm_has_bias ? 2 : 1);
    add(h, norm_count);
    if (a.qkv_bias) {
        add(q, 1);
        add(kv, 2);
    }
    if (a.attn_out_bias) add(h, 1);
    if (a.mlp_bias) {
        add(static_cast<double>(a.ffn_size), a.gated_mlp ? 2 : 1);
        add(h, 1);
    }
    // Weight matrices persist too once the threshold reaches their numel
    // (mark_persistent_parameters compares every parameter's ds_numel).
    if (a.fused_qkv) {
        add(h * (q + 2 * kv), 1);
    } else {
        add(h * q, 1);
        add(h * kv, 2);
    }
    add(q * h, 1);
    add(h * static_cast<double>(a.ffn_size), a.gated_mlp ? 3 : 2);
    double total = per_layer * static_cast<double>(a.num_layers);
    auto add_once = [&](double numel) {
        if (numel > 0 && numel <= limit) total += numel;
    };
    const double vocab = static_cast<double>(a.vocab_size);
    add_once(vocab * h);                         // input embedding
    if (!a.tied_embeddings) add_once(vocab * h);  // LM head
    if (a.learned_positions) add_once(static_cast<double>(a.max_position_embeddings + a.position_offset) * h);
    if (a.final_norm && h <= limit) total += h * (a.norm_has_bias ? 2 : 1);
    if (a.embedding_norm && h <= limit) total += h * (a.norm_has_bias ? 2 : 1);
    return static_cast<uint64_t>(std::min(total, static_cast<double>(model_threshold)));
}

// Parameters held by one tensor/pipeline rank (Megatron-DeepSpeed layout):
// the first pipeline stage, the most loaded one, holds ceil(L/pp) layers and
// the input embedding; with pp = 1 it also holds the LM head. Everything
// inside the layers is split over tp; embeddings are vocabulary-parallel.
uint64_t rank_params(const EstimateInput& in, uint64_t total) {
    const int64_t tp = in.cluster.tp, pp = in.cluster.pp;
    if (tp == 1 && pp == 1) return total;
    if (!in.model.arch) return ceil_div(total, static_cast<uint64_t>(tp * pp));
    const ParamCount pc = count_params(*in.model.arch);
    const uint64_t layers = ceil_div(static_cast<uint64_t>(in.model.arch->num_layers), static_cast<uint64_t>(pp));
    uint64_t r = layers * ceil_div(pc.per_layer, static_cast<uint64_t>(tp)) + ceil_div(pc.embedding, static_cast<uint64_t>(tp));
    if (pp == 1) r += ceil_div(pc.lm_head, static_cast<uint64_t>(tp));
    return std::min(r, total);
}

// Weights of the transformer blocks' linear layers: what bitsandbytes
// quantizes under load_in_4bit / load_in_8bit (embeddings, norms and the LM
// head stay in 16 bits).
uint64_t linear_weight_params(const ModelArch& a) {
    const int64_t hd = a.head_dim > 0 ? a.head_dim : a.hidden_size / a.num_heads;
    const int64_t attn = a.hidden_size * hd * (2 * a.num_heads + 2 * a.num_kv_heads);
    const int64_t mlp = a.hidden_size * a.ffn_size * (a.gated_mlp ? 3 : 2);
    return static_cast<uint64_t>((attn + mlp) * a.num_layers);
}

void estimate_full(const EstimateInput& in, Estimate& out, const Explainer& ex) {
    const auto& z = in.zero;
    const auto& t = in.train;
    const int s = z.stage;
    const uint64_t N = static_cast<uint64_t>(in.cluster.data_parallel());
    const uint64_t g = static_cast<uint64_t>(in.cluster.gpus_per_node());
    const uint64_t tp = static_cast<uint64_t>(in.cluster.tp), pp = static_cast<uint64_t>(in.cluster.pp);
    const uint64_t L = in.model.largest_layer_params;
    const uint64_t bm = static_cast<uint64_t>(dtype_bytes(t.dtype));
    const uint64_t ba = static_cast<uint64_t>(dtype_bytes(t.grad_accum_dtype.value_or(t.dtype)));
    const uint64_t bc = static_cast<uint64_t>(dtype_bytes(t.communication_dtype.value_or(t.dtype)));
    const bool half = t.dtype != Dtype::fp32;
    const bool off_opt = z.offload_optimizer != OffloadDevice::none;
    const bool off_par = z.offload_param != OffloadDevice::none;
    const bool overlap = z.overlap_comm_effective();
    const uint64_t bucket = static_cast<uint64_t>(z.reduce_bucket_size);
    const bool sgd = t.optimizer == Optimizer::sgd;
    const uint64_t osb = static_cast<uint64_t>(optimizer_state_bytes(t.optimizer));
    const char* srcZ12 = "DeepSpeed v0.19.6 runtime/zero/stage_1_and_2.py (DeepSpeedZeroOptimizer)";
    const char* srcZ3 = "DeepSpeed v0.19.6 runtime/zero/stage3.py, partition_parameters.py";
    const char* srcZ0 = "DeepSpeed v0.19.6 runtime/fp16/fused_optimizer.py (FP16_Optimizer)";
    const char* src = s == 0 ? srcZ0 : (s == 3 ? srcZ3 : srcZ12);
    auto n2s = [&](uint64_t v) { return ex.on ? num(double(v)) : std::string(); };

    // --- trainable and frozen parameters per rank --------------------------
    const uint64_t P = in.model.params;  // includes LoRA adapters
    uint64_t T = t.trainable_params.value_or(P);
    if (t.lora_rank > 0) {
        if (!in.model.arch) throw InputError("--lora-rank: needs an architecture (--model or --hf-config)");
        T = lora_params(*in.model.arch, t.lora_rank, t.lora_targets);
    }
    if (T > P) throw InputError("--trainable-params: more than the model's " + std::to_string(P) + " parameters");
    const uint64_t F = P - T;
    const uint64_t Pr = rank_params(in, P);
    const uint64_t Tr = P == 0 ? 0 : static_cast<uint64_t>(std::llround(double(T) * double(Pr) / double(P)));
    const uint64_t Fr = Pr - std::min(Pr, Tr);
    out.trainable_params = T;
    out.frozen_params = F;
    out.params_per_rank = Pr;
    // Frozen storage: quantized linear weights under 8/4-bit loading.
    double frozen_bytes = double(Fr) * double(bm);
    if (t.load_in_bits != 16 && F > 0) {
        const double qb = t.load_in_bits == 8 ? 1.0 : 0.5625;  // int8; NF4 + fp32 absmax per 64
        const uint64_t qn = in.model.arch
            ? std::min<uint64_t>(Fr, ceil_div(linear_weight_params(*in.model.arch), tp * pp))
            : Fr;
        frozen_bytes = double(qn) * qb + double(Fr - qn) * double(bm);
    }
    const uint64_t Tn = ceil_div(Tr, N);  // this rank's partition of the trainable params, elements

    // --- steady GPU model states ---------------------------------------------
    GpuMemory st;  // steady state (after the first optimizer step)
    uint64_t persist = 0;
    if (s == 3) {
        if (in.model.arch)
            persist = ceil_div(persistent_numel(*in.model.arch, z.stage3_param_persistence_threshold,
                                                z.stage3_model_persistence_threshold), tp * pp);
        const uint64_t part = off_par ? 0 : bm * Tn + to_bytes(frozen_bytes / double(N));
        st.parameters = bm * persist + part;
        if (ex.on) ex.term("parameters", off_par ? "b_m · persistent (partitions offloaded)"
                                       : "b_m · (ceil(Ψ_t/N_d) + persistent) + frozen bytes / N_d",
                "b_m=" + n2s(bm) + ", Ψ_t=" + n2s(Tr) + ", N_d=" + n2s(N) + ", persistent=" + n2s(persist) +
                    " elements (<= stage3_param_persistence_threshold), frozen=" + n2s(Fr),
                st.parameters, srcZ3);
    } else {
        st.parameters = bm * Tr + to_bytes(frozen_bytes);
        if (ex.on) ex.term("parameters", "b_m · Ψ_t + frozen bytes (full copy on every data-parallel rank)",
                "b_m=" + n2s(bm) + ", Ψ_t=" + n2s(Tr) + ", frozen=" + n2s(Fr) + " params", st.parameters, src);
    }
    if (s <= 1) {
        st.gradients = bm * Tr + (ba != bm ? ba * Tr : 0);
        if (ex.on) ex.term("gradients", ba != bm ? "b_m · Ψ_t + b_a · Ψ_t (full grads + grad_accum buffer)"
                                       : "b_m · Ψ_t (full, unpartitioned gradients)",
                "b_m=" + n2s(bm) + ", b_a=" + n2s(ba) + ", Ψ_t=" + n2s(Tr), st.gradients, src);
    } else if (s == 2) {
        st.gradients = off_opt ? 0 : bm * Tn;
        if (ex.on) ex.term("gradients", off_opt ? "0 (gradient partitions in pinned host memory)"
                                       : "b_m · ceil(Ψ_t/N_d) (grads_in_partition)",
                "b_m=" + n2s(bm) + ", Ψ_t=" + n2s(Tr) + ", N_d=" + n2s(N), st.gradients, srcZ12);
    } else {
        st.gradients = off_opt ? 0 : ba * Tn;
        if (ex.on) ex.term("gradients", off_opt ? "0 (grad_partitions_flat_buffer on the host)"
                                       : "b_a · ceil(Ψ_t/N_d) (grad_partitions_flat_buffer)",
                "b_a=" + n2s(ba) + ", Ψ_t=" + n2s(Tr) + ", N_d=" + n2s(N), st.gradients, srcZ3);
    }
    const uint64_t opt_numel = s == 0 ? Tr : Tn;
    if (!off_opt) {
        st.master_weights = (s == 0 && !half) ? 0 : 4 * opt_numel;
        st.momentum = 4 * opt_numel;
        st.variance = sgd ? 0 : 4 * opt_numel;
    }
    st.optimizer_states = st.master_weights + st.momentum + st.variance;
    if (ex.on) ex.term("optimizer_states",
            off_opt ? "0 (fp32 master and optimizer states offloaded)"
                    : (s == 0 ? "4Ψ_t master + optimizer bytes · Ψ_t" : "(4 + optimizer bytes) · ceil(Ψ_t/N_d)"),
            "Ψ_t=" + n2s(Tr) + ", N_d=" + n2s(N) + ", " + to_string(t.optimizer) + " = " + n2s(osb) +
                " B/param; Adam m and v are allocated at the first step",
            st.optimizer_states, src);

    // --- activations -----------------------------------------------------------
    uint64_t act_fwd = 0, act_bwd = 0, act_host = 0;
    if (in.model.arch) {
        const auto& a = *in.model.arch;
        const int64_t sq = t.seq_len, b = t.micro_batch, h = a.hidden_size;
        const int64_t ti = in.cluster.tp;
        const bool sp = t.sequence_parallel && ti > 1;
        const double scale = t.dtype == Dtype::fp32 ? 2.0 : 1.0;  // fp32 activations: twice the 16-bit bytes
        const uint64_t layers = ceil_div(static_cast<uint64_t>(a.num_layers), pp);
        // 1F1B: the first pipeline stage holds up to pp micro batches in flight
        // (Korthikanti Sec. 4.2.3, Eq. 5).
        const uint64_t in_flight = pp > 1 ? std::min<uint64_t>(pp, static_cast<uint64_t>(t.grad_accum)) : 1;
        const uint64_t full_layer = layer_activation_bytes(a, sq, b, ti, Checkpointing::none, t.flash_attention, sp);
        uint64_t per_layer = layer_activation_bytes(a, sq, b, ti, t.checkpointing, t.flash_attention, sp);
        const double sbh = double(sq) * double(b) * double(h);
        if (t.checkpointing == Checkpointing::full && t.ds_checkpointing_api && t.partition_activations && ti > 1 && !sp)
            per_layer = ceil_div(per_layer, static_cast<uint64_t>(ti));
        uint64_t stored = layers * in_flight * per_layer;
        const uint64_t recompute = t.checkpointing == Checkpointing::full ? full_layer : 0;
        if (t.checkpointing == Checkpointing::full && t.ds_checkpointing_api && t.cpu_checkpointing) {
            act_host = to_bytes(scale * double(stored));
            stored = 0;
        }
        // Embedding output and the loss: sbh (embedding dropout mask) on
        // every first stage; with pp = 1 also the output layer's input and the
        // logits: 16-bit logits, their fp32 upcast and the fp32 log-softmax
        // kept for the cross-entropy backward (HF models upcast logits).
        double io = sbh;
        if (pp == 1) io += 4.0 * sbh + double(sq) * double(b) * double(a.vocab_size) * double(bm + 8) / double(ti);
        act_fwd = to_bytes(scale * (double(stored) + io));
        act_bwd = to_bytes(scale * (double(stored + recompute) + io));
        if (ex.on) ex.term("activations",
                "layers · in-flight micro batches · per_layer + recompute + sbh + 4sbh + sbV(b_m + 8)/t; per_layer by "
                "Korthikanti with GQA and the real MLP width",
                "s=" + n2s(uint64_t(sq)) + ", b=" + n2s(uint64_t(b)) + ", h=" + n2s(uint64_t(h)) + ", a=" +
                    n2s(uint64_t(a.num_heads)) + ", kv=" + n2s(uint64_t(a.num_kv_heads)) + ", f=" +
                    n2s(uint64_t(a.ffn_size)) + ", layers=" + n2s(layers) + ", in flight=" + n2s(in_flight) +
                    ", per_layer=" + n2s(per_layer) + " B, V=" + n2s(uint64_t(a.vocab_size)) + ", t=" + n2s(tp) +
                    ", checkpointing " + to_string(t.checkpointing) + (t.flash_attention ? ", flash attention" : ", eager attention") +
                    (scale != 1.0 ? ", x2 for fp32" : ""),
                act_bwd, kSrcKorthikanti);
    } else {
        ex.note("activations not estimated: only --params was given; give --model or --hf-config for "
                "the Korthikanti et al. activation formula.");
    }
    if (t.ds_checkpointing_api && t.partition_activations && in.cluster.tp == 1)
        ex.note("activation_checkpointing.partition_activations splits checkpoints across tensor-parallel ranks only; "
                "with tp = 1 it saves nothing.");
    if ((t.partition_activations || t.cpu_checkpointing) && !t.ds_checkpointing_api)
        ex.note("the DeepSpeed config's activation_checkpointing keys take effect only when the model uses "
                "deepspeed.checkpointing (Megatron-DeepSpeed); Hugging Face models use torch checkpointing, so they "
                "are ignored here (--ds-checkpointing to apply them).");

    // --- temporary buffers per phase -------------------------------------------
    uint64_t tmp_fwd = 0, tmp_bwd = 0, tmp_step = 0, tmp_load = 0;
    uint64_t tmp_persist = 0;  // buffers kept from init to the end (ZeRO-3 IPG bucket)
    const bool full_ft = T == P;  // gradients of whole modules exist only when they are trainable
    const uint64_t torch_opt_tmp = (!t.fused_optimizer && !off_opt) ? 4 * opt_numel : 0;
    if (s == 0) {
        tmp_step = (half ? 4 * Tr : 0) + torch_opt_tmp;
        if (ex.on) ex.term("temporary_buffers (optimizer_step)",
                "4Ψ_t (FP16_Optimizer's flattened fp32 gradients) + 4Ψ_t if torch Adam (multi-tensor temporary)",
                "Ψ_t=" + n2s(Tr), tmp_step, srcZ0);
    } else if (s <= 2) {
        const uint64_t ipg = bucket * bm * (overlap ? 2 : 1);
        const uint64_t offload_buf = off_opt ? L * bm : 0;
        tmp_bwd = ipg + offload_buf;
        if (ex.on) ex.term("temporary_buffers (backward)",
                std::string("reduce_bucket_size · b_m") + (overlap ? " · 2 (overlap_comm double buffer)" : "") +
                    (off_opt ? " + L · b_m (temp_grad_buffer_for_gpu_offload)" : ""),
                "reduce_bucket_size=" + n2s(bucket) + ", b_m=" + n2s(bm) + ", L=" + n2s(L), tmp_bwd, srcZ12);
        tmp_step = off_opt ? 0 : (4 + ba) * Tn + torch_opt_tmp;
        if (ex.on) ex.term("temporary_buffers (optimizer_step)",
                off_opt ? "0 (optimizer step on the CPU)"
                        : "(4 + b_a) · ceil(Ψ_t/N_d) (fp32 copy of the gradient partition and its source)"
                          " + 4 · ceil(Ψ_t/N_d) if torch Adam (multi-tensor temporary)",
                "b_a=" + n2s(ba) + ", Ψ_t=" + n2s(Tr) + ", N_d=" + n2s(N) +
                    (t.fused_optimizer ? ", fused optimizer" : ", torch optimizer"),
                tmp_step, srcZ12);
        // Flattening a param group needs the module's params in the load
        // dtype plus the flat 16-bit copy (stage_1_and_2.py __init__).
        tmp_load = 0;
    } else {
        const uint64_t ipg = z.contiguous_gradients ? bucket * bc : 0;
        tmp_persist = ipg;
        const uint64_t prefetch = static_cast<uint64_t>(
            std::min(z.stage3_prefetch_bucket_size, z.stage3_max_live_parameters));
        const uint64_t gathered = L * bm + prefetch * bm;
        tmp_fwd = ipg + gathered;
        tmp_bwd = ipg + gathered + (full_ft ? L * bm : 0);
        if (ex.on) ex.term("temporary_buffers (backward)",
                "reduce_bucket_size · b_c (IPG bucket, allocated at init) + L · b_m (current module gathered whole) "
                "+ min(stage3_prefetch_bucket_size, stage3_max_live_parameters) · b_m (prefetch) + L · b_m (its gradient)",
                "reduce_bucket_size=" + n2s(bucket) + ", b_c=" + n2s(bc) + ", L=" + n2s(L) + ", prefetch=" +
                    n2s(prefetch) + ", b_m=" + n2s(bm),
                tmp_bwd, srcZ3);
        const uint64_t sub = std::min<uint64_t>(static_cast<uint64_t>(z.sub_group_size), Tn);
        // The IPG bucket is allocated once at init and never freed
        // (deepspeed_memory.md 4.2, stage3.py): it is live at the step too.
        tmp_step = ipg + (off_opt ? 0 : sub * (4 + ba) + torch_opt_tmp);
        if (ex.on) ex.term("temporary_buffers (optimizer_step)",
                off_opt ? "reduce_bucket_size · b_c (IPG bucket, kept from init; optimizer step on the CPU)"
                        : "reduce_bucket_size · b_c (IPG bucket, kept from init) + min(sub_group_size, ceil(Ψ_t/N_d))"
                          " · (4 + b_a) (fp32 gradient of one sub-group) + 4 · ceil(Ψ_t/N_d) if torch Adam",
                "sub_group_size=" + n2s(uint64_t(z.sub_group_size)) + ", b_a=" + n2s(ba), tmp_step, srcZ3);
        tmp_load = ipg + (off_opt ? 0 : 4 * sub);  // IPG at init + the fp32 gradient_buffer allocated and freed
    }

    // --- host memory and NVMe (per rank, then per node) --------------------------
    uint64_t host_rank = 0, pinned_rank = 0, nvme_rank = 0;
    // Host bytes per rank that appear only after the load phase: Adam's m and
    // v on the CPU (DeepSpeedCPUAdam, lazy at the first step) and the ZeRO-1/2
    // gradient-accumulation buffers (created lazily at the first non-boundary
    // micro step). Everything else below is allocated while the engine and
    // the ZeRO optimizer are built (deepspeed_memory.md 4.1 and 4.2).
    uint64_t lazy_rank = 0, lazy_pinned_rank = 0;
    const bool pin_o = z.offload_optimizer_pin_memory;
    const bool pin_p = z.offload_param_pin_memory;
    if (z.offload_optimizer == OffloadDevice::cpu) {
        const uint64_t states_host = (4 + osb) * Tn;  // master + m (+ v), pageable
        uint64_t pinned = 0;
        if (s <= 2) {
            pinned = 4 * Tn + bm * Tn + L * bm;  // fp32 grads, 16-bit staging, temp grad buffer
            if (t.grad_accum > 1) {
                pinned += bm * Tn;  // async_accumulate_grad_in_cpu_via_gpu buffers
                lazy_rank += bm * Tn;
                if (pin_o) lazy_pinned_rank += bm * Tn;
            }
        } else {
            pinned = 4 * Tn + ba * Tn;  // fp32 grad buffers per sub-group + grad_partitions_flat_buffer
        }
        host_rank += states_host + pinned;
        if (pin_o) pinned_rank += pinned;
        lazy_rank += osb * Tn;  // m (and v): allocated by the CPU optimizer at its first step
        if (ex.on) ex.term("host: offloaded optimizer (per rank)",
                s <= 2 ? "(4 + optimizer bytes) · Ψ_t/N_d pageable + (4 + b_m) · Ψ_t/N_d + L · b_m pinned [+ b_m · Ψ_t/N_d with GAS > 1]"
                       : "(4 + optimizer bytes) · Ψ_t/N_d pageable + (4 + b_a) · Ψ_t/N_d pinned",
                "Ψ_t/N_d=" + n2s(Tn) + (pin_o ? "" : ", pin_memory false"), states_host + pinned, src);
    } else if (z.offload_optimizer == OffloadDevice::nvme) {
        const uint64_t sub = std::min<uint64_t>(static_cast<uint64_t>(z.sub_group_size), Tn);
        const uint64_t pool = static_cast<uint64_t>(z.offload_optimizer_buffer_count) * align_aio(sub, 4) * 4;
        const uint64_t pinned = pool + ba * Tn;
        host_rank += pinned;
        pinned_rank += pinned;
        nvme_rank += (4 + osb + 4) * Tn;
        if (ex.on) ex.term("host: optimizer NVMe swap buffers (per rank, pinned)",
                "buffer_count · align(min(sub_group_size, Ψ_t/N_d)) · 4 + b_a · Ψ_t/N_d",
                "buffer_count=" + n2s(uint64_t(z.offload_optimizer_buffer_count)) + ", sub=" + n2s(sub), pinned,
                "DeepSpeed runtime/swap_tensor/optimizer_utils.py, utils.py");
    }
    if (z.offload_param == OffloadDevice::cpu) {
        const uint64_t b = bm * Tn + to_bytes(frozen_bytes / double(N));
        host_rank += b;
        if (pin_p) pinned_rank += b;
        if (ex.on) ex.term("host: offloaded 16-bit parameters (per rank)", "b_m · Ψ/N_d", "Ψ/N_d=" + n2s(ceil_div(Pr, N)), b, srcZ3);
    } else if (z.offload_param == OffloadDevice::nvme) {
        const uint64_t pool =
            static_cast<uint64_t>(z.offload_param_buffer_count) * align_aio(static_cast<uint64_t>(z.offload_param_buffer_size), bm) * bm +
            std::min<uint64_t>(static_cast<uint64_t>(z.offload_param_max_in_cpu), ceil_div(Pr, N)) * bm;
        host_rank += pool;
        pinned_rank += pool;
        nvme_rank += bm * ceil_div(Pr, N);
        if (ex.on) ex.term("host: parameter NVMe swap pool (per rank, pinned)",
                "buffer_count · align(buffer_size) · b_m + min(max_in_cpu, Ψ/N_d) · b_m",
                "buffer_count=" + n2s(uint64_t(z.offload_param_buffer_count)) + ", buffer_size=" +
                    n2s(uint64_t(z.offload_param_buffer_size)) + ", max_in_cpu=" + n2s(uint64_t(z.offload_param_max_in_cpu)),
                pool, "DeepSpeed runtime/swap_tensor/partitioned_param_swapper.py");
    }
    const uint64_t overhead = in.residual.host_process_overhead * g;  // every rank's process baseline
    const uint64_t host_steady = host_rank * g + overhead;
    const uint64_t pinned_steady = pinned_rank * g;
    const uint64_t nvme = nvme_rank * g;
    const uint64_t lb = static_cast<uint64_t>(dtype_bytes(in.residual.load_dtype));
    const bool zero_init = s == 3 && z.zero_init;
    const uint64_t host_model = overhead + g * (zero_init ? L * lb : to_bytes(double(Tr) * double(lb) + frozen_bytes));
    // The optimizer's host states and the pinned offload/swap pools are
    // allocated while deepspeed.initialize builds the engine, i.e. in the
    // load phase, after the materialised module has moved to the GPU (or,
    // under zero.Init, after its last module was built and partitioned).
    const uint64_t host_init = overhead + g * (host_rank - lazy_rank);
    const uint64_t pinned_init = g * (pinned_rank - lazy_pinned_rank);
    const uint64_t host_load = std::max(host_model, host_init);
    if (ex.on) ex.term("host: model load (per node)",
            zero_init ? "g · (L · load bytes + process overhead) (zero.Init: one module at a time per rank)"
                      : "g · (Ψ · load bytes + process overhead) (every rank materialises the whole model)",
            "g=" + n2s(g) + ", " + (zero_init ? "L=" + n2s(L) : "Ψ=" + n2s(Pr)) + ", load dtype " +
                to_string(in.residual.load_dtype),
            host_model, "DeepSpeed estimate_zero3_model_states_mem_needs (4·g·Ψ without zero.Init)");
    if (ex.on && host_init > host_model)
        ex.term("host: load phase (per node)",
                "max(model load, g · (offloaded states and pinned pools built by deepspeed.initialize) + overhead)",
                "model load=" + n2s(host_model) + " B, engine init=" + n2s(host_init) + " B", host_load,
                "DeepSpeed v0.19.6 stage_1_and_2.py / stage3.py __init__, swap_tensor/*.py");
    const bool gather_save = s == 3 && z.stage3_gather_16bit_weights_on_model_save;
    const uint64_t save_host = gather_save ? bm * P : 0;  // rank 0 holds the consolidated 16-bit state dict

    // --- load-time GPU ----------------------------------------------------------
    GpuMemory ld;
    if (s == 3) {
        ld.parameters = st.parameters + (zero_init ? 0 : L * lb);  // without zero.Init one module at a time
        ld.gradients = st.gradients;                                 // grad_partitions_flat_buffer at init
        ld.master_weights = st.master_weights;                       // fp32 partitions at init; m, v come at step 1
    } else {
        // The engine casts the module to 16 bits on the host, then moves it
        // to the GPU (engine._configure_distributed_model). The ZeRO
        // optimizer flattens each param group on the GPU only when a second
        // copy fits there, else on the CPU (stage_1_and_2.py __init__,
        // flatten_on_accelerator), so the flat copy never causes an OOM: the
        // load phase holds one 16-bit copy and the fp32 master partition.
        ld.parameters = st.parameters;
        ld.master_weights = st.master_weights;
    }
    ld.optimizer_states = ld.master_weights;
    ld.temporary_buffers = tmp_load;

    // --- phases -------------------------------------------------------------------
    const double frag = in.residual.fragmentation_fraction;
    const uint64_t ctx = in.residual.cuda_context;
    auto finish = [&](GpuMemory& m) {
        const uint64_t alloc = m.parameters + m.gradients + m.optimizer_states + m.activations + m.temporary_buffers;
        m.cuda_context = ctx;
        m.fragmentation = to_bytes(frag * double(alloc));
        m.total = alloc + ctx + m.fragmentation;
    };
    auto steady_with = [&](uint64_t act, uint64_t tmp) {
        GpuMemory m = st;
        m.activations = act;
        m.temporary_buffers = tmp;
        finish(m);
        return m;
    };
    finish(ld);
    out.phases.reserve(6);
    auto add = [&](const char* name, const GpuMemory& m, uint64_t host, uint64_t pinned) {
        PhaseMemory p;
        p.name = name;
        p.per_gpu = m;
        p.per_node.host_memory = host;
        p.per_node.host_pinned = pinned;
        p.per_node.nvme = nvme;
        if (in.cluster.gpu_memory) p.fits_gpu = m.total <= *in.cluster.gpu_memory;
        if (in.cluster.host_memory) p.fits_host = host <= *in.cluster.host_memory;
        out.phases.push_back(std::move(p));
    };
    // The first forward and backward run before Adam's m and v exist (the
    // optimizer allocates them lazily at its first step); from the second
    // step on they are live throughout.
    // Before the first backward no gradient storage exists in stages 0-2:
    // autograd creates param.grad during backward and ZeRO-2 allocates
    // grads_in_partition lazily at the first reduction (deepspeed_memory.md
    // 4.1); ZeRO-3's grad_partitions_flat_buffer is built at init (4.2).
    auto first_with = [&](uint64_t act, uint64_t tmp, bool before_backward) {
        GpuMemory m = steady_with(act, tmp);
        if (before_backward && s <= 2) m.gradients = 0;
        m.momentum = m.variance = 0;
        m.optimizer_states = m.master_weights;
        finish(m);
        return m;
    };
    add("load", ld, host_load, pinned_init);
    add("forward", first_with(act_fwd, tmp_fwd, true), host_steady + act_host * g, pinned_steady);
    add("backward", first_with(act_bwd, tmp_bwd, false), host_steady + act_host * g, pinned_steady);
    add("optimizer_step", steady_with(0, tmp_step), host_steady, pinned_steady);
    add("steady_backward", steady_with(act_bwd, tmp_bwd), host_steady + act_host * g, pinned_steady);
    add("checkpoint_save", steady_with(0, tmp_persist + (gather_save ? L * bm : 0)), host_steady + save_host, pinned_steady);

    // --- summary: components at their own peak, totals at the peak phase ---------
    auto& m = out.per_gpu;
    m = st;
    m.activations = act_bwd;
    m.temporary_buffers = std::max({tmp_fwd, tmp_bwd, tmp_step, tmp_load});
    const PhaseMemory* gpu_peak = &out.phases[0];
    const PhaseMemory* host_peak = &out.phases[0];
    for (const auto& p : out.phases) {
        if (p.per_gpu.total > gpu_peak->per_gpu.total) gpu_peak = &p;
        if (p.per_node.host_memory > host_peak->per_node.host_memory) host_peak = &p;
    }
    m.cuda_context = ctx;
    m.fragmentation = gpu_peak->per_gpu.fragmentation;
    m.total = gpu_peak->per_gpu.total;
    out.peak_phase = gpu_peak->name;
    out.host_peak_phase = host_peak->name;
    for (const auto& p : out.phases) {  // chronological: the first phase that overflows
        if (out.first_oom_phase.empty() && p.fits_gpu.has_value() && !*p.fits_gpu) out.first_oom_phase = p.name;
        if (out.first_host_oom_phase.empty() && p.fits_host.has_value() && !*p.fits_host)
            out.first_host_oom_phase = p.name;
    }
    auto& node = out.per_node;
    node.host_memory = host_peak->per_node.host_memory;
    node.host_pinned = pinned_steady;
    node.host_load = host_load;
    node.host_steady = host_steady + act_host * g;
    node.nvme = nvme;
    if (ex.on) {
        ex.term("cuda_context", "named figure (--cuda-context)", n2s(ctx) + " B", ctx,
                "public reports: 0.4-0.6 GB per process");
        ex.term("fragmentation", "fraction · allocated bytes of the phase (--fragmentation)",
                num(frag) + " at the " + gpu_peak->name + " phase", m.fragmentation,
                "PyTorch caching allocator reserve; a few percent of capacity");
    }
    if (s == 3 && !z.zero_init)
        ex.note("zero_init is off: every rank on a node builds the whole model in host RAM before partitioning.");
    if (!in.model.arch && s == 3)
        ex.note("no architecture: ZeRO-3 persistent (small) parameters are not counted.");
    if (pp > 1 && t.grad_accum > 1)
        ex.note("pipeline parallelism with gradient accumulation: memory can grow with the accumulation steps "
                "(autograd buffers kept until the boundary, DeepSpeed #5198); not modelled beyond pp micro batches in flight.");
}

}  // namespace

uint64_t activation_bytes_per_layer(int64_t s, int64_t b, int64_t h, int64_t a, int64_t t,
                                    Checkpointing mode, bool flash_attention, bool sequence_parallel) {
    if (s <= 0 || b <= 0 || h <= 0 || a <= 0 || t <= 0)
        throw InputError("activation formula: sequence, batch, hidden, heads and tensor-parallel size must be positive");
    const double sbh = double(s) * double(b) * double(h);
    const double td = double(t);
    const double nonpar = sequence_parallel ? 10.0 / td : 10.0;
    double factor = 0;
    switch (mode) {
        case Checkpointing::full: factor = sequence_parallel ? 2.0 / td : 2.0; break;
        case Checkpointing::selective: factor = nonpar + 24.0 / td; break;
        case Checkpointing::none:
            factor = nonpar + 24.0 / td + (flash_attention ? 0.0 : 5.0 * double(a) * double(s) / (double(h) * td));
            break;
    }
    return to_bytes(sbh * factor);
}

uint64_t layer_activation_bytes(const ModelArch& arch, int64_t s, int64_t b, int64_t t, Checkpointing mode,
                                bool flash_attention, bool sequence_parallel) {
    const int64_t h = arch.hidden_size, a = arch.num_heads;
    if (s <= 0 || b <= 0 || h <= 0 || a <= 0 || t <= 0)
        throw InputError("activation formula: sequence, batch, hidden, heads and tensor-parallel size must be positive");
    const double sbh = double(s) * double(b) * double(h);
    const double td = double(t);
    if (mode == Checkpointing::full) return to_bytes(sbh * (sequence_parallel ? 2.0 / td : 2.0));
    // Korthikanti's 10 sbh outside the tensor-parallel region: two LayerNorm
    // inputs (4), attention and MLP inputs (4), two dropout masks (2).
    const double nonpar = sequence_parallel ? 10.0 / td : 10.0;
    // Inside: Q (2) and K, V (2 each, scaled by kv/a for GQA), the output
    // projection's input (2): 8 for multi-head attention.
    const int64_t hd = arch.head_dim > 0 ? arch.head_dim : h / a;
    const double q_width = double(a * hd) / double(h);
    const double kv_width = double(arch.num_kv_heads * hd) / double(h);
    const double attn = 2.0 * q_width + 4.0 * kv_width + 2.0 * q_width;
    // MLP: plain 2sbf (GeLU input) + 2sbf (its output) = 4f/h sbh (16 for f = 4h);
    // gated: gate, up, act(gate) and the product, 2sbf each = 8f/h sbh.
    const double f = double(arch.ffn_size) / double(h);
    const double mlp = (arch.gated_mlp ? 8.0 : 4.0) * f;
    double factor = nonpar + (attn + mlp) / td;
    if (mode == Checkpointing::none && !flash_attention)
        factor += 5.0 * double(a) * double(s) / (double(h) * td);
    return to_bytes(sbh * factor);
}

uint64_t lora_params(const ModelArch& arch, int64_t rank, const std::string& targets) {
    if (rank <= 0) throw InputError("--lora-rank: must be positive");
    const int64_t h = arch.hidden_size;
    const int64_t hd = arch.head_dim > 0 ? arch.head_dim : h / arch.num_heads;
    const int64_t q = arch.num_heads * hd, kv = arch.num_kv_heads * hd, f = arch.ffn_size;
    int64_t per_layer = 0;
    std::size_t pos = 0;
    while (pos <= targets.size()) {
        const std::size_t comma = targets.find(',', pos);
        const std::string name = targets.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (name == "q") per_layer += rank * (h + q);
        else if (name == "k" || name == "v") per_layer += rank * (h + kv);
        else if (name == "o") per_layer += rank * (q + h);
        else if (name == "gate" || name == "up") per_layer += rank * (h + f);
        else if (name == "down") per_layer += rank * (f + h);
        else throw InputError("--lora-target: unknown projection '" + name + "' (use q,k,v,o,gate,up,down)");
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return static_cast<uint64_t>(per_layer * arch.num_layers);
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
