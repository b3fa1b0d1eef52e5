// Shared pieces of the run-log readers (run_log*.cpp): lines, printed
// decimals, readings with their printed range, errors naming file and line.
// Private to the estimator library.
#pragma once

#include "zeromem/run_log.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zeromem::run_log_detail {

constexpr long double kKiB = 1024.0L;
constexpr long double kMiB = 1048576.0L;
constexpr long double kGiB = 1073741824.0L;

/// One line of the file without its end-of-line (\n or \r\n), 1-based.
struct Line {
    std::string_view text;
    std::size_t number = 0;
};
std::vector<Line> split_lines(const std::string& text);

/// Where a reader is, for its errors: "<path>:<line>: <format>: <what>".
struct Where {
    const std::string& path;
    std::size_t line;
    LogFormat format;
    [[noreturn]] void fail(const std::string& what) const;
};

/// A number as printed: optional sign, digits, optional fraction.
struct Decimal {
    int64_t mantissa = 0;  ///< the digits without the point, signed
    int decimals = 0;      ///< digits after the point
};

/// Reads a decimal at text[pos] after any spaces and advances pos past it;
/// nullopt (pos unchanged) when none is there or it has more than 18 digits.
std::optional<Decimal> read_decimal(std::string_view text, std::size_t& pos);

/// The printed value times `unit`, rounded to the nearest byte, in a
/// Reading whose range is [value - step/2, value + step/2] for a printer that
/// rounds to `step`, or [value, value + step] when it truncates (floors).
/// Fails at `w` when the value is beyond +-2^62 bytes.
Reading rounded(const Decimal& d, long double unit, long double step, const Where& w);
Reading floored(const Decimal& d, long double unit, long double step, const Where& w);

/// Bytes per unit of "bytes", "B", "KiB", "MiB", "GiB", "TiB"; 0 for another word.
long double binary_unit(std::string_view unit);

std::string_view trim(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);
/// Skips spaces and reads `word` at text[pos]; false (pos unchanged) when it is not there.
bool expect(std::string_view text, std::size_t& pos, std::string_view word);

/// Appends `o` to `out`; fails at o's line when `out` already holds
/// kMaxReadings (run_log.h), so no file holds more than that in memory.
void add_reading(std::vector<MemoryObservation>& out, MemoryObservation o, const std::string& path);

// The readers. Each scans every line, ignores the lines that are not its
// printer's and appends its readings to `out` (any order; the caller sorts).
void read_see_memory_usage(const std::vector<Line>& lines, const std::string& path, std::vector<MemoryObservation>& out);
void read_throughput_timer(const std::vector<Line>& lines, const std::string& path, std::vector<MemoryObservation>& out);
void read_megatron_report_memory(const std::vector<Line>& lines, const std::string& path, std::vector<MemoryObservation>& out);
void read_trainer_metrics(const std::vector<Line>& lines, const std::string& path, std::vector<MemoryObservation>& out);
void read_oom_messages(const std::vector<Line>& lines, const std::string& path, std::vector<MemoryObservation>& out);
void read_memory_summary(const std::vector<Line>& lines, const std::string& path, std::vector<MemoryObservation>& out);
void read_nvidia_smi(const std::vector<Line>& lines, const std::string& path, std::vector<MemoryObservation>& out);
void read_gnu_time(const std::vector<Line>& lines, const std::string& path, std::vector<MemoryObservation>& out);

// JSON documents: true when `text` is one this reader knows (and it was read).
/// `lines`: the document's key lines (ds_config.h ds_config_key_lines), so errors and readings name their line.
bool read_memory_stats_json(const nlohmann::json& doc, const std::string& path, const std::map<std::string, int>& lines,
                            std::vector<MemoryObservation>& out);
bool read_measure_json(const nlohmann::json& doc, const std::string& path, const std::map<std::string, int>& lines,
                       std::vector<MemoryObservation>& out);

// A memory snapshot pickle (`data` opens with 0x80): its readings and notes into `log`.
void read_memory_snapshot(const std::string& data, const std::string& path, RunLog& log);

}  // namespace zeromem::run_log_detail
