// DeepSpeed config schema check (validate_ds_schema): the schema tree built
// from data/deepspeed_schema.json (compiled in as kDsSchemaText), and the
// Validator that walks a config against it and collects every problem.
// Shared reader pieces are in ds_config_detail.h.
//
// The schema lists the keys DeepSpeed v0.19.6 reads, as it spells them:
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
#include "ds_config_detail.h"
#include "zeromem/ds_schema.h"

#include "zeromem/util.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace zeromem {

using nlohmann::json;

namespace ds_config_detail {
namespace {

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
    NumberList, ///< array of numbers (optimizer betas)
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
        {"string_list", Kind::StringList}, {"number_list", Kind::NumberList}, {"object", Kind::Object}, {"open_object", Kind::Open},
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
// Validation: collects every problem

std::string join_quoted(const std::vector<std::string>& names, const char* last_sep) {
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (i > 0) out += (i + 1 == names.size()) ? last_sep : ", ";
        out += "'" + names[i] + "'";
    }
    return out;
}

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
        case Kind::NumberList: return "a list of numbers";
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
            case Kind::NumberList: {
                bool ok = v.is_array();
                if (ok)
                    for (const auto& e : v) ok = ok && e.is_number();
                if (!ok) add(K::wrong_type, "must be a list of numbers, got " + show(v), "write [0.9, 0.999]");
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
        // At the top level DeepSpeed reads only the keys it knows (runtime/config.py DeepSpeedConfig: one
        // get_scalar_param per key) and ignores the rest, such as LLaMA-Factory's "comms_config": only a near
        // spelling of a real key (a typo DeepSpeed would silently drop) is refused there.
        const bool top_level = path_.size() == 1;
        const bool typo = !near.empty() && (!top_level || ranked.front().first <= std::max<std::size_t>(2, key.size() / 4));
        if (typo)
            return add(K::unknown_key, "unknown key (did you mean " + join_quoted(near, " or ") + "?)",
                       "rename it to '" + near.front() + "'");
        if (top_level)
            return add(K::ignored_key,
                       "not a DeepSpeed v0.19.6 config key: DeepSpeed ignores unknown top-level keys "
                       "(runtime/config.py DeepSpeedConfig reads only the keys it knows)",
                       "remove it, or check its spelling");
        add(K::unknown_key, "unknown key (not a DeepSpeed v0.19.6 config key)", "remove it");
    }
};

}  // namespace
}  // namespace ds_config_detail

using namespace ds_config_detail;

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

}  // namespace zeromem
