// What a user sees by default: warnings always, notes only with --verbose (one line counts the ones left
// out), and compare's default table within 120 columns, its step-time terms under --wide. Expected texts
// are the flags, the config keys of the file given and the column names; counts are those of the lines
// printed, never a figure read off our own output.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

namespace {

using cli::Outcome;
using cli::zeromem;

std::vector<std::string> lines_of(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

size_t count_of(const std::string& s, const std::string& what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
    return n;
}

// DeepSpeed-Chat's step-3 ZeRO-3 config sets keys that change no memory (steps_per_print, logging only):
// each is a note, left out without --verbose and counted in one line; with it every note is printed, as
// many as that line counted.
TEST(CliOutput, NotesOnlyWithVerbose) {
    const std::string args = "estimate --model llama-2-7b --gpus 8 --stage 3 --ds-config " +
                             cli::testdata("check/ds_chat_train_zero3.json");
    const Outcome quiet = zeromem(args);
    ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
    EXPECT_EQ(quiet.err.find("note:"), std::string::npos) << quiet.err;
    const auto at = quiet.err.find(" notes not shown (--verbose shows them)");
    ASSERT_NE(at, std::string::npos) << quiet.err;
    const size_t start = quiet.err.rfind("zeromem: ", at) + std::string("zeromem: ").size();
    const size_t hidden = std::stoul(quiet.err.substr(start, at - start));
    EXPECT_EQ(lines_of(quiet.err).size(), 1u) << quiet.err;

    const Outcome loud = zeromem(args + " --verbose");
    ASSERT_EQ(loud.exit_code, 0) << loud.err;
    EXPECT_NE(loud.err.find("/steps_per_print = 10: no effect on memory"), std::string::npos) << loud.err;
    EXPECT_EQ(count_of(loud.err, "zeromem: note: "), hidden) << loud.err;
    EXPECT_EQ(loud.err.find("not shown"), std::string::npos) << loud.err;
    // the answer itself is the same; --verbose adds to the unit line how the Per GPU rows add up, and says
    // what each reading holds (the readings line) and where a capacity comes from
    const auto quiet_lines = lines_of(quiet.out), loud_lines = lines_of(loud.out);
    ASSERT_EQ(loud_lines.size(), quiet_lines.size()) << loud.out;
    for (size_t i = 0; i + 1 < quiet_lines.size(); ++i) {
        if (quiet_lines[i].rfind("At the ", 0) == 0 || quiet_lines[i].rfind("GPU capacity used: ", 0) == 0) {
            EXPECT_LT(quiet_lines[i].size(), loud_lines[i].size()) << i;
            EXPECT_LE(quiet_lines[i].size(), 220u) << quiet_lines[i];
            continue;
        }
        EXPECT_EQ(loud_lines[i], quiet_lines[i]) << i;
    }
    EXPECT_EQ(quiet_lines.back(), "GiB = 2^30 bytes.");
    EXPECT_EQ(loud_lines.back().rfind("GiB = 2^30 bytes. Per GPU: ", 0), 0u) << loud_lines.back();
}

// A warning is printed with or without --verbose; one note hidden is counted in the singular.
TEST(CliOutput, WarningsAlwaysNotesCounted) {
    const std::string args = "estimate --model llama-2-7b --gpus 8 --stage 3 --host-reserve 4GiB --network ib-ndr400";
    for (const char* extra : {"", " --verbose"}) {
        const Outcome r = zeromem(args + extra);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_NE(r.err.find("zeromem: warning: --host-reserve 4GiB changes nothing without --host-memory"),
                  std::string::npos) << extra << r.err;
    }
    EXPECT_NE(zeromem(args).err.find("zeromem: 1 note not shown (--verbose shows it)"), std::string::npos);
    EXPECT_NE(zeromem(args + " --verbose").err.find("zeromem: note: --network: estimate does not use it"),
              std::string::npos);
}

// Every subcommand that prints notes takes --verbose: fit (a flag it does not use), compare and plan (the
// stage they search themselves), simulate (a setting the replay leaves unchanged), calibrate.
TEST(CliOutput, EverySubcommandWithNotesTakesVerbose) {
    Outcome r = zeromem("fit --model llama-2-7b --gpu A100-80GB --network ib-ndr400");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("note:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("1 note not shown"), std::string::npos) << r.err;
    r = zeromem("fit --model llama-2-7b --gpu A100-80GB --network ib-ndr400 --verbose");
    EXPECT_NE(r.err.find("zeromem: note: --network: fit does not use it"), std::string::npos) << r.err;
    // A flag the search replaces (--stage for compare, plan and fit) changes nothing in the answer the user
    // asked with it: a warning, printed without --verbose.
    for (const char* sub : {"compare", "plan", "fit"}) {
        const std::string args = std::string(sub) + " --model llama-2-7b --gpus 8 --gpu A100-80GB --global-batch 64 --stage 2";
        r = zeromem(args);
        ASSERT_NE(r.exit_code, 2) << r.err;
        EXPECT_NE(r.err.find("zeromem: warning: "), std::string::npos) << sub << r.err;
        EXPECT_NE(r.err.find("--stage / --offload-optimizer / --offload-param are not used"), std::string::npos)
            << sub << r.err;
    }
    for (const char* sub : {"simulate", "calibrate"}) {
        r = zeromem(std::string(sub) + " --help");
        EXPECT_NE(r.out.find("--verbose"), std::string::npos) << sub;
    }
    r = zeromem("check --help");  // check is the linter: its notes are its answer, always printed
    EXPECT_EQ(r.out.find("--verbose"), std::string::npos);
}

// The table's last line is the unit; how the Per GPU rows add up is said with --verbose (or --explain).
TEST(CliOutput, EstimateEndsWithTheUnit) {
    const std::string args = "estimate --model llama-2-7b --gpus 8 --stage 3";
    const Outcome r = zeromem(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto lines = lines_of(r.out);
    ASSERT_FALSE(lines.empty());
    EXPECT_EQ(lines.back(), "GiB = 2^30 bytes.");
    const Outcome v = zeromem(args + " --verbose");
    EXPECT_NE(v.out.find("GiB = 2^30 bytes. Per GPU: the components live in the peak phase"), std::string::npos)
        << v.out;
}

const char* const kCompares[] = {
    "compare --model llama-2-7b --gpus 8 --seq-len 4096 --global-batch 64 --gpu A100-80GB --host-memory 1TiB",
    "compare --model mixtral-8x7b --gpus 8 --gpu A100-80GB --host-memory 1TiB",
};

// compare's default table and the lines around it fit a 120-column terminal; its columns are the
// verdict's and the throughput's, not the step time's terms.
TEST(CliOutput, CompareDefaultFitsOneHundredTwentyColumns) {
    for (const char* args : kCompares) {
        const Outcome r = zeromem(args);
        ASSERT_NE(r.exit_code, 2) << r.err;
        for (const auto& line : lines_of(r.out)) EXPECT_LE(line.size(), 120u) << args << "\n" << line;
        std::string header;
        for (const auto& line : lines_of(r.out))
            if (line.rfind("option ", 0) == 0) header = line;
        ASSERT_FALSE(header.empty()) << r.out;
        for (const char* col : {"micro x acc", "GPU GiB", "host GiB", "fits", "step s", "tokens/s", "MFU%"})
            EXPECT_NE(header.find(col), std::string::npos) << col << "\n" << header;
        for (const char* col : {"compute", "comm", "optim", "offload", "per-param", "other", "TFLOP/s"})
            EXPECT_EQ(header.find(col), std::string::npos) << col << "\n" << header;
        EXPECT_NE(r.out.find("ZeRO-3 + optimizer nvme + params nvme, checkpointing full"), std::string::npos);
    }
}

// --wide adds the step time's terms and TFLOP/s (and the '*' of a calibrated constant); --format json is
// the same with or without it.
TEST(CliOutput, CompareWideShowsTheBreakdown) {
    const std::string args = kCompares[0];
    const Outcome r = zeromem(args + " --wide");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string header;
    for (const auto& line : lines_of(r.out))
        if (line.rfind("option ", 0) == 0) header = line;
    for (const char* col : {"micro x acc", "GPU GiB", "fits", "step s", "compute", "comm", "optim", "offload",
                            "per-param", "other", "tokens/s", "TFLOP/s", "MFU%"})
        EXPECT_NE(header.find(col), std::string::npos) << col << "\n" << header;
    EXPECT_NE(r.out.find("* = the term rests on a calibrated or estimated constant"), std::string::npos) << r.out;
    EXPECT_EQ(zeromem(args + " --format json --wide").out, zeromem(args + " --format json").out);
}

}  // namespace

// --format csv and md for compare, plan, fit and check: one row per option (plan step, finding) with the unit
// in each column's name, the same rows and figures as their JSON (GiB = bytes / 2^30, two decimals).
TEST(CliOutput, CompareFitPlanCheckTakeCsvAndMd) {
    const std::string cmp = "compare --model llama-2-7b --gpus 8 --gpu A100-80GB";
    const auto j = nlohmann::json::parse(zeromem(cmp + " --format json").out);
    const Outcome csv = zeromem(cmp + " --format csv");
    ASSERT_EQ(csv.exit_code, 0) << csv.err;
    const auto rows = lines_of(csv.out);
    ASSERT_EQ(rows.size(), j.size() + 1) << csv.out;
    EXPECT_EQ(rows[0].rfind("option,gradient_checkpointing,micro_batch,grad_accum,", 0), 0u) << rows[0];
    EXPECT_NE(rows[0].find(",per_gpu_GiB,"), std::string::npos);
    char gib[32];
    std::snprintf(gib, sizeof gib, ",%.2f,", j[0]["per_gpu_total"].get<double>() / double(1ull << 30));
    EXPECT_NE(rows[1].find(gib), std::string::npos) << rows[1] << " vs " << gib;
    const Outcome md = zeromem(cmp + " --format md");
    EXPECT_EQ(lines_of(md.out).size(), j.size() + 2) << md.out;  // header, rule, rows
    EXPECT_EQ(md.out.rfind("| option | gradient_checkpointing |", 0), 0u) << md.out;
    const Outcome plan = zeromem("plan --model llama-2-7b --gpus 8 --gpu A100-80GB --format csv");
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    EXPECT_EQ(lines_of(plan.out).back().rfind("winner,", 0), 0u) << plan.out;
    const Outcome fit = zeromem("fit --model llama-2-7b --gpu A100-80GB --format md");
    ASSERT_EQ(fit.exit_code, 0) << fit.err;
    EXPECT_EQ(fit.out.rfind("| option | min_gpus | per_gpu_GiB |", 0), 0u) << fit.out;
    const Outcome chk = zeromem("check " + cli::data("ds_configs/ds_zero3_config.json") + " --format csv");
    EXPECT_EQ(chk.out.rfind("file,line,severity,pointer,message,fix\n", 0), 0u) << chk.out;
}

// compare and plan take --explain: the first-ranked option's (the winner's) estimate with its formulas,
// whose total is the figure the table (the Winner line) gives.
TEST(CliOutput, CompareAndPlanExplainTheirChoice) {
    const Outcome plan = zeromem("plan --model llama-2-7b --gpus 8 --gpu A100-80GB --explain");
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    const auto w = plan.out.find("\nWinner: ");
    ASSERT_NE(w, std::string::npos) << plan.out;
    const auto semi = plan.out.find("; ", w);
    const std::string winner_gib = plan.out.substr(semi + 2, plan.out.find(" GiB per GPU", semi) - semi - 2);
    const auto ex = plan.out.find("The winner (");
    ASSERT_NE(ex, std::string::npos) << plan.out;
    const auto total = plan.out.find("total (peak: ", ex);
    ASSERT_NE(total, std::string::npos);
    const std::string row = plan.out.substr(total, plan.out.find('\n', total) - total);
    EXPECT_EQ(row.substr(row.find_last_of(' ') + 1), winner_gib) << row;
    EXPECT_NE(plan.out.find("[DeepSpeed v0.19.6", ex), std::string::npos);  // the formulas' sources
    const Outcome cmp = zeromem("compare --model llama-2-7b --gpus 8 --gpu A100-80GB --explain");
    ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
    EXPECT_NE(cmp.out.find("The first-ranked option ("), std::string::npos) << cmp.out;
    EXPECT_EQ(zeromem("compare --model llama-2-7b --gpus 8 --gpu A100-80GB --explain --format json").exit_code, 2);
}
