// The parts of `validate` that need no MPI, shared by the lean zeromem
// (validate --measurement) and zeromem-measure (validate of a fresh run).
#pragma once

#include "measure_command.h"

#include "zeromem/estimate.h"
#include "zeromem/request.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace zeromem_cli {

using nlohmann::json;

/// GiB (2^30 bytes) with 4 decimals, as the measure and validate tables print them.
std::string gib4(uint64_t bytes);

/// The request resolved for the runtime: one model, and with --layers K the
/// K-layer architecture the runtime builds (its parameter counts too).
/// Prints the resolution's warnings when `print_warnings` (rank 0).
zeromem::Resolved resolve_runtime_request(const zeromem::Request& req, const MeasureFlags& f, const std::string& dir,
                                          bool print_warnings);

/// Refuses a --format other than table/json and a negative --tolerance (InputError).
void check_validate_flags(const MeasureFlags& f);

/// Holds the full-convention estimate of `in` against the measurement `m`
/// (runtime::compare_with_estimate), prints the table or JSON on stdout and
/// returns 0 when every component is within --tolerance and no rank ran out
/// of memory, else 1. A malformed --measurement is an InputError.
int report_validation(const zeromem::EstimateInput& in, const json& m, const MeasureFlags& f);

}  // namespace zeromem_cli
