// End-to-end tests: run the built `zeromem` binary and check its output,
// exit code and error messages. Expected numbers are independent arithmetic
// written here or published figures, cited inline.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/wait.h>

using namespace cli;

TEST(Cli, VersionAndHelp) {
    Outcome r = zeromem("--version");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("zeromem 0."), std::string::npos) << r.out;
    r = zeromem("--help");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("zeromem estimate --params 7e9 --gpus 8 --stage 3"), std::string::npos) << r.out;
    r = zeromem("estimate --help");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("Examples:"), std::string::npos);
    EXPECT_NE(r.out.find("--ds-config"), std::string::npos);
}

// The first example of `zeromem --help`. Stage 3, bf16, Ψ = 7e9, N_d = 8: 16-bit
// parameter partition 2Ψ/8 = 1.75e9 B, gradient partition 2Ψ/8 = 1.75e9 B,
// fp32 master + Adam m + v = 12Ψ/8 = 10.5e9 B (stage3.py _create_fp32_partitions).
TEST(Cli, MainExampleTableAndJson) {
    Outcome r = zeromem("estimate --params 7e9 --gpus 8 --stage 3");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("GiB"), std::string::npos);
    EXPECT_NE(r.out.find("ZeRO-3"), std::string::npos);
    EXPECT_NE(r.err.find("largest layer unknown"), std::string::npos) << r.err;
}

TEST(Cli, JsonContract) {
    const auto j = json_of("estimate --params 7e9 --gpus 8 --stage 3");
    for (const char* k : {"parameters", "gradients", "optimizer_states", "activations", "temporary_buffers",
                          "cuda_context", "fragmentation", "total"}) {
        ASSERT_TRUE(j.at("per_gpu").contains(k)) << k;
        EXPECT_TRUE(j.at("per_gpu").at(k).is_number_unsigned()) << k;
    }
    EXPECT_TRUE(j.at("per_node").at("host_memory").is_number_unsigned());
    EXPECT_TRUE(j.at("per_node").at("nvme").is_number_unsigned());
    EXPECT_TRUE(j.at("fits_gpu").is_null());   // no --gpu given
    EXPECT_TRUE(j.at("fits_host").is_null());  // no --host-memory given
    EXPECT_EQ(j.at("per_gpu").at("parameters").get<uint64_t>(), 1750000000u);
    EXPECT_EQ(j.at("per_gpu").at("gradients").get<uint64_t>(), 1750000000u);
    EXPECT_EQ(j.at("per_gpu").at("optimizer_states").get<uint64_t>(), 10500000000u);

    const auto fit = json_of("estimate --params 7e9 --gpus 8 --stage 3 --gpu A100-80GB --host-memory 1TB");
    EXPECT_TRUE(fit.at("fits_gpu").get<bool>());
    EXPECT_TRUE(fit.at("fits_host").get<bool>());
    // 7e9 params, ZeRO-0, 16 B/param = 112e9 B > 80 GiB.
    const auto nofit = json_of("estimate --params 7e9 --gpus 8 --stage 0 --gpu A100-80GB", 1);
    EXPECT_FALSE(nofit.at("fits_gpu").get<bool>());
}

// --convention deepspeed reproduces DeepSpeed's printed figures: 7e9 params,
// L = 131072000 (LLaMA-7B embedding), 1 node x 8 GPUs, ZeRO-3 without
// offload, zero_init=1: per GPU 16274288000 B, per CPU 6291456000 B
// (stage3.py estimate_zero3_model_states_mem_needs; the same row of
// tests/data/reference/deepspeed_estimator_golden.json).
TEST(Cli, DeepSpeedConventionSpotCheck) {
    const auto j = json_of("estimate --params 7e9 --largest-layer-params 131072000 --gpus 8 --stage 3 "
                           "--convention deepspeed");
    EXPECT_EQ(j.at("per_gpu").at("total").get<uint64_t>(), 16274288000u);
    EXPECT_EQ(j.at("per_node").at("host_memory").get<uint64_t>(), 6291456000u);
    // ZeRO-2 legacy formula 4P + 16P/N = 28e9 + 14e9 = 42e9 B.
    const auto legacy = json_of("estimate --params 7e9 --gpus 8 --stage 2 --convention deepspeed --legacy-zero2");
    EXPECT_EQ(legacy.at("per_gpu").at("total").get<uint64_t>(), 42000000000u);
}

// ZeRO paper Figure 1: 7.5B on 64 GPUs, stage 1 = 31.4 GB (decimal).
TEST(Cli, PaperConvention) {
    const auto j = json_of("estimate --params 7.5B --gpus 64 --stage 1 --convention paper");
    EXPECT_EQ(j.at("per_gpu").at("total").get<uint64_t>(), 31406250000u);
}

TEST(Cli, PresetAndHfConfig) {
    // llama-2-7b: 6,738,415,616 parameters (published count; see model tests).
    auto j = json_of("estimate --model llama-2-7b --gpus 8 --stage 2 --micro-batch 1 --seq-len 4096");
    EXPECT_EQ(j.at("model").at("params").get<uint64_t>(), 6738415616u);
    EXPECT_GT(j.at("per_gpu").at("activations").get<uint64_t>(), 0u);
    j = json_of("estimate --hf-config " + testdata("hf_configs/gpt2.json") + " --gpus 1 --stage 0");
    EXPECT_EQ(j.at("model").at("params").get<uint64_t>(), 124439808u);  // GPT-2 small, published
}

TEST(Cli, OtherFormatsAndExplain) {
    Outcome r = zeromem("estimate --params 7e9 --gpus 8 --stage 2 --format csv");
    ASSERT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.out.rfind("scope,component,bytes,GiB,detail\n", 0), 0u);
    EXPECT_NE(r.out.find("per_gpu,parameters,14000000000,"), std::string::npos) << r.out;  // 2 B x 7e9
    r = zeromem("estimate --params 7e9 --gpus 8 --stage 2 --format md");
    ASSERT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("| per GPU"), std::string::npos);
    r = zeromem("estimate --model llama-2-7b --gpus 8 --stage 3 --explain --format md");
    ASSERT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("How each component is computed"), std::string::npos);
    expect_error("estimate --params 7e9 --gpus 8 --explain --format csv", "--explain");
    r = zeromem("estimate --model llama-2-7b --gpus 8 --stage 3 --explain");
    ASSERT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("Where each setting came from"), std::string::npos);
    EXPECT_NE(r.out.find("Korthikanti"), std::string::npos);
    EXPECT_NE(r.out.find("stage3.py"), std::string::npos);
}

TEST(Cli, SeedDeepSpeedConfigs) {
    // Seed ZeRO-3 config: stage 3, both offloads to cpu, fp16; "auto" buckets
    // need the hidden size, which the preset gives.
    // It offloads the optimizer and has no "optimizer" block: the HF Trainer's
    // torch AdamW is replaced by DeepSpeedCPUAdam in accelerate
    // (accelerator.py _prepare_deepspeed), said in a note.
    const Outcome swapped = zeromem("estimate --model llama-2-7b --gpus 8 --ds-config " + data("ds_configs/ds_zero3_config.json"));
    EXPECT_EQ(swapped.exit_code, 0) << swapped.err;
    EXPECT_NE(swapped.out.find("_prepare_deepspeed"), std::string::npos) << swapped.out;
    // With DeepSpeedCPUAdam as the optimizer it runs.
    auto j = json_of("estimate --model llama-2-7b --gpus 8 --optimizer-impl fused --ds-config " +
                     data("ds_configs/ds_zero3_config.json"));
    EXPECT_EQ(j.at("zero_optimization").at("stage").get<int>(), 3);
    EXPECT_EQ(j.at("zero_optimization").at("offload_param").get<std::string>(), "cpu");
    EXPECT_EQ(j.at("training").at("dtype").get<std::string>(), "fp16");
    // HF rule: reduce_bucket_size = h*h = 4096^2 (integrations/deepspeed.py trainer_config_finalize).
    EXPECT_EQ(j.at("zero_optimization").at("reduce_bucket_size").get<int64_t>(), 16777216);
    // Flags override the file.
    j = json_of("estimate --model llama-2-7b --gpus 8 --ds-config " + data("ds_configs/ds_zero2_config.json") +
                " --stage 1 --dtype bf16 --optimizer-impl fused");
    EXPECT_EQ(j.at("zero_optimization").at("stage").get<int>(), 1);
    EXPECT_EQ(j.at("training").at("dtype").get<std::string>(), "bf16");
    // "auto" needing a hidden size, with --params only: error naming the key.
    expect_error("estimate --params 7e9 --gpus 8 --ds-config " + data("ds_configs/ds_zero3_config.json"),
                 "reduce_bucket_size");
}

TEST(Cli, BadInputGetsOneClearLineAndNonzeroExit) {
    expect_error("estimate --params -7e9 --gpus 8", "--params");
    expect_error("estimate --params 0 --gpus 8", "--params");
    expect_error("estimate --params 7e9 --gpus 8 --stage 4", "--stage");
    expect_error("estimate --params 7e9 --gpus 8 --nodes 3", "--nodes");
    expect_error("estimate --params 7e9 --gpus 0", "--gpus");
    expect_error("estimate --model llama-2-7 --gpus 8", "llama-2-7b");  // suggests the close preset
    expect_error("estimate --params 7e9 --gpu A100-80 --gpus 8", "A100-80GB");
    expect_error("estimate --params 7e9 --gpu-memory 80XB", "--gpu-memory");
    expect_error("estimate --hf-config /nonexistent/config.json", "/nonexistent/config.json");
    expect_error("estimate --hf-config " + testdata("hf_configs/malformed.json"), "line");
    expect_error("estimate --params 7e9 --ds-config /nonexistent/ds.json", "/nonexistent/ds.json");
    expect_error("estimate --params 7e9 --stage 2 --offload-param cpu", "offload_param");
    expect_error("estimate --params 7e9 --dtype fp8", "--dtype");
    expect_error("estimate --params 7e9 --format yaml", "--format");
    expect_error("estimate", "--params");
    expect_error("estimate --params 7e9 --model llama-2-7b", "only one");
}

namespace {
std::string write_config(const std::string& name, const std::string& body) {
    const std::string path = temp_path(name);
    std::ofstream(path) << body;
    return path;
}
}  // namespace

TEST(Cli, BadDeepSpeedConfigs) {
    expect_error("estimate --params 7e9 --gpus 8 --ds-config " +
                     write_config("typo.json", R"({"zero_optimization": {"stage": 3, "stage3_param_persitance_threshold": 10}})"),
                 "stage3_param_persistence_threshold");
    expect_error("estimate --params 7e9 --gpus 8 --ds-config " +
                     write_config("frac.json", R"({"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 15099494.4}})"),
                 "stage3_prefetch_bucket_size");
    expect_error("estimate --params 7e9 --gpus 8 --ds-config " +
                     write_config("type.json", R"({"zero_optimization": {"stage": "three"}})"),
                 "stage");
    expect_error("estimate --params 7e9 --gpus 1 --ds-config " +
                     write_config("batch.json", R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
                                                    "gradient_accumulation_steps": 1})"),
                 "train_batch_size");
    expect_error("estimate --params 7e9 --gpus 8 --ds-config " + write_config("bad.json", "{\"zero_optimization\": {\n  \"stage\": 3,\n}"),
                 "line");
}

// The JSON "phases" list (name, per_gpu, per_node per phase) and
// the top-level "peak_phase". User case C03
// (https://github.com/OpenRLHF/OpenRLHF/issues/698): Llama-3-8B, ZeRO-2, one
// A100-80GB: the first overflow is the optimizer step, and the advice is the
// user's fix, optimizer offload (seed recipe step 4).
TEST(Cli, PhasesInJson) {
    const auto j = json_of("estimate --model llama-3-8b --gpus 1 --gpu A100-80GB --stage 2 --seq-len 128 "
                           "--gradient-checkpointing full", 1);  // does not fit: exit status 1
    ASSERT_TRUE(j.at("phases").is_array());
    const char* names[] = {"load", "forward", "backward", "optimizer_step", "steady_backward", "checkpoint_save"};
    ASSERT_EQ(j.at("phases").size(), 6u);
    uint64_t largest = 0;
    std::string largest_name;
    for (size_t i = 0; i < 6; ++i) {
        const auto& p = j.at("phases")[i];
        EXPECT_EQ(p.at("name").get<std::string>(), names[i]);
        EXPECT_TRUE(p.at("per_gpu").at("total").is_number_unsigned());
        EXPECT_TRUE(p.at("per_node").at("host_memory").is_number_unsigned());
        const uint64_t t = p.at("per_gpu").at("total").get<uint64_t>();
        if (t > largest) {
            largest = t;
            largest_name = names[i];
        }
    }
    EXPECT_EQ(j.at("peak_phase").get<std::string>(), largest_name);
    EXPECT_EQ(j.at("per_gpu").at("total").get<uint64_t>(), largest);
    EXPECT_EQ(j.at("first_oom_phase").get<std::string>(), "optimizer_step");
    ASSERT_EQ(j.at("advice").size(), 1u);
    // The optimizer step overflows (Adam's m and v, 8 B x P): every fix the
    // advice may pick offloads the optimizer, named by its config path.
    bool offloads = false;
    for (const auto& c : j.at("advice")[0].at("changes"))
        offloads |= c.at("path") == "zero_optimization.offload_optimizer.device" && c.at("value") == "cpu";
    EXPECT_TRUE(offloads) << j.at("advice")[0].dump();
    EXPECT_NE(j.at("advice")[0].at("change").get<std::string>().find("--offload-optimizer cpu"), std::string::npos);
    // Adam m and v: absent before the first step (DeepSpeed allocates them
    // lazily, at the optimizer's first step()), 4 B x P each from the step on.
    const uint64_t P = 8030261248u;  // published Llama-3-8B count
    EXPECT_EQ(j.at("phases")[2].at("per_gpu").at("momentum").get<uint64_t>(), 0u);
    EXPECT_EQ(j.at("phases")[3].at("per_gpu").at("momentum").get<uint64_t>(), 4 * P);
}

// Impossible layouts and flag combinations give one line and a
// nonzero exit. DeepSpeed's pipeline engine takes ZeRO stage 0 or 1 only.
TEST(Cli, BadParallelAndLoraFlags) {
    expect_error("estimate --params 7e9 --gpus 8 --tp 3", "--tp");
    expect_error("estimate --params 7e9 --gpus 8 --pp 2 --stage 3", "--pp");
    expect_error("estimate --params 7e9 --gpus 8 --pp 2 --stage 2", "--pp");
    expect_error("estimate --model llama-2-7b --gpus 8 --load-in 4bit", "--load-in");
    expect_error("estimate --model llama-2-7b --gpus 8 --load-in 3bit --lora-rank 8", "--load-in");
    expect_error("estimate --params 7e9 --gpus 8 --lora-rank 8", "--lora-rank");
    expect_error("estimate --model llama-2-7b --gpus 8 --lora-rank 8 --lora-target qq", "--lora-target");
    expect_error("estimate --params 7e9 --gpus 8 --trainable-params 8e9", "--trainable-params");
}

// --lora-rank 8 on llama-2-7b's q,k,v,o: 32 x 4 x 8 x (4096 + 4096) =
// 8,388,608 trainable parameters, the base frozen.
TEST(Cli, LoraCounts) {
    const auto j = json_of("estimate --model llama-2-7b --gpus 8 --stage 3 --lora-rank 8");
    EXPECT_EQ(j.at("trainable_params").get<uint64_t>(), 8388608u);
    EXPECT_EQ(j.at("frozen_params").get<uint64_t>(), 6738415616u);  // published llama-2-7b count
}

// Parser-level mistakes get the same treatment as every other input error:
// one line on stderr naming the flag, exit status 2.
TEST(Cli, ParserErrorsAreOneLineWithStatusTwo) {
    const char* cases[][2] = {
        {"estimate --params 7e9 --gpus 8 --frobnicate", "--frobnicate"},
        {"estimate --params 7e9 --micro-batch 2.5", "--micro-batch"},
        {"estimate --params 7e9 --gpus 99999999999999999999", "--gpus"},
        {"estimate --params 7e9 --gpus 2000000", "--gpus"},
        {"estimate --params 7e9 --gpu-memory 80", "--gpu-memory"},  // no unit: bytes or GB?
        {"frobnicate", "unknown subcommand 'frobnicate'"},
        {"estimate --hf-config /tmp", "is a directory"},
    };
    for (const auto& c : cases) {
        expect_error(c[0], c[1]);
        EXPECT_EQ(zeromem(c[0]).exit_code, 2) << c[0];
    }
}

// fit says what bounds each option instead of printing the search's cap.
TEST(Cli, FitNamesWhatBoundsOffloadOptions) {
    const auto rows = json_of("fit --gpus 8 --gpu A100-80GB");
    bool saw_host_note = false;
    for (const auto& r : rows) {
        if (r["offload_param"] == "cpu" && r["offload_optimizer"] == "cpu") {
            EXPECT_TRUE(r["max_params"].is_null());  // unbounded on the GPU: no number
            EXPECT_TRUE(r["unbounded"].get<bool>());
            saw_host_note = r["note"].get<std::string>().find("--host-memory") != std::string::npos;
        }
    }
    EXPECT_TRUE(saw_host_note);
}

// An unknown model_type is refused with exit 2 in one line naming
// it, the known families and the fallback; a MoE header gives total and
// active parameters (Mixtral 8x7B: 46.7B / 12.9B, published), --explain the
// derived layout per block.
TEST(CliArchitectures, UnknownModelTypeRefusedAndMoeHeader) {
    const std::string cfg = cli::temp_path("unknown_type.json");
    {
        std::ofstream f(cfg);
        f << R"({"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24, "vocab_size": 50280})";
    }
    const cli::Outcome bad = cli::zeromem("estimate --hf-config '" + cfg + "' --gpus 1");
    std::remove(cfg.c_str());
    EXPECT_EQ(bad.exit_code, 2);
    EXPECT_NE(bad.err.find("unknown model_type 'mamba'"), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find("--largest-layer-params"), std::string::npos) << bad.err;
    EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;

    const cli::Outcome moe =
        cli::zeromem("estimate --hf-config " + cli::testdata("hf_configs/published/mixtral-8x7b.json") +
                     " --gpus 8 --stage 3 --explain");
    EXPECT_EQ(moe.exit_code, 0) << moe.err;
    EXPECT_NE(moe.out.find("(46.70 B params, 12.88 B active)"), std::string::npos) << moe.out.substr(0, 300);
    EXPECT_NE(moe.out.find("family mixtral"), std::string::npos);
    EXPECT_NE(moe.out.find("decoder block (MoE): 32 x "), std::string::npos);
}

// The software stack is a resolved choice, shown in the
// header with where each version came from, and it changes the optimizer
// that runs the step (torch 2.7: the HF Trainer's foreach adamw_torch).
TEST(Cli, SoftwareStackInHeaderAndJson) {
    Outcome r = zeromem("estimate --params 7e9 --gpus 8 --stage 3");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("software: DeepSpeed 0.19.6 (built-in default), torch 2.8 (built-in default), transformers 5.0 "
                         "(built-in default); "
                         "optimizer step: HF Trainer default adamw_torch_fused"),
              std::string::npos) << r.out;
    r = zeromem("estimate --params 7e9 --gpus 8 --stage 3 --stack deepspeed=0.18.0,torch=2.7 --transformers-version 4.46");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("software: DeepSpeed 0.18.0 (--stack), torch 2.7 (--stack), transformers 4.46 "
                         "(--transformers-version); optimizer step: HF Trainer default adamw_torch"),
              std::string::npos) << r.out;
    const auto j = json_of("estimate --params 7e9 --gpus 8 --stage 3 --torch-version 2.0");
    EXPECT_EQ(j.at("software").at("torch").get<std::string>(), "2.0");
    EXPECT_NE(j.at("software").at("optimizer_step").get<std::string>().find("two fp32 temporaries"), std::string::npos);
    expect_error("estimate --params 7e9 --gpus 8 --torch-version latest", "--torch-version");
    expect_error("estimate --params 7e9 --gpus 8 --stack pytorch=2.8", "--stack");
    expect_error("estimate --params 7e9 --gpus 8 --optimizer-impl apex", "--optimizer-impl");
    // A client optimizer with ZeRO-Offload becomes DeepSpeedCPUAdam (accelerate).
    const Outcome client = zeromem("estimate --params 7e9 --gpus 8 --stage 2 --offload-optimizer cpu --optimizer-impl torch");
    EXPECT_EQ(client.exit_code, 0) << client.err;
    EXPECT_NE(client.out.find("_prepare_deepspeed"), std::string::npos) << client.out;
}

// Every flag `estimate` takes reaches fit, compare and
// plan. Each flag below changes the memory (or the host figures, or the
// optimizer's temporary) of at least one option, so the JSON of each
// subcommand must change when it is given. Flags a subcommand searches over
// are left out for it: fit searches stage and offload; compare and plan also
// search checkpointing, micro batch and accumulation. Host-only flags change
// fit's answer only through a host capacity, so fit runs with one; plan runs
// DeepSpeed's own optimizer (it writes the "optimizer" block), so the torch
// version does not change its answer.
TEST(Cli, EveryEstimateFlagReachesFitComparePlan) {
    const std::vector<std::string> common = {
        "--dtype fp32",          "--seq-len 4096",        "--optimizer sgd",        "--attention eager",
        "--cuda-context 4GiB",   "--fragmentation 0.2",   "--trainable-params 1e9", "--lora-rank 64",
        "--torch-version 2.0",   "--tp 2",                "--host-memory 100GB"};
    // Host-only flags, compared at a host capacity (both sides) near the
    // options' host needs: 50 GB for fit (2 ranks), 100 GB for compare and
    // plan (8 ranks). "Nothing fits" (exit 1) is an answer too.
    const std::vector<std::string> host_only = {"--host-overhead 8GiB", "--load-dtype fp32", "--no-zero-init"};
    const std::vector<std::string> fit_only = {"--micro-batch 4", "--grad-accum 4", "--gradient-checkpointing full"};
    struct Sub {
        std::string base;
        bool fit;
        std::string host;
    };
    const Sub subs[] = {
        {"fit --model llama-2-7b --gpu A100-80GB --format json", true, " --host-memory 50GB"},
        {"compare --model llama-2-7b --gpus 8 --gpu A100-80GB --global-batch 64 --format json", false,
         " --host-memory 100GB"},
        {"plan --model llama-2-7b --gpus 8 --gpu A100-80GB --global-batch 64 --format json", false,
         " --host-memory 100GB"},
    };
    auto check = [](const std::string& base_args, const std::string& flag) {
        const Outcome base = zeromem(base_args);
        ASSERT_EQ(base.exit_code, 0) << base_args << "\n" << base.err;
        const Outcome r = zeromem(base_args + " " + flag);
        EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 4) << base_args << " " << flag << "\n" << r.err;
        EXPECT_TRUE(r.out != base.out || r.exit_code != base.exit_code)
            << base_args << " " << flag << ": the flag did not change the result";
    };
    for (const auto& sub : subs) {
        std::vector<std::string> flags = common;
        if (sub.fit) flags.insert(flags.end(), fit_only.begin(), fit_only.end());
        for (const auto& flag : flags) {
            if (sub.base.rfind("plan", 0) == 0 && flag == "--torch-version 2.0") continue;
            check(sub.base, flag);
        }
        for (const auto& flag : host_only) check(sub.base + sub.host, flag);
    }
}

// The load: transformers >= 5 loads a 16-bit checkpoint in its own
// dtype (dtype="auto", huggingface/transformers#42805); before, the model is
// built in fp32. Without zero.Init every rank holds one copy:
// 8 x 2 B x 6,738,415,616 + 8 x 1 GiB with the default stack (transformers
// 5.0), 8 x 4 B x ... with transformers 4.46.
TEST(Cli, LoadDtypeFollowsTransformersVersion) {
    const uint64_t P = 6738415616ull, ovh = 8ull << 30;
    auto j = json_of("estimate --model llama-2-7b --gpus 8 --stage 2");
    EXPECT_EQ(j.at("per_node").at("host_memory").get<uint64_t>(), 8 * 2 * P + ovh);
    j = json_of("estimate --model llama-2-7b --gpus 8 --stage 2 --transformers-version 4.46");
    EXPECT_EQ(j.at("per_node").at("host_memory").get<uint64_t>(), 8 * 4 * P + ovh);
    j = json_of("estimate --model llama-2-7b --gpus 8 --stage 2 --load-dtype fp32");
    EXPECT_EQ(j.at("per_node").at("host_memory").get<uint64_t>(), 8 * 4 * P + ovh);
}

// A verdict compares against the memory the card
// exposes when the preset has it (usable_bytes, with its source), and the
// output says which figure was used. A10G: 22.49 GiB, the total capacity in
// a CUDA out-of-memory message on an A10G
// (AUTOMATIC1111/stable-diffusion-webui#1259), not the 24 GiB label; A100-80GB:
// 79.14 GiB (lianqi1008/Control-GIC#6); a preset without a reported figure
// (TITAN RTX) says it used the nominal label.
TEST(Cli, GpuCapacityIsTheReportedFigureAndSaysSo) {
    auto j = json_of("estimate --params 7e9 --gpus 8 --stage 3 --gpu A10G-24GB --explain");
    EXPECT_EQ(j.at("provenance").at("cluster.gpu_memory").get<std::string>().find("22.49 GiB reported by the device"),
              std::string("--gpu A10G-24GB (data/gpus/A10G-24GB.json): ").size());
    Outcome r = zeromem("estimate --params 7e9 --gpus 8 --stage 3 --gpu A10G-24GB");
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 4) << r.err;  // model states only: fits or tight
    EXPECT_NE(r.out.find("of 22.49 GiB"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("GPU capacity used: --gpu A10G-24GB (data/gpus/A10G-24GB.json): 22.49 GiB reported by the device"),
              std::string::npos) << r.out;
    r = zeromem("estimate --params 7e9 --gpus 8 --stage 3 --gpu A100-80GB");
    EXPECT_NE(r.out.find("GPU capacity used: --gpu A100-80GB (data/gpus/A100-80GB.json): 79.14 GiB reported by the device"),
              std::string::npos) << r.out;
    r = zeromem("estimate --params 1e9 --gpus 8 --stage 3 --gpu TITAN-RTX-24GB --dtype fp16");
    EXPECT_NE(r.out.find("GPU capacity used: --gpu TITAN-RTX-24GB (data/gpus/TITAN-RTX-24GB.json): 24.00 GiB nominal"),
              std::string::npos) << r.out;
    r = zeromem("estimate --params 7e9 --gpus 8 --stage 3 --gpu-memory 79GiB");
    EXPECT_NE(r.out.find("GPU capacity used: --gpu-memory 79GiB"), std::string::npos) << r.out;
}

// offload pin_memory defaulted to false before DeepSpeed 0.19.5
// (deepspeedai/DeepSpeed#8207): with --deepspeed-version 0.19.4 and no pin_memory in a
// config nothing is pinned; a config that says pin_memory: true still pins.
TEST(Cli, PinMemoryDefaultFollowsDeepSpeedVersion) {
    auto j = json_of("estimate --params 7e9 --gpus 8 --stage 2 --offload-optimizer cpu");
    EXPECT_GT(j.at("per_node").at("host_pinned").get<uint64_t>(), 0u);
    j = json_of("estimate --params 7e9 --gpus 8 --stage 2 --offload-optimizer cpu --deepspeed-version 0.19.4");
    EXPECT_EQ(j.at("per_node").at("host_pinned").get<uint64_t>(), 0u);
    j = json_of("estimate --model llama-2-7b --gpus 8 --optimizer-impl fused --deepspeed-version 0.19.4 --ds-config " +
                data("ds_configs/ds_zero2_config.json"));
    EXPECT_GT(j.at("per_node").at("host_pinned").get<uint64_t>(), 0u);
}

// Mixture-of-experts: --ep-size reaches estimate (with its
// --explain terms and sources), compare (the all-to-all time) and fit; bad
// sizes are refused naming the flag. Values are checked in moe_test.cpp.
TEST(CliMoe, EpSizeEstimateCompareFit) {
    const Outcome r = zeromem("estimate --model mixtral-8x7b --gpus 8 --stage 2 --ep-size 8 --seq-len 4096 --explain");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* s : {"parameters: routed experts held (expert parallelism)", "MoE router (fp32 gate)",
                          "MoE dispatched tokens (capacity)", "MoE capacity padding in the experts",
                          "MoE all-to-all buffers", "deepspeed/moe/sharded_moe.py", "deepspeed/moe/layer.py"})
        EXPECT_NE(r.out.find(s), std::string::npos) << s;
    const Outcome hf = zeromem("estimate --model mixtral-8x7b --gpus 8 --stage 2 --explain");
    ASSERT_EQ(hf.exit_code, 0) << hf.err;
    EXPECT_NE(hf.out.find("MoE routed token copies (dropless)"), std::string::npos);
    expect_error("estimate --model mixtral-8x7b --gpus 6 --ep-size 3", "--ep-size");
    expect_error("estimate --model llama-2-7b --gpus 8 --ep-size 2", "--ep-size");
    const auto rows = json_of("compare --model mixtral-8x7b --gpus 8 --gpu H100-80GB --global-batch 8 --ep-size 8", -1);
    const auto& list = rows.is_array() ? rows : rows.at("options");
    ASSERT_FALSE(list.empty());
    for (const auto& row : list) EXPECT_GT(row.at("moe_all_to_all_s").get<double>(), 0.0) << row.dump();
    const Outcome fit = zeromem("fit --model mixtral-8x7b --gpu H100-80GB --gpus 64 --ep-size 8");
    EXPECT_TRUE(fit.exit_code == 0 || fit.exit_code == 1) << fit.err;
}

// --workload: the JSON per-model shares, the verdict on the sum, and flags
// refused by name. Llama-2-7b: Ψ = 6,738,415,616 (Meta's published count);
// the ZeRO-3 reference holds b_m · ceil(Ψ/8) = 2 x 842,301,952 B per GPU.
TEST(Cli, WorkloadDpoPrintsEveryModelPerPhaseAndRefusesBadFlags) {
    const auto j = json_of("estimate --model llama-2-7b --gpus 8 --stage 3 --seq-len 1024 --fragmentation 0 "
                           "--gpu-memory 80GiB --workload dpo");
    EXPECT_EQ(j.at("workload"), "dpo");
    bool saw_forward = false;
    for (const auto& p : j.at("phases")) {
        if (p.at("name") != "forward") continue;
        saw_forward = true;
        EXPECT_EQ(p.at("models").at(1).at("role"), "reference");
        EXPECT_EQ(p.at("models").at(1).at("gpu_bytes").get<uint64_t>(), 1684603904ULL);
        // + one process's terms (no --gpu: unknown architecture): context 426 MiB,
        // NCCL WORLD + data-parallel 2 x 24 x (524,288 + 4,915,200 + 4,194,304),
        // cuBLAS 2 x (32 MiB + 1 MiB) (process_terms.h).
        const uint64_t process = (426ULL << 20) + 2ULL * 24 * (524288 + 4915200 + 4194304) + 2ULL * (33ULL << 20);
        EXPECT_EQ(p.at("per_gpu").get<uint64_t>(), p.at("models").at(0).at("gpu_bytes").get<uint64_t>() +
                                                        1684603904ULL + process);
    }
    EXPECT_TRUE(saw_forward);
    EXPECT_TRUE(j.at("fits_gpu").get<bool>());
    expect_error("estimate --model llama-2-7b --gpus 8 --stage 3 --workload rlhf", "--workload");
    expect_error("estimate --model llama-2-7b --gpus 8 --stage 3 --workload dpo --ref-stage 4", "--ref-stage");
    expect_error("estimate --model llama-2-7b --gpus 8 --stage 3 --precompute-ref-log-probs", "--precompute-ref-log-probs");
    expect_error("simulate --model llama-2-7b --gpus 8 --stage 3 --workload dpo", "--workload dpo");
    const Outcome r = zeromem("estimate --model llama-2-7b --gpus 8 --stage 3 --workload ppo --rollout-batch 4");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("generation"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("critic"), std::string::npos) << r.out;
    // fit judges the sum and says so; with a reference beside it the policy
    // needs at least as many GPUs at ZeRO-3 as alone.
    const Outcome fit = zeromem("fit --model llama-2-7b --gpu A100-40GB --workload dpo");
    EXPECT_NE(fit.out.find("workload dpo: memory is the sum"), std::string::npos) << fit.out << fit.err;
    auto zero3 = [](const nlohmann::json& rows) {
        for (const auto& row : rows)
            if (row.at("option") == "ZeRO-3") return row.at("min_gpus").get<int64_t>();
        return int64_t(-1);
    };
    const int64_t alone = zero3(json_of("fit --model llama-2-7b --gpu A100-40GB", -1));
    const int64_t paired = zero3(json_of("fit --model llama-2-7b --gpu A100-40GB --workload dpo", -1));
    EXPECT_GT(alone, 0);
    EXPECT_GE(paired, alone);
}

// Frozen parameters (--trainable-params, or a module tree's requires_grad)
// are named in the header beside the total: the gradients and optimizer
// states below are sized by the trainable count, so the user sees which.
TEST(Cli, HeaderNamesTheTrainableCountWhenLayersAreFrozen) {
    const cli::Outcome o = cli::zeromem("estimate --model llama-2-7b --gpus 8 --stage 3 --trainable-params 1.5e9");
    EXPECT_EQ(o.exit_code, 0) << o.err;
    EXPECT_NE(o.out.find("(6.74 B params, 1.50 B trainable)"), std::string::npos) << o.out.substr(0, 300);
    const cli::Outcome all = cli::zeromem("estimate --model llama-2-7b --gpus 8 --stage 3");
    EXPECT_NE(all.out.find("(6.74 B params), 8 GPUs"), std::string::npos) << all.out.substr(0, 300);
}
