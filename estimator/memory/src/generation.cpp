// KV cache of model.generate (zeromem/generation.h).
#include "zeromem/generation.h"

#include "zeromem/types.h"

#include <algorithm>
#include <string>

namespace zeromem {
namespace {

/// a * b, throwing InputError naming `what` when the product overflows 64 bits.
uint64_t checked_mul(uint64_t a, uint64_t b, const char* what) {
    uint64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r))
        throw InputError(std::string("generation: ") + what + " overflows 64-bit bytes; check the sizes");
    return r;
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

void require_positive(int64_t v, const char* field) {
    if (v <= 0) throw InputError(std::string("generation: ") + field + " must be positive, got " + std::to_string(v));
}

void require_non_negative(int64_t v, const char* field) {
    if (v < 0) throw InputError(std::string("generation: ") + field + " must not be negative, got " + std::to_string(v));
}

bool is_mla(const ModelArch& a) { return a.kv_lora_rank > 0; }

/// Elements one sequence caches per token in one layer on one tensor rank.
uint64_t elements_per_token_layer(const ModelArch& a, int64_t tp) {
    if (is_mla(a)) {
        // DeepseekV3Attention.forward: key_states = cat(k_pass, k_rot) over
        // num_heads heads of qk_nope + qk_rope, value_states num_heads x v_head_dim.
        const uint64_t heads = ceil_div(static_cast<uint64_t>(a.num_heads), static_cast<uint64_t>(tp));
        return heads * static_cast<uint64_t>(a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim);
    }
    const uint64_t kv_heads = ceil_div(static_cast<uint64_t>(a.num_kv_heads), static_cast<uint64_t>(tp));
    return 2 * kv_heads * static_cast<uint64_t>(a.head_dim);
}

/// Decoder layers that hold a cache.
int64_t cached_layers(const ModelArch& a) { return a.num_decoder_layers > 0 ? a.num_decoder_layers : a.num_layers; }

void check_arch(const ModelArch& a, uint64_t dtype_bytes, int64_t tp) {
    if (a.encoder_only)
        throw InputError("generation: " + (a.name.empty() ? std::string("the model") : a.name) +
                         " is encoder-only and has no generate() KV cache");
    if (dtype_bytes == 0) throw InputError("generation: dtype bytes must be positive");
    require_positive(tp, "tp");
    require_positive(a.num_layers, "num_layers");
    if (is_mla(a)) {
        require_positive(a.num_heads, "num_heads");
        require_positive(a.qk_nope_head_dim, "qk_nope_head_dim");
        require_positive(a.v_head_dim, "v_head_dim");
        require_non_negative(a.qk_rope_head_dim, "qk_rope_head_dim");
    } else {
        require_positive(a.num_kv_heads, "num_kv_heads");
        require_positive(a.head_dim, "head_dim");
    }
}

/// The larger of one layer's K and V in `self_bytes` (a self-attention cache
/// over every cached layer): what one torch.cat in DynamicLayer.update
/// allocates beside the tensor it replaces.
uint64_t one_layer_cat_copy(const ModelArch& a, uint64_t self_bytes) {
    const uint64_t per_layer = self_bytes / static_cast<uint64_t>(cached_layers(a));
    if (!is_mla(a)) return per_layer / 2;
    const auto k = static_cast<uint64_t>(a.qk_nope_head_dim + a.qk_rope_head_dim);
    const auto v = static_cast<uint64_t>(a.v_head_dim);
    return per_layer / (k + v) * std::max(k, v);
}

std::string layout_line(const ModelArch& a, int64_t tp) {
    std::string s;
    if (is_mla(a))
        s = "MLA: decompressed per-head K (" + std::to_string(a.qk_nope_head_dim + a.qk_rope_head_dim) + ") and V (" +
            std::to_string(a.v_head_dim) + ") for " + std::to_string(a.num_heads) +
            " heads, not the kv_lora_rank latent (transformers DeepseekV3Attention)";
    else
        s = std::to_string(a.num_kv_heads) + " KV heads x head_dim " + std::to_string(a.head_dim);
    if (tp > 1) s += ", heads split over tp " + std::to_string(tp);
    if (a.num_decoder_layers > 0)
        s += "; encoder-decoder: " + std::to_string(a.num_decoder_layers) +
             " decoder layers, self-attention over new tokens + cross-attention over the prompt";
    else
        s += "; " + std::to_string(a.num_layers) + " layers over prompt + new tokens";
    return s;
}

}  // namespace

uint64_t kv_cache_bytes_per_token(const ModelArch& arch, uint64_t dtype_bytes, int64_t tp) {
    check_arch(arch, dtype_bytes, tp);
    const uint64_t per_layer = checked_mul(elements_per_token_layer(arch, tp), dtype_bytes, "KV bytes per token");
    return checked_mul(per_layer, static_cast<uint64_t>(cached_layers(arch)), "KV bytes per token");
}

KvCache kv_cache(const ModelArch& arch, const GenerationShape& shape, uint64_t dtype_bytes) {
    require_positive(shape.num_beams, "num_beams");
    require_positive(shape.batch, "batch");
    require_non_negative(shape.prompt_len, "prompt_len");
    require_non_negative(shape.max_new_tokens, "max_new_tokens");
    const uint64_t per_token = kv_cache_bytes_per_token(arch, dtype_bytes, shape.tp);
    const uint64_t sequences =
        checked_mul(static_cast<uint64_t>(shape.num_beams), static_cast<uint64_t>(shape.batch), "beams x batch");
    const auto prompt = static_cast<uint64_t>(shape.prompt_len);
    const auto fresh = static_cast<uint64_t>(shape.max_new_tokens);

    KvCache c;
    c.elements_per_token_layer = elements_per_token_layer(arch, shape.tp);
    c.cached_layers = cached_layers(arch);
    c.layout = layout_line(arch, shape.tp);
    if (arch.num_decoder_layers > 0) {
        // EncoderDecoderCache: decoder self-attention over the generated
        // tokens, cross-attention over the encoder's prompt length.
        c.self_attention_bytes = checked_mul(checked_mul(sequences, fresh, "KV cache"), per_token, "KV cache");
        c.cross_attention_bytes = checked_mul(checked_mul(sequences, prompt, "KV cache"), per_token, "KV cache");
    } else {
        c.self_attention_bytes = checked_mul(checked_mul(sequences, prompt + fresh, "KV cache"), per_token, "KV cache");
    }
    c.bytes = c.self_attention_bytes + c.cross_attention_bytes;
    if (c.bytes < c.self_attention_bytes) throw InputError("generation: KV cache overflows 64-bit bytes");
    return c;
}

std::string describe_generation(const GenerationSettings& g, int64_t seq_len) {
    return "generation during evaluation: " + std::to_string(g.num_beams) + (g.num_beams == 1 ? " beam x " : " beams x ") +
           std::to_string(g.eval_batch) + " prompts per GPU, prompt " + std::to_string(g.prompt_len.value_or(seq_len)) +
           " + " + std::to_string(g.max_new_tokens) +
           " new tokens (KV cache and logits are the generation phase's activations)";
}

GenerationMemory generation_memory(const ModelArch& arch, const GenerationShape& shape, uint64_t dtype_bytes,
                                   bool last_token_logits_only) {
    if (arch.vocab_size <= 0)
        throw InputError("generation: vocab_size must be positive, got " + std::to_string(arch.vocab_size));
    GenerationMemory g;
    const KvCache full = kv_cache(arch, shape, dtype_bytes);
    GenerationShape at_prefill = shape;
    at_prefill.max_new_tokens = 0;
    g.kv_at_prefill = kv_cache(arch, at_prefill, dtype_bytes).bytes;
    g.kv_cache = {"generation KV cache (DynamicCache)",
                  "beams · batch · (prompt + new tokens) · layers · 2 · KV heads · head_dim · b_m "
                  "(encoder-decoder: decoder layers, self over new tokens + cross over the prompt)",
                  "transformers cache_utils.py DynamicCache (DynamicLayer.update, torch.cat per step); "
                  "generation/utils.py _expand_inputs_for_generation (num_beams copies)",
                  full.bytes};
    const uint64_t sequences =
        checked_mul(static_cast<uint64_t>(shape.num_beams), static_cast<uint64_t>(shape.batch), "beams x batch");
    const auto vocab = static_cast<uint64_t>(arch.vocab_size);
    g.step_logits = {"generation step logits and scores",
                     "beams · batch · V · (b_m + 4 + 4): last-token logits, fp32 next_token_logits, fp32 scores",
                     "transformers generation/utils.py GenerationMixin._sample / _beam_search "
                     "(outputs.logits[:, -1, :].to(copy=True, dtype=torch.float32); logits_processor, log_softmax)",
                     checked_mul(checked_mul(sequences, vocab, "logits"), dtype_bytes + 8, "logits")};
    uint64_t prefill = 0;
    if (!last_token_logits_only && arch.num_decoder_layers == 0)
        prefill = checked_mul(checked_mul(checked_mul(sequences, static_cast<uint64_t>(shape.prompt_len), "logits"),
                                          vocab, "logits"),
                              dtype_bytes + 4, "logits");
    g.prefill_logits = {"generation prefill logits (every prompt token)",
                        "beams · batch · prompt · V · (b_m + 4) (transformers < 4.45: no logits_to_keep; upcast to fp32)",
                        "transformers < 4.45 LlamaForCausalLM.forward (logits = logits.float()); "
                        "num_logits_to_keep=1 from generate since 4.45",
                        prefill};
    g.cat_copy = {"generation KV cache torch.cat copy (one layer)",
                  "max(K, V) of one layer's self-attention cache: self KV bytes / layers · max(K, V) / (K + V)",
                  "transformers cache_utils.py DynamicLayer.update (self.keys = torch.cat([self.keys, key_states]))",
                  one_layer_cat_copy(arch, full.self_attention_bytes)};
    g.cat_copy_at_prefill = one_layer_cat_copy(arch, kv_cache(arch, at_prefill, dtype_bytes).self_attention_bytes);
    const uint64_t at_prefill_bytes =
        g.kv_at_prefill + g.cat_copy_at_prefill + g.prefill_logits.bytes + g.step_logits.bytes;
    const uint64_t at_last_bytes = g.kv_cache.bytes + g.cat_copy.bytes + g.step_logits.bytes;
    g.prefill_is_peak = at_prefill_bytes > at_last_bytes;
    g.peak = g.prefill_is_peak ? at_prefill_bytes : at_last_bytes;
    return g;
}

}  // namespace zeromem
