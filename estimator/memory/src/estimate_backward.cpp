// The backward phase of the full convention: which moment of the backward is
// its peak, and what is alive then.
#include "estimate_detail.h"

#include <algorithm>

namespace zeromem::estimate_detail {

// The model states of `st` with the phase's gradients, activations and
// temporaries; m and v only from the first optimizer step on (the optimizer
// allocates them lazily).
GpuMemory moment(const FullContext& c, const GpuMemory& st, uint64_t grads, bool moments, uint64_t activations_b,
                 uint64_t tmp) {
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
}

// ZeRO-1 with one micro step per optimizer step (gradient_accumulation_steps
// = 1): every backward starts with no gradient. The previous step's
// reduce_gradients copied each param.grad into an IPG bucket and freed it
// (stage_1_and_2.py reduce_gradients -> reduce_ready_partitions_and_remove_grads
// -> reduce_independent_p_g_buckets_and_remove_grads), the epilogue dropped
// the rest (independent_gradient_partition_epilogue -> _clear_param_grad_only)
// and step freed grads_in_partition (free_grad_in_param_list). In the
// backward autograd then creates each param.grad as its module's backward
// runs while PyTorch frees that module's saved activations, so stored
// activations and gradients never peak together: the backward's peak is the
// larger of
//   - the activation peak at the start of the backward (the LM head's): the
//     stored activations beside the first gradient, at most the largest
//     module's min(L, Ψ_t) · b_m (+ its b_a copy in param.grad_accum under fp16 with
//     fp32 accumulation, _fill_param_grad_accum_attribute), and the IPG
//     bucket (contiguous_gradients: every gradient hook runs
//     process_gradients, whose setup_buckets allocates it at the first hook
//     of the backward; released by the boundary's epilogue,
//     _release_ipg_buffers);
//   - the boundary after the backward, every activation freed: all
//     gradients, grads_in_partition, the IPG bucket and the all-reduce
//     flatten (reduce_gradients runs after the backward without overlap_comm;
//     engine.py allreduce_gradients), the flatten in place of the gradients
//     the bucket copy freed (below). With overlap_comm and
//     contiguous_gradients the hooks free each gradient as they copy it
//     into the bucket, so only grads_in_partition is left by then.
// With two or more micro steps the earlier micro steps' gradients are all
// alive from the start of the boundary backward, beside its activations.
bool zero1_backward_starts_without_gradients(const terms::Sizes& s) {
    return s.stage == 1 && !s.bf16_optimizer && s.grad_accum == 1;
}

GpuMemory backward_after_loss(const FullContext& c, const GpuMemory& st, const Activations& act, uint64_t tmp_bwd,
                              bool moments, const Explainer& ex);

// The cross-entropy's backward (Activations::loss_backward): the stored
// activations with the loss's fp32 tensors, the gradients the backward starts
// with and only the temporaries kept from the forward. `grads`: the gradients
// alive then.
GpuMemory loss_backward_moment(const FullContext& c, const GpuMemory& st, const Activations& act, uint64_t grads,
                               bool moments) {
    return moment(c, st, grads, moments, act.loss_backward, sum_bytes(loss_backward_temporaries(c.sz)));
}

GpuMemory larger(const GpuMemory& a, const GpuMemory& b) { return b.total > a.total ? b : a; }

GpuMemory backward_gpu(const FullContext& c, const GpuMemory& st, const Activations& act, uint64_t tmp_bwd,
                       bool moments, const Explainer& ex) {
    const GpuMemory rest = backward_after_loss(c, st, act, tmp_bwd, moments, ex);
    if (act.loss_backward == 0) return rest;
    const uint64_t grads = zero1_backward_starts_without_gradients(c.sz) ? 0 : st.gradients;
    return larger(rest, loss_backward_moment(c, st, act, grads, moments));
}

// ZeRO-3's backward after the loss, two moments. The LM head's backward: the logits' gradient beside
// the temporaries kept from the forward (the IPG bucket, the look-ahead's gathered parameters with the
// LM head kept gathered from its forward, loss_backward_temporaries) and the LM head's weight gradient,
// which its MmBackward0 computes beside the logits' gradient. The blocks' backward: the all-gather's cat
// copy (AllGatherCoalescedHandle.wait), a module's gradient before __add_grad_to_ipg_bucket copies it and
// reduce_scatter_coalesced's cat run as each block's hooks fire, after the LM head's nodes have freed
// the logits' gradient (autograd releases a node's inputs once it ran): every backward temporary beside
// the stored activations and one recomputed layer.
GpuMemory zero3_backward_peak(const FullContext& c, const GpuMemory& st, const Activations& act, uint64_t tmp_bwd,
                              bool moments) {
    const uint64_t at_head = sum_bytes(loss_backward_temporaries(c.sz)) + terms::zero3_module_grad(c.sz).bytes;
    const GpuMemory head = moment(c, st, st.gradients, moments, act.head_backward, std::min(at_head, tmp_bwd));
    const GpuMemory blocks = moment(c, st, st.gradients, moments, act.layer_backward, tmp_bwd);
    return larger(blocks, head);
}

GpuMemory backward_after_loss(const FullContext& c, const GpuMemory& st, const Activations& act, uint64_t tmp_bwd,
                              bool moments, const Explainer& ex) {
    const terms::Sizes& sz = c.sz;
    if (zero1_backward_starts_without_gradients(sz)) {
        const uint64_t first_grad = std::min(sz.L, sz.Tr) * (sz.bm + (sz.ba != sz.bm ? sz.ba : 0));
        const uint64_t persist = sum_bytes(persistent_temporaries(sz));
        const uint64_t bucket = sz.contiguous_gradients ? terms::zero12_ipg_bucket(sz).bytes : 0;
        const uint64_t boundary_grads =
            sz.overlap_comm && sz.contiguous_gradients ? terms::grads_in_partition(sz).bytes : st.gradients;
        const GpuMemory early = moment(c, st, first_grad, moments, act.backward, persist + bucket);
        // Without overlap_comm and with contiguous_gradients,
        // reduce_independent_p_g_buckets_and_remove_grads copies each
        // parameter no larger than the bucket into the IPG buffer and points
        // param.grad at the copy, freeing its own storage; average_tensor's
        // flatten (allreduce_and_scatter -> allreduce_bucket) copies what the
        // bucket holds, no more than the gradients already freed, so the
        // boundary holds at most all gradients + grads_in_partition + the
        // IPG bucket. (allreduce_and_copy_with_multiple_ranks drops the
        // flatten before reduce_ipg_grads -> copy_grads_in_partition
        // allocates grads_in_partition, so DeepSpeed's peak is lower still by
        // the first bucket's gradients; the bound is kept.)
        const bool flatten_replaces = !sz.overlap_comm && sz.contiguous_gradients && sz.L <= sz.bucket;
        const uint64_t flatten = flatten_replaces ? terms::zero12_allreduce_bucket_flatten(sz).bytes : 0;
        const GpuMemory boundary = moment(c, st, boundary_grads, moments, 0, tmp_bwd - flatten);
        const bool at_boundary = boundary.total >= early.total;
        if (ex.on && !moments)
            ex.note("ZeRO-1 with gradient accumulation 1: each backward starts with no gradient and frees a module's "
                    "activations as its gradients appear, so the backward's peak is the " +
                    std::string(at_boundary ? "boundary" : "activation peak") + " (activation peak: activations " +
                    num(double(act.backward)) + " B + first gradient L · b_m " + num(double(first_grad)) + " B" +
                    (bucket ? " + ipg bucket " + num(double(bucket)) + " B" : std::string()) +
                    "; boundary, no activations: gradients " + num(double(boundary_grads)) + " B + temporaries " +
                    num(double(tmp_bwd - flatten)) + " B" +
                    (flatten ? " (the flatten copies the gradients the bucket copy freed)" : "") +
                    "; stage_1_and_2.py reduce_gradients)");
        return at_boundary ? boundary : early;
    }
    // MoE blocks keep the single bound: their replayed block moment (a packed experts module, larger than
    // stage3_max_live_parameters, gathered and reduced whole) is not reconciled with the terms yet, and
    // the logits' gradient in the bound is what keeps the estimate above the replay there.
    const bool moe = c.in.model.arch && c.in.model.arch->num_experts > 0 && c.in.model.arch->num_moe_layers > 0;
    if (sz.stage == 3 && !sz.bf16_optimizer && !moe) return zero3_backward_peak(c, st, act, tmp_bwd, moments);
    // BF16_Optimizer's all-reduce cast (bf16_optimizer_allreduce_cast) is
    // made after the boundary backward has freed every activation:
    // engine.py _backward_epilogue -> allreduce_gradients ->
    // buffered_allreduce_fallback. The backward is then the larger of the
    // activation peak without the cast and the boundary with it, no activations.
    const uint64_t cast = terms::bf16_optimizer_allreduce_cast(sz).bytes;
    const GpuMemory peak = moment(c, st, st.gradients, moments, act.backward, tmp_bwd - cast);
    if (cast == 0) return peak;
    const GpuMemory boundary = moment(c, st, st.gradients, moments, 0, tmp_bwd);
    return boundary.total >= peak.total ? boundary : peak;
}

}  // namespace zeromem::estimate_detail
