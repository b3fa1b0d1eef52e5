// A model of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp,
// read at pytorch/pytorch commit 001074d2).
// It only consumes malloc/free calls; it knows nothing about DeepSpeed.
#pragma once

#include "zeromem/sim_events.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace zeromem::sim {

constexpr uint64_t kMiB = 1048576;
constexpr uint64_t kMinBlockSize = 512;        ///< every request is rounded to >= 512 B
constexpr uint64_t kSmallSize = kMiB;          ///< <= 1 MiB: small pool
constexpr uint64_t kSmallBuffer = 2 * kMiB;    ///< small-pool segment
constexpr uint64_t kLargeBuffer = 20 * kMiB;   ///< segment for 1-10 MiB requests
constexpr uint64_t kMinLargeAlloc = 10 * kMiB; ///< >= 10 MiB: own segment
constexpr uint64_t kRoundLarge = 2 * kMiB;     ///< own segments are 2 MiB multiples

/// PYTORCH_CUDA_ALLOC_CONF options the model honours (AllocatorConfig.cpp,
/// CUDAAllocatorConfig.cpp). Sizes in bytes.
struct AllocatorConfig {
    bool expandable_segments = false;
    uint64_t max_split_size = UINT64_MAX;           ///< max_split_size_mb (>= 20 MiB); unlimited by default
    uint64_t max_non_split_rounding_size = kLargeBuffer;  ///< max_non_split_rounding_mb
    /// roundup_power2_divisions per power-of-two interval starting at 1 MiB
    /// (index floor(log2(size)) - 20, clamped to 0..15); 0 = off.
    std::array<uint64_t, 16> roundup_power2_divisions{};
};

/// Parses a PYTORCH_CUDA_ALLOC_CONF string, e.g.
/// "expandable_segments:True,max_split_size_mb:128,roundup_power2_divisions:4"
/// or "roundup_power2_divisions:[256:1,512:2,>:8]". Keys the model ignores
/// (backend, garbage_collection_threshold, release_lock_on_cudamalloc, pinned_*)
/// are accepted. Throws zeromem::InputError naming --alloc-conf and the key
/// for an unknown key or a bad value (max_split_size_mb < 20, divisions not a
/// power of two, garbage_collection_threshold outside (0, 1),
/// per_process_memory_fraction outside [0, 1]: PyTorch refuses those too).
AllocatorConfig parse_alloc_conf(const std::string& text);

/// round_size: request -> block size.
uint64_t round_size(uint64_t size, const AllocatorConfig& cfg);
/// get_allocation_size: rounded request -> segment size on a miss.
uint64_t allocation_size(uint64_t rounded);

/// One block of a segment, as the snapshot shows it.
struct BlockInfo {
    uint64_t address = 0, size = 0, requested = 0;
    bool allocated = false;
};
/// One segment (cudaMalloc'ed range) with its blocks in address order.
struct SegmentInfo {
    uint64_t address = 0, size = 0;
    Stream stream = Stream::compute;
    bool small = false, expandable = false;
    std::vector<BlockInfo> blocks;
};

/// A snapshot trace entry (torch/csrc/cuda/memory_snapshot.cpp actions).
struct TraceEntry {
    const char* action = "alloc";  ///< alloc, free_requested, free_completed, segment_alloc, segment_free, segment_map, oom
    uint64_t addr = 0, size = 0;
    Stream stream = Stream::compute;
    uint64_t time = 0;             ///< index of the simulator event
};

/// What PyTorch reports when it gives up (OutOfMemoryError text).
struct OomInfo {
    uint64_t requested = 0;   ///< bytes asked for
    uint64_t allocated = 0;   ///< memory_allocated() at that moment
    uint64_t reserved = 0;    ///< memory_reserved() at that moment
    uint64_t capacity = 0;    ///< --gpu-memory
};

/// The caching allocator. Addresses are simulated.
class CachingAllocator {
public:
    /// `capacity`: bytes the allocator may reserve (--gpu-memory); unset =
    /// unlimited. `record_trace`: keep TraceEntry records for the snapshot.
    explicit CachingAllocator(AllocatorConfig cfg = {}, std::optional<uint64_t> capacity = std::nullopt,
                              bool record_trace = false);
    /// Not copyable or movable: the free-block sets refer to this object's blocks and node pool.
    CachingAllocator(const CachingAllocator&) = delete;
    CachingAllocator& operator=(const CachingAllocator&) = delete;

    /// DeviceCachingAllocator::malloc: round, best fit on `stream`, else a
    /// new segment; on a capacity miss first release cached blocks and retry
    /// (release_cached_blocks). Returns a handle, or nullopt on OOM (then oom() is set).
    std::optional<uint32_t> malloc(uint64_t size, Stream stream, uint64_t time = 0);
    /// Frees a handle: the block merges with free neighbours and returns to
    /// its pool; segments are never released here (free_block).
    void free(uint32_t handle, uint64_t time = 0);
    /// torch.cuda.empty_cache(): releases every fully free segment.
    void empty_cache(uint64_t time = 0);

    uint64_t allocated() const { return allocated_; }  ///< memory_allocated(), bytes (block sizes)
    uint64_t reserved() const { return reserved_; }    ///< memory_reserved(), bytes
    uint64_t requested() const { return requested_; } ///< sum of requested sizes of live blocks
    uint64_t peak_allocated() const { return peak_allocated_; }
    uint64_t peak_reserved() const { return peak_reserved_; }
    uint64_t num_alloc_retries() const { return retries_; }
    /// Bytes torch.cuda.empty_cache() would give back now (release_cached_blocks):
    /// segments that are one free block, plus the free trailing pages of
    /// expandable segments. memory_reserved() after empty_cache() is
    /// reserved() minus this. O(1) without expandable segments (a running
    /// sum); with them, a walk over each expandable segment's blocks.
    uint64_t releasable() const;
    /// Size of the block behind a live handle, bytes.
    uint64_t block_size(uint32_t handle) const { return blocks_[handle].size; }
    /// Address of the block behind a live handle (the segments() listing's).
    uint64_t block_address(uint32_t handle) const { return blocks_[handle].addr; }
    /// The largest free block of `stream` in the small or large pool, bytes
    /// (0 if none): a request that rounds above it finds no block in CCA
    /// get_free_block, whatever the other streams and pools hold.
    uint64_t largest_free_block(bool small, Stream stream) const;
    /// Segments created (or expandable pages mapped) so far: CCA alloc_block's
    /// successful cudaMalloc calls.
    uint64_t segment_allocs() const { return segment_allocs_; }
    const std::optional<OomInfo>& oom() const { return oom_; }
    /// Segments and blocks in address order (the snapshot's "segments").
    std::vector<SegmentInfo> segments() const;
    const std::vector<TraceEntry>& trace() const { return trace_; }
    const AllocatorConfig& config() const { return cfg_; }

private:
    struct Segment {
        uint64_t addr = 0, size = 0, reserve = 0;
        Stream stream = Stream::compute;
        bool small = false, expandable = false, live = false;
        uint32_t first = 0;
    };
    /// A free block as the pools order it (CCA BlockComparatorSize: stream,
    /// then size, then address), with its index; the key is copied into the
    /// set so comparisons do not go through blocks_.
    struct FreeKey {
        Stream stream = Stream::compute;
        uint64_t size = 0, addr = 0;
        uint32_t block = 0;
        bool operator<(const FreeKey& o) const {
            if (stream != o.stream) return stream < o.stream;
            if (size != o.size) return size < o.size;
            return addr < o.addr;
        }
    };
    FreeKey key(uint32_t i) const { return {blocks_[i].stream, blocks_[i].size, blocks_[i].addr, i}; }
    /// Recycles the free-block sets' tree nodes (all of one size): a replay
    /// inserts and erases a node for nearly every event, and going to the
    /// heap each time was a third of the allocator's cost.
    class NodePool {
    public:
        NodePool() = default;
        NodePool(const NodePool&) = delete;
        NodePool& operator=(const NodePool&) = delete;
        void* take(std::size_t bytes);
        void give(void* node, std::size_t bytes);

    private:
        std::size_t node_bytes_ = 0;
        std::vector<void*> free_;
        std::vector<std::unique_ptr<std::max_align_t[]>> chunks_;
    };
    /// std::allocator interface over a NodePool, for the sets' nodes.
    template <typename T>
    struct PoolAlloc {
        using value_type = T;
        NodePool* pool;
        explicit PoolAlloc(NodePool* p) : pool(p) {}
        template <typename U>
        PoolAlloc(const PoolAlloc<U>& o) : pool(o.pool) {}  // NOLINT: rebinding, as std::set needs
        T* allocate(std::size_t n) {
            return n == 1 ? static_cast<T*>(pool->take(sizeof(T))) : std::allocator<T>().allocate(n);
        }
        void deallocate(T* p, std::size_t n) {
            if (n == 1) pool->give(p, sizeof(T));
            else std::allocator<T>().deallocate(p, n);
        }
        template <typename U>
        bool operator==(const PoolAlloc<U>& o) const { return pool == o.pool; }
        template <typename U>
        bool operator!=(const PoolAlloc<U>& o) const { return pool != o.pool; }
    };
    using FreeSet = std::set<FreeKey, std::less<FreeKey>, PoolAlloc<FreeKey>>;
    struct Block {
        uint64_t addr = 0, size = 0, requested = 0;
        Stream stream = Stream::compute;
        bool small = false, allocated = false, in_use = false;
        int32_t prev = -1, next = -1;  ///< neighbours in the same segment
        uint32_t segment = 0;
        FreeSet::iterator pos{};  ///< its entry in its pool while it is free (erased without a search)
    };

    uint32_t new_block();
    FreeSet& pool(bool small) { return small ? small_free_ : large_free_; }
    /// Puts free block `i` into its pool (small or large) / takes it out.
    void pool_insert(bool small, uint32_t i) { blocks_[i].pos = pool(small).insert(key(i)).first; }
    void pool_erase(bool small, uint32_t i) { pool(small).erase(blocks_[i].pos); }
    std::optional<uint32_t> get_free_block(bool small, Stream stream, uint64_t rounded);
    bool alloc_block(bool small, Stream stream, uint64_t seg_size, uint64_t rounded, uint64_t time);
    bool grow_expandable(bool small, Stream stream, uint64_t rounded, uint64_t time);
    bool should_split(const Block& b, uint64_t rounded) const;
    /// Whether block `b` alone makes up a segment that is not expandable.
    bool whole_segment(const Block& b) const {
        return b.prev < 0 && b.next < 0 && !segments_[b.segment].expandable;
    }
    void release_segment(uint32_t seg, uint64_t time);
    void release_available_cached_blocks(uint64_t need, uint64_t time);
    void release_cached_blocks(uint64_t time);
    void record(const char* action, uint64_t addr, uint64_t size, Stream s, uint64_t time);
    void bump_peaks();

    AllocatorConfig cfg_;
    std::optional<uint64_t> capacity_;
    bool record_trace_;
    std::vector<Block> blocks_;
    std::vector<uint32_t> free_slots_;
    std::vector<Segment> segments_;
    NodePool nodes_;  // before the sets: they give their nodes back to it when destroyed
    FreeSet small_free_, large_free_;
    uint32_t fresh_ = 0;  ///< block made by the last alloc_block
    uint64_t next_addr_ = 0x7f0000000000ULL;
    uint64_t allocated_ = 0, reserved_ = 0, requested_ = 0;
    uint64_t peak_allocated_ = 0, peak_reserved_ = 0, retries_ = 0, segment_allocs_ = 0;
    uint64_t free_segment_bytes_ = 0;  ///< sizes of the non-expandable segments that are one free block
    std::optional<OomInfo> oom_;
    std::vector<TraceEntry> trace_;
};

}  // namespace zeromem::sim
