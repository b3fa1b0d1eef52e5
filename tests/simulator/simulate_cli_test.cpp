// `zeromem simulate` end to end: same errors as `estimate`, bad input exits 2
// with one line, output files.
#include "../cli_runner.h"

#include <gtest/gtest.h>

namespace {
size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }
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
    std::remove(trace.c_str());
    std::remove(snap.c_str());
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
