// --from FILE: LLaMA-Factory, accelerate and TrainingArguments files as
// their projects publish them (tests/data/launch/README.md) read into the
// request. Expected values are the files' own keys and the launchers'
// documented defaults (LLaMA-Factory hparams/*.py, transformers
// TrainingArguments), each named where it is asserted.
#include "zeromem/launch_file.h"
#include "zeromem/util.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

using namespace zeromem;

namespace {

const std::string kData = ZEROMEM_SOURCE_DATA_DIR;
const std::string kLaunch = std::string(ZEROMEM_TEST_DATA_DIR) + "/launch";
const std::string kFullSft = kLaunch + "/llamafactory/examples/train_full/llama3_full_sft.yaml";
const std::string kQlora = kLaunch + "/llamafactory/examples/train_qlora/llama3_lora_sft_otfq.yaml";
const std::string kAccelerateDpo = kLaunch + "/llamafactory/examples/deepspeed/deepspeed_zero2_dpo.yaml";
const std::string kAccelerateFile = kLaunch + "/accelerate/config_yaml_templates/deepspeed.yaml";
const std::string kTrainerArgs = kLaunch + "/trainer/training_args.json";
const std::string kGrpoArgs = kLaunch + "/trainer/grpo_training_args.json";

// No Hugging Face cache: a Hub id is matched to a preset, whatever this machine has downloaded.
class LaunchFileTest : public ::testing::Test {
protected:
    void SetUp() override { setenv("HF_HUB_CACHE", "/nonexistent/zeromem-test-hub-cache", 1); }
};

std::string error_of(const std::string& text, const std::string& name = "train.yaml") {
    try {
        merge_launch_file(Request{}, parse_launch_file(text, kLaunch + "/" + name, kData));
    } catch (const InputError& e) {
        return e.what();
    }
    return "(no error)";
}

Resolved resolved_from(const std::string& path, Request req = {}) {
    req.from = path;
    if (!req.gpus) req.gpus = 8;
    return resolve_request(req, kData);
}

}  // namespace

TEST_F(LaunchFileTest, LlamaFactoryFullSftReadsItsKeysAndDefaults) {
    const LaunchFile f = read_launch_file(kFullSft, kData);
    EXPECT_EQ(f.trail.kind, "LLaMA-Factory training YAML");
    // model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct, not cached: the preset of its base model.
    ASSERT_TRUE(f.values.model);
    EXPECT_EQ(*f.values.model, "llama-3-8b");
    EXPECT_EQ(f.values.micro_batch, std::optional<int64_t>(1));  // line 27
    EXPECT_EQ(f.values.grad_accum, std::optional<int64_t>(2));   // line 28
    EXPECT_EQ(f.values.seq_len, std::optional<int64_t>(2048));   // cutoff_len, line 14
    EXPECT_EQ(f.values.dtype, std::optional<std::string>("bf16"));
    // model_args.py disable_gradient_checkpointing default False: LLaMA-Factory checkpoints.
    EXPECT_EQ(f.values.checkpointing, std::optional<std::string>("full"));
    EXPECT_FALSE(f.values.lora_rank);  // finetuning_type: full
    ASSERT_TRUE(f.values.ds_config);   // examples/deepspeed/ds_z3_config.json, from the repository root above the file
    EXPECT_EQ(*f.values.ds_config, kLaunch + "/llamafactory/examples/deepspeed/ds_z3_config.json");
    EXPECT_EQ(f.trail.sources.at("--micro-batch"), kFullSft + " line 27: per_device_train_batch_size");
    EXPECT_EQ(f.trail.sources.at("--ds-config"), kFullSft + " line 9: deepspeed");
    ASSERT_EQ(f.trail.warnings.size(), 1u);  // the base-model match is said aloud
    EXPECT_NE(f.trail.warnings[0].find("llama-3-8b (meta-llama/Meta-Llama-3-8B, its base model"), std::string::npos)
        << f.trail.warnings[0];
}

TEST_F(LaunchFileTest, LlamaFactoryResolvesThroughItsDeepSpeedConfig) {
    const Resolved r = resolved_from(kFullSft);
    EXPECT_EQ(r.input.zero.stage, 3);  // ds_z3_config.json "stage": 3
    EXPECT_EQ(r.input.train.micro_batch, 1);
    EXPECT_EQ(r.input.train.grad_accum, 2);
    EXPECT_EQ(r.input.train.seq_len, 2048);
    EXPECT_EQ(r.input.train.dtype, Dtype::bf16);  // bf16.enabled "auto" <- bf16: true
    EXPECT_EQ(r.input.train.checkpointing, Checkpointing::full);
    EXPECT_EQ(r.provenance.at("train_micro_batch_size_per_gpu"),
              kFullSft + " line 27: per_device_train_batch_size (LLaMA-Factory training YAML, --from)");
    EXPECT_EQ(r.provenance.at("seq_len"), kFullSft + " line 14: cutoff_len (LLaMA-Factory training YAML, --from)");
}

TEST_F(LaunchFileTest, CommandLineWinsWithANote) {
    Request req;
    req.micro_batch = 4;
    const Resolved r = resolved_from(kFullSft, req);
    EXPECT_EQ(r.input.train.micro_batch, 4);
    EXPECT_EQ(r.provenance.at("train_micro_batch_size_per_gpu"), "--micro-batch");
    bool noted = false;
    for (const auto& n : r.notes)
        noted |= n == "--micro-batch 4 replaces " + kFullSft + " line 27: per_device_train_batch_size (1)";
    EXPECT_TRUE(noted);
}

TEST_F(LaunchFileTest, QloraOnTheFlyQuantization) {
    const LaunchFile f = read_launch_file(kQlora, kData);
    EXPECT_EQ(f.values.load_in, std::optional<std::string>("4bit"));  // quantization_bit: 4, bitsandbytes
    // finetuning_type: lora; lora_rank not set: finetuning_args.py LoraArguments.lora_rank default 8.
    EXPECT_EQ(f.values.lora_rank, std::optional<int64_t>(8));
    EXPECT_EQ(f.values.lora_targets, std::optional<std::string>("q,k,v,o,gate,up,down"));  // lora_target: all
    EXPECT_EQ(f.values.grad_accum, std::optional<int64_t>(8));
    EXPECT_FALSE(f.values.ds_config);
    const Resolved r = resolved_from(kQlora);
    EXPECT_EQ(r.input.zero.stage, 0);  // no deepspeed key: DDP
    EXPECT_EQ(r.input.train.lora_rank, 8);
    EXPECT_EQ(r.input.train.lora_targets, "q,k,v,o,gate,up,down");
    EXPECT_EQ(r.input.train.load_in_bits, 4);
}

TEST_F(LaunchFileTest, AccelerateConfigBlock) {
    const LaunchFile f = read_launch_file(kAccelerateDpo, kData);
    EXPECT_EQ(f.trail.kind, "accelerate config");
    EXPECT_EQ(f.values.stage, std::optional<int64_t>(2));  // deepspeed_config.zero_stage, line 6
    EXPECT_EQ(f.values.offload_optimizer, std::optional<std::string>("none"));
    EXPECT_EQ(f.values.zero_init, std::optional<bool>(false));
    EXPECT_EQ(f.values.dtype, std::optional<std::string>("bf16"));  // mixed_precision: 'bf16'
    EXPECT_FALSE(f.values.gpus);  // num_processes: auto
    EXPECT_EQ(f.trail.sources.at("--stage"), kAccelerateDpo + " line 6: zero_stage");
}

TEST_F(LaunchFileTest, AccelerateNamesItsDeepSpeedConfigFile) {
    const LaunchFile f = read_launch_file(kAccelerateFile, kData);
    EXPECT_EQ(f.values.gpus, std::optional<int64_t>(2));  // num_processes: 2, line 12
    ASSERT_TRUE(f.values.ds_config);  // ../deepspeed_config_templates/zero_stage1_config.json from the file's folder
    EXPECT_EQ(*f.values.ds_config, kLaunch + "/accelerate/deepspeed_config_templates/zero_stage1_config.json");
    Request req;
    req.model = "llama-2-7b";
    req.from = kAccelerateFile;
    const Resolved r = resolve_request(req, kData);
    EXPECT_EQ(r.input.zero.stage, 1);  // zero_stage1_config.json
    EXPECT_EQ(r.input.cluster.gpus, 2);
    EXPECT_EQ(r.input.train.dtype, Dtype::fp16);  // "fp16": {"enabled": true}
}

TEST_F(LaunchFileTest, AccelerateRefusesStageBesideItsConfigFile) {
    // accelerate utils/dataclasses.py DeepSpeedPlugin._deepspeed_config_checks raises ValueError on these.
    const std::string e = error_of("distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: "
                                   "accelerate/deepspeed_config_templates/zero_stage1_config.json\n  zero_stage: 3\n",
                                   "acc.yaml");
    EXPECT_NE(e.find("acc.yaml line 4: zero_stage: beside deepspeed_config_file accelerate refuses it"),
              std::string::npos) << e;
    EXPECT_NE(error_of("distributed_type: FSDP\nnum_processes: 8\n", "acc.yaml").find(
                  "acc.yaml line 1: distributed_type: 'FSDP' is not modelled"),
              std::string::npos);
}

TEST_F(LaunchFileTest, TrainingArgumentsJson) {
    const LaunchFile f = read_launch_file(kTrainerArgs, kData);
    EXPECT_EQ(f.trail.kind, "TrainingArguments JSON");
    EXPECT_EQ(f.values.micro_batch, std::optional<int64_t>(6));
    EXPECT_EQ(f.values.grad_accum, std::optional<int64_t>(2));
    EXPECT_EQ(f.values.dtype, std::optional<std::string>("fp16"));
    EXPECT_EQ(f.values.optimizer, std::optional<std::string>("paged_adamw_8bit"));
    EXPECT_EQ(f.values.checkpointing, std::optional<std::string>("none"));  // "gradient_checkpointing": false
    EXPECT_EQ(f.trail.sources.at("--optimizer"), kTrainerArgs + " line 96: optim");
    EXPECT_TRUE(f.trail.warnings.empty()) << f.trail.warnings.front();  // every key known
}

TEST_F(LaunchFileTest, GrpoConfigIsRefused) {
    try {
        read_launch_file(kGrpoArgs, kData);
        FAIL() << "a GRPOConfig was read";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("num_generations: a TRL GRPOConfig"), std::string::npos) << e.what();
    }
}

TEST_F(LaunchFileTest, BadValuesNameTheFileLineAndKey) {
    const std::string head = "model_name_or_path: meta-llama/Llama-2-7b-hf\n";
    EXPECT_EQ(error_of(head + "per_device_train_batch_size: abc\n"),
              "--from: " + kLaunch + "/train.yaml line 2: per_device_train_batch_size: must be a positive integer, "
              "got 'abc'");
    EXPECT_EQ(error_of(head + "cutoff_len: -5\n"),
              "--from: " + kLaunch + "/train.yaml line 2: cutoff_len: must be a positive integer, got '-5'");
    EXPECT_NE(error_of(head + "use_dora: true\n").find("line 2: use_dora: true is not modelled"), std::string::npos);
    EXPECT_NE(error_of(head + "finetuning_type: freeze\n").find("line 2: finetuning_type: 'freeze' is not modelled"),
              std::string::npos);
    EXPECT_NE(error_of(head + "deepspeed: nowhere/ds.json\n").find("line 2: deepspeed: 'nowhere/ds.json' is not found"),
              std::string::npos);
    EXPECT_NE(error_of(head + "bf16: true\nfp16: true\n").find("line 3: fp16: bf16 and fp16 are both true"),
              std::string::npos);
    EXPECT_NE(error_of(head + "lora_target: query_key_value\n").find("'query_key_value' is not a projection"),
              std::string::npos);
    EXPECT_NE(error_of(head + "quantization_bit: 4\nquantization_method: hqq\n").find("line 3: quantization_method"),
              std::string::npos);
    EXPECT_NE(error_of("model_name_or_path: nobody/no-such-model\n").find("no preset has its Hub id"),
              std::string::npos);
    EXPECT_NE(error_of(head + "cutoff_len: 10\ncutoff_len: 20\n").find("line 3: cutoff_len: given twice"),
              std::string::npos);
}

TEST_F(LaunchFileTest, MalformedAndForeignFiles) {
    EXPECT_NE(error_of("model_name_or_path: [unclosed\n").find("train.yaml line"), std::string::npos);
    EXPECT_NE(error_of("- a\n- b\n").find("not a YAML mapping"), std::string::npos);
    EXPECT_NE(error_of("{\"per_device_train_batch_size\": 2,}", "args.json").find("args.json"), std::string::npos);
    EXPECT_NE(error_of("learning_rate: 1e-5\n").find("not a LLaMA-Factory training file, an accelerate config or a "
                                                     "TrainingArguments JSON"),
              std::string::npos);
    EXPECT_NE(error_of("").find("not a YAML mapping"), std::string::npos);
}

TEST_F(LaunchFileTest, UnknownKeysWarnAndHarmlessOnesAreNotes) {
    const LaunchFile f = parse_launch_file("model_name_or_path: meta-llama/Llama-2-7b-hf\nlearning_rate: 1e-5\n"
                                           "mystery_knob: 3\n", kLaunch + "/train.yaml", kData);
    EXPECT_EQ(f.values.model, std::optional<std::string>("llama-2-7b"));  // the preset's own Hub id: a note only
    ASSERT_EQ(f.trail.warnings.size(), 1u);
    EXPECT_NE(f.trail.warnings[0].find("train.yaml: mystery_knob (line 3): not a key zeromem knows"), std::string::npos)
        << f.trail.warnings[0];
    bool lr_noted = false;
    for (const auto& n : f.trail.notes) lr_noted |= n.find("line 2: learning_rate: no effect on memory") != std::string::npos;
    EXPECT_TRUE(lr_noted);
    // TrainingArguments' default per_device_train_batch_size 8 (training_args.py) when the file leaves it out.
    EXPECT_EQ(f.values.micro_batch, std::optional<int64_t>(8));
}

// What a launcher's YAML reader (PyYAML safe_load) would read otherwise, or refuse, is refused here with its
// line: several documents, merge keys, explicit tags, a quote left open, octal-looking integers, nested lists.
TEST_F(LaunchFileTest, YamlThePythonReaderWouldReadOtherwiseIsRefused) {
    const std::string head = "model_name_or_path: meta-llama/Llama-2-7b-hf\n";
    EXPECT_NE(error_of(head + "cutoff_len: 512\n---\ncutoff_len: 4096\n").find("line 3: a second YAML document"),
              std::string::npos);
    EXPECT_EQ(error_of("---\n" + head).find("YAML document"), std::string::npos);  // a marker before the one document
    EXPECT_NE(error_of(head + "d: &d {cutoff_len: 512}\n<<: *d\n").find("line 3: <<: YAML merge keys are not read"),
              std::string::npos);
    EXPECT_NE(error_of(head + "cutoff_len: !python/object:os.system 1\n").find("line 2: cutoff_len: the YAML tag"),
              std::string::npos);
    EXPECT_NE(error_of(head + "template: \"llama3\ncutoff_len: 512\n").find("line 2: template: a quoted value runs over"),
              std::string::npos);
    EXPECT_NE(error_of(head + "per_device_train_batch_size: 010\n").find("leading zero, which PyYAML reads as an octal"),
              std::string::npos);
    EXPECT_NE(error_of(head + "lora_target: [q_proj, [v_proj]]\n").find("a list of lists or mappings"),
              std::string::npos);
    EXPECT_NE(error_of(head + "cutoff_len: 99999999999999999999\n").find("'99999999999999999999' is too large"),
              std::string::npos);
    // A flow mapping in a .yaml file is YAML, not malformed JSON.
    const LaunchFile f = parse_launch_file("{model_name_or_path: meta-llama/Llama-2-7b-hf, cutoff_len: 512}",
                                           kLaunch + "/flow.yaml", kData);
    EXPECT_EQ(f.values.seq_len, std::optional<int64_t>(512));
}

// accelerate reads deepspeed_config only under DEEPSPEED, in any key order, and its DeepSpeedPlugin takes
// zero_stage 2 when nothing says otherwise (utils/dataclasses.py: ACCELERATE_DEEPSPEED_ZERO_STAGE default 2).
TEST_F(LaunchFileTest, AccelerateReadsTheBlockOnlyUnderDeepSpeed) {
    const std::string block = "deepspeed_config:\n  zero_stage: 3\n";
    for (const std::string& text : {"distributed_type: MULTI_GPU\nnum_processes: 8\n" + block,
                                    block + "distributed_type: MULTI_GPU\nnum_processes: 8\n"}) {
        const LaunchFile f = parse_launch_file(text, kLaunch + "/acc.yaml", kData);
        EXPECT_EQ(f.values.stage, std::optional<int64_t>(0)) << text;
    }
    const LaunchFile d = parse_launch_file("distributed_type: DEEPSPEED\nnum_processes: 8\n", kLaunch + "/acc.yaml", kData);
    EXPECT_EQ(d.values.stage, std::optional<int64_t>(2));
    // num_processes: auto is a warning: the GPU count is not in the file.
    const LaunchFile a = read_launch_file(kAccelerateDpo, kData);
    bool warned = false;
    for (const auto& w : a.trail.warnings) warned |= w.find("num_processes: auto") != std::string::npos;
    EXPECT_TRUE(warned);
}

TEST_F(LaunchFileTest, LlamaFactoryPreferenceAndCheckpointingSwitches) {
    const std::string head = "model_name_or_path: meta-llama/Llama-2-7b-hf\n";
    // pref_loss counts under stage dpo only, whatever the order.
    for (const std::string& text : {head + "stage: dpo\npref_loss: orpo\n", head + "pref_loss: orpo\nstage: dpo\n"})
        EXPECT_EQ(parse_launch_file(text, kLaunch + "/t.yaml", kData).values.workload, std::optional<std::string>("orpo"));
    EXPECT_FALSE(parse_launch_file(head + "stage: sft\npref_loss: orpo\n", kLaunch + "/t.yaml", kData).values.workload);
    // The HF Trainer enables checkpointing when gradient_checkpointing is true, over LLaMA-Factory's switch.
    EXPECT_EQ(parse_launch_file(head + "disable_gradient_checkpointing: true\ngradient_checkpointing: true\n",
                                kLaunch + "/t.yaml", kData).values.checkpointing,
              std::optional<std::string>("full"));
    EXPECT_EQ(parse_launch_file(head + "disable_gradient_checkpointing: true\n", kLaunch + "/t.yaml", kData)
                  .values.checkpointing,
              std::optional<std::string>("none"));
}

TEST_F(LaunchFileTest, TrainingArgumentsWithoutMixedPrecisionIsFp32) {
    const LaunchFile f = parse_launch_file("{\"per_device_train_batch_size\": 2, \"bf16\": false, \"fp16\": false}",
                                           kLaunch + "/args.json", kData);
    EXPECT_EQ(f.values.dtype, std::optional<std::string>("fp32"));
}

TEST_F(LaunchFileTest, AModelFlagReplacesAModelTheFileCannotName) {
    const LaunchFile f = parse_launch_file("model_name_or_path: acme/nothing-like-this\ncutoff_len: 512\n",
                                           kLaunch + "/t.yaml", kData);
    Request req;
    req.model = "llama-2-7b";
    const Request merged = merge_launch_file(req, f);
    EXPECT_EQ(merged.model, std::optional<std::string>("llama-2-7b"));
    EXPECT_EQ(merged.seq_len, std::optional<int64_t>(512));
    EXPECT_THROW(merge_launch_file(Request{}, f), InputError);  // without the flag the file's model is needed
}

TEST_F(LaunchFileTest, UnknownKeysAreOneWarningAndRefusalsPointAtTheFile) {
    std::string text = "model_name_or_path: meta-llama/Llama-2-7b-hf\n";
    for (int i = 0; i < 50; ++i) text += "knob_" + std::to_string(i) + ": 1\n";
    const LaunchFile f = parse_launch_file(text, kLaunch + "/t.yaml", kData);
    ASSERT_EQ(f.trail.warnings.size(), 1u);
    EXPECT_NE(f.trail.warnings[0].find("knob_0 (line 2), knob_1 (line 3)"), std::string::npos);
    EXPECT_NE(f.trail.warnings[0].find("and 45 more"), std::string::npos);
    // An error a later check raises about a value from the file names the file's line.
    const Request merged = merge_launch_file(Request{}, read_launch_file(kFullSft, kData));
    EXPECT_EQ(launch_file_origin(merged, "--seq-len: 3000000000 is too large"),
              " (--seq-len is " + kFullSft + " line 14: cutoff_len of --from)");
    EXPECT_EQ(launch_file_origin(merged, "--gpus: 3 nodes do not divide 8 GPUs"), "");  // --gpus is not from the file
}

// Booleans as PyYAML (YAML 1.1) resolves them; a misspelled finetuning_type is named as a typo; a value
// glued to its colon gets the hint.
TEST_F(LaunchFileTest, YamlBooleansTyposAndAGluedColon) {
    const std::string head = "model_name_or_path: meta-llama/Llama-2-7b-hf\n";
    EXPECT_EQ(parse_launch_file(head + "bf16: yes\n", kLaunch + "/t.yaml", kData).values.dtype,
              std::optional<std::string>("bf16"));
    EXPECT_EQ(parse_launch_file(head + "disable_gradient_checkpointing: on\n", kLaunch + "/t.yaml", kData)
                  .values.checkpointing,
              std::optional<std::string>("none"));
    EXPECT_NE(error_of(head + "finetuning_type: ful\n").find("'ful' is not a finetuning_type"), std::string::npos);
    EXPECT_NE(error_of(head + "cutoff_len:1024\nbf16: true\n").find("a value needs a space after its colon"),
              std::string::npos)
        << error_of(head + "cutoff_len:1024\nbf16: true\n");
}
