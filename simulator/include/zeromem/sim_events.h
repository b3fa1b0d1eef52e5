// The events the simulator replays: allocations and frees of GPU tensors,
// plus the begin and end of each module's forward/backward (for spans).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zeromem::sim {

/// CUDA stream an allocation is made on. PyTorch's caching allocator hands a
/// freed block only to a request on the same stream (CUDACachingAllocator.cpp
/// get_free_block, free_block).
enum class Stream : uint8_t { compute = 0, allgather = 1, reduce = 2 };
/// "compute", "allgather" or "reduce".
const char* to_string(Stream s);

/// The phases of a training run, named as the estimator names its phases
/// (estimate.h PhaseMemory): load, forward and backward of the first
/// optimizer step, optimizer_step, and forward/backward of later steps.
enum class Phase : uint8_t { load, forward, backward, optimizer_step, steady_forward, steady_backward };
/// The phase's name as above ("load", ..., "steady_backward").
const char* to_string(Phase p);
constexpr int kPhaseCount = 6;

/// What happens.
///  - alloc: a tensor of `bytes` (requested size) is created on `stream`;
///  - free: tensor `tensor` is released (its block returns to the cache);
///  - span_begin/span_end: module `module` starts/finishes a pass (no memory);
///  - empty_cache: torch.cuda.empty_cache() (cached free segments go back).
enum class Action : uint8_t { alloc, free, span_begin, span_end, empty_cache };

/// One event. `term` names the DeepSpeed/PyTorch allocation as the estimator
/// names its terms (e.g. "fp32_partition", "ipg_bucket",
/// "allgather_flat_buffer"); it points to a string literal.
struct Event {
    Action action = Action::alloc;
    Stream stream = Stream::compute;
    Phase phase = Phase::load;
    uint32_t module = 0;     ///< index into EventLog::modules
    uint64_t tensor = 0;     ///< id of the tensor (alloc and free name the same id)
    uint64_t bytes = 0;      ///< requested bytes (alloc/free), 0 for spans
    const char* term = "";   ///< allocation name; pass name ("forward", "backward", "recompute") for spans
};

/// The ordered events of a whole run and the module names they refer to.
struct EventLog {
    std::vector<std::string> modules;  ///< "model", "model.layers.0.self_attn.q_proj", ...
    std::vector<Event> events;
};

}  // namespace zeromem::sim
