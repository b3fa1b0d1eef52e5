// ZeRO-Infinity's host-RAM knobs: the settings that shrink what an NVMe
// offload keeps in host RAM, in the order tried. `estimate`'s host advice
// (advice.cpp host_changes) and plan's step 10 (planner.cpp) both read them.
#include "planner_search.h"

#include "zeromem/verdict_band.h"

#include <algorithm>

namespace zeromem::planner_detail {

namespace {

constexpr int64_t kSmallBuffer = 100000000;  // 1e8 elements: DeepSpeed's buffer_size default

// Smaller pinned NVMe swap buffers: offload_param.buffer_size sizes each
// parameter swap buffer (DeepSpeed default 1e8, runtime/zero/offload_config.py
// DeepSpeedZeroOffloadParamConfig), sub_group_size the optimizer swap buffers
// (default 1e9, runtime/zero/config.py), both pinned in host RAM.
bool smaller_swap_buffers(EstimateInput& in) {
    bool changed = false;
    if (in.zero.offload_param == OffloadDevice::nvme && in.zero.offload_param_buffer_size > kSmallBuffer) {
        in.zero.offload_param_buffer_size = kSmallBuffer;
        changed = true;
    }
    if (in.zero.offload_optimizer == OffloadDevice::nvme && in.zero.sub_group_size > kSmallBuffer) {
        in.zero.sub_group_size = kSmallBuffer;
        changed = true;
    }
    return changed;
}

// The same and a pageable 16-bit gradient buffer: with pin_memory the flat
// buffer is pinned from a pageable torch.zeros of the same size (stage3.py
// _setup_for_real_optimizer); without it neither the copy nor its
// power-of-two rounding exists.
bool smaller_swap_buffers_unpinned(EstimateInput& in) {
    if (in.zero.offload_optimizer != OffloadDevice::nvme || !in.zero.offload_optimizer_pin_memory) return false;
    if (in.zero.offload_param == OffloadDevice::nvme)
        in.zero.offload_param_buffer_size = std::min<int64_t>(in.zero.offload_param_buffer_size, kSmallBuffer);
    in.zero.sub_group_size = std::min<int64_t>(in.zero.sub_group_size, kSmallBuffer);
    in.zero.offload_optimizer_pin_memory = false;
    return true;
}

}  // namespace

const std::vector<NvmeHostKnobs>& nvme_host_knobs() {
    static const std::vector<NvmeHostKnobs> knobs = {
        {{{"zero_optimization.offload_param.buffer_size", "1e8"}, {"zero_optimization.sub_group_size", "1e8"}},
         "smaller pinned NVMe swap buffers (DeepSpeed defaults: buffer_size 1e8, sub_group_size 1e9)",
         smaller_swap_buffers},
        {{{"zero_optimization.offload_param.buffer_size", "1e8"},
          {"zero_optimization.sub_group_size", "1e8"},
          {"zero_optimization.offload_optimizer.pin_memory", "false"}},
         "smaller NVMe swap buffers and a pageable 16-bit gradient buffer (pinning it copies it from a "
         "pageable buffer of the same size at init, rounded up to a power of two)",
         smaller_swap_buffers_unpinned},
    };
    return knobs;
}

std::optional<Candidate> shrink_host_buffers(const Candidate& failed, EstimateInput& in, EstimateInput& plan_base,
                                             const SpeedHardware& hw, const SpeedConstants& k, PlanResult& r) {
    if (!failed.memory.fits_gpu.value_or(false) || failed.memory.fits_host.value_or(true)) return std::nullopt;
    for (const NvmeHostKnobs& knobs : nvme_host_knobs()) {
        EstimateInput trial = in;
        apply_candidate(failed, trial);
        if (!knobs.apply(trial)) continue;
        Candidate c = failed;
        const ZeroSettings& was = in.zero;
        const ZeroSettings& now = trial.zero;
        std::string action = "ZeRO-Infinity's host buffers:";  // the settings this trial changes, as emitted
        auto name = [&](const std::string& path) {
            for (const SettingChange& ch : knobs.changes)
                if (ch.path == path) action += " " + ch.path + "=" + ch.value;
        };
        if (now.offload_param_buffer_size != was.offload_param_buffer_size) {
            c.offload_param_buffer_size = now.offload_param_buffer_size;
            name("zero_optimization.offload_param.buffer_size");
        }
        if (now.sub_group_size != was.sub_group_size) {
            c.sub_group_size = now.sub_group_size;
            name("zero_optimization.sub_group_size");
        }
        if (now.offload_optimizer_pin_memory != was.offload_optimizer_pin_memory) {
            c.offload_optimizer_pin_memory = now.offload_optimizer_pin_memory;
            name("zero_optimization.offload_optimizer.pin_memory");
        }
        evaluate(c, trial, hw, k);
        ++r.candidates;
        action += " (" + knobs.why + ")";
        std::string outcome;
        if (c.fits)
            outcome = std::string(c.tight ? "fits, " + tight_words(c.memory) + ": " : "fits: ") +
                      gib(c.memory.per_gpu.total) + " per GPU, " + gib(c.memory.per_node.host_memory) +
                      " host per node";
        else
            outcome = "host memory still exceeded: " + gib(c.memory.per_node.host_memory) + " per node";
        r.steps.push_back({10, action, outcome, c});
        if (!c.fits) continue;
        for (EstimateInput* e : {&in, &plan_base}) {
            e->zero.offload_param_buffer_size = now.offload_param_buffer_size;
            e->zero.sub_group_size = now.sub_group_size;
            e->zero.offload_optimizer_pin_memory = now.offload_optimizer_pin_memory;
        }
        return c;
    }
    return std::nullopt;
}

void carry_host_knobs(const Candidate& from, Candidate& to) {
    to.offload_param_buffer_size = from.offload_param_buffer_size;
    to.sub_group_size = from.sub_group_size;
    to.offload_optimizer_pin_memory = from.offload_optimizer_pin_memory;
}

}  // namespace zeromem::planner_detail
