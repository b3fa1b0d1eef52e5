// Calls into the estimator and planner libraries (see scenario.h).
#include "scenario.h"

#include "zeromem/simulator.h"
#include "zeromem/types.h"

namespace zeromem_gui {

using namespace zeromem;

int64_t global_batch_of(const EstimateInput& in, bool batch_given) {
    return search_global_batch(in, batch_given);
}

Evaluation evaluate(const Request& req, const SpeedChoice& speed, const std::string& data_dir) {
    Request base = req;
    std::optional<Checkpointing> only;
    if (req.checkpointing) {
        only = parse_checkpointing(*req.checkpointing, "--gradient-checkpointing");
        if (*only == Checkpointing::selective)
            throw InputError("--gradient-checkpointing: compare evaluates none and full; selective is searched by plan");
        base.checkpointing.reset();
    }
    if (!base.gpu) throw InputError("--gpu: the speed model needs a GPU preset (see `zeromem gpus`)");
    Evaluation ev;
    ev.resolved = resolve_request(base, data_dir);
    sim::use_replayed_fragmentation(ev.resolved.input, req.fragmentation.has_value() || ev.resolved.fragmentation_fitted);  // the replay's allowance
    const EstimateInput& in = ev.resolved.input;
    ev.hw = speed_hardware(*ev.resolved.gpu, in.train.dtype, speed.interconnect, speed.network, data_dir);
    if (!speed.host.empty()) apply_host(ev.hw, load_host_preset(speed.host, data_dir, "--host"), SpeedConstants{});
    if (in.cluster.nodes > 1 && speed.network.empty())
        throw InputError("--network: the cluster spans " + std::to_string(in.cluster.nodes) +
                         " nodes; name the inter-node network");
    ev.global_batch = global_batch_of(in, req.micro_batch.has_value() || req.grad_accum.has_value());
    for (Candidate& c : compare_options(in, ev.hw, ev.global_batch))
        if (!only || c.option.checkpointing == *only) ev.rows.push_back(std::move(c));
    ev.ordering = ordering_groups(ev.rows);
    ev.plan = plan(in, ev.hw, ev.global_batch);
    ev.gpu_capacity = in.cluster.gpu_memory.value_or(0);
    ev.host_capacity = in.cluster.host_memory.value_or(0);
    return ev;
}

std::string short_label(const ZeroOption& o) {
    std::string s = "Z" + std::to_string(o.stage);
    if (o.offload_optimizer != OffloadDevice::none) s += std::string(" opt:") + to_string(o.offload_optimizer);
    if (o.offload_param != OffloadDevice::none) s += std::string(" par:") + to_string(o.offload_param);
    if (o.checkpointing != Checkpointing::none) s += o.checkpointing == Checkpointing::full ? " ckpt" : " sel-ckpt";
    return s;
}

}  // namespace zeromem_gui
