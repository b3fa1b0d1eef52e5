// Activations of the full convention (Korthikanti et al. 2022 with GQA, the real MLP width,
// dropout masks only where the model has dropout, MoE blocks), and the public per-layer formulas.
#include "estimate_detail.h"

#include "zeromem/moe.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace zeromem {

using namespace estimate_detail;

namespace estimate_detail {


// MoE blocks (zeromem/moe.h): the router and routed-token terms, per GPU.
// Stored for every MoE block of the rank unless full checkpointing
// recomputes them with one layer; the all-to-all buffers are live while one
// block runs (forward and backward). Dense models: no change.
void add_moe_activations(const FullContext& c, const Explainer& ex, uint64_t layers, uint64_t in_flight, double scale,
                         double stored, double recompute, uint64_t io_fwd, uint64_t io_bwd, uint64_t io_loss,
                         Activations& r) {
    const auto& in = c.in;
    const auto& a = *in.model.arch;
    const auto& t = in.train;
    const std::vector<MoeTerm> list = moe_activation_terms(a, in.moe, t.micro_batch, t.seq_len, c.bm);
    if (list.empty()) return;
    const bool full = t.checkpointing == Checkpointing::full;
    // MoE blocks on this pipeline stage, at most the stage's layers.
    const uint64_t moe_layers = std::min(layers, ceil_div(static_cast<uint64_t>(a.num_moe_layers), c.pp));
    uint64_t per_block = 0, transient = 0;
    double rank_bytes = 0;  // the same sum in double: refuse what 64-bit bytes cannot hold
    for (const MoeTerm& m : list) {
        (m.transient ? transient : per_block) += m.bytes;
        rank_bytes += double(m.bytes) * (m.transient ? 1.0 : double(moe_layers) * double(in_flight));
    }
    if (!(rank_bytes < 4611686018427387904.0))  // 2^62
        throw InputError("--moe-capacity-factor: the MoE activations of one rank overflow 64-bit bytes; "
                         "give a smaller factor");
    const uint64_t moe_stored = full ? 0 : moe_layers * in_flight * per_block;
    const uint64_t moe_recompute = full ? per_block : 0;
    r.forward = to_bytes(scale * stored) + io_fwd + moe_stored + transient;
    r.head_backward = to_bytes(scale * stored) + moe_stored + io_bwd;
    r.layer_backward = to_bytes(scale * stored) + moe_stored + to_bytes(scale * recompute) + moe_recompute + transient;
    r.backward = std::max(r.head_backward, r.layer_backward);
    r.loss_backward = io_loss > 0 ? to_bytes(scale * stored) + moe_stored + io_loss : 0;
    if (!ex.on) return;
    for (const MoeTerm& m : list) {
        const uint64_t blocks = m.transient ? 1 : (full ? 1 : moe_layers * in_flight);
        const std::string where = m.transient ? " (one block at a time)"
                                  : full      ? " (one block, recomputed under full checkpointing)"
                                              : " x " + std::to_string(blocks) + " MoE blocks";
        ex.term(("activations: " + m.name).c_str(), m.formula + where, m.substituted, m.bytes * blocks, m.source.c_str());
    }
}

// The dropout masks a layer stores, as --explain names them.
std::string dropout_masks_named(const ModelArch& a) {
    std::string out;
    auto add = [&](double p, const char* name) {
        if (p > 0.0) out += (out.empty() ? "" : ", ") + std::string(name) + " p=" + num(p);
    };
    add(a.embedding_dropout, "embedding dropout mask");
    add(a.attention_dropout, "attention dropout mask");
    add(a.attention_residual_dropout, "attention residual dropout mask");
    add(a.mlp_residual_dropout, "MLP residual dropout mask");
    return out.empty() ? ", no dropout (all probabilities 0: no masks)" : ", " + out;
}

// A calibration profile's factor (input.h ResidualSettings::activation_scale) on every activation figure.
void scale_activations(double f, const Explainer& ex, Activations& r) {
    if (f == 1.0) return;
    for (uint64_t* v : {&r.forward, &r.backward, &r.head_backward, &r.layer_backward, &r.loss_backward, &r.host})
        *v = to_bytes(f * double(*v));
    if (ex.on) ex.note("activations x " + num(f) + ": the calibration profile's activation_scale (--calibration)");
}

Activations activations(const FullContext& c, const Explainer& ex) {
    const auto& in = c.in;
    const auto& t = in.train;
    auto n2s = [&](uint64_t v) { return ex.on ? num(double(v)) : std::string(); };
    Activations r;
    if (in.model.arch) {
        const auto& a = *in.model.arch;
        const int64_t sq = t.seq_len, b = t.micro_batch, h = a.hidden_size;
        const int64_t ti = in.cluster.tp;
        const bool sp = t.sequence_parallel && ti > 1;
        const double scale = t.dtype == Dtype::fp32 ? 2.0 : 1.0;  // fp32 activations: twice the 16-bit bytes
        const uint64_t layers = ceil_div(static_cast<uint64_t>(a.num_layers), c.pp);
        // 1F1B: the first pipeline stage holds up to pp micro batches in flight
        // (Korthikanti Sec. 4.2.3, Eq. 5).
        const uint64_t in_flight = c.pp > 1 ? std::min<uint64_t>(c.pp, static_cast<uint64_t>(t.grad_accum)) : 1;
        // The RMSNorms' fp32 saved tensors (rms_norm_saved_activation_bytes), in the model-dtype
        // units the scale below turns into bytes.
        const bool fp32 = t.dtype == Dtype::fp32;
        const uint64_t rms = to_bytes(double(rms_norm_saved_activation_bytes(a, sq, b, ti, sp, fp32)) / scale);
        const uint64_t full_layer =
            layer_activation_bytes(a, sq, b, ti, Checkpointing::none, t.flash_attention, sp) + rms;
        uint64_t per_layer = layer_activation_bytes(a, sq, b, ti, t.checkpointing, t.flash_attention, sp) +
                             (t.checkpointing == Checkpointing::full ? 0 : rms);
        const double sbh = double(sq) * double(b) * double(h);
        if (t.checkpointing == Checkpointing::full && t.ds_checkpointing_api && t.partition_activations && ti > 1 && !sp)
            per_layer = ceil_div(per_layer, static_cast<uint64_t>(ti));
        uint64_t stored = layers * in_flight * per_layer;
        const uint64_t recompute = t.checkpointing == Checkpointing::full ? full_layer : 0;
        if (t.checkpointing == Checkpointing::full && t.ds_checkpointing_api && t.cpu_checkpointing) {
            r.host = to_bytes(scale * double(stored));
            stored = 0;
        }
        // Embedding output and the loss: sbh (embedding dropout mask, where
        // the model has embedding dropout) on every first stage; with pp = 1
        // also the final norm's and the output layer's inputs (4sbh) and the
        // logits and cross-entropy tensors (lm_head_loss_bytes, in their own
        // dtypes: not scaled by the model dtype).
        const double embed_mask = a.embedding_dropout > 0.0 ? sbh : 0.0;
        // The final RMSNorm saves its fp32 copy beside the input counted in the 4sbh.
        const double final_rms =
            c.pp == 1 && a.final_norm ? double(rms_norm_extra_bytes_per_element(a, fp32)) * sbh / scale : 0.0;
        const double io_h = embed_mask + (c.pp == 1 ? 4.0 * sbh : 0.0) + final_rms;
        LmHeadLossBytes head;
        if (c.pp == 1)
            head = lm_head_loss_bytes(sq, b, a.vocab_size, ti, c.bm, t.dtype != Dtype::fp32,
                                      c.facts.upcasts_logits_in_model_forward,
                                      c.facts.shifts_logits_with_contiguous_copy);
        const uint64_t io_fwd = to_bytes(scale * io_h) + head.forward;
        const uint64_t io_bwd = to_bytes(scale * io_h) + head.head_backward;
        const uint64_t io_loss = c.pp == 1 ? to_bytes(scale * io_h) + head.loss_backward : 0;
        r.forward = to_bytes(scale * double(stored)) + io_fwd;
        // Backward: autograd frees each node's saved tensors as it runs (PyTorch
        // torch/csrc/autograd/engine.cpp evaluate_function ->
        // Node::release_variables without retain_graph), so the cross-entropy's
        // backward (loss_backward) comes first, before the LM head's
        // pre-backward hook, and the rest of the backward holds the logits'
        // gradient at most, before the last layer's checkpoint is recomputed
        // (torch/utils/checkpoint.py recomputes inside the layer's backward):
        // stored + the larger of that and one recomputed layer.
        r.head_backward = to_bytes(scale * double(stored)) + io_bwd;
        r.layer_backward = to_bytes(scale * double(stored)) + to_bytes(scale * double(recompute));
        r.backward = std::max(r.head_backward, r.layer_backward);
        r.loss_backward = io_loss > 0 ? to_bytes(scale * double(stored)) + io_loss : 0;
        add_moe_activations(c, ex, layers, in_flight, scale, double(stored), double(recompute), io_fwd, io_bwd, io_loss,
                            r);
        if (ex.on) ex.term("activations",
                std::string("forward: layers · in-flight micro batches · per_layer + io + LM head and loss (forward); "
                            "backward: the same stored part + max(io + the logits' gradient b_m·sbV/t, one recomputed "
                            "layer), and at the cross-entropy's backward stored + io + LM head and loss (cross-entropy "
                            "backward); io = ") + (embed_mask > 0 ? "sbh (embedding dropout mask) + " : "") +
                    "4sbh" + (final_rms > 0 ? std::string(" + the final RMSNorm's saved tensors") : std::string()) +
                    "; per_layer by Korthikanti with GQA, the real MLP width and a 1-byte mask "
                    "per element only where the model's dropout p > 0" +
                    (rms > 0 ? std::string(", + the RMSNorms' saved tensors (below)") : std::string()),
                "s=" + n2s(uint64_t(sq)) + ", b=" + n2s(uint64_t(b)) + ", h=" + n2s(uint64_t(h)) + ", a=" +
                    n2s(uint64_t(a.num_heads)) + ", kv=" + n2s(uint64_t(a.num_kv_heads)) + ", f=" +
                    n2s(uint64_t(active_ffn_width(a))) + ", layers=" + n2s(layers) + ", in flight=" + n2s(in_flight) +
                    ", per_layer=" + n2s(per_layer) + " B, V=" + n2s(uint64_t(a.vocab_size)) + ", t=" + n2s(c.tp) +
                    ", checkpointing " + to_string(t.checkpointing) + (t.flash_attention ? ", flash attention" : ", eager attention") +
                    dropout_masks_named(a) +
                    (scale != 1.0 ? ", x2 for fp32" : ""),
                r.backward, kSrcKorthikanti);
        if (ex.on && rms > 0) {
            const int64_t saved = rms_norm_saved_bytes_per_element(a, fp32);
            ex.term("activations: RMSNorm's saved tensors (per layer)",
                    std::string("min(norms, 2)·(saved - b_a)·sbh + the further norms' saved·sbh") +
                        (a.qk_norm && a.kv_lora_rank <= 0 ? " + q_norm and k_norm saved·sb(a + kv)d/t" : "") +
                        "; saved = the fp32 copy of the input (PowBackward0) + the normalized tensor the weight "
                        "multiplies (MulBackward0), per element; the final norm adds (saved - b_a)·sbh to io",
                    "saved=" + n2s(uint64_t(saved)) + " B, b_a=" + n2s(uint64_t(fp32 ? 4 : 2)) + " B, norms=" +
                        n2s(uint64_t(a.norms_per_layer)) + ", s=" + n2s(uint64_t(sq)) + ", b=" + n2s(uint64_t(b)) +
                        ", h=" + n2s(uint64_t(h)) + ", t=" + n2s(c.tp),
                    rms_norm_saved_activation_bytes(a, sq, b, ti, sp, fp32), kSrcRmsNorm);
        }
        if (ex.on && c.pp == 1) {
            const std::string n = "b=" + n2s(uint64_t(b)) + ", s=" + n2s(uint64_t(sq)) + ", V=" + n2s(uint64_t(a.vocab_size)) +
                                  ", t=" + n2s(c.tp) + ", b_m=" + n2s(c.bm) + ", transformers " + in.stack.transformers;
            const bool up = c.facts.upcasts_logits_in_model_forward, sh = c.facts.shifts_logits_with_contiguous_copy;
            const bool half = t.dtype != Dtype::fp32;
            ex.term("activations: LM head and loss (forward)",
                    std::string(!half ? "logits b_m·n + " : up ? "max(logits b_m·n + fp32 upcast 4n, " : "logits b_m·n + fp32 upcast 4n + ") +
                        (up && half ? "fp32 logits 4n + " : "") + (sh ? "shift_logits copy 4·n1 + log-softmax 4·n1" : "log-softmax 4n") +
                        (up && half ? ")" : "") + ", n = bsV/t" + (sh ? ", n1 = b(s-1)V/t" : ""),
                    n, head.forward, kSrcLmHeadLoss);
            ex.term("activations: LM head and loss (cross-entropy backward)",
                    std::string("log-softmax output + NllLossBackward0's fp32 gradient + LogSoftmaxBackward0's fp32 gradient = 12·") +
                        (sh ? "n1" : "n") + " (only the temporaries kept from the forward are live then)",
                    n, head.loss_backward, kSrcLmHeadLoss);
            ex.term("activations: LM head and loss (LM head backward)",
                    std::string("max((b_m + 8)·n (a bound, kept), the largest moment after the "
                                "cross-entropy's nodes: ") +
                        (sh ? "max(SliceBackward0's zero-padded fp32 4n beside the fp32 4·n1 it pads, " : "") +
                        (half ? "ToCopyBackward0's 16-bit b_m·n beside the fp32 4n it casts" : "the fp32 gradient 4n") +
                        (sh ? ")" : "") + ") (the backward's temporaries counted beside it)",
                    n, head.head_backward, kSrcLmHeadLoss);
        }
        scale_activations(in.residual.activation_scale, ex, r);
    } else {
        ex.note("activations not estimated: no architecture (--params, or a module tree without one); give --model "
                "or --hf-config for the Korthikanti et al. activation formula.");
    }
    if (t.ds_checkpointing_api && t.partition_activations && in.cluster.tp == 1)
        ex.note("activation_checkpointing.partition_activations splits checkpoints across tensor-parallel ranks only; "
                "with tp = 1 it saves nothing.");
    if ((t.partition_activations || t.cpu_checkpointing) && !t.ds_checkpointing_api)
        ex.note("the DeepSpeed config's activation_checkpointing keys take effect only when the model uses "
                "deepspeed.checkpointing (Megatron-DeepSpeed); Hugging Face models use torch checkpointing, so they "
                "are ignored here (--ds-checkpointing to apply them).");
    return r;
}


}  // namespace estimate_detail

uint64_t activation_bytes_per_layer(int64_t s, int64_t b, int64_t h, int64_t a, int64_t t,
                                    Checkpointing mode, bool flash_attention, bool sequence_parallel) {
    if (s <= 0 || b <= 0 || h <= 0 || a <= 0 || t <= 0)
        throw InputError("activation formula: sequence, batch, hidden, heads and tensor-parallel size must be positive");
    const double sbh = double(s) * double(b) * double(h);
    const double td = double(t);
    const double nonpar = sequence_parallel ? 10.0 / td : 10.0;
    double factor = 0;
    switch (mode) {
        case Checkpointing::full: factor = sequence_parallel ? 2.0 / td : 2.0; break;
        case Checkpointing::selective: factor = nonpar + 24.0 / td; break;
        case Checkpointing::none:
            factor = nonpar + 24.0 / td + (flash_attention ? 0.0 : 5.0 * double(a) * double(s) / (double(h) * td));
            break;
    }
    return to_bytes(sbh * factor);
}

uint64_t layer_activation_bytes(const ModelArch& arch, int64_t s, int64_t b, int64_t t, Checkpointing mode,
                                bool flash_attention, bool sequence_parallel) {
    const int64_t h = arch.hidden_size, a = arch.num_heads;
    if (s <= 0 || b <= 0 || h <= 0 || a <= 0 || t <= 0)
        throw InputError("activation formula: sequence, batch, hidden, heads and tensor-parallel size must be positive");
    const double sbh = double(s) * double(b) * double(h);
    const double td = double(t);
    if (mode == Checkpointing::full) return to_bytes(sbh * (sequence_parallel ? 2.0 / td : 2.0));
    // Korthikanti's 10 sbh outside the tensor-parallel region: two LayerNorm
    // inputs (4), attention and MLP inputs (4), the attention and MLP
    // residual dropout masks (1 each), each only where the model has that
    // dropout with p > 0 (at p = 0 at::dropout returns its input, no mask).
    const double masks = (arch.attention_residual_dropout > 0.0 ? 1.0 : 0.0) + (arch.mlp_residual_dropout > 0.0 ? 1.0 : 0.0);
    const double nonpar = sequence_parallel ? (8.0 + masks) / td : 8.0 + masks;
    // Inside: Q (2) and K, V (2 each, scaled by kv/a for GQA), the output
    // projection's input (2): 8 for multi-head attention.
    const int64_t hd = arch.head_dim > 0 ? arch.head_dim : h / a;
    const double q_width = double(a * hd) / double(h);
    const double kv_width = double(arch.num_kv_heads * hd) / double(h);
    const double attn = 2.0 * q_width + 4.0 * kv_width + 2.0 * q_width;
    // MLP: plain 2sbf (GeLU input) + 2sbf (its output) = 4f/h sbh (16 for f = 4h);
    // gated: gate, up, act(gate) and the product, 2sbf each = 8f/h sbh.
    // MoE: the top-k routed experts' and the shared expert's widths
    // (active_ffn_width); expert parallelism is not modelled here.
    const double f = double(active_ffn_width(arch)) / double(h);
    const double mlp = (arch.gated_mlp ? 8.0 : 4.0) * f;
    double factor = nonpar + (attn + mlp) / td;
    // Eager attention: Korthikanti's 5as²b = softmax output 2, the output of
    // its dropout 2 and the dropout mask 1; without attention dropout the
    // mask goes (4as²b: the paper's count less the mask).
    if (mode == Checkpointing::none && !flash_attention)
        factor += attention_score_factor(arch) * double(a) * double(s) / (double(h) * td);
    return to_bytes(sbh * factor);
}

uint64_t rms_norm_saved_activation_bytes(const ModelArch& arch, int64_t s, int64_t b, int64_t t, bool sequence_parallel,
                                         bool fp32) {
    const int64_t saved = rms_norm_saved_bytes_per_element(arch, fp32);
    if (saved == 0) return 0;
    const double sbh = double(s) * double(b) * double(arch.hidden_size) / (sequence_parallel ? double(t) : 1.0);
    const int64_t n = arch.norms_per_layer;
    // Korthikanti counts the two pre-norms' inputs (b_a each); a block's further norms (Gemma 2's
    // post-norms) normalize outputs nothing else keeps.
    const double main =
        double(std::min<int64_t>(n, 2) * rms_norm_extra_bytes_per_element(arch, fp32) + std::max<int64_t>(n - 2, 0) * saved) *
        sbh;
    // q_norm / k_norm over head_dim (Qwen3, Gemma 3): the projection's output is kept by nothing else
    // (the rotary embedding's mul saves cos and sin only), so all `saved` bytes count.
    const int64_t hd = arch.head_dim > 0 ? arch.head_dim : arch.hidden_size / arch.num_heads;
    const double qk = arch.qk_norm && arch.kv_lora_rank <= 0
                          ? double(saved) * double(s) * double(b) *
                                double((arch.num_heads + arch.num_kv_heads) * hd) / double(t)
                          : 0.0;
    return to_bytes(main + qk);
}

LmHeadLossBytes lm_head_loss_bytes(int64_t s, int64_t b, int64_t vocab, int64_t t, uint64_t bm, bool half,
                                   bool upcasts_logits_in_model_forward, bool shifts_logits_with_contiguous_copy) {
    if (s <= 0 || b <= 0 || vocab <= 0 || t <= 0)
        throw InputError("LM head: sequence, batch, vocabulary and tensor-parallel size must be positive");
    const double n = double(s) * double(b) * double(vocab) / double(t);
    const double n1 = shifts_logits_with_contiguous_copy ? double(s - 1) * double(b) * double(vocab) / double(t) : n;
    const double copy = shifts_logits_with_contiguous_copy ? 4.0 * n1 : 0.0;
    const double upcast = half ? 4.0 * n : 0.0;  // .float() of an fp32 tensor returns it
    // Until transformers 4.46 LlamaForCausalLM.forward rebinds `logits = logits.float()`: the
    // 16-bit logits die at the upcast; from 4.46 the model's forward holds them while the loss runs.
    const bool logits16_die_at_upcast = upcasts_logits_in_model_forward && half;
    const double at_loss = (logits16_die_at_upcast ? 0.0 : double(bm) * n) + upcast + copy + 4.0 * n1;
    const double at_upcast = half ? double(bm) * n + 4.0 * n : 0.0;
    LmHeadLossBytes r;
    r.forward = to_bytes(std::max(at_loss, at_upcast));
    const double slice = shifts_logits_with_contiguous_copy ? 4.0 * n1 + 4.0 * n : 0.0;
    const double cast = half ? 4.0 * n + double(bm) * n : 0.0;
    r.loss_backward = to_bytes(12.0 * n1);
    // The bound the estimator keeps for the LM head's matmul backward, where it counts the
    // backward's temporaries (the LM head's gradient, ZeRO's buckets and norms) beside the
    // logits' gradient: no less than (b_m + 8)·n, the loss tensors it counted there before the
    // cross-entropy's backward was its own moment. By the code path the moment holds less
    // (the cast, b_m·n + 4n, before the gradient hooks run); the bound stays because the
    // public OOM of LLaDA-8B under ZeRO-2 offload (tests/cases/ledger N12-z2-offload: dllm's own
    // diffusion loss, not ForCausalLMLoss) is predicted only with it.
    r.head_backward = to_bytes(std::max({slice, cast, double(bm + 8) * n}));
    return r;
}

double attention_score_factor(const ModelArch& arch) { return arch.attention_dropout > 0.0 ? 5.0 : 4.0; }


}  // namespace zeromem
