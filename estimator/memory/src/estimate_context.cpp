// The full convention's context, resolved once per estimate: parameter counts per rank,
// the named sizes the terms read (terms::Sizes), host and ZeRO++ sizes, the optimizer states,
// and how the terms are summed and explained.
#include "estimate_detail.h"

#include "zeromem/optimizer_wrapper.h"
#include "zeromem/util.h"
#include "zeromem/zeropp.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace zeromem {

using namespace estimate_detail;

namespace estimate_detail {

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
uint64_t rank_params(const FullContext& c, uint64_t total) {
    const EstimateInput& in = c.in;
    const int64_t tp = in.cluster.tp, pp = in.cluster.pp;
    if (tp == 1 && pp == 1) return total;
    if (!in.model.arch) return ceil_div(total, static_cast<uint64_t>(tp * pp));
    const ParamCount& pc = *c.counts;
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
    s.round_pinned = f.rounds_pinned_to_power_of_two;
    s.master_pinned = f.pins_master_weights_only_with_pin_memory ? s.pin_optimizer : f.pins_master_weights;
    s.grads_pinned = f.pins_grad_partition_only_with_pin_memory ? s.pin_optimizer : true;
    s.bit16_staging = f.stages_bit16_params_for_offload;
    s.cpu_adam_tile_buffer = f.cpu_adam_pins_tile_buffer;
    s.lazy_cpu_adam_states = f.creates_cpu_adam_states_at_first_step;
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
        const ModelArch& a = *in.model.arch;
        const uint64_t layers = uint64_t(std::max<int64_t>(1, a.num_layers));
        const uint64_t h = uint64_t(std::max<int64_t>(1, a.hidden_size));
        for_each_parameter_numel(parameter_layout(a, c.tp), uint64_t(a.num_layers), [&](uint64_t numel, uint64_t count) {
            // A quantized base (--load-in) stores its layers' linear weights packed (bitsandbytes: 4-bit in a
            // 16-bit quant_storage, numel / 4 elements; 8-bit one byte each): their partitions are that size.
            const bool packed = in.train.load_in_bits < 16 && count % layers == 0 && numel >= h * h / 16;
            auto bytes = [&](uint64_t n) {
                return packed ? ceil_div(n * uint64_t(in.train.load_in_bits), 8) : c.bm * n;
            };
            raw += double(bytes(numel)) * double(count);
            rounded += double(terms::power_of_two_ceil(bytes(numel))) * double(count);
            blocks += terms::power_of_two_ceil(bytes(ceil_div(numel, c.N))) * count;
        });
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
        s.hpz_numel_load = c.Pr;
        s.hpz_numel_train = c.Pr - std::min(c.Pr, c.persistent);
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
std::vector<StateTensor> optimizer_tensors(const FullContext& c, const char*& why) {
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
        why = in.model.arch ? "one flat tensor of Ψ_t elements: the tensor shapes are not known (this architecture, "
                              "LoRA or a trainable subset); Adafactor is then counted unfactored (4 B/param, an upper "
                              "bound), 8-bit optimizers as if no tensor were under min_8bit_size = 4096 (a lower bound)"
                            : "one flat tensor of Ψ_t elements: the tensor shapes are not known (--params alone); "
                              "Adafactor is then counted unfactored (4 B/param, an upper bound), 8-bit optimizers as if "
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
// (self.device is cpu under offload). Sub-groups are the walk in parameter
// order (Sizes::sub_groups), or, where the layout does not cover the model,
// sub = min(sub_group_size, Tn) elements, the last the rest.
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
    const uint64_t count = s.sub_groups.empty() ? ceil_div(c.Tn, sub) : s.sub_groups.size();
    const uint64_t on_gpu = static_cast<uint64_t>((1.0 - z.offload_optimizer_ratio) * double(count));
    s.partial_gpu_sub_groups = std::min(on_gpu, count);
    if (s.sub_groups.empty()) {
        s.partial_gpu_numel = on_gpu >= count ? c.Tn : on_gpu * sub;
        s.partial_gpu_largest = std::min(sub, s.partial_gpu_numel);
    } else {  // the first on_gpu sub-groups of the walk
        for (uint64_t i = 0; i < s.partial_gpu_sub_groups; ++i) {
            s.partial_gpu_numel += s.sub_groups[i];
            s.partial_gpu_largest = std::max(s.partial_gpu_largest, s.sub_groups[i]);
        }
    }
    s.partial_gpu_step_temporary = step_temporary_bytes_per_element(foreach_kernel(c.facts));
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
        const ParamCount& pc = *c.counts;
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
    c.Pr = rank_params(c, c.P);
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
    const ParamCount& pc = *c.counts;
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
    s.layer = in.model.arch ? ceil_div(c.counts->per_layer, c.tp) : 0;
    if (in.model.arch && in.moe.ep() > 1) {  // a MoE block gathers only its local experts
        const auto& a = *in.model.arch;
        s.layer -= static_cast<uint64_t>(a.num_experts - a.num_experts / in.moe.ep()) * c.counts->one_expert;
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
    // ZeRO-3 steps one sub-group at a time: the largest of them, in parameter order, sizes the step's buffers.
    if (z.stage == 3 && in.model.arch && in.moe.ep() == 1 && c.pp == 1 && in.model.arch->num_experts == 0)
        s.sub_groups = kept_zero3_sub_groups(c.counts, *in.model.arch, c.tp, c.N,
                                             static_cast<uint64_t>(std::max<int64_t>(1, z.sub_group_size)), c.Tn);
    if (!s.sub_groups.empty()) s.sub = *std::max_element(s.sub_groups.begin(), s.sub_groups.end());
    s.grad_accum = t.grad_accum;
    c.facts = stack_facts(in.stack);
    StepKernelChoice kc = step_kernel(in, c.facts);
    s.kernel = kc.kernel;
    c.kernel_why = std::move(kc.why);
    s.bf16_optimizer = selects_bf16_optimizer(in);
}

// ZeRO-3's persistent parameters of one rank (persistent_numel), walked once for the steady
// parameters and hpZ's secondary partition.
void set_persistent(FullContext& c) {
    const EstimateInput& in = c.in;
    const auto& z = in.zero;
    if (!in.model.arch || (z.stage != 3 && !z.hpz_active())) return;
    c.persistent = ceil_div(kept_persistent_numel(c.counts, *in.model.arch, c.tp, z.stage3_param_persistence_threshold,
                                                  z.stage3_model_persistence_threshold), c.pp);
}

FullContext make_context(const EstimateInput& in, Estimate& out) {
    FullContext c(in);
    c.proc = process_memory(in);
    set_layout_and_widths(c);
    set_param_counts(c, out);
    set_persistent(c);
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
           num(double(step_temporary_bytes_per_element(s.kernel))) + " B/element" +
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
uint64_t sum_terms(const TermList& list, const char* phase, const FullContext& c, const Explainer& ex) {
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

}  // namespace estimate_detail

}  // namespace zeromem
