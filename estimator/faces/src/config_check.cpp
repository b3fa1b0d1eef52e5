// `zeromem check`: schema, launcher, version and memory findings for a
// DeepSpeed config. See config_check.h.
#include "config_check_detail.h"

#include "zeromem/config_check.h"
#include "zeromem/advice.h"
#include "zeromem/zeropp.h"
#include "zeromem/optimizer_state.h"
#include "zeromem/optimizer_wrapper.h"

#include "zeromem/util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace zeromem {

using nlohmann::json;

const char* to_string(Severity s) {
    switch (s) {
        case Severity::error: return "error";
        case Severity::warning: return "warning";
        case Severity::note: return "note";
    }
    return "";
}

std::size_t count_findings(const std::vector<Finding>& findings, Severity s) {
    return static_cast<std::size_t>(
        std::count_if(findings.begin(), findings.end(), [s](const Finding& f) { return f.severity == s; }));
}

namespace check_detail {

const json* at(const json& config, const std::string& ptr) {
    try {
        const json::json_pointer p(ptr);
        return config.contains(p) ? &config.at(p) : nullptr;
    } catch (const json::exception&) {
        return nullptr;
    }
}

bool newer_or_equal(const std::string& version, const char* than) {
    return compare_versions(version, than, "--deepspeed-version") >= 0;
}

bool already_reported(const Findings& out, const std::string& pointer) {
    return std::any_of(out.begin(), out.end(), [&](const Finding& f) {
        return f.pointer == pointer && (f.severity == Severity::error || f.severity == Severity::warning);
    });
}

}  // namespace check_detail

namespace {

using namespace check_detail;

std::string gib(uint64_t bytes) { return format_gib(static_cast<double>(bytes)) + " GiB"; }

/// Schema problems: errors, except fractional integers before DeepSpeed
/// 0.15 (pydantic v1 coerced them).
void schema_findings(const json& config, const CheckOptions& o, const std::string& version, Findings& out) {
    const std::string since = ds_schema().value("int_rejects_fraction_since", std::string("0.15.0"));
    for (const auto& p : validate_ds_schema(config, o.launcher)) {
        Finding f{Severity::error, p.pointer, p.message, p.fix};
        if (p.kind == SchemaProblem::Kind::ignored_key) f.severity = Severity::warning;
        if (p.kind == SchemaProblem::Kind::fraction && !newer_or_equal(version, since.c_str())) {
            f.severity = Severity::warning;
            f.message += "; DeepSpeed " + version + " still accepts it";
        }
        out.push_back(f);
    }
}

/// Keys the target DeepSpeed version does not read under that name (schema
/// "since" / "until": version_gated_keys).
void since_findings(const json& config, const std::string& version, Findings& out) {
    for (const auto& p : version_gated_keys(config, version))
        out.push_back({Severity::error, p.pointer, p.message, p.fix});
}

void refusal_findings(const json& config, Findings& out) {
    for (const auto& p : unmodelled_ds_settings(config))
        out.push_back({Severity::warning, p.pointer, "zeromem cannot estimate memory with this setting: " + p.message,
                       p.fix});
}

void deprecation_findings(const json& config, Findings& out) {
    if (const json* z = at(config, "/zero_optimization"); z && z->is_boolean())
        out.push_back({Severity::warning, "/zero_optimization",
                       "the boolean form is deprecated (means stage " + std::to_string(z->get<bool>() ? 1 : 0) + ")",
                       "write {\"stage\": N}"});
    for (const auto& item : ds_schema().at("keys").items()) {
        if (!item.value().contains("deprecated") || !at(config, item.key())) continue;
        out.push_back({Severity::warning, item.key(), "deprecated key",
                       item.value().at("deprecated").get<std::string>()});
    }
}

/// DeepSpeed's batch rules (runtime/config.py _batch_assertion and
/// _set_batch_related_parameters).
void batch_findings(const json& config, const CheckOptions& o, Findings& out) {
    const json* tb = at(config, "/train_batch_size");
    const json* mb = at(config, "/train_micro_batch_size_per_gpu");
    const json* ga = at(config, "/gradient_accumulation_steps");
    if (o.launcher == Launcher::deepspeed && (!tb || tb->is_null()) && (!mb || mb->is_null()))
        out.push_back({Severity::error, "/train_batch_size",
                       "train_batch_size and train_micro_batch_size_per_gpu are both missing; DeepSpeed asserts "
                       "one is given (runtime/config.py _set_batch_related_parameters)",
                       "set train_micro_batch_size_per_gpu"});
    auto whole = [](const json* v) { return v && v->is_number_integer() && v->get<int64_t>() > 0; };
    if (!o.gpus_known || !whole(tb) || !whole(mb)) return;
    const int64_t accum = whole(ga) ? ga->get<int64_t>() : 1;
    if (!whole(ga) && ga) return;
    TrainingSettings t;
    t.train_batch_size = tb->get<int64_t>();
    t.micro_batch = mb->get<int64_t>();
    t.grad_accum = accum;
    try {
        check_batch_arithmetic(t, o.autos.world_size);
    } catch (const InputError& e) {
        out.push_back({Severity::error, "/train_batch_size", e.what(),
                       "set train_batch_size to micro batch x accumulation x GPUs"});
    }
}

bool offloads(const json& config, const std::string& which) {
    const json* d = at(config, "/zero_optimization/" + which + "/device");
    if (d && d->is_string()) return d->get<std::string>() == "cpu" || d->get<std::string>() == "nvme";
    const json* dep = at(config, which == "offload_param" ? "/zero_optimization/cpu_offload_param"
                                                          : "/zero_optimization/cpu_offload");
    return dep && dep->is_boolean() && dep->get<bool>();
}

/// The default of a schema key in DeepSpeed `version`, and the version that
/// changed it ("" when it never changed).
std::pair<json, std::string> default_in(const json& entry, const std::string& version) {
    json value = entry.value("default", json());
    std::string changed;
    if (const auto it = entry.find("version_defaults"); it != entry.end())
        for (const auto& vd : *it) {
            changed = vd.at("before").get<std::string>();
            if (!newer_or_equal(version, changed.c_str())) value = vd.at("default");
        }
    return {value, changed};
}

void pin_memory_findings(const json& config, const std::string& version, Findings& out) {
    for (const std::string which : {"offload_optimizer", "offload_param"}) {
        if (!offloads(config, which)) continue;
        if (which == "offload_param" && ds_config_stage(config) < 3) continue;  // ignored there (reader_findings)
        const std::string ptr = "/zero_optimization/" + which + "/pin_memory";
        const json* v = at(config, ptr);
        if (v && v->is_boolean() && !v->get<bool>()) {
            out.push_back({Severity::warning, ptr,
                           "offload without pin_memory: host<->GPU copies go through pageable memory (slower)",
                           "set pin_memory: true if host RAM allows the page-locked buffers"});
        } else if (!v) {
            const auto [value, changed] = default_in(*ds_schema_entry(ptr), version);
            const bool pinned = value.is_boolean() && value.get<bool>();
            out.push_back({pinned ? Severity::note : Severity::warning, ptr,
                           std::string("not set: DeepSpeed ") + version + " defaults to " +
                               (pinned ? "true" : "false (offload without pin_memory: slower copies)") +
                               "; the default changed in " + changed + " (DeepSpeed PR #8207)",
                           "set pin_memory explicitly"});
        }
    }
}

/// Defaults that depend on the version or the stage and change memory or
/// speed (runtime/zero/config.py, precision_config.py, engine.py).
void version_findings(const json& config, const std::string& version, Findings& out) {
    const int stage = ds_config_stage(config);
    if (!at(config, "/zero_optimization/overlap_comm"))
        out.push_back({Severity::note, "/zero_optimization/overlap_comm",
                       std::string("not set: defaults to ") + (stage == 3 ? "true" : "false") + " for stage " +
                           std::to_string(stage) +
                           " (true only for stage 3, runtime/zero/config.py overlap_comm_valid; the docs say false)" +
                           (stage == 1 || stage == 2 ? "; true doubles the reduce bucket" : ""),
                       ""});
    pin_memory_findings(config, version, out);
    if (!at(config, "/gradient_clipping")) {
        const auto [value, changed] = default_in(*ds_schema_entry("/gradient_clipping"), version);
        out.push_back({Severity::note, "/gradient_clipping",
                       "not set: DeepSpeed " + version + " defaults to " + value.dump() + " (" +
                           "0.0, off, before " + changed + "; 1.0 since)",
                       ""});
    }
    const json* bf = at(config, "/bf16/enabled");
    if (bf && bf->is_boolean() && bf->get<bool>()) {
        if (!at(config, "/bf16/check_grad_overflow"))
            out.push_back({Severity::note, "/bf16/check_grad_overflow",
                           std::string("not set: ") + (newer_or_equal(version, "0.19.3") ? "on" : "off") +
                               " in DeepSpeed " + version + " (on since 0.19.3, PR #8035)",
                           ""});
        if (stage == 0 && !at(config, "/data_types/grad_accum_dtype"))
            out.push_back({Severity::note, "/data_types/grad_accum_dtype",
                           std::string("not set: bf16 without ZeRO accumulates gradients in ") +
                               (newer_or_equal(version, "0.17.6") ? "bf16 (2 B/param)" : "fp32 (4 B/param)") +
                               " in DeepSpeed " + version + " (fp32 before 0.17.6, PR #7515)",
                           "set grad_accum_dtype explicitly"});
    }
    if (stage == 2) {
        const std::string change = ds_schema().value("zero2_estimator_formula_change", std::string("0.14.3"));
        const bool legacy = !newer_or_equal(version, change.c_str());
        out.push_back({Severity::note, "/zero_optimization/stage",
                       std::string("DeepSpeed ") + version + "'s estimate_zero2_model_states_mem_needs gives " +
                           (legacy ? "4Ψ + 16Ψ/N" : "2Ψ + 18Ψ/N") + " per GPU without offload (" +
                           (legacy ? "2Ψ + 18Ψ/N from " : "4Ψ + 16Ψ/N before ") + change + ")",
                       std::string("compare with zeromem estimate --convention deepspeed") +
                           (legacy ? " --legacy-zero2" : "")});
    }
}

EstimateInput with_stage(EstimateInput in, int stage) {
    in.zero.stage = stage;
    if (stage < 3) {
        in.zero.offload_param = OffloadDevice::none;
        // DeepSpeed offloads the optimizer to NVMe only in stage 3, to the CPU
        // only in stages 1-3 (estimate() refuses the rest).
        if (in.zero.offload_optimizer == OffloadDevice::nvme || stage == 0)
            in.zero.offload_optimizer = OffloadDevice::none;
    }
    return in;
}

std::string offload_pointer(const EstimateInput& in, const std::string& leaf) {
    const bool opt = in.zero.offload_optimizer != OffloadDevice::none;
    return std::string("/zero_optimization/") + (opt ? "offload_optimizer" : "offload_param") + "/" + leaf;
}

/// Findings from the estimate of the config on the given model and cluster.
// Without an "optimizer" block the launcher's client optimizer meets ZeRO
// optimizer offload. DeepSpeed raises ZeRORuntimeException for a client
// optimizer other than DeepSpeedCPUAdam there while
// zero_force_ds_cpu_optimizer is true (engine.py _configure_optimizer; public
// reports deepspeedai/DeepSpeed#7524, OpenMOSS/MOSS#272). The HF Trainer and
// accelerate replace it with DeepSpeedCPUAdam first (accelerator.py
// _prepare_deepspeed): a note there, a warning for a plain deepspeed script.
void client_optimizer_findings(const json& config, const CheckOptions& o, Findings& out) {
    if (config.contains("optimizer")) return;
    const json* zero = config.contains("zero_optimization") && config["zero_optimization"].is_object()
                           ? &config["zero_optimization"] : nullptr;
    if (zero == nullptr) return;
    bool offload = zero->value("cpu_offload", false) == true;
    if (zero->contains("offload_optimizer") && (*zero)["offload_optimizer"].is_object()) {
        const json& dev = (*zero)["offload_optimizer"].value("device", json("none"));
        offload = offload || (dev.is_string() && (dev == "cpu" || dev == "nvme"));
    }
    const json force = config.value("zero_force_ds_cpu_optimizer", json(true));
    if (!offload || force == false) return;
    if (o.launcher == Launcher::deepspeed)
        out.push_back({Severity::warning, "/zero_optimization/offload_optimizer",
                       "no \"optimizer\" block: the script must pass DeepSpeedCPUAdam to deepspeed.initialize; a torch "
                       "optimizer under ZeRO-Offload raises ZeRORuntimeException (engine.py _configure_optimizer)",
                       "add an \"optimizer\" block so DeepSpeed builds DeepSpeedCPUAdam"});
    else
        out.push_back({Severity::note, "/zero_optimization/offload_optimizer",
                       "no \"optimizer\" block: accelerate (used by the HF Trainer) replaces the client optimizer with "
                       "DeepSpeedCPUAdam under ZeRO-Offload (accelerator.py _prepare_deepspeed)",
                       ""});
}

/// The JSON pointer a library message names ("zero_optimization.mics_shard_size: ..."
/// -> "/zero_optimization/mics_shard_size", "data_types.grad_accum_dtype: ..."
/// -> "/data_types/grad_accum_dtype"), or "" when it names none.
std::string pointer_named(const std::string& message) {
    for (const std::string prefix : {"zero_optimization.", "data_types."}) {
        if (message.rfind(prefix, 0) != 0) continue;
        const auto colon = message.find(':');
        if (colon == std::string::npos) return "";
        std::string ptr = "/" + message.substr(0, colon);
        std::replace(ptr.begin(), ptr.end(), '.', '/');
        return ptr;
    }
    return "";
}

/// `message` without the dotted key it starts with when pointer_named finds
/// one (the finding shows the pointer already).
std::string without_named_key(const std::string& message) {
    if (pointer_named(message).empty()) return message;
    const auto colon = message.find(": ");
    return colon == std::string::npos ? message : message.substr(colon + 2);
}

/// ZeRO++ / MiCS values DeepSpeed refuses for the GPU count (zeromem/zeropp.h
/// validate_zeropp), when the GPUs are known. Nodes are not, so the
/// hierarchical-gather rule is left to the memory findings.
void zeropp_findings(const json& config, const CheckOptions& o, Findings& out) {
    const json* z = at(config, "/zero_optimization");
    if (!o.gpus_known || !z || !z->is_object()) return;
    EstimateInput in;
    in.cluster.gpus = std::max<int64_t>(1, o.autos.world_size);
    auto num = [&](const char* k, int64_t d) { return z->contains(k) && z->at(k).is_number_integer() ? z->at(k).get<int64_t>() : d; };
    auto flag = [&](const char* k, bool d) { return z->contains(k) && z->at(k).is_boolean() ? z->at(k).get<bool>() : d; };
    in.zero.stage = static_cast<int>(num("stage", 0));
    in.zero.zero_hpz_partition_size = num("zero_hpz_partition_size", 1);
    in.zero.mics_shard_size = num("mics_shard_size", -1);
    in.zero.zero_quantized_gradients = flag("zero_quantized_gradients", false);
    in.zero.reduce_scatter = flag("reduce_scatter", true);
    try {
        validate_zeropp(in);
    } catch (const InputError& e) {
        out.push_back({Severity::error, pointer_named(e.what()), without_named_key(e.what()), "change the value named"});
    }
}

/// The dtype mix DeepSpeed refuses without ZeRO (zeromem/optimizer_wrapper.h),
/// from the config alone: stage 0 with a data_types.grad_accum_dtype other
/// than the model dtype. The model dtype is fp16/bf16 "enabled" (an "auto"
/// counts as off, as without the HF Trainer's flags).
void dtype_findings(const json& config, const std::string& version, Findings& out) {
    const json* acc = at(config, "/data_types/grad_accum_dtype");
    if (ds_config_stage(config) != 0 || !acc || !acc->is_string()) return;
    auto enabled = [&](const char* ptr) {
        const json* e = at(config, ptr);
        return e && e->is_boolean() && e->get<bool>();
    };
    EstimateInput in;
    in.stack.deepspeed = version;
    in.train.dtype = enabled("/bf16/enabled") || enabled("/bfloat16/enabled") ? Dtype::bf16
                     : enabled("/fp16/enabled")                                ? Dtype::fp16
                                                                               : Dtype::fp32;
    try {
        in.train.grad_accum_dtype = parse_dtype(acc->get<std::string>(), "data_types.grad_accum_dtype");
    } catch (const InputError&) {
        return;  // the schema findings name a value DeepSpeed does not know
    }
    if (in.train.grad_accum_dtype == in.train.dtype) return;
    if (const auto why = optimizer_wrapper_refusal(in))
        out.push_back({Severity::error, "/data_types/grad_accum_dtype", without_named_key(why->reason), why->fix});
}

// "optimizer.type" names a class whose state zeromem counts
// (optimizer_from_ds_type); 1-bit optimizers run only without ZeRO
// (engine.py _configure_basic_optimizer asserts it).
void optimizer_type_findings(const json& config, Findings& out) {
    const json* type = at(config, "/optimizer/type");
    const json* block = at(config, "/optimizer");
    if (type == nullptr && block && block->is_object())
        out.push_back({Severity::error, "/optimizer/type",
                       "missing: DeepSpeed builds no optimizer from a block without \"type\" (runtime/config.py "
                       "get_optimizer_name gives None)",
                       "give \"type\" or remove the \"optimizer\" block"});
    if (type == nullptr || !type->is_string()) return;
    const json* m = at(config, "/optimizer/params/momentum");
    const bool momentum = m && m->is_number() && m->get<double>() != 0.0;
    std::string why;
    const std::string name = type->get<std::string>();
    if (!optimizer_from_ds_type(name, momentum, why)) {
        out.push_back({Severity::error, "/optimizer/type", why,
                       "use a type DeepSpeed builds (Adam, AdamW, Lamb, Lion, Adagrad, ...) or a torch.optim class "
                       "name spelled as torch does"});
        return;
    }
    const std::string t = to_lower(name);
    const json* stage = at(config, "/zero_optimization/stage");
    const json* allow = at(config, "/zero_allow_untested_optimizer");
    if (!zero_tested_optimizer_type(name) && stage && stage->is_number_integer() && stage->get<int64_t>() > 0 &&
        !(allow && allow->is_boolean() && allow->get<bool>()))
        out.push_back({Severity::error, "/optimizer/type",
                       "\"" + name + "\" is not among the optimizers DeepSpeed tested with ZeRO (runtime/zero/utils.py "
                       "ZERO_SUPPORTED_OPTIMIZERS); DeepSpeed asserts \"zero_allow_untested_optimizer\": true "
                       "(engine.py _do_optimizer_sanity_check)",
                       "set \"zero_allow_untested_optimizer\": true or use Adam, AdamW, Adagrad or Lion"});
    if ((t == "onebitadam" || t == "zerooneadam" || t == "onebitlamb") && stage && stage->is_number_integer() &&
        stage->get<int64_t>() > 0)
        out.push_back({Severity::error, "/optimizer/type",
                       "\"" + name + "\" is not compatible with ZeRO (engine.py _configure_basic_optimizer asserts it)",
                       "set zero_optimization.stage to 0 or use Adam"});
}

// The fix of a GPU that does not fit: the ZeRO tuning recipe's cheapest combination that fits (advice.h
// advise, the same search as estimate's "To fit"), in the config's and the HF Trainer's terms.
std::string gpu_fix(const CheckOptions& o, const Estimate& e) {
    const EstimateInput& in = *o.memory;
    std::optional<SpeedHardware> hw;  // ranked by speed where the GPU preset and one node give the hardware
    if (o.gpu && in.cluster.nodes == 1) {
        try {
            hw = speed_hardware(*o.gpu, in.train.dtype, "", "", data_dir());
        } catch (const InputError&) {
            hw.reset();
        }
    }
    for (const Advice& a : advise(in, e, hw ? &*hw : nullptr)) {
        if (a.resource != "gpu") continue;
        if (!a.found) return "no combination of the ZeRO tuning recipe's steps fits on this GPU: more GPUs (zeromem fit)";
        std::string set;
        for (const SettingChange& c : a.changes) set += (set.empty() ? "" : ", ") + c.path + " " + c.value;
        return "set " + set + " (" + a.why + "; needs " + gib(a.need_after) + (a.tight ? ", tight" : "") +
               "); zeromem plan tunes the rest";
    }
    return "use a higher stage, offload, a smaller micro batch or more GPUs (zeromem plan)";
}

void memory_findings(const CheckOptions& o, Findings& out) {
    const EstimateInput& in = *o.memory;
    const Estimate e = estimate(in);
    const uint64_t need = e.per_gpu.total;
    if (in.cluster.gpu_memory) {
        const uint64_t cap = *in.cluster.gpu_memory;
        EstimateInput small = in;  // the same run with 1-element buckets
        small.zero.reduce_bucket_size = 1;
        small.zero.stage3_prefetch_bucket_size = 1;
        const uint64_t without = estimate(small).per_gpu.total;
        const uint64_t buckets = need > without ? need - without : 0;
        const std::string ptr = in.zero.stage == 3 ? "/zero_optimization/stage3_prefetch_bucket_size"
                                                   : "/zero_optimization/reduce_bucket_size";
        if (need > cap && without <= cap)
            out.push_back({Severity::error, ptr,
                           "the buckets do not fit beside the model: " + gib(need) + " per GPU with them, " +
                               gib(without) + " without, GPU has " + gib(cap),
                           "lower reduce_bucket_size" +
                               std::string(in.zero.stage == 3 ? " and stage3_prefetch_bucket_size" : "") +
                               " (e.g. hidden_size^2)"});
        else if (need > cap)
            out.push_back({Severity::error, "/zero_optimization/stage",
                           "needs " + gib(need) + " per GPU (peak in " + e.peak_phase + "), GPU has " + gib(cap),
                           gpu_fix(o, e)});
        else if (buckets * 5 > cap)
            out.push_back({Severity::warning, ptr,
                           "the buckets take " + gib(buckets) + " of the " + gib(cap) + " GPU", "lower them"});
    }
    if (in.cluster.host_memory) {
        const uint64_t cap = *in.cluster.host_memory;
        if (e.per_node.host_pinned > cap)
            out.push_back({Severity::error, offload_pointer(in, "pin_memory"),
                           "pinned host pools need " + gib(e.per_node.host_pinned) + " per node, beyond its " +
                               gib(cap) + " of RAM",
                           "set pin_memory false, lower buffer_count/max_in_cpu, or add RAM"});
        else if (e.per_node.host_memory > cap)
            out.push_back({Severity::error, offload_pointer(in, "device"),
                           "host RAM needed " + gib(e.per_node.host_memory) + " per node (peak in " +
                               e.host_peak_phase + "), node has " + gib(cap),
                           "offload less, or use NVMe offload"});
    }
    for (int s = 0; s < in.zero.stage; ++s) {
        if (optimizer_wrapper_refusal(with_stage(in, s))) continue;  // DeepSpeed refuses the dtypes there
        const uint64_t lower = estimate(with_stage(in, s)).per_gpu.total;
        if (lower < need) {
            out.push_back({Severity::warning, "/zero_optimization/stage",
                           "stage " + std::to_string(in.zero.stage) + " needs " + gib(need) +
                               " per GPU for this model, more than stage " + std::to_string(s) + " (" + gib(lower) +
                               ")",
                           "use stage " + std::to_string(s) + " unless the higher stage is needed for speed"});
            break;
        }
    }
    if (o.nvme_capacity && e.per_node.nvme > *o.nvme_capacity)
        out.push_back({Severity::error, offload_pointer(in, "nvme_path"),
                       "NVMe pools need " + gib(e.per_node.nvme) + " per node, the drive has " +
                           gib(*o.nvme_capacity),
                       "use a larger drive, offload less to NVMe, or more nodes"});
}

}  // namespace

std::vector<Finding> check_ds_config(const json& config, const CheckOptions& o) {
    const std::string newest = ds_schema().value("newest_version", std::string("0.19.6"));
    const std::string version = o.deepspeed_version.empty() ? newest : o.deepspeed_version;
    const std::string oldest = ds_schema().value("oldest_version", std::string("0.4.2"));
    if (compare_versions(version, oldest, "--deepspeed-version") < 0 ||
        compare_versions(version, newest, "--deepspeed-version") > 0)
        throw InputError("--deepspeed-version: " + version + " is outside the versions zeromem knows (" + oldest +
                         " to " + newest + ")");
    Findings out;
    schema_findings(config, o, version, out);
    since_findings(config, version, out);
    const bool schema_ok = count_findings(out, Severity::error) == 0;
    if (schema_ok) auto_findings(config, o, version, out);
    refusal_findings(config, out);
    deprecation_findings(config, out);
    stage3_only_findings(config, out);
    batch_findings(config, o, out);
    if (schema_ok) zeropp_findings(config, o, out);
    if (schema_ok) version_findings(config, version, out);
    if (schema_ok) client_optimizer_findings(config, o, out);
    optimizer_type_findings(config, out);
    if (schema_ok) dtype_findings(config, version, out);
    if (schema_ok) reader_findings(config, o, version, out);
    if (o.memory_refusal && count_findings(out, Severity::error) == 0 && !already_reported(out, o.memory_refusal->pointer))
        out.push_back(*o.memory_refusal);
    if (schema_ok && o.memory && count_findings(out, Severity::error) == 0) {
        try {
            memory_findings(o, out);
        } catch (const InputError& e) {  // what DeepSpeed itself refuses, as a finding
            out.push_back({Severity::error, pointer_named(e.what()), without_named_key(e.what()), ""});
        }
    }
    return out;
}

}  // namespace zeromem
