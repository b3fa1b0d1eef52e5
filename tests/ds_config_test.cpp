// Tests of DeepSpeed config loading, schema checks and "auto" resolution.
// Expected values: DeepSpeed v0.19.6 runtime/zero/config.py and
// offload_config.py (code defaults) and transformers integrations/deepspeed.py
// trainer_config_finalize (HF "auto" rules; h=4096 gives reduce_bucket_size
// 16,777,216, stage3_prefetch_bucket_size 15,099,494,
// stage3_param_persistence_threshold 40,960); user cases C26-C29.
#include "zeromem/ds_config.h"
#include "zeromem/ds_schema.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

using namespace zeromem;
using nlohmann::json;

namespace {

const std::string kDsDir = std::string(ZEROMEM_SOURCE_DATA_DIR) + "/ds_configs/";

struct Applied {
    ZeroSettings zero;
    TrainingSettings train;
    Provenance prov;
};

Applied run_cfg(const json& cfg, AutoSources autos = {}) {
    Applied a;
    apply_ds_config(cfg, "cfg.json", autos, a.zero, a.train, a.prov);
    return a;
}

AutoSources with_hidden(int64_t h) {
    AutoSources s;
    s.hidden_size = h;
    return s;
}

/// The InputError message of `f`, or a test failure if it does not throw.
template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const InputError& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected InputError";
    return {};
}

std::string apply_error(const json& cfg, AutoSources autos = {}) {
    return error_of([&] { run_cfg(cfg, autos); });
}

#define EXPECT_HAS(haystack, needle) \
    EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

/// Writes `text` to a temporary file and returns its path.
std::string write_temp(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + name;
    std::ofstream(path) << text;
    return path;
}

}  // namespace

// ---------------------------------------------------------------------------
// The seed configs

TEST(DsConfigSeed, Zero3LoadsAndResolvesWithHidden4096) {
    const json cfg = load_ds_config_file(kDsDir + "ds_zero3_config.json");
    const Applied a = run_cfg(cfg, with_hidden(4096));
    EXPECT_EQ(a.zero.stage, 3);
    EXPECT_EQ(a.zero.offload_optimizer, OffloadDevice::cpu);
    EXPECT_EQ(a.zero.offload_param, OffloadDevice::cpu);
    EXPECT_TRUE(a.zero.offload_optimizer_pin_memory);
    EXPECT_TRUE(a.zero.offload_param_pin_memory);
    EXPECT_EQ(a.train.dtype, Dtype::fp16);
    EXPECT_EQ(a.zero.sub_group_size, 1000000000);
    EXPECT_EQ(a.zero.stage3_max_live_parameters, 1000000000);
    EXPECT_EQ(a.zero.stage3_max_reuse_distance, 1000000000);
    EXPECT_TRUE(a.zero.stage3_gather_16bit_weights_on_model_save);
    EXPECT_TRUE(a.zero.overlap_comm_effective());
    // trainer_config_finalize with h=4096: h*h, 0.9*h*h, 10*h.
    EXPECT_EQ(a.zero.reduce_bucket_size, 16777216);
    EXPECT_EQ(a.zero.stage3_prefetch_bucket_size, 15099494);
    EXPECT_EQ(a.zero.stage3_param_persistence_threshold, 40960);
    EXPECT_HAS(a.prov.at("zero_optimization.reduce_bucket_size"), "16777216");
    EXPECT_HAS(a.prov.at("zero_optimization.stage3_prefetch_bucket_size"), "15099494.4");
    EXPECT_EQ(a.prov.at("zero_optimization.sub_group_size"),
              "cfg.json:/zero_optimization/sub_group_size");
    // HF-filled batch values with no flags: 1 x 1 x 1.
    EXPECT_EQ(a.train.micro_batch, 1);
    EXPECT_EQ(a.train.grad_accum, 1);
    ASSERT_TRUE(a.train.train_batch_size.has_value());
    EXPECT_EQ(*a.train.train_batch_size, 1);
    EXPECT_HAS(a.prov.at("train_micro_batch_size_per_gpu"), "pass --micro-batch");
    EXPECT_DOUBLE_EQ(a.train.gradient_clipping, 1.0);
    EXPECT_NO_THROW(check_batch_arithmetic(a.train, 1));
}

TEST(DsConfigSeed, Zero2LoadsAndResolves) {
    const json cfg = load_ds_config_file(kDsDir + "ds_zero2_config.json");
    AutoSources autos = with_hidden(4096);
    autos.micro_batch = 4;
    autos.grad_accum = 2;
    autos.world_size = 8;
    autos.dtype = Dtype::fp16;
    const Applied a = run_cfg(cfg, autos);
    EXPECT_EQ(a.zero.stage, 2);
    EXPECT_EQ(a.zero.offload_optimizer, OffloadDevice::cpu);
    EXPECT_EQ(a.zero.offload_param, OffloadDevice::none);
    EXPECT_TRUE(a.zero.overlap_comm_effective());
    EXPECT_EQ(a.zero.allgather_bucket_size, 500000000);
    EXPECT_EQ(a.zero.reduce_bucket_size, 500000000);
    EXPECT_TRUE(a.zero.contiguous_gradients);
    EXPECT_TRUE(a.zero.reduce_scatter);
    EXPECT_EQ(a.train.dtype, Dtype::fp16);  // fp16.enabled "auto" <- --dtype fp16
    EXPECT_EQ(a.train.micro_batch, 4);
    EXPECT_EQ(a.train.grad_accum, 2);
    EXPECT_EQ(*a.train.train_batch_size, 64);  // 8 x 4 x 2
    EXPECT_NO_THROW(check_batch_arithmetic(a.train, 8));
}

TEST(DsConfigSeed, Zero2FpAutoWithoutDtypeIsFp32) {
    // HF defaults fp16=False, bf16=False: fp16.enabled "auto" -> false, and
    // with neither enabled DeepSpeed trains in fp32 (engine.get_data_types).
    const Applied a = run_cfg(load_ds_config_file(kDsDir + "ds_zero2_config.json"));
    EXPECT_EQ(a.train.dtype, Dtype::fp32);
    EXPECT_HAS(a.prov.at("fp16.enabled"), "false");
}

// ---------------------------------------------------------------------------
// Defaults and values

TEST(DsConfigDefaults, AbsentKeysKeepDeepSpeedDefaults) {
    Applied a2 = run_cfg(json{{"zero_optimization", {{"stage", 2}}}});
    EXPECT_FALSE(a2.zero.overlap_comm.has_value());
    EXPECT_FALSE(a2.zero.overlap_comm_effective());  // validator overlap_comm_valid
    EXPECT_EQ(a2.zero.reduce_bucket_size, 500000000);
    Applied a3 = run_cfg(json{{"zero_optimization", {{"stage", 3}}}});
    EXPECT_TRUE(a3.zero.overlap_comm_effective());
    EXPECT_EQ(a3.zero.stage3_prefetch_bucket_size, 50000000);  // code default 5e7, not the docs' 5e8
    EXPECT_EQ(a3.zero.stage3_param_persistence_threshold, 100000);
    EXPECT_EQ(a3.zero.sub_group_size, 1000000000);
    EXPECT_EQ(a3.train.dtype, Dtype::fp32);
}

TEST(DsConfigValues, PrecisionAndDtypes) {
    Applied a = run_cfg(json::parse(R"({"bf16": {"enabled": true},
        "data_types": {"grad_accum_dtype": "fp32"}, "communication_data_type": "FP16"})"));
    EXPECT_EQ(a.train.dtype, Dtype::bf16);
    EXPECT_EQ(a.train.grad_accum_dtype, Dtype::fp32);
    EXPECT_EQ(a.train.communication_dtype, Dtype::fp16);
    EXPECT_HAS(apply_error(json::parse(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})")),
               "both enabled");
}

TEST(DsConfigValues, AliasesAndDeprecatedNames) {
    Applied a = run_cfg(json::parse(R"({"zero_optimization": {"stage": 3,
        "prefetch_bucket_size": 1000, "max_live_parameters": 2000,
        "stage3_gather_fp16_weights_on_model_save": true, "cpu_offload": true}})"));
    EXPECT_EQ(a.zero.stage3_prefetch_bucket_size, 1000);
    EXPECT_EQ(a.zero.stage3_max_live_parameters, 2000);
    EXPECT_TRUE(a.zero.stage3_gather_16bit_weights_on_model_save);
    EXPECT_EQ(a.zero.offload_optimizer, OffloadDevice::cpu);
    EXPECT_HAS(apply_error(json::parse(R"({"zero_optimization": {"stage": 3,
        "prefetch_bucket_size": 1, "stage3_prefetch_bucket_size": 2}})")),
               "/zero_optimization/prefetch_bucket_size");
}

TEST(DsConfigValues, OptimizerMapping) {
    EXPECT_EQ(run_cfg(json::parse(R"({"optimizer": {"type": "AdamW"}})")).train.optimizer, Optimizer::adamw);
    EXPECT_EQ(run_cfg(json::parse(R"({"optimizer": {"type": "Adam"}})")).train.optimizer, Optimizer::adam);
    EXPECT_EQ(run_cfg(json::parse(R"({"optimizer": {"type": "SGD", "params": {"momentum": 0.9}}})"))
                  .train.optimizer, Optimizer::sgd);
    Applied lamb = run_cfg(json::parse(R"({"optimizer": {"type": "OneBitLamb"}})"));
    EXPECT_EQ(lamb.train.optimizer, Optimizer::adam);
    EXPECT_HAS(lamb.prov.at("optimizer.type"), "counted like Adam");
}

TEST(DsConfigValues, OptimizerAndSchedulerAutoParams) {
    Applied a = run_cfg(json::parse(R"({
        "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                                   "weight_decay": "auto"}},
        "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto",
            "warmup_max_lr": "auto", "warmup_num_steps": "auto", "total_num_steps": "auto"}}})"));
    EXPECT_HAS(a.prov.at("optimizer.params.lr"), "5e-05");
    EXPECT_HAS(a.prov.at("optimizer.params.betas"), "0.999");
    EXPECT_HAS(a.prov.at("scheduler.params.total_num_steps"), "train time");
    EXPECT_HAS(a.prov.at("scheduler.params.warmup_num_steps"), "train time");
    // A parameter HF never fills.
    EXPECT_HAS(apply_error(json::parse(R"({"optimizer": {"type": "AdamW", "params": {"foo": "auto"}}})")),
               "/optimizer/params/foo");
}

TEST(DsConfigValues, Stage3AutoKeysLeftAloneBelowStage3) {
    // HF fills the two stage3_* keys only for ZeRO-3; DeepSpeed then drops
    // "auto" and keeps its default.
    Applied a = run_cfg(json::parse(R"({"zero_optimization": {"stage": 2,
        "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto"}})"), with_hidden(1024));
    EXPECT_EQ(a.zero.reduce_bucket_size, 1024 * 1024);
    EXPECT_EQ(a.zero.stage3_prefetch_bucket_size, 50000000);
}

TEST(DsConfigValues, HiddenSize3584MatchesC26) {
    // C26: 0.9 x 3584^2 = 11560550.4 -> 11560550.
    Applied a = run_cfg(json::parse(R"({"zero_optimization": {"stage": 3,
        "stage3_prefetch_bucket_size": "auto"}})"), with_hidden(3584));
    EXPECT_EQ(a.zero.stage3_prefetch_bucket_size, 11560550);
}

TEST(DsConfigValues, ContiguousGradientsForcedWithStage2CpuOffload) {
    Applied a = run_cfg(json::parse(R"({"zero_optimization": {"stage": 2, "contiguous_gradients": false,
        "offload_optimizer": {"device": "cpu"}}})"));
    EXPECT_TRUE(a.zero.contiguous_gradients);
    EXPECT_HAS(a.prov.at("zero_optimization.contiguous_gradients"), "forced");
}

TEST(DsConfigValues, CommentsAllowed) {
    const std::string p = write_temp("zeromem_comments.json",
                                     "{\n  // ZeRO-1\n  \"zero_optimization\": {\"stage\": 1}\n}\n");
    EXPECT_EQ(run_cfg(load_ds_config_file(p)).zero.stage, 1);
    std::remove(p.c_str());
}

// zeromem rule: command-line flags override the file's explicit values, and
// the override is recorded for --explain.
TEST(DsConfigValues, FlagOverridesFileValue) {
    AutoSources autos;
    autos.micro_batch = 8;
    ZeroSettings zero;
    TrainingSettings train;
    Provenance prov;
    apply_ds_config(json{{"train_micro_batch_size_per_gpu", 1}}, "cfg.json", autos, zero, train, prov);
    EXPECT_EQ(train.micro_batch, 8);
    EXPECT_HAS(prov.at("train_micro_batch_size_per_gpu"), "overrides the file's 1");
}

// ---------------------------------------------------------------------------
// Bad input: every message names the file and the key path.

TEST(DsConfigErrors, UnknownKeyWithSuggestion) {
    const std::string msg = apply_error(json::parse(R"({"zero_optimisation": {"stage": 2}})"));
    EXPECT_HAS(msg, "cfg.json: /zero_optimisation: unknown key");
    EXPECT_HAS(msg, "did you mean 'zero_optimization'");
}

// runtime/config.py DeepSpeedConfig reads the top-level keys it knows and ignores the rest: LLaMA-Factory's
// examples/deepspeed/ds_z3_config.json carries "comms_config", which DeepSpeed never reads. Accepted (the
// faces warn); a near spelling of a real key stays refused above.
TEST(DsConfigErrors, UnknownTopLevelKeyFarFromAnyIsIgnoredAsDeepSpeedDoes) {
    TrainingSettings train;
    ZeroSettings zero;
    Provenance prov;
    AutoSources autos;
    apply_ds_config(json::parse(R"({"comms_config": {"verbose": false}, "zero_optimization": {"stage": 2}})"),
                    "cfg.json", autos, zero, train, prov);
    EXPECT_EQ(zero.stage, 2);
    const auto problems = validate_ds_schema(json::parse(R"({"comms_config": {"verbose": false}})"), Launcher::deepspeed);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].kind, SchemaProblem::Kind::ignored_key);
    EXPECT_EQ(problems[0].pointer, "/comms_config");
    EXPECT_NE(apply_error(json::parse(R"({"zero_optimization": {"stage": 2, "comms_config": 1}})")).find(
                  "/zero_optimization/comms_config: unknown key"),
              std::string::npos);  // inside a block: pydantic's extra="forbid" refuses it
}

TEST(DsConfigErrors, MisspelledPersistenceThresholdC29) {
    const std::string msg = apply_error(json::parse(R"({"zero_optimization": {"stage": 3,
        "stage3_param_persitance_threshold": 1e4}})"));
    EXPECT_HAS(msg, "cfg.json: /zero_optimization/stage3_param_persitance_threshold: unknown key");
    EXPECT_HAS(msg, "(did you mean 'stage3_param_persistence_threshold'?)");
}

TEST(DsConfigErrors, AioMisplacedC29) {
    const std::string msg = apply_error(json::parse(R"({"zero_optimization": {"stage": 3,
        "aio": {"block_size": 1048576}}})"));
    EXPECT_HAS(msg, "/zero_optimization/aio");
    EXPECT_HAS(msg, "belongs at the top level");
    // And the reverse: a zero_optimization key at the top level.
    EXPECT_HAS(apply_error(json{{"stage3_max_live_parameters", 1}}), "belongs under /zero_optimization");
}

TEST(DsConfigErrors, StringWhereIntExpected) {
    const std::string msg = apply_error(json::parse(R"({"zero_optimization": {"reduce_bucket_size": "5e8"}})"));
    EXPECT_HAS(msg, "/zero_optimization/reduce_bucket_size: must be an integer");
}

TEST(DsConfigErrors, BoolGivenAsString) {
    const std::string msg = apply_error(json::parse(R"({"zero_optimization": {"overlap_comm": "true"}})"));
    EXPECT_HAS(msg, "/zero_optimization/overlap_comm: must be a JSON boolean");
}

TEST(DsConfigErrors, FractionalIntC26) {
    const std::string msg = apply_error(json::parse(R"({"zero_optimization": {"stage": 3,
        "stage3_prefetch_bucket_size": 15099494.4}})"));
    EXPECT_HAS(msg, "cfg.json: /zero_optimization/stage3_prefetch_bucket_size: must be an integer, "
                    "got 15099494.4 (DeepSpeed >= 0.15 rejects fractional values)");
    // 5e8 is integral and fine.
    EXPECT_EQ(run_cfg(json::parse(R"({"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 5e8}})"))
                  .zero.stage3_prefetch_bucket_size, 500000000);
}

TEST(DsConfigErrors, NegativeBucket) {
    EXPECT_HAS(apply_error(json::parse(R"({"zero_optimization": {"allgather_bucket_size": -1}})")),
               "/zero_optimization/allgather_bucket_size: must be >= 0");
}

TEST(DsConfigErrors, ReduceBucketSizeZeroC29) {
    const std::string msg = apply_error(json::parse(R"({"zero_optimization": {"reduce_bucket_size": 0}})"));
    EXPECT_HAS(msg, "/zero_optimization/reduce_bucket_size: must be > 0");
    EXPECT_HAS(msg, "ZeroDivisionError");
}

TEST(DsConfigErrors, StageOutOfRange) {
    EXPECT_HAS(apply_error(json::parse(R"({"zero_optimization": {"stage": 4}})")),
               "/zero_optimization/stage: must be 0, 1, 2 or 3, got 4");
}

TEST(DsConfigErrors, OffloadDeviceAndStage) {
    EXPECT_HAS(apply_error(json::parse(R"({"zero_optimization": {"stage": 3,
        "offload_param": {"device": "gpu"}}})")),
               "/zero_optimization/offload_param/device: must be \"none\", \"cpu\" or \"nvme\"");
    EXPECT_HAS(apply_error(json::parse(R"({"zero_optimization": {"stage": 2,
        "offload_param": {"device": "cpu"}}})")),
               "/zero_optimization/offload_param/device: is cpu but DeepSpeed offloads parameters only in "
               "ZeRO stage 3");
    EXPECT_HAS(apply_error(json::parse(R"({"zero_optimization": {"stage": 2,
        "offload_optimizer": {"device": "cpu", "ratio": 0.5}}})")),
               "/zero_optimization/offload_optimizer/ratio");
}

TEST(DsConfigErrors, AutoWithoutHiddenSize) {
    const std::string msg = apply_error(json::parse(R"({"zero_optimization": {"stage": 3,
        "stage3_param_persistence_threshold": "auto"}})"));
    EXPECT_HAS(msg, "cfg.json: /zero_optimization/stage3_param_persistence_threshold: is \"auto\" but the "
                    "hidden size is unknown: give --model or --hf-config, or set a number");
    // The seed zero3 config needs it too.
    EXPECT_HAS(error_of([] { run_cfg(load_ds_config_file(kDsDir + "ds_zero3_config.json")); }),
               "hidden size is unknown");
}

TEST(DsConfigErrors, AutoInKeyHfNeverFills) {
    EXPECT_HAS(apply_error(json::parse(R"({"zero_optimization": {"stage": "auto"}})")),
               "/zero_optimization/stage: \"auto\" is not a value the Hugging Face Trainer fills");
    EXPECT_HAS(apply_error(json::parse(R"({"zero_optimization": {"stage": 3, "sub_group_size": "auto"}})")),
               "/zero_optimization/sub_group_size");
    EXPECT_HAS(apply_error(json::parse(R"({"zero_optimization": {"stage": 3,
        "offload_param": {"device": "auto"}}})")),
               "/zero_optimization/offload_param/device");
}

TEST(DsConfigErrors, BatchMismatchC27) {
    const Applied a = run_cfg(json::parse(R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
        "gradient_accumulation_steps": 1})"));
    const std::string msg = error_of([&] { check_batch_arithmetic(a.train, 1); });
    EXPECT_HAS(msg, "train_batch_size (8) != train_micro_batch_size_per_gpu (2) x "
                    "gradient_accumulation_steps (1) x data-parallel GPUs (1) = 2; set train_batch_size to 2");
    EXPECT_NO_THROW(check_batch_arithmetic(a.train, 4));  // 2 x 1 x 4 = 8
}

TEST(DsConfigErrors, DuplicateKey) {
    const std::string p = write_temp("zeromem_dup.json",
                                     R"({"zero_optimization": {"stage": 2, "stage": 3}})");
    const std::string msg = error_of([&] { load_ds_config_file(p); });
    EXPECT_HAS(msg, p + ": /zero_optimization/stage: duplicate key");
    std::remove(p.c_str());
}

TEST(DsConfigErrors, MalformedJsonHasLineAndColumn) {
    const std::string p = write_temp("zeromem_bad.json", "{\n  \"fp16\": {\"enabled\": true,}\n}\n");
    const std::string msg = error_of([&] { load_ds_config_file(p); });
    EXPECT_HAS(msg, p + ": malformed JSON at line 2, column 28: ");  // the stray }
    std::remove(p.c_str());
}

TEST(DsConfigErrors, MissingFile) {
    const std::string p = ::testing::TempDir() + "zeromem_no_such_config.json";
    EXPECT_HAS(error_of([&] { load_ds_config_file(p); }), p);
}

// ---------------------------------------------------------------------------
// Batch completion (runtime/config.py _set_batch_related_parameters)

TEST(DsConfigBatch, CompletesMissingValues) {
    {
        Applied a = run_cfg(json{{"train_batch_size", 32}, {"train_micro_batch_size_per_gpu", 2}});
        complete_batch_settings(a.train, 4, a.prov);
        EXPECT_EQ(a.train.grad_accum, 4);  // 32 / (2 x 4)
    }
    {
        Applied a = run_cfg(json{{"train_batch_size", 32}});
        complete_batch_settings(a.train, 8, a.prov);
        EXPECT_EQ(a.train.grad_accum, 1);
        EXPECT_EQ(a.train.micro_batch, 4);
    }
    {
        Applied a = run_cfg(json{{"train_micro_batch_size_per_gpu", 3}});
        complete_batch_settings(a.train, 2, a.prov);
        EXPECT_EQ(*a.train.train_batch_size, 6);
    }
}

TEST(DsConfigBatch, RejectsIndivisibleAndMissing) {
    Applied a = run_cfg(json{{"train_batch_size", 30}, {"train_micro_batch_size_per_gpu", 4}});
    EXPECT_HAS(error_of([&] { complete_batch_settings(a.train, 2, a.prov); }),
               "train_batch_size (30) is not divisible");
    Applied b = run_cfg(json{{"gradient_accumulation_steps", 2}});
    EXPECT_HAS(error_of([&] { complete_batch_settings(b.train, 1, b.prov); }),
               "train_micro_batch_size_per_gpu");
}

// The keys that decide which optimizer runs and whether
// DeepSpeed accepts it (engine.py _configure_optimizer,
// _configure_basic_optimizer; DeepSpeed config keys as DeepSpeed spells them).
TEST(DsConfigOptimizer, BuilderTorchAdamAndOffloadKeys) {
    // No "optimizer" block: the client builds the optimizer.
    Applied a = run_cfg(json::parse(R"({"zero_optimization": {"stage": 2}})"));
    ASSERT_TRUE(a.train.optimizer_builder.has_value());
    EXPECT_EQ(*a.train.optimizer_builder, OptimizerBuilder::client);
    EXPECT_FALSE(a.train.fused_optimizer);
    EXPECT_TRUE(a.zero.zero_force_ds_cpu_optimizer);   // DeepSpeed default
    EXPECT_FALSE(a.zero.zero_allow_untested_optimizer);  // DeepSpeed default
    // A block: DeepSpeed builds FusedAdam; with torch_adam, torch Adam(W).
    a = run_cfg(json::parse(R"({"optimizer": {"type": "AdamW", "params": {"lr": 1e-5}}})"));
    EXPECT_EQ(*a.train.optimizer_builder, OptimizerBuilder::deepspeed);
    EXPECT_TRUE(a.train.fused_optimizer);
    EXPECT_FALSE(a.train.torch_adam);
    a = run_cfg(json::parse(R"({"optimizer": {"type": "AdamW", "params": {"torch_adam": true, "adam_w_mode": true}}})"));
    EXPECT_TRUE(a.train.torch_adam);
    EXPECT_FALSE(a.train.fused_optimizer);
    a = run_cfg(json::parse(R"({"zero_force_ds_cpu_optimizer": false, "zero_allow_untested_optimizer": true})"));
    EXPECT_FALSE(a.zero.zero_force_ds_cpu_optimizer);
    EXPECT_TRUE(a.zero.zero_allow_untested_optimizer);
    // Wrong type: one line naming the key.
    EXPECT_THROW(run_cfg(json::parse(R"({"optimizer": {"type": "AdamW", "params": {"torch_adam": "yes"}}})")),
                 InputError);
}

// `check` prints FILE:LINE beside each finding: the line of the key in the
// text, comments and nested arrays included; a key not written takes its
// block's line.
TEST(DsConfigLines, EveryKeyHasItsLineAndAMissingKeyItsBlocks) {
    const std::string text = R"({
  // a comment with "quotes", a { brace and a "key": 1
  "zero_optimization": {   /* the block */
    "stage": 3,
    "offload_param": {"device": "cpu"}
  },
  "optimizer": {"params": {"betas": [0.9,
     0.999]}},
  "we/ird~key": "a \"quoted\" value"
})";
    ASSERT_NO_THROW(parse_ds_config_text(text, "lines.json"));
    const std::map<std::string, int> lines = ds_config_key_lines(text);
    const std::map<std::string, int> expected = {
        {"/zero_optimization", 3}, {"/zero_optimization/stage", 4}, {"/zero_optimization/offload_param", 5},
        {"/zero_optimization/offload_param/device", 5}, {"/optimizer", 7}, {"/optimizer/params", 7},
        {"/optimizer/params/betas", 7}, {"/optimizer/params/betas/0", 7}, {"/optimizer/params/betas/1", 8},
        {"/we~1ird~0key", 9}};
    EXPECT_EQ(lines, expected);
    EXPECT_EQ(ds_config_line_of(lines, "/zero_optimization/overlap_comm"), 3);
    EXPECT_EQ(ds_config_line_of(lines, "/zero_optimization/offload_param/pin_memory"), 5);
    EXPECT_EQ(ds_config_line_of(lines, "/gradient_clipping"), 0);
    EXPECT_EQ(ds_config_line_of(lines, "/"), 0);
    // Malformed text: the keys before the error, and no hang.
    EXPECT_EQ(ds_config_key_lines("{\n\"a\": 1,\n\"b\": [1, 2").at("/b"), 3);
    EXPECT_TRUE(ds_config_key_lines("").empty());
}
