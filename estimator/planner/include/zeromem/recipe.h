// The ZeRO tuning recipe: the twelve steps a DeepSpeed user follows to make a
// job fit and then make it fast, written once. `plan` walks them as a search,
// the estimate's advice names the steps its change corresponds to, and the
// faces print them.
#pragma once

#include <array>
#include <string>

namespace zeromem {

/// One step of the ZeRO tuning recipe.
struct RecipeStep {
    int number;               ///< 1..12
    const char* action;       ///< what the step does, e.g. "ZeRO stage 2"
    const char* explanation;  ///< why it saves memory or time, in DeepSpeed's terms
};

/// The recipe, in order:
///  1 micro batch 1, any effective batch through gradient accumulation;
///  2 gradient checkpointing; 3 ZeRO-2; 4 ZeRO-2 + offload_optimizer;
///  5 ZeRO-3; 6 offload_param to the CPU; 7 offload_optimizer to the CPU;
///  8 lower other defaults (e.g. the beam width of generate);
///  9 mixed precision (bf16 on Ampere and newer, fp16 before);
/// 10 ZeRO-Infinity (offload_param and offload_optimizer to NVMe);
/// 11 once micro batch 1 fits, raise the micro batch as far as it fits;
/// 12 tune for speed: turn offload off or lower the stage, re-tune the
///    micro batch, and measure throughput again.
const std::array<RecipeStep, 12>& tuning_recipe();

/// Step `number` (1..12) of the recipe; throws std::out_of_range otherwise.
const RecipeStep& recipe_step(int number);

/// "recipe step N: <action>".
std::string recipe_step_label(int number);

}  // namespace zeromem
