// Tests of speed.h: the step-time model against the measured public runs
// G1-G14 below, as orderings (always) and magnitudes (within the tolerance
// each case states, 25% by default), plus independent arithmetic of the cost
// formulas.
//
// Expected values are the published measurements, or arithmetic written out
// here. Sources: G1-G3, G3b, G14 the 2021 DeepSpeed autotuner runs on 16x
// V100 (microsoft/DeepSpeedExamples autotuning/hf/*/README.md); G4
// LianjiaTech/BELLE#402; G5/G6 mosaicml/llm-foundry
// scripts/train/benchmarking/README.md; G7-G9 DeepSpeed blogs/deepcompile;
// G10 VIA-Research/vTrain's measured iteration times (data/*.csv); G11
// DeepSpeed blogs/deepspeed-zenflow; G12 DeepSpeed blogs/zenflow-corebinding;
// G13 DeepSpeed blogs/zeropp (ZeRO++, Wang et al. 2023).
// Assumptions where a source is silent are stated next to each case.
#include "speed_test_helpers.h"
#include "zeromem/estimate.h"
#include "zeromem/gpu.h"
#include "zeromem/model.h"
#include "zeromem/speed.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

using namespace zeromem;
using namespace zeromem::speed_testing;

namespace {

const std::string kData = ZEROMEM_SOURCE_DATA_DIR;

// GPT-2 family configs (openai-community/gpt2-{medium,large} config.json).
ModelInfo gpt2(int64_t h, int64_t layers, int64_t heads) {
    return from_hf({{"model_type", "gpt2"}, {"n_embd", h}, {"n_layer", layers}, {"n_head", heads},
                    {"n_positions", 1024}, {"vocab_size", 50257}});
}

// MPT-7B (mosaicml/mpt-7b config.json): d_model 4096, 32 layers, 32 heads,
// expansion 4, vocab 50432, tied embeddings, no biases, ALiBi (no learned
// positions). Described as a GPT-NeoX-shaped model without biases.
ModelInfo mpt7b() {
    ModelArch a;
    a.name = "mpt-7b";
    a.family = "mpt";
    a.hidden_size = 4096;
    a.num_layers = 32;
    a.num_heads = 32;
    a.num_kv_heads = 32;
    a.head_dim = 128;
    a.ffn_size = 16384;
    a.vocab_size = 50432;
    a.max_position_embeddings = 2048;
    a.tied_embeddings = true;
    a.fused_qkv = true;
    a.norms_per_layer = 2;
    ModelInfo m;
    m.arch = a;
    m.params = count_params(a).total;
    m.name = a.name;
    return m;
}

SpeedHardware hw(const std::string& gpu, Dtype d, const std::string& inter = "") {
    return speed_hardware(load_gpu_preset(gpu, kData), d, "", inter, kData);
}

EstimateInput input(const ModelInfo& m, int64_t gpus, int64_t nodes, int stage, int64_t micro, int64_t seq,
                    int64_t gas = 1, Dtype d = Dtype::bf16, Checkpointing ck = Checkpointing::none) {
    EstimateInput in;
    in.model = m;
    in.cluster.gpus = gpus;
    in.cluster.nodes = nodes;
    in.zero.stage = stage;
    in.train.micro_batch = micro;
    in.train.seq_len = seq;
    in.train.grad_accum = gas;
    in.train.dtype = d;
    in.train.checkpointing = ck;
    return in;
}

}  // namespace

// ---- independent arithmetic of the formulas ------------------------------

// Model FLOPs: 6Ψ + 12·L·h·s per token. GPT-2 XL (tied embeddings, learned
// positions of 1024 x 1600): Ψ_mm = Ψ - 1024·1600.
TEST(SpeedFormulas, ModelFlopsPerToken) {
    const ModelInfo m = preset("gpt2-xl");
    const double psi_mm = 1557611200.0 - 1024.0 * 1600.0;
    EXPECT_DOUBLE_EQ(model_flops_per_token(m, 1024), 6.0 * psi_mm + 12.0 * 48 * 1600 * 1024);
    ModelInfo bare;
    bare.params = 7000000000;
    EXPECT_DOUBLE_EQ(model_flops_per_token(bare, 4096), 42e9);
}

// One GPU, stage 0, --params only: no collectives; compute
// = 6Ψ·b·s / (peak · η_max · tok/(tok+1024)); Adam = 28Ψ/(0.7·HBM).
TEST(SpeedFormulas, SingleGpuArithmetic) {
    ModelInfo m;
    m.params = 1000000000;
    const SpeedHardware h = hw("A100-80GB", Dtype::bf16);
    const StepTime t = step_time(input(m, 1, 1, 0, 1, 1024), h);
    const double compute = 6e9 * 1024 / (312e12 * 0.60 * 0.5);
    const double adam = 1e9 * 28 / (0.7 * 2039e9);
    EXPECT_NEAR(t.compute, compute, compute * 1e-12);
    EXPECT_EQ(t.exposed_comm, 0.0);
    EXPECT_NEAR(t.optimizer, adam, adam * 1e-12);
    EXPECT_NEAR(t.total, compute + adam, 1e-12);
    EXPECT_NEAR(t.mfu, 6e9 * 1024 / (compute + adam) / 312e12, 1e-12);
}

// Ring all-reduce (factor 2(n-1)/n, nccl-tests doc/PERFORMANCE.md):
// t_AR = alpha + 2(n-1)/n (S + S_half)/B per launch. ZeRO-0,
// 8 A100 on NVLink3 (229.35 GB/s, 72 us, 16 MiB), Ψ = 1e9 bf16 (S = 2 GB),
// reduce_bucket_size 5e8 -> 2 launches.
TEST(SpeedFormulas, RingAllReduceCost) {
    ModelInfo m;
    m.params = 1000000000;
    const SpeedHardware h = hw("A100-80GB", Dtype::bf16);
    const StepTime t = step_time(input(m, 8, 1, 0, 1, 1024), h);
    const double ar = 2 * 72e-6 + 2.0 * 7 / 8 * (2e9 + 2 * 16777216.0) / 229.35e9;
    EXPECT_NEAR(t.comm_total, ar, 1e-12);
    EXPECT_NEAR(t.exposed_comm, ar, 1e-12);
}

// Multi-node bus bandwidth: 4 nodes x 8 GPUs on 8 x 50 GB/s
// NICs at 73% -> 0.73·50·31/3 = 377 GB/s, which the measured 4x8 B200 EFA
// all-reduce (377-382 GB/s, stas00/ml-engineering network/README.md)
// confirms; capped by the intra-node figure.
TEST(SpeedFormulas, MultiNodeBusBandwidth) {
    ModelInfo m;
    m.params = 8000000000;
    SpeedHardware h = hw("H100-80GB", Dtype::bf16, "ib-ndr400");
    h.intra.allreduce_busbw = 1e13;  // take the intra-node cap away
    const StepTime t = step_time(input(m, 32, 4, 0, 1, 1024), h);
    const double bus = 0.73 * 50e9 * 31.0 / 3.0;
    const double ar = 16 * (40e-6 + 20e-6) + 2.0 * 31 / 32 * (16e9 + 16 * 67108864.0) / bus;
    EXPECT_NEAR(t.comm_total, ar, ar * 1e-9);
}

TEST(SpeedFormulas, MultiNodeNeedsANetwork) {
    ModelInfo m;
    m.params = 1000000000;
    try {
        step_time(input(m, 16, 2, 0, 1, 1024), hw("A100-80GB", Dtype::bf16));
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("--network"), std::string::npos) << e.what();
    }
}

TEST(SpeedFormulas, Bf16OnV100IsAnError) {
    try {
        hw("V100-32GB", Dtype::bf16);
        FAIL() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("--dtype"), std::string::npos) << e.what();
    }
}

// CPU Adam under optimizer offload is shared by the node's ranks (section
// 3.1): doubling GPUs per node at the same partition doubles the CPU time.
TEST(SpeedFormulas, CpuAdamSharedPerNode) {
    ModelInfo m;
    m.params = 8000000000;
    const SpeedHardware h = hw("A100-80GB", Dtype::bf16);
    EstimateInput a = input(m, 8, 1, 2, 1, 1024);
    a.zero.offload_optimizer = OffloadDevice::cpu;
    const StepTime t = step_time(a, h);
    EXPECT_NEAR(t.optimizer, 8e9 / 1.5e9, 1e-9);  // (Ψ/n)·g / R_cpu = Ψ/R_cpu on one node
}

// ---- measured cases (sources in the header) --------------------------------

// The autotuner runs G1-G3 are 2021 DeepSpeed: no effective
// ZeRO-3 prefetch and ~1.1 ms per synchronous fetch launch
// (speed_constants_era2021, documented in speed.h).
SpeedConstants era2021() { return speed_constants_era2021(); }

// G1: GPT2-xl 1.5B, 16x V100 one node, fp16, seq 1024 (HF run_clm default,
// assumed), mbs 1, gas 1: z1 40.17, z2 33.05, z3 12.86 samples/s.
TEST(SpeedGolden, G1_Gpt2XlStages) {
    const ModelInfo m = preset("gpt2-xl");
    const SpeedHardware h = hw("V100-32GB", Dtype::fp16);
    const SpeedConstants k = era2021();
    const double z1 = samples_per_s(input(m, 16, 1, 1, 1, 1024, 1, Dtype::fp16), h, k);
    const double z2 = samples_per_s(input(m, 16, 1, 2, 1, 1024, 1, Dtype::fp16), h, k);
    const double z3 = samples_per_s(input(m, 16, 1, 3, 1, 1024, 1, Dtype::fp16), h, k);
    EXPECT_GT(z1, z2);
    EXPECT_GT(z2, z3);
    EXPECT_TRUE(within(z1, 40.17, 0.25));
    EXPECT_TRUE(within(z2, 33.05, 0.25));
    EXPECT_TRUE(within(z3, 12.86, 0.25));
    std::printf("G1 z1 %.2f z2 %.2f z3 %.2f samples/s, z3/z1 %.2f\n", z1, z2, z3, z3 / z1);
}

// G1's ratio z3/z1 ~0.3 (measured 12.86/40.17 = 0.32), within 25%. The
// era-2021 fetch cost is derived from the z3 - z2 gaps of GPT2-xl and
// BERT-base together (speed.h), so this is a consistency check of that
// derivation, not an independent prediction; the 2024+ defaults (full
// prefetch overlap, 100 us per launch) must give a much smaller z3 penalty
// on the same hardware.
TEST(SpeedGolden, G1_Zero3Ratio) {
    const ModelInfo m = preset("gpt2-xl");
    const SpeedHardware h = hw("V100-32GB", Dtype::fp16);
    const double z1 = samples_per_s(input(m, 16, 1, 1, 1, 1024, 1, Dtype::fp16), h, era2021());
    const double z3 = samples_per_s(input(m, 16, 1, 3, 1, 1024, 1, Dtype::fp16), h, era2021());
    EXPECT_TRUE(within(z3 / z1, 12.86 / 40.17, 0.25));
    const double z1_now = samples_per_s(input(m, 16, 1, 1, 1, 1024, 1, Dtype::fp16), h);
    const double z3_now = samples_per_s(input(m, 16, 1, 3, 1, 1024, 1, Dtype::fp16), h);
    EXPECT_GT(z3_now / z1_now, 1.5 * (z3 / z1));
    EXPECT_LT(z3_now, z1_now);
}

// G2: GPT2-large 0.77B, same node: z0 59.0 (mbs 2), z1 87.3 (3), z2 77.8 (3).
TEST(SpeedGolden, G2_Gpt2LargeZ0MemoryCapped) {
    const ModelInfo m = gpt2(1280, 36, 20);
    const SpeedHardware h = hw("V100-32GB", Dtype::fp16);
    const double z0 = samples_per_s(input(m, 16, 1, 0, 2, 1024, 1, Dtype::fp16), h, era2021());
    const double z1 = samples_per_s(input(m, 16, 1, 1, 3, 1024, 1, Dtype::fp16), h, era2021());
    const double z2 = samples_per_s(input(m, 16, 1, 2, 3, 1024, 1, Dtype::fp16), h, era2021());
    EXPECT_GT(z1, z2);
    EXPECT_GT(z2, z0);
    std::printf("G2 z0 %.2f z1 %.2f z2 %.2f samples/s\n", z0, z1, z2);
}

// G3: BERT-base 0.11B fp32, same node, mbs 220/220/240/240:
// z0 2881 > z1 2861 > z2 2715 > z3 2421 samples/s. Sequence length not
// stated; 128 assumed (the HF BERT examples' default max_seq_length).
TEST(SpeedGolden, G3_BertBaseExactOrder) {
    const ModelInfo m = from_hf({{"model_type", "gpt2"}, {"n_embd", 768}, {"n_layer", 12}, {"n_head", 12},
                                 {"n_positions", 512}, {"vocab_size", 30522}});
    const SpeedHardware h = hw("V100-32GB", Dtype::fp32);
    const double z0 = samples_per_s(input(m, 16, 1, 0, 220, 128, 1, Dtype::fp32), h, era2021());
    const double z1 = samples_per_s(input(m, 16, 1, 1, 220, 128, 1, Dtype::fp32), h, era2021());
    const double z2 = samples_per_s(input(m, 16, 1, 2, 240, 128, 1, Dtype::fp32), h, era2021());
    const double z3 = samples_per_s(input(m, 16, 1, 3, 240, 128, 1, Dtype::fp32), h, era2021());
    // z0 vs z1 measured 0.7% apart: a tie within 1% counts as agreeing.
    EXPECT_GT(z0, 0.99 * z1);
    EXPECT_GT(z1, z2);
    EXPECT_GT(z2, z3);
    std::printf("G3 z0 %.1f z1 %.1f z2 %.1f z3 %.1f samples/s\n", z0, z1, z2, z3);
}

// G5 / G6: MPT-7B FSDP full shard (ZeRO-3 equivalent), 8 GPUs, seq 2048,
// mbs 6: H100 10643 tok/s/GPU (MFU 46.4%), A100-80 4641 tok/s/GPU (64.2%).
// No activation checkpointing assumed.
TEST(SpeedGolden, G5_G6_Mpt7bFullShard) {
    const ModelInfo m = mpt7b();
    const StepTime h100 = step_time(input(m, 8, 1, 3, 6, 2048), hw("H100-80GB", Dtype::bf16));
    const StepTime a100 = step_time(input(m, 8, 1, 3, 6, 2048), hw("A100-80GB", Dtype::bf16));
    EXPECT_TRUE(within(h100.tokens_per_s_per_gpu, 10643, 0.25));
    EXPECT_TRUE(within(a100.tokens_per_s_per_gpu, 4641, 0.25));
    std::printf("G5 %.0f tok/s/GPU MFU %.3f; G6 %.0f tok/s/GPU MFU %.3f\n", h100.tokens_per_s_per_gpu, h100.mfu,
                a100.tokens_per_s_per_gpu, a100.mfu);
}

// G7: Llama-3-70B ZeRO-3, 32x H100 (4 nodes, NDR400 rails assumed), seq
// 1024, mbs 1: ~243-262 TFLOPs/GPU.
TEST(SpeedGolden, G7_Llama70bZero3MultiNode) {
    const StepTime t = step_time(input(preset("llama-3-70b"), 32, 4, 3, 1, 1024), hw("H100-80GB", Dtype::bf16, "ib-ndr400"));
    EXPECT_TRUE(within(t.tflops_per_gpu, 252.5, 0.25));
    std::printf("G7 %.1f TFLOP/s per GPU, step %.2f s\n", t.tflops_per_gpu, t.total);
}

// G8: Llama-3-70B ZeRO-3 + optimizer offload (cpu), 16x H100 (2 nodes),
// mbs 1, seq 512/1024/2048: ~13 / 24 / 49 TFLOPs/GPU, CPU-Adam dominated,
// step ~flat. The CPU-Adam rate of that H100 host is 2.2e9 params/s per
// node (~35e9 parameters per node in ~16 s of this run's ~17-18 s step), the
// top of the measured range; the default 1.5e9 suits older hosts. G8 is
// also the case the host model's cpu_adam_memory_efficiency is fitted on
// (speed.h), so it is not evidence for that constant.
TEST(SpeedGolden, G8_Llama70bOptimizerOffload) {
    const ModelInfo m = preset("llama-3-70b");
    SpeedHardware h = hw("H100-80GB", Dtype::bf16, "ib-ndr400");
    h.cpu_adam_rate = 2.2e9;
    const double want[3] = {13, 24, 49};
    const int64_t seqs[3] = {512, 1024, 2048};
    double prev = 0, first_step = 0;
    for (int i = 0; i < 3; ++i) {
        EstimateInput in = input(m, 16, 2, 3, 1, seqs[i]);
        in.zero.offload_optimizer = OffloadDevice::cpu;
        const StepTime t = step_time(in, h);
        EXPECT_GT(t.tflops_per_gpu, prev);
        EXPECT_GT(t.optimizer, 0.5 * t.total) << "CPU Adam should dominate";
        if (i == 0) first_step = t.total;
        else EXPECT_LT(t.total / first_step, 1.5) << "step should stay ~flat";
        EXPECT_TRUE(within(t.tflops_per_gpu, want[i], 0.25)) << "seq " << seqs[i];
        std::printf("G8 seq %lld: %.1f TFLOP/s per GPU, step %.2f s\n", (long long)seqs[i], t.tflops_per_gpu, t.total);
        prev = t.tflops_per_gpu;
    }
}

// G9: Llama-3-8B ZeRO-1, 8 GPUs (H100 assumed), mbs 1 and 4, seq
// 512/1024/2048: ~36/85/148 and ~171/220/273 TFLOPs/GPU. These runs carry a
// fixed cost per step the model has no mechanism for (T_fix,
// SpeedConstants::fixed_step_overhead, 0 by default). Fit and test are kept
// apart: T_fix is fitted here on the three mbs 1 points only (least squares
// of a constant offset: the mean of measured minus modelled step, the
// measured step being the model's FLOPs per GPU over the measured TFLOP/s),
// and the three mbs 4 points test it. Ordering (TFLOPs rise with tokens)
// always; magnitude 25% on the test points, except mbs 4 / seq 512 (30%):
// the chart-read data put it 15% above mbs 1 / seq 2048 at the same 2048
// tokens, which no token-count model reproduces.
TEST(SpeedGolden, G9_Llama8bZero1SmallBatch) {
    const ModelInfo m = preset("llama-3-8b");
    const SpeedHardware h = hw("H100-80GB", Dtype::bf16);
    const double want[2][3] = {{36, 85, 148}, {171, 220, 273}};
    const int64_t mbs[2] = {1, 4};
    const int64_t seqs[3] = {512, 1024, 2048};
    // Fit set: mbs 1.
    double offset = 0;
    for (int i = 0; i < 3; ++i) {
        const StepTime t = step_time(input(m, 8, 1, 1, mbs[0], seqs[i]), h);
        const double flops = t.tflops_per_gpu * 1e12 * t.total;  // model FLOPs per GPU per step
        offset += (flops / (want[0][i] * 1e12) - t.total) / 3.0;
    }
    ASSERT_GT(offset, 0.0) << "the measured steps are longer than the model's";
    SpeedConstants k;
    k.fixed_step_overhead = offset;
    std::printf("G9 T_fix fitted on mbs 1: %.3f s\n", offset);
    // Test set: mbs 4 (and the ordering on both).
    for (int b = 0; b < 2; ++b) {
        double prev = 0;
        for (int i = 0; i < 3; ++i) {
            const StepTime t = step_time(input(m, 8, 1, 1, mbs[b], seqs[i]), h, k);
            EXPECT_GT(t.tflops_per_gpu, prev);
            prev = t.tflops_per_gpu;
            if (b == 1) {
                const double tol = i == 0 ? 0.30 : 0.25;
                EXPECT_TRUE(within(t.tflops_per_gpu, want[b][i], tol)) << "mbs " << mbs[b] << " seq " << seqs[i];
            }
            std::printf("G9 mbs %lld seq %lld: %.1f TFLOP/s per GPU (%s)\n", (long long)mbs[b], (long long)seqs[i],
                        t.tflops_per_gpu, b == 0 ? "fit" : "test");
        }
    }
}

// G10: 3.6B GPT (h 3072, L 30), 64x A100 (8 nodes, 800 Gb/s per node =
// 8 x HDR100 rails), pure DP, gbs 512, mbs 8, seq 2048: 3.567 s/iter.
// Megatron-DeepSpeed with activation checkpointing assumed; GPT-2 vocab.
TEST(SpeedGolden, G10_Gpt36bPureDataParallel) {
    const ModelInfo m = gpt2(3072, 30, 24);
    const StepTime t = step_time(input(m, 64, 8, 0, 8, 2048, 1, Dtype::fp16, Checkpointing::full),
                                 hw("A100-80GB", Dtype::fp16, "ib-hdr100"));
    EXPECT_TRUE(within(t.total, 3.567, 0.25));
    std::printf("G10 %.3f s per step\n", t.total);
}

// G11: Llama-2-7B, 4x A100, ZeRO-2 + optimizer offload: ">7 s" per step,
// "CPU path >4 s vs backward ~2 s; >60% GPU idle" (ZenFlow blog; seq 4096,
// mbs 1 assumed). The "0.5 s" without offload cannot be the same step
// (backward alone is ~2 s), so the 14x ratio is not checked. Checked: the
// offloaded step within 25% of 7 s, CPU optimizer > 4 s, and optimizer +
// transfers > 60% of the step; offload slower than no offload.
TEST(SpeedGolden, G11_Llama7bOffloadPenalty) {
    const ModelInfo m = preset("llama-2-7b");
    const SpeedHardware h = hw("A100-80GB", Dtype::bf16);
    EstimateInput in = input(m, 4, 1, 2, 1, 4096);
    const StepTime plain = step_time(in, h);
    in.zero.offload_optimizer = OffloadDevice::cpu;
    const StepTime off = step_time(in, h);
    EXPECT_GT(off.total, 2.0 * plain.total);
    EXPECT_GT(off.optimizer, 4.0);
    EXPECT_GT((off.optimizer + off.offload) / off.total, 0.6);
    EXPECT_TRUE(within(off.total, 7.0, 0.25));
    std::printf("G11 %.2f s -> %.2f s\n", plain.total, off.total);
}

// G12: Qwen2.5-3B, 2x A100-40, ZeRO-2 + optimizer offload, batch 8 (mbs 4
// per GPU, seq 2048 assumed): 2.89 s/step.
TEST(SpeedGolden, G12_Qwen3bOffloadAbsolute) {
    const ModelInfo m = from_hf({{"model_type", "qwen2"}, {"hidden_size", 2048}, {"num_hidden_layers", 36},
                                 {"num_attention_heads", 16}, {"num_key_value_heads", 2},
                                 {"intermediate_size", 11008}, {"vocab_size", 151936},
                                 {"tie_word_embeddings", true}, {"max_position_embeddings", 32768}});
    EstimateInput in = input(m, 2, 1, 2, 4, 2048);
    in.zero.offload_optimizer = OffloadDevice::cpu;
    const StepTime t = step_time(in, hw("A100-40GB", Dtype::bf16));
    EXPECT_TRUE(within(t.total, 2.89, 0.25));
    std::printf("G12 %.2f s per step\n", t.total);
}

// ---- G3b, G4, G13, G14 ------------------------------------------------------

// G3b (2021 autotuner, 16x V100, mbs per stage in brackets):
// GPT2-medium fp16 z0 167.7 (5), z1 175.5 (6), z2 161.6 (6); BERT-large
// fp32 z0 835.2 (93), z1 842.2 (93), z2 764.5 (94); DeBERTa-v2-xxlarge
// 1.5B fp16 z0 OOM, z1 177.8 (11), z2 154.0 (14): z1 >= z0 > z2.
// GPT2-medium at seq 1024 (HF run_clm default, assumed, as G1/G2);
// BERT-large at seq 128 (HF default max_seq_length, assumed); DeBERTa at
// seq 256 (DeepSpeedExamples autotuning/hf/deberta/test_tune.sh:
// --max_seq_length 256). BERT-large is modelled GPT-2-shaped (h 1024, 24
// layers, vocab 30522, 512 positions); DeBERTa-v2-xxlarge likewise (h 1536,
// 48 layers, 24 heads, vocab 128100: 1.56e9 params, published 1.5B).
// Orderings only. Magnitudes do not hold and are not asserted: the model,
// whose efficiency depends on tokens alone, is ~65% fast on GPT2-medium
// (h 1024: small matmuls and memory-bound elementwise work weigh more than
// at GPT2-xl's h 1600, where G1 holds), ~50% slow on fp32 BERT-large (as on
// G3's BERT-base) and ~35% fast on DeBERTa (its relative-position attention
// is not modelled). The DeBERTa z1 > z2 margin is thin in the model (~1%,
// measured 15%): z2's larger micro batch (14 vs 11) nearly pays for its
// per-micro-step bookkeeping.
TEST(SpeedGolden, G3b_SideBySideOrderings) {
    const SpeedConstants k = era2021();
    {
        const ModelInfo m = gpt2(1024, 24, 16);
        const SpeedHardware h = hw("V100-32GB", Dtype::fp16);
        const double z0 = samples_per_s(input(m, 16, 1, 0, 5, 1024, 1, Dtype::fp16), h, k);
        const double z1 = samples_per_s(input(m, 16, 1, 1, 6, 1024, 1, Dtype::fp16), h, k);
        const double z2 = samples_per_s(input(m, 16, 1, 2, 6, 1024, 1, Dtype::fp16), h, k);
        EXPECT_GE(z1, z0);
        EXPECT_GT(z0, z2);
        std::printf("G3b GPT2-medium z0 %.1f z1 %.1f z2 %.1f samples/s\n", z0, z1, z2);
    }
    {
        const ModelInfo m = from_hf({{"model_type", "gpt2"}, {"n_embd", 1024}, {"n_layer", 24}, {"n_head", 16},
                                     {"n_positions", 512}, {"vocab_size", 30522}});
        const SpeedHardware h = hw("V100-32GB", Dtype::fp32);
        const double z0 = samples_per_s(input(m, 16, 1, 0, 93, 128, 1, Dtype::fp32), h, k);
        const double z1 = samples_per_s(input(m, 16, 1, 1, 93, 128, 1, Dtype::fp32), h, k);
        const double z2 = samples_per_s(input(m, 16, 1, 2, 94, 128, 1, Dtype::fp32), h, k);
        // z1 vs z0 measured 0.8% apart: a tie within 1% agrees (as in G3).
        EXPECT_GE(z1, 0.99 * z0);
        EXPECT_GT(z0, z2);
        std::printf("G3b BERT-large z0 %.1f z1 %.1f z2 %.1f samples/s\n", z0, z1, z2);
    }
    {
        const ModelInfo m = from_hf({{"model_type", "gpt2"}, {"n_embd", 1536}, {"n_layer", 48}, {"n_head", 24},
                                     {"n_positions", 512}, {"vocab_size", 128100}});
        const SpeedHardware h = hw("V100-32GB", Dtype::fp16);
        const double z1 = samples_per_s(input(m, 16, 1, 1, 11, 256, 1, Dtype::fp16), h, k);
        const double z2 = samples_per_s(input(m, 16, 1, 2, 14, 256, 1, Dtype::fp16), h, k);
        EXPECT_GT(z1, z2);
        std::printf("G3b DeBERTa-v2-xxl z1 %.1f z2 %.1f samples/s\n", z1, z2);
    }
}

// G4: BLOOM-560M / BLOOM-1.1B (bigscience/bloom-560m, bloom-1b1
// config.json: h 1024 / 1536, 24 layers, 16 heads, vocab 250880, tied),
// 2x TITAN RTX, fp16 (Turing has no bf16), seq 512, mbs 1, gas 1 (assumed:
// "batch/s" read as optimizer steps/s): z1 8.5 / 6.0, z2 6.8 / 4.0, z3 2.6
// / 2.37 batch/s (BELLE#402, 2023 DeepSpeed: default constants).
// The link is not stated. Independent arithmetic says it is the NVLink
// bridge: z1 moves 3 (n-1)/n S = 1.5 x 1.12 GB = 1.68 GB per GPU per step
// for the 560M model, 0.12 s at PCIe gen3's 13.9 GB/s effective rate -
// more than the whole measured 1/8.5 = 0.118 s step. So nvlink-bridge-turing.
// The ZeRO-3 penalty is per launch, not per byte: the measured z3 - z1 step
// gaps are 1/2.6 - 1/8.5 = 0.267 s and 1/2.37 - 1/6.0 = 0.255 s - equal for
// two models with the same 24 layers (97 fetched tensors, 291 launches)
// and twice the bytes apart, i.e. ~0.9 ms per launch with nothing hidden.
// That is the synchronous-fetch regime of speed_constants_era2021 (1.1 ms,
// no overlap), so G4 is evaluated with it although the run is from 2023;
// with the 2024+ defaults the model puts z3 level with z1 on this pair.
// Ordering z1 > z2 > z3 for both. Magnitude within 25%: z2 of both, z1 of
// the 560M model, and z3/z1 of both (measured 0.31 / 0.40). Not asserted:
// z1 of the 1.1B model (model ~38% slow: at 512 tokens its efficiency
// curve, calibrated on V100-H100 runs, is too low for this pair) and z3
// absolute (follows from the two).
TEST(SpeedGolden, G4_Bloom2xTitanRtx) {
    const SpeedHardware h = speed_hardware(load_gpu_preset("TITAN-RTX-24GB", kData), Dtype::fp16,
                                           "nvlink-bridge-turing", "", kData);
    const struct {
        int64_t hidden;
        double z1, z2, z3;
    } cases[2] = {{1024, 8.5, 6.8, 2.6}, {1536, 6.0, 4.0, 2.37}};
    for (const auto& c : cases) {
        const ModelInfo m = from_hf({{"model_type", "bloom"}, {"hidden_size", c.hidden}, {"n_layer", 24},
                                     {"n_head", 16}, {"vocab_size", 250880}});
        double rate[4] = {0, 0, 0, 0};
        for (int st = 1; st <= 3; ++st)
            rate[st] = 1.0 / step_time(input(m, 2, 1, st, 1, 512, 1, Dtype::fp16), h, era2021()).total;
        EXPECT_GT(rate[1], rate[2]) << "h " << c.hidden;
        EXPECT_GT(rate[2], rate[3]) << "h " << c.hidden;
        if (c.hidden == 1024) {
            EXPECT_TRUE(within(rate[1], c.z1, 0.25)) << "z1 h " << c.hidden;
        }
        EXPECT_TRUE(within(rate[2], c.z2, 0.25)) << "z2 h " << c.hidden;
        EXPECT_TRUE(within(rate[3] / rate[1], c.z3 / c.z1, 0.25)) << "z3/z1 h " << c.hidden;
        std::printf("G4 h %lld: z1 %.2f z2 %.2f z3 %.2f steps/s, z3/z1 %.2f (measured %.2f)\n", (long long)c.hidden,
                    rate[1], rate[2], rate[3], rate[3] / rate[1], c.z3 / c.z1);
    }
}

// G13: ZeRO-3, 18B, 384 V100 = 24 DGX-2 nodes x 16 (ZeRO++ paper,
// Wang et al. 2023), 2K tokens per GPU (mbs 1, seq 2048 assumed), fp16,
// IB 4 x 100 Gb/s per node vs 1 x 100 Gb/s: 40 vs 26 TFLOPs/GPU (DeepSpeed
// blogs/zeropp; ZeRO++ itself is not modelled). 18B as a GPT of 40 layers,
// h 6144 (12 L h^2 = 18.1e9, assumed; GPT-2 vocabulary). 2023 DeepSpeed:
// default constants. The NICs are InfiniBand, not EFA: NIC efficiency 0.9
// (Calculon's IB network efficiency, calculon-ai/calculon a100_80g) instead of
// the ib-hdr100 preset's 0.73 (measured on EFA); 16 GPUs share 4 or 1 NICs.
// At 1 x 100 Gb/s the model sits near the edge (-25%). Direction always (more bandwidth is faster); the two
// magnitudes and their ratio 40/26 = 1.54 within 25%.
TEST(SpeedGolden, G13_Zero3BandwidthSensitivity) {
    const ModelInfo m = gpt2(6144, 40, 48);
    double tf[2] = {0, 0};
    const int links[2] = {4, 1};
    for (int i = 0; i < 2; ++i) {
        SpeedHardware h = hw("V100-32GB", Dtype::fp16, "ib-hdr100");
        h.inter->links_per_node = links[i];
        h.inter->efficiency = 0.9;
        tf[i] = step_time(input(m, 384, 24, 3, 1, 2048, 1, Dtype::fp16), h).tflops_per_gpu;
    }
    EXPECT_GT(tf[0], tf[1]);
    EXPECT_TRUE(within(tf[0], 40, 0.25));
    EXPECT_TRUE(within(tf[1], 26, 0.25));
    EXPECT_TRUE(within(tf[0] / tf[1], 40.0 / 26.0, 0.25));
    std::printf("G13 IB 4x100: %.1f, 1x100: %.1f TFLOP/s per GPU (ratio %.2f, measured 1.54)\n", tf[0], tf[1],
                tf[0] / tf[1]);
}

// G14: GPT2-large on 16x V100 (DeepSpeedExamples autotuning/hf): HF DDP 27.9, DeepSpeed
// ZeRO-1 hand-tuned 56.8, autotuned 69.1 samples/s end to end; the
// autotuner's ZeRO-1 pick is mbs 3 (87.3 samples/s by its own timers, G2)
// against 2 for a memory-capped baseline. Checked: tuning headroom exists -
// ZeRO-1 at mbs 3 is faster than at mbs 2, and faster than z0 at mbs 2;
// the gain mbs 2 -> 3 stays below the whole measured autotuned/DDP gap
// 69.1/27.9 = 2.48 (the rest is framework, not micro batch).
TEST(SpeedGolden, G14_Gpt2LargeTuningHeadroom) {
    const ModelInfo m = gpt2(1280, 36, 20);
    const SpeedHardware h = hw("V100-32GB", Dtype::fp16);
    const SpeedConstants k = era2021();
    const double z1_2 = samples_per_s(input(m, 16, 1, 1, 2, 1024, 1, Dtype::fp16), h, k);
    const double z1_3 = samples_per_s(input(m, 16, 1, 1, 3, 1024, 1, Dtype::fp16), h, k);
    const double z0_2 = samples_per_s(input(m, 16, 1, 0, 2, 1024, 1, Dtype::fp16), h, k);
    EXPECT_GT(z1_3, z1_2);
    EXPECT_GT(z1_3, z0_2);
    EXPECT_LT(z1_3 / z1_2, 69.1 / 27.9);
    std::printf("G14 z1 mbs 2 %.1f, mbs 3 %.1f, z0 mbs 2 %.1f samples/s\n", z1_2, z1_3, z0_2);
}

// Parameter offload is never free: every micro-step the rank's 16-bit
// partition crosses PCIe twice (forward and backward gathers) and each fetched
// tensor pays a synchronous fetch, so at the same micro batch ZeRO-3 +
// offload_param is slower than ZeRO-3, and NVMe is slower than CPU
// (PCIe and NVMe bandwidth are below HBM's).
TEST(SpeedModel, ParameterOffloadCostsTime) {
    const ModelInfo m = preset("llama-2-7b");
    const SpeedHardware h = hw("A100-80GB", Dtype::bf16);
    EstimateInput in = input(m, 8, 1, 3, 2, 4096, 4, Dtype::bf16);
    const double base = step_time(in, h).total;
    in.zero.offload_param = OffloadDevice::cpu;
    const double cpu = step_time(in, h).total;
    in.zero.offload_param = OffloadDevice::nvme;
    const double nvme = step_time(in, h).total;
    EXPECT_GT(cpu, base);
    EXPECT_GT(nvme, cpu);
}
