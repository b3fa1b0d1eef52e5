// The structure of a DeepSpeed config that the setting table does not cover:
// fp16/bf16 selection, batch sizes, the deprecated boolean zero_optimization
// and cpu_offload* keys, offload devices and the optimizer builder decision;
// read_ds_settings runs the whole reading in order. Shared reader pieces are
// in ds_config_detail.h.
#include "ds_config_detail.h"
#include "zeromem/optimizer_state.h"

#include "zeromem/util.h"

#include <cstdint>
#include <optional>
#include <string>

namespace zeromem::ds_config_detail {

namespace {

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

}  // namespace

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

}  // namespace zeromem::ds_config_detail
