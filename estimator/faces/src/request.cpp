#include "zeromem/request.h"

#include "hf_hub.h"
#include "request_detail.h"

#include "zeromem/calibration_profile.h"

#include "zeromem/ds_schema.h"

#include "zeromem/ds_config.h"
#include "zeromem/host_capacity.h"
#include "zeromem/launch_file.h"
#include "zeromem/request_defaults.h"
#include "zeromem/stack_facts.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cstdio>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <utility>

namespace zeromem {

using namespace request_detail;

namespace {

namespace fs = std::filesystem;

// Accepted but probably not meant: one warning each (printed on stderr by
// every subcommand).
void add_plausibility_warnings(const Request& req, const EstimateInput& in, std::vector<std::string>& w) {
    const auto& t = in.train;
    const int64_t tp = in.cluster.tp;
    if (in.model.params < 1000000 && !req.module_tree)  // a tree counts exactly, whatever its size
        w.push_back("the model has " + std::to_string(in.model.params) +
                    " parameters, fewer than a million: --params counts parameters (7e9 or 7B), not billions");
    if (const auto& a = in.model.arch) {
        if (a->max_position_embeddings > 0 && t.seq_len > a->max_position_embeddings)
            w.push_back("--seq-len " + std::to_string(t.seq_len) + " is longer than the model's " +
                        std::to_string(a->max_position_embeddings) + " max_position_embeddings");
        // GenerationMixin warns when the generated length exceeds the
        // model's maximum (transformers generation/utils.py
        // _validate_generated_length); learned positions then index past
        // their embedding table.
        if (in.generation && a->max_position_embeddings > 0) {
            const int64_t prompt = in.generation->prompt_len.value_or(t.seq_len);
            const int64_t total = prompt + in.generation->max_new_tokens;
            if (total > a->max_position_embeddings)
                w.push_back("--eval-generate: prompt " + std::to_string(prompt) + " + --max-new-tokens " +
                            std::to_string(in.generation->max_new_tokens) + " = " + std::to_string(total) +
                            " tokens, longer than the model's " + std::to_string(a->max_position_embeddings) +
                            " max_position_embeddings");
        }
        if (t.lora_rank > a->hidden_size && a->hidden_size > 0)
            w.push_back("--lora-rank " + std::to_string(t.lora_rank) + " is above the hidden size " +
                        std::to_string(a->hidden_size) + ": the adapters are larger than the layers they adapt");
        if (tp > 1 && a->num_heads > 0 && (a->num_heads % tp != 0 || (a->num_kv_heads > 0 && a->num_kv_heads % tp != 0)))
            w.push_back("--tp " + std::to_string(tp) + " does not divide the " + std::to_string(a->num_heads) +
                        " attention heads and " + std::to_string(a->num_kv_heads) +
                        " key-value heads; Megatron-style tensor parallelism splits whole heads");
    }
    if (tp > in.cluster.gpus_per_node())
        w.push_back("--tp " + std::to_string(tp) + " spans nodes (" + std::to_string(in.cluster.gpus_per_node()) +
                    " GPUs per node): tensor-parallel all-reduces then cross the inter-node network");
    if (!req.nodes && in.cluster.nodes == 1 && in.cluster.gpus > kGpusPerTypicalNode)
        w.push_back("--gpus " + std::to_string(in.cluster.gpus) + " without --nodes is one node of " +
                    std::to_string(in.cluster.gpus) + " GPUs, more than the " + std::to_string(kGpusPerTypicalNode) +
                    " of a typical node (host RAM, NVMe and the network are per node); pass --nodes for the real layout");
    if (t.sequence_parallel && tp == 1)
        w.push_back("--sequence-parallel with --tp 1 changes nothing: sequence parallelism splits activations across "
                    "the tensor-parallel group");
    if (t.checkpointing == Checkpointing::selective && t.flash_attention)
        w.push_back("--gradient-checkpointing selective changes nothing under flash attention: selective "
                    "recomputation drops only the s^2 attention scores, which flash attention never stores "
                    "(Korthikanti et al. 2022, Table 2); use full, or --attention eager");
    if (t.optimizer == Optimizer::sgd && req.optimizer && to_lower(*req.optimizer) == "sgd")
        w.push_back("--optimizer sgd counts a momentum buffer (4 B/param); the HF Trainer's optim=sgd builds "
                    "torch.optim.SGD with momentum 0 unless optim_args sets it: use --optimizer sgd_nomomentum then");
}

// The "enabled" value of a DeepSpeed precision block: true, false, "auto"
// or absent (nullopt).
std::optional<std::string> precision_enabled(const nlohmann::json& cfg, const char* block) {
    if (!cfg.is_object() || !cfg.contains(block) || !cfg[block].is_object() || !cfg[block].contains("enabled"))
        return std::nullopt;
    const auto& v = cfg[block]["enabled"];
    if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
    if (v.is_string()) return v.get<std::string>();
    return std::nullopt;
}

// The HF Trainer's mismatch check for fp16/bf16 (transformers
// integrations/deepspeed.py HfTrainerDeepSpeedConfig.trainer_config_process,
// fill_match): an explicit "enabled" that contradicts --fp16/--bf16 (our
// --dtype) is an error. Returns a warning when "auto" meets no --dtype.
std::optional<std::string> check_precision(const nlohmann::json& cfg, const std::string& file,
                                           const std::optional<Dtype>& flag) {
    bool any_auto = false;
    for (const auto& [block, d] : {std::pair<const char*, Dtype>{"fp16", Dtype::fp16}, {"bf16", Dtype::bf16}}) {
        const auto v = precision_enabled(cfg, block);
        if (!v) continue;
        if (*v == "auto") {
            any_auto = true;
            continue;
        }
        if (flag && (*v == "true") != (*flag == d))
            throw InputError("--dtype " + std::string(to_string(*flag)) + " contradicts \"" + block +
                             "\": {\"enabled\": " + *v + "} in " + file +
                             " (the HF Trainer refuses this mismatch too); change one of them");
    }
    if (any_auto && !flag)
        return std::string("DTYPE ASSUMED fp32: ") + file +
               " has \"enabled\": \"auto\" for fp16/bf16 and --dtype was not given; the HF Trainer fills these "
               "from --fp16/--bf16 and, with neither, trains in fp32 (twice the 16-bit memory). Pass --dtype bf16 or "
               "--dtype fp16 as you pass --bf16 or --fp16 to the Trainer";
    return std::nullopt;
}

}  // namespace


// ZeRO++ and MiCS flags override the DeepSpeed config's keys (validated
// with the rest by estimate: zeropp.h validate_zeropp).
static void apply_zeropp_flags(const Request& req, ZeroSettings& z, Provenance& prov) {
    if (req.hpz_partition_size) {
        z.zero_hpz_partition_size = *req.hpz_partition_size;
        prov["zero_optimization.zero_hpz_partition_size"] = "--hpz-partition-size";
    }
    if (req.quantized_weights) {
        z.zero_quantized_weights = *req.quantized_weights;
        prov["zero_optimization.zero_quantized_weights"] = *req.quantized_weights ? "--quantized-weights" : "--no-quantized-weights";
    }
    if (req.quantized_gradients) {
        z.zero_quantized_gradients = *req.quantized_gradients;
        prov["zero_optimization.zero_quantized_gradients"] =
            *req.quantized_gradients ? "--quantized-gradients" : "--no-quantized-gradients";
    }
    if (req.mics_shard_size) {
        z.mics_shard_size = *req.mics_shard_size;
        prov["zero_optimization.mics_shard_size"] = "--mics-shard-size";
    }
    if (req.mics_hierarchical_gather) {
        z.mics_hierarchical_params_gather = *req.mics_hierarchical_gather;
        prov["zero_optimization.mics_hierarchical_params_gather"] = "--mics-hierarchical-gather";
    }
}

namespace {

// --eval-generate and its flags: GenerationSettings with their provenance.
// The flags without --eval-generate, a non-positive count, or generation
// without an architecture are refused naming the flag.
void apply_generation(const Request& req, EstimateInput& in, Provenance& prov) {
    const std::pair<const char*, const std::optional<int64_t>*> flags[] = {
        {"--num-beams", &req.num_beams}, {"--max-new-tokens", &req.max_new_tokens},
        {"--eval-batch", &req.eval_batch}, {"--prompt-len", &req.prompt_len}};
    if (!req.eval_generate) {
        for (const auto& f : flags)
            if (f.second->has_value()) throw InputError(std::string(f.first) + ": needs --eval-generate");
        return;
    }
    if (!in.model.arch)
        throw InputError("--eval-generate: needs an architecture for the KV cache (--model or --hf-config)");
    if (in.model.arch->encoder_only)
        throw InputError("--eval-generate: " + in.model.arch->name + " is encoder-only and cannot generate");
    if (in.cluster.pp > 1) throw InputError("--eval-generate: generation with --pp > 1 is not modelled");
    GenerationSettings g;
    auto take = [&](const std::optional<int64_t>& v, const char* flag, int64_t& out, const char* key,
                    const char* fallback) {
        if (v) {
            out = positive(*v, flag);
            prov[key] = flag;
        } else {
            prov[key] = fallback;
        }
    };
    take(req.num_beams, "--num-beams", g.num_beams, "generation.num_beams", "default (1: GenerationConfig.num_beams)");
    take(req.max_new_tokens, "--max-new-tokens", g.max_new_tokens, "generation.max_new_tokens",
         "default (20: GenerationConfig.max_length when nothing is set)");
    take(req.eval_batch, "--eval-batch", g.eval_batch, "generation.eval_batch",
         "default (8: TrainingArguments.per_device_eval_batch_size)");
    if (req.prompt_len) {
        g.prompt_len = positive(*req.prompt_len, "--prompt-len");
        prov["generation.prompt_len"] = "--prompt-len";
    } else {
        prov["generation.prompt_len"] = "the training sequence length (--seq-len)";
    }
    in.generation = g;
}

// Loads --ds-config and applies it (its "auto" values filled from the flags);
// returns the config, or null JSON without --ds-config.
nlohmann::json resolve_ds_config(const Request& req, const std::optional<Dtype>& dtype_flag, Resolved& r) {
    EstimateInput& in = r.input;
    if (!req.ds_config) return nlohmann::json();
    AutoSources autos;
    autos.micro_batch = req.micro_batch;
    autos.grad_accum = req.grad_accum;
    autos.dtype = dtype_flag;
    autos.world_size = in.cluster.data_parallel();
    if (in.model.arch) autos.hidden_size = in.model.arch->hidden_size;
    nlohmann::json cfg;
    try {
        cfg = load_ds_config_file(*req.ds_config);
    } catch (const InputError& e) {
        throw InputError(std::string("--ds-config: ") + e.what());
    }
    if (auto w = check_precision(cfg, *req.ds_config, dtype_flag)) r.warnings.push_back(*w);
    std::string ignored;  // one warning for every top-level key DeepSpeed ignores
    int n_ignored = 0;
    for (const auto& p : validate_ds_schema(cfg, Launcher::hf_trainer))
        if (p.kind == SchemaProblem::Kind::ignored_key) ignored += (n_ignored++ ? ", " : "") + p.pointer;
    if (n_ignored > 0)
        r.warnings.push_back("--ds-config " + *req.ds_config + ": " + ignored +
                             (n_ignored > 1 ? ": not DeepSpeed v0.19.6 config keys" : ": not a DeepSpeed v0.19.6 config key") +
                             ": DeepSpeed ignores unknown top-level keys (runtime/config.py DeepSpeedConfig reads only "
                             "the keys it knows); check the spelling");
    try {
        apply_ds_config(cfg, *req.ds_config, autos, in.zero, in.train, r.provenance, in.stack.deepspeed);
    } catch (const ConfigError& e) {  // the flag, the file and the key's line, as check prints it
        const int line = ds_config_line_of(ds_config_key_lines(read_text_file(*req.ds_config)), e.pointer());
        throw ConfigError("--ds-config: " + *req.ds_config + (line > 0 ? ":" + std::to_string(line) : std::string()),
                          e.pointer(), e.detail());
    } catch (const InputError& e) {
        throw InputError(std::string("--ds-config: ") + e.what());
    }
    // --stage overrides the file's stage: what only ZeRO-3 reads is judged at the run's stage.
    std::optional<int> stage;
    if (req.stage && *req.stage >= 0 && *req.stage <= 3) stage = static_cast<int>(*req.stage);
    if (stage) {
        const auto refused = unmodelled_ds_settings(cfg, stage);
        if (!refused.empty())
            throw ConfigError("--ds-config: " + *req.ds_config, refused.front().pointer,
                              refused.front().message + " (" + refused.front().fix + ")");
    }
    for (auto& n : ds_config_notes(cfg, *req.ds_config, stage)) r.notes.push_back(std::move(n));
    return cfg;
}

// Resolves the training dtype: --dtype over the config, and fp16 when the
// --gpu preset has no bf16.
void resolve_dtype(const Request& req, const std::optional<Dtype>& dtype_flag, Resolved& r) {
    EstimateInput& in = r.input;
    Provenance& prov = r.provenance;
    if (dtype_flag) {
        in.train.dtype = *dtype_flag;
        prov["dtype"] = "--dtype " + *req.dtype;
    } else if (!req.ds_config) {
        prov["dtype"] = "assumed: neither --dtype nor a DeepSpeed config gives one";
    }
    if (r.gpu && in.train.dtype == Dtype::bf16 && !r.gpu->bf16_tflops) {
        // Every subcommand alike: the Trainer's --bf16 fails on a GPU without
        // bf16 support; the unstated default falls back to fp16, said aloud.
        if (dtype_flag || req.ds_config)
            throw InputError("--dtype: " + r.gpu->name + " has no bf16 support (" + prov["dtype"] +
                             "); use fp16");
        in.train.dtype = Dtype::fp16;
        prov["dtype"] = "default for " + r.gpu->name + " (fp16: it has no bf16)";
        r.warnings.push_back("dtype not given: assumed fp16, since " + r.gpu->name +
                             " has no bf16 (bf16 is assumed elsewhere); pass --dtype to choose");
    }
}

// Applies the batch, sequence, checkpointing, optimizer and attention flags
// over the config.
void apply_training_flags(const Request& req, TrainingSettings& train, Provenance& prov) {
    if (req.micro_batch) {
        train.micro_batch = *req.micro_batch;
        prov["train_micro_batch_size_per_gpu"] = "--micro-batch";
    } else if (!req.ds_config) {
        prov["train_micro_batch_size_per_gpu"] = "default (" + std::to_string(request_defaults().micro_batch) + ")";
    }
    if (req.grad_accum) {
        train.grad_accum = *req.grad_accum;
        prov["gradient_accumulation_steps"] = "--grad-accum";
    }
    if (req.seq_len) {
        train.seq_len = positive(*req.seq_len, "--seq-len");
        prov["seq_len"] = "--seq-len";
    } else {
        prov["seq_len"] = "default (" + std::to_string(request_defaults().seq_len) + " tokens)";
    }
    if (req.checkpointing) {
        train.checkpointing = parse_checkpointing(*req.checkpointing, "--gradient-checkpointing");
        prov["gradient_checkpointing"] = "--gradient-checkpointing";
    }
    if (req.optimizer) {
        train.optimizer = parse_optimizer(*req.optimizer, "--optimizer");
        prov["optimizer.type"] = "--optimizer";
    }
}

// --attention flash|eager, or auto: the attention the software stack and the model class run when the
// script asks for none (stack_facts.h default_attention: eager before transformers 4.36 / torch 2.1.1
// and for classes without an SDPA path). Not given: flash, with a note where auto would say eager.
void resolve_attention(const Request& req, Resolved& r) {
    EstimateInput& in = r.input;
    const std::string kind = req.attention.value_or("flash");
    if (kind != "flash" && kind != "eager" && kind != "auto")
        throw InputError("--attention: '" + kind + "' is not flash, eager or auto");
    const AttentionChoice stack_default =
        default_attention(in.stack, stack_facts(in.stack), in.model.arch ? in.model.arch->family : "");
    if (kind == "auto") {
        in.train.flash_attention = stack_default.flash;
        r.provenance["attention"] = "--attention auto: " + stack_default.why;
        return;
    }
    in.train.flash_attention = kind == "flash";
    if (req.attention) {
        r.provenance["attention"] =
            "--attention " + kind + (in.train.flash_attention ? ": no s^2 scores" : ": s^2 scores kept");
    } else if (!stack_default.flash && in.model.arch) {
        r.notes.push_back("--attention not given: flash assumed (no s^2 scores), but " + stack_default.why +
                          ": pass --attention auto (or eager) to count them");
    }
}

// Applies the ZeRO flags (--stage, offload devices, zero.Init, convention)
// over the config.
void apply_zero_flags(const Request& req, EstimateInput& in, Provenance& prov) {
    if (req.stage) {
        if (*req.stage < 0 || *req.stage > 3)
            throw InputError("--stage: " + std::to_string(*req.stage) + " is outside 0..3");
        in.zero.stage = static_cast<int>(*req.stage);
        prov["zero_optimization.stage"] = "--stage";
    } else if (!req.ds_config) {
        prov["zero_optimization.stage"] = "default (0)";
    }
    if (req.offload_optimizer) {
        in.zero.offload_optimizer = parse_offload_device(*req.offload_optimizer, "--offload-optimizer");
        prov["zero_optimization.offload_optimizer.device"] = "--offload-optimizer";
    }
    if (req.offload_param) {
        in.zero.offload_param = parse_offload_device(*req.offload_param, "--offload-param");
        prov["zero_optimization.offload_param.device"] = "--offload-param";
    }
    if (req.zero_init) {
        in.zero.zero_init = *req.zero_init;
        prov["zero_init"] = *req.zero_init ? "--zero-init" : "--no-zero-init";
    }
    if (req.convention) in.convention = parse_convention(*req.convention, "--convention");
    in.legacy_zero2_formula = req.legacy_zero2_formula;
}

// Applies the residual-state flags (CUDA context, fragmentation, checkpoint
// loading, host overhead) and --sequence-parallel.
void apply_residual_flags(const Request& req, EstimateInput& in, Provenance& prov) {
    if (req.cuda_context) {
        in.residual.cuda_context = parse_bytes_or_zero(*req.cuda_context, "--cuda-context");
        prov["cuda_context"] = "--cuda-context " + *req.cuda_context;
    }
    if (req.nccl_buffers) {
        in.residual.nccl_buffers = parse_bytes_or_zero(*req.nccl_buffers, "--nccl-buffers");
        prov["nccl_buffers"] = "--nccl-buffers " + *req.nccl_buffers;
    }
    if (req.cublas_workspace) {
        in.residual.cublas_workspaces = parse_bytes_or_zero(*req.cublas_workspace, "--cublas-workspace");
        prov["cublas_workspaces"] = "--cublas-workspace " + *req.cublas_workspace;
    }
    if (req.alloc_conf) {
        in.residual.alloc_conf = *req.alloc_conf;
        prov["alloc_conf"] = "--alloc-conf " + *req.alloc_conf + " (PYTORCH_CUDA_ALLOC_CONF)";
    }
    if (req.fragmentation) {
        if (!(*req.fragmentation >= 0 && *req.fragmentation < 1)) {  // NaN too
            char shown[32];
            std::snprintf(shown, sizeof shown, "%g", *req.fragmentation);
            throw InputError(std::string("--fragmentation: must be a fraction in [0, 1), got ") + shown);
        }
        in.residual.fragmentation_fraction = *req.fragmentation;
        prov["fragmentation"] = "--fragmentation";
    }
    if (req.load_dtype) {
        in.residual.load_dtype = parse_dtype(*req.load_dtype, "--load-dtype");
        prov["load_dtype"] = "--load-dtype";
    }
    if (req.load_path) {
        in.residual.load_path = parse_load_path(*req.load_path, "--load-path");
        prov["load_path"] = "--load-path";
    }
    if (req.host_overhead) {
        in.residual.host_process_overhead = parse_bytes_or_zero(*req.host_overhead, "--host-overhead");
        // Per process, summed over a node's ranks: at most 2^50 B (1 PiB)
        // keeps every per-node sum within 64 bits.
        if (in.residual.host_process_overhead > (uint64_t(1) << 50))
            throw InputError("--host-overhead: '" + *req.host_overhead + "' per process is more than 1 PiB");
        prov["host_process_overhead"] = "--host-overhead " + *req.host_overhead;
    }
    if (req.sequence_parallel) {
        in.train.sequence_parallel = true;
        prov["sequence_parallel"] = "--sequence-parallel";
    }
}

// Resolves which parameters train (--trainable-params, --lora-rank with its
// adapters, --load-in quantized bases).
void apply_trainable_flags(const Request& req, EstimateInput& in, Provenance& prov) {
    if (req.trainable_params && req.lora_rank)
        throw InputError("--trainable-params: give either --trainable-params or --lora-rank, not both");
    if (req.trainable_params) {
        in.train.trainable_params = parse_count(*req.trainable_params, "--trainable-params");
        if (*in.train.trainable_params > in.model.params)
            throw InputError("--trainable-params: " + *req.trainable_params + " is more than the model's " +
                             std::to_string(in.model.params) + " parameters");
        prov["trainable_params"] = "--trainable-params " + *req.trainable_params;
    }
    if (req.lora_targets && !req.lora_rank) throw InputError("--lora-target: needs --lora-rank");
    if (req.lora_rank) {
        in.train.lora_rank = positive(*req.lora_rank, "--lora-rank");
        if (req.lora_targets) in.train.lora_targets = *req.lora_targets;
        if (!in.model.arch) throw InputError("--lora-rank: needs an architecture (--model or --hf-config)");
        const uint64_t adapters = lora_params(*in.model.arch, in.train.lora_rank, in.train.lora_targets);
        in.model.params += adapters;  // adapters are new parameters beside the frozen base
        prov["trainable_params"] = "--lora-rank " + std::to_string(in.train.lora_rank) + " on " +
                                   in.train.lora_targets + ": " + std::to_string(adapters) + " adapter parameters";
    }
    if (req.load_in) {
        if (*req.load_in == "4bit") in.train.load_in_bits = 4;
        else if (*req.load_in == "8bit") in.train.load_in_bits = 8;
        else throw InputError("--load-in: '" + *req.load_in + "' is not 4bit or 8bit");
        if (!req.lora_rank && !req.trainable_params && !in.train.trainable_params)  // a module tree's frozen base
            throw InputError("--load-in: quantized base weights cannot be trained; add --lora-rank or --trainable-params");
        prov["load_in"] = "--load-in " + *req.load_in;
    }
}

// Resolves the optimizer implementation (--optimizer-impl, or its provenance
// when neither the flag nor the config names one).
void apply_optimizer_impl(const Request& req, TrainingSettings& train, Provenance& prov) {
    if (req.optimizer_impl) {
        const std::string& k = *req.optimizer_impl;
        if (k == "fused") {
            train.fused_optimizer = true;
            train.optimizer_builder = OptimizerBuilder::deepspeed;
        } else if (k == "torch" || k == "torch-fused") {
            train.fused_optimizer = false;
            train.torch_adam = false;
            train.client_fused = k == "torch-fused";
            train.optimizer_builder = OptimizerBuilder::client;
        } else {
            throw InputError("--optimizer-impl: '" + k + "' is not fused, torch or torch-fused");
        }
        prov["optimizer.implementation"] = "--optimizer-impl " + k;
    } else if (!prov.count("optimizer.implementation")) {
        prov["optimizer.implementation"] = "not given: DeepSpeedCPUAdam under optimizer offload, else the HF Trainer's "
                                           "default for the software stack (--optimizer-impl fused|torch|torch-fused)";
    }
}

// Resolves the defaults that depend on the DeepSpeed and transformers
// versions (offload pin_memory, the checkpoint load dtype).
void apply_version_defaults(const Request& req, EstimateInput& in, Provenance& prov) {
    // offload_optimizer/offload_param pin_memory defaulted to false before
    // DeepSpeed 0.19.5 (deepspeedai/DeepSpeed#8207 made it true).
    if (compare_versions(in.stack.deepspeed, "0.19.5", "--deepspeed-version") < 0) {
        for (const char* dev : {"offload_optimizer", "offload_param"}) {
            const std::string key = std::string("zero_optimization.") + dev + ".pin_memory";
            if (prov.count(key)) continue;
            (std::string(dev) == "offload_optimizer" ? in.zero.offload_optimizer_pin_memory
                                                      : in.zero.offload_param_pin_memory) = false;
            prov[key] = "false (the default before DeepSpeed 0.19.5; the stack follows DeepSpeed " + in.stack.deepspeed + ")";
        }
    }
    // transformers >= 5 loads with dtype="auto" by default
    // (huggingface/transformers#42805): a 16-bit checkpoint stays 16-bit on
    // the host; before, from_pretrained built the model in fp32
    // (modeling_utils.py: "set fp32 as the default dtype for BC").
    if (!req.load_dtype) {
        if (compare_versions(in.stack.transformers, "5", "--transformers-version") >= 0) {
            in.residual.load_dtype = in.train.dtype == Dtype::fp16 ? Dtype::fp16 : Dtype::bf16;
            prov["load_dtype"] = std::string(to_string(in.residual.load_dtype)) +
                                 " (transformers >= 5 loads the checkpoint's 16-bit dtype, dtype=\"auto\"; --load-dtype to change)";
        } else {
            prov["load_dtype"] = "fp32 (transformers < 5 builds the model in fp32 unless torch_dtype is given; --load-dtype to change)";
        }
    }
}

// Resolves --ds-checkpointing, refusing the config's contiguous checkpoint
// buffers that zeromem does not count.
void apply_ds_checkpointing(const Request& req, const nlohmann::json& ds_cfg, TrainingSettings& train,
                            Provenance& prov) {
    if (!req.ds_checkpointing) return;
    train.ds_checkpointing_api = true;
    prov["activation_checkpointing"] = "--ds-checkpointing (model uses deepspeed.checkpointing)";
    // Schema refuse_with_flag: contiguous buffers zeromem does not count.
    const nlohmann::json* c = ds_cfg.is_object() && ds_cfg.contains("activation_checkpointing")
        ? &ds_cfg["activation_checkpointing"] : nullptr;
    if (c && c->is_object() && c->value("contiguous_memory_optimization", false))
        throw InputError(*req.ds_config + ": /activation_checkpointing/contiguous_memory_optimization: true "
                         "with --ds-checkpointing preallocates number_checkpoints activation buffers, which "
                         "zeromem does not model (set it to false to estimate memory)");
}

// Checks ZeRO against pipeline parallelism, warns about an unknown largest
// layer under ZeRO-3, and applies the stage3 gather-on-save flag.
void check_stage_and_save(const Request& req, Resolved& r) {
    EstimateInput& in = r.input;
    if (in.cluster.pp > 1 && in.zero.stage >= 2)
        throw InputError("--pp: DeepSpeed's pipeline engine supports ZeRO stage 0 or 1 only; stage " +
                         std::to_string(in.zero.stage) + " with pipeline parallelism is rejected");
    if (!in.model.arch && !req.largest_layer_params && !req.module_tree && in.zero.stage == 3 && in.convention != Convention::paper)
        r.warnings.push_back("largest layer unknown with --params alone: counted as 0; ZeRO-3 figures miss the "
                             "gathered largest module (pass --largest-layer-params, --model or --hf-config)");
    if (req.gather_on_save) {
        in.zero.stage3_gather_16bit_weights_on_model_save = *req.gather_on_save;
        r.provenance["zero_optimization.stage3_gather_16bit_weights_on_model_save"] =
            *req.gather_on_save ? "--gather-on-save" : "--no-gather-on-save";
    }
}

// Completes the batch settings (DeepSpeed fills a missing one of the three
// under a config) or checks their arithmetic, then the MoE layout.
void finish_batch_and_moe(const Request& req, Resolved& r) {
    EstimateInput& in = r.input;
    if (req.ds_config)
        complete_batch_settings(in.train, in.cluster.data_parallel(), r.provenance);  // DeepSpeed fills a missing one of the three
    else
        check_batch_arithmetic(in.train, in.cluster.data_parallel());
    validate_moe(in);
    if (in.moe.ep() > 1 && in.zero.stage == 3)
        r.warnings.push_back("--ep-size with ZeRO stage 3: DeepSpeed v0.19.6 refuses its native MoE layer there "
                             "(engine.py _configure_zero_optimizer) and partitions experts over the "
                             "expert-data-parallel group only through AutoEP (expert_parallel.autoep_size)");
}

// --calibration: the profile's fitted terms, except those a flag sets.
void apply_calibration(const Request& req, Resolved& r) {
    if (!req.calibration) {
        if (req.force_calibration) throw InputError("--force-calibration: given without --calibration");
        return;
    }
    CalibrationProfile p = read_calibration_profile(*req.calibration);
    if (req.fragmentation) p.reserved_share.reset();    // --fragmentation wins
    if (req.cuda_context) p.outside_allocator.reset();  // --cuda-context wins
    CalibrationApplied applied = apply_calibration_profile(p, *req.calibration, req.force_calibration, r.input, r.provenance);
    for (auto& n : applied.notes) r.notes.push_back(std::move(n));
    for (auto& w : applied.warnings) r.warnings.push_back(std::move(w));
    r.calibration = std::move(applied.header);
    r.fragmentation_fitted = p.reserved_share.has_value();
}

}  // namespace

Resolved resolve_request(const Request& req, const std::string& data_dir) {
    if (req.from && req.launch.kind.empty())  // --from not merged yet (the CLI merges it before it runs)
        return resolve_request(merge_launch_file(req, read_launch_file(*req.from, data_dir)), data_dir);
    Resolved r;
    EstimateInput& in = r.input;
    Provenance& prov = r.provenance;
    resolve_model(req, data_dir, r);
    resolve_parallelism(req, in.cluster, prov);
    resolve_moe_flags(req, r);
    resolve_device_memory(req, data_dir, r);

    // DeepSpeed config, then the flags over it.
    std::optional<Dtype> dtype_flag;
    if (req.dtype) dtype_flag = parse_dtype(*req.dtype, "--dtype");
    if (req.micro_batch) positive(*req.micro_batch, "--micro-batch");
    if (req.grad_accum) positive(*req.grad_accum, "--grad-accum");
    resolve_stack(req, r);  // the config is read as that DeepSpeed reads it
    apply_stack_to_architecture(req, r);
    const nlohmann::json ds_cfg = resolve_ds_config(req, dtype_flag, r);
    resolve_dtype(req, dtype_flag, r);
    apply_training_flags(req, in.train, prov);
    apply_zero_flags(req, in, prov);
    apply_residual_flags(req, in, prov);
    apply_trainable_flags(req, in, prov);
    apply_optimizer_impl(req, in.train, prov);
    apply_version_defaults(req, in, prov);
    resolve_attention(req, r);
    apply_ds_checkpointing(req, ds_cfg, in.train, prov);
    check_stage_and_save(req, r);
    apply_zeropp_flags(req, in.zero, prov);
    apply_generation(req, in, prov);
    apply_calibration(req, r);
    add_plausibility_warnings(req, in, r.warnings);
    resolve_workload(req, r, data_dir);
    finish_batch_and_moe(req, r);
    attribute_launch_file(req, r);
    return r;
}

}  // namespace zeromem
