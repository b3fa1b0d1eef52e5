// The launch-file readers' shared parts (launch_file*.cpp): the file as a
// list of keys with their lines, whatever its syntax, and the typed reads
// that name FILE line N: KEY in every error.
#pragma once

#include "zeromem/launch_file.h"

#include <set>
#include <string>
#include <vector>

namespace zeromem::launch {

/// One key of the file: a scalar as written ("8", "true", "bf16"), a null,
/// a mapping (its keys in `children`) or a sequence (its scalars joined by ',').
struct Entry {
    enum class Kind { scalar, null, map, sequence };
    std::string key;
    std::string text;
    int line = 0;
    Kind kind = Kind::scalar;
    std::vector<Entry> children;
};

/// The top-level keys of a YAML document (yaml-cpp), or of a JSON object
/// (nlohmann::json, lines from ds_config_key_lines). InputError naming the
/// file and line on malformed text, a top level that is not a mapping, or a
/// repeated key.
std::vector<Entry> yaml_entries(const std::string& text, const std::string& path);
std::vector<Entry> json_entries(const std::string& text, const std::string& path);

/// The typed reads and the record of what each key did, for one file.
class Reader {
public:
    Reader(LaunchFile& out, std::string data_dir) : out_(out), data_dir_(std::move(data_dir)) {}

    [[noreturn]] void refuse(const Entry& e, const std::string& why) const;
    int64_t positive_int(const Entry& e) const;
    bool boolean(const Entry& e) const;
    std::string scalar(const Entry& e) const;  ///< a scalar's text; a mapping or sequence is refused

    /// `flag` is filled from `e`: --explain names the file's line and key.
    void from(const std::string& flag, const Entry& e);
    /// `flag` is the launcher's default for a key the file leaves out.
    void launcher_default(const std::string& flag, const std::string& what);
    void note(const Entry& e, const std::string& what);
    void unknown(const Entry& e);  ///< collected: one warning for all of them (finish)
    void finish();
    void warn(const Entry& e, const std::string& what);

    /// A path in the file: as given when it exists from the working
    /// directory, else from the file's folder or the nearest folder above it
    /// holding it (LLaMA-Factory's examples name their DeepSpeed configs from
    /// the repository root). Refused when none exists.
    std::string existing_path(const Entry& e) const;
    /// model_name_or_path: a local folder or config.json, a Hub id in the
    /// local cache (both --hf-config), else the preset of that Hub id or of
    /// its base model (an -Instruct/-Chat/-hf/-it name: the same
    /// architecture), said in a note. Refused otherwise.
    void model(const Entry& e);

    /// The DeepSpeed config the file's `deepspeed` key names has an "optimizer"
    /// block (then the HF Trainer's `optim` is not used: DeepSpeed builds it).
    bool deepspeed_builds_optimizer(const std::vector<Entry>& entries) const;

    LaunchFile& out() { return out_; }
    const std::string& file() const { return out_.trail.path; }

private:
    std::string where(const Entry& e) const;
    LaunchFile& out_;
    std::string data_dir_;
    std::vector<std::string> unknown_;
};

/// The keys of a Hugging Face TrainingArguments (and TRL SFTConfig) that
/// change memory, read into the request; false for a key it does not own.
/// `ds_optimizer`: the DeepSpeed config builds the optimizer (optim unused).
bool read_trainer_key(Reader& r, const Entry& e, bool ds_optimizer);
/// TrainingArguments keys that leave memory unchanged (logging, saving,
/// schedules, evaluation, data loading): noted, not read.
const std::set<std::string>& trainer_keys_without_memory_effect();
/// Defaults of the HF Trainer a file does not state (per_device_train_batch_size 8).
void apply_trainer_defaults(Reader& r, const std::vector<Entry>& entries);

void read_llamafactory(Reader& r, const std::vector<Entry>& entries);
void read_accelerate(Reader& r, const std::vector<Entry>& entries);
void read_trainer_args(Reader& r, const std::vector<Entry>& entries);

const Entry* find(const std::vector<Entry>& entries, const std::string& key);

}  // namespace zeromem::launch
