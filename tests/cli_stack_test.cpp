// The software stack the user runs, read by the `zeromem` binary from the
// environment it is started in ($VIRTUAL_ENV, $CONDA_PREFIX, --stack auto's
// python3 on PATH, --stack-from's pip freeze file), on fake prefixes made
// here. ctest sets ZEROMEM_STACK=defaults for every test; these commands
// unset it where they test the reading.
#include "cli_runner.h"
#include "fake_python_env.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

using namespace cli;
using namespace stacktest;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// `zeromem ARGS` with ZEROMEM_STACK unset and `env` (NAME=VALUE ...) set;
// VIRTUAL_ENV and CONDA_PREFIX of the test's own environment are unset too.
Outcome with_env(const std::string& env, const std::string& args) {
    return run_shell("env -u ZEROMEM_STACK -u VIRTUAL_ENV -u CONDA_PREFIX " + env + " '" + ZEROMEM_BINARY + "' " + args);
}

nlohmann::json json_with_env(const std::string& env, const std::string& args, int exit_code = 0) {
    const Outcome r = with_env(env, args + " --format json");
    EXPECT_EQ(r.exit_code, exit_code) << r.err;
    return nlohmann::json::parse(r.out);
}

// Llama-2-7B: 2 · 32000 · 4096 (embeddings, head) + 32 · (4 · 4096² + 3 ·
// 4096 · 11008 + 2 · 4096) + 4096 = 6,738,415,616 parameters.
constexpr uint64_t kLlama7b = 6738415616ull;
constexpr uint64_t kOverhead = 8ull << 30;  // 8 ranks x the default host overhead, 1 GiB each
const std::string kLoad = "estimate --model llama-2-7b --gpus 8 --stage 3 --no-zero-init";

}  // namespace

// A virtualenv with deepspeed 0.14.4, torch 2.3.1, transformers 4.44.2
// changes the software line and the numbers that follow the versions.
// Stage 3 without zero.Init: every rank materialises the whole model on the
// host in the load dtype (transformers modeling_utils.py from_pretrained;
// is_deepspeed_zero3_enabled is what would build it under zero.Init), and
// nothing larger is on the host at load (stage 1/2 would add DeepSpeed <
// 0.18.7's CPU flatten copy, 2 · 2 B · Ψ, stage_1_and_2.py __init__).
// transformers >= 5 loads a 16-bit checkpoint in its own dtype
// (dtype="auto", huggingface/transformers#42805): 8 x 2 B x Ψ + 8 GiB with
// the built-in 5.0; transformers 4.44.2 builds the model in fp32
// (torch_dtype None -> torch.get_default_dtype()): 8 x 4 B x Ψ + 8 GiB.
// torch 2.3.1 < 2.8: the HF Trainer's default optimizer is adamw_torch
// (foreach), not adamw_torch_fused (huggingface/transformers#37358).
TEST(CliStack, VirtualEnvChangesSoftwareLineAndNumbers) {
    ScratchDir venv("venv");
    make_stack_env(venv.root);
    const std::string env = "VIRTUAL_ENV='" + venv.str() + "'";
    const Outcome r = with_env(env, kLoad);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string from = "(from $VIRTUAL_ENV=" + venv.str() + ": ";
    EXPECT_TRUE(has(r.out, "software: DeepSpeed 0.14.4 " + from + "deepspeed-0.14.4.dist-info), torch 2.3.1 " + from +
                               "torch-2.3.1.dist-info), transformers 4.44.2 " + from +
                               "transformers-4.44.2.dist-info); optimizer step: HF Trainer default adamw_torch: torch's foreach adamw"))
        << r.out;
    auto j = json_with_env(env, kLoad);
    EXPECT_EQ(j.at("per_node").at("host_memory").get<uint64_t>(), 8 * 4 * kLlama7b + kOverhead);
    EXPECT_EQ(j.at("software").at("deepspeed").get<std::string>(), "0.14.4");
    EXPECT_EQ(j.at("software").at("from").at("torch").get<std::string>(),
              "from $VIRTUAL_ENV=" + venv.str() + ": torch-2.3.1.dist-info");
    // The same estimate pinned to the built-in stack.
    j = json_with_env(env + " ZEROMEM_STACK=defaults", kLoad);
    EXPECT_EQ(j.at("per_node").at("host_memory").get<uint64_t>(), 8 * 2 * kLlama7b + kOverhead);
    EXPECT_EQ(j.at("software").at("from").at("deepspeed").get<std::string>(), "built-in default");
    EXPECT_TRUE(has(with_env(env + " ZEROMEM_STACK=defaults", kLoad + " --verbose").err,
                    "note: software stack: ZEROMEM_STACK=defaults pins the built-in stack; $VIRTUAL_ENV=" + venv.str() +
                        " is not read"));
    // An explicit version wins over the installed one.
    j = json_with_env(env, kLoad + " --transformers-version 5.0");
    EXPECT_EQ(j.at("per_node").at("host_memory").get<uint64_t>(), 8 * 2 * kLlama7b + kOverhead);
    EXPECT_EQ(j.at("software").at("torch").get<std::string>(), "2.3.1");
}

// DeepSpeed 0.14.4 < 0.19.5: offload_optimizer.pin_memory defaulted to
// false (deepspeed/runtime/zero/offload_config.py; #8207 made it true).
TEST(CliStack, InstalledDeepSpeedSetsItsDefaults) {
    ScratchDir venv("venv_pin");
    make_stack_env(venv.root);
    const std::string args = "estimate --model llama-2-7b --gpus 8 --stage 2 --offload-optimizer cpu --explain";
    auto j = json_with_env("VIRTUAL_ENV='" + venv.str() + "'", args);
    const std::string pin = j.at("provenance").at("zero_optimization.offload_optimizer.pin_memory").get<std::string>();
    EXPECT_EQ(pin.rfind("false (the default before DeepSpeed 0.19.5", 0), 0u) << pin;
    j = json_with_env("VIRTUAL_ENV='" + venv.str() + "' ZEROMEM_STACK=defaults", args);
    EXPECT_FALSE(has(j.at("provenance").value("zero_optimization.offload_optimizer.pin_memory", ""), "false")) << j.at("provenance");
}

// An activated conda environment is read when no virtualenv is; a package
// it lacks is the built-in default, said in the header.
TEST(CliStack, CondaPrefixAndAbsentPackage) {
    ScratchDir conda("conda");
    add_dist_info(conda.root, "torch-2.3.1", "torch", "2.3.1", "10");
    const Outcome r = with_env("CONDA_PREFIX='" + conda.str() + "'", kLoad);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(has(r.out, "DeepSpeed 0.19.6 (built-in default: no deepspeed in $CONDA_PREFIX=" + conda.str() + ")"))
        << r.out;
    EXPECT_TRUE(has(r.out, "torch 2.3.1 (from $CONDA_PREFIX=" + conda.str() + ": torch-2.3.1.dist-info)")) << r.out;
    EXPECT_TRUE(has(r.out, "transformers 5.0 (built-in default: no transformers in $CONDA_PREFIX=")) << r.out;
    // --stack defaults pins the built-in stack over the environment.
    const Outcome d = with_env("CONDA_PREFIX='" + conda.str() + "'", kLoad + " --stack defaults");
    EXPECT_TRUE(has(d.out, "torch 2.8 (built-in default)")) << d.out;
}

// --stack-from reads a pip freeze output; a malformed line is one error
// line naming the file and line, exit 2.
TEST(CliStack, StackFromPipFreeze) {
    ScratchDir d("freeze");
    write_file(d.root / "freeze.txt", "# env\ndeepspeed==0.14.4\ntorch==2.3.1\n-e git+https://x/y#egg=z\ntransformers==4.44.2\n");
    const std::string file = (d.root / "freeze.txt").string();
    auto j = json_with_env("", kLoad + " --stack-from '" + file + "'");
    EXPECT_EQ(j.at("per_node").at("host_memory").get<uint64_t>(), 8 * 4 * kLlama7b + kOverhead);
    EXPECT_EQ(j.at("software").at("from").at("transformers").get<std::string>(), "from " + file + ":5: transformers==4.44.2");
    write_file(d.root / "bad.txt", "deepspeed==0.14.4\ntorch 2.3.1\n");
    const Outcome r = with_env("", kLoad + " --stack-from '" + (d.root / "bad.txt").string() + "'");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, (d.root / "bad.txt").string() + ":2: 'torch 2.3.1' is not NAME==VERSION")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(with_env("", kLoad + " --stack-from /nonexistent/freeze.txt").exit_code, 2);
    EXPECT_EQ(with_env("", kLoad + " --stack-from '" + file + "' --stack auto").exit_code, 2);
}

// A version newer than the newest known is followed as the newest known,
// with a warning, exit 0: from a flag and from an installed package.
TEST(CliStack, NewerThanKnownWarnsAndRuns) {
    Outcome r = zeromem("estimate --params 7e9 --gpus 8 --stage 3 --deepspeed-version 0.99.0");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "warning: --deepspeed-version: DeepSpeed 0.99.0 is newer than the newest zeromem knows (0.19.6)"))
        << r.err;
    EXPECT_TRUE(has(r.out, "software: DeepSpeed 0.19.6 (--deepspeed-version says 0.99.0")) << r.out;
    ScratchDir venv("venv_new");
    add_dist_info(venv.root, "deepspeed-0.99.0", "deepspeed", "0.99.0");
    add_dist_info(venv.root, "torch-2.10.0", "torch", "2.10.0");
    r = with_env("VIRTUAL_ENV='" + venv.str() + "'", "estimate --params 7e9 --gpus 8 --stage 3");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(has(r.err, "DeepSpeed 0.99.0 is newer than the newest zeromem knows")) << r.err;
    EXPECT_TRUE(has(r.err, "torch 2.10.0 is newer than the newest zeromem knows (2.8)")) << r.err;  // 2.10 > 2.8 numerically
    EXPECT_TRUE(has(r.out, "torch 2.8 (from $VIRTUAL_ENV=")) << r.out;
    // Older than the oldest known is still an error, installed or given;
    // an explicit version wins over the installed one before it is checked.
    expect_error("estimate --params 7e9 --gpus 8 --deepspeed-version 0.3.0", "--deepspeed-version");
    ScratchDir old("venv_old");
    add_dist_info(old.root, "deepspeed-0.3.0", "deepspeed", "0.3.0");
    const std::string env = "VIRTUAL_ENV='" + old.str() + "'";
    r = with_env(env, "estimate --params 7e9 --gpus 8 --stage 3");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "stack.deepspeed (")) << r.err;
    EXPECT_TRUE(has(r.err, "DeepSpeed 0.3.0 is older than the versions zeromem knows")) << r.err;
    r = with_env(env, "estimate --params 7e9 --gpus 8 --stage 3 --deepspeed-version 0.19.6");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(has(r.out, "DeepSpeed 0.19.6 (--deepspeed-version)")) << r.out;
    r = with_env(env, "estimate --params 7e9 --gpus 8 --stage 3 --stack torch=2.8,deepspeed=0.18.0");
    EXPECT_TRUE(has(r.out, "DeepSpeed 0.18.0 (--stack)")) << r.out;
}

// --stack auto reads the python3 on PATH (a virtualenv: pyvenv.cfg beside
// its bin/) without running it; without auto, PATH is not read.
TEST(CliStack, StackAutoReadsPythonOnPath) {
    ScratchDir venv("venv_auto");
    make_stack_env(venv.root);
    write_file(venv.root / "pyvenv.cfg", "home = /usr/bin\ninclude-system-site-packages = false\n");
    write_file(venv.root / "bin/python3", "\x7f" "ELF");
    fs::permissions(venv.root / "bin/python3", fs::perms::owner_all);
    const std::string path = "PATH='" + venv.str() + "/bin:/usr/bin:/bin'";
    Outcome r = with_env(path, kLoad + " --stack auto");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(has(r.out, "DeepSpeed 0.14.4 (from python3 on PATH (" + venv.str() + "): deepspeed-0.14.4.dist-info)"))
        << r.out;
    r = with_env(path, kLoad);
    EXPECT_TRUE(has(r.out, "DeepSpeed 0.19.6 (built-in default)")) << r.out;
}

// Bad settings: a METADATA without a version, an unknown ZEROMEM_STACK.
TEST(CliStack, BadInstallsAndSettingsAreErrors) {
    ScratchDir venv("venv_bad");
    write_file(venv.root / "lib/python3.11/site-packages/torch-2.3.1.dist-info/METADATA", "Name: torch\n");
    Outcome r = with_env("VIRTUAL_ENV='" + venv.str() + "'", kLoad);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "stack.torch: ")) << r.err;
    EXPECT_TRUE(has(r.err, "torch-2.3.1.dist-info/METADATA has no Version: line")) << r.err;
    r = with_env("ZEROMEM_STACK=newest", kLoad);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "ZEROMEM_STACK: 'newest' is not defaults or auto")) << r.err;

    // Not a regular file: a METADATA directory and a FIFO are refused without being opened (a FIFO
    // would block the read); --stack-from of a directory or a device (/dev/zero never ends) likewise.
    ScratchDir odd("venv_odd");
    std::filesystem::create_directories(odd.root / "lib/python3.11/site-packages/torch-2.3.1.dist-info/METADATA");
    r = with_env("VIRTUAL_ENV='" + odd.str() + "'", kLoad);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "torch-2.3.1.dist-info/METADATA is not a regular file")) << r.err;
    ScratchDir fifo("venv_fifo");
    std::filesystem::create_directories(fifo.root / "lib/python3.11/site-packages/deepspeed-0.14.4.dist-info");
    ASSERT_EQ(::mkfifo((fifo.root / "lib/python3.11/site-packages/deepspeed-0.14.4.dist-info/METADATA").c_str(), 0600), 0);
    r = with_env("VIRTUAL_ENV='" + fifo.str() + "'", kLoad);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "deepspeed-0.14.4.dist-info/METADATA is not a regular file")) << r.err;
    r = zeromem(kLoad + " --stack-from /dev/zero");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "--stack-from: /dev/zero is not a regular file")) << r.err;
    r = zeromem(kLoad + " --stack-from '" + odd.str() + "'");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "is a directory, not a pip freeze output")) << r.err;
}

// The settings line says where the attention kind came from. --attention auto on the 2021 stack
// (torch 1.8.1, transformers 4.6.1: no SDPA default before transformers 4.36 with torch 2.1.1) keeps the
// s^2 scores and says why; T5 says its class has no SDPA path; --attention flash overrides; without the
// flag flash is assumed and a note names the stack's eager default.
TEST(CliStack, AttentionLineSaysWhereTheKindCameFrom) {
    const std::string base = "estimate --model gpt2-xl --gpus 1 --gpu-memory 80GiB --seq-len 1024 "
                             "--stack deepspeed=0.4.2,torch=1.8.1,transformers=4.6.1";
    const Outcome a = with_env("", base + " --attention auto");
    EXPECT_EQ(a.exit_code, 0) << a.err;
    EXPECT_TRUE(has(a.out, "attention eager (--attention auto: transformers 4.6.1 with torch 1.8.1 has no SDPA default "
                           "(from transformers 4.36 with torch >= 2.1.1); s^2 scores kept)")) << a.out;
    const Outcome f = with_env("", base + " --attention flash");
    EXPECT_TRUE(has(f.out, "attention flash (--attention flash: no s^2 scores)")) << f.out;
    const Outcome u = with_env("", base + " --verbose");
    EXPECT_TRUE(has(u.out, "attention flash (no s^2 scores)")) << u.out;
    EXPECT_TRUE(has(u.err, "--attention not given: flash assumed")) << u.err;
    const Outcome t5 = with_env("", "estimate --hf-config " + std::string(ZEROMEM_TEST_DATA_DIR) +
                                        "/ledger/t5-11b.json --gpus 1 --gpu-memory 80GiB --seq-len 512 --stack defaults --attention auto");
    EXPECT_TRUE(has(t5.out, "attention eager (--attention auto: the t5 model class has no SDPA path in transformers 5.0")) << t5.out;
    EXPECT_NE(with_env("", base + " --attention sdpa").exit_code, 0);
}
