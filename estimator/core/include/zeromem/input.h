// The resolved input: everything one estimate, simulation or measurement is given (the model, the
// cluster, training, ZeRO and residual settings, the software stack). Part of zeromem_core, so the
// simulator and the runtime read it without the memory model; estimate.h includes it.
#pragma once

#include "zeromem/model.h"
#include "zeromem/moe.h"
#include "zeromem/types.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace zeromem {

/// How a training run generates during evaluation (--eval-generate: the HF
/// Seq2SeqTrainer with predict_with_generate, or a callback calling
/// model.generate between optimizer steps).
struct GenerationSettings {
    int64_t num_beams = 1;              ///< GenerationConfig.num_beams (default 1); Seq2SeqTrainingArguments.generation_num_beams
    int64_t eval_batch = 8;             ///< prompts per GPU: TrainingArguments.per_device_eval_batch_size (default 8)
    std::optional<int64_t> prompt_len;  ///< prompt tokens; unset: the training seq_len
    /// Tokens generated. 20: GenerationConfig's max_length default when
    /// nothing is set (counted as new tokens, an upper bound for
    /// decoder-only models whose prompt counts against max_length).
    int64_t max_new_tokens = 20;
};

struct WorkloadSettings;  // workload.h
struct ModuleTree;        // module_tree.h

/// The model as the estimator sees it.
struct ModelInfo {
    std::string name;                   ///< preset name, config path or "7e9 params"
    uint64_t params = 0;                ///< Ψ, total parameters
    uint64_t largest_layer_params = 0;  ///< largest single module's own params (DeepSpeed's L)
    std::optional<ModelArch> arch;      ///< set when built from a preset or config.json
    /// The model as the user built it (--module-tree), when given: the
    /// simulator replays its modules, in place of the architecture's.
    std::shared_ptr<const ModuleTree> tree;
};

struct EstimateInput;

/// Named, overridable figures for the residual states that no formula gives.
/// How the Hugging Face loader (transformers modeling_utils.py
/// PreTrainedModel.from_pretrained) materialises a model that is not built
/// under deepspeed.zero.Init:
///  - host_copy (default): one host copy of the model per rank. Without a
///    device_map both loaders give it: before transformers ~4.50 a randomly
///    initialised model filled shard by shard (safetensors shards are
///    file-backed page cache), from ~4.50 (#36033) and in 5 the meta device
///    with parameters materialised one after another (low_cpu_mem_usage).
///  - single_file: low_cpu_mem_usage=False before ~4.50 with a single
///    non-sharded checkpoint: the whole 16-bit state dict is loaded beside the
///    model (transformers modeling_utils.py, the `state_dict =
///    load_state_dict(resolved_archive_file)` path before the model is built).
///  - device_map: device_map={"": local_rank} / "auto": each parameter is
///    materialised straight on its GPU, the host holds at most one at a time.
/// Under ZeRO-3 with the HF DeepSpeed integration (is_deepspeed_zero3_enabled)
/// from_pretrained builds under zero.Init and refuses a device_map.
enum class LoadPath { host_copy, single_file, device_map };

/// What a fragmentation replay gives (ResidualSettings::fragmentation_provider):
/// the allowance every phase takes, and the load phase's own.
struct FragmentationAllowance {
    uint64_t bytes = 0;       ///< reserved - allocated at the allocated peak (or at the replay's OOM)
    uint64_t load_bytes = 0;  ///< the same at the load phase's allocated peak (or at an OOM there)
};

struct ResidualSettings {
    /// CUDA context per process, bytes (--cuda-context). Unset: the table
    /// by architecture and module loading (process_terms.h
    /// cuda_context_figure).
    std::optional<uint64_t> cuda_context;
    /// NCCL communicator buffers per process, bytes (--nccl-buffers). Unset:
    /// sized per communicator (process_terms.h nccl_communicators).
    std::optional<uint64_t> nccl_buffers;
    /// cuBLAS + cuBLASLt workspaces per process, bytes (--cublas-workspace).
    /// Unset: PyTorch's defaults (process_terms.h cublas_workspaces).
    std::optional<uint64_t> cublas_workspaces;
    /// Allocated bytes every phase of the run held beyond the modelled terms,
    /// fitted by a calibration profile (calibration_profile.h: measured minus
    /// estimated torch.cuda.memory_allocated at the run's earliest reading).
    /// Inside the caching allocator, so it counts in allocated and reserved. 0
    /// without --calibration.
    uint64_t process_baseline = 0;
    /// Factor on the activations, fitted by a calibration profile when the run
    /// did not state its micro batch or sequence length (the estimate then
    /// stands in with the defaults). 1 without --calibration.
    double activation_scale = 1.0;
    /// PYTORCH_CUDA_ALLOC_CONF the run uses (e.g. "expandable_segments:True"),
    /// read by the simulator's replay of the fragmentation allowance; empty:
    /// PyTorch's defaults. The estimator does not parse it.
    std::string alloc_conf;
    /// Allocator fragmentation allowance as a fraction of the allocated
    /// peak (reserved-but-unallocated memory of PyTorch's caching
    /// allocator). 0.05: a few percent of capacity, the share public
    /// ZeRO memory reports show. Set to 0 for an allocated-only figure.
    double fragmentation_fraction = 0.05;
    /// Allocator fragmentation allowance in bytes, used in every phase in
    /// place of fragmentation_fraction x allocated bytes when set (the faces
    /// set it from the simulator's replay, simulator.h replay_fragmentation).
    std::optional<uint64_t> fragmentation_bytes;
    /// The load phase's own allowance, when the replay sized it (reserved -
    /// allocated at the load phase's allocated peak): the segments that
    /// later phases fragment do not exist yet at deepspeed.initialize.
    /// Unset: the load phase takes fragmentation_bytes like every phase.
    std::optional<uint64_t> load_fragmentation_bytes;
    /// Where fragmentation_bytes comes from, for --explain and the notes
    /// (e.g. "simulator replay: peak reserved - peak allocated").
    std::string fragmentation_source;
    /// Called by estimate() (full convention) when fragmentation_bytes is
    /// unset: returns the allowance in bytes for the input it is given, or
    /// nullopt to fall back to fragmentation_fraction. Empty by default; the
    /// faces inject the simulator's replay here when the user did not pass
    /// --fragmentation, so the estimator never links the simulator and the
    /// planner's loops get a figure per evaluated option.
    std::function<std::optional<FragmentationAllowance>(const EstimateInput&)> fragmentation_provider;
    /// Source text stated for figures that come from fragmentation_provider.
    std::string fragmentation_provider_source;
    /// dtype the checkpoint is materialised in on the host at load time
    /// (without zero.Init every rank holds a full copy). fp32 matches
    /// DeepSpeed's estimator (4 B x P per process, stage3.py).
    Dtype load_dtype = Dtype::fp32;
    /// How the model is loaded without zero.Init. Unset: host_copy, what
    /// from_pretrained does without a device_map under every launcher.
    std::optional<LoadPath> load_path;
    /// Host RAM of one training process before any model state: the
    /// PyTorch and CUDA libraries and the host side of the CUDA context.
    /// 1 GiB per rank (a PyTorch + CUDA process's resident set before
    /// loading a model is typically 1-3 GB; user case C15 ran out of host
    /// RAM with 99% of it taken by model copies). Override with
    /// --host-overhead.
    uint64_t host_process_overhead = 1073741824;
};

/// Everything one estimate needs.
struct EstimateInput {
    ModelInfo model;
    ClusterSettings cluster;
    TrainingSettings train;
    ZeroSettings zero;
    ResidualSettings residual;
    Convention convention = Convention::full;
    /// deepspeed convention, ZeRO-2 without offload: the formula of
    /// DeepSpeed v0.4.2-v0.14.2 (4Ψ + 16Ψ/N) instead of the current 2Ψ + 18Ψ/N.
    bool legacy_zero2_formula = false;
    /// DeepSpeed estimators' additional_buffer_factor for host memory.
    double additional_buffer_factor = 1.5;
    /// DeepSpeed / torch / transformers versions whose behaviour is followed
    /// (optimizer implementation, HF Trainer defaults).
    SoftwareStack stack;
    /// Mixture-of-experts: expert parallelism and token dispatch (zeromem/moe.h).
    MoeSettings moe;
    /// The other models sharing the GPUs (--workload dpo|orpo|ppo;
    /// workload.h); null for sft. estimate() ignores it (it estimates this
    /// one model); memory_estimate() and the planner sum them.
    std::shared_ptr<const WorkloadSettings> workload;
    /// Evaluation with model.generate between optimizer steps (--eval-generate):
    /// the full convention adds a "generation" phase. Needs an architecture.
    std::optional<GenerationSettings> generation;
};

}  // namespace zeromem
