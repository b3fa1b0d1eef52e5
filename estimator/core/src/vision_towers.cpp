// config.json readers of the vision towers (vision_config) of the vision-language wrappers.
#include "model_families.h"

#include "param_count.h"

#include <algorithm>

namespace zeromem::model_detail {

namespace {

// ---------------------------------------------------------------------------
// Vision towers. Each sets the vision_* fields of `a` from vision_config
// `v` (which may be empty: the wrapper's default config applies).

void set_vision(ModelArch& a, const char* kind, int64_t h, int64_t layers, int64_t f, u64 block, u64 other, u64 projector,
                u64 largest) {
    a.vision_kind = kind;
    a.vision_hidden_size = h;
    a.vision_layers = layers;
    a.vision_ffn_size = f;
    a.vision_block_params = block;
    a.vision_other_params = other;
    a.projector_params = projector;
    a.vision_largest_module = largest;
}

// A ViT block with biased q, k, v, o, a biased fc1/fc2 MLP and two
// LayerNorms: CLIPEncoderLayer, SiglipEncoderLayer, Llama4VisionEncoderLayer.
u64 vit_block(int64_t h, int64_t f) { return 4 * linear(h, h, true) + mlp_params(h, f, false, true) + 4 * u(h); }

}  // namespace

// CLIP (modeling_clip.py CLIPVisionTransformer): class embedding, patch
// Conv2d without bias, (img/p)^2 + 1 positions, pre and post LayerNorm.
// SigLIP (modeling_siglip.py): patch Conv2d with bias, (img/p)^2 positions,
// post LayerNorm, and the attention-pooling head when vision_use_head.
void read_clip_or_siglip(ModelArch& a, const ConfigReader& r, bool siglip, const json& defaults) {
    auto get = [&](const char* key, int64_t fallback) {
        return r.integer_or({key}, defaults.contains(key) ? defaults[key].get<int64_t>() : fallback);
    };
    const int64_t h = get("hidden_size", 768), f = get("intermediate_size", 3072), L = get("num_hidden_layers", 12);
    const int64_t p = get("patch_size", siglip ? 16 : 32), img = get("image_size", 224), C = get("num_channels", 3);
    (void)r.find({"num_attention_heads"});
    const int64_t grid = (img / p) * (img / p);
    u64 other = u(C * p * p) * u(h) + u(grid) * u(h) + 2 * u(h);  // patch, positions, post LayerNorm
    if (siglip) {
        other += u(h);  // patch Conv2d bias
        if (r.boolean_or({"vision_use_head"}, true))  // SiglipMultiheadAttentionPoolingHead
            other += u(h) + (3 * u(h) * u(h) + 3 * u(h)) + linear(h, h, true) + 2 * u(h) + mlp_params(h, f, false, true);
    } else {
        other += u(h) + u(h) + 2 * u(h);  // class embedding, one more position, pre LayerNorm
    }
    set_vision(a, siglip ? "siglip" : "clip", h, L, f, vit_block(h, f), other, 0,
               std::max({linear(h, f, true), linear(f, h, true), u(grid + 1) * u(h)}));
}

// Qwen2-VL (modeling_qwen2_vl.py): PatchEmbed Conv3d without bias, blocks
// with LayerNorms, fused qkv and fc1/fc2 (mlp_ratio), PatchMerger with a
// LayerNorm over embed_dim and two Linears over embed_dim * merge^2.
void read_qwen2_vl_tower(ModelArch& a, const ConfigReader& r) {
    const int64_t e = r.integer_or({"embed_dim"}, 1280), depth = r.integer_or({"depth"}, 32);
    const int64_t f = e * r.integer_or({"mlp_ratio"}, 4), out = r.integer_or({"hidden_size"}, 3584);
    const int64_t C = r.integer_or({"in_channels", "in_chans"}, 3), p = r.integer_or({"patch_size", "spatial_patch_size"}, 14);
    const int64_t t = r.integer_or({"temporal_patch_size"}, 2), m = e * r.integer_or({"spatial_merge_size"}, 2) * r.integer_or({"spatial_merge_size"}, 2);
    const u64 block = 4 * u(e) + linear(e, 3 * e, true) + linear(e, e, true) + mlp_params(e, f, false, true);
    const u64 merger = 2 * u(e) + linear(m, m, true) + linear(m, out, true);
    set_vision(a, "qwen2_vl", e, depth, f, block, u(C * t * p * p) * u(e), merger,
               std::max({linear(m, m, true), linear(m, out, true), linear(e, 3 * e, true)}));
}

// Qwen2.5-VL (modeling_qwen2_5_vl.py): as Qwen2-VL but RMSNorms, a gated
// MLP with biases (intermediate_size) and an RMSNorm ln_q in the merger.
void read_qwen2_5_vl_tower(ModelArch& a, const ConfigReader& r) {
    const int64_t h = r.integer({"hidden_size"}), depth = r.integer({"depth"}), f = r.integer({"intermediate_size"});
    const int64_t out = r.integer({"out_hidden_size"});
    const int64_t C = r.integer_or({"in_channels", "in_chans"}, 3), p = r.integer_or({"patch_size", "spatial_patch_size"}, 14);
    const int64_t t = r.integer_or({"temporal_patch_size"}, 2), s = r.integer_or({"spatial_merge_size"}, 2);
    const int64_t m = h * s * s;
    const u64 block = 2 * u(h) + linear(h, 3 * h, true) + linear(h, h, true) + mlp_params(h, f, true, true);
    const u64 merger = u(h) + linear(m, m, true) + linear(m, out, true);
    set_vision(a, "qwen2_5_vl", h, depth, f, block, u(C * t * p * p) * u(h), merger,
               std::max({linear(m, m, true), linear(m, out, true), linear(h, 3 * h, true)}));
}

// Qwen3-VL (modeling_qwen3_vl.py Qwen3VLVisionModel): Conv3d patch embed
// with bias, learned pos_embed (num_position_embeddings x h), LayerNorm
// blocks with fc1/fc2, a merger (LayerNorm over h) and one DeepStack merger
// per deepstack_visual_indexes entry (LayerNorm over h * merge^2).
void read_qwen3_vl_tower(ModelArch& a, const ConfigReader& r) {
    const int64_t h = r.integer({"hidden_size"}), depth = r.integer({"depth"}), f = r.integer({"intermediate_size"});
    const int64_t out = r.integer({"out_hidden_size"});
    const int64_t C = r.integer_or({"in_channels", "in_chans"}, 3), p = r.integer_or({"patch_size"}, 16);
    const int64_t t = r.integer_or({"temporal_patch_size"}, 2), s = r.integer_or({"spatial_merge_size"}, 2);
    const int64_t npos = r.integer_or({"num_position_embeddings"}, 2304);
    const int64_t deepstack = list_length(r, "deepstack_visual_indexes");
    const int64_t m = h * s * s;
    const u64 block = 4 * u(h) + linear(h, 3 * h, true) + linear(h, h, true) + mlp_params(h, f, false, true);
    const u64 merger_mlp = linear(m, m, true) + linear(m, out, true);
    const u64 mergers = (2 * u(h) + merger_mlp) + u(deepstack) * (2 * u(m) + merger_mlp);
    set_vision(a, "qwen3_vl", h, depth, f, block, u(C * t * p * p) * u(h) + u(h) + u(npos) * u(h), mergers,
               std::max({linear(m, m, true), linear(m, out, true), u(npos) * u(h)}));
}

// Llama 4 (modeling_llama4.py Llama4VisionModel): unfold patch Linear
// without bias, class embedding, (img/p)^2 + 1 positions, pre and post
// LayerNorm, ViT blocks, pixel-shuffle MLP (fc1 intermediate_size ->
// projector_input_dim, fc2 projector_output_dim^2, no biases), then
// Llama4MultiModalProjector vision_output_dim -> text hidden, no bias.
// Absent keys take Llama4VisionConfig's defaults.
void read_llama4_tower(ModelArch& a, const ConfigReader& r, int64_t text_hidden) {
    const int64_t h = r.integer_or({"hidden_size"}, 768), L = r.integer_or({"num_hidden_layers"}, 34);
    const int64_t f = r.integer_or({"intermediate_size"}, 5632), C = r.integer_or({"num_channels"}, 3);
    const int64_t img = r.integer_or({"image_size"}, 448), p = r.integer_or({"patch_size"}, 14);
    const int64_t pin = r.integer_or({"projector_input_dim"}, 4096), pout = r.integer_or({"projector_output_dim"}, 4096);
    const int64_t vout = r.integer_or({"vision_output_dim"}, 7680);
    const u64 npos = u((img / p) * (img / p) + 1);
    const u64 other = u(C * p * p) * u(h) + u(h) + npos * u(h) + 4 * u(h) + u(f) * u(pin) + u(pout) * u(pout);
    const u64 projector = u(vout) * u(text_hidden) + (r.boolean_or({"multi_modal_projector_bias"}, false) ? u(text_hidden) : 0);
    set_vision(a, "llama4", h, L, f, vit_block(h, f), other, projector,
               std::max({u(f) * u(pin), u(pout) * u(pout), projector, linear(h, f, true)}));
}

}  // namespace zeromem::model_detail
