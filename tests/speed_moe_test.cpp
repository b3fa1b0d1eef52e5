// Tests of the step-time model's mixture-of-experts terms under ZeRO-3 (speed.h
// parameter_tensor_count, fetched_tensor_count, StepTime::per_param).
//
// ZeRO-3 fetches, hooks and releases each module on its own
// (deepspeed/runtime/zero/partitioned_param_coordinator.py fetch_sub_module /
// release_sub_module, parameter_offload.py's pre/post forward hooks): every routed
// expert of a Hugging Face MoE block is a module of its own
// (transformers modeling_mixtral.py MixtralSparseMoeBlock.experts, an nn.ModuleList
// of MixtralBlockSparseTop2MLP with w1, w2, w3; modeling_qwen3_moe.py
// Qwen3MoeSparseMoeBlock.experts of Qwen3MoeMLP with gate_proj, up_proj, down_proj;
// modeling_qwen2_moe.py Qwen2MoeSparseMoeBlock with experts, gate, shared_expert and
// shared_expert_gate), fetched whether or not a token is routed to it.
//
// Expected values: parameter counts published by keras-team/keras-hub presets,
// tensor counts by hand from the modules above, and the measured step times of
// ms-swift's benchmark (tests/data/ds_configs/ms-swift/README.md).
#include "speed_test_helpers.h"
#include "zeromem/ds_config.h"
#include "zeromem/estimate.h"
#include "zeromem/gpu.h"
#include "zeromem/model.h"
#include "zeromem/speed.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

using namespace zeromem;
using namespace zeromem::speed_testing;

namespace {

const std::string kData = ZEROMEM_SOURCE_DATA_DIR;
const std::string kTestData = ZEROMEM_TEST_DATA_DIR;

nlohmann::json read_json(const std::string& path) {
    std::ifstream f(path);
    return nlohmann::json::parse(f);
}

ModelInfo qwen15_moe() { return from_hf(read_json(kTestData + "/hf_configs/qwen1.5-moe-a2.7b.json")); }

// One ms-swift run: its DeepSpeed config applied the way the HF Trainer fills "auto"
// (micro batch 1, the given accumulation, bf16, hidden size for the bucket rules),
// max_length 8192 with packing, swift's default gradient checkpointing, flash_attn.
EstimateInput swift_run(const ModelInfo& m, const std::string& config, int64_t gpus, int64_t nodes, int64_t gas) {
    EstimateInput in;
    in.model = m;
    in.cluster.gpus = gpus;
    in.cluster.nodes = nodes;
    AutoSources autos;
    autos.micro_batch = 1;
    autos.grad_accum = gas;
    autos.dtype = Dtype::bf16;
    autos.world_size = gpus;
    autos.hidden_size = m.arch->hidden_size;
    Provenance prov;
    apply_ds_config(read_json(kTestData + "/ds_configs/ms-swift/" + config), config, autos, in.zero, in.train, prov);
    in.train.seq_len = 8192;
    in.train.checkpointing = Checkpointing::full;
    in.train.flash_attention = true;
    // The benchmark's stack: transformers 4.x (Qwen3-MoE from 4.51), whose MoE blocks are per-expert modules,
    // the layout the architecture is built with here (stack_facts.h packs_moe_experts: from 5.0 they are packed).
    in.stack.transformers = "4.51";
    return in;
}

SpeedHardware a800(const std::string& network = "") {
    return speed_hardware(load_gpu_preset("A800-80GB", kData), Dtype::bf16, "", network, kData);
}

}  // namespace

// The tensors the speed model lists hold every parameter count_params sums, and the
// exact counts keras-hub publishes for the three MoE shapes.
TEST(SpeedMoe, TensorLayoutHoldsThePublishedParameterCounts) {
    EXPECT_EQ(parameter_tensor_numel(*preset("mixtral-8x7b").arch), 46702792704.0);  // mixtral_8_7b_en
    EXPECT_EQ(parameter_tensor_numel(*preset("qwen3-30b-a3b").arch), 30532122624.0);  // qwen3_moe_30b_a3b_en
    EXPECT_EQ(parameter_tensor_numel(*qwen15_moe().arch), 14315784192.0);             // qwen1.5_moe_2.7b_en
    for (const std::string& name : list_model_presets(kData)) {
        const ModelArch a = load_model_preset(name, kData);
        if (a.num_decoder_layers > 0) continue;  // cross-attention is not listed (speed.h)
        EXPECT_EQ(parameter_tensor_numel(a), double(count_params(a).total)) << name;
    }
}

// By hand from the modules. Mixtral-8x7B, 32 layers: q, k, v, o, the router (gate),
// 8 experts x (w1, w2, w3), two RMSNorms = 31 per layer; embed_tokens, the final norm
// and the untied lm_head: 32 x 31 + 3 = 995.
// Qwen3-30B-A3B, 48 layers: q, k, v, o, q_norm, k_norm, the router, 128 x 3 expert
// matrices, two norms = 393 per layer; 48 x 393 + 3 = 18867. Fetched (numel >=
// stage3_param_persistence_threshold 1e5, DeepSpeed's default): the norms
// (128 and 2048 elements) stay resident; the router is 2048 x 128 = 262144; so 389 per
// layer plus embed_tokens and lm_head: 48 x 389 + 2 = 18674.
// Qwen1.5-MoE-A2.7B, 24 layers: q, k, v (with biases: 6), o, the router, 60 x 3, the
// shared expert's 3, shared_expert_gate, two norms = 194; 24 x 194 + 3 = 4659.
TEST(SpeedMoe, EveryExpertIsItsOwnModule) {
    EXPECT_EQ(parameter_tensor_count(preset("mixtral-8x7b")), 995.0);
    EXPECT_EQ(parameter_tensor_count(preset("qwen3-30b-a3b")), 18867.0);
    EXPECT_EQ(fetched_tensor_count(preset("qwen3-30b-a3b"), 100000), 18674.0);
    EXPECT_EQ(parameter_tensor_count(qwen15_moe()), 4659.0);
}

// ZeRO-3's per-module term (speed.cpp comm_terms) per micro step: every fetched
// module's launches (k.stage3_launches_per_tensor x k.stage3_launch_cost, one launch
// more under full checkpointing: the recompute fetches each module again through
// DeepSpeed's pre-forward hook) and every trainable tensor's gradient hook
// (k.zero12_per_tensor_cost), times the accumulation.
TEST(SpeedMoe, Zero3PerModuleTermCountsEveryExpert) {
    const ModelInfo m = preset("qwen3-30b-a3b");
    EstimateInput in = swift_run(m, "zero3.json", 8, 1, 2);
    const SpeedConstants k;
    // "auto" persistence threshold: the HF Trainer's 10 x hidden_size = 20480
    // (integrations/deepspeed.py trainer_config_process); the router (262144) and
    // every matrix is above it, the norms (128, 2048) below: 18674 fetched again.
    ASSERT_EQ(in.zero.stage3_param_persistence_threshold, 20480);
    const StepTime t = step_time(in, a800(), k);
    EXPECT_EQ(t.fetched_modules, 18674.0);
    const double per_micro = 18674.0 * (k.stage3_launches_per_tensor + 1) * k.stage3_launch_cost +
                             18867.0 * k.zero12_per_tensor_cost;
    EXPECT_NEAR(t.per_param, 2.0 * per_micro, 1e-9 * per_micro);
}

// ms-swift's benchmark, Qwen1.5-MoE-A2.7B on 8 x A800-80GB, each option from its own
// config: ZeRO-2 6.02 s/it, ZeRO-3 24.30 s/it (4.0x). The bar: ZeRO-3 at
// least twice ZeRO-2 (a factor the per-module term alone gives or not).
TEST(SpeedMoe, Qwen15MoeZero3IsSlowerThanZero2ByTheMeasuredOrder) {
    const ModelInfo m = qwen15_moe();
    const SpeedHardware h = a800();
    const StepTime z2 = step_time(swift_run(m, "zero2.json", 8, 1, 2), h);
    const StepTime z3 = step_time(swift_run(m, "zero3.json", 8, 1, 2), h);
    EXPECT_GE(z3.total, 2.0 * z2.total) << "ZeRO-2 " << z2.total << " s, ZeRO-3 " << z3.total << " s";
}

// Full checkpointing replays each block's forward in backward, and the replay's
// pre-forward hooks gather every module again: the forward gather's bytes twice
// per micro step (forward and recompute), against once without checkpointing;
// selective recompute replays only the attention core, which holds no parameters.
TEST(SpeedMoe, FullCheckpointingGathersTheParametersAgain) {
    const ModelInfo m = qwen15_moe();
    EstimateInput in = swift_run(m, "zero3.json", 8, 1, 2);
    const SpeedHardware h = a800();
    const double with_recompute = step_time(in, h).comm_bytes_forward;
    in.train.checkpointing = Checkpointing::none;
    const double without = step_time(in, h).comm_bytes_forward;
    in.train.checkpointing = Checkpointing::selective;
    const double selective = step_time(in, h).comm_bytes_forward;
    EXPECT_DOUBLE_EQ(with_recompute, 2.0 * without);
    EXPECT_DOUBLE_EQ(selective, without);
    // ZeRO-3 gathers every parameter's 16-bit copy in forward: 2 bytes x 14315784192
    // per micro step on each rank (the all-gather's output), two micro steps.
    EXPECT_NEAR(without, 2.0 * 2.0 * 14315784192.0, 0.01 * without);
}
