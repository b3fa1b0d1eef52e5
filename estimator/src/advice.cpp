#include "zeromem/advice.h"

#include <algorithm>

#include <functional>

namespace zeromem {

namespace {

struct Candidate {
    std::string change;
    std::string why;
    std::function<bool(EstimateInput&)> apply;  // false: not applicable
};

std::vector<Candidate> gpu_candidates(const EstimateInput& base) {
    std::vector<Candidate> c;
    const int64_t mb = base.train.micro_batch;
    c.push_back({"--micro-batch 1 --grad-accum " + std::to_string(mb * base.train.grad_accum),
                 "recipe step 1: micro batch 1, same global batch through gradient accumulation",
                 [](EstimateInput& in) {
                     if (in.train.micro_batch == 1) return false;
                     in.train.grad_accum *= in.train.micro_batch;
                     in.train.micro_batch = 1;
                     return true;
                 }});
    c.push_back({"--gradient-checkpointing full", "recipe step 2: gradient checkpointing keeps only layer inputs",
                 [](EstimateInput& in) {
                     if (in.train.checkpointing == Checkpointing::full) return false;
                     in.train.checkpointing = Checkpointing::full;
                     return true;
                 }});
    c.push_back({"--stage 2", "recipe step 3: ZeRO-2 partitions gradients and optimizer states",
                 [](EstimateInput& in) {
                     if (in.zero.stage >= 2) return false;
                     in.zero.stage = 2;
                     return true;
                 }});
    c.push_back({"--stage 2 --offload-optimizer cpu", "recipe step 4: ZeRO-2 with the optimizer offloaded to the CPU",
                 [](EstimateInput& in) {
                     if (in.zero.stage > 2 || in.zero.offload_optimizer != OffloadDevice::none) return false;
                     in.zero.stage = 2;
                     in.zero.offload_optimizer = OffloadDevice::cpu;
                     return true;
                 }});
    c.push_back({"--stage 3", "recipe step 5: ZeRO-3 also partitions the parameters",
                 [](EstimateInput& in) {
                     if (in.zero.stage >= 3) return false;
                     in.zero.stage = 3;
                     return true;
                 }});
    c.push_back({"--stage 3 --offload-param cpu", "recipe step 6: parameters offloaded to the CPU",
                 [](EstimateInput& in) {
                     if (in.zero.offload_param != OffloadDevice::none) return false;
                     in.zero.stage = 3;
                     in.zero.offload_param = OffloadDevice::cpu;
                     return true;
                 }});
    c.push_back({"--stage 3 --offload-param cpu --offload-optimizer cpu",
                 "recipe step 7: optimizer offloaded to the CPU as well",
                 [](EstimateInput& in) {
                     if (in.zero.offload_optimizer != OffloadDevice::none && in.zero.offload_param != OffloadDevice::none)
                         return false;
                     in.zero.stage = 3;
                     in.zero.offload_param = OffloadDevice::cpu;
                     in.zero.offload_optimizer = OffloadDevice::cpu;
                     return true;
                 }});
    if (base.generation && base.generation->num_beams > 1)
        c.push_back({"--num-beams 1", "recipe step 8: lower other defaults: greedy generation keeps one KV cache per prompt",
                     [](EstimateInput& in) {
                         if (!in.generation || in.generation->num_beams <= 1) return false;
                         in.generation->num_beams = 1;
                         return true;
                     }});
    c.push_back({"--dtype bf16", "recipe step 9: mixed precision (bf16 on Ampere and newer, fp16 before)",
                 [](EstimateInput& in) {
                     if (in.train.dtype != Dtype::fp32) return false;
                     in.train.dtype = Dtype::bf16;
                     return true;
                 }});
    c.push_back({"--stage 3 --offload-param nvme --offload-optimizer nvme",
                 "recipe step 10: ZeRO-Infinity, parameters and optimizer on NVMe",
                 [](EstimateInput& in) {
                     in.zero.stage = 3;
                     in.zero.offload_param = OffloadDevice::nvme;
                     in.zero.offload_optimizer = OffloadDevice::nvme;
                     return true;
                 }});
    (void)base;
    return c;
}

std::vector<Candidate> host_candidates() {
    std::vector<Candidate> c;
    c.push_back({"--zero-init", "build the model under deepspeed.zero.Init so no rank materialises it whole",
                 [](EstimateInput& in) {
                     if (in.zero.stage != 3 || in.zero.zero_init) return false;
                     in.zero.zero_init = true;
                     return true;
                 }});
    c.push_back({"--load-dtype bf16", "load the checkpoint in 16 bits (from_pretrained(torch_dtype=...)), not fp32",
                 [](EstimateInput& in) {
                     if (in.residual.load_dtype != Dtype::fp32) return false;
                     in.residual.load_dtype = Dtype::bf16;
                     return true;
                 }});
    c.push_back({"--stage 3 --zero-init", "ZeRO-3 with zero.Init: each rank loads one module at a time",
                 [](EstimateInput& in) {
                     if (in.zero.stage == 3 && in.zero.zero_init) return false;
                     in.zero.stage = 3;
                     in.zero.zero_init = true;
                     return true;
                 }});
    c.push_back({"offload_param.buffer_size 1e8, sub_group_size 1e8",
                 "smaller pinned NVMe swap buffers (DeepSpeed defaults: buffer_size 1e8, sub_group_size 1e9)",
                 [](EstimateInput& in) {
                     bool changed = false;
                     if (in.zero.offload_param == OffloadDevice::nvme && in.zero.offload_param_buffer_size > 100000000) {
                         in.zero.offload_param_buffer_size = 100000000;
                         changed = true;
                     }
                     if (in.zero.offload_optimizer == OffloadDevice::nvme && in.zero.sub_group_size > 100000000) {
                         in.zero.sub_group_size = 100000000;
                         changed = true;
                     }
                     return changed;
                 }});
    // The 16-bit gradient flat buffer is pinned from a pageable torch.zeros
    // of the same size (stage3.py _setup_for_real_optimizer): without
    // pin_memory neither the copy nor its power-of-two rounding exists.
    c.push_back({"offload_param.buffer_size 1e8, sub_group_size 1e8, offload_optimizer.pin_memory false",
                 "smaller NVMe swap buffers and a pageable 16-bit gradient buffer (pinning it copies it from a "
                 "pageable buffer of the same size at init, rounded up to a power of two)",
                 [](EstimateInput& in) {
                     if (in.zero.offload_optimizer != OffloadDevice::nvme || !in.zero.offload_optimizer_pin_memory)
                         return false;
                     if (in.zero.offload_param == OffloadDevice::nvme)
                         in.zero.offload_param_buffer_size = std::min<int64_t>(in.zero.offload_param_buffer_size, 100000000);
                     in.zero.sub_group_size = std::min<int64_t>(in.zero.sub_group_size, 100000000);
                     in.zero.offload_optimizer_pin_memory = false;
                     return true;
                 }});
    c.push_back({"--offload-optimizer nvme", "ZeRO-Infinity: optimizer states on NVMe instead of host RAM",
                 [](EstimateInput& in) {
                     if (in.zero.stage != 3 || in.zero.offload_optimizer != OffloadDevice::cpu) return false;
                     in.zero.offload_optimizer = OffloadDevice::nvme;
                     return true;
                 }});
    c.push_back({"--offload-param nvme", "ZeRO-Infinity: parameters on NVMe instead of host RAM",
                 [](EstimateInput& in) {
                     if (in.zero.offload_param != OffloadDevice::cpu) return false;
                     in.zero.offload_param = OffloadDevice::nvme;
                     return true;
                 }});
    return c;
}

bool fits(const std::optional<bool>& f) { return !f.has_value() || *f; }

Advice search(const EstimateInput& in, const Estimate& est, bool gpu) {
    Advice a;
    a.resource = gpu ? "gpu" : "host";
    a.phase = gpu ? est.first_oom_phase : est.first_host_oom_phase;
    a.need = gpu ? est.per_gpu.total : est.per_node.host_memory;
    a.capacity = gpu ? *in.cluster.gpu_memory : *in.cluster.host_memory;
    const auto candidates = gpu ? gpu_candidates(in) : host_candidates();
    for (const auto& c : candidates) {
        EstimateInput trial = in;
        if (!c.apply(trial)) continue;
        Estimate e;
        try {
            e = estimate(trial);
        } catch (const InputError&) {
            continue;  // not a valid DeepSpeed configuration (e.g. ZeRO-3 with pipeline parallelism)
        }
        if (fits(e.fits_gpu) && fits(e.fits_host)) {
            a.found = true;
            a.change = c.change;
            a.why = c.why;
            a.need_after = gpu ? e.per_gpu.total : e.per_node.host_memory;
            return a;
        }
    }
    return a;
}

}  // namespace

std::vector<Advice> advise(const EstimateInput& in, const Estimate& est) {
    std::vector<Advice> out;
    if (est.convention != Convention::full) return out;
    if (est.fits_gpu.has_value() && !*est.fits_gpu) out.push_back(search(in, est, true));
    if (est.fits_host.has_value() && !*est.fits_host) out.push_back(search(in, est, false));
    return out;
}

}  // namespace zeromem
