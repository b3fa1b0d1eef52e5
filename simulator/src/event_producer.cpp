// The event producer: DeepSpeed v0.19.6's GPU allocations for one rank, step
// by step. Each function is named after the DeepSpeed step it replays; the
// allocation names ("terms") follow the estimator's terms and DeepSpeed's
// own variable names. Facts: DeepSpeed v0.19.6 stage_1_and_2.py, stage3.py,
// partition_parameters.py, partitioned_param_coordinator.py (hook order).
// The class is in producer.h; this file holds the entry points, the
// refusals of inputs the producer does not replay and the constructor.
#include "moe_events.h"
#include "producer.h"
#include "zeromem/optimizer_state.h"
#include "zeromem/optimizer_wrapper.h"
#include "zeromem/simulator.h"

#include "zeromem/stack_facts.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cmath>

namespace zeromem::sim {

using zeromem::InputError;

const char* to_string(Stream s) {
    switch (s) {
        case Stream::compute: return "compute";
        case Stream::allgather: return "allgather";
        case Stream::reduce: return "reduce";
    }
    return "compute";
}

const char* to_string(Phase p) {
    switch (p) {
        case Phase::load: return "load";
        case Phase::forward: return "forward";
        case Phase::backward: return "backward";
        case Phase::optimizer_step: return "optimizer_step";
        case Phase::steady_forward: return "steady_forward";
        case Phase::steady_backward: return "steady_backward";
    }
    return "load";
}

namespace {
// More optimizer steps repeat the steady state; the bound keeps a replay
// (its event log grows linearly with the steps) from running unbounded.
constexpr int64_t kMaxSteps = 100;

// The module tree (module_tree.cpp) is a decoder-only transformer (dense,
// or Hugging Face's MoE blocks: moe_events.h): encoder-decoder and
// encoder-only models are refused, naming the config field, rather than
// replayed with the wrong modules.
void refuse_unreplayed_architecture(const ModelArch& a) {
    if (a.num_decoder_layers > 0)
        throw InputError("num_decoder_layers: the simulator replays decoder-only models; encoder-decoder is not "
                         "replayed (use `zeromem estimate`)");
    if (a.encoder_only)
        throw InputError("encoder_only: the simulator replays decoder-only models; encoder-only is not replayed "
                         "(use `zeromem estimate`)");
    if (!a.vision_kind.empty() || a.vision_layers > 0 || a.vision_other_params > 0 || a.projector_params > 0)
        throw InputError("vision_config: the simulator replays the text decoder only; the vision tower and projector "
                         "of '" + a.name + "' are not replayed (use `zeromem estimate`)");
}

// ZeRO++ (hpZ secondary partition, qwZ/qgZ quantized buffers) and MiCS
// shard groups add or change buffers the producer does not emit: refused,
// naming the key, rather than replayed as plain ZeRO-3 (the estimator models
// them: zeromem/zeropp.h).
void refuse_unreplayed_zero_settings(const ZeroSettings& z) {
    const char* key = nullptr;
    if (z.stage == 3 && z.zero_hpz_partition_size > 1) key = "zero_hpz_partition_size";
    else if (z.stage == 3 && z.zero_quantized_weights) key = "zero_quantized_weights";
    else if (z.stage == 3 && z.zero_quantized_gradients) key = "zero_quantized_gradients";
    else if (z.stage == 3 && z.mics_shard_size > 0) key = "mics_shard_size";
    if (key)
        throw InputError(std::string("zero_optimization.") + key +
                         ": the simulator does not replay ZeRO++ or MiCS buffers (use `zeromem estimate`)");
}

// Largest single tensor the simulator accepts, 2^50 B (1 PiB): far above any
// GPU, and small enough that sums of live tensors stay exact in the
// allocator's 64-bit byte arithmetic.
constexpr double kMaxTensorBytes = 1125899906842624.0;

// Refuses a micro batch x sequence length whose largest activation (fp32
// logits b x s x V, or attention scores b x a x s x s) would exceed
// kMaxTensorBytes, and a model whose fp32 parameters would. Computed in
// double so the check itself cannot overflow.
void refuse_oversized_tensors(const EstimateInput& in) {
    const ModelArch& a = *in.model.arch;
    const double sb = double(in.train.seq_len) * double(in.train.micro_batch) * in.residual.activation_scale;
    const double widest = std::max({double(a.vocab_size), double(a.hidden_size), double(a.ffn_size),
                                    double(a.num_heads) * double(in.train.seq_len)});
    if (4.0 * sb * widest > kMaxTensorBytes)
        throw InputError("--micro-batch/--seq-len: micro batch " + std::to_string(in.train.micro_batch) + " x sequence " +
                         std::to_string(in.train.seq_len) +
                         (in.residual.activation_scale != 1.0 ? " x the calibration profile's activation_scale" : "") +
                         " makes an activation tensor over 2^50 bytes; the simulator "
                         "refuses it (its byte arithmetic is 64-bit)");
    // An upper bound of the dense decoder's parameters (MHA projections, a
    // three-matrix MLP, untied embeddings), in double: the module tree's own
    // 64-bit products could overflow first.
    const double h = double(a.hidden_size);
    const double params = double(a.num_layers) * (4.0 * h * h + 3.0 * h * double(a.ffn_size)) + 2.0 * double(a.vocab_size) * h +
                          double(a.num_moe_layers) * 3.0 * h *
                              (double(a.num_experts) * double(a.expert_ffn_size) + double(a.shared_expert_ffn_size));
    if (16.0 * params > kMaxTensorBytes)
        throw InputError("model: about " + std::to_string(params) + " parameters make model states over 2^50 bytes; the "
                         "simulator refuses them (its byte arithmetic is 64-bit)");
}

// engine.py _do_optimizer_sanity_check returns BFLOAT16, and
// _configure_optimizer builds BF16_Optimizer (_configure_bf16_optimizer),
// when ZeRO is enabled (stage >= 1) at stage 1 with bf16 weights, fp32
// gradient accumulation (data_types.grad_accum_dtype) and no CPU optimizer
// offload (zero_cpu_offload); without ZeRO also for bf16 with bf16
// accumulation under pipeline parallelism, which the simulator refuses
// (tp = pp = 1). The estimator's Sizes::bf16_optimizer is the same test.
bool runs_bf16_optimizer(const EstimateInput& in) {
    const Dtype acc = in.train.grad_accum_dtype.value_or(in.train.dtype);
    return in.zero.stage == 1 && in.train.dtype == Dtype::bf16 && acc == Dtype::fp32 &&
           in.zero.offload_optimizer != OffloadDevice::cpu;
}

// Without ZeRO (stage 0), DeepSpeed before 0.18.5 builds BF16_Optimizer for
// bf16 weights with fp32 gradient accumulation (the default before 0.17.6:
// engine.py get_data_types), where 0.19.6 builds FP16_Optimizer or refuses
// the mix (zeromem::optimizer_wrapper, engine.py _do_optimizer_sanity_check).
// The producer replays 0.19.6's stage 0 only, so such an input is refused
// rather than replayed as the wrong wrapper.
void refuse_older_bf16_optimizer(const EstimateInput& in) {
    if (in.zero.stage != 0 || in.cluster.pp != 1 || optimizer_wrapper(in) != OptimizerWrapper::bf16_optimizer) return;
    throw InputError("--deepspeed-version: " + in.stack.deepspeed +
                     " builds BF16_Optimizer without ZeRO (bf16 weights, fp32 gradient accumulation); BF16_Optimizer "
                     "without ZeRO before DeepSpeed 0.18.5 is not replayed; the simulator replays 0.19.6 (use "
                     "`zeromem estimate`, or --deepspeed-version 0.19.6)");
}

// ZeRO-1 with a gradient accumulation dtype other than the weights' (bf16
// weights, fp32 accumulation, CPU optimizer offload: DeepSpeedZeroOptimizer,
// not BF16_Optimizer) keeps a full param.grad_accum per parameter in that
// dtype (stage_1_and_2.py use_grad_accum_attribute,
// _fill_param_grad_accum_attribute); not replayed, so refused naming the key
// (the estimator counts it).
void refuse_grad_accum_attribute(const EstimateInput& in) {
    const Dtype acc = in.train.grad_accum_dtype.value_or(in.train.dtype);
    if (in.zero.stage != 1 || acc == in.train.dtype || optimizer_wrapper(in) != OptimizerWrapper::zero) return;
    throw InputError(std::string("data_types.grad_accum_dtype: ") + to_string(acc) + " with " +
                     to_string(in.train.dtype) + " weights at ZeRO stage 1 (DeepSpeedZeroOptimizer) keeps a full " +
                     to_string(acc) + " param.grad_accum per parameter (stage_1_and_2.py "
                     "_fill_param_grad_accum_attribute), which the simulator does not replay (use `zeromem estimate`)");
}

}  // namespace

namespace detail {

Producer::Producer(const EstimateInput& in, const SimOptions& opt, EventLog&& buffer)
    : in_(in), opt_(opt), log_(std::move(buffer)) {
    log_.modules.clear();
    log_.events.clear();
    if (opt.steps < 1 || opt.steps > kMaxSteps)
        throw InputError("--steps: must be between 1 and " + std::to_string(kMaxSteps) + ", got " + std::to_string(opt.steps));
    if (!in.model.arch)
        throw InputError("simulate: needs the model's architecture: give --model or --hf-config (--params alone has no module tree)");
    refuse_unreplayed_moe(in);  // before the vision check: Llama 4's refusal names its fused experts
    refuse_unreplayed_architecture(*in.model.arch);
    refuse_unreplayed_zero_settings(in.zero);
    refuse_oversized_tensors(in);
    if (in.cluster.tp != 1 || in.cluster.pp != 1)
        throw InputError("--tp/--pp: the simulator replays data parallelism only (tp = pp = 1)");
    if (in.train.lora_rank > 0 || in.train.trainable_params || in.train.load_in_bits != 16)
        throw InputError("--lora-rank/--trainable-params/--load-in: the simulator replays full fine-tuning only");
    if (in.zero.stage < 0 || in.zero.stage > 3)
        throw InputError("zero_optimization.stage: " + std::to_string(in.zero.stage) + " is outside 0..3");
    refuse_older_bf16_optimizer(in);
    refuse_grad_accum_attribute(in);
    const auto& t = in.train;
    const auto& z = in.zero;
    stage_ = z.stage;
    step_temporary_ = step_temporary_bytes_per_element(step_kernel_for(in));
    N_ = static_cast<uint64_t>(in.cluster.data_parallel());
    if (N_ == 0) throw InputError("--gpus: must be a positive number of GPUs");
    bm_ = static_cast<uint64_t>(dtype_bytes(t.dtype));
    ba_ = static_cast<uint64_t>(dtype_bytes(t.grad_accum_dtype.value_or(t.dtype)));
    bf16_opt_ = runs_bf16_optimizer(in);
    bc_ = static_cast<uint64_t>(dtype_bytes(t.communication_dtype.value_or(t.dtype)));
    half_ = t.dtype != Dtype::fp32;
    sc_ = half_ ? 1 : 2;
    off_opt_ = z.offload_optimizer != OffloadDevice::none;
    off_par_ = z.offload_param != OffloadDevice::none;
    overlap_ = z.overlap_comm_effective();
    ag_ = overlap_ ? Stream::allgather : Stream::compute;
    rd_ = overlap_ ? Stream::reduce : Stream::compute;
    bucket_ = static_cast<uint64_t>(std::max<int64_t>(1, z.reduce_bucket_size));
    mods_ = modules_of(in);
    reserve_events();
    log_.modules.push_back("model");
    for (const auto& m : mods_) log_.modules.push_back(m.name);
    for (const auto& m : mods_)
        for (uint64_t p : m.params) T_ += p;
    Tn_ = ceil_div(T_, N_);
    const auto& a = *in.model.arch;
    // A calibration profile's activation_scale scales the tokens every activation is sized by, as
    // estimate_activations.cpp scale_activations scales the activation figures (1 without --calibration).
    const auto tokens = [&](uint64_t n) {
        const double f = in.residual.activation_scale;
        return f == 1.0 ? n : static_cast<uint64_t>(std::llround(double(n) * f));
    };
    sb_ = tokens(static_cast<uint64_t>(t.seq_len) * static_cast<uint64_t>(t.micro_batch));
    sbh_ = sb_ * static_cast<uint64_t>(a.hidden_size);
    sbV_ = sb_ * static_cast<uint64_t>(a.vocab_size);
    {
        const StackFacts f = stack_facts(in.stack);
        upcasts_in_forward_ = f.upcasts_logits_in_model_forward;
        shifts_copy_ = f.shifts_logits_with_contiguous_copy;
        // The shifted logits: b·(s-1)·V elements (transformers < 4.49); else the loss sees all b·s·V.
        sb1V_ = shifts_copy_ ? tokens(static_cast<uint64_t>(std::max<int64_t>(t.seq_len - 1, 0)) *
                                      static_cast<uint64_t>(t.micro_batch)) *
                                   static_cast<uint64_t>(a.vocab_size)
                             : sbV_;
    }
    saved_.resize(mods_.size());
    full_grads_.resize(mods_.size());
    for (size_t i = 0; i < mods_.size(); ++i) full_grads_[i].assign(mods_[i].params.size(), 0);
    first_of_layer_.assign(static_cast<size_t>(a.num_layers), -1);
    last_of_layer_.assign(static_cast<size_t>(a.num_layers), -1);
    for (size_t i = 0; i < mods_.size(); ++i) {
        const int l = mods_[i].layer;
        if (l < 0) continue;
        if (first_of_layer_[static_cast<size_t>(l)] < 0) first_of_layer_[static_cast<size_t>(l)] = static_cast<int>(i);
        last_of_layer_[static_cast<size_t>(l)] = static_cast<int>(i);
    }
    checkpoint_.assign(static_cast<size_t>(a.num_layers), 0);
}

}  // namespace detail

using detail::Producer;

EventLog produce_events(const EstimateInput& in, const SimOptions& opt) {
    Producer p(in, opt, EventLog{});
    return p.run();
}

void produce_events(const EstimateInput& in, const SimOptions& opt, EventLog& out) {
    EventLog buffer = std::move(out);
    out = EventLog{};
    Producer p(in, opt, std::move(buffer));
    out = p.run();
}

}  // namespace zeromem::sim
