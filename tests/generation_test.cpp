// Tests of generation.h: the KV cache of model.generate, every expected value
// by hand arithmetic from the published config.json shapes.
#include "estimate_inputs.h"
#include "input_error.h"
#include "zeromem/estimate.h"
#include "zeromem/generation.h"
#include "zeromem/model.h"
#include "zeromem/request.h"
#include "zeromem/types.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

using namespace zeromem;

using zeromem::testing::contains;
using zeromem::testing::error_of;

namespace {

const std::string kData = ZEROMEM_SOURCE_DATA_DIR;
const std::string kPublished = std::string(ZEROMEM_TEST_DATA_DIR) + "/hf_configs/published/";

// DeepSeek-V2-Lite's attention as in its published config.json
// (huggingface.co/deepseek-ai/DeepSeek-V2-Lite): 27 layers, 16 heads,
// kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64, v_head_dim 128.
ModelArch deepseek_v2_lite_attention() {
    ModelArch a;
    a.name = "deepseek-v2-lite (attention only)";
    a.hidden_size = 2048;
    a.num_layers = 27;
    a.num_heads = 16;
    a.num_kv_heads = 16;
    a.head_dim = 128 + 64;
    a.kv_lora_rank = 512;
    a.qk_nope_head_dim = 128;
    a.qk_rope_head_dim = 64;
    a.v_head_dim = 128;
    a.ffn_size = 10944;
    a.vocab_size = 102400;
    return a;
}

// beams x batch prompts of `prompt` tokens, `fresh` new tokens.
GenerationShape shape(int64_t beams, int64_t batch, int64_t prompt, int64_t fresh) {
    GenerationShape g;
    g.num_beams = beams;
    g.batch = batch;
    g.prompt_len = prompt;
    g.max_new_tokens = fresh;
    return g;
}

}  // namespace

// llama-2-7b: 32 layers x 2 (K, V) x 32 KV heads x 128 x 2 B = 524288 B = 512 KiB per token.
TEST(KvCache, Llama2PerTokenIs512KiB) {
    const ModelArch a = load_model_preset("llama-2-7b", kData);
    EXPECT_EQ(kv_cache_bytes_per_token(a, 2), 32ULL * 2 * 32 * 128 * 2);
    EXPECT_EQ(kv_cache_bytes_per_token(a, 2), 512ULL * 1024);
}

// 4 beams x 8 prompts x (512 + 128) tokens x 512 KiB = 20480 x 512 KiB = 10 GiB.
TEST(KvCache, Llama2BeamSearchIsTenGiB) {
    const ModelArch a = load_model_preset("llama-2-7b", kData);
    const GenerationShape g = shape(4, 8, 512, 128);
    const KvCache c = kv_cache(a, g, 2);
    EXPECT_EQ(c.bytes, 10ULL * 1024 * 1024 * 1024);
    EXPECT_EQ(c.self_attention_bytes, c.bytes);
    EXPECT_EQ(c.cross_attention_bytes, 0u);
    EXPECT_EQ(c.elements_per_token_layer, 2u * 32 * 128);
    EXPECT_EQ(c.cached_layers, 32);
}

// Grouped-query attention caches the 8 KV heads, not the 32 query heads:
// Mistral-7B: 32 x 2 x 8 x 128 x 2 B = 131072 B per token.
TEST(KvCache, GroupedQueryCountsKvHeads) {
    const ModelArch a = load_hf_config(kPublished + "mistral-7b-instruct-v0.2.json");
    EXPECT_EQ(kv_cache_bytes_per_token(a, 2), 32ULL * 2 * 8 * 128 * 2);
    // fp32 cache doubles it.
    EXPECT_EQ(kv_cache_bytes_per_token(a, 4), 32ULL * 2 * 8 * 128 * 4);
}

// Tensor parallelism splits the heads: Llama-3.1-70B 80 x 2 x (8 / 4) x 128 x 2.
TEST(KvCache, TensorParallelSplitsKvHeads) {
    const ModelArch a = load_hf_config(kPublished + "llama-3.1-70b.json");
    EXPECT_EQ(kv_cache_bytes_per_token(a, 2, 4), 80ULL * 2 * 2 * 128 * 2);
    // 16 ranks cannot split 8 heads further: each keeps one.
    EXPECT_EQ(kv_cache_bytes_per_token(a, 2, 16), 80ULL * 2 * 1 * 128 * 2);
}

// MLA: transformers caches the decompressed K (128 + 64) and V (128) of all
// 16 heads: 27 x 16 x (128 + 64 + 128) x 2 B = 276480 B per token, not the
// 27 x (512 + 64) x 2 B = 31104 B latent.
TEST(KvCache, MlaCountsDecompressedPerHeadKeysAndValues) {
    const ModelArch a = deepseek_v2_lite_attention();
    EXPECT_EQ(kv_cache_bytes_per_token(a, 2), 27ULL * 16 * (128 + 64 + 128) * 2);
    GenerationShape g;
    g.batch = 2;
    g.prompt_len = 100;
    g.max_new_tokens = 28;
    const KvCache c = kv_cache(a, g, 2);
    EXPECT_EQ(c.bytes, 2ULL * 128 * 276480);
    EXPECT_TRUE(contains(c.layout, "MLA"));
}

// t5-small: 6 decoder layers x 2 x 8 heads x d_kv 64 x 4 B (fp32) = 24576 B
// per token; self-attention over 50 new tokens, cross-attention over the
// 200-token prompt, for 4 beams x 3 prompts.
TEST(KvCache, EncoderDecoderCountsDecoderSelfAndCrossAttention) {
    const ModelArch a = load_hf_config(kPublished + "t5-small.json");
    const uint64_t per_token = 6ULL * 2 * 8 * 64 * 4;
    EXPECT_EQ(kv_cache_bytes_per_token(a, 4), per_token);
    const GenerationShape g = shape(4, 3, 200, 50);
    const KvCache c = kv_cache(a, g, 4);
    EXPECT_EQ(c.self_attention_bytes, 12ULL * 50 * per_token);
    EXPECT_EQ(c.cross_attention_bytes, 12ULL * 200 * per_token);
    EXPECT_EQ(c.bytes, 12ULL * 250 * per_token);
    EXPECT_EQ(c.cached_layers, 6);
}

TEST(KvCache, BadInputThrows) {
    const ModelArch a = load_model_preset("llama-2-7b", kData);
    GenerationShape g;
    g.prompt_len = 10;
    g.num_beams = 0;
    EXPECT_TRUE(contains(error_of([&] { (void)kv_cache(a, g, 2); }), "num_beams"));
    g.num_beams = 1;
    g.max_new_tokens = -1;
    EXPECT_TRUE(contains(error_of([&] { (void)kv_cache(a, g, 2); }), "max_new_tokens"));
    g.max_new_tokens = 1;
    g.batch = 0;
    EXPECT_TRUE(contains(error_of([&] { (void)kv_cache(a, g, 2); }), "batch"));
    g.batch = 1;
    EXPECT_TRUE(contains(error_of([&] { (void)kv_cache(a, g, 0); }), "dtype"));
    ModelArch enc = a;
    enc.encoder_only = true;
    EXPECT_TRUE(contains(error_of([&] { (void)kv_cache(enc, g, 2); }), "encoder-only"));
    g.batch = INT64_MAX;
    g.num_beams = INT64_MAX;
    EXPECT_TRUE(contains(error_of([&] { (void)kv_cache(a, g, 2); }), "overflows"));
}

// llama-2-7b (V = 32000), 2 beams x 4 prompts, bf16: step logits 8 x 32000 x
// (2 + 4 + 4) B; the last step holds the full cache 8 x (256 + 64) x 512 KiB
// and torch.cat's copy of one layer's keys: 8 x 320 x 128 x 32 x 2 B (8 KiB a token).
TEST(GenerationMemory, LastStepPeakWithLogitsToKeep) {
    const ModelArch a = load_model_preset("llama-2-7b", kData);
    const GenerationShape g = shape(2, 4, 256, 64);
    const GenerationMemory m = generation_memory(a, g, 2, true);
    EXPECT_EQ(m.step_logits.bytes, 8ULL * 32000 * 10);
    EXPECT_EQ(m.prefill_logits.bytes, 0u);
    EXPECT_EQ(m.kv_cache.bytes, 8ULL * 320 * 524288);
    EXPECT_EQ(m.kv_at_prefill, 8ULL * 256 * 524288);
    EXPECT_EQ(m.cat_copy.bytes, 8ULL * 320 * 128 * 32 * 2);
    EXPECT_FALSE(m.prefill_is_peak);
    EXPECT_EQ(m.peak, 8ULL * 320 * 524288 + 8ULL * 320 * 8192 + 8ULL * 32000 * 10);
}

// transformers < 4.45: the prompt's logits for all 256 tokens, bf16 + fp32:
// 8 x 256 x 32000 x 6 B = 393,216,000 B, more than the 64 new tokens' cache
// (8 x 64 x 512 KiB = 268,435,456 B), so the prefill is the peak.
TEST(GenerationMemory, PrefillPeakWithoutLogitsToKeep) {
    const ModelArch a = load_model_preset("llama-2-7b", kData);
    const GenerationShape g = shape(2, 4, 256, 64);
    const GenerationMemory m = generation_memory(a, g, 2, false);
    EXPECT_EQ(m.prefill_logits.bytes, 8ULL * 256 * 32000 * 6);
    EXPECT_TRUE(m.prefill_is_peak);
    EXPECT_EQ(m.cat_copy_at_prefill, 8ULL * 256 * 8192);
    EXPECT_EQ(m.peak, 8ULL * 256 * 524288 + 8ULL * 256 * 8192 + 8ULL * 256 * 32000 * 6 + 8ULL * 32000 * 10);
}

// Encoder-decoder models decode from one start token: no prefill logits even
// before 4.45; the cross-attention cache is there from the first step.
TEST(GenerationMemory, EncoderDecoderHasNoPrefillLogits) {
    const ModelArch a = load_hf_config(kPublished + "t5-small.json");
    const GenerationShape g = shape(4, 2, 100, 10);
    const GenerationMemory m = generation_memory(a, g, 4, false);
    const uint64_t per_token = 6ULL * 2 * 8 * 64 * 4;
    EXPECT_EQ(m.prefill_logits.bytes, 0u);
    EXPECT_EQ(m.kv_at_prefill, 8ULL * 100 * per_token);
    EXPECT_EQ(m.step_logits.bytes, 8ULL * 32128 * (4 + 8));
    // torch.cat copies one decoder layer's self-attention keys: 8 x 10 x 8 x 64 x 4 B.
    EXPECT_EQ(m.cat_copy.bytes, 8ULL * 10 * 8 * 64 * 4);
}

// MLA's torch.cat copy is the larger of K (128 + 64 = 192) and V (128) per
// head: 16 x 192 x 2 B = 6144 B a token, for 2 x 128 tokens.
TEST(GenerationMemory, MlaCatCopyIsTheKeys) {
    GenerationShape g;
    g.batch = 2;
    g.prompt_len = 100;
    g.max_new_tokens = 28;
    const GenerationMemory m = generation_memory(deepseek_v2_lite_attention(), g, 2, true);
    EXPECT_EQ(m.cat_copy.bytes, 2ULL * 128 * 16 * 192 * 2);
}

namespace {

// Published llama-2-7b parameter count (Touvron et al. 2023; HF model card).
constexpr uint64_t kPsi = 6738415616ULL;
constexpr uint64_t kKiB = 1024;

// llama-2-7b on `gpus` GPUs at `stage`, bf16, seq 512, no CUDA context or
// fragmentation so the phase totals are the hand sums; 4 beams x 2 prompts,
// prompt = seq 512, 128 new tokens.
EstimateInput llama_generating(int64_t gpus, int stage) {
    EstimateInput in = testinputs::preset_input("llama-2-7b", gpus, stage, Dtype::bf16);
    in.train.seq_len = 512;
    in.residual.cuda_context = 0;
    in.residual.nccl_buffers = 0;  // DeepSpeed's tensors only: no per-process terms
    in.residual.cublas_workspaces = 0;
    in.residual.fragmentation_fraction = 0;
    GenerationSettings g;
    g.num_beams = 4;
    g.eval_batch = 2;
    g.max_new_tokens = 128;
    in.generation = g;
    return in;
}

// KV: 8 sequences x (512 + 128) tokens x 512 KiB; logits 8 x 32000 x (2 + 8)
// B; torch.cat's copy of one layer's keys: 8 x 640 x 32 heads x 128 x 2 B.
constexpr uint64_t kLlamaKv = 8ULL * 640 * 512 * kKiB;
constexpr uint64_t kLlamaLogits = 8ULL * 32000 * 10;
constexpr uint64_t kLlamaCat = 8ULL * 640 * 32 * 128 * 2;
constexpr uint64_t kLlamaGen = kLlamaKv + kLlamaCat + kLlamaLogits;

}  // namespace

// ZeRO-0, one GPU: the generation phase holds 2Ψ parameters, 4Ψ fp32 master +
// 8Ψ Adam m and v, no gradients (FP16_Optimizer frees them after the step),
// no ZeRO buffers, plus the KV cache and the logits.
TEST(GenerationPhase, Zero0TotalIsStatesPlusCacheAndLogits) {
    const EstimateInput in = llama_generating(1, 0);
    ASSERT_EQ(in.model.params, kPsi);
    const Estimate e = estimate(in);
    const PhaseMemory& g = testinputs::phase(e, "generation");
    EXPECT_EQ(g.per_gpu.parameters, 2 * kPsi);
    EXPECT_EQ(g.per_gpu.gradients, 0u);
    EXPECT_EQ(g.per_gpu.optimizer_states, 12 * kPsi);
    EXPECT_EQ(g.per_gpu.activations, kLlamaGen);
    EXPECT_EQ(g.per_gpu.temporary_buffers, 0u);
    EXPECT_EQ(g.per_gpu.total, 14 * kPsi + kLlamaGen);
    // Generation comes after the training phases and before checkpoint_save.
    ASSERT_GE(e.phases.size(), 7u);
    EXPECT_EQ(e.phases[4].name, "steady_backward");
    EXPECT_EQ(e.phases[5].name, "generation");
}

// ZeRO-2 on 8 GPUs: replicated 2Ψ parameters, (4 + 8) x ceil(Ψ/8) optimizer
// states, gradients freed after the step (free_grad_in_param_list).
TEST(GenerationPhase, Zero2PartitionsOptimizerStatesOnly) {
    const EstimateInput in = llama_generating(8, 2);
    const Estimate e = estimate(in);
    const PhaseMemory& g = testinputs::phase(e, "generation");
    const uint64_t tn = (kPsi + 7) / 8;
    EXPECT_EQ(g.per_gpu.parameters, 2 * kPsi);
    EXPECT_EQ(g.per_gpu.gradients, 0u);
    EXPECT_EQ(g.per_gpu.optimizer_states, 12 * tn);
    EXPECT_EQ(g.per_gpu.total, 2 * kPsi + 12 * tn + kLlamaGen);
}

// ZeRO-3: each decoding step is a forward, so the parameters gathered per
// step are the forward's (same named terms); the flat gradient buffer stays.
TEST(GenerationPhase, Zero3GathersAsTheForwardDoes) {
    const EstimateInput in = llama_generating(8, 3);
    const Estimate e = estimate(in, true);
    const PhaseMemory& g = testinputs::phase(e, "generation");
    const PhaseMemory& f = testinputs::phase(e, "forward");
    EXPECT_GT(g.per_gpu.temporary_buffers, 0u);
    EXPECT_EQ(g.per_gpu.temporary_buffers, f.per_gpu.temporary_buffers);
    EXPECT_EQ(g.per_gpu.gradients, 2 * ((kPsi + 7) / 8));  // b_a = 2 (bf16) x ceil(Ψ/8)
    EXPECT_EQ(g.per_gpu.activations, kLlamaGen);
    bool kv_explained = false;
    for (const auto& t : e.terms)
        if (contains(t.component, "KV cache") && t.bytes == kLlamaKv && contains(t.source, "DynamicCache"))
            kv_explained = true;
    EXPECT_TRUE(kv_explained);
}

// A big KV cache makes generation the peak phase, and the per-GPU activations
// summary takes it.
TEST(GenerationPhase, CanBeThePeak) {
    EstimateInput in = llama_generating(8, 3);
    in.generation->num_beams = 8;
    in.generation->eval_batch = 8;
    const Estimate e = estimate(in);
    EXPECT_EQ(e.peak_phase, "generation");
    EXPECT_EQ(e.per_gpu.activations, 64ULL * 640 * 512 * kKiB + 64ULL * 640 * 8192 + 64ULL * 32000 * 10);
}

// transformers < 4.45 keeps every prompt token's logits: 8 x 512 x 32000 x
// (2 + 4) B = 786,432,000 B with 8 x 512 x 512 KiB of cache at the prefill.
TEST(GenerationPhase, OldTransformersPrefillLogits) {
    EstimateInput in = llama_generating(1, 0);
    in.generation->max_new_tokens = 16;
    in.stack.transformers = "4.44";
    const Estimate e = estimate(in);
    const PhaseMemory& g = testinputs::phase(e, "generation");
    EXPECT_EQ(g.per_gpu.activations,
              8ULL * 512 * 512 * kKiB + 8ULL * 512 * 8192 + 8ULL * 512 * 32000 * 6 + kLlamaLogits);
}

TEST(GenerationPhase, NoPhaseWithoutEvalGenerate) {
    EstimateInput in = llama_generating(1, 0);
    in.generation.reset();
    const Estimate e = estimate(in);
    for (const auto& p : e.phases) EXPECT_NE(p.name, "generation");
}

// The flags resolve into GenerationSettings; misuse names the flag.
TEST(GenerationRequest, FlagsAndErrors) {
    Request req;
    req.model = "llama-2-7b";
    req.eval_generate = true;
    req.num_beams = 4;
    req.eval_batch = 2;
    req.max_new_tokens = 64;
    req.prompt_len = 300;
    const Resolved r = resolve_request(req, kData);
    ASSERT_TRUE(r.input.generation.has_value());
    EXPECT_EQ(r.input.generation->num_beams, 4);
    EXPECT_EQ(r.input.generation->eval_batch, 2);
    EXPECT_EQ(r.input.generation->max_new_tokens, 64);
    EXPECT_EQ(r.input.generation->prompt_len.value_or(0), 300);
    EXPECT_EQ(r.provenance.at("generation.num_beams"), "--num-beams");

    Request d;
    d.model = "llama-2-7b";
    d.eval_generate = true;
    const Resolved rd = resolve_request(d, kData);
    EXPECT_EQ(rd.input.generation->num_beams, 1);     // GenerationConfig default
    EXPECT_EQ(rd.input.generation->eval_batch, 8);    // per_device_eval_batch_size default
    EXPECT_EQ(rd.input.generation->max_new_tokens, 20);
    EXPECT_FALSE(rd.input.generation->prompt_len.has_value());

    Request no_flag;
    no_flag.model = "llama-2-7b";
    no_flag.num_beams = 4;
    EXPECT_TRUE(contains(error_of([&] { (void)resolve_request(no_flag, kData); }), "--num-beams: needs --eval-generate"));
    Request zero = req;
    zero.num_beams = 0;
    EXPECT_TRUE(contains(error_of([&] { (void)resolve_request(zero, kData); }), "--num-beams"));
    Request bare;
    bare.params = "7B";
    bare.eval_generate = true;
    EXPECT_TRUE(contains(error_of([&] { (void)resolve_request(bare, kData); }), "--eval-generate: needs an architecture"));
}
