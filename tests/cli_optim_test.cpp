// The command line faces of the optimizers and load paths: names are
// accepted in estimate and plan, bad names exit 2 naming the flag, check
// reports an optimizer type zeromem does not count at its key, --explain
// names the new terms.
#include <gtest/gtest.h>

#include <fstream>

#include "cli_runner.h"

using cli::zeromem;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(CliOptim, EightBitPagedEstimateExplainsItsStates) {
    const auto r = zeromem("estimate --model llama-2-7b --gpus 8 --stage 0 --optimizer paged_adamw_8bit --explain");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(has(r.out, "8-bit Adam m + absmax")) << r.out;
    EXPECT_TRUE(has(r.out + r.err, "can page to host memory")) << r.out;
    EXPECT_TRUE(has(r.out + r.err, "paged_adamw_8bit states")) << r.out;
}

TEST(CliOptim, UnknownOptimizerNameExitsTwoNamingTheFlag) {
    const auto r = zeromem("estimate --params 7e9 --optimizer galore_adamw");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(has(r.err, "--optimizer")) << r.err;
}

TEST(CliOptim, PlanAcceptsAdafactor) {
    const auto r = zeromem("plan --model llama-2-7b --gpus 8 --gpu A100-80GB --global-batch 64 --optimizer adafactor");
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 4) << r.err;
    EXPECT_TRUE(has(r.out, "optimizer adafactor")) << r.out;
}

TEST(CliOptim, CheckReportsAnUnknownOptimizerType) {
    const std::string path = cli::temp_path("shampoo.json");
    std::ofstream(path) << R"({"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "Shampoo"}})";
    const auto r = zeromem("check '" + path + "'");
    std::remove(path.c_str());
    EXPECT_NE(r.exit_code, 0);
    EXPECT_TRUE(has(r.out + r.err, "error: /optimizer/type")) << r.out << r.err;
}

TEST(CliOptim, LoadPathIsExplained) {
    const auto r = zeromem("estimate --model llama-2-7b --gpus 8 --stage 2 --load-path device-map --explain");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(has(r.out, "load path device-map")) << r.out;
    EXPECT_EQ(zeromem("estimate --params 7e9 --load-path disk").exit_code, 2);
}

}  // namespace
