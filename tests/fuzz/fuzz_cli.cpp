// libFuzzer target: the whole command line (CLI11 registration in
// cli/main.cpp, every subcommand; measure and validate are parsed, and a
// command line that would exec the zeromem-measure helper returns 0 here). The input is split into arguments at
// newlines. main() is renamed zeromem_main for this target (CMake
// -Dmain=zeromem_main). Inputs that would write files (--emit) are skipped;
// stdout and std::cerr are discarded. A crash, sanitizer report or exit status 3 (internal
// error) is a bug.
#include "measure_command.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

int zeromem_main(int argc, char** argv);

// Stands in for cli/measure_exec.cpp: the fuzzer process must not be
// replaced by zeromem-measure.
int zeromem_cli::exec_measure_helper(int, char**) {
    zeromem_cli::restore_stderr();
    return 0;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    // zeromem's output is discarded; libFuzzer keeps writing to stderr (fd 2).
    if (!std::freopen("/dev/null", "w", stdout)) std::abort();
    std::cerr.rdbuf(nullptr);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    if (text.find("emit") != std::string::npos || text.find('\0') != std::string::npos) return 0;
    std::vector<std::string> args = {"zeromem"};
    std::size_t start = 0;
    while (start <= text.size() && args.size() < 40) {
        const std::size_t nl = std::min(text.find('\n', start), text.size());
        args.push_back(text.substr(start, nl - start));
        start = nl + 1;
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = zeromem_main(static_cast<int>(args.size()), argv.data());
    if (rc == 3) std::abort();  // "internal error": an exception other than InputError escaped
    return 0;
}
