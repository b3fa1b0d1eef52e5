// ZeRO stage 0 (producer.h): DeepSpeed v0.19.6 runtime/fp16/fused_optimizer.py
// FP16_Optimizer's load; its step is producer_step.cpp's stage 0 branch.
#include "producer.h"

namespace zeromem::sim::detail {

// Stage 0 (fused_optimizer.py FP16_Optimizer): the module in the model dtype
// on the GPU and, for 16-bit training, the fp32 flat master copy.
void Producer::init_fp16_optimizer() {
    for (uint32_t i = 0; i < mods_.size(); ++i)
        for (uint64_t p : mods_[i].params) alloc("parameter", bm_ * p, Stream::compute, i + 1);
    if (half_) alloc("fp32_master", 4 * T_, Stream::compute, root_);
}

}  // namespace zeromem::sim::detail
