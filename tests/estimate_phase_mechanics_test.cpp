// Acceptance tests of the phase mechanics: residual and host states per
// phase, trainable vs frozen parameters, parallel layout.
//
// Every expected value is a published number (the comment names the
// source: the paper section or the DeepSpeed file and function) or
// arithmetic written out here from such a source. None is a pasted zeromem
// output. GiB = 2^30 B.
#include "zeromem/estimate.h"
#include "zeromem/model.h"
#include "zeromem/terms.h"

#include "estimate_inputs.h"
#include "phase_test_helpers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

using namespace zeromem;

namespace {

using phasetest::add_lora;
using phasetest::ceil_div;
using phasetest::d;
using testinputs::params_input;
using testinputs::phase;
using testinputs::preset_input;

// ===========================================================================
// 2. Phase mechanics
// ===========================================================================

// Adam's m and v are allocated by the optimizer at its first step()
// (torch.optim AdamW _init_group, DeepSpeedCPUAdam step: lazily):
// absent in load, forward and backward of the first step, present from the
// optimizer step on (4 B x partition each).
TEST(Phases, AdamMomentsAppearAtTheFirstStep) {
    for (int stage : {0, 1, 2, 3}) {
        EstimateInput in = preset_input("llama-2-7b", 8, stage, Dtype::bf16);
        const Estimate e = estimate(in);
        const uint64_t numel = stage == 0 ? e.trainable_params : ceil_div(e.trainable_params, 8);
        for (const char* p : {"load", "forward", "backward"}) {
            EXPECT_EQ(phase(e, p).per_gpu.momentum, 0u) << stage << p;
            EXPECT_EQ(phase(e, p).per_gpu.variance, 0u) << stage << p;
        }
        for (const char* p : {"optimizer_step", "steady_backward", "checkpoint_save"}) {
            EXPECT_EQ(phase(e, p).per_gpu.momentum, 4 * numel) << stage << p;
            EXPECT_EQ(phase(e, p).per_gpu.variance, 4 * numel) << stage << p;
        }
        EXPECT_EQ(phase(e, "steady_backward").per_gpu.total - phase(e, "backward").per_gpu.total >= 8 * numel, true);
    }
}

// Gradient storage: stages 0-2 have none before the first backward
// (autograd creates param.grad in backward; ZeRO-2's grads_in_partition is
// allocated at the first reduction, stage_1_and_2.py copy_grads_in_partition);
// ZeRO-3's grad_partitions_flat_buffer exists from init (stage3.py
// _setup_for_real_optimizer). The ZeRO-3 load peak
// is the larger of two moments (stage3.py initialize_optimizer_states): the
// fp32 gradient_buffer of the largest sub-group, 4 x min(1e9, P/N) =
// 3.5e9 B, freed before the IPG bucket (1e9 B) and the flat gradient buffer
// (1.75e9 B) exist; here the first is larger, so the load phase holds no
// gradient buffer yet.
TEST(Phases, GradientStorageAppearsInBackward) {
    const uint64_t P = 7000000000, Pn = P / 8;
    for (int stage : {0, 1, 2, 3}) {
        const Estimate e = estimate(params_input(P, 8, stage, Dtype::bf16));
        // ZeRO-1: full param.grad + rank 0's grads_in_partition at the boundary.
        const uint64_t grads = stage == 0 ? 2 * P : (stage == 1 ? 2 * P + 2 * Pn : 2 * Pn);
        EXPECT_EQ(phase(e, "forward").per_gpu.gradients, stage == 3 ? grads : 0u) << stage;
        EXPECT_EQ(phase(e, "backward").per_gpu.gradients, grads) << stage;
        EXPECT_EQ(phase(e, "load").per_gpu.gradients, 0u) << stage;
    }
    const Estimate z3 = estimate(params_input(P, 8, 3, Dtype::bf16));
    EXPECT_EQ(phase(z3, "load").per_gpu.temporary_buffers, 4 * Pn);
    // With sub_group_size 1e8 the later moment is larger: IPG + flat buffer.
    EstimateInput small = params_input(P, 8, 3, Dtype::bf16);
    small.zero.sub_group_size = 100000000;
    const Estimate z3s = estimate(small);
    EXPECT_EQ(phase(z3s, "load").per_gpu.gradients, 2 * Pn);
    EXPECT_EQ(phase(z3s, "load").per_gpu.temporary_buffers, 500000000ull * 2ull);
}

// ZeRO-1/2 without offload: DeepSpeed v0.19.6 stage_1_and_2.py
// initialize_optimizer_states gives the fp32 master partition a gradient of
// zeros on the GPU (single_grad_partition = torch.zeros(partition_size,
// dtype=fp32, device=self.device); self.device is the GPU unless
// cpu_offload) and sets it to None before it returns. The load's moments:
// the module beside its flat copy (flatten on the GPU), 2P + 2P; then the
// flat copy, the fp32 master 4·Tn and that gradient 4·Tn. On one GPU
// (Tn = P, 7e9 a multiple of 2·N_d) the second is larger: 2P + 8P = 10P,
// the "Tried to allocate" of a ZeRO-2 init OOM (4·Tn); on 8 the first
// (4P > 2P + 8·P/8), and the gradient's own peak is 4·P/8.
TEST(Phases, ZeroOneTwoInitHoldsTheFp32GradientOfZeros) {
    const uint64_t P = 7000000000;
    for (int stage : {1, 2}) {
        const Estimate one = estimate(params_input(P, 1, stage, Dtype::bf16));
        const GpuMemory& ld = phase(one, "load").per_gpu;
        EXPECT_EQ(ld.parameters, 2 * P) << stage;
        EXPECT_EQ(ld.optimizer_states, 4 * P) << stage;
        EXPECT_EQ(ld.gradients, 4 * P) << stage;
        EXPECT_EQ(one.load_component_peaks.parameters, 4 * P) << stage;  // module + flat copy, earlier
        EXPECT_EQ(one.load_component_peaks.gradients, 4 * P) << stage;
        EXPECT_EQ(phase(one, "forward").per_gpu.gradients, 0u) << stage;  // freed before it returned

        const Estimate eight = estimate(params_input(P, 8, stage, Dtype::bf16));
        EXPECT_EQ(phase(eight, "load").per_gpu.parameters, 4 * P) << stage;
        EXPECT_EQ(phase(eight, "load").per_gpu.gradients, 0u) << stage;
        EXPECT_EQ(eight.load_component_peaks.gradients, 4 * (P / 8)) << stage;

        EstimateInput off = params_input(P, 1, stage, Dtype::bf16);
        off.zero.offload_optimizer = OffloadDevice::cpu;  // the gradient is made on the CPU
        EXPECT_EQ(estimate(off).load_component_peaks.gradients, 0u) << stage;
    }
}

// The phases come in time order, and first_oom_phase is the first that
// overflows, not the largest.
TEST(Phases, NamesInTimeOrderAndFirstOom) {
    EstimateInput in = preset_input("llama-3-8b", 1, 2, Dtype::bf16);
    const Estimate e = estimate(in);
    const char* names[] = {"load", "forward", "backward", "optimizer_step", "steady_backward", "checkpoint_save"};
    ASSERT_EQ(e.phases.size(), 6u);
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(e.phases[i].name, names[i]);
    // A capacity between the backward and the steady backward totals: the
    // first overflow is the optimizer step (larger than both).
    in.cluster.gpu_memory = phase(e, "backward").per_gpu.total + 1;
    const Estimate v = estimate(in);
    EXPECT_EQ(v.first_oom_phase, "optimizer_step");
    EXPECT_EQ(v.peak_phase, "optimizer_step");
    EXPECT_TRUE(phase(v, "backward").fits_gpu.value_or(false));
}

// Checkpoint save, host side: torch.save copies each GPU optimizer storage to the host, the
// largest being one fp32 partition (4 x sub at stage 3, 4 x ceil(P/N) at
// stages 1-2) per rank; stages 0-2 also clone the 16-bit module state to the
// CPU on the writer rank (engine.py _save_checkpoint,
// clone_tensors_for_torch_save), 2 B x P once per node. With
// stage3_gather_16bit_weights_on_model_save rank 0 copies the consolidated
// 16-bit state dict to the CPU, 2 B x P, and the GPU gathers one module at a
// time (engine _zero3_consolidated_16bit_state_dict). Per node figures are
// the worst node, rank 0's.
TEST(Phases, CheckpointSaveGather) {
    EstimateInput in = preset_input("llama-2-7b", 16, 3, Dtype::bf16);
    in.cluster.nodes = 2;
    const Estimate off = estimate(in);
    in.zero.stage3_gather_16bit_weights_on_model_save = true;
    const Estimate on = estimate(in);
    const uint64_t P = on.trainable_params;
    const uint64_t L = in.model.largest_layer_params;
    const uint64_t Tn = (P + 15) / 16;  // sub = min(1e9, Tn) = Tn
    EXPECT_EQ(phase(on, "checkpoint_save").per_node.host_memory - phase(on, "optimizer_step").per_node.host_memory,
              8 * 4 * Tn + 2 * P);
    EXPECT_EQ(phase(off, "checkpoint_save").per_node.host_memory - phase(off, "optimizer_step").per_node.host_memory,
              8 * 4 * Tn);
    EXPECT_EQ(phase(on, "checkpoint_save").per_gpu.temporary_buffers -
                  phase(off, "checkpoint_save").per_gpu.temporary_buffers,
              2 * L);
    in.zero.stage = 2;
    const Estimate z2 = estimate(in);
    EXPECT_EQ(phase(z2, "checkpoint_save").per_node.host_memory - phase(z2, "optimizer_step").per_node.host_memory,
              2 * P + 8 * 4 * Tn);
}

// zero_init off: every one of the g ranks of a node materialises the model
// in host RAM in the load dtype (4 B by default, DeepSpeed's 4·g·P term in
// estimate_zero3_model_states_mem_needs), plus the named per-process
// overhead (--host-overhead).
TEST(Phases, LoadWithoutZeroInit) {
    const uint64_t P = 7000000000;
    EstimateInput in = params_input(P, 8, 3, Dtype::bf16);
    in.model.largest_layer_params = 131072000;
    in.zero.zero_init = false;
    in.residual.host_process_overhead = 0;
    EXPECT_EQ(phase(estimate(in), "load").per_node.host_memory, 8 * P * 4);
    in.residual.host_process_overhead = 3ull << 30;
    EXPECT_EQ(phase(estimate(in), "load").per_node.host_memory, 8 * (P * 4 + (3ull << 30)));
    in.residual.load_dtype = Dtype::bf16;
    EXPECT_EQ(phase(estimate(in), "load").per_node.host_memory, 8 * (P * 2 + (3ull << 30)));
    // zero.Init: one module at a time per rank (8 x L x 2 B), but then
    // stage3.py _create_fp16_partitions_with_defragmentation stages every
    // 16-bit partition in a pageable CPU buffer (zero/utils.py defragment):
    // 2 B x P/8 per rank, the larger.
    in.zero.zero_init = true;
    EXPECT_EQ(phase(estimate(in), "load").per_node.host_memory, 8 * (2 * (P / 8) + (3ull << 30)));
    EXPECT_GT(2 * (P / 8), 131072000ull * 2);
}

// activation_checkpointing (DeepSpeed runtime/activation_checkpointing/
// config.py, checkpointing.py): the keys act
// only with deepspeed.checkpointing (--ds-checkpointing). cpu_checkpointing
// moves the checkpointed layer inputs (L x 2sbh, Korthikanti "full
// recompute") to host RAM: g times that per node, and off the GPU.
// partition_activations splits them over tensor-parallel ranks only; with
// tp = 1 it saves nothing.
TEST(Phases, DeepSpeedActivationCheckpointing) {
    EstimateInput in = preset_input("llama-2-7b", 8, 2, Dtype::bf16);
    in.train.micro_batch = 2;
    in.train.seq_len = 4096;
    in.train.checkpointing = Checkpointing::full;
    const double ckpts = 32.0 * 2.0 * 4096.0 * 2.0 * 4096.0;  // layers x 2sbh
    const Estimate base = estimate(in);

    in.train.cpu_checkpointing = true;  // without --ds-checkpointing: ignored
    const Estimate ignored = estimate(in);
    EXPECT_EQ(phase(ignored, "forward").per_gpu.activations, phase(base, "forward").per_gpu.activations);
    EXPECT_EQ(phase(ignored, "forward").per_node.host_memory, phase(base, "forward").per_node.host_memory);

    in.train.ds_checkpointing_api = true;
    const Estimate cpu = estimate(in);
    EXPECT_NEAR(d(phase(base, "forward").per_gpu.activations) - d(phase(cpu, "forward").per_gpu.activations), ckpts, 2.0);
    EXPECT_NEAR(d(phase(cpu, "forward").per_node.host_memory) - d(phase(base, "forward").per_node.host_memory),
                8.0 * ckpts, 16.0);
    EXPECT_EQ(phase(cpu, "optimizer_step").per_node.host_memory, phase(base, "optimizer_step").per_node.host_memory);

    in.train.cpu_checkpointing = false;
    in.train.partition_activations = true;  // tp = 1
    EXPECT_EQ(phase(estimate(in), "forward").per_gpu.activations, phase(base, "forward").per_gpu.activations);

    // tp = 2 (N_d = 4): the checkpoints are split in two.
    in.cluster.tp = 2;
    const uint64_t split = phase(estimate(in), "forward").per_gpu.activations;
    in.train.partition_activations = false;
    const uint64_t whole = phase(estimate(in), "forward").per_gpu.activations;
    EXPECT_NEAR(d(whole) - d(split), ckpts / 2.0, 2.0);
}

// ZeRO-2 CPU offload host memory per rank (DeepSpeed v0.19.6, torch 2.8):
// pinned, each buffer
// rounded up to a power of two by PyTorch's CachingHostAllocator
// (PowerOf2Ceil): the fp32 master P2(4·P/N) (stage_1_and_2.py __init__,
// weights_partition), the fp32 gradient partition P2(4·P/N)
// (initialize_optimizer_states), the 16-bit staging P2(b_m·P/N) and
// temp_grad_buffer_for_cpu_offload P2(L·b_m) (+ b_m·P/N accumulation buffers
// with GAS > 1, unrounded without an architecture); pageable: Adam m, v
// 8·P/N (DeepSpeedCPUAdam, at the first step). pin_memory false: nothing is
// pinned or rounded, the bytes stay. P/N = 875e6: P2(3.5e9) = 2^32,
// P2(1.75e9) = 2^31, P2(2 x 131072000) = 2^28.
TEST(Phases, OffloadPinnedVsPageable) {
    const uint64_t P = 7000000000, L = 131072000, N = 8, Pn = P / N, ovh = 1ull << 30;
    EstimateInput in = params_input(P, 8, 2, Dtype::bf16);
    in.model.largest_layer_params = L;
    in.zero.offload_optimizer = OffloadDevice::cpu;
    const uint64_t pinned = (1ull << 32) + (1ull << 32) + (1ull << 31) + (1ull << 28);
    const uint64_t pageable = 8 * Pn;
    Estimate e = estimate(in);
    EXPECT_EQ(e.per_node.host_pinned, 8 * pinned);
    EXPECT_EQ(phase(e, "optimizer_step").per_node.host_memory, 8 * (pinned + pageable + ovh));
    // Adam's m and v come at the first step: the first forward holds less.
    EXPECT_EQ(phase(e, "forward").per_node.host_memory, 8 * (pinned + ovh));
    // The pinned buffers are built by deepspeed.initialize, in the load
    // phase; there the 8 fp32 copies of the model materialised without
    // zero.Init (4·P each) are larger than the offloaded states.
    EXPECT_EQ(phase(e, "load").per_node.host_pinned, 8 * pinned);
    EXPECT_EQ(phase(e, "load").per_node.host_memory, 8 * (4 * P + ovh));

    in.train.grad_accum = 4;
    e = estimate(in);
    EXPECT_EQ(e.per_node.host_pinned, 8 * (pinned + 2 * Pn));

    in.zero.offload_optimizer_pin_memory = false;
    e = estimate(in);
    EXPECT_EQ(e.per_node.host_pinned, 0u);
    EXPECT_EQ(phase(e, "optimizer_step").per_node.host_memory, 8 * ((4 + 4 + 2) * Pn + 2 * L + 2 * Pn + pageable + ovh));

    // ZeRO-3 with zero.Init (stage3.py _setup_for_real_optimizer,
    // initialize_optimizer_states):
    // pinned fp32 gradients per sub-group (one here, sub = P/N) P2(4·P/N) +
    // grad_partitions_flat_buffer P2(b_a·P/N); pageable master 4·P/N (at
    // init) and Adam 8·P/N (at the first step). The load phase adds its
    // largest transient: the init gradient_buffer 4·sub beside the pageable
    // source of the flat buffer b_a·P/N (stage3.py initialize_optimizer_states).
    // Per stage3.py, gradient_buffer is freed when initialize_optimizer_states
    // returns, before grad_partitions_flat_buffer exists: the load peak is at
    // the sub-group gradient's pinning, init - P2(b_a·P/N) + 4·sub
    // (gradient_buffer) + 4·sub (its pageable zeros) = init + 8·Pn - 2^31
    // (4.85e9 B), above the flat buffer's own source b_a·Pn = 1.75e9 B.
    in = params_input(P, 8, 3, Dtype::bf16);
    in.model.largest_layer_params = L;
    in.zero.offload_optimizer = OffloadDevice::cpu;
    e = estimate(in);
    const uint64_t pinned3 = (1ull << 32) + (1ull << 31);
    EXPECT_EQ(e.per_node.host_pinned, 8 * pinned3);
    EXPECT_EQ(phase(e, "load").per_node.host_memory, 8 * (pinned3 + 4 * Pn + (8 * Pn - (1ull << 31)) + ovh));
    EXPECT_EQ(phase(e, "optimizer_step").per_node.host_memory, 8 * (pinned3 + 12 * Pn + ovh));
}

// NVMe (ZeRO-Infinity): the drive holds the fp32 master, m, v and fp32
// gradients (16 B) and the 16-bit parameters (2 B): 18 B/param, the upper
// end of the 16-18 B/param of user case C20.
TEST(Phases, NvmeBytes) {
    const uint64_t P = 8000000000;
    EstimateInput in = params_input(P, 8, 3, Dtype::bf16);
    in.zero.offload_optimizer = OffloadDevice::nvme;
    in.zero.offload_param = OffloadDevice::nvme;
    const Estimate e = estimate(in);
    EXPECT_EQ(e.per_node.nvme, 18 * P);
    for (const auto& p : e.phases) EXPECT_EQ(p.per_node.nvme, 18 * P) << p.name;
    in.zero.offload_param = OffloadDevice::cpu;  // params in host RAM: 16 B/param on the drive
    EXPECT_EQ(estimate(in).per_node.nvme, 16 * P);
}

// ===========================================================================
// 3. Trainable vs frozen, LoRA, QLoRA
// ===========================================================================

// LoRA on llama-2-7b (h = 4096, 32 layers, MHA), rank 8 on q,k,v,o: each
// projection adds r x (in + out) = 8 x (4096 + 4096): 32 x 4 x 8 x 8192 =
// 8,388,608 parameters.
TEST(Frozen, LoraCountAndFrozenCosts) {
    EstimateInput in = preset_input("llama-2-7b", 8, 2, Dtype::bf16);
    const uint64_t base = in.model.params;
    const uint64_t T = 32ull * 4 * 8 * (4096 + 4096);
    EXPECT_EQ(T, 8388608u);
    EXPECT_EQ(lora_params(*in.model.arch, 8, "q,k,v,o"), T);
    add_lora(in, 8, "q,k,v,o");
    const uint64_t Tn = ceil_div(T, 8);
    Estimate e = estimate(in);
    EXPECT_EQ(e.trainable_params, T);
    EXPECT_EQ(e.frozen_params, base);
    // ZeRO-2: frozen weights 2 B each on every GPU, no gradient, no state.
    EXPECT_EQ(e.per_gpu.parameters, 2 * T + 2 * base);
    EXPECT_EQ(e.per_gpu.gradients, 2 * Tn);
    EXPECT_EQ(e.per_gpu.optimizer_states, 12 * Tn);
    // ZeRO-3: frozen weights sharded; llama-2-7b's persistent parameters are
    // its 65 RMSNorm weights of 4096 (2 per layer + final), under the 1e5
    // threshold, kept whole on every GPU.
    in.zero.stage = 3;
    e = estimate(in);
    const uint64_t persistent = 65ull * 4096;
    EXPECT_NEAR(d(e.per_gpu.parameters), d(2 * persistent + 2 * Tn) + 2.0 * d(base) / 8.0, 1.0);
    EXPECT_EQ(e.per_gpu.gradients, 2 * Tn);
    EXPECT_EQ(e.per_gpu.optimizer_states, 12 * Tn);
}

// --load-in 4bit (QLoRA, NF4): the blocks' linear weights take 0.5 B plus an
// fp32 absmax per 64-element block, 0.5625 B/param; embeddings, norms and
// the LM head stay 16-bit. llama-2-7b linear weights: 32 x (4 x 4096^2 +
// 3 x 4096 x 11008) = 6,476,005,376. 8bit: 1 B/param.
TEST(Frozen, QuantizedBaseWeights) {
    EstimateInput in = preset_input("llama-2-7b", 1, 2, Dtype::bf16);
    const uint64_t base = in.model.params;
    add_lora(in, 8, "q,k,v,o");
    const uint64_t T = 8388608;
    const uint64_t linear = 32ull * (4ull * 4096 * 4096 + 3ull * 4096 * 11008);
    EXPECT_EQ(linear, 6476005376u);
    in.train.load_in_bits = 4;
    EXPECT_NEAR(d(estimate(in).per_gpu.parameters), 2.0 * d(T) + 0.5625 * d(linear) + 2.0 * d(base - linear), 1.0);
    in.train.load_in_bits = 8;
    EXPECT_NEAR(d(estimate(in).per_gpu.parameters), 2.0 * d(T) + 1.0 * d(linear) + 2.0 * d(base - linear), 1.0);
}

// ===========================================================================
// 4. Parallel layout
// ===========================================================================

// N_d = gpus / (tp x pp); without an architecture each tensor/pipeline rank
// holds P / (tp x pp) and ZeRO divides that by N_d.
TEST(Parallel, DataParallelDegree) {
    const uint64_t P = 7000000000;
    EstimateInput in = params_input(P, 16, 1, Dtype::bf16);
    in.cluster.nodes = 2;
    in.cluster.tp = 2;
    in.cluster.pp = 2;
    const Estimate e = estimate(in);
    const uint64_t rank = ceil_div(P, 4);
    EXPECT_EQ(e.params_per_rank, rank);
    EXPECT_EQ(e.per_gpu.parameters, 2 * rank);
    EXPECT_EQ(e.per_gpu.optimizer_states, 12 * ceil_div(rank, 4));
    in.zero.stage = 2;  // pipeline + ZeRO-2: rejected
    EXPECT_THROW(estimate(in), InputError);
    in.cluster.pp = 1;  // tp alone is fine with stage 2 and 3: N_d = 8
    in.zero.stage = 3;
    EXPECT_EQ(estimate(in).per_gpu.optimizer_states, 12 * ceil_div(ceil_div(P, 2), 8));
    in.cluster.tp = 3;  // 3 does not divide 16
    EXPECT_THROW(estimate(in), InputError);
}

// Korthikanti et al. 2022 Table 2 with t = 8 for a GPT-3-175B-shaped layer
// (MHA, f = 4h): tensor parallel only sbh(10 + 24/t + 5as/(ht)); with
// sequence parallelism sbh(34/t + 5as/(ht)); selective + SP sbh(34/t). In a
// whole estimate, sequence parallelism removes 10sbh(1 - 1/t) per stored
// layer and nothing else.
TEST(Parallel, SequenceParallelActivations) {
    const ModelArch a = testinputs::gpt3_175b_shape();
    const double s = 2048, b = 1, h = 12288, t = 8, sbh = s * b * h;
    EXPECT_NEAR(d(layer_activation_bytes(a, 2048, 1, 8, Checkpointing::none, false, true)),
                sbh * (34.0 / t + 5.0 * 96 * s / (h * t)), 1.0);
    EXPECT_NEAR(d(layer_activation_bytes(a, 2048, 1, 8, Checkpointing::selective, false, true)), sbh * 34.0 / t, 1.0);
    EXPECT_NEAR(d(layer_activation_bytes(a, 2048, 1, 8, Checkpointing::none, false, false)),
                sbh * (10.0 + 24.0 / t + 5.0 * 96 * s / (h * t)), 1.0);

    EstimateInput in;
    in.model.params = 175000000000;
    in.model.arch = a;
    in.cluster.gpus = 8;
    in.cluster.tp = 8;
    in.zero.stage = 1;
    in.train.seq_len = 2048;
    in.train.flash_attention = false;
    const uint64_t tp_only = phase(estimate(in), "forward").per_gpu.activations;
    in.train.sequence_parallel = true;
    const uint64_t with_sp = phase(estimate(in), "forward").per_gpu.activations;
    EXPECT_NEAR(d(tp_only) - d(with_sp), 96.0 * 10.0 * sbh * (1.0 - 1.0 / t), 96.0 * 2.0);
}

}  // namespace
