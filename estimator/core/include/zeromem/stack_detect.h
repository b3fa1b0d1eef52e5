// The software stack the user runs, read from a Python environment without
// starting Python: the distribution metadata (PEP 376 .dist-info, setuptools
// .egg-info) of deepspeed, torch and transformers under a prefix's
// site-packages, or a `pip freeze` output. The library reads no environment
// variable: the caller passes their values in (StackEnvironment).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace zeromem {

/// The environment variables the stack is read from, as the caller found
/// them ("" = unset).
struct StackEnvironment {
    std::string virtual_env;    ///< $VIRTUAL_ENV: an activated virtualenv's prefix
    std::string conda_prefix;   ///< $CONDA_PREFIX: an activated conda environment's prefix
    std::string path;           ///< $PATH: where `--stack auto` looks for python3
    std::string pyenv_version;  ///< $PYENV_VERSION: the version a pyenv shim runs
    std::string zeromem_stack;  ///< $ZEROMEM_STACK: "defaults", "auto" or ""
};

/// One package's installed version and where it was read.
struct FoundVersion {
    std::string version;  ///< the Version: of its metadata ("0.14.4")
    std::string source;   ///< "$VIRTUAL_ENV=/x: deepspeed-0.14.4.dist-info"
};

/// deepspeed, torch and transformers as found (nullopt: not installed where
/// looked).
struct FoundStack {
    std::optional<FoundVersion> deepspeed, torch, transformers;
    std::string where;               ///< where it looked ("$VIRTUAL_ENV=/x"), "" when nowhere
    std::vector<std::string> notes;  ///< lines skipped, installs found twice, how python3 was resolved
};

/// PEP 503 normalisation: lower case, each run of '-', '_', '.' one '-'
/// ("Deep_Speed" -> "deep-speed"; "DeepSpeed" -> "deepspeed").
std::string normalize_distribution_name(const std::string& name);

/// The Version: header of a METADATA or PKG-INFO text (core metadata, RFC
/// 822 headers before the first blank line). Throws InputError naming
/// `field` and `file` when there is none.
std::string metadata_version(const std::string& text, const std::string& file, const std::string& field);

/// The three packages of a `pip freeze` output (`name==version` lines;
/// comments, blank lines and option lines skipped; `-e` and `name @ URL`
/// lines skipped with a note, their version being unknown). `file` names the
/// source in each version's source and in errors: a line that is not a
/// requirement throws InputError naming the file and line.
FoundStack parse_pip_freeze(const std::string& text, const std::string& file);

/// The package directories of a Python prefix: <prefix>/lib/python3.*/
/// site-packages (and dist-packages), newest Python first.
std::vector<std::string> prefix_package_dirs(const std::string& prefix);

/// Reads deepspeed, torch and transformers from the metadata directories in
/// `dirs` (the first directory holding a package wins). `where` labels the
/// sources ("$VIRTUAL_ENV=/x"). Throws InputError naming the setting
/// (stack.torch) and file when a metadata file has no version.
FoundStack read_package_dirs(const std::vector<std::string>& dirs, const std::string& where);

/// The python3 first on `path`, resolved without running it: a virtualenv
/// (pyvenv.cfg beside its bin/), a pyenv shim (PYENV_VERSION, else the
/// pyenv root's `version` file), else the prefix above the real
/// interpreter's bin/; a system prefix (/usr, /usr/local) adds Debian's
/// dist-packages. Its package directories and how it was resolved.
struct PythonOnPath {
    std::string python;             ///< the python3 found on PATH
    std::string prefix;             ///< its installation prefix
    std::vector<std::string> dirs;  ///< package directories to read
    std::string how;                ///< one line: how the prefix was found
};
std::optional<PythonOnPath> python_on_path(const std::string& path, const std::string& pyenv_version);

/// The stack of the active environment: $VIRTUAL_ENV, else $CONDA_PREFIX;
/// with `with_path` (--stack auto) the python3 on PATH as well, searched
/// after them for a package they lack. Nothing to read: `where` is "".
FoundStack detect_stack(const StackEnvironment& env, bool with_path);

}  // namespace zeromem
