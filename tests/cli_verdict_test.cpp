// The three-way verdict (fits / tight / does not fit) where users read it: fit's table and JSON, the
// per-phase table of estimate, plan --emit of a tight winner, and rank 0's extras on a line of their
// own. Expected values: the band rule written here (tight when need > capacity x (1 - under),
// verdict_band.h banded_verdict, with `under` from data/verdict_band.json), the H100-80GB preset's
// usable_bytes, published parameter counts, and arithmetic from the DeepSpeed code paths cited.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

namespace {

using cli::json_of;
using cli::Outcome;
using cli::zeromem;

constexpr double kGiB = 1073741824.0;  // 2^30 bytes

nlohmann::json read_data(const std::string& rel) {
    std::ifstream f(std::string(ZEROMEM_SOURCE_DATA_DIR) + "/" + rel);
    return nlohmann::json::parse(f);
}

// The GPU band: the largest underestimate on the ledger, a fraction of the capacity.
double gpu_band() { return read_data("verdict_band.json").at("gpu").at("under").get<double>(); }

// The band rule (verdict_band.h banded_verdict), written out.
std::string banded(uint64_t need, uint64_t cap, double under) {
    if (need > cap) return "oom";
    return double(need) > double(cap) * (1.0 - under) ? "tight" : "fits";
}

std::string gib(double bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", bytes / kGiB);
    return buf;
}

// The line of `text` that starts with `start`, or "".
std::string line_starting(const std::string& text, const std::string& start) {
    for (size_t pos = 0; pos < text.size();) {
        const size_t end = text.find('\n', pos);
        const std::string line = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        if (line.compare(0, start.size(), start) == 0) return line;
        if (end == std::string::npos) break;
        pos = end + 1;
    }
    return "";
}

// The row of fit's table for `option` (the label, then the GPU count: "ZeRO-3" is not "ZeRO-3 + ...").
std::string fit_row(const std::string& text, const std::string& option) {
    for (size_t pos = 0; pos < text.size();) {
        const size_t end = text.find('\n', pos);
        const std::string line = text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
        const size_t next = line.find_first_not_of(' ', option.size());
        if (line.compare(0, option.size(), option) == 0 && next > option.size() && next != std::string::npos &&
            line[next] != '+')
            return line;
        if (end == std::string::npos) break;
        pos = end + 1;
    }
    return "";
}

// fit for a model: each option's fewest GPUs with its verdict there by the band rule against the
// H100-80GB's usable capacity; a tight option also gives the fewest GPUs that fit with the margin
// (more GPUs, fits there), and the rows rank fits, then tight, then none, as compare ranks them.
TEST(CliVerdict, FitShowsTightAndRanksItAfterTheOptionsThatFit) {
    const std::string args = "fit --model llama-3-70b --gpu H100-80GB --host-memory 2TiB";
    const uint64_t cap = read_data("gpus/H100-80GB.json").at("usable_bytes").get<uint64_t>();
    const double under = gpu_band();
    const auto rows = json_of(args, 0);
    int last_rank = 0, tight = 0, fits = 0;
    for (const auto& r : rows) {
        const std::string option = r.at("option");
        int rank = 2;
        if (!r.at("min_gpus").is_null()) {
            const uint64_t need = r.at("per_gpu_total").get<uint64_t>();
            EXPECT_EQ(r.at("verdict"), banded(need, cap, under)) << option;
            rank = r.at("verdict") == "fits" ? 0 : 1;
            if (rank == 0) {
                EXPECT_EQ(r.at("min_gpus_with_margin"), r.at("min_gpus")) << option;
            } else if (!r.at("min_gpus_with_margin").is_null()) {
                EXPECT_GT(r.at("min_gpus_with_margin").get<int64_t>(), r.at("min_gpus").get<int64_t>()) << option;
            }
        } else {
            EXPECT_TRUE(r.at("verdict").is_null()) << option;
        }
        EXPECT_GE(rank, last_rank) << option << " ranked after a worse option";
        last_rank = rank;
        tight += rank == 1;
        fits += rank == 0;
    }
    ASSERT_GT(tight, 0);
    ASSERT_GT(fits, 0);
    // The table says it in the row of each tight option, and what tight means below.
    const Outcome t = zeromem(args);
    ASSERT_EQ(t.exit_code, 0) << t.err;
    for (const auto& r : rows) {
        if (r.at("verdict") != "tight") continue;
        const std::string line = fit_row(t.out, r.at("option").get<std::string>());
        ASSERT_FALSE(line.empty()) << t.out;
        EXPECT_NE(line.find(" tight "), std::string::npos) << line;
    }
    EXPECT_NE(t.out.find("tight: fits, but inside the error band: on "), std::string::npos) << t.out;
    EXPECT_NE(t.out.find("\"with margin\" is the fewest GPUs that fits outside it"), std::string::npos) << t.out;
}

// fit's largest model (no architecture, ZeRO paper convention, 64 GPUs of 32 GB): at stage 3 each GPU
// holds 2Psi/N + 2Psi/N + 12Psi/N (estimate.cpp estimate_paper, each rounded), every largest model is
// tight (the margin is zero), and the largest with the margin is the largest P whose states plus the
// activation allowance of a dense decoder of P parameters (activation_allowance.cpp: L = round(cbrt(P /
// (12 x 128^2))), h = round(sqrt(P / (12 L))), flash attention: 34 sbh per layer + 5 sbh, s = 2048,
// b = 1; Korthikanti et al. 2022 Table 2) fit in 32e9 B.
TEST(CliVerdict, FitLargestModelGivesTheLargestThatLeavesRoomForActivations) {
    const auto rows = json_of("fit --gpus 64 --gpu-memory 32GB --convention paper", 0);
    const double cap = 32e9;
    auto need = [](uint64_t p) {
        const double P = double(p);
        return std::llround(2 * P / 64) + std::llround(2 * P / 64) + std::llround(12 * P / 64);
    };
    auto allowance = [](uint64_t p) {
        const double P = double(p);
        const long long L = std::llround(std::cbrt(P / (12.0 * 128.0 * 128.0)));
        const long long h = std::llround(std::sqrt(P / (12.0 * double(L))));
        const double sbh = 2048.0 * double(h);
        return std::llround(double(L * std::llround(34 * sbh)) + 5 * sbh);
    };
    bool seen = false;
    for (const auto& r : rows) {
        if (r.at("option") != "ZeRO-3") continue;
        seen = true;
        EXPECT_EQ(r.at("verdict"), "tight");
        const uint64_t m = r.at("max_params_with_margin").get<uint64_t>();
        EXPECT_LE(double(need(m) + allowance(m)), cap);
        EXPECT_GT(double(need(m + 1) + allowance(m + 1)), cap);
        EXPECT_LT(m, r.at("max_params").get<uint64_t>());
    }
    EXPECT_TRUE(seen);
    const Outcome t = zeromem("fit --gpus 64 --gpu-memory 32GB --convention paper");
    EXPECT_NE(t.out.find("tight: fits, but the margin does not cover the activations a dense decoder of that size"),
              std::string::npos) << t.out;
}

// estimate's phase table in the words of the overall verdict, by the same rule: a capacity just under
// the peak makes the peak phase "does not fit (short by X GiB)" and every other phase fits or is
// tight by the band rule; at 0.1% above the peak the overall line says TIGHT and so does its phase.
TEST(CliVerdict, PhaseTableUsesTheThreeWordsOfTheVerdict) {
    const std::string base = "estimate --model llama-2-7b --gpus 8 --stage 2 --seq-len 2048";
    const auto j = json_of(base);
    const uint64_t peak = j.at("per_gpu").at("total").get<uint64_t>();
    const double under = gpu_band();
    for (const uint64_t cap : {peak + (peak >> 10), peak - (uint64_t(1) << 30)}) {
        const std::string with_cap = base + " --gpu-memory " + std::to_string(cap) + "B";
        const Outcome r = zeromem(with_cap);
        ASSERT_TRUE(r.exit_code == 1 || r.exit_code == 4) << r.err;
        const auto phases = json_of(with_cap, cli::kAnswered).at("phases");
        for (const auto& p : phases) {
            const uint64_t need = p.at("per_gpu").at("total").get<uint64_t>();
            const std::string v = banded(need, cap, under);
            EXPECT_EQ(p.at("gpu_verdict"), v);
            const std::string words = v == "oom" ? "does not fit (short by " + gib(double(need) - double(cap)) + " GiB)" : v;
            const std::string line = line_starting(r.out, p.at("name").get<std::string>() + " ");
            ASSERT_FALSE(line.empty()) << r.out;
            EXPECT_NE(line.find("GPU " + words), std::string::npos) << line;
            EXPECT_EQ(line.find("OOM by"), std::string::npos) << line;
        }
        if (r.exit_code == 4) {
            EXPECT_NE(r.out.find("GPU: TIGHT"), std::string::npos) << r.out;
            EXPECT_NE(line_starting(r.out, j.at("peak_phase").get<std::string>() + " ").find("GPU tight"),
                      std::string::npos);
        }
    }
}

// plan --emit never writes a tight winner without saying so. Without an architecture (--params 7e9)
// tight means the margin does not cover the activation allowance: a dense decoder of 7e9 parameters
// has L = round(cbrt(7e9 / 196608)) = 33, h = round(sqrt(7e9 / 396)) = 4204; at s = 8192, b = 1, no
// checkpointing, flash attention it stores 33 x 34 sbh + 5 sbh = 1807 x 8192 x 4204 / 2^30 = 36.15 GiB
// (the winner runs without checkpointing), far above what a 3 GiB GPU leaves free, while every
// option's states alone fit.
TEST(CliVerdict, PlanEmitOfATightWinnerSaysSo) {
    const std::string path = cli::temp_path("plan_emit_ds.json");
    std::remove(path.c_str());
    const std::string args = "plan --params 7e9 --gpus 8 --gpu A100-80GB --gpu-memory 3GiB --host-memory 1TiB "
                             "--seq-len 8192 --global-batch 8";
    const Outcome r = zeromem(args + " --emit " + path);
    ASSERT_EQ(r.exit_code, 4) << r.err;  // answered, tight (README "Exit status")
    EXPECT_NE(r.err.find("warning: the winner is tight: the margin does not cover the activation allowance of "
                         "36.15 GiB"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("plan found no option that fits with the margin, and it is what --emit writes"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("The winner is tight: the margin does not cover the activation allowance"),
              std::string::npos) << r.out;
    EXPECT_NE(r.err.find("wrote " + path), std::string::npos) << r.err;
    std::ifstream emitted(path);
    EXPECT_TRUE(emitted.good());
    const auto plan = json_of(args, 4);
    EXPECT_EQ(plan.at("winner").at("tight"), true);
    std::remove(path.c_str());
    // A winner with the margin (80 GiB) gets no such warning.
    const Outcome ok = zeromem("plan --params 7e9 --gpus 8 --gpu A100-80GB --host-memory 1TiB --seq-len 2048 "
                               "--global-batch 8 --emit " + path);
    ASSERT_EQ(ok.exit_code, 0) << ok.err;
    EXPECT_EQ(ok.err.find("tight"), std::string::npos) << ok.err;
    std::remove(path.c_str());
}

// compare's exit status follows its rows (README "Exit status"): 0 when an option fits with the margin,
// 4 when every option that fits is tight, 1 when none fits. The 3 GiB GPU of the plan case above leaves
// every option's states room but not the activation allowance (activation_allowance.cpp, L = 33,
// h = 4204, s = 8192, b = 1, flash attention): 33 x 34 sbh + 5 sbh = 36.15 GiB without checkpointing and
// 33 x 2 sbh + one recomputed layer 34 sbh + 5 sbh = 105 x 8192 x 4204 B = 3.37 GiB with full
// checkpointing, both above 3 GiB: every option that fits is tight, exit 4. The 80 GiB one fits ZeRO-3
// (2 + 2 + 12 B x 7e9 / 8 = 13.04 GiB of states) with room to spare at s = 2048: exit 0.
TEST(CliVerdict, CompareExitStatusFollowsItsRows) {
    auto expected = [](const nlohmann::json& rows) {
        bool fits = false, with_margin = false;
        for (const auto& c : rows) {
            fits = fits || c.at("fits").get<bool>();
            with_margin = with_margin || (c.at("fits").get<bool>() && !c.at("tight").get<bool>());
        }
        return with_margin ? 0 : fits ? 4 : 1;
    };
    for (const char* mem : {"--gpu-memory 3GiB", "--gpu-memory 1GiB", ""}) {
        const std::string args = std::string("compare --params 7e9 --gpus 8 --gpu A100-80GB --host-memory 1TiB "
                                             "--seq-len 8192 --global-batch 8 ") + mem;
        const Outcome r = zeromem(args + " --format json");
        const auto rows = nlohmann::json::parse(r.out);
        EXPECT_EQ(r.exit_code, expected(rows)) << mem;
        EXPECT_EQ(zeromem(args).exit_code, r.exit_code) << mem;  // the table gives the same status
        if (std::string(mem) == "--gpu-memory 3GiB") {
            EXPECT_EQ(r.exit_code, 4);
        }
    }
    EXPECT_EQ(zeromem("compare --params 7e9 --gpus 8 --gpu A100-80GB --host-memory 1TiB --seq-len 2048 "
                      "--global-batch 8").exit_code, 0);
}

// plan ranks tight after fitting also once the replayed fragmentation allowance re-evaluates its grid
// (planner.cpp first_that_replays): llama-2-7b on 8 x A100-40GB, global batch 64, where step 11's
// micro batch 8 under ZeRO-2 is tight and step 12's winner fits with the margin, by the band rule
// against the A100-40GB's usable capacity, and no tight warning is printed. (llama-2-13b, the case
// before the RMSNorms' fp32 saved tensors were counted, no longer reaches a tight micro batch 8.)
TEST(CliVerdict, PlanPrefersAWinnerWithTheMarginAfterTheReplay) {
    const std::string args = "plan --model llama-2-7b --gpus 8 --gpu A100-40GB --global-batch 64";
    const auto j = json_of(args, 0);
    const uint64_t cap = read_data("gpus/A100-40GB.json").at("usable_bytes").get<uint64_t>();
    const auto& w = j.at("winner");
    EXPECT_EQ(w.at("tight"), false);
    EXPECT_EQ(banded(w.at("per_gpu_total").get<uint64_t>(), cap, gpu_band()), "fits");
    bool some_step_tight = false;  // the walk met a tight fit on its way: the ranking had a choice to make
    for (const auto& st : j.at("steps"))
        if (st.contains("candidate") && st.at("candidate").at("tight") == true) some_step_tight = true;
    EXPECT_TRUE(some_step_tight);
    const Outcome r = zeromem(args);
    EXPECT_EQ(r.err.find("tight"), std::string::npos) << r.err;
}

// Rank 0's extras: with stage3_gather_16bit_weights_on_model_save at ZeRO-3, DeepSpeed's engine.py
// _zero3_consolidated_16bit_state_dict copies every gathered module to the CPU on rank 0 only:
// 2 B x P = 2 x 6,738,415,616 (llama-2-7b, published count) = 13,476,831,232 B = 12.55 GiB of host
// RAM in checkpoint_save, on rank 0's node. A node without rank 0 peaks at its phases' host RAM with
// that taken out of checkpoint_save. The gather itself (GatheredParameters, one module at a time) is on
// every rank: the largest module, the 32000 x 4096 embedding, 2 B x 131,072,000 = 0.24 GiB per GPU.
TEST(CliVerdict, RankZeroExtrasAreALineOfTheirOwn) {
    const std::string base = "estimate --model llama-2-7b --gpus 16 --nodes 2 --gpu A100-80GB --host-memory 1TiB --stage 3";
    const uint64_t state_dict = 2ull * 6738415616ull;
    const auto j = json_of(base + " --gather-on-save");
    const auto& r0 = j.at("rank0_only");
    ASSERT_TRUE(r0.is_object()) << j.dump();
    EXPECT_EQ(r0.at("phase"), "checkpoint_save");
    EXPECT_EQ(r0.at("host_memory").get<uint64_t>(), state_dict);
    EXPECT_EQ(r0.at("gathered_module_gpu_every_rank").get<uint64_t>(), 2ull * 32000 * 4096);
    uint64_t other = 0;
    std::string other_phase;
    for (const auto& p : j.at("phases")) {
        uint64_t h = p.at("per_node").at("host_memory").get<uint64_t>();
        if (p.at("name") == "checkpoint_save") h -= state_dict;
        if (other_phase.empty() || h > other) {
            other = h;
            other_phase = p.at("name");
        }
    }
    EXPECT_EQ(r0.at("other_nodes_host_peak").get<uint64_t>(), other);
    EXPECT_EQ(r0.at("other_nodes_host_peak_phase"), other_phase);
    const Outcome t = zeromem(base + " --gather-on-save");
    ASSERT_EQ(t.exit_code, 0) << t.err;
    const std::string line = line_starting(t.out, "rank 0 only: ");
    ASSERT_FALSE(line.empty()) << t.out;
    EXPECT_NE(line.find("rank 0 only: 12.55 GiB of host RAM in checkpoint_save, the consolidated 16-bit state dict"),
              std::string::npos) << line;
    EXPECT_NE(line.find("a node without rank 0 peaks at " + gib(double(other)) + " GiB (" + other_phase + ")"),
              std::string::npos) << line;
    EXPECT_NE(line.find("the largest module: 0.24 GiB per GPU) is on every rank's GPU"), std::string::npos) << line;
    const Outcome ex = zeromem(base + " --gather-on-save --explain");
    EXPECT_NE(ex.out.find("host (rank 0 only, while saving a checkpoint): consolidated 16-bit state dict on rank 0"),
              std::string::npos);
    EXPECT_NE(line_starting(ex.out, "rank 0 only: "), "");
    // One node: no other node to compare; without the gather nothing is rank 0's alone.
    const Outcome one = zeromem("estimate --model llama-2-7b --gpus 8 --stage 3 --gather-on-save");
    EXPECT_NE(line_starting(one.out, "rank 0 only: ").find("the per-node figure is rank 0's node, the job's one node"),
              std::string::npos) << one.out;
    EXPECT_TRUE(json_of(base).at("rank0_only").is_null());
    EXPECT_EQ(zeromem(base).out.find("rank 0 only"), std::string::npos);
}

}  // namespace

// "To fit" is the fastest combination of the recipe's steps that fits (advice.h advise), with the steps named
// and a pointer to plan; the flags it prints, added to the same command line, make estimate say it fits.
TEST(CliVerdict, ToFitPrintsFlagsThatFitAndNamesTheRecipeSteps) {
    const std::string args = "estimate --model llama-3-8b --gpus 4 --gpu A100-40GB --stage 2 --seq-len 4096";
    const cli::Outcome r = cli::zeromem(args);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    const auto at = r.out.find("To fit the GPU: ");
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_NE(line.find("recipe step"), std::string::npos) << line;
    EXPECT_NE(line.find("`zeromem plan` also tunes"), std::string::npos) << line;
    const std::string flags = line.substr(16, line.find(" (") - 16);  // "--gradient-checkpointing full --stage 3 ..."
    ASSERT_EQ(flags.rfind("--", 0), 0u) << line;
    // The advice's --stage replaces the one given (a flag is given once).
    const std::string rest = flags.find("--stage") != std::string::npos
                                 ? "estimate --model llama-3-8b --gpus 4 --gpu A100-40GB --seq-len 4096"
                                 : args;
    const cli::Outcome fixed = cli::zeromem(rest + " " + flags);
    EXPECT_TRUE(fixed.exit_code == 0 || fixed.exit_code == 4) << flags << "\n" << fixed.out;
}
