// The helpers every config.json family reader shares, and the embedded family rules.
#include "hf_config_reader.h"
#include "zeromem/util.h"

#include "zeromem_families_json.h"

namespace zeromem::model_detail {

json parse_config_file(const std::string& path) {
    const std::string text = read_text_file(path);
    try {
        return json::parse(text);
    } catch (const json::parse_error& e) {
        // nlohmann's message reads "... parse error at line L, column C: ...".
        throw InputError(path + ": malformed JSON: " + e.what());
    } catch (const json::out_of_range& e) {  // a number beyond the double range (1e999)
        throw InputError(path + ": a number is out of range: " + e.what());
    }
}

std::string type_name(const json& v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number_float()) return "a non-integer number";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_array()) return "an array";
    return "an object";
}

std::string show(const json& v) {
    std::string s = v.dump();
    if (s.size() > 40) s = s.substr(0, 37) + "...";
    return s;
}

// Fills the shared sizes; positive-size checks are left to count_params.
void read_heads(ModelArch& a, const ConfigReader& r, std::initializer_list<const char*> head_keys) {
    a.num_heads = r.integer(head_keys);
    if (a.num_heads <= 0)
        throw InputError(r.source() + ": key '" + *head_keys.begin() + "' must be positive, got " +
                         std::to_string(a.num_heads));
}

int64_t default_head_dim(const ModelArch& a, const ConfigReader& r) {
    if (a.hidden_size % a.num_heads != 0)
        throw InputError(r.source() + ": hidden size " + std::to_string(a.hidden_size) +
                         " is not divisible by the number of heads " + std::to_string(a.num_heads) +
                         " (set 'head_dim')");
    return a.hidden_size / a.num_heads;
}

// ---------------------------------------------------------------------------
// Family rules: data/architectures/families.json, embedded at build time.

const json& families_doc() {
    static const json doc = json::parse(std::string(reinterpret_cast<const char*>(kFamiliesJson), sizeof kFamiliesJson));
    return doc;
}

const json& families() { return families_doc().at("families"); }

// The family entry for `model_type`, following "same_as"; nullptr if unknown.
const json* family_rules(const std::string& model_type) {
    const json& f = families();
    auto it = f.find(model_type);
    if (it == f.end()) return nullptr;
    if (it->contains("same_as")) return family_rules((*it)["same_as"].get<std::string>());
    return &*it;
}

// A layout switch: true/false fixed, or the name of a boolean config key
// read with the family default.
bool layout_flag(const ConfigReader& r, const json& fam, const char* name, bool fallback) {
    if (!fam.contains("layout") || !fam["layout"].contains(name)) return fallback;
    const json& v = fam["layout"][name];
    if (v.is_boolean()) return v.get<bool>();
    return r.fam_boolean(fam, v.get<std::string>(), false);
}

int64_t layout_int(const json& fam, const char* name, int64_t fallback) {
    if (!fam.contains("layout") || !fam["layout"].contains(name)) return fallback;
    return fam["layout"][name].get<int64_t>();
}

// Length of a JSON list key (0 if absent); anything else than a list of
// integers is refused.
int64_t list_length(const ConfigReader& r, const char* key, std::vector<int64_t>* values) {
    const json* v = r.find({key});
    if (!v) return 0;
    if (!v->is_array()) throw InputError(r.source() + ": key '" + key + "' must be a list, got " + type_name(*v));
    for (const auto& x : *v) {
        if (!x.is_number_integer())
            throw InputError(r.source() + ": key '" + key + "' must list integers, got " + show(x));
        if (values) values->push_back(x.get<int64_t>());
    }
    return static_cast<int64_t>(v->size());
}

}  // namespace zeromem::model_detail
