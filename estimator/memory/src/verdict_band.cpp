// The verdict's error band (verdict_band.h), read once from the compiled-in data/verdict_band.json.
#include "zeromem/verdict_band.h"

#include "zeromem_verdict_band_json.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace zeromem {

const VerdictBand& verdict_band() {
    static const VerdictBand band = [] {
        const auto j = nlohmann::json::parse(std::begin(kVerdictBandJson), std::end(kVerdictBandJson));
        VerdictBand b;
        b.gpu_under = j.at("gpu").at("under").get<double>();
        b.gpu_runs = j.at("gpu").at("runs").get<int>();
        b.host_under = j.at("host").at("under").get<double>();
        b.host_runs = j.at("host").at("runs").get<int>();
        return b;
    }();
    return band;
}

const char* banded_verdict_word(uint64_t need, uint64_t capacity, double under) {
    if (need > capacity) return "oom";
    return double(need) > double(capacity) * (1.0 - under) ? "tight" : "fits";
}

std::string banded_verdict(uint64_t need, uint64_t capacity, double under) {
    return banded_verdict_word(need, capacity, under);
}

std::string band_words(double under, int runs) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "inside the error band: on %d public runs zeromem's estimate was up to %.1f%% of the capacity "
                  "below what the run needed (docs/accuracy.md)",
                  runs, 100.0 * under);
    return buf;
}

}  // namespace zeromem
