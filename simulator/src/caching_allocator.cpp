// Model of PyTorch's CUDA caching allocator. Every rule cites the function of
// c10/cuda/CUDACachingAllocator.cpp (CCA) or c10/core/AllocatorConfig.cpp it
// follows (pytorch/pytorch CCA at 001074d2, AllocatorConfig.cpp at 065861fb).
#include "zeromem/caching_allocator.h"

#include "zeromem/types.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace zeromem::sim {

using zeromem::InputError;

namespace {

int floor_log2(uint64_t v) { return v ? 63 - __builtin_clzll(v) : -1; }

bool is_pow2(uint64_t v) { return v && (v & (v - 1)) == 0; }

// ACFG-C roundup_power2_next_division: round up to the next of `divisions`
// equal steps between the surrounding powers of two.
uint64_t next_division(uint64_t size, uint64_t divisions) {
    if (is_pow2(size)) return size;
    const uint64_t floor2 = uint64_t{1} << floor_log2(size);
    const uint64_t step = floor2 >> floor_log2(divisions);
    if (step == 0) return floor2 << 1;
    const uint64_t down = size & ~(step - 1);
    return down == size ? size : down + step;
}

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// At most 2^40: a MiB count that large already exceeds any GPU, and a MiB
// value times 2^20 stays within 64 bits.
uint64_t parse_uint(const std::string& v, const std::string& key) {
    if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
        throw InputError("--alloc-conf: " + key + " needs a non-negative integer, got '" + v + "'");
    if (v.size() > 13 || std::stoull(v) > (uint64_t(1) << 40))
        throw InputError("--alloc-conf: " + key + " " + v + " is too large (at most 2^40)");
    return std::stoull(v);
}

// A fraction PyTorch bounds: garbage_collection_threshold in (0, 1)
// (c10/cuda/CUDAAllocatorConfig.cpp parseGarbageCollectionThreshold, in newer
// torch c10/core/AllocatorConfig.cpp: "set it in (0.0, 1.0)"),
// per_process_memory_fraction in [0, 1] (CUDAAllocatorConfig.cpp
// parsePerProcessMemoryFraction). PyTorch refuses others at start-up.
double parse_fraction(const std::string& v, const std::string& key, bool closed) {
    char* end = nullptr;
    const double f = v.empty() ? 0.0 : std::strtod(v.c_str(), &end);
    if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(f))
        throw InputError("--alloc-conf: " + key + " needs a number, got '" + v + "'");
    const bool ok = closed ? f >= 0.0 && f <= 1.0 : f > 0.0 && f < 1.0;
    if (!ok)
        throw InputError("--alloc-conf: " + key + " " + v + " is out of range: PyTorch takes it in " +
                         (closed ? "[0.0, 1.0]" : "(0.0, 1.0)") + " and refuses the job otherwise");
    return f;
}

uint64_t parse_divisions(const std::string& v, const std::string& key) {
    const uint64_t d = parse_uint(v, key);
    if (d != 0 && !is_pow2(d))
        throw InputError("--alloc-conf: " + key + " values must be powers of two or 0, got " + v);
    return d;
}

// "[256:1,512:2,1024:4,>:8]": interval starts in MB (ACFG-C parseRoundUpPower2Divisions).
void parse_division_list(const std::string& body, std::array<uint64_t, 16>& out) {
    std::vector<std::pair<int, uint64_t>> entries;  // (first index, divisions)
    std::size_t pos = 0;
    while (pos < body.size()) {
        std::size_t comma = body.find(',', pos);
        if (comma == std::string::npos) comma = body.size();
        const std::string item = body.substr(pos, comma - pos);
        const std::size_t colon = item.find(':');
        if (colon == std::string::npos)
            throw InputError("--alloc-conf: roundup_power2_divisions entry '" + item + "' needs SIZE_MB:DIVISIONS");
        const std::string k = item.substr(0, colon);
        const uint64_t d = parse_divisions(item.substr(colon + 1), "roundup_power2_divisions");
        if (k == ">") {
            entries.emplace_back(-1, d);
        } else {
            const uint64_t mb = parse_uint(k, "roundup_power2_divisions");
            if (!is_pow2(mb)) throw InputError("--alloc-conf: roundup_power2_divisions sizes must be powers of two, got " + k);
            entries.emplace_back(std::clamp(floor_log2(mb), 0, 15), d);
        }
        pos = comma + 1;
    }
    int last = -1;
    for (const auto& [idx, d] : entries) {
        if (idx < 0) {
            for (int i = last + 1; i < 16; ++i) out[static_cast<std::size_t>(i)] = d;
            last = 15;
        } else {
            // An entry covers its interval and, until the next entry, the ones after it.
            for (int i = idx; i < 16; ++i) out[static_cast<std::size_t>(i)] = d;
            last = idx;
        }
    }
}

}  // namespace

AllocatorConfig parse_alloc_conf(const std::string& text) {
    AllocatorConfig cfg;
    std::size_t pos = 0;
    while (pos < text.size()) {
        // Split on commas outside brackets.
        std::size_t end = pos;
        int depth = 0;
        while (end < text.size() && (text[end] != ',' || depth > 0)) {
            if (text[end] == '[') ++depth;
            if (text[end] == ']') --depth;
            ++end;
        }
        const std::string item = text.substr(pos, end - pos);
        pos = end + 1;
        if (item.empty()) continue;
        const std::size_t colon = item.find(':');
        if (colon == std::string::npos) throw InputError("--alloc-conf: '" + item + "' needs KEY:VALUE");
        const std::string key = item.substr(0, colon), val = item.substr(colon + 1);
        if (key == "expandable_segments") {
            const std::string v = lower(val);
            if (v != "true" && v != "false") throw InputError("--alloc-conf: expandable_segments needs True or False, got '" + val + "'");
            cfg.expandable_segments = v == "true";
        } else if (key == "max_split_size_mb") {
            const uint64_t mb = parse_uint(val, key);
            if (mb < 20) throw InputError("--alloc-conf: max_split_size_mb must be at least 20, got " + val);
            cfg.max_split_size = mb * kMiB;
        } else if (key == "max_non_split_rounding_mb") {
            const uint64_t mb = parse_uint(val, key);
            if (mb < 20) throw InputError("--alloc-conf: max_non_split_rounding_mb must be at least 20, got " + val);
            cfg.max_non_split_rounding_size = mb * kMiB;
        } else if (key == "roundup_power2_divisions") {
            if (!val.empty() && val.front() == '[') {
                if (val.back() != ']') throw InputError("--alloc-conf: roundup_power2_divisions list needs a closing ']'");
                parse_division_list(val.substr(1, val.size() - 2), cfg.roundup_power2_divisions);
            } else {
                cfg.roundup_power2_divisions.fill(parse_divisions(val, key));
            }
        } else if (key == "backend" && lower(val) != "native") {
            throw InputError("--alloc-conf: backend:" + val +
                             " replaces the caching allocator the simulator models (use backend:native or leave it out)");
        } else if (key == "garbage_collection_threshold" || key == "per_process_memory_fraction") {
            (void)parse_fraction(val, key, key == "per_process_memory_fraction");  // checked; no effect on the model
        } else if (key == "backend" || key == "release_lock_on_cudamalloc" ||
                   key == "pinned_use_cuda_host_register" || key == "pinned_num_register_threads" ||
                   key == "pinned_use_background_threads" || key == "graph_capture_record_stream_reuse") {
            // Accepted; no effect on the model (GC runs only with a memory fraction set).
        } else {
            throw InputError("--alloc-conf: unknown key '" + key +
                             "' (use expandable_segments, max_split_size_mb, roundup_power2_divisions, ...)");
        }
    }
    return cfg;
}

uint64_t round_size(uint64_t size, const AllocatorConfig& cfg) {
    if (size < kMinBlockSize) return kMinBlockSize;
    const int idx = std::clamp(floor_log2(size) - 20, 0, 15);
    const uint64_t div = cfg.roundup_power2_divisions[static_cast<std::size_t>(idx)];
    if (div > 1 && size > kMinBlockSize * div) return next_division(size, div);
    return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

uint64_t allocation_size(uint64_t rounded) {
    if (rounded <= kSmallSize) return kSmallBuffer;
    if (rounded < kMinLargeAlloc) return kLargeBuffer;
    return kRoundLarge * ((rounded + kRoundLarge - 1) / kRoundLarge);
}

CachingAllocator::CachingAllocator(AllocatorConfig cfg, std::optional<uint64_t> capacity, bool record_trace)
    : cfg_(cfg), capacity_(capacity), record_trace_(record_trace),
      small_free_(std::less<FreeKey>(), PoolAlloc<FreeKey>(&nodes_)),
      large_free_(std::less<FreeKey>(), PoolAlloc<FreeKey>(&nodes_)) {
    blocks_.emplace_back();  // index 0: never a block (handles start at 1)
    blocks_.reserve(1024);
}

void* CachingAllocator::NodePool::take(std::size_t bytes) {
    if (node_bytes_ == 0) node_bytes_ = bytes;
    if (bytes != node_bytes_) return ::operator new(bytes);  // not a node size this pool serves
    if (free_.empty()) {
        constexpr std::size_t kNodes = 256;
        const std::size_t words = (bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
        chunks_.push_back(std::make_unique<std::max_align_t[]>(words * kNodes));
        for (std::size_t i = kNodes; i-- > 0;) free_.push_back(chunks_.back().get() + i * words);
    }
    void* p = free_.back();
    free_.pop_back();
    return p;
}

void CachingAllocator::NodePool::give(void* node, std::size_t bytes) {
    if (bytes == node_bytes_) free_.push_back(node);
    else ::operator delete(node);
}

uint32_t CachingAllocator::new_block() {
    if (!free_slots_.empty()) {
        const uint32_t i = free_slots_.back();
        free_slots_.pop_back();
        blocks_[i] = Block{};
        blocks_[i].in_use = true;
        return i;
    }
    blocks_.emplace_back();
    blocks_.back().in_use = true;
    return static_cast<uint32_t>(blocks_.size() - 1);
}

void CachingAllocator::record(const char* action, uint64_t addr, uint64_t size, Stream s, uint64_t time) {
    if (record_trace_) trace_.push_back({action, addr, size, s, time});
}

void CachingAllocator::bump_peaks() {
    peak_allocated_ = std::max(peak_allocated_, allocated_);
    peak_reserved_ = std::max(peak_reserved_, reserved_);
}

// CCA get_free_block: smallest free block on the same stream with size >=
// rounded (ties: lowest address), minus the two oversize rejections.
std::optional<uint32_t> CachingAllocator::get_free_block(bool small, Stream stream, uint64_t rounded) {
    FreeSet& p = pool(small);
    const auto it = p.lower_bound(FreeKey{stream, rounded, 0, 0});
    if (it == p.end()) return std::nullopt;
    const Block& b = blocks_[it->block];
    if (b.stream != stream) return std::nullopt;
    if (rounded < cfg_.max_split_size && b.size >= cfg_.max_split_size) return std::nullopt;
    if (rounded >= cfg_.max_split_size && b.size >= rounded + cfg_.max_non_split_rounding_size) return std::nullopt;
    const uint32_t i = it->block;
    p.erase(it);
    return i;
}

// CCA alloc_block: cudaMalloc a new segment, failing when the capacity would
// be exceeded. The new block goes straight to the caller (not via the pool).
bool CachingAllocator::alloc_block(bool small, Stream stream, uint64_t seg_size, uint64_t rounded, uint64_t time) {
    if (cfg_.expandable_segments) return grow_expandable(small, stream, rounded, time);
    if (capacity_ && reserved_ + seg_size > *capacity_) return false;
    Segment s;
    s.addr = next_addr_;
    s.size = s.reserve = seg_size;
    s.stream = stream;
    s.small = small;
    s.live = true;
    next_addr_ += kRoundLarge * ((seg_size + kRoundLarge - 1) / kRoundLarge);
    const uint32_t bi = new_block();
    Block& b = blocks_[bi];
    b.addr = s.addr;
    b.size = seg_size;
    b.stream = stream;
    b.small = small;
    b.segment = static_cast<uint32_t>(segments_.size());
    s.first = bi;
    segments_.push_back(s);
    reserved_ += seg_size;
    free_segment_bytes_ += seg_size;
    record("segment_alloc", s.addr, seg_size, stream, time);
    ++segment_allocs_;
    pool_insert(small, bi);
    fresh_ = bi;
    return true;
}

// Expandable segments (CCA Note [Expandable Segments]): one growing segment
// per (stream, pool); pages of 2 MiB (small) or 20 MiB (large) are mapped at
// its end. A trailing free block grows in place.
bool CachingAllocator::grow_expandable(bool small, Stream stream, uint64_t rounded, uint64_t time) {
    const uint64_t page = small ? kSmallBuffer : kLargeBuffer;
    int32_t seg = -1;
    for (std::size_t i = 0; i < segments_.size(); ++i)
        if (segments_[i].live && segments_[i].expandable && segments_[i].stream == stream && segments_[i].small == small)
            seg = static_cast<int32_t>(i);
    if (seg < 0) {
        Segment s;
        s.addr = next_addr_;
        s.reserve = uint64_t{1} << 40;  // virtual reservation
        s.stream = stream;
        s.small = small;
        s.expandable = true;
        s.live = true;
        next_addr_ += s.reserve;
        const uint32_t bi = new_block();
        blocks_[bi].addr = s.addr;
        blocks_[bi].stream = stream;
        blocks_[bi].small = small;
        blocks_[bi].segment = static_cast<uint32_t>(segments_.size());
        s.first = bi;
        segments_.push_back(s);
        seg = static_cast<int32_t>(segments_.size() - 1);
    }
    Segment& s = segments_[static_cast<std::size_t>(seg)];
    uint32_t last = s.first;
    while (blocks_[last].next >= 0) last = static_cast<uint32_t>(blocks_[last].next);
    const bool trailing_free = !blocks_[last].allocated;
    const uint64_t have = trailing_free ? blocks_[last].size : 0;
    const uint64_t need = rounded > have ? rounded - have : 0;
    const uint64_t map = page * ((need + page - 1) / page);
    if (capacity_ && reserved_ + map > *capacity_) return false;
    if (trailing_free) {
        if (blocks_[last].size > 0) pool_erase(small, last);
        blocks_[last].size += map;
    } else {
        const uint32_t bi = new_block();
        Block& b = blocks_[bi];
        b.addr = s.addr + s.size;
        b.size = map;
        b.stream = stream;
        b.small = small;
        b.segment = static_cast<uint32_t>(seg);
        b.prev = static_cast<int32_t>(last);
        blocks_[last].next = static_cast<int32_t>(bi);
        last = bi;
    }
    record("segment_map", s.addr + s.size, map, stream, time);
    ++segment_allocs_;
    s.size += map;
    reserved_ += map;
    pool_insert(small, last);
    fresh_ = last;
    return true;
}

uint64_t CachingAllocator::largest_free_block(bool small, Stream stream) const {
    const FreeSet& p = small ? small_free_ : large_free_;
    auto it = p.upper_bound(FreeKey{stream, UINT64_MAX, UINT64_MAX, 0});  // past the stream's largest
    if (it == p.begin()) return 0;
    --it;
    return it->stream == stream ? it->size : 0;
}

// CCA should_split.
bool CachingAllocator::should_split(const Block& b, uint64_t rounded) const {
    const uint64_t rest = b.size - rounded;
    if (b.small || cfg_.expandable_segments) return rest >= kMinBlockSize;
    return rounded < cfg_.max_split_size && rest > kSmallSize;
}

std::optional<uint32_t> CachingAllocator::malloc(uint64_t size, Stream stream, uint64_t time) {
    const uint64_t rounded = round_size(size, cfg_);
    const bool small = rounded <= kSmallSize;
    const uint64_t seg_size = allocation_size(rounded);
    std::optional<uint32_t> got = get_free_block(small, stream, rounded);
    if (!got) {
        bool ok = alloc_block(small, stream, seg_size, rounded, time);
        if (!ok) {  // CCA malloc: release_available_cached_blocks, then release_cached_blocks, retry
            release_available_cached_blocks(rounded, time);
            ok = alloc_block(small, stream, seg_size, rounded, time);
        }
        if (!ok) {
            release_cached_blocks(time);
            ++retries_;
            ok = alloc_block(small, stream, seg_size, rounded, time);
        }
        if (!ok) {
            oom_ = OomInfo{size, allocated_, reserved_, capacity_.value_or(0)};
            record("oom", 0, size, stream, time);
            return std::nullopt;
        }
        // The new (or grown) block is the largest free one on this stream;
        // take it directly, as alloc_block hands its block to the caller.
        pool_erase(small, fresh_);
        got = fresh_;
    }
    const uint32_t bi = *got;
    if (whole_segment(blocks_[bi])) free_segment_bytes_ -= blocks_[bi].size;
    if (should_split(blocks_[bi], rounded)) {
        const uint32_t ri = new_block();  // may reallocate blocks_: index, not reference
        Block& b = blocks_[bi];
        Block& r = blocks_[ri];
        r.addr = b.addr + rounded;
        r.size = b.size - rounded;
        r.stream = b.stream;
        r.small = b.small;
        r.segment = b.segment;
        r.prev = static_cast<int32_t>(bi);
        r.next = b.next;
        if (b.next >= 0) blocks_[static_cast<std::size_t>(b.next)].prev = static_cast<int32_t>(ri);
        b.next = static_cast<int32_t>(ri);
        b.size = rounded;
        pool_insert(r.small, ri);
    }
    Block& b = blocks_[bi];
    b.allocated = true;
    b.requested = size;
    allocated_ += b.size;
    requested_ += size;
    bump_peaks();
    record("alloc", b.addr, size, stream, time);
    return bi;
}

void CachingAllocator::free(uint32_t handle, uint64_t time) {
    uint32_t bi = handle;
    Block* b = &blocks_[bi];
    b->allocated = false;
    allocated_ -= b->size;
    requested_ -= b->requested;
    record("free_requested", b->addr, b->requested, b->stream, time);
    record("free_completed", b->addr, b->requested, b->stream, time);
    b->requested = 0;
    // CCA free_block: merge with free neighbours of the same segment.
    if (b->prev >= 0 && !blocks_[static_cast<std::size_t>(b->prev)].allocated) {
        const uint32_t pi = static_cast<uint32_t>(b->prev);
        pool_erase(b->small, pi);
        Block& pr = blocks_[pi];
        pr.size += b->size;
        pr.next = b->next;
        if (b->next >= 0) blocks_[static_cast<std::size_t>(b->next)].prev = static_cast<int32_t>(pi);
        b->in_use = false;
        free_slots_.push_back(bi);
        bi = pi;
        b = &blocks_[bi];
    }
    if (b->next >= 0 && !blocks_[static_cast<std::size_t>(b->next)].allocated) {
        const uint32_t ni = static_cast<uint32_t>(b->next);
        pool_erase(b->small, ni);
        Block& nx = blocks_[ni];
        b->size += nx.size;
        b->next = nx.next;
        if (nx.next >= 0) blocks_[static_cast<std::size_t>(nx.next)].prev = static_cast<int32_t>(bi);
        nx.in_use = false;
        free_slots_.push_back(ni);
    }
    if (whole_segment(*b)) free_segment_bytes_ += b->size;
    pool_insert(b->small, bi);
}

void CachingAllocator::release_segment(uint32_t seg, uint64_t time) {
    Segment& s = segments_[seg];
    const uint32_t bi = s.first;
    pool_erase(s.small, bi);
    blocks_[bi].in_use = false;
    free_slots_.push_back(bi);
    s.live = false;
    reserved_ -= s.size;
    free_segment_bytes_ -= s.size;
    record("segment_free", s.addr, s.size, s.stream, time);
}

// CCA release_available_cached_blocks: only with max_split_size set; frees
// whole cached blocks >= max_split_size: the smallest one large enough, else
// the largest ones until `need` bytes are freed.
void CachingAllocator::release_available_cached_blocks(uint64_t need, uint64_t time) {
    if (cfg_.max_split_size == UINT64_MAX) return;
    std::vector<uint32_t> cands;
    for (std::size_t i = 0; i < segments_.size(); ++i) {
        const Segment& s = segments_[i];
        const Block& b = blocks_[s.first];
        if (s.live && !s.expandable && !s.small && b.next < 0 && !b.allocated && b.size >= cfg_.max_split_size)
            cands.push_back(static_cast<uint32_t>(i));
    }
    std::sort(cands.begin(), cands.end(), [&](uint32_t a, uint32_t c) { return segments_[a].size < segments_[c].size; });
    for (uint32_t c : cands)
        if (segments_[c].size >= need) { release_segment(c, time); return; }
    uint64_t freed = 0;
    for (auto it = cands.rbegin(); it != cands.rend() && freed < need; ++it) {
        freed += segments_[*it].size;
        release_segment(*it, time);
    }
}

// CCA release_cached_blocks (empty_cache and the last OOM retry): every
// segment that is one free block goes back to CUDA; expandable segments
// unmap their free trailing pages.
void CachingAllocator::release_cached_blocks(uint64_t time) {
    for (std::size_t i = 0; i < segments_.size(); ++i) {
        Segment& s = segments_[i];
        if (!s.live) continue;
        if (!s.expandable) {
            const Block& b = blocks_[s.first];
            if (b.next < 0 && !b.allocated) release_segment(static_cast<uint32_t>(i), time);
            continue;
        }
        uint32_t last = s.first;
        while (blocks_[last].next >= 0) last = static_cast<uint32_t>(blocks_[last].next);
        Block& b = blocks_[last];
        if (b.allocated || b.size == 0) continue;
        const uint64_t page = s.small ? kSmallBuffer : kLargeBuffer;
        const uint64_t unmap = (b.size / page) * page;
        if (unmap == 0) continue;
        pool_erase(s.small, last);
        b.size -= unmap;
        s.size -= unmap;
        reserved_ -= unmap;
        record("segment_unmap", s.addr + s.size, unmap, s.stream, time);
        if (b.size > 0) {
            pool_insert(s.small, last);
        } else if (b.prev >= 0) {
            blocks_[static_cast<std::size_t>(b.prev)].next = -1;
            b.in_use = false;
            free_slots_.push_back(last);
        }
    }
}

void CachingAllocator::empty_cache(uint64_t time) { release_cached_blocks(time); }

// What release_cached_blocks above would give back, without doing it.
uint64_t CachingAllocator::releasable() const {
    uint64_t bytes = free_segment_bytes_;
    if (!cfg_.expandable_segments) return bytes;
    for (const Segment& s : segments_) {
        if (!s.live || !s.expandable) continue;
        uint32_t last = s.first;
        while (blocks_[last].next >= 0) last = static_cast<uint32_t>(blocks_[last].next);
        const Block& b = blocks_[last];
        if (b.allocated || b.size == 0) continue;
        const uint64_t page = s.small ? kSmallBuffer : kLargeBuffer;
        bytes += (b.size / page) * page;
    }
    return bytes;
}

std::vector<SegmentInfo> CachingAllocator::segments() const {
    std::vector<SegmentInfo> out;
    for (const Segment& s : segments_) {
        if (!s.live || s.size == 0) continue;
        SegmentInfo si;
        si.address = s.addr;
        si.size = s.size;
        si.stream = s.stream;
        si.small = s.small;
        si.expandable = s.expandable;
        for (int32_t i = static_cast<int32_t>(s.first); i >= 0; i = blocks_[static_cast<std::size_t>(i)].next) {
            const Block& b = blocks_[static_cast<std::size_t>(i)];
            if (b.size == 0) continue;
            si.blocks.push_back({b.addr, b.size, b.requested, b.allocated});
        }
        out.push_back(std::move(si));
    }
    std::sort(out.begin(), out.end(), [](const SegmentInfo& a, const SegmentInfo& b) { return a.address < b.address; });
    return out;
}

}  // namespace zeromem::sim
