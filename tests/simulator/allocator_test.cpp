// The caching-allocator model against PyTorch's rules
// (c10/cuda/CUDACachingAllocator.cpp at pytorch/pytorch 001074d2,
// c10/core/AllocatorConfig.cpp at 065861fb). Every expected
// value is derived by hand in the comment next to it.
#include "zeromem/caching_allocator.h"
#include "zeromem/types.h"

#include <gtest/gtest.h>

using namespace zeromem::sim;

namespace {
constexpr uint64_t MiB = 1048576;

// Fresh allocator, one request: (allocated, reserved, block size).
struct One { uint64_t allocated, reserved, block; };
One one(uint64_t size) {
    CachingAllocator a;
    const auto h = a.malloc(size, Stream::compute);
    EXPECT_TRUE(h.has_value());
    return {a.allocated(), a.reserved(), a.block_size(*h)};
}

void expect_tiled(const CachingAllocator& a) {
    for (const auto& s : a.segments()) {
        uint64_t addr = s.address, sum = 0;
        for (const auto& b : s.blocks) {
            EXPECT_EQ(b.address, addr);
            addr += b.size;
            sum += b.size;
        }
        EXPECT_EQ(sum, s.size);
    }
}
}  // namespace

TEST(AllocatorRounding, RoundsTo512Multiples) {
    AllocatorConfig c;
    EXPECT_EQ(round_size(1, c), 512u);      // < 512 -> 512
    EXPECT_EQ(round_size(512, c), 512u);
    EXPECT_EQ(round_size(513, c), 1024u);   // next multiple of 512
    EXPECT_EQ(round_size(MiB + 1, c), MiB + 512);
}

TEST(AllocatorRounding, PowerOfTwoDivisions) {
    const AllocatorConfig c = parse_alloc_conf("roundup_power2_divisions:4");
    // 1200 <= 512 x 4 = 2048: divisions not used, 512-multiple -> 1536 (A.2 surprise).
    EXPECT_EQ(round_size(1200, c), 1536u);
    // 9000 > 2048: between 8192 and 16384 in steps of 2048 -> 10240 (512-rounding would give 9216).
    EXPECT_EQ(round_size(9000, c), 10240u);
    // 1.2 MiB: steps of 256 KiB above 1 MiB -> 1.25 MiB.
    EXPECT_EQ(round_size(1258291, c), 1310720u);
    EXPECT_EQ(round_size(8192, c), 8192u);  // a power of two stays
}

TEST(AllocatorRounding, DivisionList) {
    const AllocatorConfig c = parse_alloc_conf("roundup_power2_divisions:[256:1,512:2,>:8]");
    // 600 MiB lies in [512 MiB, 1 GiB): 2 divisions -> 768 MiB.
    EXPECT_EQ(round_size(600 * MiB, c), 768 * MiB);
    // 300 MiB + 1 lies in [256, 512) MiB: 1 division (off) -> 512-multiple.
    EXPECT_EQ(round_size(300 * MiB + 1, c), 300 * MiB + 512);
    // 2 GiB + 1: '>' = 8 divisions -> steps of 256 MiB -> 2 GiB + 256 MiB.
    EXPECT_EQ(round_size(2048 * MiB + 1, c), 2304 * MiB);
}

TEST(AllocatorRounding, SegmentSizes) {
    EXPECT_EQ(allocation_size(512), 2 * MiB);          // small pool
    EXPECT_EQ(allocation_size(MiB), 2 * MiB);          // exactly 1 MiB is small
    EXPECT_EQ(allocation_size(MiB + 512), 20 * MiB);   // 1-10 MiB: 20 MiB segment
    EXPECT_EQ(allocation_size(10 * MiB), 10 * MiB);    // >= 10 MiB: own, 2 MiB multiple
    EXPECT_EQ(allocation_size(11 * MiB), 12 * MiB);
}

// Table A.5 of the reference, one row per request on an empty cache.
TEST(AllocatorSplit, WorkedExamples) {
    One r = one(1);
    EXPECT_EQ(r.allocated, 512u);
    EXPECT_EQ(r.reserved, 2 * MiB);
    r = one(MiB);
    EXPECT_EQ(r.allocated, MiB);
    EXPECT_EQ(r.reserved, 2 * MiB);
    r = one(MiB + 1);
    EXPECT_EQ(r.allocated, MiB + 512);
    EXPECT_EQ(r.reserved, 20 * MiB);
    r = one(9 * MiB);  // 11 MiB left > 1 MiB: split
    EXPECT_EQ(r.allocated, 9 * MiB);
    EXPECT_EQ(r.reserved, 20 * MiB);
    r = one(10 * MiB);
    EXPECT_EQ(r.allocated, 10 * MiB);
    EXPECT_EQ(r.reserved, 10 * MiB);
    r = one(11 * MiB);  // 12 MiB segment; 1 MiB left is not > 1 MiB: not split
    EXPECT_EQ(r.block, 12 * MiB);
    EXPECT_EQ(r.allocated, 12 * MiB);
    EXPECT_EQ(r.reserved, 12 * MiB);
    r = one(100 * MiB + 3);  // 100 MiB + 512 in a 102 MiB segment, ~2 MiB left: split
    EXPECT_EQ(r.allocated, 100 * MiB + 512);
    EXPECT_EQ(r.reserved, 102 * MiB);
}

TEST(AllocatorBestFit, SmallestFittingBlockUnsplitRemainder) {
    CachingAllocator a;
    const auto A = a.malloc(4 * MiB, Stream::compute);  // 20 MiB segment: [4 used][16 free]
    const auto B = a.malloc(6 * MiB, Stream::compute);  // [4][6 used][10 free]
    ASSERT_TRUE(A && B);
    a.free(*A);                                          // free blocks: 4 MiB and 10 MiB
    const auto C = a.malloc(3 * MiB, Stream::compute);  // best fit: the 4 MiB block; 1 MiB left is not > 1 MiB
    ASSERT_TRUE(C);
    EXPECT_EQ(a.block_size(*C), 4 * MiB);
    EXPECT_EQ(a.allocated(), 10 * MiB);                  // 6 + 4
    EXPECT_EQ(a.reserved(), 20 * MiB);
    expect_tiled(a);
}

TEST(AllocatorStreams, FreedBlockServesOnlyItsStream) {
    CachingAllocator a;
    const auto A = a.malloc(12 * MiB, Stream::compute);
    a.free(*A);
    EXPECT_EQ(a.reserved(), 12 * MiB);
    ASSERT_TRUE(a.malloc(12 * MiB, Stream::reduce));     // cannot reuse the compute stream's block
    EXPECT_EQ(a.reserved(), 24 * MiB);
    ASSERT_TRUE(a.malloc(12 * MiB, Stream::compute));    // reuses it
    EXPECT_EQ(a.reserved(), 24 * MiB);
}

TEST(AllocatorMerge, FreeNeighboursMerge) {
    CachingAllocator a;
    const auto A = a.malloc(4 * MiB, Stream::compute);
    const auto B = a.malloc(6 * MiB, Stream::compute);
    a.free(*A);
    a.free(*B);  // 4 + 6 + 10 merge back into one 20 MiB block
    const auto segs = a.segments();
    ASSERT_EQ(segs.size(), 1u);
    ASSERT_EQ(segs[0].blocks.size(), 1u);
    EXPECT_EQ(segs[0].blocks[0].size, 20 * MiB);
    ASSERT_TRUE(a.malloc(15 * MiB, Stream::compute));  // fits the merged block, no new segment
    EXPECT_EQ(a.reserved(), 20 * MiB);
    EXPECT_EQ(a.allocated(), 15 * MiB);                 // 5 MiB left > 1 MiB: split
}

TEST(AllocatorCapacity, FreesCachedSegmentsAndRetriesBeforeOom) {
    CachingAllocator a({}, 40 * MiB);
    const auto A = a.malloc(30 * MiB, Stream::compute);
    a.free(*A);                                  // 30 MiB cached
    const auto B = a.malloc(32 * MiB, Stream::compute);  // 30 + 32 > 40: release cache, retry
    ASSERT_TRUE(B);
    EXPECT_EQ(a.reserved(), 32 * MiB);
    EXPECT_EQ(a.num_alloc_retries(), 1u);
    EXPECT_FALSE(a.oom());
}

TEST(AllocatorCapacity, OomReportsAllocatedAndReserved) {
    CachingAllocator a({}, 40 * MiB);
    ASSERT_TRUE(a.malloc(30 * MiB, Stream::compute));
    EXPECT_FALSE(a.malloc(20 * MiB, Stream::compute));  // 30 + 20 > 40, nothing cached
    ASSERT_TRUE(a.oom());
    EXPECT_EQ(a.oom()->requested, 20 * MiB);
    EXPECT_EQ(a.oom()->allocated, 30 * MiB);
    EXPECT_EQ(a.oom()->reserved, 30 * MiB);
    EXPECT_EQ(a.oom()->capacity, 40 * MiB);
}

TEST(AllocatorMaxSplit, OversizeBlocksServeOnlyNearSizes) {
    CachingAllocator a(parse_alloc_conf("max_split_size_mb:20"));
    const auto big = a.malloc(40 * MiB, Stream::compute);
    a.free(*big);  // a cached 40 MiB block (>= max_split_size)
    // 5 MiB < max_split but the block >= max_split: not handed out -> new 20 MiB segment.
    ASSERT_TRUE(a.malloc(5 * MiB, Stream::compute));
    EXPECT_EQ(a.reserved(), 60 * MiB);
    // 30 MiB >= max_split: 40 < 30 + 20, so the 40 MiB block is used whole (no split above max_split).
    const auto c = a.malloc(30 * MiB, Stream::compute);
    ASSERT_TRUE(c);
    EXPECT_EQ(a.block_size(*c), 40 * MiB);
    EXPECT_EQ(a.reserved(), 60 * MiB);
}

TEST(AllocatorExpandable, GrowsOneSegmentInPages) {
    CachingAllocator a(parse_alloc_conf("expandable_segments:True"));
    ASSERT_TRUE(a.malloc(MiB + 1, Stream::compute));  // maps one 20 MiB page
    EXPECT_EQ(a.reserved(), 20 * MiB);
    const auto b = a.malloc(11 * MiB, Stream::compute);  // fits the mapped rest; split since rest >= 512 B
    ASSERT_TRUE(b);
    EXPECT_EQ(a.block_size(*b), 11 * MiB);
    EXPECT_EQ(a.allocated(), MiB + 512 + 11 * MiB);
    ASSERT_TRUE(a.malloc(10 * MiB, Stream::compute));  // 20 - 12 MiB - 512 free < 10 MiB: map another page
    EXPECT_EQ(a.reserved(), 40 * MiB);
    ASSERT_EQ(a.segments().size(), 1u);
    EXPECT_EQ(a.segments()[0].size, 40 * MiB);
    expect_tiled(a);
}

TEST(AllocatorConfigParse, RejectsBadValues) {
    EXPECT_THROW(parse_alloc_conf("no_such_key:1"), zeromem::InputError);
    EXPECT_THROW(parse_alloc_conf("max_split_size_mb:10"), zeromem::InputError);
    EXPECT_THROW(parse_alloc_conf("roundup_power2_divisions:3"), zeromem::InputError);
    EXPECT_THROW(parse_alloc_conf("expandable_segments:maybe"), zeromem::InputError);
    EXPECT_NO_THROW(parse_alloc_conf("backend:native,garbage_collection_threshold:0.6"));
}

TEST(AllocatorTiling, BlocksTileSegmentsAfterManyOps) {
    CachingAllocator a;
    std::vector<uint32_t> live;
    uint64_t x = 12345;
    for (int i = 0; i < 2000; ++i) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        if (!live.empty() && (x >> 60) < 7) {
            const size_t k = (x >> 20) % live.size();
            a.free(live[k]);
            live.erase(live.begin() + static_cast<long>(k));
        } else {
            const auto h = a.malloc((x >> 33) % (30 * MiB) + 1, static_cast<Stream>((x >> 40) % 3));
            ASSERT_TRUE(h);
            live.push_back(*h);
        }
    }
    expect_tiled(a);
    uint64_t alloc = 0, reserved = 0;
    for (const auto& s : a.segments()) {
        reserved += s.size;
        for (const auto& b : s.blocks) alloc += b.allocated ? b.size : 0;
    }
    EXPECT_EQ(alloc, a.allocated());
    EXPECT_EQ(reserved, a.reserved());
}

// releasable(): what torch.cuda.empty_cache() would give back (CCA
// release_cached_blocks, reference A.7-A.9: every segment that is one free
// block; with expandable segments, the whole free pages at the end).
TEST(AllocatorReleasable, WholeFreeSegmentsByHand) {
    CachingAllocator a;
    const auto big = a.malloc(30 * MiB, Stream::compute);  // >= 10 MiB: own 30 MiB segment (A.3)
    const auto mid = a.malloc(4 * MiB, Stream::compute);   // 1-10 MiB: a 20 MiB segment, split (A.5)
    const auto small = a.malloc(1000, Stream::compute);    // <= 1 MiB: a 2 MiB small segment
    ASSERT_TRUE(big && mid && small);
    EXPECT_EQ(a.reserved(), 52 * MiB);
    EXPECT_EQ(a.releasable(), 0u);  // every segment holds a live block
    a.free(*big);
    EXPECT_EQ(a.releasable(), 30 * MiB);
    a.free(*mid);  // merges with its free remainder: the 20 MiB segment is one free block
    EXPECT_EQ(a.releasable(), 50 * MiB);
    a.free(*small);
    EXPECT_EQ(a.releasable(), 52 * MiB);
    const auto again = a.malloc(3 * MiB, Stream::compute);  // best fit: the 20 MiB block, split again
    ASSERT_TRUE(again);
    EXPECT_EQ(a.releasable(), 32 * MiB);
    a.empty_cache();
    EXPECT_EQ(a.reserved(), 20 * MiB);
    EXPECT_EQ(a.releasable(), 0u);
}

TEST(AllocatorReleasable, ExpandableTrailingPagesByHand) {
    CachingAllocator a(parse_alloc_conf("expandable_segments:True"));
    const auto x = a.malloc(25 * MiB, Stream::compute);  // maps two 20 MiB pages: 15 MiB free at the end
    ASSERT_TRUE(x);
    EXPECT_EQ(a.reserved(), 40 * MiB);
    EXPECT_EQ(a.releasable(), 0u);  // 15 MiB < one 20 MiB page
    a.free(*x);
    EXPECT_EQ(a.releasable(), 40 * MiB);
}

// After random traffic on each pool and stream, releasable() equals what the
// segment listing says empty_cache would free (counted here from the blocks),
// and then what empty_cache does free.
TEST(AllocatorReleasable, MatchesTheSegmentsAfterManyOps) {
    for (const char* conf : {"", "max_split_size_mb:40", "expandable_segments:True"}) {
        CachingAllocator a(parse_alloc_conf(conf));
        std::vector<uint32_t> live;
        uint64_t x = 777;
        for (int i = 0; i < 3000; ++i) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            if (!live.empty() && (x >> 60) < 8) {
                const size_t k = (x >> 20) % live.size();
                a.free(live[k]);
                live.erase(live.begin() + static_cast<long>(k));
            } else {
                const uint64_t size = (x >> 62) == 0 ? (x >> 33) % (40 * MiB) + 1 : (x >> 40) % (2 * MiB) + 1;
                const auto h = a.malloc(size, static_cast<Stream>((x >> 36) % 3));
                ASSERT_TRUE(h);
                live.push_back(*h);
            }
            if (i % 97 != 0) continue;
            uint64_t expected = 0;
            for (const auto& s : a.segments()) {
                ASSERT_FALSE(s.blocks.empty());
                const BlockInfo& last = s.blocks.back();
                if (s.expandable) {
                    const uint64_t page = s.small ? 2 * MiB : 20 * MiB;
                    if (!last.allocated) expected += last.size / page * page;
                } else if (s.blocks.size() == 1 && !last.allocated) {
                    expected += s.size;
                }
            }
            ASSERT_EQ(a.releasable(), expected) << conf << " after op " << i;
        }
        const uint64_t before = a.reserved(), releasable = a.releasable();
        a.empty_cache();
        EXPECT_EQ(before - a.reserved(), releasable) << conf;
        EXPECT_EQ(a.releasable(), 0u) << conf;
    }
}

// Values beyond 2^40 (a MiB count past any GPU, or one whose bytes wrap 64
// bits) and allocator backends other than the caching allocator are refused
// naming the key, not parsed into nonsense.
TEST(AllocatorConfigParse, HugeValuesAndOtherBackendsAreRefused) {
    auto error_of = [](const std::string& text) {
        try {
            parse_alloc_conf(text);
        } catch (const zeromem::InputError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(error_of("max_split_size_mb:99999999999999999999").find("max_split_size_mb"), std::string::npos);
    EXPECT_NE(error_of("max_split_size_mb:17592186044416").find("too large"), std::string::npos);  // 2^44 MiB
    EXPECT_NE(error_of("backend:cudaMallocAsync").find("backend:cudaMallocAsync"), std::string::npos);
    EXPECT_EQ(error_of("backend:native"), "");
    EXPECT_EQ(parse_alloc_conf("max_split_size_mb:1024").max_split_size, 1024ULL << 20);
}
