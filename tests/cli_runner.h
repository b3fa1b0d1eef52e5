// Helpers for end-to-end tests that run the built `zeromem` binary
// (ZEROMEM_BINARY) and inspect its exit code, stdout and stderr.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace cli {

struct Outcome {
    int exit_code = -1;
    std::string out;  // stdout
    std::string err;  // stderr
    double seconds = 0;  // wall time of the whole command, s
};

/// A scratch file name unique to this process (concurrent test runs must
/// not share files).
inline std::string temp_path(const std::string& name) {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/zeromem_test_" + std::to_string(::getpid()) + "_" + name;
}

inline std::string slurp(const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Runs `command` (a shell command line without redirections) through the
/// shell with stdin from /dev/null, capturing exit code, stdout, stderr and
/// its wall time. A command killed by a signal reports exit_code -1.
inline Outcome run_shell(const std::string& command) {
    const std::string out = temp_path("out.txt"), err = temp_path("err.txt");
    const std::string cmd = command + " >'" + out + "' 2>'" + err + "' </dev/null";
    const auto t0 = std::chrono::steady_clock::now();
    const int status = std::system(cmd.c_str());
    Outcome r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    std::remove(out.c_str());
    std::remove(err.c_str());
    return r;
}

/// Runs `zeromem <args>` through the shell, capturing stdout and stderr.
inline Outcome zeromem(const std::string& args) { return run_shell(std::string("'") + ZEROMEM_BINARY + "' " + args); }

/// Runs with --format json, expects exit status `exit_code` and parses stdout. kNotOom (the default):
/// answered and fits, tight included (0 or 4: the exit status of a need inside the error band, README
/// "Exit status"); 0: fits outside the band or no capacity given; 1: does not fit; 4: tight;
/// kAnswered (-1): any of these.
constexpr int kAnswered = -1, kNotOom = -2;
inline nlohmann::json json_of(const std::string& args, int exit_code = kNotOom) {
    const Outcome r = zeromem(args + " --format json");
    if (exit_code >= 0) EXPECT_EQ(r.exit_code, exit_code) << r.err;
    else if (exit_code == kNotOom) EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 4) << r.err;
    else EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 4) << r.err;
    return nlohmann::json::parse(r.out);
}

#ifdef ZEROMEM_SOURCE_DATA_DIR
/// A quoted path under the source tree's data/ (ZEROMEM_SOURCE_DATA_DIR).
inline std::string data(const std::string& rel) { return std::string("'") + ZEROMEM_SOURCE_DATA_DIR + "/" + rel + "'"; }
#endif
#ifdef ZEROMEM_TEST_DATA_DIR
/// A quoted path under tests/data (ZEROMEM_TEST_DATA_DIR).
inline std::string testdata(const std::string& rel) { return std::string("'") + ZEROMEM_TEST_DATA_DIR + "/" + rel + "'"; }
#endif

/// Expects a nonzero exit, one clear line on stderr containing `must_contain`,
/// and no crash.
inline void expect_error(const std::string& args, const std::string& must_contain) {
    const Outcome r = zeromem(args);
    EXPECT_NE(r.exit_code, 0) << "args: " << args << "\nstdout: " << r.out;
    EXPECT_NE(r.err.find(must_contain), std::string::npos)
        << "args: " << args << "\nstderr: " << r.err << "\nexpected to contain: " << must_contain;
    EXPECT_LE(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;
    EXPECT_NE(r.exit_code, 134) << "abort";
    EXPECT_NE(r.exit_code, 139) << "segfault";
}

}  // namespace cli
