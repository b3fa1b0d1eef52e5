// Rendering an estimate: table (GiB), JSON (integer bytes), CSV, Markdown.
#pragma once

#include "zeromem/estimate.h"
#include "zeromem/request.h"

#include <string>

namespace zeromem {

/// Output formats of `zeromem estimate --format`.
enum class Format { table, json, csv, md };

/// Parses "table|json|csv|md"; throws InputError naming --format.
Format parse_format(const std::string& text);

/// Renders `est` for the resolved request `res`. Table, CSV and Markdown
/// print GiB (2^30 bytes) and say so; JSON carries integer byte counts:
/// {"per_gpu": {"parameters", "gradients", "optimizer_states",
/// "activations", "temporary_buffers", "cuda_context", "fragmentation",
/// "total", ...}, "per_node": {"host_memory", "nvme", ...}, "fits_gpu",
/// "fits_host", ...}. With `explain`, every component's formula with the
/// numbers substituted and its source, and where each setting came from.
std::string render(const Estimate& est, const Resolved& res, Format format, bool explain);

}  // namespace zeromem
