// `zeromem measure` and `zeromem validate`: the faces of the runtime
// (runtime/). Compiled always; without the runtime (no MPI at configure
// time) they say so and exit 2.
#pragma once

#include "zeromem/request.h"

#include <CLI/CLI.hpp>

#include <string>

namespace zeromem_cli {

/// Flags of measure and validate beyond the request options.
struct MeasureFlags {
    std::string backend = "auto", output, measurement, format = "table";
    int64_t layers = 0;
    int steps = 2;
    bool collectives = false;
    std::string min_bytes = "1KiB", max_bytes = "64MiB";
    int iters = 5;
    double tolerance = 0.05;
    double phase_timeout = 600;
};

/// Registers `measure` and `validate` on `app` (with add_request_options).
void add_measure_commands(CLI::App& app, zeromem::Request& req, MeasureFlags& f, CLI::App*& measure,
                          CLI::App*& validate, bool measure_options = true, bool validate_options = true);

/// Registers measure's options (the request options, the runtime's flags, output) on `measure`.
void add_measure_options(CLI::App* measure, zeromem::Request& req, MeasureFlags& f);

/// Registers validate's options on `validate`.
void add_validate_options(CLI::App* validate, zeromem::Request& req, MeasureFlags& f);

/// Runs the parsed subcommand; returns the exit status, the same on every
/// rank (0 fits / within tolerance, 1 out of memory or validate beyond
/// tolerance, 2 bad input, 3 internal error / no runtime). validate with
/// --measurement starts no MPI and checks the file matches the inputs.
int run_measure(const zeromem::Request& req, const MeasureFlags& f, const std::string& data_dir);
int run_validate(const zeromem::Request& req, const MeasureFlags& f, const std::string& data_dir);

}  // namespace zeromem_cli
