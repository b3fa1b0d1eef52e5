// The Hugging Face TrainingArguments keys of a launch file (transformers
// training_args.py TrainingArguments; TRL's SFTConfig adds the sequence
// length), shared by the TrainingArguments JSON and LLaMA-Factory readers.
#include "launch_file_detail.h"

#include "zeromem/optimizer_state.h"
#include "zeromem/util.h"

namespace zeromem::launch {

namespace {

void read_precision(Reader& r, const Entry& e) {
    if (!r.boolean(e)) {
        r.note(e, "false");
        return;
    }
    Request& v = r.out().values;
    const std::string dtype = e.key == "bf16" ? "bf16" : "fp16";
    if (v.dtype && *v.dtype != dtype)
        r.refuse(e, "bf16 and fp16 are both true (the HF Trainer refuses it: 'At most one of fp16 and bf16 can be "
                    "True')");
    v.dtype = dtype;
    r.from("--dtype", e);
}

void read_optim(Reader& r, const Entry& e, bool ds_optimizer) {
    const std::string name = to_lower(r.scalar(e));
    if (ds_optimizer) {
        r.note(e, "not used: the DeepSpeed config's optimizer block builds the optimizer (HF Trainer "
                  "create_optimizer is skipped under DeepSpeed with an optimizer block)");
        return;
    }
    try {
        parse_optimizer(name, e.key);
    } catch (const InputError& err) {
        r.refuse(e, "'" + e.text + "' is not an optimizer zeromem counts (use " + optimizer_names_help() + ")");
    }
    Request& v = r.out().values;
    v.optimizer = name;
    r.from("--optimizer", e);
    if (name == "adamw_torch" || name == "adamw_torch_fused") {
        v.optimizer_impl = name == "adamw_torch" ? "torch" : "torch-fused";
        r.from("--optimizer-impl", e);
    }
}

void read_deepspeed(Reader& r, const Entry& e) {
    if (e.kind == Entry::Kind::map)
        r.refuse(e, "an inline DeepSpeed config: save it as a JSON file and name that file here, or pass it with "
                    "--ds-config");
    Request& v = r.out().values;
    v.ds_config = r.existing_path(e);
    r.from("--ds-config", e);
}

// Keys whose value is fine only at its default: anything else changes memory in a way zeromem does not model.
bool refused_unless_off(Reader& r, const Entry& e) {
    static const std::map<std::string, std::string> why = {
        {"torch_compile", "torch.compile fuses kernels and changes which activations are kept"},
        {"use_liger_kernel", "Liger's fused kernels (fused linear cross-entropy) keep no full logits"},
        {"use_cpu", "training on the CPU"},
        {"no_cuda", "training on the CPU"},
    };
    const auto it = why.find(e.key);
    if (it == why.end()) return false;
    if (e.kind != Entry::Kind::null && r.boolean(e))
        r.refuse(e, "true is not modelled (" + it->second + "); estimate without it");
    r.note(e, "off");
    return true;
}

}  // namespace

bool read_trainer_key(Reader& r, const Entry& e, bool ds_optimizer) {
    Request& v = r.out().values;
    const std::string& k = e.key;
    if (k == "per_device_train_batch_size") {
        v.micro_batch = r.positive_int(e);
        r.from("--micro-batch", e);
    } else if (k == "gradient_accumulation_steps") {
        v.grad_accum = r.positive_int(e);
        r.from("--grad-accum", e);
    } else if (k == "max_seq_length" || k == "max_length") {  // TRL SFTConfig (max_seq_length before TRL 0.20)
        v.seq_len = r.positive_int(e);
        r.from("--seq-len", e);
    } else if (k == "bf16" || k == "fp16") {
        read_precision(r, e);
    } else if (k == "gradient_checkpointing") {
        v.checkpointing = r.boolean(e) ? "full" : "none";
        r.from("--gradient-checkpointing", e);
    } else if (k == "deepspeed") {
        if (e.kind == Entry::Kind::null) return true;
        read_deepspeed(r, e);
    } else if (k == "optim") {
        read_optim(r, e, ds_optimizer);
    } else if (k == "fsdp") {
        if (e.kind != Entry::Kind::null && !e.text.empty() && e.text != "false")
            r.refuse(e, "FSDP is not DeepSpeed ZeRO; zeromem models DeepSpeed (its ZeRO-3 is FSDP's FULL_SHARD)");
        r.note(e, "off");
    } else if (k == "adafactor") {  // the deprecated switch for optim adafactor
        if (e.kind != Entry::Kind::null && r.boolean(e) && !ds_optimizer) {
            v.optimizer = "adafactor";
            r.from("--optimizer", e);
        }
    } else if (k == "tp_size") {
        if (e.kind != Entry::Kind::null && r.scalar(e) != "0" && r.scalar(e) != "1")
            r.refuse(e, "tensor parallelism from TrainingArguments is not read: pass --tp");
        r.note(e, "no tensor parallelism");
    } else if (k == "num_generations" || k == "use_vllm") {
        r.refuse(e, "a TRL GRPOConfig: GRPO's generation and its reference model are not modelled");
    } else if (k == "auto_find_batch_size") {
        if (r.boolean(e))
            r.warn(e, "the Trainer halves the batch after an out-of-memory error; the estimate is for the batch "
                      "given");
    } else {
        return refused_unless_off(r, e);
    }
    return true;
}

const std::set<std::string>& trainer_keys_without_memory_effect() {
    static const std::set<std::string> keys = {
        "output_dir", "overwrite_output_dir", "do_train", "do_eval", "do_predict", "learning_rate", "weight_decay",
        "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm", "num_train_epochs", "max_steps",
        "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_ratio", "warmup_steps", "logging_dir",
        "logging_strategy", "logging_first_step", "logging_steps", "logging_nan_inf_filter", "save_strategy",
        "save_steps", "save_total_limit", "save_safetensors", "save_only_model", "save_on_each_node", "seed",
        "data_seed", "report_to", "run_name", "disable_tqdm", "remove_unused_columns", "label_names",
        "load_best_model_at_end", "metric_for_best_model", "greater_is_better", "ignore_data_skip",
        "dataloader_num_workers", "dataloader_pin_memory", "dataloader_drop_last", "dataloader_prefetch_factor",
        "dataloader_persistent_workers", "ddp_timeout", "ddp_backend", "ddp_find_unused_parameters",
        "ddp_bucket_cap_mb", "push_to_hub", "hub_model_id", "hub_strategy", "hub_token", "hub_private_repo",
        "resume_from_checkpoint", "group_by_length", "length_column_name", "tf32", "local_rank", "log_level",
        "log_level_replica", "log_on_each_node", "eval_strategy", "evaluation_strategy", "eval_steps", "eval_delay",
        "prediction_loss_only", "per_device_eval_batch_size", "eval_accumulation_steps", "label_smoothing_factor",
        "include_num_input_tokens_seen", "neftune_noise_alpha", "full_determinism", "bf16_full_eval",
        "fp16_full_eval", "half_precision_backend", "fp16_opt_level", "past_index", "predict_with_generate",
        "generation_max_length", "generation_num_beams", "generation_config", "sortish_sampler", "optim_args",
        "accelerator_config", "skip_memory_metrics", "average_tokens_across_devices", "eval_on_start",
        "batch_eval_metrics", "gradient_checkpointing_kwargs", "torch_compile_backend", "torch_compile_mode",
        "torch_empty_cache_steps", "dataset_text_field", "packing", "dataset_num_proc", "completion_only_loss",
        "assistant_only_loss", "use_mps_device", "per_gpu_train_batch_size", "per_gpu_eval_batch_size",
        "restore_callback_states_from_checkpoint", "use_legacy_prediction_loop",
        "dispatch_batches", "split_batches", "include_inputs_for_metrics", "include_for_metrics", "jit_mode_eval",
        "use_ipex", "ray_scope", "debug", "mp_parameters", "tpu_num_cores", "tpu_metrics_debug", "xpu_backend",
        "fsdp_config", "fsdp_min_num_params", "fsdp_transformer_layer_cls_to_wrap", "trust_remote_code",
        "ddp_broadcast_buffers", "hub_always_push", "eval_do_concat_batches", "fp16_backend", "push_to_hub_model_id",
        "push_to_hub_organization", "push_to_hub_token", "torchdynamo", "include_tokens_per_second",
        "optim_target_modules", "eval_use_gather_object", "hub_revision", "liger_kernel_config",
    };
    return keys;
}

void apply_trainer_defaults(Reader& r, const std::vector<Entry>& entries) {
    Request& v = r.out().values;
    if (!find(entries, "per_device_train_batch_size")) {
        v.micro_batch = 8;
        r.launcher_default("--micro-batch", "per_device_train_batch_size not set: the HF Trainer's default 8");
    }
}

void read_trainer_args(Reader& r, const std::vector<Entry>& entries) {
    const bool ds_optimizer = r.deepspeed_builds_optimizer(entries);
    for (const Entry& e : entries) {
        if (read_trainer_key(r, e, ds_optimizer)) continue;
        if (trainer_keys_without_memory_effect().count(e.key)) r.note(e, "no effect on memory");
        else r.unknown(e);
    }
    // A TrainingArguments dump states both switches: both false is training without mixed precision.
    const Entry* bf16 = find(entries, "bf16");
    const Entry* fp16 = find(entries, "fp16");
    Request& v = r.out().values;
    if (!v.dtype && bf16 && fp16) {
        v.dtype = "fp32";
        r.launcher_default("--dtype", "bf16 and fp16 both false: the HF Trainer trains without mixed precision (fp32)");
    }
    apply_trainer_defaults(r, entries);
}

}  // namespace zeromem::launch
