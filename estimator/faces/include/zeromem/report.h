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
/// "total", ...} (each component at its own peak), "per_gpu_in_peak_phase"
/// (the peak phase's components, which add up to its total), "settings"
/// (dtype and its source, optimizer implementation, overlap_comm, save-time
/// gather, attention), "per_node": {"host_memory", "nvme", ...}, "fits_gpu",
/// "fits_host", "advice", ...}. Every format carries the same answer:
/// capacities, verdicts, peak and first out-of-memory phases, advice, notes.
/// The table and Markdown show the peak phase's components with each one's
/// own peak beside it where higher. With `explain`, every component's
/// formula with the numbers substituted and its source, and where each
/// setting came from. The table's last line reads "GiB = 2^30 bytes."; with
/// `explain` or `verbose` it goes on to say how the Per GPU rows add up.
/// Throws InputError for --explain with CSV.
std::string render(const Estimate& est, const Resolved& res, Format format, bool explain, bool verbose = false);

/// Renders a workload estimate (--workload dpo|orpo|ppo, workload.h) for
/// `res`: one row per phase with every model's per-GPU share, the sum per
/// GPU and per node, host RAM per node and the verdict on the sum. Table and
/// Markdown in GiB (2^30 bytes); JSON in integer bytes ({"workload",
/// "models": [{"role", "name", "params", "trained", "stage",
/// "offload_optimizer", "offload_param"}], "phases": [{"name", "models": [{"role", "activity", "trained",
/// "gpu_bytes", "host_bytes_per_node"}], "per_gpu", "per_node_gpu",
/// "per_node_host", "fits_gpu", "fits_host"}], "peak_phase", "per_gpu",
/// "per_node_host", "fits_gpu", "fits_host", "notes"}, with --explain
/// "terms" and "provenance"); CSV one row per model and phase. Throws
/// InputError for --explain with CSV.
std::string render_workload(const WorkloadEstimate& w, const Resolved& res, Format format, bool explain);

}  // namespace zeromem
