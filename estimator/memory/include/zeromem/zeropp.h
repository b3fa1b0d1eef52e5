// ZeRO++ (hpZ, qwZ, qgZ; Wang et al. 2023, arXiv:2306.10209) and MiCS
// (Zhang et al. 2022, arXiv:2205.00119; DeepSpeed runtime/zero/mics.py):
// validation of their settings, the notes the estimate prints, and the
// bytes each ZeRO-3 collective moves per micro-step (what the speed model
// times). The memory terms live in zeromem/terms.h.
#pragma once

#include "zeromem/estimate.h"

#include <string>
#include <vector>

namespace zeromem {

/// Refuses ZeRO++ / MiCS settings DeepSpeed v0.19.6 refuses or zeromem does
/// not model, naming the key: zero_hpz_partition_size negative
/// (runtime/zero/config.py ge=0) or not dividing the GPUs
/// (utils/groups.py _create_zero_param_parallel_group), hpZ with NVMe
/// parameter offload or with MiCS (not modelled), zero_quantized_gradients
/// without reduce_scatter (stage3.py asserts), mics_shard_size (stage 3;
/// DeepSpeed ignores it below, said in zeropp_notes) not dividing N_d (zero/mics_utils.py _generate_mics_config) or with
/// tp/pp > 1 (not modelled) or with replicas and optimizer offload (mics.py
/// allreduce_mics_shard_grads raises), mics_hierarchical_params_gather with a shard
/// group inside one node or not a multiple of it (mics_utils.py
/// create_mics_comm_groups). Throws InputError.
void validate_zeropp(const EstimateInput& in);

/// Whether a ZeRO option (stage, offload devices) on `data_parallel` ranks
/// can carry the ZeRO++ / MiCS settings of `z`: not hpZ with offload_param
/// nvme (DeepSpeed allocates the secondary partition on the remote device,
/// which nvme is not: partition_parameters.py _partition_param_sec), not
/// MiCS with replicas and optimizer offload (mics.py
/// allreduce_mics_shard_grads raises). The planner skips the options it cannot.
bool zeropp_allows(const ZeroSettings& z, int stage, OffloadDevice offload_optimizer, OffloadDevice offload_param,
                   int64_t data_parallel);

/// One line per ZeRO++ / MiCS fact the estimate assumes (ignored below
/// stage 3, qgZ on one node, qgZ fallback, MiCS replication).
std::vector<std::string> zeropp_notes(const EstimateInput& in);

/// The collectives of one ZeRO-3 micro-step, counted as the ZeRO++ paper
/// does (Sec. 3 and 4: full-tensor bytes, M = Ψ x 16-bit bytes): baseline
/// ZeRO-3 moves M forward, M backward, M of gradients (3M). qwZ sends int8
/// weights + fp32 scales (about M/2 each gather); hpZ keeps the backward
/// all-gather inside a group of zero_hpz_partition_size ranks (no cross-node
/// bytes when it fits in a node); qgZ reduces gradients as int4 + scales
/// (about M/4) in two all-to-alls, intra- then inter-node; MiCS gathers and
/// reduce-scatters inside the shard group and all-reduces the gradient
/// partitions (M/m) across the replicas once per step. Bytes per micro-step,
/// except replica_allreduce (per step).
struct Zero3CommVolume {
    double forward_gather = 0;      ///< bytes of the forward all-gathers
    double backward_gather = 0;     ///< bytes of the backward all-gathers
    double gradient_reduce = 0;     ///< bytes of the gradient reduce-scatter (qgZ: int4 all-to-all)
    double replica_allreduce = 0;   ///< MiCS: gradient partitions all-reduced across replicas
    int64_t gather_group = 1;       ///< ranks of the forward gather (N_d, or mics_shard_size)
    int64_t backward_group = 1;     ///< ranks of the backward gather (hpZ group when hpZ is on)
    int64_t replicas = 1;           ///< MiCS replication groups' size N_d / m (1 without MiCS)
    bool qgz = false;               ///< gradients go through the two-level int4 all-to-all
    /// The part whose group spans more than one node (the paper's
    /// cross-node volume): 3M for ZeRO-3 on several nodes, 0.75M with
    /// qwZ + hpZ (within a node) + qgZ.
    double cross_node = 0;
    /// Of cross_node, the MiCS replica all-reduce (once per step, at the
    /// accumulation boundary: mics.py allreduce_mics_shard_grads); the rest
    /// is per micro-step.
    double replica_cross_node = 0;
};

/// The volumes above for `in` (stage 3; other stages give zeros), with
/// `trainable` parameters reduced and every parameter gathered.
Zero3CommVolume zero3_comm_volume(const EstimateInput& in, double trainable);

}  // namespace zeromem
