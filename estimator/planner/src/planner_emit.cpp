// Writing the configuration plan chose: the DeepSpeed config emitted for a
// candidate (`plan --emit`), the settings that file implies for the
// estimate, and DeepSpeed's own estimator over its option grid.
#include "zeromem/planner.h"
#include "planner_search.h"

#include <cmath>

namespace zeromem {

namespace planner_detail {

// The settings emit_ds_config writes besides the candidate's own: an
// "optimizer" block (so DeepSpeed builds FusedAdam / DeepSpeedCPUAdam, no
// optimizer temporaries), the HF rules for the stage-3 buckets when the
// hidden size is known (0.9·h², 10·h; transformers integrations/deepspeed.py
// trainer_config_finalize) and the
// 16-bit gather at save. plan() evaluates with them, so that `estimate
// --ds-config` on the emitted file gives the same figures.
void apply_emitted_settings(EstimateInput& in) {
    in.train.fused_optimizer = true;
    if (in.model.arch) {
        const int64_t h = in.model.arch->hidden_size;
        in.zero.stage3_prefetch_bucket_size = int64_t(std::llround(0.9 * double(h) * double(h)));
        in.zero.stage3_param_persistence_threshold = 10 * h;
    }
    // stage3_gather_16bit_weights_on_model_save stays the user's (default
    // off, DeepSpeed's), so compare, plan and estimate agree on host memory.
}

}  // namespace planner_detail

using planner_detail::apply_emitted_settings;

void apply_as_emitted(const Candidate& c, EstimateInput& in) {
    apply_candidate(c, in);
    apply_emitted_settings(in);
}

nlohmann::json emit_ds_config(const Candidate& c, const EstimateInput& base, bool hf_trainer) {
    using nlohmann::json;
    const int64_t gpus = base.cluster.gpus;
    json j;
    if (hf_trainer) {
        j["train_batch_size"] = "auto";
        j["train_micro_batch_size_per_gpu"] = "auto";
        j["gradient_accumulation_steps"] = "auto";
        j["gradient_clipping"] = "auto";
    } else {
        j["train_batch_size"] = c.micro_batch * c.grad_accum * gpus;
        j["train_micro_batch_size_per_gpu"] = c.micro_batch;
        j["gradient_accumulation_steps"] = c.grad_accum;
        j["gradient_clipping"] = 1.0;
    }
    if (hf_trainer) {  // the Trainer fills these from --bf16 / --fp16
        j["bf16"] = {{"enabled", "auto"}};
        j["fp16"] = {{"enabled", "auto"}};
    } else {
        if (c.dtype == Dtype::bf16) j["bf16"] = {{"enabled", true}};
        if (c.dtype == Dtype::fp16) j["fp16"] = {{"enabled", true}};
    }
    json opt = {{"type", "AdamW"}};
    if (hf_trainer)
        opt["params"] = {{"lr", "auto"}, {"betas", "auto"}, {"eps", "auto"}, {"weight_decay", "auto"}};
    else
        opt["params"] = {{"lr", 1e-5}, {"betas", {0.9, 0.999}}, {"eps", 1e-8}, {"weight_decay", 0.0}};
    j["optimizer"] = opt;
    json z;
    z["stage"] = c.option.stage;
    z["overlap_comm"] = c.overlap_comm;
    z["contiguous_gradients"] = true;
    z["reduce_bucket_size"] = c.reduce_bucket_size;
    if (c.option.stage == 1 || c.option.stage == 2) z["allgather_bucket_size"] = c.reduce_bucket_size;
    if (c.option.stage == 3) {
        EstimateInput emitted = base;
        apply_emitted_settings(emitted);
        const ZeroSettings& d = emitted.zero;
        z["stage3_prefetch_bucket_size"] = d.stage3_prefetch_bucket_size;
        z["stage3_param_persistence_threshold"] = d.stage3_param_persistence_threshold;
        z["stage3_max_live_parameters"] = d.stage3_max_live_parameters;
        z["stage3_max_reuse_distance"] = d.stage3_max_reuse_distance;
        z["stage3_gather_16bit_weights_on_model_save"] = d.stage3_gather_16bit_weights_on_model_save;
        // ZeRO++ and MiCS settings the plan was asked for (zeromem/zeropp.h).
        if (d.zero_hpz_partition_size > 1) z["zero_hpz_partition_size"] = d.zero_hpz_partition_size;
        if (d.zero_quantized_weights) z["zero_quantized_weights"] = true;
        if (d.zero_quantized_gradients) z["zero_quantized_gradients"] = true;
        if (d.mics_shard_size > 0) z["mics_shard_size"] = d.mics_shard_size;
        if (d.mics_hierarchical_params_gather) z["mics_hierarchical_params_gather"] = true;
        if (c.sub_group_size) z["sub_group_size"] = *c.sub_group_size;  // plan's step 10 (nvme_host_knobs)
    }
    auto offload = [](OffloadDevice dev) {
        json o = {{"device", to_string(dev)}, {"pin_memory", true}};
        if (dev == OffloadDevice::nvme) o["nvme_path"] = "/local_nvme";
        return o;
    };
    if (c.option.offload_optimizer != OffloadDevice::none) {
        z["offload_optimizer"] = offload(c.option.offload_optimizer);
        if (c.offload_optimizer_pin_memory) z["offload_optimizer"]["pin_memory"] = *c.offload_optimizer_pin_memory;
    }
    if (c.option.offload_param != OffloadDevice::none) {
        z["offload_param"] = offload(c.option.offload_param);
        if (c.offload_param_buffer_size) z["offload_param"]["buffer_size"] = *c.offload_param_buffer_size;
    }
    j["zero_optimization"] = z;
    j["steps_per_print"] = 100;
    j["wall_clock_breakdown"] = false;
    return j;
}

std::vector<ConventionRow> deepspeed_all_options(const EstimateInput& base) {
    using D = OffloadDevice;
    EstimateInput in = base;
    in.convention = Convention::deepspeed;
    std::vector<ConventionRow> rows;
    auto add = [&](int stage, D opt, D par, bool zero_init) {
        in.zero.stage = stage;
        in.zero.offload_optimizer = opt;
        in.zero.offload_param = par;
        in.zero.zero_init = zero_init;
        const Estimate e = estimate(in);
        rows.push_back({stage, opt, par, zero_init, e.per_gpu.total, e.per_node.host_memory});
    };
    for (D opt : {D::cpu, D::none}) add(2, opt, D::none, true);
    for (auto [opt, par] : {std::pair<D, D>{D::cpu, D::cpu}, {D::cpu, D::none}, {D::none, D::none}})
        for (bool zi : {true, false}) add(3, opt, par, zi);
    return rows;
}

}  // namespace zeromem
