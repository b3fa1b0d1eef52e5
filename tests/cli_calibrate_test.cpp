// End-to-end tests of `zeromem calibrate` on public run logs
// (tests/data/run_logs, sources in its README). Measured figures are the
// log's printed numbers times the printer's unit (see run_log_test.cpp);
// the estimated ones must be what `zeromem estimate` gives for the same
// flags, and the difference measured - estimated.
#include "cli_runner.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

namespace {

using cli::json_of;
using cli::testdata;

constexpr int64_t kGiB = int64_t(1) << 30;
constexpr int64_t kMiB = int64_t(1) << 20;
int64_t gib_h(int64_t hundredths) { return (hundredths * kGiB + 50) / 100; }

// The estimate's per-GPU figure `key` of `phase`.
int64_t phase_figure(const nlohmann::json& est, const std::string& phase, const char* key) {
    for (const auto& p : est["phases"])
        if (p["name"] == phase) return p["per_gpu"][key].get<int64_t>();
    ADD_FAILURE() << "no phase " << phase;
    return 0;
}

// The estimate's allocated bytes of `phase` (torch.cuda.memory_allocated's figure, estimate.h GpuMemory).
int64_t estimated_allocated(const nlohmann::json& est, const std::string& phase) {
    return phase_figure(est, phase, "allocated");
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

    // largest measured peak whose estimate is its own phase's: the same line 11, Max_MA 62.2 GB at backward;
    // the factor that brings it to the measured bytes once the baseline is added
    // (calibration_profile.h activation_scale): micro batch and sequence were not given
    const int64_t peak = gib_h(6220), e_bwd = estimated_allocated(est, "backward");
    const int64_t act = phase_figure(est, "backward", "activations");
    const double linear = double(peak - baseline - (e_bwd - act)) / double(act);
    EXPECT_EQ(p["activation_scale"]["source_line"], 11);
    // ZeRO-3's backward is the larger of the LM head's moment and the blocks' (estimate_backward.cpp
    // zero3_backward_peak); unscaled it peaks at the blocks', scaled at the LM head's, whose activations also
    // hold the logits' gradient and grow faster with the factor, so the factor solved there (calibration_profile.cpp
    // refine_activation_scale) is below the first, linear one and the calibrated backward lands on the measured
    // bytes (below).
    const double factor = p["activation_scale"]["factor"].get<double>();
    EXPECT_LT(factor, linear);
    EXPECT_GT(factor, 1.0);

    const auto cal = cli::zeromem("estimate" + setup + " --calibration '" + profile + "' --format json --verbose");
    ASSERT_EQ(cal.exit_code, 0) << cal.err;
    EXPECT_NE(cal.err.find("from calibration profile"), std::string::npos) << cal.err;
    const auto e = nlohmann::json::parse(cal.out);
    EXPECT_EQ(e["per_gpu"]["process_baseline"], baseline);  // a term of its own, allocated in every phase
    // the modelled context stays (process_terms.cpp cuda_context_figure: lazy module loading, torch >= 1.13,
    // on an Ampere/Hopper part, 400,000,000 B)
    EXPECT_EQ(e["per_gpu"]["cuda_context"], 400000000);
    for (const auto& ph : e["phases"]) {  // fragmentation = share x allocated, to the byte
        const auto& g = ph["per_gpu"];
        const int64_t alloc = g["allocated"].get<int64_t>();  // torch.cuda.max_memory_allocated's figure
        EXPECT_NEAR(double(g["fragmentation"].get<int64_t>()), share * double(alloc), 1.0) << ph["name"];
    }
    // issue 25's acceptance: the calibrated estimate of the same setup lands within 5% of the measured peak
    // (Max_MA 62.2 GB); by construction the backward phase it was fitted at is within the rounding of the
    // scaled activations (a byte per scaled figure)
    const int64_t cal_peak = e["per_gpu"]["allocated"].get<int64_t>();
    EXPECT_LE(std::llabs(cal_peak - peak), peak / 20) << cal_peak;
    EXPECT_NEAR(double(estimated_allocated(e, "backward")), double(peak), 2.0);
    // a flag wins over the profile's term
    const auto flagged = json_of("estimate" + setup + " --calibration '" + profile + "' --fragmentation 0.1");
    EXPECT_NEAR(double(flagged["per_gpu"]["fragmentation"].get<int64_t>()),
                0.1 * double(flagged["per_gpu"]["allocated"].get<int64_t>()), 1.0);
    // another GPU type: refused unless forced
    const std::string other = kMistralRun + " --gpu H100-80GB --calibration '" + profile + "'";
    cli::expect_error("estimate" + other, "--force-calibration");
    const auto forced = cli::zeromem("estimate" + other + " --force-calibration --verbose");
    EXPECT_EQ(forced.exit_code, 0) << forced.err;
    EXPECT_NE(forced.err.find("(--force-calibration)"), std::string::npos) << forced.err;
    std::remove(profile.c_str());
}

// Issue 25's acceptance: on another stage of the same model the profile moves the estimate by its fitted
// terms only. Both estimates at ZeRO-2 with the same fixed fragmentation fraction (the flag wins over the
// profile's share), so in every phase: allocated(calibrated) - allocated(plain) = the process baseline +
// the scaled activations' change, activations(calibrated) = factor x activations(plain) (to_bytes rounds to
// the byte; forward/backward phases are one scaled figure each), every other component the same.
TEST(CliCalibrate, ProfileMovesAnotherStageByItsFittedTermsOnly) {
    const std::string profile = cli::temp_path("profile_stage.json");
    ASSERT_EQ(cli::zeromem("calibrate --log " + testdata("run_logs/L09_ds_see_memory_usage_mistral7b_zero3_step.log") +
                           kMistral + " --output '" + profile + "'").exit_code, 0);
    const auto p = nlohmann::json::parse(cli::slurp(profile));
    const int64_t baseline = p["process_baseline"]["bytes"].get<int64_t>();
    const double factor = p["activation_scale"]["factor"].get<double>();
    ASSERT_GT(baseline, 0);
    const std::string zero2 =
        " --model mistral-7b --gpus 2 --gpu A100-80GB --stage 2 --offload-optimizer cpu --dtype bf16 --fragmentation 0.05";
    const auto plain = json_of("estimate" + zero2);
    const auto cal = json_of("estimate" + zero2 + " --calibration '" + profile + "'");
    ASSERT_EQ(plain["phases"].size(), cal["phases"].size());
    for (std::size_t k = 0; k < plain["phases"].size(); ++k) {
        const auto& a = plain["phases"][k]["per_gpu"];
        const auto& b = cal["phases"][k]["per_gpu"];
        const std::string name = plain["phases"][k]["name"];
        const int64_t act_a = a["activations"].get<int64_t>(), act_b = b["activations"].get<int64_t>();
        EXPECT_NEAR(double(act_b), factor * double(act_a), 1.0) << name;
        EXPECT_EQ(b["allocated"].get<int64_t>() - a["allocated"].get<int64_t>(), baseline + (act_b - act_a)) << name;
        for (const char* key : {"parameters", "gradients", "optimizer_states", "temporary_buffers", "cuda_context",
                                "nccl_buffers", "cublas_workspaces"})
            EXPECT_EQ(a[key], b[key]) << name << " " << key;
    }
    // the header names the terms taken from the profile; a warning says the baseline was fitted at ZeRO-3
    EXPECT_NE(cal["calibration"].get<std::string>().find("process baseline"), std::string::npos) << cal["calibration"];
    const auto table = cli::zeromem("estimate" + zero2 + " --calibration '" + profile + "'");
    EXPECT_NE(table.out.find("\nCalibration: " + profile + " (fitted on A100-80GB"), std::string::npos) << table.out;
    EXPECT_NE(table.err.find("warning: --calibration: " + profile + "'s process baseline"), std::string::npos) << table.err;
    EXPECT_NE(table.err.find("was fitted at ZeRO-3"), std::string::npos) << table.err;
    EXPECT_TRUE(plain["calibration"].is_null());
    // compare, plan and fit name the profile's terms in their headers too
    for (const char* sub : {"compare", "plan", "fit"}) {
        const auto r = cli::zeromem(std::string(sub) + " --model mistral-7b --gpus 2 --gpu A100-80GB --dtype bf16 --calibration '" +
                                    profile + "'");
        EXPECT_NE(r.out.find("Calibration: " + profile + " (fitted on A100-80GB"), std::string::npos) << sub << "\n" << r.out;
    }
    // at another micro batch the factor (fitted where the run's was unknown) is left out, with a warning
    const auto mb = cli::zeromem("estimate" + zero2 + " --micro-batch 4 --calibration '" + profile + "'");
    EXPECT_NE(mb.err.find("warning: --calibration: " + profile + "'s activation factor x"), std::string::npos) << mb.err;
    EXPECT_NE(mb.err.find("is not applied"), std::string::npos) << mb.err;
    // a run whose micro batch and sequence are given: no factor is fitted
    const auto stated = json_of("calibrate --log " + testdata("run_logs/L09_ds_see_memory_usage_mistral7b_zero3_step.log") +
                                kMistral + " --micro-batch 1 --seq-len 2048");
    EXPECT_TRUE(stated["profile"]["activation_scale"].is_null());
    EXPECT_FALSE(stated["profile"]["process_baseline"].is_null());
    // another model (another parameter count, inputs.params): a warning, and its activations are not scaled
    // by the fitted model's factor (found by a tester: the profile's model was never looked at)
    const std::string llama = " --model llama-2-7b --gpus 2 --gpu A100-80GB --stage 3 --offload-optimizer cpu --dtype bf16";
    const auto other_plain = json_of("estimate" + llama);
    const auto other = json_of("estimate" + llama + " --calibration '" + profile + "'");
    for (std::size_t k = 0; k < other["phases"].size(); ++k)
        EXPECT_EQ(other["phases"][k]["per_gpu"]["activations"], other_plain["phases"][k]["per_gpu"]["activations"]) << k;
    const auto warned = cli::zeromem("estimate" + llama + " --calibration '" + profile + "'");
    EXPECT_NE(warned.err.find("warning: --calibration: " + profile + " was fitted on mistral-7b ("), std::string::npos) << warned.err;
    EXPECT_NE(warned.err.find("its activation factor is not applied"), std::string::npos) << warned.err;
    std::remove(profile.c_str());
}

// The whole command on each of the other printers' formats (the texts follow the printers: megatron/utils.py
// report_memory, json.dumps(torch.cuda.memory_stats()), torch/cuda/memory.py memory_summary, nvidia-smi
// --query-gpu=index,memory.used --format=csv, GNU time -v; the run_log_test.cpp cases read them). Their
// peaks count from the start, so each is held against steady_backward and the largest phase up to it; GNU
// time's maximum resident set is one process's, held against the host peak phase per rank.
TEST(CliCalibrate, EveryOtherFormatEndToEnd) {
    const std::string setup = " --model llama-2-7b --gpus 8 --gpu A100-80GB --stage 2 --host-memory 1TiB";
    const auto est = json_of("estimate" + setup);
    auto largest_until_steady = [&](const char* key) {
        int64_t best = 0;
        for (const auto& p : est["phases"]) {
            best = std::max(best, p["per_gpu"][key].get<int64_t>());
            if (p["name"] == "steady_backward") break;
        }
        return best;
    };
    struct Case {
        const char* file;
        std::string text;
        const char* format;
        const char* key;     // the measured figure checked
        int64_t measured;    // its bytes, from the printed number and unit
        const char* est_key; // the estimate's per-GPU figure it is held against
    };
    const Case cases[] = {
        {"megatron.log",
         "[Rank 0] (after 10 iterations) memory (MB) | allocated: 4162.8798828125 | max allocated: 18706.662109375 | "
         "reserved: 23816.0 | max reserved: 23816.0\n",
         "report_memory", "max_allocated", 19615356928, "allocated"},  // 18706.662109375 x 2^20
        {"stats.json",
         "{\"allocated_bytes.all.current\": 4365095936,\n \"allocated_bytes.all.peak\": 19615356928,\n"
         " \"reserved_bytes.all.current\": 24972886016,\n \"reserved_bytes.all.peak\": 24972886016}\n",
         "torch.cuda.memory_stats", "max_reserved", 24972886016, "reserved"},
        {"summary.txt",
         "|                  PyTorch CUDA memory summary, device ID 0                 |\n"
         "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n"
         "| Allocated memory      |   4162 MiB |  18706 MiB |  99999 GiB |  99995 GiB |\n"
         "| GPU reserved memory   |  23816 MiB |  23816 MiB |  23816 MiB |      0 B   |\n",
         "torch.cuda.memory_summary", "max_allocated", 18706 * kMiB, "allocated"},
        {"smi.csv", "index, memory.used [MiB]\n0, 72714 MiB\n", "nvidia-smi", "device_used", 72714 * kMiB, "total"},
    };
    for (const auto& c : cases) {
        const std::string path = cli::temp_path(c.file);
        { std::ofstream(path) << c.text; }
        const auto j = json_of("calibrate --log '" + path + "'" + setup);
        ASSERT_EQ(j["observations"].size(), 1u) << c.file;
        const auto& o = j["observations"][0];
        EXPECT_EQ(o["format"], std::string(c.format)) << c.file;
        EXPECT_EQ(o["phase"], "steady_backward") << c.file;
        EXPECT_EQ(o["measured"][c.key], c.measured) << c.file;
        EXPECT_EQ(o["estimated"][c.key], largest_until_steady(c.est_key)) << c.file;
        EXPECT_EQ(o["difference"][c.key], c.measured - largest_until_steady(c.est_key)) << c.file;
        std::remove(path.c_str());
    }
    // GNU time -v: "Maximum resident set size (kbytes)" is KiB of one process, against the host peak per rank
    const std::string time_v = cli::temp_path("time.txt");
    { std::ofstream(time_v) << "\tCommand being timed: \"python train.py\"\n\tMaximum resident set size (kbytes): 67890123\n"; }
    const auto t = json_of("calibrate --log '" + time_v + "'" + setup);
    ASSERT_EQ(t["observations"].size(), 1u);
    const auto& o = t["observations"][0];
    EXPECT_EQ(o["phase"], est["host_peak_phase"]);
    EXPECT_EQ(o["measured"]["max_host"], int64_t(67890123) * 1024);
    int64_t host_peak = 0;
    for (const auto& p : est["phases"]) host_peak = std::max(host_peak, p["per_node"]["host_memory"].get<int64_t>());
    EXPECT_EQ(o["estimated"]["max_host"], host_peak / 8);  // 8 ranks on the node
    std::remove(time_v.c_str());
}

// L22's out-of-memory message ("31.75 GiB total capacity; 28.28 GiB already allocated; 1.95 GiB free; 28.28
// GiB reserved in total by PyTorch") gives the memory outside the allocator, (total - free) - reserved, and
// nothing else: it is a failed request inside an unfinished phase (calibration_profile.h).
TEST(CliCalibrate, OutOfMemoryMessageFitsOnlyTheMemoryOutsideTheAllocator) {
    const std::string profile = cli::temp_path("profile_oom.json");
    const std::string setup = " --model llama-2-7b --gpus 8 --gpu V100-32GB --stage 2 --dtype fp16";
    const auto j = json_of("calibrate --log " + testdata("run_logs/L22_torch_oom_message_v100_zero2.log") + setup +
                           " --output '" + profile + "'");
    const auto p = nlohmann::json::parse(cli::slurp(profile));
    EXPECT_EQ(j["profile"], p);
    const int64_t outside = gib_h(3175) - gib_h(195) - gib_h(2828);
    EXPECT_EQ(p["outside_allocator"]["bytes"], outside);
    EXPECT_EQ(p["outside_allocator"]["source_line"], 2);
    for (const char* k : {"process_baseline", "reserved_share", "activation_scale"}) EXPECT_TRUE(p[k].is_null()) << k;
    // applied: the context is the run's outside-allocator bytes less the modelled NCCL buffers
    // (ZeRO-2 of a 7B on 32 GB cards does not fit: the run ran out of memory; exit status 1)
    const auto plain = json_of("estimate" + setup, 1);
    const auto cal = json_of("estimate" + setup + " --calibration '" + profile + "'", 1);
    EXPECT_EQ(cal["per_gpu"]["nccl_buffers"], plain["per_gpu"]["nccl_buffers"]);
    EXPECT_EQ(cal["per_gpu"]["cuda_context"], outside - plain["per_gpu"]["nccl_buffers"].get<int64_t>());
    EXPECT_EQ(cal["per_gpu"]["allocated"], plain["per_gpu"]["allocated"]);
    // a flag wins over the profile's term
    const auto flagged = json_of("estimate" + setup + " --calibration '" + profile + "' --cuda-context 1GiB", 1);
    EXPECT_EQ(flagged["per_gpu"]["cuda_context"], kGiB);
    std::remove(profile.c_str());
}

TEST(CliCalibrate, BadProfilesAndOutputWithoutGpu) {
    const std::string bad = cli::temp_path("bad_profile.json");
    { std::ofstream(bad) << "{\"format\": \"zeromem calibration profile 1\", \"fitted_on\": {\"gpu\": 3}}"; }
    cli::expect_error("estimate --params 7e9 --calibration '" + bad + "'", bad + ":1: calibration profile: 'fitted_on.gpu'");
    // each field's error names its line (the JSON key's, else its object's)
    const std::string head = "{\n \"format\": \"zeromem calibration profile 1\",\n \"fitted_on\": {\"gpu\": \"A100-80GB\", "
                             "\"deepspeed\": \"0.19.6\", \"torch\": \"2.8\", \"transformers\": \"5.0\"},\n";
    const std::pair<std::string, std::string> cases[] = {
        {head + " \"activation_scale\": {\n  \"factor\": -2}\n}", ":5: calibration profile: 'activation_scale.factor' is outside"},
        {head + " \"activation_scale\": \"x\"\n}", ":4: calibration profile: 'activation_scale.factor' is not a number"},
        {head + " \"reserved_share\": {\"fraction\": 1.5}\n}", ":4: calibration profile: 'reserved_share.fraction' is outside"},
        {head + " \"inputs\": {\"micro_batch\": \"one\"}\n}", ":4: calibration profile: 'inputs.micro_batch' is not a whole number"},
        {head + " \"process_baseline\": {\"bytes\": 1.5", ":4: calibration profile: malformed or cut-off JSON"},
        {"{\n \"format\": 1\n}", ":2: calibration profile: 'format' is not"},
        // a misspelled key would drop its term without a word
        {head + " \"activation_scal\": {\"factor\": 2}\n}", ":4: calibration profile: unknown key 'activation_scal' (did you mean 'activation_scale'?)"},
        {head + " \"format\": \"zeromem calibration profile 1\"\n}", ":2: calibration profile: the key 'format' is given twice"},
    };
    for (const auto& [text, message] : cases) {
        { std::ofstream(bad) << text; }
        cli::expect_error("estimate --params 7e9 --calibration '" + bad + "'", bad + message);
    }
    // found by a tester: a value nested 100,000 deep crashed the copy of "inputs" (recursion); bytes near
    // 2^63 wrapped the estimate round to "fits"
    const std::string deep = head + " \"inputs\": {\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}\n}";
    const std::pair<std::string, std::string> found[] = {
        {deep, ": calibration profile: nested deeper than 16 levels"},
        {head + " \"process_baseline\": {\"bytes\": 9223372036854775807}\n}", ":4: calibration profile: 'process_baseline.bytes' is beyond +-2^50"},
        {head + " \"inputs\": \"mistral\"\n}", ":4: calibration profile: 'inputs' is not an object"},
        {head + " \"inputs\": {\"micro_batch\": -1}\n}", ":4: calibration profile: 'inputs.micro_batch' is not a whole number in [0, 2^40]"},
        {head + " \"inputs\": {\"params\": \"7B\"}\n}", ":4: calibration profile: 'inputs.params' is not a whole number in [0, 2^50]"},
        {head + " \"inputs\": {\"model\": 7}\n}", ":4: calibration profile: 'inputs.model' is not a string"},
        // a NUL in a key stays in the one-line error (it used to cut the message there)
        {head + " \"a\\u0000b\": 1\n}", ":4: calibration profile: unknown key 'a\\x00b'"},
    };
    for (const auto& [text, message] : found) {
        { std::ofstream(bad) << text; }
        cli::expect_error("estimate --params 7e9 --calibration '" + bad + "'", bad + message);
    }
    std::remove(bad.c_str());
    cli::expect_error("estimate --params 7e9 --calibration ''", "no file name given for the calibration profile (--calibration)");
    cli::expect_error("estimate --params 7e9 --force-calibration", "--force-calibration: given without --calibration");
    cli::expect_error("calibrate --log " + testdata("run_logs/L04_ds_throughput_timer_megatron_polaris.log") +
                          " --params 7e9 --output " + cli::temp_path("never.json"),
                      "--gpu: a calibration profile records the GPU type");
}

// Found by a tester: a FIFO as --log waited for a writer (its first byte was looked at before the file
// was checked); a full disk under --output went unreported.
TEST(CliCalibrate, FifoLogAndFullDisk) {
    const std::string fifo = cli::temp_path("log.fifo");
    std::remove(fifo.c_str());
    ASSERT_EQ(cli::run_shell("mkfifo '" + fifo + "'").exit_code, 0);
    cli::expect_error("calibrate --log '" + fifo + "'" + kMistral, fifo + ": not a regular file");
    std::remove(fifo.c_str());
    cli::expect_error("calibrate --log " + testdata("run_logs/L09_ds_see_memory_usage_mistral7b_zero3_step.log") +
                          kMistral + " --output /dev/full",
                      "--output: cannot write /dev/full");
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
