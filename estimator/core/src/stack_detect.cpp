// Reading the installed deepspeed, torch and transformers without starting
// Python (see stack_detect.h).
#include "zeromem/stack_detect.h"

#include "zeromem/types.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

namespace zeromem {

namespace fs = std::filesystem;

namespace {

// The packages whose versions change an estimate, in report order.
constexpr const char* kPackages[] = {"deepspeed", "torch", "transformers"};

std::optional<FoundVersion>& slot(FoundStack& s, const std::string& package) {
    if (package == "deepspeed") return s.deepspeed;
    if (package == "torch") return s.torch;
    return s.transformers;
}

bool is_package(const std::string& normalized) {
    for (const char* p : kPackages)
        if (normalized == p) return true;
    return false;
}

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return {};
    return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// The start of a file, at most `limit` bytes; nullopt when it cannot be
// read. Metadata headers come first; a runaway file is cut at 256 KiB.
std::optional<std::string> read_text(const fs::path& p, std::size_t limit = 256 << 10) {
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) return std::nullopt;  // a directory, FIFO or device is never opened
    std::ifstream in(p, std::ios::binary);
    if (!in) return std::nullopt;
    std::string text(limit, '\0');
    in.read(text.data(), std::streamsize(text.size()));
    text.resize(std::size_t(in.gcount()));
    return text;
}

bool is_dir(const fs::path& p) {
    std::error_code ec;
    return fs::is_directory(p, ec);
}

// A PEP 508 distribution name: letters, digits, '.', '_', '-', starting and
// ending with a letter or digit.
bool valid_name(const std::string& n) {
    if (n.empty() || !std::isalnum(static_cast<unsigned char>(n.front())) ||
        !std::isalnum(static_cast<unsigned char>(n.back())))
        return false;
    return std::all_of(n.begin(), n.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    });
}

// A PEP 440 version as pip freeze writes it (public and local parts).
bool valid_version(const std::string& v) {
    if (v.empty() || !std::isalnum(static_cast<unsigned char>(v.front()))) return false;
    return std::all_of(v.begin(), v.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' || c == '+' || c == '!' ||
               c == '*';
    });
}

}  // namespace

std::string normalize_distribution_name(const std::string& name) {
    std::string out;
    out.reserve(name.size());
    bool sep = false;
    for (char c : name) {
        if (c == '-' || c == '_' || c == '.') {
            sep = true;
            continue;
        }
        if (sep && !out.empty()) out += '-';
        sep = false;
        out += char(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
}

std::string metadata_version(const std::string& text, const std::string& file, const std::string& field) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) break;  // the headers end at the first blank line; the description follows
        if (line.size() >= 8 && to_lower(line.substr(0, 8)) == "version:") {
            const std::string v = trim(line.substr(8));
            if (v.empty()) break;
            compare_versions(v, "0", field + " (" + file + ")");
            return v;
        }
    }
    throw InputError(field + ": " + file + " has no Version: line");
}

FoundStack parse_pip_freeze(const std::string& text, const std::string& file) {
    FoundStack out;
    out.where = file;
    std::istringstream in(text);
    std::string raw;
    int n = 0;
    auto fail = [&](const std::string& why) {
        throw InputError(file + ":" + std::to_string(n) + ": " + why);
    };
    while (std::getline(in, raw)) {
        ++n;
        std::string line = raw;
        if (const auto hash = line.find(" #"); hash != std::string::npos) line.resize(hash);
        line = trim(line);
        if (line.empty() || line[0] == '#') continue;
        const std::string shown = line.size() > 80 ? line.substr(0, 80) + "..." : line;
        if (line.rfind("-e ", 0) == 0 || line.rfind("--editable", 0) == 0) {
            out.notes.push_back(file + ":" + std::to_string(n) + ": editable install skipped (no version in the line): " + shown);
            continue;
        }
        if (line[0] == '-') {
            out.notes.push_back(file + ":" + std::to_string(n) + ": option line skipped: " + shown);
            continue;
        }
        std::string name, version;
        if (const auto at = line.find(" @ "); at != std::string::npos) {
            name = trim(line.substr(0, at));
            if (!valid_name(name)) fail("'" + shown + "' is not NAME @ URL (a pip freeze line)");
            out.notes.push_back(file + ":" + std::to_string(n) + ": " + name +
                                " installed from a URL skipped (no version in the line): " + shown);
            continue;
        }
        const auto eq = line.find("==");
        if (eq == std::string::npos) fail("'" + shown + "' is not NAME==VERSION (a pip freeze line)");
        name = trim(line.substr(0, eq));
        if (const auto br = name.find('['); br != std::string::npos && name.back() == ']') name = trim(name.substr(0, br));
        version = line.substr(eq + 2);
        if (!version.empty() && version[0] == '=') version.erase(0, 1);  // === (arbitrary equality)
        if (const auto semi = version.find(';'); semi != std::string::npos) version.resize(semi);  // a marker
        version = trim(version);
        if (!valid_name(name)) fail("'" + name + "' is not a package name (in '" + shown + "')");
        if (!valid_version(version)) fail("'" + version + "' is not a version (in '" + shown + "')");
        const std::string key = normalize_distribution_name(name);
        if (!is_package(key)) continue;
        auto& s = slot(out, key);
        if (s) fail(key + " is listed twice (" + s->source + ")");
        compare_versions(version, "0", "stack." + key + " (" + file + ":" + std::to_string(n) + ")");
        s = FoundVersion{version, file + ":" + std::to_string(n) + ": " + name + "==" + version};
    }
    return out;
}

std::vector<std::string> prefix_package_dirs(const std::string& prefix) {
    std::vector<std::pair<long, fs::path>> found;  // (python minor, dir)
    std::vector<fs::path> seen;
    for (const char* lib : {"lib", "lib64"}) {
        const fs::path base = fs::path(prefix) / lib;
        std::error_code ec;
        fs::directory_iterator it(base, ec), end;
        for (; !ec && it != end; it.increment(ec)) {
            const std::string name = it->path().filename().string();
            if (name.rfind("python3.", 0) != 0 || name.size() == 8) continue;
            const std::string minor = name.substr(8);
            if (minor.size() > 4 || !std::all_of(minor.begin(), minor.end(), [](char c) { return c >= '0' && c <= '9'; }))
                continue;
            for (const char* sub : {"site-packages", "dist-packages"}) {
                const fs::path d = it->path() / sub;
                if (!is_dir(d)) continue;
                std::error_code ec2;
                const fs::path canon = fs::weakly_canonical(d, ec2);
                if (std::find(seen.begin(), seen.end(), canon) != seen.end()) continue;  // lib64 -> lib
                seen.push_back(canon);
                found.emplace_back(std::stol(minor), d);
            }
        }
    }
    std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<std::string> out;
    for (const auto& f : found) out.push_back(f.second.string());
    if (const fs::path deb = fs::path(prefix) / "lib/python3/dist-packages"; is_dir(deb)) out.push_back(deb.string());
    return out;
}

namespace {

// One metadata directory (or egg-info file) of a package, with its version.
struct Install {
    std::string entry, version;
};

// The installs of the three packages in one package directory.
void scan_dir(const std::string& dir, std::vector<std::pair<std::string, Install>>& out) {
    std::error_code ec;
    fs::directory_iterator it(dir, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        const std::string entry = it->path().filename().string();
        const bool dist = entry.size() > 10 && entry.compare(entry.size() - 10, 10, ".dist-info") == 0;
        const bool egg = entry.size() > 9 && entry.compare(entry.size() - 9, 9, ".egg-info") == 0;
        if (!dist && !egg) continue;
        const std::string stem = entry.substr(0, entry.size() - (dist ? 10 : 9));
        const std::string key = normalize_distribution_name(stem.substr(0, stem.find('-')));
        if (!is_package(key)) continue;
        const fs::path meta = dist ? it->path() / "METADATA" : is_dir(it->path()) ? it->path() / "PKG-INFO" : it->path();
        const auto text = read_text(meta);
        if (!text) {
            std::error_code fec;
            const bool exists = fs::exists(fs::symlink_status(meta, fec));
            throw InputError("stack." + key + ": " + meta.string() +
                             (exists && !fs::is_regular_file(meta, fec) ? " is not a regular file" : " cannot be read"));
        }
        out.emplace_back(key, Install{entry, metadata_version(*text, meta.string(), "stack." + key)});
    }
}

}  // namespace

FoundStack read_package_dirs(const std::vector<std::string>& dirs, const std::string& where) {
    FoundStack out;
    out.where = where;
    for (const auto& dir : dirs) {
        std::vector<std::pair<std::string, Install>> installs;
        scan_dir(dir, installs);
        for (const char* p : kPackages) {
            auto& s = slot(out, p);
            if (s) continue;  // an earlier directory holds it
            const Install* best = nullptr;
            std::string all;
            for (const auto& [key, inst] : installs) {
                if (key != p) continue;
                all += (all.empty() ? "" : ", ") + inst.entry;
                if (!best || compare_versions(inst.version, best->version, "stack." + key) > 0) best = &inst;
            }
            if (!best) continue;
            if (all != best->entry)
                out.notes.push_back(std::string(p) + " is installed more than once in " + dir + " (" + all +
                                    "); the newest, " + best->version + ", is followed");
            s = FoundVersion{best->version, where + ": " + best->entry};
        }
    }
    return out;
}

namespace {

// The `key = value` of a pyvenv.cfg, "" when absent.
std::string cfg_value(const std::string& text, const std::string& key) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        const auto eq = line.find('=');
        if (eq != std::string::npos && to_lower(trim(line.substr(0, eq))) == key) return trim(line.substr(eq + 1));
    }
    return {};
}

bool executable_file(const fs::path& p) {
    std::error_code ec;
    const fs::file_status st = fs::status(p, ec);
    if (ec || !fs::is_regular_file(st)) return false;
    return (st.permissions() & (fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec)) != fs::perms::none;
}

// A pyenv shim directory (<root>/shims beside <root>/versions): the prefix of
// the version it runs, or "" with a note why not.
std::string pyenv_prefix(const fs::path& shims, const std::string& pyenv_version, std::string& how) {
    const fs::path root = shims.parent_path();
    std::string v = pyenv_version, from = "$PYENV_VERSION";
    if (v.empty()) {
        from = (root / "version").string();
        if (const auto text = read_text(root / "version")) {
            std::istringstream in(*text);
            std::string line;
            while (std::getline(in, line))
                if (!trim(line).empty() && trim(line)[0] != '#') {
                    v = trim(line);
                    break;
                }
        }
    }
    v = v.substr(0, v.find(':'));  // the first of several
    if (v.empty() || v == "system") {
        how = "pyenv shim " + (shims / "python3").string() + " runs the system python (" + from + "); PATH searched on";
        return {};
    }
    const fs::path prefix = root / "versions" / v;
    if (!is_dir(prefix)) {
        how = "pyenv shim " + (shims / "python3").string() + ": version " + v + " (" + from + ") is not in " +
              (root / "versions").string() + "; PATH searched on";
        return {};
    }
    how = "pyenv shim " + (shims / "python3").string() + " -> " + prefix.string() + " (" + from + ")";
    return prefix.string();
}

// The Python minor version of an interpreter file name ("python3.11" -> "11").
std::string minor_of(const std::string& filename) {
    if (filename.rfind("python3.", 0) != 0) return {};
    std::string m;
    for (std::size_t i = 8; i < filename.size() && std::isdigit(static_cast<unsigned char>(filename[i])); ++i)
        m += filename[i];
    return m;
}

}  // namespace

std::optional<PythonOnPath> python_on_path(const std::string& path, const std::string& pyenv_version) {
    std::istringstream in(path);
    std::string dir;
    std::vector<std::string> skipped;
    while (std::getline(in, dir, ':')) {
        if (dir.empty()) continue;
        const fs::path bin(dir), py = bin / "python3";
        if (!executable_file(py)) continue;
        PythonOnPath r;
        r.python = py.string();
        if (bin.filename() == "shims" && is_dir(bin.parent_path() / "versions")) {
            r.prefix = pyenv_prefix(bin, pyenv_version, r.how);
            if (r.prefix.empty()) {
                skipped.push_back(r.how);
                continue;
            }
        } else if (const auto cfg = read_text(bin.parent_path() / "pyvenv.cfg")) {
            r.prefix = bin.parent_path().string();
            r.how = "virtualenv " + r.prefix + " (pyvenv.cfg)";
            r.dirs = prefix_package_dirs(r.prefix);
            const std::string home = cfg_value(*cfg, "home");
            if (to_lower(cfg_value(*cfg, "include-system-site-packages")) == "true" && !home.empty()) {
                for (const auto& d : prefix_package_dirs(fs::path(home).parent_path().string())) r.dirs.push_back(d);
                r.how += ", with the system site-packages of " + home;
            }
            if (!skipped.empty()) r.how = skipped.front() + "; " + r.how;
            return r;
        } else {
            std::error_code ec;
            const fs::path real = fs::canonical(py, ec);
            if (ec) continue;
            const auto head = read_text(real, 2);
            if (head && head->rfind("#!", 0) == 0) {
                skipped.push_back(py.string() + " is a script zeromem does not follow; PATH searched on");
                continue;
            }
            r.prefix = real.parent_path().parent_path().string();
            r.how = py.string() + (real == py ? std::string() : " -> " + real.string());
            const std::string minor = minor_of(real.filename().string());
            if (!minor.empty() && (r.prefix == "/usr" || r.prefix == "/usr/local"))  // Debian's pip target
                if (const fs::path local = "/usr/local/lib/python3." + minor + "/dist-packages"; is_dir(local))
                    r.dirs.push_back(local.string());
        }
        for (const auto& d : prefix_package_dirs(r.prefix))
            if (std::find(r.dirs.begin(), r.dirs.end(), d) == r.dirs.end()) r.dirs.push_back(d);
        if (r.prefix == "/usr/local" && is_dir("/usr/lib/python3/dist-packages"))
            r.dirs.push_back("/usr/lib/python3/dist-packages");
        if (!skipped.empty()) r.how = skipped.front() + "; " + r.how;
        return r;
    }
    return std::nullopt;
}

FoundStack detect_stack(const StackEnvironment& env, bool with_path) {
    std::vector<std::pair<std::string, std::vector<std::string>>> sources;  // (label, package dirs)
    std::vector<std::string> prefixes, notes;
    auto add_prefix = [&](const std::string& label, const std::string& prefix, std::vector<std::string> dirs) {
        std::error_code ec;
        const std::string canon = fs::weakly_canonical(prefix, ec).string();
        if (std::find(prefixes.begin(), prefixes.end(), canon) != prefixes.end()) return;
        prefixes.push_back(canon);
        if (dirs.empty()) notes.push_back(label + " has no lib/python3.*/site-packages: nothing read there");
        sources.emplace_back(label, std::move(dirs));
    };
    if (!env.virtual_env.empty())
        add_prefix("$VIRTUAL_ENV=" + env.virtual_env, env.virtual_env, prefix_package_dirs(env.virtual_env));
    else if (!env.conda_prefix.empty())
        add_prefix("$CONDA_PREFIX=" + env.conda_prefix, env.conda_prefix, prefix_package_dirs(env.conda_prefix));
    if (with_path) {
        if (const auto py = python_on_path(env.path, env.pyenv_version)) {
            notes.push_back("python3 on PATH: " + py->how);
            add_prefix("python3 on PATH (" + py->prefix + ")", py->prefix, py->dirs);
        } else {
            notes.push_back("no python3 on PATH that zeromem can resolve");
        }
    }
    FoundStack out;
    for (const auto& [label, dirs] : sources) {
        FoundStack one = read_package_dirs(dirs, label);
        out.where += (out.where.empty() ? "" : ", then ") + label;
        for (const char* p : kPackages)
            if (!slot(out, p)) slot(out, p) = slot(one, p);
        for (auto& n : one.notes) notes.push_back(std::move(n));
    }
    if (out.where.empty() && with_path) out.where = "PATH (no python3)";
    out.notes = std::move(notes);
    return out;
}

}  // namespace zeromem
