// Shared pieces of the DeepSpeed config reader (ds_config*.cpp): key-path
// messages, typed readers of validated values, and the Reading that the
// settings are read through. Private to the estimator library.
#pragma once

#include "zeromem/ds_config.h"
#include "zeromem/ds_schema.h"
#include "zeromem/types.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zeromem::ds_config_detail {

using nlohmann::json;

// --- Messages

/// "/a/b" JSON pointer of a key path (RFC 6901 escaping).
std::string pointer_of(const std::vector<std::string>& path);

/// "a.b" dotted key (the Provenance key and the HF spelling).
std::string dotted_of(const std::vector<std::string>& path);

[[noreturn]] void fail(const std::string& source, const std::vector<std::string>& path, const std::string& what);

/// A JSON value as it appears in the file, on one line.
std::string show(const json& v);

bool is_auto(const json& v);

/// "/a/b" -> {"a", "b"} (schema pointers use no escapes).
std::vector<std::string> split_pointer(const std::string& ptr);

// --- Typed readers (the value's JSON type has been checked by validation)

/// Problem with `v` as an integer (empty when it is one).
std::optional<std::pair<SchemaProblem::Kind, std::string>> int_problem(const json& v);

/// Integer value of a JSON number with no fractional part; throws otherwise.
int64_t to_int(const json& v, const std::string& source, const std::vector<std::string>& path);

bool is_dtype_name(std::string t);

Dtype to_dtype(const json& v, const std::string& source, const std::vector<std::string>& path);

// ---------------------------------------------------------------------------
// Application: free functions per concern over one Reading. Keys whose meaning
// is "copy the value into a setting" are read by the schema's setting table
// (apply_setting_table, ds_config_settings.cpp; apply_auto_table,
// ds_config_auto.cpp); ds_config_structure.cpp holds only what is structure:
// precision selection, batch sizes, the deprecated boolean zero_optimization,
// offload devices and the optimizer builder decision.

using Path = std::vector<std::string>;

/// The config being read and the settings it is read into.
struct Reading {
    const json& config;
    const std::string& source;
    const AutoSources& autos;
    ZeroSettings& zero;
    TrainingSettings& train;
    Provenance& prov;
    const std::string& ds_version;  ///< DeepSpeed release whose rules apply

    /// True when that release is `v` or newer.
    bool ds_at_least(const char* v) const { return compare_versions(ds_version, v, "--deepspeed-version") >= 0; }

    /// The value at `path`, or nullptr (null counts as absent).
    const json* find(const Path& path) const {
        const json* cur = &config;
        for (const auto& k : path) {
            if (!cur->is_object()) return nullptr;
            auto it = cur->find(k);
            if (it == cur->end()) return nullptr;
            cur = &*it;
        }
        return cur->is_null() ? nullptr : cur;
    }
    std::string where(const Path& path) const { return source + ":" + pointer_of(path); }
    void record(const Path& path, const std::string& sentence = "") {
        prov[dotted_of(path)] = sentence.empty() ? where(path) : sentence;
    }
    std::string auto_note(const Path& path, const std::string& rest) const {
        return where(path) + " = \"auto\" -> " + rest;
    }
    /// The model's hidden size for an "auto" at `path`; throws if unknown.
    int64_t hidden(const Path& path) const {
        if (!autos.hidden_size)
            fail(source, path, "is \"auto\" but the hidden size is unknown: give --model or "
                               "--hf-config, or set a number");
        return *autos.hidden_size;
    }
};

/// One zeromem setting a key's value is written into.
struct Target {
    std::function<void(Reading&, const json&, const Path&)> set;
    std::function<std::string(const Reading&)> show;  ///< current value, for notes
};

/// The target a schema "setting" names; throws std::logic_error for an
/// unknown one.
const Target& target_of(const std::string& setting);

/// Keys whose schema entry names a "setting", read into it.
void apply_setting_table(Reading& r);

/// Every "auto" the schema has a rule or a note for, filled and recorded.
void apply_auto_table(Reading& r);

/// Reads a validated config into the settings.
void read_ds_settings(Reading& r);

}  // namespace zeromem::ds_config_detail
