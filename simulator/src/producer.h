// The event producer's class (internal to the simulator library): one rank's
// DeepSpeed v0.19.6 GPU allocations, step by step. Its members are defined
// one file per DeepSpeed file they follow:
//   event_producer.cpp             produce_events, the refusals, the constructor
//   producer.cpp                   event helpers, hook order, activations and
//                                  checkpointing, gradient hooks, micro step, run
//   producer_stage0.cpp            fp16/fused_optimizer.py FP16_Optimizer (stage 0)
//   producer_bf16_optimizer.cpp    runtime/bf16_optimizer.py BF16_Optimizer
//   producer_stage12.cpp           runtime/zero/stage_1_and_2.py (ZeRO-1 and 2)
//   producer_stage3.cpp            runtime/zero/stage3.py, partition_parameters.py
//   producer_param_coordinator.cpp runtime/zero/partitioned_param_coordinator.py
//   producer_step.cpp              the optimizer step of every stage
#pragma once

#include "moe_events.h"
#include "zeromem/simulator.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace zeromem::sim::detail {

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
    void loss_forward(uint32_t m);
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
    // Tokens per micro batch s·b, times a calibration profile's activation_scale (input.h
    // ResidualSettings::activation_scale: the run's micro batch or sequence were not given, so the profile
    // scales what the defaults stand in for); every activation size below is built from it.
    uint64_t sb_ = 0;
    uint64_t sbh_ = 0, sbV_ = 0;
    uint64_t sb1V_ = 0;                // elements the loss sees: b·(s-1)·V with the shift copy, else sbV_
    bool upcasts_in_forward_ = false;  // StackFacts::upcasts_logits_in_model_forward
    bool shifts_copy_ = false;         // StackFacts::shifts_logits_with_contiguous_copy
    uint64_t log_softmax_ = 0;         // the cross-entropy's saved log-softmax output (forward to its backward)
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

inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace zeromem::sim::detail
