#include "zeromem/recipe.h"

#include <stdexcept>

namespace zeromem {

const std::array<RecipeStep, 12>& tuning_recipe() {
    static const std::array<RecipeStep, 12> steps = {{
        {1, "micro batch 1, accumulation for the global batch",
         "activations scale with the micro batch; gradient accumulation keeps the effective batch"},
        {2, "enable gradient checkpointing",
         "keeps only each layer's input and recomputes the rest in backward (HF Trainer --gradient_checkpointing)"},
        {3, "ZeRO stage 2", "partitions the gradients and the optimizer states over the data-parallel GPUs"},
        {4, "ZeRO-2 with offload_optimizer cpu",
         "the fp32 master weights and Adam's moments live in host RAM and the CPU runs the optimizer step"},
        {5, "ZeRO stage 3", "also partitions the 16-bit parameters, gathered one module at a time"},
        {6, "offload_param cpu", "the 16-bit parameter partitions live in host RAM between uses"},
        {7, "offload_optimizer cpu", "ZeRO-3 with the optimizer states in host RAM as well"},
        {8, "lower other defaults", "e.g. a smaller beam width for generate: fewer KV caches"},
        {9, "mixed precision", "bf16 on Ampere and newer GPUs, fp16 before: half the bytes per parameter and activation"},
        {10, "ZeRO-Infinity: offload_param and offload_optimizer to NVMe",
         "parameters and optimizer states on NVMe, with pinned swap buffers in host RAM"},
        {11, "raise the micro batch as far as it fits", "fewer, larger micro steps run the GPU more efficiently"},
        {12, "tune for speed: lower the stage / turn offload off, re-tune micro batch, buckets, overlap_comm",
         "less partitioning and offload means less communication and transfer per step"},
    }};
    return steps;
}

const RecipeStep& recipe_step(int number) {
    if (number < 1 || number > 12) throw std::out_of_range("recipe step " + std::to_string(number));
    return tuning_recipe()[static_cast<size_t>(number - 1)];
}

std::string recipe_step_label(int number) {
    return "recipe step " + std::to_string(number) + ": " + recipe_step(number).action;
}

}  // namespace zeromem
