// What a new user trips on: the answer in every format, one
// exit-code rule, visible assumptions, inputs as users have them. Expected
// values are independent arithmetic or published figures written here.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using cli::expect_error;
using cli::json_of;
using cli::Outcome;
using cli::temp_path;
using cli::testdata;
using cli::data;
using cli::zeromem;

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// User case C03 (https://github.com/OpenRLHF/OpenRLHF/issues/698): Llama-3-8B, ZeRO-2, one A100-80GB:
// the optimizer step overflows first, and optimizer offload (recipe step 4,
// or 7 with ZeRO-3) is the fix. The A100-80GB exposes 79.14 GiB, the total capacity of a CUDA
// out-of-memory message on one (lianqi1008/Control-GIC#6; torch prints 2
// decimals): round(79.14 x 2^30) = 84975927951 B.
const std::string kC03 =
    "estimate --model llama-3-8b --gpus 1 --gpu A100-80GB --stage 2 --seq-len 128 --gradient-checkpointing full";

}  // namespace

TEST(CliUx, TheAnswerIsInEveryFormat) {
    for (const char* fmt : {"table", "md", "csv"}) {
        const Outcome r = zeromem(kC03 + " --format " + fmt);
        EXPECT_EQ(r.exit_code, 1) << fmt << "\n" << r.err;  // answered, does not fit
        std::string lower = r.out;
        for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        EXPECT_TRUE(has(lower, "does not fit")) << fmt << "\n" << r.out;
        EXPECT_TRUE(has(r.out, "79.14")) << fmt << "\n" << r.out;           // the capacity, GiB
        EXPECT_TRUE(has(r.out, "optimizer_step")) << fmt << "\n" << r.out;  // first OOM phase
        EXPECT_TRUE(has(r.out, "--offload-optimizer cpu")) << fmt << "\n" << r.out;  // the advice: the optimizer off the GPU
    }
    const Outcome csv = zeromem(kC03 + " --format csv");
    EXPECT_TRUE(has(csv.out, "capacity,gpu_memory,84975927951,")) << csv.out;  // round(79.14 x 2^30)
    EXPECT_TRUE(has(csv.out, "verdict,gpu,")) << csv.out;
    EXPECT_TRUE(has(csv.out, "verdict,first_oom_phase,,,optimizer_step")) << csv.out;
}

// The per-GPU components shown are those of the peak phase, so they add up
// to the total; each is checked against the phase list in the JSON.
TEST(CliUx, PerGpuComponentsAddUpToTheTotal) {
    const std::string args = "estimate --model llama-2-7b --gpus 8 --stage 3 --micro-batch 2 --seq-len 4096";
    const Outcome r = zeromem(args + " --format csv");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::istringstream in(r.out);
    std::string line;
    uint64_t sum = 0, total = 0;
    const std::vector<std::string> top = {"parameters",        "gradients",         "optimizer_states",
                                          "activations",       "temporary_buffers", "cublas_workspaces",
                                          "fragmentation",     "cuda_context",      "nccl_buffers"};
    while (std::getline(in, line)) {
        for (const auto& k : top)
            if (line.rfind("per_gpu," + k + ",", 0) == 0) sum += std::stoull(line.substr(9 + k.size()));
        if (line.rfind("per_gpu,total,", 0) == 0) total = std::stoull(line.substr(14));
    }
    EXPECT_GT(total, 0u);
    EXPECT_EQ(sum, total) << r.out;

    const auto j = json_of(args);
    const auto& pk = j.at("per_gpu_in_peak_phase");
    uint64_t jsum = 0;
    for (const auto& k : top) jsum += pk.at(k).get<uint64_t>();
    EXPECT_EQ(jsum, pk.at("total").get<uint64_t>());
    EXPECT_EQ(pk.at("total"), j.at("per_gpu").at("total"));
    for (const auto& p : j.at("phases"))
        if (p.at("name") == j.at("peak_phase")) {
            EXPECT_EQ(p.at("per_gpu"), pk);
        }
    const Outcome t = zeromem(args);
    EXPECT_TRUE(has(t.out, "own peak")) << t.out;
}

// One exit-code rule for every subcommand (README "Exit status").
TEST(CliUx, ExitCodesPerSubcommand) {
    // estimate: fits 0, no capacity 0, does not fit 1, bad input 2.
    EXPECT_EQ(zeromem("estimate --params 7e9 --gpus 8 --stage 3 --gpu A100-80GB").exit_code, 0);
    EXPECT_EQ(zeromem("estimate --params 7e9 --gpus 8 --stage 3").exit_code, 0);
    // 16 B x 7e9 = 112e9 B > 80 GiB = 85.9e9 B at stage 0.
    EXPECT_EQ(zeromem("estimate --params 7e9 --gpus 8 --stage 0 --gpu A100-80GB").exit_code, 1);
    EXPECT_EQ(zeromem("estimate --params 7e9 --gpus 8 --stage 0 --gpu A100-80GB --format json").exit_code, 1);
    EXPECT_EQ(zeromem("estimate --params 7e9 --stage 7").exit_code, 2);
    // A 512 MiB GPU holds nothing: the CUDA context alone is 512 MiB.
    const std::string tiny = "--model llama-2-7b --gpus 8 --gpu A100-80GB --gpu-memory 512MiB --global-batch 8";
    const std::string ok = "--model llama-2-7b --gpus 8 --gpu A100-80GB --host-memory 1TB --global-batch 64";
    for (const char* sub : {"compare", "plan"}) {
        EXPECT_EQ(zeromem(std::string(sub) + " " + ok).exit_code, 0) << sub;
        EXPECT_EQ(zeromem(std::string(sub) + " " + tiny).exit_code, 1) << sub;
        EXPECT_EQ(zeromem(std::string(sub) + " " + tiny + " --format json").exit_code, 1) << sub;
        EXPECT_EQ(zeromem(std::string(sub) + " " + ok + " --global-batch 0").exit_code, 2) << sub;
    }
    EXPECT_EQ(zeromem("fit --model llama-2-7b --gpu A100-80GB").exit_code, 0);
    EXPECT_EQ(zeromem("fit --model llama-2-7b --gpu-memory 512MiB --gpus 16").exit_code, 1);
    EXPECT_EQ(zeromem("fit --model llama-2-7b --gpu-memory 512MiB --gpus 16 --format json").exit_code, 1);
    EXPECT_EQ(zeromem("fit --model llama-2-7b").exit_code, 2);  // no GPU capacity
    for (const char* sub : {"estimate", "compare", "plan", "fit"}) {
        const Outcome h = zeromem(std::string(sub) + " --help");
        EXPECT_TRUE(has(h.out, "Exit status")) << sub;
        EXPECT_TRUE(has(h.out, "3  internal error")) << sub;
    }
}

// fit: an option that never fits has no number, and says why. Llama-2-70B
// (68,976,648,192 parameters, published) replicates 2 B x Ψ = 137.95e9 B of
// 16-bit weights below stage 3: more than 80 GiB = 85.9e9 B on any count.
TEST(CliUx, FitNeverFitsIsNullWithAReason) {
    // With full checkpointing (without it, the stored activations alone keep plain ZeRO-3 over 80 GiB).
    const Outcome r = zeromem("fit --model llama-2-70b --gpu A100-80GB --gpus 64 --gradient-checkpointing full --format json");
    ASSERT_EQ(r.exit_code, 0) << r.err;  // stage 3 fits
    const auto j = nlohmann::json::parse(r.out);
    int nulls = 0;
    for (const auto& row : j) {
        if (row.at("stage").get<int>() < 3) {
            EXPECT_TRUE(row.at("min_gpus").is_null()) << row;
            EXPECT_TRUE(has(row.at("note").get<std::string>(), "replicated 16-bit weights")) << row;
            ++nulls;
        } else if (row.at("offload_param") == "none" && row.at("offload_optimizer") == "none") {
            // stage 3: 16 B x Ψ / N <= 80 GiB needs N >= 13 (1.10e12 / 85.9e9 = 12.8).
            EXPECT_GE(row.at("min_gpus").get<int64_t>(), 13) << row;
            EXPECT_LE(row.at("min_gpus").get<int64_t>(), 64) << row;
        }
    }
    EXPECT_EQ(nulls, 4);  // ZeRO-0, 1, 2, 2 + optimizer cpu
    const Outcome t = zeromem("fit --model llama-2-70b --gpu A100-80GB --gpus 64");
    EXPECT_TRUE(has(t.out, "replicated 16-bit weights")) << t.out;
    EXPECT_TRUE(has(t.out, "> 64")) << t.out;
}

// "auto" fp16/bf16 is filled from --dtype as the HF Trainer fills it from
// --fp16/--bf16; without --dtype it is fp32, said loudly; an explicit
// "enabled": true that --dtype contradicts is an error.
TEST(CliUx, AutoPrecisionFollowsDtypeAndIsLoudWithout) {
    const std::string z2 = "estimate --model llama-2-7b --gpus 8 --ds-config " + data("ds_configs/ds_zero2_config.json");
    Outcome r = zeromem(z2 + " --format json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out).at("training").at("dtype"), "fp32");
    EXPECT_TRUE(has(r.err, "DTYPE ASSUMED fp32")) << r.err;
    r = zeromem(z2 + " --dtype bf16 --format json");
    EXPECT_EQ(nlohmann::json::parse(r.out).at("training").at("dtype"), "bf16");
    EXPECT_FALSE(has(r.err, "DTYPE ASSUMED")) << r.err;
    // ds_zero3_config.json says "fp16": {"enabled": true}.
    expect_error("estimate --model llama-2-7b --gpus 8 --dtype bf16 --ds-config " +
                     data("ds_configs/ds_zero3_config.json"),
                 "contradicts");
    r = zeromem(z2);
    EXPECT_TRUE(has(r.out, "Settings: dtype fp32")) << r.out;
    EXPECT_TRUE(has(r.out, "overlap_comm")) << r.out;
    EXPECT_TRUE(has(r.out, "attention flash")) << r.out;
    EXPECT_TRUE(has(r.out, "optimizer adamw built by the client")) << r.out;
}

TEST(CliUx, CompareStatesItsSettingsAndOverlapComm) {
    const Outcome r = zeromem("compare --model llama-2-7b --gpus 8 --gpu A100-80GB --host-memory 1TB --global-batch 64");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(has(r.out, "Settings: dtype bf16")) << r.out;
    EXPECT_TRUE(has(r.out, "stage3_gather_16bit_weights_on_model_save off")) << r.out;
    EXPECT_TRUE(has(r.out, "overlap_comm is DeepSpeed's default per stage")) << r.out;
    EXPECT_FALSE(has(r.out, "seed")) << r.out;
    // A pair where one side does not fit is treated like one where neither
    // fits: stated, not counted. ZeRO-0 needs 16 B x 6.74e9 = 108e9 B > 80 GiB.
    EXPECT_TRUE(has(r.out, "stage 0 does not fit at micro batch 1, stage 1 does")) << r.out;
    std::istringstream in(r.out);
    std::string line;
    int counted = 0, total = -1;
    while (std::getline(in, line)) {
        if (line.rfind("stage ", 0) == 0 && !has(line, "not comparable")) ++counted;
        if (line.rfind("Agreement: ", 0) == 0) total = std::stoi(line.substr(line.find(" of ") + 4));
    }
    EXPECT_EQ(counted, total) << r.out;
}

// compare, plan and estimate give one option the same host memory (the
// save-time gather is the user's setting in all three).
TEST(CliUx, HostMemoryAgreesAcrossSubcommands) {
    const std::string m = "--model llama-2-13b --gpus 8 --gpu A100-40GB";
    const Outcome p = zeromem("plan " + m + " --global-batch 32 --format json");
    ASSERT_EQ(p.exit_code, 0) << p.err;
    const auto w = nlohmann::json::parse(p.out).at("winner");
    std::string flags = " --stage " + std::to_string(w.at("stage").get<int>()) + " --offload-optimizer " +
                        w.at("offload_optimizer").get<std::string>() + " --offload-param " +
                        w.at("offload_param").get<std::string>() + " --micro-batch " +
                        std::to_string(w.at("micro_batch").get<int64_t>()) + " --grad-accum " +
                        std::to_string(w.at("grad_accum").get<int64_t>()) + " --gradient-checkpointing " +
                        w.at("gradient_checkpointing").get<std::string>() + " --optimizer-impl fused";
    const auto e = json_of("estimate " + m + flags, -1);  // overlap_comm, buckets differ from the plan's
    EXPECT_EQ(e.at("per_node").at("host_memory"), w.at("host_memory"));
    const Outcome c = zeromem("compare " + m + " --global-batch 32 --format json");
    for (const auto& row : nlohmann::json::parse(c.out)) {
        if (row.at("option") != "ZeRO-3") continue;
        const auto est = json_of("estimate " + m + " --stage 3 --micro-batch " +
                                 std::to_string(row.at("micro_batch").get<int64_t>()) + " --grad-accum " +
                                 std::to_string(row.at("grad_accum").get<int64_t>()), -1);
        EXPECT_EQ(est.at("per_node").at("host_memory"), row.at("host_memory"));
    }
}

TEST(CliUx, PlanStatesWhatItWroteAndAssumed) {
    const std::string m = "plan --model llama-2-7b --gpus 8 --gpu A100-80GB --host-memory 1TB --global-batch 64";
    const std::string path = temp_path("ux_plan.json");
    Outcome r = zeromem(m + " --emit '" + path + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(has(r.out, "weight_decay 0.0")) << r.out;
    EXPECT_TRUE(has(r.out, "lr 1e-5")) << r.out;
    r = zeromem(m + " --emit '" + path + "' --for hf-trainer");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(has(r.out, "--per_device_train_batch_size")) << r.out;
    EXPECT_TRUE(has(r.out, "--gradient_accumulation_steps")) << r.out;
    EXPECT_TRUE(has(r.out, "--bf16")) << r.out;
    const auto cfg = nlohmann::json::parse(cli::slurp(path));
    EXPECT_EQ(cfg.at("bf16").at("enabled"), "auto");
    EXPECT_EQ(cfg.at("optimizer").at("params").at("lr"), "auto");
    std::remove(path.c_str());
    // An unwritable --emit fails before the search.
    expect_error(m + " --emit /nonexistent-dir/ds.json", "--emit");
    // Only the GPU fails here (1 TB of host RAM is plenty): no "host memory exceeded".
    r = zeromem("plan --model llama-2-7b --gpus 8 --gpu A100-80GB --gpu-memory 512MiB --host-memory 1TB --global-batch 8");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_FALSE(has(r.out + r.err, "host memory exceeded")) << r.out << r.err;
    EXPECT_TRUE(has(r.out, "GPU out of memory")) << r.out;
}

// --hf-config takes a model directory and a Hub id from the local cache.
// GPT-2 small: 124,439,808 parameters (published).
TEST(CliUx, HfConfigDirectoryAndHubCache) {
    namespace fs = std::filesystem;
    const fs::path root = temp_path("hf");
    fs::remove_all(root);
    fs::create_directories(root / "model");
    const std::string src = std::string(ZEROMEM_TEST_DATA_DIR) + "/hf_configs/gpt2.json";
    fs::copy_file(src, root / "model" / "config.json");
    auto params = [](const Outcome& r) { return nlohmann::json::parse(r.out).at("model").at("params").get<uint64_t>(); };
    Outcome r = zeromem("estimate --hf-config '" + (root / "model").string() + "' --format json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(params(r), 124439808u);

    const fs::path snap = root / "hub" / "models--openai-community--gpt2" / "snapshots" / "607a30d783dfa663caf39e06633721c8d4cfcd7e";
    fs::create_directories(snap);
    fs::copy_file(src, snap / "config.json");
    fs::create_directories(root / "hub" / "models--openai-community--gpt2" / "refs");
    std::ofstream(root / "hub" / "models--openai-community--gpt2" / "refs" / "main") << "607a30d783dfa663caf39e06633721c8d4cfcd7e";
    // The environment of this test process is the child's.
    const std::string id = " --hf-config openai-community/gpt2 --format json";
    setenv("HF_HUB_CACHE", (root / "hub").string().c_str(), 1);
    r = zeromem("estimate" + id);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(params(r), 124439808u);
    r = zeromem("estimate --hf-config meta-llama/Llama-2-7b-hf");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "not in the local Hugging Face cache")) << r.err;
    unsetenv("HF_HUB_CACHE");
    // HF_HOME/hub is the cache when HF_HUB_CACHE is not set.
    setenv("HF_HOME", root.string().c_str(), 1);
    r = zeromem("estimate" + id);
    unsetenv("HF_HOME");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(params(r), 124439808u);
    expect_error("estimate --hf-config '" + root.string() + "'", "without a config.json");
    fs::remove_all(root);
}

TEST(CliUx, SizeUnits) {
    // 80 GB = 80e9 B = 74.51 GiB, not the 80 GiB of an "80GB" GPU.
    const Outcome r = zeromem("estimate --params 7e9 --gpus 8 --stage 3 --gpu-memory 80GB");
    EXPECT_TRUE(has(r.err, "74.51 GiB")) << r.err;
    EXPECT_FALSE(has(zeromem("estimate --params 7e9 --gpus 8 --stage 3 --gpu-memory 80GiB").err, "74.51")) ;
    // "80G" is refused alike for every size flag, suggesting valid values.
    for (const char* flag : {"--gpu-memory", "--host-memory", "--cuda-context", "--host-overhead"}) {
        const Outcome g = zeromem(std::string("estimate --params 7e9 ") + flag + " 80G");
        EXPECT_EQ(g.exit_code, 2) << flag;
        EXPECT_TRUE(has(g.err, "80GB") && has(g.err, "80GiB")) << g.err;
    }
    // 15e9 GiB per process would wrap the per-node sum (8 ranks) past 2^64 B.
    const Outcome o = zeromem("estimate --model llama-2-7b --gpus 8 --host-overhead 15000000000GiB");
    EXPECT_EQ(o.exit_code, 2);
    EXPECT_TRUE(has(o.err, "--host-overhead") && has(o.err, "1 PiB")) << o.err;
    const Outcome n = zeromem("compare --model llama-2-7b --gpus 8 --gpu A100-80GB --nvme-read 10G");
    EXPECT_EQ(n.exit_code, 2);
    EXPECT_TRUE(has(n.err, "10GB") && has(n.err, "10GiB")) << n.err;
}

TEST(CliUx, FlagsAsUsersTypeThem) {
    Outcome r = zeromem("estimate --params 7e9 --gpu-mem 80GiB");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "did you mean --gpu-memory")) << r.err;
    EXPECT_TRUE(has(r.err, "zeromem estimate --help")) << r.err;
    r = zeromem("compare --model llama-2-7b --gpus 8 --gpu A100-80GB --global-bach 64");
    EXPECT_TRUE(has(r.err, "--global-batch")) << r.err;
    EXPECT_TRUE(has(r.err, "zeromem compare --help")) << r.err;
    // Preset names in any case.
    EXPECT_EQ(json_of("estimate --model LLAMA-2-7B --gpus 8 --stage 3 --gpu a100-80gb").at("model").at("params").get<uint64_t>(),
              6738415616u);  // published llama-2-7b count
    EXPECT_EQ(zeromem("compare --model llama-2-7b --gpus 16 --nodes 2 --gpu a100-80gb --interconnect NVLINK-GEN3 "
                      "--network IB-NDR400 --global-batch 64").exit_code, 0);
    // No arguments: the usage, exit 2.
    r = zeromem("");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "estimate")) << r.err;
    EXPECT_TRUE(has(r.err, "Exit status")) << r.err;
    // --version after a subcommand.
    r = zeromem("estimate --version");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_TRUE(has(r.out, "zeromem 0.")) << r.out;
}

TEST(CliUx, WarningsForAcceptedNonsense) {
    const std::pair<std::string, std::string> cases[] = {
        {"estimate --model llama-2-7b --seq-len 8192", "max_position_embeddings"},  // llama-2: 4096 positions
        {"estimate --model llama-2-7b --lora-rank 5000", "hidden size"},            // h = 4096
        {"estimate --model llama-2-7b --gpus 6 --tp 3", "does not divide"},         // 32 heads
        {"estimate --model llama-2-7b --gpus 16 --nodes 2 --tp 16", "spans nodes"},
        {"estimate --model llama-2-7b --sequence-parallel", "--tp 1"},
        {"estimate --model llama-2-7b --gradient-checkpointing selective", "flash attention"},
        {"estimate --params 7000", "fewer than a million"},
        {"estimate --params 7e9 --optimizer sgd", "sgd_nomomentum"},
        // llama-2: 4096 positions; 4000 prompt + 200 new = 4200 tokens
        {"estimate --model llama-2-7b --seq-len 4000 --eval-generate --max-new-tokens 200", "4200 tokens"},
        {"estimate --model llama-2-7b --eval-generate --prompt-len 4090 --max-new-tokens 7", "4097 tokens"},
    };
    for (const auto& [args, what] : cases) {
        const Outcome r = zeromem(args);
        EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
        EXPECT_TRUE(has(r.err, "warning") && has(r.err, what)) << args << "\n" << r.err;
    }
    EXPECT_FALSE(has(zeromem("estimate --model llama-2-7b --gradient-checkpointing selective --attention eager").err,
                     "flash attention"));
    // 4090 + 6 = 4096 tokens fit llama-2's 4096 positions exactly.
    EXPECT_FALSE(has(zeromem("estimate --model llama-2-7b --eval-generate --prompt-len 4090 --max-new-tokens 6").err,
                     "max_position_embeddings"));
}

// The V100 has no bf16 (NVIDIA Volta): --dtype bf16 is refused by every
// subcommand; with no dtype given, fp16 is assumed and said.
TEST(CliUx, Bf16OnV100IsHandledAlikeEverywhere) {
    const std::string m = " --model llama-2-7b --gpus 8 --gpu V100-32GB --dtype bf16";
    expect_error("estimate" + m, "--dtype");
    expect_error("compare" + m, "--dtype");
    expect_error("plan" + m, "--dtype");
    expect_error("fit" + m, "--dtype");
    const Outcome r = zeromem("estimate --model llama-2-7b --gpus 8 --gpu V100-32GB --stage 3 --format json");
    EXPECT_EQ(nlohmann::json::parse(r.out).at("training").at("dtype"), "fp16");
    EXPECT_TRUE(has(r.err, "assumed fp16")) << r.err;
}

// compare --convention deepspeed: DeepSpeed's all-options table. Oracle: the
// cold columns of DeepSpeed's docs/code-docs/source/memory.rst for t5-3b
// (P = 2851e6, L = 32e6, 1 node x 8 GPUs), in GiB; the ZeRO-2 "none" row
// there is the legacy formula 4P + 16P/N (before DeepSpeed v0.14.3,
// deepspeedai/DeepSpeed#5099).
TEST(CliUx, CompareDeepSpeedConvention) {
    const Outcome r = zeromem("compare --params 2851e6 --largest-layer-params 32e6 --gpus 8 --convention deepspeed "
                              "--legacy-zero2");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const char* rows[] = {
        "ZeRO-2      127.45       5.31  offload_optimizer=cpu",
        "ZeRO-2      127.45      15.93  offload_optimizer=none",
        "ZeRO-3       71.69       0.12  offload_param=cpu, offload_optimizer=cpu, zero_init=1",
        "ZeRO-3      127.45       0.12  offload_param=cpu, offload_optimizer=cpu, zero_init=0",
        "ZeRO-3       63.72       0.78  offload_param=none, offload_optimizer=cpu, zero_init=1",
        "ZeRO-3      127.45       0.78  offload_param=none, offload_optimizer=cpu, zero_init=0",
        "ZeRO-3        1.43       6.09  offload_param=none, offload_optimizer=none, zero_init=1",
        "ZeRO-3      127.45       6.09  offload_param=none, offload_optimizer=none, zero_init=0",
    };
    for (const char* row : rows) EXPECT_TRUE(has(r.out, row)) << row << "\n" << r.out;
    EXPECT_TRUE(has(r.out, "Stages 0 and 1")) << r.out;
    // With a capacity: 6.09 GiB per GPU does not fit 4 GiB, the offloads do.
    EXPECT_EQ(zeromem("compare --params 2851e6 --largest-layer-params 32e6 --gpus 8 --convention deepspeed "
                      "--gpu-memory 4GiB --format json").exit_code, 0);
    EXPECT_EQ(zeromem("compare --params 2851e6 --largest-layer-params 32e6 --gpus 8 --convention deepspeed "
                      "--gpu-memory 64MiB").exit_code, 1);
}

// The README and the docs document what the CLI does: the exit-status rule
// (README), the install and data lookup (docs/install.md), the start-up
// benchmark (docs/benchmarks.md), the recipe in its own words and the
// global-batch default the code uses (16 per GPU, planner_commands.cpp;
// docs/compare-plan-fit.md).
TEST(CliUx, ReadmeDocumentsExitStatusInstallAndRecipe) {
    const std::string root = std::string(ZEROMEM_SOURCE_DATA_DIR) + "/../";
    const std::map<std::string, std::vector<const char*>> promised = {
        {"README.md", {"## Exit status", "| 3 | internal error |"}},
        {"docs/install.md", {"ZEROMEM_DATA_DIR", "cpack -G DEB", "cmake --install", "bash-completion", "_zeromem",
                             "man zeromem"}},
        {"docs/benchmarks.md", {"scripts/bench-startup.sh"}},
        {"docs/compare-plan-fit.md", {"The **ZeRO tuning recipe**", "speed/memory ordering", "else 16 per GPU"}},
    };
    for (const auto& [file, texts] : promised) {
        const std::string doc = cli::slurp(root + file);
        ASSERT_FALSE(doc.empty()) << file;
        for (const char* s : texts) EXPECT_TRUE(has(doc, s)) << file << ": " << s;
    }
    // The design notes' recipe is "the ZeRO tuning recipe" to users ("seed" as
    // in fuzzing seeds and random seeds is another word), in every document.
    std::vector<std::string> docs = {"README.md", "CONTRIBUTING.md", "CHANGELOG.md"};
    for (const auto& e : std::filesystem::directory_iterator(root + "docs"))
        if (e.path().extension() == ".md") docs.push_back("docs/" + e.path().filename().string());
    for (const std::string& file : docs) {
        const std::string doc = cli::slurp(root + file);
        ASSERT_FALSE(doc.empty()) << file;
        for (const char* s : {"the seed", "seed's", "Seed"})
            EXPECT_FALSE(has(doc, s)) << file << ": user-facing text says \"the ZeRO tuning recipe\"";
        EXPECT_FALSE(has(doc, "(default 128)")) << file;
    }
    EXPECT_FALSE(has(zeromem("--help").out + zeromem("plan --help").out, "seed"));
}

// A winner that needs more host RAM than a typical node (512 GiB), with no
// --host-memory given, is flagged: Llama-2-70B's fp32 master weights and
// Adam moments alone are 12 B x 68.98e9 = 828e9 B = 771 GiB on the host of
// one node under optimizer offload.
TEST(CliUx, PlanWarnsWhenTheWinnerNeedsMoreHostRamThanANode) {
    const std::string m = "plan --model llama-2-70b --gpus 8 --gpu A100-80GB --global-batch 64";
    for (const char* fmt : {"table", "json"}) {
        const Outcome r = zeromem(m + " --format " + fmt);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_TRUE(has(r.err, "more than a typical node")) << fmt << "\n" << r.err;
    }
    EXPECT_FALSE(has(zeromem(m + " --host-memory 2TiB").err, "typical node"));
    EXPECT_TRUE(has(zeromem(m).out, "Settings given (steps 1-11 keep them; step 12 tunes overlap_comm"));
}

// --gpus above a DGX node's 8 without --nodes is read as one node (host RAM, NVMe and the network are per
// node): said once on stderr; --nodes (even --nodes 1, a 16-GPU DGX-2) silences it.
TEST(CliUx, ManyGpusWithoutNodesSayTheyAreOneNode) {
    const std::string m = "estimate --model llama-2-7b --stage 3 --gpus ";
    const Outcome one = zeromem(m + "64");
    ASSERT_EQ(one.exit_code, 0) << one.err;
    EXPECT_TRUE(has(one.err, "--gpus 64 without --nodes is one node of 64 GPUs")) << one.err;
    EXPECT_FALSE(has(zeromem(m + "64 --nodes 8").err, "without --nodes"));
    EXPECT_FALSE(has(zeromem(m + "16 --nodes 1").err, "without --nodes"));
    EXPECT_FALSE(has(zeromem(m + "8").err, "without --nodes"));
}
