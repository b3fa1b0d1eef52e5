// Reading a Hugging Face config.json: ConfigReader and the helpers every family reader shares
// (hf_config_reader.cpp), and the family rules of data/architectures/families.json; private to the library.
#pragma once

#include "zeromem/model.h"
#include "zeromem/types.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace zeromem::model_detail {

using json = nlohmann::json;

/// "a boolean", "a string", ... : the JSON type of `v` for a message.
std::string type_name(const json& v);
/// `v` as JSON text, cut to 40 characters, for a message.
std::string show(const json& v);

// Reads a config.json the way transformers' config classes do: a key may
// have several spellings, a null value means "use the default".
/// The JSON of a config file read from `path`; InputError naming the file
/// (and nlohmann's line and column) when it is malformed or a number is out
/// of range.
json parse_config_file(const std::string& path);

class ConfigReader {
public:
    ConfigReader(const json& cfg, const std::string& source) : cfg_(cfg), source_(source) {}

    // The first of `keys` present with a non-null value, or nullptr. Every
    // key asked for is remembered as understood (see unread_count_keys).
    const json* find(std::initializer_list<const char*> keys, const char** found = nullptr) const {
        for (const char* k : keys) {
            asked_.insert(k);
            auto it = cfg_.find(k);
            if (it != cfg_.end() && !it->is_null()) {
                if (found) *found = k;
                return &*it;
            }
        }
        return nullptr;
    }

    bool has(std::initializer_list<const char*> keys) const { return find(keys) != nullptr; }

    int64_t integer(std::initializer_list<const char*> keys) const {
        const char* key = nullptr;
        const json* v = find(keys, &key);
        if (!v) {
            std::string msg = source_ + ": missing key '" + *keys.begin() + "'";
            if (keys.size() > 1) {
                msg += " (or";
                bool first = true;
                for (const char* k : keys) {
                    if (first) { first = false; continue; }
                    msg += std::string(" '") + k + "'";
                }
                msg += ")";
            }
            throw InputError(msg + " needed to size the model");
        }
        return to_int(*v, key);
    }

    int64_t integer_or(std::initializer_list<const char*> keys, int64_t fallback) const {
        const char* key = nullptr;
        const json* v = find(keys, &key);
        return v ? to_int(*v, key) : fallback;
    }

    bool boolean_or(std::initializer_list<const char*> keys, bool fallback) const {
        const char* key = nullptr;
        const json* v = find(keys, &key);
        if (!v) return fallback;
        if (!v->is_boolean())
            throw InputError(source_ + ": key '" + key + "' must be true or false, got " + type_name(*v) + " " +
                             show(*v));
        return v->get<bool>();
    }

    const std::string& source() const { return source_; }
    const json& config() const { return cfg_; }
    bool asked(const std::string& key) const { return asked_.count(key) > 0; }
    void mark_read(const std::string& key) const { asked_.insert(key); }

    // Integer for a canonical key name, looked up with the family's aliases
    // (data/architectures/families.json "aliases") and default ("defaults").
    int64_t fam_integer(const json& fam, const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
        const std::vector<std::string> keys = spellings(fam, key);
        for (const auto& k : keys) {
            asked_.insert(k);
            auto it = cfg_.find(k);
            if (it != cfg_.end() && !it->is_null()) return to_int(*it, k.c_str());
        }
        if (auto d = family_default(fam, key); d && d->is_number() && (size_defaults_ || !is_size_key(key))) {
            defaulted_.push_back(key + " = " + d->dump());
            return to_int(*d, key.c_str());
        }
        if (fallback) return *fallback;
        std::string msg = source_ + ": missing key '" + key + "'";
        if (keys.size() > 1) {
            msg += " (or";
            for (std::size_t i = 1; i < keys.size(); ++i) msg += " '" + keys[i] + "'";
            msg += ")";
        }
        throw InputError(msg + " needed to size the model");
    }

    bool fam_boolean(const json& fam, const std::string& key, bool fallback = false) const {
        asked_.insert(key);
        auto it = cfg_.find(key);
        if (it != cfg_.end() && !it->is_null()) {
            if (!it->is_boolean())
                throw InputError(source_ + ": key '" + key + "' must be true or false, got " + type_name(*it) + " " +
                                 show(*it));
            return it->get<bool>();
        }
        if (auto d = family_default(fam, key); d && d->is_boolean()) return d->get<bool>();
        return fallback;
    }

private:
    static std::vector<std::string> spellings(const json& fam, const std::string& key) {
        std::vector<std::string> keys{key};
        if (fam.contains("aliases") && fam["aliases"].contains(key))
            for (const auto& k : fam["aliases"][key]) keys.push_back(k.get<std::string>());
        return keys;
    }
    static std::optional<json> family_default(const json& fam, const std::string& key) {
        if (fam.contains("defaults") && fam["defaults"].contains(key)) return fam["defaults"][key];
        return std::nullopt;
    }

    int64_t to_int(const json& v, const char* key) const {
        // No real value comes near 2^40 (published counts included); the bound
        // keeps derived sizes such as 4h far from int64 overflow.
        constexpr int64_t kMax = int64_t(1) << 40;
        if (v.is_number_integer()) {
            if (v.is_number_unsigned() ? v.get<uint64_t>() > uint64_t(kMax)
                                       : (v.get<int64_t>() > kMax || v.get<int64_t>() < -kMax))
                throw InputError(source_ + ": key '" + key + "' is too large: " + show(v) + " (at most " +
                                 std::to_string(kMax) + ")");
            return v.get<int64_t>();
        }
        if (v.is_number_float()) {
            const double d = v.get<double>();
            if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) <= double(kMax)) return static_cast<int64_t>(d);
        }
        throw InputError(source_ + ": key '" + key + "' must be an integer, got " + type_name(v) + " " + show(v));
    }

    const json& cfg_;
    std::string source_;
    mutable std::set<std::string> asked_;
    mutable std::vector<std::string> defaulted_;

    bool size_defaults_ = false;

public:
    /// Keys absent from the config that took the family's documented default.
    const std::vector<std::string>& defaulted() const { return defaulted_; }
    /// Lets absent model sizes take the family defaults: only for a wrapper's
    /// text_config (LLaVA's often gives only vocab_size), with a warning; a
    /// top-level config missing a size is refused.
    void allow_size_defaults() { size_defaults_ = true; }
    static bool is_size_key(const std::string& key) {
        return key == "hidden_size" || key == "num_hidden_layers" || key == "num_attention_heads" ||
               key == "intermediate_size" || key == "vocab_size";
    }
    /// MoE and MLA keys whose family default changes the count: a default
    /// taken for one (absent or null) is warned about.
    static bool is_count_key(const std::string& key) {
        static const std::set<std::string> keys{
            "num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
            "shared_expert_intermediate_size", "n_shared_experts", "decoder_sparse_step", "first_k_dense_replace",
            "moe_layer_freq", "interleave_moe_layer_step", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
            "qk_rope_head_dim", "v_head_dim"};
        return keys.count(key) > 0;
    }
    /// True when `key` is in the config with a non-null value.
    bool given(const std::string& key) const { return cfg_.contains(key) && !cfg_[key].is_null(); }
};

/// Reads the head count from the first of `head_keys`; refuses a non-positive one.
void read_heads(ModelArch& a, const ConfigReader& r, std::initializer_list<const char*> head_keys);
/// hidden_size / num_heads; refuses a hidden size the heads do not divide.
int64_t default_head_dim(const ModelArch& a, const ConfigReader& r);

/// data/architectures/families.json, embedded at build time.
const json& families_doc();
/// Its "families" object.
const json& families();
/// The family entry for `model_type`, following "same_as"; nullptr if unknown.
const json* family_rules(const std::string& model_type);
/// A layout switch of `fam`: true/false fixed, or a boolean config key read with the family default.
bool layout_flag(const ConfigReader& r, const json& fam, const char* name, bool fallback = false);
/// A fixed integer layout value of `fam`, else `fallback`.
int64_t layout_int(const json& fam, const char* name, int64_t fallback);
/// Length of the list of integers at `key` (0 if absent), its values appended to `values`.
int64_t list_length(const ConfigReader& r, const char* key, std::vector<int64_t>* values = nullptr);

}  // namespace zeromem::model_detail
