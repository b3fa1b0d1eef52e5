// The LM head's logits and the causal-LM cross-entropy (lm_head_loss_bytes), each moment's
// bytes written from the code path it cites:
//  - transformers >= 4.49 loss/loss_utils.py ForCausalLMLoss: logits.float(), labels padded
//    (no logits copy); LlamaForCausalLM.forward holds the 16-bit logits meanwhile;
//  - 4.46-4.48: the same with shift_logits = logits[..., :-1, :].contiguous();
//  - < 4.46 LlamaForCausalLM.forward: logits = logits.float() (the 16-bit logits die), then
//    the shift copy and CrossEntropyLoss;
//  - torch cross_entropy = log_softmax + nll_loss (LossNLL.cpp cross_entropy_loss_symint);
//    LogSoftmaxBackward0 saves its output; NllLossBackward0 and LogSoftmaxBackward0 each
//    allocate an fp32 gradient of the input's shape (nll_loss_backward grad_input,
//    _log_softmax_backward_data).
#include "zeromem/estimate.h"
#include "zeromem/request.h"

#include <gtest/gtest.h>

#include <string>

using namespace zeromem;

namespace {
// llama-3-70b's vocabulary at micro batch 8 x 2048 tokens.
constexpr double b = 8, s = 2048, V = 128256;
constexpr double n = b * s * V, n1 = b * (s - 1) * V;
}  // namespace

TEST(LmHeadLoss, Transformers5HoldsLogitsUpcastAndLogSoftmaxInForward) {
    const LmHeadLossBytes r = lm_head_loss_bytes(2048, 8, 128256, 1, 2, true, false, false);
    EXPECT_EQ(r.forward, uint64_t(n * 2 + n * 4 + n * 4));  // bf16 logits + fp32 upcast + fp32 log-softmax
    // log-softmax output (saved) + NllLossBackward0's fp32 grad + LogSoftmaxBackward0's fp32 grad
    EXPECT_EQ(r.loss_backward, uint64_t(n * 4 * 3));
    EXPECT_EQ(r.loss_backward, 25216155648u);
    // The bound kept for the LM head's matmul backward: (b_m + 8)·n, above the cast moment 4n + 2n.
    EXPECT_EQ(r.head_backward, uint64_t(n * (2 + 8)));
}

TEST(LmHeadLoss, ShiftCopyBefore449) {
    // 4.46-4.48: bf16 logits (held) + fp32 upcast + fp32 shift copy + fp32 log-softmax of the shift.
    const LmHeadLossBytes r = lm_head_loss_bytes(2048, 8, 128256, 1, 2, true, false, true);
    EXPECT_EQ(r.forward, uint64_t(n * 2 + n * 4 + n1 * 4 + n1 * 4));
    EXPECT_EQ(r.loss_backward, uint64_t(n1 * 12));
    // SliceBackward0's zero-padded fp32 grad (4n) beside the shifted one (4·n1): 8.0 n < 10 n.
    EXPECT_EQ(r.head_backward, uint64_t(n * 10));
}

TEST(LmHeadLoss, ModelForwardUpcastBefore446FreesThe16BitLogits) {
    // < 4.46: the 16-bit logits die at the upcast: max(2n + 4n, fp32 logits 4n + copy 4·n1 + log-softmax 4·n1).
    const LmHeadLossBytes r = lm_head_loss_bytes(2048, 8, 128256, 1, 2, true, true, true);
    EXPECT_EQ(r.forward, uint64_t(n * 4 + n1 * 4 + n1 * 4));
    EXPECT_EQ(r.loss_backward, uint64_t(n1 * 12));
}

TEST(LmHeadLoss, Fp32ModelHasNoUpcastCopy) {
    // .float() of an fp32 tensor returns it: fp32 logits + log-softmax; backward 12n as in 16 bits.
    const LmHeadLossBytes r = lm_head_loss_bytes(2048, 8, 128256, 1, 4, false, false, false);
    EXPECT_EQ(r.forward, uint64_t(n * 4 + n * 4));
    EXPECT_EQ(r.loss_backward, uint64_t(n * 12));
}

// The estimate of the 70B plan's winner (ZeRO-3, optimizer offload, full checkpointing, micro
// batch 8) carries the cross-entropy's backward as its own --explain term, 12 x b·s·V bytes.
TEST(LmHeadLoss, ExplainNamesTheCrossEntropyBackward) {
    Request r;
    r.model = "llama-3-70b";
    r.gpus = 16;
    r.nodes = 2;
    r.stage = 3;
    r.offload_optimizer = "cpu";
    r.checkpointing = "full";
    r.micro_batch = 8;
    r.grad_accum = 2;
    r.stack = "defaults";
    const Resolved res = resolve_request(r, ZEROMEM_SOURCE_DATA_DIR);
    const Estimate e = estimate(res.input, true);
    bool found = false;
    for (const auto& t : e.terms)
        if (t.component == "activations: LM head and loss (cross-entropy backward)") {
            found = true;
            EXPECT_EQ(t.bytes, uint64_t(n * 12));
        }
    EXPECT_TRUE(found);
}
