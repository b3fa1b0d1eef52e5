// ZeRO-3's backward after the loss is the larger of two moments (estimate_backward.cpp
// zero3_backward_peak), worked out by hand for llama-2-7b on 8 GPUs, bf16, seq 2048, flash attention,
// no checkpointing, DeepSpeed's defaults (reduce_bucket_size 5e8, stage3_max_live_parameters 1e9).
//  - The LM head's backward: the stored activations, the logits' gradient bound (b_m + 8)·n, and the
//    temporaries kept from the forward (the IPG bucket, stage3.py _setup_for_real_optimizer; the
//    look-ahead's gathered parameters with the LM head kept from its forward,
//    partitioned_param_coordinator.py __params_to_release) plus the LM head's weight gradient, which its
//    MmBackward0 computes beside the logits' gradient.
//  - The blocks' backward: the logits' gradient freed (autograd releases a node's inputs once it ran),
//    every backward temporary: also the all-gather's cat copy (partition_parameters.py
//    AllGatherCoalescedHandle.wait) and reduce_scatter_coalesced's cat (coalesced_collectives.py), which run
//    only when a block's hooks fire (stage3.py reduce_independent_p_g_buckets_and_remove_grads reduces a
//    bucket when the next gradient would overflow it).
// L = 32000 x 4096 = 131,072,000 (the embedding, the largest module); a block's modules average under
// stage3_prefetch_bucket_size, so the look-ahead fills to max_live: (1e9 + L) x 2, in the forward's count and
// the backward's alike (terms.cpp zero3_gathered_params).
#include "estimate_inputs.h"
#include "zeromem/estimate.h"

#include <gtest/gtest.h>

namespace {

using namespace zeromem;

EstimateInput llama(int64_t micro_batch) {
    EstimateInput in = testinputs::preset_input("llama-2-7b", 8, 3, Dtype::bf16);
    in.train.seq_len = 2048;
    in.train.micro_batch = micro_batch;
    in.train.flash_attention = true;
    return in;
}

constexpr uint64_t L = 131072000, ipg = 500000000ull * 2, rs_cat = 500000000ull * 2, cat_copy = L * 2, grad = L * 2;
constexpr uint64_t gathered = (1000000000ull + L) * 2;

// Micro batch 1: n = 2048 x 32000 = 65,536,000 logits; the LM head's moment holds 10n + 8sbh = 722,468,864 B
// of activations beyond the stored ones, less than the blocks' extra temporaries (cat copy + reduce-scatter
// cat = 1,262,144,000 B): the blocks' moment is the backward's, every temporary at once.
TEST(Zero3BackwardMoments, SmallLogitsPeakAtTheBlocks) {
    const Estimate e = estimate(llama(1));
    const PhaseMemory& b = testinputs::phase(e, "backward");
    EXPECT_EQ(b.per_gpu.temporary_buffers, ipg + gathered + cat_copy + grad + rs_cat);
    EXPECT_EQ(b.per_gpu.temporary_buffers, 4786432000u);
}

// Micro batch 2: n = 131,072,000; per block by Korthikanti with the real MLP 37.5 sbh + the two RMSNorms'
// 8 sbh = 45.5 sbh, sbh = 16,777,216: stored 32 x 763,363,328 = 24,427,626,496 B; at the LM head
// + 4sbh (final norm and LM head inputs) + 4sbh (the final RMSNorm's fp32 copy) + 10n = 25,872,564,224 B,
// now above the blocks' moment by more than the cat copy and the reduce-scatter cat: the LM head's moment,
// with the IPG bucket, the forward's look-ahead and the LM head's gradient only.
TEST(Zero3BackwardMoments, LargeLogitsPeakAtTheLmHead) {
    const Estimate e = estimate(llama(2));
    const PhaseMemory& b = testinputs::phase(e, "backward");
    const double sbh = 2048.0 * 2 * 4096, n = 2.0 * 2048 * 32000;
    EXPECT_DOUBLE_EQ(double(b.per_gpu.activations), 32 * 45.5 * sbh + 8 * sbh + 10 * n);
    EXPECT_EQ(b.per_gpu.temporary_buffers, ipg + gathered + grad);
    EXPECT_EQ(b.per_gpu.temporary_buffers, 3524288000u);
}

}  // namespace
