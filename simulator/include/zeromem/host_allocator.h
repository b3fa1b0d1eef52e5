// The host (CPU RAM) side of the simulator: a model of PyTorch's pinned
// CachingHostAllocator beside plain pageable memory, the host events
// DeepSpeed v0.19.6 emits under ZeRO offload, and their replay. Kept apart
// from the GPU allocator (caching_allocator.h): the allocator only consumes
// requests; the producer (host_events.cpp) names each request after the
// estimator's host term (estimator terms.h host_terms) so a disagreement
// points at one term.
// Facts: PyTorch aten/src/ATen/core/CachingHostAllocator.h allocate/free;
// DeepSpeed v0.19.6 stage_1_and_2.py, stage3.py, partition_parameters.py.
#pragma once

#include "zeromem/sim_events.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace zeromem {
struct EstimateInput;
}

namespace zeromem::sim {

/// Rules of PyTorch's CachingHostAllocator (aten/src/ATen/core/
/// CachingHostAllocator.h allocate/free).
struct HostAllocatorConfig {
    /// torch >= 1.11 (PRs #68906/#69299): a pinned request is rounded up to
    /// c10::llvm::PowerOf2Ceil(bytes) and the whole rounded block is pinned.
    bool round_pinned = true;
    /// torch >= 2.5 (PR #134154, per-power-of-two free lists): a cached block
    /// serves only a request of the same (rounded) size. Before: best fit, the
    /// smallest cached block at least as large as the request.
    bool same_size_reuse = true;
};

/// The rules PyTorch `torch_version` follows, read from the stack-facts table
/// the estimator reads (stack_facts.h rounds_pinned_to_power_of_two from 1.11,
/// reuses_pinned_same_size_only from 2.5). Throws InputError naming
/// --torch-version for a malformed version.
HostAllocatorConfig host_allocator_config(const std::string& torch_version);

/// How a host tensor is held.
///  - pageable: ordinary CPU memory (torch.empty/zeros on the CPU): exact,
///    returned to the OS on free;
///  - pinned: through PyTorch's CachingHostAllocator (Tensor.pin_memory(),
///    DeepSpeed's get_accelerator().pin_memory): rounded and cached;
///  - locked: page-locked outside PyTorch's cache (DeepNVMe
///    aio_handle.new_cpu_locked_tensor, posix_memalign + mlock): exact,
///    returned on free.
enum class HostKind : uint8_t { pageable, pinned, locked };

/// A model of host memory for one process. Pinned requests go through the
/// caching host allocator: rounded per HostAllocatorConfig, a freed block is
/// kept (cached, still pinned and resident, never returned to the OS: only
/// torch._C._host_emptyCache() does, which DeepSpeed never calls) and reused
/// by a later request it fits. Pageable requests are exact and go back to the
/// OS on free (glibc malloc serves large blocks with mmap and unmaps them on
/// free, mallopt(3) M_MMAP_THRESHOLD).
/// Only consumes requests; all sizes in bytes.
class HostAllocator {
public:
    explicit HostAllocator(HostAllocatorConfig cfg = {});

    /// Allocates `bytes` of `kind`; returns a handle for free().
    uint32_t malloc(uint64_t bytes, HostKind kind);
    /// Frees the tensor `handle`. Throws std::logic_error for an unknown or
    /// already freed handle.
    void free(uint32_t handle);

    /// Live requested bytes (what the program asked for, unrounded).
    uint64_t allocated() const { return allocated_; }
    /// Resident bytes: live pageable + every pinned block, in use or cached.
    uint64_t resident() const { return pageable_ + pinned_; }
    /// Page-locked bytes: every pinned block (in use or cached) and every live locked tensor.
    uint64_t pinned() const { return pinned_; }
    /// Pinned bytes in blocks currently cached (free but still pinned).
    uint64_t cached() const { return cached_; }
    /// The block size a pinned request of `bytes` gets (PowerOf2Ceil when
    /// rounding, else `bytes`).
    uint64_t pinned_block_size(uint64_t bytes) const;

private:
    struct Block {
        uint64_t requested = 0, size = 0;
        HostKind kind = HostKind::pageable;
        bool live = false;
    };
    HostAllocatorConfig cfg_;
    std::vector<Block> blocks_;            // handle - 1 -> block
    std::multimap<uint64_t, uint32_t> free_pinned_;  // cached block size -> block index
    uint64_t allocated_ = 0, pageable_ = 0, pinned_ = 0, cached_ = 0;  // pinned_ includes locked
};

/// What a host event does: allocate or free a host tensor, write bytes to
/// NVMe (a swap file grows; `bytes` is the file's size), or mark the start
/// of a phase (no memory).
enum class HostAction : uint8_t { alloc, free, nvme_write, phase_begin };

/// One host event. `term` names the allocation as the estimator's host term
/// does (terms.cpp host_terms), a string literal.
struct HostEvent {
    HostAction action = HostAction::alloc;
    Phase phase = Phase::load;
    uint32_t module = 0;   ///< index into HostEventLog::modules (0: the whole model)
    uint64_t tensor = 0;   ///< id; alloc and free name the same id
    uint64_t bytes = 0;    ///< requested bytes
    HostKind kind = HostKind::pageable;
    const char* term = "";
};

/// The ordered host events of one rank.
struct HostEventLog {
    std::vector<std::string> modules;
    std::vector<HostEvent> events;
    uint64_t ranks_per_node = 1;  ///< every rank of a node replays the same events
};

/// The host events of one rank for `in` (stage 0-3, offload_optimizer
/// cpu/nvme, offload_param cpu/nvme, pin_memory, zero.Init, load path,
/// DeepSpeed and torch versions) over `steps` optimizer steps: the process
/// baseline (ResidualSettings::host_process_overhead), the model load, what
/// deepspeed.initialize builds on the host and the lazy CPU-Adam states.
/// Each step is a function named after the DeepSpeed code it replays
/// (host_events.cpp). Needs in.model.arch; throws InputError as
/// produce_events does for inputs the simulator does not replay.
HostEventLog produce_host_events(const EstimateInput& in, int64_t steps);

/// "pageable", "pinned" or "locked".
const char* to_string(HostKind k);

/// One row of the host timeline.
struct HostTimelinePoint {
    uint64_t t = 0;          ///< host event index
    const char* term = "";
    Phase phase = Phase::load;
    uint32_t module = 0;
    int64_t bytes = 0;       ///< requested bytes, + alloc, - free (NVMe writes: 0)
    HostKind kind = HostKind::pageable;
    uint64_t allocated = 0, resident = 0, pinned_bytes = 0, nvme = 0;  ///< after the event, per rank, bytes
};

/// Peak host RAM within one phase, per rank, bytes.
struct HostPhasePeak {
    Phase phase = Phase::load;
    uint64_t peak_resident = 0, peak_pinned = 0;
    bool seen = false;
};

/// The host replay of one rank, with per-node figures (ranks_per_node
/// identical ranks).
struct HostResult {
    std::vector<std::string> modules;
    std::vector<HostTimelinePoint> timeline;
    std::vector<HostPhasePeak> phases;  ///< in Phase order, only phases that occurred
    uint64_t ranks_per_node = 1;
    uint64_t peak_per_rank = 0;         ///< peak resident host RAM of one rank, bytes
    uint64_t peak_pinned = 0;           ///< peak pinned bytes of one rank
    uint64_t nvme = 0;                  ///< NVMe bytes of one rank (swap files) at the end
    uint64_t peak_t = 0;
    std::string peak_event, peak_module;
    Phase peak_phase = Phase::load;
    /// Set when the GPU replay ran out of memory: the host events stop after
    /// this phase (the GPU out-of-memory's), as the job would.
    std::optional<Phase> stopped_at;
    uint64_t peak_per_node() const { return peak_per_rank * ranks_per_node; }
    /// Peak resident bytes per rank over the given phases (0 if none seen).
    uint64_t peak_in(std::initializer_list<Phase> phases) const;
};

/// Feeds `log` to a HostAllocator configured by `cfg` and records the
/// timeline, the peaks per phase and the NVMe bytes.
HostResult replay_host(const HostEventLog& log, HostAllocatorConfig cfg);

/// produce_host_events + replay_host with the config of in.stack.torch.
/// With `stop_after` (the phase of a GPU out-of-memory), the events after
/// the first event of a later phase are dropped and stopped_at is set.
HostResult simulate_host(const EstimateInput& in, int64_t steps, std::optional<Phase> stop_after = std::nullopt);

/// The first host event at which the resident host RAM of a node exceeds
/// `capacity_per_node` bytes (--host-memory or the --host preset).
struct HostOom {
    uint64_t t = 0;              ///< host event index
    std::string event, module;
    Phase phase = Phase::load;
    uint64_t per_node = 0;       ///< resident bytes per node after the event
    uint64_t capacity_per_node = 0;
};

/// The host out-of-memory of `r` against `capacity_per_node` bytes, or
/// nothing when every event fits.
std::optional<HostOom> find_host_oom(const HostResult& r, uint64_t capacity_per_node);

/// One line: "host out of memory: <GiB> GiB per node > <GiB> GiB
/// (--host-memory) at <event> in <module>, phase <phase>" (GiB = 2^30 bytes).
std::string render_host_oom(const HostOom& o);

/// The host lines of the `zeromem simulate` table: peak host RAM per rank
/// and per node (GiB = 2^30 bytes) with the event, module and phase at the
/// peak, the peak per phase, pinned bytes and NVMe bytes.
std::string render_host_table(const HostResult& r);

/// The "host" object of `zeromem simulate --format json`, bytes as
/// integers: {"peak_per_rank", "peak_per_node", "ranks_per_node", "pinned",
/// "pinned_per_node", "nvme", "nvme_per_node", "peak_event", "peak_module",
/// "peak_phase", "stopped_at" (the GPU out-of-memory's phase, or null),
/// "phases": [{"name", "peak", "peak_per_node", "pinned"}],
/// "timeline": [{"t", "event", "phase", "module", "kind", "bytes",
/// "allocated", "resident", "pinned", "nvme"}]} (per rank unless named
/// per_node).
nlohmann::json host_to_json(const HostResult& r);

/// One host term of the replay for --explain: bytes live at the per-rank
/// host peak, the largest single request, how it is held, and the code that
/// allocates it (DeepSpeed v0.19.6 / transformers / PyTorch file and
/// function). `estimator_term`: the estimator's host term of the same name
/// (terms.cpp host_terms), or the estimator figure it belongs to.
struct HostExplanation {
    std::string term;
    const char* kind = "";
    const char* estimator_term = "";
    const char* source = "";
    uint64_t bytes_at_peak = 0, largest = 0;
};

/// Every host term of `r` in order of first appearance.
std::vector<HostExplanation> explain_host(const HostResult& r);

/// The host part of `zeromem simulate --explain` (empty when not replayed).
std::string render_host_explain(const HostResult& r);

}  // namespace zeromem::sim
