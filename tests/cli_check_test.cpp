// End-to-end tests of `zeromem check` and of the malformed-input corpus
// (tests/data/malformed/cases.txt). Expected findings follow the HF
// Trainer's "auto" list (transformers integrations/deepspeed.py
// HfTrainerDeepSpeedConfig trainer_config_process / trainer_config_finalize)
// and user cases C26-C29 (tests/data/reference/user_cases.json).
#include "cli_runner.h"

#include <cstdio>
#include <fstream>
#include <map>
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

/// The unquoted path of a file under tests/data, as findings print it.
std::string path_of(const std::string& rel) { return std::string(ZEROMEM_TEST_DATA_DIR) + "/" + rel; }

/// The line of `out` that starts with `prefix` ("" when none).
std::string line_starting(const std::string& out, const std::string& prefix) {
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);)
        if (l.rfind(prefix, 0) == 0) return l;
    return "";
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
    const auto z3 = check_json(data("ds_configs/ds_zero3_config.json") + " --launcher deepspeed", 1);
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

TEST(CliCheck, TableLinesNameFileLinePathSeverityAndFix) {
    const cli::Outcome r = zeromem("check " + cli::testdata("malformed/misspelled_key.json"));
    EXPECT_EQ(r.exit_code, 1);
    // The file is one line: the key is on line 1.
    EXPECT_NE(r.out.find(path_of("malformed/misspelled_key.json") +
                         ":1: error: /zero_optimization/stage3_param_persitance_threshold: unknown key (did you mean "
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

// The notes are printed with --verbose (without it one line counts them: tests/cli_output_test.cpp).
TEST(CliCheck, EstimateNotesKeysWithoutMemoryEffect) {
    const cli::Outcome r = zeromem("estimate --model llama-2-7b --gpus 8 --optimizer-impl fused --verbose --ds-config " +
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
        // The line naming the field: stderr (exit 2) or an error finding (check, exit 1:
        // "FILE[:LINE]: error: /path: ...").
        bool named = r.err.find(expected) != std::string::npos;
        std::istringstream out(r.out);
        for (std::string l; std::getline(out, l);)
            named = named || (l.find(": error: ") != std::string::npos && l.find(expected) != std::string::npos);
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

// ---------------------------------------------------------------------------
// What a new user trips on (tests/data/check/README.md names each file's source).

namespace {

// The 15 keys the Hugging Face guide's ZeRO-3 template sets to "auto"
// (transformers docs/source/en/deepspeed.md, "Notebook" ds_config_zero3.json),
// with the line each is on in that file as the guide prints it.
const std::map<std::string, int> kTemplateAutos = {
    {"/fp16/enabled", 3},
    {"/optimizer/params/lr", 14},
    {"/optimizer/params/betas", 15},
    {"/optimizer/params/eps", 16},
    {"/optimizer/params/weight_decay", 17},
    {"/scheduler/params/warmup_min_lr", 24},
    {"/scheduler/params/warmup_max_lr", 25},
    {"/scheduler/params/warmup_num_steps", 26},
    {"/zero_optimization/reduce_bucket_size", 43},
    {"/zero_optimization/stage3_prefetch_bucket_size", 44},
    {"/zero_optimization/stage3_param_persistence_threshold", 45},
    {"/gradient_accumulation_steps", 51},
    {"/gradient_clipping", 52},
    {"/train_batch_size", 54},
    {"/train_micro_batch_size_per_gpu", 55}};

const char* kTemplate = "check/hf_docs_ds_config_zero3.json";

}  // namespace

TEST(CliCheckNewUser, HfDocsZero3TemplateIsCheckedAsTheHfTrainerReadsIt) {
    // No --launcher: a file of "auto" values is written for the HF Trainer or
    // accelerate, so it is checked as the HF Trainer reads it, and the first
    // line says so and names the flag for a plain deepspeed.initialize script.
    const cli::Outcome r = zeromem("check " + cli::testdata(kTemplate));
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    const std::string file = path_of(kTemplate);
    EXPECT_EQ(r.out.substr(0, r.out.find('\n')),
              file + ": note: /: --launcher not given; the file sets 15 key(s) to \"auto\" (first /fp16/enabled), "
                     "which only the HF Trainer and accelerate fill, so it is checked as --launcher hf-trainer reads it "
                     "[fix: for a script that passes the file to deepspeed.initialize itself, --launcher deepspeed "
                     "(there each \"auto\" is an error)]");
    // betas is reported like eps: the value the HF Trainer fills
    // (TrainingArguments adam_beta1 0.9, adam_beta2 0.999, adam_epsilon 1e-8).
    EXPECT_EQ(line_starting(r.out, file + ":15: "),
              file + ":15: note: /optimizer/params/betas: \"auto\" -> [0.9, 0.999] (HF adam_beta1/adam_beta2 "
                     "defaults; no memory effect)");
    EXPECT_EQ(line_starting(r.out, file + ":16: "),
              file + ":16: note: /optimizer/params/eps: \"auto\" -> 1e-08 (HF adam_epsilon default; no memory effect)");
    EXPECT_NE(r.out.find(file + ": 0 error(s), 1 warning(s), 16 note(s) for launcher hf-trainer, DeepSpeed 0.19.6"),
              std::string::npos) << r.out;
    // The JSON form carries the line and the launcher chosen.
    const auto j = check_json(cli::testdata(kTemplate), 0);
    EXPECT_EQ(j.at("launcher"), "hf-trainer");
    for (const auto& f : j.at("findings")) {
        if (f.at("path") == "/optimizer/params/betas") {
            EXPECT_EQ(f.at("line"), 15);
        }
    }
    // A file without "auto" keeps the deepspeed default and says nothing about it.
    const cli::Outcome plain = zeromem("check " + cli::testdata("check/stage3_keys_stage2.json"));
    EXPECT_NE(plain.out.find("for launcher deepspeed"), std::string::npos) << plain.out;
    EXPECT_EQ(plain.out.find("--launcher not given"), std::string::npos) << plain.out;
}

TEST(CliCheckNewUser, HfDocsZero3TemplateUnderDeepSpeedNamesEveryAutoAtItsLine) {
    const auto j = check_json(cli::testdata(kTemplate) + " --launcher deepspeed", 1);
    std::map<std::string, int> errors;
    for (const auto& f : j.at("findings")) {
        if (f.at("severity") != "error") continue;
        errors[f.at("path").get<std::string>()] = f.at("line").get<int>();
        EXPECT_EQ(f.at("message"), "\"auto\" is filled only by the HF Trainer or accelerate; deepspeed.initialize "
                                   "rejects it") << f.dump();
    }
    EXPECT_EQ(errors, kTemplateAutos);  // betas among them, like eps
    const cli::Outcome r = zeromem("check " + cli::testdata(kTemplate) + " --launcher deepspeed");
    EXPECT_EQ(line_starting(r.out, path_of(kTemplate) + ":15: "),
              path_of(kTemplate) + ":15: error: /optimizer/params/betas: \"auto\" is filled only by the HF Trainer or "
                                   "accelerate; deepspeed.initialize rejects it [fix: set a list of numbers (or launch "
                                   "through the HF Trainer/accelerate)]");
}

TEST(CliCheckNewUser, ReaderRefusalsAreErrorsAtTheirKeyAndLine) {
    // DeepSpeed asserts fp16 and bf16 are not both enabled
    // (runtime/config.py DeepSpeedConfig._initialize_params).
    const cli::Outcome both = zeromem("check " + cli::testdata("check/fp16_and_bf16.json"));
    EXPECT_EQ(both.exit_code, 1) << both.out;
    EXPECT_EQ(line_starting(both.out, path_of("check/fp16_and_bf16.json") + ":7: error: "),
              path_of("check/fp16_and_bf16.json") +
                  ":7: error: /bf16/enabled: fp16 and bf16 are both enabled; DeepSpeed asserts they cannot be "
                  "(runtime/config.py DeepSpeedConfig._initialize_params: 'bfloat16 and fp16 modes cannot be "
                  "simultaneously enabled')");
    // Parameter offload below stage 3: DeepSpeed ignores it
    // (offload_config.py "Valid only with stage 3"); estimate refuses it.
    const cli::Outcome off = zeromem("check " + cli::testdata("check/offload_param_stage2.json"));
    EXPECT_EQ(off.exit_code, 1) << off.out;
    EXPECT_NE(off.out.find(path_of("check/offload_param_stage2.json") +
                           ":6: error: /zero_optimization/offload_param/device: is cpu but DeepSpeed offloads "
                           "parameters only in ZeRO stage 3 (stage is 2): below stage 3 it ignores the setting"),
              std::string::npos) << off.out;
    // The same with the HF template's "auto"s and no model: the reader gets
    // past the hidden-size "auto"s to the refusal.
    const std::string tmp = cli::temp_path("hf_template_both.json");
    nlohmann::json cfg = nlohmann::json::parse(cli::slurp(path_of(kTemplate)));
    cfg["bf16"] = {{"enabled", true}};
    cfg["fp16"]["enabled"] = true;
    std::ofstream(tmp) << cfg.dump(2);
    const auto j = check_json("'" + tmp + "'", 1);
    std::remove(tmp.c_str());
    EXPECT_EQ(paths(j, "error"), (std::set<std::string>{"/bf16/enabled"}));
}

TEST(CliCheckNewUser, EveryConfigRefusalOfEstimateIsACheckFinding) {
    // The corpus lines `estimate ... --ds-config FILE` name what estimate
    // refuses in FILE; `check FILE` with the same flags names the same key and
    // text as an error (exit 1), except a setting zeromem does not model,
    // which DeepSpeed accepts: a warning there.
    const std::string dir = std::string(ZEROMEM_TEST_DATA_DIR) + "/malformed";
    std::ifstream in(dir + "/cases.txt");
    int checked = 0;
    for (std::string line; std::getline(in, line);) {
        const auto tab = line.find('\t');
        if (line.empty() || line[0] == '#' || tab == std::string::npos) continue;
        std::string args = replace_all(line.substr(tab + 1), "@M@", dir);
        const auto ds = args.find(" --ds-config ");
        if (args.rfind("estimate ", 0) != 0 || ds == std::string::npos) continue;
        const std::string file = args.substr(ds + 13);
        if (file.find(' ') != std::string::npos || file.find("truncated") != std::string::npos) continue;
        const std::string expected = line.substr(0, tab);
        const std::string flags = args.substr(9, ds - 9);
        const cli::Outcome r = zeromem("check '" + file + "' " + flags);
        SCOPED_TRACE(args);
        if (file.find("number_overflow") != std::string::npos) {  // not JSON DeepSpeed can read: exit 2
            EXPECT_EQ(r.exit_code, 2);
            continue;
        }
        // estimate names ZeRO++ keys dotted ("zero_optimization.mics_shard_size: 8 ..."), check by pointer.
        std::string text = expected;
        // estimate names the file and line first ("grad_accum_zero.json:1: /gradient_accumulation_steps: ..."),
        // check puts them before the severity: the pointer on is what both say.
        if (const auto at = text.find(".json:"); at != std::string::npos && text.find(": /", at) != std::string::npos)
            text = text.substr(text.find(": /", at) + 2);
        if (text.rfind("zero_optimization.", 0) == 0)
            text = "/" + replace_all(text.substr(0, text.find(':')), ".", "/") + text.substr(text.find(':'));
        const bool unmodelled = file.find("sequence_parallel") != std::string::npos;
        if (unmodelled)  // "/sequence_parallel_size: 4: Ulysses" -> the warning's wording
            text = text.substr(0, text.find(": ")) + ": zeromem cannot estimate memory with this setting" +
                   text.substr(text.find(": "));
        const std::string severity = unmodelled ? ": warning: " : ": error: ";
        bool named = false;
        std::istringstream out(r.out);
        for (std::string l; std::getline(out, l);)
            named = named || (l.find(severity) != std::string::npos && l.find(text) != std::string::npos);
        EXPECT_TRUE(named) << "expected" << severity << text << "\nstdout: " << r.out << "\nstderr: " << r.err;
        EXPECT_EQ(r.exit_code, unmodelled ? 0 : 1) << r.out;
        ++checked;
    }
    EXPECT_GE(checked, 8);
}

TEST(CliCheckNewUser, Stage3KeysBelowStage3AreNotes) {
    const cli::Outcome r = zeromem("check " + cli::testdata("check/stage3_keys_stage2.json"));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    const std::string file = path_of("check/stage3_keys_stage2.json");
    EXPECT_EQ(line_starting(r.out, file + ":5: "),
              file + ":5: note: /zero_optimization/stage3_max_live_parameters: ignored at stage 2: only ZeRO stage 3 "
                     "reads it (runtime/engine.py _configure_zero_optimizer, in its ZeRO-3 branch only) [fix: remove "
                     "it, or set zero_optimization.stage to 3 if ZeRO-3 was meant]");
    EXPECT_EQ(line_starting(r.out, file + ":6: "),
              file + ":6: note: /zero_optimization/stage3_gather_16bit_weights_on_model_save: ignored at stage 2: "
                     "only ZeRO stage 3 reads it (runtime/engine.py save_16bit_model, only when "
                     "zero_optimization_partition_weights()) [fix: remove it, or set zero_optimization.stage to 3 if "
                     "ZeRO-3 was meant]");
}

TEST(CliCheckNewUser, DeepSpeedChatMemoryEfficientLinearIsAcceptedAtEveryStage) {
    // DeepSpeed-Chat's get_train_ds_config sets "memory_efficient_linear":
    // false at every stage. DeepSpeed reads it in zero.Init only (ZeRO-3).
    const std::string z2 = "check/ds_chat_train_zero2.json";
    const cli::Outcome r2 = zeromem("check " + cli::testdata(z2) + " --gpus 8");  // 32 = 4 x 1 x 8
    EXPECT_EQ(r2.exit_code, 0) << r2.out;
    EXPECT_NE(r2.out.find(path_of(z2) + ":17: note: /zero_optimization/memory_efficient_linear: ignored at stage 2: "
                                        "only ZeRO stage 3 reads it (runtime/zero/partition_parameters.py Init.__init__"),
              std::string::npos) << r2.out;
    EXPECT_NE(r2.out.find(path_of(z2) + ": 0 error(s), 0 warning(s), 5 note(s) for launcher deepspeed"),
              std::string::npos) << r2.out;
    const cli::Outcome e2 = zeromem("estimate --model opt-1.3b --gpus 8 --verbose --ds-config " + cli::testdata(z2));
    EXPECT_EQ(e2.exit_code, 0) << e2.err;
    EXPECT_NE(e2.err.find("/zero_optimization/memory_efficient_linear = false: no effect on memory: ignored at stage 2"),
              std::string::npos) << e2.err;
    // --stage 3 overrides the file's stage 2: then ZeRO-3 reads it, and nothing says it is ignored.
    const cli::Outcome o3 = zeromem("estimate --model opt-1.3b --gpus 8 --stage 3 --explain --ds-config " +
                                    cli::testdata(z2));
    EXPECT_EQ(o3.exit_code, 0) << o3.err;
    EXPECT_EQ(o3.err.find("ignored at stage"), std::string::npos) << o3.err;
    EXPECT_NE(o3.out.find("Linear weights kept for backward (memory_efficient_linear false)"), std::string::npos);
    // Stage 3: accepted and modelled. OPT-1.3b (data/models/opt-1.3b.json,
    // tied LM head): Ψ = 1,315,758,080; input embeddings V·h + (2048 + 2)·h =
    // 102,957,056 + 4,198,400; Linear weights = Ψ - 107,155,456 + V·h =
    // 1,311,559,680, kept in fp16 (2 B) from forward to backward:
    // 2,623,119,360 B (no gradient checkpointing).
    const std::string z3 = "check/ds_chat_train_zero3.json";
    EXPECT_EQ(zeromem("check " + cli::testdata(z3) + " --model opt-1.3b --gpus 8").exit_code, 0);
    const cli::Outcome e3 = zeromem("estimate --model opt-1.3b --gpus 8 --explain --ds-config " + cli::testdata(z3));
    EXPECT_EQ(e3.exit_code, 0) << e3.err;
    const auto at = e3.out.find("temporary_buffers (forward): Linear weights kept for backward (memory_efficient_linear false)");
    ASSERT_NE(at, std::string::npos) << e3.out;
    EXPECT_NE(e3.out.find("= 2623119360 B", at), std::string::npos) << e3.out.substr(at, 600);
}

// A ZeRO-3 config that offloads everything already and runs out of memory on activations (llama-3-8b at
// 8192 tokens, micro batch 4): check's fix is estimate's "To fit" (the same search, advice.h advise, the same
// replayed fragmentation), so it names gradient checkpointing and the figure is estimate's own.
TEST(CliCheckNewUser, MemoryFixIsTheCheapestCombinationEstimateAdvises) {
    const std::string cfg = cli::testdata("check/z3_offload_both_mb4.json");
    const std::string flags = " --model llama-3-8b --gpus 8 --gpu A100-80GB --seq-len 8192";
    const cli::Outcome c = zeromem("check " + cfg + flags);
    EXPECT_EQ(c.exit_code, 1) << c.out;
    const cli::Outcome e = zeromem("estimate --ds-config " + cfg + flags);
    const auto at = e.out.find("needs ");
    ASSERT_NE(at, std::string::npos) << e.out;
    const std::string need = e.out.substr(at, e.out.find(" of ", at) - at);  // "needs 216.93 GiB"
    EXPECT_NE(c.out.find(need + " per GPU"), std::string::npos) << need << "\n" << c.out;
    EXPECT_NE(c.out.find("gradient_checkpointing full"), std::string::npos) << c.out;
    EXPECT_EQ(c.out.find("use a higher stage, offload"), std::string::npos) << c.out;
}
