// From what the user typed (flags, a preset, a config.json, a DeepSpeed
// config) to one resolved EstimateInput, recording where each value came from.
#pragma once

#include "zeromem/estimate.h"
#include "zeromem/gpu.h"
#include "zeromem/stack_detect.h"
#include "zeromem/workload.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace zeromem {

/// What --from's file gave (zeromem/launch_file.h), kept with the request
/// it was merged into so that the resolution can say where values came from.
struct LaunchTrail {
    std::string path;
    std::string kind;  ///< "LLaMA-Factory training YAML", "accelerate config YAML", "TrainingArguments JSON"
    /// flag -> "FILE line N: key" ("--micro-batch" -> "train.yaml line 27: per_device_train_batch_size").
    std::map<std::string, std::string> sources;
    std::vector<std::string> notes;     ///< keys without effect on memory, launcher defaults applied
    std::vector<std::string> warnings;  ///< keys zeromem does not know (ignored)
    /// The file's model could not be resolved: the error, raised only when no model flag replaces it.
    std::string model_error;
};

/// The user's request, unparsed where the text carries units ("80GiB",
/// "7B"). Unset optionals mean the flag was not given.
struct Request {
    std::optional<std::string> params;           ///< --params: "7e9", "7B", "1.3b"
    std::optional<std::string> model;            ///< --model: preset name in data/models
    std::optional<std::string> hf_config;        ///< --hf-config: path to config.json
    std::optional<std::string> largest_layer_params;  ///< --largest-layer-params (count)
    std::optional<std::string> module_tree;      ///< --module-tree: a module tree JSON (zeromem/module_tree.h)
    std::optional<int64_t> gpus;                 ///< --gpus: total GPUs (N_d)
    std::optional<int64_t> nodes;                ///< --nodes
    std::optional<std::string> gpu;              ///< --gpu: preset name in data/gpus
    std::optional<std::string> gpu_memory;       ///< --gpu-memory: size per GPU
    std::optional<std::string> host_memory;      ///< --host-memory: size per node
    std::optional<std::string> host_reserve;     ///< --host-reserve: host_os_reserve per node (replaces the derived one)
    std::optional<std::string> dtype;            ///< --dtype
    std::optional<int64_t> micro_batch;          ///< --micro-batch
    std::optional<int64_t> seq_len;              ///< --seq-len
    std::optional<int64_t> grad_accum;           ///< --grad-accum
    std::optional<std::string> checkpointing;    ///< --gradient-checkpointing
    std::optional<std::string> optimizer;        ///< --optimizer
    std::optional<std::string> attention;        ///< --attention flash|eager|auto (unset: flash)
    std::optional<int64_t> stage;                ///< --stage
    std::optional<std::string> offload_optimizer;  ///< --offload-optimizer
    std::optional<std::string> offload_param;    ///< --offload-param
    std::optional<bool> zero_init;               ///< --zero-init / --no-zero-init
    std::optional<std::string> ds_config;        ///< --ds-config: DeepSpeed JSON path
    std::optional<std::string> convention;       ///< --convention
    bool legacy_zero2_formula = false;           ///< --legacy-zero2
    std::optional<std::string> cuda_context;     ///< --cuda-context: size
    std::optional<std::string> nccl_buffers;     ///< --nccl-buffers: size
    std::optional<std::string> cublas_workspace; ///< --cublas-workspace: size
    std::optional<std::string> alloc_conf;       ///< --alloc-conf: PYTORCH_CUDA_ALLOC_CONF
    std::optional<double> fragmentation;         ///< --fragmentation: fraction
    std::optional<std::string> load_dtype;       ///< --load-dtype
    std::optional<std::string> load_path;        ///< --load-path
    std::optional<std::string> host_overhead;    ///< --host-overhead: size per process
    std::optional<std::string> calibration;      ///< --calibration: a calibration profile (calibration_profile.h)
    bool force_calibration = false;              ///< --force-calibration: apply it on another GPU type or stack
    std::optional<int64_t> tp;                   ///< --tp
    std::optional<int64_t> pp;                   ///< --pp
    bool sequence_parallel = false;              ///< --sequence-parallel
    std::optional<std::string> trainable_params; ///< --trainable-params (count)
    std::optional<int64_t> lora_rank;            ///< --lora-rank
    std::optional<std::string> lora_targets;     ///< --lora-target q,k,v,o
    std::optional<std::string> load_in;          ///< --load-in 4bit|8bit
    std::optional<std::string> optimizer_impl;   ///< --optimizer-impl fused|torch|torch-fused
    std::optional<std::string> deepspeed_version;     ///< --deepspeed-version
    std::optional<std::string> torch_version;         ///< --torch-version
    std::optional<std::string> transformers_version;  ///< --transformers-version
    std::optional<std::string> stack;                 ///< --stack deepspeed=V,torch=V,transformers=V | auto | defaults
    std::optional<std::string> stack_from;            ///< --stack-from FILE: a `pip freeze` output
    /// The environment variables the installed stack is read from (the CLI
    /// fills them; all empty: nothing is read, the built-in stack is used).
    StackEnvironment environment;
    bool ds_checkpointing = false;               ///< --ds-checkpointing
    std::optional<bool> gather_on_save;          ///< --gather-on-save / --no-gather-on-save (stage 3)
    std::optional<int64_t> ep_size;              ///< --ep-size: DeepSpeed-MoE expert-parallel size
    std::optional<double> moe_capacity_factor;   ///< --moe-capacity-factor (DeepSpeed-MoE)
    std::optional<int64_t> hpz_partition_size;   ///< --hpz-partition-size: zero_hpz_partition_size (ZeRO++ hpZ)
    std::optional<bool> quantized_weights;       ///< --quantized-weights / --no-quantized-weights (ZeRO++ qwZ)
    std::optional<bool> quantized_gradients;     ///< --quantized-gradients / --no-quantized-gradients (ZeRO++ qgZ)
    std::optional<int64_t> mics_shard_size;      ///< --mics-shard-size: mics_shard_size (MiCS)
    std::optional<bool> mics_hierarchical_gather;  ///< --mics-hierarchical-gather: mics_hierarchical_params_gather
    // --- workloads (workload.h) ---
    std::optional<std::string> workload;         ///< --workload sft|dpo|orpo|ppo
    bool precompute_ref_log_probs = false;       ///< --precompute-ref-log-probs (dpo)
    std::optional<int64_t> ref_stage;            ///< --ref-stage 0..3 (dpo, ppo)
    std::optional<std::string> ref_offload;      ///< --ref-offload none|cpu
    std::optional<std::string> critic_model;     ///< --critic-model preset (ppo)
    std::optional<std::string> critic_hf_config; ///< --critic-hf-config path (ppo)
    std::optional<int64_t> critic_stage;         ///< --critic-stage 0..3
    std::optional<std::string> critic_offload;   ///< --critic-offload none|cpu|nvme (optimizer states)
    std::optional<std::string> reward_model;     ///< --reward-model preset (ppo)
    std::optional<std::string> reward_hf_config; ///< --reward-hf-config path (ppo)
    std::optional<int64_t> reward_stage;         ///< --reward-stage 0..3
    std::optional<std::string> reward_offload;   ///< --reward-offload none|cpu
    std::optional<int64_t> rollout_batch;        ///< --rollout-batch sequences generated at once per GPU
    std::optional<int64_t> rollout_prompt_len;   ///< --rollout-prompt-len tokens
    std::optional<int64_t> rollout_new_tokens;   ///< --rollout-new-tokens tokens
    // Generation during training: evaluation with model.generate.
    bool eval_generate = false;                  ///< --eval-generate
    std::optional<int64_t> num_beams;            ///< --num-beams (default 1)
    std::optional<int64_t> max_new_tokens;       ///< --max-new-tokens (default 20)
    std::optional<int64_t> eval_batch;           ///< --eval-batch: prompts per GPU (default 8)
    std::optional<int64_t> prompt_len;           ///< --prompt-len (default --seq-len)
    // A launcher's own file (launch_file.h).
    std::optional<std::string> from;             ///< --from FILE
    LaunchTrail launch;                          ///< filled by merge_launch_file (kind empty: not merged yet)
};

/// The resolved input plus what --explain needs.
struct Resolved {
    EstimateInput input;
    Provenance provenance;          ///< setting -> where it came from
    std::optional<GpuSpec> gpu;     ///< the --gpu preset, if given
    std::vector<std::string> warnings;  ///< printed on stderr by the CLI
    /// DeepSpeed config keys read but without effect on memory, one line
    /// each (ds_config_notes); printed on stderr by the CLI as notes.
    std::vector<std::string> notes;
    /// A calibration profile set the fragmentation fraction: the simulator's
    /// replay must not replace it (sim::use_replayed_fragmentation).
    bool fragmentation_fitted = false;
    /// With --calibration: the header line naming the terms taken from the
    /// profile (calibration_profile.h CalibrationApplied); empty otherwise.
    std::string calibration;
    /// --workload and its models (sft: none beyond `input`).
    WorkloadSettings workload;
};

/// Resolves `req`: defaults, then the DeepSpeed config (with "auto" filled
/// the HF Trainer way), then command-line flags, which win. Presets are read
/// from `data_dir`. Throws InputError for every bad input, naming the flag,
/// file or key.
Resolved resolve_request(const Request& req, const std::string& data_dir);

/// The --workload part of resolve_request (workload_request.cpp): fills
/// `r.workload` from `req` and `r.input` (the policy's), with TRL's and
/// DeepSpeed-Chat's defaults (a frozen model at stage 3 when its trained
/// counterpart is, else 0). Throws InputError naming the flag for a bad
/// value or a flag the workload does not take.
void resolve_workload(const Request& req, Resolved& r, const std::string& data_dir);

/// The software stack part of resolve_request (stack_request.cpp): the
/// built-in stack, then the versions installed in `req.environment` (or
/// --stack-from's pip freeze file; none under --stack defaults or
/// ZEROMEM_STACK=defaults), then --stack NAME=V, then the single-version
/// flags. Each version's source goes to `r.provenance` ("stack.torch"); a
/// version newer than the newest known is followed as the newest known, with
/// a warning. Throws InputError naming the flag or setting for a bad version.
void resolve_stack(const Request& req, Resolved& r);

/// The architecture as the resolved stack builds it: from transformers 5 the MoE families that
/// pack their routed experts into one module (StackFacts::packs_moe_experts,
/// ModelArch::packs_experts_from_transformers_5) get fused_experts, and the largest module counted
/// from the architecture becomes the packed experts where they are larger. A module tree, which
/// lists the modules as built, and --largest-layer-params win.
void apply_stack_to_architecture(const Request& req, Resolved& r);

/// The --module-tree part of resolve_request (module_tree_request.cpp): the
/// tree's counts (total, trainable from requires_grad, largest module) over
/// the model resolved so far. The architecture, for activations, is
/// --model's or --hf-config's, else the one the config the tree carries
/// describes, else none (activations not estimated, as with --params, and a
/// warning says so). Throws InputError naming the flag, file, line and field
/// of a bad tree, or a flag giving what the tree gives (--params,
/// --trainable-params, --lora-rank).
void apply_module_tree(const Request& req, Resolved& r);

/// Throws InputError naming --workload when `r` holds a workload of several
/// models (dpo, orpo, ppo) and `subcommand` models one model only.
void require_single_model(const Resolved& r, const std::string& subcommand);

}  // namespace zeromem
