// DeepSpeed config files: strict loading, schema check, "auto" resolution,
// application onto ZeroSettings / TrainingSettings.
//
// This file: loading (duplicate keys, nesting depth, syntax errors), the
// public entry points, the memory meaning of keys and batch completion. The
// schema check is in ds_config_validate.cpp, the setting table in
// ds_config_settings.cpp, the "auto" rules in ds_config_auto.cpp and the
// structure (precision, batch sizes, offload, optimizer) in
// ds_config_structure.cpp; their shared pieces are in ds_config_detail.h.
#include "ds_config_detail.h"
#include "zeromem/ds_config.h"
#include "zeromem/ds_schema.h"

#include "zeromem/util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <stdexcept>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

namespace zeromem {

using nlohmann::json;

namespace ds_config_detail {

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
    throw ConfigError(source, pointer_of(path), what);
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

bool is_auto(const json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

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

}  // namespace ds_config_detail

using namespace ds_config_detail;

namespace {

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
    if (text.find_first_not_of(" \t\r\n") == std::string::npos)  // an empty file, or one that reads as nothing (/proc/self/mem)
        throw InputError(path + ": empty: nothing could be read from it (a JSON object was expected)");
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
    } catch (const json::out_of_range& e) {  // a number beyond the double range (1e999)
        throw InputError(path + ": a number is out of range (beyond the double range): " + std::string(e.what()));
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

std::vector<SchemaProblem> unmodelled_ds_settings(const json& config, std::optional<int> stage) {
    std::vector<SchemaProblem> out;
    const bool below_stage3 = stage.value_or(ds_config_stage(config)) < 3;
    for (const auto& item : ds_schema().at("keys").items()) {
        const json& e = item.value();
        if (e.value("memory", std::string()) != "refuse") continue;
        if (below_stage3 && e.contains("stage3_only")) continue;  // DeepSpeed ignores it there (ds_key_stages.cpp)
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

std::vector<std::string> ds_config_notes(const json& config, const std::string& source, std::optional<int> stage) {
    std::vector<std::string> out;
    std::vector<std::string> said;  // pointers already noted (children are covered)
    for (const auto& p : stage3_only_keys(config, stage)) {
        said.push_back(p.pointer);
        out.push_back(source + ":" + p.pointer + " = " + show(*at_pointer(config, p.pointer)) +
                      ": no effect on memory: " + p.message);
    }
    for (const auto& item : ds_schema().at("keys").items()) {
        const json& e = item.value();
        if (e.value("memory", std::string()) != "note") continue;
        if (std::find(said.begin(), said.end(), item.key()) != said.end()) continue;
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
                     ZeroSettings& zero, TrainingSettings& train, Provenance& prov,
                     const std::string& deepspeed_version) {
    const std::string version =
        deepspeed_version.empty() ? ds_schema().value("newest_version", std::string("0.19.6")) : deepspeed_version;
    if (!config.is_object())
        throw InputError(source + ": /: a DeepSpeed config must be a JSON object, got " + show(config));
    if (autos.world_size < 1)
        throw InputError(source + ": data-parallel GPU count must be >= 1, got " +
                         std::to_string(autos.world_size));
    // The Hugging Face Trainer's "auto" rules apply: zeromem resolves "auto"
    // the way the HF Trainer does (see AutoSources).
    for (const auto& p : validate_ds_schema(config, Launcher::hf_trainer))
        if (p.kind != SchemaProblem::Kind::ignored_key) throw ConfigError(source, p.pointer, p.message);
    const auto gated = version_gated_keys(config, version);
    if (!gated.empty())
        throw ConfigError(source, gated.front().pointer, gated.front().message + "; " + gated.front().fix);
    const auto refused = unmodelled_ds_settings(config);
    if (!refused.empty())
        throw ConfigError(source, refused.front().pointer, refused.front().message + " (" + refused.front().fix + ")");
    Reading reading{config, source, autos, zero, train, prov, version};
    read_ds_settings(reading);
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
