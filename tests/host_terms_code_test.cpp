// Host terms corrected against DeepSpeed v0.19.6's code after the
// simulator's host replay (simulator/src/host_events.cpp) disagreed with
// the estimator. Each expected value is derived by hand from the code cited.
// P = 7e9 parameters, 8 GPUs on one node, bf16: Pn = P/8 = 875e6 elements;
// P2(x) = PowerOf2Ceil (torch >= 1.11): P2(4·Pn = 3.5e9) = 2^32,
// P2(2·Pn = 1.75e9) = 2^31. Baseline 1 GiB per rank.
#include "estimate_inputs.h"
#include "zeromem/estimate.h"

#include <gtest/gtest.h>

using namespace zeromem;
using testinputs::params_input;
using testinputs::phase;

namespace {
constexpr uint64_t P = 7000000000, Pn = P / 8, ovh = 1ull << 30;
}

// stage_1_and_2.py: initialize_optimizer_states pins the fp32 gradient from
// a pageable torch.zeros (4·Pn) that lives until it returns, while
// __init__'s local temp_buffer_bit16 (the pageable torch.full source of the
// 16-bit staging, 2·Pn) is still alive. Load path device_map keeps the
// model load small (L · 4 B), so the engine's init sets the load peak:
// pinned master 2^32 + staging 2^31 + temp_grad_buffer P2(2·L) + gradient
// 2^32, plus 4·Pn + 2·Pn of sources.
TEST(HostTermsCode, Zero2OffloadInitHoldsBothPageableSources) {
    EstimateInput in = params_input(P, 8, 2, Dtype::bf16);
    const uint64_t L = 131072000;  // P2(2 x 131,072,000) = 2^28
    in.model.largest_layer_params = L;
    in.zero.offload_optimizer = OffloadDevice::cpu;
    in.residual.load_path = LoadPath::device_map;
    const Estimate e = estimate(in);
    const uint64_t pinned = (1ull << 32) + (1ull << 31) + (1ull << 28) + (1ull << 32);
    EXPECT_EQ(phase(e, "load").per_node.host_memory, 8 * (ovh + pinned + 4 * Pn + 2 * Pn));
}

// stage3.py _create_param_groups_fp16_flat_cpu_memory pins the 16-bit flat
// buffer whatever offload_param.pin_memory says: P2(2·Pn) = 2^31 pinned.
// Without pin_memory zero.Init's partitions are pageable (2·Pn) and still
// alive when the flat buffer is made (_move_to_flat_buffer frees them after).
TEST(HostTermsCode, Zero3ParamOffloadFlatBufferAlwaysPinned) {
    EstimateInput in = params_input(P, 8, 3, Dtype::bf16);
    in.model.largest_layer_params = 131072000;
    in.zero.offload_param = OffloadDevice::cpu;
    in.zero.offload_param_pin_memory = false;
    const Estimate e = estimate(in);
    EXPECT_EQ(e.per_node.host_pinned, 8 * (1ull << 31));
    EXPECT_EQ(phase(e, "optimizer_step").per_node.host_memory, 8 * (ovh + (1ull << 31)));
    EXPECT_EQ(phase(e, "load").per_node.host_memory, 8 * (ovh + (1ull << 31) + 2 * Pn));
}

// stage3.py _setup_for_real_optimizer pins grad_partitions_flat_buffer only
// when offload_optimizer.pin_memory, also under nvme: pin_memory false
// leaves it pageable and exact (2·Pn), and the only pinned bytes are the
// swap buffers: sub = min(1e9, Pn) = Pn = 875e6 fp32 elements, aligned to
// the 1,024 B aio block (256 elements): ceil(875e6 / 256) = 3,417,969 x 256
// = 875,000,064 elements = 3,500,000,256 B, 4 of them, page-locked exactly.
TEST(HostTermsCode, Zero3NvmeGradFlatBufferPinnedOnlyWithPinMemory) {
    EstimateInput in = params_input(P, 8, 3, Dtype::bf16);
    in.model.largest_layer_params = 131072000;
    in.zero.offload_optimizer = OffloadDevice::nvme;
    in.zero.offload_optimizer_pin_memory = false;
    const Estimate e = estimate(in);
    EXPECT_EQ(e.per_node.host_pinned, 8 * (4 * 3500000256ull));
    EXPECT_EQ(phase(e, "optimizer_step").per_node.host_memory, 8 * (ovh + 4 * 3500000256ull + 2 * Pn));
}

// partition_parameters.py Init creates the parameter swapper (its pinned
// pool: buffer_count 5 x buffer_size 1e8 elements x 2 B, each aligned to
// 512 elements: ceil(1e8 / 512) x 512 = 100,000,256, so 1,000,002,560 B)
// when zero.Init starts, so the pool sits under the model load (one module
// at a time, L x 4 B fp32): 8 x (1 GiB + 1,000,002,560 + 4·L) with L = 2e9
// (larger than every init buffer here: Pn = 875e6, flat max_in_cpu
// P2(2 x 875e6) = 2^31).
TEST(HostTermsCode, ZeroInitModelLoadIncludesTheParamSwapPool) {
    EstimateInput in = params_input(P, 8, 3, Dtype::bf16);
    in.model.largest_layer_params = 2000000000;
    in.zero.offload_param = OffloadDevice::nvme;
    const Estimate e = estimate(in);
    EXPECT_EQ(phase(e, "load").per_node.host_memory, 8 * (ovh + 1000002560ull + 4 * 2000000000ull));
}

// Before torch 1.11 pinned blocks are exact but still cached (the caching
// predates the rounding of pytorch/pytorch#69299): zero.Init's per-parameter
// partitions stay pinned at 2·Pn beside the flat buffer's exact 2·Pn.
TEST(HostTermsCode, StrandedPartitionsExactBeforeTorch111) {
    EstimateInput in = params_input(P, 8, 3, Dtype::bf16);
    in.model.largest_layer_params = 131072000;
    in.zero.offload_param = OffloadDevice::cpu;
    in.stack.torch = "1.10";
    const Estimate e = estimate(in);
    EXPECT_EQ(e.per_node.host_pinned, 8 * (2 * Pn + 2 * Pn));
    EXPECT_EQ(phase(e, "optimizer_step").per_node.host_memory, 8 * (ovh + 4 * Pn));
}

// DeepSpeed 0.16.3 (< 0.18.7) flattens the 16-bit parameters on the CPU in
// the first loop of stage_1_and_2.py __init__, before any offload buffer:
// 2·P (copies) + 2·P (flat) = 4·P = 28e9 B per rank on top of the baseline,
// its own moment (device_map keeps the model load at L x 4 B). The init
// buffers (master 2^32, gradient 2^32, temp grad 2^28, no staging before
// 0.17.0, plus the gradient's 3.5e9 pageable source) stay below it.
TEST(HostTermsCode, Zero12CpuFlattenIsItsOwnMoment) {
    EstimateInput in = params_input(P, 8, 2, Dtype::bf16);
    in.model.largest_layer_params = 131072000;
    in.zero.offload_optimizer = OffloadDevice::cpu;
    in.residual.load_path = LoadPath::device_map;
    in.stack.deepspeed = "0.16.3";
    const Estimate e = estimate(in);
    EXPECT_EQ(phase(e, "load").per_node.host_memory, 8 * (ovh + 4 * P));
    // 0.14.0 adds CPU Adam's 1 GiB tile buffer (built before the ZeRO optimizer).
    in.stack.deepspeed = "0.14.0";
    EXPECT_EQ(phase(estimate(in), "load").per_node.host_memory, 8 * (ovh + 4 * P + (1ull << 30)));
}
