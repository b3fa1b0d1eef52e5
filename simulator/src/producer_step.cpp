// The optimizer step of every stage (producer.h): DeepSpeed v0.19.6
// fp16/fused_optimizer.py, runtime/zero/stage_1_and_2.py and stage3.py step,
// with the optimizer's state and temporary.
#include "producer.h"

#include "zeromem/optimizer_state.h"

namespace zeromem::sim::detail {

void Producer::adam_state_and_temporary(uint64_t numel, bool first, uint32_t m) {
    if (first) {
        // torch.optim / FusedAdam state, created at the first step.
        const Optimizer o = in_.train.optimizer;
        if (o == Optimizer::sgd) {
            moments_.push_back(alloc("momentum_buffer", 4 * numel, Stream::compute, m));
        } else if (o != Optimizer::adam && o != Optimizer::adamw) {
            // Other optimizers on the flat partition (estimator
            // optimizer_state.h count_optimizer_state): state1 and state2
            // with their 8-bit absmax. Stage 0's per-tensor shapes are not
            // replayed: one flat tensor.
            const OptimizerStateBytes st = count_optimizer_state(o, flat_tensors(numel, numel));
            if (st.first > 0) moments_.push_back(alloc("state1", st.first, Stream::compute, m));
            if (st.second > 0) moments_.push_back(alloc("state2", st.second, Stream::compute, m));
        } else {
            moments_.push_back(alloc("exp_avg", 4 * numel, Stream::compute, m));
            moments_.push_back(alloc("exp_avg_sq", 4 * numel, Stream::compute, m));
        }
    }
    // torch AdamW's multi-tensor step: an fp32 temporary of the partition
    // (two on torch 2.0); none for fused kernels and SGD. The kernel is the
    // estimator's choice (step_kernel_for, stack_facts.h).
    if (step_temporary_ > 0) release(alloc("optimizer_temporary", step_temporary_ * numel, Stream::compute, m), m);
}

// The step's GPU moments (the estimator's terms::StepMoments): the flat
// gradient copy and its fp32 cast with the 16-bit gradients alive, then the
// optimizer with only the fp32 gradient and its temporary.
void Producer::optimizer_step(bool first) {
    phase_ = Phase::optimizer_step;
    const uint32_t m = root_;
    if (bf16_opt_) {
        bf16_optimizer_step(first);
        return;
    }
    if (stage_ == 0) {
        // fp16/fused_optimizer.py step: per-parameter p.grad.to(fp32) copies
        // and their _flatten_dense_tensors with the 16-bit grads alive; the
        // copies go with the statement, then p.grad = None before the step.
        const uint64_t copies = half_ ? alloc("fp32_gradient_copies", 4 * T_, Stream::compute, m) : 0;
        const uint64_t flat = half_ ? alloc("fp32_flat_gradients", 4 * T_, Stream::compute, m) : 0;
        release(copies, m);
        if (half_) release_full_gradients(m);
        adam_state_and_temporary(T_, first, m);
        release(flat, m);
    } else if (stage_ <= 2) {
        if (!off_opt_) {
            // stage_1_and_2.py step: free_grad_in_param_list(params_not_in_partition),
            // flat_grad_partition = flatten(averaged_gradients), .to(fp32),
            // `del flat_grad_partition`, free_grad_in_param_list(params_in_partition)
            // (the last views of grads_in_partition), then _optimizer_step.
            release_full_gradients(m);
            const uint64_t flat = alloc("flat_gradient_partition", ba_ * Tn_, Stream::compute, m);
            const uint64_t g32 = alloc("fp32_gradient_partition", 4 * Tn_, Stream::compute, m);
            release(flat, m);
            release(grads_in_partition_, m);
            grads_in_partition_ = 0;
            adam_state_and_temporary(Tn_, first, m);
            release(g32, m);
        }
        // all_gather_dp_groups: in place into bit16_groups_flat (no buffer).
    } else if (!off_opt_) {
        // stage3.py _prepare_fp32_grad_for_sub_group, per sub-group:
        // flatten(averaged_gradients).to(fp32) frees the flat copy with the
        // statement (no copy when the gradients are already fp32); the fp32
        // gradient lives to _release_sub_group.
        for (uint64_t sg : sub_groups_) {
            const uint64_t flat = alloc("flat_gradient_sub_group", ba_ * sg, Stream::compute, m);
            uint64_t g32 = flat;
            if (ba_ != 4) {
                g32 = alloc("fp32_gradient_sub_group", 4 * sg, Stream::compute, m);
                release(flat, m);
            }
            adam_state_and_temporary(sg, first, m);
            release(g32, m);
        }
    }
    // stage3.py _post_step: persistent params are all-gathered again from
    // their updated partitions (one flat buffer, replacing param.data).
    if (stage_ == 3 && persistent_padded_ > 0)
        release(alloc("allgather_flat_buffer", bm_ * persistent_padded_, ag_, m), m);
    // zero_grad(set_to_none): what the step left (fp32 training at stage 0,
    // optimizer offload at stages 1/2).
    release_full_gradients(m);
    release(grads_in_partition_, m);
    grads_in_partition_ = 0;
}

void Producer::release_full_gradients(uint32_t m) {
    for (auto& module_grads : full_grads_)
        for (uint64_t& id : module_grads) {
            release(id, m);
            id = 0;
        }
    grads_exist_ = false;
}

}  // namespace zeromem::sim::detail
