#pragma once
// The error band of the verdict, measured on the public-run ledger (tests/cases/ledger,
// scripts/ledger.py --band) and stored in data/verdict_band.json, which is compiled in. An estimate
// that fits, but by less than the band, is "tight": on the ledger's runs zeromem's estimate has been
// that far below the real need.

#include "zeromem/estimate.h"

#include <cstdint>
#include <optional>
#include <string>

namespace zeromem {

struct VerdictBand {
    double gpu_under = 0;  ///< largest underestimate on the ledger, fraction of the GPU's capacity
    int gpu_runs = 0;      ///< ledger observations it rests on
    double host_under = 0; ///< the same for host RAM per node
    int host_runs = 0;
};

/// The band compiled in from data/verdict_band.json.
const VerdictBand& verdict_band();

/// "fits", "tight" or "oom" for `need` bytes against `capacity` with the band fraction `under`:
/// tight when need <= capacity but need > capacity x (1 - under).
std::string banded_verdict(uint64_t need, uint64_t capacity, double under);
/// The same word as a static string (no allocation; the estimate sets one per phase).
const char* banded_verdict_word(uint64_t need, uint64_t capacity, double under);

/// Sets out.fits_gpu / fits_host (the need against the capacity) and the three-way gpu_verdict /
/// host_verdict, of the estimate and of each of its phases by the same rule: with an architecture,
/// tight inside the band (full convention); without one, tight when the margin does not cover the
/// dense-decoder activation allowance (estimate.h dense_decoder_allowance).
void set_verdicts(const EstimateInput& in, Estimate& out);

/// Why an estimate whose GPU verdict is "tight" is tight, in a few words for one line: "tight: within the
/// estimate's error band below the GPU capacity", or without an architecture "tight: the margin does not
/// cover the activation allowance of X GiB (no architecture: model states only)".
std::string tight_words(const Estimate& e);

/// The words users read for a three-way verdict: "fits", "tight" or "does not fit" (for "oom").
std::string verdict_words(const std::string& verdict);

/// The words the output says a tight verdict in: the band and the runs it rests on.
std::string band_words(double under, int runs);

}  // namespace zeromem
