// A LLaMA-Factory training YAML (or JSON): its model, method, dataset and
// quantization keys (src/llamafactory/hparams: model_args.py, data_args.py,
// finetuning_args.py), then the TrainingArguments keys it passes on to the
// HF Trainer. LLaMA-Factory's own defaults apply to what the file leaves out:
// finetuning_type lora (lora_rank 8, lora_target all), cutoff_len 2048, and
// gradient checkpointing on unless disable_gradient_checkpointing.
#include "launch_file_detail.h"

#include "zeromem/util.h"

#include <map>

namespace zeromem::launch {

namespace {

// lora_target as LLaMA-Factory takes it ("all", or module names) in zeromem's projections.
std::string lora_targets(Reader& r, const Entry& e) {
    const std::string given = e.kind == Entry::Kind::sequence ? e.text : r.scalar(e);
    if (to_lower(given) == "all") return "q,k,v,o,gate,up,down";
    static const std::map<std::string, std::string> names = {
        {"q_proj", "q"}, {"k_proj", "k"}, {"v_proj", "v"}, {"o_proj", "o"},
        {"gate_proj", "gate"}, {"up_proj", "up"}, {"down_proj", "down"},
    };
    std::string out;
    std::size_t pos = 0;
    while (pos <= given.size()) {
        const std::size_t comma = given.find(',', pos);
        std::string name = given.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        name.erase(0, name.find_first_not_of(' '));
        name.erase(name.find_last_not_of(' ') + 1);
        const auto it = names.find(name);
        if (it == names.end())
            r.refuse(e, "'" + name + "' is not a projection zeromem counts adapters for (all, q_proj, k_proj, "
                        "v_proj, o_proj, gate_proj, up_proj, down_proj)");
        out += (out.empty() ? "" : ",") + it->second;
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}

void read_stage(Reader& r, const Entry& e) {
    const std::string s = r.scalar(e);
    if (s == "sft" || s == "pt") return r.note(e, s + ": one trained model (zeromem's sft workload)");
    if (s == "dpo") {
        r.out().values.workload = "dpo";
        return r.from("--workload", e);
    }
    r.refuse(e, "'" + s + "' is not read from a file (pt, sft and dpo are); for PPO pass --workload ppo with its "
                "models as flags");
}

void read_finetuning_type(Reader& r, const std::vector<Entry>& entries) {
    const Entry* t = find(entries, "finetuning_type");
    const std::string type = t ? r.scalar(*t) : "lora";
    if (type == "full") {
        for (const char* unused : {"lora_rank", "lora_target"})
            if (const Entry* u = find(entries, unused)) r.note(*u, "unused under finetuning_type full");
        return r.note(*t, "full: every parameter trains");
    }
    if (type != "lora" && type != "freeze" && type != "oft")
        r.refuse(*t, "'" + type + "' is not a finetuning_type (LLaMA-Factory takes lora, oft, freeze or full)");
    if (type != "lora")
        r.refuse(*t, "'" + type + "' is not modelled (full and lora are): its trainable parameters depend on "
                     "freeze_trainable_layers / the OFT blocks; pass --trainable-params instead");
    Request& v = r.out().values;
    const Entry* rank = find(entries, "lora_rank");
    const Entry* target = find(entries, "lora_target");
    v.lora_rank = rank ? r.positive_int(*rank) : 8;
    v.lora_targets = target ? lora_targets(r, *target) : "q,k,v,o,gate,up,down";
    if (rank) r.from("--lora-rank", *rank);
    else r.launcher_default("--lora-rank", "lora_rank not set: LLaMA-Factory's default 8");
    if (target) r.from("--lora-target", *target);
    else r.launcher_default("--lora-target", "lora_target not set: LLaMA-Factory's default all (every linear projection)");
    if (!t) r.launcher_default("--lora-rank", "finetuning_type not set: LLaMA-Factory's default lora (rank " +
                                                  std::to_string(*v.lora_rank) + ")");
}

void read_quantization(Reader& r, const Entry& e, const std::vector<Entry>& entries) {
    if (e.kind == Entry::Kind::null) return;
    const int64_t bits = r.positive_int(e);
    if (const Entry* m = find(entries, "quantization_method")) {
        const std::string method = to_lower(r.scalar(*m));
        if (method != "bitsandbytes" && method != "bnb")
            r.refuse(*m, "'" + m->text + "' is not modelled (bitsandbytes is: --load-in 4bit|8bit)");
    }
    if (bits != 4 && bits != 8) r.refuse(e, "bitsandbytes quantizes to 4 or 8 bits, got " + e.text);
    r.out().values.load_in = std::to_string(bits) + "bit";
    r.from("--load-in", e);
}

void read_flash_attn(Reader& r, const Entry& e) {
    const std::string a = to_lower(r.scalar(e));
    Request& v = r.out().values;
    if (a == "auto") v.attention = "auto";
    else if (a == "fa2" || a == "fa3" || a == "fa4" || a == "sdpa") v.attention = "flash";
    else if (a == "disabled" || a == "eager") v.attention = "eager";
    else r.refuse(e, "'" + e.text + "' is not auto, disabled, sdpa, fa2, fa3 or fa4");
    r.from("--attention", e);
}

// LLaMA-Factory keys that change memory in ways zeromem does not model: refused unless off.
const std::map<std::string, std::string>& unmodelled() {
    static const std::map<std::string, std::string> keys = {
        {"use_unsloth", "Unsloth's kernels and its offloaded checkpointing"},
        {"use_unsloth_gc", "Unsloth's checkpointing offloads activations to the host"},
        {"enable_liger_kernel", "Liger's fused kernels keep no full logits"},
        {"use_galore", "GaLore's low-rank optimizer states"},
        {"use_apollo", "APOLLO's low-rank optimizer states"},
        {"use_badam", "BAdam trains one block at a time"},
        {"use_llama_pro", "LLaMA Pro's added blocks"},
        {"use_dora", "DoRA's magnitude vectors and its extra activations"},
        {"pure_bf16", "bf16 parameters without fp32 master weights outside DeepSpeed"},
        {"upcast_lmhead_output", "fp32 logits kept from the LM head"},
        {"shift_attn", "LongLoRA's shifted sparse attention"},
        {"use_mca", "Megatron-Core training"},
    };
    return keys;
}

const std::set<std::string>& without_memory_effect() {
    static const std::set<std::string> keys = {
        "trust_remote_code", "do_train", "dataset", "eval_dataset", "dataset_dir", "template", "max_samples",
        "overwrite_cache", "preprocessing_num_workers", "preprocessing_batch_size", "val_size", "plot_loss",
        "lora_alpha", "lora_dropout", "use_rslora", "pissa_init", "pissa_iter", "pissa_convert", "create_new_adapter",
        "loraplus_lr_ratio", "loraplus_lr_embedding", "pref_beta", "pref_ftx", "dpo_label_smoothing",
        "double_quantization", "quantization_type", "quantization_method", "train_on_prompt", "mask_history",
        "streaming", "buffer_size", "mix_strategy", "interleave_probs", "tokenized_path", "tool_format",
        "neat_packing", "packing", "enable_thinking", "rope_scaling", "model_revision", "cache_dir",
        "use_fast_tokenizer", "split_special_tokens", "low_cpu_mem_usage", "infer_backend", "print_param_status",
        "hf_hub_token", "ms_hub_token", "upcast_layernorm", "use_reentrant_gc", "moe_aux_loss_coef",
        "freeze_vision_tower", "freeze_multi_modal_projector", "freeze_language_model", "image_max_pixels",
        "image_min_pixels", "video_max_pixels", "video_min_pixels", "video_fps", "video_maxlen", "ddp_timeout",
        "swanlab_project", "use_swanlab", "include_effective_tokens_per_second", "compute_accuracy",
        "ignore_pad_token_for_loss", "eval_num_beams", "media_dir", "default_system", "train_from_scratch",
    };
    return keys;
}

// pref_loss under stage dpo (LLaMA-Factory reads it nowhere else): orpo and simpo hold no reference model;
// the rest are DPO losses. With LoRA, LLaMA-Factory's create_ref_model gives no reference (the policy with
// its adapters disabled serves), which zeromem's dpo workload does not model: it counts a frozen copy.
void read_preference(Reader& r, const std::vector<Entry>& entries) {
    Request& v = r.out().values;
    const Entry* loss = find(entries, "pref_loss");
    if (!v.workload) {
        if (loss) r.note(*loss, "unused: stage is not dpo");
        return;
    }
    const std::string l = loss ? r.scalar(*loss) : "sigmoid";
    if (l == "orpo" || l == "simpo") {
        v.workload = "orpo";
        r.from("--workload", *loss);
        return r.note(*loss, l + ": preference training without a reference model (zeromem's orpo workload)");
    }
    if (v.lora_rank && !find(entries, "ref_model"))
        r.out().trail.warnings.push_back(
            r.file() + ": stage dpo with LoRA: LLaMA-Factory's reference is the policy with its adapters disabled "
                       "(no second copy); zeromem counts a frozen reference copy, so its figure is high by that copy");
}

bool read_llamafactory_key(Reader& r, const Entry& e, const std::vector<Entry>& entries) {
    Request& v = r.out().values;
    const std::string& k = e.key;
    if (k == "finetuning_type" || k == "lora_rank" || k == "lora_target") return true;  // read_finetuning_type
    if (k == "quantization_method") {
        if (!find(entries, "quantization_bit")) r.note(e, "no effect without quantization_bit");
        return true;  // else read_quantization
    }
    if (k == "model_name_or_path") r.model(e);
    else if (k == "stage") read_stage(r, e);
    else if (k == "cutoff_len") {
        v.seq_len = r.positive_int(e);
        r.from("--seq-len", e);
    } else if (k == "quantization_bit") read_quantization(r, e, entries);
    else if (k == "flash_attn") read_flash_attn(r, e);
    else if (k == "disable_gradient_checkpointing") {
        const Entry* hf = find(entries, "gradient_checkpointing");
        if (!(hf && hf->kind == Entry::Kind::scalar && to_lower(hf->text) == "true")) {
            v.checkpointing = r.boolean(e) ? "none" : "full";
            r.from("--gradient-checkpointing", e);
        }
    } else if (k == "gradient_checkpointing") {
        // The HF Trainer itself calls gradient_checkpointing_enable when it is true, whatever LLaMA-Factory's switch.
        if (r.boolean(e)) {
            v.checkpointing = "full";
            r.from("--gradient-checkpointing", e);
        } else {
            r.note(e, "false: LLaMA-Factory's switch is disable_gradient_checkpointing");
        }
    } else if (k == "additional_target" || k == "ref_model" || k == "adapter_name_or_path") {
        if (e.kind != Entry::Kind::null)
            r.refuse(e, k == "ref_model" ? "a separate reference model is not read from a file: pass --workload dpo "
                                           "with the flags"
                                         : "extra trained or loaded modules are not modelled");
    } else if (const auto u = unmodelled().find(k); u != unmodelled().end()) {
        if (e.kind != Entry::Kind::null && r.boolean(e)) r.refuse(e, "true is not modelled (" + u->second + ")");
        r.note(e, "off");
    } else if (k == "pref_loss") {
        return true;  // read_preference, after the stage
    } else {
        return false;
    }
    return true;
}

}  // namespace

void read_llamafactory(Reader& r, const std::vector<Entry>& entries) {
    if (!find(entries, "model_name_or_path"))
        throw InputError("--from: " + r.file() + ": model_name_or_path is missing (LLaMA-Factory requires it)");
    const bool ds_optimizer = r.deepspeed_builds_optimizer(entries);
    for (const Entry& e : entries) {
        if (read_llamafactory_key(r, e, entries) || read_trainer_key(r, e, ds_optimizer)) continue;
        if (without_memory_effect().count(e.key) || trainer_keys_without_memory_effect().count(e.key))
            r.note(e, "no effect on memory");
        else
            r.unknown(e);
    }
    read_finetuning_type(r, entries);
    read_preference(r, entries);
    Request& v = r.out().values;
    if (!find(entries, "cutoff_len")) {
        v.seq_len = 2048;
        r.launcher_default("--seq-len", "cutoff_len not set: LLaMA-Factory's default 2048 tokens");
    }
    if (!find(entries, "disable_gradient_checkpointing")) {
        v.checkpointing = "full";
        r.launcher_default("--gradient-checkpointing",
                           "disable_gradient_checkpointing not set: LLaMA-Factory checkpoints every layer "
                           "(model_utils/checkpointing.py)");
    }
    if (!find(entries, "flash_attn")) {
        v.attention = "auto";
        r.launcher_default("--attention", "flash_attn not set: LLaMA-Factory's default auto");
    }
    apply_trainer_defaults(r, entries);
}

}  // namespace zeromem::launch
