// DeepSpeed's config schema as data: data/deepspeed_schema.json, compiled
// into the library. One entry per key (by JSON pointer) says its type, range,
// default (and version-dependent defaults), aliases, deprecation, which
// launchers fill "auto" there, and what it means for memory:
//   modelled  - changes the estimate,
//   note      - accepted; `estimate` prints why it does not matter for memory,
//   refuse    - zeromem refuses values that would change memory in a way it
//               does not model (refuse_unless / refuse_if_enabled),
//   container - an object whose keys are listed.
// The reader is driven by it too: "setting" names the ZeroSettings or
// TrainingSettings field a plain value (or alias) is copied into, "auto_fill"
// the HF Trainer rule that fills "auto" there, "auto_note" what HF fills in a
// key without memory effect (estimator/src/ds_config_settings.cpp setting_targets).
// Sources: DeepSpeed v0.19.6 runtime/config.py, runtime/zero/config.py,
// runtime/zero/offload_config.py, runtime/precision_config.py; transformers
// integrations/deepspeed.py (HfTrainerDeepSpeedConfig);
// runtime/activation_checkpointing/config.py.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace zeromem {

/// Who reads the config: deepspeed.initialize reads it as is; the HF
/// Trainer and accelerate first fill "auto" values.
enum class Launcher { deepspeed, hf_trainer, accelerate };
/// "deepspeed" / "hf-trainer" / "accelerate".
const char* to_string(Launcher l);
/// Parses the three names above; throws InputError naming `field` otherwise.
Launcher parse_launcher(const std::string& text, const std::string& field);

/// The whole schema data file (parsed once). Throws std::logic_error only if
/// the compiled-in file is broken (a build error, not an input error).
const nlohmann::json& ds_schema();

/// The schema entry of a key by JSON pointer ("/zero_optimization/stage"),
/// or nullptr.
const nlohmann::json* ds_schema_entry(const std::string& pointer);

/// One way a config breaks the schema.
struct SchemaProblem {
    enum class Kind { unknown_key, wrong_type, out_of_range, fraction, auto_value, null_value, ignored_key };
    Kind kind = Kind::unknown_key;
    std::string pointer;  ///< JSON pointer of the offending key
    std::string message;  ///< what is wrong, one line, without the pointer
    std::string fix;      ///< what to do instead
};

/// Every schema problem of `config` (an object) in key order: unknown or
/// misplaced keys (with "did you mean"), wrong types, out-of-range values,
/// fractional numbers in integer fields (DeepSpeed >= 0.15), "auto" where
/// `launcher` does not fill it, null where not allowed.
std::vector<SchemaProblem> validate_ds_schema(const nlohmann::json& config, Launcher launcher);

/// Settings present in `config` that would change memory in a way zeromem
/// does not model (schema memory "refuse"), one problem per key; message
/// says why, fix says what value zeromem accepts. A key only ZeRO stage 3
/// reads is not refused below stage 3 (DeepSpeed ignores it there); `stage`
/// is the ZeRO stage of the run when a flag overrides the config's
/// (default: ds_config_stage of `config`).
std::vector<SchemaProblem> unmodelled_ds_settings(const nlohmann::json& config,
                                                  std::optional<int> stage = std::nullopt);

/// Keys of `config` that DeepSpeed `version` does not read under that name:
/// older than the schema's "since" (the first release that reads it) or not
/// older than its "until" (the first release that no longer does; "renamed_to"
/// is the new spelling). One problem per key; the message names the version,
/// the release and commit the key came or went with, and whether that
/// DeepSpeed ignores the key (before 0.7.0) or refuses it (pydantic
/// extra="forbid" from 0.7.0). A key without memory effect (schema "note")
/// that a release before 0.7.0 ignores is not listed.
/// estimator/src/ds_key_versions.cpp.
std::vector<SchemaProblem> version_gated_keys(const nlohmann::json& config, const std::string& version);

/// zero_optimization.stage as DeepSpeed reads it: 0 when absent or not an
/// integer 0..3 (the schema check reports those); the deprecated boolean
/// form means stage 1 (true) or 0. estimator/src/ds_key_stages.cpp.
int ds_config_stage(const nlohmann::json& config);

/// Keys under zero_optimization that only ZeRO stage 3 reads (schema
/// "stage3_only": stage3_* knobs and their aliases, memory_efficient_linear),
/// present in `config` below stage 3: one problem (kind ignored_key) per key,
/// the message naming where DeepSpeed reads it and that this stage ignores
/// it. Empty at stage 3. `stage`: the run's ZeRO stage when a flag
/// overrides the config's. estimator/src/ds_key_stages.cpp.
std::vector<SchemaProblem> stage3_only_keys(const nlohmann::json& config, std::optional<int> stage = std::nullopt);

/// Orders DeepSpeed versions "X.Y.Z" (also "X.Y"): negative, 0 or positive.
/// Throws InputError naming `field` for a malformed version.
int compare_versions(const std::string& a, const std::string& b, const std::string& field);

}  // namespace zeromem
