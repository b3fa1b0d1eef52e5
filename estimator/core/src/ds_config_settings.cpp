// The schema's setting table: every key whose schema entry (data/deepspeed_schema.json)
// names a "setting" is read into that zeromem setting, alias and deprecated
// spellings included. Shared reader pieces are in ds_config_detail.h.
#include "ds_config_detail.h"
#include "zeromem/ds_schema.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace zeromem::ds_config_detail {

namespace {

/// JSON value -> field type (the JSON type has been checked by validation).
template <class T> struct FieldValue;
template <> struct FieldValue<int64_t> {
    static int64_t read(const json& v, const Reading& r, const Path& p) { return to_int(v, r.source, p); }
    static std::string show(int64_t x) { return std::to_string(x); }
};
template <> struct FieldValue<bool> {
    static bool read(const json& v, const Reading&, const Path&) { return v.get<bool>(); }
    static std::string show(bool x) { return x ? "true" : "false"; }
};
template <> struct FieldValue<double> {
    static double read(const json& v, const Reading&, const Path&) { return v.get<double>(); }
    static std::string show(double x) { return ds_config_detail::show(json(x)); }
};
template <> struct FieldValue<Dtype> {
    static Dtype read(const json& v, const Reading& r, const Path& p) { return to_dtype(v, r.source, p); }
    static std::string show(Dtype x) { return to_string(x); }
};
template <class T> struct FieldValue<std::optional<T>> {
    static T read(const json& v, const Reading& r, const Path& p) { return FieldValue<T>::read(v, r, p); }
    static std::string show(const std::optional<T>& x) { return x ? FieldValue<T>::show(*x) : "unset"; }
};

template <class F> Target zero_field(F ZeroSettings::*m) {
    return {[m](Reading& r, const json& v, const Path& p) { r.zero.*m = FieldValue<F>::read(v, r, p); },
            [m](const Reading& r) { return FieldValue<F>::show(r.zero.*m); }};
}
template <class F> Target train_field(F TrainingSettings::*m) {
    return {[m](Reading& r, const json& v, const Path& p) { r.train.*m = FieldValue<F>::read(v, r, p); },
            [m](const Reading& r) { return FieldValue<F>::show(r.train.*m); }};
}

/// zero_optimization.stage (runtime/zero/config.py DeepSpeedZeroConfig.stage).
Target stage_target() {
    return {[](Reading& r, const json& v, const Path& p) {
                const int64_t stage = to_int(v, r.source, p);
                if (stage < 0 || stage > 3) fail(r.source, p, "must be 0, 1, 2 or 3, got " + std::to_string(stage));
                r.zero.stage = static_cast<int>(stage);
            },
            [](const Reading& r) { return std::to_string(r.zero.stage); }};
}

/// Every target a schema "setting" may name ("zero.<field>" of ZeroSettings,
/// "train.<field>" of TrainingSettings).
const std::map<std::string, Target>& setting_targets() {
    using Z = ZeroSettings;
    using T = TrainingSettings;
    static const std::map<std::string, Target> targets = {
        {"zero.stage", stage_target()},
        {"zero.allgather_bucket_size", zero_field(&Z::allgather_bucket_size)},
        {"zero.sub_group_size", zero_field(&Z::sub_group_size)},
        {"zero.reduce_bucket_size", zero_field(&Z::reduce_bucket_size)},
        {"zero.stage3_prefetch_bucket_size", zero_field(&Z::stage3_prefetch_bucket_size)},
        {"zero.stage3_param_persistence_threshold", zero_field(&Z::stage3_param_persistence_threshold)},
        {"zero.stage3_model_persistence_threshold", zero_field(&Z::stage3_model_persistence_threshold)},
        {"zero.stage3_max_live_parameters", zero_field(&Z::stage3_max_live_parameters)},
        {"zero.stage3_max_reuse_distance", zero_field(&Z::stage3_max_reuse_distance)},
        {"zero.stage3_gather_16bit_weights_on_model_save", zero_field(&Z::stage3_gather_16bit_weights_on_model_save)},
        {"zero.offload_optimizer_buffer_count", zero_field(&Z::offload_optimizer_buffer_count)},
        {"zero.offload_optimizer_ratio", zero_field(&Z::offload_optimizer_ratio)},
        {"zero.offload_param_buffer_count", zero_field(&Z::offload_param_buffer_count)},
        {"zero.offload_param_buffer_size", zero_field(&Z::offload_param_buffer_size)},
        {"zero.offload_param_max_in_cpu", zero_field(&Z::offload_param_max_in_cpu)},
        {"zero.contiguous_gradients", zero_field(&Z::contiguous_gradients)},
        {"zero.reduce_scatter", zero_field(&Z::reduce_scatter)},
        {"zero.offload_optimizer_pin_memory", zero_field(&Z::offload_optimizer_pin_memory)},
        {"zero.offload_param_pin_memory", zero_field(&Z::offload_param_pin_memory)},
        {"zero.overlap_comm", zero_field(&Z::overlap_comm)},
        {"zero.aio_block_size", zero_field(&Z::aio_block_size)},
        {"zero.aio_queue_depth", zero_field(&Z::aio_queue_depth)},
        {"zero.zero_force_ds_cpu_optimizer", zero_field(&Z::zero_force_ds_cpu_optimizer)},
        {"zero.zero_allow_untested_optimizer", zero_field(&Z::zero_allow_untested_optimizer)},
        {"zero.zero_hpz_partition_size", zero_field(&Z::zero_hpz_partition_size)},
        {"zero.zero_quantized_weights", zero_field(&Z::zero_quantized_weights)},
        {"zero.zero_quantized_gradients", zero_field(&Z::zero_quantized_gradients)},
        {"zero.mics_shard_size", zero_field(&Z::mics_shard_size)},
        {"zero.mics_hierarchical_params_gather", zero_field(&Z::mics_hierarchical_params_gather)},
        {"zero.memory_efficient_linear", zero_field(&Z::memory_efficient_linear)},
        {"train.number_checkpoints", train_field(&T::number_checkpoints)},
        {"train.partition_activations", train_field(&T::partition_activations)},
        {"train.cpu_checkpointing", train_field(&T::cpu_checkpointing)},
        {"train.gradient_clipping", train_field(&T::gradient_clipping)},
        {"train.grad_accum_dtype", train_field(&T::grad_accum_dtype)},
        {"train.communication_dtype", train_field(&T::communication_dtype)}};
    return targets;
}

/// The spellings of a schema key: the name, its "aliases" (pydantic
/// populate_by_name) and its "deprecated_aliases" (older names), in order.
struct Spellings {
    std::vector<Path> paths;
    std::size_t first_deprecated = 0;
};
Spellings spellings_of(const std::string& pointer, const json& entry) {
    Spellings s;
    const Path path = split_pointer(pointer);
    s.paths.push_back(path);
    for (const char* field : {"aliases", "deprecated_aliases"}) {
        if (std::string(field) == "deprecated_aliases") s.first_deprecated = s.paths.size();
        for (const auto& a : entry.value(field, json::array())) {
            s.paths.push_back(path);
            s.paths.back().back() = a.get<std::string>();
        }
    }
    return s;
}

/// The one spelling of a key the config gives (nullptr if none); throws if
/// it gives two (DeepSpeed would take one silently or reject the pair).
const Path* given_spelling(const Reading& r, const Spellings& s) {
    const Path* given = nullptr;
    for (std::size_t i = 0; i < s.paths.size(); ++i) {
        const Path& sp = s.paths[i];
        if (!r.find(sp)) continue;
        if (given && i >= s.first_deprecated)
            fail(r.source, sp, "deprecated name given together with " + pointer_of(*given) + "; keep one");
        if (given) fail(r.source, sp, "given twice, also as " + pointer_of(*given) + " (DeepSpeed aliases); keep one");
        given = &sp;
    }
    return given;
}

}  // namespace

const Target& target_of(const std::string& setting) {
    const auto it = setting_targets().find(setting);
    if (it == setting_targets().end()) throw std::logic_error("deepspeed_schema.json: unknown setting " + setting);
    return it->second;
}

/// Keys whose schema entry names a "setting": a plain value (alias
/// spellings included; "auto" is left to apply_auto_table) is read into
/// that setting and recorded. One table decides what these keys mean.
void apply_setting_table(Reading& r) {
    for (const auto& item : ds_schema().at("keys").items()) {
        const json& e = item.value();
        if (!e.contains("setting")) continue;
        const Target& target = target_of(e.at("setting").get<std::string>());
        const Spellings s = spellings_of(item.key(), e);
        const Path* given = given_spelling(r, s);
        if (!given) continue;
        const json* v = r.find(*given);
        if (is_auto(*v)) continue;
        target.set(r, *v, *given);
        const Path& path = s.paths.front();
        const bool deprecated = static_cast<std::size_t>(given - s.paths.data()) >= s.first_deprecated;
        r.prov[dotted_of(path)] = given == &path ? r.where(path)
            : r.where(*given) + (deprecated ? " (deprecated name of " : " (alias of ") + path.back() + ")";
    }
}

}  // namespace zeromem::ds_config_detail
