// End-to-end tests of `zeromem check` and of the malformed-input corpus
// (tests/data/malformed/cases.txt). Expected findings follow the HF
// Trainer's "auto" list (transformers integrations/deepspeed.py
// HfTrainerDeepSpeedConfig trainer_config_process / trainer_config_finalize)
// and user cases C26-C29 (tests/data/reference/user_cases.json).
#include "cli_runner.h"

#include <fstream>
#include <set>
#include <sstream>

using cli::data;
using cli::zeromem;

namespace {

/// JSON paths of the findings with `severity` in --format json output.
std::set<std::string> paths(const nlohmann::json& j, const std::string& severity) {
    std::set<std::string> out;
    for (const auto& f : j.at("findings"))
        if (f.at("severity") == severity) out.insert(f.at("path").get<std::string>());
    return out;
}

nlohmann::json check_json(const std::string& args, int expected_exit) {
    const cli::Outcome r = zeromem("check " + args + " --format json");
    EXPECT_EQ(r.exit_code, expected_exit) << r.err;
    return nlohmann::json::parse(r.out);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
        s.replace(at, from.size(), to);
    return s;
}

}  // namespace

TEST(CliCheck, DataConfigsPassUnderTheHfTrainer) {
    for (const char* f : {"ds_configs/ds_zero2_config.json", "ds_configs/ds_zero3_config.json"}) {
        const auto j = check_json(data(f) + " --launcher hf-trainer", 0);
        EXPECT_EQ(j.at("errors"), 0) << f;
        EXPECT_EQ(j.at("launcher"), "hf-trainer");
        // No "optimizer" block under offload: accelerate swaps in DeepSpeedCPUAdam (a note).
        EXPECT_EQ(paths(j, "note").count("/zero_optimization/offload_optimizer"), 1u) << f;
    }
    // With a model the HF values appear: h=4096 -> 16777216 (h*h, trainer_config_finalize).
    const cli::Outcome r = zeromem("check " + data("ds_configs/ds_zero3_config.json") +
                                   " --launcher hf-trainer --model llama-2-7b --gpus 8");
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("note: /zero_optimization/reduce_bucket_size: \"auto\" -> hidden_size^2 = 4096^2 = 16777216"),
              std::string::npos) << r.out;
}

TEST(CliCheck, DataConfigsFailUnderDeepSpeedForTheirAutoValues) {
    // deepspeed.initialize does not resolve "auto": every "auto" is an error,
    // and nothing else is (C28).
    const auto z2 = check_json(data("ds_configs/ds_zero2_config.json") + " --launcher deepspeed", 1);
    EXPECT_EQ(paths(z2, "error"), (std::set<std::string>{"/fp16/enabled", "/gradient_accumulation_steps",
                                                        "/gradient_clipping", "/train_batch_size",
                                                        "/train_micro_batch_size_per_gpu"}));
    const auto z3 = check_json(data("ds_configs/ds_zero3_config.json"), 1);  // deepspeed is the default
    EXPECT_EQ(paths(z3, "error"),
              (std::set<std::string>{"/gradient_accumulation_steps", "/gradient_clipping", "/train_batch_size",
                                     "/train_micro_batch_size_per_gpu", "/zero_optimization/reduce_bucket_size",
                                     "/zero_optimization/stage3_param_persistence_threshold",
                                     "/zero_optimization/stage3_prefetch_bucket_size"}));
    for (const auto& f : z3.at("findings"))
        if (f.at("severity") == "error") {
            EXPECT_NE(f.at("message").get<std::string>().find("filled only by the HF Trainer or accelerate"),
                      std::string::npos);
            EXPECT_FALSE(f.at("fix").get<std::string>().empty());
        }
}

TEST(CliCheck, TableLinesNamePathSeverityAndFix) {
    const cli::Outcome r = zeromem("check " + cli::testdata("malformed/misspelled_key.json"));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("error: /zero_optimization/stage3_param_persitance_threshold: unknown key (did you mean "
                         "'stage3_param_persistence_threshold'?) [fix: rename it to 'stage3_param_persistence_threshold']"),
              std::string::npos) << r.out;
}

TEST(CliCheck, MemoryFindingsWithModelAndCluster) {
    // ZeRO-3 NVMe optimizer offload pins 4 x sub_group_size x 4 B = 16 GB per
    // rank (swap_tensor/optimizer_utils.py OptimizerSwapper, buffer_count 4):
    // 8 ranks exceed a 64 GB node.
    const auto j = check_json(cli::testdata("check_nvme_zero3.json") +
                                  " --model llama-2-7b --gpus 8 --host-memory 64GB --nvme-capacity 50GB",
                              1);
    EXPECT_EQ(paths(j, "error"), (std::set<std::string>{"/zero_optimization/offload_optimizer/pin_memory",
                                                        "/zero_optimization/offload_optimizer/nvme_path"}));
}

TEST(CliCheck, UnreadableInputExitsTwo) {
    EXPECT_EQ(zeromem("check " + cli::testdata("malformed/truncated.json")).exit_code, 2);
    EXPECT_EQ(zeromem("check /nonexistent/ds.json").exit_code, 2);
    EXPECT_EQ(zeromem("check").exit_code, 2);
}

TEST(CliCheck, EstimateNotesKeysWithoutMemoryEffect) {
    const cli::Outcome r = zeromem("estimate --model llama-2-7b --gpus 8 --optimizer-impl fused --ds-config " +
                                   data("ds_configs/ds_zero3_config.json"));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("/fp16/loss_scale = 0: no effect on memory"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("/zero_optimization/stage3_max_reuse_distance"), std::string::npos) << r.err;
}

TEST(CliMalformed, EveryCorpusEntryNamesItsFieldAndFails) {
    const std::string dir = std::string(ZEROMEM_TEST_DATA_DIR) + "/malformed";
    std::ifstream in(dir + "/cases.txt");
    ASSERT_TRUE(in.good());
    int cases = 0;
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        const auto tab = line.find('\t');
        ASSERT_NE(tab, std::string::npos) << line;
        auto expand = [&](const std::string& s) {
            return replace_all(replace_all(s, "@M@", dir), "@D@", ZEROMEM_SOURCE_DATA_DIR);
        };
        const std::string expected = expand(line.substr(0, tab));
        const std::string args = expand(line.substr(tab + 1));
        const cli::Outcome r = zeromem(args);
        ++cases;
        SCOPED_TRACE(args);
        EXPECT_NE(r.exit_code, 0);
        EXPECT_NE(r.exit_code, 134) << "abort";
        EXPECT_NE(r.exit_code, 139) << "segfault";
        EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        // The line naming the field: stderr (exit 2) or an error finding (check, exit 1).
        bool named = r.err.find(expected) != std::string::npos;
        std::istringstream out(r.out);
        for (std::string l; std::getline(out, l);)
            named = named || (l.rfind("error: ", 0) == 0 && l.find(expected) != std::string::npos);
        EXPECT_TRUE(named) << "expected: " << expected << "\nstdout: " << r.out << "\nstderr: " << r.err;
    }
    EXPECT_GE(cases, 40);
}

// ZeRO++ / MiCS flags: they reach the estimate, --explain names each
// term and its DeepSpeed source, and a bad value names the key.
TEST(CliZeroPP, FlagsReachTheEstimateAndExplain) {
    const cli::Outcome r = zeromem("estimate --model llama-2-7b --gpus 16 --nodes 2 --stage 3 "
                                        "--hpz-partition-size 8 --quantized-weights --quantized-gradients --explain");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* s : {"hpZ secondary partition", "_partition_param_sec", "qwZ int8 all-gather buffer",
                          "CUDAQuantizer", "qgZ int4 all-to-all", "all_to_all_quant_reduce"})
        EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
    const cli::Outcome bad = zeromem("estimate --model llama-2-7b --gpus 16 --stage 3 --mics-shard-size 5");
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("zero_optimization.mics_shard_size: 5"), std::string::npos) << bad.err;
}
