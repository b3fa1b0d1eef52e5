// The request options on a CLI11 command line: the model, cluster, training, ZeRO and output flags of
// `zeromem estimate`, which every memory subcommand and zeromem-gui's command line register alike.
// The faces' only CLI11 code in the estimator (target zeromem_request_options).
#pragma once

#include "zeromem/request.h"

#include <CLI/CLI.hpp>

#include <string>

namespace zeromem_cli {

/// "--gpus" from a CLI11 flag list such as "-g,--gpus".
std::string option_name(const char* flags);

/// Registers the model, cluster, training and ZeRO options of `estimate` on
/// `sub` (every memory subcommand takes the same ones), writing into `req`.
void add_request_options(CLI::App* sub, zeromem::Request& req);

}  // namespace zeromem_cli
