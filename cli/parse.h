// CLI11 parsing shared by `zeromem` and its `zeromem-measure` helper, so
// that both answer a command line alike: --help, and a parse error as one
// line with exit status 2.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>

namespace zeromem_cli {

/// Parses argv into `app`. Returns the exit status when parsing ends the run
/// (--help: 0; a parse error: one "zeromem: error:" line naming the flag,
/// with "did you mean" for an unknown one, and 2), nullopt when the parsed
/// subcommand is to run.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv);

}  // namespace zeromem_cli
