// The architecture's parameter tensors in the order model.parameters() yields
// them: what the walks over parameters read (ZeRO-3's sub-groups, the
// persistent parameters, the per-parameter pinned buffers).
#include "estimate_detail.h"

#include "zeromem/util.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace zeromem::estimate_detail {

// Runs of equal tensors, each part at most ten (estimate_detail.h ParameterLayout).
ParameterLayout parameter_layout(const ModelArch& a, uint64_t tp) {
    ParameterLayout l;
    const uint64_t h = uint64_t(a.hidden_size), f = uint64_t(a.ffn_size);
    const uint64_t hd = uint64_t(a.head_dim > 0 ? a.head_dim : a.hidden_size / std::max<int64_t>(1, a.num_heads));
    const uint64_t q = uint64_t(a.num_heads) * hd, kv = uint64_t(a.num_kv_heads) * hd;
    auto add = [&](TensorRuns& v, uint64_t numel, uint64_t count) { v.add(ceil_div(numel, tp), count); };
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
    TensorRuns layer_parts;
    for (const TensorRun& r : l.before_layers) head += r.copies * ceil_div(r.numel, N);
    for (const TensorRun& r : l.per_layer)
        layer_parts.add(ceil_div(r.numel, N), r.copies), layer_sum += r.copies * ceil_div(r.numel, N);
    for (const TensorRun& r : l.after_layers) tail += r.copies * ceil_div(r.numel, N);
    const uint64_t total = head + layers * layer_sum + tail;
    // The layout pads each parameter to N_d; Tn pads the total once: agree within N_d per tensor.
    const uint64_t tensors = l.before_layers.tensors() + l.after_layers.tensors() + l.per_layer.tensors() * layers;
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
    auto take_run = [&](const TensorRun& r, uint64_t part) {
        for (uint64_t i = 0; i < r.copies; ++i) take(part);
    };
    for (const TensorRun& r : l.before_layers) take_run(r, ceil_div(r.numel, N));
    for (uint64_t layer = 0; layer < layers; ++layer)
        for (const TensorRun& r : layer_parts) take_run(r, r.numel);
    for (const TensorRun& r : l.after_layers) take_run(r, ceil_div(r.numel, N));
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
    const ParameterLayout list = parameter_layout(a, tp);
    // The layout's visit lists whole-model counts (the embedding norm among the
    // single tensors); spread the per-layer
    // tensors over the layers so the model cap is applied in module order.
    // Whole layers that fit under the cap are taken at once (a config may
    // have very many layers); the walk goes on only while something fits.
    uint64_t per_layer = 0, smallest = UINT64_MAX;
    for_each_parameter_numel(list, uint64_t(a.num_layers), [&](uint64_t numel, uint64_t count) {
        if (count >= layers && count % layers == 0 && numel > 0 && numel <= limit) {
            per_layer += numel * (count / layers);
            smallest = std::min(smallest, numel);
        }
    });
    uint64_t layer = 0;
    if (per_layer > 0) {
        const uint64_t whole = std::min(layers, cap / per_layer);
        total = whole * per_layer;
        layer = whole;
    }
    for (; layer < layers && per_layer > 0 && total <= cap && cap - total >= smallest; ++layer)
        for_each_parameter_numel(list, uint64_t(a.num_layers), [&](uint64_t numel, uint64_t count) {
            if (count >= layers && count % layers == 0) take(numel, count / layers);
        });
    for_each_parameter_numel(list, uint64_t(a.num_layers), [&](uint64_t numel, uint64_t count) {
        if (count < layers || count % layers != 0) take(numel, count);
    });
    return total;
}

// The two walks for the architecture `counts` stands for: shared_param_count hands the same count
// back only for an equal architecture, and the kept one holds it, so the same pointer means the same
// architecture. The planner's candidates share one; the last answer is kept per thread.
uint64_t kept_persistent_numel(const std::shared_ptr<const ParamCount>& counts, const ModelArch& a, uint64_t tp,
                               int64_t threshold, int64_t model_threshold) {
    struct Kept {
        std::shared_ptr<const ParamCount> counts;
        uint64_t tp;
        int64_t threshold, model_threshold;
        uint64_t numel;
    };
    thread_local std::optional<Kept> kept;
    if (kept && kept->counts == counts && kept->tp == tp && kept->threshold == threshold &&
        kept->model_threshold == model_threshold)
        return kept->numel;
    const uint64_t numel = persistent_numel(a, tp, threshold, model_threshold);
    kept = Kept{counts, tp, threshold, model_threshold, numel};
    return numel;
}

std::vector<uint64_t> kept_zero3_sub_groups(const std::shared_ptr<const ParamCount>& counts, const ModelArch& a,
                                            uint64_t tp, uint64_t N, uint64_t sub_group_size, uint64_t Tn) {
    struct Kept {
        std::shared_ptr<const ParamCount> counts;
        uint64_t tp, N, sub_group_size, Tn;
        std::vector<uint64_t> groups;
    };
    thread_local std::optional<Kept> kept;
    if (kept && kept->counts == counts && kept->tp == tp && kept->N == N && kept->sub_group_size == sub_group_size &&
        kept->Tn == Tn)
        return kept->groups;
    std::vector<uint64_t> groups = zero3_sub_groups(a, tp, N, sub_group_size, Tn);
    kept = Kept{counts, tp, N, sub_group_size, Tn, groups};
    return groups;
}

}  // namespace zeromem::estimate_detail
