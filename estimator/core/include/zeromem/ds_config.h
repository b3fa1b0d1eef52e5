// DeepSpeed JSON configs: strict parsing, schema check, "auto" resolution
// (Hugging Face integration rules) and application to zeromem settings.
//
// Sources: DeepSpeed v0.19.6 deepspeed/runtime/config.py,
// runtime/zero/config.py, runtime/zero/offload_config.py,
// runtime/precision_config.py, runtime/activation_checkpointing/config.py;
// transformers integrations/deepspeed.py (HfTrainerDeepSpeedConfig
// trainer_config_process / trainer_config_finalize for "auto").
#pragma once

#include "zeromem/types.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zeromem {

/// A refusal of the config reader at one key. what() is the one line
/// "<source>: <pointer>: <detail>" that `estimate` prints; `check` reports
/// the same refusal as an error finding at pointer().
class ConfigError : public InputError {
public:
    ConfigError(const std::string& source, std::string pointer, std::string detail)
        : InputError(source + ": " + pointer + ": " + detail), pointer_(std::move(pointer)), detail_(std::move(detail)) {}
    /// JSON pointer of the key refused ("/bf16/enabled").
    const std::string& pointer() const { return pointer_; }
    /// What is wrong, without the source and pointer.
    const std::string& detail() const { return detail_; }

private:
    std::string pointer_;
    std::string detail_;
};

/// Reads `path` as JSON. Rejects a missing file, malformed JSON (message has
/// line and column) and duplicate keys (DeepSpeed rejects them too). Allows
/// // comments. Throws InputError.
nlohmann::json load_ds_config_file(const std::string& path);

/// The same checks on text already read; `source` names it in messages.
nlohmann::json parse_ds_config_text(const std::string& text, const std::string& source);

/// The 1-based line of every key of a config text, by JSON pointer
/// ("/zero_optimization/stage" -> 31; array elements by index; the root
/// is not listed). For text that parse_ds_config_text accepts
/// (// and /* */ comments included); on malformed text, the keys before the
/// error. estimator/src/ds_config_lines.cpp.
std::map<std::string, int> ds_config_key_lines(const std::string& text);

/// The 1-based line of a JSON parse error at `byte` (nlohmann parse_error::byte,
/// the index of the last character read, 1-based) in `text`.
int json_error_line(const std::string& text, std::size_t byte);

/// The line of `pointer` in `lines`, else of its nearest ancestor there
/// ("/zero_optimization/overlap_comm" not written -> the line of
/// "/zero_optimization"); 0 for "/" and when no ancestor is written.
int ds_config_line_of(const std::map<std::string, int>& lines, const std::string& pointer);

/// What "auto" values are filled from, the way the HF Trainer fills them
/// (trainer_config_process / trainer_config_finalize). Unset optionals mean
/// "the user did not say"; the documented fallback is then used and
/// recorded in the provenance.
struct AutoSources {
    std::optional<int64_t> micro_batch;   ///< --micro-batch (per_device_train_batch_size)
    std::optional<int64_t> grad_accum;    ///< --grad-accum (gradient_accumulation_steps)
    std::optional<Dtype> dtype;           ///< --dtype (args.fp16 / args.bf16)
    int64_t world_size = 1;               ///< data-parallel GPUs (N_d)
    std::optional<int64_t> hidden_size;   ///< model hidden size h, if an architecture is known
    double max_grad_norm = 1.0;           ///< HF TrainingArguments default
};

/// Schema-checks `config` (unknown or misplaced keys with a "did you mean"
/// hint, wrong types, fractional numbers in integer fields, negative sizes,
/// reduce_bucket_size of 0) and applies it onto `zero` and `train`,
/// resolving every "auto" from `autos`. Each value set is recorded in `prov`
/// under its DeepSpeed key path (e.g. "zero_optimization.reduce_bucket_size")
/// with a sentence saying where it came from. `source` names the file in
/// messages. An "auto" that cannot be resolved (e.g. reduce_bucket_size
/// without a hidden size) throws InputError naming the key. Does not check
/// train_batch_size arithmetic; see check_batch_arithmetic.
///
/// `deepspeed_version` is the DeepSpeed release whose config rules apply
/// (empty: the newest zeromem knows): a key that release does not read under
/// its name is refused naming the release (version_gated_keys), and the
/// legacy offload keys (cpu_offload, cpu_offload_params before 0.7.0,
/// cpu_offload_param from 0.7.0) are read as that release reads them.
void apply_ds_config(const nlohmann::json& config, const std::string& source,
                     const AutoSources& autos, ZeroSettings& zero,
                     TrainingSettings& train, Provenance& prov,
                     const std::string& deepspeed_version = std::string());

/// One line per key of `config` that zeromem accepts but that does not
/// change the estimate (schema memory "note" in data/deepspeed_schema.json):
/// "<source>:/fp16/loss_scale = 0: no effect on memory: <why>". A key whose
/// parent object is noted is covered by the parent's line. Keys only ZeRO
/// stage 3 reads, below stage 3 (`stage`: the run's when a flag overrides the
/// config's), are noted as ignored there. `estimate` prints them so that no
/// setting is silently ignored.
std::vector<std::string> ds_config_notes(const nlohmann::json& config, const std::string& source,
                                         std::optional<int> stage = std::nullopt);

/// DeepSpeed's batch rule (runtime/config.py _batch_assertion):
/// train_batch_size == train_micro_batch_size_per_gpu x
/// gradient_accumulation_steps x N_d. Throws InputError saying which values
/// disagree and what train_batch_size should be. No-op when
/// train.train_batch_size is unset.
void check_batch_arithmetic(const TrainingSettings& train, int64_t data_parallel_size);

/// DeepSpeed's batch completion (runtime/config.py
/// _set_batch_related_parameters), then check_batch_arithmetic. A value
/// counts as given when `prov` has an entry for its DeepSpeed key
/// ("train_batch_size", "train_micro_batch_size_per_gpu",
/// "gradient_accumulation_steps"), as apply_ds_config records them; the
/// caller records command-line values the same way. Missing values are filled
/// from the given ones the way DeepSpeed does (train_batch_size alone: accum
/// 1 and micro = train_batch_size / N_d; micro alone: accum 1) and recorded
/// in `prov`. Throws InputError when neither train_batch_size nor the micro
/// batch is given (DeepSpeed asserts the same), when train_batch_size is not
/// divisible by what it must be split into (DeepSpeed would floor-divide and
/// then fail its batch assertion), and when the three disagree.
void complete_batch_settings(TrainingSettings& train, int64_t data_parallel_size,
                             Provenance& prov);

}  // namespace zeromem
