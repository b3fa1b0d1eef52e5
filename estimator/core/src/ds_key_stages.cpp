// Keys that only ZeRO stage 3 reads (schema field "stage3_only", which names
// where DeepSpeed reads each): below stage 3 DeepSpeed ignores them, so
// `check` and `estimate` say so instead of refusing or modelling them.
// DeepSpeed v0.19.6: runtime/engine.py _configure_zero_optimizer passes the
// stage3_* knobs only in its ZeRO-3 branch, save_16bit_model reads
// stage3_gather_16bit_weights_on_model_save only when parameters are
// partitioned, and runtime/zero/partition_parameters.py Init (zero.Init,
// entered for ZeRO-3 only) reads memory_efficient_linear and
// stage3_use_all_reduce_for_fetch_params.
#include "zeromem/ds_schema.h"

#include <string>
#include <vector>

namespace zeromem {

using nlohmann::json;

int ds_config_stage(const json& config) {
    if (!config.is_object()) return 0;
    const auto z = config.find("zero_optimization");
    if (z == config.end()) return 0;
    if (z->is_boolean()) return z->get<bool>() ? 1 : 0;
    if (!z->is_object()) return 0;
    const auto s = z->find("stage");
    if (s == z->end() || !s->is_number_integer()) return 0;
    const auto v = s->get<int64_t>();
    return v >= 0 && v <= 3 ? static_cast<int>(v) : 0;
}

std::vector<SchemaProblem> stage3_only_keys(const json& config, std::optional<int> run_stage) {
    std::vector<SchemaProblem> out;
    const int stage = run_stage.value_or(ds_config_stage(config));
    if (stage == 3 || !config.is_object()) return out;
    const auto z = config.find("zero_optimization");
    if (z == config.end() || !z->is_object()) return out;
    for (const auto& item : ds_schema().at("keys").items()) {
        const std::string& ptr = item.key();
        const std::string prefix = "/zero_optimization/";
        if (!item.value().contains("stage3_only") || ptr.rfind(prefix, 0) != 0) continue;
        const auto v = z->find(ptr.substr(prefix.size()));
        if (v == z->end() || v->is_null()) continue;
        out.push_back({SchemaProblem::Kind::ignored_key, ptr,
                       "ignored at stage " + std::to_string(stage) + ": only ZeRO stage 3 reads it (" +
                           item.value().at("stage3_only").get<std::string>() + ")",
                       "remove it, or set zero_optimization.stage to 3 if ZeRO-3 was meant"});
    }
    return out;
}

}  // namespace zeromem
