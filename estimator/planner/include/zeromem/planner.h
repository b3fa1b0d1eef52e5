// Searches over ZeRO options built on estimate() (memory) and step_time()
// (speed): `zeromem compare`, `zeromem plan` (the ZeRO tuning
// recipe as a search), `zeromem fit`, and DeepSpeed config emission.
#pragma once

#include "zeromem/estimate.h"
#include "zeromem/speed.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zeromem {

/// One ZeRO choice: stage, where the optimizer and parameters live, and
/// activation checkpointing.
struct ZeroOption {
    int stage = 0;
    OffloadDevice offload_optimizer = OffloadDevice::none;
    OffloadDevice offload_param = OffloadDevice::none;
    Checkpointing checkpointing = Checkpointing::none;
    /// "ZeRO-2 + optimizer cpu, checkpointing full" style label.
    std::string label() const;
};

/// The stage/offload combinations `compare` and `plan` consider (stages
/// 0-3; optimizer offload cpu for stage 2, cpu/nvme for stage 3; parameter
/// offload cpu/nvme for stage 3), without checkpointing. DeepSpeed rejects
/// NVMe optimizer offload below stage 3 and parameter offload below stage 3.
std::vector<ZeroOption> stage_offload_options();

/// One evaluated configuration.
struct Candidate {
    ZeroOption option;
    int64_t micro_batch = 1;
    int64_t grad_accum = 1;
    Dtype dtype = Dtype::bf16;
    bool overlap_comm = false;
    int64_t reduce_bucket_size = 0;   ///< elements
    /// Generation during training evaluated with this candidate (unset:
    /// none); plan's step 8 may lower num_beams, eval batch, max_new_tokens.
    std::optional<GenerationSettings> generation;
    Estimate memory;                  ///< full estimate at this configuration
    StepTime time;
    bool fits = false;                ///< GPU fits, and host fits when its capacity is known
    /// Fits, but within the estimate's error band below the GPU capacity
    /// (memory.gpu_verdict "tight"): ranked after the options that fit.
    bool tight = false;
    /// ZeRO-Infinity host-RAM settings plan's step 10 changed (unset: the
    /// user's): zero_optimization.offload_param.buffer_size and
    /// sub_group_size (elements), offload_optimizer.pin_memory. The emitted
    /// config writes them (planner_detail::nvme_host_knobs).
    std::optional<int64_t> offload_param_buffer_size;
    std::optional<int64_t> sub_group_size;
    std::optional<bool> offload_optimizer_pin_memory;
};

/// Whether `a` ranks before `b` in compare and plan: fitting before not
/// fitting, then fitting-with-margin before tight, then more tokens/s.
bool ranks_before(const Candidate& a, const Candidate& b);

/// What replaying one configuration through the simulator with the GPU
/// capacity says (the faces inject it; the planner never links the simulator).
struct ReplayVerdict {
    bool fits = true;
    uint64_t peak_reserved = 0;  ///< bytes, memory_reserved() at its peak (up to the out-of-memory event)
    uint64_t peak_allocated = 0; ///< bytes, memory_allocated() at its peak
    /// Bytes the allocation that ran out of memory asked for (0 when it fits).
    uint64_t requested = 0;
    /// Where it ran out of memory, e.g. "backward, logits_grad in lm_head
    /// (Tried to allocate 3.91 GiB)"; empty when it fits.
    std::string reason;
};

/// Replays exactly the configuration `in` describes (capacity
/// in.cluster.gpu_memory); nullopt when the simulator cannot replay it (the
/// closed forms then decide alone).
using ReplayFits = std::function<std::optional<ReplayVerdict>(const EstimateInput&)>;

/// At most this many replays re-check plan's winner and its fallbacks.
constexpr int kMaxPlanReplays = 8;

/// Sets `in` to candidate `c`'s choices (stage, offload, checkpointing,
/// micro batch, accumulation, dtype, overlap_comm, buckets, and the
/// generation settings when the candidate has them).
void apply_candidate(const Candidate& c, EstimateInput& in);

/// apply_candidate, then the settings the file plan --emit writes implies (DeepSpeed's optimizer block, the HF
/// rules for the stage-3 buckets): the input whose estimate is plan's Winner figure.
void apply_as_emitted(const Candidate& c, EstimateInput& in);

/// The global batch compare and plan search over, one rule for every face:
/// the DeepSpeed config's train_batch_size when it has one; else, when the
/// user gave the micro batch or the accumulation (`batch_given`), micro batch
/// x accumulation x GPUs, the train_batch_size DeepSpeed derives from them;
/// else 16 per GPU.
int64_t search_global_batch(const EstimateInput& in, bool batch_given);

/// The per-GPU batch (global batch / GPUs). Throws InputError naming
/// --global-batch when it is not positive or not divisible by the GPU count.
int64_t per_gpu_batch(int64_t global_batch, int64_t gpus);

/// `zeromem compare`: every option of stage_offload_options() with and
/// without full checkpointing, each at its largest micro batch that fits and
/// divides the per-GPU batch (accumulation makes up the rest), sorted by
/// tokens/s (fitting options first). An option that does not fit even at
/// micro batch 1 is listed at micro batch 1 with fits = false. `base` gives
/// model, cluster (gpu_memory required), dtype, seq_len, buckets. Throws
/// InputError if the GPU memory is unknown.
std::vector<Candidate> compare_options(const EstimateInput& base, const SpeedHardware& hw, int64_t global_batch,
                                       const SpeedConstants& k = {});

/// One group of the ZeRO tuning recipe's speed ordering (stage 0 > 1 > 2 >
/// 2+offload > 3 > 3+offload, fastest first) and the row that stands for it.
struct OrderingGroup {
    std::string name;  ///< "stage 0", ..., "stage 3 + offload"
    int row = -1;      ///< index into the rows of the group's fastest fitting option; -1 when none fits
    bool evaluated = false;  ///< some row is in the group (false: DeepSpeed refuses the group's options)
};

/// The six groups in the recipe's order, each with its fastest fitting row
/// of `rows` (compare_options' result); ordering_statement judges these.
std::vector<OrderingGroup> ordering_groups(const std::vector<Candidate>& rows);

/// Plain sentences on where the compare result agrees with the ZeRO tuning recipe's
/// ordering stage 0 > 1 > 2 > 2+offload > 3 > 3+offload (fastest first) and
/// where it does not, and why (micro batch, communication, optimizer,
/// offload). Ties within 5% count as agreeing.
std::vector<std::string> ordering_statement(const std::vector<Candidate>& rows);

/// One step of the recipe walk.
struct PlanStep {
    int recipe_step = 0;     ///< 1..12, the ZeRO tuning recipe's numbering (zeromem/recipe.h)
    std::string action;      ///< what was tried
    std::string outcome;     ///< what happened and why the walk goes on or stops
    std::optional<Candidate> candidate;
};

/// The result of `plan`.
struct PlanResult {
    std::vector<PlanStep> steps;
    std::optional<Candidate> first_fit;   ///< the first configuration that fits at micro batch 1, grown (step 11)
    std::optional<Candidate> winner;      ///< best tokens/s over the whole search (step 12)
    uint64_t candidates = 0;              ///< configurations evaluated (memory + speed)
    /// One line per replay of the winner and its fallbacks (empty without a
    /// ReplayFits): "replayed: <option> ...: fits (peak reserved X GiB)" or
    /// "... runs out of memory at <where>; falling back to <next>".
    std::vector<std::string> replays;
    bool winner_replayed = false;         ///< the winner was replayed and fits
    /// Why there is no winner although the closed forms found one (every
    /// replayed candidate ran out of memory); empty otherwise.
    std::string no_winner;
    /// With PlanSpace::prefer_gather_on_save: "on" when the plan kept
    /// stage3_gather_16bit_weights_on_model_save on, "off" when nothing fit
    /// with it on and the plan fell back to the input's setting; empty
    /// otherwise.
    std::string gather_on_save;
};

/// Search space of plan's step 12.
struct PlanSpace {
    /// reduce_bucket_size candidates as multiples of the model-sized bucket
    /// (h^2 with an architecture, HF Trainer rule; else DeepSpeed's 5e8).
    std::vector<double> bucket_multipliers = {0.25, 0.5, 1, 2, 4};
    std::vector<Checkpointing> checkpointing = {Checkpointing::none, Checkpointing::selective, Checkpointing::full};
    std::vector<bool> overlap_comm = {false, true};
    /// Plan with zero_optimization.stage3_gather_16bit_weights_on_model_save
    /// on first (the HF Trainer's save_model writes consolidated 16-bit
    /// weights only with it), and with the input's setting only when nothing
    /// fits with it on (PlanResult::gather_on_save says which).
    bool prefer_gather_on_save = false;
};

/// `zeromem plan`: walks the ZeRO tuning recipe (zeromem/recipe.h) as a search:
/// micro batch 1 with accumulation; escalate (checkpointing, stage 2, +CPU
/// optimizer offload, stage 3, +parameter offload, +optimizer offload, lower
/// the generation defaults when only the generation phase overflows (step
/// 8: num_beams, then eval batch, then max_new_tokens, each the largest
/// value that fits), mixed precision, NVMe) until it fits; grow the micro batch; then search every
/// option x checkpointing x micro batch x overlap_comm x bucket size for the
/// best tokens/s, ranked by the closed forms (ranks_before). With
/// `replay_fits` the ranked winner is replayed with the GPU capacity before
/// it is returned; one that runs out of memory gives way to the next in the
/// ranking (each replay a line of PlanResult::replays), up to
/// kMaxPlanReplays replays; none left: no winner (PlanResult::no_winner).
/// No winner when nothing fits. Throws InputError if the GPU memory is unknown.
PlanResult plan(const EstimateInput& base, const SpeedHardware& hw, int64_t global_batch, const PlanSpace& space = {},
                const SpeedConstants& k = {}, const ReplayFits& replay_fits = {});

/// A DeepSpeed config for `c` on `base`'s model and cluster: integers where
/// DeepSpeed wants integers, train_batch_size = micro x accum x GPUs,
/// buckets sized for the model (reduce/allgather = the candidate's bucket;
/// stage 3 prefetch 0.9 h^2 and persistence threshold 10 h, the HF Trainer
/// rules, when the architecture is known). With `hf_trainer` the batch
/// sizes, gradient clipping and optimizer hyper-parameters are "auto".
nlohmann::json emit_ds_config(const Candidate& c, const EstimateInput& base, bool hf_trainer);

/// One row of DeepSpeed's all-options table (`compare --convention deepspeed`).
struct ConventionRow {
    int stage = 2;
    OffloadDevice offload_optimizer = OffloadDevice::none;
    OffloadDevice offload_param = OffloadDevice::none;
    bool zero_init = true;
    uint64_t per_gpu = 0;  ///< bytes, DeepSpeed's per-GPU figure
    uint64_t per_cpu = 0;  ///< bytes, DeepSpeed's per-CPU (per node) figure
};

/// The rows DeepSpeed's estimate_zero2_model_states_mem_needs_all_cold
/// (stage_1_and_2.py: offload_optimizer cpu, none) and
/// estimate_zero3_model_states_mem_needs_all_cold (stage3.py: offload_param
/// and offload_optimizer cpu/cpu, none/cpu, none/none, each with zero_init
/// 1 and 0) print, in their order, from estimate() at the deepspeed
/// convention on `base`'s model and cluster. Stages 0 and 1 and NVMe are
/// not covered by that convention and are left out.
std::vector<ConventionRow> deepspeed_all_options(const EstimateInput& base);

/// One row of `zeromem fit`: an option and its answer. `value` fits the
/// capacity; when the estimate there is "tight" (gpu_verdict: inside the
/// error band, or without an architecture a margin short of the activation
/// allowance) `tight` is set and `with_margin` is the answer that fits with
/// the margin ("fits"): more GPUs, or a smaller model.
struct FitRow {
    ZeroOption option;
    uint64_t value = 0;   ///< parameters (largest model) or GPUs (fewest GPUs); 0 = none found
    uint64_t per_gpu_total = 0;
    bool tight = false;   ///< the estimate at `value` fits only inside the error band
    /// The largest model / fewest GPUs whose verdict is "fits" (= value when not tight); 0 = none
    /// within the search (every answer is tight).
    uint64_t with_margin = 0;
    std::string note;     ///< why value is 0 or what else bounds it (e.g. host RAM unknown)
    bool unbounded = false;  ///< largest model: not bounded by GPU memory (value 0)
};

/// Whether row `a` ranks before `b` in fit's table: options whose answer fits with the margin (or is
/// unbounded) first, then those whose answer is tight, then those that do not fit; the option order
/// within each.
bool fit_ranks_before(const FitRow& a, const FitRow& b);

/// Largest model (parameters, no architecture: model states and buffers)
/// that fits per option on `base`'s cluster at its convention; 0 when not
/// even 1e6 parameters fit. Binary search on estimate(). Rows ranked by fit_ranks_before.
std::vector<FitRow> largest_model(const EstimateInput& base);

/// Fewest GPUs (up to `max_gpus`, whole nodes of `gpus_per_node` beyond one
/// node) on which `base`'s model fits, per option. value 0 = not within max_gpus.
/// Rows ranked by fit_ranks_before.
std::vector<FitRow> fewest_gpus(const EstimateInput& base, int64_t gpus_per_node, int64_t max_gpus = 65536);

/// What "tight" means for the estimates of `in` (its architecture and convention; `largest_model`: the
/// largest-model search, which has none), in the words the faces print under fit's table: the ledger's
/// error band, or the activation allowance without an architecture.
std::string tight_meaning(const EstimateInput& in, bool largest_model);

}  // namespace zeromem
