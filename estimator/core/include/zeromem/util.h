// Small shared helpers: sizes with units, counts, name suggestions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zeromem {

/// Parses a byte size: "80GB" (10^9), "80GiB" (2^30), "512MB", "1.5TiB",
/// "1TB", "85899345920B". Units (case-insensitive): B, KB/MB/GB/TB (powers
/// of 1000), KiB/MiB/GiB/TiB (powers of 1024). The unit is required: a bare
/// "80" (bytes? GB?) and a bare "G"/"M" are rejected as ambiguous. Throws
/// InputError naming `field` for zero, negative, malformed or overflowing
/// values.
uint64_t parse_bytes(const std::string& text, const std::string& field);

/// Like parse_bytes, but "0" (with or without a unit) is allowed and gives 0.
uint64_t parse_bytes_or_zero(const std::string& text, const std::string& field);

/// Parses a whole number written in decimal digits ("8", "+8", "-3"). Throws
/// InputError naming `field` for a fraction ("2.5"), anything that is not a
/// number, or a value outside [-2^62, 2^62].
int64_t parse_int(const std::string& text, const std::string& field);

/// Parses a parameter (or element) count: "7e9", "7B", "1.3b", "350M",
/// "7000000000", "1.5T", "125k". Suffixes k/M/B/T (case-insensitive) are
/// 10^3/10^6/10^9/10^12. Result is rounded to the nearest integer. Throws
/// InputError naming `field` for zero, negative or malformed values.
uint64_t parse_count(const std::string& text, const std::string& field);

/// ASCII lower-case copy of `s`.
std::string to_lower(std::string s);

/// bytes / 2^30 formatted with `decimals` decimals, no unit.
std::string format_gib(double bytes, int decimals = 2);
/// bytes / 2^30 with 3 decimals and its unit: "1.500 GiB".
std::string gib_text(uint64_t bytes);
/// bytes / 10^9 formatted with `decimals` decimals, no unit.
std::string format_gb(double bytes, int decimals = 2);

/// Levenshtein edit distance (for "did you mean" hints).
std::size_t edit_distance(const std::string& a, const std::string& b);

/// Up to `max` candidates closest to `name` (edit distance <= max(2,
/// len/3), or sharing a prefix/substring), best first.
std::vector<std::string> closest_names(const std::string& name,
                                       const std::vector<std::string>& candidates,
                                       std::size_t max = 3);

/// Stems of the *.json files in `<data_dir>/<subdir>`, sorted (preset names).
/// Throws InputError naming the folder when it is missing or holds no preset.
std::vector<std::string> list_presets(const std::string& data_dir, const std::string& subdir);

/// The one-line message for an unknown preset: "<what> 'name' (did you
/// mean: a, b?); known: ...", plus `hint` when not empty.
std::string unknown_preset_message(const std::string& what, const std::string& name,
                                   const std::vector<std::string>& known, const std::string& hint);

/// The data directory with models/, gpus/, ds_configs/: `../share/zeromem/data`
/// beside the running executable (an installed zeromem), else
/// $ZEROMEM_DATA_DIR if set, else the source tree's data/ baked in at build
/// time (a build-tree zeromem). No file is read.
std::string data_dir();

/// Reads a whole file; throws InputError "<path>: cannot open file" if it
/// does not exist or cannot be read, and names `what` it is (e.g. "config file", "training log")
/// when the path is empty, a directory, a device or larger than `max_bytes` (64 MiB unless given).
std::string read_text_file(const std::string& path, const std::string& what = "JSON config file",
                           std::uintmax_t max_bytes = std::uintmax_t(64) << 20);

/// zeromem's version string ("0.1.0").
const char* version();

}  // namespace zeromem
