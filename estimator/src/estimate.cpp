#include "zeromem/estimate.h"
#include "zeromem/verdict_band.h"
#include "zeromem/optimizer_wrapper.h"

#include "zeromem/optimizer_state.h"
#include "zeromem/process_terms.h"
#include "zeromem/terms.h"
#include "zeromem/util.h"
#include "zeromem/zeropp.h"
#include "rank0_only.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

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
    if (in.cluster.tp <= 0 || in.cluster.pp <= 0) throw InputError("--tp/--pp: must be positive");
    if (in.cluster.gpus % (in.cluster.tp * in.cluster.pp) != 0)
        throw InputError("--tp/--pp: tp x pp = " + std::to_string(in.cluster.tp * in.cluster.pp) +
                         " does not divide " + std::to_string(in.cluster.gpus) + " GPUs");
    if (in.cluster.pp > 1 && in.zero.stage >= 2)
        throw InputError("--pp: DeepSpeed's pipeline engine supports ZeRO stage 0 or 1 only; stage " +
                         std::to_string(in.zero.stage) + " with pipeline parallelism is rejected (runtime/pipe/engine.py)");
    if (const auto why = optimizer_wrapper_refusal(in)) throw InputError(why->message());
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
    // Beyond any real run, and the byte counts below would overflow 64 bits:
    // 2^31 tokens per sequence, 2^40 tokens per micro batch.
    if (in.train.seq_len > (int64_t(1) << 31))
        throw InputError("--seq-len: " + std::to_string(in.train.seq_len) + " is too large (at most 2^31 tokens)");
    if (double(in.train.micro_batch) * double(in.train.seq_len) > double(int64_t(1) << 40))
        throw InputError("--micro-batch: " + std::to_string(in.train.micro_batch) + " x --seq-len " +
                         std::to_string(in.train.seq_len) + " tokens per micro batch is too large (at most 2^40)");
    if (z.reduce_bucket_size <= 0) throw InputError("zero_optimization.reduce_bucket_size: must be positive");
    if (!(in.residual.fragmentation_fraction >= 0 && in.residual.fragmentation_fraction < 1))  // NaN too
        throw InputError("--fragmentation: must be a fraction in [0, 1)");
    validate_zeropp(in);
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

// ---------------------------------------------------------------------------
// full convention: what DeepSpeed v0.19.6 allocates
// ---------------------------------------------------------------------------

// DeepSpeed builds BF16_Optimizer (zeromem/optimizer_wrapper.h: engine.py
// _do_optimizer_sanity_check, by DeepSpeed version).
bool selects_bf16_optimizer(const EstimateInput& in) {
    return optimizer_wrapper(in) == OptimizerWrapper::bf16_optimizer;
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

// The version-dependent behaviours of the software stack, resolved once per
// estimate: which AdamW implementation runs (torch 2.1 foreach; the HF
// Trainer's adamw_torch_fused from torch 2.8, huggingface/transformers#37358),
// whether pinned requests are rounded (torch 1.11, pytorch/pytorch#69299) and
// which DeepSpeed host buffers exist and are pinned (deepspeedai/DeepSpeed
// #4131 0.10.1, #5104 0.13.2, #5301 0.14.1, #5409 0.14.3, #7309 0.17.0,
// #7689 0.18.3, #7828 0.18.7). Throws InputError naming the flag for a
// malformed version.
struct StackFacts {
    bool torch_before_2_1 = false;  // foreach AdamW keeps two temporaries
    bool hf_fused_default = true;   // HF Trainer default adamw_torch_fused (torch >= 2.8, transformers >= 4.54)
    bool round_pinned = true;       // torch >= 1.11: PowerOf2Ceil pinned sizes
    bool ds_0_10_1 = true, ds_0_13_2 = true, ds_0_14_1 = true, ds_0_14_3 = true, ds_0_17_0 = true,
         ds_0_18_3 = true, ds_0_18_7 = true;
};

StackFacts stack_facts(const SoftwareStack& st) {
    static const std::string ds_flag = "--deepspeed-version", torch_flag = "--torch-version",
                             tf_flag = "--transformers-version";
    auto ds = [&](const char* v) { return compare_versions(st.deepspeed, v, ds_flag) >= 0; };
    StackFacts f;
    f.torch_before_2_1 = compare_versions(st.torch, "2.1", torch_flag) < 0;
    f.hf_fused_default = compare_versions(st.torch, "2.8", torch_flag) >= 0 &&
                         compare_versions(st.transformers, "4.54", tf_flag) >= 0;
    f.round_pinned = compare_versions(st.torch, "1.11", torch_flag) >= 0;
    f.ds_0_10_1 = ds("0.10.1");
    f.ds_0_13_2 = ds("0.13.2");
    f.ds_0_14_1 = ds("0.14.1");
    f.ds_0_14_3 = ds("0.14.3");
    f.ds_0_17_0 = ds("0.17.0");
    f.ds_0_18_3 = ds("0.18.3");
    f.ds_0_18_7 = ds("0.18.7");
    return f;
}

// Everything the full convention resolves once per estimate: parameter counts
// per rank, the named sizes the terms read (terms::Sizes) and the source
// strings.
struct FullContext {
    const EstimateInput& in;
    terms::Sizes sz;
    uint64_t P = 0, T = 0, F = 0;  // model, trainable, frozen parameters
    uint64_t Pr = 0, Tr = 0, Fr = 0;  // the same per tensor/pipeline rank
    uint64_t Tn = 0;                  // ceil(Tr / N_d)
    uint64_t N = 1, g = 1, tp = 1, pp = 1, L = 0;
    uint64_t bm = 2, ba = 2, bc = 2, osb = 8;
    double frozen_bytes = 0;          // frozen storage per tensor/pipeline rank, bytes
    const char* src = "";             // the stage's DeepSpeed source
    StackFacts facts;                 // version-dependent behaviours
    std::string kernel_why;           // which optimizer implementation runs the step, and why
    OptimizerStateBytes opt_state;    // optimizer states of this rank (GPU, or host under offload)
    std::string opt_state_why;        // which tensors the optimizer is handed, for --explain
    ProcessMemory proc;               // CUDA context, NCCL buffers, cuBLAS workspaces (process_terms.h)
    explicit FullContext(const EstimateInput& i) : in(i) {}
};

constexpr const char* kSrcZ12 = "DeepSpeed v0.19.6 runtime/zero/stage_1_and_2.py (DeepSpeedZeroOptimizer)";
constexpr const char* kSrcZ3 = "DeepSpeed v0.19.6 runtime/zero/stage3.py, partition_parameters.py";
constexpr const char* kSrcZ0 = "DeepSpeed v0.19.6 runtime/fp16/fused_optimizer.py (FP16_Optimizer)";

// The optimizer implementation that runs the step, and why.
// DeepSpeed does not alter a client optimizer's foreach/fused
// choice (engine.py _configure_optimizer: basic_optimizer =
// client_optimizer); the HF Trainer's default is adamw_torch_fused from
// torch 2.8 with transformers >= 4.54 (huggingface/transformers#37358, merged
// 2025-07-10), adamw_torch (foreach) before. torch 2.0's foreach AdamW keeps
// two temporaries (exp_avg_sq_sqrt and denom), later versions one.
struct KernelChoice {
    terms::StepKernel kernel;
    std::string why;
};

KernelChoice step_kernel(const EstimateInput& in, const StackFacts& facts) {
    const auto& t = in.train;
    const bool torch_2_0 = facts.torch_before_2_1;
    const terms::StepKernel foreach = torch_2_0 ? terms::StepKernel::torch_foreach_2_0 : terms::StepKernel::torch_foreach;
    const std::string foreach_text = std::string("torch's foreach ") + to_string(t.optimizer) +
                                     (torch_2_0 ? " (torch < 2.1: two fp32 temporaries)" : " (one fp32 temporary)");
    if (t.optimizer == Optimizer::sgd || t.optimizer == Optimizer::sgd_plain)
        return {terms::StepKernel::sgd, "torch SGD: no Adam temporary"};
    const OptimizerInfo& oi = optimizer_info(t.optimizer);
    const bool offload_opt = in.zero.offload_optimizer != OffloadDevice::none;
    if (!offload_opt && (oi.bitsandbytes || t.optimizer == Optimizer::lion || t.optimizer == Optimizer::lamb))
        return {terms::StepKernel::fused, std::string(oi.implementation) + ": updates in place, no fp32 temporary"};
    if (t.optimizer == Optimizer::adagrad && offload_opt)
        return {terms::StepKernel::fused, "DeepSpeedCPUAdagrad (optimizer offload): in place"};
    if (!offload_opt &&
        (t.optimizer == Optimizer::adagrad || t.optimizer == Optimizer::rmsprop || t.optimizer == Optimizer::adafactor))
        return {foreach, std::string(oi.implementation) +
                             ": one fp32 temporary the size of the tensors it steps (Adafactor: update = grad^2 + eps)"};
    if (t.torch_adam) return {foreach, "optimizer.params.torch_adam: DeepSpeed builds " + foreach_text};
    if (t.fused_optimizer)
        return {terms::StepKernel::fused, "DeepSpeed's optimizer (FusedAdam, DeepSpeedCPUAdam under offload): in place"};
    const bool offload = in.zero.offload_optimizer != OffloadDevice::none;
    if (offload && t.optimizer_builder != OptimizerBuilder::client)
        return {terms::StepKernel::fused, "DeepSpeedCPUAdam (optimizer offload needs DeepSpeed's optimizer)"};
    if (t.client_fused)
        return {*t.client_fused ? terms::StepKernel::fused : foreach,
                *t.client_fused ? std::string("torch's fused AdamW: no temporary") : foreach_text};
    if (facts.hf_fused_default)
        return {terms::StepKernel::fused,
                "HF Trainer default adamw_torch_fused (torch >= 2.8, transformers >= 4.54): no temporary"};
    return {foreach, "HF Trainer default adamw_torch: " + foreach_text};
}

}  // namespace

terms::StepKernel terms::step_kernel_for(const EstimateInput& in) { return step_kernel(in, stack_facts(in.stack)).kernel; }

namespace {

// Every parameter tensor of the architecture as (numel per tensor, count),
// in the Hugging Face module layout, split over tp: what per-parameter pinned
// buffers are sized by (zero.Init's partitions, the ZeRO-1/2 accumulation
// buffers). The counts match count_params for the families it covers.
std::vector<std::pair<uint64_t, uint64_t>> parameter_numels(const ModelArch& a, uint64_t tp) {
    std::vector<std::pair<uint64_t, uint64_t>> v;
    const uint64_t h = uint64_t(a.hidden_size), f = uint64_t(a.ffn_size), layers = uint64_t(a.num_layers);
    const uint64_t hd = uint64_t(a.head_dim > 0 ? a.head_dim : a.hidden_size / std::max<int64_t>(1, a.num_heads));
    const uint64_t q = uint64_t(a.num_heads) * hd, kv = uint64_t(a.num_kv_heads) * hd;
    auto add = [&](uint64_t numel, uint64_t count) {
        if (numel > 0 && count > 0) v.emplace_back(ceil_div(numel, tp), count);
    };
    add(uint64_t(a.vocab_size) * h, 1);
    if (!a.tied_embeddings) add(uint64_t(a.vocab_size) * h, 1);
    if (a.learned_positions) add(uint64_t(a.max_position_embeddings + a.position_offset) * h, 1);
    if (a.fused_qkv) {
        add(h * (q + 2 * kv), layers);
    } else {
        add(h * q, layers);
        add(h * kv, 2 * layers);
    }
    add(q * h, layers);
    add(h * f, (a.gated_mlp ? 2 : 1) * layers);
    add(f * h, layers);
    if (a.qkv_bias) add(q + 2 * kv, layers);
    if (a.attn_out_bias) add(h, layers);
    if (a.mlp_bias) add(f, (a.gated_mlp ? 2 : 1) * layers), add(h, layers);
    add(h, uint64_t(a.norms_per_layer) * layers * (a.norm_has_bias ? 2 : 1));
    if (a.final_norm) add(h, a.norm_has_bias ? 2 : 1);
    return v;
}

bool zero12_flattens_on_gpu(const FullContext& c);

// Elements of one tensor/pipeline rank's parameters that ZeRO-3 keeps whole
// on every rank (DeepSpeed v0.19.6 runtime/zero/parameter_offload.py
// mark_persistent_parameters): walking named_parameters, every parameter
// with ds_numel <= stage3_param_persistence_threshold persists, matrices
// included, while the running total stays within
// stage3_model_persistence_threshold (a parameter that would exceed it is
// skipped, later smaller ones may still fit). Walked in module order: the
// embeddings, then per layer its projections, MLP matrices, biases and
// norms, then the final norm and the LM head.
uint64_t persistent_numel(const ModelArch& a, uint64_t tp, int64_t threshold, int64_t model_threshold) {
    const uint64_t limit = static_cast<uint64_t>(std::max<int64_t>(0, threshold));
    const uint64_t cap = static_cast<uint64_t>(std::max<int64_t>(0, model_threshold));
    const uint64_t layers = static_cast<uint64_t>(std::max<int64_t>(1, a.num_layers));
    uint64_t total = 0;
    auto take = [&](uint64_t numel, uint64_t count) {  // as many copies as stay within the cap
        if (numel == 0 || numel > limit || total > cap) return;
        const uint64_t fit = std::min(count, (cap - total) / numel);
        total += fit * numel;
    };
    const auto list = parameter_numels(a, tp);
    // parameter_numels lists whole-model counts; spread the per-layer
    // tensors over the layers so the model cap is applied in module order.
    // Whole layers that fit under the cap are taken at once (a config may
    // have very many layers); the walk goes on only while something fits.
    uint64_t per_layer = 0, smallest = UINT64_MAX;
    for (const auto& [numel, count] : list)
        if (count >= layers && count % layers == 0 && numel > 0 && numel <= limit) {
            per_layer += numel * (count / layers);
            smallest = std::min(smallest, numel);
        }
    uint64_t layer = 0;
    if (per_layer > 0) {
        const uint64_t whole = std::min(layers, cap / per_layer);
        total = whole * per_layer;
        layer = whole;
    }
    for (; layer < layers && per_layer > 0 && total <= cap && cap - total >= smallest; ++layer)
        for (const auto& [numel, count] : list)
            if (count >= layers && count % layers == 0) take(numel, count / layers);
    for (const auto& [numel, count] : list)
        if (count < layers || count % layers != 0) take(numel, count);
    if (a.embedding_norm) take(ceil_div(uint64_t(a.hidden_size), tp), a.norm_has_bias ? 2 : 1);
    return total;
}


// The host fields of the sizes: offload devices, pinning and the software
// versions that decide which buffers exist and how they are pinned
// (PyTorch CachingHostAllocator.h allocate: PowerOf2Ceil from torch 1.11;
// DeepSpeed stage_1_and_2.py / stage3.py pin_memory calls per version).
void set_host_sizes(FullContext& c) {
    const auto& in = c.in;
    const auto& z = in.zero;
    terms::Sizes& s = c.sz;
    const StackFacts& f = c.facts;
    s.offload_optimizer_cpu = z.offload_optimizer == OffloadDevice::cpu;
    s.offload_optimizer_nvme = z.offload_optimizer == OffloadDevice::nvme;
    s.offload_param_cpu = z.offload_param == OffloadDevice::cpu;
    s.offload_param_nvme = z.offload_param == OffloadDevice::nvme;
    s.pin_optimizer = z.offload_optimizer_pin_memory;
    s.pin_param = z.offload_param_pin_memory;
    s.zero_init = z.zero_init;
    s.round_pinned = f.round_pinned;
    s.master_pinned = f.ds_0_18_3 ? s.pin_optimizer : f.ds_0_14_1;
    s.grads_pinned = f.ds_0_10_1 ? s.pin_optimizer : true;
    s.bit16_staging = f.ds_0_17_0;
    s.cpu_adam_tile_buffer = !f.ds_0_14_3;
    s.lazy_cpu_adam_states = f.ds_0_13_2;
    s.optimizer_state_bytes = c.osb;
    s.sub_group_size = static_cast<uint64_t>(std::max<int64_t>(1, z.sub_group_size));
    s.Pn = in.moe.ep() > 1 ? expert_split(in).partition : ceil_div(c.Pr, c.N);
    s.frozen_bytes_rank = to_bytes(c.frozen_bytes / double(c.N));
    s.offload_optimizer_buffer_count = z.offload_optimizer_buffer_count;
    s.offload_param_buffer_count = z.offload_param_buffer_count;
    s.offload_param_buffer_size = static_cast<uint64_t>(z.offload_param_buffer_size);
    s.offload_param_max_in_cpu = static_cast<uint64_t>(z.offload_param_max_in_cpu);
    s.zero12_cpu_flatten = (z.stage == 1 || z.stage == 2) && !s.bf16_optimizer && !zero12_flattens_on_gpu(c);
    const bool per_param_buffers = (s.offload_optimizer_cpu && (z.stage == 1 || z.stage == 2) && in.train.grad_accum > 1) ||
                                   s.offload_param_cpu;  // Init(module=...) without zero.Init too
    if (in.model.arch && per_param_buffers) {
        double raw = 0, rounded = 0;
        uint64_t blocks = 0;
        for (const auto& [numel, count] : parameter_numels(*in.model.arch, c.tp)) {
            raw += double(c.bm * numel) * double(count);
            rounded += double(terms::power_of_two_ceil(c.bm * numel)) * double(count);
            blocks += terms::power_of_two_ceil(c.bm * ceil_div(numel, c.N)) * count;
        }
        if (raw > 0) s.per_param_rounding = rounded / raw;
        s.zero_init_partition_blocks = blocks;
    }
}

// The ZeRO++ / MiCS fields of the sizes (zeropp_terms.cpp terms).
void set_zeropp_sizes(FullContext& c) {
    const auto& in = c.in;
    const auto& z = in.zero;
    terms::Sizes& s = c.sz;
    s.g = c.g;
    s.nodes = static_cast<uint64_t>(in.cluster.nodes);
    if (z.hpz_active()) {
        s.hpz = static_cast<uint64_t>(std::min(z.zero_hpz_partition_size, in.cluster.gpus));
        uint64_t persist = 0;
        if (in.model.arch)
            persist = ceil_div(persistent_numel(*in.model.arch, c.tp, z.stage3_param_persistence_threshold,
                                                z.stage3_model_persistence_threshold), c.pp);
        s.hpz_numel_load = c.Pr;
        s.hpz_numel_train = c.Pr - std::min(c.Pr, persist);
    }
    s.qwz = z.stage == 3 && z.zero_quantized_weights;
    s.bf16 = in.train.dtype == Dtype::bf16;
    s.qgz = z.stage == 3 && z.zero_quantized_gradients && in.cluster.nodes > 1;
    if (s.qgz) {
        uint64_t rows_cols = 0;
        if (in.model.arch)
            rows_cols = static_cast<uint64_t>(std::max(in.model.arch->vocab_size, in.model.arch->hidden_size));
        s.qgz_groups = std::max<uint64_t>(rows_cols, static_cast<uint64_t>(in.cluster.gpus));
    }
    if (z.stage == 3 && z.mics_shard_size > 0) {
        s.mics = static_cast<uint64_t>(z.mics_shard_size);
        s.mics_hierarchical = z.mics_hierarchical_params_gather;
    }
}

// The tensors the optimizer is handed on this rank. Stage 0: the model's own
// tensors (DeepSpeed wraps a non-Fused optimizer in FP16_UnfusedOptimizer,
// which keeps per-parameter fp32 copies: engine.py _configure_fp16_optimizer)
// when their shapes are known; stages 1 and 2: the flat fp32 partition
// (stage_1_and_2.py single_partition_of_fp32_groups, one per param group);
// stage 3: the fp32 partition cut into sub_group_size sub-groups
// (stage3.py _create_fp32_partitions).
std::vector<StateTensor> optimizer_tensors(const FullContext& c, std::string& why) {
    const auto& in = c.in;
    const int s = in.zero.stage;
    if (s == 0 && !c.sz.bf16_optimizer) {
        if (in.model.arch && c.T == c.P && c.pp == 1) {
            auto v = model_state_tensors(*in.model.arch, c.tp);
            if (!v.empty()) {
                why = "the model's own tensors (stage 0; matrices and vectors by shape)";
                return v;
            }
        }
        why = "one flat tensor of Ψ_t elements: the tensor shapes are not known (" +
              std::string(in.model.arch ? "this architecture, LoRA or a trainable subset" : "--params alone") +
              "); Adafactor is then counted unfactored (4 B/param, an upper bound), 8-bit optimizers as if "
              "no tensor were under min_8bit_size = 4096 (a lower bound)";
        return flat_tensors(c.Tr, c.Tr);
    }
    if (s == 3) {
        why = "the rank's flat fp32 partition in sub_group_size sub-groups";
        return flat_tensors(c.Tn, static_cast<uint64_t>(std::max<int64_t>(1, in.zero.sub_group_size)));
    }
    why = "the rank's flat fp32 partition, one 1-D tensor per param group";
    return flat_tensors(c.Tn, c.Tn);
}

// Who builds the optimizer under ZeRO optimizer offload: DeepSpeed from the
// config's "optimizer" block, or the client. Unset: DeepSpeed for the types
// it builds a CPU optimizer for (Adam(W), Adagrad, Lion), else the client
// (bitsandbytes, Adafactor, torch SGD are always client optimizers).
bool built_by_deepspeed(const EstimateInput& in) {
    const Optimizer o = in.train.optimizer;
    if (in.train.optimizer_builder) return *in.train.optimizer_builder == OptimizerBuilder::deepspeed;
    return o == Optimizer::adam || o == Optimizer::adamw || o == Optimizer::adagrad || o == Optimizer::lion;
}

// The optimizer whose states are held. Under ZeRO optimizer offload:
// DeepSpeed builds DeepSpeedCPUAdam, DeepSpeedCPUAdagrad or DeepSpeedCPULion,
// the last allocating exp_avg and exp_avg_sq (ops/lion/cpu_lion.py step), so
// two fp32 states; a client optimizer is replaced by DeepSpeedCPUAdam by
// accelerate (the HF Trainer's path, accelerator.py _prepare_deepspeed) while
// zero_force_ds_cpu_optimizer is true, and kept (on host tensors) when false.
Optimizer state_holder(const EstimateInput& in) {
    const Optimizer o = in.train.optimizer;
    if (in.zero.offload_optimizer == OffloadDevice::none) return o;
    if (built_by_deepspeed(in)) return o == Optimizer::lion ? Optimizer::adam : o;
    return in.zero.zero_force_ds_cpu_optimizer ? Optimizer::adamw : o;
}

void set_optimizer_state(FullContext& c) {
    const auto tensors = optimizer_tensors(c, c.opt_state_why);
    c.opt_state = count_optimizer_state(state_holder(c.in), tensors);
    c.osb = static_cast<uint64_t>(optimizer_state_bytes(state_holder(c.in)));
    c.sz.optimizer_state_partition = c.opt_state.total();
}

// Partial optimizer offload (ZeRO-Offload++ Twin-Flow; DeepSpeed >= 0.12.3,
// b1cb0dfc4 #4636; stage3.py __init__ and _create_fp32_partitions): with
// offload_optimizer cpu and ratio < 1, sub-group i of the rank's S stays on
// the GPU when i < int((1 - ratio) · S) (Python's float product, truncated),
// with its fp32 master (.to(cuda, fp32).clone()), its fp32 gradient
// (initialize_optimizer_states: subgroup_gradient_buffer.to(cuda)) and the
// exp_avg / exp_avg_sq that the torch AdamW backup_optimizer makes at its
// first step (_optimizer_step); the rest stay on the host for
// DeepSpeedCPUAdam. The 16-bit grad_partitions_flat_buffer stays on the host
// (self.device is cpu under offload). Sub-groups are sub = min(sub_group_size,
// Tn) elements, the last the rest, as everywhere in this file.
void set_partial_offload(FullContext& c) {
    const auto& in = c.in;
    const auto& z = in.zero;
    terms::Sizes& s = c.sz;
    if (z.stage != 3 || z.offload_optimizer != OffloadDevice::cpu || !(z.offload_optimizer_ratio < 1.0)) return;
    if (state_holder(in) != Optimizer::adam && state_holder(in) != Optimizer::adamw)
        throw InputError("zero_optimization.offload_optimizer.ratio: " + std::to_string(z.offload_optimizer_ratio) +
                         " needs DeepSpeedCPUAdam (stage3.py __init__ asserts 'Hybrid Optimizer Only Supports "
                         "DeepSpeedCPUAdam'); the optimizer is " + to_string(in.train.optimizer));
    const uint64_t sub = std::max<uint64_t>(1, std::min(s.sub_group_size, c.Tn));
    const uint64_t count = ceil_div(c.Tn, sub);
    const uint64_t on_gpu = static_cast<uint64_t>((1.0 - z.offload_optimizer_ratio) * double(count));
    s.partial_gpu_numel = on_gpu >= count ? c.Tn : on_gpu * sub;
    s.partial_gpu_step_temporary = terms::step_temporary_bytes_per_element(
        c.facts.torch_before_2_1 ? terms::StepKernel::torch_foreach_2_0 : terms::StepKernel::torch_foreach);
}

// Notes on what the optimizer choice implies: paging, DeepSpeed's refusal of
// client optimizers under ZeRO-Offload (engine.py _configure_optimizer).
void optimizer_notes(const FullContext& c, Estimate& out) {
    const auto& in = c.in;
    const Optimizer o = in.train.optimizer;
    const OptimizerInfo& oi = optimizer_info(o);
    const bool offload = in.zero.offload_optimizer != OffloadDevice::none;
    if (o == Optimizer::adamw || o == Optimizer::adam) return;
    std::string n = std::string("optimizer ") + oi.name + " (" + oi.implementation + "): states counted on " +
                    c.opt_state_why +
                    (o == Optimizer::adafactor && in.zero.stage > 0 ? " (1-D, so Adafactor is unfactored: 4 B/element)" : "") +
                    ": " + format_gib(double(c.opt_state.total())) + " GiB per rank";
    if (c.opt_state.constants > 0)
        n += ", of which " + format_gib(double(c.opt_state.constants)) + " GiB fp32 absmax (one per 256 elements)";
    if (c.opt_state.fp32_small > 0)
        n += "; " + num(double(c.opt_state.fp32_small)) + " elements in tensors under 4096 elements keep fp32 states";
    n += "; the speed model times its step as Adam's";
    out.notes.push_back(n);
    if (oi.paged && !offload)
        out.notes.push_back("paged optimizer: " + format_gib(double(c.opt_state.paged)) +
                            " GiB per rank of states live in CUDA unified memory and can page to host memory under "
                            "GPU memory pressure; counted on the GPU (upper bound), the same bytes are the most "
                            "they take on the host (bitsandbytes get_state_buffer)");
    if (!offload) return;
    if (built_by_deepspeed(in) && o == Optimizer::lion)
        out.notes.push_back("optimizer offload with Lion: DeepSpeedCPULion allocates exp_avg and exp_avg_sq "
                            "(ops/lion/cpu_lion.py step), 8 B/param on the host");
    else if (!built_by_deepspeed(in))
        out.notes.push_back(std::string("optimizer offload with the client optimizer ") + oi.name +
                            ": DeepSpeed raises ZeRORuntimeException for a client optimizer other than "
                            "DeepSpeedCPUAdam/DeepSpeedCPULion under ZeRO-Offload unless zero_force_ds_cpu_optimizer "
                            "is false (engine.py _configure_optimizer); accelerate (the HF Trainer) then replaces it "
                            "with DeepSpeedCPUAdam (accelerator.py _prepare_deepspeed). " +
                            (in.zero.zero_force_ds_cpu_optimizer
                                 ? "Counted as DeepSpeedCPUAdam: 8 B/param on the host"
                                 : std::string("zero_force_ds_cpu_optimizer is false: the client optimizer's states "
                                               "are counted on the host") +
                                       (oi.paged ? " (bitsandbytes does not page CPU tensors)" : "")));
}

// Modules of one block (the largest kind: a MoE block where there is one)
// whose parameters ZeRO-3's trace fetches, norms left out (they persist):
// attention (q, k, v or fused qkv, o; MLA: q_proj or q_a_proj + q_b_proj,
// kv_a_proj_with_mqa, kv_b_proj, o_proj), then the dense MLP's projections
// or, in a MoE block, the router, each local expert's projections (one module
// for fused experts) and the shared expert's (transformers
// modeling_deepseek_v2.py, modeling_mixtral.py, modeling_qwen3_moe.py; each
// nn.Linear is a module of its own for parameter_offload.py's hooks). A
// router at or below stage3_param_persistence_threshold persists
// (mark_persistent_parameters) and is not fetched (Mixtral's 4096 x 8).
uint64_t fetched_modules_per_block(const ModelArch& a, int64_t ep, int64_t persistence_threshold) {
    const uint64_t attention = a.kv_lora_rank > 0 ? (a.q_lora_rank > 0 ? 2u : 1u) + 3u : (a.fused_qkv ? 1u : 3u) + 1u;
    const uint64_t mlp = a.gated_mlp ? 3u : 2u;
    if (a.num_experts <= 0 || a.num_moe_layers <= 0) return attention + mlp;
    const uint64_t local = static_cast<uint64_t>(a.num_experts / std::max<int64_t>(1, ep));
    const bool router_fetched = a.hidden_size * a.num_experts > persistence_threshold;
    return attention + (router_fetched ? 1u : 0u) + (a.fused_experts ? 1u : local * mlp) +
           (a.shared_expert_ffn_size > 0 ? mlp : 0u);
}

// Sets the partition count, GPUs per node, tp/pp, the largest module (a
// rank's share of fused experts under expert parallelism) and the byte widths.
void set_layout_and_widths(FullContext& c) {
    const EstimateInput& in = c.in;
    const auto& z = in.zero;
    const auto& t = in.train;
    // MiCS partitions stage-3 states over mics_shard_size ranks (mics.py).
    c.N = static_cast<uint64_t>(z.partition_size(in.cluster.data_parallel()));
    c.g = static_cast<uint64_t>(in.cluster.gpus_per_node());
    c.tp = static_cast<uint64_t>(in.cluster.tp);
    c.pp = static_cast<uint64_t>(in.cluster.pp);
    c.L = in.model.largest_layer_params;
    if (in.moe.ep() > 1 && in.model.arch && in.model.arch->fused_experts) {
        // Fused experts (gpt-oss, Llama 4) are one module per block; under
        // expert parallelism a rank's module holds only its num_experts / E_p
        // experts, so the largest module is that or the embedding / LM head.
        const ModelArch& a = *in.model.arch;
        const ParamCount pc = count_params(a);
        const uint64_t block = static_cast<uint64_t>(a.num_experts) * pc.one_expert;
        if (c.L == block)
            c.L = std::max({block / static_cast<uint64_t>(in.moe.ep()),
                            static_cast<uint64_t>(a.vocab_size) * static_cast<uint64_t>(a.hidden_size), pc.lm_head});
    }
    c.bm = static_cast<uint64_t>(dtype_bytes(t.dtype));
    c.ba = static_cast<uint64_t>(dtype_bytes(effective_grad_accum_dtype(in)));
    c.bc = static_cast<uint64_t>(dtype_bytes(t.communication_dtype.value_or(t.dtype)));
    c.osb = static_cast<uint64_t>(optimizer_state_bytes(t.optimizer));
    c.src = z.stage == 0 ? kSrcZ0 : (z.stage == 3 ? kSrcZ3 : kSrcZ12);
}

// Sets the trainable and frozen parameters per rank (LoRA, expert
// parallelism, quantized frozen storage) and their partition per rank.
void set_param_counts(FullContext& c, Estimate& out) {
    const EstimateInput& in = c.in;
    const auto& t = in.train;
    c.P = in.model.params;  // includes LoRA adapters
    c.T = t.trainable_params.value_or(c.P);
    if (t.lora_rank > 0) {
        if (!in.model.arch) throw InputError("--lora-rank: needs an architecture (--model or --hf-config)");
        c.T = lora_params(*in.model.arch, t.lora_rank, t.lora_targets);
    }
    if (c.T > c.P) throw InputError("--trainable-params: more than the model's " + std::to_string(c.P) + " parameters");
    c.F = c.P - c.T;
    c.Pr = rank_params(in, c.P);
    // Expert parallelism (zeromem/moe.h): a rank holds num_experts / E_p of
    // every MoE block's routed experts (deepspeed/moe/layer.py MoE.__init__).
    const ExpertSplit es = expert_split(in);
    if (in.moe.ep() > 1) c.Pr = es.held;
    c.Tr = c.P == 0 ? 0 : static_cast<uint64_t>(std::llround(double(c.T) * double(c.Pr) / double(c.P)));
    c.Fr = c.Pr - std::min(c.Pr, c.Tr);
    out.trainable_params = c.T;
    out.frozen_params = c.F;
    out.params_per_rank = c.Pr;
    // Frozen storage: quantized linear weights under 8/4-bit loading.
    c.frozen_bytes = double(c.Fr) * double(c.bm);
    if (t.load_in_bits != 16 && c.F > 0) {
        const double qb = t.load_in_bits == 8 ? 1.0 : 0.5625;  // int8; NF4 + fp32 absmax per 64
        const uint64_t qn = in.model.arch
            ? std::min<uint64_t>(c.Fr, ceil_div(linear_weight_params(*in.model.arch), c.tp * c.pp))
            : c.Fr;
        c.frozen_bytes = double(qn) * qb + double(c.Fr - qn) * double(c.bm);
    }
    c.Tn = ceil_div(c.Tr, c.N);
    if (in.moe.ep() > 1) {
        // ZeRO partitions the expert parameters over the expert-data-parallel
        // group (N_d / E_p ranks), the rest over N_d (stage_1_and_2.py
        // real_dp_process_group of the MoE groups; stage 3: AutoEP,
        // engine.py _resolve_zero3_param_placement).
        const uint64_t te = c.Tr == c.Pr ? es.expert_rank
                                         : static_cast<uint64_t>(std::llround(double(c.Tr) * double(es.expert_rank) /
                                                                              double(es.held)));
        c.Tn = ceil_div(c.Tr - te, c.N) + ceil_div(te, es.expert_dp);
    }
}

// The Linear weights ZeRO-3 keeps for backward without zero3_linear_wrap
// (terms::zero3_retained_linear_weights): every parameter of the rank outside
// the input embeddings, plus the LM head's V x h matrix tied or not; a
// rank's MoE blocks hold only their local experts.
void set_linear_weight_sizes(FullContext& c) {
    const EstimateInput& in = c.in;
    terms::Sizes& s = c.sz;
    if (!in.model.arch) {
        s.linear_weights = c.Pr;
        s.lm_head_matrix = c.L;
        return;
    }
    const ModelArch& a = *in.model.arch;
    const ParamCount pc = count_params(a);
    const uint64_t head = a.encoder_only && !a.mlm_head ? 0 : uint64_t(a.vocab_size) * uint64_t(a.hidden_size);
    uint64_t lin = pc.total - pc.embedding - pc.lm_head + head;
    if (in.moe.ep() > 1)
        lin -= uint64_t(a.num_moe_layers) * uint64_t(a.num_experts - a.num_experts / in.moe.ep()) * pc.one_expert;
    s.linear_weights = ceil_div(lin, c.tp);
    s.lm_head_matrix = ceil_div(head, c.tp);
}

// Fills the sizes every term reads (terms::Sizes) and the optimizer step kernel.
void set_term_sizes(FullContext& c) {
    const EstimateInput& in = c.in;
    const auto& z = in.zero;
    const auto& t = in.train;
    terms::Sizes& s = c.sz;
    s.stage = z.stage;
    s.N = c.N;
    s.L = c.L;
    s.layer = in.model.arch ? ceil_div(count_params(*in.model.arch).per_layer, c.tp) : 0;
    if (in.model.arch && in.moe.ep() > 1) {  // a MoE block gathers only its local experts
        const auto& a = *in.model.arch;
        s.layer -= static_cast<uint64_t>(a.num_experts - a.num_experts / in.moe.ep()) * count_params(a).one_expert;
    }
    s.bm = c.bm;
    s.ba = c.ba;
    s.bc = c.bc;
    s.half = t.dtype != Dtype::fp32;
    s.offload_optimizer = z.offload_optimizer != OffloadDevice::none;
    s.overlap_comm = z.overlap_comm_effective();
    s.contiguous_gradients = z.contiguous_gradients;
    s.reduce_scatter = z.reduce_scatter;
    s.checkpointing = t.checkpointing != Checkpointing::none;
    s.full_recompute = t.checkpointing == Checkpointing::full;
    s.memory_efficient_linear = z.memory_efficient_linear;
    set_linear_weight_sizes(c);
    s.full_finetune = c.T == c.P;
    s.bucket = static_cast<uint64_t>(z.reduce_bucket_size);
    s.prefetch = static_cast<uint64_t>(std::min(z.stage3_prefetch_bucket_size, z.stage3_max_live_parameters));
    s.max_live = static_cast<uint64_t>(z.stage3_max_live_parameters);
    s.max_reuse = static_cast<uint64_t>(z.stage3_max_reuse_distance);
    if (in.model.arch) s.mean_module = s.layer / fetched_modules_per_block(*in.model.arch, in.moe.ep(), z.stage3_param_persistence_threshold);
    s.Tr = c.Tr;
    s.Tn = c.Tn;
    s.sub = std::min<uint64_t>(static_cast<uint64_t>(z.sub_group_size), c.Tn);
    s.grad_accum = t.grad_accum;
    c.facts = stack_facts(in.stack);
    const KernelChoice kc = step_kernel(in, c.facts);
    s.kernel = kc.kernel;
    c.kernel_why = kc.why;
    s.bf16_optimizer = selects_bf16_optimizer(in);
}

FullContext make_context(const EstimateInput& in, Estimate& out) {
    FullContext c(in);
    c.proc = process_memory(in);
    set_layout_and_widths(c);
    set_param_counts(c, out);
    set_term_sizes(c);
    set_optimizer_state(c);
    set_host_sizes(c);
    set_partial_offload(c);
    set_zeropp_sizes(c);
    return c;
}

// Sizes substituted into every term's --explain line.
std::string sizes_text(const FullContext& c) {
    const auto& s = c.sz;
    std::string out = "Ψ_t=" + num(double(s.Tr)) + ", N_d=" + num(double(s.N)) + ", Tn=" + num(double(s.Tn)) +
           ", sub=" + num(double(s.sub)) + ", reduce_bucket_size=" + num(double(s.bucket)) + ", L=" +
           num(double(s.L)) + ", layer=" + num(double(s.layer)) + ", b_m=" + num(double(s.bm)) + ", b_a=" +
           num(double(s.ba)) + ", b_c=" + num(double(s.bc)) + ", T=" +
           num(double(terms::step_temporary_bytes_per_element(s.kernel))) + " B/element" +
           (s.hpz > 1 || s.qwz || s.qgz || s.mics > 0
                ? ", g=" + num(double(s.g)) + ", prefetch=" + num(double(s.prefetch)) + ", hpz=" + num(double(s.hpz)) +
                      ", mics_shard_size=" + num(double(s.mics)) + ", qgZ groups=" + num(double(s.qgz_groups))
                : std::string());
    if (s.stage == 3 && !s.memory_efficient_linear)
        out += ", linear_weights=" + num(double(s.linear_weights)) + ", V·h=" + num(double(s.lm_head_matrix));
    return out;
}

// A term's source as --explain prints it: DeepSpeed files carry the version.
std::string term_source(const terms::Term& t) {
    const std::string src = t.source;
    if (src.rfind("runtime/", 0) != 0) return src;
    return "DeepSpeed v0.19.6 deepspeed/" + src;
}

// Sums terms of one phase, writing one --explain line per non-zero term.
uint64_t sum_terms(const std::vector<terms::Term>& list, const char* phase, const FullContext& c, const Explainer& ex) {
    uint64_t total = 0;
    std::string subst;
    for (const auto& t : list) {
        total += t.bytes;
        if (ex.on && t.bytes > 0) {
            if (subst.empty()) subst = sizes_text(c);
            ex.term((std::string("temporary_buffers (") + phase + "): " + t.name).c_str(), t.formula, subst, t.bytes,
                    term_source(t).c_str());
        }
    }
    return total;
}

// --- steady model states (after the first optimizer step) ------------------
// The 16-bit parameters a rank holds in steady state (ZeRO-3: persistent
// ones, its partition and any hpZ secondary partition), explained.
uint64_t steady_parameters(const FullContext& c, const Explainer& ex) {
    const auto& in = c.in;
    const auto& z = in.zero;
    const int s = z.stage;
    auto n2s = [&](uint64_t v) { return ex.on ? num(double(v)) : std::string(); };
    const bool off_par = z.offload_param != OffloadDevice::none;
    GpuMemory st;
    if (s == 3) {
        uint64_t persist = 0;
        if (in.model.arch)
            persist = ceil_div(persistent_numel(*in.model.arch, c.tp, z.stage3_param_persistence_threshold,
                                                z.stage3_model_persistence_threshold), c.pp);
        const uint64_t part = off_par ? 0 : c.bm * c.Tn + to_bytes(c.frozen_bytes / double(c.N));
        st.parameters = c.bm * persist + part;
        if (ex.on) ex.term("parameters", off_par ? "b_m · persistent (partitions offloaded)"
                                       : "b_m · (ceil(Ψ_t/N_d) + persistent) + frozen bytes / N_d",
                "b_m=" + n2s(c.bm) + ", Ψ_t=" + n2s(c.Tr) + ", N_d=" + n2s(c.N) + ", persistent=" + n2s(persist) +
                    " elements (<= stage3_param_persistence_threshold), frozen=" + n2s(c.Fr),
                st.parameters, "DeepSpeed v0.19.6 stage3.py _create_fp16_partitions_with_defragmentation, "
                               "parameter_offload.py mark_persistent_parameters");
        const terms::Term sec = terms::hpz_secondary_partition(c.sz, false);
        st.parameters += sec.bytes;
        if (ex.on && sec.bytes > 0)
            ex.term(("parameters: " + std::string(sec.name)).c_str(), sec.formula,
                    "b_m=" + n2s(c.bm) + ", numel=" + n2s(c.sz.hpz_numel_train) + ", zero_hpz_partition_size=" +
                        n2s(c.sz.hpz), sec.bytes, term_source(sec).c_str());
    } else {
        st.parameters = c.bm * c.Tr + to_bytes(c.frozen_bytes);
        if (ex.on) ex.term("parameters", "b_m · Ψ_t + frozen bytes (full copy on every data-parallel rank)",
                "b_m=" + n2s(c.bm) + ", Ψ_t=" + n2s(c.Tr) + ", frozen=" + n2s(c.Fr) + " params", st.parameters,
                "DeepSpeed v0.19.6 engine.py _configure_distributed_model; stage_1_and_2.py __init__ (bit16_groups_flat)");
    }
    if (ex.on && in.moe.ep() > 1) {
        const ExpertSplit es = expert_split(in);
        ex.term("parameters: routed experts held (expert parallelism)",
                "b_m · routed experts / E_p (num_experts / E_p experts per MoE block); ZeRO partition per rank "
                "ceil(non-expert / N_d) + ceil(experts held / (N_d / E_p)) elements",
                "b_m=" + n2s(c.bm) + ", routed experts held=" + n2s(es.expert_rank) + ", non-expert=" +
                    n2s(es.non_expert) + ", E_p=" + n2s(uint64_t(in.moe.ep())) + ", N_d=" + n2s(c.N) +
                    ", expert-data-parallel group=" + n2s(es.expert_dp) + ", partition=" + n2s(es.partition),
                c.bm * es.expert_rank,
                "DeepSpeed v0.19.6 deepspeed/moe/layer.py MoE.__init__ (num_local_experts), utils/groups.py "
                "_create_expert_and_data_parallel, runtime/zero/stage_1_and_2.py (real_dp_process_group)");
    }
    return st.parameters;
}

// The gradient bytes a rank holds in steady state, by stage, explained.
uint64_t steady_gradients(const FullContext& c, const Explainer& ex) {
    const auto& in = c.in;
    const auto& z = in.zero;
    const int s = z.stage;
    auto n2s = [&](uint64_t v) { return ex.on ? num(double(v)) : std::string(); };
    const bool off_opt = c.sz.offload_optimizer;
    GpuMemory st;
    if (s == 0 && !c.sz.bf16_optimizer) {
        st.gradients = c.bm * c.Tr;
        if (ex.on) ex.term("gradients", "b_m · Ψ_t (autograd param.grad, full)", "b_m=" + n2s(c.bm) + ", Ψ_t=" + n2s(c.Tr),
                           st.gradients, "autograd; FP16_Optimizer sets p.grad = None in step");
    } else if (s <= 2) {
        terms::Term gr = terms::zero12_backward_gradients(c.sz);
        const terms::Term hp = terms::bf16_optimizer_fp32_grad_buffer(c.sz);
        st.gradients = gr.bytes + hp.bytes;
        if (ex.on) ex.term(("gradients (backward): " + std::string(gr.name)).c_str(), gr.formula,
                           "b_m=" + n2s(c.bm) + ", b_a=" + n2s(c.ba) + ", Ψ_t=" + n2s(c.Tr) + ", N_d=" + n2s(c.N),
                           gr.bytes, term_source(gr).c_str());
        if (ex.on && hp.bytes > 0) ex.term(("gradients: " + std::string(hp.name)).c_str(), hp.formula, "Ψ_t=" + n2s(c.Tr), hp.bytes, term_source(hp).c_str());
    } else if (off_opt && c.sz.partial_gpu_numel > 0) {
        st.gradients = 4 * c.sz.partial_gpu_numel;
        if (ex.on) ex.term("gradients", "4 · GPU elements (fp32 gradients of the sub-groups partial offload keeps on "
                                        "the GPU; grad_partitions_flat_buffer on the host)",
                           "GPU elements=" + n2s(c.sz.partial_gpu_numel) + " of Tn=" + n2s(c.Tn) + ", ratio " +
                               num(in.zero.offload_optimizer_ratio),
                           st.gradients, "DeepSpeed v0.19.6 stage3.py initialize_optimizer_states "
                                         "(subgroup_gradient_buffer.to(subgroup_to_device[i]))");
    } else {
        st.gradients = off_opt ? 0 : c.ba * c.Tn;
        if (ex.on) ex.term("gradients", off_opt ? "0 (grad_partitions_flat_buffer on the host)"
                                       : "b_a · ceil(Ψ_t/N_d) (grad_partitions_flat_buffer)",
                "b_a=" + n2s(c.ba) + ", Ψ_t=" + n2s(c.Tr) + ", N_d=" + n2s(c.N), st.gradients,
                "DeepSpeed v0.19.6 stage3.py _setup_for_real_optimizer (grad_partitions_flat_buffer)");
    }
    return st.gradients;
}

GpuMemory steady_model_states(const FullContext& c, const Explainer& ex) {
    const auto& in = c.in;
    const auto& z = in.zero;
    const int s = z.stage;
    const bool off_opt = c.sz.offload_optimizer;
    auto n2s = [&](uint64_t v) { return ex.on ? num(double(v)) : std::string(); };
    GpuMemory st;
    st.parameters = steady_parameters(c, ex);
    st.gradients = steady_gradients(c, ex);
    // BF16_Optimizer partitions the fp32 master and the optimizer over N_d at stage 0 too.
    const uint64_t opt_numel = s == 0 && !c.sz.bf16_optimizer ? c.Tr : c.Tn;
    const uint64_t gpu_part = off_opt ? c.sz.partial_gpu_numel : 0;  // partial offload (set_partial_offload)
    if (!off_opt) {
        st.master_weights = (s == 0 && !c.sz.half) ? 0 : 4 * opt_numel;
        st.momentum = c.opt_state.first;
        st.variance = c.opt_state.second;
    } else if (gpu_part > 0) {  // fp32 master + torch AdamW's exp_avg, exp_avg_sq on the GPU sub-groups
        st.master_weights = st.momentum = st.variance = 4 * gpu_part;
    }
    st.optimizer_states = st.master_weights + st.momentum + st.variance;
    if (ex.on && gpu_part > 0)
        ex.term("optimizer_states", "(4 master + 4 exp_avg + 4 exp_avg_sq) · GPU elements (partial offload: the first "
                                    "int((1 - ratio) · S) of S sub-groups stay on the GPU; the rest on the host)",
                "GPU elements=" + n2s(gpu_part) + " of Tn=" + n2s(c.Tn) + ", sub=" + n2s(c.sz.sub) + ", ratio " +
                    num(in.zero.offload_optimizer_ratio),
                st.optimizer_states, "DeepSpeed v0.19.6 stage3.py _create_fp32_partitions (subgroup_to_device), "
                                     "_optimizer_step (backup_optimizer, torch.optim.AdamW)");
    else if (ex.on) ex.term("optimizer_states",
            off_opt ? "0 (fp32 master and optimizer states offloaded)"
                    : (s == 0 && !c.sz.bf16_optimizer ? "4Ψ_t master + optimizer bytes · Ψ_t"
                                                      : "(4 + optimizer bytes) · ceil(Ψ_t/N_d)"),
            "Ψ_t=" + n2s(c.Tr) + ", N_d=" + n2s(c.N) + ", " + to_string(in.train.optimizer) + " states " +
                n2s(c.opt_state.total()) + " B on " + c.opt_state_why + "; allocated at the first step",
            st.optimizer_states, c.src);
    return st;
}

// --- activations (Korthikanti et al. 2022 with GQA and the real MLP width) ---
struct Activations {
    uint64_t forward = 0;   // stored at the end of forward
    uint64_t backward = 0;  // stored + max(io, one layer's recompute)
    uint64_t host = 0;      // per rank, cpu_checkpointing
};

// MoE blocks (zeromem/moe.h): the router and routed-token terms, per GPU.
// Stored for every MoE block of the rank unless full checkpointing
// recomputes them with one layer; the all-to-all buffers are live while one
// block runs (forward and backward). Dense models: no change.
void add_moe_activations(const FullContext& c, const Explainer& ex, uint64_t layers, uint64_t in_flight, double scale,
                         double stored, double recompute, double io, Activations& r) {
    const auto& in = c.in;
    const auto& a = *in.model.arch;
    const auto& t = in.train;
    const std::vector<MoeTerm> list = moe_activation_terms(a, in.moe, t.micro_batch, t.seq_len, c.bm);
    if (list.empty()) return;
    const bool full = t.checkpointing == Checkpointing::full;
    // MoE blocks on this pipeline stage, at most the stage's layers.
    const uint64_t moe_layers = std::min(layers, ceil_div(static_cast<uint64_t>(a.num_moe_layers), c.pp));
    uint64_t per_block = 0, transient = 0;
    double rank_bytes = 0;  // the same sum in double: refuse what 64-bit bytes cannot hold
    for (const MoeTerm& m : list) {
        (m.transient ? transient : per_block) += m.bytes;
        rank_bytes += double(m.bytes) * (m.transient ? 1.0 : double(moe_layers) * double(in_flight));
    }
    if (!(rank_bytes < 4611686018427387904.0))  // 2^62
        throw InputError("--moe-capacity-factor: the MoE activations of one rank overflow 64-bit bytes; "
                         "give a smaller factor");
    const uint64_t moe_stored = full ? 0 : moe_layers * in_flight * per_block;
    const uint64_t moe_recompute = full ? per_block : 0;
    r.forward = to_bytes(scale * (stored + io)) + moe_stored + transient;
    r.backward = to_bytes(scale * stored) + moe_stored +
                 std::max(to_bytes(scale * recompute) + moe_recompute + transient, to_bytes(scale * io));
    if (!ex.on) return;
    for (const MoeTerm& m : list) {
        const uint64_t blocks = m.transient ? 1 : (full ? 1 : moe_layers * in_flight);
        const std::string where = m.transient ? " (one block at a time)"
                                  : full      ? " (one block, recomputed under full checkpointing)"
                                              : " x " + std::to_string(blocks) + " MoE blocks";
        ex.term(("activations: " + m.name).c_str(), m.formula + where, m.substituted, m.bytes * blocks, m.source.c_str());
    }
}

// The dropout masks a layer stores, as --explain names them.
std::string dropout_masks_named(const ModelArch& a) {
    std::string out;
    auto add = [&](double p, const char* name) {
        if (p > 0.0) out += (out.empty() ? "" : ", ") + std::string(name) + " p=" + num(p);
    };
    add(a.embedding_dropout, "embedding dropout mask");
    add(a.attention_dropout, "attention dropout mask");
    add(a.attention_residual_dropout, "attention residual dropout mask");
    add(a.mlp_residual_dropout, "MLP residual dropout mask");
    return out.empty() ? ", no dropout (all probabilities 0: no masks)" : ", " + out;
}

Activations activations(const FullContext& c, const Explainer& ex) {
    const auto& in = c.in;
    const auto& t = in.train;
    auto n2s = [&](uint64_t v) { return ex.on ? num(double(v)) : std::string(); };
    Activations r;
    if (in.model.arch) {
        const auto& a = *in.model.arch;
        const int64_t sq = t.seq_len, b = t.micro_batch, h = a.hidden_size;
        const int64_t ti = in.cluster.tp;
        const bool sp = t.sequence_parallel && ti > 1;
        const double scale = t.dtype == Dtype::fp32 ? 2.0 : 1.0;  // fp32 activations: twice the 16-bit bytes
        const uint64_t layers = ceil_div(static_cast<uint64_t>(a.num_layers), c.pp);
        // 1F1B: the first pipeline stage holds up to pp micro batches in flight
        // (Korthikanti Sec. 4.2.3, Eq. 5).
        const uint64_t in_flight = c.pp > 1 ? std::min<uint64_t>(c.pp, static_cast<uint64_t>(t.grad_accum)) : 1;
        const uint64_t full_layer = layer_activation_bytes(a, sq, b, ti, Checkpointing::none, t.flash_attention, sp);
        uint64_t per_layer = layer_activation_bytes(a, sq, b, ti, t.checkpointing, t.flash_attention, sp);
        const double sbh = double(sq) * double(b) * double(h);
        if (t.checkpointing == Checkpointing::full && t.ds_checkpointing_api && t.partition_activations && ti > 1 && !sp)
            per_layer = ceil_div(per_layer, static_cast<uint64_t>(ti));
        uint64_t stored = layers * in_flight * per_layer;
        const uint64_t recompute = t.checkpointing == Checkpointing::full ? full_layer : 0;
        if (t.checkpointing == Checkpointing::full && t.ds_checkpointing_api && t.cpu_checkpointing) {
            r.host = to_bytes(scale * double(stored));
            stored = 0;
        }
        // Embedding output and the loss: sbh (embedding dropout mask, where
        // the model has embedding dropout) on every first stage; with pp = 1
        // also the output layer's input and the logits: 16-bit logits, their
        // fp32 upcast and the fp32 log-softmax kept for the cross-entropy
        // backward (HF models upcast logits).
        const double embed_mask = a.embedding_dropout > 0.0 ? sbh : 0.0;
        double io = embed_mask;
        if (c.pp == 1) io += 4.0 * sbh + double(sq) * double(b) * double(a.vocab_size) * double(c.bm + 8) / double(ti);
        r.forward = to_bytes(scale * (double(stored) + io));
        // Backward: autograd frees the loss's saved tensors (logits, their
        // fp32 copies, the final norm's input) as their nodes run, which is
        // before the last layer's checkpoint is recomputed (PyTorch
        // torch/csrc/autograd/engine.cpp evaluate_function ->
        // Node::release_variables without retain_graph;
        // torch/utils/checkpoint.py recomputes inside the layer's backward).
        // So the peak is stored + the larger of io and one recomputed layer.
        r.backward = to_bytes(scale * (double(stored) + std::max(double(recompute), io)));
        add_moe_activations(c, ex, layers, in_flight, scale, double(stored), double(recompute), io, r);
        if (ex.on) ex.term("activations",
                std::string("forward: layers · in-flight micro batches · per_layer + io; backward: the same stored part + "
                            "max(io, one recomputed layer); io = ") + (embed_mask > 0 ? "sbh (embedding dropout mask) + " : "") +
                    "4sbh + sbV(b_m + 8)/t; per_layer by Korthikanti with GQA, the real MLP width and a 1-byte mask "
                    "per element only where the model's dropout p > 0",
                "s=" + n2s(uint64_t(sq)) + ", b=" + n2s(uint64_t(b)) + ", h=" + n2s(uint64_t(h)) + ", a=" +
                    n2s(uint64_t(a.num_heads)) + ", kv=" + n2s(uint64_t(a.num_kv_heads)) + ", f=" +
                    n2s(uint64_t(active_ffn_width(a))) + ", layers=" + n2s(layers) + ", in flight=" + n2s(in_flight) +
                    ", per_layer=" + n2s(per_layer) + " B, V=" + n2s(uint64_t(a.vocab_size)) + ", t=" + n2s(c.tp) +
                    ", checkpointing " + to_string(t.checkpointing) + (t.flash_attention ? ", flash attention" : ", eager attention") +
                    dropout_masks_named(a) +
                    (scale != 1.0 ? ", x2 for fp32" : ""),
                r.backward, kSrcKorthikanti);
    } else {
        ex.note("activations not estimated: no architecture (--params, or a module tree without one); give --model "
                "or --hf-config for the Korthikanti et al. activation formula.");
    }
    if (t.ds_checkpointing_api && t.partition_activations && in.cluster.tp == 1)
        ex.note("activation_checkpointing.partition_activations splits checkpoints across tensor-parallel ranks only; "
                "with tp = 1 it saves nothing.");
    if ((t.partition_activations || t.cpu_checkpointing) && !t.ds_checkpointing_api)
        ex.note("the DeepSpeed config's activation_checkpointing keys take effect only when the model uses "
                "deepspeed.checkpointing (Megatron-DeepSpeed); Hugging Face models use torch checkpointing, so they "
                "are ignored here (--ds-checkpointing to apply them).");
    return r;
}

// --- GPU temporaries per phase, as lists of named terms ------------------------
std::vector<terms::Term> forward_temporaries(const terms::Sizes& s) {
    if (s.stage == 0) return {};
    if (s.stage <= 2) return {terms::temp_grad_buffer_for_gpu_offload(s)};
    return {terms::zero3_ipg_bucket(s), terms::zero3_gathered_params(s, false), terms::zero3_allgather_cat_copy(s),
            terms::qwz_quantized_gather(s, false), terms::mics_hierarchical_gather_clone(s),
            terms::zero3_retained_linear_weights(s, false)};
}

std::vector<terms::Term> backward_temporaries(const terms::Sizes& s) {
    if (s.bf16_optimizer) return {terms::engine_allreduce_bucket_flatten(s), terms::bf16_optimizer_allreduce_cast(s)};
    if (s.stage == 0) return {terms::engine_allreduce_bucket_flatten(s)};
    if (s.stage <= 2)
        return {terms::zero12_ipg_bucket(s), terms::zero12_allreduce_bucket_flatten(s),
                terms::zero2_autograd_grad_before_bucket_copy(s), terms::zero2_accumulated_partition(s),
                terms::temp_grad_buffer_for_gpu_offload(s), terms::zero12_offload_boundary_transient(s)};
    return {terms::zero3_ipg_bucket(s), terms::zero3_gathered_params(s, true), terms::zero3_allgather_cat_copy(s),
            terms::zero3_module_grad(s), terms::zero3_reduce_scatter_cat(s), terms::qwz_quantized_gather(s, true),
            terms::qgz_all_to_all_buffers(s), terms::mics_hierarchical_gather_clone(s),
            terms::zero3_retained_linear_weights(s, true)};
}

// Buffers live from init to the end of training: the ZeRO-3 IPG bucket and
// the ZeRO-1/2 offload staging buffer.
std::vector<terms::Term> persistent_temporaries(const terms::Sizes& s) {
    if (s.stage == 3) return {terms::zero3_ipg_bucket(s)};
    if (s.stage >= 1) return {terms::temp_grad_buffer_for_gpu_offload(s)};
    return {};
}

uint64_t sum_bytes(const std::vector<terms::Term>& list) {
    uint64_t b = 0;
    for (const auto& t : list) b += t.bytes;
    return b;
}

// The phase's readings: allocated (DeepSpeed's tensors and the cuBLAS
// workspaces the caching allocator holds), reserved (+ the fragmentation
// allowance) and the device total nvidia-smi shows (+ the CUDA context, NCCL
// buffers and anything else outside the allocator).
void finish_gpu(GpuMemory& m, const FullContext& c) {
    const EstimateInput& in = c.in;
    m.cublas_workspaces = c.proc.cublas_workspaces;
    m.cuda_context = c.proc.cuda_context;
    m.nccl_buffers = c.proc.nccl_buffers;
    m.allocated = m.parameters + m.gradients + m.optimizer_states + m.activations + m.temporary_buffers +
                  c.proc.inside_allocator();
    m.fragmentation = in.residual.fragmentation_bytes
                          ? *in.residual.fragmentation_bytes
                          : to_bytes(in.residual.fragmentation_fraction * double(m.allocated));
    m.reserved = m.allocated + m.fragmentation;
    m.total = m.reserved + c.proc.outside_allocator();
}

// The optimizer step: model states with m and v, plus the largest of the
// step's moments (terms::StepMoments), each with the gradients alive then.
GpuMemory optimizer_step_gpu(const FullContext& c, const GpuMemory& st, const Explainer& ex) {
    const terms::Sizes& s = c.sz;
    terms::StepMoments mo;
    uint64_t grads_flatten = 0, grads_optimizer = 0;  // 16-bit/accumulation gradients alive in each moment
    if (s.bf16_optimizer) {
        mo = terms::bf16_optimizer_step(s);
        grads_flatten = grads_optimizer = st.gradients;
    } else if (s.stage == 0) {
        mo = terms::zero0_step(s);
        grads_flatten = st.gradients;
        grads_optimizer = mo.gradients_live_at_optimizer ? st.gradients : 0;
    } else if (s.stage <= 2) {
        mo = terms::zero12_step(s);
        grads_flatten = terms::grads_in_partition(s).bytes;
        grads_optimizer = 0;
    } else {
        mo = terms::zero3_step(s);
        grads_flatten = grads_optimizer = st.gradients;  // grad_partitions_flat_buffer stays
    }
    const uint64_t persist = sum_bytes(persistent_temporaries(s));
    struct Moment { const terms::Term* term; uint64_t grads; };
    const Moment moments[] = {{&mo.flatten, grads_flatten}, {&mo.optimizer, grads_optimizer},
                              {&mo.overflow_check, grads_flatten}};
    GpuMemory best;
    const terms::Term* chosen = nullptr;
    for (const auto& m : moments) {
        GpuMemory g = st;
        g.activations = 0;
        g.gradients = m.grads;
        g.temporary_buffers = persist + m.term->bytes;
        finish_gpu(g, c);
        if (!chosen || g.total > best.total) {
            best = g;
            chosen = m.term;
        }
    }
    if (ex.on) {
        sum_terms(persistent_temporaries(s), "optimizer_step", c, ex);
        const std::string subst = sizes_text(c);
        for (const auto& m : moments)
            if (m.term->bytes > 0)
                ex.term((std::string("temporary_buffers (optimizer_step moment") +
                         (m.term == chosen ? ", the peak): " : "): ") + m.term->name).c_str(),
                        m.term->formula, subst + ", gradients alive " + num(double(m.grads)) + " B", m.term->bytes,
                        term_source(*m.term).c_str());
    }
    return best;
}

// The load phase: deepspeed.initialize has built the engine and the ZeRO
// optimizer; Adam's m and v do not exist yet.
// The whole 16-bit module before DeepSpeed partitions or flattens it:
// trainable parameters in the model dtype plus the frozen storage.
uint64_t module_bytes(const FullContext& c) { return c.bm * c.Tr + to_bytes(c.frozen_bytes); }

// ZeRO-1/2 (stage_1_and_2.py __init__) flattens each parameter group on the
// GPU when the free memory holds the flat copy (DeepSpeed >= 0.18.7, PR
// #7828), else on the CPU. Unknown capacity: the GPU path.
bool zero12_flattens_on_gpu(const FullContext& c) {
    if (!c.facts.ds_0_18_7) return false;
    if (!c.in.cluster.gpu_memory) return true;
    const uint64_t used = c.proc.total() + module_bytes(c);
    return *c.in.cluster.gpu_memory >= used && *c.in.cluster.gpu_memory - used >= c.bm * c.Tr;
}

// The load path in effect: the given one, else one host copy per rank
// (from_pretrained without a device_map, under every launcher).
LoadPath effective_load_path(const EstimateInput& in) { return in.residual.load_path.value_or(LoadPath::host_copy); }

// Whether single-file loading adds the 16-bit state dict: only before
// transformers ~4.50, whose from_pretrained loads a non-sharded file's whole
// state dict before building the model; from #36033 (~4.50) the model is built
// on the meta device and filled one parameter at a time (transformers
// modeling_utils.py _load_pretrained_model).
bool single_file_state_dict(const EstimateInput& in) {
    return effective_load_path(in) == LoadPath::single_file &&
           compare_versions(in.stack.transformers, "4.50", "--transformers-version") < 0;
}

// device_map without zero.Init: from_pretrained materialises every
// parameter on the GPU in the load dtype before deepspeed.initialize casts
// the module (engine.py _configure_distributed_model, one parameter at a
// time): load bytes · Ψ on the GPU, more than the 16-bit module when the
// load dtype is fp32. Zero when the path does not apply.
GpuMemory device_map_load_gpu(const FullContext& c, const Explainer& ex) {
    GpuMemory m;
    const bool zero_init = c.in.zero.stage == 3 && c.in.zero.zero_init;
    if (zero_init || effective_load_path(c.in) != LoadPath::device_map) return m;
    const uint64_t lb = static_cast<uint64_t>(dtype_bytes(c.in.residual.load_dtype));
    m.parameters = lb * c.Pr;
    finish_gpu(m, c);
    if (ex.on)
        ex.term("load: the model in the load dtype on the GPU (device-map, before DeepSpeed casts it)",
                "load bytes · Ψ", "Ψ=" + num(double(c.Pr)) + ", load bytes=" + num(double(lb)), m.parameters,
                "transformers modeling_utils.py from_pretrained (device_map); DeepSpeed engine.py "
                "_configure_distributed_model");
    return m;
}

// The load phase: deepspeed.initialize has built the engine and the ZeRO
// optimizer; Adam's m and v do not exist yet. Its peak is the largest of its
// moments: the module moved whole to the GPU (engine.py
// _configure_distributed_model, module.to(device)) before ZeRO-3 without
// zero.Init partitions it or ZeRO-1/2 flattens it (two 16-bit copies on the
// GPU when the flat copy is made there), then the optimizer's buffers.
GpuMemory load_gpu(const FullContext& c, const GpuMemory& st, const Explainer& ex) {
    const terms::Sizes& s = c.sz;
    const auto& z = c.in.zero;
    GpuMemory ld;
    ld.master_weights = st.master_weights;
    ld.optimizer_states = ld.master_weights;
    GpuMemory whole;  // the module before partitioning / flattening
    if (s.stage == 3) {
        // hpZ: zero.Init gives every parameter, persistent ones too, a secondary partition.
        ld.parameters = st.parameters - terms::hpz_secondary_partition(s, false).bytes +
                        terms::hpz_secondary_partition(s, true).bytes;
        if (!z.zero_init) whole.parameters = module_bytes(c);
        // initialize_optimizer_states frees its fp32 gradient_buffer before
        // the IPG bucket and grad_partitions_flat_buffer are allocated: the
        // load peak is the larger of the two moments.
        const terms::Term init_buf = terms::zero3_init_gradient_buffer(s);
        const uint64_t after = st.gradients + sum_bytes(persistent_temporaries(s));
        if (init_buf.bytes > after) {
            ld.temporary_buffers = init_buf.bytes;
            sum_terms({init_buf}, "load", c, ex);
        } else {
            ld.gradients = st.gradients;
            ld.temporary_buffers = sum_terms(persistent_temporaries(s), "load", c, ex);
        }
    } else {
        ld.parameters = st.parameters;
        ld.gradients = terms::bf16_optimizer_fp32_grad_buffer(s).bytes;
        ld.temporary_buffers = sum_terms(persistent_temporaries(s), "load", c, ex);
        // BF16_Optimizer flattens where the params are, the GPU (bf16_optimizer.py _setup_for_real_optimizer).
        if (s.bf16_optimizer || (s.stage >= 1 && zero12_flattens_on_gpu(c))) whole.parameters = module_bytes(c) + c.bm * c.Tr;
    }
    finish_gpu(ld, c);
    if (whole.parameters > 0) {
        finish_gpu(whole, c);
        if (ex.on)
            ex.term(s.stage == 3 ? "load: whole 16-bit module on every GPU before partitioning (no zero.Init)"
                                 : "load: 16-bit module + its flat copy while flattening on the GPU",
                    s.stage == 3 ? "b_m · Ψ_t + frozen" : "2 · b_m · Ψ_t + frozen",
                    "Ψ_t=" + num(double(c.Tr)) + ", b_m=" + num(double(c.bm)), whole.parameters,
                    s.stage == 3 ? "DeepSpeed v0.19.6 deepspeed/runtime/engine.py _configure_distributed_model (module.to(device))"
                                 : "DeepSpeed v0.19.6 deepspeed/runtime/zero/stage_1_and_2.py __init__ (flatten on the accelerator, >= 0.18.7)");
        // On a tie the earlier moment (the module before it is flattened or
        // partitioned) is the one reported.
        if (whole.total >= ld.total) ld = whole;
    }
    const GpuMemory direct = device_map_load_gpu(c, ex);
    return direct.total > ld.total ? direct : ld;
}

// Gradient storage before the first backward: none in stages 0-2 (autograd
// creates param.grad in backward; grads_in_partition is lazy) except
// BF16_Optimizer's fp32 buffer; ZeRO-3's grad_partitions_flat_buffer from init.
uint64_t gradients_before_backward(const FullContext& c, const GpuMemory& st) {
    if (c.sz.stage == 3) return st.gradients;
    return terms::bf16_optimizer_fp32_grad_buffer(c.sz).bytes;
}

// Gradients at checkpoint save, after the step: ZeRO-0 and ZeRO-1/2 have
// freed them (FP16_Optimizer p.grad = None; stage_1_and_2.py
// free_grad_in_param_list); BF16_Optimizer's fp32 buffer and ZeRO-3's flat
// buffer stay.
uint64_t gradients_after_step(const FullContext& c, const GpuMemory& st) {
    if (c.sz.stage == 3) return st.gradients;
    return terms::bf16_optimizer_fp32_grad_buffer(c.sz).bytes;
}

// --- generation during training (--eval-generate) -------------------------------
// model.generate between optimizer steps (Seq2SeqTrainer predict_with_generate):
// the training states stay resident as after a step (parameters, the fp32
// master, m and v; gradients as gradients_after_step), training activations
// are freed, and each decoding step is a forward, so ZeRO-3 gathers modules
// as in the training forward (forward_temporaries). The KV cache and the
// logits are counted as this phase's activations, at the larger of the
// prefill and the last decoding step (generation.h generation_memory).
GenerationShape generation_shape(const EstimateInput& in) {
    const GenerationSettings& g = *in.generation;
    GenerationShape s;
    s.num_beams = g.num_beams;
    s.batch = g.eval_batch;
    s.prompt_len = g.prompt_len.value_or(in.train.seq_len);
    s.max_new_tokens = g.max_new_tokens;
    s.tp = in.cluster.tp;
    return s;
}

void explain_generation(const FullContext& c, const GenerationShape& sh, const GenerationMemory& gm,
                        const Explainer& ex) {
    const ModelArch& a = *c.in.model.arch;
    const KvCache kv = kv_cache(a, sh, c.bm);
    const std::string shape = "beams=" + num(double(sh.num_beams)) + ", batch=" + num(double(sh.batch)) +
                              ", prompt=" + num(double(sh.prompt_len)) + ", new tokens=" +
                              num(double(sh.max_new_tokens)) + ", b_m=" + num(double(c.bm));
    const char* moment = gm.prefill_is_peak ? "activations (generation, prefill moment): "
                                            : "activations (generation, last decoding step): ";
    ex.term((moment + std::string(gm.kv_cache.name)).c_str(), gm.kv_cache.formula,
            shape + ", layers=" + num(double(kv.cached_layers)) + ", 2·KV heads·head_dim=" +
                num(double(kv.elements_per_token_layer)) + " (" + kv.layout + ")" +
                (gm.prefill_is_peak ? "; at the prefill only the prompt: " + num(double(gm.kv_at_prefill)) + " B" : ""),
            gm.prefill_is_peak ? gm.kv_at_prefill : gm.kv_cache.bytes, gm.kv_cache.source);
    ex.term((moment + std::string(gm.cat_copy.name)).c_str(), gm.cat_copy.formula,
            shape + ", layers=" + num(double(kv.cached_layers)),
            gm.prefill_is_peak ? gm.cat_copy_at_prefill : gm.cat_copy.bytes, gm.cat_copy.source);
    ex.term((moment + std::string(gm.step_logits.name)).c_str(), gm.step_logits.formula,
            shape + ", V=" + num(double(a.vocab_size)), gm.step_logits.bytes, gm.step_logits.source);
    if (gm.prefill_logits.bytes > 0)
        ex.term((std::string(gm.prefill_is_peak ? moment : "activations (generation, prefill moment, not the peak): ") +
                 gm.prefill_logits.name).c_str(),
                gm.prefill_logits.formula, shape + ", V=" + num(double(a.vocab_size)) + ", transformers " + c.in.stack.transformers,
                gm.prefill_logits.bytes, gm.prefill_logits.source);
}

GpuMemory generation_gpu(const FullContext& c, const GpuMemory& st, const Explainer& ex) {
    if (!c.in.model.arch)
        throw InputError("--eval-generate: needs an architecture for the KV cache (--model or --hf-config)");
    if (c.pp > 1) throw InputError("--eval-generate: generation with pipeline parallelism (--pp > 1) is not modelled");
    const GenerationShape sh = generation_shape(c.in);
    const bool last_only = compare_versions(c.in.stack.transformers, "4.45", "--transformers-version") >= 0;
    const GenerationMemory gm = generation_memory(*c.in.model.arch, sh, c.bm, last_only);
    GpuMemory m = st;
    m.gradients = gradients_after_step(c, st);
    m.activations = gm.peak;
    m.temporary_buffers = sum_terms(forward_temporaries(c.sz), "generation", c, ex);
    if (ex.on) explain_generation(c, sh, gm, ex);
    finish_gpu(m, c);
    return m;
}

// --- host RAM and NVMe (per rank, then per node) --------------------------------
struct HostFigures {
    uint64_t steady = 0;         // per node, training (without cpu_checkpointing activations)
    uint64_t first_forward = 0;  // per node, first forward: no lazy states yet
    uint64_t first_backward = 0; // per node, first backward: + ZeRO-1/2 accumulation buffers
    uint64_t pinned_steady = 0;  // per node
    uint64_t pinned_first = 0;   // per node, before the first step
    uint64_t load = 0;           // per node, load phase
    uint64_t pinned_init = 0;    // per node, load phase
    uint64_t nvme = 0;           // per node
    uint64_t save_extra = 0;     // per node, checkpoint_save on top of steady
    uint64_t save_rank0 = 0;     // of save_extra, what only global rank 0 holds (its node's)
};

// NVMe bytes per node: the optimizer swapper writes fp32 params, optimizer
// states and fp32 gradients; parameter files are written at zero.Init.
uint64_t nvme_bytes(const FullContext& c) {
    const auto& z = c.in.zero;
    uint64_t per_rank = 0;
    if (z.offload_optimizer == OffloadDevice::nvme) per_rank += (4 + 4) * c.Tn + c.opt_state.total();
    if (z.offload_param == OffloadDevice::nvme) per_rank += c.bm * ceil_div(c.Pr, c.N);
    return per_rank * c.g;
}


// Host bytes per rank of the model at load without zero.Init, by load path
// (transformers modeling_utils.py from_pretrained): the model in the load dtype
// (plus frozen storage), with single_file also the 16-bit state dict (2 B
// per parameter of a single non-sharded checkpoint), with
// device_map only one module's parameters at a time (L · load bytes, an upper
// bound for one parameter; safetensors shards are file-backed page cache).
uint64_t host_model_per_rank(const FullContext& c, uint64_t lb, double frozen_load) {
    const uint64_t model = to_bytes(double(c.Tr) * double(lb) + frozen_load);
    switch (effective_load_path(c.in)) {
        case LoadPath::single_file: return single_file_state_dict(c.in) ? model + 2 * c.Pr : model;
        case LoadPath::host_copy: return model;
        case LoadPath::device_map: return c.L * lb;
    }
    return model;
}

// Per-rank host bytes summed by lifetime (and pinned), from terms::host_terms.
struct HostSums {
    uint64_t init = 0, backward = 0, lazy = 0, load_tmp = 0, save_rank = 0, save_node = 0, save_rank0 = 0,
             under_model_load = 0, before_init = 0, before_zero_optimizer = 0;
    uint64_t pinned_init = 0, pinned_backward = 0, pinned_lazy = 0;
};

// Sums the host terms by lifetime, explaining each non-zero one.
HostSums sum_host_terms(const FullContext& c, const Explainer& ex) {
    const auto& in = c.in;
    const auto& z = in.zero;
    const int s = z.stage;
    const uint64_t L = c.L;
    auto n2s = [&](uint64_t v) { return ex.on ? num(double(v)) : std::string(); };
    const uint64_t module_state = c.bm * c.Tr + to_bytes(c.frozen_bytes);
    uint64_t largest_gpu_opt = 0;
    if (z.offload_optimizer == OffloadDevice::none)
        largest_gpu_opt = 4 * (s == 0 && !c.sz.bf16_optimizer ? c.Tr : (s == 3 ? c.sz.sub : c.Tn));
    const bool gather_save = s == 3 && z.stage3_gather_16bit_weights_on_model_save;
    const std::vector<terms::HostTerm> list = terms::host_terms(c.sz, module_state, largest_gpu_opt, gather_save, c.bm * c.P);
    HostSums u;
    const std::string subst = ex.on ? "Tn=" + n2s(c.Tn) + ", sub=" + n2s(c.sz.sub) + ", b_m=" + n2s(c.bm) + ", b_a=" +
                                          n2s(c.ba) + ", L=" + n2s(L) + ", pin_memory " +
                                          (c.sz.pin_optimizer ? "true" : "false") + ", torch " + in.stack.torch +
                                          (c.sz.round_pinned ? " (pinned sizes rounded to powers of two)" : "")
                                    : std::string();
    for (const auto& t : list) {
        if (t.during_zero_init) u.under_model_load += t.bytes;
        if (t.built_before_zero_optimizer) u.before_zero_optimizer += t.bytes;
        switch (t.life) {
            case terms::HostLife::init: u.init += t.bytes; if (t.pinned) u.pinned_init += t.bytes; break;
            case terms::HostLife::backward: u.backward += t.bytes; if (t.pinned) u.pinned_backward += t.bytes; break;
            case terms::HostLife::lazy: u.lazy += t.bytes; if (t.pinned) u.pinned_lazy += t.bytes; break;
            case terms::HostLife::load_transient:
                (t.before_init ? u.before_init : u.load_tmp) = std::max(t.before_init ? u.before_init : u.load_tmp, t.bytes);
                break;
            case terms::HostLife::save_transient: (t.once_per_node ? u.save_node : u.save_rank) += t.bytes; break;
        }
        if (t.rank0_only) u.save_rank0 += t.bytes;  // inside save_node: rank 0's node
        if (ex.on && t.bytes > 0) {
            static const char* life_names[] = {"from load", "from the first backward", "from the first step",
                                               "while loading", "while saving a checkpoint"};
            ex.term((std::string("host (") + (t.rank0_only ? "rank 0 only" : t.once_per_node ? "per node" : "per rank") + ", " +
                     life_names[static_cast<int>(t.life)] + (t.pinned ? ", pinned" : "") + "): " + t.name).c_str(),
                    t.formula, subst, t.bytes, term_source(terms::Term{t.name, t.formula, t.source, t.bytes}).c_str());
        }
    }
    return u;
}

// Host bytes per node of the load phase: the model as loaded (zero.Init,
// single-file, device-map or whole per rank) or the engine's init buffers.
uint64_t host_load_phase(const FullContext& c, const HostSums& u, uint64_t overhead, const Explainer& ex) {
    const auto& in = c.in;
    const auto& z = in.zero;
    const int s = z.stage;
    const uint64_t g = c.g, L = c.L;
    auto n2s = [&](uint64_t v) { return ex.on ? num(double(v)) : std::string(); };
    const uint64_t lb = static_cast<uint64_t>(dtype_bytes(in.residual.load_dtype));
    const bool zero_init = s == 3 && z.zero_init;
    // Frozen parameters are loaded in the load dtype like the rest and only
    // then frozen (quantized ones are loaded quantized).
    const double frozen_load = in.train.load_in_bits != 16 ? c.frozen_bytes : double(c.Fr) * double(lb);
    const LoadPath lp = effective_load_path(in);
    const uint64_t host_model =
        overhead + g * (zero_init ? L * lb + u.under_model_load : host_model_per_rank(c, lb, frozen_load));
    // The optimizer's host states and the pinned offload/swap pools are
    // allocated while deepspeed.initialize builds the engine, after the
    // materialised module has moved to the GPU (or, under zero.Init, after
    // its last module was built and partitioned); the load transients
    // (defragment staging, pageable sources of pinned copies, the init
    // gradient buffer) come one at a time on top of what init built.
    const uint64_t host_init = overhead + g * (u.init + u.load_tmp);
    const uint64_t load = std::max({host_model, host_init, overhead + g * (u.before_init > 0 ? u.before_init + u.before_zero_optimizer : 0)});
    if (ex.on) ex.term("host: model load (per node)",
            zero_init ? "g · (L · load bytes + process overhead) (zero.Init: one module at a time per rank)"
            : single_file_state_dict(in) ? "g · (Ψ · load bytes + 2 · Ψ state dict + process overhead) (single-file)"
            : lp == LoadPath::device_map ? "g · (L · load bytes + process overhead) (device-map: straight to the GPU)"
                                         : "g · (Ψ · load bytes + process overhead) (every rank materialises the whole model)",
            "g=" + n2s(g) + ", " + (zero_init ? "L=" + n2s(L) : "Ψ=" + n2s(c.Pr) + ", L=" + n2s(L)) + ", load dtype " +
                to_string(in.residual.load_dtype) + ", load path " + (zero_init ? "zero.Init" : to_string(lp)),
            host_model, "transformers modeling_utils.py from_pretrained (low_cpu_mem_usage, device_map, "
                        "is_deepspeed_zero3_enabled -> zero.Init); DeepSpeed estimate_zero3_model_states_mem_needs");
    if (ex.on && host_init > host_model)
        ex.term("host: load phase (per node)",
                "max(model load, g · (buffers built by deepspeed.initialize + the largest load transient) + overhead)",
                "model load=" + n2s(host_model) + " B, engine init=" + n2s(host_init) + " B", load,
                "DeepSpeed v0.19.6 stage_1_and_2.py / stage3.py __init__, zero/utils.py defragment, swap_tensor/*.py");
    return load;
}

HostFigures host_memory_full(const FullContext& c, const Explainer& ex) {
    const auto& in = c.in;
    const uint64_t g = c.g;
    const HostSums u = sum_host_terms(c, ex);
    const uint64_t overhead = in.residual.host_process_overhead * g;  // every rank's process baseline
    HostFigures h;
    h.first_forward = overhead + g * u.init;
    h.first_backward = h.first_forward + g * u.backward;
    h.steady = h.first_backward + g * u.lazy;
    h.pinned_first = g * (u.pinned_init + u.pinned_backward);
    h.pinned_steady = h.pinned_first + g * u.pinned_lazy;
    h.pinned_init = g * u.pinned_init;
    h.nvme = nvme_bytes(c);
    h.save_extra = g * u.save_rank + u.save_node;
    h.save_rank0 = u.save_rank0;
    h.load = host_load_phase(c, u, overhead, ex);
    return h;
}

// The summary: components each at their own peak, totals at the peak phase,
// the first phase that overflows, and the per-node host figures.
void summarize_phases(const FullContext& c, const GpuMemory& st, uint64_t act_backward, const HostFigures& host,
                      uint64_t host_act, Estimate& out, const Explainer& ex) {
    const EstimateInput& in = c.in;
    // --- summary: components at their own peak, totals at the peak phase ---------
    auto& m = out.per_gpu;
    m = st;
    m.activations = act_backward;
    m.temporary_buffers = 0;
    for (const auto& p : out.phases) m.temporary_buffers = std::max(m.temporary_buffers, p.per_gpu.temporary_buffers);
    for (const auto& p : out.phases) m.activations = std::max(m.activations, p.per_gpu.activations);  // generation's KV cache
    const PhaseMemory* gpu_peak = &out.phases[0];
    const PhaseMemory* host_peak = &out.phases[0];
    for (const auto& p : out.phases) {
        if (p.per_gpu.total > gpu_peak->per_gpu.total) gpu_peak = &p;
        if (p.per_node.host_memory > host_peak->per_node.host_memory) host_peak = &p;
    }
    m.cuda_context = c.proc.cuda_context;
    m.nccl_buffers = c.proc.nccl_buffers;
    m.cublas_workspaces = c.proc.cublas_workspaces;
    m.fragmentation = gpu_peak->per_gpu.fragmentation;
    m.allocated = gpu_peak->per_gpu.allocated;
    m.reserved = gpu_peak->per_gpu.reserved;
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
    node.host_pinned = host.pinned_steady;
    node.host_load = host.load;
    node.host_steady = host.steady + host_act;
    node.nvme = host.nvme;
    if (ex.on) {
        for (const auto& t : c.proc.terms) ex.term(t.component.c_str(), t.formula, t.substituted, t.bytes, t.source.c_str());
        if (in.residual.fragmentation_bytes)
            ex.term("fragmentation", "bytes from " + in.residual.fragmentation_source + " (every phase)",
                    num(double(*in.residual.fragmentation_bytes)) + " B at the " + gpu_peak->name + " phase",
                    m.fragmentation, "PyTorch caching allocator reserve (c10/cuda/CUDACachingAllocator.cpp)");
        else
            ex.term("fragmentation", "fraction · allocated bytes of the phase (--fragmentation)",
                    num(in.residual.fragmentation_fraction) + " at the " + gpu_peak->name + " phase", m.fragmentation,
                    "PyTorch caching allocator reserve; a few percent of capacity");
    }
}

}  // namespace

const char* to_string(LoadPath p) {
    switch (p) {
        case LoadPath::host_copy: return "host-copy";
        case LoadPath::single_file: return "single-file";
        case LoadPath::device_map: return "device-map";
    }
    return "?";
}

LoadPath parse_load_path(const std::string& text, const std::string& field) {
    const std::string t = to_lower(text);
    if (t == "host-copy" || t == "host_copy" || t == "low-cpu-mem" || t == "low_cpu_mem_usage")
        return LoadPath::host_copy;
    if (t == "single-file" || t == "single_file") return LoadPath::single_file;
    if (t == "device-map" || t == "device_map") return LoadPath::device_map;
    throw InputError(field + ": '" + text + "' is not a load path (use host-copy, low-cpu-mem, single-file or device-map)");
}

namespace {

// A note on the load path: the default per launcher, and a device_map that
// transformers refuses under ZeRO-3 (from_pretrained raises ValueError when
// is_deepspeed_zero3_enabled), where the model is built under zero.Init.
void load_path_note(const EstimateInput& in, Estimate& out) {
    const bool zero_init = in.zero.stage == 3 && in.zero.zero_init;
    if (zero_init && in.residual.load_path == LoadPath::device_map)
        out.notes.push_back("--load-path device-map: transformers refuses a device_map under ZeRO-3 with the HF "
                            "DeepSpeed integration (from_pretrained: \"DeepSpeed Zero-3 is not compatible with passing a "
                            "`device_map`\"); the model is built under zero.Init instead, as counted");
    else if (!zero_init && in.residual.load_path)
        out.notes.push_back(std::string("load path ") + to_string(*in.residual.load_path) +
                            ": " + (*in.residual.load_path == LoadPath::device_map
                                        ? "each parameter is materialised on its GPU; the host holds one module at "
                                          "a time"
                                        : *in.residual.load_path == LoadPath::single_file
                                              ? (single_file_state_dict(in)
                                                     ? "every rank holds the model and the 16-bit state dict on the host"
                                                     : "transformers " + in.stack.transformers + " (>= 4.50) builds "
                                                       "the model on the meta device and fills it one parameter at "
                                                       "a time, so a single file adds no 16-bit state dict; every "
                                                       "rank holds one host copy of the model")
                                              : "every rank holds one host copy of the model (low_cpu_mem_usage "
                                                "removes only the random-init double, not this copy)"));
}

// --- the full convention: one function per phase, assembled ------------------
// The GPU memory of each training phase, built from the steady model states.
struct PhaseGpus {
    GpuMemory load, forward, backward, step, steady_backward, save;
};

// Per-GPU memory of the load, first forward/backward, optimizer step, steady
// backward and checkpoint save phases (terms explained in that order).
PhaseGpus phase_gpus(const FullContext& c, const GpuMemory& st, const Activations& act, uint64_t tmp_fwd,
                     uint64_t tmp_bwd, const Explainer& ex) {
    const EstimateInput& in = c.in;
    const terms::Sizes& sz = c.sz;
    const bool gather_save = sz.stage == 3 && in.zero.stage3_gather_16bit_weights_on_model_save;
    auto with = [&](uint64_t grads, bool moments, uint64_t activations_b, uint64_t tmp) {
        GpuMemory m = st;
        m.gradients = grads;
        if (!moments) {
            m.momentum = m.variance = 0;
            m.optimizer_states = m.master_weights;
        }
        m.activations = activations_b;
        m.temporary_buffers = tmp;
        finish_gpu(m, c);
        return m;
    };
    const GpuMemory ld = load_gpu(c, st, ex);
    // The first forward and backward run before Adam's m and v exist (the
    // optimizer allocates them lazily at its first step).
    const GpuMemory fwd = with(gradients_before_backward(c, st), false, act.forward, tmp_fwd);
    // BF16_Optimizer's all-reduce cast (bf16_optimizer_allreduce_cast) is
    // made after the boundary backward has freed every activation:
    // engine.py _backward_epilogue -> allreduce_gradients ->
    // buffered_allreduce_fallback. The backward is then the larger of the
    // activation peak without the cast and the boundary with it, no activations.
    const uint64_t cast = terms::bf16_optimizer_allreduce_cast(sz).bytes;
    auto backward = [&](bool moments) {
        const GpuMemory peak = with(st.gradients, moments, act.backward, tmp_bwd - cast);
        if (cast == 0) return peak;
        const GpuMemory boundary = with(st.gradients, moments, 0, tmp_bwd);
        return boundary.total >= peak.total ? boundary : peak;
    };
    const GpuMemory bwd = backward(false);
    const GpuMemory step = optimizer_step_gpu(c, st, ex);
    const GpuMemory sbwd = backward(true);
    const uint64_t save_tmp = sum_bytes(persistent_temporaries(sz)) + (gather_save ? c.L * c.bm : 0);
    GpuMemory save = with(gradients_after_step(c, st), true, 0, save_tmp);
    // hpZ secondary partitions are dropped after the step (stage3.py _post_step).
    save.parameters -= terms::hpz_secondary_partition(sz, false).bytes;
    finish_gpu(save, c);
    return {ld, fwd, bwd, step, sbwd, save};
}

// Appends the phases (GPU and host memory per node, fits) to out.phases; the
// generation phase, when evaluated with generate, before checkpoint save.
void record_phases(const FullContext& c, const GpuMemory& st, const PhaseGpus& ph, const HostFigures& host,
                   uint64_t host_act, Estimate& out, const Explainer& ex) {
    const EstimateInput& in = c.in;
    out.phases.reserve(7);
    auto add = [&](const char* name, const GpuMemory& m, uint64_t host_b, uint64_t pinned) {
        PhaseMemory p;
        p.name = name;
        p.per_gpu = m;
        p.per_node.host_memory = host_b;
        p.per_node.host_pinned = pinned;
        p.per_node.nvme = host.nvme;
        if (in.cluster.gpu_memory) p.fits_gpu = m.total <= *in.cluster.gpu_memory;
        if (in.cluster.host_memory) p.fits_host = host_b <= *in.cluster.host_memory;
        out.phases.push_back(std::move(p));
    };
    // CPU Adam's m and v appear at the first step (ops/adam/cpu_adam.py),
    // so the first forward and backward hold less host RAM than training.
    add("load", ph.load, host.load, host.pinned_init);
    add("forward", ph.forward, host.first_forward + host_act, host.pinned_first);
    add("backward", ph.backward, host.first_backward + host_act, host.pinned_first);
    add("optimizer_step", ph.step, host.steady, host.pinned_steady);
    add("steady_backward", ph.steady_backward, host.steady + host_act, host.pinned_steady);
    if (in.generation) add("generation", generation_gpu(c, st, ex), host.steady, host.pinned_steady);
    add("checkpoint_save", ph.save, host.steady + host.save_extra, host.pinned_steady);

}

// The --explain notes of the full convention that depend on the settings.
void full_convention_notes(const FullContext& c, const Explainer& ex) {
    const EstimateInput& in = c.in;
    const terms::Sizes& sz = c.sz;
    if (sz.stage == 3 && !in.zero.zero_init)
        ex.note("zero_init is off: every rank on a node builds the whole model in host RAM before partitioning.");
    if (!in.model.arch && sz.stage == 3)
        ex.note("no architecture: ZeRO-3 persistent (small) parameters are not counted.");
    for (const auto& n : zeropp_notes(in)) ex.note(n);
    if (sz.bf16_optimizer)
        ex.note(std::string(sz.stage == 1    ? "bf16 + ZeRO-1 + fp32 gradient accumulation"
                            : c.ba == 4      ? "bf16 with fp32 gradient accumulation without ZeRO (DeepSpeed " +
                                                   in.stack.deepspeed + ", before 0.18.5)"
                                             : "bf16 without ZeRO under pipeline parallelism") +
                ": DeepSpeed builds BF16_Optimizer (engine._do_optimizer_sanity_check), whose gradient accumulation "
                "buffer exists from load on and whose fp32 master and optimizer states are partitioned over N_d; its all-reduce "
                "cast to the communication dtype comes after the boundary backward has freed the activations.");
    if (c.pp > 1 && in.train.grad_accum > 1)
        ex.note("pipeline parallelism with gradient accumulation: memory can grow with the accumulation steps "
                "(autograd buffers kept until the boundary, DeepSpeed #5198); not modelled beyond pp micro batches in flight.");
}

void estimate_full(const EstimateInput& in, Estimate& out, const Explainer& ex) {
    const FullContext c = make_context(in, out);
    optimizer_notes(c, out);
    load_path_note(in, out);
    const terms::Sizes& sz = c.sz;
    const GpuMemory st = steady_model_states(c, ex);
    const Activations act = activations(c, ex);
    const uint64_t tmp_fwd = sum_terms(forward_temporaries(sz), "forward", c, ex);
    const uint64_t tmp_bwd = sum_terms(backward_temporaries(sz), "backward", c, ex);
    const HostFigures host = host_memory_full(c, ex);
    const PhaseGpus ph = phase_gpus(c, st, act, tmp_fwd, tmp_bwd, ex);
    const uint64_t host_act = act.host * c.g;
    record_phases(c, st, ph, host, host_act, out, ex);
    summarize_phases(c, st, act.backward, host, host_act, out, ex);
    if (host.save_rank0 > 0)  // the gather (L · b_m per GPU, phase_gpus) runs on every rank
        set_rank0_only(out, "checkpoint_save", host.save_rank0, {"consolidated 16-bit state dict"}, c.L * c.bm);
    out.optimizer_step_kernel = c.kernel_why;
    full_convention_notes(c, ex);
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
    // inputs (4), attention and MLP inputs (4), the attention and MLP
    // residual dropout masks (1 each), each only where the model has that
    // dropout with p > 0 (at p = 0 at::dropout returns its input, no mask).
    const double masks = (arch.attention_residual_dropout > 0.0 ? 1.0 : 0.0) + (arch.mlp_residual_dropout > 0.0 ? 1.0 : 0.0);
    const double nonpar = sequence_parallel ? (8.0 + masks) / td : 8.0 + masks;
    // Inside: Q (2) and K, V (2 each, scaled by kv/a for GQA), the output
    // projection's input (2): 8 for multi-head attention.
    const int64_t hd = arch.head_dim > 0 ? arch.head_dim : h / a;
    const double q_width = double(a * hd) / double(h);
    const double kv_width = double(arch.num_kv_heads * hd) / double(h);
    const double attn = 2.0 * q_width + 4.0 * kv_width + 2.0 * q_width;
    // MLP: plain 2sbf (GeLU input) + 2sbf (its output) = 4f/h sbh (16 for f = 4h);
    // gated: gate, up, act(gate) and the product, 2sbf each = 8f/h sbh.
    // MoE: the top-k routed experts' and the shared expert's widths
    // (active_ffn_width); expert parallelism is not modelled here.
    const double f = double(active_ffn_width(arch)) / double(h);
    const double mlp = (arch.gated_mlp ? 8.0 : 4.0) * f;
    double factor = nonpar + (attn + mlp) / td;
    // Eager attention: Korthikanti's 5as²b = softmax output 2, the output of
    // its dropout 2 and the dropout mask 1; without attention dropout the
    // mask goes (4as²b: the paper's count less the mask).
    if (mode == Checkpointing::none && !flash_attention)
        factor += attention_score_factor(arch) * double(a) * double(s) / (double(h) * td);
    return to_bytes(sbh * factor);
}

double attention_score_factor(const ModelArch& arch) { return arch.attention_dropout > 0.0 ? 5.0 : 4.0; }

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

// The optimizer the step really runs under ZeRO optimizer offload. DeepSpeed
// refuses a client optimizer other than DeepSpeedCPUAdam there
// (engine.py _configure_optimizer raises ZeRORuntimeException while
// zero_force_ds_cpu_optimizer is true), but the HF Trainer prepares DeepSpeed
// through accelerate, whose Accelerator._prepare_deepspeed (accelerator.py)
// replaces the client optimizer with DeepSpeedCPUAdam(param_groups) in exactly
// that case. zeromem follows the HF Trainer: the step is DeepSpeedCPUAdam, as
// with an "optimizer" block. Sets `swapped` when it changed the input.
EstimateInput with_accelerate_cpu_adam(const EstimateInput& in, bool& swapped) {
    EstimateInput out = in;
    swapped = in.zero.offload_optimizer != OffloadDevice::none && in.train.optimizer_builder == OptimizerBuilder::client &&
              !in.train.fused_optimizer && in.zero.zero_force_ds_cpu_optimizer;
    if (swapped) {
        out.train.optimizer_builder = OptimizerBuilder::deepspeed;
        out.train.fused_optimizer = true;
        out.train.torch_adam = false;
        // DeepSpeedCPUAdam whatever the client's optimizer was.
        if (out.train.optimizer != Optimizer::adam) out.train.optimizer = Optimizer::adamw;
    }
    return out;
}

namespace {

// Fills in.residual.fragmentation_bytes from the injected provider (the
// simulator's replay, wired by the faces) when the full convention runs
// without an explicit figure; a provider that cannot replay the input leaves
// the fixed fraction, said in the notes.
void resolve_fragmentation(EstimateInput& in, Estimate& out) {
    ResidualSettings& r = in.residual;
    if (in.convention != Convention::full || r.fragmentation_bytes || !r.fragmentation_provider) return;
    r.fragmentation_bytes = r.fragmentation_provider(in);
    if (r.fragmentation_bytes) {
        r.fragmentation_source = r.fragmentation_provider_source;
        return;
    }
    out.notes.push_back("fragmentation allowance: the fixed fraction " + num(r.fragmentation_fraction) +
                        " of the allocated bytes (the simulator cannot replay this input: no architecture, or a "
                        "case it refuses; pass --fragmentation to set it)");
}

}  // namespace

Estimate estimate(const EstimateInput& in_given, bool explain) {
    bool swapped = false;
    EstimateInput in = with_accelerate_cpu_adam(in_given, swapped);
    validate(in);
    validate_moe(in);
    Estimate out;
    out.convention = in.convention;
    if (in.moe.ep() > 1 && in.convention != Convention::full)
        out.notes.push_back("--ep-size: expert parallelism is modelled by the full convention only; the " +
                            std::string(to_string(in.convention)) + " convention counts every expert on every rank");
    resolve_fragmentation(in, out);
    if (swapped)
        out.notes.push_back("optimizer offload with the client's optimizer (no \"optimizer\" block): accelerate, which "
                            "the HF Trainer uses, replaces it with DeepSpeedCPUAdam (accelerator.py _prepare_deepspeed), "
                            "since DeepSpeed refuses a client optimizer under ZeRO-Offload while "
                            "zero_force_ds_cpu_optimizer is true (engine.py _configure_optimizer); a script calling "
                            "deepspeed.initialize with a torch optimizer gets ZeRORuntimeException instead" +
                            (in_given.train.optimizer != in.train.optimizer
                                 ? std::string("; the client's ") + to_string(in_given.train.optimizer) +
                                       " is thus counted as DeepSpeedCPUAdam, m and v at 8 B/param on the host"
                                 : std::string()));
    const Explainer ex{&out, explain};
    switch (in.convention) {
        case Convention::paper: estimate_paper(in, out, ex); break;
        case Convention::deepspeed: estimate_deepspeed(in, out, ex); break;
        case Convention::full: estimate_full(in, out, ex); break;
    }
    if (in.convention != Convention::full) out.per_gpu.allocated = out.per_gpu.reserved = out.per_gpu.total;
    if (in.generation && in.convention != Convention::full)
        out.notes.push_back("--eval-generate: the generation phase (KV cache, logits) is modelled in the full "
                            "convention only; this convention leaves it out");
    set_verdicts(in, out);
    return out;
}

}  // namespace zeromem
