// The request options on a CLI11 command line (see request_options.h).
#include "zeromem/request_options.h"

#include "zeromem/optimizer_state.h"
#include "zeromem/util.h"

namespace zeromem_cli {

// "--gpus" from a CLI11 flag list such as "-g,--gpus".
std::string option_name(const char* flags) {
    std::string f = flags;
    const auto comma = f.rfind(',');
    return comma == std::string::npos ? f : f.substr(comma + 1);
}

namespace {

// A string option stored into `target` (CLI11 2.1 has no std::optional binding).
CLI::Option* opt_str(CLI::App* sub, const char* flags, std::optional<std::string>& target, const char* help,
                     const char* group) {
    return sub->add_option_function<std::string>(flags, [&target](const std::string& v) { target = v; }, help)
        ->group(group);
}

// An integer option stored into `target`, parsed by zeromem::parse_int.
CLI::Option* opt_int(CLI::App* sub, const char* flags, std::optional<int64_t>& target, const char* help,
                     const char* group) {
    return sub->add_option_function<std::string>(flags, [&target, flags](const std::string& v) {
                   try {
                       target = zeromem::parse_int(v, option_name(flags));
                   } catch (const zeromem::InputError& e) {
                       throw CLI::ValidationError(e.what());
                   }
               }, help)
        ->group(group);
}

// The model source: --params, --model, --hf-config, --module-tree, --largest-layer-params.
void add_model_options(CLI::App* sub, zeromem::Request& req) {
    const char* gM = "Model";
    opt_str(sub, "--params", req.params, "Total parameters Ψ: 7e9, 7B, 1.3b, 7000000000", gM)->type_name("COUNT");
    opt_str(sub, "--model", req.model, "Preset in data/models (see `zeromem models`)", gM)->type_name("NAME");
    opt_str(sub, "--hf-config", req.hf_config, "Hugging Face config.json of the model", gM)->type_name("PATH");
    opt_str(sub, "--module-tree", req.module_tree,
            "The model as built: its module tree JSON (python -m zeromem.tree, or zeromem.dump_module_tree; "
            "python/README.md) gives the exact total and trainable (requires_grad) counts and the largest module; "
            "with --model/--hf-config, or the config.json the tree carries, for the activations", gM)->type_name("FILE");
    opt_str(sub, "--from", req.from,
            "The run's own launcher file: a LLaMA-Factory training YAML, an accelerate config YAML or a HF "
            "TrainingArguments JSON (recognised by content); its model, batch, sequence, LoRA, precision and "
            "DeepSpeed keys fill the flags not given (estimate --explain names each key's line)", gM)->type_name("FILE");
    opt_str(sub, "--largest-layer-params", req.largest_layer_params,
            "Largest single module's own parameters (DeepSpeed's largest_layer_params)", gM)->type_name("COUNT");
}

// The cluster: GPU count and layout, expert parallelism, GPU and host memory.
void add_cluster_options(CLI::App* sub, zeromem::Request& req) {
    const char* gC = "Cluster";
    const char* gT = "Training";
    opt_int(sub, "--gpus", req.gpus, "Total GPUs N (= data-parallel degree N_d); default 1", gC)->type_name("N");
    opt_int(sub, "--nodes", req.nodes, "Nodes M (must divide --gpus); default 1", gC)->type_name("M");
    opt_int(sub, "--tp", req.tp, "Tensor-parallel size (default 1); N_d = gpus / (tp x pp)", gC)->type_name("T");
    opt_int(sub, "--pp", req.pp, "Pipeline-parallel size (default 1; ZeRO stage 0 or 1 only)", gC)->type_name("P");
    opt_str(sub, "--gpu", req.gpu, "GPU preset in data/gpus (see `zeromem gpus`)", gC)->type_name("NAME");
    opt_int(sub, "--ep-size", req.ep_size, "DeepSpeed-MoE expert-parallel size (deepspeed.moe.layer.MoE ep_size); "
            "unset: the Hugging Face experts, ordinary parameters of every rank", gC)->type_name("E");
    sub->add_option_function<double>("--moe-capacity-factor", [&req](const double& v) { req.moe_capacity_factor = v; },
                                     "DeepSpeed-MoE capacity_factor (default 1.0; with --ep-size)")
        ->group(gT)->type_name("F");
    opt_str(sub, "--gpu-memory", req.gpu_memory, "Memory per GPU, e.g. 80GiB (overrides --gpu)", gC)->type_name("SIZE");
    opt_str(sub, "--host-memory", req.host_memory,
            "Installed host RAM per node, e.g. 1TiB; verdicts use it less host_os_reserve (kernel memmap 1/64, "
            "min watermark, OS baseline)", gC)->type_name("SIZE");
    opt_str(sub, "--host-reserve", req.host_reserve,
            "host_os_reserve per node, replacing the derived one (0 when --host-memory is what `free` shows "
            "available)", gC)->type_name("SIZE");
}

// Training settings: dtype, batch, sequence, checkpointing, optimizer, attention.
void add_training_options(CLI::App* sub, zeromem::Request& req) {
    const char* gT = "Training";
    opt_str(sub, "--dtype", req.dtype, "Model dtype: bf16 (default), fp16, fp32", gT)->type_name("DTYPE");
    opt_int(sub, "--micro-batch", req.micro_batch, "Micro batch per GPU (train_micro_batch_size_per_gpu); default 1", gT)->type_name("N");
    opt_int(sub, "--seq-len", req.seq_len,
            "Sequence length in tokens; default 2048. Under dynamic padding it is the longest batch's length, which "
            "sets the peak: the HF Trainer's default collator (DataCollatorWithPadding, given a tokenizer) pads each "
            "batch to its longest sample, so give the longest tokenized sample (truncation's max_length bounds it); "
            "group_by_length (LengthGroupedSampler) only groups similar lengths, and puts the longest batch first",
            gT)->type_name("N");
    opt_int(sub, "--grad-accum", req.grad_accum, "Gradient accumulation steps; default 1", gT)->type_name("N");
    opt_str(sub, "--gradient-checkpointing", req.checkpointing, "none (default), full or selective; alone: full (the HF Trainer's --gradient_checkpointing)", gT)->type_name("MODE");
    opt_str(sub, "--optimizer", req.optimizer, (std::string("optimizer whose states are counted: ") + zeromem::optimizer_names_help()).c_str(), gT)->type_name("NAME");
    opt_str(sub, "--attention", req.attention, "flash (default: no s^2 scores kept), eager, or auto: what the stack and model class run (SDPA from transformers 4.36 with torch >= 2.1.1, else eager)", gT)->type_name("KIND");
    sub->add_flag("--sequence-parallel", req.sequence_parallel, "Megatron sequence parallelism (with --tp > 1)")->group(gT);
}

// Which parameters train: --trainable-params, LoRA, quantized bases.
void add_trainable_options(CLI::App* sub, zeromem::Request& req) {
    const char* gT = "Training";
    opt_str(sub, "--trainable-params", req.trainable_params, "Parameters that are trained; the rest are frozen (no grads, no optimizer state)", gT)->type_name("COUNT");
    opt_int(sub, "--lora-rank", req.lora_rank, "Train LoRA adapters of rank R on a frozen base", gT)->type_name("R");
    opt_str(sub, "--lora-target", req.lora_targets, "Projections with adapters (default q,k,v,o; also gate,up,down)", gT)->type_name("LIST");
    opt_str(sub, "--load-in", req.load_in, "Frozen base weights quantized: 4bit (QLoRA NF4) or 8bit", gT)->type_name("BITS");
}

// Optimizer implementation, software versions and deepspeed.checkpointing.
void add_implementation_options(CLI::App* sub, zeromem::Request& req) {
    const char* gT = "Training";
    opt_str(sub, "--optimizer-impl", req.optimizer_impl, "fused (DeepSpeed's FusedAdam/DeepSpeedCPUAdam), torch (foreach AdamW) or torch-fused; default: DeepSpeed's under offload, else the HF Trainer's for the stack", gT)->type_name("KIND");
    opt_str(sub, "--deepspeed-version", req.deepspeed_version, "DeepSpeed version whose behaviour to follow (default: the installed one, else 0.19.6; newer than 0.19.6: followed as 0.19.6, with a warning)", gT)->type_name("V");
    opt_str(sub, "--torch-version", req.torch_version, "torch version (default: the installed one, else 2.8: the HF Trainer then uses fused AdamW)", gT)->type_name("V");
    opt_str(sub, "--transformers-version", req.transformers_version, "transformers version (default: the installed one, else 5.0)", gT)->type_name("V");
    opt_str(sub, "--stack", req.stack, "deepspeed=V,torch=V,transformers=V (over the installed ones); auto: also read the python3 on PATH; defaults: the built-in 0.19.6/2.8/5.0 (as ZEROMEM_STACK=defaults). By default the versions are read from $VIRTUAL_ENV, else $CONDA_PREFIX", gT)->type_name("LIST|auto|defaults");
    opt_str(sub, "--stack-from", req.stack_from, "Read the versions from a `pip freeze` output instead of the environment", gT)->type_name("FILE");
    sub->add_flag("--ds-checkpointing", req.ds_checkpointing,
                  "The model uses deepspeed.checkpointing, so the config's activation_checkpointing keys apply")->group(gT);
}

// ZeRO: stage, offload, zero.Init, gather on save, ZeRO++, MiCS, --ds-config.
void add_zero_options(CLI::App* sub, zeromem::Request& req) {
    const char* gZ = "ZeRO";
    opt_int(sub, "--stage", req.stage, "ZeRO stage 0..3; default 0 (or the DeepSpeed config's)", gZ)->type_name("0..3");
    opt_str(sub, "--offload-optimizer", req.offload_optimizer, "none, cpu or nvme", gZ)->type_name("DEVICE");
    opt_str(sub, "--offload-param", req.offload_param, "none, cpu or nvme (stage 3)", gZ)->type_name("DEVICE");
    sub->add_flag_function("--zero-init,!--no-zero-init",
                           [&req](std::int64_t count) { req.zero_init = count > 0; },
                           "Model built under deepspeed.zero.Init (default: on; --no-zero-init for a model loaded whole on every rank)")->group(gZ);
    sub->add_flag_function("--gather-on-save,!--no-gather-on-save",
                           [&req](std::int64_t count) { req.gather_on_save = count > 0; },
                           "stage3_gather_16bit_weights_on_model_save: rank 0 gathers the 16-bit weights on the host "
                           "at save (default: the DeepSpeed config's, else off)")->group(gZ);
    opt_int(sub, "--hpz-partition-size", req.hpz_partition_size,
            "ZeRO++ hpZ (stage 3): secondary 16-bit parameter partition over groups of H GPUs (zero_hpz_partition_size; usually GPUs per node)", gZ)->type_name("H");
    sub->add_flag_function("--quantized-weights,!--no-quantized-weights",
                           [&req](std::int64_t count) { req.quantized_weights = count > 0; },
                           "ZeRO++ qwZ (stage 3): int8 weight all-gathers (zero_quantized_weights)")->group(gZ);
    sub->add_flag_function("--quantized-gradients,!--no-quantized-gradients",
                           [&req](std::int64_t count) { req.quantized_gradients = count > 0; },
                           "ZeRO++ qgZ (stage 3, several nodes): int4 all-to-all gradient reduction (zero_quantized_gradients)")->group(gZ);
    opt_int(sub, "--mics-shard-size", req.mics_shard_size,
            "MiCS (stage 3): partition model states over groups of M GPUs, replicated across groups (mics_shard_size; -1 = off)", gZ)->type_name("M");
    sub->add_flag_function("--mics-hierarchical-gather,!--no-mics-hierarchical-gather",
                           [&req](std::int64_t count) { req.mics_hierarchical_gather = count > 0; },
                           "MiCS: gather across nodes, then inside the node (mics_hierarchical_params_gather)")->group(gZ);
    opt_str(sub, "--ds-config", req.ds_config, "DeepSpeed config JSON; \"auto\" values resolved the HF Trainer way; flags override it", gZ)->type_name("PATH");
}

// The workload: DPO/ORPO/PPO models and rollouts.
void add_workload_options(CLI::App* sub, zeromem::Request& req) {
    const char* gW = "Workload (preference and RLHF training)";
    opt_str(sub, "--workload", req.workload, "sft (default: one model), dpo (policy + frozen reference, pairs), orpo (pairs, no reference) or ppo (actor, critic, reward, reference + rollouts)", gW)->type_name("KIND");
    sub->add_flag("--precompute-ref-log-probs", req.precompute_ref_log_probs, "dpo: reference log-probs computed before training (no reference model while training)")->group(gW);
    opt_int(sub, "--ref-stage", req.ref_stage, "Reference model's ZeRO stage (default: 3 if the policy's is 3, else 0, as TRL and DeepSpeed-Chat)", gW)->type_name("0..3");
    opt_str(sub, "--ref-offload", req.ref_offload, "Reference model's offload_param: none or cpu (stage 3)", gW)->type_name("DEVICE");
    opt_str(sub, "--critic-model", req.critic_model, "ppo: critic preset (default: the actor's architecture with a value head)", gW)->type_name("NAME");
    opt_str(sub, "--critic-hf-config", req.critic_hf_config, "ppo: critic config.json", gW)->type_name("PATH");
    opt_int(sub, "--critic-stage", req.critic_stage, "ppo: critic's ZeRO stage (default: the actor's)", gW)->type_name("0..3");
    opt_str(sub, "--critic-offload", req.critic_offload, "ppo: critic's offload_optimizer: none, cpu or nvme (default: the actor's)", gW)->type_name("DEVICE");
    opt_str(sub, "--reward-model", req.reward_model, "ppo: reward preset (default: the critic's model)", gW)->type_name("NAME");
    opt_str(sub, "--reward-hf-config", req.reward_hf_config, "ppo: reward config.json", gW)->type_name("PATH");
    opt_int(sub, "--reward-stage", req.reward_stage, "ppo: reward model's ZeRO stage (default: 3 if the critic's is 3, else 0)", gW)->type_name("0..3");
    opt_str(sub, "--reward-offload", req.reward_offload, "ppo: reward model's offload_param: none or cpu (stage 3)", gW)->type_name("DEVICE");
    opt_int(sub, "--rollout-batch", req.rollout_batch, "ppo: sequences generated at once per GPU (default: --micro-batch)", gW)->type_name("N");
    opt_int(sub, "--rollout-prompt-len", req.rollout_prompt_len, "ppo: prompt tokens (default: half of --seq-len)", gW)->type_name("N");
    opt_int(sub, "--rollout-new-tokens", req.rollout_new_tokens, "ppo: generated tokens (default: the rest of --seq-len)", gW)->type_name("N");
}

// Generation during training (--eval-generate and its settings).
void add_generation_options(CLI::App* sub, zeromem::Request& req) {
    const char* gG = "Generation during training";
    sub->add_flag("--eval-generate", req.eval_generate,
                  "Evaluation runs model.generate between steps (Seq2SeqTrainer predict_with_generate): "
                  "adds a generation phase (KV cache, logits)")->group(gG);
    opt_int(sub, "--num-beams", req.num_beams, "Beams per prompt (generation_num_beams); default 1", gG)->type_name("N");
    opt_int(sub, "--max-new-tokens", req.max_new_tokens, "Tokens generated per prompt; default 20", gG)->type_name("N");
    opt_int(sub, "--eval-batch", req.eval_batch, "Prompts per GPU (per_device_eval_batch_size); default 8", gG)->type_name("N");
    opt_int(sub, "--prompt-len", req.prompt_len, "Prompt tokens; default --seq-len", gG)->type_name("N");
}

// The convention and the residual-state overrides (CUDA context, fragmentation, loading, host overhead).
void add_output_options(CLI::App* sub, zeromem::Request& req) {
    const char* gO = "Output";
    opt_str(sub, "--convention", req.convention, "full (default: what DeepSpeed allocates), deepspeed (its estimator), paper (ZeRO Table 1)", gO)->type_name("NAME");
    sub->add_flag("--legacy-zero2", req.legacy_zero2_formula,
                  "deepspeed convention: ZeRO-2 formula of DeepSpeed v0.4.2-v0.14.2 (4Ψ + 16Ψ/N)")->group(gO);
    opt_str(sub, "--cuda-context", req.cuda_context,
            "CUDA context per process (default: by GPU architecture and module loading, lazy from torch 1.13: ~400 MB; "
            "eager: 1000 MB)", gO)->type_name("SIZE");
    opt_str(sub, "--nccl-buffers", req.nccl_buffers,
            "NCCL communicator buffers per process (default: per communicator DeepSpeed creates, from NCCL's default "
            "buffer sizes and ring channels for the GPU's interconnect)", gO)->type_name("SIZE");
    opt_str(sub, "--cublas-workspace", req.cublas_workspace,
            "cuBLAS + cuBLASLt workspaces per process (default: PyTorch's, 2 handles x (8 MiB + 128 KiB, 32 MiB on "
            "Hopper) + 1 MiB))", gO)->type_name("SIZE");
    opt_str(sub, "--alloc-conf", req.alloc_conf,
            "PYTORCH_CUDA_ALLOC_CONF string, e.g. expandable_segments:True,max_split_size_mb:128: the caching "
            "allocator the simulator replays (and the replayed fragmentation allowance of estimate)", gO)->type_name("CONF");
    sub->add_option_function<double>("--fragmentation", [&req](const double& v) { req.fragmentation = v; },
                                      "Allocator fragmentation allowance, fraction of the peak (default: reserved - allocated of the simulator's replay; 0.05 where it cannot replay the model)")
        ->group(gO)->type_name("FRACTION");
    opt_str(sub, "--load-dtype", req.load_dtype, "dtype of the host copy at load time (default fp32)", gO)->type_name("DTYPE");
    opt_str(sub, "--load-path", req.load_path,
            "how from_pretrained materialises the model without zero.Init: host-copy (default, also low-cpu-mem: one "
            "host copy per rank), single-file (a non-sharded checkpoint beside the model, transformers < 4.50) or "
            "device-map (straight to the GPU)",
            gO)->type_name("PATH");
    opt_str(sub, "--host-overhead", req.host_overhead, "Host RAM of one training process before the model (default 1GiB)", gO)->type_name("SIZE");
    opt_str(sub, "--calibration", req.calibration,
            "Calibration profile from `zeromem calibrate --output`: its fitted process baseline (allocated in every "
            "phase), reserved share (the fragmentation fraction) and activation factor (at the micro batch and "
            "sequence it was fitted at) apply (same GPU type and stack only)", gO)->type_name("PROFILE.json");
    sub->add_flag("--force-calibration", req.force_calibration,
                  "Apply --calibration although it was fitted on another GPU type or software stack")->group(gO);
}

}  // namespace

/// Registers the model, cluster, training and ZeRO options of `estimate` on
/// `sub` (compare, plan and fit take the same ones), writing into `req`.
void add_request_options(CLI::App* sub, zeromem::Request& req) {
    add_model_options(sub, req);
    add_cluster_options(sub, req);
    add_training_options(sub, req);
    add_trainable_options(sub, req);
    add_implementation_options(sub, req);
    add_zero_options(sub, req);
    add_workload_options(sub, req);
    add_generation_options(sub, req);
    add_output_options(sub, req);
}

}  // namespace zeromem_cli
