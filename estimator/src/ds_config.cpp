// DeepSpeed config files: strict loading, schema check, "auto" resolution,
// application onto ZeroSettings / TrainingSettings.
//
// The schema below lists the keys DeepSpeed v0.19.6 reads, as it spells them:
// deepspeed/runtime/config.py (DeepSpeedConfig._initialize_params) and
// constants.py for the top level; runtime/zero/config.py
// (DeepSpeedZeroConfig) and offload_config.py for zero_optimization;
// runtime/precision_config.py for fp16/bf16; swap_tensor/constants.py for
// aio; activation_checkpointing/config.py. Blocks zeromem does not size
// (monitoring, profiling, compression, ...) are accepted as opaque objects.
//
// DeepSpeed itself is strict only inside its pydantic models (extra="forbid")
// and ignores unknown top-level keys; zeromem is strict everywhere, so that a
// misspelled key is reported before launch instead of silently ignored.
#include "zeromem/ds_config.h"
#include "zeromem/ds_schema.h"

#include "zeromem/util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

namespace zeromem {

using nlohmann::json;

namespace {

// ---------------------------------------------------------------------------
// Messages

/// "/a/b" JSON pointer of a key path (RFC 6901 escaping).
std::string pointer_of(const std::vector<std::string>& path) {
    std::string out;
    for (const auto& k : path) {
        out += '/';
        for (char c : k) {
            if (c == '~') out += "~0";
            else if (c == '/') out += "~1";
            else out += c;
        }
    }
    return out.empty() ? "/" : out;
}

/// "a.b" dotted key (the Provenance key and the HF spelling).
std::string dotted_of(const std::vector<std::string>& path) {
    std::string out;
    for (const auto& k : path) {
        if (!out.empty()) out += '.';
        out += k;
    }
    return out;
}

[[noreturn]] void fail(const std::string& source, const std::vector<std::string>& path,
                       const std::string& what) {
    throw InputError(source + ": " + pointer_of(path) + ": " + what);
}

/// A JSON value as it appears in the file, on one line.
std::string show(const json& v) {
    if (v.is_number_float()) {
        // Shortest text that round-trips, without the ".0" nlohmann adds.
        char buf[64];
        const double d = v.get<double>();
        for (int prec = 1; prec <= 17; ++prec) {
            std::snprintf(buf, sizeof buf, "%.*g", prec, d);
            if (std::strtod(buf, nullptr) == d) break;
        }
        return buf;
    }
    std::string s = v.dump();
    if (s.size() > 60) s = s.substr(0, 57) + "...";
    return s;
}

std::string join_quoted(const std::vector<std::string>& names, const char* last_sep) {
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (i > 0) out += (i + 1 == names.size()) ? last_sep : ", ";
        out += "'" + names[i] + "'";
    }
    return out;
}

bool is_auto(const json& v) { return v.is_string() && v.get<std::string>() == "auto"; }


// ---------------------------------------------------------------------------
// Schema: built from data/deepspeed_schema.json (compiled in as kDsSchemaText)

enum class Kind {
    Bool,       ///< JSON true/false
    Int,        ///< JSON number without a fractional part, within [imin, imax]
    Number,     ///< any JSON number (not a bool), within [fmin, fmax]
    String,     ///< JSON string
    Dtype,      ///< "fp32"/"fp16"/"bf16" and DeepSpeed's DtypeEnum spellings
    CommDtype,  ///< "fp32"/"fp16"/"bf16" only (config.py get_communication_data_type)
    Device,     ///< "none"/"cpu"/"nvme" (offload_config.py OffloadDeviceEnum)
    StringList, ///< array of strings
    Object,     ///< object with exactly the listed children
    Open,       ///< object; listed children are checked, others accepted
    Opaque,     ///< any object; not looked into
    Any,        ///< any value
};

struct Spec {
    std::string name;
    Kind kind = Kind::Any;
    bool nullable = false;  ///< null accepted (Optional[...] in DeepSpeed)
    bool also_bool = false; ///< a boolean is accepted instead of the object (deprecated form)
    std::optional<int64_t> imin, imax;
    std::optional<double> fmin, fmax;
    std::optional<int64_t> min_exclusive;  ///< value must be > this
    std::string min_exclusive_why;
    std::vector<int64_t> enumeration;      ///< allowed integers, if listed
    std::vector<Spec> children;
};

Kind kind_of(const std::string& t) {
    static const std::map<std::string, Kind> kinds = {
        {"bool", Kind::Bool}, {"int", Kind::Int}, {"number", Kind::Number}, {"string", Kind::String},
        {"dtype", Kind::Dtype}, {"comm_dtype", Kind::CommDtype}, {"device", Kind::Device},
        {"string_list", Kind::StringList}, {"object", Kind::Object}, {"open_object", Kind::Open},
        {"opaque", Kind::Opaque}, {"any", Kind::Any}};
    const auto it = kinds.find(t);
    if (it == kinds.end()) throw std::logic_error("deepspeed_schema.json: unknown type '" + t + "'");
    return it->second;
}

Spec spec_of(const std::string& name, const json& e) {
    Spec s;
    s.name = name;
    s.kind = kind_of(e.at("type").get<std::string>());
    s.nullable = e.value("nullable", false);
    s.also_bool = e.value("also_bool", false);
    if (s.kind == Kind::Int) {
        if (e.contains("min")) s.imin = e.at("min").get<int64_t>();
        if (e.contains("max")) s.imax = e.at("max").get<int64_t>();
        if (e.contains("min_exclusive")) s.min_exclusive = e.at("min_exclusive").get<int64_t>();
        s.min_exclusive_why = e.value("min_exclusive_why", std::string());
        if (e.contains("enum")) s.enumeration = e.at("enum").get<std::vector<int64_t>>();
    } else if (s.kind == Kind::Number) {
        if (e.contains("min")) s.fmin = e.at("min").get<double>();
        if (e.contains("max")) s.fmax = e.at("max").get<double>();
    }
    return s;
}

/// "/a/b" -> {"a", "b"} (schema pointers use no escapes).
std::vector<std::string> split_pointer(const std::string& ptr) {
    std::vector<std::string> parts;
    std::size_t i = 1;
    while (i <= ptr.size()) {
        const std::size_t j = std::min(ptr.find('/', i), ptr.size());
        parts.push_back(ptr.substr(i, j - i));
        i = j + 1;
    }
    return parts;
}

/// The whole config schema as a tree (keys sorted, so parents come first).
const Spec& schema() {
    static const Spec root = [] {
        Spec r;
        r.kind = Kind::Object;
        for (const auto& item : ds_schema().at("keys").items()) {
            const std::vector<std::string> parts = split_pointer(item.key());
            Spec* parent = &r;
            for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
                Spec* next = nullptr;
                for (auto& c : parent->children)
                    if (c.name == parts[i]) next = &c;
                if (!next) throw std::logic_error("deepspeed_schema.json: no parent for " + item.key());
                parent = next;
            }
            parent->children.push_back(spec_of(parts.back(), item.value()));
        }
        return r;
    }();
    return root;
}

/// For misplaced-key hints: every key name the strict schema knows, with the
/// pointers of the objects it belongs to ("" = top level).
const std::map<std::string, std::vector<std::string>>& key_homes() {
    static const auto homes = [] {
        std::map<std::string, std::vector<std::string>> out;
        struct Walk {
            std::map<std::string, std::vector<std::string>>& out;
            void operator()(const Spec& s, const std::string& ptr) const {
                for (const auto& c : s.children) {
                    out[c.name].push_back(ptr);
                    if (c.kind == Kind::Object) (*this)(c, ptr + "/" + c.name);
                }
            }
        };
        Walk{out}(schema(), "");
        return out;
    }();
    return homes;
}

/// Keys (dotted) whose "auto" `launcher` fills (schema field "auto":
/// transformers integrations/deepspeed.py trainer_config_process/_finalize;
/// accelerate utils/deepspeed.py).
const std::set<std::string>& auto_keys(Launcher launcher) {
    static const auto table = [] {
        std::map<Launcher, std::set<std::string>> t;
        for (const auto& item : ds_schema().at("keys").items()) {
            if (!item.value().contains("auto")) continue;
            std::string dotted = item.key().substr(1);
            std::replace(dotted.begin(), dotted.end(), '/', '.');
            for (const auto& l : item.value().at("auto"))
                t[parse_launcher(l.get<std::string>(), "deepspeed_schema.json")].insert(dotted);
        }
        return t;
    }();
    static const std::set<std::string> none;
    const auto it = table.find(launcher);
    return it == table.end() ? none : it->second;
}

const std::set<std::string>& hf_auto_keys() { return auto_keys(Launcher::hf_trainer); }

// ---------------------------------------------------------------------------
// Typed readers (the value's JSON type has been checked by validate()).

/// Problem with `v` as an integer (empty when it is one).
std::optional<std::pair<SchemaProblem::Kind, std::string>> int_problem(const json& v) {
    using K = SchemaProblem::Kind;
    if (!v.is_number() || v.is_boolean()) return std::make_pair(K::wrong_type, "must be an integer, got " + show(v));
    if (v.is_number_unsigned() &&
        v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return std::make_pair(K::out_of_range, "value " + show(v) + " is too large");
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (!std::isfinite(d) || std::floor(d) != d)
            return std::make_pair(K::fraction, "must be an integer, got " + show(v) +
                                                   " (DeepSpeed >= 0.15 rejects fractional values)");
        if (std::fabs(d) >= 9.2e18) return std::make_pair(K::out_of_range, "value " + show(v) + " is too large");
    }
    return std::nullopt;
}

/// Integer value of a JSON number with no fractional part; throws otherwise.
int64_t to_int(const json& v, const std::string& source, const std::vector<std::string>& path) {
    if (const auto p = int_problem(v)) fail(source, path, p->second);
    if (v.is_number_float()) return static_cast<int64_t>(v.get<double>());
    return v.get<int64_t>();
}

bool is_dtype_name(std::string t) {
    // DeepSpeed's DtypeEnum (inference/config.py) spellings.
    t = to_lower(t);
    if (t.rfind("torch.", 0) == 0) t = t.substr(6);
    return t == "fp32" || t == "float32" || t == "float" || t == "fp16" || t == "float16" || t == "half" ||
           t == "bf16" || t == "bfloat16" || t == "bfloat";
}

Dtype to_dtype(const json& v, const std::string& source, const std::vector<std::string>& path) {
    std::string t = to_lower(v.get<std::string>());
    if (t.rfind("torch.", 0) == 0) t = t.substr(6);
    if (t == "bfloat") t = "bf16";
    if (is_dtype_name(t)) return parse_dtype(t, pointer_of(path));
    fail(source, path, "must be \"fp32\", \"fp16\" or \"bf16\", got " + show(v));
}

// ---------------------------------------------------------------------------
// Validation: collects every problem

const char* type_word(Kind k) {
    switch (k) {
        case Kind::Bool: return "a JSON boolean";
        case Kind::Int: return "an integer";
        case Kind::Number: return "a number";
        case Kind::String: return "a string";
        case Kind::Dtype:
        case Kind::CommDtype: return "\"fp32\", \"fp16\" or \"bf16\"";
        case Kind::Device: return "\"none\", \"cpu\" or \"nvme\"";
        case Kind::StringList: return "a list of strings";
        case Kind::Object:
        case Kind::Open:
        case Kind::Opaque: return "an object";
        case Kind::Any: return "any value";
    }
    return "";
}

class Validator {
public:
    Validator(Launcher launcher, std::vector<SchemaProblem>& out) : launcher_(launcher), out_(out) {}

    void value(const json& v, const Spec& spec) {
        using K = SchemaProblem::Kind;
        if (v.is_null()) {
            if (!spec.nullable && spec.kind != Kind::Any)
                add(K::null_value, "must not be null", "remove the key or give " + std::string(type_word(spec.kind)));
            return;
        }
        if (is_auto(v) && spec.kind != Kind::Any) return auto_value(spec);
        if (spec.also_bool && v.is_boolean()) return;
        switch (spec.kind) {
            case Kind::Bool:
                if (!v.is_boolean())
                    add(K::wrong_type, "must be a JSON boolean (true or false), got " + show(v), "write true or false without quotes");
                return;
            case Kind::Int: return integer(v, spec);
            case Kind::Number: return number(v, spec);
            case Kind::String:
                if (!v.is_string()) add(K::wrong_type, "must be a string, got " + show(v), "quote the value");
                return;
            case Kind::Dtype:
                if (!v.is_string() || !is_dtype_name(v.get<std::string>()))
                    add(K::wrong_type, "must be \"fp32\", \"fp16\" or \"bf16\", got " + show(v), "use \"fp32\", \"fp16\" or \"bf16\"");
                return;
            case Kind::CommDtype: {
                const std::string t = v.is_string() ? to_lower(v.get<std::string>()) : std::string();
                if (t != "fp32" && t != "fp16" && t != "bf16")
                    add(K::wrong_type, "must be \"fp32\", \"fp16\" or \"bf16\", got " + show(v), "use \"fp32\", \"fp16\" or \"bf16\"");
                return;
            }
            case Kind::Device: {
                const std::string t = v.is_string() ? v.get<std::string>() : std::string();
                if (t != "none" && t != "cpu" && t != "nvme")
                    add(K::wrong_type, "must be \"none\", \"cpu\" or \"nvme\", got " + show(v), "use \"none\", \"cpu\" or \"nvme\"");
                return;
            }
            case Kind::StringList: {
                bool ok = v.is_array();
                if (ok)
                    for (const auto& e : v) ok = ok && e.is_string();
                if (!ok) add(K::wrong_type, "must be a list of strings, got " + show(v), "write [\"name\", ...]");
                return;
            }
            case Kind::Opaque:
                if (!v.is_object()) add(K::wrong_type, "must be an object, got " + show(v), "write {...}");
                return;
            case Kind::Any: return;
            case Kind::Object:
            case Kind::Open: return object(v, spec);
        }
    }

private:
    Launcher launcher_;
    std::vector<SchemaProblem>& out_;
    std::vector<std::string> path_;

    void add(SchemaProblem::Kind k, std::string message, std::string fix) {
        out_.push_back(SchemaProblem{k, pointer_of(path_), std::move(message), std::move(fix)});
    }

    void auto_value(const Spec& spec) {
        if (auto_keys(launcher_).count(dotted_of(path_)) != 0) return;
        if (launcher_ == Launcher::deepspeed) {
            const bool hf = hf_auto_keys().count(dotted_of(path_)) != 0;
            add(SchemaProblem::Kind::auto_value,
                hf ? "\"auto\" is filled only by the HF Trainer or accelerate; deepspeed.initialize rejects it"
                   : "\"auto\" is not a value the Hugging Face Trainer fills for this key; set a value",
                std::string("set ") + type_word(spec.kind) +
                    (hf ? " (or launch through the HF Trainer/accelerate)" : ""));
            return;
        }
        add(SchemaProblem::Kind::auto_value,
            "\"auto\" is not a value the Hugging Face Trainer fills for this key; set a value",
            std::string("set ") + type_word(spec.kind));
    }

    void integer(const json& v, const Spec& spec) {
        using K = SchemaProblem::Kind;
        if (const auto p = int_problem(v)) {
            std::string fix = "write a whole number";
            if (p->first == K::fraction && std::isfinite(v.get<double>()))
                fix = "write the integer " + std::to_string(static_cast<long long>(v.get<double>()));
            return add(p->first, p->second, fix);
        }
        const int64_t i = v.is_number_float() ? static_cast<int64_t>(v.get<double>()) : v.get<int64_t>();
        if (!spec.enumeration.empty() &&
            std::find(spec.enumeration.begin(), spec.enumeration.end(), i) == spec.enumeration.end()) {
            std::vector<std::string> names;
            for (auto e : spec.enumeration) names.push_back(std::to_string(e));
            std::string list;
            for (std::size_t k = 0; k < names.size(); ++k)
                list += (k == 0 ? "" : k + 1 == names.size() ? " or " : ", ") + names[k];
            return add(K::out_of_range, "must be " + list + ", got " + show(v), "use " + list);
        }
        if (spec.imin && i < *spec.imin)
            return add(K::out_of_range, "must be >= " + std::to_string(*spec.imin) + ", got " + show(v),
                       "use a value >= " + std::to_string(*spec.imin));
        if (spec.imax && i > *spec.imax)
            return add(K::out_of_range, "must be <= " + std::to_string(*spec.imax) + ", got " + show(v),
                       "use a value <= " + std::to_string(*spec.imax));
        if (spec.min_exclusive && i <= *spec.min_exclusive)
            add(K::out_of_range, "must be > " + std::to_string(*spec.min_exclusive) + ", got " + show(v) +
                                     (spec.min_exclusive_why.empty() ? "" : " (" + spec.min_exclusive_why + ")"),
                "use a positive value, e.g. the default");
    }

    void number(const json& v, const Spec& spec) {
        using K = SchemaProblem::Kind;
        if (!v.is_number()) return add(K::wrong_type, "must be a number, got " + show(v), "write a number without quotes");
        const double d = v.get<double>();
        if (spec.fmin && d < *spec.fmin)
            return add(K::out_of_range, "must be >= " + show(json(*spec.fmin)) + ", got " + show(v),
                       "use a value >= " + show(json(*spec.fmin)));
        if (spec.fmax && d > *spec.fmax)
            add(K::out_of_range, "must be <= " + show(json(*spec.fmax)) + ", got " + show(v),
                "use a value <= " + show(json(*spec.fmax)));
    }

    void object(const json& v, const Spec& spec) {
        if (!v.is_object())
            return add(SchemaProblem::Kind::wrong_type, "must be an object, got " + show(v), "write {...}");
        for (auto it = v.begin(); it != v.end(); ++it) {
            path_.push_back(it.key());
            const Spec* child = nullptr;
            for (const auto& c : spec.children)
                if (c.name == it.key()) child = &c;
            if (child) value(it.value(), *child);
            else if (spec.kind == Kind::Object) unknown(spec, it.key());
            else if (is_auto(it.value()) && auto_keys(launcher_).count(dotted_of(path_)) == 0)
                auto_value(Spec{});
            path_.pop_back();
        }
    }

    void unknown(const Spec& spec, const std::string& key) {
        using K = SchemaProblem::Kind;
        std::vector<std::string> here;
        for (const auto& c : spec.children) here.push_back(c.name);
        const auto& homes = key_homes();
        const std::string this_ptr = path_.size() > 1
            ? pointer_of(std::vector<std::string>(path_.begin(), path_.end() - 1)) : "";
        if (auto it = homes.find(key); it != homes.end()) {
            std::vector<std::string> where;
            for (const auto& h : it->second)
                if (h != this_ptr) where.push_back(h);
            if (!where.empty()) {
                std::string list;
                for (std::size_t i = 0; i < where.size(); ++i) {
                    if (i > 0) list += (i + 1 == where.size()) ? " or " : ", ";
                    list += where[i].empty() ? std::string("at the top level") : "under " + where[i];
                }
                return add(K::unknown_key, "unknown key here; '" + key + "' belongs " + list + ", not " +
                                               (this_ptr.empty() ? std::string("at the top level") : "under " + this_ptr),
                           "move it " + list);
            }
        }
        // closest_names ranks a substring match like a one-letter typo; keep only
        // the candidates nearly as close as the best one by edit distance.
        std::vector<std::pair<std::size_t, std::string>> ranked;
        for (const auto& c : closest_names(key, here, 5)) ranked.emplace_back(edit_distance(key, c), c);
        std::stable_sort(ranked.begin(), ranked.end(),
                         [](const auto& x, const auto& y) { return x.first < y.first; });
        std::vector<std::string> near;
        for (const auto& r : ranked)
            if (near.size() < 3 && r.first <= ranked.front().first + 2) near.push_back(r.second);
        if (!near.empty())
            return add(K::unknown_key, "unknown key (did you mean " + join_quoted(near, " or ") + "?)",
                       "rename it to '" + near.front() + "'");
        add(K::unknown_key, "unknown key (not a DeepSpeed v0.19.6 config key)", "remove it");
    }
};

// ---------------------------------------------------------------------------
// Memory meaning of keys: refusals and notes (schema field "memory")

const json* at_pointer(const json& config, const std::string& ptr) {
    const json* cur = &config;
    for (const auto& k : split_pointer(ptr)) {
        if (!cur->is_object()) return nullptr;
        const auto it = cur->find(k);
        if (it == cur->end()) return nullptr;
        cur = &*it;
    }
    return cur;
}

bool any_enabled(const json& v) {
    if (v.is_object())
        for (auto it = v.begin(); it != v.end(); ++it) {
            if (it.key() == "enabled" && it.value().is_boolean() && it.value().get<bool>()) return true;
            if (any_enabled(it.value())) return true;
        }
    return false;
}

/// Present value of a "refuse" key that zeromem does not accept, or nullptr.
const json* refused_value(const json& config, const std::string& ptr, const json& entry) {
    const json* v = at_pointer(config, ptr);
    if (!v) return nullptr;
    if (entry.value("refuse_if_enabled", false)) return any_enabled(*v) ? v : nullptr;
    if (const auto it = entry.find("refuse_unless"); it != entry.end()) {
        for (const auto& ok : *it)
            if (ok == *v) return nullptr;
        return v;
    }
    return nullptr;
}
// ---------------------------------------------------------------------------
// Application

class Applier {
public:
    Applier(const json& config, const std::string& source, const AutoSources& autos,
            ZeroSettings& zero, TrainingSettings& train, Provenance& prov)
        : config_(config), source_(source), autos_(autos), zero_(zero), train_(train),
          prov_(prov) {}

    void run() {
        apply_table();
        apply_precision();
        apply_batch();
        apply_zero();
        apply_optimizer();
        apply_scheduler();
        // Speed-model inputs only (no memory effect): NVMe request shape and
        // (the optimizer keys are read by apply_optimizer).
        read_int({"aio", "block_size"}, zero_.aio_block_size);
        read_int({"aio", "queue_depth"}, zero_.aio_queue_depth);
    }

private:
    const json& config_;
    const std::string& source_;
    const AutoSources& autos_;
    ZeroSettings& zero_;
    TrainingSettings& train_;
    Provenance& prov_;

    const json* find(const std::vector<std::string>& path) const {
        const json* cur = &config_;
        for (const auto& k : path) {
            if (!cur->is_object()) return nullptr;
            auto it = cur->find(k);
            if (it == cur->end()) return nullptr;
            cur = &*it;
        }
        return cur->is_null() ? nullptr : cur;
    }

    std::string where(const std::vector<std::string>& path) const {
        return source_ + ":" + pointer_of(path);
    }
    void record(const std::vector<std::string>& path, const std::string& sentence = "") {
        prov_[dotted_of(path)] = sentence.empty() ? where(path) : sentence;
    }
    std::string auto_note(const std::vector<std::string>& path, const std::string& rest) const {
        return where(path) + " = \"auto\" -> " + rest;
    }

    /// Sets `out` from an explicit integer at `path`; true if present.
    bool read_int(const std::vector<std::string>& path, int64_t& out) {
        const json* v = find(path);
        if (!v || is_auto(*v)) return false;
        out = to_int(*v, source_, path);
        record(path);
        return true;
    }
    bool read_bool(const std::vector<std::string>& path, bool& out) {
        const json* v = find(path);
        if (!v) return false;
        out = v->get<bool>();
        record(path);
        return true;
    }

    /// Keys whose schema entry names a "setting": a plain value (alias
    /// spellings included; "auto" is left to the dedicated code) is read
    /// into that setting and recorded. One table decides what these keys mean.
    void apply_table() {
        static const std::map<std::string, int64_t ZeroSettings::*> zero_ints = {
            {"zero.allgather_bucket_size", &ZeroSettings::allgather_bucket_size},
            {"zero.sub_group_size", &ZeroSettings::sub_group_size},
            {"zero.reduce_bucket_size", &ZeroSettings::reduce_bucket_size},
            {"zero.stage3_prefetch_bucket_size", &ZeroSettings::stage3_prefetch_bucket_size},
            {"zero.stage3_param_persistence_threshold", &ZeroSettings::stage3_param_persistence_threshold},
            {"zero.stage3_model_persistence_threshold", &ZeroSettings::stage3_model_persistence_threshold},
            {"zero.stage3_max_live_parameters", &ZeroSettings::stage3_max_live_parameters},
            {"zero.stage3_max_reuse_distance", &ZeroSettings::stage3_max_reuse_distance},
            {"zero.offload_optimizer_buffer_count", &ZeroSettings::offload_optimizer_buffer_count},
            {"zero.offload_param_buffer_count", &ZeroSettings::offload_param_buffer_count},
            {"zero.offload_param_buffer_size", &ZeroSettings::offload_param_buffer_size},
            {"zero.offload_param_max_in_cpu", &ZeroSettings::offload_param_max_in_cpu}};
        static const std::map<std::string, bool ZeroSettings::*> zero_bools = {
            {"zero.contiguous_gradients", &ZeroSettings::contiguous_gradients},
            {"zero.reduce_scatter", &ZeroSettings::reduce_scatter},
            {"zero.offload_optimizer_pin_memory", &ZeroSettings::offload_optimizer_pin_memory},
            {"zero.offload_param_pin_memory", &ZeroSettings::offload_param_pin_memory}};
        static const std::map<std::string, std::optional<bool> ZeroSettings::*> zero_opt_bools = {
            {"zero.overlap_comm", &ZeroSettings::overlap_comm}};
        static const std::map<std::string, std::optional<int64_t> TrainingSettings::*> train_opt_ints = {
            {"train.number_checkpoints", &TrainingSettings::number_checkpoints}};
        static const std::map<std::string, bool TrainingSettings::*> train_bools = {
            {"train.partition_activations", &TrainingSettings::partition_activations},
            {"train.cpu_checkpointing", &TrainingSettings::cpu_checkpointing}};
        for (const auto& item : ds_schema().at("keys").items()) {
            const json& e = item.value();
            if (!e.contains("setting")) continue;
            const std::string setting = e.at("setting").get<std::string>();
            const std::vector<std::string> path = split_pointer(item.key());
            std::vector<std::vector<std::string>> spellings = {path};
            for (const auto& a : e.value("aliases", json::array())) {
                spellings.push_back(path);
                spellings.back().back() = a.get<std::string>();
            }
            const std::vector<std::string>* given = nullptr;
            for (const auto& sp : spellings) {
                if (!find(sp)) continue;
                if (given)
                    fail(source_, sp, "given twice, also as " + pointer_of(*given) + " (DeepSpeed aliases); keep one");
                given = &sp;
            }
            if (!given) continue;
            const json* v = find(*given);  // null counts as absent
            if (!v || is_auto(*v)) continue;
            if (const auto zi = zero_ints.find(setting); zi != zero_ints.end()) zero_.*(zi->second) = to_int(*v, source_, *given);
            else if (const auto zb = zero_bools.find(setting); zb != zero_bools.end()) zero_.*(zb->second) = v->get<bool>();
            else if (const auto tb = train_bools.find(setting); tb != train_bools.end()) train_.*(tb->second) = v->get<bool>();
            else if (const auto ob = zero_opt_bools.find(setting); ob != zero_opt_bools.end()) zero_.*(ob->second) = v->get<bool>();
            else if (const auto oi = train_opt_ints.find(setting); oi != train_opt_ints.end())
                train_.*(oi->second) = to_int(*v, source_, *given);
            else throw std::logic_error("deepspeed_schema.json: unknown setting " + setting);
            prov_[dotted_of(path)] = given == &spellings.front() ? where(path)
                                                    : where(*given) + " (alias of " + path.back() + ")";
        }
    }

    // Command-line flags override the file (zeromem's rule; the HF Trainer
    // would reject the mismatch instead). The override is recorded.
    void flag_overrides(const std::vector<std::string>& path, int64_t& value, const std::optional<int64_t>& flag_value,
                        const char* flag) {
        if (flag_value && *flag_value != value) {
            record(path, std::string(flag) + " " + std::to_string(*flag_value) + " (overrides the file's " +
                             std::to_string(value) + ")");
            value = *flag_value;
        }
    }

    // fp16 / bf16 / data_types / communication_data_type.
    void apply_precision() {
        bool fp16 = false;
        bool bf16 = false;
        const std::string dtype_flag = autos_.dtype ? std::string("--dtype ") + to_string(*autos_.dtype)
                                                    : std::string("--dtype not given: HF default false");
        auto enabled = [&](const std::vector<std::string>& path, Dtype which, bool& flag) {
            const json* v = find(path);
            if (!v) return;
            if (is_auto(*v)) {
                flag = autos_.dtype && *autos_.dtype == which;
                record(path, auto_note(path, std::string(flag ? "true" : "false") + " (" +
                                                  dtype_flag + "; HF Trainer rule)"));
                return;
            }
            flag = v->get<bool>();
            record(path);
        };
        enabled({"fp16", "enabled"}, Dtype::fp16, fp16);
        // DeepSpeed reads "bf16", and the old name "bfloat16" only when "bf16"
        // is absent (precision_config.py get_bfloat16_config).
        if (config_.contains("bf16")) enabled({"bf16", "enabled"}, Dtype::bf16, bf16);
        else if (const json* v = find({"bfloat16", "enabled"})) {
            bf16 = v->get<bool>();
            record({"bfloat16", "enabled"});
        }
        if (fp16 && bf16)
            fail(source_, {"bf16", "enabled"},
                 "fp16 and bf16 are both enabled; DeepSpeed asserts they cannot be (runtime/config.py)");
        train_.dtype = fp16 ? Dtype::fp16 : bf16 ? Dtype::bf16 : Dtype::fp32;
        prov_["dtype"] = std::string(to_string(train_.dtype)) + " (" +
                         (fp16 ? "fp16.enabled" : bf16 ? "bf16.enabled" : "neither fp16 nor bf16 enabled") +
                         " in " + source_ + "; DeepSpeed engine.get_data_types)";

        if (const json* v = find({"amp", "enabled"})) {
            if (is_auto(*v))
                record({"amp", "enabled"},
                       auto_note({"amp", "enabled"}, "false (HF fills it only for the apex backend)"));
            else if (v->get<bool>())
                record({"amp", "enabled"}, where({"amp", "enabled"}) +
                                               " = true: apex AMP, which zeromem does not model");
        }
        if (const json* v = find({"amp", "opt_level"}); v && is_auto(*v))
            record({"amp", "opt_level"}, auto_note({"amp", "opt_level"},
                                                   "\"O1\" (HF fp16_opt_level default; no memory effect)"));

        if (const json* v = find({"data_types", "grad_accum_dtype"})) {
            train_.grad_accum_dtype = to_dtype(*v, source_, {"data_types", "grad_accum_dtype"});
            record({"data_types", "grad_accum_dtype"});
        }
        if (const json* v = find({"communication_data_type"})) {
            train_.communication_dtype = parse_dtype(to_lower(v->get<std::string>()), "communication_data_type");
            record({"communication_data_type"});
        }
    }

    void apply_batch() {
        const std::vector<std::string> mb_path = {"train_micro_batch_size_per_gpu"};
        const std::vector<std::string> ga_path = {"gradient_accumulation_steps"};
        const std::vector<std::string> tb_path = {"train_batch_size"};
        const std::vector<std::string> gc_path = {"gradient_clipping"};

        // What HF would use for per_device_train_batch_size / accumulation.
        int64_t micro = autos_.micro_batch.value_or(1);
        int64_t accum = autos_.grad_accum.value_or(1);

        if (const json* v = find(mb_path)) {
            if (is_auto(*v)) {
                train_.micro_batch = micro;
                record(mb_path, auto_note(mb_path, autos_.micro_batch
                    ? std::to_string(micro) + " (--micro-batch; HF per_device_train_batch_size)"
                    : std::string("1 (zeromem default, pass --micro-batch)")));
            } else {
                read_int(mb_path, train_.micro_batch);
                flag_overrides(mb_path, train_.micro_batch, autos_.micro_batch, "--micro-batch");
                micro = train_.micro_batch;
            }
        }
        if (const json* v = find(ga_path)) {
            if (is_auto(*v)) {
                train_.grad_accum = accum;
                record(ga_path, auto_note(ga_path, autos_.grad_accum
                    ? std::to_string(accum) + " (--grad-accum; HF gradient_accumulation_steps)"
                    : std::string("1 (HF default, pass --grad-accum)")));
            } else {
                read_int(ga_path, train_.grad_accum);
                flag_overrides(ga_path, train_.grad_accum, autos_.grad_accum, "--grad-accum");
                accum = train_.grad_accum;
            }
        }
        if (const json* v = find(tb_path)) {
            if (is_auto(*v)) {
                const int64_t tb = autos_.world_size * micro * accum;
                train_.train_batch_size = tb;
                record(tb_path, auto_note(tb_path, "data-parallel GPUs (" + std::to_string(autos_.world_size) +
                                                       ") x micro batch (" + std::to_string(micro) +
                                                       ") x accumulation (" + std::to_string(accum) +
                                                       ") = " + std::to_string(tb) + " (HF Trainer rule)"));
            } else {
                int64_t tb = 0;
                read_int(tb_path, tb);
                train_.train_batch_size = tb;
            }
        }
        if (const json* v = find(gc_path)) {
            if (is_auto(*v)) {
                train_.gradient_clipping = autos_.max_grad_norm;
                record(gc_path, auto_note(gc_path, show(json(autos_.max_grad_norm)) +
                                                       " (HF max_grad_norm)"));
            } else {
                train_.gradient_clipping = v->get<double>();
                record(gc_path);
            }
        }
    }

    /// Reads an alias pair (stage3_x / x); throws if both are given.
    const std::vector<std::string>* alias(const std::vector<std::string>& long_path,
                                          const std::vector<std::string>& short_path) const {
        const bool l = find(long_path) != nullptr;
        const bool s = find(short_path) != nullptr;
        if (l && s)
            fail(source_, short_path, "given twice, also as " + pointer_of(long_path) +
                                          " (DeepSpeed aliases); keep one");
        return l ? &long_path : s ? &short_path : nullptr;
    }

    int64_t hidden(const std::vector<std::string>& path) const {
        if (!autos_.hidden_size)
            fail(source_, path, "is \"auto\" but the hidden size is unknown: give --model or "
                                "--hf-config, or set a number");
        return *autos_.hidden_size;
    }

    void apply_zero() {
        const json* z = find({"zero_optimization"});
        if (!z) return;
        using P = std::vector<std::string>;
        if (z->is_boolean()) {
            // Deprecated form (runtime/zero/config.py read_zero_config_deprecated).
            zero_.stage = z->get<bool>() ? 1 : 0;
            record({"zero_optimization"}, where({"zero_optimization"}) +
                                              " (deprecated boolean form: stage " +
                                              std::to_string(zero_.stage) + ")");
            if (zero_.stage > 0 && read_int({"allgather_size"}, zero_.allgather_bucket_size))
                prov_["zero_optimization.allgather_bucket_size"] = where({"allgather_size"});
            return;
        }
        if (!z->is_object()) fail(source_, {"zero_optimization"}, "must be an object, got " + show(*z));

        int64_t stage = zero_.stage;
        if (read_int({"zero_optimization", "stage"}, stage)) {
            if (stage < 0 || stage > 3)
                fail(source_, {"zero_optimization", "stage"},
                     "must be 0, 1, 2 or 3, got " + std::to_string(stage));
            zero_.stage = static_cast<int>(stage);
        }


        // reduce_bucket_size: HF fills "auto" with h*h for every stage.
        const P rb = {"zero_optimization", "reduce_bucket_size"};
        const P pf = {"zero_optimization", "stage3_prefetch_bucket_size"};
        const P pt = {"zero_optimization", "stage3_param_persistence_threshold"};
        // HF checks the hidden size for all three before filling any.
        for (const P* p : {&rb, &pf, &pt})
            if (const json* v = find(*p); v && is_auto(*v)) (void)hidden(*p);
        if (const json* v = find(rb)) {
            if (is_auto(*v)) {
                const int64_t h = hidden(rb);
                zero_.reduce_bucket_size = h * h;
                record(rb, auto_note(rb, "hidden_size^2 = " + std::to_string(h) + "^2 = " +
                                             std::to_string(h * h) + " (HF Trainer rule)"));
            }
            if (zero_.reduce_bucket_size <= 0)
                fail(source_, rb, "must be > 0, got " + std::to_string(zero_.reduce_bucket_size) +
                                      " (DeepSpeed divides by it: ZeroDivisionError in backward, "
                                      "deepspeedai/DeepSpeed#8260)");
        }

        // Stage-3 knobs, with their pydantic aliases.
        auto stage3_auto = [&](const P& path, int64_t& out, const std::string& rule,
                               int64_t value) {
            if (zero_.stage == 3) {
                out = value;
                record(path, auto_note(path, rule));
            } else {
                record(path, where(path) + " = \"auto\": not filled (the HF Trainer fills it only for "
                                           "ZeRO-3 and DeepSpeed drops \"auto\"), default " +
                                 std::to_string(out));
            }
        };
        if (const json* v = find(pf); v && is_auto(*v)) {
            if (find({"zero_optimization", "prefetch_bucket_size"}))
                (void)alias(pf, {"zero_optimization", "prefetch_bucket_size"});
            const int64_t h = hidden(pf);
            // transformers computes 0.9 * h * h in Python floats, then int().
            const double f = 0.9 * static_cast<double>(h) * static_cast<double>(h);
            stage3_auto(pf, zero_.stage3_prefetch_bucket_size,
                        "int(0.9 x hidden_size^2) = " + std::to_string(static_cast<int64_t>(f)) +
                            " (HF Trainer rule; older transformers passed the float " +
                            show(json(f)) + ", which DeepSpeed >= 0.15 rejects)",
                        static_cast<int64_t>(f));
        }
        if (const json* v = find(pt); v && is_auto(*v)) {
            if (find({"zero_optimization", "param_persistence_threshold"}))
                (void)alias(pt, {"zero_optimization", "param_persistence_threshold"});
            const int64_t h = hidden(pt);
            stage3_auto(pt, zero_.stage3_param_persistence_threshold,
                        "10 x hidden_size = " + std::to_string(10 * h) + " (HF Trainer rule)", 10 * h);
        }

        {
            const P lp = {"zero_optimization", "stage3_gather_16bit_weights_on_model_save"};
            const P sp = {"zero_optimization", "gather_16bit_weights_on_model_save"};
            const P old = {"zero_optimization", "stage3_gather_fp16_weights_on_model_save"};
            const P* p = alias(lp, sp);
            if (p && find(old))
                fail(source_, old, "deprecated name given together with " + pointer_of(*p) + "; keep one");
            if (!p && find(old)) p = &old;
            if (p) {
                zero_.stage3_gather_16bit_weights_on_model_save = find(*p)->get<bool>();
                prov_[dotted_of(lp)] = where(*p) + (p == &lp ? "" : p == &sp ? " (alias)"
                                                                 : " (deprecated name)");
            }
        }

        apply_offload();
    }

    void apply_offload() {
        using P = std::vector<std::string>;
        const P oo = {"zero_optimization", "offload_optimizer"};
        const P op = {"zero_optimization", "offload_param"};
        // Deprecated booleans (DeepSpeedZeroConfig cpu_offload / cpu_offload_param).
        const P dep_o = {"zero_optimization", "cpu_offload"};
        const P dep_p = {"zero_optimization", "cpu_offload_param"};
        if (find(dep_o) && find(oo)) fail(source_, dep_o, "deprecated; remove it (offload_optimizer is given)");
        if (find(dep_p) && find(op)) fail(source_, dep_p, "deprecated; remove it (offload_param is given)");
        if (const json* v = find(dep_o); v && v->get<bool>()) {
            zero_.offload_optimizer = OffloadDevice::cpu;
            prov_["zero_optimization.offload_optimizer.device"] =
                where(dep_o) + " (deprecated; means offload_optimizer.device = cpu)";
        }
        if (const json* v = find(dep_p); v && v->get<bool>()) {
            zero_.offload_param = OffloadDevice::cpu;
            prov_["zero_optimization.offload_param.device"] =
                where(dep_p) + " (deprecated; means offload_param.device = cpu)";
        }
        if (find({"zero_optimization", "cpu_offload_use_pin_memory"}))
            record({"zero_optimization", "cpu_offload_use_pin_memory"},
                   where({"zero_optimization", "cpu_offload_use_pin_memory"}) +
                       " (deprecated and ignored by DeepSpeed; use offload_*.pin_memory)");

        if (find(oo)) {
            const P dev = {"zero_optimization", "offload_optimizer", "device"};
            if (const json* v = find(dev)) {
                zero_.offload_optimizer = parse_offload_device(v->get<std::string>(), pointer_of(dev));
                record(dev);
            } else {
                zero_.offload_optimizer = OffloadDevice::none;
            }
            const P ratio = {"zero_optimization", "offload_optimizer", "ratio"};
            if (const json* v = find(ratio)) {
                zero_.offload_optimizer_ratio = v->get<double>();
                record(ratio);
                if (zero_.offload_optimizer_ratio < 1.0 && zero_.stage != 3)
                    fail(source_, ratio, "is " + show(*v) + " but partial offload needs ZeRO stage 3 "
                                         "(DeepSpeed offload_ratio_check), stage is " +
                                         std::to_string(zero_.stage));
            }
        }
        if (find(op)) {
            const P dev = {"zero_optimization", "offload_param", "device"};
            if (const json* v = find(dev)) {
                zero_.offload_param = parse_offload_device(v->get<std::string>(), pointer_of(dev));
                record(dev);
            } else {
                zero_.offload_param = OffloadDevice::none;
            }
        }
        if (zero_.offload_param != OffloadDevice::none && zero_.stage != 3) {
            const P where_p = find(op) ? P{"zero_optimization", "offload_param", "device"} : dep_p;
            fail(source_, where_p, std::string("is ") + to_string(zero_.offload_param) +
                                       " but DeepSpeed offloads parameters only in ZeRO stage 3 "
                                       "(stage is " + std::to_string(zero_.stage) + ")");
        }
        // ZeRO-1/2 with CPU offload forces contiguous gradients
        // (runtime/zero/stage_1_and_2.py: contiguous_gradients or cpu_offload).
        if ((zero_.stage == 1 || zero_.stage == 2) && zero_.offload_optimizer == OffloadDevice::cpu &&
            !zero_.contiguous_gradients) {
            zero_.contiguous_gradients = true;
            prov_["zero_optimization.contiguous_gradients"] =
                "true: forced by DeepSpeed with ZeRO-1/2 CPU offload (stage_1_and_2.py), although " +
                where({"zero_optimization", "contiguous_gradients"}) + " says false";
        }
    }

    void apply_optimizer() {
        read_bool({"zero_force_ds_cpu_optimizer"}, zero_.zero_force_ds_cpu_optimizer);
        read_bool({"zero_allow_untested_optimizer"}, zero_.zero_allow_untested_optimizer);
        const json* type = find({"optimizer", "type"});
        if (!type) {
            // No block: the client (the HF Trainer) passes its own optimizer.
            train_.optimizer_builder = OptimizerBuilder::client;
            prov_["optimizer.builder"] = "client: no \"optimizer\" block in " + source_ + " (the HF Trainer passes torch AdamW)";
        }
        if (type) {
            // DeepSpeed builds its own optimizer (FusedAdam, or DeepSpeedCPUAdam
            // under offload) from this block: updates in place, no temporaries;
            // with optimizer.params.torch_adam it builds torch Adam(W), foreach.
            train_.optimizer_builder = OptimizerBuilder::deepspeed;
            read_bool({"optimizer", "params", "torch_adam"}, train_.torch_adam);
            train_.fused_optimizer = !train_.torch_adam;
            prov_["optimizer.implementation"] = train_.torch_adam
                ? "torch Adam(W), foreach (" + where({"optimizer", "params", "torch_adam"}) + ")"
                : "DeepSpeed's fused optimizer (" + where({"optimizer"}) + ")";
            const std::string name = type->get<std::string>();
            const std::string t = to_lower(name);
            const std::vector<std::string> path = {"optimizer", "type"};
            if (t == "adam") {
                train_.optimizer = Optimizer::adam;
                record(path);
            } else if (t == "adamw") {
                train_.optimizer = Optimizer::adamw;
                record(path);
            } else if (t == "sgd") {
                train_.optimizer = Optimizer::sgd;
                const json* m = find({"optimizer", "params", "momentum"});
                const bool momentum = m && m->is_number() && m->get<double>() != 0.0;
                record(path, where(path) + (momentum ? std::string()
                    : std::string(" (no momentum given: torch SGD then keeps no state; zeromem still "
                                  "counts a 4 B/param momentum buffer)")));
            } else {
                train_.optimizer = Optimizer::adam;
                record(path, where(path) + " = \"" + name +
                                 "\": counted like Adam (two fp32 states, 8 B/param); its real "
                                 "state may differ");
            }
        }
        // HF fills these from TrainingArguments defaults; no memory effect.
        auto fill = [&](const std::vector<std::string>& path, const std::string& value) {
            if (const json* v = find(path); v && is_auto(*v)) record(path, auto_note(path, value));
        };
        fill({"optimizer", "params", "lr"}, "5e-05 (HF learning_rate default; no memory effect)");
        fill({"optimizer", "params", "betas"}, "[0.9, 0.999] (HF adam_beta1/adam_beta2 defaults; no memory effect)");
        fill({"optimizer", "params", "eps"}, "1e-08 (HF adam_epsilon default; no memory effect)");
        fill({"optimizer", "params", "weight_decay"}, "0.0 (HF weight_decay default; no memory effect)");
    }

    void apply_scheduler() {
        auto fill = [&](const std::vector<std::string>& path, const std::string& value) {
            if (const json* v = find(path); v && is_auto(*v)) record(path, auto_note(path, value));
        };
        fill({"scheduler", "params", "warmup_min_lr"}, "0 (HF Trainer rule; no memory effect)");
        fill({"scheduler", "params", "warmup_max_lr"}, "5e-05 (HF learning_rate default; no memory effect)");
        const std::string later = "left as is: the HF Trainer fills it at train time from the number of "
                                  "training steps; no memory effect";
        fill({"scheduler", "params", "total_num_steps"}, later);
        fill({"scheduler", "params", "warmup_num_steps"}, later);
    }
};

}  // namespace

// ---------------------------------------------------------------------------

namespace {

/// SAX pass over the text that rejects duplicate keys, keeping one set of
/// seen keys per open object and the key path for the message. DeepSpeed
/// rejects them too (runtime/config.py loads with
/// dict_raise_error_on_duplicate_keys). Syntax errors are left to the DOM
/// parse that follows.
class DuplicateKeyCheck : public nlohmann::json_sax<json> {
public:
    explicit DuplicateKeyCheck(const std::string& source) : source_(source) {}

    bool null() override { return value(); }
    bool boolean(bool) override { return value(); }
    bool number_integer(number_integer_t) override { return value(); }
    bool number_unsigned(number_unsigned_t) override { return value(); }
    bool number_float(number_float_t, const string_t&) override { return value(); }
    bool string(string_t&) override { return value(); }
    bool binary(binary_t&) override { return value(); }
    bool start_object(std::size_t) override {
        too_deep();
        stack_.push_back(Frame{});
        return true;
    }
    bool key(string_t& k) override {
        Frame& f = stack_.back();
        f.current = k;
        if (!f.keys.insert(k).second) {
            std::vector<std::string> p;
            for (const auto& fr : stack_) p.push_back(fr.is_array ? std::to_string(fr.index) : fr.current);
            throw InputError(source_ + ": " + pointer_of(p) +
                             ": duplicate key (DeepSpeed rejects duplicate keys)");
        }
        return true;
    }
    bool end_object() override { return end(); }
    bool start_array(std::size_t) override {
        too_deep();
        Frame f;
        f.is_array = true;
        stack_.push_back(f);
        return true;
    }
    bool end_array() override { return end(); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
        return false;  // reported by the DOM parse
    }

private:
    struct Frame {
        bool is_array = false;
        std::set<std::string> keys;
        std::string current;    ///< key being read (objects)
        std::size_t index = 0;  ///< element being read (arrays)
    };
    const std::string& source_;
    std::vector<Frame> stack_;

    /// A DeepSpeed config nests at most a few levels; refusing deep nesting
    /// keeps every later recursive walk (validation, check, dump) shallow.
    void too_deep() const {
        constexpr std::size_t kMaxDepth = 32;
        if (stack_.size() < kMaxDepth) return;
        std::vector<std::string> p;
        for (std::size_t i = 0; i < 4 && i < stack_.size(); ++i)
            p.push_back(stack_[i].is_array ? std::to_string(stack_[i].index) : stack_[i].current);
        throw InputError(source_ + ": " + pointer_of(p) + "/...: nested deeper than " + std::to_string(kMaxDepth) +
                         " levels (DeepSpeed configs nest a few levels)");
    }

    bool value() {
        if (!stack_.empty() && stack_.back().is_array) ++stack_.back().index;
        return true;
    }
    bool end() {
        stack_.pop_back();
        return value();
    }
};

}  // namespace

json load_ds_config_file(const std::string& path) { return parse_ds_config_text(read_text_file(path), path); }

json parse_ds_config_text(const std::string& text, const std::string& path) {
    json doc;
    try {
        DuplicateKeyCheck dup(path);
        const bool ok = json::sax_parse(text, &dup, json::input_format_t::json, /*strict=*/true,
                                        /*ignore_comments=*/true);
        // DeepSpeed's hjson loader accepts // comments; so do we.
        doc = json::parse(text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
        (void)ok;
    } catch (const json::parse_error& e) {
        // e.byte: 1-based index of the last character read. nlohmann's own
        // "line L, column C" counts a lookahead newline (column 0), so the
        // position is recomputed here, stepping back over that newline.
        std::size_t end = std::min<std::size_t>(e.byte, text.size());
        if (end > 1 && text[end - 1] == '\n') --end;
        std::size_t line = 1;
        std::size_t line_start = 0;
        for (std::size_t i = 0; i + 1 < end; ++i)
            if (text[i] == '\n') {
                ++line;
                line_start = i + 1;
            }
        const std::string where_s = "line " + std::to_string(line) + ", column " +
                                    std::to_string(end > line_start ? end - line_start : 1);
        // e.what(): "[json.exception.parse_error.101] parse error at line L, column C: detail"
        const std::string what = e.what();
        std::string detail = what;
        if (const auto at = what.find("at line "); at != std::string::npos) {
            if (const auto colon = what.find(": ", at); colon != std::string::npos)
                detail = what.substr(colon + 2);
        }
        throw InputError(path + ": malformed JSON at " + where_s + ": " + detail);
    }
    if (!doc.is_object())
        throw InputError(path + ": /: a DeepSpeed config must be a JSON object, got " + show(doc));
    return doc;
}

const char* to_string(Launcher l) {
    switch (l) {
        case Launcher::deepspeed: return "deepspeed";
        case Launcher::hf_trainer: return "hf-trainer";
        case Launcher::accelerate: return "accelerate";
    }
    return "";
}

Launcher parse_launcher(const std::string& text, const std::string& field) {
    const std::string t = to_lower(text);
    if (t == "deepspeed") return Launcher::deepspeed;
    if (t == "hf-trainer" || t == "hf_trainer" || t == "trainer") return Launcher::hf_trainer;
    if (t == "accelerate") return Launcher::accelerate;
    throw InputError(field + ": must be deepspeed, hf-trainer or accelerate, got '" + text + "'");
}

extern const char* const kDsSchemaText;  // generated from data/deepspeed_schema.json

const json& ds_schema() {
    static const json doc = [] {
        json d = json::parse(kDsSchemaText);
        if (!d.contains("keys") || !d.at("keys").is_object())
            throw std::logic_error("deepspeed_schema.json: no \"keys\" object");
        return d;
    }();
    return doc;
}

const json* ds_schema_entry(const std::string& pointer) {
    const json& keys = ds_schema().at("keys");
    const auto it = keys.find(pointer);
    return it == keys.end() ? nullptr : &*it;
}

std::vector<SchemaProblem> validate_ds_schema(const json& config, Launcher launcher) {
    std::vector<SchemaProblem> out;
    if (!config.is_object()) {
        out.push_back({SchemaProblem::Kind::wrong_type, "/",
                       "a DeepSpeed config must be a JSON object, got " + show(config), "write {...}"});
        return out;
    }
    Validator(launcher, out).value(config, schema());
    return out;
}

std::vector<SchemaProblem> unmodelled_ds_settings(const json& config) {
    std::vector<SchemaProblem> out;
    for (const auto& item : ds_schema().at("keys").items()) {
        const json& e = item.value();
        if (e.value("memory", std::string()) != "refuse") continue;
        const json* v = refused_value(config, item.key(), e);
        if (!v) continue;
        std::string fix = "remove it";
        if (e.contains("refuse_unless") && !e.at("refuse_unless").empty())
            fix += " or set " + show(e.at("refuse_unless").front());
        if (e.value("refuse_if_enabled", false)) fix += " or set \"enabled\": false";
        out.push_back({SchemaProblem::Kind::out_of_range, item.key(),
                       show(*v) + ": " + e.value("why", std::string()),
                       fix + " to estimate memory"});
    }
    return out;
}

std::vector<std::string> ds_config_notes(const json& config, const std::string& source) {
    std::vector<std::string> out;
    std::vector<std::string> said;  // pointers already noted (children are covered)
    for (const auto& item : ds_schema().at("keys").items()) {
        const json& e = item.value();
        if (e.value("memory", std::string()) != "note") continue;
        const json* v = at_pointer(config, item.key());
        if (!v || v->is_null()) continue;
        bool covered = false;
        for (const auto& p : said) covered = covered || item.key().rfind(p + "/", 0) == 0;
        if (covered) continue;
        said.push_back(item.key());
        out.push_back(source + ":" + item.key() + " = " + show(*v) + ": no effect on memory: " +
                      e.value("why", std::string()));
    }
    return out;
}

void apply_ds_config(const json& config, const std::string& source, const AutoSources& autos,
                     ZeroSettings& zero, TrainingSettings& train, Provenance& prov) {
    if (!config.is_object())
        throw InputError(source + ": /: a DeepSpeed config must be a JSON object, got " + show(config));
    if (autos.world_size < 1)
        throw InputError(source + ": data-parallel GPU count must be >= 1, got " +
                         std::to_string(autos.world_size));
    // The Hugging Face Trainer's "auto" rules apply: zeromem resolves "auto"
    // the way the HF Trainer does (see AutoSources).
    const auto problems = validate_ds_schema(config, Launcher::hf_trainer);
    if (!problems.empty())
        throw InputError(source + ": " + problems.front().pointer + ": " + problems.front().message);
    const auto refused = unmodelled_ds_settings(config);
    if (!refused.empty())
        throw InputError(source + ": " + refused.front().pointer + ": " + refused.front().message + " (" +
                         refused.front().fix + ")");
    Applier(config, source, autos, zero, train, prov).run();
}

void check_batch_arithmetic(const TrainingSettings& train, int64_t data_parallel_size) {
    if (!train.train_batch_size) return;
    const int64_t tb = *train.train_batch_size;
    const int64_t product = train.micro_batch * train.grad_accum * data_parallel_size;
    if (tb == product) return;
    std::ostringstream msg;
    msg << "train_batch_size (" << tb << ") != train_micro_batch_size_per_gpu (" << train.micro_batch
        << ") x gradient_accumulation_steps (" << train.grad_accum << ") x data-parallel GPUs ("
        << data_parallel_size << ") = " << product << "; set train_batch_size to " << product
        << " (or \"auto\" under the HF Trainer) or change the micro batch, the accumulation steps"
        << " or the GPU count (DeepSpeed runtime/config.py _batch_assertion)";
    throw InputError(msg.str());
}

void complete_batch_settings(TrainingSettings& train, int64_t data_parallel_size, Provenance& prov) {
    if (data_parallel_size < 1)
        throw InputError("data-parallel GPU count must be >= 1, got " + std::to_string(data_parallel_size));
    const bool has_tb = train.train_batch_size.has_value();
    const bool has_mb = prov.count("train_micro_batch_size_per_gpu") != 0;
    const bool has_ga = prov.count("gradient_accumulation_steps") != 0;
    const std::string n = std::to_string(data_parallel_size);
    const char* rule = " (DeepSpeed runtime/config.py _set_batch_related_parameters)";

    auto split = [&](int64_t total, int64_t by, const std::string& what) {
        if (by <= 0 || total % by != 0 || total / by == 0)
            throw InputError("train_batch_size (" + std::to_string(total) + ") is not divisible by " + what +
                             " = " + std::to_string(by) + "; change train_batch_size or the GPU count");
        return total / by;
    };

    if (has_tb && has_mb && has_ga) {
        // all given
    } else if (has_tb && has_mb) {
        train.grad_accum = split(*train.train_batch_size, train.micro_batch * data_parallel_size,
                                 "train_micro_batch_size_per_gpu (" + std::to_string(train.micro_batch) +
                                     ") x data-parallel GPUs (" + n + ")");
        prov["gradient_accumulation_steps"] =
            std::to_string(train.grad_accum) + " = train_batch_size / (micro batch x GPUs)" + rule;
    } else if (has_tb && has_ga) {
        train.micro_batch = split(*train.train_batch_size, train.grad_accum * data_parallel_size,
                                  "gradient_accumulation_steps (" + std::to_string(train.grad_accum) +
                                      ") x data-parallel GPUs (" + n + ")");
        prov["train_micro_batch_size_per_gpu"] =
            std::to_string(train.micro_batch) + " = train_batch_size / (accumulation x GPUs)" + rule;
    } else if (has_mb && has_ga) {
        train.train_batch_size = train.micro_batch * train.grad_accum * data_parallel_size;
        prov["train_batch_size"] = std::to_string(*train.train_batch_size) +
                                   " = micro batch x accumulation x GPUs" + rule;
    } else if (has_tb) {
        train.grad_accum = 1;
        train.micro_batch = split(*train.train_batch_size, data_parallel_size,
                                  "the data-parallel GPUs (" + n + ")");
        prov["gradient_accumulation_steps"] = std::string("1 (train_batch_size alone given)") + rule;
        prov["train_micro_batch_size_per_gpu"] =
            std::to_string(train.micro_batch) + " = train_batch_size / GPUs" + rule;
    } else if (has_mb) {
        train.grad_accum = 1;
        train.train_batch_size = train.micro_batch * data_parallel_size;
        prov["gradient_accumulation_steps"] =
            std::string("1 (train_micro_batch_size_per_gpu alone given)") + rule;
        prov["train_batch_size"] = std::to_string(*train.train_batch_size) + " = micro batch x GPUs" + rule;
    } else {
        throw InputError("train_batch_size and train_micro_batch_size_per_gpu are both missing; "
                         "DeepSpeed needs one of them (set one, or pass --micro-batch)");
    }
    check_batch_arithmetic(train, data_parallel_size);
}

}  // namespace zeromem
