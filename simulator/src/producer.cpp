// The event producer's shared core (producer.h): the event helpers, the
// hook order of a micro step (forward, full-checkpointing recompute,
// backward), the activations each module saves, the gradient hooks'
// dispatch to the stage, the micro step with its backward epilogue, and
// the run over steps. Facts: DeepSpeed v0.19.6 partitioned_param_coordinator.py
// (hook order), stage_1_and_2.py and stage3.py (gradient hooks, epilogue);
// the saved activations per Korthikanti et al. 2022.
#include "producer.h"

#include "zeromem/util.h"

#include <algorithm>

namespace zeromem::sim::detail {

// Reserves room for about 24 events per module per micro step (a ZeRO-3
// micro step emits about 16 without spans): reserved but untouched pages
// cost no memory, and the log then grows without copying its millions of
// events (MoE presets) on every doubling.
// A replay longer than about 2^23 events (16 per module per micro step)
// is refused: its log, timeline and trace outputs would take gigabytes, and
// the peak repeats after the first optimizer step.
void Producer::reserve_events() {
    const uint64_t micro = static_cast<uint64_t>(std::max<int64_t>(1, in_.train.grad_accum)) *
                           static_cast<uint64_t>(std::max<int64_t>(1, opt_.steps));
    const double expected = 16.0 * double(mods_.size() + 1) * double(micro);
    if (expected > double(uint64_t{1} << 23))
        throw InputError("--steps x --grad-accum: " + std::to_string(opt_.steps) + " x " +
                         std::to_string(in_.train.grad_accum) + " micro steps of " + std::to_string(mods_.size()) +
                         " modules would record about " + std::to_string(uint64_t(expected / 1e6)) +
                         " million events (more than 8 million); lower --steps or --grad-accum (the peak repeats "
                         "after the first optimizer step)");
    // At most 2^24 events (640 MB of address space) up front; a longer run grows as before.
    const uint64_t want = std::min<uint64_t>(24 * (mods_.size() + 1) * micro + 4096, uint64_t{1} << 24);
    if (log_.events.capacity() < want) log_.events.reserve(want);
    tensors_.reserve(want / 2);
}

// Module ids in events are offset by one: 0 is the whole model.
uint64_t Producer::alloc(const char* term, uint64_t bytes, Stream s, uint32_t m) {
    const uint64_t id = tensors_.size() + 1;
    tensors_.push_back({bytes, term, s});
    log_.events.push_back({Action::alloc, s, phase_, m, id, bytes, term});
    return id;
}

void Producer::release(uint64_t id, uint32_t m) {
    if (id == 0) return;
    const Tensor& t = tensors_[id - 1];
    log_.events.push_back({Action::free, t.stream, phase_, m, id, t.bytes, t.term});
}

void Producer::span(Action a, uint32_t m, Pass p) {
    if (!opt_.record_spans) return;
    const char* name = p == Pass::forward ? "forward" : (p == Pass::backward ? "backward" : "recompute");
    log_.events.push_back({a, Stream::compute, phase_, m + 1, 0, 0, name});
}

// ---------------------------------------------------------------------------
// Forward and backward
// ---------------------------------------------------------------------------

// The hook order of one micro step: every module forward, then backward in
// reverse; with full checkpointing each block's forward is replayed
// (recompute) just before its backward.
std::vector<Visit> Producer::module_visits() const {
    std::vector<Visit> v;
    const uint32_t M = static_cast<uint32_t>(mods_.size());
    v.reserve(M * 3);
    for (uint32_t m = 0; m < M; ++m) v.push_back({m, Pass::forward});
    const bool full = in_.train.checkpointing == Checkpointing::full;
    for (uint32_t m = M; m-- > 0;) {
        const int l = mods_[m].layer;
        if (full && l >= 0 && last_of_layer_[static_cast<size_t>(l)] == static_cast<int>(m))
            for (int r = first_of_layer_[static_cast<size_t>(l)]; r <= static_cast<int>(m); ++r)
                v.push_back({static_cast<uint32_t>(r), Pass::recompute});
        v.push_back({m, Pass::backward});
    }
    return v;
}

// Activations each module saves for its backward, per Korthikanti et al.
// 2022 Table 2 split into tensors (16-bit; x2 for fp32), with GQA widths
// and the real MLP width, as estimate.cpp layer_activation_bytes sums them.
std::vector<Saved> Producer::saved_tensors(uint32_t m, bool with_scores) const {
    const auto& a = *in_.model.arch;
    const auto& t = in_.train;
    const uint64_t s = static_cast<uint64_t>(t.seq_len), sb = sb_;  // sb_: s·b, times the profile's activation_scale
    const uint64_t d = static_cast<uint64_t>(a.head_dim > 0 ? a.head_dim : a.hidden_size / a.num_heads);
    const uint64_t sbq = sb * static_cast<uint64_t>(a.num_heads) * d;
    const uint64_t sbkv = sb * static_cast<uint64_t>(a.num_kv_heads) * d;
    const uint64_t sbf = sb * static_cast<uint64_t>(a.ffn_size);
    const uint64_t scores = static_cast<uint64_t>(a.num_heads) * s * sb;
    const uint64_t k = sc_;
    // An RMSNorm's saved bytes per element (its fp32 input copy and the normalized tensor: model.h
    // rms_norm_saved_bytes_per_element); for a pre-norm, beyond the b_a of them layernorm_input holds.
    const uint64_t rms = static_cast<uint64_t>(rms_norm_saved_bytes_per_element(a, !half_));
    const uint64_t rms_extra = static_cast<uint64_t>(rms_norm_extra_bytes_per_element(a, !half_));
    const std::string& r = mods_[m].role;
    std::vector<Saved> v;
    if (moe_saved_tensors(mods_[m], a, sb, bm_, k, v)) return v;
    // Dropout masks (1 byte per element) only where the model's dropout has
    // p > 0 (ModelArch::*_dropout; at p = 0 at::dropout returns its input).
    if (r == "embed_tokens") {
        if (a.embedding_dropout > 0.0) v.push_back({"embedding_dropout_mask", k * sbh_});
    }
    else if (r == "input_layernorm" || r == "post_attention_layernorm") {
        v.push_back({"layernorm_input", k * 2 * sbh_});
        if (rms_extra > 0) v.push_back({"rms_norm_saved", rms_extra * sbh_});
    } else if (r == "extra_layernorm") {
        if (rms > 0) v.push_back({"rms_norm_saved", rms * sbh_});
    } else if (r == "q_norm" || r == "k_norm") {
        if (rms > 0) v.push_back({"rms_norm_saved", rms * (r == "q_norm" ? sbq : sbkv)});
    }
    else if (r == "q_proj") { v.push_back({"attention_input", k * 2 * sbh_}); v.push_back({"query", k * 2 * sbq}); }
    else if (r == "k_proj") v.push_back({"key", k * 2 * sbkv});
    else if (r == "v_proj") v.push_back({"value", k * 2 * sbkv});
    else if (r == "qkv_proj") {
        v.push_back({"attention_input", k * 2 * sbh_});
        v.push_back({"query", k * 2 * sbq});
        v.push_back({"key", k * 2 * sbkv});
        v.push_back({"value", k * 2 * sbkv});
    } else if (r == "o_proj") {
        if (with_scores && !t.flash_attention) {
            v.push_back({"attention_scores", k * 2 * scores});
            v.push_back({"attention_softmax", k * 2 * scores});
            if (a.attention_dropout > 0.0) v.push_back({"attention_dropout_mask", k * scores});
        }
        v.push_back({"attention_output", k * 2 * sbq});
        if (a.attention_residual_dropout > 0.0) v.push_back({"attention_residual_dropout_mask", k * sbh_});
    } else if (r == "gate_proj") { v.push_back({"mlp_input", k * 2 * sbh_}); v.push_back({"mlp_gate", k * 2 * sbf}); }
    else if (r == "up_proj") {
        if (!a.gated_mlp) v.push_back({"mlp_input", k * 2 * sbh_});
        v.push_back({"mlp_up", k * 2 * sbf});
    } else if (r == "down_proj") {
        v.push_back({"mlp_activation", k * 2 * sbf});
        if (a.gated_mlp) v.push_back({"mlp_product", k * 2 * sbf});
        if (a.mlp_residual_dropout > 0.0) v.push_back({"mlp_dropout_mask", k * sbh_});
    } else if (r == "final_norm") {
        v.push_back({"layernorm_input", k * 2 * sbh_});
        if (rms_extra > 0) v.push_back({"rms_norm_saved", rms_extra * sbh_});
    }
    else if (r == "lm_head") v.push_back({"lm_head_input", k * 2 * sbh_});  // the matmul's input; the loss: loss_forward
    return v;
}

void Producer::save_activations(uint32_t m, Pass p) {
    const int l = mods_[m].layer;
    const Checkpointing mode = in_.train.checkpointing;
    if (p == Pass::forward && mode == Checkpointing::full && l >= 0) {
        // checkpoint(): only the block's input is kept (2sbh).
        if (first_of_layer_[static_cast<size_t>(l)] == static_cast<int>(m))
            checkpoint_[static_cast<size_t>(l)] = alloc("checkpoint_input", sc_ * 2 * sbh_, Stream::compute, m + 1);
        return;
    }
    const bool scores = mode == Checkpointing::none || p == Pass::recompute;
    // Memoised per module: the list depends on the module and the run's
    // settings only, and building it compares the module's role against
    // every role name (a MoE preset's 18k expert modules, every micro step).
    auto& memo = saved_memo_[scores ? 1 : 0];
    if (memo.empty()) memo.resize(mods_.size());
    if (!memo[m]) memo[m] = saved_tensors(m, scores);
    for (const Saved& s : *memo[m]) saved_[m].push_back(alloc(s.term, s.bytes, Stream::compute, m + 1));
    if (p == Pass::forward && mods_[m].role == "lm_head") loss_forward(m);
}

// The causal-LM loss after the LM head (transformers loss/loss_utils.py
// ForCausalLMLoss from 4.46; LlamaForCausalLM.forward before): the 16-bit
// logits, their fp32 upcast (`logits.float()`; an fp32 model's returns the
// tensor itself), before transformers 4.49 the shift's `.contiguous()` fp32
// copy of b(s-1)V, and cross_entropy = log_softmax + nll_loss (torch
// aten/src/ATen/native/LossNLL.cpp cross_entropy_loss_symint), whose
// LogSoftmaxBackward0 saves only its output (derivatives.yaml _log_softmax:
// result). Nothing else is saved: the upcast and the copy die when the loss
// returns, the 16-bit logits when the model's output is dropped (the HF
// Trainer's compute_loss returns the loss only); before 4.46 the model's forward
// rebinds `logits = logits.float()`, freeing the 16-bit logits at the upcast.
void Producer::loss_forward(uint32_t m) {
    const uint64_t l16 = alloc("logits", bm_ * sbV_, Stream::compute, m + 1);
    const uint64_t l32 = half_ ? alloc("logits_fp32", 4 * sbV_, Stream::compute, m + 1) : 0;
    uint64_t l16_live = l16;
    if (half_ && upcasts_in_forward_) {
        release(l16, m + 1);
        l16_live = 0;
    }
    const uint64_t shift = shifts_copy_ ? alloc("shift_logits_fp32", 4 * sb1V_, Stream::compute, m + 1) : 0;
    log_softmax_ = alloc("log_softmax", 4 * sb1V_, Stream::compute, m + 1);
    release(shift, m + 1);
    release(l32, m + 1);
    release(l16_live, m + 1);
}

void Producer::free_saved(uint32_t m) {
    for (uint64_t id : saved_[m]) release(id, m + 1);
    saved_[m].clear();
    const int l = mods_[m].layer;
    if (l >= 0 && first_of_layer_[static_cast<size_t>(l)] == static_cast<int>(m) && checkpoint_[static_cast<size_t>(l)]) {
        release(checkpoint_[static_cast<size_t>(l)], m + 1);
        checkpoint_[static_cast<size_t>(l)] = 0;
    }
}

void Producer::forward_module(uint32_t m, size_t visit, Pass p) {
    span(Action::span_begin, m, p);
    if (stage_ == 3) fetch_sub_module(m, visit);
    save_activations(m, p);
    if (stage_ == 3) release_sub_module(m, visit);
    span(Action::span_end, m, p);
}

// Cross-entropy backward, before the LM head's pre-backward hook (DeepSpeed's
// PreBackwardFunctionForModule wraps the module's output, parameter_offload.py,
// so its backward runs after the loss's nodes): NllLossBackward0's fp32
// gradient of the log-softmax output (nll_loss_backward: grad_input of the
// input's shape), LogSoftmaxBackward0's fp32 gradient of its input
// (_log_softmax_backward_data), beside the saved output; autograd then frees
// the first and the saved output (engine.cpp evaluate_function ->
// release_variables). Before transformers 4.49 SliceBackward0 pads the
// shifted gradient into a zero fp32 gradient of the full logits; for a 16-bit
// model ToCopyBackward0 casts it to the 16-bit gradient of the logits, which
// lives through the LM head's matmul backward.
void Producer::loss_backward(uint32_t m) {
    const uint64_t nll = alloc("nll_loss_grad_fp32", 4 * sb1V_, Stream::compute, m + 1);
    uint64_t g32 = alloc("logits_grad_fp32", 4 * sb1V_, Stream::compute, m + 1);
    release(nll, m + 1);
    release(log_softmax_, m + 1);
    log_softmax_ = 0;
    if (shifts_copy_) {
        const uint64_t padded = alloc("logits_grad_fp32", 4 * sbV_, Stream::compute, m + 1);
        release(g32, m + 1);
        g32 = padded;
    }
    if (!half_) {  // fp32 model: the gradient of the logits is g32 itself
        saved_[m].push_back(g32);
        return;
    }
    const uint64_t g16 = alloc("logits_grad", bm_ * sbV_, Stream::compute, m + 1);
    release(g32, m + 1);
    saved_[m].push_back(g16);
}

void Producer::backward_module(uint32_t m, size_t visit) {
    span(Action::span_begin, m, Pass::backward);
    if (mods_[m].role == "lm_head") loss_backward(m);
    if (stage_ == 3) fetch_sub_module(m, visit);
    uint64_t recomputed = 0;
    if (in_.train.checkpointing == Checkpointing::selective && !in_.train.flash_attention && mods_[m].role == "o_proj") {
        // Selective recompute: the attention core (scores, softmax, the dropout mask where p > 0) is rebuilt
        // for this backward: attention_score_factor as²b.
        const auto& a = *in_.model.arch;
        const uint64_t sc = static_cast<uint64_t>(a.num_heads) * static_cast<uint64_t>(in_.train.seq_len) * sb_;
        const uint64_t per = a.attention_dropout > 0.0 ? 5 : 4;
        recomputed = alloc("attention_core_recompute", sc_ * per * sc, Stream::compute, m + 1);
    }
    gradients(m);
    release(recomputed, m + 1);
    free_saved(m);
    if (stage_ == 3) release_sub_module(m, visit);
    span(Action::span_end, m, Pass::backward);
}

// ---------------------------------------------------------------------------
// Gradients
// ---------------------------------------------------------------------------
void Producer::gradients(uint32_t m) {
    if (mods_[m].shares_params_with >= 0) return;  // tied: the shared grad is produced at the embedding
    for (size_t k = 0; k < mods_[m].params.size(); ++k) {
        const uint64_t p = mods_[m].params[k];
        if (stage_ <= 1) {
            // param.grad, full size, kept to the step (accumulated in place).
            if (!grads_exist_) full_grads_[m][k] = alloc("gradient", bm_ * p, Stream::compute, m + 1);
            // ZeRO-1: every gradient hook runs process_gradients, whose
            // setup_buckets allocates the IPG buffer at the first hook of a
            // backward (contiguous_gradients); it stays until the boundary's
            // epilogue (_release_ipg_buffers), so it is live at the LM-head
            // backward too (stage_1_and_2.py grad_handling_hook).
            if (stage_ == 1 && !bf16_opt_ && in_.zero.contiguous_gradients) zero12_setup_buckets(m);
            // ZeRO-1 with overlap_comm reduces in the hooks of the boundary backward.
            if (stage_ == 1 && !bf16_opt_ && overlap_ && boundary_) {
                zero12_add_grad_to_ipg_bucket(m, p);
                zero1_free_copied_gradient(m, k, p);
            }
            continue;
        }
        const uint64_t g = alloc("gradient", bm_ * p, Stream::compute, m + 1);
        if (stage_ == 2) zero12_add_grad_to_ipg_bucket(m, p);
        else zero3_reduce_independent_p_g_buckets(m, p);
        release(g, m + 1);  // copied into the bucket; param.grad now aliases the bucket
    }
}

// ---------------------------------------------------------------------------
// One micro step and the run
// ---------------------------------------------------------------------------

void Producer::micro_step(uint64_t global_micro, bool boundary) {
    const bool first_step = phase_ == Phase::forward;
    complete_ = global_micro >= 1;  // ZeRoTraceMode: the trace is recorded in the first iteration
    prefetch_cursor_ = 0;
    boundary_ = boundary;
    reduced_from_end_ = Tn_ * N_ - std::min(Tn_ * N_, T_);  // the padding ends the last partition
    for (size_t i = 0; i < visits_.size(); ++i) {
        const Visit& v = visits_[i];
        if (v.pass == Pass::backward && phase_ != Phase::backward && phase_ != Phase::steady_backward)
            phase_ = first_step ? Phase::backward : Phase::steady_backward;
        if (v.pass == Pass::backward) backward_module(v.module, i);
        else forward_module(v.module, i, v.pass);
    }
    // Backward epilogue (independent_gradient_partition_epilogue).
    if (stage_ == 3) {
        zero3_reduce_and_partition_ipg_grads(root_);
        release_all_gathered();
    } else if (stage_ == 2) {
        zero12_reduce_ipg_grads(root_);
        zero12_release_ipg_buffers(root_);
        zero2_keep_all_grad_tensors(boundary);
    } else if (bf16_opt_) {
        bf16_update_hp_grads();
        if (boundary) bf16_allreduce_gradients(root_);
    } else if (stage_ == 1 && boundary) {
        if (overlap_) {
            zero12_reduce_ipg_grads(root_);
            zero12_release_ipg_buffers(root_);
        } else {
            zero1_reduce_gradients_at_boundary(root_);
        }
    }
    if (stage_ <= 1) grads_exist_ = true;
}

EventLog Producer::run() {
    phase_ = Phase::load;
    if (bf16_opt_) bf16_optimizer_init();
    else if (stage_ == 0) init_fp16_optimizer();
    else if (stage_ <= 2) init_zero12_flatten_bit16_groups();
    else init_zero3_partitions();
    visits_ = module_visits();
    if (stage_ == 3) {
        // Next use of each visit's unit and the elements walked up to it (release_sub_module's reuse distance).
        next_use_.assign(visits_.size(), -1);
        visit_prefix_.assign(visits_.size() + 1, 0);
        std::vector<int64_t> last(mods_.size(), -1);
        for (size_t i = visits_.size(); i-- > 0;) {
            const uint32_t u = unit_[visits_[i].module];
            next_use_[i] = last[u];
            last[u] = static_cast<int64_t>(i);
        }
        for (size_t i = 0; i < visits_.size(); ++i)
            visit_prefix_[i + 1] = visit_prefix_[i] + unit_numel_[unit_[visits_[i].module]];
    }
    const int64_t gas = in_.train.grad_accum;
    uint64_t micro = 0;
    for (int64_t k = 0; k < opt_.steps; ++k) {
        for (int64_t mu = 0; mu < gas; ++mu) {
            phase_ = k == 0 ? Phase::forward : Phase::steady_forward;
            micro_step(micro++, mu == gas - 1);
        }
        optimizer_step(k == 0);
    }
    return std::move(log_);
}

}  // namespace zeromem::sim::detail
