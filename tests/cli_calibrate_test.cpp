// End-to-end tests of `zeromem calibrate` on public run logs
// (tests/data/run_logs, sources in its README). Measured figures are the
// log's printed numbers times the printer's unit (see run_log_test.cpp);
// the estimated ones must be what `zeromem estimate` gives for the same
// flags, and the difference measured - estimated.
#include "cli_runner.h"

#include <fstream>
#include <map>
#include <string>

namespace {

using cli::json_of;
using cli::testdata;

constexpr int64_t kGiB = int64_t(1) << 30;
constexpr int64_t kMiB = int64_t(1) << 20;
int64_t gib_h(int64_t hundredths) { return (hundredths * kGiB + 50) / 100; }

// The estimate's allocated bytes of `phase` (total - cuda_context - fragmentation).
int64_t estimated_allocated(const nlohmann::json& est, const std::string& phase) {
    for (const auto& p : est["phases"])
        if (p["name"] == phase) {
            const auto& g = p["per_gpu"];
            return g["total"].get<int64_t>() - g["cuda_context"].get<int64_t>() - g["fragmentation"].get<int64_t>();
        }
    ADD_FAILURE() << "no phase " << phase;
    return 0;
}

// L09's setup: Mistral 7B, 2x A100-SXM 80GB, ZeRO-3 + CPU offload, bf16
// (micro batch and sequence not stated: the defaults, 1 and 2048).
const std::string kMistralRun = " --model mistral-7b --gpus 2 --stage 3 --offload-optimizer cpu --dtype bf16";
const std::string kMistral = kMistralRun + " --gpu A100-80GB";

TEST(CliCalibrate, SeeMemoryUsageTracePhaseByPhase) {
    const auto j = json_of("calibrate --log " + testdata("run_logs/L09_ds_see_memory_usage_mistral7b_zero3_step.log") + kMistral);
    const auto est = json_of("estimate" + kMistral);
    const auto& obs = j["observations"];
    ASSERT_EQ(obs.size(), 6u);
    const char* phases[] = {"load", "forward", "forward", "backward", "backward", "optimizer_step"};
    for (std::size_t k = 0; k < 6; ++k) EXPECT_EQ(obs[k]["phase"], phases[k]) << obs[k]["message"];
    const auto& fwd = obs[1];  // "Engine after forward": MA 61.23, Max_MA 61.48, CA 61.83, Max_CA 62 GB
    EXPECT_EQ(fwd["source_line"], 5);
    EXPECT_EQ(fwd["measured"]["allocated"], gib_h(6123));
    EXPECT_EQ(fwd["measured"]["max_allocated"], gib_h(6148));
    EXPECT_EQ(fwd["measured"]["reserved"], gib_h(6183));
    EXPECT_EQ(fwd["measured"]["max_reserved"], 62 * kGiB);
    EXPECT_EQ(fwd["measured"]["host"], gib_h(15009));
    const int64_t e_fwd = estimated_allocated(est, "forward");
    EXPECT_EQ(fwd["estimated"]["max_allocated"], e_fwd);
    EXPECT_EQ(fwd["difference"]["max_allocated"], gib_h(6148) - e_fwd);
    EXPECT_FALSE(fwd["terms"].empty());
    // "Engine after backward": Max_MA 62.2 GB is the backward's own peak.
    EXPECT_EQ(obs[3]["measured"]["max_allocated"], gib_h(6220));
    EXPECT_EQ(obs[3]["estimated"]["max_allocated"], estimated_allocated(est, "backward"));
}

TEST(CliCalibrate, TrainerDeltasAgainstTheEstimateLessLoad) {
    // L18, ZeRO-2 block: the reporter's model is not stated; a 1.3B model on 2 GPUs is assumed.
    const std::string setup = " --model opt-1.3b --gpus 2 --stage 2";
    const auto j = json_of("calibrate --log " + testdata("run_logs/L18_hf_trainer_memory_metrics_zero2_zero3.log") + setup);
    const auto est = json_of("estimate" + setup);
    const auto& z2 = j["observations"][0];
    EXPECT_EQ(z2["phase"], "steady_backward");
    EXPECT_EQ(z2["measured"]["allocated"], 1635 * kMiB);
    EXPECT_EQ(z2["measured"]["max_allocated"], (1635 + 8862) * kMiB);
    const int64_t load = estimated_allocated(est, "load");
    EXPECT_EQ(z2["estimated"]["allocated"], estimated_allocated(est, "optimizer_step") - load);
    EXPECT_EQ(j["observations"][1]["measured"]["allocated"], -399 * kMiB);
}

TEST(CliCalibrate, OutOfMemoryMessageMeetsTheFirstOverflowingPhase) {
    // L22: LLaMA-7B full fine-tune, 8x V100 32GB, ZeRO-2, micro batch 1; OOM in
    // the Adam update. llama-2-7b has LLaMA-7B's shape; the maintainer: ZeRO-2
    // needs 80 GB cards for this.
    const std::string setup = " --model llama-2-7b --gpus 8 --gpu V100-32GB --stage 2 --dtype fp16 --micro-batch 1";
    const auto est = json_of("estimate" + setup, 1);
    ASSERT_FALSE(est["first_oom_phase"].is_null());
    const auto j = json_of("calibrate --log " + testdata("run_logs/L22_torch_oom_message_v100_zero2.log") + setup);
    const auto& o = j["observations"][0];
    EXPECT_EQ(o["phase"], est["first_oom_phase"]);
    EXPECT_EQ(o["measured"]["allocated"], gib_h(2828));
    EXPECT_EQ(o["measured"]["reserved"], gib_h(2828));
    EXPECT_EQ(o["measured"]["device_used"], gib_h(3175) - gib_h(195));
}

TEST(CliCalibrate, SeveralLogsAndTheThroughputTimer) {
    const auto j = json_of("calibrate --log " + testdata("run_logs/L04_ds_throughput_timer_megatron_polaris.log") +
                           " --log " + testdata("run_logs/L07_ds_see_memory_usage_zero3_optimizer_init.log") +
                           " --params 6.7e9 --gpus 8 --stage 2");
    ASSERT_EQ(j["observations"].size(), 2u + 4u);
    EXPECT_EQ(j["observations"][0]["phase"], "steady_backward");
    EXPECT_EQ(j["observations"][0]["measured"]["max_allocated"], gib_h(1952));
    EXPECT_EQ(j["observations"][5]["phase"], "load");  // "After initializing ZeRO optimizer"
}

TEST(CliCalibrate, TableSaysItsUnit) {
    const auto r = cli::zeromem("calibrate --log " + testdata("run_logs/L09_ds_see_memory_usage_mistral7b_zero3_step.log") + kMistral);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("GiB (2^30 bytes)"), std::string::npos);
    EXPECT_NE(r.out.find("Engine after forward"), std::string::npos);
    EXPECT_NE(r.out.find("61.48"), std::string::npos);  // Max_MA as printed
}

// The profile of L09's run, fitted and applied. Its fields are arithmetic on
// the log's numbers and the plain estimate of the same setup.
TEST(CliCalibrate, ProfileFittedFromTheTraceIsAppliedByEstimate) {
    const std::string profile = cli::temp_path("profile.json");
    const std::string setup = kMistral;
    const auto j = json_of("calibrate --log " + testdata("run_logs/L09_ds_see_memory_usage_mistral7b_zero3_step.log") +
                           setup + " --output '" + profile + "'");
    const auto est = json_of("estimate" + setup);
    const auto p = nlohmann::json::parse(cli::slurp(profile));
    EXPECT_EQ(j["profile"], p);
    EXPECT_EQ(p["format"], "zeromem calibration profile 1");
    EXPECT_EQ(p["fitted_on"]["gpu"], "A100-80GB");
    EXPECT_EQ(p["fitted_on"]["deepspeed"], "0.19.6");
    EXPECT_EQ(p["inputs"]["stage"], 3);
    // earliest reading, "Engine before forward" (line 2): MA 20.83 GB against the load phase
    const int64_t baseline = gib_h(2083) - estimated_allocated(est, "load");
    EXPECT_EQ(p["process_baseline"]["source_line"], 2);
    EXPECT_EQ(p["process_baseline"]["bytes"], baseline);
    // largest peak, "Engine after backward" (line 11): Max_MA 62.2 GB, CA 65.09 GB
    EXPECT_EQ(p["reserved_share"]["source_line"], 11);
    const double share = double(gib_h(6509) - gib_h(6220)) / double(gib_h(6220));
    EXPECT_DOUBLE_EQ(p["reserved_share"]["fraction"].get<double>(), share);

    const auto cal = cli::zeromem("estimate" + setup + " --calibration '" + profile + "' --format json --verbose");
    ASSERT_EQ(cal.exit_code, 0) << cal.err;
    EXPECT_NE(cal.err.find("from calibration profile"), std::string::npos) << cal.err;
    const auto e = nlohmann::json::parse(cal.out);
    // the modelled context plus the fitted baseline; the model's context (process_terms.cpp
    // cuda_context_figure): lazy module loading (torch >= 1.13) on an Ampere/Hopper part, 400,000,000 B
    EXPECT_EQ(e["per_gpu"]["cuda_context"], 400000000 + baseline);
    for (const auto& ph : e["phases"]) {  // fragmentation = share x allocated, to the byte
        const auto& g = ph["per_gpu"];
        const int64_t alloc = g["allocated"].get<int64_t>();  // torch.cuda.max_memory_allocated's figure
        EXPECT_NEAR(double(g["fragmentation"].get<int64_t>()), share * double(alloc), 1.0) << ph["name"];
    }
    // a flag wins over the profile's term
    const auto flagged = json_of("estimate" + setup + " --calibration '" + profile + "' --cuda-context 1GiB");
    EXPECT_EQ(flagged["per_gpu"]["cuda_context"], kGiB);
    // another GPU type: refused unless forced
    const std::string other = kMistralRun + " --gpu H100-80GB --calibration '" + profile + "'";
    cli::expect_error("estimate" + other, "--force-calibration");
    const auto forced = cli::zeromem("estimate" + other + " --force-calibration --verbose");
    EXPECT_EQ(forced.exit_code, 0) << forced.err;
    EXPECT_NE(forced.err.find("(--force-calibration)"), std::string::npos) << forced.err;
    std::remove(profile.c_str());
}

TEST(CliCalibrate, BadProfilesAndOutputWithoutGpu) {
    const std::string bad = cli::temp_path("bad_profile.json");
    { std::ofstream(bad) << "{\"format\": \"zeromem calibration profile 1\", \"fitted_on\": {\"gpu\": 3}}"; }
    cli::expect_error("estimate --params 7e9 --calibration '" + bad + "'", bad + ": calibration profile: 'fitted_on.gpu'");
    std::remove(bad.c_str());
    cli::expect_error("estimate --params 7e9 --force-calibration", "--force-calibration: given without --calibration");
    cli::expect_error("calibrate --log " + testdata("run_logs/L04_ds_throughput_timer_megatron_polaris.log") +
                          " --params 7e9 --output " + cli::temp_path("never.json"),
                      "--gpu: a calibration profile records the GPU type");
}

TEST(CliCalibrate, BadLogsAreOneLineErrors) {
    const std::string bad = cli::temp_path("cut.log");
    {
        std::ofstream(bad) << "[x] [INFO] [utils.py:802:see_memory_usage] before forward\n"
                              "[x] [INFO] [utils.py:803:see_memory_usage] MA 0.31 GB         Max_MA 12.99\n";
    }
    const auto r = cli::zeromem("calibrate --log '" + bad + "' --params 7e9");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find(bad + ":2: see_memory_usage:"), std::string::npos) << r.err;
    std::remove(bad.c_str());
    cli::expect_error("calibrate --log /nonexistent/run.log --params 7e9", "/nonexistent/run.log");
    cli::expect_error("calibrate --params 7e9", "--log");
}

// zeromem simulate --memory-snapshot, read back by calibrate: the snapshot's
// allocated and reserved are the replay's at its last event (sim_writers.h:
// "segments" is the allocator state after the last event), its trace's
// reserved peak the replay's peak_reserved, and the largest blocks carry the
// frames the simulator wrote on their allocs ("<phase>:<event term>"), each
// naming the estimator component of its term.
TEST(CliCalibrate, SimulatorSnapshotRoundTrip) {
    const std::string snap = cli::temp_path("round.pickle");
    const std::string setup = " --hf-config " + testdata("hf_configs/gpt2.json") + " --gpus 2 --stage 2 --seq-len 1024";
    const auto sim = json_of("simulate" + setup + " --memory-snapshot '" + snap + "'");
    const auto j = json_of("calibrate --log '" + snap + "'" + setup);
    std::remove(snap.c_str());
    ASSERT_EQ(j["observations"].size(), 1u);
    const auto& o = j["observations"][0];
    EXPECT_EQ(o["format"], "torch memory snapshot");
    EXPECT_EQ(o["phase"], "steady_backward");
    EXPECT_EQ(o["measured"]["allocated"], sim["timeline"].back()["allocated"]);
    EXPECT_EQ(o["measured"]["reserved"], sim["timeline"].back()["reserved"]);
    EXPECT_EQ(o["measured"]["max_reserved"], sim["peak_reserved"]);
    const std::map<std::string, std::string> component = {{"fp32_partition", "master_weights"}, {"exp_avg", "momentum"},
                                                          {"exp_avg_sq", "variance"}, {"bit16_groups_flat", "parameters"}};
    std::size_t named = 0;
    ASSERT_FALSE(o["blocks"].empty());
    for (const auto& b : o["blocks"]) {
        ASSERT_TRUE(b["frame"].is_string()) << b;
        EXPECT_TRUE(b["frame_from_trace"].get<bool>());  // the simulator's blocks carry no frames of their own
        const std::string frame = b["frame"];
        const std::string term = frame.substr(frame.rfind(':') + 1);
        if (!component.count(term)) continue;
        ++named;
        EXPECT_EQ(b["term"], component.at(term)) << frame;
        EXPECT_EQ(b["matched_by"], "frame");
    }
    EXPECT_EQ(named, 4u);  // ZeRO-2 after a step: the 16-bit flat buffer, the fp32 partition, Adam's m and v
}

TEST(CliCalibrate, SnapshotTableAndRefusedPickle) {
    const auto r = cli::zeromem("calibrate --log " + testdata("snapshots/python_p4.pickle") + " --model llama-2-7b --gpus 8 --stage 2");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("snapshot, device 0"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("adamw.py:150:_init_group"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("model.py:7:embed (from the trace)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("note: "), std::string::npos) << r.out;
    const std::string evil = cli::temp_path("evil.pickle");
    std::ofstream(evil, std::ios::binary) << std::string("\x80\x02" "cposix\nsystem\nX\x04\x00\x00\x00true\x85R.", 28);
    cli::expect_error("calibrate --log '" + evil + "' --params 7e9", evil + ": byte 2: pickle: GLOBAL (0x63) refused");
    std::remove(evil.c_str());
}

}  // namespace
