// The per-process terms (process_terms.h): the CUDA context, NCCL's
// communicator buffers and the cuBLAS/cuBLASLt workspaces. Every expected
// value is worked out by hand from the code that allocates it.
#include "zeromem/process_terms.h"
#include "zeromem/request.h"

#include "estimate_inputs.h"

#include <gtest/gtest.h>

using namespace zeromem;

namespace {

// NCCL src/include/device.h: NCCL_STEPS 8, NCCL_LL_LINES_PER_THREAD 8,
// NCCL_LL_MAX_NTHREADS 512, sizeof(union ncclLLFifoLine) 16;
// NCCL_LL128_ELEMS_PER_THREAD 120, NCCL_LL128_MAX_NTHREADS 640, 8 B each;
// src/init.cc DEFAULT_BUFFSIZE (1 << 22).
constexpr uint64_t kLl = 8 * 512 * 8 * 16;          // 524,288
constexpr uint64_t kLl128 = 120 * 640 * 8 * 8;      // 4,915,200
constexpr uint64_t kSimple = 4194304;               // 4 MiB
constexpr uint64_t kP2pSet = kLl + kLl128 + kSimple;      // 9,633,792 per channel in a node
constexpr uint64_t kNetSet = 2 * (kLl128 + kSimple);      // 18,219,008 per channel across nodes

Resolved resolve(Request r) { return resolve_request(r, ZEROMEM_SOURCE_DATA_DIR); }

Request llama(int gpus, const char* gpu) {
    Request r;
    r.model = "llama-2-7b";
    r.gpus = gpus;
    r.gpu = gpu;
    r.stage = 2;
    return r;
}

}  // namespace

TEST(NcclBuffers, ProtocolFifoSizesAreNcclDefaults) {
    EXPECT_EQ(kNcclLlBuffSize, 524288u);
    EXPECT_EQ(kNcclLl128BuffSize, 4915200u);
    EXPECT_EQ(kNcclSimpleBuffSize, kSimple);
    EXPECT_EQ(nccl_ring_bytes(1, false), kP2pSet);
    EXPECT_EQ(nccl_ring_bytes(1, true), kNetSet);
}

// search.cc ncclTopoCompute / ncclTopoDupChannels, connect.cc ncclTopoPostset:
//  A100 (nvlink-gen3, SM80_NVLINK_BW 20 x 12 = 240 GB/s): speedArrayIntra's
//    first speed <= 240 is 40 -> 6 rings = 240, done; 40 >= 25 and sm80 is not
//    > 80 -> duplicated to 12; Postset x2 = 24.
//  H100 (nvlink-gen4, 20.6 x 18 = 370.8): sm90 array 60 -> 6 rings (360), then
//    50 -> 7 (350), 40 -> 9 (360), 30 -> 12 (360), 24/60 < .49 stops; best 6 x 60;
//    60 >= 50 -> duplicated to 12; x2 = 24.
//  V100 (nvlink-gen2, 20 x 6 = 120): 40 -> 3 = 120; dup 6; x2 = 12.
//  PCIe gen4 (24 GB/s, sm86): 20 -> 1 (20), 18, 15 -> 1, 12 -> 2 = 24, done;
//    12 < 25, no dup; x2 = 4.  PCIe gen3 (12): 12 -> 1 = 12; x2 = 2.
//  B200 (nvlink-gen5, 40.1 x 18 = 721.8, sm100): 90 -> 8 (720) stays best;
//    90 >= 50 -> 16; x2 = 32.
TEST(NcclBuffers, RingChannelsFollowTheSearch) {
    EXPECT_EQ(nccl_ring_channels("nvlink-gen3", 80), 24);
    EXPECT_EQ(nccl_ring_channels("nvlink-gen4", 90), 24);
    EXPECT_EQ(nccl_ring_channels("nvlink-gen2", 70), 12);
    EXPECT_EQ(nccl_ring_channels("pcie-gen4", 86), 4);
    EXPECT_EQ(nccl_ring_channels("pcie-gen3", 75), 2);
    EXPECT_EQ(nccl_ring_channels("nvlink-gen5", 100), 32);
    std::string why;
    EXPECT_EQ(nccl_ring_channels("", 0, &why), 24);  // unknown: H100's NVLink
    EXPECT_NE(why.find("unknown interconnect"), std::string::npos) << why;
}

// deepspeed/utils/groups.py: WORLD and _clone_world_group (the data-parallel
// group without an mpu) on 8 GPUs of one node: 2 communicators x 24 channels
// x 9,633,792 B = 462,422,016 B on an A100 node.
TEST(NcclBuffers, WorldAndDataParallelGroupOnOneNode) {
    const Resolved res = resolve(llama(8, "A100-80GB"));
    const auto comms = nccl_communicators(res.input);
    ASSERT_EQ(comms.size(), 2u);
    EXPECT_EQ(comms[0].name, "world");
    EXPECT_EQ(comms[1].name, "data_parallel");
    EXPECT_FALSE(comms[0].spans_nodes);
    const ProcessMemory pm = process_memory(res.input);
    EXPECT_EQ(pm.nccl_buffers, 2u * 24u * kP2pSet);
    EXPECT_EQ(pm.nccl_buffers, 462422016u);
}

TEST(NcclBuffers, NoneOnOneGpu) {
    const Resolved res = resolve(llama(1, "A100-80GB"));
    EXPECT_TRUE(nccl_communicators(res.input).empty());
    EXPECT_EQ(process_memory(res.input).nccl_buffers, 0u);
}

// 16 GPUs on 2 nodes: both rings cross the network, 24 x 18,219,008 B each.
TEST(NcclBuffers, AcrossNodesTheNetTransportHoldsBothEnds) {
    Request r = llama(16, "H100-80GB");
    r.nodes = 2;
    const Resolved res = resolve(r);
    EXPECT_EQ(process_memory(res.input).nccl_buffers, 2u * 24u * kNetSet);
}

// ZeRO++ hpZ over 8 of 16 ranks (groups.py _create_zero_param_parallel_group)
// adds a third, intra-node communicator: 24 x 9,633,792 B.
TEST(NcclBuffers, HpzAddsItsGroup) {
    Request r = llama(16, "H100-80GB");
    r.nodes = 2;
    r.stage = 3;
    Resolved res = resolve(r);
    res.input.zero.zero_hpz_partition_size = 8;
    const auto comms = nccl_communicators(res.input);
    ASSERT_EQ(comms.size(), 3u);
    EXPECT_EQ(comms[2].name, "zero_hpz");
    EXPECT_FALSE(comms[2].spans_nodes);
    EXPECT_EQ(process_memory(res.input).nccl_buffers, 2u * 24u * kNetSet + 24u * kP2pSet);
}

// MoE with ep_size 4 on 8 GPUs: expert-parallel (4 ranks) and expert-data-
// parallel (2 ranks) groups (groups.py _create_expert_and_data_parallel).
TEST(NcclBuffers, MoeExpertGroups) {
    Resolved res = resolve(llama(8, "A100-80GB"));
    res.input.moe.ep_size = 4;
    const auto comms = nccl_communicators(res.input);
    ASSERT_EQ(comms.size(), 4u);
    EXPECT_EQ(comms[2].ranks, 4);
    EXPECT_EQ(comms[3].ranks, 2);
}

// CublasHandlePool.cpp parseChosenWorkspaceSize: ":4096:2:16:8" =
// 4096 x 1024 x 2 + 16 x 1024 x 8 = 8,519,680 B, or 4096 x 1024 x 8 =
// 33,554,432 B on compute capability 9.x; parseCUDABlasLtWorkspaceSize 1024 KiB;
// two handles (forward thread, autograd's backward thread).
TEST(CublasWorkspaces, PyTorchDefaultsByArchitecture) {
    const SoftwareStack s;  // torch 2.8
    const CublasWorkspaces a100 = cublas_workspaces(80, s);
    EXPECT_EQ(a100.cublas, 8519680u);
    EXPECT_EQ(a100.cublaslt, 1048576u);
    EXPECT_TRUE(a100.in_allocator);
    EXPECT_EQ(a100.bytes(), 2u * (8519680u + 1048576u));
    const CublasWorkspaces h100 = cublas_workspaces(90, s);
    EXPECT_EQ(h100.bytes(), 2u * (33554432u + 1048576u));
}

// Before torch 2.0 (pytorch/pytorch#91564) cuBLAS kept its own pool outside
// the caching allocator: the nvidia-smi reading holds it, allocated does not.
TEST(CublasWorkspaces, OutsideTheAllocatorBeforeTorch2) {
    SoftwareStack s;
    s.torch = "1.13";
    const CublasWorkspaces w = cublas_workspaces(80, s);
    EXPECT_FALSE(w.in_allocator);
    EXPECT_EQ(w.bytes(), 2u * 4194304u);
}

// The context table: lazy loading from torch 1.13 (pytorch/pytorch#86509),
// ~400 MB (pytorch#109888); eager 1000 MB (pytorch#107667); Ada 426 MiB.
TEST(CudaContext, ByArchitectureAndModuleLoading) {
    SoftwareStack s;
    EXPECT_TRUE(lazy_module_loading(s));
    s.torch = "1.12";
    EXPECT_FALSE(lazy_module_loading(s));
    EXPECT_EQ(cuda_context_figure(GpuArch::hopper, true).bytes, 400000000u);
    EXPECT_EQ(cuda_context_figure(GpuArch::ampere, true).bytes, 400000000u);
    EXPECT_EQ(cuda_context_figure(GpuArch::ada, true).bytes, 426u << 20);
    EXPECT_EQ(cuda_context_figure(GpuArch::volta, false).bytes, 1000000000u);
    EXPECT_EQ(gpu_arch(90), GpuArch::hopper);
    EXPECT_EQ(gpu_arch(86), GpuArch::ampere);
    EXPECT_EQ(gpu_arch(70), GpuArch::volta);
}

// The preset's compute capability reaches the input (data/gpus/*.json).
TEST(CudaContext, PresetGivesTheArchitecture) {
    const Resolved res = resolve(llama(8, "V100-32GB"));
    EXPECT_EQ(res.input.cluster.compute_capability, 70);
    EXPECT_EQ(res.input.cluster.intra_interconnect, "nvlink-gen2");
    Resolved old = res;
    old.input.stack.torch = "1.12";
    EXPECT_EQ(process_memory(old.input).cuda_context, 1000000000u);
    EXPECT_EQ(process_memory(res.input).cuda_context, 400000000u);
}

// The three readings of a phase (estimate.cpp finish_gpu): allocated =
// DeepSpeed's tensors + cuBLAS workspaces (torch 2.8: in the allocator);
// reserved = allocated + fragmentation; total (nvidia-smi) = reserved +
// context + NCCL. A100-80GB x 8: context 400,000,000, NCCL 462,422,016,
// cuBLAS 2 x 9,568,256 = 19,136,512.
TEST(ProcessTerms, ReadingsAddUp) {
    Request r = llama(8, "A100-80GB");
    r.fragmentation = 0.05;
    const Resolved res = resolve(r);
    const Estimate e = estimate(res.input, true);
    for (const auto& p : e.phases) {
        const GpuMemory& m = p.per_gpu;
        EXPECT_EQ(m.cublas_workspaces, 19136512u);
        EXPECT_EQ(m.cuda_context, 400000000u);
        EXPECT_EQ(m.nccl_buffers, 462422016u);
        EXPECT_EQ(m.allocated, m.parameters + m.gradients + m.optimizer_states + m.activations +
                                   m.temporary_buffers + m.cublas_workspaces)
            << p.name;
        EXPECT_EQ(m.reserved, m.allocated + m.fragmentation) << p.name;
        EXPECT_EQ(m.total, m.reserved + 400000000u + 462422016u) << p.name;
    }
    bool named = false;
    for (const auto& t : e.terms) named = named || t.component == "nccl_buffers";
    EXPECT_TRUE(named);
}

// Overrides take the place of the models.
TEST(ProcessTerms, OverridesWin) {
    Request r = llama(8, "A100-80GB");
    r.cuda_context = "1GiB";
    r.nccl_buffers = "0";
    r.cublas_workspace = "2MiB";
    const ProcessMemory pm = process_memory(resolve(r).input);
    EXPECT_EQ(pm.cuda_context, 1073741824u);
    EXPECT_EQ(pm.nccl_buffers, 0u);
    EXPECT_EQ(pm.cublas_workspaces, 2097152u);
}
