// Dropout probabilities per model, read from the config keys each family's
// transformers config class uses. Which dropout exists where comes from the
// family's modeling file (see the "dropout" rules in
// data/architectures/families.json and their "source").
#include "model_dropout.h"

#include "zeromem/types.h"

#include <cmath>

namespace zeromem {

namespace {

using json = nlohmann::json;

double checked_rate(const json& v, const std::string& key, const std::string& source) {
    if (!v.is_number())
        throw InputError(source + ": key '" + key + "' must be a dropout probability (a number in [0, 1]), got " + v.dump());
    const double p = v.get<double>();
    if (!std::isfinite(p) || p < 0.0 || p > 1.0)
        throw InputError(source + ": key '" + key + "' must be a dropout probability in [0, 1], got " + v.dump());
    return p;
}

// One site's rule: a number is fixed; a string (or a list of spellings,
// first found wins) names the config key, whose absence (or null) takes the
// family's "dropout_defaults" value (its config class default), else 0.
double site_rate(const json& rule, const json& config, const json& family, const std::string& source) {
    if (rule.is_number()) return checked_rate(rule, "families.json dropout", source);
    std::vector<std::string> keys;
    if (rule.is_string()) keys.push_back(rule.get<std::string>());
    else if (rule.is_array())
        for (const auto& k : rule) keys.push_back(k.get<std::string>());
    else
        throw InputError("families.json: a dropout rule must be a number, a key or a list of keys, got " + rule.dump());
    for (const auto& k : keys)
        if (auto it = config.find(k); it != config.end() && !it->is_null()) return checked_rate(*it, k, source);
    if (family.contains("dropout_defaults") && family["dropout_defaults"].contains(keys.front()))
        return checked_rate(family["dropout_defaults"][keys.front()], keys.front(), "families.json dropout_defaults");
    return 0.0;
}

}  // namespace

void read_dropout_rates(ModelArch& a, const json& config, const json& family, const std::string& source) {
    a.embedding_dropout = a.attention_dropout = a.attention_residual_dropout = a.mlp_residual_dropout = 0.0;
    if (!family.contains("dropout")) return;
    const json& d = family["dropout"];
    auto rate = [&](const char* site) { return d.contains(site) ? site_rate(d[site], config, family, source) : 0.0; };
    a.embedding_dropout = rate("embedding");
    a.attention_dropout = rate("attention");
    a.attention_residual_dropout = rate("attention_residual");
    a.mlp_residual_dropout = rate("mlp_residual");
}

}  // namespace zeromem
