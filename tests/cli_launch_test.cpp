// `--from FILE` on the command line: LLaMA-Factory's own example YAML
// (tests/data/launch/README.md) gives the model, batch, sequence,
// precision and DeepSpeed config of the run; flags override it; a bad file
// is one error line naming the file, line and key, exit 2. Expected values
// are the file's keys and its DeepSpeed config's.
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace {

using cli::Outcome;
using cli::zeromem;

const std::string kNoHubCache = "HF_HUB_CACHE=/nonexistent/zeromem-test-hub ";

Outcome zeromem_offline(const std::string& args) {
    return cli::run_shell(kNoHubCache + "'" + ZEROMEM_BINARY + "' " + args);
}

std::string full_sft() { return cli::testdata("launch/llamafactory/examples/train_full/llama3_full_sft.yaml"); }

}  // namespace

TEST(CliLaunchFile, LlamaFactoryYamlFillsTheRequest) {
    const Outcome r = zeromem_offline("estimate --from " + full_sft() + " --gpus 8 --gpu A100-80GB --format json");
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 4) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["model"]["name"], "llama-3-8b");  // Meta-Llama-3-8B-Instruct's base-model preset
    EXPECT_EQ(j["training"]["train_micro_batch_size_per_gpu"], 1);  // per_device_train_batch_size: 1
    EXPECT_EQ(j["training"]["gradient_accumulation_steps"], 2);
    EXPECT_EQ(j["training"]["seq_len"], 2048);  // cutoff_len: 2048
    EXPECT_EQ(j["training"]["gradient_checkpointing"], "full");  // LLaMA-Factory's default
    EXPECT_EQ(j["zero_optimization"]["stage"], 3);  // examples/deepspeed/ds_z3_config.json
    // The base-model match and the DeepSpeed config's keys DeepSpeed ignores are warnings, on stderr.
    EXPECT_NE(r.err.find("line 2: model_name_or_path: not in the local Hugging Face cache"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("/comms_config, /monitor_config: not DeepSpeed v0.19.6 config keys"), std::string::npos) << r.err;
}

TEST(CliLaunchFile, ExplainNamesTheLineAndAFlagWins) {
    const Outcome r = zeromem_offline("estimate --from " + full_sft() +
                                      " --gpus 8 --gpu A100-80GB --micro-batch 2 --explain --verbose");
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 4) << r.err;
    EXPECT_NE(r.out.find("seq_len: " + std::string(ZEROMEM_TEST_DATA_DIR) +
                         "/launch/llamafactory/examples/train_full/llama3_full_sft.yaml line 14: cutoff_len"),
              std::string::npos) << r.out;
    EXPECT_NE(r.err.find("--micro-batch 2 replaces"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("micro batch 2"), std::string::npos);
}

TEST(CliLaunchFile, PlanAndCompareTakeItToo) {
    const Outcome r = zeromem_offline("compare --from " + full_sft() + " --gpus 8 --gpu A100-80GB --host-memory 1TB");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("llama-3-8b"), std::string::npos);
}

TEST(CliLaunchFile, BadFilesAreOneLineExitTwo) {
    const std::string bad = cli::temp_path("bad_launch.yaml");
    std::ofstream(bad) << "model_name_or_path: meta-llama/Llama-2-7b-hf\nper_device_train_batch_size: many\n";
    cli::expect_error("estimate --from '" + bad + "'",
                      "--from: " + bad + " line 2: per_device_train_batch_size: must be a positive integer, got 'many'");
    EXPECT_EQ(zeromem("estimate --from '" + bad + "'").exit_code, 2);
    cli::expect_error("estimate --from /nonexistent/train.yaml", "--from: /nonexistent/train.yaml");
    cli::expect_error("check " + cli::testdata("launch/llamafactory/examples/deepspeed/ds_z3_config.json") +
                          " --from " + full_sft(),
                      "--from: check reads the DeepSpeed config given as its argument");
    std::remove(bad.c_str());
}
