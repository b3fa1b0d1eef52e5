// Helpers the renderers of an estimate share (report.cpp: table, Markdown, CSV; report_json.cpp: JSON).
// Private to the library.
#pragma once

#include "zeromem/advice.h"
#include "zeromem/estimate.h"
#include "zeromem/request.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace zeromem::report_detail {

/// One per-GPU or per-node row: its JSON / CSV key, its label, its bytes and its indent.
struct Row {
    const char* key;    // JSON / CSV key
    const char* label;  // human label
    uint64_t bytes;
    int indent;
};

/// The per-GPU component rows of a phase, of a GpuMemory, or of an estimate (each at its own peak).
std::vector<Row> gpu_rows(const GpuMemory& m, Optimizer opt);
std::vector<Row> gpu_rows(const PhaseMemory& p, Optimizer opt);
std::vector<Row> gpu_rows(const Estimate& e, Optimizer opt);
/// The per-node rows: host peak, pinned, load, training, NVMe.
std::vector<Row> node_rows(const Estimate& e);
/// The phase whose GPU total is the peak (full convention), or none.
const PhaseMemory* peak_phase_of(const Estimate& e);
/// Where one package's version came from (the parenthesised part of its provenance, e.g. "stack.torch").
std::string stack_source(const Resolved& res, const char* key);
/// The provenance of `key`, else `fallback`.
std::string prov_of(const Resolved& res, const std::string& key, const std::string& fallback);
/// The advice for `e`, ranked by the speed model when the GPU preset and one node give it its
/// hardware, else in the recipe's order (advice.h advise).
std::vector<Advice> advice_for(const Estimate& e, const Resolved& res);
/// The JSON object of `zeromem estimate --format json` (report.h render).
nlohmann::ordered_json to_json(const Estimate& e, const Resolved& res, bool explain);

}  // namespace zeromem::report_detail
