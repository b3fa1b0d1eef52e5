// Memory of text generation (model.generate) run inside training: evaluation
// with generation (Seq2SeqTrainer predict_with_generate) and RLHF rollouts.
#pragma once

#include "zeromem/input.h"
#include "zeromem/model.h"
#include "zeromem/terms.h"

#include <cstdint>
#include <optional>
#include <string>

namespace zeromem {

/// The shape of one model.generate call on one GPU.
struct GenerationShape {
    int64_t num_beams = 1;       ///< beams per prompt (GenerationConfig.num_beams; 1 = greedy or sampling)
    int64_t batch = 1;           ///< prompts per call on this GPU (the eval micro batch)
    int64_t prompt_len = 0;      ///< prompt tokens (the encoder input for encoder-decoder models)
    int64_t max_new_tokens = 0;  ///< tokens generated (GenerationConfig.max_new_tokens)
    int64_t tp = 1;              ///< tensor-parallel size: each rank caches ceil(KV heads / tp) heads
};

/// The key-value cache a generate call holds at its last decoding step, in
/// bytes on one GPU.
struct KvCache {
    uint64_t self_attention_bytes = 0;   ///< keys and values of the (decoder) self-attention
    uint64_t cross_attention_bytes = 0;  ///< encoder-decoder only: keys and values of the encoder output
    uint64_t bytes = 0;                  ///< self_attention_bytes + cross_attention_bytes
    /// Per-token, per-layer elements cached by one sequence's self-attention
    /// (2 x KV heads x head_dim, or for MLA heads x (qk_nope + qk_rope + v_head_dim)).
    uint64_t elements_per_token_layer = 0;
    int64_t cached_layers = 0;           ///< layers with a cache (decoder layers only for encoder-decoder)
    std::string layout;                  ///< one line: what is counted, for --explain
};

/// Bytes of the self-attention KV cache of one token of one sequence in
/// every cached layer: layers x elements_per_token_layer x dtype_bytes
/// (llama-2-7b, 2-byte dtype: 32 x 2 x 32 x 128 x 2 B = 512 KiB). Throws
/// InputError for an encoder-only model or a non-positive dtype_bytes/tp.
uint64_t kv_cache_bytes_per_token(const ModelArch& arch, uint64_t dtype_bytes, int64_t tp = 1);

/// The KV cache of one generate call: beams x batch x (prompt + new tokens)
/// x layers x 2 x num_kv_heads x head_dim x dtype_bytes.
///  - Source: transformers' DynamicCache (cache_utils.py, DynamicLayer.update
///    concatenates each step's key and value states of shape [batch x beams,
///    KV heads, tokens, head_dim] per layer; GenerationMixin._expand_inputs_
///    for_generation repeats every prompt num_beams times first).
///  - Grouped-query / multi-query attention: num_kv_heads heads (the cache is
///    filled before repeat_kv expands them).
///  - Multi-head latent attention (DeepSeek-V2/V3, kv_lora_rank > 0):
///    transformers' DeepseekV3Attention / DeepseekV2Attention cache the
///    decompressed per-head key (qk_nope_head_dim + qk_rope_head_dim) and
///    value (v_head_dim) for all num_heads heads, not the compressed latent
///    (kv_lora_rank + qk_rope_head_dim); that is what is counted.
///  - Encoder-decoder (T5): decoder layers only (num_decoder_layers): the
///    self-attention cache over the new tokens plus the cross-attention cache
///    over the prompt (EncoderDecoderCache; the encoder output is expanded
///    per beam too).
/// The count is at the last decoding step (prompt + new tokens; the final
/// token is produced but not cached, one token of slack). Throws InputError
/// for an encoder-only model, a non-positive beams/batch/tp/dtype_bytes, or a
/// negative prompt_len/max_new_tokens.
KvCache kv_cache(const ModelArch& arch, const GenerationShape& shape, uint64_t dtype_bytes);

/// One phrase for the Settings lines of the reports: "generation during
/// evaluation: 4 beams x 16 prompts per GPU, prompt 1024 + 256 new tokens
/// (KV cache and logits are the generation phase's activations)".
/// `seq_len` is the prompt length when g.prompt_len is unset.
std::string describe_generation(const GenerationSettings& g, int64_t seq_len);

/// What model.generate adds to the GPU beside the training states, at its
/// two moments: the prefill (the prompt's forward, the only moment with
/// prefill_logits) and the last decoding step (the full KV cache).
struct GenerationMemory {
    terms::Term kv_cache;        ///< at the last decoding step (kv_cache())
    terms::Term step_logits;     ///< one step's logits and scores
    terms::Term prefill_logits;  ///< the prompt's full logits (transformers < 4.45 only, else 0)
    /// DynamicLayer.update's torch.cat: the new key (or value) tensor of one
    /// layer is allocated while the old one is alive: + the larger of one
    /// layer's K and V self-attention cache, at the last step's length.
    terms::Term cat_copy;
    uint64_t kv_at_prefill = 0;  ///< KV cache right after the prefill (prompt tokens only), bytes
    uint64_t cat_copy_at_prefill = 0;  ///< the same torch.cat copy at the prompt's length, bytes
    uint64_t peak = 0;           ///< max(prefill moment, last step moment), bytes
    bool prefill_is_peak = false;
};

/// The generation terms of one generate call on one GPU (dtype_bytes: the
/// model dtype b_m).
///  - kv_cache: kv_cache(arch, shape, dtype_bytes).
///  - cat_copy: self_attention_bytes / layers x max(K, V) / (K + V) per
///    token (half a layer for K = V): the tensor torch.cat allocates in
///    DynamicLayer.update (cache_utils.py) beside the one it replaces.
///  - step_logits: beams x batch x V x (b_m + 4 + 4): the last token's logits
///    in the model dtype, its fp32 copy (`next_token_logits = outputs.logits
///    [:, -1, :].to(copy=True, dtype=torch.float32)`) and the fp32 scores the
///    logits processors / beam log_softmax return (GenerationMixin._sample,
///    _beam_search in transformers generation/utils.py).
///  - prefill_logits: without `last_token_logits_only` (transformers < 4.45,
///    before generate passed num_logits_to_keep=1, later logits_to_keep), the
///    prompt's forward returns logits for every prompt token, upcast to fp32
///    (`logits = logits.float()` in the LlamaForCausalLM family):
///    beams x batch x prompt x V x (b_m + 4). Encoder-decoder models decode
///    from one start token: 0.
/// Throws InputError as kv_cache() does, or for a non-positive vocabulary.
GenerationMemory generation_memory(const ModelArch& arch, const GenerationShape& shape, uint64_t dtype_bytes,
                                   bool last_token_logits_only);

}  // namespace zeromem
