// What a training process holds on its GPU beside DeepSpeed's own tensors:
// the CUDA context, NCCL's communicator buffers and the cuBLAS/cuBLASLt
// workspaces. Pure functions of the resolved input, sized from tables (NCCL's
// buffer sizes and ring search, PyTorch's workspace defaults, public context
// measurements), not from DeepSpeed's tensors: the estimator and the simulator
// both size these terms with process_memory(), so their readings stay
// comparable without the simulator reading the estimator's byte counts.
#pragma once

#include "zeromem/explain_term.h"
#include "zeromem/input.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zeromem {

/// GPU architecture by compute capability (major x 10 + minor): 70 Volta,
/// 75 Turing, 80/86 Ampere, 89 Ada, 90 Hopper, >= 100 Blackwell; 0 unknown.
enum class GpuArch { unknown, volta, turing, ampere, ada, hopper, blackwell };
GpuArch gpu_arch(int compute_capability);
const char* to_string(GpuArch a);

/// Whether CUDA loads kernels lazily: torch >= 1.13 sets
/// CUDA_MODULE_LOADING=LAZY when the user did not (pytorch/pytorch#86509,
/// torch/cuda/__init__.py _lazy_init), with CUDA >= 11.7
/// (stack_facts.h loads_cuda_modules_lazily).
bool lazy_module_loading(const SoftwareStack& stack);

/// The CUDA context of one process, bytes, and where the figure comes from.
struct ContextFigure {
    uint64_t bytes = 0;
    std::string source;
};
/// Table by architecture and module loading (process_terms.cpp).
ContextFigure cuda_context_figure(GpuArch arch, bool lazy);

/// NCCL's per-connection FIFO sizes (NVIDIA/nccl src/init.cc
/// computeBuffSizes, DEFAULT_LL_BUFFSIZE / DEFAULT_LL128_BUFFSIZE /
/// DEFAULT_BUFFSIZE; src/include/device.h): LL = 8 lines x 512 threads x
/// NCCL_STEPS 8 x 16 B; LL128 = 120 elements x 640 threads x 8 steps x 8 B;
/// SIMPLE = NCCL_BUFFSIZE 4 MiB.
constexpr uint64_t kNcclLlBuffSize = 8ull * 512 * 8 * 16;
constexpr uint64_t kNcclLl128BuffSize = 120ull * 640 * 8 * 8;
constexpr uint64_t kNcclSimpleBuffSize = 1ull << 22;

/// One NCCL communicator DeepSpeed makes this rank a member of.
struct NcclCommunicator {
    std::string name;          ///< "world", "data_parallel", ...
    int64_t ranks = 0;         ///< members
    bool spans_nodes = false;  ///< its ring crosses the inter-node network
    std::string source;        ///< DeepSpeed function that creates it
};
/// The communicators of a rank with more than one member (none on one GPU):
/// dist.group.WORLD and DeepSpeed's data-parallel group (a clone of the
/// world, deepspeed/utils/groups.py _clone_world_group, or the mpu's with
/// tp/pp), the tensor- and pipeline-parallel groups, ZeRO++ hpZ
/// (_create_zero_param_parallel_group), MiCS shard and replicate groups
/// (runtime/zero/mics_utils.py create_mics_comm_groups), qgZ's local and
/// inter-node all-to-all groups (_get_local_all_to_all_group) and MoE's
/// expert- and expert-data-parallel groups (_create_expert_and_data_parallel).
std::vector<NcclCommunicator> nccl_communicators(const EstimateInput& in);

/// Ring channels NCCL builds for a communicator inside a node with this
/// interconnect preset (data/interconnects name) and compute capability;
/// `why` receives the derivation. See process_terms.cpp.
int nccl_ring_channels(const std::string& intra_interconnect, int compute_capability, std::string* why = nullptr);

/// GPU bytes of one communicator's ring buffers on its busiest rank:
/// channels x (LL + LL128 + SIMPLE) inside a node (the P2P transport puts one
/// set per connection, src/transport/p2p.cc p2pRecvSetup / p2pSendSetup);
/// channels x 2 x (LL128 + SIMPLE) when the ring crosses nodes (the net
/// transport keeps LL128 and SIMPLE on the GPU at both the sending and the
/// receiving end with GPUDirect RDMA, LL in host memory: src/transport/net.cc
/// sendProxyConnect / recvProxyConnect).
uint64_t nccl_ring_bytes(int channels, bool spans_nodes);

/// cuBLAS and cuBLASLt workspaces as PyTorch configures them
/// (aten/src/ATen/cuda/CublasHandlePool.cpp).
struct CublasWorkspaces {
    uint64_t cublas = 0;    ///< per handle: parseChosenWorkspaceSize default
    uint64_t cublaslt = 0;  ///< per handle: parseCUDABlasLtWorkspaceSize default
    int handles = 2;        ///< forward thread + autograd's backward thread
    bool in_allocator = true;  ///< allocated through the caching allocator
    uint64_t bytes() const { return uint64_t(handles) * (cublas + cublaslt); }
};
CublasWorkspaces cublas_workspaces(int compute_capability, const SoftwareStack& stack);

/// The per-process terms of one rank, bytes, with their --explain lines.
struct ProcessMemory {
    uint64_t cuda_context = 0;
    uint64_t nccl_buffers = 0;
    uint64_t cublas_workspaces = 0;
    bool cublas_in_allocator = true;
    /// A calibration profile's fitted process baseline (input.h
    /// ResidualSettings::process_baseline): tensors the run held beyond the
    /// modelled terms, inside the caching allocator.
    uint64_t process_baseline = 0;
    /// Bytes outside PyTorch's caching allocator: context, NCCL, and cuBLAS's
    /// own pool before torch 2.0.
    uint64_t outside_allocator() const {
        return cuda_context + nccl_buffers + (cublas_in_allocator ? 0 : cublas_workspaces);
    }
    /// Bytes the caching allocator hands out for them (cuBLAS workspaces, torch >= 2.0).
    uint64_t inside_allocator() const { return (cublas_in_allocator ? cublas_workspaces : 0) + process_baseline; }
    uint64_t total() const { return cuda_context + nccl_buffers + cublas_workspaces + process_baseline; }
    /// cuda_context, nccl_buffers, cublas_workspaces, process_baseline (when fitted). Shared, never
    /// changed once built: the planner copies these terms with every estimate it makes.
    std::shared_ptr<const std::vector<ExplainTerm>> terms;
};

/// The terms for `in`, with in.residual's overrides (cuda_context,
/// nccl_buffers, cublas_workspaces) taking the place of the models, and its
/// process_baseline.
ProcessMemory process_memory(const EstimateInput& in);

}  // namespace zeromem
