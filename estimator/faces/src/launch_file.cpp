// --from FILE (zeromem/launch_file.h): the file as keys with lines, which
// launcher wrote it, the typed reads, and the merge into the request.
#include "launch_file_detail.h"

#include "hf_hub.h"

#include "zeromem/ds_config.h"
#include "zeromem/model.h"
#include "zeromem/util.h"

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace zeromem {

namespace fs = std::filesystem;

namespace launch {

namespace {

// The text yaml_entries reads, by line: yaml-cpp folds a quoted scalar's line breaks into spaces, so
// whether its quote closes on its own line is read off the text.
thread_local const std::vector<std::string>* yaml_lines = nullptr;

bool closes_on_its_line(const YAML::Mark& m) {
    if (!yaml_lines || m.line < 0 || std::size_t(m.line) >= yaml_lines->size()) return true;
    const std::string& l = (*yaml_lines)[std::size_t(m.line)];
    if (m.column < 0 || std::size_t(m.column) >= l.size()) return true;
    const char q = l[std::size_t(m.column)];
    if (q != '"' && q != '\'') return true;
    for (std::size_t i = std::size_t(m.column) + 1; i < l.size(); ++i) {
        if (q == '"' && l[i] == '\\') ++i;  // an escape inside "..."
        else if (l[i] == q && q == '\'' && i + 1 < l.size() && l[i + 1] == '\'') ++i;  // '' inside '...'
        else if (l[i] == q) return true;
    }
    return false;
}

[[noreturn]] void yaml_refuse(const std::string& path, int line, const std::string& key, const std::string& why) {
    throw InputError("--from: " + path + " line " + std::to_string(line) + ": " + key + (key.empty() ? "" : ": ") + why);
}

// A scalar as a launcher's YAML reader (PyYAML's safe_load, YAML 1.1) would read it, or refused where it
// would read something else or nothing: an explicit tag, a quoted value running over lines (an unclosed
// quote swallows the keys after it), a leading-zero integer (octal to PyYAML: 010 is 8).
std::string yaml_scalar(const YAML::Node& v, const std::string& path, int line, const std::string& key) {
    const std::string& tag = v.Tag();
    if (!tag.empty() && tag != "!" && tag != "?")
        yaml_refuse(path, line, key, "the YAML tag " + tag + " is not read (PyYAML's safe_load refuses it too)");
    const std::string& t = v.Scalar();
    if (tag == "!" && !closes_on_its_line(v.Mark()))
        yaml_refuse(path, line, key, "a quoted value runs over several lines (an unclosed quote?)");
    if (tag == "?" && t.size() > 1 && t[0] == '0' && t.find_first_not_of("0123456789_") == std::string::npos)
        yaml_refuse(path, line, key, "'" + t + "' has a leading zero, which PyYAML reads as an octal number; write "
                                     "it without the zero");
    return t;
}

std::string yaml_scalar_list(const YAML::Node& n, const std::string& path, int line, const std::string& key) {
    std::string joined;
    for (const auto& item : n) {
        if (!item.IsScalar()) yaml_refuse(path, line, key, "a list of lists or mappings is not read");
        joined += (joined.empty() ? "" : ",") + yaml_scalar(item, path, line, key);
    }
    return joined;
}

Entry yaml_entry(const std::string& key, const YAML::Node& v, int line, const std::string& path);

std::vector<Entry> yaml_map(const YAML::Node& m, const std::string& path) {
    std::vector<Entry> out;
    std::set<std::string> seen;
    for (const auto& kv : m) {
        const int line = kv.first.Mark().line + 1;
        if (!kv.first.IsScalar()) yaml_refuse(path, line, "", "a key must be a plain name");
        const std::string key = kv.first.Scalar();
        if (key == "<<")
            yaml_refuse(path, line, key, "YAML merge keys are not read; write the merged keys out");
        if (!seen.insert(key).second)
            yaml_refuse(path, line, key, "given twice (the launcher would keep one silently)");
        out.push_back(yaml_entry(key, kv.second, line, path));
    }
    return out;
}

Entry yaml_entry(const std::string& key, const YAML::Node& v, int line, const std::string& path) {
    Entry e;
    e.key = key;
    e.line = line;
    if (v.IsMap()) {
        e.kind = Entry::Kind::map;
        e.children = yaml_map(v, path);
    } else if (v.IsSequence()) {
        e.kind = Entry::Kind::sequence;
        e.text = yaml_scalar_list(v, path, line, key);
    } else if (v.IsNull() || (v.IsScalar() && v.Tag() != "!" && (v.Scalar() == "null" || v.Scalar() == "~"))) {
        e.kind = Entry::Kind::null;
    } else {
        e.text = yaml_scalar(v, path, line, key);
    }
    return e;
}

std::string json_text(const nlohmann::json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
    return v.dump();
}

void json_children(const nlohmann::json& obj, const std::string& pointer, const std::map<std::string, int>& lines,
                   std::vector<Entry>& out) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
        Entry e;
        e.key = it.key();
        const std::string p = pointer + "/" + (nlohmann::json::json_pointer() / it.key()).to_string().substr(1);
        e.line = ds_config_line_of(lines, p);
        const nlohmann::json& v = it.value();
        if (v.is_object()) {
            e.kind = Entry::Kind::map;
            json_children(v, p, lines, e.children);
        } else if (v.is_array()) {
            e.kind = Entry::Kind::sequence;
            for (const auto& item : v)
                if (!item.is_structured()) e.text += (e.text.empty() ? "" : ",") + json_text(item);
        } else if (v.is_null()) {
            e.kind = Entry::Kind::null;
        } else {
            e.text = json_text(v);
        }
        out.push_back(std::move(e));
    }
}

}  // namespace

std::vector<Entry> yaml_entries(const std::string& text, const std::string& path) {
    std::vector<std::string> lines;
    for (std::size_t at = 0; at <= text.size();) {
        const std::size_t nl = text.find('\n', at);
        lines.push_back(text.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
        if (nl == std::string::npos) break;
        at = nl + 1;
    }
    yaml_lines = &lines;
    struct Reset {
        ~Reset() { yaml_lines = nullptr; }
    } reset;
    // Several documents: a '---' marker after content (PyYAML's safe_load refuses them). Counted on the text:
    // yaml-cpp 0.7's LoadAll does not return on some short inputs (found by fuzz_launch_file).
    bool content = false;
    for (std::size_t i = 0; i < lines.size(); ++i) {
        const std::string& l = lines[i];
        const bool marker = l.rfind("---", 0) == 0 && (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
        if (marker && content)
            throw InputError("--from: " + path + " line " + std::to_string(i + 1) +
                             ": a second YAML document ('---'); a launcher reads one");
        const std::size_t first = l.find_first_not_of(" \t\r");
        if (!marker && first != std::string::npos && l[first] != '#' && l[first] != '%') content = true;
    }
    YAML::Node root;
    try {
        root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
        std::string msg = e.msg;
        for (char& c : msg)
            if (static_cast<unsigned char>(c) < 0x20) c = ' ';
        if (msg.find("illegal map value") != std::string::npos) msg += " (a value needs a space after its colon: 'key: value')";
        throw InputError("--from: " + path + " line " + std::to_string(e.mark.line + 1) + ": malformed YAML: " + msg);
    }
    if (!root.IsMap())
        throw InputError("--from: " + path + ": not a YAML mapping of keys (a LLaMA-Factory training YAML or an "
                         "accelerate config is one)");
    return yaml_map(root, path);
}

std::vector<Entry> json_entries(const std::string& text, const std::string& path) {
    nlohmann::json j;
    try {
        j = parse_ds_config_text(text, path);  // lines and columns, repeated keys refused
    } catch (const InputError& e) {
        throw InputError(std::string("--from: ") + e.what());
    }
    if (!j.is_object()) throw InputError("--from: " + path + ": not a JSON object of keys");
    std::vector<Entry> out;
    json_children(j, "", ds_config_key_lines(text), out);
    return out;
}

const Entry* find(const std::vector<Entry>& entries, const std::string& key) {
    for (const Entry& e : entries)
        if (e.key == key) return &e;
    return nullptr;
}

std::string Reader::where(const Entry& e) const {
    return file() + (e.line > 0 ? " line " + std::to_string(e.line) : std::string()) + ": " + e.key;
}

void Reader::refuse(const Entry& e, const std::string& why) const { throw InputError("--from: " + where(e) + ": " + why); }

std::string Reader::scalar(const Entry& e) const {
    if (e.kind == Entry::Kind::map || e.kind == Entry::Kind::sequence) refuse(e, "must be a single value");
    if (e.kind == Entry::Kind::null) refuse(e, "has no value");
    return e.text;
}

int64_t Reader::positive_int(const Entry& e) const {
    const std::string t = scalar(e);
    int64_t v = 0;
    try {
        v = parse_int(t, e.key);
    } catch (const InputError& err) {
        const std::string msg = err.what();
        refuse(e, msg.find("too large") != std::string::npos ? "'" + t + "' is too large"
                                                              : "must be a positive integer, got '" + t + "'");
    }
    if (v <= 0) refuse(e, "must be a positive integer, got '" + t + "'");
    return v;
}

bool Reader::boolean(const Entry& e) const {
    const std::string t = to_lower(scalar(e));
    // As PyYAML (YAML 1.1, what LLaMA-Factory and accelerate read with) resolves booleans.
    if (t == "true" || t == "yes" || t == "on") return true;
    if (t == "false" || t == "no" || t == "off") return false;
    refuse(e, "must be true or false, got '" + e.text + "'");
}

void Reader::from(const std::string& flag, const Entry& e) { out_.trail.sources[flag] = where(e); }

void Reader::launcher_default(const std::string& flag, const std::string& what) {
    out_.trail.sources[flag] = file() + ": " + what;
    out_.trail.notes.push_back(file() + ": " + what);
}

void Reader::note(const Entry& e, const std::string& what) { out_.trail.notes.push_back(where(e) + ": " + what); }

void Reader::warn(const Entry& e, const std::string& what) { out_.trail.warnings.push_back(where(e) + ": " + what); }

void Reader::unknown(const Entry& e) { unknown_.push_back(e.key + (e.line > 0 ? " (line " + std::to_string(e.line) + ")" : "")); }

void Reader::finish() {
    if (unknown_.empty()) return;
    std::string list;
    for (std::size_t i = 0; i < unknown_.size() && i < 5; ++i) list += (i ? ", " : "") + unknown_[i];
    if (unknown_.size() > 5) list += " and " + std::to_string(unknown_.size() - 5) + " more";
    out_.trail.warnings.push_back(file() + ": " + list + ": not " + (unknown_.size() > 1 ? "keys" : "a key") +
                                  " zeromem knows for a " + out_.trail.kind +
                                  "; ignored (if one changes memory, the estimate does not show it)");
}

std::string Reader::existing_path(const Entry& e) const {
    const std::string given = scalar(e);
    std::error_code ec;
    if (fs::exists(given, ec) || fs::path(given).is_absolute()) {
        if (!fs::exists(given, ec)) refuse(e, "'" + given + "' does not exist");
        return given;
    }
    for (fs::path dir = fs::absolute(file(), ec).parent_path(); !dir.empty(); dir = dir.parent_path()) {
        if (fs::exists(dir / given, ec)) return (dir / given).lexically_normal().string();
        if (dir == dir.root_path()) break;
    }
    refuse(e, "'" + given + "' is not found from the working directory, nor from the file's folder or one above it");
}

namespace {

// A Hub id without the segments naming a fine-tune of the same architecture:
// "meta-llama/Meta-Llama-3-8B-Instruct" -> "meta-llama/meta-llama-3-8b".
std::string base_model_id(const std::string& id) {
    const std::string lower = to_lower(id);
    const auto slash = lower.find('/');
    std::string out = lower.substr(0, slash + 1);
    std::size_t pos = slash + 1;
    while (pos <= lower.size()) {
        const std::size_t dash = lower.find('-', pos);
        const std::string seg = lower.substr(pos, dash == std::string::npos ? std::string::npos : dash - pos);
        if (seg != "instruct" && seg != "chat" && seg != "hf" && seg != "it" && seg != "base")
            out += (out.back() == '/' ? "" : "-") + seg;
        if (dash == std::string::npos) break;
        pos = dash + 1;
    }
    return out;
}

// The Hub id a preset's published_source starts with ("meta-llama/Llama-2-7b-hf, https://...").
std::string preset_hub_id(const std::string& source) {
    const std::string id = source.substr(0, source.find_first_of(", "));
    return looks_like_hub_id(id) ? id : std::string();
}

}  // namespace

void Reader::model(const Entry& e) {
    const std::string id = scalar(e);
    Request& v = out_.values;
    // A model flag on the command line replaces this key: what cannot be resolved is said only when it is used.
    auto unresolved = [&](const std::string& why) { out_.trail.model_error = "--from: " + where(e) + ": " + why; };
    std::error_code ec;
    if (fs::exists(id, ec)) {
        try {
            v.hf_config = resolve_hf_config_path(id);
        } catch (const InputError&) {
            return unresolved("'" + id + "' is a folder without a config.json");
        }
        return from("--hf-config", e);
    }
    if (!looks_like_hub_id(id))
        return unresolved("'" + id + "' is neither a local folder nor a Hugging Face Hub id (org/name)");
    try {
        cached_hub_config(id);
        v.hf_config = id;
        return from("--hf-config", e);
    } catch (const InputError&) {
    }
    for (const std::string& name : list_model_presets(data_dir_)) {
        const std::string preset_id = preset_hub_id(load_model_preset(name, data_dir_).published_source);
        if (preset_id.empty()) continue;
        const bool exact = to_lower(preset_id) == to_lower(id);
        if (!exact && base_model_id(preset_id) != base_model_id(id)) continue;
        v.model = name;
        from("--model", e);
        if (exact) note(e, "not in the local Hugging Face cache: the preset " + name + " (" + preset_id + ")");
        else
            warn(e, "not in the local Hugging Face cache: read as the preset " + name + " (" + preset_id +
                        ", its base model: the same architecture); pass --hf-config with its config.json to be exact");
        return;
    }
    unresolved("'" + id + "' is not in the local Hugging Face cache (" + hf_hub_cache().string() +
               ") and no preset has its Hub id: run `huggingface-cli download " + id +
               " config.json`, or pass --model or --hf-config");
}

bool Reader::deepspeed_builds_optimizer(const std::vector<Entry>& entries) const {
    const Entry* ds = find(entries, "deepspeed");
    if (!ds || ds->kind != Entry::Kind::scalar) return false;
    const std::string path = existing_path(*ds);
    try {
        return load_ds_config_file(path).contains("optimizer");
    } catch (const InputError&) {
        return false;  // the DeepSpeed config's own reading names the problem, as --ds-config
    }
}

}  // namespace launch

namespace {

using launch::Entry;

// A .json file is JSON (TrainingArguments dumps, LLaMA-Factory's JSON form); anything else is YAML, which
// also reads flow mappings ({a: 1}) and plain JSON.
bool json_file(const std::string& path) {
    return path.size() >= 5 && to_lower(path.substr(path.size() - 5)) == ".json";
}

bool has_any(const std::vector<Entry>& entries, std::initializer_list<const char*> keys) {
    for (const char* k : keys)
        if (launch::find(entries, k)) return true;
    return false;
}

}  // namespace

LaunchFile parse_launch_file(const std::string& text, const std::string& path, const std::string& data_dir) {
    const bool json = json_file(path);
    const std::vector<Entry> entries = json ? launch::json_entries(text, path) : launch::yaml_entries(text, path);
    LaunchFile f;
    f.trail.path = path;
    launch::Reader r(f, data_dir);
    if (has_any(entries, {"distributed_type", "compute_environment", "deepspeed_config", "num_machines"})) {
        f.trail.kind = "accelerate config";
        launch::read_accelerate(r, entries);
        if (!f.values.model && !f.values.hf_config)
            f.trail.model_error = "--from: " + path + ": an accelerate config names no model: give --model, "
                                  "--hf-config or --params";
    } else if (has_any(entries, {"model_name_or_path", "finetuning_type", "cutoff_len", "template", "lora_target",
                                 "quantization_bit", "stage"})) {
        f.trail.kind = std::string("LLaMA-Factory training ") + (json ? "JSON" : "YAML");
        launch::read_llamafactory(r, entries);
    } else if (has_any(entries, {"per_device_train_batch_size", "output_dir", "gradient_accumulation_steps"})) {
        f.trail.kind = std::string("TrainingArguments ") + (json ? "JSON" : "YAML");
        launch::read_trainer_args(r, entries);
    } else {
        throw InputError("--from: " + path + ": not a LLaMA-Factory training file, an accelerate config or a "
                         "TrainingArguments JSON (it has none of model_name_or_path, distributed_type, "
                         "per_device_train_batch_size)");
    }
    r.finish();
    return f;
}

LaunchFile read_launch_file(const std::string& path, const std::string& data_dir) {
    std::string text;
    try {
        text = read_text_file(path, "launch file", std::uintmax_t(4) << 20);
    } catch (const InputError& e) {
        throw InputError(std::string("--from: ") + e.what());
    }
    return parse_launch_file(text, path, data_dir);
}

}  // namespace zeromem
