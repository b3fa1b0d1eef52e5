// What every face assumes for a training or host flag that is not given (and
// that no DeepSpeed config sets): one rule for the command line and the GUI.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace zeromem {

/// The defaults resolve_request applies: the TrainingSettings values it
/// leaves in place (micro batch, gradient accumulation, sequence length) and
/// no host RAM per node (unknown: host offload is not limited by it). A face
/// shows these in its fields when the user gave none.
struct RequestDefaults {
    int64_t micro_batch = 0;              ///< samples per GPU per micro step
    int64_t grad_accum = 0;               ///< gradient accumulation steps
    int64_t seq_len = 0;                  ///< tokens per sample
    std::optional<std::string> host_memory;  ///< --host-memory; unset: unknown
};

/// The defaults above, read from TrainingSettings' initial values.
RequestDefaults request_defaults();

}  // namespace zeromem
