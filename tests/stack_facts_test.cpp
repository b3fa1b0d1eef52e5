// The stack-facts table (stack_facts.h): each behaviour switches at the release the header cites, on the
// first version that has it and not on the one before.
#include "zeromem/stack_facts.h"

#include <gtest/gtest.h>

#include <string>

using namespace zeromem;

namespace {

StackFacts torch_facts(const std::string& v) {
    SoftwareStack s;
    s.torch = v;
    return stack_facts(s);
}
StackFacts ds_facts(const std::string& v) {
    SoftwareStack s;
    s.deepspeed = v;
    return stack_facts(s);
}
StackFacts tf_facts(const std::string& v) {
    SoftwareStack s;
    s.transformers = v;
    return stack_facts(s);
}

}  // namespace

// torch: the foreach Adam's second temporary goes in 2.1; PowerOf2Ceil pinned sizes from 1.11
// (pytorch/pytorch#69299); same-size pinned reuse from 2.5 (#134154); lazy module loading from 1.13
// (#86509); cuBLAS's workspace in the caching allocator from 2.0.
TEST(StackFacts, TorchBehavioursSwitchAtTheirRelease) {
    EXPECT_TRUE(torch_facts("2.0.1").foreach_adam_keeps_two_temporaries);
    EXPECT_FALSE(torch_facts("2.1").foreach_adam_keeps_two_temporaries);
    EXPECT_FALSE(torch_facts("1.10").rounds_pinned_to_power_of_two);
    EXPECT_TRUE(torch_facts("1.11").rounds_pinned_to_power_of_two);
    EXPECT_FALSE(torch_facts("2.4.1").reuses_pinned_same_size_only);
    EXPECT_TRUE(torch_facts("2.5").reuses_pinned_same_size_only);
    EXPECT_FALSE(torch_facts("1.12").loads_cuda_modules_lazily);
    EXPECT_TRUE(torch_facts("1.13").loads_cuda_modules_lazily);
    EXPECT_FALSE(torch_facts("1.13").cublas_workspace_in_caching_allocator);
    EXPECT_TRUE(torch_facts("2.0").cublas_workspace_in_caching_allocator);
}

// transformers: the HF Trainer's adamw_torch_fused default needs torch 2.8 and transformers 4.54
// (huggingface/transformers#37358); the single-file state dict goes at 4.50 (#36033); generate keeps
// the last logits only from 4.45.
TEST(StackFacts, TransformersBehavioursSwitchAtTheirRelease) {
    EXPECT_FALSE(tf_facts("4.53").hf_trainer_defaults_to_fused_adamw);
    EXPECT_TRUE(tf_facts("4.54").hf_trainer_defaults_to_fused_adamw);
    EXPECT_FALSE(torch_facts("2.7.1").hf_trainer_defaults_to_fused_adamw);
    EXPECT_TRUE(tf_facts("4.49").single_file_loads_whole_state_dict);
    EXPECT_FALSE(tf_facts("4.50").single_file_loads_whole_state_dict);
    EXPECT_FALSE(tf_facts("4.44").generate_keeps_last_logits_only);
    EXPECT_TRUE(tf_facts("4.45").generate_keeps_last_logits_only);
    // LlamaForCausalLM.forward's own logits.float() until 4.45; loss_utils.py ForCausalLMLoss from 4.46.
    EXPECT_TRUE(tf_facts("4.45.2").upcasts_logits_in_model_forward);
    EXPECT_FALSE(tf_facts("4.46").upcasts_logits_in_model_forward);
    // shift_logits .contiguous() until 4.48; labels padded from 4.49 (huggingface/transformers#35646).
    EXPECT_TRUE(tf_facts("4.48.3").shifts_logits_with_contiguous_copy);
    EXPECT_FALSE(tf_facts("4.49").shifts_logits_with_contiguous_copy);
    // Packed MoE experts (experts.gate_up_proj / down_proj) from 5.0; the 4.x releases build per-expert MLPs.
    EXPECT_FALSE(tf_facts("4.57.6").packs_moe_experts);
    EXPECT_TRUE(tf_facts("5.0").packs_moe_experts);
}

// DeepSpeed: deepspeedai/DeepSpeed #4131 (0.10.1), #5104 (0.13.2), #5301 (0.14.1), #5409 (0.14.3),
// #7309 (0.17.0), #7689 (0.18.3), #7828 (0.18.7).
TEST(StackFacts, DeepSpeedBehavioursSwitchAtTheirRelease) {
    EXPECT_FALSE(ds_facts("0.10.0").pins_grad_partition_only_with_pin_memory);
    EXPECT_TRUE(ds_facts("0.10.1").pins_grad_partition_only_with_pin_memory);
    EXPECT_FALSE(ds_facts("0.13.1").creates_cpu_adam_states_at_first_step);
    EXPECT_TRUE(ds_facts("0.13.2").creates_cpu_adam_states_at_first_step);
    EXPECT_FALSE(ds_facts("0.14.0").pins_master_weights);
    EXPECT_TRUE(ds_facts("0.14.1").pins_master_weights);
    EXPECT_TRUE(ds_facts("0.14.2").cpu_adam_pins_tile_buffer);
    EXPECT_FALSE(ds_facts("0.14.3").cpu_adam_pins_tile_buffer);
    EXPECT_FALSE(ds_facts("0.16.9").stages_bit16_params_for_offload);
    EXPECT_TRUE(ds_facts("0.17.0").stages_bit16_params_for_offload);
    EXPECT_FALSE(ds_facts("0.18.2").pins_master_weights_only_with_pin_memory);
    EXPECT_TRUE(ds_facts("0.18.3").pins_master_weights_only_with_pin_memory);
    EXPECT_FALSE(ds_facts("0.18.6").flattens_bit16_on_gpu_when_it_fits);
    EXPECT_TRUE(ds_facts("0.18.7").flattens_bit16_on_gpu_when_it_fits);
}

// A malformed version names its flag.
TEST(StackFacts, MalformedVersionNamesTheFlag) {
    try {
        ds_facts("zero");
        FAIL() << "no throw";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("--deepspeed-version"), std::string::npos) << e.what();
    }
}

// torch's foreach kernel temporary: adam.py _multi_tensor_adam builds exp_avg_sq_sqrt (one fp32
// tensor, 4 B/element) from 2.1, and denom too on 2.0 (8 B/element).
TEST(StackFacts, ForeachKernelTemporaryFollowsTorch) {
    EXPECT_EQ(step_temporary_bytes_per_element(foreach_kernel(torch_facts("2.0"))), 8u);
    EXPECT_EQ(step_temporary_bytes_per_element(foreach_kernel(torch_facts("2.1"))), 4u);
    EXPECT_EQ(step_temporary_bytes_per_element(StepKernel::fused), 0u);
}

// The Hugging Face default attention: modeling_utils.py _autoset_attn_implementation takes SDPA when the
// class supports it and utils/import_utils.py is_torch_sdpa_available holds (torch >= 2.1.1), from
// transformers 4.36 (huggingface/transformers#26572, #27940; "SDPA is used by default for PyTorch v2.1.1
// and greater when an implementation is available"). 4.35.2, or torch 2.1.0, run the eager attention.
TEST(StackFacts, SdpaDefaultStartsAtTransformers436WithTorch211) {
    SoftwareStack s;
    s.transformers = "4.36.0";
    s.torch = "2.1.1";
    EXPECT_TRUE(stack_facts(s).hf_default_attention_is_sdpa);
    s.transformers = "4.35.2";
    EXPECT_FALSE(stack_facts(s).hf_default_attention_is_sdpa);
    s.transformers = "4.36.0";
    s.torch = "2.1.0";
    EXPECT_FALSE(stack_facts(s).hf_default_attention_is_sdpa);
    EXPECT_TRUE(stack_facts(SoftwareStack{}).hf_default_attention_is_sdpa);  // the built-in 5.0 with torch 2.8
}

// The model class decides too: T5PreTrainedModel and GPTJPreTrainedModel set no _supports_sdpa, so
// they run eager on any stack; FalconPreTrainedModel._check_and_enable_sdpa turns SDPA on from torch 2.0
// ("Falcon supported SDPA from PyTorch 2.0"); a Llama follows the stack. The reason names the stack.
TEST(StackFacts, DefaultAttentionFollowsTheModelClass) {
    SoftwareStack s;
    s.transformers = "4.36.2";
    s.torch = "2.1.2";
    StackFacts f = stack_facts(s);
    EXPECT_TRUE(default_attention(s, f, "llama").flash);
    EXPECT_TRUE(default_attention(s, f, "").flash);  // no architecture: the stack's default
    EXPECT_FALSE(default_attention(s, f, "t5").flash);
    EXPECT_FALSE(default_attention(s, f, "gptj").flash);
    EXPECT_FALSE(default_attention(SoftwareStack{}, stack_facts(SoftwareStack{}), "t5").flash);
    s.torch = "2.0.1";
    f = stack_facts(s);
    EXPECT_FALSE(default_attention(s, f, "llama").flash);
    EXPECT_TRUE(default_attention(s, f, "falcon").flash);
    s.transformers = "4.6.1";
    s.torch = "1.8.1";
    f = stack_facts(s);
    const AttentionChoice c = default_attention(s, f, "llama");
    EXPECT_FALSE(c.flash);
    EXPECT_NE(c.why.find("transformers 4.6.1 with torch 1.8.1 has no SDPA default"), std::string::npos) << c.why;
    EXPECT_NE(default_attention(s, f, "t5").why.find("the t5 model class has no SDPA path"), std::string::npos);
}

// A family whose SDPA class zeromem has not checked says so.
TEST(StackFacts, UncheckedFamilySaysItsSdpaPathIsAssumed) {
    const SoftwareStack s;
    const StackFacts f = stack_facts(s);
    EXPECT_EQ(default_attention(s, f, "llama").why.find("assumed"), std::string::npos);
    EXPECT_NE(default_attention(s, f, "bloom").why.find("that the bloom class has an SDPA path is assumed"),
              std::string::npos);
}
