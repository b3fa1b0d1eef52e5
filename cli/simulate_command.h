// The `simulate` subcommand: replays a training step event by event through
// the caching-allocator model (simulator/).
#pragma once

#include "zeromem/request.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace zeromem_cli {

/// Flags of `simulate` besides the request options.
struct SimulateFlags {
    int64_t steps = 2;
    std::string format = "table", chrome_trace, memory_snapshot;
    bool explain = false;  ///< --explain: every event term with its estimator term and DeepSpeed source
    bool verbose = false;  ///< --verbose: print the notes too
};

/// Registers `simulate` on `app` with add_request_options and its own flags.
CLI::App* add_simulate_command(CLI::App& app, zeromem::Request& req, SimulateFlags& f, bool with_options = true);

/// Runs `simulate`; returns the exit status. Throws zeromem::InputError for
/// bad input (same messages as `estimate`, plus --steps, --alloc-conf,
/// --format and unwritable output files).
int run_simulate(const zeromem::Request& req, const SimulateFlags& f, const std::string& dir);

}  // namespace zeromem_cli
