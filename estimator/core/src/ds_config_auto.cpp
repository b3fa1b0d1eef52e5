// "auto" values: schema field "auto_fill" names one of the rules below (the HF
// Trainer's, transformers integrations/deepspeed.py trainer_config_process
// and trainer_config_finalize); "auto_note" only records what HF fills.
// Shared reader pieces are in ds_config_detail.h.
#include "ds_config_detail.h"
#include "zeromem/ds_schema.h"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace zeromem::ds_config_detail {

namespace {

/// What an "auto" becomes: a value for the key's setting (none: left at the
/// current value) and the provenance sentence.
struct AutoFill {
    std::optional<json> value;
    std::string sentence;
};

/// An HF rule that fills only under ZeRO-3 (trainer_config_finalize).
AutoFill zero3_only(const Reading& r, const Path& path, const Target& t, int64_t value, const std::string& rule) {
    if (r.zero.stage == 3) return {json(value), r.auto_note(path, rule)};
    return {std::nullopt, r.where(path) + " = \"auto\": not filled (the HF Trainer fills it only for ZeRO-3 and "
                                          "DeepSpeed drops \"auto\"), default " + t.show(r)};
}

AutoFill hidden_squared(const Reading& r, const Path& path, const Target&) {
    const int64_t h = r.hidden(path);
    return {json(h * h), r.auto_note(path, "hidden_size^2 = " + std::to_string(h) + "^2 = " +
                                               std::to_string(h * h) + " (HF Trainer rule)")};
}

AutoFill prefetch_rule(const Reading& r, const Path& path, const Target& t) {
    const int64_t h = r.hidden(path);
    // transformers computes 0.9 * h * h in Python floats, then int().
    const double f = 0.9 * static_cast<double>(h) * static_cast<double>(h);
    const auto n = static_cast<int64_t>(f);
    return zero3_only(r, path, t, n, "int(0.9 x hidden_size^2) = " + std::to_string(n) +
                                         " (HF Trainer rule; older transformers passed the float " +
                                         show(json(f)) + ", which DeepSpeed >= 0.15 rejects)");
}

AutoFill persistence_rule(const Reading& r, const Path& path, const Target& t) {
    const int64_t h = r.hidden(path);
    return zero3_only(r, path, t, 10 * h, "10 x hidden_size = " + std::to_string(10 * h) + " (HF Trainer rule)");
}

AutoFill max_grad_norm_rule(const Reading& r, const Path& path, const Target&) {
    return {json(r.autos.max_grad_norm),
            r.auto_note(path, show(json(r.autos.max_grad_norm)) + " (HF max_grad_norm)")};
}

struct AutoRule {
    const char* name;
    bool needs_hidden;
    AutoFill (*fill)(const Reading&, const Path&, const Target&);
};

/// The rules, in the order the HF Trainer applies them.
const std::vector<AutoRule>& auto_rules() {
    static const std::vector<AutoRule> rules = {
        {"hidden_size_squared", true, hidden_squared},
        {"zero3_0.9_hidden_size_squared", true, prefetch_rule},
        {"zero3_10_hidden_size", true, persistence_rule},
        {"max_grad_norm", false, max_grad_norm_rule}};
    return rules;
}

const AutoRule& auto_rule_of(const std::string& name) {
    for (const auto& rule : auto_rules())
        if (name == rule.name) return rule;
    throw std::logic_error("deepspeed_schema.json: unknown auto_fill " + name);
}

/// HF checks the hidden size for every hidden-size rule before filling any.
void check_hidden_size_autos(const Reading& r) {
    for (const auto& rule : auto_rules()) {
        if (!rule.needs_hidden) continue;
        for (const auto& item : ds_schema().at("keys").items()) {
            if (item.value().value("auto_fill", std::string()) != rule.name) continue;
            const Path path = split_pointer(item.key());
            if (const json* v = r.find(path); v && is_auto(*v)) (void)r.hidden(path);
        }
    }
}

}  // namespace

/// Every "auto" the schema has a rule or a note for, filled and recorded.
void apply_auto_table(Reading& r) {
    check_hidden_size_autos(r);
    for (const auto& item : ds_schema().at("keys").items()) {
        const json& e = item.value();
        const Path path = split_pointer(item.key());
        if (e.contains("auto_note")) {
            if (const json* v = r.find(path); v && is_auto(*v))
                r.record(path, r.auto_note(path, e.at("auto_note").get<std::string>()));
            continue;
        }
        if (!e.contains("auto_fill")) continue;
        // Rule and target are looked up for every entry, so a broken table
        // fails on the first config read, not only on a config using the key.
        const AutoRule& rule = auto_rule_of(e.at("auto_fill").get<std::string>());
        if (!e.contains("setting"))
            throw std::logic_error("deepspeed_schema.json: auto_fill without setting at " + item.key());
        const Target& target = target_of(e.at("setting").get<std::string>());
        if (const json* v = r.find(path); !v || !is_auto(*v)) continue;
        const AutoFill fill = rule.fill(r, path, target);
        if (fill.value) target.set(r, *fill.value, path);
        r.record(path, fill.sentence);
    }
}

}  // namespace zeromem::ds_config_detail
