// The calibrate subcommand: a run's memory readings against the estimate
// (thin face over zeromem::read_run_log_file and zeromem::calibrate).
#pragma once

#include "options.h"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace zeromem_cli {

/// Flags of `calibrate` besides the request options.
struct CalibrateFlags {
    std::vector<std::string> logs;   ///< --log FILE, repeatable
    std::string format = "table";    ///< --format table|json
    std::string output;              ///< --output PROFILE.json: write the fitted calibration profile
    bool verbose = false;            ///< --verbose: print the notes too
};

/// Registers `calibrate` on `app` (request options included) and returns it.
CLI::App* add_calibrate_command(CLI::App& app, zeromem::Request& req, CalibrateFlags& f, bool with_options = true);

/// Runs `calibrate`: exit 0; throws zeromem::InputError for an unreadable log
/// or bad flags (the caller exits 2).
int run_calibrate(const zeromem::Request& req, const CalibrateFlags& f, const std::string& dir);

}  // namespace zeromem_cli
