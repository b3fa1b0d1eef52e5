// Capacities as devices report them: host RAM less host_os_reserve, the unit
// warning for a GB-written host size, and the verdict without an architecture
// (model states only, "tight" when the margin does not cover the activation
// allowance). Expected values are arithmetic written here.
#include "cli_runner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

namespace {

using cli::json_of;
using cli::Outcome;
using cli::zeromem;

constexpr uint64_t kGiB = 1ull << 30;

// 1 TiB: host_os_reserve = 16 GiB memmap + 130043 KiB min watermark + 1 GiB
// OS baseline (derivation in host_capacity_test.cpp); verdicts use the rest.
TEST(CliCapacity, HostCapacityIsTheGivenSizeLessTheReserve) {
    const uint64_t reserve = 17 * kGiB + 130043ull * 1024;
    auto j = json_of("estimate --params 7e9 --gpus 8 --stage 3 --host-memory 1TiB");
    EXPECT_EQ(j.at("cluster").at("host_memory").get<uint64_t>(), (1ull << 40) - reserve);
    EXPECT_EQ(j.at("cluster").at("host_os_reserve").get<uint64_t>(), reserve);
    j = json_of("estimate --params 7e9 --gpus 8 --stage 3 --host-memory 1TiB --host-reserve 0");
    EXPECT_EQ(j.at("cluster").at("host_memory").get<uint64_t>(), 1ull << 40);
    j = json_of("estimate --params 7e9 --gpus 8 --stage 3 --host-memory 1TiB --host-reserve 24GiB");
    EXPECT_EQ(j.at("cluster").at("host_memory").get<uint64_t>(), 1000 * kGiB);
    const Outcome r = zeromem("estimate --params 7e9 --gpus 8 --stage 3 --host-memory 1TiB --explain");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // 1024 - 17.124 = 1006.876 GiB.
    EXPECT_NE(r.out.find("Host capacity used: --host-memory 1TiB (1024.00 GiB) less host_os_reserve 17.12 GiB = "
                         "1006.88 GiB"),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("cluster.host_reserve: host_os_reserve derived from --host-memory"), std::string::npos);
}

// 768GB = 768e9 B = 715.26 GiB, while 768 GB of DIMMs is 768 GiB: the same
// warning as a GPU size written in GB; a reserve not below the size is refused.
TEST(CliCapacity, HostSizeInGigabytesWarnsAndTooSmallIsRefused) {
    Outcome r = zeromem("estimate --params 7e9 --gpus 8 --stage 3 --host-memory 768GB");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("--host-memory 768GB is 715.26 GiB: GB/TB are powers of 1000"), std::string::npos) << r.err;
    r = zeromem("estimate --params 7e9 --gpus 8 --stage 3 --host-memory 768GiB");
    EXPECT_EQ(r.err.find("--host-memory 768GiB is"), std::string::npos) << r.err;
    r = zeromem("estimate --params 7e9 --host-memory 1GiB");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--host-memory: 1GiB (1.00 GiB) does not exceed host_os_reserve"), std::string::npos) << r.err;
    r = zeromem("estimate --params 7e9 --host-memory 64GiB --host-reserve 64GiB");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--host-reserve: 64GiB"), std::string::npos) << r.err;
}

// Without an architecture: "fits" only when the free memory covers the
// activation allowance (9703235584 B for 7e9 at s = 2048, b = 1:
// host_capacity_test.cpp), "tight" when model states fit but the margin does
// not, "oom" when model states alone do not fit. Capacities are set around
// the reported model-states total t, so the rule is what is tested.
TEST(CliCapacity, VerdictWithoutArchitectureNeedsTheAllowance) {
    const std::string base = "estimate --params 7e9 --gpus 8 --stage 3 --seq-len 2048";
    auto j = json_of(base);
    const uint64_t t = j.at("per_gpu").at("total").get<uint64_t>();
    const uint64_t a = 9703235584ull;
    EXPECT_EQ(j.at("activation_allowance").at("bytes").get<uint64_t>(), a);
    EXPECT_TRUE(j.at("gpu_verdict").is_null());
    auto at = [&](uint64_t cap, int exit_code = 0) {
        return json_of(base + " --gpu-memory " + std::to_string(cap) + "B", exit_code);
    };
    j = at(t + a);
    EXPECT_EQ(j.at("gpu_verdict"), "fits");
    EXPECT_EQ(j.at("fits_gpu"), true);
    j = at(t + a - 1, 4);  // exit status 4: tight
    EXPECT_EQ(j.at("gpu_verdict"), "tight");
    EXPECT_EQ(j.at("fits_gpu"), true);
    j = at(t - 1, 1);  // exit status 1: does not fit
    EXPECT_EQ(j.at("gpu_verdict"), "oom");
    const Outcome r = zeromem(base + " --gpu-memory " + std::to_string(t + a - 1) + "B");
    ASSERT_EQ(r.exit_code, 4) << r.err;
    EXPECT_NE(r.out.find("GPU (model states only): tight"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Activation allowance (no architecture): 9.04 GiB"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--seq-len and --micro-batch size only the activation allowance"), std::string::npos);
    // With an architecture the verdict is the estimate's own: fits or oom.
    j = json_of("estimate --model llama-2-7b --gpus 8 --stage 3 --gpu-memory 80GiB");
    EXPECT_EQ(j.at("gpu_verdict"), "fits");
    EXPECT_FALSE(j.contains("activation_allowance"));
}

// The tight verdict as a user sees it: with an architecture, a capacity just above the need (inside
// the band of data/verdict_band.json) prints TIGHT with the band's words and exits 4; JSON says "tight".
TEST(CliCapacity, TightVerdictSaysTheBandAndExitsFour) {
    const std::string base = "estimate --model llama-2-7b --gpus 8 --stage 2 --seq-len 2048";
    const uint64_t t = json_of(base).at("per_gpu").at("total").get<uint64_t>();
    const std::string cap = " --gpu-memory " + std::to_string(t + (t >> 10)) + "B";  // 0.1 % above the need
    EXPECT_EQ(json_of(base + cap, 4).at("gpu_verdict"), "tight");
    const Outcome r = zeromem(base + cap);
    ASSERT_EQ(r.exit_code, 4) << r.err;
    EXPECT_NE(r.out.find("GPU: TIGHT — needs"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("inside the error band: on "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("public runs zeromem's estimate was up to"), std::string::npos) << r.out;
}

// `zeromem gpus` shows the label's capacity beside the total the device
// reports, which verdicts use: the A100-40GB's 39.50 GiB is the total
// capacity a public CUDA out-of-memory message prints ("GPU 0 has a total
// capacity of 39.50 GiB", data/gpus/A100-40GB.json usable_source); the label
// is 40 x 2^30 bytes.
TEST(CliCapacity, GpuListingShowsTheLabelAndTheReportedTotal) {
    const Outcome r = zeromem("gpus");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("A100-40GB         40.00 GiB label, 39.50 GiB reported by the device (verdicts use it)"),
              std::string::npos) << r.out;
    const nlohmann::json j = nlohmann::json::parse(zeromem("gpus --format json").out);
    ASSERT_TRUE(j.is_array());
    bool seen = false;
    for (const auto& g : j)
        if (g["name"] == "A100-40GB") {
            seen = true;
            EXPECT_EQ(g["memory_bytes"].get<uint64_t>(), 40 * kGiB);
            EXPECT_EQ(g["reported_bytes"].get<uint64_t>(), uint64_t(39.50 * double(kGiB) + 0.5));
        }
    EXPECT_TRUE(seen);
}

// `zeromem models` marks a mixture of experts: Qwen3-30B-A3B's published
// config.json has num_experts 128 and num_experts_per_tok 8.
TEST(CliCapacity, ModelListingMarksMixtureOfExperts) {
    const Outcome r = zeromem("models");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto at = r.out.find("qwen3-30b-a3b");
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::string row = r.out.substr(at, r.out.find('\n', at) - at);
    EXPECT_NE(row.find("MoE: 128 experts, top-8"), std::string::npos) << row;
    const auto dense = r.out.find("llama-2-7b ");
    ASSERT_NE(dense, std::string::npos);
    EXPECT_EQ(r.out.substr(dense, r.out.find('\n', dense) - dense).find("MoE"), std::string::npos);
    // The listing ends by saying how to give any other model.
    EXPECT_NE(r.out.find("Any other model: --hf-config with its config.json"), std::string::npos) << r.out;
    const nlohmann::json j = nlohmann::json::parse(zeromem("models --format json").out);
    for (const auto& m : j)
        if (m["name"] == "qwen3-30b-a3b") {
            EXPECT_TRUE(m["moe"].get<bool>());
            EXPECT_EQ(m["num_experts"].get<int>(), 128);
            EXPECT_EQ(m["num_experts_per_tok"].get<int>(), 8);
            EXPECT_LT(m["active_params"].get<double>(), m["params"].get<double>());
        }
}

// A listing takes only its two formats.
TEST(CliCapacity, ListingRefusesOtherFormats) {
    const Outcome r = zeromem("hosts --format csv");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--format: 'csv' is not a listing format (table or json)"), std::string::npos) << r.err;
}

}  // namespace
