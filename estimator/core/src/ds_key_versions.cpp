// Which DeepSpeed releases read a config key under its name: the schema's
// "since" (first release that reads it) and "until" (first release that no
// longer does, with "renamed_to" its new spelling). The releases are read
// off DeepSpeed's own history (git tags of deepspeedai/DeepSpeed, files
// runtime/zero/config.py, constants.py, offload_config.py); each entry's
// since_source / until_source names the commit.
//
// What DeepSpeed does with a key it does not read: before 0.7.0 the ZeRO
// reader (runtime/zero/config.py _initialize, get_scalar_param) looks up only
// the names it knows and ignores the rest; from 0.7.0 ("Refactor ZeRO configs
// to use Pydantic", 599758968, #2004) DeepSpeedZeroConfig has
// extra="forbid" (runtime/config_utils.py DeepSpeedConfigModel) and refuses
// it. zeromem refuses it either way, saying which, since an ignored key
// usually means the run does not do what the config says; only a key with no
// memory effect (schema "note") that an older release ignores is let through
// to its note.
#include "zeromem/ds_schema.h"

#include "zeromem/types.h"

#include <algorithm>
#include <string>
#include <vector>

namespace zeromem {

namespace {

const nlohmann::json* find_pointer(const nlohmann::json& config, const std::string& ptr) {
    const nlohmann::json* cur = &config;
    std::size_t i = 1;
    while (i <= ptr.size()) {
        const std::size_t j = std::min(ptr.find('/', i), ptr.size());
        if (!cur->is_object()) return nullptr;
        const auto it = cur->find(ptr.substr(i, j - i));
        if (it == cur->end()) return nullptr;
        cur = &*it;
        i = j + 1;
    }
    return cur->is_null() ? nullptr : cur;
}

/// What DeepSpeed `version` does with a zero_optimization key it does not read.
std::string deepspeed_reaction(const std::string& version) {
    if (compare_versions(version, "0.7.0", "--deepspeed-version") < 0)
        return "DeepSpeed " + version + " ignores it (its ZeRO reader, runtime/zero/config.py _initialize, "
               "looks up only the names it knows)";
    return "DeepSpeed " + version + " refuses it (DeepSpeedZeroConfig extra=\"forbid\", runtime/config_utils.py)";
}

}  // namespace

std::vector<SchemaProblem> version_gated_keys(const nlohmann::json& config, const std::string& version) {
    std::vector<SchemaProblem> out;
    for (const auto& item : ds_schema().at("keys").items()) {
        const nlohmann::json& e = item.value();
        if (!e.contains("since") && !e.contains("until")) continue;
        if (find_pointer(config, item.key()) == nullptr) continue;
        // A release before 0.7.0 ignores a key it does not know; one without
        // a memory effect (schema "note") is then left to its note.
        const bool ignored = compare_versions(version, "0.7.0", "--deepspeed-version") < 0;
        if (ignored && e.value("memory", std::string()) == "note") continue;
        SchemaProblem p;
        p.kind = SchemaProblem::Kind::unknown_key;
        p.pointer = item.key();
        if (e.contains("since") && compare_versions(version, e.at("since").get<std::string>(), "--deepspeed-version") < 0) {
            const std::string since = e.at("since").get<std::string>();
            p.message = "unknown to DeepSpeed " + version + " (" + e.value("since_source", "first in " + since) +
                        "): " + deepspeed_reaction(version);
            p.fix = "upgrade DeepSpeed to " + since + " or remove the key";
            out.push_back(p);
        } else if (e.contains("until") &&
                   compare_versions(version, e.at("until").get<std::string>(), "--deepspeed-version") >= 0) {
            const std::string renamed = e.value("renamed_to", std::string());
            p.message = "no longer read by DeepSpeed " + version + " (" + e.value("until_source", std::string()) +
                        "): " + deepspeed_reaction(version);
            p.fix = renamed.empty() ? "remove the key" : "write \"" + renamed + "\" instead";
            out.push_back(p);
        }
    }
    return out;
}

}  // namespace zeromem
