// Shared pieces of `check` (config_check.cpp, config_check_reader.cpp).
// Private to the estimator library.
#pragma once

#include "zeromem/config_check.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace zeromem::check_detail {

using Findings = std::vector<Finding>;

/// The value at JSON pointer `ptr` of `config`, or nullptr (also for a
/// malformed pointer).
const nlohmann::json* at(const nlohmann::json& config, const std::string& ptr);

/// True when DeepSpeed `version` is `than` or newer.
bool newer_or_equal(const std::string& version, const char* than);

/// True when `out` already has an error or a warning at `pointer`.
bool already_reported(const Findings& out, const std::string& pointer);

/// "auto" values: what the HF Trainer or accelerate fill each with (their
/// rules, transformers integrations/deepspeed.py), and the float trap of
/// stage3_prefetch_bucket_size. Nothing under the deepspeed launcher (the
/// schema findings report each "auto" there).
void auto_findings(const nlohmann::json& config, const CheckOptions& o, const std::string& version, Findings& out);

/// The refusal of the config reader `estimate` uses (apply_ds_config), as an
/// error at the key it names; a key with an error or warning already is not
/// repeated, and settings zeromem does not model (already warnings) are taken
/// out first so that the reader reaches the keys after them.
void reader_findings(const nlohmann::json& config, const CheckOptions& o, const std::string& version, Findings& out);

/// Keys only ZeRO stage 3 reads, given below stage 3 (stage3_only_keys): a
/// note each, DeepSpeed ignores them.
void stage3_only_findings(const nlohmann::json& config, Findings& out);

}  // namespace zeromem::check_detail
