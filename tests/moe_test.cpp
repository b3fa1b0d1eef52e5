// Mixture-of-experts: presets with their published total and
// active counts, expert parallelism (--ep-size), the router and routed-token
// activation terms, the largest module under expert parallelism and the
// speed model's active FLOPs and all-to-all. Every expected value is a
// published figure (cited) or arithmetic written out here from the
// configs' sizes and the formulas of the cited DeepSpeed / transformers code.
#include "input_error.h"
#include "zeromem/estimate.h"
#include "zeromem/model.h"
#include "zeromem/moe.h"
#include "zeromem/request.h"
#include "zeromem/speed.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

using namespace zeromem;
using zeromem::testing::contains;
using zeromem::testing::error_of;

namespace {

const std::string kData = ZEROMEM_SOURCE_DATA_DIR;

uint64_t lin(uint64_t in, uint64_t out, bool bias = false) { return in * out + (bias ? out : 0); }

// Mixtral-8x7B (mistralai/Mixtral-8x7B-v0.1 config.json): h 4096, f 14336,
// 32 layers, 32 query / 8 KV heads of 128, 8 experts top-2, V 32000, untied.
constexpr uint64_t kMixH = 4096, kMixF = 14336, kMixV = 32000;
constexpr uint64_t kMixExpert = 3 * kMixH * kMixF;        // w1, w2, w3 of one expert
constexpr uint64_t kMixRouted = 32 * 8 * kMixExpert;      // every routed expert
uint64_t mixtral_total() {
    const uint64_t attn = lin(kMixH, 4096) + 2 * lin(kMixH, 1024) + lin(4096, kMixH);
    const uint64_t block = attn + 8 * kMixExpert + lin(kMixH, 8) + 2 * kMixH;  // + router, 2 RMSNorms
    return 2 * kMixV * kMixH + 32 * block + kMixH;                            // embeddings, LM head, final norm
}

Resolved resolve(const std::string& args_model, int64_t gpus, int64_t stage, std::optional<int64_t> ep,
                 std::optional<std::string> transformers = std::nullopt) {
    Request r;
    r.model = args_model;
    r.gpus = gpus;
    r.stage = stage;
    r.seq_len = 4096;
    r.micro_batch = 1;
    r.ep_size = ep;
    r.transformers_version = std::move(transformers);
    return resolve_request(r, kData);
}

// The bytes of the ZeRO-3 backward's gathered-parameters term (terms.cpp zero3_gathered_params).
uint64_t backward_gathered_params(const Estimate& e) {
    for (const auto& t : e.terms)
        if (t.component.rfind("temporary_buffers (backward): gathered params", 0) == 0) return t.bytes;
    ADD_FAILURE() << "no backward gathered params term";
    return 0;
}

uint64_t term_bytes(const Estimate& e, const std::string& component) {
    for (const auto& t : e.terms)
        if (t.component == component) return t.bytes;
    ADD_FAILURE() << "no term " << component;
    return 0;
}

}  // namespace

// ---------------------------------------------------------------------------
// 1. Presets

// Mistral AI, "Mixtral of experts" (Dec 2023): 46.7B total, 12.9B active per
// token; exact total 46,702,792,704 (KerasHub mixtral_8_7b_en 'params').
TEST(MoePresets, Mixtral8x7bTotalAndActive) {
    const ModelArch a = load_model_preset("mixtral-8x7b", kData);
    const ParamCount c = count_params(a);
    EXPECT_EQ(c.total, mixtral_total());
    EXPECT_EQ(c.total, 46702792704ull);
    EXPECT_EQ(static_cast<uint64_t>(a.published_params), c.total);
    EXPECT_EQ(c.active, mixtral_total() - 32 * 6 * kMixExpert);  // 6 of 8 experts idle per token
    EXPECT_NEAR(double(c.total), 46.7e9, 0.05e9);
    EXPECT_NEAR(double(c.active), 12.9e9, 0.05e9);
    EXPECT_EQ(c.routed_experts, kMixRouted);
    EXPECT_EQ(c.one_expert, kMixExpert);
}

// Qwen/Qwen3-30B-A3B model card: "30.5B in total and 3.3B activated". The
// exact count below is 3.35B activated, which the card truncates.
TEST(MoePresets, Qwen3_30bA3bTotalAndActive) {
    const ModelArch a = load_model_preset("qwen3-30b-a3b", kData);
    const uint64_t h = 2048, V = 151936, expert = 3 * h * 768;
    const uint64_t attn = lin(h, 32 * 128) + 2 * lin(h, 4 * 128) + lin(32 * 128, h) + 2 * 128;  // + q_norm, k_norm
    const uint64_t block = attn + 128 * expert + lin(h, 128) + 2 * h;
    const uint64_t total = 2 * V * h + 48 * block + h;
    const ParamCount c = count_params(a);
    EXPECT_EQ(c.total, total);
    EXPECT_EQ(c.total, 30532122624ull);
    EXPECT_EQ(c.active, total - 48 * 120 * expert);
    EXPECT_NEAR(double(c.total), 30.5e9, 0.05e9);
    EXPECT_NEAR(double(c.active), 3.3e9, 0.1e9);
    EXPECT_NEAR(double(c.total), double(a.published_params), 0.05e9);
}

// deepseek-ai/DeepSeek-V2-Lite model card and DeepSeek-V2 paper
// (arXiv:2405.04434): 15.7B total, 2.4B activated. MLA without q LoRA
// (q_proj h x 16·192), 27 layers of which the first is dense (10944), then
// 64 routed experts (top-6) + 2 shared of 1408. DeepSeek's activated count
// leaves out the input embedding table (as for V3's 37B).
TEST(MoePresets, DeepseekV2LiteTotalAndActive) {
    const ModelArch a = load_model_preset("deepseek-v2-lite", kData);
    const uint64_t h = 2048, V = 102400, expert = 3 * h * 1408;
    const uint64_t mla = lin(h, 16 * 192) + lin(h, 512 + 64) + 512 + lin(512, 16 * (128 + 128)) + lin(16 * 128, h);
    const uint64_t dense_block = mla + 3 * h * 10944 + 2 * h;
    const uint64_t moe_block = mla + 64 * expert + 2 * expert + lin(h, 64) + 2 * h;
    const uint64_t total = 2 * V * h + dense_block + 26 * moe_block + h;
    const ParamCount c = count_params(a);
    EXPECT_EQ(c.total, total);
    EXPECT_EQ(c.total, 15706484224ull);
    EXPECT_EQ(c.active, total - 26 * 58 * expert);
    EXPECT_NEAR(double(c.total), 15.7e9, 0.05e9);
    EXPECT_NEAR(double(c.active - V * h), 2.4e9, 0.06e9);
    EXPECT_EQ(a.num_moe_layers, 26);
    EXPECT_EQ(a.shared_expert_ffn_size, 2 * 1408);
}

// ---------------------------------------------------------------------------
// 2. Expert parallelism

// Mixtral-8x7B on 8 GPUs, bf16 AdamW, stage 2. ep 8: each rank holds one
// expert per block (deepspeed/moe/layer.py num_local_experts = 8 / 8), so the
// 16-bit copy is 2 x (non-expert + routed / 8) bytes; ZeRO-2 partitions the
// experts over N_d / E_p = 1 rank and the rest over 8, so the optimizer
// partition ceil(non-expert / 8) + routed / 8 equals Ψ / 8 as without EP.
TEST(MoeExpertParallel, Stage2SplitsExpertsNotPartitions) {
    const uint64_t P = mixtral_total(), Pne = P - kMixRouted;
    const Estimate none = estimate(resolve("mixtral-8x7b", 8, 2, std::nullopt).input);
    const Estimate ep8 = estimate(resolve("mixtral-8x7b", 8, 2, 8).input, true);
    const Estimate ep2 = estimate(resolve("mixtral-8x7b", 8, 2, 2).input);
    EXPECT_EQ(none.per_gpu.parameters, 2 * P);
    EXPECT_EQ(ep8.per_gpu.parameters, 2 * (Pne + kMixRouted / 8));
    EXPECT_EQ(ep2.per_gpu.parameters, 2 * (Pne + kMixRouted / 2));
    const uint64_t partition = (Pne + 7) / 8 + kMixRouted / 8;  // ep 2: (routed / 2) / (8 / 2), the same
    EXPECT_EQ(partition, P / 8);
    EXPECT_EQ(none.per_gpu.optimizer_states, 12 * partition);  // fp32 master, m, v
    EXPECT_EQ(ep8.per_gpu.optimizer_states, 12 * partition);
    EXPECT_EQ(ep2.per_gpu.optimizer_states, 12 * partition);
    EXPECT_EQ(term_bytes(ep8, "parameters: routed experts held (expert parallelism)"), 2 * kMixRouted / 8);
}

// Stage 0 and 1 keep the full 16-bit gradients of what the rank holds:
// 2 x (non-expert + routed / E_p).
TEST(MoeExpertParallel, Stage0GradientsOfHeldExperts) {
    const uint64_t Pne = mixtral_total() - kMixRouted;
    const Estimate ep4 = estimate(resolve("mixtral-8x7b", 8, 0, 4).input);
    EXPECT_EQ(ep4.per_gpu.gradients, 2 * (Pne + kMixRouted / 4));
    EXPECT_EQ(ep4.per_gpu.parameters, 2 * (Pne + kMixRouted / 4));
}

// Stage 3 (AutoEP): the gradient partition b_a x (ceil(non-expert / N_d) +
// routed / E_p / (N_d / E_p)); 16 GPUs, ep 4: expert-data-parallel group 4.
TEST(MoeExpertParallel, Stage3PartitionsOverExpertDataParallelGroup) {
    const uint64_t Pne = mixtral_total() - kMixRouted;
    const Resolved r = resolve("mixtral-8x7b", 16, 3, 4);
    EXPECT_TRUE(std::any_of(r.warnings.begin(), r.warnings.end(), [](const std::string& w) { return contains(w, "AutoEP"); }));
    const ExpertSplit s = expert_split(r.input);
    EXPECT_EQ(s.expert_dp, 4u);
    EXPECT_EQ(s.expert_rank, kMixRouted / 4);
    EXPECT_EQ(s.partition, (Pne + 15) / 16 + kMixRouted / 16);
    const Estimate e = estimate(r.input);
    EXPECT_EQ(e.per_gpu.gradients, 2 * s.partition);  // grad_partitions_flat_buffer, bf16
    EXPECT_EQ(e.per_gpu.optimizer_states, 12 * s.partition);
}

TEST(MoeExpertParallel, InvalidSizesNamed) {
    // 3 does not divide 8 experts (deepspeed/moe/layer.py assert).
    std::string msg = error_of([] { resolve("mixtral-8x7b", 6, 2, 3); });
    EXPECT_TRUE(contains(msg, "--ep-size")) << msg;
    EXPECT_TRUE(contains(msg, "8 experts")) << msg;
    // 8 does not divide N_d = 4 (groups.py _ensure_divisibility).
    msg = error_of([] { resolve("mixtral-8x7b", 4, 2, 8); });
    EXPECT_TRUE(contains(msg, "--ep-size")) << msg;
    EXPECT_TRUE(contains(msg, "N_d = 4")) << msg;
    // A dense model has no experts to place.
    msg = error_of([] { resolve("llama-2-7b", 8, 2, 2); });
    EXPECT_TRUE(contains(msg, "--ep-size")) << msg;
    EXPECT_TRUE(contains(msg, "dense")) << msg;
    msg = error_of([] { resolve("mixtral-8x7b", 8, 2, 0); });
    EXPECT_TRUE(contains(msg, "--ep-size")) << msg;
    Request q;
    q.params = "7e9";
    q.gpus = 8;
    q.ep_size = 2;
    msg = error_of([&] { resolve_request(q, kData); });
    EXPECT_TRUE(contains(msg, "--ep-size")) << msg;
    Request cf;
    cf.model = "mixtral-8x7b";
    cf.gpus = 8;
    cf.ep_size = 8;
    cf.moe_capacity_factor = 0;
    msg = error_of([&] { resolve_request(cf, kData); });
    EXPECT_TRUE(contains(msg, "--moe-capacity-factor")) << msg;
}

// ---------------------------------------------------------------------------
// 3. Router and routed-token activations

// DeepSpeed sharded_moe.py _capacity: ceil(S / E x capacity_factor x k),
// at least min_capacity.
TEST(MoeActivations, Capacity) {
    EXPECT_EQ(moe_capacity(4096, 8, 2, 1.0, 4), 1024);
    EXPECT_EQ(moe_capacity(4096, 8, 2, 1.25, 4), 1280);
    EXPECT_EQ(moe_capacity(2, 8, 2, 1.0, 4), 4);      // ceil(0.5) = 1 < min_capacity
    EXPECT_EQ(moe_capacity(1000, 64, 6, 1.0, 4), 94);  // ceil(93.75)
}

// Mixtral, S = 1 x 4096 tokens, bf16. HF (dropless): router S·E·(2 + 4) =
// 196,608 B; routed copies 2·k·S·h·2 = 134,217,728 B per block. DeepSpeed-MoE
// ep 8, capacity factor 1: C = 1024; router 4·S·(h + E) = 67,239,936 B;
// dispatch (E·C + k·S)·h·2 = 134,217,728 B; no padding; all-to-all buffers
// 2·E·C·h·2 = 134,217,728 B (one block).
TEST(MoeActivations, TermsByHand) {
    const ModelArch a = load_model_preset("mixtral-8x7b", kData);
    MoeSettings hf;
    const auto t_hf = moe_activation_terms(a, hf, 1, 4096, 2);
    ASSERT_EQ(t_hf.size(), 2u);
    EXPECT_EQ(t_hf[0].bytes, 4096ull * 8 * 6);
    EXPECT_EQ(t_hf[1].bytes, 2ull * 2 * 4096 * 4096 * 2);
    MoeSettings ds;
    ds.ep_size = 8;
    const auto t_ds = moe_activation_terms(a, ds, 1, 4096, 2);
    ASSERT_EQ(t_ds.size(), 4u);
    EXPECT_EQ(t_ds[0].bytes, 4ull * 4096 * (4096 + 8));
    EXPECT_EQ(t_ds[1].bytes, (8ull * 1024 + 2 * 4096) * 4096 * 2);
    EXPECT_EQ(t_ds[2].bytes, 0u);
    EXPECT_TRUE(t_ds[3].transient);
    EXPECT_EQ(t_ds[3].bytes, 2ull * 8 * 1024 * 4096 * 2);
    // Capacity factor 1.25: C = 1280, 2048 padded rows of the gated expert
    // MLP at 4·f·2 B each.
    ds.capacity_factor = 1.25;
    const auto t_pad = moe_activation_terms(a, ds, 1, 4096, 2);
    EXPECT_EQ(t_pad[2].bytes, 2048ull * 4 * kMixF * 2);
    // Dense models have no MoE terms.
    EXPECT_TRUE(moe_activation_terms(load_model_preset("llama-2-7b", kData), hf, 1, 4096, 2).empty());
}

// In the estimate, without checkpointing, the per-block terms are stored for
// all 32 blocks; the cross-entropy's backward outweighs a block's all-to-all
// buffers, so DeepSpeed-MoE minus HF activations is 32 x the per-block
// difference: 32 x ((67,239,936 + 134,217,728) - (196,608 + 134,217,728)).
TEST(MoeActivations, EstimateStoresEveryBlock) {
    const Estimate hf = estimate(resolve("mixtral-8x7b", 8, 2, std::nullopt).input, true);
    const Estimate ds = estimate(resolve("mixtral-8x7b", 8, 2, 8).input, true);
    // The summary's activations are those of the moment that holds the most
    // (estimate.h GpuMemory): the cross-entropy's backward (12 sbV of fp32
    // log-softmax and gradients), where the dispatched tokens of all 32 blocks
    // replace the dropless copies and no block runs, so no all-to-all buffer is live.
    EXPECT_EQ(ds.per_gpu.activations - hf.per_gpu.activations, 32ull * (67239936ull - 196608ull));
    EXPECT_EQ(term_bytes(hf, "activations: MoE routed token copies (dropless)"), 32ull * 134217728ull);
    EXPECT_EQ(term_bytes(ds, "activations: MoE all-to-all buffers"), 134217728ull);
}

// ---------------------------------------------------------------------------
// 4. Largest module

// gpt-oss-20b (openai/gpt-oss-20b config.json): the experts of a block are
// one fused module of 32 x (lin(h, 2f, bias) + lin(f, h, bias)) =
// 796,538,880 params, DeepSpeed's largest module. With ep 4 a rank's fused
// module holds 8 experts (199,134,720), so the embedding 201088 x 2880 =
// 579,133,440 becomes the largest; ZeRO-3's module gradient term is b_m x L.
TEST(MoeLargestModule, FusedExpertsUnderExpertParallelism) {
    const nlohmann::json cfg = {{"model_type", "gpt_oss"}, {"hidden_size", 2880}, {"intermediate_size", 2880},
                                {"num_hidden_layers", 24}, {"num_attention_heads", 64}, {"num_key_value_heads", 8},
                                {"head_dim", 64}, {"num_local_experts", 32}, {"num_experts_per_tok", 4},
                                {"experts_per_token", 4}, {"vocab_size", 201088}, {"tie_word_embeddings", false},
                                {"max_position_embeddings", 131072}};
    const ModelArch a = arch_from_hf_config(cfg, "gpt-oss-20b.json");
    const uint64_t h = 2880, f = 2880, expert = lin(h, 2 * f, true) + lin(f, h, true);
    ASSERT_EQ(count_params(a).largest_module, 32 * expert);
    EstimateInput in;
    in.model.arch = a;
    in.model.params = count_params(a).total;
    in.model.largest_layer_params = count_params(a).largest_module;
    in.cluster.gpus = 8;
    in.zero.stage = 3;
    in.train.seq_len = 1024;
    const auto module_grad = [](const Estimate& e) {
        for (const auto& t : e.terms)
            if (contains(t.component, "module gradient")) return t.bytes;
        return uint64_t(0);
    };
    const Estimate whole = estimate(in, true);
    EXPECT_EQ(module_grad(whole), 2 * 32 * expert);
    in.moe.ep_size = 4;
    const Estimate local = estimate(in, true);
    EXPECT_EQ(module_grad(local), 2 * 201088ull * 2880);
}

// ---------------------------------------------------------------------------
// 5. Speed

// Compute uses the active parameters: 6 x (active - input embedding) +
// 12 L h s per token (speed.h model_flops_per_token). Mixtral: active 12,879,925,248,
// embedding 32000 x 4096.
TEST(MoeSpeed, ActiveFlopsAndAllToAll) {
    const Resolved r = resolve("mixtral-8x7b", 8, 2, std::nullopt);
    const double active = double(mixtral_total() - 32 * 6 * kMixExpert);
    EXPECT_DOUBLE_EQ(model_flops_per_token(r.input.model, 4096),
                     6.0 * (active - 32000.0 * 4096.0) + 12.0 * 32 * 4096 * 4096);
    SpeedHardware hw;
    hw.peak_flops = 989e12;
    hw.hbm_bandwidth = 3.35e12;
    hw.intra.allreduce_busbw = hw.intra.allgather_busbw = hw.intra.reducescatter_busbw = 100e9;
    hw.intra.latency = 0;
    hw.intra.half_size = 0;
    EXPECT_EQ(step_time(r.input, hw).moe_all_to_all, 0.0);  // no --ep-size: no all-to-all
    // ep 8: each all-to-all moves E·C·h·2 = 8 x 1024 x 4096 x 2 bytes, 7/8
    // of them off the rank, at 100 GB/s; 4 per block, 32 blocks.
    const Resolved r8 = resolve("mixtral-8x7b", 8, 2, 8);
    const double one = 7.0 / 8.0 * 8.0 * 1024 * 4096 * 2 / 100e9;
    const StepTime t = step_time(r8.input, hw);
    EXPECT_NEAR(t.moe_all_to_all, 4 * 32 * one, 1e-12);
    EXPECT_GE(t.exposed_comm, t.moe_all_to_all);
}

// ---------------------------------------------------------------------------
// 7. Impossible MoE / attention values in a config.json are refused by key.
TEST(MoeConfigValues, RefusedNamingTheKey) {
    nlohmann::json cfg = {{"model_type", "mixtral"}, {"hidden_size", 4096}, {"intermediate_size", 14336},
                          {"num_attention_heads", 32}, {"num_hidden_layers", 32}, {"num_key_value_heads", 8},
                          {"num_local_experts", 8}, {"num_experts_per_tok", 2}, {"vocab_size", 32000}};
    EXPECT_EQ(count_params(arch_from_hf_config(cfg, "ok.json")).total, 46702792704ull);  // KerasHub, as above
    auto refused = [&](const char* key, const nlohmann::json& value, const std::string& expected) {
        nlohmann::json bad = cfg;
        bad[key] = value;
        const std::string msg = error_of([&] { arch_from_hf_config(bad, "bad.json"); });
        EXPECT_TRUE(contains(msg, expected)) << key << ": " << msg;
    };
    refused("num_local_experts", 0, "key 'num_local_experts' must be a positive number of experts");
    refused("num_local_experts", -8, "key 'num_local_experts'");
    refused("num_experts_per_tok", 0, "key 'num_experts_per_tok' must be positive");
    refused("num_experts_per_tok", 9, "'num_experts_per_tok' 9 is more than the 8 experts");
    refused("num_key_value_heads", 5, "key 'num_key_value_heads' (5) must be positive and divide");
    refused("head_dim", 0, "key 'head_dim' must be positive");
    nlohmann::json q3 = {{"model_type", "qwen3_moe"}, {"hidden_size", 2048}, {"intermediate_size", 6144},
                         {"moe_intermediate_size", 768}, {"num_hidden_layers", 48}, {"num_attention_heads", 32},
                         {"num_key_value_heads", 4}, {"head_dim", 128}, {"num_experts", 0},
                         {"num_experts_per_tok", 8}, {"vocab_size", 151936}};
    const std::string msg = error_of([&] { arch_from_hf_config(q3, "q3.json"); });
    EXPECT_TRUE(contains(msg, "key 'num_experts'")) << msg;
}

// ---------------------------------------------------------------------------
// 8. Sizes beyond 64-bit bytes are refused by flag or key, never wrapped.
TEST(MoeOverflow, CapacityAndExpertCountsAreBounded) {
    // C = ceil(S / E · capacity_factor · k) = 4096 / 8 · 1e9 · 2 = 1.024e12 tokens: still exact.
    EXPECT_EQ(moe_capacity(4096, 8, 2, 1e9, 4), 1024000000000LL);
    // 4096 / 8 · 1e16 · 2 = 1.024e19 tokens (past 2^53, and past int64): refused, not min_capacity 4.
    for (double f : {1e16, 1e30}) {
        const std::string msg = error_of([&] { moe_capacity(4096, 8, 2, f, 4); });
        EXPECT_TRUE(contains(msg, "--moe-capacity-factor")) << msg;
        EXPECT_TRUE(contains(msg, "overflows 64-bit bytes")) << msg;
    }
    // Factor 1e9 with E_p 8, S = 4096: the capacity padding alone is
    // (E·C - k·S) · 4 · f_e · b_m = (8·1.024e12 - 8192) · 4 · 14336 · 2 ≈ 9.4e17 bytes
    // per MoE block, x 32 blocks ≈ 3.0e19 > 2^64: refused naming the flag.
    Request r;
    r.model = "mixtral-8x7b";
    r.gpus = 8;
    r.stage = 2;
    r.seq_len = 4096;
    r.micro_batch = 1;
    r.ep_size = 8;
    r.moe_capacity_factor = 1e9;
    const std::string msg = error_of([&] { estimate(resolve_request(r, kData).input); });
    EXPECT_TRUE(contains(msg, "--moe-capacity-factor")) << msg;
    EXPECT_TRUE(contains(msg, "overflow 64-bit bytes")) << msg;

    nlohmann::json cfg = {{"model_type", "mixtral"}, {"hidden_size", 4096}, {"intermediate_size", 14336},
                          {"num_attention_heads", 32}, {"num_hidden_layers", 32}, {"num_key_value_heads", 8},
                          {"num_local_experts", 1000000000000LL}, {"num_experts_per_tok", 2}, {"vocab_size", 32000}};
    std::string m = error_of([&] { count_params(arch_from_hf_config(cfg, "huge.json")); });
    EXPECT_TRUE(contains(m, "key 'num_local_experts' is too large")) << m;
    // 1e9 experts: 32 · 1e9 · 3 · 4096 · 14336 ≈ 5.6e21 parameters, past the 1e17 zeromem counts.
    cfg["num_local_experts"] = 1000000000;
    m = error_of([&] { count_params(arch_from_hf_config(cfg, "huge.json")); });
    EXPECT_TRUE(contains(m, "more than zeromem counts (1e17)")) << m;
}

// ---------------------------------------------------------------------------
// 9. Absent or null MoE keys take the config class default with a warning
// naming the key (transformers MixtralConfig: num_local_experts 8,
// num_experts_per_tok 2; Qwen3MoeConfig: num_experts 128).
TEST(MoeConfigValues, DefaultsForAbsentOrNullKeysAreWarned) {
    auto warned = [](const ModelArch& a, const std::string& part) {
        for (const auto& w : a.warnings)
            if (contains(w, part)) return true;
        return false;
    };
    const nlohmann::json cfg = {{"model_type", "mixtral"}, {"hidden_size", 4096}, {"intermediate_size", 14336},
                                {"num_attention_heads", 32}, {"num_hidden_layers", 32}, {"num_key_value_heads", 8},
                                {"num_local_experts", 8}, {"num_experts_per_tok", 2}, {"vocab_size", 32000}};
    EXPECT_TRUE(arch_from_hf_config(cfg, "ok.json").warnings.empty());
    nlohmann::json absent = cfg;
    absent.erase("num_local_experts");
    absent.erase("num_experts_per_tok");
    const ModelArch a = arch_from_hf_config(absent, "nokeys.json");
    EXPECT_TRUE(warned(a, "no 'num_local_experts'"));
    EXPECT_TRUE(warned(a, "no 'num_experts_per_tok'"));
    EXPECT_EQ(count_params(a).total, 46702792704ull);  // the defaults are Mixtral-8x7B's own 8 / top-2
    nlohmann::json null_k = cfg;
    null_k["num_experts_per_tok"] = nullptr;
    const ModelArch b = arch_from_hf_config(null_k, "topk_null.json");
    EXPECT_TRUE(warned(b, "'num_experts_per_tok' is null"));
    EXPECT_EQ(b.num_experts_per_tok, 2);
    const nlohmann::json q3 = {{"model_type", "qwen3_moe"}, {"hidden_size", 2048}, {"intermediate_size", 6144},
                               {"moe_intermediate_size", 768}, {"num_hidden_layers", 48}, {"num_attention_heads", 32},
                               {"num_key_value_heads", 4}, {"head_dim", 128}, {"num_experts", nullptr},
                               {"num_experts_per_tok", 8}, {"vocab_size", 151936}};
    const ModelArch c = arch_from_hf_config(q3, "q3.json");
    EXPECT_TRUE(warned(c, "'num_experts' is null"));
    EXPECT_EQ(c.num_experts, 128);
}

// ZeRO-3 look-ahead (terms.cpp zero3_gathered_params): whether a trace step
// uses less than one prefetch is the MoE block's parameters over the modules
// the trace fetches, every expert projection one module (found by the
// simulator's replay, tests/simulator/agreement_test.cpp). Qwen3-30B-A3B's
// MoE block by hand: q 2048x4096 = 8,388,608, k and v 2048x512 = 1,048,576
// each, o 4096x2048 = 8,388,608, q_norm and k_norm 128 each, router
// 2048x128 = 262,144, 128 experts x 3 x 2048x768 = 603,979,776, two norms
// 4096: 623,120,640 over 4 + 1 + 384 = 389 fetched modules (the router,
// 262,144 > stage3_param_persistence_threshold 1e5, is fetched) = 1,601,852 per
// step < 5e7, so the look-ahead fills to stage3_max_live_parameters:
// (1e9 + L) x 2 B with L = 151936 x 2048 = 311,164,928: 2,622,329,856 B.
// (Counting 7 modules per block as a dense block has gives 89,017,234 per
// step, above 5e7, and L + 5e7 instead.) Per-expert modules are transformers
// < 5's layout (Qwen3MoeMLP in an nn.ModuleList): the stack is pinned to 4.57.
TEST(MoeZero3, LookAheadCountsEveryExpertModule) {
    const Resolved r = resolve("qwen3-30b-a3b", 8, 3, std::nullopt, "4.57");
    ASSERT_FALSE(r.input.model.arch->fused_experts);
    EXPECT_EQ(backward_gathered_params(estimate(r.input, true)), 2622329856ull);
}

// From transformers 5 (stack_facts.h packs_moe_experts) the block's 128 experts
// are one module, Qwen3MoeExperts with gate_up_proj 128 x 1536 x 2048 and
// down_proj 128 x 2048 x 768: 603,979,776 parameters, now the largest module L
// (above the 311,164,928 of the embedding). The block's 623,120,640 parameters
// over 4 + 1 + 1 = 6 fetched modules are 103,853,440 per step, above 5e7, so
// the look-ahead keeps L + stage3_prefetch_bucket_size:
// (603,979,776 + 5e7) x 2 B = 1,307,959,552 B.
TEST(MoeZero3, PackedExpertsOfTransformers5AreTheLargestModule) {
    const Resolved r = resolve("qwen3-30b-a3b", 8, 3, std::nullopt);  // the built-in stack: transformers 5.0
    ASSERT_TRUE(r.input.model.arch->fused_experts);
    EXPECT_EQ(r.input.model.largest_layer_params, 603979776u);
    EXPECT_EQ(backward_gathered_params(estimate(r.input, true)), 1307959552ull);
}

// The layout follows the stack on every MoE family transformers 5 packs, and
// a module tree (the modules as built) or --largest-layer-params wins.
TEST(MoeZero3, PackedLayoutFollowsTheStack) {
    for (const char* m : {"mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v2-lite"}) {
        EXPECT_TRUE(resolve(m, 8, 3, std::nullopt).input.model.arch->fused_experts) << m;
        EXPECT_FALSE(resolve(m, 8, 3, std::nullopt, "4.57").input.model.arch->fused_experts) << m;
    }
    Request q;
    q.model = "mixtral-8x7b";
    q.gpus = 8;
    q.stage = 3;
    // Mixtral's packed experts: 8 x 3 x 4096 x 14336 = 1,409,286,144 parameters.
    EXPECT_EQ(resolve_request(q, kData).input.model.largest_layer_params, 1409286144u);
    q.largest_layer_params = "131072000";
    EXPECT_EQ(resolve_request(q, kData).input.model.largest_layer_params, 131072000u);
    // A dense model is untouched.
    Request d;
    d.model = "llama-2-7b";
    d.gpus = 8;
    EXPECT_FALSE(resolve_request(d, kData).input.model.arch->fused_experts);
}
