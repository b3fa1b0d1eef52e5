// `zeromem check`: findings about a DeepSpeed config before launch.
//
// Schema findings come from data/deepspeed_schema.json (ds_schema.h);
// "auto" rules from transformers integrations/deepspeed.py; version facts
// from DeepSpeed's own code per release (runtime/zero/config.py,
// offload_config.py, precision_config.py; the PR that changed each default
// is in data/deepspeed_schema.json); memory findings
// from the estimate (estimate.h) of the config applied to the given model and
// cluster.
#pragma once

#include "zeromem/gpu.h"

#include "zeromem/ds_config.h"
#include "zeromem/ds_schema.h"
#include "zeromem/estimate.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace zeromem {

enum class Severity { error, warning, note };
/// "error" / "warning" / "note".
const char* to_string(Severity s);

/// One finding: a JSON pointer into the config ("/" for the whole file), how
/// bad it is, what is wrong and how to fix it.
struct Finding {
    Severity severity = Severity::note;
    std::string pointer;
    std::string message;
    std::string fix;  ///< empty when there is nothing to do
};

/// What `check` knows besides the file.
struct CheckOptions {
    Launcher launcher = Launcher::deepspeed;
    /// DeepSpeed version ("0.19.6"); empty = the newest the schema knows.
    std::string deepspeed_version;
    /// Values "auto" resolves from (micro batch, accumulation, dtype, N_d,
    /// hidden size). world_size is used for the batch check only when
    /// `gpus_known`.
    AutoSources autos;
    bool gpus_known = false;
    /// The config applied to the model and cluster (resolve_request with the
    /// file as --ds-config). Unset: no memory findings.
    std::optional<EstimateInput> memory;
    /// The --gpu preset of `memory`: the memory fix is ranked by the speed model on it, as estimate's advice.
    std::optional<GpuSpec> gpu;
    /// NVMe capacity per node in bytes, for the NVMe-pool finding.
    std::optional<uint64_t> nvme_capacity;
    /// Why the config could not be applied to the model and cluster (what
    /// resolve_request refused, at the key a ConfigError names, else "/"),
    /// when `memory` could not be built: reported as an error when no other
    /// finding is one, so that no refusal is dropped.
    std::optional<Finding> memory_refusal;
};

/// All findings for `config` (already loaded with load_ds_config_file), in
/// this order: schema (errors), launcher "auto" rules, refused settings,
/// deprecations, keys only stage 3 reads (notes), batch arithmetic,
/// version-dependent defaults, the config reader's refusal (the error
/// `estimate` would stop at, at its key), memory.
/// Throws InputError only for a bad option (e.g. a malformed version).
std::vector<Finding> check_ds_config(const nlohmann::json& config, const CheckOptions& options);

/// Every key of `config` whose value is "auto", as JSON pointers in key
/// order: a file meant for the HF Trainer or accelerate (they fill "auto";
/// deepspeed.initialize rejects it).
std::vector<std::string> auto_value_pointers(const nlohmann::json& config);

/// Number of findings with severity `s`.
std::size_t count_findings(const std::vector<Finding>& findings, Severity s);

}  // namespace zeromem
