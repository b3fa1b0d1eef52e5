// The ZeRO stages, written once against the Backend interface, one file per
// stage (stage0.cpp .. stage3.cpp; stages 1 and 2 share DeepSpeed's
// DeepSpeedZeroOptimizer layout in flat_partition.cpp). Each stage is a
// ParamStore for the model plus init / backward epilogue / optimizer step.
#pragma once

#include "zeromem/runtime/backend.h"
#include "zeromem/runtime/model.h"
#include "zeromem/types.h"

#include <memory>
#include <vector>

namespace zeromem::runtime {

/// What a stage needs: the backend, the model's shapes and the resolved
/// DeepSpeed settings (never an estimate).
struct StageContext {
    Backend* be = nullptr;
    const SyntheticModel* model = nullptr;
    ZeroSettings zero;
    DType model_dtype = DType::bf16;  ///< b_m
    DType accum_dtype = DType::bf16;  ///< b_a: data_types.grad_accum_dtype, default the model dtype
    DType comm_dtype = DType::bf16;   ///< b_c: communication_data_type, default the model dtype
    bool fused_optimizer = true;      ///< false: torch Adam's fp32 temporary of the partition size
    AdamParams adam;
};

/// One ZeRO stage. Call order: init, then per micro step forward (through
/// the ParamStore) / begin_backward / backward / end_backward, then step at
/// the accumulation boundary.
class ZeroStage : public ParamStore {
public:
    explicit ZeroStage(const StageContext& ctx) : c_(ctx), be_(*ctx.be) {}
    /// Allocates the model states as DeepSpeed's engine and optimizer build them.
    virtual void init() = 0;
    virtual void begin_backward(int micro_step) = 0;
    /// Gradient reduction epilogue; `boundary` = last micro step of the step.
    virtual void end_backward(bool boundary) = 0;
    /// The optimizer step (`step` 1-based) and the parameter update/all-gather.
    virtual void step(int step) = 0;
    /// Frees every tensor the stage holds.
    virtual void release_all() = 0;
    /// The N_d elements this rank's partition holds (for reports).
    virtual int64_t partition_numel() const = 0;

protected:
    /// Fills `offs` with each parameter's element offset in one flat,
    /// unpadded buffer of the model's parameters in model order (as DeepSpeed
    /// flattens a parameter group, utils.py flatten) and returns the total
    /// element count.
    int64_t flat_offsets(std::vector<int64_t>& offs) const {
        const auto& ps = c_.model->params();
        offs.resize(ps.size());
        int64_t n = 0;
        for (size_t i = 0; i < ps.size(); ++i) {
            offs[i] = n;
            n += ps[i].numel();
        }
        return n;
    }

    StageContext c_;
    Backend& be_;
};

/// Builds stage `c.zero.stage` (0..3). Throws InputError for a combination
/// the runtime does not run (NVMe offload).
std::unique_ptr<ZeroStage> make_stage(const StageContext& c);

std::unique_ptr<ZeroStage> make_stage0(const StageContext& c);
std::unique_ptr<ZeroStage> make_stage1(const StageContext& c);
std::unique_ptr<ZeroStage> make_stage2(const StageContext& c);
std::unique_ptr<ZeroStage> make_stage3(const StageContext& c);

}  // namespace zeromem::runtime
