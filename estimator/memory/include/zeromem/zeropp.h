// ZeRO++ (hpZ, qwZ, qgZ; Wang et al. 2023, arXiv:2306.10209) and MiCS
// (Zhang et al. 2022, arXiv:2205.00119; DeepSpeed runtime/zero/mics.py):
// validation of their settings and the notes the estimate prints. The memory
// terms live in zeromem/terms.h; the bytes each ZeRO-3 collective moves per
// micro-step (what the speed model times) in zeromem/zero3_comm.h.
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

}  // namespace zeromem
