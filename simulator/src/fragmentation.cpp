// The simulator as the estimator's source of the fragmentation allowance:
// reserved minus allocated of a short replay.
#include "zeromem/simulator.h"

#include "zeromem/util.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace zeromem::sim {

const char* const kFragmentationSource =
    "the simulator's replay (reserved - allocated at the allocated peak of 2 optimizer steps through the caching "
    "allocator model with the GPU's capacity, wholly free segments given back as PyTorch does before an OOM; at the "
    "out-of-memory where the replay runs out)";

std::optional<uint64_t> fragmentation_capacity(const EstimateInput& in) {
    if (!in.cluster.gpu_memory) return std::nullopt;
    const uint64_t total = *in.cluster.gpu_memory;
    return total - std::min(total, process_memory(in).total());
}

EstimateInput fragmentation_replay_input(const EstimateInput& in, SimOptions& opt) {
    EstimateInput r = in;
    r.residual.fragmentation_provider = nullptr;  // the copy must not call back into itself
    r.train.grad_accum = std::min<int64_t>(in.train.grad_accum, 3);
    opt.steps = 2;
    return r;
}

namespace {

// The events of the fragmentation replay (without spans, which the replay
// skips), written into this thread's reused buffer, or nullptr for a case
// the producer refuses. The buffer keeps its capacity from one replay to
// the next: a MoE preset's log holds millions of events (qwen3-30b-a3b:
// about 18.8k modules), and growing it afresh for every option of a
// compare cost more than the replay (page faults, copies). The pointer is
// valid until the thread's next call.
const EventLog* fragmentation_events(const EstimateInput& in, SimOptions& opt) {
    if (!in.model.arch) return nullptr;
    const EstimateInput r = fragmentation_replay_input(in, opt);
    opt.record_spans = false;
    thread_local EventLog buffer;
    try {
        opt.alloc = parse_alloc_conf(in.residual.alloc_conf);  // the faces validate it first
        produce_events(r, opt, buffer);
    } catch (const InputError&) {
        return nullptr;  // --ep-size, encoder models, tp/pp, LoRA, oversized tensors, ...
    }
    return &buffer;
}

// The moment the allowance is read and the allowance there, and the same
// at the load phase's allocated peak.
struct Moment {
    uint64_t t = 0, bytes = 0;
    bool oom = false;
    uint64_t load_bytes = 0;
};

// Reserved minus allocated at the allocated peak, without the wholly free
// segments: PyTorch gives those back (release_cached_blocks) and retries
// before it reports an OOM, so only the unallocated parts of segments in use
// are memory the job cannot have. One pass through the allocator, recording
// no timeline: at each event that raises memory_allocated() above every
// earlier value (or at the first event, when nothing is ever allocated), it
// notes memory_reserved() less what torch.cuda.empty_cache() would release
// there (CachingAllocator::releasable). The same figure as replaying up to
// replay()'s peak_allocated_t and then empty_cache. With a capacity the
// allocator fails a cudaMalloc past it, frees its cached segments and retries
// (CCA malloc); a request that still fails is the job's OOM: the replay stops
// there and the allowance is what stays reserved but unallocated at that
// request (every wholly free segment already given back), the figure
// PyTorch's OutOfMemoryError prints as "reserved by PyTorch but unallocated".
Moment allowance_moment(const EventLog& log, const SimOptions& opt, std::optional<uint64_t> capacity) {
    CachingAllocator a(opt.alloc, capacity, false);
    thread_local std::vector<uint32_t> handle;  // reused: its pages stay mapped between replays
    handle.assign(log.events.size() + 1, 0);
    uint64_t t = 0, peak = 0, load_peak = 0;
    bool in_load = true;  // the load phase's events come first
    Moment m;
    const auto unallocated = [&a] {
        const uint64_t reserved = a.reserved() - a.releasable();
        return reserved - std::min(reserved, a.allocated());
    };
    for (const Event& e : log.events) {
        if (e.action == Action::span_begin || e.action == Action::span_end) continue;
        in_load = in_load && e.phase == Phase::load;
        if (e.action == Action::empty_cache) {
            a.empty_cache(t);
        } else if (e.action == Action::alloc) {
            const std::optional<uint32_t> h = a.malloc(e.bytes, e.stream, t);
            if (!h) {
                const uint64_t at_oom = unallocated();
                return {t, at_oom, true, in_load ? at_oom : m.load_bytes};
            }
            if (handle.size() <= e.tensor) handle.resize(e.tensor + 1, 0);
            handle[e.tensor] = *h;
        } else {
            a.free(handle[e.tensor], t);
        }
        if (in_load && (t == 0 || a.allocated() > load_peak)) {
            load_peak = std::max(load_peak, a.allocated());
            m.load_bytes = unallocated();
        }
        if (t == 0 || a.allocated() > peak) {
            peak = std::max(peak, a.allocated());
            m = {t, unallocated(), false, m.load_bytes};
        }
        ++t;
    }
    return m;
}

FragmentationAllowance reserved_minus_allocated(const EventLog& log, const SimOptions& opt,
                                                std::optional<uint64_t> capacity) {
    const Moment m = allowance_moment(log, opt, capacity);
    return {m.bytes, m.load_bytes};
}

// "ipg_bucket 0.049 GiB", or for many: "12 live blocks, largest checkpoint_input 0.250 GiB".
std::string holders(std::vector<std::pair<uint64_t, std::string>> live) {
    std::sort(live.begin(), live.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    if (live.size() > 3) return std::to_string(live.size()) + " live blocks, largest " + live[0].second + " " + gib_text(live[0].first);
    std::string s;
    for (const auto& [bytes, term] : live) s += (s.empty() ? "" : " + ") + term + " " + gib_text(bytes);
    return s;
}

// The replay's input written out field by field: two inputs with the same
// key produce the same events. Every field of the structs the event producer
// reads is written (ModelArch, ClusterSettings, TrainingSettings,
// ZeroSettings, MoeSettings, SoftwareStack, and the load settings of
// ResidualSettings); the sizeof checks below fail to compile on the
// reference platform when a field is added, so the key cannot silently miss
// it.
class InputKey {
public:
    template <typename... T>
    void add(const T&... v) {
        (put(v), ...);
    }
    const std::string& str() const { return s_; }

private:
    template <typename T>
    void put(const T& v) {
        if constexpr (std::is_enum_v<T>) {
            put(static_cast<long long>(v));
        } else if constexpr (std::is_arithmetic_v<T>) {
            s_.append(reinterpret_cast<const char*>(&v), sizeof v);
        } else {
            put_other(v);
        }
    }
    void put_other(const std::string& v) {
        put(v.size());
        s_ += v;
    }
    void put_other(const std::vector<std::string>& v) {
        put(v.size());
        for (const auto& x : v) put_other(x);
    }
    template <typename T>
    void put_other(const std::optional<T>& v) {
        put(v.has_value());
        if (v) put(*v);
    }
    std::string s_;
};

#if defined(__x86_64__) && defined(__GLIBCXX__) && !defined(_GLIBCXX_DEBUG)
static_assert(sizeof(ModelArch) == 536 && sizeof(ClusterSettings) == 144 && sizeof(TrainingSettings) == 176 &&
                  sizeof(ZeroSettings) == 200 && sizeof(MoeSettings) == 32 && sizeof(SoftwareStack) == 96,
              "a settings struct changed: add the new field to input_key() in fragmentation.cpp, then update these sizes");
#endif

std::string input_key(const EstimateInput& in) {
    InputKey k;
    k.add(in.model.name, in.model.params, in.model.largest_layer_params, in.model.arch.has_value());
    if (in.model.arch) {
        const ModelArch& a = *in.model.arch;
        k.add(a.name, a.family, a.hidden_size, a.num_layers, a.num_heads, a.num_kv_heads, a.head_dim, a.ffn_size,
              a.vocab_size, a.max_position_embeddings, a.gated_mlp, a.tied_embeddings, a.learned_positions,
              a.qkv_bias, a.attn_out_bias, a.mlp_bias, a.norm_has_bias, a.norms_per_layer, a.rms_norm_saved_bytes, a.final_norm,
              a.embedding_norm, a.position_offset, a.word_embed_proj_dim, a.fused_qkv, a.published_params,
              a.published_source, a.model_type, a.lm_head_bias, a.qk_norm, a.attention_sinks, a.fused_gate_up,
              a.q_lora_rank, a.kv_lora_rank, a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim, a.num_experts,
              a.num_experts_per_tok, a.expert_ffn_size, a.shared_expert_ffn_size, a.num_moe_layers,
              a.shared_expert_gate, a.router_bias, a.expert_bias, a.fused_experts, a.num_decoder_layers,
              a.relative_attention_buckets, a.encoder_only, a.type_vocab_size, a.pooler, a.mlm_head, a.vision_kind,
              a.vision_hidden_size, a.vision_layers, a.vision_ffn_size, a.vision_block_params,
              a.vision_other_params, a.projector_params, a.vision_largest_module, a.warnings, a.embedding_dropout,
              a.attention_dropout, a.attention_residual_dropout, a.mlp_residual_dropout);
    }
    const ClusterSettings& c = in.cluster;
    k.add(c.gpus, c.nodes, c.gpu_memory, c.tp, c.pp);  // not read by the producer: gpu_name, host_memory,
                                                        // compute_capability, intra_interconnect, host_reserve
    const TrainingSettings& t = in.train;  // not read by the producer: train_batch_size
    k.add(t.dtype, t.grad_accum_dtype, t.communication_dtype, t.micro_batch, t.grad_accum,
          t.seq_len, t.checkpointing, t.optimizer, t.gradient_clipping, t.flash_attention, t.sequence_parallel,
          t.fused_optimizer, t.optimizer_builder, t.client_fused, t.torch_adam, t.trainable_params, t.lora_rank,
          t.lora_targets, t.load_in_bits, t.ds_checkpointing_api, t.partition_activations, t.cpu_checkpointing,
          t.number_checkpoints);
    const ZeroSettings& z = in.zero;
    k.add(z.stage, z.offload_optimizer, z.offload_param, z.offload_optimizer_pin_memory,
          z.offload_param_pin_memory, z.offload_optimizer_buffer_count, z.offload_param_buffer_count,
          z.offload_param_buffer_size, z.offload_param_max_in_cpu, z.offload_optimizer_ratio, z.zero_init,
          z.contiguous_gradients, z.reduce_scatter, z.reduce_bucket_size, z.allgather_bucket_size,
          z.overlap_comm, z.sub_group_size, z.stage3_prefetch_bucket_size, z.stage3_param_persistence_threshold,
          z.stage3_model_persistence_threshold, z.stage3_max_live_parameters, z.stage3_max_reuse_distance,
          z.stage3_gather_16bit_weights_on_model_save, z.aio_block_size, z.aio_queue_depth,
          z.zero_force_ds_cpu_optimizer, z.zero_allow_untested_optimizer, z.zero_hpz_partition_size,
          z.zero_quantized_weights, z.zero_quantized_gradients, z.mics_shard_size,
          z.mics_hierarchical_params_gather);
    const MoeSettings& m = in.moe;
    k.add(m.ep_size, m.capacity_factor, m.min_capacity);
    const SoftwareStack& s = in.stack;
    k.add(s.deepspeed, s.torch, s.transformers);
    k.add(in.residual.load_dtype, in.residual.load_path, in.convention, in.residual.alloc_conf,
          in.residual.activation_scale);
    return k.str();
}

// What the allocator sees of an event log (alloc/free/empty_cache events:
// action, stream, tensor id, bytes; spans and names left out), hashed to
// 128 bits: two logs with the same fingerprint give the same allowance.
struct LogFingerprint {
    uint64_t a = 0xcbf29ce484222325ULL, b = 0x9e3779b97f4a7c15ULL;
    bool operator==(const LogFingerprint& o) const { return a == o.a && b == o.b; }
    // Two independent multiply-xor chains (FNV-1a over 64-bit words, and a
    // rotate-multiply chain with another odd constant).
    void add(uint64_t w) {
        a = (a ^ w) * 0x100000001b3ULL;
        b = ((b << 23 | b >> 41) ^ w) * 0xbf58476d1ce4e5b9ULL;
    }
};

// Tensor ids stay below 2^48 (one per event) and bytes below 2^50
// (refuse_oversized_tensors), so two words per event keep every field.
LogFingerprint fingerprint(const EventLog& log) {
    LogFingerprint f;
    for (const Event& e : log.events) {
        if (e.action == Action::span_begin || e.action == Action::span_end) continue;
        f.add(e.tensor << 16 | static_cast<uint64_t>(e.action) << 8 | static_cast<uint64_t>(e.stream));
        f.add(e.bytes);
    }
    return f;
}

// The allowances of the last replays, by input key: the planner evaluates
// the same option many times (1217 estimates but about 73 distinct replays
// for `plan --model llama-2-7b --gpus 8`), so a hit skips producing the
// events as well as replaying them. A miss produces the events and looks
// their fingerprint up before replaying: inputs that differ only where the
// GPU's allocations do not (optimizer or parameter offload to nvme rather
// than cpu, for instance) share one replay.
class FragmentationCache {
public:
    std::optional<FragmentationAllowance> get(const EstimateInput& in) {
        SimOptions opt;
        const std::optional<uint64_t> capacity = fragmentation_capacity(in);
        InputKey cap;  // the per-process terms it subtracts are not all in input_key
        cap.add(capacity);
        const std::string key = input_key(fragmentation_replay_input(in, opt)) + cap.str();
        const size_t h = std::hash<std::string>{}(key);
        {
            // The hash first: the keys are about a kilobyte each and share long
            // prefixes, and a plan looks up over a thousand times among up to
            // kEntries of them.
            const std::lock_guard<std::mutex> lock(mu_);
            for (const Entry& e : entries_)
                if (e.hash == h && e.key == key) return e.bytes;
        }
        const EventLog* log = fragmentation_events(in, opt);
        std::optional<FragmentationAllowance> bytes;
        if (log) bytes = by_log(*log, opt, in.residual.alloc_conf, capacity);
        const std::lock_guard<std::mutex> lock(mu_);
        if (entries_.size() == kEntries) entries_.erase(entries_.begin());
        entries_.push_back({h, key, bytes});
        return bytes;
    }

private:
    // The allocator's configuration and capacity are part of what it sees: folded in.
    FragmentationAllowance by_log(const EventLog& log, const SimOptions& opt, const std::string& alloc_conf,
                    std::optional<uint64_t> capacity) {
        LogFingerprint f = fingerprint(log);
        f.add(std::hash<std::string>{}(alloc_conf));
        f.add(capacity ? *capacity : UINT64_MAX);
        {
            const std::lock_guard<std::mutex> lock(mu_);
            for (const auto& [g, bytes] : logs_)
                if (g == f) return bytes;
        }
        const FragmentationAllowance bytes = reserved_minus_allocated(log, opt, capacity);
        const std::lock_guard<std::mutex> lock(mu_);
        if (logs_.size() == kEntries) logs_.erase(logs_.begin());
        logs_.emplace_back(f, bytes);
        return bytes;
    }

    static constexpr size_t kEntries = 512;
    std::mutex mu_;
    struct Entry {
        size_t hash;
        std::string key;
        std::optional<FragmentationAllowance> bytes;
    };
    std::vector<Entry> entries_;
    std::vector<std::pair<LogFingerprint, FragmentationAllowance>> logs_;
};

}  // namespace

std::optional<FragmentationAllowance> replay_fragmentation_allowance(const EstimateInput& in) {
    SimOptions opt;
    const EventLog* log = fragmentation_events(in, opt);
    if (!log) return std::nullopt;
    return reserved_minus_allocated(*log, opt, fragmentation_capacity(in));
}

std::optional<uint64_t> replay_fragmentation(const EstimateInput& in) {
    const std::optional<FragmentationAllowance> a = replay_fragmentation_allowance(in);
    if (!a) return std::nullopt;
    return a->bytes;
}

// Two passes: the first finds the moment (allowance_moment), the second
// replays up to it, naming each live block by its event's term, and notes the
// last request that missed every free block.
FragmentationReport fragmentation_report(const EventLog& log, const SimOptions& opt, std::optional<uint64_t> capacity) {
    const Moment m = allowance_moment(log, opt, capacity);
    FragmentationReport r;
    r.allowance = m.bytes;
    r.oom = m.oom;
    r.t = m.t;
    CachingAllocator a(opt.alloc, capacity, false);
    std::vector<uint32_t> handle(log.events.size() + 1, 0);
    std::unordered_map<uint32_t, const char*> live;  // handle -> term
    uint64_t t = 0;
    for (const Event& e : log.events) {
        if (e.action == Action::span_begin || e.action == Action::span_end) continue;
        if (t > m.t) break;
        if (t == m.t) {
            r.term = e.term;
            r.module = log.modules[e.module];
            r.phase = e.phase;
        }
        if (e.action == Action::empty_cache) {
            a.empty_cache(t);
        } else if (e.action == Action::alloc) {
            const uint64_t rounded = round_size(e.bytes, opt.alloc);
            const uint64_t largest = a.largest_free_block(rounded <= kSmallSize, e.stream);
            const uint64_t segments = a.segment_allocs();
            const std::optional<uint32_t> h = a.malloc(e.bytes, e.stream, t);
            if (!h || a.segment_allocs() > segments) {
                r.has_miss = true;
                r.miss_term = e.term;
                r.miss_module = log.modules[e.module];
                r.miss_bytes = e.bytes;
                r.miss_rounded = rounded;
                r.miss_largest_free = largest;
            }
            if (!h) break;  // the OOM of the moment: the state after release_cached_blocks
            if (handle.size() <= e.tensor) handle.resize(e.tensor + 1, 0);
            handle[e.tensor] = *h;
            live[*h] = e.term;
        } else {
            a.free(handle[e.tensor], t);
            live.erase(handle[e.tensor]);
        }
        ++t;
    }
    r.allocated = a.allocated();
    r.reserved = a.reserved();
    r.releasable = a.releasable();
    std::unordered_map<uint64_t, const char*> term_at;  // block address -> term
    for (const auto& [h, term] : live) term_at[a.block_address(h)] = term;
    std::map<std::tuple<uint64_t, uint64_t, std::string>, uint64_t> groups;  // (free size, segment, holders) -> count
    for (const SegmentInfo& s : a.segments()) {
        std::vector<std::pair<uint64_t, std::string>> held;
        for (const BlockInfo& b : s.blocks)
            if (b.allocated) held.emplace_back(b.size, term_at.count(b.address) ? term_at[b.address] : "?");
        if (held.empty()) continue;  // wholly free: releasable, not the allowance
        const std::string h = holders(held);
        for (const BlockInfo& b : s.blocks)
            if (!b.allocated) ++groups[{b.size, s.size, h}];
    }
    for (const auto& [k, n] : groups) r.groups.push_back({std::get<0>(k), n, std::get<1>(k), std::get<2>(k)});
    std::sort(r.groups.begin(), r.groups.end(), [](const auto& x, const auto& y) {
        return x.free_block * x.count != y.free_block * y.count ? x.free_block * x.count > y.free_block * y.count
                                                                : x.free_block > y.free_block;
    });
    return r;
}

std::optional<FragmentationReport> fragmentation_report(const EstimateInput& in) {
    SimOptions opt;
    const EventLog* log = fragmentation_events(in, opt);
    if (!log) return std::nullopt;
    return fragmentation_report(*log, opt, fragmentation_capacity(in));
}

std::function<std::optional<FragmentationAllowance>(const EstimateInput&)> fragmentation_provider() {
    auto cache = std::make_shared<FragmentationCache>();
    return [cache](const EstimateInput& in) { return cache->get(in); };
}

void use_replayed_fragmentation(EstimateInput& in, bool explicit_fraction) {
    (void)parse_alloc_conf(in.residual.alloc_conf);  // bad --alloc-conf: one error line, whatever the fraction
    if (explicit_fraction) return;
    in.residual.fragmentation_provider = fragmentation_provider();
    in.residual.fragmentation_provider_source = kFragmentationSource;
}

}  // namespace zeromem::sim
