// DeepSpeed config files: strict loading, schema check, "auto" resolution,
// application onto ZeroSettings / TrainingSettings.
#include "ds_config_detail.h"
#include "zeromem/ds_config.h"
#include "zeromem/ds_schema.h"
#include "zeromem/optimizer_state.h"

#include "zeromem/util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
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
// --- Precision: fp16 / bf16 (runtime/precision_config.py, engine.get_data_types).

/// fp16.enabled or bf16.enabled into `flag`; "auto" follows --dtype (HF rule).
void read_precision_flag(Reading& r, const Path& path, Dtype which, bool& flag) {
    const json* v = r.find(path);
    if (!v) return;
    if (is_auto(*v)) {
        const std::string dtype_flag = r.autos.dtype ? std::string("--dtype ") + to_string(*r.autos.dtype)
                                                     : std::string("--dtype not given: HF default false");
        flag = r.autos.dtype && *r.autos.dtype == which;
        r.record(path, r.auto_note(path, std::string(flag ? "true" : "false") + " (" + dtype_flag +
                                             "; HF Trainer rule)"));
        return;
    }
    flag = v->get<bool>();
    r.record(path);
}

void apply_precision(Reading& r) {
    bool fp16 = false;
    bool bf16 = false;
    read_precision_flag(r, {"fp16", "enabled"}, Dtype::fp16, fp16);
    // DeepSpeed reads "bf16", and the old name "bfloat16" only when "bf16"
    // is absent (precision_config.py get_bfloat16_config).
    if (r.config.contains("bf16")) read_precision_flag(r, {"bf16", "enabled"}, Dtype::bf16, bf16);
    else if (const json* v = r.find({"bfloat16", "enabled"})) {
        bf16 = v->get<bool>();
        r.record({"bfloat16", "enabled"});
    }
    if (fp16 && bf16)
        fail(r.source, {"bf16", "enabled"},
             "fp16 and bf16 are both enabled; DeepSpeed asserts they cannot be (runtime/config.py "
             "DeepSpeedConfig._initialize_params: 'bfloat16 and fp16 modes cannot be simultaneously enabled')");
    r.train.dtype = fp16 ? Dtype::fp16 : bf16 ? Dtype::bf16 : Dtype::fp32;
    r.prov["dtype"] = std::string(to_string(r.train.dtype)) + " (" +
                      (fp16 ? "fp16.enabled" : bf16 ? "bf16.enabled" : "neither fp16 nor bf16 enabled") +
                      " in " + r.source + "; DeepSpeed engine.get_data_types)";
}

// --- Batch sizes (runtime/config.py _set_batch_related_parameters).

/// train_micro_batch_size_per_gpu or gradient_accumulation_steps into
/// `field`: "auto" takes the flag (HF rule), a number is overridden by the
/// flag (zeromem's rule; the HF Trainer would reject the mismatch). Returns
/// the value HF would use.
int64_t read_batch_count(Reading& r, const Path& path, int64_t& field, const std::optional<int64_t>& flag,
                         const char* flag_name, const std::string& auto_rule, const std::string& no_flag) {
    const int64_t from_flag = flag.value_or(1);
    const json* v = r.find(path);
    if (!v) return from_flag;
    if (is_auto(*v)) {
        field = from_flag;
        r.record(path, r.auto_note(path, flag ? std::to_string(from_flag) + " (" + flag_name + "; " + auto_rule + ")"
                                              : no_flag));
        return from_flag;
    }
    field = to_int(*v, r.source, path);
    r.record(path);
    if (flag && *flag != field) {
        r.record(path, std::string(flag_name) + " " + std::to_string(*flag) + " (overrides the file's " +
                           std::to_string(field) + ")");
        field = *flag;
    }
    return field;
}

void apply_batch(Reading& r) {
    const int64_t micro = read_batch_count(r, {"train_micro_batch_size_per_gpu"}, r.train.micro_batch,
                                           r.autos.micro_batch, "--micro-batch", "HF per_device_train_batch_size",
                                           "1 (zeromem default, pass --micro-batch)");
    const int64_t accum = read_batch_count(r, {"gradient_accumulation_steps"}, r.train.grad_accum,
                                           r.autos.grad_accum, "--grad-accum", "HF gradient_accumulation_steps",
                                           "1 (HF default, pass --grad-accum)");
    const Path tb_path = {"train_batch_size"};
    const json* v = r.find(tb_path);
    if (!v) return;
    if (is_auto(*v)) {
        const int64_t tb = r.autos.world_size * micro * accum;
        r.train.train_batch_size = tb;
        r.record(tb_path, r.auto_note(tb_path, "data-parallel GPUs (" + std::to_string(r.autos.world_size) +
                                                   ") x micro batch (" + std::to_string(micro) +
                                                   ") x accumulation (" + std::to_string(accum) + ") = " +
                                                   std::to_string(tb) + " (HF Trainer rule)"));
        return;
    }
    r.train.train_batch_size = to_int(*v, r.source, tb_path);
    r.record(tb_path);
}

// --- zero_optimization structure (runtime/zero/config.py).

/// The deprecated boolean "zero_optimization": true/false
/// (read_zero_config_deprecated); true if the config uses it.
bool apply_boolean_zero(Reading& r, const json& z) {
    if (!z.is_boolean()) return false;
    r.zero.stage = z.get<bool>() ? 1 : 0;
    r.record({"zero_optimization"}, r.where({"zero_optimization"}) + " (deprecated boolean form: stage " +
                                        std::to_string(r.zero.stage) + ")");
    const json* size = r.find({"allgather_size"});
    if (r.zero.stage > 0 && size && !is_auto(*size)) {
        r.zero.allgather_bucket_size = to_int(*size, r.source, {"allgather_size"});
        r.record({"allgather_size"});
        r.prov["zero_optimization.allgather_bucket_size"] = r.where({"allgather_size"});
    }
    return true;
}

/// reduce_bucket_size must stay > 0 after "auto" (DeepSpeed divides by it).
void check_reduce_bucket(const Reading& r) {
    const Path rb = {"zero_optimization", "reduce_bucket_size"};
    if (r.find(rb) && r.zero.reduce_bucket_size <= 0)
        fail(r.source, rb, "must be > 0, got " + std::to_string(r.zero.reduce_bucket_size) +
                               " (DeepSpeed divides by it: ZeroDivisionError in backward, "
                               "deepspeedai/DeepSpeed#8260)");
}

/// One legacy offload boolean (cpu_offload, cpu_offload_param(s)) onto
/// `device`, as DeepSpeed `r.ds_version` reads it. Before 0.7.0
/// (runtime/zero/config.py _initialize): the key, when present, wins and the
/// `block` (offload_optimizer / offload_param) is not read; true means the
/// default offload config, device cpu (offload_constants.py). From 0.7.0
/// (599758968, #2004): a deprecated pydantic field whose new_param_fn builds
/// the block, refused together with the block (config_utils.py
/// _process_deprecated_field "Cannot provide deprecated parameter ... and
/// replacing parameter ... together"); in 0.7.0 alone that block has device
/// none, so nothing is offloaded (fixed in 0.7.1 by 5870f36c5, #2208).
void apply_legacy_offload_key(Reading& r, const std::string& key, const std::string& block, OffloadDevice& device) {
    const Path dep = {"zero_optimization", key};
    const json* v = r.find(dep);
    if (!v) return;
    const std::string& ver = r.ds_version;
    if (r.find({"zero_optimization", block})) {
        if (r.ds_at_least("0.7.0"))
            fail(r.source, dep, "DeepSpeed " + ver + " refuses it together with " + block +
                                    " (runtime/config_utils.py _process_deprecated_field: \"Cannot provide deprecated "
                                    "parameter and replacing parameter together\"); remove one");
        fail(r.source, dep, "DeepSpeed " + ver + " reads it and does not read the " + block +
                                " block given beside it (runtime/zero/config.py _initialize); remove one");
    }
    const std::string name = block + ".device";
    if (!v->get<bool>()) {
        device = OffloadDevice::none;
        r.record(dep, r.where(dep) + " = false (legacy spelling; means no " + block + ")");
        return;
    }
    if (r.ds_at_least("0.7.0") && !r.ds_at_least("0.7.1")) {
        device = OffloadDevice::none;
        r.prov["zero_optimization." + name] =
            "none: " + r.where(dep) + " = true, but DeepSpeed " + ver + " builds the " + block +
            " config with its default device none, so nothing is offloaded (runtime/zero/config.py new_param_fn; "
            "fixed in 0.7.1 by 5870f36c5, #2208)";
        return;
    }
    device = OffloadDevice::cpu;
    r.prov["zero_optimization." + name] = "cpu: " + r.where(dep) + " = true (legacy spelling, read by DeepSpeed " +
                                          ver + " as " + block + ".device = cpu)";
}

/// Legacy offload booleans: cpu_offload (every release zeromem knows),
/// cpu_offload_params (before 0.7.0) and cpu_offload_param (from 0.7.0; the
/// other spelling is refused by version_gated_keys), and
/// cpu_offload_use_pin_memory, ignored since ZeRO-Infinity (0d4a54a04, #976,
/// v0.3.15: only a deprecation warning).
void apply_deprecated_offload(Reading& r) {
    apply_legacy_offload_key(r, "cpu_offload", "offload_optimizer", r.zero.offload_optimizer);
    apply_legacy_offload_key(r, r.ds_at_least("0.7.0") ? "cpu_offload_param" : "cpu_offload_params", "offload_param",
                             r.zero.offload_param);
    const Path pin = {"zero_optimization", "cpu_offload_use_pin_memory"};
    if (r.find(pin))
        r.record(pin, r.where(pin) + " (deprecated and ignored by DeepSpeed; use offload_*.pin_memory)");
}

/// offload_<block>.device into `device`; a block without "device" means none
/// (offload_config.py DeepSpeedZeroOffload*Config.device default).
void read_offload_device(Reading& r, const std::string& block, OffloadDevice& device) {
    if (!r.find({"zero_optimization", block})) return;
    const Path dev = {"zero_optimization", block, "device"};
    if (const json* v = r.find(dev)) {
        device = parse_offload_device(v->get<std::string>(), pointer_of(dev));
        r.record(dev);
    } else {
        device = OffloadDevice::none;
    }
}

void apply_offload(Reading& r) {
    apply_deprecated_offload(r);
    read_offload_device(r, "offload_optimizer", r.zero.offload_optimizer);
    const Path ratio = {"zero_optimization", "offload_optimizer", "ratio"};
    if (const json* v = r.find(ratio); v && r.zero.offload_optimizer_ratio < 1.0) {
        if (r.zero.stage != 3)
            fail(r.source, ratio, "is " + show(*v) + " but partial offload needs ZeRO stage 3 "
                                  "(DeepSpeed offload_ratio_check), stage is " + std::to_string(r.zero.stage));
        // stage3.py keeps the GPU sub-groups in memory and swaps the rest
        // through the NVMe swapper, whose footprint with a GPU share zeromem
        // does not model.
        if (r.zero.offload_optimizer == OffloadDevice::nvme)
            fail(r.source, ratio, "is " + show(*v) + " with offload_optimizer.device nvme: zeromem models partial "
                                  "optimizer offload (Twin-Flow) with device cpu only, which does not model this");
    }
    read_offload_device(r, "offload_param", r.zero.offload_param);
    if (r.zero.offload_param != OffloadDevice::none && r.zero.stage != 3) {
        const Path where_p = r.find({"zero_optimization", "offload_param"})
            ? Path{"zero_optimization", "offload_param", "device"}
            : Path{"zero_optimization", r.ds_at_least("0.7.0") ? "cpu_offload_param" : "cpu_offload_params"};
        fail(r.source, where_p, std::string("is ") + to_string(r.zero.offload_param) +
                                    " but DeepSpeed offloads parameters only in ZeRO stage 3 "
                                    "(stage is " + std::to_string(r.zero.stage) + "): below stage 3 it ignores the "
                                    "setting (runtime/zero/offload_config.py DeepSpeedZeroOffloadParamConfig: \"Valid "
                                    "only with stage 3\") and the parameters stay on the GPU; set stage 3 or remove "
                                    "the offload_param block");
    }
    // ZeRO-1/2 with CPU offload forces contiguous gradients
    // (runtime/zero/stage_1_and_2.py: contiguous_gradients or cpu_offload).
    if ((r.zero.stage == 1 || r.zero.stage == 2) && r.zero.offload_optimizer == OffloadDevice::cpu &&
        !r.zero.contiguous_gradients) {
        r.zero.contiguous_gradients = true;
        r.prov["zero_optimization.contiguous_gradients"] =
            "true: forced by DeepSpeed with ZeRO-1/2 CPU offload (stage_1_and_2.py), although " +
            r.where({"zero_optimization", "contiguous_gradients"}) + " says false";
    }
}

// --- Optimizer (runtime/engine.py _configure_optimizer / _configure_basic_optimizer).

/// Refuses a DeepSpeed-built optimizer that DeepSpeed has not tested under
/// ZeRO (stage >= 1) unless zero_allow_untested_optimizer is true
/// (zero_tested_optimizer_type; engine.py _do_optimizer_sanity_check).
void check_zero_tested_optimizer(Reading& r, const std::string& name) {
    if (zero_tested_optimizer_type(name) || r.zero.stage < 1 || r.zero.zero_allow_untested_optimizer) return;
    fail(r.source, {"optimizer", "type"},
         "\"" + name + "\" is not among the optimizers DeepSpeed tested with ZeRO (runtime/zero/utils.py "
         "ZERO_SUPPORTED_OPTIMIZERS); at stage " + std::to_string(r.zero.stage) +
         " DeepSpeed asserts \"zero_allow_untested_optimizer\": true (engine.py _do_optimizer_sanity_check): "
         "set it or use Adam, AdamW, Adagrad or Lion");
}

/// optimizer.type: which states the optimizer keeps
/// (optimizer_from_ds_type, optimizer_state.h).
void read_optimizer_type(Reading& r, const json& type) {
    const std::string name = type.get<std::string>();
    const std::string t = to_lower(name);
    const Path path = {"optimizer", "type"};
    const json* m = r.find({"optimizer", "params", "momentum"});
    if (m && !m->is_number())  // torch.optim.SGD compares it with 0.0: a string fails there
        fail(r.source, {"optimizer", "params", "momentum"}, "must be a number, got " + show(*m));
    const bool momentum = m && m->get<double>() != 0.0;
    std::string why;
    const std::optional<Optimizer> o = optimizer_from_ds_type(name, momentum, why);
    if (!o) fail(r.source, path, why);
    r.train.optimizer = *o;
    check_zero_tested_optimizer(r, name);
    if (t == "onebitadam" || t == "zerooneadam" || t == "onebitlamb") {
        // engine.py _configure_basic_optimizer asserts these run without ZeRO.
        if (r.zero.stage > 0)
            fail(r.source, path, "\"" + name + "\" is not compatible with ZeRO (DeepSpeed asserts it in "
                                 "engine.py _configure_basic_optimizer); stage is " + std::to_string(r.zero.stage));
        r.record(path, r.where(path) + " = \"" + name +
                           "\": counted like Adam (two fp32 states, 8 B/param); its compression error buffers "
                           "are not counted");
    } else if (*o == Optimizer::sgd_plain || *o == Optimizer::sgd) {
        r.record(path, r.where(path) + (momentum ? std::string(" (momentum: one fp32 momentum_buffer)")
                                                 : std::string(" (no momentum: torch SGD keeps no state)")));
    } else {
        r.record(path);
    }
}

/// Who builds the optimizer: the client (no "optimizer" block) or DeepSpeed
/// from the block (FusedAdam, DeepSpeedCPUAdam under offload, or torch
/// Adam(W), foreach, with optimizer.params.torch_adam).
void apply_optimizer(Reading& r) {
    const json* type = r.find({"optimizer", "type"});
    if (!type && r.find({"optimizer"}))
        fail(r.source, {"optimizer", "type"},
             "missing: DeepSpeed builds no optimizer from a block without \"type\" (runtime/config.py "
             "get_optimizer_name gives None) and the HF Trainer, seeing the block, passes none; give \"type\" "
             "or remove the block");
    if (!type) {
        r.train.optimizer_builder = OptimizerBuilder::client;
        r.prov["optimizer.builder"] =
            "client: no \"optimizer\" block in " + r.source + " (the HF Trainer passes torch AdamW)";
        return;
    }
    r.train.optimizer_builder = OptimizerBuilder::deepspeed;
    const Path torch_adam = {"optimizer", "params", "torch_adam"};
    if (const json* v = r.find(torch_adam)) {
        r.train.torch_adam = v->get<bool>();
        r.record(torch_adam);
    }
    r.train.fused_optimizer = !r.train.torch_adam;
    r.prov["optimizer.implementation"] = r.train.torch_adam
        ? "torch Adam(W), foreach (" + r.where(torch_adam) + ")"
        : "DeepSpeed's fused optimizer (" + r.where({"optimizer"}) + ")";
    read_optimizer_type(r, *type);
}

/// Reads a validated config into the settings.
void read_ds_settings(Reading& r) {
    apply_setting_table(r);
    apply_precision(r);
    apply_batch(r);
    const json* z = r.find({"zero_optimization"});
    const bool object_zero = z && !apply_boolean_zero(r, *z);
    if (object_zero && !z->is_object()) fail(r.source, {"zero_optimization"}, "must be an object, got " + show(*z));
    apply_auto_table(r);
    if (object_zero) {
        check_reduce_bucket(r);
        apply_offload(r);
    }
    apply_optimizer(r);
}


}  // namespace ds_config_detail

using namespace ds_config_detail;

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
    const auto problems = validate_ds_schema(config, Launcher::hf_trainer);
    if (!problems.empty()) throw ConfigError(source, problems.front().pointer, problems.front().message);
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
