// A fake Python prefix for the software-stack tests: the directories and
// metadata files pip writes (PEP 376 .dist-info with METADATA, setuptools
// .egg-info with PKG-INFO), made in a scratch directory and removed after.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace stacktest {

namespace fs = std::filesystem;

/// A scratch directory unique to this process and `name`, removed on
/// destruction.
struct ScratchDir {
    fs::path root;
    explicit ScratchDir(const std::string& name) {
        const char* tmp = std::getenv("TMPDIR");
        root = fs::path(tmp && *tmp ? tmp : "/tmp") / ("zeromem_stack_" + std::to_string(::getpid()) + "_" + name);
        fs::remove_all(root);
        fs::create_directories(root);
    }
    ~ScratchDir() {
        std::error_code ec;
        fs::remove_all(root, ec);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
    std::string str() const { return root.string(); }
};

inline void write_file(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
}

/// The core metadata pip writes at the top of METADATA / PKG-INFO (the
/// description after the blank line names another version, which must not
/// be read).
inline std::string metadata(const std::string& name, const std::string& version) {
    return "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version +
           "\nSummary: test package\n\nVersion: 9.9.9 appears in the description, not a header\n";
}

/// <prefix>/lib/python3.<minor>/site-packages/<dir>.dist-info/METADATA with
/// Version: `version` (the directory name may say otherwise).
inline void add_dist_info(const fs::path& prefix, const std::string& dir, const std::string& name,
                          const std::string& version, const std::string& minor = "11") {
    write_file(prefix / ("lib/python3." + minor) / "site-packages" / (dir + ".dist-info") / "METADATA",
               metadata(name, version));
}

/// The virtualenv the task describes: deepspeed 0.14.4, torch 2.3.1,
/// transformers 4.44.2 under lib/python3.11/site-packages.
inline void make_stack_env(const fs::path& prefix) {
    add_dist_info(prefix, "deepspeed-0.14.4", "deepspeed", "0.14.4");
    add_dist_info(prefix, "torch-2.3.1", "torch", "2.3.1");
    add_dist_info(prefix, "transformers-4.44.2", "transformers", "4.44.2");
}

}  // namespace stacktest
