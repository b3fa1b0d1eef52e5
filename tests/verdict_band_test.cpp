// The three-way verdict (verdict_band.h): "tight" when the need fits by less than the error band the
// public-run ledger measures (scripts/ledger.py --band, stored in data/verdict_band.json).
#include "estimate_inputs.h"

#include "zeromem/verdict_band.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <fstream>

namespace {

using zeromem::banded_verdict;

// The rule, by hand: with a band of 10 % of a 100-byte capacity, a need of 90 bytes or less fits, a need
// above 90 up to 100 is tight, above 100 does not fit.
TEST(VerdictBand, TightInsideTheBandBelowTheCapacity) {
    EXPECT_EQ(banded_verdict(90, 100, 0.10), "fits");
    EXPECT_EQ(banded_verdict(91, 100, 0.10), "tight");
    EXPECT_EQ(banded_verdict(100, 100, 0.10), "tight");
    EXPECT_EQ(banded_verdict(101, 100, 0.10), "oom");
    EXPECT_EQ(banded_verdict(100, 100, 0.0), "fits");  // no band: the plain comparison
}

// The compiled-in band is the file's (the ledger test holds the file to the recomputed band).
TEST(VerdictBand, CompiledInBandIsDataVerdictBandJson) {
    std::ifstream f(std::string(ZEROMEM_SOURCE_DATA_DIR) + "/verdict_band.json");
    const auto j = nlohmann::json::parse(f);
    const zeromem::VerdictBand& b = zeromem::verdict_band();
    EXPECT_EQ(b.gpu_under, j.at("gpu").at("under").get<double>());
    EXPECT_EQ(b.gpu_runs, j.at("gpu").at("runs").get<int>());
    EXPECT_EQ(b.host_under, j.at("host").at("under").get<double>());
    EXPECT_EQ(b.host_runs, j.at("host").at("runs").get<int>());
}

// An estimate with an architecture: the capacity placed by hand around the estimate's own total t
// gives each of the three verdicts (t <= cap (1 - band) fits; inside: tight; t > cap: oom).
TEST(VerdictBand, EstimateWithAnArchitectureGivesAllThree) {
    zeromem::EstimateInput in = testinputs::preset_input("llama-2-7b", 8, 2, zeromem::Dtype::bf16);
    in.train.seq_len = 2048;
    const double band = zeromem::verdict_band().gpu_under;
    ASSERT_GT(band, 0.0);
    in.cluster.gpu_memory = uint64_t(1) << 50;
    const uint64_t t = zeromem::estimate(in).per_gpu.total;
    auto verdict_at = [&](double cap) {
        in.cluster.gpu_memory = static_cast<uint64_t>(cap);
        return zeromem::estimate(in).gpu_verdict.value_or("unset");
    };
    EXPECT_EQ(verdict_at(double(t) / (1.0 - band) * 1.001), "fits");
    EXPECT_EQ(verdict_at(double(t) / (1.0 - band / 2)), "tight");
    EXPECT_EQ(verdict_at(double(t)), "tight");
    EXPECT_EQ(verdict_at(double(t) - 1), "oom");
}

}  // namespace
