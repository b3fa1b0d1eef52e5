// Internal to the estimator: what the files of the estimate (estimate.cpp and the
// estimate_*.cpp beside it) share: the --explain collector, the context the full
// convention resolves once per estimate (with the software stack's behaviours,
// stack_facts.h), and the functions one file computes and another assembles.
#pragma once

#include "zeromem/estimate.h"
#include "zeromem/model.h"
#include "zeromem/optimizer_state.h"
#include "zeromem/process_terms.h"
#include "zeromem/stack_facts.h"
#include "zeromem/terms.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
#include <utility>

namespace zeromem::estimate_detail {

inline constexpr const char* kSrcPaper = "ZeRO paper (Rajbhandari et al. 2020, arXiv:1910.02054) Sec. 5.1-5.3, Fig. 1";
inline constexpr const char* kSrcDsZ2 = "DeepSpeed estimate_zero2_model_states_mem_needs, runtime/zero/stage_1_and_2.py";
inline constexpr const char* kSrcDsZ3 = "DeepSpeed estimate_zero3_model_states_mem_needs, runtime/zero/stage3.py";
inline constexpr const char* kSrcKorthikanti = "Korthikanti et al. 2022 (arXiv:2205.05198) Table 2 and Sec. 4.3";
inline constexpr const char* kSrcRmsNorm =
    "transformers models/llama/modeling_llama.py LlamaRMSNorm.forward (gemma GemmaRMSNorm, gpt_oss GptOssRMSNorm, "
    "t5 T5LayerNorm); torch tools/autograd/derivatives.yaml (pow saves self, mul saves the other operand)";
inline constexpr const char* kSrcLmHeadLoss =
    "transformers src/transformers/loss/loss_utils.py ForCausalLMLoss (>= 4.46), models/llama/modeling_llama.py "
    "LlamaForCausalLM.forward (< 4.46: logits.float(), shift_logits .contiguous()); torch "
    "aten/src/ATen/native/LossNLL.cpp cross_entropy_loss_symint (log_softmax + nll_loss), "
    "tools/autograd/derivatives.yaml (_log_softmax saves result; nll_loss_backward, _log_softmax_backward_data)";

inline std::string num(double v) {
    char buf[64];
    if (v == std::floor(v) && std::fabs(v) < 1e18)
        std::snprintf(buf, sizeof buf, "%.0f", v);
    else
        std::snprintf(buf, sizeof buf, "%.6g", v);
    return buf;
}

// llround for the non-negative byte counts below 2^63 (half away from zero), without libm's call: the
// truncation and the remainder are exact in double.
inline uint64_t to_bytes(double v) {
    if (!(v > 0)) return 0;
    const uint64_t whole = static_cast<uint64_t>(v);
    return whole + (v - static_cast<double>(whole) >= 0.5 ? 1 : 0);
}

inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// Collects --explain lines only when asked.
struct Explainer {
    Estimate* est;
    bool on;
    void term(const char* component, const std::string& formula, const std::string& substituted,
              uint64_t bytes, const char* source) const {
        if (on) est->terms.push_back({component, formula, substituted, bytes, source});
    }
    // Notes are few and short: always kept, so the CLI can show them.
    void note(const std::string& text) const { est->notes.push_back(text); }
};

// Everything the full convention resolves once per estimate: parameter counts
// per rank, the named sizes the terms read (terms::Sizes) and the source
// strings.
struct FullContext {
    const EstimateInput& in;
    terms::Sizes sz;
    uint64_t P = 0, T = 0, F = 0;  // model, trainable, frozen parameters
    uint64_t Pr = 0, Tr = 0, Fr = 0;  // the same per tensor/pipeline rank
    uint64_t Tn = 0;                  // ceil(Tr / N_d)
    uint64_t N = 1, g = 1, tp = 1, pp = 1, L = 0;
    uint64_t bm = 2, ba = 2, bc = 2, osb = 8;
    double frozen_bytes = 0;          // frozen storage per tensor/pipeline rank, bytes
    const char* src = "";             // the stage's DeepSpeed source
    StackFacts facts;                 // version-dependent behaviours (stack_facts.h)
    std::string kernel_why;           // which optimizer implementation runs the step, and why
    OptimizerStateBytes opt_state;    // optimizer states of this rank (GPU, or host under offload)
    const char* opt_state_why = "";   // which tensors the optimizer is handed, for --explain
    ProcessMemory proc;               // CUDA context, NCCL buffers, cuBLAS workspaces (process_terms.h)
    std::shared_ptr<const ParamCount> counts;  // count_params of the architecture (shared_param_count)
    uint64_t persistent = 0;          // ZeRO-3 persistent elements per rank (persistent_numel / pp), walked once
    explicit FullContext(const EstimateInput& i) : in(i) {
        if (i.model.arch) counts = shared_param_count(*i.model.arch);
    }
};

// The model states of `st` with the phase's gradients, activations and
// temporaries; m and v only from the first optimizer step on (the optimizer
// allocates them lazily). estimate_backward.cpp.
GpuMemory moment(const FullContext& c, const GpuMemory& st, uint64_t grads, bool moments, uint64_t activations_b,
                 uint64_t tmp);

inline constexpr const char* kSrcZ12 = "DeepSpeed v0.19.6 runtime/zero/stage_1_and_2.py (DeepSpeedZeroOptimizer)";
inline constexpr const char* kSrcZ3 = "DeepSpeed v0.19.6 runtime/zero/stage3.py, partition_parameters.py";
inline constexpr const char* kSrcZ0 = "DeepSpeed v0.19.6 runtime/fp16/fused_optimizer.py (FP16_Optimizer)";

// --- activations (Korthikanti et al. 2022 with GQA and the real MLP width) ---
struct Activations {
    uint64_t forward = 0;   // stored at the end of forward
    uint64_t backward = 0;  // stored + max(the LM head's matmul backward, one layer's recompute)
    uint64_t head_backward = 0;   // the first of the two: stored + the LM head's backward
    uint64_t layer_backward = 0;  // the second: stored + one recomputed layer (stored alone without checkpointing)
    // stored + the cross-entropy's backward (lm_head_loss_bytes: the log-softmax output, the
    // fp32 gradients of its output and input), before the LM head's pre-backward hook: only
    // the temporaries kept from the forward are live then (loss_backward_temporaries)
    uint64_t loss_backward = 0;
    uint64_t host = 0;      // per rank, cpu_checkpointing
};

// --- host RAM and NVMe (per rank, then per node) --------------------------------
struct HostFigures {
    uint64_t steady = 0;         // per node, training (without cpu_checkpointing activations)
    uint64_t first_forward = 0;  // per node, first forward: no lazy states yet
    uint64_t first_backward = 0; // per node, first backward: + ZeRO-1/2 accumulation buffers
    uint64_t pinned_steady = 0;  // per node
    uint64_t pinned_first = 0;   // per node, before the first step
    uint64_t load = 0;           // per node, load phase
    uint64_t pinned_init = 0;    // per node, load phase
    uint64_t nvme = 0;           // per node
    uint64_t save_extra = 0;     // per node, checkpoint_save on top of steady
    uint64_t save_rank0 = 0;     // of save_extra, what only global rank 0 holds (its node's)
};

// The named terms of one moment, held in place: a phase walk builds several lists per estimate
// and none allocates. The longest, ZeRO-3's backward temporaries, has nine.
class TermList {
public:
    TermList() = default;
    TermList(std::initializer_list<terms::Term> list) {
        if (list.size() > items_.size()) throw std::length_error("TermList: more than nine terms");
        for (const terms::Term& t : list) items_[size_++] = t;
    }
    const terms::Term* begin() const { return items_.data(); }
    const terms::Term* end() const { return items_.data() + size_; }

private:
    std::array<terms::Term, 9> items_{};
    size_t size_ = 0;
};

// estimate.cpp
TermList persistent_temporaries(const terms::Sizes& s);
TermList loss_backward_temporaries(const terms::Sizes& s);
uint64_t sum_bytes(const TermList& list);
/// The phase's readings (allocated, reserved, total) with the allowance `fragmentation_bytes`, or the
/// fixed fraction when it is unset; finish_gpu passes ResidualSettings::fragmentation_bytes.
void finish_gpu_with(GpuMemory& m, const FullContext& c, const std::optional<uint64_t>& fragmentation_bytes);
void finish_gpu(GpuMemory& m, const FullContext& c);
/// finish_gpu with the load phase's own replayed allowance (ResidualSettings::load_fragmentation_bytes).
void finish_load_gpu(GpuMemory& m, const FullContext& c);

// estimate_conventions.cpp
void estimate_paper(const EstimateInput& in, Estimate& out, const Explainer& ex);
void estimate_deepspeed(const EstimateInput& in, Estimate& out, const Explainer& ex);

// parameter_layout.cpp
/// `copies` tensors of `numel` elements each, one after another in parameter order.
struct TensorRun {
    uint64_t numel = 0, copies = 0;
};

/// Runs of tensors held in place (no allocation): a layout adds at most ten per part.
struct TensorRuns {
    std::array<TensorRun, 12> runs{};
    size_t size = 0;
    void add(uint64_t numel, uint64_t copies) {
        if (numel > 0 && copies > 0) runs[size++] = {numel, copies};
    }
    const TensorRun* begin() const { return runs.data(); }
    const TensorRun* end() const { return runs.data() + size; }
    uint64_t tensors() const {
        uint64_t n = 0;
        for (const TensorRun& r : *this) n += r.copies;
        return n;
    }
};

/// Every parameter tensor of the architecture in the order model.parameters()
/// yields it (the Hugging Face module layout: the embeddings, then per layer
/// the attention projections, the MLP matrices, their biases and the norms,
/// then the final norm and an untied LM head), split over tp. The counts match
/// count_params for the families it covers.
struct ParameterLayout {
    TensorRuns before_layers, per_layer, after_layers;  // numel per tensor (split over tp)
};
ParameterLayout parameter_layout(const ModelArch& a, uint64_t tp);

/// Calls visit(numel, count) for every tensor of the layout in order: count 1 for the tensors before
/// and after the layers, `layers` for each tensor of a layer. What per-parameter pinned buffers are
/// sized by (zero.Init's partitions, the ZeRO-1/2 accumulation buffers) and the persistence walk reads.
template <class Visit>
void for_each_parameter_numel(const ParameterLayout& l, uint64_t layers, Visit&& visit) {
    auto runs = [&](const TensorRuns& part, uint64_t count) {
        for (const TensorRun& r : part)
            for (uint64_t i = 0; i < r.copies; ++i) visit(r.numel, count);
    };
    runs(l.before_layers, 1);
    runs(l.per_layer, layers);
    runs(l.after_layers, 1);
}
/// ZeRO-3's sub-groups of one rank's partition in parameter order; empty when the layout does not add up to Tn.
std::vector<uint64_t> zero3_sub_groups(const ModelArch& a, uint64_t tp, uint64_t N, uint64_t sub_group_size, uint64_t Tn);
uint64_t persistent_numel(const ModelArch& a, uint64_t tp, int64_t threshold, int64_t model_threshold);
/// persistent_numel and zero3_sub_groups of the architecture `counts` (shared_param_count) was counted
/// for, the last answer kept per thread.
uint64_t kept_persistent_numel(const std::shared_ptr<const ParamCount>& counts, const ModelArch& a, uint64_t tp,
                               int64_t threshold, int64_t model_threshold);
std::vector<uint64_t> kept_zero3_sub_groups(const std::shared_ptr<const ParamCount>& counts, const ModelArch& a,
                                            uint64_t tp, uint64_t N, uint64_t sub_group_size, uint64_t Tn);

// estimate_context.cpp
void optimizer_notes(const FullContext& c, Estimate& out);
FullContext make_context(const EstimateInput& in, Estimate& out);
std::string sizes_text(const FullContext& c);
std::string term_source(const terms::Term& t);
uint64_t sum_terms(const TermList& list, const char* phase, const FullContext& c, const Explainer& ex);

// estimate_activations.cpp
Activations activations(const FullContext& c, const Explainer& ex);

// estimate_load.cpp
bool zero12_flattens_on_gpu(const FullContext& c);
LoadPath effective_load_path(const EstimateInput& in);
bool single_file_state_dict(const EstimateInput& in);
/// The load phase's largest moment; *peaks gets each component's own peak in the phase
/// (Estimate::load_component_peaks).
GpuMemory load_gpu(const FullContext& c, const GpuMemory& st, const Explainer& ex, GpuMemory* peaks);

// estimate_backward.cpp
bool zero1_backward_starts_without_gradients(const terms::Sizes& s);
GpuMemory backward_gpu(const FullContext& c, const GpuMemory& st, const Activations& act, uint64_t tmp_bwd,
                       bool moments, const Explainer& ex);

// estimate_host.cpp
HostFigures host_memory_full(const FullContext& c, const Explainer& ex);
void summarize_phases(const FullContext& c, const GpuMemory& st, uint64_t act_backward, const HostFigures& host,
                      uint64_t host_act, Estimate& out, const Explainer& ex);

}  // namespace zeromem::estimate_detail
