// The fragmentation allowance block by block (fragmentation_report) on small
// event sequences whose allocator state follows by hand from
// c10/cuda/CUDACachingAllocator.cpp (CCA, pytorch/pytorch 001074d2):
// get_free_block (the smallest free block of the request's stream and pool
// at least as large as the request), should_split (large pool: split when
// the remainder is over kSmallSize = 1 MiB and max_split_size is unlimited,
// its default), get_allocation_size (a request of 10 MiB or more gets a
// segment of its size rounded up to 2 MiB: every size below is a 2 MiB
// multiple, so its segment is exactly its size), and malloc's failure path
// (release_available_cached_blocks, which does nothing without
// max_split_size; release_cached_blocks, which cudaFrees every segment that
// is one free block; one retry; else OutOfMemoryError).
#include "zeromem/caching_allocator.h"
#include "zeromem/simulator.h"

#include <gtest/gtest.h>

#include <string>

using namespace zeromem::sim;

namespace {

constexpr uint64_t MiB = 1048576;

struct LogBuilder {
    EventLog log;
    uint64_t next = 1;
    LogBuilder() { log.modules = {"model"}; }
    uint64_t alloc(uint64_t bytes, const char* term, Stream s = Stream::compute) {
        Event e;
        e.action = Action::alloc;
        e.stream = s;
        e.tensor = next;
        e.bytes = bytes;
        e.term = term;
        log.events.push_back(e);
        return next++;
    }
    void free(uint64_t tensor) {
        for (const Event& a : log.events)
            if (a.action == Action::alloc && a.tensor == tensor) {
                Event e = a;
                e.action = Action::free;
                log.events.push_back(e);
                return;
            }
    }
};

// ZeRO-3 forward with full checkpointing and overlap_comm off, three layers:
// the 448 MiB gathered MLP weight is freed, then the next layer's 256 MiB
// checkpointed input arrives, then a 1 GiB request ends the forward.
LogBuilder checkpointed_layers(Stream gather_stream) {
    LogBuilder b;
    for (int layer = 0; layer < 3; ++layer) {
        const uint64_t w = b.alloc(448 * MiB, "gathered_parameter", gather_stream);
        b.free(w);
        b.alloc(256 * MiB, "checkpoint_input");  // live until the backward
    }
    b.alloc(1024 * MiB, "logits");
    return b;
}

}  // namespace

// Layer 0: the weight gets a 448 MiB segment S0 and is freed (S0 one free
// block). The 256 MiB input: the smallest free block >= 256 MiB is S0's, split
// (192 MiB left > 1 MiB). Layer 1: the weight (448 MiB) is larger than the
// only free block (192 MiB): a new segment S1; freed; the input takes S1's
// 448 MiB block (the 192 MiB one is too small), leaving 192 MiB. Layer 2 the
// same (S2). The 1 GiB request misses (largest free 192 MiB): its own
// segment; that is the allocated peak: allocated 3 x 256 + 1024 MiB, reserved
// 3 x 448 + 1024 MiB, no segment wholly free, so the allowance is 3 x 192 MiB.
TEST(FragmentationReport, CheckpointedInputsSplitFreedWeightsOnOneStream) {
    const LogBuilder b = checkpointed_layers(Stream::compute);
    const FragmentationReport r = fragmentation_report(b.log, SimOptions{}, std::nullopt);
    EXPECT_FALSE(r.oom);
    EXPECT_EQ(r.term, "logits");
    EXPECT_EQ(r.allocated, (3 * 256 + 1024) * MiB);
    EXPECT_EQ(r.reserved, (3 * 448 + 1024) * MiB);
    EXPECT_EQ(r.releasable, 0u);
    EXPECT_EQ(r.allowance, 3 * 192 * MiB);
    ASSERT_EQ(r.groups.size(), 1u);
    EXPECT_EQ(r.groups[0].free_block, 192 * MiB);
    EXPECT_EQ(r.groups[0].count, 3u);
    EXPECT_EQ(r.groups[0].segment, 448 * MiB);
    EXPECT_EQ(r.groups[0].holds, "checkpoint_input 0.250 GiB");
    ASSERT_TRUE(r.has_miss);
    EXPECT_EQ(r.miss_term, "logits");
    EXPECT_EQ(r.miss_bytes, 1024 * MiB);
    EXPECT_EQ(r.miss_largest_free, 192 * MiB);
    const std::string text = render_fragmentation(r);
    EXPECT_NE(text.find("0.562 GiB reserved but unallocated at the allocated peak"), std::string::npos) << text;
    EXPECT_NE(text.find("3 free blocks of 0.188 GiB (0.562 GiB) in 0.438 GiB segments holding checkpoint_input 0.250 GiB"),
              std::string::npos) << text;
    EXPECT_NE(text.find("(the largest: 0.188 GiB)"), std::string::npos) << text;
}

// Gathers on their own stream (overlap_comm on): a block freed on the gather
// stream serves only that stream (CCA get_free_block: the pools are ordered
// by stream first). Each input gets its own 256 MiB segment; every weight
// reuses S0 whole. At the peak S0 is one free block (releasable, 448 MiB) and
// nothing else is free: the allowance is 0.
TEST(FragmentationReport, GathersOnTheirOwnStreamLeaveNoHoles) {
    const LogBuilder b = checkpointed_layers(Stream::allgather);
    const FragmentationReport r = fragmentation_report(b.log, SimOptions{}, std::nullopt);
    EXPECT_EQ(r.allocated, (3 * 256 + 1024) * MiB);
    EXPECT_EQ(r.reserved, (448 + 3 * 256 + 1024) * MiB);
    EXPECT_EQ(r.releasable, 448 * MiB);
    EXPECT_EQ(r.allowance, 0u);
    EXPECT_TRUE(r.groups.empty());
}

// A long-lived small buffer lands in a freed large segment (ZeRO-3: the IPG
// bucket right after initialize_optimizer_states frees its gradient buffer).
// G 4000 MiB: segment S0; freed. P 50 MiB: the smallest free block >= 50 MiB
// is S0's: split, 3950 MiB left. Y 4000 MiB misses (3950 < 4000): a new
// segment. Peak at Y: allocated 4050 MiB, reserved 8000 MiB, allowance 3950.
// With a capacity of 6000 MiB, Y's cudaMalloc (4000 + 4000 > 6000) fails,
// release_cached_blocks finds no wholly free segment (S0 holds P), the retry
// fails: the OOM, read there: reserved 4000 - allocated 50 = 3950 MiB.
TEST(FragmentationReport, SmallBufferPinsAFreedSegment) {
    LogBuilder b;
    const uint64_t g = b.alloc(4000 * MiB, "fp32_gradient_buffer");
    b.free(g);
    b.alloc(50 * MiB, "ipg_bucket");
    b.alloc(4000 * MiB, "fp32_gradient_sub_group");
    const FragmentationReport r = fragmentation_report(b.log, SimOptions{}, std::nullopt);
    EXPECT_EQ(r.allocated, 4050 * MiB);
    EXPECT_EQ(r.reserved, 8000 * MiB);
    EXPECT_EQ(r.allowance, 3950 * MiB);
    ASSERT_EQ(r.groups.size(), 1u);
    EXPECT_EQ(r.groups[0].holds, "ipg_bucket 0.049 GiB");
    const FragmentationReport oom = fragmentation_report(b.log, SimOptions{}, 6000 * MiB);
    EXPECT_TRUE(oom.oom);
    EXPECT_EQ(oom.term, "fp32_gradient_sub_group");
    EXPECT_EQ(oom.allocated, 50 * MiB);
    EXPECT_EQ(oom.reserved, 4000 * MiB);
    EXPECT_EQ(oom.allowance, 3950 * MiB);
}

// The capacity changes which blocks later requests split. A 4000 MiB (freed,
// cached), X 6600 MiB, P 2400 MiB, Z 1000 MiB (X, P, Z live).
// Unlimited: X gets its own segment; P takes A's cached 4000 MiB block
// (split: 1600 left); Z takes that 1600 MiB block (split: 600 left). Peak at
// Z: allocated 10000 MiB, reserved 4000 + 6600 = 10600, allowance 600 MiB.
// Capacity 10500 MiB: X's cudaMalloc (4000 + 6600 > 10500) fails,
// release_cached_blocks frees A's wholly free segment, the retry succeeds
// (6600); P and Z each get a segment of their own (9000, then 10000 <= 10500).
// Peak at Z: allocated = reserved = 10000 MiB: allowance 0, and no OOM.
TEST(FragmentationReport, CapacityReleasesTheCacheBeforeItIsSplit) {
    LogBuilder b;
    const uint64_t a = b.alloc(4000 * MiB, "fp32_gradient_buffer");
    b.free(a);
    b.alloc(6600 * MiB, "exp_avg");
    b.alloc(2400 * MiB, "exp_avg_sq");
    b.alloc(1000 * MiB, "optimizer_temporary");
    const FragmentationReport unlimited = fragmentation_report(b.log, SimOptions{}, std::nullopt);
    EXPECT_EQ(unlimited.allocated, 10000 * MiB);
    EXPECT_EQ(unlimited.reserved, 10600 * MiB);
    EXPECT_EQ(unlimited.allowance, 600 * MiB);
    const FragmentationReport capped = fragmentation_report(b.log, SimOptions{}, 10500 * MiB);
    EXPECT_FALSE(capped.oom);
    EXPECT_EQ(capped.allocated, 10000 * MiB);
    EXPECT_EQ(capped.reserved, 10000 * MiB);
    EXPECT_EQ(capped.allowance, 0u);
}

// largest_free_block and segment_allocs by hand: 30 MiB and 12 MiB segments
// on the compute stream, the 30 MiB one freed: the largest free large-pool
// block of compute is 30 MiB, of the gather stream none; two cudaMallocs.
TEST(FragmentationReport, AllocatorLargestFreeBlockAndSegmentCount) {
    CachingAllocator al;
    const auto x = al.malloc(30 * MiB, Stream::compute);
    (void)al.malloc(12 * MiB, Stream::compute);
    ASSERT_TRUE(x.has_value());
    al.free(*x);
    EXPECT_EQ(al.largest_free_block(false, Stream::compute), 30 * MiB);
    EXPECT_EQ(al.largest_free_block(false, Stream::allgather), 0u);
    EXPECT_EQ(al.largest_free_block(true, Stream::compute), 0u);
    EXPECT_EQ(al.segment_allocs(), 2u);
    (void)al.malloc(20 * MiB, Stream::compute);  // splits the 30 MiB block (10 MiB left > 1 MiB): no cudaMalloc
    EXPECT_EQ(al.segment_allocs(), 2u);
    EXPECT_EQ(al.largest_free_block(false, Stream::compute), 10 * MiB);
}
