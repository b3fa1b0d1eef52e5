// `zeromem measure` / `validate` input checks that need no MPI job: bad
// flags refused at parse time, and `validate --measurement` (which starts
// no MPI) refusing unreadable or mismatched measurement files. Each bad
// input exits 2 with one line naming the option; the expected texts are the
// option names and the values written by the test, never our own output.
#include "../cli_runner.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace {

using Result = cli::Outcome;

std::string scratch(const std::string& stem) { return cli::temp_path("cli_" + stem); }

// Runs the zeromem binary directly (no mpirun).
Result run(const std::string& args) { return cli::zeromem(args); }

size_t lines(const std::string& s) {
    size_t n = 0;
    for (char c : s) n += c == '\n';
    return n;
}

void expect_refused(const Result& r, const std::string& option) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(option), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_EQ(r.err.find("MPI_Abort"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("aborting"), std::string::npos) << r.err;
}

const std::string kModel = "--backend host --model llama-2-7b --seq-len 64 ";

TEST(MeasureFlags, LayersMustBePositive) {
    for (const char* v : {"0", "-1"}) {
        expect_refused(run("measure " + kModel + "--layers " + v), "--layers");
        expect_refused(run("validate " + kModel + "--layers " + v), "--layers");
    }
}

TEST(MeasureFlags, PhaseTimeoutMustBePositive) {
    for (const char* v : {"0", "-5"}) expect_refused(run("measure " + kModel + "--layers 1 --phase-timeout " + v), "--phase-timeout");
}

TEST(ValidateMeasurement, DirectoryEmptyAndNotJsonAreBadInput) {
    const std::string base = "validate " + kModel + "--layers 2 --gpus 2 --measurement ";
    Result r = run(base + ::testing::TempDir());
    expect_refused(r, "--measurement");
    EXPECT_NE(r.err.find("directory"), std::string::npos) << r.err;

    const std::string empty = scratch("empty.json");
    std::ofstream(empty).close();
    r = run(base + empty);
    expect_refused(r, "--measurement");
    EXPECT_NE(r.err.find("empty"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("parse_error"), std::string::npos) << r.err;

    const std::string junk = scratch("junk.json");
    std::ofstream(junk) << "{\"ranks\": [1, \n";
    r = run(base + junk);
    expect_refused(r, "--measurement");
    EXPECT_EQ(r.err.find("parse_error"), std::string::npos) << r.err;

    r = run(base + scratch("missing.json"));
    expect_refused(r, "--measurement");
}

// A hand-written measurement of llama-2-7b, 2 layers, ZeRO-2, 2 ranks held
// against inputs that differ: each difference is named.
TEST(ValidateMeasurement, MustMatchTheInputs) {
    const std::string file = scratch("m.json");
    std::ofstream(file) << R"({"model": {"name": "llama-2-7b", "layers": 2},
        "settings": {"zero_optimization.stage": 2, "train_micro_batch_size_per_gpu": 1,
                     "gradient_accumulation_steps": 1, "seq_len": 64, "dtype": "bf16"},
        "world_size": 2, "oom": false, "ranks": []})";
    Result r = run("validate " + kModel + "--layers 2 --stage 3 --gpus 2 --measurement " + file);
    expect_refused(r, "--measurement");
    EXPECT_NE(r.err.find(file), std::string::npos) << r.err;  // names the file
    EXPECT_NE(r.err.find("zero_optimization.stage 2 in the file, 3 in the inputs"), std::string::npos) << r.err;

    r = run("validate " + kModel + "--layers 4 --stage 2 --gpus 8 --measurement " + file);
    expect_refused(r, "--measurement");
    EXPECT_NE(r.err.find("layers (--layers) 2 in the file, 4 in the inputs"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("ranks (--gpus) 2 in the file, 8 in the inputs"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("zero_optimization.stage"), std::string::npos) << r.err;

    r = run("validate --backend host --model llama-2-13b --seq-len 64 --layers 2 --stage 2 --gpus 2 --measurement " + file);
    expect_refused(r, "--measurement");
    EXPECT_NE(r.err.find("model \"llama-2-7b\" in the file, \"llama-2-13b\" in the inputs"), std::string::npos) << r.err;
}

// A measurement whose fields are missing or of the wrong type: the one error line names the file and
// the field by its JSON pointer (RFC 6901), whatever the field is.
TEST(ValidateMeasurement, BadFieldsAreNamedByTheirJsonPath) {
    const std::string file = scratch("fields.json");
    const std::string head = R"({"model": {"name": "llama-2-7b", "layers": 2},
        "settings": {"zero_optimization.stage": 2, "train_micro_batch_size_per_gpu": 1,
                     "gradient_accumulation_steps": 1, "seq_len": 64, "dtype": "bf16"},
        "world_size": 2, "oom": false, "ranks": [{"phases": [)";
    const std::string ok_phase = R"({"name": "init", "step": 0, "peak_bytes": {"device": {"parameters": 1,
        "gradients": 0, "optimizer_states": 0, "activations": 0, "buffers": 0}, "host": {"total": 0},
        "pinned": {"total": 0}}})";
    struct Case {
        std::string json, pointer;
    };
    const Case cases[] = {
        {head + ok_phase + R"(, {"name": "forward", "step": 1, "peak_bytes": {"device": {"parameters": 1,
            "gradients": "x", "optimizer_states": 0, "activations": 0, "buffers": 0}, "host": {"total": 0},
            "pinned": {"total": 0}}}]}]})", "/ranks/0/phases/1/peak_bytes/device/gradients"},
        {head + R"({"name": "init", "peak_bytes": {}}]}]})", "/ranks/0/phases/0/step"},
        {head + ok_phase + R"(]}, {"phases": 3}]})", "/ranks/1/phases"},
        {R"({"model": {}, "settings": {}, "ranks": []})", "/world_size"},
        {R"({"model": {}, "settings": {}, "world_size": 2, "oom": "no", "ranks": []})", "/oom"},
    };
    for (const Case& c : cases) {
        std::ofstream(file) << c.json;
        const Result r = run("validate " + kModel + "--layers 2 --stage 2 --gpus 2 --measurement " + file);
        expect_refused(r, "--measurement: " + file + ": " + c.pointer + ": ");
    }
}

}  // namespace
