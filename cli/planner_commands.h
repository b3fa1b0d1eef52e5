// The compare, plan and fit subcommands (speed model and planner faces).
#pragma once

#include "options.h"

#include <string>
#include <vector>

namespace zeromem_cli {

/// Runs `compare` or `plan` (cmd) and prints in `format`. Returns the exit status.
/// Throws zeromem::InputError for bad input.
int run_compare_or_plan(const std::string& cmd, const zeromem::Request& req, const SpeedFlags& f,
                        const std::string& format, const std::string& dir);

/// Runs `fit`. Returns the exit status. Throws zeromem::InputError for bad input.
/// `unused_notes` (flags fit takes but does not use) are printed as notes once the request resolves.
int run_fit(zeromem::Request req, const SpeedFlags& f, const std::string& format, const std::string& dir,
            const std::vector<std::string>& unused_notes = {});

}  // namespace zeromem_cli
