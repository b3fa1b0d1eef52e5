// End-to-end tests of compare / plan / fit: run the built `zeromem` binary
// and check its output, exit code, error messages and the plan --emit round trip. Expected numbers are independent arithmetic
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

const std::string kLlama = "--model llama-2-7b --gpus 8 --gpu A100-80GB --host-memory 1TB --seq-len 4096";

TEST(CliSpeed, CompareJsonHasTheDocumentedFields) {
    const Outcome r = zeromem("compare " + kLlama + " --global-batch 64 --format json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    ASSERT_TRUE(j.is_array());
    ASSERT_EQ(j.size(), 22u);
    for (const auto& row : j) {
        for (const char* k : {"stage", "offload_optimizer", "offload_param", "gradient_checkpointing", "micro_batch",
                              "per_gpu_total", "host_memory", "fits", "step_time_s", "tokens_per_s"})
            EXPECT_TRUE(row.contains(k)) << k;
        EXPECT_TRUE(row["per_gpu_total"].is_number_integer());
        EXPECT_EQ(row["micro_batch"].get<int64_t>() * row["grad_accum"].get<int64_t>() * 8, 64);
    }
}

// plan --emit writes only a configuration the simulator replays without
// running out of memory on the GPU planned for: the 70B ZeRO-3 plan on 16 x
// H100-80GB whose closed-form winner (small reduce buckets) the replay
// showed out of memory at the LM head's backward. `simulate` on the emitted
// file (with the Trainer arguments the plan states) must not run out of
// memory, and the plan's figure is the estimate of exactly that file.
TEST(CliSpeed, PlanEmitsOnlyAConfigurationTheSimulatorReplaysWithoutOutOfMemory) {
    const std::string path = temp_path("ds70.json");
    const std::string cluster = "--model llama-3-70b --gpus 16 --nodes 2 --gpu H100-80GB --seq-len 4096";
    const Outcome r = zeromem("plan " + cluster + " --host-memory 2TiB --global-batch 128 --network ib-ndr400 "
                              "--host dgx-h100 --for hf-trainer --format json --emit '" + path + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto plan = nlohmann::json::parse(r.out);
    EXPECT_TRUE(plan["winner_replayed"].get<bool>());
    ASSERT_FALSE(plan["replays"].empty());
    const std::string last = plan["replays"].back().get<std::string>();
    EXPECT_NE(last.find(": fits (peak allocated"), std::string::npos) << last;
    EXPECT_NE(last.find("; peak reserved"), std::string::npos) << last;
    for (size_t i = 0; i + 1 < plan["replays"].size(); ++i)
        EXPECT_NE(plan["replays"][i].get<std::string>().find("runs out of memory at"), std::string::npos);
    const auto& w = plan["winner"];
    // The Trainer arguments the plan assumed: --per_device_train_batch_size,
    // --gradient_accumulation_steps, --bf16, --gradient_checkpointing.
    const std::string trainer = " --micro-batch " + std::to_string(w["micro_batch"].get<int64_t>()) + " --grad-accum " +
                                std::to_string(w["grad_accum"].get<int64_t>()) + " --dtype " +
                                w["dtype"].get<std::string>() + " --gradient-checkpointing " +
                                w["gradient_checkpointing"].get<std::string>() + " --ds-config '" + path + "'";
    const Outcome sim = zeromem("simulate " + cluster + trainer);
    EXPECT_EQ(sim.exit_code, 0) << sim.out << sim.err;
    EXPECT_EQ(sim.out.find("OutOfMemoryError"), std::string::npos) << sim.out;
    const auto est = json_of("estimate " + cluster + trainer);
    EXPECT_EQ(est["per_gpu"]["total"].get<uint64_t>(), w["per_gpu_total"].get<uint64_t>());
    // compare with the same settings (the emitted file) gives the option the
    // same figure. Its row is at the option's largest fitting micro batch,
    // which is the plan's: a larger one that fits would be faster.
    const auto rows = json_of("compare " + cluster + " --host-memory 2TiB --global-batch 128 --network ib-ndr400 "
                              "--host dgx-h100 --dtype " + w["dtype"].get<std::string>() +
                              " --ds-config '" + path + "'");
    bool found = false;
    for (const auto& row : rows) {
        if (row["option"] != w["option"]) continue;
        found = true;
        EXPECT_EQ(row["micro_batch"], w["micro_batch"]);
        EXPECT_EQ(row["per_gpu_total"].get<uint64_t>(), w["per_gpu_total"].get<uint64_t>());
    }
    EXPECT_TRUE(found) << w["option"];
}

TEST(CliSpeed, CompareTableStatesTheOrdering) {
    const Outcome r = zeromem("compare " + kLlama + " --global-batch 64");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("stage 0 > 1 > 2 > 2+offload > 3 > 3+offload"), std::string::npos);
    EXPECT_NE(r.out.find("tokens/s"), std::string::npos);
    EXPECT_NE(r.out.find("GiB"), std::string::npos);
}

// plan --emit writes a config DeepSpeed takes as is, and feeding it back to
// `zeromem estimate --ds-config` gives the plan winner's estimate.
TEST(CliSpeed, PlanEmitRoundTrip) {
    const std::string path = temp_path("emitted.json");
    const Outcome r = zeromem("plan " + kLlama + " --global-batch 64 --format json --emit '" + path + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto plan = nlohmann::json::parse(r.out);
    const auto& w = plan["winner"];
    const auto cfg = nlohmann::json::parse(slurp(path));
    EXPECT_EQ(cfg.dump().find("auto"), std::string::npos);
    EXPECT_EQ(cfg["train_batch_size"].get<int64_t>(), 64);
    EXPECT_EQ(cfg["train_micro_batch_size_per_gpu"].get<int64_t>() * cfg["gradient_accumulation_steps"].get<int64_t>() * 8, 64);
    const std::string ck = w["gradient_checkpointing"].get<std::string>();
    const auto est = json_of("estimate " + kLlama + " --ds-config '" + path + "' --gradient-checkpointing " + ck);
    EXPECT_EQ(est["per_gpu"]["total"].get<uint64_t>(), w["per_gpu_total"].get<uint64_t>());
    EXPECT_EQ(est["per_node"]["host_memory"].get<uint64_t>(), w["host_memory"].get<uint64_t>());
    EXPECT_GE(plan["candidates_evaluated"].get<int64_t>(), 1000);
}

// The same round trip when the winner is ZeRO-3 (llama-2-13b does not fit
// 8 x 40 GB below stage 3): the emitted stage-3 buckets, the save-time gather
// and the optimizer block are what the plan evaluated.
TEST(CliSpeed, PlanEmitRoundTripStage3) {
    const std::string path = temp_path("emitted_z3.json");
    const std::string model = "--model llama-2-13b --gpus 8 --gpu A100-40GB";
    const Outcome r = zeromem("plan " + model + " --global-batch 32 --format json --emit '" + path + "'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto w = nlohmann::json::parse(r.out)["winner"];
    ASSERT_EQ(w["stage"].get<int>(), 3);
    const auto est = json_of("estimate " + model + " --ds-config '" + path + "' --gradient-checkpointing " +
                             w["gradient_checkpointing"].get<std::string>());
    EXPECT_EQ(est["per_gpu"]["total"].get<uint64_t>(), w["per_gpu_total"].get<uint64_t>());
    EXPECT_EQ(est["per_node"]["host_memory"].get<uint64_t>(), w["host_memory"].get<uint64_t>());
    std::remove(path.c_str());
}

TEST(CliSpeed, PlanForHfTrainer) {
    const std::string path = temp_path("emitted_hf.json");
    const Outcome r = zeromem("plan " + kLlama + " --global-batch 64 --emit '" + path + "' --for hf-trainer");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto cfg = nlohmann::json::parse(slurp(path));
    EXPECT_EQ(cfg["train_batch_size"], "auto");
    EXPECT_TRUE(cfg["zero_optimization"]["reduce_bucket_size"].is_number_integer());
}

TEST(CliSpeed, PlanPrintsEachRecipeStep) {
    const Outcome r = zeromem("plan " + kLlama + " --global-batch 64");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("step  1"), std::string::npos);
    EXPECT_NE(r.out.find("step 12"), std::string::npos);
    EXPECT_NE(r.out.find("Winner:"), std::string::npos);
}

TEST(CliSpeed, PlanNothingFitsExitsOne) {
    const Outcome r = zeromem("plan --model llama-2-70b --gpus 1 --gpu A100-80GB --gpu-memory 1GiB --global-batch 1");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("does not fit"), std::string::npos) << r.err;
}

TEST(CliSpeed, FitPaperTable) {
    const Outcome r = zeromem("fit --gpus 64 --gpu-memory 32GB --convention paper --format json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    // ZeRO paper: 14.4B with P_os+g on 64 x 32 GB (32e9 / (2 + 14/64)).
    bool seen = false;
    for (const auto& row : j)
        if (row["stage"] == 2 && row["offload_optimizer"] == "none") {
            EXPECT_NEAR(row["max_params"].get<double>() / 14.4e9, 1.0, 0.01);
            seen = true;
        }
    EXPECT_TRUE(seen);
}

// fit searches only GPU counts that --ep-size divides (DeepSpeed
// utils/groups.py _create_expert_and_data_parallel: ep_size divides N_d):
// every answer is a multiple of the EP size, whole nodes beyond one node.
TEST(CliSpeed, FitSearchesOnlyMultiplesOfTheEpSize) {
    struct Case { std::string args; uint64_t multiple; };
    for (const Case& c : {Case{"--model qwen3-30b-a3b --gpu H100-80GB --ep-size 32", 32},
                          Case{"--model qwen3-30b-a3b --gpu H100-80GB --ep-size 8 --gpus-per-node 4", 8},
                          Case{"--model deepseek-v2-lite --gpu A100-80GB --ep-size 64 --gpus 64", 64},
                          Case{"--model mixtral-8x7b --gpu A100-80GB --mics-shard-size 8", 1}}) {
        SCOPED_TRACE(c.args);
        const Outcome r = zeromem("fit " + c.args + " --format json");
        ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 4) << r.err;
        bool answered = false;
        for (const auto& row : nlohmann::json::parse(r.out)) {
            if (row["min_gpus"].is_null()) {
                EXPECT_FALSE(row["note"].get<std::string>().empty());
                continue;
            }
            answered = true;
            const uint64_t n = row["min_gpus"].get<uint64_t>();
            EXPECT_EQ(n % c.multiple, 0u) << row.dump();
            if (row["stage"] == 3 && c.multiple == 1) {
                EXPECT_EQ(n % 8, 0u) << row.dump();  // mics_shard_size 8
            }
        }
        EXPECT_TRUE(answered);
    }
}

TEST(CliSpeed, BadInputsGiveOneLineAndNonzeroExit) {
    expect_error("compare " + kLlama + " --global-batch 12", "--global-batch");
    expect_error("compare " + kLlama + " --global-batch 0", "--global-batch");
    expect_error("compare --model llama-2-7b --gpus 8 --gpu-memory 80GiB", "--gpu");
    expect_error("compare " + kLlama + " --interconnect nvlink-gen9", "--interconnect");
    expect_error("compare --model llama-2-7b --gpus 16 --nodes 2 --gpu A100-80GB", "--network");
    expect_error("compare --model llama-2-7b --gpus 8 --gpu V100-32GB --dtype bf16", "--dtype");
    expect_error("plan " + kLlama + " --for megatron", "--for");
    expect_error("plan " + kLlama + " --format xml", "--format");  // csv and md are formats plan writes
    expect_error("plan " + kLlama + " --cpu-adam-rate -1", "--cpu-adam-rate");
    expect_error("fit --gpu A100-80GB", "fit:");
}

// compare shows each term per option and marks the ones resting on a
// calibrated or estimated constant: the json lists them per row; the
// per-parameter column exists (--wide); a term sum equals the step time.
TEST(CliSpeed, CompareShowsTermsAndCalibration) {
    const Outcome r = zeromem("compare " + kLlama + " --global-batch 64 --host dgx-a100 --format json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    bool saw_g8 = false;
    for (const auto& row : j) {
        const double sum = row["compute_s"].get<double>() + row["exposed_comm_s"].get<double>() +
                           row["optimizer_s"].get<double>() + row["offload_s"].get<double>() +
                           row["per_param_s"].get<double>() + row["overhead_s"].get<double>();
        EXPECT_NEAR(sum, row["step_time_s"].get<double>(), 1e-9 * sum);
        ASSERT_TRUE(row["calibrated_terms"].is_array());
        for (const auto& c : row["calibrated_terms"])
            if (c["constant"] == "cpu_adam_memory_efficiency") saw_g8 = c["basis"].get<std::string>().find("G8") != std::string::npos;
    }
    EXPECT_TRUE(saw_g8) << "optimizer-offload rows on a host preset name the G8 fit";
    const Outcome t = zeromem("compare " + kLlama + " --global-batch 64 --host dgx-a100 --wide");
    ASSERT_EQ(t.exit_code, 0) << t.err;
    EXPECT_NE(t.out.find("per-param"), std::string::npos);
    EXPECT_NE(t.out.find("Host: dgx-a100"), std::string::npos);
    EXPECT_NE(t.out.find("*"), std::string::npos);
}

// Host flags: an override needs a preset; bad values name the flag.
TEST(CliSpeed, HostFlagErrors) {
    expect_error("compare " + kLlama + " --host dgx-a1000", "--host");
    expect_error("compare " + kLlama + " --pcie-lanes 8", "--host");
    expect_error("compare " + kLlama + " --host dgx-a100 --pcie-lanes 0", "--pcie-lanes");
    expect_error("compare " + kLlama + " --host dgx-a100 --pcie-gen 9", "--pcie-gen");
    expect_error("compare " + kLlama + " --host dgx-a100 --host-memory-bandwidth -3GB", "--host-memory-bandwidth");
}

// Halving the PCIe share of a GPU (two GPUs per uplink instead of one)
// slows an offloaded option's transfers: the dgx-a100 preset with
// --gpus-per-pcie-link 1 gives each GPU min(27.7 GB/s of the A100 preset,
// 0.88 x 31.5 GB/s) = 27.7 GB/s instead of 0.88 x 31.5 / 2 = 13.86 GB/s.
TEST(CliSpeed, SharedPcieLinkSlowsOffload) {
    auto offload_s = [](const std::string& extra) {
        const Outcome r = zeromem("compare " + kLlama + " --global-batch 64 --host dgx-a100 --format json" + extra);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        for (const auto& row : nlohmann::json::parse(r.out))
            if (row["option"] == "ZeRO-2 + optimizer cpu") return row["offload_s"].get<double>();
        return -1.0;
    };
    const double shared = offload_s(""), alone = offload_s(" --gpus-per-pcie-link 1");
    ASSERT_GT(alone, 0);
    EXPECT_NEAR(shared / alone, 27.7e9 / (0.88 * 31.5e9 / 2), 1e-6);
}

// `zeromem hosts` lists the presets with the derived rates: dgx-h100's PCIe
// gen5 x16 at 88% of 63 GB/s = 55.4 GB/s, the measured H2D rate of an H200
// node (nvbandwidth 55.43 GB/s, stas00/ml-engineering network/README.md).
TEST(CliSpeed, HostsListing) {
    const Outcome r = zeromem("hosts");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("dgx-a100"), std::string::npos);
    const auto line = r.out.find("dgx-h100");
    ASSERT_NE(line, std::string::npos);
    EXPECT_NE(r.out.find("55.4 GB/s per GPU", line), std::string::npos) << r.out;
}

// compare and the GUI take the batch by one rule (planner.h
// search_global_batch): a micro batch and accumulation the user gave make the
// global batch as DeepSpeed's train_batch_size = micro x accumulation x GPUs
// (4 x 2 x 8 = 64), and flags compare does not use are named in a note
// instead of being dropped silently.
TEST(CliSpeed, CompareTakesTheGlobalBatchFromMicroBatchAndAccumulation) {
    const Outcome r = zeromem("compare --model llama-2-7b --gpus 8 --gpu A100-80GB --micro-batch 4 --grad-accum 2 --stage 2 --verbose");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("global batch 64,"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("--stage / --offload-optimizer / --offload-param are not used"), std::string::npos) << r.err;
    const Outcome d = zeromem("compare --model llama-2-7b --gpus 8 --gpu A100-80GB");
    ASSERT_EQ(d.exit_code, 0) << d.err;
    EXPECT_NE(d.out.find("global batch 128,"), std::string::npos) << d.out;  // 16 per GPU x 8
    const Outcome g = zeromem("compare --model llama-2-7b --gpus 8 --gpu A100-80GB --global-batch 32 --micro-batch 4 --verbose");
    ASSERT_EQ(g.exit_code, 0) << g.err;
    EXPECT_NE(g.out.find("global batch 32,"), std::string::npos) << g.out;
    EXPECT_NE(g.err.find("--micro-batch / --grad-accum are not used"), std::string::npos) << g.err;
}
