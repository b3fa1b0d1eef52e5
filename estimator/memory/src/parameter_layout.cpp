// The architecture's parameter tensors in the order model.parameters() yields
// them: what the walks over parameters read (ZeRO-3's sub-groups, the
// persistent parameters, the per-parameter pinned buffers).
#include "estimate_detail.h"

#include "zeromem/util.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace zeromem::estimate_detail {

namespace {

// Every parameter tensor of the architecture in the order model.parameters()
// yields it (the Hugging Face module layout: the embeddings, then per layer
// the attention projections, the MLP matrices, their biases and the norms,
// then the final norm and an untied LM head), split over tp. The counts match
// count_params for the families it covers.
struct ParameterLayout {
    std::vector<uint64_t> before_layers, per_layer, after_layers;  // numel per tensor
};
ParameterLayout parameter_layout(const ModelArch& a, uint64_t tp) {
    ParameterLayout l;
    l.before_layers.reserve(4);
    l.per_layer.reserve(16);
    l.after_layers.reserve(4);
    const uint64_t h = uint64_t(a.hidden_size), f = uint64_t(a.ffn_size);
    const uint64_t hd = uint64_t(a.head_dim > 0 ? a.head_dim : a.hidden_size / std::max<int64_t>(1, a.num_heads));
    const uint64_t q = uint64_t(a.num_heads) * hd, kv = uint64_t(a.num_kv_heads) * hd;
    auto add = [&](std::vector<uint64_t>& v, uint64_t numel, uint64_t count) {
        for (uint64_t i = 0; numel > 0 && i < count; ++i) v.push_back(ceil_div(numel, tp));
    };
    add(l.before_layers, uint64_t(a.vocab_size) * h, 1);
    if (a.learned_positions) add(l.before_layers, uint64_t(a.max_position_embeddings + a.position_offset) * h, 1);
    if (a.embedding_norm) add(l.before_layers, h, a.norm_has_bias ? 2 : 1);  // BLOOM word_embeddings_layernorm
    if (a.fused_qkv) {
        add(l.per_layer, h * (q + 2 * kv), 1);
    } else {
        add(l.per_layer, h * q, 1);
        add(l.per_layer, h * kv, 2);
    }
    add(l.per_layer, q * h, 1);
    add(l.per_layer, h * f, a.gated_mlp ? 2 : 1);
    add(l.per_layer, f * h, 1);
    if (a.qkv_bias) add(l.per_layer, q + 2 * kv, 1);
    if (a.attn_out_bias) add(l.per_layer, h, 1);
    if (a.mlp_bias) add(l.per_layer, f, a.gated_mlp ? 2 : 1), add(l.per_layer, h, 1);
    add(l.per_layer, h, uint64_t(a.norms_per_layer) * (a.norm_has_bias ? 2 : 1));
    if (a.final_norm) add(l.after_layers, h, a.norm_has_bias ? 2 : 1);
    if (!a.tied_embeddings) add(l.after_layers, uint64_t(a.vocab_size) * h, 1);
    return l;
}

}  // namespace

// The same tensors as (numel per tensor, count): what per-parameter pinned
// buffers are sized by (zero.Init's partitions, the ZeRO-1/2 accumulation
// buffers).
std::vector<std::pair<uint64_t, uint64_t>> parameter_numels(const ModelArch& a, uint64_t tp) {
    const ParameterLayout l = parameter_layout(a, tp);
    std::vector<std::pair<uint64_t, uint64_t>> v;
    for (uint64_t n : l.before_layers) v.emplace_back(n, 1);
    for (uint64_t n : l.per_layer) v.emplace_back(n, uint64_t(a.num_layers));
    for (uint64_t n : l.after_layers) v.emplace_back(n, 1);
    return v;
}

// ZeRO-3's sub-groups of this rank's partition, in parameter order (DeepSpeed
// v0.19.6 runtime/zero/stage3.py _create_fp16_sub_groups: parameters are
// added to a sub-group, each with its partition ceil(numel / N_d), until the
// sub-group's numel reaches sub_group_size, so a sub-group can exceed it by up
// to one partition). Empty when the layout does not add up to `Tn` (a family
// it does not cover, experts, pipeline stages): callers then cut Tn uniformly.
std::vector<uint64_t> zero3_sub_groups(const ModelArch& a, uint64_t tp, uint64_t N, uint64_t sub_group_size,
                                       uint64_t Tn) {
    const ParameterLayout l = parameter_layout(a, tp);
    const uint64_t layers = uint64_t(std::max<int64_t>(0, a.num_layers));
    // Each layer's partitions are the same: divide once, then walk.
    uint64_t head = 0, tail = 0, layer_sum = 0;
    std::vector<uint64_t> layer_parts;
    layer_parts.reserve(l.per_layer.size());
    for (uint64_t n : l.before_layers) head += ceil_div(n, N);
    for (uint64_t n : l.per_layer) layer_parts.push_back(ceil_div(n, N)), layer_sum += layer_parts.back();
    for (uint64_t n : l.after_layers) tail += ceil_div(n, N);
    const uint64_t total = head + layers * layer_sum + tail;
    // The layout pads each parameter to N_d; Tn pads the total once: agree within N_d per tensor.
    const uint64_t tensors = l.before_layers.size() + l.after_layers.size() + l.per_layer.size() * layers;
    if (total < Tn || total > Tn + tensors) return {};
    std::vector<uint64_t> groups;
    uint64_t sub = 0;
    auto take = [&](uint64_t part) {
        sub += part;
        if (sub >= sub_group_size) groups.push_back(sub), sub = 0;
    };
    if (total < sub_group_size) {  // the whole partition never reaches sub_group_size: one sub-group
        groups.push_back(total);
        return groups;
    }
    for (uint64_t n : l.before_layers) take(ceil_div(n, N));
    for (uint64_t layer = 0; layer < layers; ++layer)
        for (uint64_t part : layer_parts) take(part);
    for (uint64_t n : l.after_layers) take(ceil_div(n, N));
    if (sub > 0) groups.push_back(sub);
    return groups;
}

// Elements of one tensor/pipeline rank's parameters that ZeRO-3 keeps whole
// on every rank (DeepSpeed v0.19.6 runtime/zero/parameter_offload.py
// mark_persistent_parameters): walking named_parameters, every parameter
// with ds_numel <= stage3_param_persistence_threshold persists, matrices
// included, while the running total stays within
// stage3_model_persistence_threshold (a parameter that would exceed it is
// skipped, later smaller ones may still fit). Walked in module order: the
// embeddings, then per layer its projections, MLP matrices, biases and
// norms, then the final norm and the LM head.
uint64_t persistent_numel(const ModelArch& a, uint64_t tp, int64_t threshold, int64_t model_threshold) {
    const uint64_t limit = static_cast<uint64_t>(std::max<int64_t>(0, threshold));
    const uint64_t cap = static_cast<uint64_t>(std::max<int64_t>(0, model_threshold));
    const uint64_t layers = static_cast<uint64_t>(std::max<int64_t>(1, a.num_layers));
    uint64_t total = 0;
    auto take = [&](uint64_t numel, uint64_t count) {  // as many copies as stay within the cap
        if (numel == 0 || numel > limit || total > cap) return;
        const uint64_t fit = std::min(count, (cap - total) / numel);
        total += fit * numel;
    };
    const auto list = parameter_numels(a, tp);
    // parameter_numels lists whole-model counts (the embedding norm among the
    // single tensors); spread the per-layer
    // tensors over the layers so the model cap is applied in module order.
    // Whole layers that fit under the cap are taken at once (a config may
    // have very many layers); the walk goes on only while something fits.
    uint64_t per_layer = 0, smallest = UINT64_MAX;
    for (const auto& [numel, count] : list)
        if (count >= layers && count % layers == 0 && numel > 0 && numel <= limit) {
            per_layer += numel * (count / layers);
            smallest = std::min(smallest, numel);
        }
    uint64_t layer = 0;
    if (per_layer > 0) {
        const uint64_t whole = std::min(layers, cap / per_layer);
        total = whole * per_layer;
        layer = whole;
    }
    for (; layer < layers && per_layer > 0 && total <= cap && cap - total >= smallest; ++layer)
        for (const auto& [numel, count] : list)
            if (count >= layers && count % layers == 0) take(numel, count / layers);
    for (const auto& [numel, count] : list)
        if (count < layers || count % layers != 0) take(numel, count);
    return total;
}

}  // namespace zeromem::estimate_detail
