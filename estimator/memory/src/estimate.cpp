#include "zeromem/estimate.h"
#include "zeromem/verdict_band.h"
#include "zeromem/optimizer_wrapper.h"

#include "zeromem/optimizer_state.h"
#include "zeromem/process_terms.h"
#include "zeromem/terms.h"
#include "zeromem/util.h"
#include "zeromem/zeropp.h"
#include "estimate_detail.h"
#include "rank0_only.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace zeromem {

using namespace estimate_detail;

namespace estimate_detail {


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
        const uint64_t persist = c.persistent;
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


// --- GPU temporaries per phase, as lists of named terms ------------------------
TermList forward_temporaries(const terms::Sizes& s) {
    if (s.stage == 0) return {};
    if (s.stage <= 2) return {terms::temp_grad_buffer_for_gpu_offload(s)};
    return {terms::zero3_ipg_bucket(s), terms::zero3_gathered_params(s, false), terms::zero3_allgather_cat_copy(s),
            terms::qwz_quantized_gather(s, false), terms::mics_hierarchical_gather_clone(s),
            terms::zero3_retained_linear_weights(s, false)};
}

TermList backward_temporaries(const terms::Sizes& s) {
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

// The temporaries live at the cross-entropy's backward, before the LM head's
// pre-backward hook (parameter_offload.py PreBackwardFunctionForModule wraps the
// module's output, so its backward runs after the loss's nodes): the forward's
// without the all-gather's transients (cat copy, qwZ, MiCS clone): ZeRO-3 keeps
// the LM head's gathered weight from its forward to its backward
// (partitioned_param_coordinator.py __params_to_release: reused within
// stage3_max_reuse_distance) with the look-ahead, and the IPG bucket; ZeRO-1/2
// the offload staging buffer.
TermList loss_backward_temporaries(const terms::Sizes& s) {
    if (s.stage == 3)
        return {terms::zero3_ipg_bucket(s), terms::zero3_gathered_params(s, false),
                terms::zero3_retained_linear_weights(s, false)};
    return persistent_temporaries(s);
}

// Buffers live from init to the end of training: the ZeRO-3 IPG bucket and
// the ZeRO-1/2 offload staging buffer.
TermList persistent_temporaries(const terms::Sizes& s) {
    if (s.stage == 3) return {terms::zero3_ipg_bucket(s)};
    if (s.stage >= 1) return {terms::temp_grad_buffer_for_gpu_offload(s)};
    return {};
}

uint64_t sum_bytes(const TermList& list) {
    uint64_t b = 0;
    for (const auto& t : list) b += t.bytes;
    return b;
}

// The phase's readings: allocated (DeepSpeed's tensors and the cuBLAS
// workspaces the caching allocator holds), reserved (+ the fragmentation
// allowance) and the device total nvidia-smi shows (+ the CUDA context, NCCL
// buffers and anything else outside the allocator). `fragmentation_bytes`:
// the allowance in bytes when one is set, else the fixed fraction.
void finish_gpu_with(GpuMemory& m, const FullContext& c, const std::optional<uint64_t>& fragmentation_bytes) {
    const EstimateInput& in = c.in;
    m.cublas_workspaces = c.proc.cublas_workspaces;
    m.process_baseline = c.proc.process_baseline;
    m.cuda_context = c.proc.cuda_context;
    m.nccl_buffers = c.proc.nccl_buffers;
    m.allocated = m.parameters + m.gradients + m.optimizer_states + m.activations + m.temporary_buffers +
                  c.proc.inside_allocator();
    m.fragmentation = fragmentation_bytes ? *fragmentation_bytes
                                          : to_bytes(in.residual.fragmentation_fraction * double(m.allocated));
    m.reserved = m.allocated + m.fragmentation;
    m.total = m.reserved + c.proc.outside_allocator();
}

void finish_gpu(GpuMemory& m, const FullContext& c) { finish_gpu_with(m, c, c.in.residual.fragmentation_bytes); }

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
    const bool last_only = c.facts.generate_keeps_last_logits_only;  // transformers >= 4.45
    const GenerationMemory gm = generation_memory(*c.in.model.arch, sh, c.bm, last_only);
    GpuMemory m = st;
    m.gradients = gradients_after_step(c, st);
    m.activations = gm.peak;
    m.temporary_buffers = sum_terms(forward_temporaries(c.sz), "generation", c, ex);
    if (ex.on) explain_generation(c, sh, gm, ex);
    finish_gpu(m, c);
    return m;
}


}  // namespace estimate_detail

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
    GpuMemory load_component_peaks;  ///< Estimate::load_component_peaks
};

// Per-GPU memory of the load, first forward/backward, optimizer step, steady
// backward and checkpoint save phases (terms explained in that order).
PhaseGpus phase_gpus(const FullContext& c, const GpuMemory& st, const Activations& act, uint64_t tmp_fwd,
                     uint64_t tmp_bwd, const Explainer& ex) {
    const EstimateInput& in = c.in;
    const terms::Sizes& sz = c.sz;
    const bool gather_save = sz.stage == 3 && in.zero.stage3_gather_16bit_weights_on_model_save;
    auto with = [&](uint64_t grads, bool moments, uint64_t activations_b, uint64_t tmp) {
        return moment(c, st, grads, moments, activations_b, tmp);
    };
    GpuMemory load_peaks;
    const GpuMemory ld = load_gpu(c, st, ex, &load_peaks);
    // The first forward and backward run before Adam's m and v exist (the
    // optimizer allocates them lazily at its first step).
    const GpuMemory fwd = with(gradients_before_backward(c, st), false, act.forward, tmp_fwd);
    const GpuMemory bwd = backward_gpu(c, st, act, tmp_bwd, false, ex);
    const GpuMemory step = optimizer_step_gpu(c, st, ex);
    const GpuMemory sbwd = backward_gpu(c, st, act, tmp_bwd, true, ex);
    const uint64_t save_tmp = sum_bytes(persistent_temporaries(sz)) + (gather_save ? c.L * c.bm : 0);
    GpuMemory save = with(gradients_after_step(c, st), true, 0, save_tmp);
    // hpZ secondary partitions are dropped after the step (stage3.py _post_step).
    save.parameters -= terms::hpz_secondary_partition(sz, false).bytes;
    finish_gpu(save, c);
    return {ld, fwd, bwd, step, sbwd, save, load_peaks};
}

// Appends the phases (GPU and host memory per node, fits) to out.phases; the
// generation phase, when evaluated with generate, before checkpoint save.
void record_phases(const FullContext& c, const GpuMemory& st, const PhaseGpus& ph, const HostFigures& host,
                   uint64_t host_act, Estimate& out, const Explainer& ex) {
    const EstimateInput& in = c.in;
    out.phases.reserve(7);
    auto add = [&](const char* name, const GpuMemory& m, uint64_t host_b, uint64_t pinned) {
        PhaseMemory& p = out.phases.emplace_back();  // filled in place
        p.name = name;
        p.per_gpu = m;
        p.per_node.host_memory = host_b;
        p.per_node.host_pinned = pinned;
        p.per_node.nvme = host.nvme;
        if (in.cluster.gpu_memory) p.fits_gpu = m.total <= *in.cluster.gpu_memory;
        if (in.cluster.host_memory) p.fits_host = host_b <= *in.cluster.host_memory;
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
    FullContext c = make_context(in, out);  // not changed after, but for handing kernel_why to `out` at the end
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
    out.load_component_peaks = ph.load_component_peaks;
    summarize_phases(c, st, std::max(act.backward, act.loss_backward), host, host_act, out, ex);
    if (host.save_rank0 > 0)  // the gather (L · b_m per GPU, phase_gpus) runs on every rank
        set_rank0_only(out, "checkpoint_save", host.save_rank0, {"consolidated 16-bit state dict"}, c.L * c.bm);
    out.optimizer_step_kernel = std::move(c.kernel_why);
    full_convention_notes(c, ex);
}

}  // namespace


namespace {

// Whether the estimate asks the injected provider for its allowance: the full
// convention without an explicit figure.
bool asks_fragmentation_provider(const EstimateInput& in) {
    const ResidualSettings& r = in.residual;
    return in.convention == Convention::full && !r.fragmentation_bytes && r.fragmentation_provider;
}

// Fills in.residual's fragmentation_bytes and load_fragmentation_bytes from the
// injected provider (the simulator's replay, wired by the faces) when it is
// asked; a provider that cannot replay the input leaves the fixed fraction,
// said in the notes.
void resolve_fragmentation(EstimateInput& in, Estimate& out) {
    ResidualSettings& r = in.residual;
    if (!asks_fragmentation_provider(in)) return;
    const std::optional<FragmentationAllowance> replayed = r.fragmentation_provider(in);
    if (replayed) {
        r.fragmentation_bytes = replayed->bytes;
        r.load_fragmentation_bytes = replayed->load_bytes;
        r.fragmentation_source = r.fragmentation_provider_source;
        return;
    }
    out.notes.push_back("fragmentation allowance: the fixed fraction " + num(r.fragmentation_fraction) +
                        " of the allocated bytes (the simulator cannot replay this input: no architecture, or a "
                        "case it refuses; pass --fragmentation to set it)");
}

}  // namespace

Estimate estimate(const EstimateInput& in_given, bool explain) {
    bool swapped = accelerate_swaps_cpu_adam(in_given);
    // The input as the estimate reads it: copied only where it changes (accelerate's swap, the
    // provider's fragmentation figure), `in_given` itself otherwise.
    std::optional<EstimateInput> changed;
    if (swapped || asks_fragmentation_provider(in_given)) changed = with_accelerate_cpu_adam(in_given, swapped);
    const EstimateInput& in = changed ? *changed : in_given;
    validate(in);
    validate_moe(in);
    Estimate out;
    out.convention = in.convention;
    if (in.moe.ep() > 1 && in.convention != Convention::full)
        out.notes.push_back("--ep-size: expert parallelism is modelled by the full convention only; the " +
                            std::string(to_string(in.convention)) + " convention counts every expert on every rank");
    if (changed) resolve_fragmentation(*changed, out);
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
