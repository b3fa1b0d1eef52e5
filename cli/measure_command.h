// `zeromem measure` and `zeromem validate`: the faces of the runtime
// (runtime/). The options are registered in one place (measure_options.cpp)
// for both executables: the lean `zeromem` parses them (--help, bad flags),
// runs `validate --measurement` itself (validate_report.cpp) and execs the
// `zeromem-measure` helper (measure_exec.cpp) for a run; the helper, which
// alone links MPI and the runtime, runs them (measure_command.cpp).
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

/// Ranks other than 0 keep std::cerr quiet while parsing (so that a
/// command-line error is printed once under mpirun); this gives it back.
void restore_stderr();

/// zeromem-measure: runs the parsed subcommand; returns the exit status, the
/// same on every rank (0 fits / within tolerance, 1 out of memory or
/// validate beyond tolerance, 2 bad input, 3 internal error). validate with
/// --measurement is run_validate_file.
int run_measure(const zeromem::Request& req, const MeasureFlags& f, const std::string& data_dir);
int run_validate(const zeromem::Request& req, const MeasureFlags& f, const std::string& data_dir);

/// validate --measurement: starts no MPI, checks the file matches the
/// inputs and compares; 0 within tolerance, 1 beyond it. Bad input throws
/// InputError.
int run_validate_file(const zeromem::Request& req, const MeasureFlags& f, const std::string& data_dir);

/// zeromem: replaces this process by the zeromem-measure helper with the
/// same argv (exec keeps the PID and the MPI launcher's environment), found
/// as $ZEROMEM_MEASURE_EXE, next to this executable, or in
/// ../libexec/zeromem/ from it. Returns only when it cannot: one error line
/// naming what to install, and exit status 2.
int exec_measure_helper(int argc, char** argv);

}  // namespace zeromem_cli
