#include "zeromem/process_terms.h"

#include "zeromem/stack_facts.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>

namespace zeromem {

GpuArch gpu_arch(int cc) {
    if (cc <= 0) return GpuArch::unknown;
    if (cc >= 100) return GpuArch::blackwell;
    if (cc >= 90) return GpuArch::hopper;
    if (cc == 89) return GpuArch::ada;
    if (cc >= 80) return GpuArch::ampere;
    if (cc >= 75) return GpuArch::turing;
    return GpuArch::volta;
}

const char* to_string(GpuArch a) {
    switch (a) {
        case GpuArch::volta: return "Volta";
        case GpuArch::turing: return "Turing";
        case GpuArch::ampere: return "Ampere";
        case GpuArch::ada: return "Ada";
        case GpuArch::hopper: return "Hopper";
        case GpuArch::blackwell: return "Blackwell";
        case GpuArch::unknown: break;
    }
    return "unknown architecture";
}

bool lazy_module_loading(const SoftwareStack& stack) { return stack_facts(stack).loads_cuda_modules_lazily; }

// The context a PyTorch process holds once its kernels run. Public
// measurements (none isolates one architecture from a training process):
//  - lazy: ~400 MB "if CUDA >= 11.7 is used and lazy module loading enabled
//    (default in PyTorch)" (ptrblck, pytorch/pytorch#109888); 287,047,680 B
//    after one small op (pytorch/pytorch#86509); a bare mem_get_info 426 MiB on
//    an RTX 6000 Ada (unslothai/unsloth-zoo#1053).
//  - eager (before torch 1.13 / CUDA 11.7): "all kernels were loaded into the
//    context once the library was loaded, which took >1000MB" (ptrblck,
//    pytorch/pytorch#107667); 666,632,192 B after one small op (#86509).
// Architectures without their own figure take the process-wide one; unknown
// takes the largest figure of its column.
ContextFigure cuda_context_figure(GpuArch arch, bool lazy) {
    constexpr uint64_t kLazy = 400000000ull, kAdaLazy = 426ull << 20, kEager = 1000000000ull;
    if (!lazy)
        return {kEager, "eager module loading (torch < 1.13): >1000 MB, all kernels loaded at start "
                        "(ptrblck, pytorch/pytorch#107667)"};
    if (arch == GpuArch::ada || arch == GpuArch::unknown)
        return {kAdaLazy, std::string(arch == GpuArch::ada ? "Ada" : "unknown architecture: the largest lazy figure") +
                              ", lazy loading: 426 MiB for a bare torch.cuda.mem_get_info on an RTX 6000 Ada "
                              "(unslothai/unsloth-zoo#1053)"};
    return {kLazy, std::string(to_string(arch)) +
                       ", lazy loading (CUDA_MODULE_LOADING=LAZY, torch >= 1.13, pytorch/pytorch#86509): ~400 MB "
                       "(ptrblck, pytorch/pytorch#109888; no per-architecture measurement)"};
}

namespace {

std::string num(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, v == std::floor(v) && std::fabs(v) < 1e18 ? "%.0f" : "%.6g", v);
    return buf;
}

// Group of `size` ranks `stride` apart, ranks placed node by node.
NcclCommunicator group(const char* name, int64_t size, int64_t stride, const ClusterSettings& c, const char* source) {
    return {name, size, size * stride > c.gpus_per_node(), source};
}

}  // namespace

std::vector<NcclCommunicator> nccl_communicators(const EstimateInput& in) {
    const ClusterSettings& c = in.cluster;
    std::vector<NcclCommunicator> out;
    if (c.gpus <= 1) return out;
    const int64_t nd = c.data_parallel(), tp = c.tp, pp = c.pp;
    auto add = [&](NcclCommunicator g) {
        if (g.ranks > 1) out.push_back(std::move(g));
    };
    add(group("world", c.gpus, 1, c, "dist.group.WORLD (deepspeed.init_distributed -> init_process_group)"));
    add(group("data_parallel", nd, tp, c,
              tp * pp == 1 ? "deepspeed/utils/groups.py _get_data_parallel_group -> _clone_world_group (new_group)"
                           : "the mpu's data-parallel group (groups.py _get_data_parallel_group)"));
    add(group("tensor_parallel", tp, 1, c, "the mpu's tensor-parallel group"));
    add(group("pipeline_parallel", pp, tp * nd, c, "the pipeline-parallel group (runtime/pipe/topology.py)"));
    const ZeroSettings& z = in.zero;
    if (z.hpz_active())
        add(group("zero_hpz", z.zero_hpz_partition_size, 1, c, "groups.py _create_zero_param_parallel_group"));
    if (z.stage == 3 && z.mics_shard_size > 0) {
        add(group("mics_shard", z.mics_shard_size, 1, c, "runtime/zero/mics_utils.py create_mics_comm_groups"));
        add(group("mics_replicate", nd / std::max<int64_t>(1, z.mics_shard_size), z.mics_shard_size, c,
                  "runtime/zero/mics_utils.py create_mics_comm_groups"));
    }
    if (z.stage == 3 && z.zero_quantized_gradients) {
        add(group("qgz_local", c.gpus_per_node(), 1, c, "groups.py _get_local_all_to_all_group (intra-node)"));
        add(group("qgz_inter", c.nodes, c.gpus_per_node(), c, "groups.py _get_local_all_to_all_group (inter-node)"));
    }
    if (const int64_t ep = in.moe.ep(); ep > 1) {
        add(group("expert_parallel", ep, 1, c, "groups.py _create_expert_and_data_parallel"));
        add(group("expert_data_parallel", nd / ep, ep, c,
                  "groups.py _create_expert_and_data_parallel"));
    }
    return out;
}

// NCCL's ring search (src/graph/search.cc ncclTopoCompute) for one GPU whose
// links into the node add up to B GB/s, as NCCL counts them (src/graph/topo.h:
// SM70_NVLINK_BW 20, SM80 20, SM90 20.6, SM100 40.1 per NVLink; PCI_BW 12 for
// gen3 x16, doubling per generation):
//  1. start at the fastest speed of the architecture's speedArrayIntra not
//     above B; at speed S the GPU carries floor(B / S) rings, at most 32
//     (maxChannels = ncclMaxNchannels() / 2); keep the largest n x S, stop once
//     it reaches B, else try the next speed while it is > 0.49 x the best S;
//  2. ncclTopoDupChannels doubles the rings when S >= 25 GB/s (on sm > 80
//     only when S >= 50 or n <= 4);
//  3. src/graph/connect.cc ncclTopoPostset doubles the channels again
//     (nChannels * 2, at most MAXCHANNELS 64).
// Assumptions: every GPU reaches its peers through one switch or host bridge
// (NVSwitch or PCIe; V100 boards' cube mesh counted as its links' sum), no
// search timeouts, NCCL_MIN/MAX_NCHANNELS unset.
int nccl_ring_channels(const std::string& ic, int cc, std::string* why) {
    struct Link { const char* name; double per_link; int links; };
    static const Link kLinks[] = {
        {"nvlink-gen2", 20.0, 6},  {"nvlink-gen3", 20.0, 12}, {"nvlink-gen4", 20.6, 18},
        {"nvswitch-gen4-nvls", 20.6, 18}, {"nvlink-gen5", 40.1, 18}, {"nvlink-bridge-turing", 20.0, 2},
        {"pcie-gen3", 12.0, 1},    {"pcie-gen4", 24.0, 1},    {"pcie-gen5", 48.0, 1},
    };
    const Link* link = nullptr;
    for (const auto& l : kLinks)
        if (ic == l.name) link = &l;
    const bool known = link != nullptr;
    if (!known) link = &kLinks[2];  // unknown: H100's NVLink, the most channels below NVLink 5
    static const std::vector<double> kIntra{40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
    static const std::vector<double> kSm90{60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
    static const std::vector<double> kSm100{90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18};
    const int ccx = cc > 0 ? cc : 90;
    const auto& speeds = ccx >= 100 ? kSm100 : ccx >= 90 ? kSm90 : kIntra;
    const double B = link->per_link * link->links;
    std::size_t i = 0;
    while (i + 1 < speeds.size() && speeds[i] > B) ++i;
    int best_n = 0;
    double best_s = 0;
    for (;; ++i) {
        const int n = std::min(32, int(std::floor(B / speeds[i] + 1e-9)));
        if (double(n) * speeds[i] > double(best_n) * best_s) best_n = n, best_s = speeds[i];
        if (double(best_n) * best_s >= B - 1e-9) break;
        if (i + 1 >= speeds.size() || (best_n > 0 && speeds[i + 1] / best_s <= 0.49)) break;
    }
    best_n = std::max(best_n, 1);
    int rings = best_n;
    if (best_s >= 25.0 && !(ccx > 80 && best_s < 50.0 && best_n > 4)) rings = std::min(2 * best_n, 32);
    const int channels = std::min(64, 2 * rings);
    if (why)
        *why = std::string(known ? "" : "unknown interconnect, assumed ") + link->name + ": " + num(B) +
               " GB/s into the node; search: " + std::to_string(best_n) + " rings at " + num(best_s) + " GB/s" +
               (rings != best_n ? ", duplicated to " + std::to_string(rings) : std::string()) +
               "; ncclTopoPostset x2 = " + std::to_string(channels) + " channels";
    return channels;
}

uint64_t nccl_ring_bytes(int channels, bool spans_nodes) {
    const uint64_t per_channel = spans_nodes ? 2 * (kNcclLl128BuffSize + kNcclSimpleBuffSize)
                                             : kNcclLlBuffSize + kNcclLl128BuffSize + kNcclSimpleBuffSize;
    return uint64_t(channels) * per_channel;
}

// aten/src/ATen/cuda/CublasHandlePool.cpp: parseChosenWorkspaceSize defaults
// to ":4096:2:16:8" = 4096 KiB x 2 + 16 KiB x 8, or 4096 KiB x 8 = 32 MiB on
// compute capability 9.x (Hopper; pytorch/pytorch#91564, in torch 2.0), and
// allocateCUDABlasWorkspace takes it from the caching allocator, once per
// (handle, stream) in setWorkspaceForHandle; parseCUDABlasLtWorkspaceSize
// defaults to 1024 KiB, one per (handle, stream) in getCUDABlasLtWorkspace.
// Handles are per thread (DeviceThreadHandlePool): the forward's thread and
// autograd's device thread for the backward (torch/csrc/autograd/engine.cpp)
// each get one. Before torch 2.0 cuBLAS kept its own 4 MiB pool outside the
// caching allocator (cuBLAS docs, cublasSetWorkspace) and cuBLASLt's workspace
// was a per-call temporary, not counted.
CublasWorkspaces cublas_workspaces(int cc, const SoftwareStack& stack) {
    CublasWorkspaces w;
    if (!stack_facts(stack).cublas_workspace_in_caching_allocator) {
        w.cublas = 4ull << 20;
        w.cublaslt = 0;
        w.in_allocator = false;
        return w;
    }
    const bool hopper = cc == 0 || (cc >= 90 && cc < 100);  // unknown: the larger
    w.cublas = hopper ? 4096ull * 1024 * 8 : 4096ull * 1024 * 2 + 16ull * 1024 * 8;
    w.cublaslt = 1024ull * 1024;
    return w;
}

namespace {

// What process_memory reads of an input: equal keys give equal figures and texts.
struct ProcessKey {
    std::optional<uint64_t> cuda_context, nccl_buffers, cublas_workspaces;
    uint64_t process_baseline = 0;
    int cc = 0;
    std::string deepspeed, torch, transformers, intra_interconnect;
    int64_t gpus = 0, nodes = 0, tp = 0, pp = 0, ep = 0, stage = 0, hpz = 0, mics = 0;
    bool hpz_active = false, qgz = false;

    explicit ProcessKey(const EstimateInput& in)
        : cuda_context(in.residual.cuda_context), nccl_buffers(in.residual.nccl_buffers),
          cublas_workspaces(in.residual.cublas_workspaces), process_baseline(in.residual.process_baseline),
          cc(in.cluster.compute_capability),
          deepspeed(in.stack.deepspeed), torch(in.stack.torch), transformers(in.stack.transformers),
          intra_interconnect(in.cluster.intra_interconnect), gpus(in.cluster.gpus), nodes(in.cluster.nodes),
          tp(in.cluster.tp), pp(in.cluster.pp), ep(in.moe.ep()), stage(in.zero.stage),
          hpz(in.zero.zero_hpz_partition_size), mics(in.zero.mics_shard_size), hpz_active(in.zero.hpz_active()),
          qgz(in.zero.zero_quantized_gradients) {}
    // Compared with the input in place: building a key per estimate copied four strings.
    bool matches(const EstimateInput& in) const {
        return cuda_context == in.residual.cuda_context && nccl_buffers == in.residual.nccl_buffers &&
               cublas_workspaces == in.residual.cublas_workspaces &&
               process_baseline == in.residual.process_baseline && cc == in.cluster.compute_capability &&
               deepspeed == in.stack.deepspeed && torch == in.stack.torch && transformers == in.stack.transformers &&
               intra_interconnect == in.cluster.intra_interconnect && gpus == in.cluster.gpus &&
               nodes == in.cluster.nodes && tp == in.cluster.tp && pp == in.cluster.pp && ep == in.moe.ep() &&
               stage == in.zero.stage && hpz == in.zero.zero_hpz_partition_size &&
               mics == in.zero.mics_shard_size && hpz_active == in.zero.hpz_active() &&
               qgz == in.zero.zero_quantized_gradients;
    }
};

ProcessMemory process_memory_of(const EstimateInput& in);

}  // namespace

// The planner evaluates thousands of candidates on one cluster and stack; their process terms (and the
// explanation strings built with them) are the same: the last answer is kept per thread.
ProcessMemory process_memory(const EstimateInput& in) {
    thread_local std::optional<ProcessKey> last_key;
    thread_local ProcessMemory last;
    if (last_key && last_key->matches(in)) return last;
    last = process_memory_of(in);
    last_key.emplace(in);
    return last;
}

namespace {

ProcessMemory process_memory_of(const EstimateInput& in) {
    ProcessMemory m;
    std::vector<ExplainTerm> terms;
    const ResidualSettings& r = in.residual;
    const int cc = in.cluster.compute_capability;
    const GpuArch arch = gpu_arch(cc);
    // CUDA context.
    const bool lazy = lazy_module_loading(in.stack);
    if (r.cuda_context) {
        m.cuda_context = *r.cuda_context;
        terms.push_back({"cuda_context", "named figure (--cuda-context)", num(double(m.cuda_context)) + " B",
                           m.cuda_context, "outside the caching allocator"});
    } else {
        const ContextFigure f = cuda_context_figure(arch, lazy);
        m.cuda_context = f.bytes;
        terms.push_back({"cuda_context", "table[architecture][module loading]",
                           std::string(to_string(arch)) + ", " + (lazy ? "lazy" : "eager") + " (torch " +
                               in.stack.torch + ") = " + gib_text(f.bytes),
                           f.bytes, f.source + "; outside the caching allocator"});
    }
    // NCCL.
    if (r.nccl_buffers) {
        m.nccl_buffers = *r.nccl_buffers;
        terms.push_back({"nccl_buffers", "named figure (--nccl-buffers)", num(double(m.nccl_buffers)) + " B",
                           m.nccl_buffers, "outside the caching allocator"});
    } else {
        const auto comms = nccl_communicators(in);
        std::string why;
        const int ch = nccl_ring_channels(in.cluster.intra_interconnect, cc, &why);
        std::string sub;
        for (const auto& g : comms) {
            const uint64_t b = nccl_ring_bytes(ch, g.spans_nodes);
            m.nccl_buffers += b;
            sub += (sub.empty() ? "" : " + ") + g.name + " (" + std::to_string(g.ranks) + " ranks" +
                   (g.spans_nodes ? ", across nodes" : "") + ") " + gib_text(b);
        }
        if (comms.empty()) sub = "one GPU: no communicator";
        terms.push_back(
            {"nccl_buffers",
             "Σ communicators: channels x (LL 512 KiB + LL128 4.69 MiB + SIMPLE 4 MiB) in a node, channels x 2 x "
             "(LL128 + SIMPLE) across nodes",
             why + "; " + sub, m.nccl_buffers,
             "NVIDIA/nccl src/init.cc computeBuffSizes, src/transport/p2p.cc p2pRecvSetup/p2pSendSetup, "
             "src/transport/net.cc send/recvProxyConnect; ring connections only (NCCL_RUNTIME_CONNECT=1 connects "
             "an algorithm at its first use; tree, NVLS and all-to-all send/recv buffers not counted); outside "
             "the caching allocator"});
    }
    // cuBLAS / cuBLASLt.
    const CublasWorkspaces w = cublas_workspaces(cc, in.stack);
    m.cublas_in_allocator = w.in_allocator;
    if (r.cublas_workspaces) {
        m.cublas_workspaces = *r.cublas_workspaces;
        terms.push_back({"cublas_workspaces", "named figure (--cublas-workspace)",
                           num(double(m.cublas_workspaces)) + " B", m.cublas_workspaces,
                           w.in_allocator ? "inside the caching allocator" : "outside the caching allocator"});
    } else {
        m.cublas_workspaces = w.bytes();
        terms.push_back({"cublas_workspaces", "handles x (cuBLAS workspace + cuBLASLt workspace)",
                           std::to_string(w.handles) + " x (" + num(double(w.cublas)) + " + " +
                               num(double(w.cublaslt)) + ") B",
                           m.cublas_workspaces,
                           std::string("aten/src/ATen/cuda/CublasHandlePool.cpp parseChosenWorkspaceSize / "
                                       "parseCUDABlasLtWorkspaceSize (torch ") +
                               in.stack.torch + ", " + to_string(arch) + "); one handle per thread (forward, " +
                               "autograd's backward thread); " +
                               (w.in_allocator ? "inside the caching allocator (allocateCUDABlasWorkspace)"
                                               : "cuBLAS's own pool outside the caching allocator (torch < 2.0)")});
    }
    // A calibration profile's fitted baseline.
    if (r.process_baseline > 0) {
        m.process_baseline = r.process_baseline;
        terms.push_back({"process_baseline", "fitted figure (--calibration)", num(double(m.process_baseline)) + " B",
                           m.process_baseline,
                           "measured minus estimated torch.cuda.memory_allocated at the run's earliest reading "
                           "(zeromem calibrate); inside the caching allocator"});
    }
    m.terms = std::make_shared<const std::vector<ExplainTerm>>(std::move(terms));
    return m;
}

}  // namespace

}  // namespace zeromem
