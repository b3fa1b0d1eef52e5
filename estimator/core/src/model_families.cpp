// The family dispatch: a config.json's model_type to its family reader (families.json "reader"),
// the checks every family shares, and the public entry points arch_from_hf_config / load_hf_config.
#include "zeromem/model.h"

#include "model_dropout.h"
#include "model_families.h"

#include "zeromem/types.h"
#include "zeromem/util.h"

#include <filesystem>

namespace zeromem {

using namespace model_detail;

namespace {

std::string known_types_text() {
    std::string s;
    for (const auto& [k, v] : families().items()) s += (s.empty() ? "" : ", ") + k;
    return s;
}

std::string first_architecture(const ConfigReader& r) {
    const json* v = r.find({"architectures"});
    if (v && v->is_array() && !v->empty() && v->front().is_string()) return v->front().get<std::string>();
    return "";
}

// model_type from the config, or from "architectures" when model_type is absent.
std::string resolve_model_type(const ConfigReader& r) {
    if (const json* t = r.find({"model_type"})) {
        if (!t->is_string())
            throw InputError(r.source() + ": key 'model_type' must be a string, got " + type_name(*t) + " " + show(*t));
        return t->get<std::string>();
    }
    const std::string arch = first_architecture(r);
    for (const auto& [k, v] : families().items())
        if (v.contains("architectures"))
            for (const auto& name : v["architectures"])
                if (name.get<std::string>() == arch && !arch.empty()) return k;
    return "";
}

[[noreturn]] void refuse_type(const ConfigReader& r, const std::string& model_type) {
    const std::string what = model_type.empty() ? "no 'model_type' (and no known 'architectures')"
                                                : "unknown model_type '" + model_type + "'";
    throw InputError(r.source() + ": " + what + "; zeromem reads " + known_types_text() +
                     "; for another architecture give --params N with --largest-layer-params N instead");
}

// Keys that change the count in some family (families.json "count_keys"),
// present with a value that matters, that this family's reader never asked
// for: refused ("error") or warned about ("warn") by name.
void check_unread_keys(ModelArch& a, const ConfigReader& r, const std::string& model_type) {
    for (const auto& [key, level] : families_doc().at("count_keys").items()) {
        if (key.front() == '_' || r.asked(key)) continue;
        auto it = r.config().find(key);
        if (it == r.config().end()) continue;
        const json& v = *it;
        if (v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_number() && v.get<double>() == 0.0) ||
            (v.is_array() && v.empty()) || (v.is_object() && v.empty()))
            continue;
        const std::string msg = r.source() + ": key '" + key + "' (" + show(v) + ") changes the parameter count, but " +
                                "zeromem's reader for model_type '" + model_type + "' does not use it";
        if (level.get<std::string>() == "error")
            throw InputError(msg + "; give --params N with --largest-layer-params N instead");
        a.warnings.push_back(msg + "; counted without it");
    }
}

}  // namespace

ModelArch model_detail::read_family(const ConfigReader& r, const std::string& model_type, int depth) {
    if (depth > 2) throw InputError(r.source() + ": config nests text_config too deeply");
    const json* fam = family_rules(model_type);
    if (!fam) refuse_type(r, model_type);
    const std::string reader = fam->at("reader").get<std::string>();
    ModelArch a;
    if (reader == "decoder") read_decoder(a, r, *fam);
    else if (reader == "gpt2") read_gpt2(a, r);
    else if (reader == "opt") read_opt(a, r);
    else if (reader == "gpt_neox") read_gpt_neox(a, r);
    else if (reader == "falcon") read_falcon(a, r, model_type);
    else if (reader == "bloom") read_bloom(a, r);
    else if (reader == "t5") read_t5(a, r, *fam, first_architecture(r) == "T5EncoderModel");
    else if (reader == "bert") read_bert(a, r, *fam, first_architecture(r));
    else if (reader == "vision_language") read_vision_language(a, r, *fam, model_type, depth);
    else throw InputError("families.json: model_type '" + model_type + "' names unknown reader '" + reader + "'");
    if (reader != "vision_language") {
        read_dropout_rates(a, r.config(), *fam, r.source());  // the wrapper's text model has them
        a.model_type = model_type;
        if (reader == "decoder" || reader == "t5" || reader == "bert") a.family = model_type;
    }
    (void)r.find({"tie_word_embeddings"});
    check_unread_keys(a, r, model_type);
    // Sizes and switches absent from the config take the defaults of the
    // family's transformers config class (families.json "defaults"); say so.
    for (const auto& d : r.defaulted()) {
        const std::string key = d.substr(0, d.find(' '));
        if (ConfigReader::is_size_key(key) || ConfigReader::is_count_key(key))
            a.warnings.push_back(r.source() + (r.config().contains(key) ? ": '" + key + "' is null" : ": no '" + key + "'") +
                                 ": the " + model_type + " config class default " + d.substr(d.find('=') + 2) +
                                 " is used");
    }
    return a;
}

std::vector<std::string> known_model_types() {
    std::vector<std::string> out;
    for (const auto& [k, v] : families().items()) out.push_back(k);
    return out;
}

ModelArch arch_from_hf_config(const nlohmann::json& config, const std::string& source) {
    if (!config.is_object())
        throw InputError(source + ": expected a JSON object (a Hugging Face config.json), got " + type_name(config));
    ConfigReader r(config, source);
    ModelArch a = read_family(r, resolve_model_type(r), 0);
    if (const json* n = r.find({"_name_or_path"}); n && n->is_string()) a.name = n->get<std::string>();
    return a;
}

ModelArch load_hf_config(const std::string& path) {
    const json cfg = parse_config_file(path);
    ModelArch a = arch_from_hf_config(cfg, path);
    if (a.name.empty()) a.name = std::filesystem::path(path).stem().string();
    return a;
}

}  // namespace zeromem
