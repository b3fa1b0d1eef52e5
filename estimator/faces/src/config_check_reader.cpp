// `check` findings that come from reading the config as `estimate` reads it:
// the values "auto" resolves to, the reader's refusals at their keys, and the
// keys only ZeRO stage 3 reads. See config_check_detail.h.
#include "config_check_detail.h"

#include "zeromem/util.h"

#include <algorithm>
#include <string>

namespace zeromem {

using nlohmann::json;

namespace {

/// Every "auto" in `v` (JSON pointers), in key order.
void find_autos(const json& v, const std::string& ptr, std::vector<std::string>& out) {
    if (v.is_object()) {
        for (auto it = v.begin(); it != v.end(); ++it) find_autos(it.value(), ptr + "/" + it.key(), out);
    } else if (v.is_string() && v.get<std::string>() == "auto") {
        out.push_back(ptr);
    }
}

std::string dotted(const std::string& ptr) {
    std::string d = ptr.substr(1);
    std::replace(d.begin(), d.end(), '/', '.');
    return d;
}

/// A hidden size for the reader pass that only looks for refusals when the
/// model is not known: it lets the reader get past the hidden-size "auto"s
/// (reduce_bucket_size and the stage-3 buckets) to the keys after them. The
/// values it gives are never shown.
constexpr int64_t kStandInHiddenSize = 4096;

}  // namespace

std::vector<std::string> auto_value_pointers(const json& config) {
    std::vector<std::string> out;
    find_autos(config, "", out);
    return out;
}

namespace check_detail {

void auto_findings(const json& config, const CheckOptions& o, const std::string& version, Findings& out) {
    if (o.launcher == Launcher::deepspeed) return;
    const std::vector<std::string> autos = auto_value_pointers(config);
    if (autos.empty()) return;
    ZeroSettings zero;
    TrainingSettings train;
    Provenance prov;
    try {
        apply_ds_config(config, "config", o.autos, zero, train, prov, version);
    } catch (const InputError&) {
        // Refusals are reader_findings'; the values resolved before one stay in prov.
    }
    const std::string who = o.launcher == Launcher::accelerate ? "accelerate" : "the HF Trainer";
    for (const auto& ptr : autos) {
        const json* e = ds_schema_entry(ptr);
        if (e == nullptr || !e->contains("auto")) continue;  // reported by the schema check
        const auto p = prov.find(dotted(ptr));
        std::string msg;
        if (p != prov.end()) {
            msg = p->second;
            if (const auto arrow = msg.find("-> "); arrow != std::string::npos) msg = msg.substr(arrow + 3);
            msg = "\"auto\" -> " + msg;
        } else if (e->contains("auto_rule")) {
            msg = "\"auto\": " + who + " fills it with " + e->at("auto_rule").get<std::string>() + " at launch";
        } else {
            msg = "\"auto\" -> " + e->value("auto_note", std::string("filled by ") + who + " at launch");
        }
        std::string fix;
        if (p == prov.end() && e->value("auto_rule", std::string()).find("hidden_size") != std::string::npos)
            fix = "pass --model or --hf-config to see the value";
        out.push_back({Severity::note, ptr, msg, fix});
        if (const auto c = e->find("auto_caveats"); c != e->end() && c->contains(to_string(o.launcher)))
            out.push_back({Severity::warning, ptr, c->at(to_string(o.launcher)).get<std::string>(),
                           "set an explicit value"});
        if (e->value("auto_float_trap", false) && ds_config_stage(config) == 3 && newer_or_equal(version, "0.15.0")) {
            std::string value = "int(0.9 x hidden_size^2)";
            if (o.autos.hidden_size) {
                const double h = static_cast<double>(*o.autos.hidden_size);
                value = std::to_string(static_cast<long long>(0.9 * h * h));
            }
            out.push_back({Severity::warning, ptr,
                           "older transformers and accelerate releases fill \"auto\" here with the float 0.9 x "
                           "hidden_size^2 (e.g. 15099494.4 for h=4096), which DeepSpeed >= 0.15 rejects "
                           "(\"Input should be a valid integer\")",
                           "set the integer " + value + " or use a current transformers/accelerate"});
        }
    }
}

void reader_findings(const json& config, const CheckOptions& o, const std::string& version, Findings& out) {
    json readable = config;
    for (const auto& p : unmodelled_ds_settings(config)) {  // warnings already (refusal_findings)
        const json::json_pointer ptr(p.pointer);
        if (readable.contains(ptr)) readable[ptr.parent_pointer()].erase(ptr.back());
    }
    AutoSources autos = o.autos;
    if (!autos.hidden_size) autos.hidden_size = kStandInHiddenSize;
    ZeroSettings zero;
    TrainingSettings train;
    Provenance prov;
    std::string pointer = "/", detail;
    try {
        apply_ds_config(readable, "config", autos, zero, train, prov, version);
        return;
    } catch (const ConfigError& e) {
        pointer = e.pointer();
        detail = e.detail();
    } catch (const InputError& e) {
        detail = e.what();
    }
    if (!already_reported(out, pointer)) out.push_back({Severity::error, pointer, detail, ""});
}

void stage3_only_findings(const json& config, Findings& out) {
    for (const auto& p : stage3_only_keys(config)) out.push_back({Severity::note, p.pointer, p.message, p.fix});
}

}  // namespace check_detail
}  // namespace zeromem
