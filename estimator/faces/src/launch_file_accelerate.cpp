// An accelerate config YAML (`accelerate config` writes it; accelerate
// commands/config/config_args.py ClusterConfig): the process count, the
// precision and the deepspeed_config block, which accelerate turns into a
// DeepSpeed config (utils/dataclasses.py DeepSpeedPlugin) unless it names
// a deepspeed_config_file.
#include "launch_file_detail.h"

#include "zeromem/util.h"

namespace zeromem::launch {

namespace {

// DeepSpeedPlugin._deepspeed_config_checks: beside deepspeed_config_file these raise ValueError.
const char* const kIgnoredBesideFile[] = {"gradient_accumulation_steps", "gradient_clipping", "zero_stage",
                                          "offload_optimizer_device", "offload_param_device",
                                          "zero3_save_16bit_model"};

void read_offload(Reader& r, const Entry& e, const char* flag, std::optional<std::string>& field) {
    const std::string d = to_lower(r.scalar(e));
    if (d != "none" && d != "cpu" && d != "nvme") r.refuse(e, "'" + e.text + "' is not none, cpu or nvme");
    field = d;
    r.from(flag, e);
}

void read_deepspeed_block(Reader& r, const Entry& block, bool mixed_precision_given) {
    Request& v = r.out().values;
    const Entry* file = find(block.children, "deepspeed_config_file");
    if (file && file->kind != Entry::Kind::null) {
        for (const char* k : kIgnoredBesideFile)
            if (const Entry* e = find(block.children, k))
                r.refuse(*e, "beside deepspeed_config_file accelerate refuses it (DeepSpeedPlugin: 'When using "
                             "`deepspeed_config_file`, the following accelerate config variables will be ignored'); "
                             "set it in the DeepSpeed config");
        if (mixed_precision_given)
            r.refuse(*file, "mixed_precision beside deepspeed_config_file: accelerate refuses it (DeepSpeedPlugin); "
                            "set fp16/bf16 in the DeepSpeed config");
        v.ds_config = r.existing_path(*file);
        r.from("--ds-config", *file);
    }
    for (const Entry& e : block.children) {
        const std::string& k = e.key;
        if (k == "deepspeed_config_file") continue;
        if (k == "zero_stage") {
            const std::string t = r.scalar(e);
            if (t != "0" && t != "1" && t != "2" && t != "3") r.refuse(e, "must be 0, 1, 2 or 3, got '" + t + "'");
            v.stage = t[0] - '0';
            r.from("--stage", e);
        } else if (k == "offload_optimizer_device") {
            read_offload(r, e, "--offload-optimizer", v.offload_optimizer);
        } else if (k == "offload_param_device") {
            read_offload(r, e, "--offload-param", v.offload_param);
        } else if (k == "gradient_accumulation_steps") {
            v.grad_accum = r.positive_int(e);
            r.from("--grad-accum", e);
        } else if (k == "zero3_init_flag") {
            v.zero_init = r.boolean(e);
            r.from("--zero-init", e);
        } else if (k == "zero3_save_16bit_model") {
            v.gather_on_save = r.boolean(e);
            r.from("--gather-on-save", e);
        } else if (k == "gradient_clipping" || k == "deepspeed_hostfile" || k == "deepspeed_multinode_launcher" ||
                   k == "offload_optimizer_nvme_path" || k == "offload_param_nvme_path" ||
                   k == "deepspeed_moe_layer_cls_names") {
            r.note(e, "no effect on memory");
        } else {
            r.unknown(e);
        }
    }
}

void read_distributed_type(Reader& r, const Entry& e) {
    const std::string t = r.scalar(e);
    if (t == "DEEPSPEED") return r.note(e, "DeepSpeed, as the deepspeed_config block says");
    if (t == "MULTI_GPU" || t == "NO") {
        r.out().values.stage = 0;
        r.from("--stage", e);
        return r.note(e, t == "NO" ? "one process: no ZeRO (stage 0)" : "DDP: every GPU holds every model state (stage 0)");
    }
    r.refuse(e, "'" + t + "' is not modelled (DEEPSPEED, MULTI_GPU and NO are): zeromem models DeepSpeed ZeRO");
}

void read_mixed_precision(Reader& r, const Entry& e) {
    const std::string p = to_lower(r.scalar(e));
    Request& v = r.out().values;
    if (p == "bf16" || p == "fp16") v.dtype = p;
    else if (p == "no") v.dtype = "fp32";
    else r.refuse(e, "'" + e.text + "' is not modelled (no, fp16 and bf16 are)");
    r.from("--dtype", e);
}

}  // namespace

void read_accelerate(Reader& r, const std::vector<Entry>& entries) {
    Request& v = r.out().values;
    const Entry* ds = find(entries, "deepspeed_config");
    const Entry* mp = find(entries, "mixed_precision");
    const Entry* type = find(entries, "distributed_type");
    const Entry* file = ds && ds->kind == Entry::Kind::map ? find(ds->children, "deepspeed_config_file") : nullptr;
    const bool ds_file = file && file->kind != Entry::Kind::null;
    // accelerate reads deepspeed_config only under distributed_type DEEPSPEED, whatever the key order.
    const bool deepspeed = !type || (type->kind == Entry::Kind::scalar && type->text == "DEEPSPEED");
    if (type) read_distributed_type(r, *type);
    for (const Entry& e : entries) {
        const std::string& k = e.key;
        if (k == "distributed_type") {
            continue;
        } else if (k == "deepspeed_config") {
            if (!deepspeed) r.note(e, "unused: distributed_type is not DEEPSPEED");
            else if (e.kind == Entry::Kind::map) read_deepspeed_block(r, e, mp && ds_file);
            else if (e.kind != Entry::Kind::null) r.refuse(e, "must be a mapping of DeepSpeed settings");
        } else if (k == "num_processes") {
            if (to_lower(r.scalar(e)) == "auto") {
                r.warn(e, "auto: every GPU visible at launch, which the file does not say; pass --gpus (else 1)");
                continue;
            }
            v.gpus = r.positive_int(e);
            r.from("--gpus", e);
        } else if (k == "num_machines") {
            v.nodes = r.positive_int(e);
            r.from("--nodes", e);
        } else if (k == "mixed_precision") {
            if (!ds_file) read_mixed_precision(r, e);
        } else if (k == "fsdp_config" || k == "megatron_lm_config") {
            if (e.kind == Entry::Kind::map && !e.children.empty() && find(entries, "distributed_type") &&
                r.scalar(*find(entries, "distributed_type")) != "DEEPSPEED")
                r.refuse(e, "not modelled: zeromem models DeepSpeed ZeRO");
            r.note(e, "unused: distributed_type is not FSDP or MEGATRON_LM");
        } else if (k == "use_cpu") {
            if (r.boolean(e)) r.refuse(e, "true: training on the CPU is not modelled");
        } else if (k == "compute_environment" || k == "machine_rank" || k == "main_process_ip" ||
                   k == "main_process_port" || k == "rdzv_backend" || k == "same_network" ||
                   k == "main_training_function" || k == "enable_cpu_affinity" || k == "downcast_bf16" ||
                   k == "debug" || k == "gpu_ids" || k == "dynamo_config" || k.rfind("tpu_", 0) == 0 ||
                   k == "ipex_config" || k == "mpirun_config") {
            r.note(e, "no effect on memory");
        } else {
            r.unknown(e);
        }
    }
    // DeepSpeedPlugin: zero_stage = int(os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", 2)) when no config file says it.
    if (deepspeed && type && !ds_file && !v.stage) {
        v.stage = 2;
        r.launcher_default("--stage", "deepspeed_config.zero_stage not set: accelerate's DeepSpeedPlugin default 2");
    }
}

}  // namespace zeromem::launch
