// Acceptance tests of the user cases: verdicts per phase and advice
// (the phase mechanics are in estimate_phase_mechanics_test.cpp).
//
// Every expected value is a published number (the comment names the user
// case and its URL, the paper section or the DeepSpeed file and function)
// or arithmetic written out here
// from such a source. None is a pasted zeromem output. GiB = 2^30 B.
// tests/cases/README.md lists which user cases are asserted and which are
// not, and why.
#include "zeromem/advice.h"
#include "zeromem/setting_flags.h"
#include "zeromem/estimate.h"
#include "zeromem/speed.h"
#include "zeromem/gpu.h"
#include "zeromem/terms.h"
#include "zeromem/model.h"

#include "estimate_inputs.h"
#include "phase_test_helpers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

using namespace zeromem;

namespace {

using testinputs::no_residuals;
using testinputs::params_input;
using testinputs::phase;
using testinputs::preset_input;

constexpr double GiB = 1073741824.0;

using phasetest::add_lora;
using phasetest::ceil_div;
using phasetest::d;

uint64_t gib(double v) { return static_cast<uint64_t>(v * GiB); }

uint64_t allocated(const GpuMemory& m) {
    return m.parameters + m.gradients + m.optimizer_states + m.activations + m.temporary_buffers;
}

// ===========================================================================
// 1. User cases: verdict (resource and first phase) as observed
// ===========================================================================

struct VerdictCase {
    const char* id;
    const char* url;
    std::function<EstimateInput()> build;
    const char* gpu_oom_phase;   // "" = the GPU fits
    const char* host_oom_phase;  // "" = the host fits
};

// Capacities are the case's "hardware" figures. A row is here only when the
// case states the outcome (OOM with its moment, or a run that completed).
const VerdictCase kVerdicts[] = {
    // C02 (LLaMA-7B, 8x V100-32GB, ZeRO-2 fp16, OOM in torch Adam's step)
    // left this table: DeepSpeed v0.19.6 frees the 16-bit
    // gradient partition before optimizer.step (stage_1_and_2.py step,
    // free_grad_in_param_list), so the parameter-only estimate fits; see
    // UserCases.C02_Llama7B_Stage2On8xV100 and tests/cases/README.md.
    // C03: Llama-3-8B, 1x A100-80GB, ZeRO-2 bf16, seq 128, checkpointing:
    // "~46 GB after prepare, ~61 GB after backward, then OOM inside the
    // optimizer step".
    {"C03", "https://github.com/OpenRLHF/OpenRLHF/issues/698",
     [] {
         EstimateInput in = preset_input("llama-3-8b", 1, 2, Dtype::bf16);
         in.train.seq_len = 128;
         in.train.checkpointing = Checkpointing::full;
         in.cluster.gpu_memory = gib(80);
         return in;
     },
     "optimizer_step", ""},
    // C03 with --adam_offload: "Adding Adam offload fixed it".
    {"C03+offload", "https://github.com/OpenRLHF/OpenRLHF/issues/698",
     [] {
         EstimateInput in = preset_input("llama-3-8b", 1, 2, Dtype::bf16);
         in.train.seq_len = 128;
         in.train.checkpointing = Checkpointing::full;
         in.zero.offload_optimizer = OffloadDevice::cpu;
         in.cluster.gpu_memory = gib(80);
         return in;
     },
     "", ""},
    // C08: 13B on 8x A100-80GB, stage 2 and stage 3 both ran (peaks 52.4 and
    // 56.1 GB). dtype not stated; ZeRO training is 16-bit (bf16 here).
    {"C08/z2", "https://github.com/deepspeedai/DeepSpeed/issues/3734",
     [] {
         EstimateInput in = params_input(13000000000, 8, 2, Dtype::bf16);
         in.cluster.gpu_memory = gib(80);
         return in;
     },
     "", ""},
    {"C08/z3", "https://github.com/deepspeedai/DeepSpeed/issues/3734",
     [] {
         EstimateInput in = params_input(13000000000, 8, 3, Dtype::bf16);
         in.cluster.gpu_memory = gib(80);
         return in;
     },
     "", ""},
    // C11: BERT-large (0.34e9), fp16, 4 GPUs, buckets 5e8: both stages ran,
    // using ~8.9 GB (stage 1) and ~9.6 GB (stage 2). A run fits in the
    // memory it was seen to use; the capacity is that reading (10^6-byte MB,
    // the smaller reading of "MB"). No architecture: activations are not
    // counted, so this is a lower-bound check of the verdict.
    {"C11/z1", "https://github.com/deepspeedai/DeepSpeed/issues/1302",
     [] {
         EstimateInput in = params_input(340000000, 4, 1, Dtype::fp16);
         in.train.micro_batch = 32;
         in.train.grad_accum = 32;
         in.cluster.gpu_memory = 8900000000ull;
         return in;
     },
     "", ""},
    {"C11/z2", "https://github.com/deepspeedai/DeepSpeed/issues/1302",
     [] {
         EstimateInput in = params_input(340000000, 4, 2, Dtype::fp16);
         in.train.micro_batch = 32;
         in.train.grad_accum = 32;
         in.cluster.gpu_memory = 9600000000ull;
         return in;
     },
     "", ""},
    // C15: 15.5e9, ZeRO-3, 8x A100-80GB, 500 GB RAM, no zero.Init: "host RAM
    // blew past 500 GB and the process was killed" while loading.
    {"C15", "https://github.com/deepspeedai/DeepSpeed/issues/3722",
     [] {
         EstimateInput in = params_input(15500000000, 8, 3, Dtype::bf16);
         in.model.largest_layer_params = 49152ull * 6144ull;  // illustrative L << P
         in.zero.zero_init = false;
         in.cluster.gpu_memory = gib(80);
         in.cluster.host_memory = 500000000000ull;
         return in;
     },
     "", "load"},
    // C20: 6.7e9 on one RTX 3090, ZeRO-3 NVMe offload of both with the
    // case's pools, ~31 GB host: OOM-killed in host RAM. The phase is where
    // DeepSpeed allocates the pinned pools: at construction
    // (swap_tensor/optimizer_utils.py OptimizerSwapper.__init__ and
    // partitioned_param_swapper.py), i.e. the load phase.
    {"C20", "https://github.com/deepspeedai/DeepSpeed/issues/4571",
     [] {
         EstimateInput in = testinputs::c20_input();
         in.cluster.gpu_memory = gib(24);
         return in;
     },
     "", "load"},
    // C22: frozen 34.3e9 bf16 backbone + 0.91e9 trainable head on 8x
    // A100-80GB: micro batch 1 trains under stage 2 (72.2 GB) and stage 3
    // (12.5 GB).
    {"C22/z2", "https://github.com/TensorAuto/OpenTau/pull/429",
     [] {
         EstimateInput in = params_input(35210000000, 8, 2, Dtype::bf16);
         in.train.trainable_params = 910000000;
         in.cluster.gpu_memory = gib(80);
         return in;
     },
     "", ""},
    {"C22/z3", "https://github.com/TensorAuto/OpenTau/pull/429",
     [] {
         EstimateInput in = params_input(35210000000, 8, 3, Dtype::bf16);
         in.train.trainable_params = 910000000;
         in.cluster.gpu_memory = gib(80);
         return in;
     },
     "", ""},
};

TEST(UserCaseVerdicts, ResourceAndFirstPhaseMatchTheReport) {
    for (const auto& c : kVerdicts) {
        SCOPED_TRACE(std::string(c.id) + " " + c.url);
        const EstimateInput in = c.build();
        const Estimate e = estimate(in);
        EXPECT_EQ(e.first_oom_phase, c.gpu_oom_phase);
        EXPECT_EQ(e.first_host_oom_phase, c.host_oom_phase);
        if (in.cluster.gpu_memory) {
            EXPECT_EQ(e.fits_gpu.value_or(false), std::string(c.gpu_oom_phase).empty());
        }
        if (in.cluster.host_memory) {
            EXPECT_EQ(e.fits_host.value_or(false), std::string(c.host_oom_phase).empty());
        }
    }
}

// C02 with DeepSpeed's FusedAdam instead: the optimizer moment of the
// ZeRO-2 step (stage_1_and_2.py step -> _optimizer_step, terms.h
// zero12_step) holds the fp32 gradient 4·P/N, and torch's foreach AdamW adds
// one fp32 temporary of the same size (adam.py _multi_tensor_adam,
// torch._foreach_sqrt): 4 B x 6.74e9 / 8 = 3.14 GiB, the case's observed
// request. FusedAdam adds nothing.
TEST(UserCases, C02_OomRequestIsTheTorchAdamTemporary) {
    const double P = 6.74e9, N = 8;
    terms::Sizes s;
    s.stage = 2;
    s.N = 8;
    s.bm = s.ba = s.bc = 2;
    s.Tr = 6740000000;
    s.Tn = 842500000;  // ceil(6.74e9 / 8)
    s.kernel = StepKernel::fused;
    const uint64_t fused = terms::zero12_step(s).optimizer.bytes;
    s.kernel = StepKernel::torch_foreach;
    const uint64_t torch = terms::zero12_step(s).optimizer.bytes;
    EXPECT_EQ(fused, 4ull * 842500000ull);
    const double diff = d(torch) - d(fused);
    EXPECT_NEAR(diff / GiB, 4.0 * P / N / GiB, 1e-6);
    EXPECT_NEAR(diff / GiB, 3.14, 0.005);  // observed OOM request
    // torch 2.0's foreach AdamW also builds `denom`: two temporaries.
    s.kernel = StepKernel::torch_foreach_2_0;
    EXPECT_EQ(terms::zero12_step(s).optimizer.bytes, (4ull + 8ull) * 842500000ull);
    // SGD has no Adam temporary.
    s.kernel = StepKernel::sgd;
    EXPECT_EQ(terms::zero12_step(s).optimizer.bytes, fused);
}

// C01 (https://github.com/hiyouga/LlamaFactory/issues/1158): the verdict
// (GPU OOM on 4x A800, 79.35 GiB) holds, and the failing allocation, the fp32
// master partition 4 B x 13.9e9 / 4 = 12.94 GiB, is part of the model states
// from the load on. The user hit it at init with 77.65 GiB already allocated
// (3 x 2P). The load phase's peak is the flatten on the GPU
// (stage_1_and_2.py __init__, DeepSpeed >= 0.18.7 when the flat copy fits):
// the module and its flat copy, 2 x 2P = 51.8 GiB, two of the three copies
// the user saw (tests/cases/README.md).
TEST(UserCases, C01_GpuOomAndTheFailingAllocation) {
    EstimateInput in = params_input(13900000000, 4, 2, Dtype::bf16);
    in.model.largest_layer_params = 125696ull * 5120ull;
    in.cluster.gpu_memory = gib(79.35);
    const Estimate e = estimate(in);
    EXPECT_FALSE(e.fits_gpu.value_or(true));
    EXPECT_FALSE(e.first_oom_phase.empty());
    EXPECT_NEAR(d(e.per_gpu.master_weights) / GiB, 12.94, 0.01);
    EXPECT_EQ(phase(e, "load").per_gpu.parameters, 2ull * 2ull * 13900000000ull);
    EXPECT_NEAR(d(phase(e, "load").per_gpu.parameters) / GiB, 51.8, 0.05);
}

// C03 (https://github.com/OpenRLHF/OpenRLHF/issues/698), phase by phase:
// derived params + fp32 master 44.9 GiB after init, + bf16 grads 59.8 GiB
// after backward (observed ~46 and ~61), Adam m and v another 59.8 GiB at
// the step.
TEST(UserCases, C03_PhaseByPhase) {
    EstimateInput in = preset_input("llama-3-8b", 1, 2, Dtype::bf16);
    in.train.seq_len = 128;
    in.train.checkpointing = Checkpointing::full;
    in.cluster.gpu_memory = gib(80);
    no_residuals(in);
    const Estimate e = estimate(in);
    const auto& ld = phase(e, "load").per_gpu;
    const auto& bw = phase(e, "backward").per_gpu;
    const auto& st = phase(e, "optimizer_step").per_gpu;
    const uint64_t P = e.trainable_params;
    // Load: one 16-bit copy (DeepSpeed flattens on the CPU when a second
    // copy does not fit the GPU: stage_1_and_2.py flatten_on_accelerator,
    // DeepSpeedZeroOptimizer.__init__) and the fp32 master: 44.9 GiB, the
    // observed ~46 GB after init.
    EXPECT_EQ(ld.parameters, 2 * P);
    EXPECT_EQ(ld.momentum + ld.variance, 0u);
    EXPECT_NEAR(d(ld.parameters + ld.master_weights) / GiB, 44.9, 0.1);
    // Backward of the first step: 59.8 GiB + activations, the IPG bucket
    // (5e8 x 2 B, stage_1_and_2.py setup_buckets) and the lm_head's autograd
    // gradient before its bucket copy (L x 2 B, L = 128256 x 4096,
    // reduce_independent_p_g_buckets_and_remove_grads); one GPU, so no
    // allreduce_bucket flatten. Near the observed ~61 (within 1 GiB).
    EXPECT_EQ(bw.momentum + bw.variance, 0u);
    EXPECT_NEAR(d(bw.parameters + bw.master_weights + bw.gradients) / GiB, 59.8, 0.1);
    EXPECT_EQ(bw.temporary_buffers, 500000000ull * 2ull + 128256ull * 4096ull * 2ull);
    EXPECT_EQ(allocated(bw), bw.parameters + bw.master_weights + bw.gradients + bw.activations + bw.temporary_buffers);
    EXPECT_NEAR(d(allocated(bw)) / GiB, 61.0, 1.0);
    // Step: m and v appear, 8 B x P = 59.8 GiB.
    EXPECT_NEAR(d(st.momentum + st.variance) / GiB, 59.8, 0.1);
    EXPECT_EQ(e.first_oom_phase, "optimizer_step");
}

// C03 advice: steps 1-3 of the ZeRO tuning recipe are already in place (micro
// batch 1, checkpointing, stage 2), so the first single change that fits is
// step 4, ZeRO-2 + optimizer offload: the user's actual fix.
TEST(Advice, C03_FirstFittingRecipeStepIsOptimizerOffload) {
    EstimateInput in = preset_input("llama-3-8b", 1, 2, Dtype::bf16);
    in.train.seq_len = 128;
    in.train.checkpointing = Checkpointing::full;
    in.cluster.gpu_memory = gib(80);
    ASSERT_EQ(in.train.micro_batch, 1);
    const Estimate e = estimate(in);
    const auto advice = advise(in, e);
    ASSERT_EQ(advice.size(), 1u);
    EXPECT_EQ(advice[0].resource, "gpu");
    EXPECT_EQ(advice[0].phase, "optimizer_step");
    ASSERT_TRUE(advice[0].found);
    // Stage 2 is in place, so the change is the offload alone.
    ASSERT_EQ(advice[0].changes.size(), 1u);
    EXPECT_EQ(advice[0].changes[0].path, "zero_optimization.offload_optimizer.device");
    EXPECT_EQ(advice[0].changes[0].value, "cpu");
    EXPECT_EQ(flag_spelling(advice[0].changes), "--offload-optimizer cpu");
    EXPECT_NE(advice[0].why.find("recipe step 4: ZeRO-2 with offload_optimizer cpu"), std::string::npos) << advice[0].why;
    EXPECT_LE(advice[0].need_after, *in.cluster.gpu_memory);
}

// Advice order: with micro batch 8 the first recipe step (micro batch 1)
// is tried first; it cannot help C03 (its peak is the optimizer step, which
// holds no activations), nor can stage 2 that is in place, so the answer is
// still step 4, not step 5 (stage 3) which would also fit.
TEST(Advice, SkipsStepsThatDoNotHelp) {
    EstimateInput in = preset_input("llama-3-8b", 1, 2, Dtype::bf16);
    in.train.seq_len = 128;
    in.train.micro_batch = 8;
    in.train.checkpointing = Checkpointing::full;
    in.cluster.gpu_memory = gib(80);
    const auto advice = advise(in, estimate(in));
    ASSERT_EQ(advice.size(), 1u);
    ASSERT_TRUE(advice[0].found);
    EXPECT_EQ(flag_spelling(advice[0].changes), "--offload-optimizer cpu");
}

// A new user's question: Llama-3-8B on 4 x A100-40GB, ZeRO-2, sequence 4096,
// micro batch 1. The model states alone do not fit ZeRO-2: 2 B x Psi
// parameters + (2 + 12) B x Psi / 4 = 16.06 + 28.11 GB = 41.0 GiB > 39.50
// (Psi = 8.03e9), so ZeRO-2 needs the optimizer offloaded or ZeRO-3. The
// advice is the fastest combination that fits by the speed model, not the
// last single recipe step (ZeRO-3 with both offloads, which the advice used
// to give): it is no slower than that, it fits, and it names every recipe
// step it takes.
TEST(Advice, FastestCombinationThatFitsNotTheLastSingleStep) {
    EstimateInput in = preset_input("llama-3-8b", 4, 2, Dtype::bf16);
    in.train.seq_len = 4096;
    const GpuSpec gpu = load_gpu_preset("A100-40GB", ZEROMEM_SOURCE_DATA_DIR);
    in.cluster.gpu_memory = gpu.usable_bytes.value_or(gpu.memory_bytes);
    const SpeedHardware hw = speed_hardware(gpu, Dtype::bf16, "", "", ZEROMEM_SOURCE_DATA_DIR);
    const Estimate e = estimate(in);
    ASSERT_FALSE(e.fits_gpu.value_or(true));
    const auto advice = advise(in, e, &hw);
    ASSERT_EQ(advice.size(), 1u);
    ASSERT_TRUE(advice[0].found);
    EXPECT_LE(advice[0].need_after, *in.cluster.gpu_memory);
    EXPECT_NE(advice[0].why.find("the fastest combination"), std::string::npos) << advice[0].why;
    // The old single-step answer, timed by the same speed model.
    EstimateInput last = in;
    last.zero.stage = 3;
    last.zero.offload_param = OffloadDevice::cpu;
    last.zero.offload_optimizer = OffloadDevice::cpu;
    EXPECT_LE(advice[0].step_seconds, step_time(last, hw).total);
    // Each change is named by its DeepSpeed / HF Trainer path, and each
    // recipe step it stands for is named in the why.
    for (const auto& c : advice[0].changes) {
        if (c.path == "gradient_checkpointing") {
            EXPECT_NE(advice[0].why.find("recipe step 2"), std::string::npos);
        }
        if (c.path == "zero_optimization.stage" && c.value == "3") {
            EXPECT_NE(advice[0].why.find("recipe step 5"), std::string::npos);
        }
        if (c.path == "zero_optimization.offload_param.device") {
            EXPECT_NE(advice[0].why.find("recipe step 6"), std::string::npos);
        }
    }
    // Without a speed model the recipe's order decides, and says so.
    const auto unranked = advise(in, e);
    ASSERT_TRUE(unranked[0].found);
    EXPECT_NE(unranked[0].why.find("not ranked by speed"), std::string::npos);
}

// C15 (https://github.com/deepspeedai/DeepSpeed/issues/3722): the reply was
// "use zero.Init"; it is the first host change.
TEST(Advice, C15_HostAdviceIsZeroInit) {
    EstimateInput in = params_input(15500000000, 8, 3, Dtype::bf16);
    in.model.largest_layer_params = 49152ull * 6144ull;
    in.zero.zero_init = false;
    in.cluster.host_memory = 500000000000ull;
    const auto advice = advise(in, estimate(in));
    ASSERT_EQ(advice.size(), 1u);
    EXPECT_EQ(advice[0].resource, "host");
    EXPECT_EQ(advice[0].phase, "load");
    ASSERT_TRUE(advice[0].found);
    EXPECT_EQ(flag_spelling(advice[0].changes), "--zero-init");
}

// C20: the case's own remedy, buffer_size and sub_group_size ~1e8, is the
// host advice.
TEST(Advice, C20_SmallerSwapBuffers) {
    EstimateInput in = kVerdicts[7].build();
    ASSERT_STREQ(kVerdicts[7].id, "C20");
    const auto advice = advise(in, estimate(in));
    ASSERT_EQ(advice.size(), 1u);
    ASSERT_TRUE(advice[0].found);
    const std::string spelled = flag_spelling(advice[0].changes);
    EXPECT_NE(spelled.find("zero_optimization.sub_group_size=1e8"), std::string::npos) << spelled;
}

// C08 (https://github.com/deepspeedai/DeepSpeed/issues/3734): allocated
// memory without activations or transients. Observed 45.46 (stage 2) and
// 25.31 (stage 3); these figures only make sense in GiB (torch reports
// bytes / 2^30). Stage 2 with its 16-bit gradient partition alive (after
// the boundary backward, before the step): 2P + 2P/N + 12P/N = 48.75e9 B =
// 45.40 GiB, the observed figure. After the step, stage_1_and_2.py step has
// freed that partition (free_grad_in_param_list), so between steps
// (checkpoint_save) it is 2P + 12P/N = 45.5e9 B = 42.38 GiB. Stage
// 3: 16P/N + the IPG bucket 5e8 x 2 B kept from init (stage3.py
// _setup_for_real_optimizer) = 27e9 B = 25.15 GiB at every point; the unnamed model's persistent
// small parameters are not known (tolerance 0.25 GiB).
TEST(UserCases, C08_SteadyAllocatedStage2And3) {
    for (int stage : {2, 3}) {
        EstimateInput in = params_input(13000000000, 8, stage, Dtype::bf16);
        no_residuals(in);
        const Estimate e = estimate(in);
        const auto& m = e.per_gpu;
        const double with_grads = d(m.parameters + m.gradients + m.optimizer_states +
                                    (stage == 3 ? 1000000000ull : 0ull)) / GiB;
        const double between_steps = d(phase(e, "checkpoint_save").per_gpu.total) / GiB;
        const double expected = stage == 2 ? (2 + 2.0 / 8 + 12.0 / 8) * 13e9 / GiB : (16.0 / 8 * 13e9 + 1e9) / GiB;
        const double observed = stage == 2 ? 45.46 : 25.31;
        EXPECT_NEAR(with_grads, expected, 1e-6) << stage;
        EXPECT_NEAR(with_grads, observed, 0.25) << stage;
        const double after_step = stage == 2 ? (2 + 12.0 / 8) * 13e9 / GiB : expected;
        EXPECT_NEAR(between_steps, after_step, 1e-6) << stage;
    }
}

// C06 (https://github.com/deepspeedai/DeepSpeed/issues/4527): DeepSpeed's
// estimator figures that the case quotes (6.805e9, L = 131e6, 4 GPUs,
// zero_init=1) come out of the deepspeed convention; the full estimate of
// the offload-both run lies between the quoted 0.49 GiB (model states only)
// and the observed peak of 21272 MiB (which includes ~13 GB of allocator
// cache, activations and buffers).
TEST(UserCases, C06_EstimatorQuoteAndFullEstimateBracket) {
    struct Row { OffloadDevice opt, par; double cpu, gpu; };
    const Row rows[] = {{OffloadDevice::cpu, OffloadDevice::cpu, 171.13, 0.49},
                        {OffloadDevice::cpu, OffloadDevice::none, 152.11, 3.66},
                        {OffloadDevice::none, OffloadDevice::none, 2.93, 29.01}};
    for (const auto& r : rows) {
        EstimateInput in = params_input(6805000000, 4, 3, Dtype::bf16);
        in.model.largest_layer_params = 131000000;
        in.zero.offload_optimizer = r.opt;
        in.zero.offload_param = r.par;
        in.convention = Convention::deepspeed;
        const Estimate e = estimate(in);
        // The case gives P to 4 digits (6.805e9 = ±0.0005e9, a relative
        // 7.4e-5) and DeepSpeed prints 2 decimals (±0.005).
        EXPECT_NEAR(d(e.per_node.host_memory) / GiB, r.cpu, r.cpu * 7.4e-5 + 0.005);
        EXPECT_NEAR(d(e.per_gpu.total) / GiB, r.gpu, r.gpu * 7.4e-5 + 0.005);
    }
    EstimateInput in = params_input(6805000000, 4, 3, Dtype::bf16);
    in.model.largest_layer_params = 131000000;
    in.zero.offload_optimizer = OffloadDevice::cpu;
    in.zero.offload_param = OffloadDevice::cpu;
    const Estimate e = estimate(in);
    EXPECT_GT(d(e.per_gpu.total) / GiB, 0.49);
    EXPECT_LT(d(e.per_gpu.total), 21272.0 * 1048576.0);
}

// C10 (https://github.com/deepspeedai/DeepSpeedExamples/issues/336):
// pythia-2.8B (2.78e9), fp16, 4x A10G. The stage-2 gradient bucket,
// reduce_bucket_size x 2 B (x2 with overlap_comm), is live at the backward
// phase (where activations peak) and not at the forward (buckets are created
// at the first gradient hook, stage_1_and_2.py setup_buckets). Case "derived": lean
// ZeRO-1 states on 4 GPUs 2P + 2P + 12P/4 = 18.1 GiB, plus rank 0's
// grads_in_partition 2P/4 at the boundary (reduce_gradients ->
// copy_grads_in_partition at the first bucket) = 19.42 GiB. The verdict (stage 1
// fits, stage 2 OOMs) is not asserted: see tests/cases/README.md.
TEST(UserCases, C10_Stage2BucketAtBackward) {
    EstimateInput in = params_input(2780000000, 4, 2, Dtype::fp16);
    for (bool overlap : {false, true}) {
        in.zero.overlap_comm = overlap;
        const Estimate e = estimate(in);
        // IPG bucket(s) + the allreduce_bucket flatten (4 ranks' slices).
        EXPECT_EQ(phase(e, "backward").per_gpu.temporary_buffers,
                  500000000ull * 2ull * (overlap ? 2ull : 1ull) + 500000000ull * 2ull);
        EXPECT_EQ(phase(e, "forward").per_gpu.temporary_buffers, 0u);
    }
    in.zero.stage = 1;
    const Estimate z1 = estimate(in);
    const auto& m = z1.per_gpu;
    EXPECT_NEAR(d(m.parameters + m.gradients + m.optimizer_states) / GiB, 19.42, 0.05);
}

// C16 (https://github.com/Roblox/FAI-RL/pull/68): ZeRO-3 LoRA on a 30B MoE
// with zero.Init not active at load; nodes of 2 GPUs / 482 GB and 8 GPUs /
// 1928 GB both ran out of host RAM, "adding GPUs never helped". Asserted:
// the load-phase host RAM is gpus_per_node x (one full copy + the process
// overhead), so it grows exactly with the GPUs, and the node fills to the
// same fraction for 2 and 8 GPUs (482 x 4 = 1928). Also: the measured 230 GB
// per rank times the ranks is over 95 % of each node (458/482 and 1835/1928
// observed). The verdict is not asserted (tests/cases/README.md): the
// model's load dtype gives 4 B/param, the measurement 7.7.
TEST(UserCases, C16_LoadScalesWithGpusPerNode) {
    const uint64_t P = 30000000000;
    double fraction[2] = {0, 0};
    int i = 0;
    for (int64_t g : {2, 8}) {
        EstimateInput in = params_input(P, g, 3, Dtype::bf16);
        in.zero.zero_init = false;
        in.cluster.host_memory = g == 2 ? 482000000000ull : 1928000000000ull;
        const Estimate e = estimate(in);
        const uint64_t per_rank = P * 4 + in.residual.host_process_overhead;
        EXPECT_EQ(phase(e, "load").per_node.host_memory, uint64_t(g) * per_rank);
        fraction[i++] = d(phase(e, "load").per_node.host_memory) / d(*in.cluster.host_memory);
        EXPECT_GT(double(g) * 230e9 / d(*in.cluster.host_memory), 0.95);
    }
    EXPECT_NEAR(fraction[0], fraction[1], 1e-9);
}

// C22 (https://github.com/TensorAuto/OpenTau/pull/429): frozen 34.3e9 bf16
// backbone + 0.91e9 trainable head on 8 GPUs. Derived: frozen replicated
// under ZeRO-2 63.9 GiB/GPU, sharded under ZeRO-3 8.0 GiB/GPU; trainable
// states under ZeRO-3 (2 + 2 + 12) x 0.91e9 / 8 = 1.7 GiB. Expected
// baselines "ZeRO-2 ≈ 64-67 GiB, ZeRO-3 ≈ 10 GiB".
TEST(UserCases, C22_FrozenBackboneReplicatedVsSharded) {
    const uint64_t F = 34300000000, T = 910000000, N = 8;
    for (int stage : {2, 3}) {
        EstimateInput in = params_input(F + T, 8, stage, Dtype::bf16);
        in.train.trainable_params = T;
        no_residuals(in);
        const Estimate e = estimate(in);
        EXPECT_EQ(e.frozen_params, F);
        const auto& m = e.per_gpu;
        const uint64_t Tn = ceil_div(T, N);
        // Frozen weights carry no gradients or optimizer state.
        EXPECT_EQ(m.gradients, 2 * Tn) << stage;
        EXPECT_EQ(m.optimizer_states, 12 * Tn) << stage;
        const auto& fw = phase(e, "forward").per_gpu;  // after init, first step
        if (stage == 2) {
            EXPECT_NEAR(d(m.parameters - 2 * T) / GiB, 63.9, 0.05);
            EXPECT_GE(d(allocated(fw)) / GiB, 64.0);
            EXPECT_LE(d(allocated(fw)) / GiB, 67.0);
        } else {
            EXPECT_NEAR(d(m.parameters - 2 * Tn) / GiB, 8.0, 0.05);
            EXPECT_NEAR(d(2 * Tn + m.gradients + m.optimizer_states) / GiB, 1.7, 0.05);
            EXPECT_GE(d(m.parameters + m.gradients + m.optimizer_states) / GiB, 9.0);
            EXPECT_LE(d(m.parameters + m.gradients + m.optimizer_states) / GiB, 11.0);
        }
    }
}

// C23 (https://github.com/deepspeedai/DeepSpeed/issues/5484): LoRA on
// Llama-13B (h 5120, 40 layers; llama-2-13b has the same shapes), fp32,
// ZeRO-3, 8x 32 GB, micro batch 32, checkpointing, reduce_bucket_size 2e8,
// max_live 1e9. 26M trainable = rank 16 on q,k,v,o: 40 x 4 x 16 x
// (5120 + 5120) = 26,214,400. Derived: frozen fp32 per GPU 6.1 GiB, LoRA
// states 0.4 GiB in all. DeepSpeed said ~17 GB, ~30 GB was used, micro
// batch 64 OOMed.
// Honest range: the case gives no sequence length. The model's floor
// without activations (the optimizer step) is frozen 6.1 GiB + the fp32 IPG
// bucket 2e8 x 4 B + small, so "the rest is activations", as the case says;
// the full estimate at micro batch 32 spans the observed 30 GB between
// sequence 256 and 1024 and is above DeepSpeed's 17 GB for all of them.
// Micro batch 64 doubles the activations (Korthikanti: linear in b), so
// 30 GB observed at 32 implies more than 32 GB at 64: OOM, as observed.
TEST(UserCases, C23_LoraOnLlama13BFp32Stage3) {
    EstimateInput in = preset_input("llama-2-13b", 8, 3, Dtype::fp32);
    add_lora(in, 16, "q,k,v,o");
    in.train.micro_batch = 32;
    in.train.checkpointing = Checkpointing::full;
    in.zero.reduce_bucket_size = 200000000;
    in.zero.allgather_bucket_size = 200000000;
    in.zero.stage3_max_live_parameters = 1000000000;
    in.zero.stage3_prefetch_bucket_size = 23592960;  // "auto": 0.9 x 5120^2 (HF rule)
    in.cluster.gpu_memory = 32000000000ull;
    const uint64_t T = 40ull * 4 * 16 * (5120 + 5120);
    EXPECT_EQ(T, 26214400u);
    EstimateInput bare = in;
    no_residuals(bare);
    const Estimate e = estimate(bare);
    EXPECT_EQ(e.trainable_params, T);
    const auto& m = e.per_gpu;
    // Frozen per GPU = the partition less the LoRA partition and the
    // persistent RMSNorm weights (81 x 5120: 2 per layer + final).
    const uint64_t frozen_per_gpu = m.parameters - 4 * ceil_div(T, 8) - 4 * 81ull * 5120;
    EXPECT_NEAR(d(frozen_per_gpu) / GiB, 6.1, 0.05);
    EXPECT_NEAR(d(16 * T) / GiB, 0.4, 0.01);                        // LoRA states in all
    EXPECT_LT(d(m.gradients + m.optimizer_states) / GiB, 0.4 / 8 + 0.01);  // per GPU
    const double floor = d(phase(e, "optimizer_step").per_gpu.total) / GiB;
    EXPECT_GE(floor, 6.1 + 2e8 * 4 / GiB);
    EXPECT_LE(floor, 6.1 + 2e8 * 4 / GiB + 0.5);
    EXPECT_LT(floor * GiB, 17e9);

    double lo = 0, hi = 0;
    for (int64_t seq : {256, 512, 1024}) {
        in.train.seq_len = seq;
        const double total = d(estimate(in).per_gpu.total);
        EXPECT_GT(total, 17e9) << seq;
        if (seq == 256) lo = total;
        if (seq == 1024) hi = total;
    }
    EXPECT_LT(lo, 30e9);
    EXPECT_GT(hi, 30e9);

    in.train.seq_len = 512;
    EstimateInput b64 = bare;
    b64.train.seq_len = 512;
    EstimateInput b32 = b64;
    b64.train.micro_batch = 64;
    const uint64_t a32 = phase(estimate(b32), "forward").per_gpu.activations;
    const uint64_t a64 = phase(estimate(b64), "forward").per_gpu.activations;
    EXPECT_NEAR(d(a64), 2.0 * d(a32), 2.0);
    const double observed32 = 30e9;
    const double predicted64 = observed32 + (observed32 - floor * GiB);
    EXPECT_GT(predicted64, 32e9);
}

// C24 (https://github.com/EleutherAI/gpt-neox/issues/1123): tp 8 x pp 8 on
// 64 GPUs, ZeRO-1; memory grew with gradient accumulation. Rejection and
// warning checks: N_d = 64 / (8 x 8) = 1; ZeRO-2 or 3 with a pipeline is
// rejected as DeepSpeed's pipeline engine rejects it; pipeline + GAS > 1
// carries a warning that the growth is not modelled.
TEST(UserCases, C24_PipelineRejectionAndGasWarning) {
    EstimateInput in = params_input(20000000000, 64, 1, Dtype::fp16);
    in.cluster.nodes = 16;
    in.cluster.tp = 8;
    in.cluster.pp = 8;
    EXPECT_EQ(in.cluster.data_parallel(), 1);
    auto has_gas_note = [](const Estimate& e) {
        for (const auto& n : e.notes)
            if (n.find("gradient accumulation") != std::string::npos && n.find("pipeline") != std::string::npos)
                return true;
        return false;
    };
    in.train.grad_accum = 1;
    EXPECT_FALSE(has_gas_note(estimate(in)));
    in.train.grad_accum = 8;
    EXPECT_TRUE(has_gas_note(estimate(in)));
    for (int stage : {2, 3}) {
        in.zero.stage = stage;
        EXPECT_THROW(estimate(in), InputError) << stage;
    }
}

}  // namespace
