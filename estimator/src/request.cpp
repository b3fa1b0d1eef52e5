#include "zeromem/request.h"

#include "zeromem/ds_config.h"
#include "zeromem/util.h"

namespace zeromem {

namespace {

// Larger than any cluster built; keeps the arithmetic far from overflow.
constexpr int64_t kMaxGpus = 1 << 20;

int64_t positive(int64_t v, const char* flag) {
    if (v <= 0) throw InputError(std::string(flag) + ": must be a positive integer, got " + std::to_string(v));
    return v;
}

}  // namespace

Resolved resolve_request(const Request& req, const std::string& data_dir) {
    Resolved r;
    EstimateInput& in = r.input;
    Provenance& prov = r.provenance;

    // --- model -----------------------------------------------------------
    const int sources = int(req.params.has_value()) + int(req.model.has_value()) + int(req.hf_config.has_value());
    if (sources == 0) throw InputError("model: give one of --params, --model or --hf-config");
    if (sources > 1) throw InputError("model: give only one of --params, --model and --hf-config");
    if (req.params) {
        in.model.params = parse_count(*req.params, "--params");
        in.model.name = *req.params + " parameters";
        prov["model.params"] = "--params " + *req.params;
    } else {
        ModelArch arch;
        try {
            arch = req.model ? load_model_preset(*req.model, data_dir) : load_hf_config(*req.hf_config);
        } catch (const InputError& e) {
            const std::string flag = req.model ? "--model" : "--hf-config";
            const std::string msg = e.what();
            throw InputError(msg.rfind(flag, 0) == 0 ? msg : flag + ": " + msg);
        }
        if (req.hf_config && arch.name.empty()) arch.name = *req.hf_config;
        const ParamCount pc = count_params(arch);
        in.model.params = pc.total;
        in.model.largest_layer_params = pc.largest_module;
        in.model.name = arch.name;
        in.model.arch = arch;
        const std::string from = req.model ? "preset data/models/" + *req.model + ".json" : *req.hf_config;
        prov["model.params"] = "counted from the architecture (" + from + ")";
        prov["model.largest_layer_params"] = "largest single module, counted from the architecture (" + from + ")";
    }
    if (req.largest_layer_params) {
        in.model.largest_layer_params = parse_count(*req.largest_layer_params, "--largest-layer-params");
        prov["model.largest_layer_params"] = "--largest-layer-params " + *req.largest_layer_params;
    } else if (!in.model.arch) {
        prov["model.largest_layer_params"] = "unknown (0): pass --largest-layer-params or use --model/--hf-config";
    }
    if (in.model.largest_layer_params > in.model.params)
        throw InputError("--largest-layer-params: larger than the whole model (" + std::to_string(in.model.params) + ")");

    // --- cluster ---------------------------------------------------------
    if (req.gpus) {
        in.cluster.gpus = positive(*req.gpus, "--gpus");
        if (in.cluster.gpus > kMaxGpus)
            throw InputError("--gpus: " + std::to_string(in.cluster.gpus) + " is more than zeromem models (at most " +
                             std::to_string(kMaxGpus) + ")");
        prov["cluster.gpus"] = "--gpus";
    } else {
        prov["cluster.gpus"] = "default (1)";
    }
    if (req.nodes) {
        in.cluster.nodes = positive(*req.nodes, "--nodes");
        prov["cluster.nodes"] = "--nodes";
    }
    if (in.cluster.gpus % in.cluster.nodes != 0)
        throw InputError("--nodes: " + std::to_string(in.cluster.nodes) + " nodes do not divide " +
                         std::to_string(in.cluster.gpus) + " GPUs evenly");
    if (req.tp) {
        in.cluster.tp = positive(*req.tp, "--tp");
        prov["cluster.tp"] = "--tp";
    }
    if (req.pp) {
        in.cluster.pp = positive(*req.pp, "--pp");
        prov["cluster.pp"] = "--pp";
    }
    if (in.cluster.gpus % (in.cluster.tp * in.cluster.pp) != 0)
        throw InputError("--tp/--pp: tp x pp = " + std::to_string(in.cluster.tp * in.cluster.pp) +
                         " does not divide --gpus " + std::to_string(in.cluster.gpus));
    if (req.gpu) {
        r.gpu = load_gpu_preset(*req.gpu, data_dir);
        in.cluster.gpu_name = r.gpu->name;
        in.cluster.gpu_memory = r.gpu->memory_bytes;
        prov["cluster.gpu_memory"] = "--gpu " + r.gpu->name + " (data/gpus/" + r.gpu->name + ".json)";
    }
    if (req.gpu_memory) {
        in.cluster.gpu_memory = parse_bytes(*req.gpu_memory, "--gpu-memory");
        prov["cluster.gpu_memory"] = "--gpu-memory " + *req.gpu_memory;
    }
    if (req.host_memory) {
        in.cluster.host_memory = parse_bytes(*req.host_memory, "--host-memory");
        prov["cluster.host_memory"] = "--host-memory " + *req.host_memory;
    }

    // --- DeepSpeed config, then flags ------------------------------------
    std::optional<Dtype> dtype_flag;
    if (req.dtype) dtype_flag = parse_dtype(*req.dtype, "--dtype");
    if (req.micro_batch) positive(*req.micro_batch, "--micro-batch");
    if (req.grad_accum) positive(*req.grad_accum, "--grad-accum");
    nlohmann::json ds_cfg;
    if (req.ds_config) {
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
        apply_ds_config(cfg, *req.ds_config, autos, in.zero, in.train, prov);
        r.notes = ds_config_notes(cfg, *req.ds_config);
        ds_cfg = cfg;
    }
    if (dtype_flag) {
        in.train.dtype = *dtype_flag;
        prov["dtype"] = "--dtype " + *req.dtype;
    } else if (!req.ds_config) {
        prov["dtype"] = "default (bf16)";
    }
    if (req.micro_batch) {
        in.train.micro_batch = *req.micro_batch;
        prov["train_micro_batch_size_per_gpu"] = "--micro-batch";
    } else if (!req.ds_config) {
        prov["train_micro_batch_size_per_gpu"] = "default (1)";
    }
    if (req.grad_accum) {
        in.train.grad_accum = *req.grad_accum;
        prov["gradient_accumulation_steps"] = "--grad-accum";
    }
    if (req.seq_len) {
        in.train.seq_len = positive(*req.seq_len, "--seq-len");
        prov["seq_len"] = "--seq-len";
    } else {
        prov["seq_len"] = "default (2048 tokens)";
    }
    if (req.checkpointing) {
        in.train.checkpointing = parse_checkpointing(*req.checkpointing, "--gradient-checkpointing");
        prov["gradient_checkpointing"] = "--gradient-checkpointing";
    }
    if (req.optimizer) {
        in.train.optimizer = parse_optimizer(*req.optimizer, "--optimizer");
        prov["optimizer.type"] = "--optimizer";
    }
    if (req.attention) {
        if (*req.attention == "flash") in.train.flash_attention = true;
        else if (*req.attention == "eager") in.train.flash_attention = false;
        else throw InputError("--attention: '" + *req.attention + "' is not flash or eager");
        prov["attention"] = "--attention";
    }
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
    if (req.cuda_context) {
        in.residual.cuda_context = parse_bytes_or_zero(*req.cuda_context, "--cuda-context");
        prov["cuda_context"] = "--cuda-context " + *req.cuda_context;
    }
    if (req.fragmentation) {
        if (*req.fragmentation < 0 || *req.fragmentation >= 1)
            throw InputError("--fragmentation: must be a fraction in [0, 1), got " + std::to_string(*req.fragmentation));
        in.residual.fragmentation_fraction = *req.fragmentation;
        prov["fragmentation"] = "--fragmentation";
    }
    if (req.load_dtype) {
        in.residual.load_dtype = parse_dtype(*req.load_dtype, "--load-dtype");
        prov["load_dtype"] = "--load-dtype";
    }
    if (req.host_overhead) {
        in.residual.host_process_overhead = parse_bytes_or_zero(*req.host_overhead, "--host-overhead");
        prov["host_process_overhead"] = "--host-overhead " + *req.host_overhead;
    }
    if (req.sequence_parallel) {
        in.train.sequence_parallel = true;
        prov["sequence_parallel"] = "--sequence-parallel";
    }
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
        if (!req.lora_rank && !req.trainable_params)
            throw InputError("--load-in: quantized base weights cannot be trained; add --lora-rank or --trainable-params");
        prov["load_in"] = "--load-in " + *req.load_in;
    }
    if (req.optimizer_impl) {
        if (*req.optimizer_impl == "fused") in.train.fused_optimizer = true;
        else if (*req.optimizer_impl == "torch") in.train.fused_optimizer = false;
        else throw InputError("--optimizer-impl: '" + *req.optimizer_impl + "' is not fused or torch");
        prov["optimizer.implementation"] = "--optimizer-impl " + *req.optimizer_impl;
    } else if (!prov.count("optimizer.implementation")) {
        prov["optimizer.implementation"] = "torch (no DeepSpeed \"optimizer\" block: the HF Trainer's torch AdamW; "
                                           "--optimizer-impl fused for DeepSpeed's FusedAdam)";
    }
    if (req.ds_checkpointing) {
        in.train.ds_checkpointing_api = true;
        prov["activation_checkpointing"] = "--ds-checkpointing (model uses deepspeed.checkpointing)";
        // Schema refuse_with_flag: contiguous buffers zeromem does not count.
        const nlohmann::json* c = ds_cfg.is_object() && ds_cfg.contains("activation_checkpointing")
            ? &ds_cfg["activation_checkpointing"] : nullptr;
        if (c && c->is_object() && c->value("contiguous_memory_optimization", false))
            throw InputError(*req.ds_config + ": /activation_checkpointing/contiguous_memory_optimization: true "
                             "with --ds-checkpointing preallocates number_checkpoints activation buffers, which "
                             "zeromem does not model (set it to false to estimate memory)");
    }
    if (in.cluster.pp > 1 && in.zero.stage >= 2)
        throw InputError("--pp: DeepSpeed's pipeline engine supports ZeRO stage 0 or 1 only; stage " +
                         std::to_string(in.zero.stage) + " with pipeline parallelism is rejected");
    if (!in.model.arch && !req.largest_layer_params && in.zero.stage == 3 && in.convention != Convention::paper)
        r.warnings.push_back("largest layer unknown with --params alone: counted as 0; ZeRO-3 figures miss the "
                             "gathered largest module (pass --largest-layer-params, --model or --hf-config)");
    if (req.ds_config)
        complete_batch_settings(in.train, in.cluster.data_parallel(), prov);  // DeepSpeed fills a missing one of the three
    else
        check_batch_arithmetic(in.train, in.cluster.data_parallel());
    return r;
}

}  // namespace zeromem
