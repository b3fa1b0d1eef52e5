// Per-parameter optimizer state of every optimizer zeromem counts: what each
// implementation allocates per tensor it is handed, and which tensors it is
// handed under each ZeRO stage.
//
// Sources (read, not copied):
//  - bitsandbytes optim/optimizer.py Optimizer2State/Optimizer1State.init_state:
//    8-bit states are uint8 with one fp32 absmax per 256-element block
//    (blocks = ceil(n / 256)); a tensor with fewer than min_8bit_size = 4096
//    elements keeps fp32 states; get_state_buffer pages (CUDA unified memory)
//    only tensors of at least 1e5 elements; absmax is never paged.
//  - transformers optimization.py Adafactor._get_options/step: a tensor of
//    two or more dimensions keeps a factored second moment, one fp32 row
//    vector and one column vector (r + c values); a vector keeps a full fp32
//    second moment; exp_avg only when beta1 is set (the HF Trainer leaves it
//    None).
//  - torch.optim: SGD momentum_buffer (only with momentum != 0), Adagrad sum,
//    RMSprop square_avg: one fp32 state each.
//  - DeepSpeed v0.19.6 runtime/engine.py _configure_basic_optimizer (which
//    class each "optimizer.type" builds), ops/lion/cpu_lion.py (DeepSpeedCPULion
//    allocates exp_avg and exp_avg_sq), ops/adagrad/cpu_adagrad.py (exp_avg_sq).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "zeromem/model.h"
#include "zeromem/types.h"

namespace zeromem {

/// What one optimizer keeps per parameter element.
struct OptimizerInfo {
    const char* name;            ///< zeromem's name (to_string)
    int states;                  ///< full-size states per element (Adafactor: 1, factored)
    int bits;                    ///< 32, or 8 for the bitsandbytes 8-bit optimizers
    bool paged;                  ///< bitsandbytes paged: states in CUDA unified memory
    bool factored;               ///< Adafactor: factored second moment for matrices
    bool bitsandbytes;           ///< built by bitsandbytes (a client optimizer for DeepSpeed)
    const char* implementation;  ///< the class that allocates the states
};

/// The description of `o`.
const OptimizerInfo& optimizer_info(Optimizer o);

/// One group of equal tensors the optimizer is handed: `count` tensors of
/// rows x cols elements; cols == 0 for a 1-D tensor of `rows` elements.
struct StateTensor {
    uint64_t rows = 0;
    uint64_t cols = 0;
    uint64_t count = 1;
    uint64_t numel() const { return cols == 0 ? rows : rows * cols; }
};

/// Optimizer-state bytes on the tensors an optimizer is handed. `first` is
/// state1 (Adam m, momentum, Lion exp_avg, Adagrad sum, Adafactor exp_avg),
/// `second` state2 (Adam v, Adafactor second moment); both include their
/// 8-bit absmax. `constants` is the absmax part of them, `fp32_small` the
/// elements of tensors under min_8bit_size that keep fp32 states, `paged`
/// the state bytes bitsandbytes puts in CUDA unified memory.
struct OptimizerStateBytes {
    uint64_t first = 0;
    uint64_t second = 0;
    uint64_t constants = 0;
    uint64_t fp32_small = 0;
    uint64_t paged = 0;
    uint64_t total() const { return first + second; }
};

/// bitsandbytes' block of 8-bit state elements sharing one fp32 absmax
/// (optimizer.py init_state, blocksize = 256).
constexpr uint64_t kBnbBlockSize = 256;
/// bitsandbytes min_8bit_size default: smaller tensors keep fp32 states.
constexpr uint64_t kBnbMin8bitSize = 4096;
/// bitsandbytes get_state_buffer pages only tensors of at least 1e5 elements.
constexpr uint64_t kBnbPagedMin = 100000;

/// Sums what `o` allocates for `tensors` (formulas in the file comment).
/// `beta1`: Adafactor keeps exp_avg (ignored by the others).
OptimizerStateBytes count_optimizer_state(Optimizer o, const std::vector<StateTensor>& tensors, bool beta1 = false);

/// A flat 1-D partition of `numel` elements cut into chunks of at most
/// `chunk` elements (DeepSpeed stage 3 sub_group_size; stage 1/2: one chunk).
std::vector<StateTensor> flat_tensors(uint64_t numel, uint64_t chunk);

/// The parameter tensors of a dense decoder (embeddings, projections, MLP
/// matrices, biases and norms) with their shapes, rows split over `tp`.
/// Empty when the family has layouts this list does not cover (MoE, MLA,
/// encoder-decoder, vision towers) or the shapes do not sum to
/// count_params(a).total.
std::vector<StateTensor> model_state_tensors(const ModelArch& a, uint64_t tp);

/// Nominal optimizer-state bytes per element of one large flat tensor (the
/// paper convention's K - 4): Adam 8, 8-bit Adam 2 + 8/256, Adafactor on a
/// flat tensor 4 (unfactored), SGD without momentum 0.
double optimizer_state_bytes_per_element(Optimizer o);

/// The optimizer DeepSpeed builds for "optimizer.type" = `type`
/// (runtime/config.py DEEPSPEED_OPTIMIZERS, matched case-insensitively;
/// other names are torch.optim classes looked up case-sensitively by
/// engine.py _configure_basic_optimizer). `sgd_momentum`: params.momentum is
/// non-zero. Returns nullopt with `why` set for a type zeromem does not count.
std::optional<Optimizer> optimizer_from_ds_type(const std::string& type, bool sgd_momentum, std::string& why);

/// The class DeepSpeed builds from "optimizer.type" for optimizer `o`, as
/// text for reports: engine.py _configure_basic_optimizer (Adam/AdamW:
/// FusedAdam, DeepSpeedCPUAdam under offload, torch Adam(W) with torch_adam;
/// Adagrad and Lion: fused or CPU kernels; Lamb: FusedLamb; others torch.optim).
std::string deepspeed_optimizer_class(Optimizer o, bool torch_adam);

/// Whether DeepSpeed's ZeRO (stage >= 1) accepts the class it builds for
/// "optimizer.type" = `type` without "zero_allow_untested_optimizer": true.
/// engine.py _do_optimizer_sanity_check asserts it for classes outside
/// runtime/zero/utils.py ZERO_SUPPORTED_OPTIMIZERS (torch Adam, AdamW,
/// Adagrad, FusedAdam, DeepSpeedCPUAdam, DeepSpeedCPUAdagrad, FusedLion,
/// DeepSpeedCPULion, MuonWithAuxAdam); _configure_basic_optimizer builds
/// FusedLamb for Lamb, mup classes for MuAdam/MuAdamW/MuSGD and
/// torch.optim.<type> (SGD, RMSprop, ...) otherwise: none is listed.
/// The 1-bit optimizers count as tested here (they are refused under ZeRO
/// on their own).
bool zero_tested_optimizer_type(const std::string& type);

/// The HF Trainer `optim` values and zeromem names `--optimizer` accepts,
/// for help and error text.
const char* optimizer_names_help();

}  // namespace zeromem
