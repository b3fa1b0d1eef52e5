#include "zeromem/terms.h"

#include <algorithm>

namespace zeromem {
namespace terms {

namespace {
constexpr const char* kZ12 = "DeepSpeed v0.19.6 runtime/zero/stage_1_and_2.py";
constexpr const char* kZ3 = "DeepSpeed v0.19.6 runtime/zero/stage3.py";
constexpr const char* kBf16 = "DeepSpeed v0.19.6 runtime/bf16_optimizer.py";
constexpr const char* kFp16 = "DeepSpeed v0.19.6 runtime/fp16/fused_optimizer.py";

// MEMORY_OPT_ALLREDUCE_SIZE in engine.py: elements per all-reduce bucket.
constexpr uint64_t kMemoryOptAllreduceSize = 500000000;

// Largest single parameter's slice inside this rank's partition, Lp.
uint64_t largest_slice(const Sizes& s) { return std::min(s.L, s.Tn); }
}  // namespace

Term zero12_backward_gradients(const Sizes& s) {
    if (s.bf16_optimizer)
        return make("autograd param.grad (bf16, full)", "b_m · Ψ_t",
                    "autograd; bf16_optimizer.py update_hp_grads adds them into the fp32 buffer", s.bm * s.Tr);
    if (s.stage == 1) {
        if (s.ba != s.bm)
            return make("param.grad_accum (fp32 accumulation)", "b_a · Ψ_t",
                        "runtime/zero/stage_1_and_2.py _fill_param_grad_accum_attribute (param.grad = None after each hook)",
                        s.ba * s.Tr);
        // At the boundary reduce_gradients walks the parameters in group
        // order; the first reduced bucket holds the first parameters, which
        // lie in rank 0's partition, so copy_grads_in_partition allocates
        // grads_in_partition (b_m · Tn) there while every later param.grad
        // still waits for its bucket.
        const uint64_t gip = s.contiguous_gradients && !s.offload_optimizer ? s.bm * s.Tn : 0;
        return make("autograd param.grad (full) + grads_in_partition at the boundary", "b_m · Ψ_t + b_m · ceil(Ψ_t/N_d)",
                    "autograd; runtime/zero/stage_1_and_2.py reduce_gradients -> reduce_ipg_grads -> "
                    "copy_grads_in_partition (allocated at the first bucket, rank 0)",
                    s.bm * s.Tr + gip);
    }
    if (s.offload_optimizer) return make("grads_in_partition", "0 (pinned host memory)", kZ12, 0);
    return make("grads_in_partition", "b_m · ceil(Ψ_t/N_d)",
                "runtime/zero/stage_1_and_2.py copy_grads_in_partition", s.bm * s.Tn);
}

Term grads_in_partition(const Sizes& s) {
    if (s.offload_optimizer) return make("grads_in_partition", "0 (pinned host memory)", kZ12, 0);
    return make("grads_in_partition", "b_m · ceil(Ψ_t/N_d)",
                "runtime/zero/stage_1_and_2.py copy_grads_in_partition (the rest set to None by _clear_param_grad_only)",
                s.bm * s.Tn);
}

Term bf16_optimizer_fp32_grad_buffer(const Sizes& s) {
    return make("BF16_Optimizer gradient accumulation buffer", "b_a · Ψ_t (from init; fp32 at stage 1)",
                "runtime/bf16_optimizer.py _setup_for_real_optimizer (fp32_flat_buffer, dtype grad_acc_dtype)",
                s.bf16_optimizer ? s.ba * s.Tr : 0);
}

Term zero12_ipg_bucket(const Sizes& s) {
    return make("ipg bucket", s.overlap_comm ? "reduce_bucket_size · b_m · 2 (overlap_comm)" : "reduce_bucket_size · b_m",
                "runtime/zero/stage_1_and_2.py setup_buckets (buf_0, buf_1)", s.bucket * s.bm * (s.overlap_comm ? 2 : 1));
}

Term zero12_allreduce_bucket_flatten(const Sizes& s) {
    const bool on = s.N > 1 && !s.offload_optimizer;
    // A parameter larger than reduce_bucket_size (an LM head) is reduced on
    // its own (extra_large_param_to_reduce): allreduce_and_scatter gathers its
    // N_d slices of ceil(L/N_d) until they exceed reduce_bucket_size, then
    // flattens them: min(L, (floor(bucket / slice) + 1) · slice) elements.
    // A bucket holds at most the trainable gradients there are (self.flatten of
    // the bucket's tensors), however large reduce_bucket_size is.
    uint64_t elements = std::min(s.bucket, s.Tr);
    if (s.L > s.bucket && s.N > 0) {
        const uint64_t slice = (s.L + s.N - 1) / s.N;
        elements = std::max(elements, std::min(s.L, (s.bucket / slice + 1) * slice));
    }
    return make(s.L > s.bucket ? "allreduce_bucket flatten (extra-large parameter's slices)" : "allreduce_bucket flatten",
                s.L > s.bucket ? "min(L, (floor(reduce_bucket_size / ceil(L/N_d)) + 1) · ceil(L/N_d)) · b_m (N_d > 1)"
                               : "min(reduce_bucket_size, Ψ_t) · b_m (N_d > 1)",
                "runtime/zero/stage_1_and_2.py reduce_ipg_grads (extra_large_param_to_reduce) -> average_tensor -> "
                "allreduce_and_scatter -> allreduce_bucket (self.flatten(bucket))",
                on ? elements * s.bm : 0);
}

Term zero2_autograd_grad_before_bucket_copy(const Sizes& s) {
    const bool on = s.stage == 2 && s.full_finetune;
    return make("autograd grad before the bucket copy", "L · b_m",
                "runtime/zero/stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads", on ? s.L * s.bm : 0);
}

Term zero2_accumulated_partition(const Sizes& s) {
    const bool on = s.stage == 2 && s.grad_accum > 1 && !s.offload_optimizer;
    return make("all_grad_tensors (previous micro-step's partition)", "b_m · ceil(Ψ_t/N_d) (gradient_accumulation_steps > 1)",
                "runtime/zero/stage_1_and_2.py independent_gradient_partition_epilogue (all_grad_tensors, add_)",
                on ? s.bm * s.Tn : 0);
}

Term zero12_init_fp32_grad_partition(const Sizes& s) {
    const bool on = (s.stage == 1 || s.stage == 2) && !s.offload_optimizer && !s.bf16_optimizer;
    return make("fp32 gradient partition at init (freed when it returns)", "4 · Tn (no offload; load only)",
                "runtime/zero/stage_1_and_2.py initialize_optimizer_states (single_grad_partition)",
                on ? 4 * s.Tn : 0);
}

Term temp_grad_buffer_for_gpu_offload(const Sizes& s) {
    const bool on = (s.stage == 1 || s.stage == 2) && s.offload_optimizer;
    return make("temp_grad_buffer_for_gpu_offload", "L · b_m (every phase)", "runtime/zero/stage_1_and_2.py __init__",
                on ? s.L * s.bm : 0);
}

Term zero12_offload_boundary_transient(const Sizes& s) {
    const bool on = (s.stage == 1 || s.stage == 2) && s.offload_optimizer;
    return make("offload boundary transient", "max(8 · Lp (.double() norm), reduce_bucket_size · b_m (flatten)), Lp = min(L, Tn)",
                "runtime/zero/stage_1_and_2.py set_norm_for_param_grad_in_gpu, allreduce_bucket",
                on ? std::max(8 * largest_slice(s), s.N > 1 ? s.bucket * s.bm : 0) : 0);
}

Term engine_allreduce_bucket_flatten(const Sizes& s) {
    const bool on = s.stage == 0 || s.bf16_optimizer;
    // BF16_Optimizer reduces one flat fp32 tensor per group: the flatten is a view.
    const bool copy = on && !s.bf16_optimizer;
    return make("engine allreduce_bucket flatten", "min(MEMORY_OPT_ALLREDUCE_SIZE = 5e8, Ψ_t) · b_m",
                "runtime/engine.py buffered_allreduce_fallback -> allreduce_bucket (self.flatten(bucket))",
                copy ? std::min(kMemoryOptAllreduceSize, s.Tr) * s.bm : 0);
}

Term bf16_optimizer_allreduce_cast(const Sizes& s) {
    const bool on = s.bf16_optimizer && s.bc != s.ba;
    return make("allreduce cast to communication_data_type", "b_c · Ψ_t (fp32 gradient buffer cast)",
                "runtime/engine.py allreduce_bucket (tensor.to(communication_data_type))", on ? s.bc * s.Tr : 0);
}

Term zero3_ipg_bucket(const Sizes& s) {
    return make("ipg bucket (kept from init)", "reduce_bucket_size · b_c (contiguous_gradients)",
                "runtime/zero/stage3.py _setup_for_real_optimizer", s.contiguous_gradients ? s.bucket * s.bc : 0);
}

Term zero3_reduce_scatter_cat(const Sizes& s) {
    const bool on = s.N > 1 && s.reduce_scatter && !s.qgz;  // qgZ: all_to_all_quant_reduce instead
    return make("reduce_scatter_coalesced cat", "reduce_bucket_size · b_c (N_d > 1, reduce_scatter, no qgZ)",
                "runtime/comm/coalesced_collectives.py reduce_scatter_coalesced (torch.cat); runtime/zero/stage3.py __avg_scatter_grads",
                on ? s.bucket * s.bc : 0);
}

Term zero3_gathered_params(const Sizes& s, bool backward) {
    constexpr const char* src =
        "runtime/zero/partitioned_param_coordinator.py _fetch_sub_module_impl (prefetch from __param_queue while "
        "__n_available_params < __max_n_available_params), __params_to_release";
    auto capped = [&](uint64_t n) { return s.Tr > 0 ? std::min(n, s.Tr) : n; };
    if (s.prefetch > 0 && s.mean_module > 0 && s.mean_module < s.prefetch)
        return make("gathered params (look-ahead filled to stage3_max_live_parameters)",
                    "min(stage3_max_live_parameters + L, Ψ_t) · b_m (a trace step uses less than one prefetch)", src,
                    capped(s.max_live + s.L) * s.bm);
    uint64_t whole = s.L;
    const bool retain = backward && s.checkpointing && s.layer > 0 && s.max_reuse >= s.layer;
    if (retain) whole = std::max(s.L, std::min(s.layer, s.max_live));
    // The prefetch walks the recorded trace: it gathers only parameters that
    // exist, so a model smaller than one prefetch is gathered whole, not 5e7 elements.
    return make(retain ? "gathered params (decoder layer kept from recompute to backward)" : "gathered params",
                retain ? "min(max(L, min(layer, stage3_max_live_parameters)) + min(prefetch, max_live), Ψ_t) · b_m"
                       : "min(L + min(stage3_prefetch_bucket_size, stage3_max_live_parameters), Ψ_t) · b_m",
                src, capped(whole + s.prefetch) * s.bm);
}

Term zero3_retained_linear_weights(const Sizes& s, bool backward) {
    constexpr const char* name = "Linear weights kept for backward (memory_efficient_linear false)";
    constexpr const char* src =
        "torch F.linear saves weight.t() (torch/csrc/autograd/saved_variable.cpp keeps a non-output view), which "
        "outlives runtime/zero/partition_parameters.py free_param's param.data swap; DeepSpeed PR #8189 (without "
        "zero3_linear_wrap, runtime/zero/linear.py)";
    if (s.stage != 3 || s.memory_efficient_linear) return make(name, "0 (memory_efficient_linear true or stage < 3)", src, 0);
    if (!s.full_recompute)
        return make(name, "linear_weights · b_m (every Linear weight, forward to its backward)", src,
                    s.linear_weights * s.bm);
    const bool kept_anyway = s.layer > 0 && s.max_reuse >= s.layer;  // zero3_gathered_params' retained block
    if (!backward || kept_anyway)
        return make(name, "V·h · b_m (the LM head, outside the recomputed blocks)", src, s.lm_head_matrix * s.bm);
    return make(name, "max(V·h, layer) · b_m (the LM head, then one recomputed block)", src,
                std::max(s.lm_head_matrix, s.layer) * s.bm);
}

Term zero3_allgather_cat_copy(const Sizes& s) {
    return make("all-gather cat copy", "L · b_m (N_d > 1)",
                "runtime/zero/partition_parameters.py AllGatherCoalescedHandle.wait (param.data = torch.cat(...))",
                s.N > 1 ? s.L * s.bm : 0);
}

Term zero3_module_grad(const Sizes& s) {
    return make("module gradient", "L · b_m", "runtime/zero/stage3.py __add_grad_to_ipg_bucket (autograd grad before the copy)",
                s.full_finetune ? s.L * s.bm : 0);
}

StepMoments zero12_step(const Sizes& s) {
    StepMoments m;
    const uint64_t T = step_temporary_bytes_per_element(s.kernel);
    const uint64_t on = s.offload_optimizer ? 0 : 1;
    m.flatten = make("step: flat gradient copy + fp32 cast", "b_m · Tn + 4 · Tn",
                     "runtime/zero/stage_1_and_2.py step (flatten(averaged_gradients), .to(fp32))", on * (s.bm + 4) * s.Tn);
    m.optimizer = make("step: fp32 gradient + optimizer temporary", "4 · Tn + T · Tn (grads_in_partition freed)",
                       "runtime/zero/stage_1_and_2.py step (free_grad_in_param_list, _optimizer_step)", on * (4 + T) * s.Tn);
    m.overflow_check = make("step: overflow check of the largest slice", "11 · Lp, Lp = min(L, Tn) (fp16/bf16)",
                            "runtime/zero/stage_1_and_2.py _has_inf_or_nan, get_grad_norm_direct (.double())",
                            s.half ? on * 11 * largest_slice(s) : 0);
    return m;
}

StepMoments zero3_step(const Sizes& s) {
    StepMoments m;
    const uint64_t T = step_temporary_bytes_per_element(s.kernel);
    const uint64_t on = s.offload_optimizer ? 0 : 1;
    m.flatten = make("step: sub-group flat gradient + fp32 cast", "(b_a + 4) · sub",
                     "runtime/zero/stage3.py _prepare_fp32_grad_for_sub_group", on * (s.ba + 4) * s.sub);
    m.optimizer = make("step: sub-group fp32 gradient + optimizer temporary", "4 · sub + T · sub",
                       "runtime/zero/stage3.py _optimizer_step (one sub-group's fp32 flat), _release_sub_group",
                       on * (4 + T) * s.sub);
    if (s.offload_optimizer && s.partial_gpu_numel > 0)
        m.optimizer = make("step: torch AdamW temporary of one GPU sub-group (partial offload)",
                           "T_torch · the largest GPU sub-group",
                           "runtime/zero/stage3.py _optimizer_step (backup_optimizer.step on a GPU sub-group)",
                           s.partial_gpu_step_temporary * s.partial_gpu_largest);
    m.overflow_check = make("step: overflow check", "0 (on the flat gradient buffer)", kZ3, 0);
    return m;
}

Term zero3_init_gradient_buffer(const Sizes& s) {
    return make("init: fp32 gradient_buffer of the largest sub-group", "4 · sub (freed before the IPG bucket)",
                "runtime/zero/stage3.py initialize_optimizer_states", s.offload_optimizer ? 0 : 4 * s.sub);
}

StepMoments zero0_step(const Sizes& s) {
    StepMoments m;
    const uint64_t T = step_temporary_bytes_per_element(s.kernel);
    if (s.half) {
        m.flatten = make("step: per-parameter fp32 grads + their flattening", "4 · Ψ_t + 4 · Ψ_t (16-bit grads alive)",
                         "runtime/fp16/fused_optimizer.py step", 8 * s.Tr);
        m.optimizer = make("step: flat fp32 gradient + optimizer temporary", "4 · Ψ_t + T · Ψ_t (p.grad = None)",
                           "runtime/fp16/fused_optimizer.py step", (4 + T) * s.Tr);
    } else {
        m.optimizer = make("step: optimizer temporary", "T · Ψ_t (fp32 grads alive)", "torch.optim step", T * s.Tr);
        m.gradients_live_at_optimizer = true;
    }
    m.overflow_check = make("step: overflow check", "0", kFp16, 0);
    return m;
}

StepMoments bf16_optimizer_step(const Sizes& s) {
    StepMoments m;
    const uint64_t T = step_temporary_bytes_per_element(s.kernel);
    // step: param_partition.grad = grad_partition.to(fp32) when the buffer is
    // not fp32 (bf16 accumulation at stage 0 under a pipeline), kept through
    // optimizer.step() and set to None after it.
    const uint64_t cast = s.ba != 4 ? 4 : 0;
    m.optimizer = make("step: optimizer temporary (+ fp32 copy of the gradient partition if b_a != 4)",
                       "T · Tn (+ 4 · Tn)", "runtime/bf16_optimizer.py step", (T + cast) * s.Tn);
    m.gradients_live_at_optimizer = true;
    m.overflow_check = make("step: overflow check", "0", kBf16, 0);
    return m;
}

uint64_t power_of_two_ceil(uint64_t bytes) {
    if (bytes <= 1) return bytes;
    uint64_t p = 1;
    while (p < bytes) p <<= 1;
    return p;
}

namespace {
// DeepNVMe buffers are multiples of the aio block (1024 B x
// intra_op_parallelism 1) in elements (swap_tensor/utils.py).
uint64_t align_aio_elems(uint64_t numel, uint64_t elem_bytes) {
    const uint64_t unit = 1024 / elem_bytes;
    return (numel + unit - 1) / unit * unit;
}

HostTerm host(const char* name, const char* formula, const char* source, uint64_t bytes, bool pinned,
              HostLife life, bool once = false) {
    HostTerm t;
    t.name = name;
    t.formula = formula;
    t.source = source;
    t.bytes = bytes;
    t.pinned = pinned;
    t.life = life;
    t.once_per_node = once;
    return t;
}

// ZeRO-1/2 with offload_optimizer cpu (stage_1_and_2.py), one parameter group.
void zero12_offload_host(const Sizes& s, std::vector<HostTerm>& v) {
    auto pin = [&](uint64_t b, bool pinned) { return pinned && s.round_pinned ? power_of_two_ceil(b) : b; };
    const uint64_t Tn = s.Tn;
    v.push_back(host("fp32 master (single_partition_of_fp32_groups)", "PowerOf2Ceil(4 · Tn) pinned, else 4 · Tn",
                     "runtime/zero/stage_1_and_2.py __init__ (weights_partition pinned)", pin(4 * Tn, s.master_pinned),
                     s.master_pinned, HostLife::init));
    if (s.master_pinned)
        v.push_back(host("fp32 master's pageable source beside its pinned copy", "4 · Tn (load only)",
                         "runtime/zero/stage_1_and_2.py __init__ (.to(cpu).clone().float(), then pin_memory)", 4 * Tn,
                         false, HostLife::load_transient));
    v.push_back(host("fp32 gradient partition", "PowerOf2Ceil(4 · Tn) pinned",
                     "runtime/zero/stage_1_and_2.py initialize_optimizer_states", pin(4 * Tn, s.grads_pinned),
                     s.grads_pinned, HostLife::init));
    if (s.bit16_staging)
        v.push_back(host("16-bit parameter staging (param_buffer_of_bit16_for_cpu_offload_groups)",
                         "PowerOf2Ceil(b_m · Tn) pinned", "runtime/zero/stage_1_and_2.py __init__ (temp_pinned)",
                         pin(s.bm * Tn, s.pin_optimizer), s.pin_optimizer, HostLife::init));
    // initialize_optimizer_states pins the fp32 gradient from a pageable
    // torch.zeros that lives until the function returns, while __init__'s
    // local temp_buffer_bit16 (the staging buffer's pageable torch.full
    // source) is still alive: both at once, on top of every init buffer.
    const uint64_t sources = (s.grads_pinned ? 4 * Tn : 0) + (s.bit16_staging && s.pin_optimizer ? s.bm * Tn : 0);
    if (sources > 0)
        v.push_back(host("pageable sources of the fp32 gradient and 16-bit staging pinned copies",
                         "4 · Tn (fp32 gradient pinned) + b_m · Tn (staging pinned) (load only)",
                         "runtime/zero/stage_1_and_2.py initialize_optimizer_states (single_grad_partition), "
                         "__init__ (temp_buffer_bit16)",
                         sources, false, HostLife::load_transient));
    v.push_back(host("temp_grad_buffer_for_cpu_offload", "PowerOf2Ceil(b_m · L) pinned",
                     "runtime/zero/stage_1_and_2.py __init__", pin(s.bm * s.L, s.pin_optimizer), s.pin_optimizer,
                     HostLife::init));
    if (s.grad_accum > 1) {
        const double raw = double(s.bm * Tn);
        const uint64_t b = s.pin_optimizer && s.round_pinned ? uint64_t(raw * s.per_param_rounding + 0.5) : uint64_t(raw);
        v.push_back(host("accumulation buffers, one per parameter (buffer_to_accumulate_to_in_cpu)",
                         "Σ_p PowerOf2Ceil(b_m · numel_p) ≈ b_m · Tn · (mean per-parameter rounding)",
                         "runtime/zero/stage_1_and_2.py async_accumulate_grad_in_cpu_via_gpu", b, s.pin_optimizer,
                         HostLife::backward));
    }
}

// The largest moment of stage3.py initialize_optimizer_states and
// _setup_for_real_optimizer above the finished init buffers, bytes. The
// fp32 gradient_buffer of the largest sub-group (4 · S) lives through
// initialize_optimizer_states, which pins each sub-group's gradient from a
// pageable torch.zeros (4 · n_i beside its pinned copy); the function
// returns (gradient_buffer freed) before grad_partitions_flat_buffer exists,
// which is then pinned from its own pageable zeros (b_a · Tn). So the first
// moment lacks the grad flat buffer (and any later sub-group's pinned
// gradient), the second has only the b_a · Tn source.
// `sub_group_grads`: offload_optimizer cpu (each sub-group's gradient is its
// own buffer); with nvme they are views of gradient_buffer.
uint64_t zero3_init_gradient_transient(const Sizes& s, uint64_t S, uint64_t full, uint64_t rest, bool sub_group_grads) {
    auto pin = [&](uint64_t b) { return s.pin_optimizer && s.round_pinned ? power_of_two_ceil(b) : b; };
    const int64_t grad_flat = static_cast<int64_t>(pin(s.ba * s.Tn));
    const int64_t src = s.pin_optimizer && sub_group_grads ? 1 : 0;
    const int64_t S4 = static_cast<int64_t>(4 * S);
    const uint64_t last = rest ? rest : S;
    // Before DeepSpeed 0.13.2 the loop steps each sub-group right after
    // pinning its gradient: its CPU Adam states (part of init then) come after.
    const int64_t states = s.lazy_cpu_adam_states ? 0 : static_cast<int64_t>(s.optimizer_state_bytes);
    int64_t m = S4 + src * static_cast<int64_t>(4 * last) - grad_flat - states * static_cast<int64_t>(last);
    m = std::max(m, S4 - grad_flat);  // the loop's end: gradient_buffer still alive
    if (rest && full && sub_group_grads)  // the last full sub-group, before the rest's pinned gradient
        m = std::max(m, S4 + src * S4 - grad_flat - static_cast<int64_t>(pin(4 * rest)) -
                            states * (S4 / 4 + static_cast<int64_t>(rest)));
    if (s.pin_optimizer) m = std::max<int64_t>(m, static_cast<int64_t>(s.ba * s.Tn));
    return static_cast<uint64_t>(std::max<int64_t>(0, m));
}

// ZeRO-3 with offload_optimizer cpu (stage3.py).
// With partial offload only the host sub-groups (the last ones: Tn minus
// partial_gpu_numel elements) are counted here.
void zero3_offload_host(const Sizes& s, std::vector<HostTerm>& v) {
    auto pin = [&](uint64_t b) { return s.pin_optimizer && s.round_pinned ? power_of_two_ceil(b) : b; };
    uint64_t S = std::max<uint64_t>(1, std::min(s.sub_group_size, s.Tn));
    const uint64_t Th = s.Tn - std::min(s.Tn, s.partial_gpu_numel);  // host elements
    uint64_t full = Th / S, rest = Th % S;
    uint64_t grads = full * pin(4 * S) + (rest ? pin(4 * rest) : 0);
    const bool walked = !s.sub_groups.empty() && s.partial_gpu_sub_groups < s.sub_groups.size();
    if (walked) {  // the host's sub-groups in parameter order: the largest sizes gradient_buffer, the last is the rest
        const auto first = s.sub_groups.begin() + static_cast<std::ptrdiff_t>(s.partial_gpu_sub_groups);
        S = *std::max_element(first, s.sub_groups.end());
        grads = 0;
        for (auto it = first; it != s.sub_groups.end(); ++it) grads += pin(4 * *it);
        rest = s.sub_groups.back() == S ? 0 : s.sub_groups.back();
        full = static_cast<uint64_t>(s.sub_groups.end() - first) - (rest ? 1 : 0);
    }
    v.push_back(host("fp32 master partitions", s.partial_gpu_numel ? "4 · host elements (pageable)" : "4 · Tn (pageable)",
                     "runtime/zero/stage3.py _create_fp32_partitions", 4 * Th, false, HostLife::init));
    // The conversion copy exists before any fp32 gradient (>= 4 · sub) is
    // made, so it never raises the load peak above the finished init buffers.
    v.push_back(host("fp32 master conversion + clone of one sub-group",
                     "0 (4 · sub, but before the fp32 gradients of at least 4 · sub exist)",
                     "runtime/zero/stage3.py _create_fp32_partitions (.to(cpu, fp32), .clone())", 0, false,
                     HostLife::load_transient));
    v.push_back(host("fp32 gradients, one pinned buffer per sub-group",
                     walked ? "Σ_i PowerOf2Ceil(4 · n_i), n_i each sub-group in parameter order (closed once it "
                              "reaches sub_group_size)"
                            : "Σ_i PowerOf2Ceil(4 · n_i), n_i = sub_group_size (the last the rest)",
                     "runtime/zero/stage3.py initialize_optimizer_states, _create_fp16_sub_groups", grads,
                     s.pin_optimizer, HostLife::init));
    v.push_back(host("init gradient_buffer of the largest sub-group + pageable sources of the pinned copies",
                     "max(4 · sub + 4 · n_last (pinned) - grad flat, pinned grad flat's source b_a · Tn) (load only)",
                     "runtime/zero/stage3.py initialize_optimizer_states (gradient_buffer freed at its end), "
                     "_setup_for_real_optimizer (grad_partitions_flat_buffer after it)",
                     zero3_init_gradient_transient(s, S, full, rest, true), false, HostLife::load_transient));
}
}  // namespace

// Host terms of optimizer offload (CPU states or NVMe swap buffers) and the
// stage-3 pinned gradient flat buffer, appended to v.
static void optimizer_offload_host_terms(const Sizes& s, std::vector<HostTerm>& v) {
    auto torch_pin = [&](uint64_t b, bool pinned) { return pinned && s.round_pinned ? power_of_two_ceil(b) : b; };
    const bool z12 = s.stage == 1 || s.stage == 2;
    if (s.offload_optimizer_cpu) {
        if (z12) zero12_offload_host(s, v);
        else zero3_offload_host(s, v);
        v.push_back(host(s.optimizer_state_bytes == 8 ? "CPU Adam m and v" : "CPU optimizer states",
                         "optimizer bytes · Tn (pageable)", "ops/adam/cpu_adam.py step (zeros_like, lazy)",
                         s.partial_gpu_numel > 0
                             ? s.optimizer_state_bytes * (s.Tn - std::min(s.Tn, s.partial_gpu_numel))
                             : (s.optimizer_state_partition > 0 ? s.optimizer_state_partition
                                                                : s.optimizer_state_bytes * s.Tn),
                         false,
                         s.lazy_cpu_adam_states ? HostLife::lazy : HostLife::init));
        if (s.cpu_adam_tile_buffer)
            v.push_back(host("DeepSpeedCPUAdam tile buffers", "2 · 128 Mi · 4 B (exact, cudaMallocHost)",
                             "csrc/includes/cpu_adam.h _doubled_buffer (DeepSpeed < 0.14.3)", 1073741824ull, true,
                             HostLife::init));
        if (s.cpu_adam_tile_buffer) v.back().built_before_zero_optimizer = true;  // engine.py _configure_basic_optimizer
    } else if (s.offload_optimizer_nvme) {
        // The largest sub-group sizes every swap buffer (SwapBufferManager, largest_numel).
        const uint64_t S = s.sub_groups.empty() ? std::min(s.sub_group_size, s.Tn)
                                                : *std::max_element(s.sub_groups.begin(), s.sub_groups.end());
        v.push_back(host("optimizer NVMe swap buffers", "buffer_count · align(largest sub-group) · 4 (exact, DeepNVMe)",
                         "runtime/swap_tensor/optimizer_utils.py OptimizerSwapper, utils.py SwapBufferManager",
                         uint64_t(s.offload_optimizer_buffer_count) * align_aio_elems(S, 4) * 4, true, HostLife::init));
        // gradient_buffer is freed when initialize_optimizer_states returns
        // (the swapped sub-groups' .grad set to None by
        // _optimizer_states_and_gradient_swap_out), before
        // grad_partitions_flat_buffer exists.
        v.push_back(host("init gradient_buffer of the largest sub-group",
                         "max(4 · sub - grad flat, pinned grad flat's source b_a · Tn) (load only)",
                         "runtime/zero/stage3.py initialize_optimizer_states, _setup_for_real_optimizer",
                         zero3_init_gradient_transient(s, S, 0, 0, false), false, HostLife::load_transient));
    }
    if (s.stage == 3 && (s.offload_optimizer_cpu || s.offload_optimizer_nvme))
        v.push_back(host("grad_partitions_flat_buffer", "PowerOf2Ceil(b_a · Tn) pinned",
                         "runtime/zero/stage3.py _setup_for_real_optimizer",
                         torch_pin(s.ba * s.Tn, s.pin_optimizer), s.pin_optimizer, HostLife::init));
}

// Host terms of parameter offload (CPU flat buffer and zero.Init's partitions,
// or the NVMe swap pool), appended to v; opt_host: the optimizer is offloaded.
static void param_offload_host_terms(const Sizes& s, bool opt_host, std::vector<HostTerm>& v) {
    auto torch_pin = [&](uint64_t b, bool pinned) { return pinned && s.round_pinned ? power_of_two_ceil(b) : b; };
    if (s.offload_param_cpu) {
        const uint64_t b = s.bm * s.Tn + s.frozen_bytes_rank;
        // get_accelerator().pin_memory(torch.empty(...)) whatever
        // offload_param.pin_memory says.
        v.push_back(host("16-bit parameter flat buffer", "PowerOf2Ceil(b_m · Ψ/N_d) pinned (always)",
                         "runtime/zero/stage3.py _create_param_groups_fp16_flat_cpu_memory", torch_pin(b, true),
                         true, HostLife::init));
        // Without pin_memory zero.Init's partitions are pageable and freed by
        // _move_to_flat_buffer only after the flat buffer exists.
        // (before the optimizer's host buffers: above the finished init
        // buffers only without optimizer offload, whose fp32 master or swap
        // pool and grad flat buffer exceed it).
        if (!s.pin_param)
            v.push_back(host("zero.Init's pageable partitions beside the flat buffer",
                             opt_host ? "0 (b_m · Ψ/N_d, before the optimizer's host buffers)" : "b_m · Ψ/N_d (load only)",
                             "runtime/zero/partition_parameters.py _partition_param (torch.empty on the CPU); "
                             "stage3.py _move_to_flat_buffer", opt_host ? 0 : b, false, HostLife::load_transient));
        // Also without zero.Init: parameter_offload.py
        // _convert_to_zero_parameters partitions through Init(module=...).
        // Before torch 1.11 the blocks are exact but cached all the same
        // (CachingHostAllocator's free list predates the rounding).
        if (s.pin_param && (s.round_pinned ? s.zero_init_partition_blocks > 0 : b > 0))
            v.push_back(host("zero.Init's per-parameter pinned partitions left in PyTorch's host cache",
                             s.round_pinned ? "Σ_p PowerOf2Ceil(b_m · ceil(numel_p / N_d))" : "b_m · Ψ/N_d (torch < 1.11: exact)",
                             "runtime/zero/partition_parameters.py _partition_param (pin_memory per parameter); "
                             "stage3.py _move_to_flat_buffer drops them; no host empty_cache",
                             s.round_pinned ? s.zero_init_partition_blocks : b, true, HostLife::init));
        zeropp_host_terms(s, v);
    } else if (s.offload_param_nvme) {
        v.push_back(host("parameter NVMe swap pool", "buffer_count · align(buffer_size) · b_m (exact, DeepNVMe)",
                         "runtime/swap_tensor/partitioned_param_swapper.py",
                         uint64_t(s.offload_param_buffer_count) * align_aio_elems(s.offload_param_buffer_size, s.bm) * s.bm,
                         true, HostLife::init));
        v.back().during_zero_init = true;  // AsyncPartitionedParameterSwapper, made by partition_parameters.py Init
        v.push_back(host("parameters kept in CPU memory (max_in_cpu)", "PowerOf2Ceil(min(max_in_cpu, Ψ/N_d) · b_m) pinned",
                         "runtime/swap_tensor/partitioned_param_swapper.py", torch_pin(std::min(s.offload_param_max_in_cpu, s.Pn) * s.bm, true),
                         true, HostLife::init));
    }
}

std::vector<HostTerm> host_terms(const Sizes& s, uint64_t module_state_bytes, uint64_t largest_gpu_optimizer_tensor,
                                 bool gather_16bit_on_save, uint64_t gathered_state_bytes) {
    std::vector<HostTerm> v;
    v.reserve(24);  // room for the longest lists the settings give: one allocation per estimate
    const bool opt_host = s.offload_optimizer_cpu || s.offload_optimizer_nvme;  // the optimizer's buffers are on the host
    optimizer_offload_host_terms(s, v);
    param_offload_host_terms(s, opt_host, v);
    if (s.zero12_cpu_flatten)
        v.push_back(host("16-bit parameters copied to the CPU and flattened there", "2 · b_m · Ψ_t (load only)",
                         "runtime/zero/stage_1_and_2.py __init__ (param.cpu_data, flatten_dense_tensors_aligned "
                         "use_cpu_data; on the GPU from 0.18.7 when it fits)",
                         2 * s.bm * s.Tr, false, HostLife::load_transient));
    if (s.zero12_cpu_flatten) v.back().before_init = true;  // the first loop of __init__, before weights_partition
    // defragment runs before the optimizer's host buffers exist: above the
    // finished init buffers only when there are none (no optimizer offload);
    // with offload the fp32 master (4 · Tn) or the swap pool and the grad
    // flat buffer exceed it.
    if (s.stage == 3 && s.zero_init && !s.offload_param_cpu && !s.offload_param_nvme)
        v.push_back(host("defragment staging of the 16-bit partitions",
                         opt_host ? "0 (b_m · Tn + frozen, before the optimizer's host buffers)" : "b_m · Tn + frozen (pageable, load only)",
                         "runtime/zero/utils.py defragment (cpu_buffer); stage3.py _create_fp16_partitions_with_defragmentation",
                         opt_host ? 0 : s.bm * s.Tn + s.frozen_bytes_rank, false, HostLife::load_transient));
    if (s.stage <= 2)
        v.push_back(host("checkpoint writer's CPU clone of the module state", "b_m · Ψ + frozen (one rank per node)",
                         "runtime/engine.py _save_checkpoint (clone_tensors_for_torch_save)", module_state_bytes, false,
                         HostLife::save_transient, true));
    if (largest_gpu_optimizer_tensor > 0)
        v.push_back(host("torch.save's host copy of the largest GPU optimizer tensor", "4 · (Tn, or sub at stage 3)",
                         "torch.save of GPU storages (engine.py _save_zero_checkpoint)", largest_gpu_optimizer_tensor,
                         false, HostLife::save_transient));
    if (gather_16bit_on_save) {
        v.push_back(host("consolidated 16-bit state dict on rank 0", "b_m · Ψ (one rank)",
                         "runtime/engine.py _zero3_consolidated_16bit_state_dict", gathered_state_bytes, false,
                         HostLife::save_transient, true));
        v.back().rank0_only = true;  // state_dict = OrderedDict() if dist.get_rank() == 0 else None
    }
    return v;
}

}  // namespace terms
}  // namespace zeromem
