// The host allocator model against PyTorch's CachingHostAllocator rules
// (aten/src/ATen/core/CachingHostAllocator.h allocate/free): pinned sizes rounded up to a power of two (torch
// >= 1.11), freed pinned blocks cached and reused only by a request of the
// same rounded size (torch >= 2.5), never returned; pageable memory exact.
// Every expected value is derived by hand in the comments.
#include "zeromem/host_allocator.h"
#include "zeromem/types.h"

#include <gtest/gtest.h>

using namespace zeromem::sim;

namespace {
constexpr uint64_t GiB = 1073741824ull;
}

TEST(HostAllocator, PinnedRequestIsRoundedToAPowerOfTwo) {
    HostAllocator a;
    // 5e9 B: 2^32 = 4.29e9 < 5e9 <= 2^33 = 8 GiB.
    const uint32_t h = a.malloc(5000000000ull, HostKind::pinned);
    EXPECT_EQ(a.allocated(), 5000000000ull);
    EXPECT_EQ(a.pinned(), 8 * GiB);
    EXPECT_EQ(a.resident(), 8 * GiB);
    // Freed: cached, still pinned and resident.
    a.free(h);
    EXPECT_EQ(a.allocated(), 0u);
    EXPECT_EQ(a.cached(), 8 * GiB);
    EXPECT_EQ(a.resident(), 8 * GiB);
    // 3e9 B rounds to 4 GiB (2^31 < 3e9 <= 2^32): not the cached 8 GiB
    // bucket, so a new block: 8 + 4 = 12 GiB resident.
    a.malloc(3000000000ull, HostKind::pinned);
    EXPECT_EQ(a.pinned(), 12 * GiB);
    EXPECT_EQ(a.resident(), 12 * GiB);
    EXPECT_EQ(a.cached(), 8 * GiB);
    EXPECT_EQ(a.allocated(), 3000000000ull);
}

TEST(HostAllocator, CachedBlockServesASameSizeRequest) {
    HostAllocator a;
    const uint32_t h = a.malloc(5000000000ull, HostKind::pinned);
    a.free(h);
    // 6e9 B also rounds to 8 GiB: the cached block is reused, nothing new pinned.
    a.malloc(6000000000ull, HostKind::pinned);
    EXPECT_EQ(a.pinned(), 8 * GiB);
    EXPECT_EQ(a.cached(), 0u);
    EXPECT_EQ(a.allocated(), 6000000000ull);
}

TEST(HostAllocator, BeforeTorch25ACachedBlockServesASmallerRequest) {
    // Best fit (lower_bound) before PR #134154: the cached 8 GiB block serves 3e9 B.
    HostAllocator a(host_allocator_config("2.4"));
    a.free(a.malloc(5000000000ull, HostKind::pinned));
    a.malloc(3000000000ull, HostKind::pinned);
    EXPECT_EQ(a.pinned(), 8 * GiB);
}

TEST(HostAllocator, BeforeTorch111PinnedSizesAreExact) {
    HostAllocator a(host_allocator_config("1.10.1"));
    // pytorch#95823: torch 1.10.1 pinned exactly the tensor's bytes.
    a.malloc(5000000000ull, HostKind::pinned);
    EXPECT_EQ(a.pinned(), 5000000000ull);
    EXPECT_EQ(a.pinned_block_size(3), 3u);
}

TEST(HostAllocator, PageableAndLockedMemoryAreExactAndReturned) {
    HostAllocator a;
    const uint32_t p = a.malloc(5000000000ull, HostKind::pageable);
    const uint32_t l = a.malloc(3000000000ull, HostKind::locked);
    EXPECT_EQ(a.resident(), 8000000000ull);
    EXPECT_EQ(a.pinned(), 3000000000ull);
    a.free(p);
    a.free(l);
    EXPECT_EQ(a.resident(), 0u);
    EXPECT_EQ(a.pinned(), 0u);
    EXPECT_THROW(a.free(p), std::logic_error);
}

TEST(HostAllocator, ExactPowerOfTwoIsNotRounded) {
    HostAllocator a;
    EXPECT_EQ(a.pinned_block_size(4 * GiB), 4 * GiB);
    EXPECT_EQ(a.pinned_block_size(4 * GiB + 1), 8 * GiB);
    EXPECT_EQ(a.pinned_block_size(1), 1u);
}

TEST(HostAllocator, ConfigFollowsTheTorchVersion) {
    EXPECT_TRUE(host_allocator_config("2.5").same_size_reuse);
    EXPECT_FALSE(host_allocator_config("2.4.1").same_size_reuse);
    EXPECT_TRUE(host_allocator_config("1.11").round_pinned);
    EXPECT_FALSE(host_allocator_config("1.10").round_pinned);
    EXPECT_THROW(host_allocator_config("x.y"), zeromem::InputError);
}

// find_host_oom: the first event whose resident bytes x ranks per node
// exceed the capacity (4 ranks: 3 GB x 4 = 12 GB > 10 GB at t = 1; the later,
// higher peak is not the one reported).
TEST(HostOom, FirstEventOverTheNodesCapacity) {
    zeromem::sim::HostResult r;
    r.modules = {"model", "model.layers.0"};
    r.ranks_per_node = 4;
    r.timeline.push_back({0, "a", zeromem::sim::Phase::load, 0, 0, zeromem::sim::HostKind::pageable, 0, 2000000000, 0, 0});
    r.timeline.push_back({1, "b", zeromem::sim::Phase::forward, 1, 0, zeromem::sim::HostKind::pageable, 0, 3000000000, 0, 0});
    r.timeline.push_back({2, "c", zeromem::sim::Phase::backward, 0, 0, zeromem::sim::HostKind::pageable, 0, 5000000000, 0, 0});
    const auto o = zeromem::sim::find_host_oom(r, 10000000000u);
    ASSERT_TRUE(o);
    EXPECT_EQ(o->t, 1u);
    EXPECT_EQ(o->event, "b");
    EXPECT_EQ(o->module, "model.layers.0");
    EXPECT_EQ(o->phase, zeromem::sim::Phase::forward);
    EXPECT_EQ(o->per_node, 12000000000u);
    EXPECT_FALSE(zeromem::sim::find_host_oom(r, 20000000000u));  // 5 GB x 4 = 20 GB is not over 20 GB
    // 12e9 B = 11.18 GiB, 10e9 B = 9.31 GiB.
    EXPECT_EQ(zeromem::sim::render_host_oom(*o),
              "host out of memory: 11.18 GiB per node > 9.31 GiB host RAM per node (--host-memory) at b in model.layers.0, "
              "phase forward (GiB = 2^30 bytes)");
}
