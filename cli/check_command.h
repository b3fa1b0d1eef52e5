// The check subcommand: findings about a DeepSpeed config (thin face over
// zeromem::check_ds_config).
#pragma once

#include "options.h"

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

namespace zeromem_cli {

/// Flags of `check` besides the request options.
struct CheckFlags {
    std::string config;                     ///< positional CONFIG.json
    /// --launcher; unset: hf-trainer when the file has "auto" values (a file
    /// written for the HF Trainer/accelerate), else deepspeed.
    std::optional<std::string> launcher;
    std::string format = "table";           ///< --format table|json
    std::optional<std::string> nvme_capacity;  ///< --nvme-capacity SIZE per node
};

/// Registers `check` on `app` (request options included) and returns it.
CLI::App* add_check_command(CLI::App& app, zeromem::Request& req, CheckFlags& f, bool with_options = true);

/// Runs `check`. Exit status: 0 without errors, 1 with errors; throws
/// zeromem::InputError for unreadable input or bad flags (the caller exits 2).
int run_check(zeromem::Request req, const CheckFlags& f, const std::string& dir);

}  // namespace zeromem_cli
