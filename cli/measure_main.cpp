// zeromem-measure: the helper that runs `zeromem measure` and `zeromem
// validate` (without --measurement). zeromem execs it with its own argv
// ("zeromem measure ..."), so it parses the same options (registered once,
// measure_options.cpp) and answers alike; it alone links MPI and the
// runtime (and through it CUDA, NCCL and cuBLAS), which keeps zeromem lean.
#include "measure_command.h"
#include "parse.h"

#include "zeromem/types.h"
#include "zeromem/util.h"

#include <CLI/CLI.hpp>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
    using namespace zeromem_cli;
    CLI::App app{"zeromem-measure: runs zeromem measure and zeromem validate (started by zeromem).", "zeromem"};
    app.set_version_flag("--version", std::string("zeromem ") + zeromem::version());
    app.require_subcommand(1);
    zeromem::Request req;
    MeasureFlags f;
    CLI::App *measure = nullptr, *validate = nullptr;
    const std::string named = argc > 1 ? argv[1] : "";
    add_measure_commands(app, req, f, measure, validate, named != "validate", named != "measure");
    if (argc == 1) {
        std::cerr << app.help();
        return 2;
    }
    if (const auto done = parse_command_line(app, argc, argv)) return *done;
    try {
        const std::string dir = zeromem::data_dir();
        return *measure ? run_measure(req, f, dir) : run_validate(req, f, dir);
    } catch (const zeromem::InputError& e) {
        std::cerr << "zeromem: error: " << e.what() << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "zeromem: internal error: " << e.what() << "\n";
        return 3;
    }
}
