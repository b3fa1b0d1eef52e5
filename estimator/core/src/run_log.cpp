// The run-log dispatcher and the shared pieces of its readers (see
// zeromem/run_log.h and run_log_lines.h), plus the two JSON documents:
// torch.cuda.memory_stats() and zeromem measure.
#include "run_log_lines.h"

#include "zeromem/ds_config.h"
#include "zeromem/types.h"
#include "zeromem/util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

namespace zeromem {

const char* to_string(LogFormat f) {
    switch (f) {
    case LogFormat::ds_see_memory_usage: return "see_memory_usage";
    case LogFormat::ds_throughput_timer: return "ThroughputTimer";
    case LogFormat::megatron_report_memory: return "report_memory";
    case LogFormat::hf_trainer_metrics: return "Trainer memory metrics";
    case LogFormat::torch_memory_stats: return "torch.cuda.memory_stats";
    case LogFormat::torch_memory_summary: return "torch.cuda.memory_summary";
    case LogFormat::torch_oom_message: return "CUDA out of memory";
    case LogFormat::nvidia_smi_csv: return "nvidia-smi";
    case LogFormat::gnu_time_verbose: return "/usr/bin/time -v";
    case LogFormat::zeromem_measure: return "zeromem measure";
    case LogFormat::torch_memory_snapshot: return "torch memory snapshot";
    }
    return "?";
}

namespace run_log_detail {

std::vector<Line> split_lines(const std::string& text) {
    std::vector<Line> lines;
    std::size_t start = 0, number = 1;
    const std::string_view all(text);
    while (start < all.size()) {
        std::size_t end = all.find('\n', start);
        if (end == std::string_view::npos) end = all.size();
        std::string_view l = all.substr(start, end - start);
        if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
        lines.push_back({l, number++});
        start = end + 1;
    }
    return lines;
}

void add_reading(std::vector<MemoryObservation>& out, MemoryObservation o, const std::string& path) {
    if (out.size() >= kMaxReadings)
        Where{path, o.line, o.format}.fail("more than " + std::to_string(kMaxReadings) +
                                           " memory readings in one file (this is the next); give calibrate the "
                                           "part of the log around the steps to compare");
    out.push_back(std::move(o));
}

void Where::fail(const std::string& what) const {
    throw InputError(path + ":" + std::to_string(line) + ": " + to_string(format) + ": " + what);
}

std::optional<Decimal> read_decimal(std::string_view text, std::size_t& pos) {
    std::size_t p = pos;
    while (p < text.size() && (text[p] == ' ' || text[p] == '\t')) ++p;
    bool negative = false;
    if (p < text.size() && (text[p] == '-' || text[p] == '+')) negative = text[p++] == '-';
    Decimal d;
    int digits = 0;
    bool point = false;
    for (; p < text.size(); ++p) {
        const char c = text[p];
        if (c == '.' && !point) {
            point = true;
            continue;
        }
        if (c < '0' || c > '9') break;
        if (++digits > 18) return std::nullopt;
        d.mantissa = d.mantissa * 10 + (c - '0');
        if (point) ++d.decimals;
    }
    if (digits == 0) return std::nullopt;
    if (negative) d.mantissa = -d.mantissa;
    pos = p;
    return d;
}

namespace {

// value x unit in bytes (long double: 64-bit mantissa, exact to the byte below 2^62).
long double scaled(const Decimal& d, long double unit, const Where& w) {
    const long double v = static_cast<long double>(d.mantissa) * unit / std::pow(10.0L, d.decimals);
    if (!(std::fabs(v) < 4.6e18L)) w.fail("a value beyond 2^62 bytes");
    return v;
}

int64_t to_int(long double v) { return static_cast<int64_t>(std::llround(v)); }

}  // namespace

Reading rounded(const Decimal& d, long double unit, long double step, const Where& w) {
    const long double v = scaled(d, unit, w);
    const long double half = step * unit / 2;
    const long double low = d.mantissa >= 0 && v - half < 0 ? 0.0L : v - half;  // a printed 0 of a count is >= 0
    return {to_int(v), to_int(low), to_int(v + half)};
}

Reading floored(const Decimal& d, long double unit, long double step, const Where& w) {
    const long double v = scaled(d, unit, w);
    return {to_int(v), to_int(v), to_int(v + step * unit)};
}

long double binary_unit(std::string_view unit) {
    if (unit == "bytes" || unit == "B") return 1.0L;
    if (unit == "KiB") return kKiB;
    if (unit == "MiB") return kMiB;
    if (unit == "GiB") return kGiB;
    if (unit == "TiB") return kGiB * 1024.0L;
    return 0.0L;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool expect(std::string_view text, std::size_t& pos, std::string_view word) {
    std::size_t p = pos;
    while (p < text.size() && (text[p] == ' ' || text[p] == '\t')) ++p;
    if (text.substr(p, word.size()) != word) return false;
    pos = p + word.size();
    return true;
}

namespace {

using nlohmann::json;

// Where a JSON document's values are: its text's key lines (ds_config.h
// ds_config_key_lines) and the file, for errors that name FILE:LINE.
struct JsonWhere {
    const std::string& path;
    const std::map<std::string, int>& lines;
    LogFormat format;
    int line_of(const std::string& pointer) const { return ds_config_line_of(lines, pointer); }
    [[noreturn]] void fail(const std::string& pointer, const std::string& what) const {
        const int l = line_of(pointer);
        throw InputError(path + (l > 0 ? ":" + std::to_string(l) : std::string()) + ": " + to_string(format) + ": " + what);
    }
};

std::string pointer_to(const std::string& parent, const std::string& key) {
    return parent + "/" + (json::json_pointer() / key).to_string().substr(1);
}

// A byte count held in `j[key]` (j at JSON pointer `at`): a whole number >= 0 (json: exact).
std::optional<Reading> json_bytes(const json& j, const char* key, const std::string& at, const JsonWhere& w) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    if (it->is_number_integer() && !it->is_number_unsigned() && it->get<int64_t>() < 0)
        w.fail(pointer_to(at, key), "'" + std::string(key) + "' is negative (" + it->dump() + " bytes)");
    if (!it->is_number_unsigned() && !it->is_number_integer())
        w.fail(pointer_to(at, key), "'" + std::string(key) + "' is not a whole number of bytes");
    const uint64_t v = it->get<uint64_t>();
    if (v > (uint64_t(1) << 62)) w.fail(pointer_to(at, key), "'" + std::string(key) + "' is beyond 2^62 bytes");
    const auto b = static_cast<int64_t>(v);
    return Reading{b, b, b};
}

}  // namespace

// json.dumps(torch.cuda.memory_stats()): the allocator's counters in bytes
// (torch/cuda/memory.py memory_stats: "allocated_bytes.all.current" etc.).
bool read_memory_stats_json(const nlohmann::json& j, const std::string& path, const std::map<std::string, int>& lines,
                            std::vector<MemoryObservation>& out) {
    if (!j.is_object() || !j.contains("allocated_bytes.all.current")) return false;
    const JsonWhere w{path, lines, LogFormat::torch_memory_stats};
    MemoryObservation o;
    o.format = w.format;
    o.line = static_cast<std::size_t>(std::max(1, w.line_of("/allocated_bytes.all.current")));
    o.message = "memory_stats";
    o.allocated = json_bytes(j, "allocated_bytes.all.current", "", w);
    o.max_allocated = json_bytes(j, "allocated_bytes.all.peak", "", w);
    o.reserved = json_bytes(j, "reserved_bytes.all.current", "", w);
    o.max_reserved = json_bytes(j, "reserved_bytes.all.peak", "", w);
    add_reading(out, std::move(o), path);
    return true;
}

// zeromem measure --output: ranks[].phases[] with peak_bytes / end_bytes
// {device: {..., total}} and host_rss_peak, all bytes.
bool read_measure_json(const nlohmann::json& j, const std::string& path, const std::map<std::string, int>& lines,
                       std::vector<MemoryObservation>& out) {
    if (!j.is_object() || !j.contains("ranks") || !j.contains("backend")) return false;
    const JsonWhere w{path, lines, LogFormat::zeromem_measure};
    if (!j["ranks"].is_array()) w.fail("/ranks", "'ranks' is not a list");
    for (std::size_t ri = 0; ri < j["ranks"].size(); ++ri) {
        const auto& r = j["ranks"][ri];
        const std::string rank_at = "/ranks/" + std::to_string(ri);
        if (!r.is_object() || !r.contains("phases") || !r["phases"].is_array())
            w.fail(rank_at + "/phases", "a rank without a 'phases' list");
        for (std::size_t pi = 0; pi < r["phases"].size(); ++pi) {
            const auto& p = r["phases"][pi];
            const std::string at = rank_at + "/phases/" + std::to_string(pi);
            if (!p.is_object() || !p.contains("name") || !p["name"].is_string()) w.fail(at + "/name", "a phase without a 'name'");
            MemoryObservation o;
            o.format = w.format;
            o.line = static_cast<std::size_t>(std::max(1, w.line_of(at + "/name")));
            o.message = p["name"].get<std::string>();
            if (r.contains("rank") && r["rank"].is_number_integer()) o.rank = r["rank"].get<int>();
            const auto device = [&](const char* which) -> std::optional<Reading> {
                if (!p.contains(which) || !p[which].is_object() || !p[which].contains("device")) return std::nullopt;
                return json_bytes(p[which]["device"], "total", at + "/" + which + "/device", w);
            };
            o.max_allocated = device("peak_bytes");
            o.allocated = device("end_bytes");
            o.max_host = json_bytes(p, "host_rss_peak", at, w);
            o.host_scope = HostScope::process;
            o.peak_window = PeakWindow::since_previous;  // measure resets the peaks at each phase (PhaseClock::begin)
            add_reading(out, std::move(o), path);
        }
    }
    return true;
}

}  // namespace run_log_detail

namespace {

// The document `text` as JSON, or its parse error as "<path>:<line>:
// malformed or cut-off JSON" in `error`.
nlohmann::json parse_json(const std::string& text, const std::string& path, std::string& error) {
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
        error = path + ":" + std::to_string(json_error_line(text, e.byte)) + ": malformed or cut-off JSON";
    } catch (const nlohmann::json::out_of_range&) {
        error = path + ": a JSON number is out of range";
    }
    return nlohmann::json();
}

// A reading no printer can print: a negative amount in use (a Trainer delta may be negative: it counts from
// the start), a peak below the current figure, more in use than the device holds (each beyond the printers'
// rounding, Reading low/high).
void check_consistent(const MemoryObservation& o, const std::string& path) {
    const std::string at = path + ":" + std::to_string(o.line) + ": " + to_string(o.format) + ": ";
    if (o.baseline == Baseline::absolute) {
        const std::pair<const char*, const std::optional<Reading>*> figures[] = {
            {"allocated", &o.allocated}, {"max allocated", &o.max_allocated}, {"reserved", &o.reserved},
            {"max reserved", &o.max_reserved}, {"host", &o.host}, {"max host", &o.max_host},
            {"device used", &o.device_used}, {"device total", &o.device_total}, {"requested", &o.requested}};
        for (const auto& [name, r] : figures)
            if (*r && (*r)->high < 0) throw InputError(at + "the " + std::string(name) + " figure is negative");
    }
    auto below = [&](const std::optional<Reading>& peak, const std::optional<Reading>& now, const char* what) {
        if (peak && now && peak->high < now->low) throw InputError(at + what);
    };
    below(o.max_allocated, o.allocated, "the peak allocated is below the allocated figure printed with it");
    below(o.max_reserved, o.reserved, "the peak reserved is below the reserved figure printed with it");
    if (o.baseline == Baseline::absolute) {
        below(o.reserved, o.allocated, "more is allocated than reserved (the allocator hands out what it reserved)");
        below(o.device_total, o.device_used, "more is in use than the device holds");
    }
}

}  // namespace

RunLog read_run_log(const std::string& text, const std::string& path) {
    using namespace run_log_detail;
    if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) return read_run_log(text.substr(3), path);  // UTF-8 BOM (an editor's)
    RunLog log;
    log.path = path;
    if (!text.empty() && static_cast<unsigned char>(text[0]) == 0x80) {  // pickle PROTO: a memory snapshot
        read_memory_snapshot(text, path, log);
        log.formats.push_back(LogFormat::torch_memory_snapshot);
        return log;
    }
    std::vector<MemoryObservation> obs;
    // A document opening with '{' is tried as JSON first; a Trainer log may
    // open with a Python dict, so one that does not parse is read as text, and
    // its JSON error is the answer only when no line reader finds a reading.
    const std::size_t first = text.find_first_not_of(" \t\r\n");
    std::string json_error;
    bool done = false;
    if (first != std::string::npos && text[first] == '{') {
        const nlohmann::json doc = parse_json(text, path, json_error);
        if (json_error.empty()) {
            const std::map<std::string, int> lines = ds_config_key_lines(text);
            done = read_memory_stats_json(doc, path, lines, obs) || read_measure_json(doc, path, lines, obs);
        }
    }
    if (!done) {
        const std::vector<Line> lines = split_lines(text);
        read_see_memory_usage(lines, path, obs);
        read_throughput_timer(lines, path, obs);
        read_megatron_report_memory(lines, path, obs);
        read_trainer_metrics(lines, path, obs);
        read_oom_messages(lines, path, obs);
        read_memory_summary(lines, path, obs);
        read_nvidia_smi(lines, path, obs);
        read_gnu_time(lines, path, obs);
    }
    if (obs.empty() && !json_error.empty()) throw InputError(json_error);
    if (obs.empty())
        throw InputError(path + ": no memory reading recognised (DeepSpeed see_memory_usage or ThroughputTimer, "
                                "Megatron report_memory, HF Trainer memory metrics, torch.cuda.memory_stats JSON or "
                                "memory_summary, a CUDA out-of-memory message, nvidia-smi --query-gpu CSV, "
                                "/usr/bin/time -v, zeromem measure JSON)");
    for (const auto& o : obs) check_consistent(o, path);
    std::stable_sort(obs.begin(), obs.end(),
                     [](const MemoryObservation& a, const MemoryObservation& b) { return a.line < b.line; });
    for (const auto& o : obs)
        if (std::find(log.formats.begin(), log.formats.end(), o.format) == log.formats.end())
            log.formats.push_back(o.format);
    log.observations = std::move(obs);
    return log;
}

RunLog read_run_log_file(const std::string& path) {
    // A memory snapshot carries its trace and stack frames: larger than a log. Only a regular file is
    // opened to look at its first byte (opening a FIFO would wait for a writer); read_text_file names the rest.
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return read_run_log(read_text_file(path, "training log (--log)"), path);
    std::ifstream probe(path, std::ios::binary);
    const bool pickle = probe && probe.peek() == 0x80;
    if (pickle) return read_run_log(read_text_file(path, "memory snapshot (--log)", std::uintmax_t(256) << 20), path);
    return read_run_log(read_text_file(path, "training log (--log)"), path);
}

}  // namespace zeromem
