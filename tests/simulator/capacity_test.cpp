// The capacity the replay runs against: the GPU's memory less the per-process
// terms that sit outside PyTorch's caching allocator (the CUDA context,
// NCCL's communicator buffers, cuBLAS's own workspace), so only what is left
// is there for the allocator's segments (c10/cuda/CUDACachingAllocator.cpp
// malloc: cudaMalloc fails when the device has no room, whoever holds it).
// The bounds follow from the allocator alone: with room for the uncapped
// replay's peak reserved the cap is never reached; with less room than its
// peak allocated the live tensors cannot fit, whatever is given back.
#include "zeromem/request.h"
#include "zeromem/simulator.h"

#include <gtest/gtest.h>

using namespace zeromem;

namespace {

constexpr uint64_t MiB = 1048576;

// llama-2-7b on 8 GPUs at ZeRO-3, micro batch 1 at 1024 tokens: the default
// per-process terms (context, NCCL, cuBLAS) are all non-zero here.
Resolved resolve_at(std::optional<uint64_t> gpu_memory) {
    Request r;
    r.model = "llama-2-7b";
    r.gpus = 8;
    r.stage = 3;
    r.micro_batch = 1;
    r.seq_len = 1024;
    if (gpu_memory) r.gpu_memory = std::to_string(*gpu_memory) + "B";
    return resolve_request(r, ZEROMEM_SOURCE_DATA_DIR);
}

}  // namespace

TEST(ReplayCapacity, IsTheGpuLessThePerProcessTerms) {
    const uint64_t gpu = 80ull * 1024 * MiB;
    const Resolved res = resolve_at(gpu);
    const ProcessMemory p = process_memory(res.input);
    ASSERT_GT(p.cuda_context, 0u);
    ASSERT_GT(p.nccl_buffers, 0u);
    EXPECT_EQ(sim::fragmentation_capacity(res.input), gpu - p.total());
    EXPECT_FALSE(sim::fragmentation_capacity(resolve_at(std::nullopt).input).has_value());
}

TEST(ReplayCapacity, SimulateLeavesTheProcessTermsOutsideTheAllocator) {
    const sim::SimResult free_run = sim::simulate(resolve_at(std::nullopt).input, sim::SimOptions{});
    ASSERT_FALSE(free_run.oom);
    const uint64_t process = process_memory(resolve_at(std::nullopt).input).total();
    ASSERT_GT(process, 64 * MiB);

    // Room for the uncapped peak reserved beside the process terms: it fits.
    const uint64_t roomy = free_run.peak_reserved + process;
    EXPECT_FALSE(sim::simulate(resolve_at(roomy).input, sim::SimOptions{}).oom);

    // Room for the peak allocated only if the process terms were inside the
    // allocator: the live tensors do not fit, so the replay runs out.
    const uint64_t short_by_process = free_run.peak_allocated + process - 64 * MiB;
    EXPECT_TRUE(sim::simulate(resolve_at(short_by_process).input, sim::SimOptions{}).oom);
}
