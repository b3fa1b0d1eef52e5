// zeromem simulator: replays one rank's training run event by event
// (DeepSpeed v0.19.6 allocations per ZeRO stage) through a model of PyTorch's
// caching allocator. Three parts: the module tree and event producer
// (produce_events), the allocator (caching_allocator.h) and the writers
// (sim_writers.h). Depends only on the estimator's input types.
#pragma once

#include "zeromem/caching_allocator.h"
#include "zeromem/host_allocator.h"
#include "zeromem/input.h"
#include "zeromem/model.h"
#include "zeromem/process_terms.h"
#include "zeromem/sim_events.h"

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zeromem::sim {

/// A module with its own (direct) parameters, as DeepSpeed's hooks see it.
struct SimModule {
    std::string name;               ///< Hugging Face style path, e.g. "model.layers.0.self_attn.q_proj"
    std::string role;               ///< embed_tokens, input_layernorm, q_proj, ..., lm_head
    int layer = -1;                 ///< transformer block index, -1 outside the blocks
    std::vector<uint64_t> params;   ///< numel of each direct parameter (weight, then bias)
    int shares_params_with = -1;    ///< tied LM head: index of the embedding module
    int expert = -1;                ///< routed expert index within its MoE block (experts.N), -1 otherwise
};

/// The module tree of a decoder in forward order: embeddings, each block's
/// norms, attention projections (or MLA's q_a/q_b/kv_a/kv_b projections and
/// norms), MLP projections or a sparse MoE block (router `gate`, every routed
/// expert's projections as modules of their own, shared experts; the first
/// num_layers - num_moe_layers blocks dense), final norm, LM head (tied or
/// not). Module names follow transformers' modeling_mixtral.py,
/// modeling_qwen3_moe.py, modeling_deepseek_v2.py. The sum over modules
/// equals count_params(arch).total; throws InputError for a non-positive size
/// or a layout the tree does not build (the sums differ).
std::vector<SimModule> build_modules(const ModelArch& arch);

/// The modules of a module tree (--module-tree, module_tree.h) the way
/// DeepSpeed's hooks see them: each module with parameters of its own (a tied
/// parameter counted once, at its first listing, the module beside it sharing
/// it), in forward order: the modules before the blocks, each block
/// (model.layers.N, GPT-2's h.N) in the order LlamaDecoderLayer.forward runs
/// its norms, projections and MLP (other names after them, in registration
/// order), then the rest. Roles by the module's own name as transformers'
/// decoders name them ("other" saves no activations). user_tree_modules.cpp.
std::vector<SimModule> modules_from_tree(const ModuleTree& tree);
/// Whether a tree holds routed experts (".experts." in a path): those are
/// replayed from the architecture (build_modules), whose MoE blocks know the
/// routing.
bool tree_has_routed_experts(const ModuleTree& tree);
/// The modules the replay runs for `in`: the tree's (dense), else the
/// architecture's.
std::vector<SimModule> modules_of(const EstimateInput& in);

/// Simulation settings beyond the estimator's input.
struct SimOptions {
    int64_t steps = 2;                 ///< optimizer steps (each with gradient accumulation steps micro steps)
    AllocatorConfig alloc;             ///< PYTORCH_CUDA_ALLOC_CONF (--alloc-conf)
    bool record_allocator_trace = false;  ///< keep the allocator's trace for --memory-snapshot
    /// Emit span_begin/span_end events (module passes, no memory). The
    /// fragmentation replay turns them off: it reads alloc, free and
    /// empty_cache events only.
    bool record_spans = true;
};

/// The estimator component (estimate.h GpuMemory) an event term belongs to:
/// "parameters", "gradients", "optimizer_states", "activations" or
/// "temporary_buffers", so a disagreement points at one estimator term.
const char* estimator_component(const std::string& term);
constexpr int kComponentCount = 5;
/// Component names in a fixed order (index used by SimResult::peak_composition).
extern const char* const kComponents[kComponentCount];

/// Builds the events of `steps` optimizer steps for `in` (stage 0-3, optimizer
/// and parameter offload, checkpointing none/selective/full, flash or eager
/// attention). Inputs: in.model.arch must be set; tp = pp = 1; no LoRA,
/// frozen parameters or 4/8-bit loading; a decoder-only model, dense or with
/// Hugging Face's dropless MoE blocks (no --ep-size, no fused experts; not
/// encoder-decoder or encoder-only); no tensor over 2^50 bytes. Throws
/// InputError naming the flag or field otherwise, or for steps outside
/// 1..100. Sources per step: see simulator/src/producer.h and the files it lists.
EventLog produce_events(const EstimateInput& in, const SimOptions& opt);
/// The same events written into `out` (cleared first), reusing its
/// vectors' capacity: repeated replays (the fragmentation allowance of
/// compare/plan) then skip regrowing a log of millions of events. Throws as
/// above; `out` is left empty on a throw.
void produce_events(const EstimateInput& in, const SimOptions& opt, EventLog& out);

/// One row of the timeline (one alloc or free event).
struct TimelinePoint {
    uint64_t t = 0;           ///< event index (simulated time, one unit per event)
    const char* term = "";    ///< allocation name
    Phase phase = Phase::load;
    uint32_t module = 0;
    Stream stream = Stream::compute;
    int64_t bytes = 0;        ///< requested bytes, + for alloc, - for free
    uint64_t allocated = 0;   ///< memory_allocated() after the event, bytes
    uint64_t reserved = 0;    ///< memory_reserved() after the event, bytes
};

/// A module's forward/backward/recompute pass, in timeline units.
struct Span {
    uint32_t module = 0;
    const char* pass = "";
    uint64_t begin = 0, end = 0;
    Phase phase = Phase::load;
};

/// Peak allocated/reserved within one phase, bytes.
struct PhasePeak {
    Phase phase = Phase::load;
    uint64_t peak_allocated = 0, peak_reserved = 0;
    bool seen = false;
};

/// The out-of-memory event, as PyTorch reports it.
struct SimOom {
    OomInfo info;                 ///< info.capacity: what the allocator may reserve
    uint64_t device_total = 0;    ///< --gpu-memory, bytes (the allocator gets this minus the process terms)
    std::string term, module;
    Phase phase = Phase::load;
    uint64_t t = 0;
};

/// What the fragmentation allowance is made of, block by block, at the moment
/// it is read (fragmentation_report): the free blocks of segments that also
/// hold live blocks, which CCA release_cached_blocks cannot give back.
struct FragmentationReport {
    uint64_t allowance = 0;   ///< the allowance: reserved - allocated - releasable there, bytes
    uint64_t allocated = 0, reserved = 0;
    uint64_t releasable = 0;  ///< wholly free segments there (given back before an OOM), bytes
    bool oom = false;         ///< read at an out-of-memory (capacity replay), not at the allocated peak
    uint64_t t = 0;           ///< event index (allocator events only) of the moment
    std::string term, module; ///< the event of the moment
    Phase phase = Phase::load;
    /// Free blocks of one size in segments of one size that hold the same live blocks.
    struct Group {
        uint64_t free_block = 0, count = 0, segment = 0;
        std::string holds;  ///< the live blocks beside them: "ipg_bucket 0.049 GiB"
    };
    std::vector<Group> groups;  ///< largest total (free_block x count) first
    /// The last request up to the moment that found no free block and
    /// cudaMalloc'ed a segment (CCA get_free_block miss, alloc_block).
    bool has_miss = false;
    std::string miss_term, miss_module;
    uint64_t miss_bytes = 0, miss_rounded = 0;
    uint64_t miss_largest_free = 0;  ///< the largest free block of its stream and pool just before it
};

/// Everything the writers need.
struct SimResult {
    std::vector<std::string> modules;
    std::vector<TimelinePoint> timeline;
    std::vector<Span> spans;
    std::vector<PhasePeak> phases;       ///< in Phase order, only phases that occurred (seen)
    uint64_t peak_allocated = 0, peak_reserved = 0;  ///< bytes
    uint64_t peak_allocated_t = 0, peak_reserved_t = 0;  ///< timeline index of each peak
    std::string peak_event, peak_module;          ///< the allocation that set peak_allocated
    std::string peak_reserved_event, peak_reserved_module;
    uint64_t reserved_at_peak = 0;                ///< memory_reserved() when allocated peaked
    uint64_t peak_requested = 0;                  ///< peak of the sum of requested (unrounded) live bytes
    /// Requested bytes live at the allocated peak per estimator component (kComponents order).
    std::array<uint64_t, kComponentCount> peak_composition{};
    std::optional<SimOom> oom;                    ///< set when --gpu-memory was exceeded (replay stops there)
    /// The caching allocator's capacity, bytes; nullopt: unbounded (no GPU size given), so the reserved
    /// figures are what a GPU that never has to give cached segments back would reserve.
    std::optional<uint64_t> capacity;
    std::vector<SegmentInfo> final_segments;      ///< allocator state after the last event
    std::vector<TraceEntry> allocator_trace;      ///< when record_allocator_trace
    HostResult host;                              ///< host RAM / NVMe replay (simulate() only; host_allocator.h)
    /// The per-process terms the replay does not allocate, sized from the
    /// input by process_memory() as the estimator sizes them (simulate() only):
    /// the CUDA context and NCCL buffers outside the caching allocator, the
    /// cuBLAS workspaces inside it.
    ProcessMemory process;
    /// The reserved-but-unallocated memory of this replay, block by block, at
    /// the moment replay_fragmentation reads it (simulate() only; render_explain).
    std::optional<FragmentationReport> fragmentation;
};

/// Feeds `log` to a CachingAllocator (config opt.alloc, capacity
/// `capacity` bytes or unlimited) and records the timeline, spans, peaks
/// per phase and the OOM, if any (the replay stops at the first OOM, as the
/// training job would).
SimResult replay(const EventLog& log, const SimOptions& opt, std::optional<uint64_t> capacity);

/// produce_events + replay, and the host replay (simulate_host) into
/// `host`. The allocator's capacity is in.cluster.gpu_memory minus the
/// per-process terms of process_memory(in) (process_terms.h: the CUDA context
/// and NCCL buffers outside PyTorch's allocator, and the cuBLAS workspaces the
/// replay does not allocate); unlimited without a GPU size.
SimResult simulate(const EstimateInput& in, const SimOptions& opt);

}  // namespace zeromem::sim

namespace zeromem::sim {

/// The replay settings replay_fragmentation uses for `in`: 2 optimizer steps
/// (the first creates Adam's m and v, the second runs the steady backward with
/// them live) and at most 3 gradient accumulation micro steps (the first, a
/// middle and the boundary one; more micro steps repeat the middle one:
/// llama-2-7b at stages 0-3 peaks alike with 3, 4, 8 and 16); the capacity is
/// fragmentation_capacity's.
/// Returns the input to replay; `opt` receives the steps (its allocator
/// configuration is set by the caller from in.residual.alloc_conf).
EstimateInput fragmentation_replay_input(const EstimateInput& in, SimOptions& opt);

/// What the replay's allocator may reserve for `in`: in.cluster.gpu_memory
/// minus the per-process terms of process_memory (as simulate() gives it);
/// unlimited without a GPU size. With it, a cudaMalloc that would pass the
/// capacity fails and the allocator frees its cached segments and retries
/// (CUDACachingAllocator.cpp malloc: release_available_cached_blocks,
/// release_cached_blocks, alloc_block), so the blocks later requests split
/// are the ones a run on that GPU would have.
std::optional<uint64_t> fragmentation_capacity(const EstimateInput& in);

/// The caching allocator's fragmentation allowance for `in`, bytes: the
/// replay's memory_reserved() minus memory_allocated() at the moment
/// allocated peaks, after torch.cuda.empty_cache() (wholly free segments
/// given back, as CUDACachingAllocator.cpp release_cached_blocks does before
/// it reports an OOM): the unallocated parts of the segments in use (512 B
/// rounding, pools, splitting: CUDACachingAllocator.cpp round_size, get_pool,
/// should_split). The replay runs with fragmentation_capacity(in); when it
/// runs out of memory there, the allowance is read at the failed request
/// (reserved minus allocated after release_cached_blocks: the "reserved by
/// PyTorch but unallocated" of PyTorch's OutOfMemoryError).
/// Not the unlimited replay's peak reserved: that can be set at another
/// moment (e.g. Adam's moments created while the cache holds freed segments
/// too small for them) by memory PyTorch would free and retry. Replays with
/// fragmentation_replay_input and in.residual.alloc_conf (PYTORCH_CUDA_ALLOC_CONF,
/// parse_alloc_conf; an unparsable one is a case it cannot replay).
/// Returns nullopt when the simulator cannot replay the case: no
/// architecture (--params only), or an input produce_events refuses (--ep-size,
/// encoder models, tp/pp, LoRA, ...). Never throws InputError.
std::optional<uint64_t> replay_fragmentation(const EstimateInput& in);

/// replay_fragmentation's replay with the load phase's own allowance beside it
/// (reserved - allocated at the load phase's allocated peak, or at an OOM there).
std::optional<FragmentationAllowance> replay_fragmentation_allowance(const EstimateInput& in);

/// The allowance of `log` replayed with `capacity` (opt.alloc's
/// configuration), read as replay_fragmentation reads it, with the free
/// blocks that make it up and the request that could not use them.
FragmentationReport fragmentation_report(const EventLog& log, const SimOptions& opt, std::optional<uint64_t> capacity);

/// fragmentation_report of replay_fragmentation's replay of `in`; nullopt
/// where replay_fragmentation is.
std::optional<FragmentationReport> fragmentation_report(const EstimateInput& in);

/// The report as --explain prints it: the allowance, its free blocks grouped
/// by size with the live blocks beside them, and why the request could not
/// use them (CCA get_free_block, should_split, release_cached_blocks).
std::string render_fragmentation(const FragmentationReport& r);

/// The source text the faces pass as ResidualSettings::fragmentation_provider_source.
extern const char* const kFragmentationSource;

/// A ResidualSettings::fragmentation_provider: replay_fragmentation with two
/// caches: the last 512 answers keyed on the replay's input, every field the
/// event producer reads (a hit produces no events), and the last 512 replays
/// keyed on a 128-bit fingerprint of what the allocator sees of the event
/// log (a miss whose allocations match an earlier log, e.g. optimizer offload
/// to nvme instead of cpu, is not replayed again). Thread-safe; copies of the
/// returned function share the caches.
std::function<std::optional<FragmentationAllowance>(const EstimateInput&)> fragmentation_provider();

/// Sets in.residual's provider (fragmentation_provider()) and its source
/// (kFragmentationSource) unless the user gave --fragmentation, i.e. unless
/// `explicit_fraction`: an explicit fraction always wins.
void use_replayed_fragmentation(EstimateInput& in, bool explicit_fraction);

}  // namespace zeromem::sim
