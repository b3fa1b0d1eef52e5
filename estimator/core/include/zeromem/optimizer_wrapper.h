// Which optimizer wrapper DeepSpeed's engine builds around the optimizer, and
// the gradient accumulation dtype it runs with: the decision of
// engine.py _do_optimizer_sanity_check and get_data_types, by DeepSpeed
// version.
#pragma once

#include "zeromem/input.h"

#include <optional>
#include <string>

namespace zeromem {

/// DeepSpeed's wrapper of the step (engine.py _configure_optimizer).
enum class OptimizerWrapper {
    zero,            ///< ZeRO stage 1-3: DeepSpeedZeroOptimizer / DeepSpeedZeroOptimizer_Stage3
    bf16_optimizer,  ///< runtime/bf16_optimizer.py BF16_Optimizer
    fp16_optimizer,  ///< FP16_Optimizer (fp16, and DDP_BFLOAT16 from DeepSpeed 0.17.6)
    none,            ///< fp32 weights: the client's optimizer runs unwrapped
};

/// The gradient accumulation dtype DeepSpeed runs with: data_types.
/// grad_accum_dtype when set; unset, the model dtype, except bf16 without
/// ZeRO before DeepSpeed 0.17.6, which accumulated in fp32
/// (engine.py get_data_types). Throws InputError for a malformed
/// --deepspeed-version.
Dtype effective_grad_accum_dtype(const EstimateInput& in);

/// Why DeepSpeed refuses the dtypes of `in` at its ZeRO stage, or nothing.
/// Without ZeRO (stage 0) engine.py _do_optimizer_sanity_check raises
/// NotImplementedError for a model dtype and gradient accumulation dtype
/// that differ (from DeepSpeed 0.18.5; before it, bf16 with fp32
/// accumulation built BF16_Optimizer), and, before DeepSpeed 0.17.6, for
/// bf16 accumulation of bf16 weights outside a pipeline. ZeRO stages 1-3
/// accept every mix. `reason` names data_types.grad_accum_dtype, `fix`
/// says what DeepSpeed accepts instead; message() joins them with "; ".
struct WrapperRefusal {
    std::string reason, fix;
    std::string message() const { return reason + "; " + fix; }
};
std::optional<WrapperRefusal> optimizer_wrapper_refusal(const EstimateInput& in);

/// The wrapper DeepSpeed builds for `in` (engine.py
/// _do_optimizer_sanity_check): BF16_Optimizer for bf16 weights with fp32
/// accumulation at ZeRO stage 1 without CPU optimizer offload, for bf16
/// with bf16 accumulation at stage 0 under pipeline parallelism, and for
/// bf16 with fp32 accumulation at stage 0 before DeepSpeed 0.18.5. Throws
/// InputError with optimizer_wrapper_refusal's message where DeepSpeed
/// raises.
OptimizerWrapper optimizer_wrapper(const EstimateInput& in);

/// `in` with the optimizer the step really runs under ZeRO optimizer offload:
/// a client optimizer while zero_force_ds_cpu_optimizer is true becomes
/// DeepSpeedCPUAdam (adamw), as accelerate substitutes it (accelerator.py
/// _prepare_deepspeed); DeepSpeed itself raises ZeRORuntimeException there
/// (engine.py _configure_optimizer). `swapped` says whether it changed. The
/// estimator and the simulator both resolve the input through it.
EstimateInput with_accelerate_cpu_adam(const EstimateInput& in, bool& swapped);
/// Whether with_accelerate_cpu_adam changes `in` (its `swapped`), without copying the input.
bool accelerate_swaps_cpu_adam(const EstimateInput& in);

}  // namespace zeromem
