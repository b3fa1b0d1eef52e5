// What RMSNorms save for backward (estimate.h rms_norm_saved_activation_bytes), from the code that
// saves it. transformers models/llama/modeling_llama.py LlamaRMSNorm.forward:
//   hidden_states = hidden_states.to(torch.float32)
//   variance = hidden_states.pow(2).mean(-1, keepdim=True)
//   hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
//   return self.weight * hidden_states.to(input_dtype)
// torch tools/autograd/derivatives.yaml: pow.Tensor_Scalar's gradient needs `self` (the fp32 copy,
// 4 B per element under bf16 training), mul.Tensor saves each operand the other's gradient needs (the
// bf16 normalized tensor the weight multiplies, 2 B; rsqrt's [b, s, 1] output is negligible), and
// _to_copy saves no tensor. So 6 B per element where Korthikanti counts the 2 B norm input: 4 B more
// per pre-norm. GemmaRMSNorm (`self._norm(x.float())`, then `output * (1.0 + self.weight.float())`)
// keeps the fp32 copy and the fp32 normalized tensor: 8 B; T5LayerNorm's mul with rsqrt keeps the bf16
// input, then the weight's mul the bf16 normalized tensor, beside the fp32 copy of pow: 4 + 2 + 2 = 8 B.
// Under fp32 training `.to(torch.float32)` returns the input itself: input 4 + normalized 4 = 8 B, less
// the 4 B input Korthikanti counts. nn.LayerNorm (native_layer_norm saves its input, mean and rstd)
// adds nothing.
#include "estimate_inputs.h"
#include "published_configs.h"
#include "zeromem/estimate.h"
#include "zeromem/model.h"

#include <gtest/gtest.h>

namespace {

using namespace zeromem;

ModelArch published(const char* name) { return load_hf_config(zeromem::testing::kPub + name + ".json"); }

TEST(RmsNormActivations, LlamaKeepsFourBytesPerElementMorePerNorm) {
    const ModelArch a = published("llama-2-7b-hf");
    EXPECT_EQ(a.rms_norm_saved_bytes, 6);
    const uint64_t sbh = 4096ull * 2 * 4096;  // s = 4096, b = 2, h = 4096
    // Two pre-norms per block, (6 - 2) B each.
    EXPECT_EQ(rms_norm_saved_activation_bytes(a, 4096, 2, 1, false, false), 2 * 4 * sbh);
    // fp32 training: (8 - 4) B each.
    EXPECT_EQ(rms_norm_saved_activation_bytes(a, 4096, 2, 1, false, true), 2 * 4 * sbh);
    // Sequence parallelism splits the norms' region over t = 4; without it every rank holds them whole.
    EXPECT_EQ(rms_norm_saved_activation_bytes(a, 4096, 2, 4, true, false), 2 * 4 * sbh / 4);
    EXPECT_EQ(rms_norm_saved_activation_bytes(a, 4096, 2, 4, false, false), 2 * 4 * sbh);
}

TEST(RmsNormActivations, GemmaAndT5KeepEightBytes) {
    const ModelArch g = published("gemma-2b");
    EXPECT_EQ(g.rms_norm_saved_bytes, 8);
    const uint64_t sbh = 1024ull * 1 * 2048;  // s = 1024, b = 1, h = 2048
    EXPECT_EQ(rms_norm_saved_activation_bytes(g, 1024, 1, 1, false, false), 2 * (8 - 2) * sbh);
    EXPECT_EQ(rms_norm_saved_activation_bytes(g, 1024, 1, 1, false, true), 2 * (8 - 4) * sbh);
    const ModelArch t5 = published("flan-t5-large");
    EXPECT_EQ(t5.rms_norm_saved_bytes, 8);
    EXPECT_EQ(rms_norm_saved_activation_bytes(t5, 512, 4, 1, false, false), 2 * (8 - 2) * (512ull * 4 * 1024));
}

// Qwen3Attention normalizes the projections per head: q_norm(q_proj(x).view(..., head_dim)), the same
// RMSNorm over head_dim. The projection's output is kept by nothing else (the rotary embedding's mul
// saves cos and sin only), so all 6 B count, over a·d = 16·128 query and kv·d = 8·128 key elements
// per token.
TEST(RmsNormActivations, Qwen3QkNormsCountWholeOverTheHeads) {
    const ModelArch a = published("qwen3-0.6b");
    ASSERT_TRUE(a.qk_norm);
    const uint64_t sb = 2048ull * 1;
    const uint64_t main = 2 * 4 * sb * 1024, qk = 6 * sb * (16 + 8) * 128;
    EXPECT_EQ(rms_norm_saved_activation_bytes(a, 2048, 1, 1, false, false), main + qk);
    // Tensor parallelism splits the heads (t = 2), not the pre-norms.
    EXPECT_EQ(rms_norm_saved_activation_bytes(a, 2048, 1, 2, false, false), main + qk / 2);
}

TEST(RmsNormActivations, LayerNormAddsNothing) {
    const ModelArch a = published("gpt2-large");
    ASSERT_TRUE(a.norm_has_bias);
    EXPECT_EQ(rms_norm_saved_bytes_per_element(a, false), 0);
    EXPECT_EQ(rms_norm_saved_activation_bytes(a, 1024, 8, 1, false, false), 0u);
}

// In a whole estimate without checkpointing every stored block holds its norms' extra, and the final
// norm's beside the LM head: llama-2-7b (32 blocks), s = 4096, b = 1, bf16, flash attention, one GPU.
TEST(RmsNormActivations, EveryStoredBlockAndTheFinalNormHoldIt) {
    EstimateInput in = testinputs::preset_input("llama-2-7b", 1, 0, Dtype::bf16);
    in.train.seq_len = 4096;
    in.train.micro_batch = 1;
    in.train.flash_attention = true;
    ModelArch layer_norm = *in.model.arch;
    layer_norm.norm_has_bias = true;  // the same shape with nothing extra saved
    EstimateInput ln = in;
    ln.model.arch = layer_norm;
    const double sbh = 4096.0 * 4096.0;
    const double extra = 32 * 2 * 4 * sbh + 4 * sbh;
    EXPECT_DOUBLE_EQ(double(testinputs::phase(estimate(in), "forward").per_gpu.activations) -
                         double(testinputs::phase(estimate(ln), "forward").per_gpu.activations),
                     extra);
}

}  // namespace
