// The software stack's behaviours (stack_facts.h): the version switches, and the
// optimizer implementation that runs the step.
#include "zeromem/stack_facts.h"

#include "zeromem/optimizer_state.h"
#include "zeromem/util.h"

#include <string>

namespace zeromem {

namespace {

StackFacts facts_of(const SoftwareStack& st) {
    static const std::string ds_flag = "--deepspeed-version", torch_flag = "--torch-version",
                             tf_flag = "--transformers-version";
    auto torch_at_least = [&](const char* v) { return compare_versions(st.torch, v, torch_flag) >= 0; };
    auto tf_at_least = [&](const char* v) { return compare_versions(st.transformers, v, tf_flag) >= 0; };
    auto ds = [&](const char* v) { return compare_versions(st.deepspeed, v, ds_flag) >= 0; };
    StackFacts f;
    // The order of the first checks decides which flag a malformed version is reported
    // against: torch, then transformers (only read with torch >= 2.8), then DeepSpeed.
    f.foreach_adam_keeps_two_temporaries = !torch_at_least("2.1");
    f.hf_trainer_defaults_to_fused_adamw = torch_at_least("2.8") && tf_at_least("4.54");
    f.rounds_pinned_to_power_of_two = torch_at_least("1.11");
    f.pins_grad_partition_only_with_pin_memory = ds("0.10.1");
    f.creates_cpu_adam_states_at_first_step = ds("0.13.2");
    f.pins_master_weights = ds("0.14.1");
    f.cpu_adam_pins_tile_buffer = !ds("0.14.3");
    f.stages_bit16_params_for_offload = ds("0.17.0");
    f.pins_master_weights_only_with_pin_memory = ds("0.18.3");
    f.flattens_bit16_on_gpu_when_it_fits = ds("0.18.7");
    f.reuses_pinned_same_size_only = torch_at_least("2.5");
    f.loads_cuda_modules_lazily = torch_at_least("1.13");
    f.cublas_workspace_in_caching_allocator = torch_at_least("2.0");
    f.single_file_loads_whole_state_dict = !tf_at_least("4.50");
    f.generate_keeps_last_logits_only = tf_at_least("4.45");
    f.upcasts_logits_in_model_forward = !tf_at_least("4.46");
    f.shifts_logits_with_contiguous_copy = !tf_at_least("4.49");
    f.hf_default_attention_is_sdpa = tf_at_least("4.36") && torch_at_least("2.1.1");
    f.packs_moe_experts = tf_at_least("5.0");
    return f;
}

}  // namespace

// Every estimate asks (the planner: thousands per search, all on one stack), and the answer depends on the
// three version strings alone: the last one is kept per thread. A malformed version throws before it is kept.
StackFacts stack_facts(const SoftwareStack& st) {
    thread_local SoftwareStack last_stack;
    thread_local StackFacts last;
    thread_local bool kept = false;
    if (kept && st.deepspeed == last_stack.deepspeed && st.torch == last_stack.torch &&
        st.transformers == last_stack.transformers)
        return last;
    last = facts_of(st);
    last_stack = st;
    kept = true;
    return last;
}

AttentionChoice default_attention(const SoftwareStack& st, const StackFacts& facts, const std::string& family) {
    const std::string stack = "transformers " + st.transformers + " with torch " + st.torch;
    if (family == "t5" || family == "gptj")
        return {false, "the " + family + " model class has no SDPA path in transformers " + st.transformers +
                           "; s^2 scores kept"};
    // FalconPreTrainedModel._check_and_enable_sdpa: "Falcon supported SDPA from PyTorch 2.0".
    if (family == "falcon" && compare_versions(st.transformers, "4.36", "--transformers-version") >= 0 &&
        compare_versions(st.torch, "2.0", "--torch-version") >= 0)
        return {true, "SDPA, falcon's default from torch 2.0 (" + stack + "): no s^2 scores"};
    if (!facts.hf_default_attention_is_sdpa)
        return {false, stack + " has no SDPA default (from transformers 4.36 with torch >= 2.1.1); s^2 scores kept"};
    // Llama and Mistral/Mixtral have SDPA classes from 4.36 (huggingface/transformers#26572); other
    // families are taken to have one, said aloud.
    const bool checked = family.empty() || family == "llama" || family == "mistral" || family == "mixtral";
    return {true, "SDPA, the default of " + stack + " (from transformers 4.36 with torch >= 2.1.1): its flash or "
                  "memory-efficient kernel keeps no s^2 scores" +
                  (checked ? "" : " (that the " + family + " class has an SDPA path is assumed, not checked)")};
}

uint64_t step_temporary_bytes_per_element(StepKernel k) {
    switch (k) {
        case StepKernel::torch_foreach: return 4;
        case StepKernel::torch_foreach_2_0: return 8;
        case StepKernel::fused:
        case StepKernel::sgd: return 0;
    }
    return 0;
}

StepKernel foreach_kernel(const StackFacts& facts) {
    return facts.foreach_adam_keeps_two_temporaries ? StepKernel::torch_foreach_2_0 : StepKernel::torch_foreach;
}

namespace {

// `lead` and torch's foreach kernel of `o` with its temporaries, built in one allocation (the
// planner asks once per candidate).
std::string foreach_words(const char* lead, Optimizer o, bool torch_2_0) {
    std::string s;
    s.reserve(128);
    s += lead;
    s += "torch's foreach ";
    s += to_string(o);
    s += torch_2_0 ? " (torch < 2.1: two fp32 temporaries)" : " (one fp32 temporary)";
    return s;
}

}  // namespace

StepKernelChoice step_kernel(const EstimateInput& in, const StackFacts& facts) {
    const auto& t = in.train;
    const bool torch_2_0 = facts.foreach_adam_keeps_two_temporaries;
    const StepKernel foreach = foreach_kernel(facts);
    if (t.optimizer == Optimizer::sgd || t.optimizer == Optimizer::sgd_plain)
        return {StepKernel::sgd, "torch SGD: no Adam temporary"};
    const OptimizerInfo& oi = optimizer_info(t.optimizer);
    const bool offload_opt = in.zero.offload_optimizer != OffloadDevice::none;
    if (!offload_opt && (oi.bitsandbytes || t.optimizer == Optimizer::lion || t.optimizer == Optimizer::lamb))
        return {StepKernel::fused, std::string(oi.implementation) + ": updates in place, no fp32 temporary"};
    if (t.optimizer == Optimizer::adagrad && offload_opt)
        return {StepKernel::fused, "DeepSpeedCPUAdagrad (optimizer offload): in place"};
    if (!offload_opt &&
        (t.optimizer == Optimizer::adagrad || t.optimizer == Optimizer::rmsprop || t.optimizer == Optimizer::adafactor))
        return {foreach, std::string(oi.implementation) +
                             ": one fp32 temporary the size of the tensors it steps (Adafactor: update = grad^2 + eps)"};
    if (t.torch_adam) return {foreach, foreach_words("optimizer.params.torch_adam: DeepSpeed builds ", t.optimizer, torch_2_0)};
    if (t.fused_optimizer)
        return {StepKernel::fused, "DeepSpeed's optimizer (FusedAdam, DeepSpeedCPUAdam under offload): in place"};
    const bool offload = in.zero.offload_optimizer != OffloadDevice::none;
    if (offload && t.optimizer_builder != OptimizerBuilder::client)
        return {StepKernel::fused, "DeepSpeedCPUAdam (optimizer offload needs DeepSpeed's optimizer)"};
    if (t.client_fused)
        return {*t.client_fused ? StepKernel::fused : foreach,
                *t.client_fused ? std::string("torch's fused AdamW: no temporary") : foreach_words("", t.optimizer, torch_2_0)};
    if (facts.hf_trainer_defaults_to_fused_adamw)
        return {StepKernel::fused,
                "HF Trainer default adamw_torch_fused (torch >= 2.8, transformers >= 4.54): no temporary"};
    return {foreach, foreach_words("HF Trainer default adamw_torch: ", t.optimizer, torch_2_0)};
}

StepKernel step_kernel_for(const EstimateInput& in) { return step_kernel(in, stack_facts(in.stack)).kernel; }

}  // namespace zeromem
