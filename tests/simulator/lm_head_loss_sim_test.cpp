// The simulator's replay of the LM head and the causal-LM loss (producer.cpp loss_forward,
// loss_backward), byte counts written from the code path: transformers loss/loss_utils.py
// ForCausalLMLoss (logits.float(); from 4.49 the labels are padded, before it
// shift_logits = logits[..., :-1, :].contiguous()), torch cross_entropy = log_softmax +
// nll_loss (LossNLL.cpp cross_entropy_loss_symint), LogSoftmaxBackward0 saving its output,
// NllLossBackward0 and LogSoftmaxBackward0 each allocating an fp32 gradient of the input's
// shape; the HF Trainer drops the model's output before backward.
#include "zeromem/estimate.h"
#include "zeromem/request.h"
#include "zeromem/simulator.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

using namespace zeromem;

namespace {

constexpr uint64_t kB = 8, kS = 2048, kV = 128256;
constexpr uint64_t kN = kB * kS * kV;

/// The 70B plan winner's request (16 x H100-80GB, the emitted config, full checkpointing) at `stack`.
Request plan_winner_request(const std::string& stack) {
    Request r;
    r.model = "llama-3-70b";
    r.gpus = 16;
    r.nodes = 2;
    r.gpu = "H100-80GB";
    r.ds_config = std::string(ZEROMEM_TEST_DATA_DIR) + "/plan_llama3_70b_16xh100.json";
    r.checkpointing = "full";
    r.stack = stack;
    return r;
}

Resolved plan_winner(const char* transformers) {
    return resolve_request(plan_winner_request(std::string("deepspeed=0.19.6,torch=2.8,transformers=") + transformers),
                           ZEROMEM_SOURCE_DATA_DIR);
}

int64_t live_at(const sim::SimResult& s, size_t at, std::initializer_list<const char*> names) {
    int64_t live = 0;
    for (size_t t = 0; t <= at && t < s.timeline.size(); ++t)
        for (const char* n : names)
            if (std::string(s.timeline[t].term) == n) live += s.timeline[t].bytes;
    return live;
}

// The largest single request of `term`.
int64_t largest(const sim::SimResult& s, const char* term) {
    int64_t m = 0;
    for (const auto& p : s.timeline)
        if (std::string(p.term) == term && p.bytes > m) m = p.bytes;
    return m;
}

}  // namespace

// transformers 5.0: at the peak (LogSoftmaxBackward0's output) the saved log-softmax, the
// NLL gradient and the log-softmax input's gradient, 3 x 4 x b·s·V, are live, and neither
// the 16-bit logits nor their fp32 upcast (freed when the loss and the model returned).
TEST(SimLmHeadLoss, CrossEntropyBackwardIsThePeak) {
    const sim::SimResult s = sim::simulate(plan_winner("5.0").input, sim::SimOptions{});
    EXPECT_EQ(s.peak_event, "logits_grad_fp32");
    EXPECT_EQ(s.peak_module, "lm_head");
    EXPECT_EQ(live_at(s, s.peak_allocated_t, {"log_softmax", "nll_loss_grad_fp32", "logits_grad_fp32"}),
              int64_t(12 * kN));
    EXPECT_EQ(live_at(s, s.peak_allocated_t, {"logits", "logits_fp32", "logits_grad"}), 0);
    EXPECT_EQ(largest(s, "logits"), int64_t(2 * kN));
    EXPECT_EQ(largest(s, "shift_logits_fp32"), 0);
}

// transformers 4.47: the shift's contiguous fp32 copy of b·(s-1)·V and the log-softmax of it.
TEST(SimLmHeadLoss, ShiftCopyBefore449) {
    const sim::SimResult s = sim::simulate(plan_winner("4.47").input, sim::SimOptions{});
    const uint64_t n1 = kB * (kS - 1) * kV;
    EXPECT_EQ(largest(s, "shift_logits_fp32"), int64_t(4 * n1));
    EXPECT_EQ(largest(s, "log_softmax"), int64_t(4 * n1));
    // SliceBackward0's zero-padded gradient of the full logits.
    EXPECT_EQ(largest(s, "logits_grad_fp32"), int64_t(4 * kN));
}

// The 70B plan's winner (`zeromem plan --model llama-3-70b --gpus 16 --nodes 2 --gpu
// H100-80GB --network ib-ndr400`: ZeRO-3 + optimizer offload, full checkpointing, micro batch
// 8 x accumulation 2, overlap_comm off, reduce bucket 16777216; tests/data/
// plan_llama3_70b_16xh100.json is its emitted config): a 128256 vocabulary at 8 x 2048 tokens
// makes the LM head and the loss the peak. Both readings count the cross-entropy's backward,
// 12 x b·s·V bytes (the saved log-softmax, NllLossBackward0's and LogSoftmaxBackward0's fp32
// gradients; tests/lm_head_loss_test.cpp and the tests above), with the 80 checkpoints
// (80 x 2sbh) and the 16-bit partition; peak allocated within 5%.
TEST(SimLmHeadLoss, Llama3_70bPlanWinnerAgreesWithTheEstimateWithinFivePercent) {
    Request r = plan_winner_request("defaults");
    r.cuda_context = "0";
    r.nccl_buffers = "0";
    r.cublas_workspace = "0";
    r.fragmentation = 0.0;
    const Resolved res = resolve_request(r, ZEROMEM_SOURCE_DATA_DIR);
    const Estimate e = estimate(res.input);
    const sim::SimResult s = sim::simulate(res.input, sim::SimOptions{});
    EXPECT_EQ(s.peak_module, "lm_head");
    EXPECT_EQ(e.peak_phase, "backward");
    const double sbV4 = 8.0 * 2048 * 128256 * 4;
    EXPECT_EQ(double(live_at(s, s.peak_allocated_t, {"log_softmax", "nll_loss_grad_fp32", "logits_grad_fp32"})), 3 * sbV4);
    EXPECT_NEAR(double(s.peak_allocated) / double(e.per_gpu.total), 1.0, 0.05)
        << "sim " << double(s.peak_allocated) / 1073741824.0 << " GiB, estimator " << double(e.per_gpu.total) / 1073741824.0 << " GiB";
}
