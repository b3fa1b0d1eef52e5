// zeromem's side of measure/validate runs (see measure_command.h): the lean
// zeromem links neither MPI nor CUDA; a run replaces it by the
// zeromem-measure helper, which does.
#include "measure_command.h"

#include "zeromem/util.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#ifndef ZEROMEM_HELPER_RELATIVE_DIR
#define ZEROMEM_HELPER_RELATIVE_DIR "../libexec/zeromem"
#endif

namespace zeromem_cli {

namespace {

namespace fs = std::filesystem;

bool is_executable_file(const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

// Where the helper may be: next to this executable (the build tree), then
// the installed libexec folder relative to it.
std::vector<fs::path> helper_candidates() {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return {};
    const fs::path dir = self.parent_path();
    return {dir / "zeromem-measure", (dir / ZEROMEM_HELPER_RELATIVE_DIR / "zeromem-measure").lexically_normal()};
}

}  // namespace

int exec_measure_helper(int, char** argv) {
    restore_stderr();
    const std::string sub = argv[1];
    fs::path helper;
    if (const char* env = std::getenv("ZEROMEM_MEASURE_EXE"); env && *env) {
        if (!is_executable_file(env)) {
            std::cerr << "zeromem: error: ZEROMEM_MEASURE_EXE=" << env << " is not an executable file (the zeromem-measure helper that runs "
                      << sub << ")\n";
            return 2;
        }
        helper = env;
    } else {
        const std::vector<fs::path> cands = helper_candidates();
        for (const auto& c : cands)
            if (helper.empty() && is_executable_file(c)) helper = c;
        if (helper.empty()) {
            std::cerr << "zeromem: error: " << sub << " runs in the zeromem-measure helper, which is not installed (looked for "
                      << (cands.empty() ? std::string("it next to zeromem") : cands.front().string() + " and " + cands.back().string())
                      << "); install the zeromem-measure package, or build zeromem with OpenMPI (libopenmpi-dev), "
                         "or set ZEROMEM_MEASURE_EXE to it\n";
            return 2;
        }
    }
    // The helper reads the same presets as this zeromem, wherever it lies.
    ::setenv("ZEROMEM_DATA_DIR", zeromem::data_dir().c_str(), 1);
    ::execv(helper.c_str(), argv);
    std::cerr << "zeromem: error: cannot run " << helper.string() << " (the zeromem-measure helper): " << std::strerror(errno)
              << "\n";
    return 2;
}

}  // namespace zeromem_cli
