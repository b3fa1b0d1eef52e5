// ZeRO-3's collectives per micro-step with ZeRO++ (hpZ, qwZ, qgZ; Wang et al. 2023, arXiv:2306.10209)
// and MiCS (runtime/zero/mics.py): the bytes the speed model times. Their settings are validated in
// zeromem/zeropp.h.
#pragma once

#include "zeromem/input.h"

#include <cstdint>

namespace zeromem {

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
