// What the GUI shows for one set of inputs, computed by the estimator and
// planner libraries only: the GUI adds no arithmetic of its own.
#pragma once

#include "zeromem/planner.h"
#include "zeromem/request.h"
#include "zeromem/speed.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zeromem_gui {

/// Inputs of the speed model that are not part of zeromem::Request.
struct SpeedChoice {
    std::string interconnect;  ///< intra-node preset; empty = the GPU's default
    std::string network;       ///< inter-node preset; empty = none (required for nodes > 1)
    std::string host;          ///< --host: host CPU preset (data/hosts); empty = none given
};

/// Everything the window draws for one input set.
struct Evaluation {
    zeromem::Resolved resolved;               ///< the resolved input (resolve_request)
    zeromem::SpeedHardware hw;                ///< speed_hardware for the GPU, dtype and networks
    int64_t global_batch = 0;                 ///< samples per optimizer step, all GPUs
    std::vector<zeromem::Candidate> rows;     ///< compare_options, filtered by the checkpointing choice
    std::vector<zeromem::OrderingGroup> ordering;  ///< ordering_groups(rows)
    zeromem::PlanResult plan;                 ///< plan(): the ZeRO tuning recipe walk
    uint64_t gpu_capacity = 0;                ///< bytes per GPU (the capacity line)
    uint64_t host_capacity = 0;               ///< usable host RAM bytes per node (ClusterSettings::host_memory); 0 unknown
};

/// The global batch `compare` and `plan` use (search_global_batch, as the
/// command line calls it): the DeepSpeed config's train_batch_size when it
/// sets one, else DeepSpeed's identity train_batch_size = micro batch x
/// gradient accumulation steps x GPUs when either was given (`batch_given`),
/// else the planner's default.
int64_t global_batch_of(const zeromem::EstimateInput& in, bool batch_given);

/// Evaluates `req` as `zeromem compare` and `zeromem plan` would:
/// resolve_request, speed_hardware (with the --host preset applied as
/// apply_host), compare_options, ordering_groups, plan.
/// `req.checkpointing` selects which compare rows are shown: unset = with and
/// without full checkpointing, "none" or "full" = only those. Presets are read
/// from `data_dir`. Throws zeromem::InputError (message names the flag) for
/// bad input, e.g. no --gpu preset, "selective" checkpointing, a missing
/// --network for several nodes.
Evaluation evaluate(const zeromem::Request& req, const SpeedChoice& speed, const std::string& data_dir);

/// Short point label: "Z3 opt:cpu par:nvme ckpt" for
/// "ZeRO-3 + optimizer cpu + params nvme, checkpointing full".
std::string short_label(const zeromem::ZeroOption& o);

}  // namespace zeromem_gui
