// `zeromem simulate` end to end: same errors as `estimate`, bad input exits 2
// with one line, output files.
#include "../cli_runner.h"

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include <tuple>

namespace {
size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }
size_t count_warnings(const std::string& s) {
    size_t n = 0;
    for (size_t at = s.find("zeromem: warning:"); at != std::string::npos; at = s.find("zeromem: warning:", at + 1)) ++n;
    return n;
}
}

TEST(SimulateCli, JsonOutput) {
    const auto j = cli::json_of("simulate --model llama-2-7b --gpus 8 --stage 3 --steps 1");
    EXPECT_GT(j["peak_allocated"].get<uint64_t>(), 0u);
    EXPECT_GE(j["peak_reserved"].get<uint64_t>(), j["peak_allocated"].get<uint64_t>());
    EXPECT_TRUE(j["oom"].is_null());
    EXPECT_FALSE(j["timeline"].empty());
}

TEST(SimulateCli, SameErrorsAsEstimate) {
    for (const char* args : {"--model no-such-model --gpus 8", "--model llama-2-7b --gpus 0", "--model llama-2-7b --gpus 8 --stage 7",
                             "--model llama-2-7b --gpus 8 --stage 1 --offload-param cpu"}) {
        const auto e = cli::zeromem(std::string("estimate ") + args);
        const auto s = cli::zeromem(std::string("simulate ") + args);
        EXPECT_EQ(e.exit_code, 2) << args;
        EXPECT_EQ(s.exit_code, 2) << args;
        EXPECT_EQ(s.err, e.err) << args;
        EXPECT_EQ(lines(s.err), 1u);
    }
}

TEST(SimulateCli, BadInputIsOneLineExitTwo) {
    auto r = cli::zeromem("simulate --model llama-2-7b --gpus 8 --steps 0");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(lines(r.err), 1u);
    EXPECT_NE(r.err.find("--steps"), std::string::npos);
    // llama-2-7b: 32 layers x 9 modules + embedding, norm, head = 291:
    // 100 steps x 256 micro steps x 292 x 16 events is far past 2^23.
    r = cli::zeromem("simulate --model llama-2-7b --gpus 8 --steps 100 --grad-accum 256");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("--steps x --grad-accum"), std::string::npos) << r.err;
    r = cli::zeromem("simulate --model llama-2-7b --gpus 8 --chrome-trace /nonexistent-dir/trace.json");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(lines(r.err), 1u);
    EXPECT_NE(r.err.find("--chrome-trace: cannot write '/nonexistent-dir/trace.json'"), std::string::npos);
    r = cli::zeromem("simulate --model llama-2-7b --gpus 8 --memory-snapshot /nonexistent-dir/s.pickle");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--memory-snapshot"), std::string::npos);
    r = cli::zeromem("simulate --model llama-2-7b --gpus 8 --alloc-conf max_split_size_mb:5");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--alloc-conf: max_split_size_mb"), std::string::npos);
    r = cli::zeromem("simulate --params 7e9 --gpus 8");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--model or --hf-config"), std::string::npos);
}

TEST(SimulateCli, OomExitsOneWithPyTorchsLine) {
    const auto r = cli::zeromem("simulate --model llama-2-7b --gpus 8 --stage 2 --gpu-memory 20GiB");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("OutOfMemoryError: CUDA out of memory. Tried to allocate"), std::string::npos);
}

TEST(SimulateCli, WritesTraceAndSnapshot) {
    const std::string trace = cli::temp_path("trace.json"), snap = cli::temp_path("snap.pickle");
    const auto r = cli::zeromem("simulate --model gpt2-xl --gpus 8 --stage 3 --steps 1 --chrome-trace '" + trace +
                                "' --memory-snapshot '" + snap + "'");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto t = nlohmann::json::parse(cli::slurp(trace));
    EXPECT_FALSE(t["traceEvents"].empty());
    const std::string s = cli::slurp(snap);
    ASSERT_GT(s.size(), 2u);
    EXPECT_EQ(static_cast<unsigned char>(s[0]), 0x80);
    EXPECT_EQ(s.back(), '.');
    // Each file written is named on stderr with its size (MiB = 2^20 bytes, KiB = 2^10 below 1 MiB).
    for (const std::string& path : {trace, snap}) {
        const double bytes = double(cli::slurp(path).size());
        char size[48];
        if (bytes >= 1048576.0) std::snprintf(size, sizeof size, "%.1f MiB", bytes / 1048576.0);
        else std::snprintf(size, sizeof size, "%.1f KiB", bytes / 1024.0);
        EXPECT_NE(r.err.find("zeromem: wrote " + path + " (" + size + ")\n"), std::string::npos) << r.err;
    }
    EXPECT_FALSE(std::ifstream(trace + ".partial").good());
    std::remove(trace.c_str());
    std::remove(snap.c_str());
}

// A refused run writes nothing: no empty --chrome-trace or --memory-snapshot file is left behind, and a
// file already at that path is left as it was.
TEST(SimulateCli, RefusedRunLeavesNoOutputFile) {
    const std::string trace = cli::temp_path("refused_trace.json"), snap = cli::temp_path("refused_snap.pickle");
    std::remove(trace.c_str());
    std::remove(snap.c_str());
    auto r = cli::zeromem("simulate --model llama-2-7b --gpus 8 --stage 2 --convention paper --chrome-trace '" + trace +
                          "' --memory-snapshot '" + snap + "'");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_FALSE(std::ifstream(trace).good()) << trace;
    EXPECT_FALSE(std::ifstream(snap).good()) << snap;
    std::ofstream(trace) << "kept";
    r = cli::zeromem("simulate --model no-such-model --gpus 8 --chrome-trace '" + trace + "'");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(cli::slurp(trace), "kept");
    std::remove(trace.c_str());
}

// Without a GPU size the allocator never has to give cached segments back: the peak reserved line says
// its figure is unbounded; with --gpu it is the figure at the GPU's capacity and says nothing.
TEST(SimulateCli, PeakReservedSaysWhenItIsUnbounded) {
    auto peak_reserved_line = [](const std::string& out) {
        const auto at = out.find("  peak reserved ");
        return at == std::string::npos ? std::string() : out.substr(at, out.find('\n', at) - at);
    };
    auto r = cli::zeromem("simulate --model gpt2-xl --gpus 8 --stage 3 --steps 1");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(peak_reserved_line(r.out).find("(unbounded: no GPU capacity given)"), std::string::npos) << r.out;
    r = cli::zeromem("simulate --model gpt2-xl --gpus 8 --stage 3 --steps 1 --gpu A100-80GB");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    ASSERT_FALSE(peak_reserved_line(r.out).empty()) << r.out;
    EXPECT_EQ(peak_reserved_line(r.out).find("unbounded"), std::string::npos) << r.out;
}

TEST(SimulateCli, ExplainNamesEventTermsAndSources) {
    const auto r = cli::zeromem("simulate --model llama-2-7b --gpus 8 --stage 3 --steps 1 --explain");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Event terms"), std::string::npos);
    EXPECT_NE(r.out.find("gathered_parameter"), std::string::npos);
    EXPECT_NE(r.out.find("DeepSpeed v0.19.6 deepspeed/runtime/zero/partition_parameters.py AllGatherCoalescedHandle.wait"),
              std::string::npos);
    const auto j = cli::json_of("simulate --model llama-2-7b --gpus 8 --stage 2 --steps 1 --explain");
    ASSERT_TRUE(j.contains("explain"));
    bool bucket = false;
    for (const auto& e : j["explain"])
        if (e["event"] == "ipg_bucket") bucket = e["source"].get<std::string>().find("setup_buckets") != std::string::npos;
    EXPECT_TRUE(bucket);
}

// Models the module tree does not replay are refused, naming the config
// field: mixtral-8x7b (num_local_experts 8 -> MoE in every block),
// flan-t5-large (encoder-decoder), bert-base-uncased (encoder-only).
TEST(SimulateCli, RefusesModelsItDoesNotReplay) {
    // Vision towers (Llama 4 Scout, Qwen2.5-VL) and DeepSpeed-MoE (--ep-size)
    // are not replayed (moe_sim_test.cpp RefusedMoeInputsNameTheKey); Llama
    // 4's packed experts are (PackedExpertsAreOneModuleFetchedWhole), its
    // vision tower is not.
    const std::tuple<const char*, const char*, const char*> cases[] = {
        {"llama-4-scout-17b-16e.json", "", "vision_config"},
        {"mixtral-8x7b.json", " --ep-size 2", "--ep-size"},
        {"flan-t5-large.json", "", "num_decoder_layers"},
        {"qwen2.5-vl-7b-instruct.json", "", "vision_config"},
        {"bert-base-uncased.json", "", "encoder_only"}};
    for (const auto& [file, extra, field] : cases) {
        const auto r = cli::zeromem("simulate --hf-config " + cli::testdata(std::string("hf_configs/published/") + file) +
                                    " --gpus 8 --stage 2 --steps 1 --seq-len 512" + extra);
        EXPECT_EQ(r.exit_code, 2) << file << ": " << r.err;
        // Exactly one error line: no reader warning (Llama 4's missing vision_config) before it.
        EXPECT_EQ(r.err.rfind("zeromem: error: ", 0), 0u) << file << ": " << r.err;
        EXPECT_EQ(lines(r.err), 1u) << file << ": " << r.err;
        EXPECT_NE(r.err.find(field), std::string::npos) << file << ": " << r.err;
    }
}

// Hugging Face's dropless MoE blocks are replayed (moe_sim_test.cpp): the
// peak names a module of the tree.
TEST(SimulateCli, ReplaysMixtureOfExperts) {
    const auto r = cli::zeromem("simulate --hf-config " + cli::testdata("hf_configs/published/mixtral-8x7b.json") +
                                " --gpus 8 --stage 3 --steps 1 --seq-len 512");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("peak allocated"), std::string::npos) << r.out;
}

// --steps is bounded: 100 optimizer steps at most.
TEST(SimulateCli, StepsAreBounded) {
    const auto r = cli::zeromem("simulate --model gpt2-xl --gpus 8 --steps 101");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(lines(r.err), 1u);
    EXPECT_NE(r.err.find("--steps: must be between 1 and 100, got 101"), std::string::npos) << r.err;
}

// An activation over 2^50 B is refused before any 64-bit byte sum can wrap:
// llama-2-7b's fp32 logits with micro batch 2^20 and sequence 2^20 are
// 4 x 2^40 x 32000 B (about 1.4e17 > 2^50 = 1.13e15).
TEST(SimulateCli, RefusesTensorsBeyondSixtyFourBitArithmetic) {
    const auto r = cli::zeromem("simulate --model llama-2-7b --gpus 8 --stage 3 --steps 1 --micro-batch 1048576 --seq-len 1048576");
    EXPECT_EQ(r.exit_code, 2) << r.out.substr(0, 300);
    // One error line (besides resolve's warning that 2^20 exceeds the model's 4096 positions).
    EXPECT_EQ(lines(r.err) - count_warnings(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("--micro-batch/--seq-len"), std::string::npos) << r.err;
}

// Just below the bound a replay runs, and reserved never falls below allocated.
TEST(SimulateCli, LargeButRepresentableActivationsKeepReservedAboveAllocated) {
    const auto j = cli::json_of("simulate --model llama-2-7b --gpus 8 --stage 3 --steps 1 --micro-batch 512 --seq-len 4096", -1);
    EXPECT_GE(j["peak_reserved"].get<uint64_t>(), j["peak_allocated"].get<uint64_t>());
}

// --host-memory gives a host verdict. llama-2-7b without zero.Init loads the
// whole bf16 model on every rank: 6.74e9 params x 2 B = 13.5 GB per rank, x 8
// ranks = 108 GB (100 GiB) per node, far above 10 GB; with 1000 GB it fits.
// The capacity is 10 GB less host_os_reserve: memmap 1e10 / 64 = 156250000,
// min watermark int_sqrt(floor((1e10 - 156250000) / 1024) x 16 = 153808592)
// = 12401 KiB = 12698624 (12401^2 = 153784801 <= 153808592 < 12402^2 =
// 153809604), OS baseline 2^30: 1e10 - 1242690448 = 8757309552 B = 8.16 GiB.
TEST(SimulateCli, HostMemoryVerdict) {
    auto r = cli::zeromem("simulate --model llama-2-7b --gpus 8 --stage 3 --steps 1 --host-memory 10GB");
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.out.find("host out of memory: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("GiB per node > 8.16 GiB host RAM per node (--host-memory)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(", phase "), std::string::npos);
    const auto j = cli::json_of("simulate --model llama-2-7b --gpus 8 --stage 3 --steps 1 --host-memory 10GB", 1);
    ASSERT_TRUE(j["host_oom"].is_object());
    EXPECT_EQ(j["host_oom"]["capacity_per_node"].get<uint64_t>(), 8757309552u);
    EXPECT_GT(j["host_oom"]["per_node"].get<uint64_t>(), 10000000000u);
    r = cli::zeromem("simulate --model llama-2-7b --gpus 8 --stage 3 --steps 1 --host-memory 1000GB");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find("host out of memory"), std::string::npos);
}

// Settings estimate models and the replay does not: one line naming the flag, exit 2.
TEST(SimulateCli, RefusesUnreplayedSettings) {
    const std::pair<const char*, const char*> cases[] = {
        {"--eval-generate", "--eval-generate"}, {"--eval-generate --num-beams 4", "--eval-generate"},
        {"--convention paper", "--convention: paper"}, {"--convention deepspeed", "--convention: deepspeed"},
        {"--legacy-zero2 --convention deepspeed", "--convention"}, {"--legacy-zero2", "--legacy-zero2"}};
    for (const auto& [flags, name] : cases) {
        const auto r = cli::zeromem(std::string("simulate --model llama-2-7b --gpus 8 --stage 2 --steps 1 ") + flags);
        EXPECT_EQ(r.exit_code, 2) << flags << ": " << r.err;
        EXPECT_EQ(lines(r.err), 1u) << flags << ": " << r.err;
        EXPECT_NE(r.err.find(name), std::string::npos) << flags << ": " << r.err;
        EXPECT_NE(r.err.find("use zeromem estimate"), std::string::npos) << r.err;
    }
}

// ZeRO-1 with fp32 accumulation of bf16 weights under CPU optimizer offload
// runs DeepSpeedZeroOptimizer with a full fp32 param.grad_accum
// (stage_1_and_2.py use_grad_accum_attribute): not replayed, refused naming
// the key rather than replayed without it.
TEST(SimulateCli, RefusesTheGradAccumAttribute) {
    const std::string cfg = cli::temp_path("z1_fp32acc_offload.json");
    std::ofstream(cfg) << R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
        "data_types": {"grad_accum_dtype": "fp32"},
        "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}}})";
    const auto r = cli::zeromem("simulate --model gpt2-xl --gpus 8 --steps 1 --ds-config '" + cfg + "'");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("data_types.grad_accum_dtype"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("param.grad_accum"), std::string::npos) << r.err;
    std::remove(cfg.c_str());
}

// --fragmentation and --gather-on-save leave the replay as it is, and say so.
TEST(SimulateCli, NotesSettingsThatDoNotChangeTheReplay) {
    const auto r = cli::zeromem("simulate --model gpt2-xl --gpus 8 --stage 3 --steps 1 --fragmentation 0.1 --gather-on-save --verbose");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("zeromem: note: --fragmentation: does not change the replay"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--gather-on-save): the checkpoint save is not replayed"), std::string::npos) << r.err;
    // at gpt2-xl's own 1024 positions, so the only other line is the count (no warning for a longer --seq-len)
    const auto quiet = cli::zeromem("simulate --model gpt2-xl --gpus 8 --stage 3 --steps 1 --seq-len 1024 "
                                    "--fragmentation 0.1 --gather-on-save");
    EXPECT_EQ(quiet.err, "zeromem: 2 notes not shown (--verbose shows them)\n");
    const auto j = cli::json_of("simulate --model gpt2-xl --gpus 8 --stage 3 --steps 1 --fragmentation 0.1");
    ASSERT_TRUE(j["notes"].is_array());
    EXPECT_EQ(j["notes"].size(), 1u);
}

// Another --deepspeed-version: a note says which side follows which version.
TEST(SimulateCli, DeepSpeedVersionNote) {
    auto r = cli::zeromem("simulate --model llama-2-7b --gpus 8 --stage 1 --steps 1 --deepspeed-version 0.18.0 --verbose");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("--deepspeed-version 0.18.0: the GPU replay follows DeepSpeed 0.19.6; the host replay"),
              std::string::npos) << r.err;
    r = cli::zeromem("simulate --model llama-2-7b --gpus 8 --stage 1 --steps 1 --verbose");
    EXPECT_EQ(r.err.find("--deepspeed-version"), std::string::npos) << r.err;
}

// Stage 0 with bf16 weights: DeepSpeed before 0.17.6 accumulates in fp32 by
// default and builds BF16_Optimizer (engine.py get_data_types,
// _do_optimizer_sanity_check); the simulator refuses rather than replay
// 0.19.6's FP16_Optimizer path.
TEST(SimulateCli, RefusesBf16OptimizerWithoutZeroOfOlderDeepSpeed) {
    const auto r = cli::zeromem("simulate --model gpt2-xl --gpus 8 --stage 0 --dtype bf16 --steps 1 --deepspeed-version 0.17.0");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_NE(r.err.find("--deepspeed-version: 0.17.0"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("BF16_Optimizer without ZeRO before DeepSpeed 0.18.5 is not replayed; the simulator replays 0.19.6"),
              std::string::npos) << r.err;
    // estimate still answers, with the fixed allowance rather than the replay's.
    const auto e = cli::zeromem("estimate --model gpt2-xl --gpus 8 --stage 0 --dtype bf16 --deepspeed-version 0.17.0 --explain");
    EXPECT_NE(e.exit_code, 2) << e.err;
    EXPECT_EQ(e.out.find("bytes from the simulator's replay"), std::string::npos) << e.out;
    EXPECT_NE(e.out.find("the fixed fraction 0.05"), std::string::npos) << e.out;
}

// Bad input is one line: --params alone warns nothing before the error.
TEST(SimulateCli, NoWarningBeforeTheError) {
    const auto r = cli::zeromem("simulate --params 7e9 --gpus 8 --stage 3");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("zeromem: error: ", 0), 0u) << r.err;
}

// After a GPU out-of-memory the host section stops at its phase.
// mixtral-8x7b (46.7e9 params) at stage 3 on 8 x 80 GB: the fp32 optimizer
// states alone are 46.7e9 x 12 B / 8 = 70 GB per GPU, plus the bf16 shard and
// gradients, so the first optimizer step runs out of memory.
TEST(SimulateCli, HostReplayStopsAtTheGpuOutOfMemory) {
    const auto j = cli::json_of("simulate --model mixtral-8x7b --gpus 8 --stage 3 --gpu A100-80GB --steps 1", 1);
    ASSERT_TRUE(j["oom"].is_object());
    const std::string phase = j["oom"]["phase"];
    EXPECT_EQ(j["host"]["stopped_at"], phase);
    for (const auto& p : j["host"]["phases"]) {
        EXPECT_NE(p["name"], "steady_forward");
        EXPECT_NE(p["name"], "steady_backward");
    }
    const auto r = cli::zeromem("simulate --model mixtral-8x7b --gpus 8 --stage 3 --gpu A100-80GB --steps 1");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("the run stopped at the GPU out-of-memory in phase " + phase), std::string::npos);
}

// --module-tree: the replay runs the tree's own modules (user_tree_modules.cpp), so a tree whose count
// differs from the architecture that sizes the activations is replayed, with the tree's parameters; a
// tree with frozen parameters is refused (the replay is full fine-tuning).
TEST(SimulateCli, ModuleTreeIsReplayedWithItsOwnModules) {
    const std::string tree = cli::testdata("module_trees/tiny_llama.json");
    const auto own = cli::zeromem("simulate --module-tree " + tree + " --gpus 2 --stage 3 --seq-len 64 --format json");
    ASSERT_EQ(own.exit_code, 0) << own.err;
    // beside llama-2-7b's architecture: the estimator warns the counts differ; the replay fetches the tree's
    const auto mixed = cli::zeromem("simulate --module-tree " + tree + " --model llama-2-7b --gpus 2 --stage 3 --seq-len 64");
    EXPECT_EQ(mixed.exit_code, 0) << mixed.err;
    EXPECT_NE(mixed.err.find("holds 1176 parameters"), std::string::npos) << mixed.err;
    const auto frozen = cli::zeromem("simulate --module-tree " + cli::testdata("module_trees/tiny_tied.json") +
                                     " --model llama-2-7b --gpus 2");
    EXPECT_EQ(frozen.exit_code, 2);
    EXPECT_NE(frozen.err.find("frozen parameters"), std::string::npos) << frozen.err;
}
