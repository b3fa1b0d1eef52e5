// Tests of the step-time model (speed.h) against the nine measured sets of
// tests/data/reference/speed_cases_more.json (each set cites its source). Every
// set's stated ordering is a test; a magnitude is asserted only where the
// set's setup is fully known, within the tolerance stated next to it.
// Measured values are read from the JSON; the rest is the set's setup as
// the source states it, or an assumption said so in place.
//
// Calibration: no constant of the model is fitted on these nine sets, so
// all of them count as evidence. The constants that are fitted (speed.h):
// stage3_launch_cost on G7, the 2021 fetch cost on G1 and G3,
// cpu_adam_memory_efficiency on G8 - those cases are not evidence for them.
#include "speed_test_helpers.h"
#include "zeromem/ds_config.h"
#include "zeromem/estimate.h"
#include "zeromem/gpu.h"
#include "zeromem/model.h"
#include "zeromem/planner.h"
#include "zeromem/speed.h"
#include "zeromem/util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <string>

using namespace zeromem;
using namespace zeromem::speed_testing;

namespace {

const std::string kData = ZEROMEM_SOURCE_DATA_DIR;

const nlohmann::json& cases() {
    static const nlohmann::json j =
        nlohmann::json::parse(read_text_file(std::string(ZEROMEM_REFERENCE_DIR) + "/speed_cases_more.json"));
    return j;
}

/// The measured value of run `label` of set `id`.
double measured(const std::string& id, const std::string& label) {
    for (const auto& c : cases().at("cases")) {
        if (c.at("id") != id) continue;
        for (const auto& r : c.at("runs"))
            if (r.at("label") == label) return r.at("measured").at("value").get<double>();
    }
    throw std::runtime_error("no run '" + label + "' in set " + id);
}

SpeedHardware hw(const std::string& gpu, Dtype d, const std::string& intra = "", const std::string& inter = "") {
    return speed_hardware(load_gpu_preset(gpu, kData), d, intra, inter, kData);
}

EstimateInput input(const ModelInfo& m, int64_t gpus, int64_t nodes, int stage, int64_t micro, int64_t seq,
                    Dtype d = Dtype::bf16, Checkpointing ck = Checkpointing::none, int64_t gas = 1) {
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

/// Constants for a torch DDP run: its Reducer all-reduces gradient buckets
/// during backward, hidden like DeepSpeed's overlap_comm (speed.h
/// stage0_overlap).
SpeedConstants torch_ddp() {
    SpeedConstants k;
    k.stage0_overlap = k.overlap_fraction;
    return k;
}

}  // namespace

// ---- S01: t5-large, 2x TITAN RTX: DDP fp32 / DDP fp16 / ZeRO-2 / ZeRO-2 + offload
//
// t5-large (24 encoder + 24 decoder layers, h 1024, ffn 4096, 16 heads,
// vocab 32128, no biases, RMS-style norms) as 48 blocks of a decoder: this
// drops the decoder's cross-attention (24 x 4 h^2 = 0.10e9), so the
// parameter count is set to the published 0.738e9; source and target 128
// tokens each, a token passing one stack: seq 128. Link: PCIe (no NVLink
// stated): pcie-gen3. Host CPU not published: the default CPU Adam rate.
// ds_config (assumed, as the set says): overlap_comm on, buckets 2e8,
// DeepSpeedCPUAdam (a DeepSpeed optimizer block). DDP + amp: fp16 compute,
// fp32 gradients all-reduced.
// Ordering: ZeRO-2 (mbs 40) > ZeRO-2 + offload (50) ~ DDP fp16 (20) > DDP
// fp32 (16), in train time for 2000 samples. DDP rows are torch DDP
// (gradient all-reduce overlapping backward: torch_ddp()). Asserted: ZeRO-2
// fastest, DDP fp32 slowest, DDP fp16 < DDP fp32, and the offload /
// no-offload ratio (measured 2.0x) within 25%. NOT reached (docs/speed-model.md,
// "Against measurements"): the tie ZeRO-2 + offload ~ DDP fp16 (measured 2.4% apart) -
// the model puts DDP fp16 ~40% ahead. The measured times are whole short
// epochs (warm-up, data loading; 50 optimizer steps for DDP fp16 against
// 20 for ZeRO-2 + offload), fixed costs the per-step model does not
// contain, and the host CPU (the CPU Adam rate) is not published.
// Magnitudes are not asserted for the same reason.
TEST(SpeedMore, S01_T5LargeOffloadAndDdp) {
    ModelArch a;
    a.name = "t5-large";
    a.family = "t5";
    a.hidden_size = 1024;
    a.num_layers = 48;
    a.num_heads = 16;
    a.num_kv_heads = 16;
    a.head_dim = 64;
    a.ffn_size = 4096;
    a.vocab_size = 32128;
    a.max_position_embeddings = 512;
    a.tied_embeddings = true;
    ModelInfo m = with_arch(a);
    m.params = 738000000;
    const SpeedHardware h = hw("TITAN-RTX-24GB", Dtype::fp16, "pcie-gen3");
    SpeedHardware h32 = hw("TITAN-RTX-24GB", Dtype::fp32, "pcie-gen3");
    EstimateInput ddp32 = input(m, 2, 1, 0, 16, 128, Dtype::fp32);
    EstimateInput ddp16 = input(m, 2, 1, 0, 20, 128, Dtype::fp16);
    ddp16.train.communication_dtype = Dtype::fp32;
    EstimateInput z2 = input(m, 2, 1, 2, 40, 128, Dtype::fp16);
    z2.zero.overlap_comm = true;
    z2.zero.reduce_bucket_size = z2.zero.allgather_bucket_size = 200000000;
    z2.train.fused_optimizer = true;
    EstimateInput z2off = z2;
    z2off.train.micro_batch = 50;
    z2off.zero.offload_optimizer = OffloadDevice::cpu;
    // Train time for 2000 samples, s.
    const double t32 = 2000 / samples_per_s(ddp32, h32, torch_ddp()), t16 = 2000 / samples_per_s(ddp16, h, torch_ddp());
    const double tz2 = 2000 / samples_per_s(z2, h), tz2off = 2000 / samples_per_s(z2off, h);
    EXPECT_LT(tz2, tz2off);
    EXPECT_LT(tz2, t16);
    EXPECT_LT(t16, t32);
    EXPECT_LT(tz2off, t32);
    const double m_z2 = measured("S01", "DeepSpeed ZeRO-2, no offload");
    const double m_off = measured("S01", "DeepSpeed ZeRO-2 + CPU offload (optimizer)");
    const double m_16 = measured("S01", "DDP + --fp16 (amp)");
    EXPECT_TRUE(within(tz2off / tz2, m_off / m_z2, 0.25));
    std::printf("S01 z2+offload / DDP fp16 time %.2f (measured %.2f; not reached, see above)\n", tz2off / t16,
                m_off / m_16);
    std::printf("S01 train time (s): DDP fp32 %.1f, DDP fp16 %.1f, z2 %.1f, z2+offload %.1f; offload/z2 %.2f "
                "(measured %.2f)\n",
                t32, t16, tz2, tz2off, tz2off / tz2, m_off / m_z2);
}

// ---- S02: DeBERTa-v2-xlarge MRPC, 2x TITAN RTX: DDP (mbs 8) vs ZeRO-2 (mbs 40)
//
// microsoft/deberta-v2-xlarge config (24 layers, h 1536, 24 heads, ffn 6144,
// vocab 128100, 512 positions) modelled BERT-shaped (learned positions,
// biases, LayerNorm); seq 128; fp16; torch AdamW (Accelerate, no DeepSpeed
// optimizer block); DeepSpeed defaults (overlap_comm off, buckets 5e8).
// Ordering: ZeRO-2 faster per epoch. Magnitude not asserted: epoch time
// includes data loading, and DeBERTa's disentangled attention (extra
// position projections) is not modelled; the measured 3.6x speedup comes
// mostly from the 5x micro batch, which the model's efficiency curve
// (tokens/(tokens + 1024)) credits at ~1.6x.
TEST(SpeedMore, S02_DebertaZero2UnlocksBatch) {
    const ModelInfo m = from_hf({{"model_type", "gpt2"}, {"n_embd", 1536}, {"n_layer", 24}, {"n_head", 24},
                                 {"n_inner", 6144}, {"n_positions", 512}, {"vocab_size", 128100}});
    const SpeedHardware h = hw("TITAN-RTX-24GB", Dtype::fp16, "pcie-gen3");
    EstimateInput ddp = input(m, 2, 1, 0, 8, 128, Dtype::fp16);
    ddp.train.communication_dtype = Dtype::fp32;
    const double s_ddp = samples_per_s(ddp, h, torch_ddp());
    const double s_z2 = samples_per_s(input(m, 2, 1, 2, 40, 128, Dtype::fp16), h);
    EXPECT_GT(s_z2, s_ddp);
    std::printf("S02 samples/s: DDP %.1f (measured %.1f s/epoch), z2 %.1f (%.1f s/epoch)\n", s_ddp,
                measured("S02", "DDP"), s_z2, measured("S02", "DeepSpeed ZeRO-2"));
}

// ---- S05: TinyLlama 1.1B, 4x RTX A6000 (PCIe): DDP vs ZeRO-2 at equal micro batch
//
// TinyLlama-1.1B (22 layers, h 2048, 32 heads, 4 KV heads, ffn 5632, vocab
// 32000, untied), seq 2048, bf16, 4 GPUs on PCIe gen4 (pcie-gen4; NVLink
// bridges not stated); torch DDP overlaps its all-reduce (torch_ddp()). The RTX A6000 has no preset: 154.8 TFLOP/s dense
// 16-bit tensor peak, 768 GB/s GDDR6 (NVIDIA RTX A6000 datasheet),
// eta_max 0.5 (the literature default, cli99/llm-analysis flops_efficiency, as for the
// other presets without a measured MFU). The DDP run keeps everything in
// bf16 (model loaded in bf16): its Adam moves 14 B/param (2-byte p, g, m,
// v read; p, m, v written) instead of the mixed-precision 28, arithmetic
// written here. ZeRO-2 per ds_config.json: overlap_comm on, buckets 2e8.
// Ordering: DDP (mbs 8) > ZeRO-2 (mbs 8); ZeRO-2 at mbs 12 faster than at
// mbs 8 and near DDP (measured 40.0k vs 40.4k, 1% apart; asserted within
// 10%: the model's efficiency curve gives mbs 8 -> 12 only +5%, measured
// +14%, so its ZeRO-2 at mbs 12 sits ~9% below DDP; docs/speed-model.md). Magnitude:
// all three within 25% (setup fully stated by the repository).
TEST(SpeedMore, S05_TinyLlamaDdpVsZero2OnPcie) {
    const ModelInfo m = from_hf({{"model_type", "llama"}, {"hidden_size", 2048}, {"num_hidden_layers", 22},
                                 {"num_attention_heads", 32}, {"num_key_value_heads", 4},
                                 {"intermediate_size", 5632}, {"vocab_size", 32000},
                                 {"max_position_embeddings", 2048}, {"tie_word_embeddings", false}});
    GpuSpec a6000;
    a6000.name = "RTX-A6000";
    a6000.bf16_tflops = 154.8;
    a6000.fp16_tflops = 154.8;
    a6000.hbm_bandwidth = 768e9;
    a6000.intra_interconnect = "pcie-gen4";
    const SpeedHardware h = speed_hardware(a6000, Dtype::bf16, "", "", kData);
    SpeedConstants pure_bf16 = torch_ddp();
    pure_bf16.adam_bytes_per_param = 14;
    const double ddp = step_time(input(m, 4, 1, 0, 8, 2048), h, pure_bf16).tokens_per_s / 1e3;
    EstimateInput z2 = input(m, 4, 1, 2, 8, 2048);
    z2.zero.overlap_comm = true;
    z2.zero.reduce_bucket_size = z2.zero.allgather_bucket_size = 200000000;
    const double z2_8 = step_time(z2, h).tokens_per_s / 1e3;
    z2.train.micro_batch = 12;
    const double z2_12 = step_time(z2, h).tokens_per_s / 1e3;
    const double m_ddp = measured("S05", "Accelerate multi-GPU (DDP assumed)");
    EXPECT_GT(ddp, z2_8);
    EXPECT_GT(z2_12, z2_8);
    EXPECT_GT(z2_12, 0.90 * ddp);
    EXPECT_TRUE(within(ddp, m_ddp, 0.25));
    EXPECT_TRUE(within(z2_8, 35.0, 0.25));
    EXPECT_TRUE(within(z2_12, 40.0, 0.25));
    std::printf("S05 k tokens/s: DDP %.1f (measured %.1f), z2 mbs 8 %.1f (35.0), z2 mbs 12 %.1f (40.0)\n", ddp, m_ddp,
                z2_8, z2_12);
}

// ---- S10: pi05 (3.3B VLA), 8x A100: DDP 75.8 >> ZeRO-1 29.5 ~ ZeRO-2 28.7 samples/s
//
// Not reachable (docs/speed-model.md, "Against measurements"): the 2.6x gap is per-parameter
// host overhead, but the model's per-tensor cost is bounded by G1/G3.
// What is checked here is that bound, in arithmetic: the measured z1 - DDP
// step gap over pi05's parameter tensors needs >1 ms per tensor, while
// G1's whole ZeRO-1 step (GPT2-xl, 580 tensors) is 0.40 s, i.e. < 0.7 ms
// per tensor even if nothing else took time. Tensor count of pi05
// (assumed, from the public configs): SigLIP-So400m 27 layers x 16
// tensors + Gemma-2B 18 x 9 + Gemma-300M expert 18 x 9 + ~10 embeddings
// and norms = 766. And the part the model does reach: ZeRO-1 faster than
// ZeRO-2 at the same micro batch (measured 2.7% apart), with a
// Gemma-2B-sized stand-in (arch of google/gemma-2b, 18 layers, h 2048,
// ffn 16384, vocab 257152) on 8 A100, mbs 14, seq 800 (assumed). The gap
// is asserted within 10% only (the model's is ~9%: its ZeRO-2 bookkeeping
// c2 = 10% of forward+backward comes from the 2021 autotuner gaps G1-G3 of
// speed_test.cpp; listed in docs/speed-model.md).
TEST(SpeedMore, S10_PerParameterGapNotReachable) {
    const double z1_ms = 1000.0 * 8 * 14 / measured("S10", "ZeRO-1 (control)");
    const double ddp_ms = 1000.0 * 8 * 11 / measured("S10", "DDP (lm_head still present)");
    const double pi05_tensors = 27 * 16 + 18 * 9 + 18 * 9 + 10;
    const double needed_per_tensor_ms = (z1_ms - ddp_ms) / pi05_tensors;
    const double g1_bound_ms = 16.0 / 40.17 * 1000.0 / 580.0;  // G1: z1 step over GPT2-xl's tensors
    EXPECT_GT(needed_per_tensor_ms, 1.0);
    EXPECT_GT(needed_per_tensor_ms, 4.0 * g1_bound_ms);
    const ModelInfo m = from_hf({{"model_type", "llama"}, {"hidden_size", 2048}, {"num_hidden_layers", 18},
                                 {"num_attention_heads", 8}, {"num_key_value_heads", 1}, {"head_dim", 256},
                                 {"intermediate_size", 16384}, {"vocab_size", 257152},
                                 {"tie_word_embeddings", true}, {"max_position_embeddings", 8192}});
    const SpeedHardware h = hw("A100-80GB", Dtype::bf16);
    EstimateInput z1 = input(m, 8, 1, 1, 14, 800);
    EstimateInput z2 = input(m, 8, 1, 2, 14, 800);
    z1.zero.overlap_comm = z2.zero.overlap_comm = true;
    const double s1 = samples_per_s(z1, h), s2 = samples_per_s(z2, h);
    EXPECT_GT(s1, s2);
    EXPECT_TRUE(within(s2 / s1, measured("S10", "ZeRO-2 (tuned) baseline") / measured("S10", "ZeRO-1 (control)"), 0.10));
    std::printf("S10 needed %.2f ms per tensor vs G1 bound %.2f ms; model z2/z1 %.3f\n", needed_per_tensor_ms,
                g1_bound_ms, s2 / s1);
}

// ---- S11: frozen ~33B backbone + 0.9B trained expert, 8x A100-80 (NVLink)
//
// Modelled as Qwen3-VL-32B's language model (Qwen2.5-32B shape: 64 layers,
// h 5120, 40 heads, 8 KV heads, ffn 27648, vocab 152064, untied) with the
// parameter count set to the published 34.3e9 and trainable parameters
// 0.91e9; seq 161 tokens (prefix ~151 + chunk 10); gradient checkpointing
// (full); bf16; DeepSpeed defaults. ZeRO-2 reduces only the trainable
// gradients; ZeRO-3 gathers every parameter, frozen or not.
// Orderings: at matched micro batch (2 and 8) ZeRO-2 > ZeRO-3; each at its
// own largest micro batch (32 vs 192) ZeRO-3 > ZeRO-2. Magnitudes not
// asserted: the matched-batch gap (1.3-1.4x measured) comes from gathers
// the model hides behind compute; the frozen backbone's backward (no
// weight gradients) is counted as a full backward.
TEST(SpeedMore, S11_FrozenBackboneZero2VsZero3) {
    ModelInfo m = from_hf({{"model_type", "qwen2"}, {"hidden_size", 5120}, {"num_hidden_layers", 64},
                           {"num_attention_heads", 40}, {"num_key_value_heads", 8}, {"intermediate_size", 27648},
                           {"vocab_size", 152064}, {"tie_word_embeddings", false},
                           {"max_position_embeddings", 32768}});
    m.params = 34300000000;
    const SpeedHardware h = hw("A100-80GB", Dtype::bf16);
    auto rate = [&](int stage, int64_t mbs) {
        EstimateInput in = input(m, 8, 1, stage, mbs, 161, Dtype::bf16, Checkpointing::full);
        in.train.trainable_params = 910000000;
        return samples_per_s(in, h);
    };
    for (int64_t mbs : {2, 8}) EXPECT_GT(rate(2, mbs), rate(3, mbs)) << "mbs " << mbs;
    EXPECT_GT(rate(3, 192), rate(2, 32));
    std::printf("S11 samples/s: mbs 2 z2 %.2f z3 %.2f; mbs 8 z2 %.2f z3 %.2f; limits z2(32) %.1f z3(192) %.1f "
                "(measured 43 / 58)\n",
                rate(2, 2), rate(3, 2), rate(2, 8), rate(3, 8), rate(2, 32), rate(3, 192));
}

// ---- S13: ZeRO-2-Offload vs ZeRO-3-Offload, 16x V100 (one DGX-2)
//
// Ranking probe (no shapes or batch sizes published). Models: GPT of 50
// layers x h 4096 (10B, the DeepSpeed ZeRO tutorial's 10B shape) and 40 x
// 5120 (13B, Llama-2-13B-like widths), GPT-2 vocabulary, seq 1024, fp16,
// DeepSpeedCPUAdam, host dgx-2. Each option at its own largest micro
// batch with the same global batch (compare_options' ranking rule; global
// batch 512 assumed). Ordering: ZeRO-3 +
// optimizer and parameter offload ahead of ZeRO-2 + optimizer offload at
// 10B and 13B (measured 1.30x, 1.19x). 20B-70B not tested: ZeRO-2-Offload
// needs model parallelism there (the set's assumption), which zeromem does
// not model for speed.
TEST(SpeedMore, S13_Zero3OffloadBeatsZero2Offload) {
    SpeedHardware h = hw("V100-32GB", Dtype::fp16);
    apply_host(h, load_host_preset("dgx-2", kData), SpeedConstants{});
    const struct {
        int64_t hidden, layers;
        const char* z2, *z3;
    } sizes[2] = {{4096, 50, "ZeRO-2-Offload 10B", "ZeRO-3-Offload 10B"},
                  {5120, 40, "ZeRO-2-Offload 13B", "ZeRO-3-Offload 13B"}};
    for (const auto& sz : sizes) {
        const ModelInfo m = from_hf({{"model_type", "gpt2"}, {"n_embd", sz.hidden}, {"n_layer", sz.layers},
                                     {"n_head", 32}, {"n_positions", 1024}, {"vocab_size", 50257}});
        EstimateInput base = input(m, 16, 1, 0, 1, 1024, Dtype::fp16);
        base.cluster.gpu_memory = load_gpu_preset("V100-32GB", kData).memory_bytes;
        base.train.fused_optimizer = true;
        double z2 = 0, z3 = 0;
        for (const Candidate& c : compare_options(base, h, 512)) {
            if (!c.fits) continue;
            const ZeroOption& o = c.option;
            if (o.stage == 2 && o.offload_optimizer == OffloadDevice::cpu)
                z2 = std::max(z2, c.time.tokens_per_s);
            if (o.stage == 3 && o.offload_optimizer == OffloadDevice::cpu && o.offload_param == OffloadDevice::cpu)
                z3 = std::max(z3, c.time.tokens_per_s);
        }
        ASSERT_GT(z2, 0) << sz.z2 << " fits nowhere";
        ASSERT_GT(z3, 0) << sz.z3 << " fits nowhere";
        EXPECT_GT(z3, z2) << sz.z3;
        std::printf("S13 h %lld: z3+offload / z2+offload %.2f (measured %.2f)\n", (long long)sz.hidden, z3 / z2,
                    measured("S13", sz.z3) / measured("S13", sz.z2));
    }
}

// ---- S14: GPT-2 10B ZeRO-2 on 32 V100: PCIe cluster vs NVLink cluster
//
// 50 layers, h 4096, 32 heads, vocab 50257, seq 1024 (assumed), mbs 1,
// fp16, activation checkpointing, overlap_comm on, buckets 5e8; 4 nodes x 8
// (assumed); the inter-node network is not stated: 100 Gb/s InfiniBand, one
// NIC per GPU assumed (ib-hdr100). Cluster A: pcie-gen3 inside a node;
// cluster B: nvlink-gen2. Ordering: NVLink faster (measured 18 s vs > 40 s
// per batch). Magnitude not asserted (network unknown; early DeepSpeed whose
// step phase alone took 11-39 s).
TEST(SpeedMore, S14_Zero2InterconnectSensitivity) {
    const ModelInfo m = from_hf({{"model_type", "gpt2"}, {"n_embd", 4096}, {"n_layer", 50}, {"n_head", 32},
                                 {"n_positions", 1024}, {"vocab_size", 50257}});
    EstimateInput in = input(m, 32, 4, 2, 1, 1024, Dtype::fp16, Checkpointing::full);
    in.zero.overlap_comm = true;
    const double pcie = step_time(in, hw("V100-32GB", Dtype::fp16, "pcie-gen3", "ib-hdr100")).total;
    const double nvlink = step_time(in, hw("V100-32GB", Dtype::fp16, "nvlink-gen2", "ib-hdr100")).total;
    EXPECT_LT(nvlink, pcie);
    std::printf("S14 s per batch: NVLink %.1f (measured %.0f), PCIe %.1f (measured > 40)\n", nvlink,
                measured("S14", "10B ZeRO-2, cluster B (NVLink)"), pcie);
}

// ---- S17: Open-Llama 7B ZeRO-1 on 160 A100-80 (20 nodes x 8): 3620 tokens/s/GPU
//
// Llama-7B shape with the Open-Llama vocabulary (32 layers, h 4096, 32
// heads, ffn 11008, vocab 68762, untied), seq 2048, mbs 2, gas 12, bf16, no
// checkpointing, FusedAdam. Interconnect not stated: NVLink3 inside a node
// and 8 x HDR 200 Gb/s rails between nodes assumed (the usual A100 pod).
// Magnitude within 25% (the set calls the 7B run fully specified). The
// 13B-65B rows have unknown GPU counts and batch meaning: not tested.
TEST(SpeedMore, S17_OpenLlama7bZero1) {
    const ModelInfo m = from_hf({{"model_type", "llama"}, {"hidden_size", 4096}, {"num_hidden_layers", 32},
                                 {"num_attention_heads", 32}, {"num_key_value_heads", 32},
                                 {"intermediate_size", 11008}, {"vocab_size", 68762},
                                 {"max_position_embeddings", 2048}, {"tie_word_embeddings", false}});
    EstimateInput in = input(m, 160, 20, 1, 2, 2048, Dtype::bf16, Checkpointing::none, 12);
    in.train.fused_optimizer = true;
    const StepTime t = step_time(in, hw("A100-80GB", Dtype::bf16, "", "ib-hdr200"));
    EXPECT_TRUE(within(t.tokens_per_s_per_gpu, measured("S17", "7B ZeRO-1"), 0.25));
    std::printf("S17 7B z1: %.0f tokens/s/GPU (measured %.0f)\n", t.tokens_per_s_per_gpu, measured("S17", "7B ZeRO-1"));
}

// ---- S18: ZeRO-3 Offload strong scaling of a 200B model, 64 -> 512 V100
//
// 200B as a GPT of 110 layers x h 12288 (12 L h^2 = 199e9, assumed), seq
// 1024, mbs 8 per GPU at every scale (the set's assumption), fp16,
// activation checkpointing, optimizer and parameters offloaded to the CPU,
// DGX-2 nodes (16 V100, dgx-2 host) with 8 x 100 Gb/s InfiniBand each
// (assumed). Ordering: superlinear - throughput grows faster than the GPU
// count at each doubling (measured 2.38x, 4.62x, 9.08x), because each
// node's CPU Adam and PCIe links work on a partition that shrinks as 1/n.
// Magnitude not asserted (batch sizes unpublished).
TEST(SpeedMore, S18_Zero3OffloadSuperlinearScaling) {
    const ModelInfo m = from_hf({{"model_type", "gpt2"}, {"n_embd", 12288}, {"n_layer", 110}, {"n_head", 96},
                                 {"n_positions", 1024}, {"vocab_size", 50257}});
    SpeedHardware h = hw("V100-32GB", Dtype::fp16, "", "ib-hdr100");
    h.inter->links_per_node = 8;
    apply_host(h, load_host_preset("dgx-2", kData), SpeedConstants{});
    double base = 0;
    const char* labels[4] = {"64 GPUs", "128 GPUs", "256 GPUs", "512 GPUs"};
    for (int i = 0; i < 4; ++i) {
        const int64_t gpus = 64LL << i;
        EstimateInput in = input(m, gpus, gpus / 16, 3, 8, 1024, Dtype::fp16, Checkpointing::full);
        in.zero.offload_optimizer = OffloadDevice::cpu;
        in.zero.offload_param = OffloadDevice::cpu;
        in.train.fused_optimizer = true;
        const double tps = step_time(in, h).tokens_per_s;
        if (i == 0) base = tps;
        const double speedup = tps / base;
        if (i > 0) {
            EXPECT_GT(speedup, double(1 << i)) << labels[i];
        }
        std::printf("S18 %s: speedup %.2f (measured %.2f)\n", labels[i], speedup, measured("S18", labels[i]));
    }
}

// ---- mechanisms of the second pass, by independent arithmetic ----------------

// Host PCIe share: DGX A100 = gen4 x16 (31.5 GB/s) x 0.88, two GPUs per
// uplink -> 13.86 GB/s each; CPU Adam = min(128 cores x 5e7,
// 0.1074 x 409.6 GB/s / 30 B) = 1.467e9 params/s per node.
TEST(SpeedHost, DgxA100Derivations) {
    const HostSpec a100 = load_host_preset("dgx-a100", kData);
    EXPECT_NEAR(host_pcie_bandwidth(a100), 0.88 * 31.5e9 / 2, 1e3);
    EXPECT_NEAR(host_cpu_adam_rate(a100, SpeedConstants{}), 2.2e9 * 30 / 614.4e9 * 409.6e9 / 30, 1e3);
    SpeedHardware h = hw("A100-80GB", Dtype::bf16);
    apply_host(h, a100, SpeedConstants{});
    EXPECT_NEAR(h.pcie_bandwidth, 0.88 * 31.5e9 / 2, 1e3);
    EXPECT_THROW(load_host_preset("dgx-a1000", kData), InputError);
    // dgx-h100 reproduces G8's 2.2e9 params/s per node by construction: G8
    // is the case cpu_adam_memory_efficiency is fitted on (not evidence).
    EXPECT_NEAR(host_cpu_adam_rate(load_host_preset("dgx-h100", kData), SpeedConstants{}), 2.2e9, 1e3);
}

// G11 against the host model (evidence: G11 is not the case the DRAM
// efficiency was fitted on): Llama-2-7B, 4x A100 on a DGX A100 host,
// ZeRO-2 + optimizer offload: ">7 s" per step, "CPU path > 4 s".
TEST(SpeedHost, G11OnDgxA100Host) {
    ModelInfo m;
    m.arch = load_model_preset("llama-2-7b", kData);
    m.params = count_params(*m.arch).total;
    SpeedHardware h = hw("A100-80GB", Dtype::bf16);
    apply_host(h, load_host_preset("dgx-a100", kData), SpeedConstants{});
    EstimateInput in = input(m, 4, 1, 2, 1, 4096);
    in.zero.offload_optimizer = OffloadDevice::cpu;
    in.train.fused_optimizer = true;
    const StepTime t = step_time(in, h);
    EXPECT_GT(t.optimizer, 4.0);
    EXPECT_TRUE(within(t.total, 7.0, 0.25));
    std::printf("G11 on dgx-a100: %.2f s (CPU Adam %.2f s)\n", t.total, t.optimizer);
}

// DeepSpeedCPUAdam vs the client's torch AdamW on the CPU: only when
// zero_force_ds_cpu_optimizer is false and no DeepSpeed optimizer block is
// given; then the CPU step is torch_cpu_adam_slowdown (6) times longer.
TEST(SpeedModel, TorchAdamOnCpuOnlyWhenNotForced) {
    ModelInfo m;
    m.params = 7000000000;
    const SpeedHardware h = hw("A100-80GB", Dtype::bf16);
    EstimateInput in = input(m, 8, 1, 2, 1, 2048);
    in.zero.offload_optimizer = OffloadDevice::cpu;
    in.train.fused_optimizer = false;
    const StepTime forced = step_time(in, h);
    EXPECT_FALSE(forced.torch_cpu_optimizer);
    in.zero.zero_force_ds_cpu_optimizer = false;
    const StepTime torch = step_time(in, h);
    EXPECT_TRUE(torch.torch_cpu_optimizer);
    EXPECT_NEAR(torch.optimizer, 6.0 * forced.optimizer, 1e-9);
    EXPECT_NEAR(forced.optimizer, 7e9 / 1.5e9, 1e-9);
}

// Parameter tensors from the architecture: Llama-2-7B has per layer q, k,
// v, o, gate, up, down and two RMSNorm weights (9), plus embedding, final
// norm and untied LM head: 32 x 9 + 3 = 291. ZeRO-3 fetches the 7 matrices
// per layer and the two embeddings (norms under the 1e5-element
// persistence threshold): 32 x 7 + 2 = 226. GPT-2 XL: 48 x 12 + 4 = 580
// (c_attn, c_proj, c_fc, mlp c_proj weights and biases, two LayerNorms of
// weight and bias; wte, wpe, ln_f weight and bias).
TEST(SpeedModel, TensorCounts) {
    ModelInfo llama;
    llama.arch = load_model_preset("llama-2-7b", kData);
    llama.params = count_params(*llama.arch).total;
    EXPECT_EQ(parameter_tensor_count(llama), 291.0);
    EXPECT_EQ(fetched_tensor_count(llama, 100000), 226.0);
    ModelInfo gpt;
    gpt.arch = load_model_preset("gpt2-xl", kData);
    gpt.params = count_params(*gpt.arch).total;
    EXPECT_EQ(parameter_tensor_count(gpt), 580.0);
    EXPECT_EQ(fetched_tensor_count(gpt, 100000), 194.0);
}

// NVMe with aio: B qd bs / (qd bs + B lat); defaults 8 x 1 MiB at 10 GB/s
// and 100 us -> 8388608 / (8388608 + 1e6) = 0.8935 of peak; queue depth 1
// -> 1048576 / 2048576 = 0.512.
TEST(SpeedModel, NvmeAioQueueDepth) {
    const SpeedConstants k;
    EXPECT_NEAR(nvme_effective_bandwidth(10e9, 8, 1048576, k), 10e9 * 8388608.0 / (8388608.0 + 1e6), 1.0);
    EXPECT_NEAR(nvme_effective_bandwidth(10e9, 1, 1048576, k), 10e9 * 1048576.0 / 2048576.0, 1.0);
    ModelInfo m;
    m.params = 7000000000;
    EstimateInput in = input(m, 8, 1, 3, 1, 2048);
    in.zero.offload_optimizer = OffloadDevice::nvme;
    const SpeedHardware h = hw("A100-80GB", Dtype::bf16);
    const double deep = step_time(in, h).optimizer;
    in.zero.aio_queue_depth = 1;
    EXPECT_GT(step_time(in, h).optimizer, deep);
}

// Parameter offload: every fetch moves the rank's 16-bit partition over
// PCIe (forward and backward): 2 x (Psi/n) x 2 B / B_pcie per micro-step.
// By default (blocking copy) nothing hides; with a copy that could overlap
// (param_copy_overlap 1) the prefetch bound decides: bucket 0 hides
// nothing, a bucket as large as a module hides it all (compute is ample
// here). Each fetched tensor pays a synchronous fetch, forward and
// backward: 2 x fetched x 1.1 ms in the per-parameter term.
TEST(SpeedModel, ParameterOffloadPerFetch) {
    ModelInfo m;
    m.params = 8000000000;
    const SpeedHardware h = hw("A100-80GB", Dtype::bf16);
    EstimateInput in = input(m, 8, 1, 3, 4, 2048);
    const StepTime plain = step_time(in, h);
    in.zero.offload_param = OffloadDevice::cpu;
    const double copy = 2.0 * 1e9 * 2 / h.pcie_bandwidth;
    const StepTime blocking = step_time(in, h);
    EXPECT_NEAR(blocking.offload, copy, 1e-9);
    EXPECT_NEAR(blocking.per_param - plain.per_param, 2.0 * plain.fetched_modules * 1.1e-3, 1e-9);
    SpeedConstants k;
    k.param_copy_overlap = 1.0;
    in.zero.stage3_prefetch_bucket_size = 0;
    EXPECT_NEAR(step_time(in, h, k).offload, copy, 1e-9);
    in.zero.stage3_prefetch_bucket_size = 1000000000;
    EXPECT_NEAR(step_time(in, h, k).offload, 0.0, 1e-9);
}

// The DeepSpeed keys the speed model reads: aio.block_size / queue_depth
// (defaults 1048576 and 8, DeepSpeed runtime/swap_tensor/aio_config.py) and
// zero_force_ds_cpu_optimizer (default true, runtime/config.py).
TEST(SpeedModel, DsConfigKeysForSpeed) {
    AutoSources autos;
    ZeroSettings zero;
    TrainingSettings train;
    Provenance prov;
    apply_ds_config(nlohmann::json::object(), "cfg.json", autos, zero, train, prov);
    EXPECT_EQ(zero.aio_block_size, 1048576);
    EXPECT_EQ(zero.aio_queue_depth, 8);
    EXPECT_TRUE(zero.zero_force_ds_cpu_optimizer);
    apply_ds_config({{"aio", {{"block_size", 262144}, {"queue_depth", 32}}}, {"zero_force_ds_cpu_optimizer", false}},
                    "cfg.json", autos, zero, train, prov);
    EXPECT_EQ(zero.aio_block_size, 262144);
    EXPECT_EQ(zero.aio_queue_depth, 32);
    EXPECT_FALSE(zero.zero_force_ds_cpu_optimizer);
    EXPECT_EQ(prov.count("aio.queue_depth"), 1u);
}

// compare's marks: a ZeRO-3 + both offloads step on a host preset rests on
// the G7 launch cost, the G1/G3 synchronous-fetch cost and the G8 CPU Adam
// efficiency; ZeRO-0 on one GPU only on estimates (compute efficiency, the
// GPU Adam's HBM efficiency), not on a fitted constant.
TEST(SpeedModel, CalibrationNotesNameTheFitCases) {
    ModelInfo m;
    m.params = 7000000000;
    SpeedHardware h = hw("A100-80GB", Dtype::bf16);
    apply_host(h, load_host_preset("dgx-a100", kData), SpeedConstants{});
    EstimateInput in = input(m, 8, 1, 3, 1, 2048);
    in.zero.offload_optimizer = OffloadDevice::cpu;
    in.zero.offload_param = OffloadDevice::cpu;
    auto basis_of = [](const std::vector<CalibrationNote>& v, const std::string& constant) {
        for (const auto& n : v)
            if (n.constant == constant) return n.basis;
        return std::string();
    };
    const auto notes = calibration_notes(in, h, step_time(in, h));
    EXPECT_NE(basis_of(notes, "stage3_launch_cost").find("G7"), std::string::npos);
    EXPECT_NE(basis_of(notes, "param_fetch_sync_cost").find("G1 and G3"), std::string::npos);
    EXPECT_NE(basis_of(notes, "cpu_adam_memory_efficiency").find("G8"), std::string::npos);
    const EstimateInput one = input(m, 1, 1, 0, 1, 2048);
    for (const auto& n : calibration_notes(one, h, step_time(one, h)))
        EXPECT_EQ(n.basis.find("fitted on"), std::string::npos) << n.constant << ": " << n.basis;
}
