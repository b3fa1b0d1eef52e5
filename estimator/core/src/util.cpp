#include "zeromem/util.h"

#include "zeromem/types.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace zeromem {

namespace {


std::string trim(const std::string& s) {
    std::size_t b = 0, e = s.size();
    while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
    while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
    return s.substr(b, e - b);
}

// Splits "12.5GiB" into a number and its unit suffix; throws on a bad number.
double split_number(const std::string& text, const std::string& field, std::string& unit) {
    const std::string t = trim(text);
    if (t.empty()) throw InputError(field + ": empty value");
    const char* begin = t.c_str();
    char* end = nullptr;
    const double value = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(value))
        throw InputError(field + ": '" + text + "' is not a number");
    unit = trim(std::string(end));
    if (value < 0) throw InputError(field + ": must be positive, got '" + text + "'");
    if (value == 0) throw InputError(field + ": must be greater than zero, got '" + text + "'");
    return value;
}

}  // namespace

uint64_t parse_bytes(const std::string& text, const std::string& field) {
    std::string unit;
    const double value = split_number(text, field, unit);
    const std::string u = to_lower(unit);
    double mult = 0;
    if (u.empty())
        throw InputError(field + ": '" + text + "' has no unit; write it as e.g. " + text + "GB (10^9 bytes) or " +
                         text + "GiB (2^30 bytes), or " + text + "B for bytes");
    if (u == "b") mult = 1;
    else if (u == "kb") mult = 1e3;
    else if (u == "mb") mult = 1e6;
    else if (u == "gb") mult = 1e9;
    else if (u == "tb") mult = 1e12;
    else if (u == "kib") mult = 1024.0;
    else if (u == "mib") mult = 1048576.0;
    else if (u == "gib") mult = 1073741824.0;
    else if (u == "tib") mult = 1099511627776.0;
    else if (u == "k" || u == "m" || u == "g" || u == "t") {
        // "80G": powers of 1000 or of 1024? Refused alike for every size flag.
        const std::string number = trim(text).substr(0, trim(text).size() - unit.size());
        const std::string up(1, static_cast<char>(std::toupper(static_cast<unsigned char>(u[0]))));
        throw InputError(field + ": '" + text + "' is ambiguous; write " + number + up + "B (powers of 1000) or " +
                         number + up + "iB (powers of 1024)");
    } else
        throw InputError(field + ": unknown size unit '" + unit + "' in '" + text +
                         "' (use B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024))");
    const double bytes = std::round(value * mult);
    if (bytes >= 1.8e19) throw InputError(field + ": '" + text + "' is too large");
    if (bytes < 1) throw InputError(field + ": '" + text + "' is less than one byte");
    return static_cast<uint64_t>(bytes);
}

uint64_t parse_bytes_or_zero(const std::string& text, const std::string& field) {
    const std::string t = trim(text);
    char* end = nullptr;
    const double v = std::strtod(t.c_str(), &end);
    if (end != t.c_str() && v == 0.0) return 0;
    return parse_bytes(text, field);
}

int64_t parse_int(const std::string& text, const std::string& field) {
    const std::string t = trim(text);
    std::size_t i = (!t.empty() && (t[0] == '+' || t[0] == '-')) ? 1 : 0;
    if (i == t.size()) throw InputError(field + ": '" + text + "' is not a whole number");
    for (std::size_t j = i; j < t.size(); ++j)
        if (!std::isdigit(static_cast<unsigned char>(t[j]))) {
            char* end = nullptr;
            const double v = std::strtod(t.c_str(), &end);
            if (end == t.c_str() || *end != '\0' || t.find_first_of("xXnN") != std::string::npos)
                throw InputError(field + ": '" + text + "' is not a whole number");
            // Scientific notation of a whole number ("1e3", as --params takes 7e9) is that number.
            if (std::isfinite(v) && std::fabs(v) > 4.611686018427388e18) throw InputError(field + ": '" + text + "' is too large");
            if (!std::isfinite(v) || v != std::floor(v))
                throw InputError(field + ": must be a whole number, got '" + text + "'");
            return static_cast<int64_t>(v);
        }
    if (t.size() - i > 18) throw InputError(field + ": '" + text + "' is too large");
    return std::stoll(t);
}

uint64_t parse_count(const std::string& text, const std::string& field) {
    std::string unit;
    const double value = split_number(text, field, unit);
    const std::string u = to_lower(unit);
    double mult = 0;
    if (u.empty()) mult = 1;
    else if (u == "k") mult = 1e3;
    else if (u == "m") mult = 1e6;
    else if (u == "b" || u == "g") mult = 1e9;
    else if (u == "t") mult = 1e12;
    else
        throw InputError(field + ": unknown suffix '" + unit + "' in '" + text +
                         "' (use k, M, B or T, or a plain number such as 7e9)");
    const double n = std::round(value * mult);
    if (n >= 9.2e18) throw InputError(field + ": '" + text + "' is too large");
    if (n < 1) throw InputError(field + ": '" + text + "' rounds to zero");
    return static_cast<uint64_t>(n);
}

std::string to_lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string format_gib(double bytes, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, bytes / 1073741824.0);
    return buf;
}

std::string gib_text(uint64_t bytes) { return format_gib(double(bytes), 3) + " GiB"; }

std::string format_gb(double bytes, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, bytes / 1e9);
    return buf;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

std::vector<std::string> closest_names(const std::string& name,
                                       const std::vector<std::string>& candidates,
                                       std::size_t max) {
    const std::string n = to_lower(name);
    std::vector<std::pair<std::size_t, std::string>> scored;
    const std::size_t limit = std::max<std::size_t>(2, n.size() / 3);
    for (const auto& c : candidates) {
        const std::string lc = to_lower(c);
        std::size_t d = edit_distance(n, lc);
        const bool related = !n.empty() && (lc.find(n) != std::string::npos || n.find(lc) != std::string::npos);
        if (related) d = std::min<std::size_t>(d, 1);
        if (d <= limit) scored.emplace_back(d, c);
    }
    std::stable_sort(scored.begin(), scored.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<std::string> out;
    for (const auto& s : scored) {
        if (out.size() >= max) break;
        out.push_back(s.second);
    }
    return out;
}

std::vector<std::string> list_presets(const std::string& data_dir, const std::string& subdir) {
    std::vector<std::string> names;
    std::error_code ec;
    const std::filesystem::path dir = std::filesystem::path(data_dir) / subdir;
    if (!std::filesystem::is_directory(dir, ec))
        throw InputError(dir.string() + ": data folder missing; reinstall zeromem or set ZEROMEM_DATA_DIR to its data/");
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().extension() == ".json") names.push_back(it->path().stem().string());
    if (names.empty())
        throw InputError(dir.string() + ": data folder has no presets (*.json); reinstall zeromem or set "
                         "ZEROMEM_DATA_DIR to its data/");
    std::sort(names.begin(), names.end());
    return names;
}

std::string unknown_preset_message(const std::string& what, const std::string& name,
                                   const std::vector<std::string>& known, const std::string& hint) {
    std::string msg = what + " '" + name + "'";
    const auto close = closest_names(name, known);
    if (!close.empty()) {
        msg += " (did you mean: ";
        for (std::size_t i = 0; i < close.size(); ++i) msg += (i ? ", " : "") + close[i];
        msg += "?)";
    }
    msg += "; known:";
    if (known.empty()) msg += " (none found)";
    for (const auto& n : known) msg += " " + n;
    if (!hint.empty()) msg += "; " + hint;
    return msg;
}

std::string data_dir() {
    // Installed: <prefix>/bin/zeromem finds <prefix>/share/zeromem/data, and
    // so does its helper <prefix>/libexec/zeromem/zeromem-measure.
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const std::filesystem::path prefix = self.parent_path().parent_path();
        for (const auto& p : {prefix, prefix.parent_path()}) {
            const std::filesystem::path rel = p / "share" / "zeromem" / "data";
            if (std::filesystem::is_directory(rel, ec)) return rel.string();
            if (self.parent_path().filename() != "zeromem") break;  // the helper's folder only
        }
    }
    if (const char* env = std::getenv("ZEROMEM_DATA_DIR"); env && *env) return env;
    return ZEROMEM_SOURCE_DATA_DIR;  // run from the build tree
}

std::string read_text_file(const std::string& path, const std::string& what, std::uintmax_t max_bytes) {
    std::error_code ec;
    if (path.empty()) throw InputError("no file name given for the " + what + " (an empty path)");
    if (std::filesystem::is_directory(path, ec)) throw InputError(path + ": is a directory, not a " + what);
    // Inputs are small files: a device or pipe (/dev/zero) would be read
    // without end, and anything past max_bytes (64 MiB: a config or a log)
    // is not one we read.
    if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
        throw InputError(path + ": not a regular file (a device, pipe or socket); give a " + what);
    if (const std::uintmax_t size = std::filesystem::file_size(path, ec); !ec && size > max_bytes)
        throw InputError(path + ": " + std::to_string(size) + " bytes is too large for a " + what + " (at most " +
                         std::to_string(max_bytes >> 20) + " MiB)");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(path + ": cannot open file (does it exist?)");
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) throw InputError(path + ": read error");
    return ss.str();
}

const char* version() { return ZEROMEM_VERSION; }

}  // namespace zeromem
