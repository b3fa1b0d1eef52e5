// The architecture the runtime builds. Reads only the resolved input (core), so
// the runtime, and `validate` holding a measurement against an estimate, share
// it without the runtime linking the estimator's memory part.
#pragma once

#include "zeromem/input.h"
#include "zeromem/model.h"

#include <cstdint>

namespace zeromem::runtime {

/// The architecture the runtime builds: `in`'s ModelArch with `layers`
/// blocks (0 keeps its own). Throws InputError when `in` has no architecture.
ModelArch runtime_arch(const EstimateInput& in, int64_t layers);

}  // namespace zeromem::runtime
