// The software stack's behaviours the full convention follows (StackFacts) and the
// optimizer implementation that runs the step.
#include "estimate_detail.h"

#include "zeromem/optimizer_wrapper.h"
#include "zeromem/util.h"

#include <string>

namespace zeromem {

using namespace estimate_detail;

namespace estimate_detail {

StackFacts stack_facts(const SoftwareStack& st) {
    static const std::string ds_flag = "--deepspeed-version", torch_flag = "--torch-version",
                             tf_flag = "--transformers-version";
    auto ds = [&](const char* v) { return compare_versions(st.deepspeed, v, ds_flag) >= 0; };
    StackFacts f;
    f.torch_before_2_1 = compare_versions(st.torch, "2.1", torch_flag) < 0;
    f.hf_fused_default = compare_versions(st.torch, "2.8", torch_flag) >= 0 &&
                         compare_versions(st.transformers, "4.54", tf_flag) >= 0;
    f.round_pinned = compare_versions(st.torch, "1.11", torch_flag) >= 0;
    f.ds_0_10_1 = ds("0.10.1");
    f.ds_0_13_2 = ds("0.13.2");
    f.ds_0_14_1 = ds("0.14.1");
    f.ds_0_14_3 = ds("0.14.3");
    f.ds_0_17_0 = ds("0.17.0");
    f.ds_0_18_3 = ds("0.18.3");
    f.ds_0_18_7 = ds("0.18.7");
    return f;
}



KernelChoice step_kernel(const EstimateInput& in, const StackFacts& facts) {
    const auto& t = in.train;
    const bool torch_2_0 = facts.torch_before_2_1;
    const terms::StepKernel foreach = torch_2_0 ? terms::StepKernel::torch_foreach_2_0 : terms::StepKernel::torch_foreach;
    const std::string foreach_text = std::string("torch's foreach ") + to_string(t.optimizer) +
                                     (torch_2_0 ? " (torch < 2.1: two fp32 temporaries)" : " (one fp32 temporary)");
    if (t.optimizer == Optimizer::sgd || t.optimizer == Optimizer::sgd_plain)
        return {terms::StepKernel::sgd, "torch SGD: no Adam temporary"};
    const OptimizerInfo& oi = optimizer_info(t.optimizer);
    const bool offload_opt = in.zero.offload_optimizer != OffloadDevice::none;
    if (!offload_opt && (oi.bitsandbytes || t.optimizer == Optimizer::lion || t.optimizer == Optimizer::lamb))
        return {terms::StepKernel::fused, std::string(oi.implementation) + ": updates in place, no fp32 temporary"};
    if (t.optimizer == Optimizer::adagrad && offload_opt)
        return {terms::StepKernel::fused, "DeepSpeedCPUAdagrad (optimizer offload): in place"};
    if (!offload_opt &&
        (t.optimizer == Optimizer::adagrad || t.optimizer == Optimizer::rmsprop || t.optimizer == Optimizer::adafactor))
        return {foreach, std::string(oi.implementation) +
                             ": one fp32 temporary the size of the tensors it steps (Adafactor: update = grad^2 + eps)"};
    if (t.torch_adam) return {foreach, "optimizer.params.torch_adam: DeepSpeed builds " + foreach_text};
    if (t.fused_optimizer)
        return {terms::StepKernel::fused, "DeepSpeed's optimizer (FusedAdam, DeepSpeedCPUAdam under offload): in place"};
    const bool offload = in.zero.offload_optimizer != OffloadDevice::none;
    if (offload && t.optimizer_builder != OptimizerBuilder::client)
        return {terms::StepKernel::fused, "DeepSpeedCPUAdam (optimizer offload needs DeepSpeed's optimizer)"};
    if (t.client_fused)
        return {*t.client_fused ? terms::StepKernel::fused : foreach,
                *t.client_fused ? std::string("torch's fused AdamW: no temporary") : foreach_text};
    if (facts.hf_fused_default)
        return {terms::StepKernel::fused,
                "HF Trainer default adamw_torch_fused (torch >= 2.8, transformers >= 4.54): no temporary"};
    return {foreach, "HF Trainer default adamw_torch: " + foreach_text};
}

}  // namespace estimate_detail

terms::StepKernel terms::step_kernel_for(const EstimateInput& in) { return step_kernel(in, stack_facts(in.stack)).kernel; }

}  // namespace zeromem
