// The synthetic transformer's shapes, forward and backward (see model.h).
// Shapes follow model.cpp's count_params family by family (Llama-style
// gated MLP and RMSNorm, GPT-2/OPT/BLOOM-style LayerNorm with biases).
#include "zeromem/runtime/model.h"

#include <algorithm>

namespace zeromem::runtime {

int SyntheticModel::add_module(const std::string& name) {
    modules_.push_back({name, {}, 0});
    return static_cast<int>(modules_.size()) - 1;
}

int SyntheticModel::add_param(int module, const std::string& name, int64_t rows, int64_t cols) {
    params_.push_back({modules_[static_cast<size_t>(module)].name + "." + name, rows, cols, module});
    const int p = static_cast<int>(params_.size()) - 1;
    modules_[static_cast<size_t>(module)].params.push_back(p);
    modules_[static_cast<size_t>(module)].numel += rows * cols;
    return p;
}

SyntheticModel::SyntheticModel(const ModelArch& arch, int64_t layers, int64_t seq, int64_t micro_batch, DType dtype,
                               Checkpointing checkpointing)
    : dtype_(dtype), ckpt_(checkpointing) {
    if (arch.word_embed_proj_dim > 0)
        throw InputError("measure: the runtime does not build OPT's word_embed_proj_dim projection");
    if (checkpointing == Checkpointing::selective)
        throw InputError("--gradient-checkpointing: the runtime runs none or full, not selective");
    if (layers <= 0) throw InputError("--layers: must be positive");
    sb_ = seq * micro_batch;
    build(arch, layers);
}

void SyntheticModel::build(const ModelArch& a, int64_t layers) {
    // The dropout sites that store a 1-byte mask: those of the model's config with p > 0
    // (ModelArch::*_dropout, aten/src/ATen/native/Dropout.cpp _dropout_impl).
    emb_dropout_ = a.embedding_dropout > 0;
    attn_res_dropout_ = a.attention_residual_dropout > 0;
    mlp_dropout_ = a.mlp_residual_dropout > 0;
    // An RMSNorm saves its fp32 input copy and the normalized tensor (model.h
    // rms_norm_extra_bytes_per_element: beyond the saved input, which stands for b_a of them).
    rms_extra_ = rms_norm_extra_bytes_per_element(a, dtype_ == DType::f32);
    h_ = a.hidden_size;
    f_ = a.ffn_size;
    V_ = a.vocab_size;
    const int64_t hd = a.head_dim > 0 ? a.head_dim : h_ / a.num_heads;
    qw_ = a.num_heads * hd;
    kvw_ = a.num_kv_heads * hd;
    gated_ = a.gated_mlp;
    tied_ = a.tied_embeddings;
    fused_ = a.fused_qkv;
    m_embed_ = add_module("embed_tokens");
    embed_ = add_param(m_embed_, "weight", V_, h_);
    if (a.learned_positions) {
        m_pos_ = add_module("embed_positions");
        pos_ = add_param(m_pos_, "weight", a.max_position_embeddings + a.position_offset, h_);
    }
    if (a.embedding_norm) {
        m_emb_ln_ = add_module("embed_layernorm");
        emb_ln_w_ = add_param(m_emb_ln_, "weight", h_, 1);
        if (a.norm_has_bias) emb_ln_b_ = add_param(m_emb_ln_, "bias", h_, 1);
    }
    for (int64_t i = 0; i < layers; ++i) {
        Layer L;
        const std::string pre = "layers." + std::to_string(i) + ".";
        L.m_ln1 = add_module(pre + "input_layernorm");
        L.ln1_w = add_param(L.m_ln1, "weight", h_, 1);
        if (a.norm_has_bias) L.ln1_b = add_param(L.m_ln1, "bias", h_, 1);
        if (fused_) {
            L.m_q = add_module(pre + "qkv_proj");
            L.qkv = add_param(L.m_q, "weight", qw_ + 2 * kvw_, h_);
            if (a.qkv_bias) L.qkv_b = add_param(L.m_q, "bias", qw_ + 2 * kvw_, 1);
        } else {
            L.m_q = add_module(pre + "q_proj");
            L.q = add_param(L.m_q, "weight", qw_, h_);
            if (a.qkv_bias) L.q_b = add_param(L.m_q, "bias", qw_, 1);
            L.m_k = add_module(pre + "k_proj");
            L.k = add_param(L.m_k, "weight", kvw_, h_);
            if (a.qkv_bias) L.k_b = add_param(L.m_k, "bias", kvw_, 1);
            L.m_v = add_module(pre + "v_proj");
            L.v = add_param(L.m_v, "weight", kvw_, h_);
            if (a.qkv_bias) L.v_b = add_param(L.m_v, "bias", kvw_, 1);
        }
        L.m_o = add_module(pre + "o_proj");
        L.o = add_param(L.m_o, "weight", h_, qw_);
        if (a.attn_out_bias) L.o_b = add_param(L.m_o, "bias", h_, 1);
        if (a.norms_per_layer >= 2) {
            L.m_ln2 = add_module(pre + "post_attention_layernorm");
            L.ln2_w = add_param(L.m_ln2, "weight", h_, 1);
            if (a.norm_has_bias) L.ln2_b = add_param(L.m_ln2, "bias", h_, 1);
        }
        if (gated_) {
            L.m_gate = add_module(pre + "gate_proj");
            L.gate = add_param(L.m_gate, "weight", f_, h_);
            if (a.mlp_bias) L.gate_b = add_param(L.m_gate, "bias", f_, 1);
        }
        L.m_up = add_module(pre + "up_proj");
        L.up = add_param(L.m_up, "weight", f_, h_);
        if (a.mlp_bias) L.up_b = add_param(L.m_up, "bias", f_, 1);
        L.m_down = add_module(pre + "down_proj");
        L.down = add_param(L.m_down, "weight", h_, f_);
        if (a.mlp_bias) L.down_b = add_param(L.m_down, "bias", h_, 1);
        layers_.push_back(L);
    }
    if (a.final_norm) {
        m_fn_ = add_module("norm");
        fn_w_ = add_param(m_fn_, "weight", h_, 1);
        if (a.norm_has_bias) fn_b_ = add_param(m_fn_, "bias", h_, 1);
    }
    if (!tied_) {
        m_head_ = add_module("lm_head");
        head_ = add_param(m_head_, "weight", V_, h_);
    }
}

int64_t SyntheticModel::total_params() const {
    int64_t n = 0;
    for (const auto& p : params_) n += p.numel();
    return n;
}

Tensor SyntheticModel::act(int64_t numel, DType d, Category c) { return be_->alloc(numel, d, c); }

void SyntheticModel::zero_grad(Backend& be, ParamStore& st, int p) {
    if (p < 0) return;
    bool acc = false;
    Tensor& g = st.grad(p, acc);
    if (!acc) be.fill(g, 0, g.numel, 0.0f);
    st.grad_ready(p);
}

// dW[out,in] (+)= dy[sb,out]^T x[sb,in]; then the gradient hook.
void SyntheticModel::linear_grad(Backend& be, ParamStore& st, int p, const Tensor& dy, const Tensor& x, int64_t out,
                                 int64_t in) {
    bool acc = false;
    Tensor& g = st.grad(p, acc);
    be.matmul(dy, true, x, false, g, out, in, sb_, 1.0f, acc ? 1.0f : 0.0f);
    st.grad_ready(p);
}

// What transformers' LlamaRMSNorm keeps for backward beyond its input (derivatives.yaml: PowBackward0
// saves the fp32 copy `hidden_states.to(torch.float32)`; the weight's MulBackward0 the normalized
// tensor): an fp32 copy of `in`, and where the norm keeps more (Gemma, T5: 2 B more per element
// under 16-bit training) one more tensor in the model dtype. The normalized tensor itself is
// stood for by the saved input the layer keeps, which is its size.
void SyntheticModel::save_rms_norm_copies(Backend& be, const Tensor& in, Tensor& fp32_copy, Tensor& more) {
    if (rms_extra_ < 4) return;
    fp32_copy = act(sb_ * h_, DType::f32);
    be.copy(fp32_copy, 0, in, 0, sb_ * h_);
    const int64_t rest = (rms_extra_ - 4) / dtype_size(dtype_);
    if (rest > 0) {
        more = act(rest * sb_ * h_, dtype_);
        for (int64_t i = 0; i < rest; ++i) be.copy(more, i * sb_ * h_, in, 0, sb_ * h_);
    }
}

void SyntheticModel::layer_forward(Backend& be, ParamStore& st, const Layer& L, Saved& s, Tensor& out) {
    const DType d = dtype_;
    // Attention block: norm, Q/K/V, attention core (stand-in), output projection.
    st.fetch(L.m_ln1, false);
    save_rms_norm_copies(be, s.x, s.rms1, s.rms1_more);
    s.n1 = act(sb_ * h_, d);
    be.scale_columns(s.n1, s.x, st.weight(L.ln1_w), sb_, h_);
    st.release(L.m_ln1);
    if (fused_) {
        st.fetch(L.m_q, false);
        s.q = act(sb_ * (qw_ + 2 * kvw_), d);  // Q, K and V in one tensor
        be.matmul(s.n1, false, st.weight(L.qkv), true, s.q, sb_, qw_ + 2 * kvw_, h_, 1.0f, 0.0f);
        st.release(L.m_q);
        s.attn = act(sb_ * qw_, d);
        for (int64_t r = 0; r < sb_; ++r) be.copy(s.attn, r * qw_, s.q, r * (qw_ + 2 * kvw_), qw_);
    } else {
        const int pm[3] = {L.m_q, L.m_k, L.m_v};
        const int pw[3] = {L.q, L.k, L.v};
        const int64_t width[3] = {qw_, kvw_, kvw_};
        Tensor* dst[3] = {&s.q, &s.k, &s.v};
        for (int i = 0; i < 3; ++i) {
            st.fetch(pm[i], false);
            *dst[i] = act(sb_ * width[i], d);
            be.matmul(s.n1, false, st.weight(pw[i]), true, *dst[i], sb_, width[i], h_, 1.0f, 0.0f);
            st.release(pm[i]);
        }
        s.attn = act(sb_ * qw_, d);
        be.copy(s.attn, 0, s.q, 0, sb_ * qw_);
    }
    st.fetch(L.m_o, false);
    Tensor o = act(sb_ * h_, d, Category::workspace);
    be.matmul(s.attn, false, st.weight(L.o), true, o, sb_, h_, qw_, 1.0f, 0.0f);
    st.release(L.m_o);
    if (attn_res_dropout_) {  // nn.Dropout after the attention output (p > 0 only: at::dropout at p = 0 returns its input)
        s.mask1 = act(sb_ * h_, DType::u8);
        be.fill(s.mask1, 0, s.mask1.numel, 1.0f);
    }
    s.h1 = act(sb_ * h_, d);
    be.copy(s.h1, 0, s.x, 0, sb_ * h_);
    be.axpy(s.h1, 0, o, 0, sb_ * h_, 1.0f);
    be.free(o);
    // MLP block.
    s.n2 = act(sb_ * h_, d);
    if (L.m_ln2 >= 0) {
        st.fetch(L.m_ln2, false);
        save_rms_norm_copies(be, s.h1, s.rms2, s.rms2_more);
        be.scale_columns(s.n2, s.h1, st.weight(L.ln2_w), sb_, h_);
        st.release(L.m_ln2);
    } else {
        be.copy(s.n2, 0, s.h1, 0, sb_ * h_);
    }
    st.fetch(L.m_up, false);
    s.u = act(sb_ * f_, d);
    be.matmul(s.n2, false, st.weight(L.up), true, s.u, sb_, f_, h_, 1.0f, 0.0f);
    st.release(L.m_up);
    if (gated_) {
        st.fetch(L.m_gate, false);
        s.g = act(sb_ * f_, d);
        be.matmul(s.n2, false, st.weight(L.gate), true, s.g, sb_, f_, h_, 1.0f, 0.0f);
        st.release(L.m_gate);
        s.a = act(sb_ * f_, d);
        be.silu(s.a, s.g);
        s.p = act(sb_ * f_, d);
        be.mul(s.p, s.a, s.u);
    } else {
        s.a = act(sb_ * f_, d);  // the activation's output (GeLU in GPT-2 style; SiLU here)
        be.silu(s.a, s.u);
    }
    const Tensor& down_in = gated_ ? s.p : s.a;
    st.fetch(L.m_down, false);
    Tensor dn = act(sb_ * h_, d, Category::workspace);
    be.matmul(down_in, false, st.weight(L.down), true, dn, sb_, h_, f_, 1.0f, 0.0f);
    st.release(L.m_down);
    if (mlp_dropout_) {  // nn.Dropout after the MLP output, p > 0 only
        s.mask2 = act(sb_ * h_, DType::u8);
        be.fill(s.mask2, 0, s.mask2.numel, 1.0f);
    }
    out = act(sb_ * h_, d);
    be.copy(out, 0, s.h1, 0, sb_ * h_);
    be.axpy(out, 0, dn, 0, sb_ * h_, 1.0f);
    be.free(dn);
}

void SyntheticModel::free_saved(Backend& be, Saved& s, bool keep_input) {
    for (Tensor* t : {&s.n1, &s.q, &s.k, &s.v, &s.attn, &s.mask1, &s.h1, &s.n2, &s.g, &s.u, &s.a, &s.p, &s.mask2,
                      &s.rms1, &s.rms1_more, &s.rms2, &s.rms2_more})
        be.free(*t);
    if (!keep_input) be.free(s.x);
}

void SyntheticModel::forward(Backend& be, ParamStore& st) {
    be_ = &be;
    const DType d = dtype_;
    saved_.assign(layers_.size(), Saved{});
    // Embedding: tokens are positions modulo V, so the lookup copies rows.
    st.fetch(m_embed_, false);
    Tensor x = act(sb_ * h_, d);
    for (int64_t r = 0; r < sb_; r += std::min<int64_t>(V_, sb_ - r))
        be.copy(x, r * h_, st.weight(embed_), 0, std::min<int64_t>(V_, sb_ - r) * h_);
    st.release(m_embed_);
    if (m_pos_ >= 0) {
        st.fetch(m_pos_, false);
        const int64_t rows = std::min<int64_t>(params_[static_cast<size_t>(pos_)].rows, sb_);
        be.axpy(x, 0, st.weight(pos_), 0, rows * h_, 1.0f);
        st.release(m_pos_);
    }
    if (m_emb_ln_ >= 0) {
        st.fetch(m_emb_ln_, false);
        be.scale_columns(x, x, st.weight(emb_ln_w_), sb_, h_);
        st.release(m_emb_ln_);
    }
    if (emb_dropout_) emb_mask_ = act(sb_ * h_, DType::u8);  // embedding dropout mask, p > 0 only
    for (size_t i = 0; i < layers_.size(); ++i) {
        saved_[i].x = x;
        Tensor out;
        layer_forward(be, st, layers_[i], saved_[i], out);
        if (ckpt_ == Checkpointing::full) free_saved(be, saved_[i], true);  // keep the layer input only
        x = out;
    }
    final_in_ = x;  // the final norm's input
    fn_out_ = act(sb_ * h_, d);
    if (m_fn_ >= 0) {
        st.fetch(m_fn_, false);
        save_rms_norm_copies(be, final_in_, final_rms_, final_rms_more_);
        be.scale_columns(fn_out_, final_in_, st.weight(fn_w_), sb_, h_);
        st.release(m_fn_);
    } else {
        be.copy(fn_out_, 0, final_in_, 0, sb_ * h_);
    }
    // LM head, the logits, their fp32 upcast and the fp32 log-softmax kept
    // for the cross-entropy backward (HF models upcast the logits).
    const int hm = tied_ ? m_embed_ : m_head_;
    const int hp = tied_ ? embed_ : head_;
    st.fetch(hm, false);
    logits_ = act(sb_ * V_, d);
    be.matmul(fn_out_, false, st.weight(hp), true, logits_, sb_, V_, h_, 1.0f, 0.0f);
    st.release(hm);
    logits32_ = act(sb_ * V_, DType::f32);
    be.copy(logits32_, 0, logits_, 0, sb_ * V_);
    logsm_ = act(sb_ * V_, DType::f32);
    be.copy(logsm_, 0, logits32_, 0, sb_ * V_);
}

// MLP and its residual: returns d(h1) = dout + norm2 backward.
Tensor SyntheticModel::mlp_backward(Backend& be, ParamStore& st, const Layer& L, Saved& s, const Tensor& dout) {
    const DType d = dtype_;
    const Category W = Category::workspace;
    // MLP block.
    const Tensor& down_in = gated_ ? s.p : s.a;
    st.fetch(L.m_down, true);
    Tensor dp = act(sb_ * f_, d, W);
    be.matmul(dout, false, st.weight(L.down), false, dp, sb_, f_, h_, 1.0f, 0.0f);
    linear_grad(be, st, L.down, dout, down_in, h_, f_);
    zero_grad(be, st, L.down_b);
    st.release(L.m_down);
    Tensor dn2 = act(sb_ * h_, d, W);
    Tensor du = act(sb_ * f_, d, W);
    if (gated_) {
        Tensor da = act(sb_ * f_, d, W);
        be.mul(da, dp, s.u);
        be.mul(du, dp, s.a);
        Tensor dg = act(sb_ * f_, d, W);
        be.silu_backward(dg, da, s.g);
        be.free(da);
        st.fetch(L.m_gate, true);
        be.matmul(dg, false, st.weight(L.gate), false, dn2, sb_, h_, f_, 1.0f, 0.0f);
        linear_grad(be, st, L.gate, dg, s.n2, f_, h_);
        zero_grad(be, st, L.gate_b);
        st.release(L.m_gate);
        be.free(dg);
    } else {
        be.silu_backward(du, dp, s.u);
    }
    be.free(dp);
    st.fetch(L.m_up, true);
    be.matmul(du, false, st.weight(L.up), false, dn2, sb_, h_, f_, 1.0f, gated_ ? 1.0f : 0.0f);
    linear_grad(be, st, L.up, du, s.n2, f_, h_);
    zero_grad(be, st, L.up_b);
    st.release(L.m_up);
    be.free(du);
    // Residual: dh1 = dout + norm2 backward (norm weight gradient: zero, shapes exact).
    Tensor dh1 = act(sb_ * h_, d, W);
    be.copy(dh1, 0, dout, 0, sb_ * h_);
    if (L.m_ln2 >= 0) {
        st.fetch(L.m_ln2, true);
        be.scale_columns(dn2, dn2, st.weight(L.ln2_w), sb_, h_);
        zero_grad(be, st, L.ln2_w);
        zero_grad(be, st, L.ln2_b);
        st.release(L.m_ln2);
    }
    be.axpy(dh1, 0, dn2, 0, sb_ * h_, 1.0f);
    be.free(dn2);
    return dh1;
}

// Attention and its residual: returns d(x) = d(h1) + norm1 backward.
Tensor SyntheticModel::attention_backward(Backend& be, ParamStore& st, const Layer& L, Saved& s, Tensor& dh1) {
    const DType d = dtype_;
    const Category W = Category::workspace;
    st.fetch(L.m_o, true);
    Tensor dattn = act(sb_ * qw_, d, W);
    be.matmul(dh1, false, st.weight(L.o), false, dattn, sb_, qw_, h_, 1.0f, 0.0f);
    linear_grad(be, st, L.o, dh1, s.attn, h_, qw_);
    zero_grad(be, st, L.o_b);
    st.release(L.m_o);
    Tensor dn1 = act(sb_ * h_, d, W);
    if (fused_) {
        Tensor dqkv = act(sb_ * (qw_ + 2 * kvw_), d, W);
        be.fill(dqkv, 0, dqkv.numel, 0.0f);
        for (int64_t r = 0; r < sb_; ++r) be.copy(dqkv, r * (qw_ + 2 * kvw_), dattn, r * qw_, qw_);
        st.fetch(L.m_q, true);
        be.matmul(dqkv, false, st.weight(L.qkv), false, dn1, sb_, h_, qw_ + 2 * kvw_, 1.0f, 0.0f);
        linear_grad(be, st, L.qkv, dqkv, s.n1, qw_ + 2 * kvw_, h_);
        zero_grad(be, st, L.qkv_b);
        st.release(L.m_q);
        be.free(dqkv);
    } else {
        // The stand-in core passes dQ = d(attn) and gives K and V zero gradient.
        Tensor dkv = act(sb_ * kvw_, d, W);
        be.fill(dkv, 0, dkv.numel, 0.0f);
        const int pm[3] = {L.m_v, L.m_k, L.m_q};
        const int pw[3] = {L.v, L.k, L.q};
        const int pb[3] = {L.v_b, L.k_b, L.q_b};
        const int64_t width[3] = {kvw_, kvw_, qw_};
        for (int i = 0; i < 3; ++i) {
            const Tensor& dy = i == 2 ? dattn : dkv;
            st.fetch(pm[i], true);
            be.matmul(dy, false, st.weight(pw[i]), false, dn1, sb_, h_, width[i], 1.0f, i == 0 ? 0.0f : 1.0f);
            linear_grad(be, st, pw[i], dy, s.n1, width[i], h_);
            zero_grad(be, st, pb[i]);
            st.release(pm[i]);
        }
        be.free(dkv);
    }
    be.free(dattn);
    st.fetch(L.m_ln1, true);
    be.scale_columns(dn1, dn1, st.weight(L.ln1_w), sb_, h_);
    zero_grad(be, st, L.ln1_w);
    zero_grad(be, st, L.ln1_b);
    st.release(L.m_ln1);
    Tensor dx = act(sb_ * h_, d, W);
    be.copy(dx, 0, dh1, 0, sb_ * h_);
    be.axpy(dx, 0, dn1, 0, sb_ * h_, 1.0f);
    be.free(dn1);
    return dx;
}

void SyntheticModel::layer_backward(Backend& be, ParamStore& st, const Layer& L, Saved& s, Tensor& dout,
                                    Tensor& dx) {
    Tensor dh1 = mlp_backward(be, st, L, s, dout);
    dx = attention_backward(be, st, L, s, dh1);
    be.free(dh1);
}


void SyntheticModel::backward(Backend& be, ParamStore& st) {
    be_ = &be;
    const DType d = dtype_;
    const Category W = Category::workspace;
    // Cross-entropy backward: d(logits) from the saved log-softmax.
    Tensor dlogits = act(sb_ * V_, d, W);
    be.copy(dlogits, 0, logsm_, 0, sb_ * V_);
    be.free(logsm_);
    be.free(logits32_);
    be.free(logits_);
    const int hm = tied_ ? m_embed_ : m_head_;
    const int hp = tied_ ? embed_ : head_;
    st.fetch(hm, true);
    Tensor dfn = act(sb_ * h_, d, W);
    be.matmul(dlogits, false, st.weight(hp), false, dfn, sb_, h_, V_, 1.0f, 0.0f);
    if (tied_) {  // the embedding's gradient completes in the embedding backward
        bool acc = false;
        Tensor& g = st.grad(hp, acc);
        be.matmul(dlogits, true, fn_out_, false, g, V_, h_, sb_, 1.0f, acc ? 1.0f : 0.0f);
    } else {
        linear_grad(be, st, hp, dlogits, fn_out_, V_, h_);
    }
    st.release(hm);
    be.free(dlogits);
    be.free(fn_out_);
    Tensor dout = act(sb_ * h_, d, W);
    be.copy(dout, 0, dfn, 0, sb_ * h_);
    be.free(dfn);
    if (m_fn_ >= 0) {
        st.fetch(m_fn_, true);
        be.scale_columns(dout, dout, st.weight(fn_w_), sb_, h_);
        zero_grad(be, st, fn_w_);
        zero_grad(be, st, fn_b_);
        st.release(m_fn_);
    }
    be.free(final_in_);
    be.free(final_rms_);
    be.free(final_rms_more_);
    for (size_t i = layers_.size(); i-- > 0;) {
        Saved& s = saved_[i];
        if (ckpt_ == Checkpointing::full) {  // recompute the layer from its saved input
            Tensor out;
            layer_forward(be, st, layers_[i], s, out);
            be.free(out);
        }
        Tensor dx;
        layer_backward(be, st, layers_[i], s, dout, dx);
        be.free(dout);
        free_saved(be, s, false);
        dout = dx;
    }
    be.free(emb_mask_);
    if (m_emb_ln_ >= 0) {
        st.fetch(m_emb_ln_, true);
        zero_grad(be, st, emb_ln_w_);
        zero_grad(be, st, emb_ln_b_);
        st.release(m_emb_ln_);
    }
    if (m_pos_ >= 0) {
        st.fetch(m_pos_, true);
        bool acc = false;
        Tensor& g = st.grad(pos_, acc);
        if (!acc) be.fill(g, 0, g.numel, 0.0f);
        be.axpy(g, 0, dout, 0, std::min<int64_t>(g.numel, sb_ * h_), 1.0f);
        st.grad_ready(pos_);
        st.release(m_pos_);
    }
    st.fetch(m_embed_, true);
    bool acc = false;
    Tensor& g = st.grad(embed_, acc);
    if (!acc && !tied_) be.fill(g, 0, g.numel, 0.0f);
    for (int64_t r = 0; r < sb_; r += std::min<int64_t>(V_, sb_ - r))
        be.axpy(g, 0, dout, r * h_, std::min<int64_t>(V_, sb_ - r) * h_, 1.0f);
    st.grad_ready(embed_);
    st.release(m_embed_);
    be.free(dout);
}

void SyntheticModel::release_all(Backend& be) {
    for (auto& s : saved_) free_saved(be, s, false);
    for (Tensor* t : {&emb_mask_, &final_in_, &fn_out_, &logits_, &logits32_, &logsm_, &final_rms_, &final_rms_more_})
        be.free(*t);
}

}  // namespace zeromem::runtime
