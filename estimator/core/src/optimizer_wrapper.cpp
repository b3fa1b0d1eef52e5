#include "zeromem/optimizer_wrapper.h"

#include "zeromem/util.h"

namespace zeromem {

namespace {

bool deepspeed_at_least(const EstimateInput& in, const char* version) {
    return compare_versions(in.stack.deepspeed, version, "--deepspeed-version") >= 0;
}

}  // namespace

Dtype effective_grad_accum_dtype(const EstimateInput& in) {
    const auto& t = in.train;
    if (t.grad_accum_dtype) return *t.grad_accum_dtype;
    // get_data_types before v0.17.6: bf16 without ZeRO accumulated in fp32.
    if (t.dtype == Dtype::bf16 && in.zero.stage == 0 && !deepspeed_at_least(in, "0.17.6")) return Dtype::fp32;
    return t.dtype;
}

std::optional<WrapperRefusal> optimizer_wrapper_refusal(const EstimateInput& in) {
    if (in.zero.stage != 0) return std::nullopt;
    const Dtype model = in.train.dtype, acc = effective_grad_accum_dtype(in);
    const std::string mix = std::string("data_types.grad_accum_dtype: ") + to_string(acc) + " with " +
                            to_string(model) + " weights without ZeRO (stage 0): DeepSpeed " + in.stack.deepspeed +
                            " raises NotImplementedError (engine.py _do_optimizer_sanity_check, ";
    if (model != acc) {
        if (model == Dtype::bf16 && acc == Dtype::fp32 && !deepspeed_at_least(in, "0.18.5")) return std::nullopt;
        return WrapperRefusal{mix + "\"unsupported mix\")",
                              "use ZeRO stage 1-3, or a grad_accum_dtype equal to the model dtype"};
    }
    if (model == Dtype::bf16 && in.cluster.pp == 1 && !deepspeed_at_least(in, "0.17.6"))
        return WrapperRefusal{mix + "\"Bfloat16 wrapper must use a gradient accumulation type of fp32\")",
                              "use grad_accum_dtype fp32 or ZeRO"};
    return std::nullopt;
}

OptimizerWrapper optimizer_wrapper(const EstimateInput& in) {
    if (const auto why = optimizer_wrapper_refusal(in)) throw InputError(why->message());
    const Dtype model = in.train.dtype, acc = effective_grad_accum_dtype(in);
    if (in.zero.stage == 1 && model == Dtype::bf16 && acc == Dtype::fp32 &&
        in.zero.offload_optimizer != OffloadDevice::cpu)
        return OptimizerWrapper::bf16_optimizer;
    if (in.zero.stage >= 1) return OptimizerWrapper::zero;
    if (model == Dtype::bf16 && (acc == Dtype::fp32 || in.cluster.pp > 1)) return OptimizerWrapper::bf16_optimizer;
    return model == Dtype::fp32 ? OptimizerWrapper::none : OptimizerWrapper::fp16_optimizer;
}

// The optimizer the step really runs under ZeRO optimizer offload. DeepSpeed
// refuses a client optimizer other than DeepSpeedCPUAdam there
// (engine.py _configure_optimizer raises ZeRORuntimeException while
// zero_force_ds_cpu_optimizer is true), but the HF Trainer prepares DeepSpeed
// through accelerate, whose Accelerator._prepare_deepspeed (accelerator.py)
// replaces the client optimizer with DeepSpeedCPUAdam(param_groups) in exactly
// that case. zeromem follows the HF Trainer: the step is DeepSpeedCPUAdam, as
// with an "optimizer" block. Sets `swapped` when it changed the input.
bool accelerate_swaps_cpu_adam(const EstimateInput& in) {
    return in.zero.offload_optimizer != OffloadDevice::none && in.train.optimizer_builder == OptimizerBuilder::client &&
           !in.train.fused_optimizer && in.zero.zero_force_ds_cpu_optimizer;
}

EstimateInput with_accelerate_cpu_adam(const EstimateInput& in, bool& swapped) {
    EstimateInput out = in;
    swapped = accelerate_swaps_cpu_adam(in);
    if (swapped) {
        out.train.optimizer_builder = OptimizerBuilder::deepspeed;
        out.train.fused_optimizer = true;
        out.train.torch_adam = false;
        // DeepSpeedCPUAdam whatever the client's optimizer was.
        if (out.train.optimizer != Optimizer::adam) out.train.optimizer = Optimizer::adamw;
    }
    return out;
}

}  // namespace zeromem
