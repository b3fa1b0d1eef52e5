// The architecture the runtime builds (arch.h).
#include "zeromem/runtime/arch.h"

#include "zeromem/types.h"

namespace zeromem::runtime {

ModelArch runtime_arch(const EstimateInput& in, int64_t layers) {
    if (!in.model.arch)
        throw InputError("measure: the runtime needs an architecture: give --model or --hf-config (not --params)");
    ModelArch a = *in.model.arch;
    if (layers < 0) throw InputError("--layers: must be a positive number of transformer blocks");
    if (layers > 0) a.num_layers = layers;
    return a;
}

}  // namespace zeromem::runtime
