// Options shared by the subcommands: the request options every memory
// subcommand takes (estimate, compare, plan, fit, and the later simulate,
// measure, validate; zeromem/request_options.h, shared with zeromem-gui) and
// the speed model's flags.
#pragma once

#include "zeromem/request_options.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zeromem_cli {

/// Exit status 4: answered, it fits, but only inside the error band ("tight"; README "Exit status").
constexpr int kExitTight = 4;

/// Speed-model and planner flags.
struct SpeedFlags {
    std::optional<int64_t> global_batch;
    std::string interconnect, network, emit, target = "deepspeed";
    std::optional<double> cpu_adam_rate, pcie_bandwidth;
    std::optional<std::string> nvme_read, nvme_write;
    std::string host;  ///< data/hosts preset
    std::optional<int64_t> host_cores, pcie_gen, pcie_lanes, gpus_per_pcie_link;
    std::optional<std::string> host_memory_bandwidth;
    int64_t gpus_per_node = 8;
    bool verbose = false;  ///< --verbose: print the notes too (print_diagnostics)
    bool wide = false;     ///< compare --wide: the step time's terms and TFLOP/s as columns
    bool explain = false;  ///< compare/plan --explain: the first-ranked option's (the winner's) estimate, explained
};

/// Registers the speed model's flags on `sub`, writing into `f`, in the help group `group`.
void add_speed_options(CLI::App* sub, SpeedFlags& f, const char* group = "Speed model");

/// The help group of the speed-model flags on subcommands that take them only so that one command line
/// works for every subcommand (estimate, fit): given, each is named in a note and not used.
constexpr const char* kUnusedSpeedGroup = "Speed model (used by compare and plan; noted and not used here)";

/// One note per flag of `group` given on `sub`: "--network: estimate does not use it (...)".
std::vector<std::string> unused_flag_notes(const CLI::App* sub, const std::string& group);

/// Registers --verbose on `sub` (help group Output), writing into `verbose`.
void add_verbose_flag(CLI::App* sub, bool& verbose);

/// Prints on stderr every warning, and the notes when `verbose` (else how many
/// were left out): zeromem/diagnostics.h render_diagnostics, shown by --verbose.
void print_diagnostics(const std::vector<std::string>& warnings, const std::vector<std::string>& notes, bool verbose);

/// Memory in GiB (2^30 bytes) as printed in tables.
std::string gib(uint64_t b);

}  // namespace zeromem_cli
