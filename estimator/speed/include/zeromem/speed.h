// Analytic step-time model: how long one optimizer step of one ZeRO
// configuration takes per GPU, and the throughput that follows.
//
// The model: compute is model FLOPs over peak x an efficiency that grows
// with the tokens per micro-batch; the collectives are those DeepSpeed
// issues per stage (engine.py allreduce_gradients, stage_1_and_2.py
// average_tensor, stage3.py and partitioned_param_coordinator.py), each
// costed by the ring alpha-beta model with nccl-tests' bus-bandwidth factors
// (NVIDIA/nccl-tests doc/PERFORMANCE.md), minus what overlaps compute; the
// offload copies and CPU step follow ZeRO-Offload (Ren et al., arXiv:2101.06840).
// Hardware figures come from data/gpus and data/interconnects, each preset
// with its source. Every constant is a field of SpeedConstants, overridable
// by the caller.
//
// Second pass: the offload, per-parameter and host costs follow
// their mechanisms - parameter offload per synchronous fetch, optimizer
// offload copies and the CPU optimizer's rate from the host (data/hosts:
// cores, DRAM bandwidth, PCIe generation, lanes and sharing), per-tensor
// hooks and per-module launches from the architecture's real tensor count,
// trainable vs frozen parameters, and NVMe aio queue depth / block size.
// Constants fitted on a measured case say which (G7, G1/G3, G8, G9: the
// measured cases of tests/speed_test.cpp, each with its public source).
#pragma once

#include "zeromem/input.h"
#include "zeromem/gpu.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zeromem {

/// A network preset (data/interconnects/<name>.json). Rates in bytes/s,
/// times in seconds.
struct Interconnect {
    std::string name;           ///< preset name, e.g. "nvlink-gen3"
    bool inter_node = false;    ///< kind "inter" (NICs between nodes) vs "intra" (inside a node)
    // intra: achievable nccl-tests bus bandwidth at large size (measured; each
    // preset in data/interconnects names its run)
    double allreduce_busbw = 0;
    double allgather_busbw = 0;
    double reducescatter_busbw = 0;
    // inter: wire rate of one link, links per node (0 = one per GPU), and
    // the fraction of the wire rate NCCL reaches (4 x 8 B200 over EFA: 36.5 of
    // 50 GB/s per NIC, stas00/ml-engineering network/README.md)
    double link_bw = 0;
    int links_per_node = 0;
    double efficiency = 1.0;
    double latency = 0;         ///< alpha: fixed cost of one collective, s
    double half_size = 0;       ///< S_half of busbw(S) = B_max S / (S + S_half), bytes
    std::string source;
};

/// Loads `<data_dir>/interconnects/<name>.json` (case-insensitive). Throws
/// InputError naming `flag` for an unknown name (with close names) or a
/// malformed file.
Interconnect load_interconnect_preset(const std::string& name, const std::string& data_dir,
                                      const std::string& flag = "--interconnect");

/// Names of all interconnect presets, sorted.
std::vector<std::string> list_interconnect_presets(const std::string& data_dir);

/// The CPU side of one node (data/hosts/<name>.json): what the CPU
/// optimizer under offload and the GPU<->host copies run on.
struct HostSpec {
    std::string name;               ///< preset name, e.g. "dgx-a100"
    int64_t cores = 0;              ///< physical CPU cores per node
    int64_t sockets = 1;            ///< CPU sockets per node
    double memory_bandwidth = 0;    ///< DRAM bytes/s per node, all sockets (spec)
    int pcie_gen = 4;               ///< PCIe generation of the GPU<->CPU path (3, 4, 5)
    int pcie_lanes_per_gpu = 16;    ///< lanes of each GPU's path to the CPU
    /// GPUs behind one PCIe uplink to the CPU (a switch shared by a pair of
    /// GPUs on DGX A100): during offload copies they share its bandwidth.
    int gpus_per_pcie_link = 1;
    std::string source;
};

/// Loads `<data_dir>/hosts/<name>.json` (case-insensitive). Throws
/// InputError naming `flag` for an unknown name (with close names), a
/// malformed file or a non-positive figure.
HostSpec load_host_preset(const std::string& name, const std::string& data_dir, const std::string& flag = "--host");

/// Names of all host presets, sorted.
std::vector<std::string> list_host_presets(const std::string& data_dir);

struct SpeedConstants;

/// The hardware one step runs on. Rates in FLOP/s or bytes/s.
struct SpeedHardware {
    std::string gpu_name;
    double peak_flops = 0;          ///< dense peak of the training dtype, FLOP/s
    double hbm_bandwidth = 0;       ///< bytes/s
    double compute_efficiency = 0.5;  ///< eta_max (est. per GPU generation, data/gpus)
    Interconnect intra;             ///< inside a node
    std::optional<Interconnect> inter;  ///< between nodes (required when nodes > 1)
    double pcie_bandwidth = 25e9;   ///< GPU<->host, per direction, bytes/s
    double nvme_read = 10e9;        ///< per node, bytes/s (DeepNVMe ds_io, 4x Gen4 RAID-0, DeepSpeed blogs/deepnvme)
    double nvme_write = 5e9;        ///< per node, bytes/s (same source)
    double cpu_adam_rate = 1.5e9;   ///< DeepSpeedCPUAdam params/s per node, all ranks share it (G8, G11, DeepSpeed#6834)
    std::optional<HostSpec> host;   ///< the node's CPU side when known (apply_host)
};

/// Effective GPU<->host bytes/s per direction of one GPU on `host` when all
/// GPUs copy at once: 0.88 x the x16 spec of its generation (15.75 / 31.5 /
/// 63 GB/s; 88% = nvbandwidth's gen5 55.4 of 63, stas00/ml-engineering
/// network/README.md) x lanes/16,
/// divided by the GPUs sharing one uplink.
double host_pcie_bandwidth(const HostSpec& host);

/// DeepSpeedCPUAdam parameters/s per node on `host`: the smaller of the
/// cores' rate (cores x k.cpu_adam_params_per_core) and the DRAM rate
/// (k.cpu_adam_memory_efficiency x memory bandwidth / k.cpu_adam_bytes_per_param):
/// the Adam step streams fp32 master weights, m, v and gradients.
double host_cpu_adam_rate(const HostSpec& host, const SpeedConstants& k);

/// Sets hw.host and derives hw.pcie_bandwidth (the smaller of the GPU's
/// own rate and its share of the host link) and hw.cpu_adam_rate from
/// `host`. Flags that override either are applied after this.
void apply_host(SpeedHardware& hw, const HostSpec& host, const SpeedConstants& k);

/// Builds SpeedHardware from a GPU preset for `dtype` (peak: bf16, fp16 or
/// fp32 TFLOPs of the preset). `intra_name`/`inter_name` override the
/// GPU's default intra-node interconnect / pick the inter-node network
/// (empty: default intra, none inter). Throws InputError when the GPU has no
/// peak for `dtype` (e.g. bf16 on V100: "--dtype: V100-32GB has no bf16
/// tensor cores; use fp16") or no interconnect is known.
SpeedHardware speed_hardware(const GpuSpec& gpu, Dtype dtype, const std::string& intra_name,
                             const std::string& inter_name, const std::string& data_dir);

/// Every constant of the step-time model, with its basis in brackets: a
/// measured case (G1-G14, tests/speed_test.cpp), a source, or "est." = an
/// assumption to calibrate.
struct SpeedConstants {
    /// t_half: tokens per micro-batch per GPU at which compute efficiency is
    /// half of eta_max: eta(tok) = eta_max tok / (tok + t_half) [est. ~1024;
    /// small micro-batches collapse the measured MFU, G9].
    double half_efficiency_tokens = 1024;
    /// ov: fraction of the z0-z2 gradient reduction hidden behind backward
    /// when overlap_comm is on [est. 0.8]; 0 when off (DeepSpeed z1/z2 default).
    double overlap_fraction = 0.8;
    /// Fraction of the stage-0 gradient all-reduce hidden behind backward.
    /// 0: DeepSpeed stage 0 all-reduces after the boundary backward
    /// (engine.py buffered_allreduce_fallback). A torch DDP run (the
    /// Reducer all-reduces gradient buckets during backward,
    /// torch/nn/parallel/distributed.py) is modelled with overlap_fraction.
    double stage0_overlap = 0.0;
    /// ov3: fraction of backward+forward time that can hide the ZeRO-3
    /// gathers and reduce-scatter through prefetch [est. 1]; the first fetch is always exposed.
    double stage3_overlap = 1.0;
    /// a_call: DeepSpeed/Python cost of one ZeRO-3 fetch/release launch,
    /// seconds [est. ~100 us (2024+) to ~300 us (2021)]; 100 us keeps G7
    /// (Llama-3-70B ZeRO-3, 2025) within 25%.
    double stage3_launch_cost = 100e-6;
    /// Launches per fetched module (tensor above the persistence
    /// threshold) per micro-step under ZeRO-3 (forward gather, backward
    /// gather, gradient reduce) [est.: N_fetch ~ 3 x tensors].
    double stage3_launches_per_tensor = 3;
    /// Parameters per tensor when the architecture is unknown (--params
    /// alone): both the parameter-tensor count and the ZeRO-3 fetched count
    /// are Psi / this [est.; one 4096^2 matrix ~ 1.7e7].
    double params_per_tensor_unknown_arch = 2e7;
    /// c2: per-micro-step gradient-partition bookkeeping of stages 2 and 3
    /// (gradient partition copies, IPG buffer) as a fraction of
    /// forward+backward [est. 0.05-0.2; the 2021 autotuner runs G1-G3 put z2
    /// 5-18% behind z1].
    double stage2_overhead_fraction = 0.1;
    /// ZeRO-1/2 optimizer wrapper cost per parameter this rank updates, s.
    /// 0 by default: attributing G9's ~0.48 s fixed cost (8B ZeRO-1, 1e9
    /// params per rank) to it would be 0.48e-9, but G11/G12 (ZeRO-2 offload,
    /// 1.5-1.7e9 params per rank) leave no room for it.
    double zero12_step_overhead_per_param = 0;
    /// T_fix: fixed framework cost per optimizer step, s, all stages. 0 by
    /// default; a least-squares fit of the DeepCompile ZeRO-1 8B runs (G9)
    /// gives 0.48 s, but G1 (0.40 s steps in total) rules it out as a general value.
    double fixed_step_overhead = 0;
    /// HBM bytes moved per parameter by the GPU Adam step [derived: fp32
    /// parameter, m and v read and written 24, gradient read 2-4, 16-bit
    /// parameter written 2: ~28 B].
    double adam_bytes_per_param = 28;
    /// Fraction of HBM bandwidth the Adam kernel reaches [est. 0.7].
    double adam_hbm_efficiency = 0.7;
    /// Bytes per parameter read from / written to NVMe per step under
    /// optimizer NVMe offload [est.: 16 read, 12 write].
    double nvme_optimizer_read_bytes = 16;
    double nvme_optimizer_write_bytes = 12;
    /// Full recompute adds one forward, a third of forward+backward: x(1 + 1/3).
    double full_recompute_factor = 4.0 / 3.0;

    // ---- second pass: offload, per-parameter and host costs ----
    /// Host DRAM bytes one DeepSpeedCPUAdam update streams per parameter:
    /// fp32 master weight, m and v read and written (24), the fp32 gradient
    /// read (4), the 16-bit copy written (2) [derived, as for the GPU Adam].
    double cpu_adam_bytes_per_param = 30;
    /// CALIBRATED on G8 (Llama-3-70B ZeRO-3 + optimizer offload, 16x H100 on
    /// DGX H100 hosts, 2.2e9 params/s per node: DeepSpeed blogs/deepcompile,
    /// ~35e9 parameters per node updated in ~16 s of a ~17-18 s step):
    /// the fraction of the node's DRAM bandwidth the CPU Adam reaches,
    /// 2.2e9 x 30 B / 614.4 GB/s = 0.1074. G8 is therefore not evidence for it.
    double cpu_adam_memory_efficiency = 2.2e9 * 30.0 / 614.4e9;
    /// DeepSpeedCPUAdam parameters/s one core sustains [est., not fitted:
    /// chosen not to bind on the DGX hosts, where DRAM does].
    double cpu_adam_params_per_core = 5e7;
    /// torch.optim.AdamW on the CPU (client optimizer under offload with
    /// zero_force_ds_cpu_optimizer false) is this many times slower than
    /// DeepSpeedCPUAdam ["5x-7x faster", DeepSpeed ZeRO-Offload tutorial,
    /// docs/_tutorials/zero-offload.md; midpoint, not fitted].
    double torch_cpu_adam_slowdown = 6;
    /// ZeRO-1/2/3 cost per parameter tensor each time its gradient is handled
    /// (autograd hook, IPG bucket bookkeeping, the copy into the bucket), s
    /// [est., not fitted: bounded by G3, whose z0 - z1 gap of 0.7% on
    /// BERT-base's ~200 tensors leaves < 42 us per tensor].
    double zero12_per_tensor_cost = 20e-6;
    /// Fraction of the parameter-offload copies that the prefetch can hide
    /// behind compute. 0: DeepSpeed copies an offloaded partition with a
    /// blocking ds_tensor.to(device) inside the fetch (partition_parameters.py
    /// _all_gather / all_gather_coalesced; the single-parameter path
    /// synchronizes the device first), so the copy waits for queued compute
    /// and compute waits for it; prefetch only moves it earlier.
    double param_copy_overlap = 0.0;
    /// Cost of one synchronous fetch of an offloaded module partition (one
    /// per fetched tensor, forward and backward), s: the blocking copy drains
    /// the GPU's queue, so each fetch exposes the module's launch latency
    /// and Python bookkeeping - the regime of 2021's synchronous ZeRO-3
    /// fetches. CALIBRATED: the same value, fitted on G1 and G3 (the 2021
    /// z3 - z2 gaps, speed_constants_era2021); G1 and G3 are not evidence for it.
    double param_fetch_sync_cost = 1.1e-3;
    /// Latency of one NVMe aio request, s: throughput per drive set =
    /// B x qd bs / (qd bs + B lat) (Little's law) [est.: ~100 us NVMe read].
    double nvme_request_latency = 100e-6;
};

/// A constant the step time rests on, and where it comes from.
struct CalibrationNote {
    std::string term;      ///< "compute", "exposed_comm", "optimizer", "offload", "per_param", "overhead"
    std::string constant;  ///< SpeedConstants / SpeedHardware field name
    std::string basis;     ///< "fitted on G8", "est.", ...
};

/// The constants of 2021-era DeepSpeed ZeRO-3 (v0.3.13-v0.5.x), the
/// DeepSpeed of the autotuner runs G1-G3 (DeepSpeedExamples
/// autotuning/hf/*/README.md: 16x V100, one DGX-2-class node). Differs from
/// the defaults in two ways:
///  - stage3_overlap = 0: in 2021 the parameter prefetch did not hide the
///    fetches of Hugging Face models - DeepSpeed#1069 (May 2021: "stage 3
///    parameter pre-fetching seems to not be working", prefetches skipped
///    because a sub-module hook ran before the module hook and shifted the
///    step ids; z3 19.5-23.5 vs z2 44.7
///    TFLOPs/GPU, not bandwidth-bound: 4x the network gave the same gap) and
///    DeepSpeed#1170 (July 2021: only the next module prefetched, partial
///    overlap). Every gather is on the critical path.
///  - stage3_launch_cost = 1.1 ms (ERA2021_STAGE3_FETCH_COST): a fetch that
///    is waited for synchronously also stalls the CPU's run-ahead, so each
///    hook costs its Python bookkeeping plus the exposed kernel-launch
///    latency of the module, not only a ~300 us launch. Derived
///    from the measured z3 - z2 gaps of G1 and G3 (no overlap: z2's
///    all-reduce + all-gather and z3's two gathers + reduce-scatter move the
///    same 3 (n-1)/n S bytes, so the gap is per-launch): GPT2-xl
///    16/12.86 - 16/33.05 = 0.760 s over 194 tensors x 3 launches, less 388
///    gathers x (41 us + (15/16) 16 MiB / 134.5 GB/s) = 0.061 s -> 1.20 ms;
///    BERT-base 3840/2420.8 - 3840/2715.0 = 0.172 s over 50 tensors x 3,
///    less 100 x 158 us -> 1.04 ms. The constant is their mean.
SpeedConstants speed_constants_era2021();

/// One step, per GPU. Times in seconds; total = compute + exposed_comm +
/// optimizer + offload + per_param + overhead.
struct StepTime {
    double compute = 0;        ///< forward+backward (+recompute) over all micro-steps
    double comm_total = 0;     ///< all collectives issued, before overlap
    double exposed_comm = 0;   ///< the part of comm_total not hidden behind compute
    /// DeepSpeed-MoE all-to-all of all micro-steps (--ep-size > 1): 4 per MoE
    /// block (2 forward, 2 backward), E x C x h x b_m each with (E_p-1)/E_p
    /// leaving the rank; part of comm_total and exposed_comm.
    double moe_all_to_all = 0;
    double optimizer = 0;      ///< GPU Adam, or CPU Adam under optimizer offload, incl. NVMe swapping
    double offload = 0;        ///< exposed PCIe (and NVMe parameter) transfers
    double per_param = 0;      ///< per-parameter-tensor / per-module costs: hooks, bucket bookkeeping, launches
    double overhead = 0;       ///< other ZeRO bookkeeping (c2) and the fixed per-step cost
    double total = 0;          ///< compute + exposed_comm + optimizer + offload + per_param + overhead
    double cpu_optimizer_rate = 0;  ///< params/s per node of the CPU optimizer (offload only)
    double pcie_bandwidth = 0;      ///< GPU<->host bytes/s per direction used
    double parameter_tensors = 0;   ///< parameter tensors of the model (ZeRO-1/2 hooks)
    double fetched_modules = 0;     ///< ZeRO-3: tensors above the persistence threshold, one fetch each
    bool torch_cpu_optimizer = false;  ///< offload runs the client's torch AdamW, not DeepSpeedCPUAdam
    double tokens_per_step = 0;   ///< whole cluster: N x GAS x b x s
    double tokens_per_s = 0;      ///< whole cluster
    double tokens_per_s_per_gpu = 0;
    double model_flops_per_token = 0;  ///< 6 Psi_mm + 12 L h s (no recompute)
    double tflops_per_gpu = 0;    ///< model FLOP/s per GPU / 1e12 (MFU numerator)
    double mfu = 0;               ///< tflops_per_gpu / peak, 0..1
    double compute_efficiency = 0;  ///< eta at this micro-batch's tokens
    /// ZeRO-3 collectives of one optimizer step (all micro-steps), bytes,
    /// counted as the ZeRO++ paper does (zeromem/zero3_comm.h Zero3CommVolume):
    /// forward and backward all-gathers, gradient reduction (with the MiCS
    /// replica all-reduce) and the part of all three that crosses nodes.
    double comm_bytes_forward = 0;
    double comm_bytes_backward = 0;
    double comm_bytes_gradients = 0;
    double comm_bytes_cross_node = 0;
};

/// Model FLOPs per token of forward+backward: 6 Psi_mm + 12 L h s
/// (attention as mosaicml/llm-foundry scripts/train/benchmarking counts it:
/// 4 L h s^2 forward, x3 with backward), Psi_mm = params without an untied
/// input embedding and learned positions (lookups). Without an architecture: 6 Psi.
double model_flops_per_token(const ModelInfo& model, int64_t seq_len);

/// The calibrated (fitted on a measured case) or estimated constants each
/// nonzero term of `t` rests on, for `in` on `hw` (what `compare` marks).
/// Only terms resting on such a constant are listed; a term absent from the
/// list follows from sourced figures (peaks, bandwidths) alone.
std::vector<CalibrationNote> calibration_notes(const EstimateInput& in, const SpeedHardware& hw, const StepTime& t,
                                               const SpeedConstants& k = {});

/// Parameter tensors (nn.Parameter objects) of the model: every weight,
/// bias and norm scale, embeddings and an untied LM head, from the
/// architecture (ModelArch); without one, Psi / k.params_per_tensor_unknown_arch.
double parameter_tensor_count(const ModelInfo& model, const SpeedConstants& k = {});

/// Tensors ZeRO-3 fetches one by one (one per module: each holds one
/// such tensor): those above stage3_param_persistence_threshold elements
/// (smaller ones stay resident, stage3.py persistent parameters).
double fetched_tensor_count(const ModelInfo& model, int64_t persistence_threshold, const SpeedConstants& k = {});
/// The elements of the parameter tensors parameter_tensor_count counts (Σ numel x count): count_params(a).total
/// for every family the tensor layout covers (not an encoder-decoder's cross-attention).
double parameter_tensor_numel(const ModelArch& a);

/// NVMe bytes/s reached with `queue_depth` requests of `block_size` bytes in
/// flight against a drive set of peak `peak` bytes/s (Little's law with
/// k.nvme_request_latency). Throws nothing; non-positive depth or block
/// gives 0.
double nvme_effective_bandwidth(double peak, int64_t queue_depth, int64_t block_size, const SpeedConstants& k);

/// The step time of `in` (stage, offload, micro batch, accumulation,
/// checkpointing, buckets, overlap_comm, cluster) on `hw`, with constants
/// `k`. Formulas: speed.cpp, one function per term. Throws InputError when the
/// cluster spans nodes and hw.inter is unset ("--network: ...").
StepTime step_time(const EstimateInput& in, const SpeedHardware& hw, const SpeedConstants& k = {});

}  // namespace zeromem
