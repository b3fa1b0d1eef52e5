#include "zeromem/terms.h"

#include <algorithm>

namespace zeromem {
namespace terms {

namespace {
constexpr const char* kZ12 = "DeepSpeed v0.19.6 runtime/zero/stage_1_and_2.py";
constexpr const char* kZ3 = "DeepSpeed v0.19.6 runtime/zero/stage3.py";
constexpr const char* kBf16 = "DeepSpeed v0.19.6 runtime/bf16_optimizer.py";
constexpr const char* kFp16 = "DeepSpeed v0.19.6 runtime/fp16/fused_optimizer.py";

Term make(const char* name, const char* formula, const char* source, uint64_t bytes) {
    Term t;
    t.name = name;
    t.formula = formula;
    t.source = source;
    t.bytes = bytes;
    return t;
}

// MEMORY_OPT_ALLREDUCE_SIZE in engine.py: elements per all-reduce bucket.
constexpr uint64_t kMemoryOptAllreduceSize = 500000000;

// Largest single parameter's slice inside this rank's partition, Lp.
uint64_t largest_slice(const Sizes& s) { return std::min(s.L, s.Tn); }
}  // namespace

uint64_t step_temporary_bytes_per_element(StepKernel k) {
    switch (k) {
        case StepKernel::torch_foreach: return 4;
        case StepKernel::torch_foreach_2_0: return 8;
        case StepKernel::fused:
        case StepKernel::sgd: return 0;
    }
    return 0;
}

Term zero12_backward_gradients(const Sizes& s) {
    if (s.bf16_optimizer)
        return make("autograd param.grad (bf16, full)", "b_m · Ψ_t",
                    "autograd; bf16_optimizer.py update_hp_grads adds them into the fp32 buffer", s.bm * s.Tr);
    if (s.stage == 1) {
        if (s.ba != s.bm)
            return make("param.grad_accum (fp32 accumulation)", "b_a · Ψ_t",
                        "runtime/zero/stage_1_and_2.py _fill_param_grad_accum_attribute (param.grad = None after each hook)",
                        s.ba * s.Tr);
        return make("autograd param.grad (full)", "b_m · Ψ_t",
                    "autograd; reduced after backward by engine.allreduce_gradients -> reduce_gradients", s.bm * s.Tr);
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
    return make("BF16_Optimizer fp32 gradient buffer", "4 · Ψ_t (from init)",
                "runtime/bf16_optimizer.py _setup_for_real_optimizer (fp32_flat_buffer)", s.bf16_optimizer ? 4 * s.Tr : 0);
}

Term zero12_ipg_bucket(const Sizes& s) {
    return make("ipg bucket", s.overlap_comm ? "reduce_bucket_size · b_m · 2 (overlap_comm)" : "reduce_bucket_size · b_m",
                "runtime/zero/stage_1_and_2.py setup_buckets (buf_0, buf_1)", s.bucket * s.bm * (s.overlap_comm ? 2 : 1));
}

Term zero12_allreduce_bucket_flatten(const Sizes& s) {
    const bool on = s.N > 1 && !s.offload_optimizer;
    return make("allreduce_bucket flatten", "reduce_bucket_size · b_m (N_d > 1)",
                "runtime/zero/stage_1_and_2.py average_tensor -> allreduce_and_scatter -> allreduce_bucket (self.flatten(bucket))",
                on ? s.bucket * s.bm : 0);
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
    const bool on = s.bf16_optimizer && s.bc != 4;
    return make("allreduce cast to communication_data_type", "b_c · Ψ_t (fp32 gradient buffer cast)",
                "runtime/engine.py allreduce_bucket (tensor.to(communication_data_type))", on ? s.bc * s.Tr : 0);
}

Term zero3_ipg_bucket(const Sizes& s) {
    return make("ipg bucket (kept from init)", "reduce_bucket_size · b_c (contiguous_gradients)",
                "runtime/zero/stage3.py _setup_for_real_optimizer", s.contiguous_gradients ? s.bucket * s.bc : 0);
}

Term zero3_reduce_scatter_cat(const Sizes& s) {
    const bool on = s.N > 1 && s.reduce_scatter;
    return make("reduce_scatter_coalesced cat", "reduce_bucket_size · b_c (N_d > 1, reduce_scatter)",
                "runtime/comm/coalesced_collectives.py reduce_scatter_coalesced (torch.cat); runtime/zero/stage3.py __avg_scatter_grads",
                on ? s.bucket * s.bc : 0);
}

Term zero3_gathered_params(const Sizes& s, bool backward) {
    uint64_t whole = s.L;
    const bool retain = backward && s.checkpointing && s.layer > 0 && s.max_reuse >= s.layer;
    if (retain) whole = std::max(s.L, std::min(s.layer, s.max_live));
    return make(retain ? "gathered params (decoder layer kept from recompute to backward)" : "gathered params",
                retain ? "max(L, min(layer, stage3_max_live_parameters)) · b_m + min(prefetch, max_live) · b_m"
                       : "L · b_m + min(stage3_prefetch_bucket_size, stage3_max_live_parameters) · b_m",
                "runtime/zero/partitioned_param_coordinator.py _fetch_sub_module_impl, __params_to_release",
                (whole + s.prefetch) * s.bm);
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
    m.optimizer = make("step: optimizer temporary (fp32 grads already there)", "T · Tn",
                       "runtime/bf16_optimizer.py step", T * s.Tn);
    m.gradients_live_at_optimizer = true;
    m.overflow_check = make("step: overflow check", "0", kBf16, 0);
    return m;
}

}  // namespace terms
}  // namespace zeromem
