// Core input types of the zeromem estimator.
//
// All sizes are in bytes (uint64_t) and all counts of tensor elements are
// int64_t "elements", exactly as DeepSpeed spells them in its config
// (DeepSpeed v0.19.6, deepspeed/runtime/zero/config.py). Defaults below are
// DeepSpeed's own code defaults (zero/config.py, offload_config.py,
// swap_tensor/constants.py), not its (sometimes different) docs.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

namespace zeromem {

/// Every user-facing input error (bad flag, bad file, bad JSON, impossible
/// batch arithmetic). The message names the field or path; the CLI prints it
/// on one line and exits nonzero.
class InputError : public std::runtime_error {
public:
    /// `what` with its control bytes (a newline or NUL from a file name or a
    /// file's text) written as \xNN, so the error stays one line and whole.
    explicit InputError(const std::string& what) : std::runtime_error(one_line(what)) {}
    explicit InputError(const char* what) : InputError(std::string(what)) {}

    static std::string one_line(const std::string& s) {
        static const char hex[] = "0123456789abcdef";
        std::string out;
        out.reserve(s.size());
        for (const char ch : s) {
            const auto c = static_cast<unsigned char>(ch);
            if ((c >= 0x20 && c != 0x7f) || c == '\t') {
                out.push_back(ch);
            } else {
                out += "\\x";
                out.push_back(hex[c >> 4]);
                out.push_back(hex[c & 15]);
            }
        }
        return out;
    }
};

/// Training dtype of the 16/32-bit model weights (DeepSpeed
/// engine.get_data_types): fp16 if fp16.enabled, else bf16 if bf16.enabled,
/// else fp32.
enum class Dtype { fp32, fp16, bf16 };

/// Bytes per element of a dtype: 4 for fp32, 2 for fp16/bf16.
inline int dtype_bytes(Dtype d) { return d == Dtype::fp32 ? 4 : 2; }
/// "fp32" / "fp16" / "bf16".
const char* to_string(Dtype d);
/// Parses "fp32|fp16|bf16" (also "float32", "float16", "bfloat16"); throws
/// InputError naming `field` otherwise.
Dtype parse_dtype(const std::string& text, const std::string& field);

/// Where DeepSpeed puts offloaded states: zero_optimization.offload_*.device.
enum class OffloadDevice { none, cpu, nvme };
const char* to_string(OffloadDevice d);
/// Parses "none|cpu|nvme"; throws InputError naming `field` otherwise.
OffloadDevice parse_offload_device(const std::string& text, const std::string& field);

/// Activation (gradient) checkpointing mode. `full` keeps only each layer's
/// input (Korthikanti et al. 2022, Table 2, "full recompute": 2sbh bytes per
/// layer); `selective` recomputes the attention core (sbh(10+24/t)).
enum class Checkpointing { none, full, selective };
const char* to_string(Checkpointing c);
Checkpointing parse_checkpointing(const std::string& text, const std::string& field);

/// Who builds the optimizer DeepSpeed steps (engine.py _configure_optimizer).
enum class OptimizerBuilder { deepspeed, client };

/// The software versions whose behaviour the full convention follows, as
/// dotted version strings ("0.19.6", "2.8", "5.0"). Defaults: the newest the
/// project's references describe (DeepSpeed v0.19.6, torch 2.8,
/// transformers 5.0).
struct SoftwareStack {
    std::string deepspeed = "0.19.6";
    std::string torch = "2.8";
    std::string transformers = "5.0";
};

/// Compares dotted versions numerically ("2.10" > "2.8"): negative, zero or
/// positive. Throws InputError naming `field` when a part is not a number.
int compare_versions(const std::string& a, const std::string& b, const std::string& field);

/// Optimizer whose per-parameter state is counted (estimator/include/
/// zeromem/optimizer_state.h describes each: states, bits, paging).
/// adam/adamw: m and v, 8 B/param; sgd (with momentum): 4 B/param;
/// sgd_plain: torch SGD without momentum, no state; the bitsandbytes 8-bit
/// and paged optimizers, Lion, Adagrad, RMSprop, Lamb and Adafactor.
/// The fp32 master copy (4 B/param) is counted separately.
enum class Optimizer {
    adamw, adam, sgd, sgd_plain, adagrad, rmsprop, lion, lamb,
    adamw_8bit, paged_adamw_8bit, paged_adamw_32bit, lion_8bit, paged_lion_8bit, paged_lion_32bit, adafactor
};
const char* to_string(Optimizer o);
/// Parses zeromem's names and the HF Trainer's `optim` values
/// (transformers training_args.py OptimizerNames); throws InputError naming
/// `field` otherwise.
Optimizer parse_optimizer(const std::string& text, const std::string& field);
/// Whole optimizer-state bytes per element of a large tensor besides the
/// master weights (8-bit: 2, rounded down from 2 + 8/256; Adafactor on a flat
/// tensor: 4). Exact sums: count_optimizer_state (optimizer_state.h).
int optimizer_state_bytes(Optimizer o);

/// Which accounting to report.
///  - paper:     ZeRO paper Sec. 5 model states, K = 12 (mixed-precision Adam)
///  - deepspeed: bit-exact DeepSpeed estimate_zero{2,3}_model_states_mem_needs
///  - full:      what DeepSpeed v0.19.6 really allocates (default)
enum class Convention { paper, deepspeed, full };
const char* to_string(Convention c);
Convention parse_convention(const std::string& text, const std::string& field);

/// The `zero_optimization` block of a DeepSpeed config, with DeepSpeed's code
/// defaults (v0.19.6 runtime/zero/config.py, offload_config.py). Element
/// counts are counts of tensor elements, not bytes.
struct ZeroSettings {
    int stage = 0;                                  ///< 0..3
    OffloadDevice offload_optimizer = OffloadDevice::none;
    OffloadDevice offload_param = OffloadDevice::none;
    bool offload_optimizer_pin_memory = true;       ///< true since v0.19.5
    bool offload_param_pin_memory = true;           ///< true since v0.19.5
    int64_t offload_optimizer_buffer_count = 4;     ///< nvme swap buffers
    int64_t offload_param_buffer_count = 5;         ///< nvme swap buffers
    int64_t offload_param_buffer_size = 100000000;  ///< elements
    int64_t offload_param_max_in_cpu = 1000000000;  ///< elements
    double offload_optimizer_ratio = 1.0;
    bool zero_init = true;            ///< model built under deepspeed.zero.Init (stage 3)
    bool contiguous_gradients = true;
    bool reduce_scatter = true;
    int64_t reduce_bucket_size = 500000000;         ///< elements
    int64_t allgather_bucket_size = 500000000;      ///< elements
    std::optional<bool> overlap_comm;               ///< unset: true iff stage == 3
    int64_t sub_group_size = 1000000000;            ///< elements (stage 3)
    int64_t stage3_prefetch_bucket_size = 50000000; ///< elements
    int64_t stage3_param_persistence_threshold = 100000;  ///< elements per param
    int64_t stage3_model_persistence_threshold = std::numeric_limits<int64_t>::max();
    int64_t stage3_max_live_parameters = 1000000000;      ///< elements
    int64_t stage3_max_reuse_distance = 1000000000;       ///< elements
    bool stage3_gather_16bit_weights_on_model_save = false;
    /// Top-level "aio" block (DeepSpeed runtime/swap_tensor/aio_config.py
    /// defaults): bytes per NVMe request and requests in flight.
    int64_t aio_block_size = 1048576;
    int64_t aio_queue_depth = 8;
    /// Top-level `zero_force_ds_cpu_optimizer` (default true): with ZeRO
    /// optimizer offload DeepSpeed refuses a client optimizer that is not
    /// DeepSpeedCPUAdam (engine.py _configure_optimizer, ZeRORuntimeException).
    bool zero_force_ds_cpu_optimizer = true;
    /// Top-level `zero_allow_untested_optimizer` (default false; the HF
    /// Trainer sets it when the config has no "optimizer" block). Recorded.
    bool zero_allow_untested_optimizer = false;

    // ZeRO++ (Wang et al. 2023, arXiv:2306.10209) and MiCS (Zhang et al.
    // 2022, arXiv:2205.00119), stage 3 only; defaults = off, as DeepSpeed's
    // runtime/zero/config.py.
    /// hpZ: a secondary 16-bit parameter partition over groups of this many
    /// ranks (partition_parameters.py _partition_param_sec); <= 1 = off.
    int64_t zero_hpz_partition_size = 1;
    /// qwZ: forward/backward all-gathers move int8 weights + fp32 scales
    /// (partition_parameters.py CUDAQuantizer, all_gather_coalesced).
    bool zero_quantized_weights = false;
    /// qgZ: gradients reduced by a two-level int4 all-to-all
    /// (runtime/comm/coalesced_collectives.py all_to_all_quant_reduce).
    bool zero_quantized_gradients = false;
    /// MiCS: model states partitioned over groups of this many ranks,
    /// replicated across groups (runtime/zero/mics.py); <= 0 = off
    /// (DeepSpeed default -1, engine.py tests mics_shard_size() > 0).
    int64_t mics_shard_size = -1;
    /// MiCS: gather across nodes first, then within the node (mics.py
    /// _hierarchical_all_gather_params); same bytes per rank.
    bool mics_hierarchical_params_gather = false;
    /// zero_optimization.memory_efficient_linear (default true): ZeRO-3's
    /// zero.Init replaces torch.nn.functional.linear with zero3_linear_wrap
    /// (runtime/zero/partition_parameters.py Init.__init__,
    /// _enable_mem_efficient_linear). false keeps torch's linear, whose saved
    /// weight.t() view holds each gathered Linear weight until its backward
    /// (terms.h zero3_retained_linear_weights). Read only at stage 3.
    bool memory_efficient_linear = true;
    /// The ZeRO-3 partition group size: mics_shard_size when MiCS is on,
    /// else `data_parallel` (N_d).
    int64_t partition_size(int64_t data_parallel) const {
        return stage == 3 && mics_shard_size > 0 ? mics_shard_size : data_parallel;
    }
    /// hpZ is active: stage 3 and zero_hpz_partition_size > 1.
    bool hpz_active() const { return stage == 3 && zero_hpz_partition_size > 1; }

    /// DeepSpeed's validator `overlap_comm_valid`: default true for stage 3
    /// only.
    bool overlap_comm_effective() const { return overlap_comm.value_or(stage == 3); }
};

/// Training-loop settings that size memory.
struct TrainingSettings {
    Dtype dtype = Dtype::bf16;                  ///< model (16-bit) dtype
    std::optional<Dtype> grad_accum_dtype;      ///< data_types.grad_accum_dtype; unset = model dtype
    std::optional<Dtype> communication_dtype;   ///< communication_data_type; unset = model dtype
    int64_t micro_batch = 1;                    ///< train_micro_batch_size_per_gpu
    int64_t grad_accum = 1;                     ///< gradient_accumulation_steps
    std::optional<int64_t> train_batch_size;    ///< must equal micro x accum x N_d when set
    int64_t seq_len = 2048;                     ///< tokens per sample
    Checkpointing checkpointing = Checkpointing::none;
    Optimizer optimizer = Optimizer::adamw;
    double gradient_clipping = 1.0;             ///< DeepSpeed default since v0.19.3
    bool flash_attention = true;                ///< no s^2 attention-score term when true
    bool sequence_parallel = false;             ///< Megatron sequence parallelism (with tp > 1)

    /// Optimizer implementation. true: DeepSpeed's FusedAdam / DeepSpeedCPUAdam
    /// (built when the DeepSpeed config has an "optimizer" block; updates in
    /// place). false: the client's torch.optim Adam(W) (HF Trainer without an
    /// "optimizer" block), whose multi-tensor step allocates an fp32
    /// temporary the size of the rank's partition (e.g. sqrt(exp_avg_sq)).
    bool fused_optimizer = false;

    /// Who builds the optimizer. deepspeed: the config's "optimizer" block
    /// (FusedAdam, DeepSpeedCPUAdam, or torch Adam(W) with torch_adam);
    /// client: the training script / HF Trainer passes its own (a DeepSpeed
    /// config without an "optimizer" block). Unset: not known; zeromem then
    /// assumes DeepSpeed's under optimizer offload (the only one DeepSpeed
    /// accepts there by default) and the client's otherwise.
    std::optional<OptimizerBuilder> optimizer_builder;
    /// A client optimizer known to be torch's fused AdamW (true) or its
    /// foreach AdamW (false). Unset: the HF Trainer's default for the
    /// software stack (adamw_torch_fused from torch 2.8 with transformers
    /// >= 4.54, huggingface/transformers#37358; adamw_torch before).
    std::optional<bool> client_fused;
    /// optimizer.params.torch_adam: DeepSpeed builds torch.optim Adam(W),
    /// the foreach implementation, instead of FusedAdam
    /// (engine.py _configure_basic_optimizer).
    bool torch_adam = false;

    /// Parameters that require gradients. Unset: all of them. Frozen
    /// parameters cost only their storage: no gradient, no optimizer state.
    std::optional<uint64_t> trainable_params;
    int64_t lora_rank = 0;                      ///< LoRA rank r; 0 = no LoRA
    std::string lora_targets = "q,k,v,o";       ///< projections with adapters: q,k,v,o,gate,up,down
    /// Storage of the frozen base weights: 16 = the model dtype, 8 = int8
    /// (LLM.int8, 1 B/param), 4 = NF4 (QLoRA, 0.5 B/param + fp32 absmax per
    /// 64-element block = 0.5625 B/param).
    int load_in_bits = 16;

    // DeepSpeed's activation_checkpointing block. Effective only when the
    // model calls deepspeed.checkpointing (Megatron-DeepSpeed); HF models use
    // torch checkpointing (ds_checkpointing_api = false).
    bool ds_checkpointing_api = false;
    bool partition_activations = false;  ///< split checkpoints across tensor-parallel ranks
    bool cpu_checkpointing = false;      ///< keep checkpoints in host RAM
    std::optional<int64_t> number_checkpoints;
};

/// The cluster. N_d (data-parallel degree) = gpus / (tp x pp).
struct ClusterSettings {
    int64_t gpus = 1;                          ///< total GPUs (N)
    int64_t nodes = 1;                         ///< must divide gpus
    std::string gpu_name;                      ///< preset name, empty if unknown
    std::optional<uint64_t> gpu_memory;        ///< bytes per GPU
    /// bytes per node a job can use: the given size less host_reserve
    std::optional<uint64_t> host_memory;
    uint64_t host_reserve = 0;                 ///< host_os_reserve already taken from host_memory, bytes
    int64_t tp = 1;                            ///< tensor-parallel size
    int64_t pp = 1;                            ///< pipeline-parallel size
    /// Compute capability, major x 10 + minor (90 = Hopper); 0 unknown.
    /// Sizes the CUDA context, NCCL's channels and cuBLAS's workspace
    /// (process_terms.h). Set from the GPU preset.
    int compute_capability = 0;
    /// The interconnect preset inside a node (data/interconnects name, e.g.
    /// "nvlink-gen4"); empty unknown. Sizes NCCL's ring channels.
    std::string intra_interconnect;
    int64_t gpus_per_node() const { return gpus / nodes; }
    /// N_d = gpus / (tp x pp).
    int64_t data_parallel() const { return gpus / (tp * pp); }
};

/// Where each resolved setting came from, for --explain. Key: the DeepSpeed
/// key path ("zero_optimization.stage") or the zeromem setting name; value: a
/// human sentence ("--stage", "ds_config.json:/zero_optimization/stage",
/// "auto -> hidden_size^2 = 16777216 (HF Trainer rule)", "default").
using Provenance = std::map<std::string, std::string>;

}  // namespace zeromem
