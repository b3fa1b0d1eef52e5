// The synthetic transformer: the exact tensor shapes of a ModelArch (preset
// or Hugging Face config.json) with K layers, its forward and its backward.
// It knows nothing of ZeRO: it asks a ParamStore for each module's full
// weights and hands each weight gradient back to it.
#pragma once

#include "zeromem/model.h"
#include "zeromem/runtime/backend.h"
#include "zeromem/types.h"

#include <string>
#include <vector>

namespace zeromem::runtime {

/// One parameter tensor: rows x cols elements (cols = 1 for vectors).
struct ParamInfo {
    std::string name;
    int64_t rows = 0, cols = 1;
    int module = 0;  ///< index into SyntheticModel::modules()
    int64_t numel() const { return rows * cols; }
};

/// One leaf module (the unit ZeRO-3 gathers, DeepSpeed's "layer" for L).
struct ModuleInfo {
    std::string name;
    std::vector<int> params;  ///< indices into SyntheticModel::params()
    int64_t numel = 0;
};

/// What a ZeRO stage offers the model: full 16-bit weights of a module
/// between fetch and release, and a place for each weight gradient.
class ParamStore {
public:
    virtual ~ParamStore() = default;
    /// Makes every parameter of module `m` available in full (ZeRO-3 gathers).
    virtual void fetch(int m, bool backward) = 0;
    /// The module is done for now (ZeRO-3 releases the gathered copy).
    virtual void release(int m) = 0;
    /// The full weight of parameter `p` (valid between fetch and release).
    virtual const Tensor& weight(int p) = 0;
    /// Where the model writes dL/dW of parameter `p` (model dtype, numel of
    /// p). `accumulate` is set when the model must add (beta = 1) instead of
    /// overwrite.
    virtual Tensor& grad(int p, bool& accumulate) = 0;
    /// The gradient of `p` is complete for this backward (DeepSpeed's
    /// gradient hook).
    virtual void grad_ready(int p) = 0;
};

/// The model. Activations saved for backward are accounted as
/// Category::activations with the tensors of Korthikanti et al. 2022
/// Table 2 (two norm inputs, attention and MLP inputs, Q, K, V, the output
/// projection's input, the MLP's inner tensors, two 1-byte dropout masks);
/// the attention core is a memory-equivalent stand-in for flash attention
/// (its output is Q; nothing of size s^2 is stored, its FLOPs are not run).
/// Tokens are the positions modulo the vocabulary. Throws InputError for an
/// architecture it cannot build (OPT's word_embed_proj_dim).
class SyntheticModel {
public:
    /// `layers` transformer blocks of `arch`'s shape; micro batch b, sequence s.
    SyntheticModel(const ModelArch& arch, int64_t layers, int64_t seq, int64_t micro_batch, DType dtype,
                   Checkpointing checkpointing);
    const std::vector<ParamInfo>& params() const { return params_; }
    const std::vector<ModuleInfo>& modules() const { return modules_; }
    int64_t total_params() const;
    /// Forward over all layers; activations stay saved until backward.
    void forward(Backend& be, ParamStore& store);
    /// Backward in reverse module order; frees the saved activations.
    void backward(Backend& be, ParamStore& store);
    /// Frees anything still saved (after an out-of-memory result).
    void release_all(Backend& be);
    DType dtype() const { return dtype_; }

private:
    struct Layer {  // parameter indices of one block (-1 = absent)
        int ln1_w = -1, ln1_b = -1, q = -1, k = -1, v = -1, qkv = -1, q_b = -1, k_b = -1, v_b = -1, qkv_b = -1,
            o = -1, o_b = -1, ln2_w = -1, ln2_b = -1, gate = -1, up = -1, down = -1, up_b = -1, gate_b = -1,
            down_b = -1;
        int m_ln1 = -1, m_q = -1, m_k = -1, m_v = -1, m_o = -1, m_ln2 = -1, m_gate = -1, m_up = -1, m_down = -1;
    };
    struct Saved {  // a layer's saved tensors
        Tensor x, n1, q, k, v, attn, mask1, h1, n2, g, u, a, p, mask2;
        Tensor rms1, rms1_more, rms2, rms2_more;  ///< the RMSNorms' saved copies (save_rms_norm_copies)
    };
    int add_module(const std::string& name);
    int add_param(int module, const std::string& name, int64_t rows, int64_t cols);
    void build(const ModelArch& arch, int64_t layers);
    Tensor act(int64_t numel, DType d, Category c = Category::activations);
    void layer_forward(Backend& be, ParamStore& st, const Layer& L, Saved& s, Tensor& out);
    void layer_backward(Backend& be, ParamStore& st, const Layer& L, Saved& s, Tensor& dout, Tensor& dx);
    Tensor mlp_backward(Backend& be, ParamStore& st, const Layer& L, Saved& s, const Tensor& dout);
    Tensor attention_backward(Backend& be, ParamStore& st, const Layer& L, Saved& s, Tensor& dh1);
    void linear_grad(Backend& be, ParamStore& st, int p, const Tensor& dy, const Tensor& x, int64_t out, int64_t in);
    void zero_grad(Backend& be, ParamStore& st, int p);
    void free_saved(Backend& be, Saved& s, bool keep_input);
    void save_rms_norm_copies(Backend& be, const Tensor& in, Tensor& fp32_copy, Tensor& more);

    Backend* be_ = nullptr;
    std::vector<ParamInfo> params_;
    std::vector<ModuleInfo> modules_;
    std::vector<Layer> layers_;
    int64_t h_ = 0, f_ = 0, V_ = 0, qw_ = 0, kvw_ = 0, sb_ = 0;
    bool gated_ = false, tied_ = false, fused_ = false;
    bool emb_dropout_ = false, attn_res_dropout_ = false, mlp_dropout_ = false;  ///< sites with p > 0
    /// Bytes per element an RMSNorm saves beyond its input in the model dtype (0 for LayerNorm).
    int64_t rms_extra_ = 0;
    DType dtype_ = DType::bf16;
    Checkpointing ckpt_ = Checkpointing::none;
    int embed_ = -1, pos_ = -1, emb_ln_w_ = -1, emb_ln_b_ = -1, fn_w_ = -1, fn_b_ = -1, head_ = -1;
    int m_embed_ = -1, m_pos_ = -1, m_emb_ln_ = -1, m_fn_ = -1, m_head_ = -1;
    // saved state between forward and backward
    std::vector<Saved> saved_;
    Tensor emb_mask_, final_in_, fn_out_, logits_, logits32_, logsm_, final_rms_, final_rms_more_;
};

}  // namespace zeromem::runtime
