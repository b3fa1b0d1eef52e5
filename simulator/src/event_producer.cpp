// The event producer: DeepSpeed v0.19.6's GPU allocations for one rank, step
// by step. Each function is named after the DeepSpeed step it replays; the
// allocation names ("terms") follow the estimator's terms and DeepSpeed's
// own variable names. Facts: DeepSpeed v0.19.6 stage_1_and_2.py, stage3.py,
// partition_parameters.py, partitioned_param_coordinator.py (hook order).
#include "moe_events.h"
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

enum class Pass : uint8_t { forward, recompute, backward };

struct Visit {
    uint32_t module;
    Pass pass;
};

using Saved = SavedTensor;  // moe_events.h

class Producer {
public:
    Producer(const EstimateInput& in, const SimOptions& opt, EventLog&& buffer);
    EventLog run();

private:
    // --- event helpers ---
    void reserve_events();
    uint64_t alloc(const char* term, uint64_t bytes, Stream s, uint32_t m);
    void release(uint64_t id, uint32_t m);
    void span(Action a, uint32_t m, Pass p);

    // --- init (deepspeed.initialize) ---
    void init_fp16_optimizer();
    void init_zero12_flatten_bit16_groups();
    void init_zero3_partitions();
    void zero3_setup_for_real_optimizer();

    // --- BF16_Optimizer (runtime/bf16_optimizer.py) ---
    void bf16_optimizer_init();
    void bf16_update_hp_grads();
    void bf16_allreduce_gradients(uint32_t m);
    void bf16_optimizer_step(bool first);
    std::vector<std::vector<uint64_t>> module_to_device();

    // --- forward / backward ---
    std::vector<Visit> module_visits() const;
    void micro_step(uint64_t global_micro, bool boundary);
    void forward_module(uint32_t m, size_t visit, Pass p);
    void backward_module(uint32_t m, size_t visit);
    std::vector<Saved> saved_tensors(uint32_t m, bool with_scores) const;
    void save_activations(uint32_t m, Pass p);
    void loss_backward(uint32_t m);
    void free_saved(uint32_t m);

    // --- gradients ---
    void gradients(uint32_t m);
    void zero12_add_grad_to_ipg_bucket(uint32_t m, uint64_t numel);
    void zero12_reduce_ipg_grads(uint32_t m);
    void zero12_setup_buckets(uint32_t m);
    void zero12_release_ipg_buffers(uint32_t m);
    void zero12_note_partition_slice(uint64_t numel);
    void zero1_reduce_gradients_at_boundary(uint32_t m);
    void zero3_reduce_independent_p_g_buckets(uint32_t m, uint64_t numel);
    void zero3_reduce_and_partition_ipg_grads(uint32_t m);

    // --- ZeRO-3 parameter coordinator ---
    void fetch_sub_module(uint32_t m, size_t visit);
    void issue_allgather(const uint32_t* units, size_t count, uint32_t m);
    void wait_handle(size_t handle, uint32_t m);
    void prefetch(size_t visit, uint32_t m);
    void release_sub_module(uint32_t m, size_t visit);
    void release_all_gathered();

    // --- optimizer step ---
    void optimizer_step(bool first);
    void adam_state_and_temporary(uint64_t numel, bool first, uint32_t m);
    void release_full_gradients(uint32_t m);
    void zero1_free_copied_gradient(uint32_t m, size_t k, uint64_t numel);
    void zero2_keep_all_grad_tensors(bool boundary);

    const EstimateInput& in_;
    const SimOptions& opt_;
    EventLog log_;
    std::vector<SimModule> mods_;
    struct Tensor { uint64_t bytes; const char* term; Stream stream; };
    std::vector<Tensor> tensors_;  // per tensor id - 1
    Phase phase_ = Phase::load;
    uint32_t root_ = 0;  // module index used for model-wide events ("model")

    int stage_ = 0;
    uint64_t N_ = 1, bm_ = 2, ba_ = 2, bc_ = 2, sc_ = 1;
    bool half_ = true, off_opt_ = false, off_par_ = false, overlap_ = false;
    bool bf16_opt_ = false;  // DeepSpeed runs BF16_Optimizer (runs_bf16_optimizer)
    uint64_t padded_ = 0;    // BF16_Optimizer: flat group numel, aligned to 2 x N_d
    Stream ag_ = Stream::compute, rd_ = Stream::compute;
    uint64_t bucket_ = 0, T_ = 0, Tn_ = 0;
    uint64_t step_temporary_ = 0;  // optimizer temporary bytes per element stepped
    uint64_t sbh_ = 0, sbV_ = 0;
    bool complete_ = false;  // ZeRO-3 trace recorded (second micro step on)
    bool boundary_ = false;  // this micro step ends a gradient accumulation

    // activations saved per module for the current micro step
    std::vector<std::vector<uint64_t>> saved_;
    std::vector<std::optional<std::vector<Saved>>> saved_memo_[2];  // saved_tensors per module, without/with scores
    std::vector<int> first_of_layer_, last_of_layer_;
    std::vector<uint64_t> checkpoint_;  // per layer, full checkpointing input

    // gradients
    // stage 0/1: param.grad kept to the step, per module and parameter
    // (0 once ZeRO-1 has copied it into an IPG bucket at the boundary)
    std::vector<std::vector<uint64_t>> full_grads_;
    bool grads_exist_ = false;
    uint64_t grads_in_partition_ = 0;     // stage 1/2
    uint64_t all_grad_tensors_ = 0;       // stage 2: an earlier micro step's grads_in_partition
    // stage 1/2 optimizer offload: elements reduced so far in this backward,
    // counted from the end of the flat group (the replayed rank for
    // set_norm_for_param_grad_in_gpu is the last, N_d - 1), and the slices
    // of the bucket's params inside that rank's partition.
    uint64_t reduced_from_end_ = 0;
    std::vector<uint64_t> ipg_norm_slices_;
    std::vector<uint64_t> ipg_buffers_;   // stage 1/2 (per backward)
    uint64_t ipg_elements_ = 0;
    uint64_t ipg_bucket_z3_ = 0;          // stage 3 persistent IPG bucket
    std::vector<uint64_t> moments_;       // Adam m, v (kept)

    // ZeRO-3 coordinator state per parameter unit (module owning params)
    std::vector<uint32_t> unit_;          // module -> unit
    std::vector<uint64_t> unit_numel_;    // non-persistent numel
    std::vector<uint64_t> unit_padded_;   // sum of ceil(numel/N)*N
    std::vector<std::vector<uint64_t>> unit_np_params_;  // numel of non-persistent params
    std::vector<int> unit_state_;         // 0 not available, 1 in flight, 2 available
    std::vector<size_t> unit_handle_;
    std::vector<std::vector<uint64_t>> gathered_;
    // A handle's units are handle_units_[first, first + count): one shared
    // array rather than a vector per handle (a MoE preset issues one per expert
    // projection, and allocating each was a tenth of the producer's time).
    struct Handle { uint64_t flat = 0; size_t first = 0, count = 0; bool done = false; };
    std::vector<Handle> handles_;
    std::vector<uint32_t> handle_units_;
    std::vector<uint32_t> prefetch_units_;  // prefetch's scratch list, reused
    uint64_t available_numel_ = 0;
    std::vector<Visit> visits_;
    std::vector<int64_t> next_use_;
    // Prefetch walk resumes here: every visit in (current visit, cursor) has
    // a unit that is available, in flight or without partitioned params
    // (lowered when a unit with a visit before it is released).
    size_t prefetch_cursor_ = 0;
    std::vector<uint64_t> visit_prefix_;
    std::vector<uint64_t> sub_groups_;    // partition numel of each sub-group
    uint64_t persistent_padded_ = 0;      // sum of ceil(numel/N)*N over persistent params
};

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

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
    const double sb = double(in.train.seq_len) * double(in.train.micro_batch);
    const double widest = std::max({double(a.vocab_size), double(a.hidden_size), double(a.ffn_size),
                                    double(a.num_heads) * double(in.train.seq_len)});
    if (4.0 * sb * widest > kMaxTensorBytes)
        throw InputError("--micro-batch/--seq-len: micro batch " + std::to_string(in.train.micro_batch) + " x sequence " +
                         std::to_string(in.train.seq_len) + " makes an activation tensor over 2^50 bytes; the simulator "
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
    mods_ = build_modules(*in.model.arch);
    reserve_events();
    log_.modules.push_back("model");
    for (const auto& m : mods_) log_.modules.push_back(m.name);
    for (const auto& m : mods_)
        for (uint64_t p : m.params) T_ += p;
    Tn_ = ceil_div(T_, N_);
    const auto& a = *in.model.arch;
    sbh_ = static_cast<uint64_t>(t.seq_len) * static_cast<uint64_t>(t.micro_batch) * static_cast<uint64_t>(a.hidden_size);
    sbV_ = static_cast<uint64_t>(t.seq_len) * static_cast<uint64_t>(t.micro_batch) * static_cast<uint64_t>(a.vocab_size);
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
// Init
// ---------------------------------------------------------------------------

// Stage 0 (fused_optimizer.py FP16_Optimizer): the module in the model dtype
// on the GPU and, for 16-bit training, the fp32 flat master copy.
void Producer::init_fp16_optimizer() {
    for (uint32_t i = 0; i < mods_.size(); ++i)
        for (uint64_t p : mods_[i].params) alloc("parameter", bm_ * p, Stream::compute, i + 1);
    if (half_) alloc("fp32_master", 4 * T_, Stream::compute, root_);
}

// Stage 1/2 (stage_1_and_2.py __init__): the engine moves the module to the
// GPU, the optimizer flattens it into bit16_groups_flat (padded to a multiple
// of 2 x N_d elements; briefly two 16-bit copies), frees the originals and
// creates this rank's fp32 partition (single_partition_of_fp32_groups).
void Producer::init_zero12_flatten_bit16_groups() {
    std::vector<std::pair<uint64_t, uint32_t>> params;
    uint64_t largest = 0;
    for (uint32_t i = 0; i < mods_.size(); ++i)
        for (uint64_t p : mods_[i].params) {
            params.emplace_back(alloc("parameter", bm_ * p, Stream::compute, i + 1), i + 1);
            largest = std::max(largest, p);
        }
    const uint64_t padded = ceil_div(T_, 2 * N_) * 2 * N_;
    Tn_ = padded / N_;
    // The flat copy is built on the GPU when a second 16-bit copy fits
    // (capacity unknown: assumed to fit), else on the CPU after the
    // params left the GPU (stage_1_and_2.py __init__, flatten on accelerator).
    const auto cap = in_.cluster.gpu_memory;
    const bool on_gpu = !cap || bm_ * (T_ + padded) <= *cap;
    if (!on_gpu)
        for (const auto& [id, m] : params) release(id, m);
    alloc("bit16_groups_flat", bm_ * padded, Stream::compute, root_);
    if (on_gpu)
        for (const auto& [id, m] : params) release(id, m);
    if (!off_opt_) alloc("fp32_partition", 4 * Tn_, Stream::compute, root_);
    else alloc("temp_grad_buffer_for_gpu_offload", bm_ * largest, Stream::compute, root_);
}

// BF16_Optimizer.__init__ -> _setup_for_real_optimizer (runtime/
// bf16_optimizer.py), one param group: the engine has moved the module to
// the GPU; _flatten_dense_tensors_aligned appends a zero pad (align_dense_
// tensors, to a multiple of nccl_start_alignment_factor 2 x N_d elements)
// and concatenates into bf16_groups_flat on the GPU (two 16-bit copies);
// _update_storage_to_flattened_tensor points the params into it, freeing
// the originals. The fp32 master partition is
// bf16_dp_partitions[rank].clone().float() (the 16-bit clone goes with the
// statement), and fp32_groups_gradients_flat is zeros_like(bf16_groups_flat,
// dtype=grad_acc_dtype): the whole flat group, not a partition, kept to the
// end of training (the estimator's bf16_optimizer_fp32_grad_buffer).
void Producer::bf16_optimizer_init() {
    std::vector<std::pair<uint64_t, uint32_t>> params;
    for (uint32_t i = 0; i < mods_.size(); ++i)
        for (uint64_t p : mods_[i].params) params.emplace_back(alloc("parameter", bm_ * p, Stream::compute, i + 1), i + 1);
    padded_ = ceil_div(T_, 2 * N_) * 2 * N_;
    Tn_ = padded_ / N_;
    const uint64_t pad = padded_ > T_ ? alloc("alignment_padding", bm_ * (padded_ - T_), Stream::compute, root_) : 0;
    alloc("bf16_groups_flat", bm_ * padded_, Stream::compute, root_);
    release(pad, root_);
    for (const auto& [id, m] : params) release(id, m);
    const uint64_t clone = alloc("bf16_partition_clone", bm_ * Tn_, Stream::compute, root_);
    alloc("fp32_partition", 4 * Tn_, Stream::compute, root_);
    release(clone, root_);
    alloc("bf16_optimizer_fp32_grad_buffer", ba_ * padded_, Stream::compute, root_);
}

// Stage 3 (partition_parameters.py zero.Init, stage3.py __init__): persistent
// params stay whole; the rest are partitioned (ceil(numel/N_d) each) and
// defragmented into lp_param_buffer through host memory; then the
// grad_partitions_flat_buffer, the IPG bucket, the fp32 partitions per
// sub-group and the transient fp32 gradient_buffer.
// engine.py _configure_distributed_model without zero.Init: module.to(device)
// puts every parameter, whole, on the GPU. Returns the tensor ids per module
// and parameter.
std::vector<std::vector<uint64_t>> Producer::module_to_device() {
    std::vector<std::vector<uint64_t>> ids(mods_.size());
    for (uint32_t i = 0; i < mods_.size(); ++i)
        for (uint64_t p : mods_[i].params) ids[i].push_back(alloc("parameter", bm_ * p, Stream::compute, i + 1));
    return ids;
}

void Producer::init_zero3_partitions() {
    const auto& z = in_.zero;
    unit_.resize(mods_.size());
    unit_numel_.assign(mods_.size(), 0);
    unit_padded_.assign(mods_.size(), 0);
    unit_np_params_.assign(mods_.size(), {});
    unit_state_.assign(mods_.size(), 0);
    unit_handle_.assign(mods_.size(), 0);
    gathered_.assign(mods_.size(), {});
    uint64_t persistent_total = 0, parts = 0, sub_part = 0;
    std::vector<std::pair<uint64_t, uint32_t>> partitions;
    // Without zero.Init every rank holds the whole 16-bit module on its GPU
    // first (engine.py _configure_distributed_model, module.to(device)); the
    // estimator's load term "whole 16-bit module on every GPU before
    // partitioning". Each parameter is then partitioned in place
    // (parameter_offload.py _convert_to_zero_parameters, partition_parameters.py
    // _partition_param: the partition is made, then param.data is freed),
    // except the persistent ones, which stay whole.
    const bool no_init = !z.zero_init;
    const std::vector<std::vector<uint64_t>> whole = no_init ? module_to_device() : std::vector<std::vector<uint64_t>>{};
    for (uint32_t i = 0; i < mods_.size(); ++i) {
        unit_[i] = mods_[i].shares_params_with >= 0 ? static_cast<uint32_t>(mods_[i].shares_params_with) : i;
        for (size_t k = 0; k < mods_[i].params.size(); ++k) {
            const uint64_t p = mods_[i].params[k];
            const uint64_t part = ceil_div(p, N_);
            parts += part;
            // parameter_offload.mark_persistent_parameters
            const bool persistent = static_cast<int64_t>(p) <= z.stage3_param_persistence_threshold &&
                                    static_cast<int64_t>(persistent_total + p) <= z.stage3_model_persistence_threshold;
            if (persistent) {
                persistent_total += p;
                persistent_padded_ += ceil_div(p, N_) * N_;
                if (!no_init) alloc("persistent_parameter", bm_ * p, Stream::compute, i + 1);
            } else {
                unit_numel_[i] += p;
                unit_padded_[i] += part * N_;
                unit_np_params_[i].push_back(p);
            }
            if (!off_par_) partitions.emplace_back(alloc("param_partition", bm_ * part, Stream::compute, i + 1), i + 1);
            if (no_init && !persistent) release(whole[i][k], i + 1);
            // stage3.py _create_fp16_sub_groups: a sub-group closes once its
            // partition numel reaches sub_group_size elements.
            sub_part += part;
            if (sub_part >= static_cast<uint64_t>(z.sub_group_size)) {
                sub_groups_.push_back(sub_part);
                sub_part = 0;
            }
        }
    }
    if (sub_part > 0) sub_groups_.push_back(sub_part);
    Tn_ = parts;
    if (!off_par_) {
        // stage3.py defragment: partitions copied to a host buffer and freed,
        // gc + empty_cache, then the flat buffer is copied back to the GPU.
        for (const auto& [id, m] : partitions) release(id, m);
        log_.events.push_back({Action::empty_cache, Stream::compute, phase_, root_, 0, 0, "empty_cache"});
        alloc("lp_param_buffer", bm_ * parts, Stream::compute, root_);
    }
    zero3_setup_for_real_optimizer();
}

// stage3.py _setup_for_real_optimizer, in its order: _create_fp32_partitions
// (one fp32 partition per sub-group), initialize_optimizer_states (a zeroed
// fp32 gradient_buffer of the largest sub-group, a local freed when the
// function returns after group.grad = None), then the IPG bucket
// (contiguous_gradients) and grad_partitions_flat_buffer. The
// gradient_buffer is therefore never alive beside the bucket or the flat
// gradient buffer (the estimator's zero3_init_gradient_buffer moment).
void Producer::zero3_setup_for_real_optimizer() {
    if (!off_opt_) {
        uint64_t largest = 0;
        for (uint64_t sg : sub_groups_) {
            alloc("fp32_partition", 4 * sg, Stream::compute, root_);
            largest = std::max(largest, sg);
        }
        release(alloc("fp32_gradient_buffer", 4 * largest, Stream::compute, root_), root_);
    }
    if (in_.zero.contiguous_gradients) ipg_bucket_z3_ = alloc("ipg_bucket", bc_ * bucket_, Stream::compute, root_);
    if (!off_opt_) alloc("grad_partitions_flat_buffer", ba_ * Tn_, Stream::compute, root_);
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
    const uint64_t s = static_cast<uint64_t>(t.seq_len), b = static_cast<uint64_t>(t.micro_batch);
    const uint64_t d = static_cast<uint64_t>(a.head_dim > 0 ? a.head_dim : a.hidden_size / a.num_heads);
    const uint64_t sbq = s * b * static_cast<uint64_t>(a.num_heads) * d;
    const uint64_t sbkv = s * b * static_cast<uint64_t>(a.num_kv_heads) * d;
    const uint64_t sbf = s * b * static_cast<uint64_t>(a.ffn_size);
    const uint64_t scores = static_cast<uint64_t>(a.num_heads) * s * s * b;
    const uint64_t k = sc_;
    const std::string& r = mods_[m].role;
    std::vector<Saved> v;
    if (moe_saved_tensors(mods_[m], a, s * b, bm_, k, v)) return v;
    // Dropout masks (1 byte per element) only where the model's dropout has
    // p > 0 (ModelArch::*_dropout; at p = 0 at::dropout returns its input).
    if (r == "embed_tokens") {
        if (a.embedding_dropout > 0.0) v.push_back({"embedding_dropout_mask", k * sbh_});
    }
    else if (r == "input_layernorm" || r == "post_attention_layernorm") v.push_back({"layernorm_input", k * 2 * sbh_});
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
    } else if (r == "final_norm") v.push_back({"layernorm_input", k * 2 * sbh_});
    else if (r == "lm_head") {
        // HF models: 16-bit logits, their fp32 upcast, the fp32 log-softmax of the cross-entropy.
        v.push_back({"lm_head_input", k * 2 * sbh_});
        v.push_back({"logits", bm_ * sbV_});
        if (half_) v.push_back({"logits_fp32", 4 * sbV_});
        v.push_back({"log_softmax", 4 * sbV_});
    }
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

// Cross-entropy backward: the fp32 gradient of the log-softmax input, then
// the 16-bit gradient of the logits.
void Producer::loss_backward(uint32_t m) {
    const uint64_t g32 = alloc("logits_grad_fp32", 4 * sbV_, Stream::compute, m + 1);
    const uint64_t g16 = alloc("logits_grad", bm_ * sbV_, Stream::compute, m + 1);
    release(g32, m + 1);
    saved_[m].push_back(g16);
}

void Producer::backward_module(uint32_t m, size_t visit) {
    span(Action::span_begin, m, Pass::backward);
    if (stage_ == 3) fetch_sub_module(m, visit);
    if (mods_[m].role == "lm_head") loss_backward(m);
    uint64_t recomputed = 0;
    if (in_.train.checkpointing == Checkpointing::selective && !in_.train.flash_attention && mods_[m].role == "o_proj") {
        // Selective recompute: the attention core (scores, softmax, the dropout mask where p > 0) is rebuilt
        // for this backward: attention_score_factor as²b.
        const auto& a = *in_.model.arch;
        const uint64_t sc = static_cast<uint64_t>(a.num_heads) * static_cast<uint64_t>(in_.train.seq_len) *
                            static_cast<uint64_t>(in_.train.seq_len) * static_cast<uint64_t>(in_.train.micro_batch);
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

// stage_1_and_2.py setup_buckets: one buffer of reduce_bucket_size elements
// in the model dtype, a second with overlap_comm (double buffering).
void Producer::zero12_setup_buckets(uint32_t m) {
    if (!ipg_buffers_.empty()) return;
    for (int i = 0; i < (overlap_ ? 2 : 1); ++i)
        ipg_buffers_.push_back(alloc("ipg_bucket", bm_ * bucket_, Stream::compute, m + 1));
}

// stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads.
void Producer::zero12_add_grad_to_ipg_bucket(uint32_t m, uint64_t numel) {
    zero12_setup_buckets(m);
    if (ipg_elements_ + numel > bucket_ && ipg_elements_ > 0) zero12_reduce_ipg_grads(m);
    ipg_elements_ += numel;
    zero12_note_partition_slice(numel);
    if (numel > bucket_) zero12_reduce_ipg_grads(m);  // extra large param: reduced directly
}

// stage_1_and_2.py reduce_ipg_grads -> average_tensor -> allreduce_bucket:
// the slices are flattened into a new tensor and all-reduced; this rank's
// part goes into grads_in_partition (allocated at the first copy, stages 1 and 2:
// copy_grads_in_partition).
void Producer::zero12_reduce_ipg_grads(uint32_t m) {
    if (ipg_elements_ == 0) return;
    const uint64_t flat = alloc("allreduce_flat_buffer", bm_ * ipg_elements_, rd_, m + 1);
    if (stage_ >= 1 && !off_opt_ && grads_in_partition_ == 0)
        grads_in_partition_ = alloc("grads_in_partition", bm_ * Tn_, Stream::compute, root_);
    release(flat, m + 1);
    ipg_elements_ = 0;
    // copy_grads_in_partition with optimizer offload, at the boundary:
    // set_norm_for_param_grad_in_gpu takes .double().norm(2) of each
    // param's slice in this rank's partition (8 B per element, transient).
    for (uint64_t slice : ipg_norm_slices_)
        if (slice > 0) release(alloc("grad_norm_double", 8 * slice, Stream::compute, m + 1), m + 1);
    ipg_norm_slices_.clear();
}

// Records, for a param entering the bucket at the boundary of an offloaded
// ZeRO-1/2 run, its slice in the last rank's partition (the flat group's
// last Tn elements, padding included, in backward order).
void Producer::zero12_note_partition_slice(uint64_t numel) {
    if (!off_opt_ || !boundary_) return;
    const uint64_t before = reduced_from_end_;
    reduced_from_end_ += numel;
    ipg_norm_slices_.push_back(before >= Tn_ ? 0 : std::min(numel, Tn_ - before));
}

void Producer::zero12_release_ipg_buffers(uint32_t m) {
    for (uint64_t id : ipg_buffers_) release(id, m);
    ipg_buffers_.clear();
}

// ZeRO-1 with contiguous_gradients: reduce_independent_p_g_buckets_and_remove_grads
// copies param.grad into the IPG bucket and points param.grad at the copy,
// so the full 16-bit gradient's storage is freed. An extra-large parameter
// (numel > reduce_bucket_size) is reduced from its own grad, which stays to
// the step (free_grad_in_param_list) unless it lies in this rank's partition.
void Producer::zero1_free_copied_gradient(uint32_t m, size_t k, uint64_t numel) {
    if (!in_.zero.contiguous_gradients || numel > bucket_) return;
    release(full_grads_[m][k], m + 1);
    full_grads_[m][k] = 0;
}

// ZeRO-1 without overlap_comm: at the accumulation boundary
// reduce_gradients walks the params through the IPG buckets after the
// backward in group order (for group in bit16_groups: for param in group),
// i.e. model order (with overlap_comm the hooks of the boundary backward do
// it, in backward order). The replayed rank is 0: its partition is the first
// Tn elements of the flat group, so the first reduced bucket holds its
// params and copy_grads_in_partition allocates grads_in_partition there,
// while every later param's full 16-bit gradient still waits for its bucket
// (stage_1_and_2.py reduce_gradients -> reduce_ipg_grads -> copy_grads_in_partition).
void Producer::zero1_reduce_gradients_at_boundary(uint32_t m) {
    reduced_from_end_ = 0;  // rank 0: counted from the start, no padding before it
    uint64_t offset = 0;    // the param's first element in the flat group
    for (uint32_t i = 0; i < static_cast<uint32_t>(mods_.size()); ++i)
        for (size_t k = 0; k < mods_[i].params.size(); ++k) {
            const uint64_t p = mods_[i].params[k];
            zero12_setup_buckets(m);
            if (ipg_elements_ + p > bucket_ && ipg_elements_ > 0) zero12_reduce_ipg_grads(m);
            ipg_elements_ += p;
            zero12_note_partition_slice(p);
            zero1_free_copied_gradient(i, k, p);
            if (p > bucket_) {
                zero12_reduce_ipg_grads(m);  // extra large param: reduced directly
                // copy_grads_in_partition points param.grad at its slice of
                // grads_in_partition when the param overlaps rank 0's partition.
                if (!off_opt_ && in_.zero.contiguous_gradients && offset < Tn_) {
                    release(full_grads_[i][k], i + 1);
                    full_grads_[i][k] = 0;
                }
            }
            offset += p;
        }
    zero12_reduce_ipg_grads(m);
    zero12_release_ipg_buffers(m);
}

// stage3.py reduce_independent_p_g_buckets_and_remove_grads: flush when the
// bucket would overflow, then copy the grad into the contiguous bucket.
void Producer::zero3_reduce_independent_p_g_buckets(uint32_t m, uint64_t numel) {
    const uint64_t padded = ceil_div(numel, N_) * N_;
    if (ipg_elements_ + padded > bucket_ && ipg_elements_ > 0) zero3_reduce_and_partition_ipg_grads(m);
    ipg_elements_ += padded;
}

// stage3.py __reduce_and_partition_ipg_grads -> reduce_scatter_coalesced
// (comm/coalesced_collectives.py): a padded, interleaved torch.cat of the
// bucket on the reduce stream; this rank's slice goes to
// grad_partitions_flat_buffer (partition_grads).
void Producer::zero3_reduce_and_partition_ipg_grads(uint32_t m) {
    if (ipg_elements_ == 0) return;
    release(alloc("reduce_scatter_concat_buffer", bc_ * ipg_elements_, rd_, m + 1), m + 1);
    ipg_elements_ = 0;
}

// ---------------------------------------------------------------------------
// ZeRO-3 parameter coordinator (partitioned_param_coordinator.py)
// ---------------------------------------------------------------------------

// partition_parameters.py all-gather: one flat buffer of
// sum(ceil(numel/N)*N) elements on the all-gather stream (with offloaded
// params, this rank's partition is first copied to the GPU).
void Producer::issue_allgather(const uint32_t* units, size_t count, uint32_t m) {
    Handle h;
    uint64_t padded = 0;
    for (size_t j = 0; j < count; ++j) padded += unit_padded_[units[j]];
    uint64_t staged = 0;
    if (off_par_) staged = alloc("offloaded_partition_copy", bm_ * padded / N_, ag_, m + 1);
    h.flat = alloc("allgather_flat_buffer", bm_ * padded, ag_, m + 1);
    release(staged, m + 1);
    h.first = handle_units_.size();
    h.count = count;
    handle_units_.insert(handle_units_.end(), units, units + count);
    for (size_t j = 0; j < count; ++j) {
        const uint32_t u = units[j];
        unit_state_[u] = 1;
        unit_handle_[u] = handles_.size();
        available_numel_ += unit_numel_[u];
    }
    handles_.push_back(std::move(h));
}

// AllGatherCoalescedHandle.wait: every param of the handle is built by a
// torch.cat of the per-rank slices (a copy); then the flat buffer goes.
void Producer::wait_handle(size_t hi, uint32_t m) {
    Handle& h = handles_[hi];
    if (h.done) return;
    for (size_t j = h.first; j < h.first + h.count; ++j) {
        const uint32_t u = handle_units_[j];
        for (uint64_t p : unit_np_params_[u]) gathered_[u].push_back(alloc("gathered_parameter", bm_ * p, ag_, m + 1));
        unit_state_[u] = 2;
    }
    release(h.flat, m + 1);
    h.done = true;
}

// _fetch_sub_module_impl: gather the module's missing params, wait, then
// (trace complete) prefetch ahead.
void Producer::fetch_sub_module(uint32_t m, size_t visit) {
    const uint32_t u = unit_[m];
    if (unit_numel_[u] > 0) {
        if (unit_state_[u] == 0) issue_allgather(&u, 1, m);
        if (unit_state_[u] == 1) wait_handle(unit_handle_[u], m);
    }
    if (complete_) prefetch(visit, m);
}

// Prefetch: walk the trace collecting units not available until
// min(stage3_prefetch_bucket_size, stage3_max_live_parameters - available)
// elements are collected; one coalesced all-gather.
void Producer::prefetch(size_t visit, uint32_t m) {
    const auto& z = in_.zero;
    const int64_t room = z.stage3_max_live_parameters - static_cast<int64_t>(available_numel_);
    const int64_t budget = std::min<int64_t>(z.stage3_prefetch_bucket_size, room);
    if (budget <= 0) return;
    std::vector<uint32_t>& units = prefetch_units_;
    units.clear();
    uint64_t numel = 0;
    size_t i = std::max(visit + 1, prefetch_cursor_);
    for (; i < visits_.size() && static_cast<int64_t>(numel) < budget; ++i) {
        const uint32_t u = unit_[visits_[i].module];
        if (unit_numel_[u] == 0 || unit_state_[u] != 0) continue;
        if (std::find(units.begin(), units.end(), u) != units.end()) continue;
        units.push_back(u);
        numel += unit_numel_[u];
    }
    prefetch_cursor_ = i;  // the walk is linear in the visits, not visits x look-ahead (MoE: ~640 experts ahead)
    if (!units.empty()) issue_allgather(units.data(), units.size(), m);
}

// release_sub_module: free the gathered params unless (trace complete) the
// unit is used again within stage3_max_reuse_distance elements.
void Producer::release_sub_module(uint32_t m, size_t visit) {
    const uint32_t u = unit_[m];
    if (unit_state_[u] != 2) return;
    if (complete_ && next_use_[visit] >= 0) {
        const uint64_t walked = visit_prefix_[static_cast<size_t>(next_use_[visit])] - visit_prefix_[visit + 1];
        if (static_cast<int64_t>(walked) < in_.zero.stage3_max_reuse_distance) return;
    }
    for (uint64_t id : gathered_[u]) release(id, m + 1);
    gathered_[u].clear();
    unit_state_[u] = 0;
    available_numel_ -= unit_numel_[u];
    if (next_use_[visit] >= 0) prefetch_cursor_ = std::min(prefetch_cursor_, static_cast<size_t>(next_use_[visit]));
}

void Producer::release_all_gathered() {
    prefetch_cursor_ = 0;
    for (size_t hi = 0; hi < handles_.size(); ++hi)
        if (!handles_[hi].done) wait_handle(hi, root_);
    for (uint32_t u = 0; u < unit_state_.size(); ++u) {
        if (unit_state_[u] != 2) continue;
        for (uint64_t id : gathered_[u]) release(id, u + 1);
        gathered_[u].clear();
        unit_state_[u] = 0;
        available_numel_ -= unit_numel_[u];
    }
    handles_.clear();
    handle_units_.clear();
}

// ---------------------------------------------------------------------------
// One micro step and the optimizer step
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

// BF16_Optimizer.backward_epilogue -> update_hp_grads (immediate_grad_update
// false, DeepSpeed's default; engine.py _backward_epilogue calls it before
// allreduce_gradients): per parameter, _update_hp_grad adds
// lp.grad.to(fp32) into its view of the fp32 gradient buffer; the fp32 copy
// (4 B per element of that parameter) goes with the statement. The bf16
// param.grad stays: backward_prologue's clear_lp_grads zeroes it in place
// (set_to_none=False) and autograd accumulates into it.
void Producer::bf16_update_hp_grads() {
    if (ba_ == bm_) return;  // grad_acc_dtype bf16: .to() returns the tensor itself
    for (uint32_t i = 0; i < mods_.size(); ++i) {
        if (mods_[i].shares_params_with >= 0) continue;  // tied: one parameter, one grad
        for (uint64_t p : mods_[i].params) release(alloc("lp_grad_fp32_copy", ba_ * p, Stream::compute, i + 1), i + 1);
    }
}

// engine.py allreduce_gradients at the accumulation boundary (BF16_Optimizer
// has no reduce_gradients) -> buffered_allreduce_fallback with
// get_grads_for_reduction() = [fp32_groups_gradients_flat] ->
// allreduce_no_retain -> allreduce_and_copy -> allreduce_bucket: flatten of
// one tensor is a view (torch/csrc/utils/tensor_flatten.h); on the default
// stream (the engine uses no side stream here), the all-reduce
// is in place unless communication_data_type (bf16 by default with bf16)
// differs from the buffer's dtype: tensor.to(communication_data_type), the
// whole flat buffer, copied back and freed (the estimator's
// bf16_optimizer_allreduce_cast).
void Producer::bf16_allreduce_gradients(uint32_t m) {
    if (bc_ == ba_) return;
    release(alloc("bf16_optimizer_allreduce_cast", bc_ * padded_, Stream::compute, m), m);
}

// BF16_Optimizer.step: the norm and clip work per gradient view (no
// buffer), param_partition.grad = the fp32 buffer's partition view (no copy
// when grad_acc_dtype is fp32), optimizer.step() on the fp32 partition
// (m and v created at the first step; torch's foreach temporary),
// update_lp_params copies into this rank's bf16 partition and all-gathers
// in place into bf16_groups_flat (runtime/utils.py all_gather_dp_groups),
// clear_hp_grads zeroes the fp32 buffer (kept); then the engine
// (_take_model_step, bfloat16_enabled) calls optimizer.zero_grad(), whose
// clear_lp_grads(set_to_none=True) frees the bf16 param.grads.
void Producer::bf16_optimizer_step(bool first) {
    const uint32_t m = root_;
    const uint64_t cast = ba_ != 4 ? alloc("fp32_gradient_partition", 4 * Tn_, Stream::compute, m) : 0;
    adam_state_and_temporary(Tn_, first, m);
    release(cast, m);  // grad_acc_dtype not fp32: param_partition.grad = None after the step
    release_full_gradients(m);
}

// stage_1_and_2.py independent_gradient_partition_epilogue (no offload):
// all_grad_tensors keeps the param.grad views of this micro step's
// grads_in_partition, and _release_ipg_buffers sets grads_in_partition =
// None, so the next micro step's copy_grads_in_partition allocates a new one
// beside it; at the boundary all_grad_tensors = None drops the old storage.
// (With more than two micro steps the middle partitions are dropped here as
// their views are replaced; one earlier partition is kept.)
void Producer::zero2_keep_all_grad_tensors(bool boundary) {
    if (off_opt_) return;
    if (boundary) {
        release(all_grad_tensors_, root_);
        all_grad_tensors_ = 0;
        return;
    }
    if (all_grad_tensors_ == 0) all_grad_tensors_ = grads_in_partition_;
    else release(grads_in_partition_, root_);
    grads_in_partition_ = 0;
}

void Producer::adam_state_and_temporary(uint64_t numel, bool first, uint32_t m) {
    if (first) {
        // torch.optim / FusedAdam state, created at the first step.
        const Optimizer o = in_.train.optimizer;
        if (o == Optimizer::sgd) {
            moments_.push_back(alloc("momentum_buffer", 4 * numel, Stream::compute, m));
        } else if (o != Optimizer::adam && o != Optimizer::adamw) {
            // Other optimizers on the flat partition (estimator
            // optimizer_state.h count_optimizer_state): state1 and state2
            // with their 8-bit absmax. Stage 0's per-tensor shapes are not
            // replayed: one flat tensor.
            const OptimizerStateBytes st = count_optimizer_state(o, flat_tensors(numel, numel));
            if (st.first > 0) moments_.push_back(alloc("state1", st.first, Stream::compute, m));
            if (st.second > 0) moments_.push_back(alloc("state2", st.second, Stream::compute, m));
        } else {
            moments_.push_back(alloc("exp_avg", 4 * numel, Stream::compute, m));
            moments_.push_back(alloc("exp_avg_sq", 4 * numel, Stream::compute, m));
        }
    }
    // torch AdamW's multi-tensor step: an fp32 temporary of the partition
    // (two on torch 2.0); none for fused kernels and SGD. The kernel is the
    // estimator's choice (terms::step_kernel_for).
    if (step_temporary_ > 0) release(alloc("optimizer_temporary", step_temporary_ * numel, Stream::compute, m), m);
}

// The step's GPU moments (the estimator's terms::StepMoments): the flat
// gradient copy and its fp32 cast with the 16-bit gradients alive, then the
// optimizer with only the fp32 gradient and its temporary.
void Producer::optimizer_step(bool first) {
    phase_ = Phase::optimizer_step;
    const uint32_t m = root_;
    if (bf16_opt_) {
        bf16_optimizer_step(first);
        return;
    }
    if (stage_ == 0) {
        // fp16/fused_optimizer.py step: per-parameter p.grad.to(fp32) copies
        // and their _flatten_dense_tensors with the 16-bit grads alive; the
        // copies go with the statement, then p.grad = None before the step.
        const uint64_t copies = half_ ? alloc("fp32_gradient_copies", 4 * T_, Stream::compute, m) : 0;
        const uint64_t flat = half_ ? alloc("fp32_flat_gradients", 4 * T_, Stream::compute, m) : 0;
        release(copies, m);
        if (half_) release_full_gradients(m);
        adam_state_and_temporary(T_, first, m);
        release(flat, m);
    } else if (stage_ <= 2) {
        if (!off_opt_) {
            // stage_1_and_2.py step: free_grad_in_param_list(params_not_in_partition),
            // flat_grad_partition = flatten(averaged_gradients), .to(fp32),
            // `del flat_grad_partition`, free_grad_in_param_list(params_in_partition)
            // (the last views of grads_in_partition), then _optimizer_step.
            release_full_gradients(m);
            const uint64_t flat = alloc("flat_gradient_partition", ba_ * Tn_, Stream::compute, m);
            const uint64_t g32 = alloc("fp32_gradient_partition", 4 * Tn_, Stream::compute, m);
            release(flat, m);
            release(grads_in_partition_, m);
            grads_in_partition_ = 0;
            adam_state_and_temporary(Tn_, first, m);
            release(g32, m);
        }
        // all_gather_dp_groups: in place into bit16_groups_flat (no buffer).
    } else if (!off_opt_) {
        // stage3.py _prepare_fp32_grad_for_sub_group, per sub-group:
        // flatten(averaged_gradients).to(fp32) frees the flat copy with the
        // statement (no copy when the gradients are already fp32); the fp32
        // gradient lives to _release_sub_group.
        for (uint64_t sg : sub_groups_) {
            const uint64_t flat = alloc("flat_gradient_sub_group", ba_ * sg, Stream::compute, m);
            uint64_t g32 = flat;
            if (ba_ != 4) {
                g32 = alloc("fp32_gradient_sub_group", 4 * sg, Stream::compute, m);
                release(flat, m);
            }
            adam_state_and_temporary(sg, first, m);
            release(g32, m);
        }
    }
    // stage3.py _post_step: persistent params are all-gathered again from
    // their updated partitions (one flat buffer, replacing param.data).
    if (stage_ == 3 && persistent_padded_ > 0)
        release(alloc("allgather_flat_buffer", bm_ * persistent_padded_, ag_, m), m);
    // zero_grad(set_to_none): what the step left (fp32 training at stage 0,
    // optimizer offload at stages 1/2).
    release_full_gradients(m);
    release(grads_in_partition_, m);
    grads_in_partition_ = 0;
}

void Producer::release_full_gradients(uint32_t m) {
    for (auto& module_grads : full_grads_)
        for (uint64_t& id : module_grads) {
            release(id, m);
            id = 0;
        }
    grads_exist_ = false;
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

}  // namespace

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
