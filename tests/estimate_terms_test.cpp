// Tests of the named terms of the full convention (estimator/include/zeromem/
// terms.h) and of the phases built from them. Every expected value is
// arithmetic written out here from the DeepSpeed v0.19.6 code path named in
// the comment (deepspeedai/DeepSpeed at commit edaa722, file and function);
// none is pasted from a zeromem run.
#include "zeromem/estimate.h"
#include "zeromem/model.h"
#include "zeromem/planner.h"
#include "zeromem/request.h"
#include "zeromem/terms.h"

#include "estimate_inputs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>
#include <string>

using namespace zeromem;
using testinputs::no_residuals;
using testinputs::phase;

namespace {

constexpr double GiB = 1073741824.0;

double d(uint64_t v) { return static_cast<double>(v); }


bool has_term(const Estimate& e, const std::string& component_part, const std::string& source_part) {
    for (const auto& t : e.terms)
        if (t.component.find(component_part) != std::string::npos && t.source.find(source_part) != std::string::npos)
            return true;
    return false;
}

}  // namespace

// The full convention's acceptance example: `zeromem estimate --model
// llama-2-70b --gpus 16 --nodes 2 --gpu A100-80GB --stage 3
// --gradient-checkpointing full --seq-len 4096` (bf16, micro batch 1, no DeepSpeed "optimizer" block).
//
// Llama-2-70B (h 8192, 80 layers, 64 heads, 8 KV heads, f 28672, V 32000):
//   per layer = 2·8192² (q, o) + 2·8192·1024 (k, v) + 3·8192·28672 (MLP)
//             + 2·8192 (norms) = 855,654,400
//   Ψ = 80 · 855,654,400 + 2 · 32000·8192 + 8192 = 68,976,648,192
//   Tn = Ψ/16 = 4,311,040,512; persistent = 80·2·8192 + 8192 = 1,318,912
//   L (embedding / lm_head) = 262,144,000
// Model states: 2·(Tn + persistent) + 2·Tn + 12·Tn.
// Activations (Korthikanti, GQA, gated MLP, flash attention): 80 · 2sbh
//   stored + the larger of one layer's recompute sbh·(8 + 4.5 + 28) and io
//   (4sbh + sV·10), sbh = 4096·8192: autograd frees the loss's saved tensors
//   before the last layer is recomputed (torch/csrc/autograd/engine.cpp
//   evaluate_function -> Node::release_variables).
//   Llama has no dropout (modeling_llama.py: attention dropout only, 0.0 in
//   the config): no embedding or residual dropout masks.
// Optimizer step (stage3.py step, one sub-group at a time): IPG 5e8·2 +
//   max((2 + 4)·sub [_prepare_fp32_grad_for_sub_group], (4 + T)·sub
//   [_optimizer_step]), sub the largest sub-group: _create_fp16_sub_groups
//   adds parameters in model.parameters() order, each with its partition
//   ceil(numel / 16), and closes a sub-group once it reaches sub_group_size
//   1e9 (the walk is written out in the test: 1,006,651,392, the third);
//   T = 4 for torch's foreach AdamW (HF Trainer adamw_torch: torch < 2.8),
//   T = 0 for adamw_torch_fused (the default stack: torch 2.8, transformers 5).
// Steady backward: IPG 5e8·2 + reduce_scatter_coalesced cat 5e8·2
//   + decoder layer kept gathered from recompute to backward
//     (max(L, min(layer, max_live 1e9)) + prefetch 5e7)·2
//   + all-gather cat copy L·2 + module gradient L·2.
// Every phase adds the per-process terms (process_terms.h) of an A100 node
// (compute capability 8.0, nvlink-gen3):
//  - cuBLAS workspaces inside the allocator, so under the 5 % fragmentation:
//    2 handles x (4096 KiB x 2 + 16 KiB x 8 + 1024 KiB) = 19,136,512 B
//    (CublasHandlePool.cpp parseChosenWorkspaceSize, parseCUDABlasLtWorkspaceSize);
//  - outside it: the CUDA context, Ampere with lazy loading 400,000,000 B, and
//    NCCL's ring buffers of WORLD and the data-parallel clone, both across the
//    2 nodes: 2 x 24 channels x 2 x (LL128 4,915,200 + SIMPLE 4,194,304) =
//    874,512,384 B (init.cc computeBuffSizes, net.cc send/recvProxyConnect).
TEST(FullConvention, Llama2_70B_On16A100_Stage3IsBorderlineAtSteadyBackward) {
    EstimateInput in = testinputs::preset_input("llama-2-70b", 16, 3, Dtype::bf16);
    in.cluster.nodes = 2;
    in.cluster.gpu_memory = 80ull * 1073741824ull;  // A100-80GB preset
    in.cluster.compute_capability = 80;
    in.cluster.intra_interconnect = "nvlink-gen3";
    in.train.seq_len = 4096;
    in.train.checkpointing = Checkpointing::full;
    const Estimate e = estimate(in);

    const double P = 68976648192.0, Tn = P / 16, persist = 1318912, L = 262144000, layer = 855654400;
    ASSERT_EQ(d(e.trainable_params), P);
    const double model_states = 2 * (Tn + persist) + 2 * Tn + 12 * Tn;
    const double sbh = 4096.0 * 8192.0;
    // No dropout in Llama (attention_dropout 0.0, no residual dropout: modeling_llama.py): Korthikanti's
    // 10 sbh outside the tensor-parallel region less the two residual masks is 8, the embedding mask 0.
    // Each LlamaRMSNorm also keeps its fp32 input copy and the bf16 normalized tensor (6 B per element
    // where Korthikanti counts the 2 B input; modeling_llama.py LlamaRMSNorm.forward, derivatives.yaml
    // pow and mul): 4 sbh per norm, two in the recomputed layer, one (the final norm) beside the loss.
    const double act = 80 * 2 * sbh + std::max(sbh * (8 + 4.5 + 28 + 2 * 4), (4 + 4) * sbh + 4096.0 * 32000.0 * 10);
    const double cublas = 2.0 * (4096 * 1024 * 2 + 16 * 1024 * 8 + 1024 * 1024);
    const double ctx = 400000000.0 + 2.0 * 24 * 2 * (4915200 + 4194304), frag = 0.05;

    // The sub-groups: embed_tokens, per layer q, k, v, o, gate, up, down and two norms, then the final norm
    // and lm_head (modeling_llama.py), each partitioned 1/16.
    const std::vector<double> layer_tensors = {8192.0 * 8192, 8192.0 * 1024, 8192.0 * 1024, 8192.0 * 8192,
                                               8192.0 * 28672, 8192.0 * 28672, 28672.0 * 8192, 8192, 8192};
    double sub = 0, part = 0;
    auto take = [&](double numel) {
        part += std::ceil(numel / 16);
        if (part >= 1e9) sub = std::max(sub, part), part = 0;
    };
    take(32000.0 * 8192);
    for (int l = 0; l < 80; ++l)
        for (double n : layer_tensors) take(n);
    take(8192), take(32000.0 * 8192);
    sub = std::max(sub, part);
    ASSERT_EQ(sub, 1006651392.0);
    const double step_fused = model_states + 1e9 + std::max(6 * sub, 4 * sub) + cublas;
    EXPECT_NEAR(d(phase(e, "optimizer_step").per_gpu.total), step_fused * (1 + frag) + ctx, 2.0);

    const double bwd_tmp = 1e9 + 1e9 + (std::max(L, std::min(layer, 1e9)) + 5e7) * 2 + L * 2 + L * 2;
    const double bwd_alloc = model_states + act + bwd_tmp + cublas;
    EXPECT_NEAR(d(phase(e, "steady_backward").per_gpu.total), bwd_alloc * (1 + frag) + ctx, 2.0);

    // 80.25 GiB at steady backward (80.08 before the recomputed layer's RMSNorm copies, 80.11 with an
    // embedding dropout mask Llama does not have; 79.40 GiB with the flat 0.5 GiB context before the
    // process terms; 91.66 GiB at the step, then 80.80 GiB while the recomputed layer was added on top of
    // the logits): borderline, steady backward the peak, over the card: NCCL's two cross-node
    // communicators (0.81 GiB) outweigh the smaller context.
    EXPECT_NEAR((bwd_alloc * (1 + frag) + ctx) / GiB, 80.25, 0.005);
    EXPECT_EQ(e.peak_phase, "steady_backward");
    EXPECT_EQ(e.first_oom_phase, "steady_backward");
    EXPECT_LT(d(e.per_gpu.total) - 80.0 * GiB, 0.3 * GiB);  // over by 0.25 GiB

    // torch 2.7: the HF Trainer's adamw_torch, foreach, one temporary per
    // sub-group: the step is 77.51 GiB (77.46 with sub-groups of exactly 1e9), still below steady backward.
    in.stack.torch = "2.7";
    const Estimate older = estimate(in);
    const double step_foreach = model_states + 1e9 + std::max(6 * sub, 8 * sub) + cublas;
    EXPECT_NEAR(d(phase(older, "optimizer_step").per_gpu.total), step_foreach * (1 + frag) + ctx, 2.0);
    EXPECT_NEAR((step_foreach * (1 + frag) + ctx) / GiB, 77.51, 0.005);
    EXPECT_EQ(older.peak_phase, "steady_backward");
}

// ZeRO-1/2 on one GPU are not above ZeRO-0. P = 7e9,
// bf16, fused optimizer (no temporary), no residuals:
//  - ZeRO-0 (FP16_Optimizer in bf16 mode, fp16/fused_optimizer.py step):
//    2P params + 2P grads + 4P master + 8P Adam = 16P, and at the step the
//    per-parameter fp32 copies (4P) + their flattening (4P) with the grads
//    alive: 24P.
//  - ZeRO-1/2 (stage_1_and_2.py step): 2P params + 12P states + the larger of
//    the flatten moment (grads_in_partition 2P + flat 2P + fp32 4P) and the
//    optimizer moment (fp32 4P): 22P.
TEST(GpuTerms, Zero12OnOneGpuNotAboveZero0) {
    const uint64_t P = 7000000000;
    uint64_t peak[3] = {0, 0, 0};
    for (int stage : {0, 1, 2}) {
        EstimateInput in = testinputs::params_input(P, 1, stage, Dtype::bf16);
        in.train.fused_optimizer = true;
        no_residuals(in);
        const Estimate e = estimate(in);
        peak[stage] = e.per_gpu.total;
        EXPECT_EQ(phase(e, "optimizer_step").per_gpu.total, (stage == 0 ? 24 : 22) * P) << stage;
    }
    EXPECT_LE(peak[1], peak[0]);
    EXPECT_LE(peak[2], peak[0]);
}

// bf16 + ZeRO-1 + grad_accum_dtype fp32 + no offload selects BF16_Optimizer
// (engine._do_optimizer_sanity_check). Its fp32 gradient buffer, 4P, exists
// from init (bf16_optimizer.py _setup_for_real_optimizer); backward adds the
// bf16 param.grad (2P) and, at the all-reduce, the cast of the fp32 buffer to
// the communication dtype, 2P (engine.py allreduce_bucket); the step has no
// fp32 copy, only the optimizer's temporary over the partition (torch
// foreach: 4·P/N).
TEST(GpuTerms, Bf16OptimizerBuffers) {
    const uint64_t P = 7000000000, Pn = P / 8;
    EstimateInput in = testinputs::params_input(P, 8, 1, Dtype::bf16);
    in.train.grad_accum_dtype = Dtype::fp32;
    in.train.client_fused = false;  // torch foreach AdamW
    const Estimate e = estimate(in);
    EXPECT_EQ(phase(e, "load").per_gpu.gradients, 4 * P);
    EXPECT_EQ(phase(e, "forward").per_gpu.gradients, 4 * P);
    EXPECT_EQ(phase(e, "backward").per_gpu.gradients, 4 * P + 2 * P);
    EXPECT_EQ(phase(e, "backward").per_gpu.temporary_buffers, 2 * P);
    EXPECT_EQ(phase(e, "optimizer_step").per_gpu.temporary_buffers, 4 * Pn);
    EXPECT_EQ(phase(e, "checkpoint_save").per_gpu.gradients, 4 * P);

    in.train.communication_dtype = Dtype::fp32;  // no cast
    EXPECT_EQ(phase(estimate(in), "backward").per_gpu.temporary_buffers, 0u);

    // fp16 + fp32 accumulation stays on the ZeRO optimizer: ZeRO-1 keeps
    // only param.grad_accum, b_a·Ψ = 4P (stage_1_and_2.py
    // _fill_param_grad_accum_attribute sets param.grad = None after each
    // hook), not (2 + 4)·P.
    EstimateInput fp16 = testinputs::params_input(P, 8, 1, Dtype::fp16);
    fp16.train.grad_accum_dtype = Dtype::fp32;
    EXPECT_EQ(phase(estimate(fp16), "backward").per_gpu.gradients, 4 * P);
}

// BF16_Optimizer's all-reduce cast comes after the boundary backward has
// freed the activations (engine.py _backward_epilogue: backward_epilogue ->
// update_hp_grads, then allreduce_gradients -> buffered_allreduce_fallback
// -> allreduce_bucket's tensor.to(communication_data_type)); the simulator's
// replay found the estimator adding it to the activation peak. llama-2-7b,
// Ψ = 6,738,415,616 (a multiple of 2 x N_d = 16), N_d = 8, Tn = 842,301,952,
// steady state (m and v exist), no activations at the boundary:
//   bf16 params 2Ψ 13,476,831,232 + bf16 param.grad 2Ψ 13,476,831,232
//   + fp32 gradient buffer 4Ψ 26,953,662,464 + fp32 partition 4Tn
//   3,369,207,808 + m, v 8Tn 6,738,415,616 + bf16 cast 2Ψ 13,476,831,232
//   = 77,491,779,584 B,
// above the activation peak without the cast for this model (micro batch 1
// x 4096 tokens, no checkpointing).
TEST(GpuTerms, Bf16OptimizerCastAfterTheActivations) {
    Request r;
    r.model = "llama-2-7b";
    r.gpus = 8;
    r.stage = 1;
    r.cuda_context = "0";
    r.nccl_buffers = "0";  // DeepSpeed's tensors only: no per-process terms
    r.cublas_workspace = "0";
    r.fragmentation = 0.0;
    Resolved res = resolve_request(r, ZEROMEM_SOURCE_DATA_DIR);
    res.input.train.grad_accum_dtype = Dtype::fp32;
    ASSERT_EQ(count_params(*res.input.model.arch).total, 6738415616u);
    const Estimate e = estimate(res.input);
    const GpuMemory& b = phase(e, "steady_backward").per_gpu;
    EXPECT_EQ(b.activations, 0u);
    EXPECT_EQ(b.temporary_buffers, 13476831232u);
    EXPECT_EQ(b.total, 77491779584u);
    EXPECT_EQ(e.per_gpu.total, 77491779584u);
}

// engine.py _do_optimizer_sanity_check also returns BFLOAT16 without ZeRO
// (stage 0) for bf16 weights with bf16 gradient accumulation under pipeline
// parallelism (the PipelineEngine); without a pipeline it is DDP_BFLOAT16
// (FP16_Optimizer, unpartitioned fp32 master). BF16_Optimizer partitions the
// fp32 master and the optimizer over the data-parallel group
// (_setup_for_real_optimizer) and keeps a bf16 accumulation buffer of the
// whole flat group. 16 GPUs, pp = 2: N_d = 8; without an architecture a
// pipeline rank holds Ψ_t = 14e9 / 2 = 7e9, Tn = 875e6. torch foreach AdamW
// (T = 4 B per element). At the step: params 2Ψ_t; gradients = bf16
// param.grad 2Ψ_t + bf16 buffer 2Ψ_t = 28e9; fp32 partition 4Tn + m, v 8Tn =
// 10.5e9; temporaries: grad_partition.to(fp32) 4Tn + optimizer temporary
// 4Tn = 7e9. No all-reduce cast (communication dtype = buffer dtype = bf16).
TEST(GpuTerms, Bf16OptimizerWithoutZeroUnderPipeline) {
    const uint64_t Tr = 7000000000, Tn = Tr / 8;
    EstimateInput in = testinputs::params_input(2 * Tr, 16, 0, Dtype::bf16);
    in.cluster.nodes = 2;
    in.cluster.pp = 2;
    in.train.client_fused = false;
    const Estimate e = estimate(in);
    const GpuMemory& st = phase(e, "optimizer_step").per_gpu;
    EXPECT_EQ(st.parameters, 2 * Tr);
    EXPECT_EQ(st.gradients, 4 * Tr);
    EXPECT_EQ(st.optimizer_states, 12 * Tn);
    EXPECT_EQ(st.temporary_buffers, 8 * Tn);
    EXPECT_EQ(phase(e, "load").per_gpu.gradients, 2 * Tr);
    EXPECT_EQ(phase(e, "backward").per_gpu.temporary_buffers, 0u);
    // Without the pipeline: FP16_Optimizer, 4Ψ_t master + 8Ψ_t m, v, unpartitioned.
    in.cluster.pp = 1;
    EXPECT_EQ(phase(estimate(in), "optimizer_step").per_gpu.optimizer_states, 12 * 2 * Tr);
}

// ZeRO-1/2 CPU offload: temp_grad_buffer_for_gpu_offload (L · b_m) is
// created in stage_1_and_2.py __init__ and never freed, so it is live in
// every phase; the boundary backward adds the larger of the `.double()`
// norm of the largest slice (8·L, set_norm_for_param_grad_in_gpu) and the
// bucket flatten (5e8·2).
TEST(GpuTerms, OffloadStagingBufferInEveryPhase) {
    EstimateInput in = testinputs::params_input(13000000000, 8, 2, Dtype::bf16);
    const uint64_t L = 32000ull * 5120ull;
    in.model.largest_layer_params = L;
    in.zero.offload_optimizer = OffloadDevice::cpu;
    const Estimate e = estimate(in);
    for (const char* p : {"forward", "optimizer_step", "checkpoint_save"})
        EXPECT_EQ(phase(e, p).per_gpu.temporary_buffers, L * 2) << p;
    // The load phase's peak is the flatten on the GPU (DeepSpeed >= 0.18.7,
    // the capacity unknown): the module and its flat copy, 2 x 2 B x P, before
    // the staging buffer exists (stage_1_and_2.py __init__).
    EXPECT_EQ(phase(e, "load").per_gpu.parameters, 2ull * 2ull * 13000000000ull);
    EXPECT_EQ(phase(e, "load").per_gpu.temporary_buffers, 0u);
    EXPECT_EQ(phase(e, "backward").per_gpu.temporary_buffers,
              500000000ull * 2ull + L * 2 + L * 2 + std::max<uint64_t>(8 * L, 500000000ull * 2ull));
}

// ZeRO-3 forward: the IPG bucket from init, the parameters gathered or in
// flight, and the copy out of the coalesced all-gather buffer
// (partition_parameters.py AllGatherCoalescedHandle.wait). A llama-2-7b
// trace step (one projection: 202,383,360 parameters per layer / 7 modules
// = 28,911,908) is smaller than one prefetch (5e7), so the coordinator's
// look-ahead fills to stage3_max_live_parameters = 1e9, plus at most one
// parameter (partitioned_param_coordinator.py _fetch_sub_module_impl):
// 5e8·2 + (1e9 + L)·2 + L·2. Backward adds the module gradient L·2 and the
// reduce-scatter concatenation 5e8·2.
TEST(GpuTerms, Zero3ForwardGatherCopy) {
    EstimateInput in = testinputs::preset_input("llama-2-7b", 8, 3, Dtype::bf16);
    const uint64_t L = 32000ull * 4096ull;
    ASSERT_EQ(in.model.largest_layer_params, L);
    const Estimate e = estimate(in);
    EXPECT_EQ(phase(e, "forward").per_gpu.temporary_buffers, 1000000000ull + (1000000000ull + L) * 2 + L * 2);
    EXPECT_EQ(phase(e, "backward").per_gpu.temporary_buffers,
              1000000000ull + (1000000000ull + L) * 2 + L * 2 + L * 2 + 1000000000ull);
    // One GPU: no all-gather and no reduce-scatter copies.
    EstimateInput one = testinputs::preset_input("llama-2-7b", 1, 3, Dtype::bf16);
    EXPECT_EQ(phase(estimate(one), "forward").per_gpu.temporary_buffers, 1000000000ull + (1000000000ull + L) * 2);
    // stage3_prefetch_bucket_size 1e7 < one trace step: each prefetch is used
    // up by the next module, so the running module plus one prefetch:
    // 5e8·2 + (L + 1e7)·2 + L·2.
    in.zero.stage3_prefetch_bucket_size = 10000000;
    EXPECT_EQ(phase(estimate(in), "forward").per_gpu.temporary_buffers, 1000000000ull + (L + 10000000ull) * 2 + L * 2);
}

// The prefetch walks the recorded trace and gathers only parameters that
// exist: a 10M-parameter model (no architecture, largest module unknown = 0)
// has at most its 1e7 parameters gathered, 1e7 x 2 B, not (0 + 5e7) x 2 B.
// Forward temporaries: IPG bucket 5e8 x 2 + 2e7 (the all-gather cat copy of
// L = 0 is 0).
TEST(GpuTerms, Zero3PrefetchCappedAtTheModel) {
    EstimateInput in = testinputs::params_input(10000000, 8, 3, Dtype::bf16);
    const Estimate e = estimate(in);
    EXPECT_EQ(phase(e, "forward").per_gpu.temporary_buffers, 1000000000ull + 10000000ull * 2);
}

// `--optimizer sgd`: no Adam temporary at the step (ZeRO-3 optimizer moment
// 4·sub only, so the flatten moment (2 + 4)·sub is the peak).
TEST(OptimizerStep, SgdHasNoAdamTemporary) {
    EstimateInput in = testinputs::params_input(7000000000, 8, 3, Dtype::bf16);
    in.train.optimizer = Optimizer::sgd;
    const Estimate e = estimate(in);
    EXPECT_EQ(phase(e, "optimizer_step").per_gpu.temporary_buffers, 1000000000ull + 6ull * 875000000ull);
}

// ZeRO-2 with an LM head larger than reduce_bucket_size: llama-3-8b's
// 128256 x 4096 = 525,336,576-element head is reduced on its own
// (stage_1_and_2.py extra_large_param_to_reduce); allreduce_and_scatter
// collects its 8 slices of 65,667,072 until they exceed 5e8 elements (7 make
// 459,669,504, the 8th 525,336,576) and flattens them: 525,336,576 x 2 B =
// 1,050,673,152 B instead of the bucket's 1e9 B.
TEST(GpuTerms, Zero2ExtraLargeLmHeadFlattensItsSlices) {
    EstimateInput in = testinputs::preset_input("llama-3-8b", 8, 2, Dtype::bf16);
    ASSERT_EQ(in.model.largest_layer_params, 525336576u);
    const Estimate e = estimate(in, true);
    bool found = false;
    for (const auto& t : e.terms)
        if (t.component.find("allreduce_bucket flatten (extra-large parameter's slices)") != std::string::npos) {
            EXPECT_EQ(t.bytes, 1050673152u);
            found = true;
        }
    EXPECT_TRUE(found);
    // llama-2-7b's largest module (32000 x 4096) fits the bucket: 5e8 x 2 B.
    const Estimate small = estimate(testinputs::preset_input("llama-2-7b", 8, 2, Dtype::bf16), true);
    for (const auto& t : small.terms)
        if (t.component.find("allreduce_bucket flatten") != std::string::npos) {
            EXPECT_EQ(t.bytes, 1000000000u);
        }
}

// --explain lists every new term with the DeepSpeed function that allocates it.
TEST(TermsExplain, TemporariesNameTheirSource) {
    EstimateInput z2 = testinputs::params_input(7000000000, 8, 2, Dtype::bf16);
    const Estimate e2 = estimate(z2, true);
    EXPECT_TRUE(has_term(e2, "allreduce_bucket flatten", "allreduce_bucket"));
    EXPECT_TRUE(has_term(e2, "optimizer_step moment, the peak", "stage_1_and_2.py step"));
    EstimateInput z3 = testinputs::preset_input("llama-2-7b", 8, 3, Dtype::bf16);
    z3.train.checkpointing = Checkpointing::full;
    const Estimate e3 = estimate(z3, true);
    EXPECT_TRUE(has_term(e3, "reduce_scatter_coalesced cat", "reduce_scatter_coalesced"));
    EXPECT_TRUE(has_term(e3, "all-gather cat copy", "AllGatherCoalescedHandle.wait"));
    EXPECT_TRUE(has_term(e3, "look-ahead filled to stage3_max_live_parameters", "_fetch_sub_module_impl"));
    z3.zero.stage3_prefetch_bucket_size = 10000000;  // a trace step uses a whole prefetch
    EXPECT_TRUE(has_term(estimate(z3, true), "decoder layer kept from recompute to backward", "__params_to_release"));
    EXPECT_TRUE(has_term(e3, "sub-group fp32 gradient + optimizer temporary", "_optimizer_step"));
    EXPECT_TRUE(has_term(e3, "fp32 gradient_buffer", "initialize_optimizer_states"));
}

// The optimizer the user really gets. ZeRO-3 step on
// 7e9 / 8 (sub = Tn = 875e6): IPG 5e8·2 + max((2 + 4)·sub, (4 + T)·sub).
//  - HF Trainer, torch 2.8 + transformers >= 4.54: adamw_torch_fused
//    (huggingface/transformers#37358), T = 0 -> the flatten moment 6·sub;
//  - transformers 4.53 or torch 2.7: adamw_torch (foreach), T = 4 -> 8·sub;
//  - torch 2.0: foreach keeps exp_avg_sq_sqrt and denom, T = 8 -> 12·sub;
//  - DeepSpeed block with torch_adam: torch Adam(W) foreach, T = 4;
//  - DeepSpeed block (FusedAdam): T = 0.
TEST(OptimizerStep, StepKernelFollowsTheStack) {
    const uint64_t sub = 875000000, ipg = 1000000000;
    auto step_tmp = [](const EstimateInput& in) { return phase(estimate(in), "optimizer_step").per_gpu.temporary_buffers; };
    EstimateInput in = testinputs::params_input(7000000000, 8, 3, Dtype::bf16);
    EXPECT_EQ(step_tmp(in), ipg + 6 * sub);  // default stack: torch 2.8, transformers 5.0
    in.stack.transformers = "4.53";
    EXPECT_EQ(step_tmp(in), ipg + 8 * sub);
    in.stack.transformers = "4.54.1";
    EXPECT_EQ(step_tmp(in), ipg + 6 * sub);
    in.stack.torch = "2.7.1+cu126";
    EXPECT_EQ(step_tmp(in), ipg + 8 * sub);
    in.stack.torch = "2.0.1";
    EXPECT_EQ(step_tmp(in), ipg + 12 * sub);
    in.stack.torch = "2.10";  // numeric, not lexicographic: 2.10 > 2.8
    EXPECT_EQ(step_tmp(in), ipg + 6 * sub);
    in.train.torch_adam = true;
    EXPECT_EQ(step_tmp(in), ipg + 8 * sub);
    in.train.torch_adam = false;
    in.train.fused_optimizer = true;
    EXPECT_EQ(step_tmp(in), ipg + 6 * sub);
    EXPECT_EQ(estimate(in).optimizer_step_kernel.rfind("DeepSpeed's optimizer", 0), 0u);
    in.stack.torch = "two";
    EXPECT_THROW(estimate(in), InputError);
}

// DeepSpeed refuses ZeRO optimizer offload with a client optimizer unless
// zero_force_ds_cpu_optimizer is false (engine.py _configure_optimizer,
// ZeRORuntimeException), but the HF Trainer goes through accelerate, which
// replaces the client optimizer with DeepSpeedCPUAdam in exactly that case
// (accelerator.py _prepare_deepspeed): the step is DeepSpeedCPUAdam and a
// note says why. With zero_force_ds_cpu_optimizer false the client's torch
// AdamW runs on the CPU.
TEST(OptimizerStep, OffloadWithClientOptimizerRunsDeepSpeedCpuAdam) {
    EstimateInput in = testinputs::params_input(7000000000, 8, 2, Dtype::bf16);
    in.zero.offload_optimizer = OffloadDevice::cpu;
    EXPECT_EQ(estimate(in).optimizer_step_kernel.rfind("DeepSpeedCPUAdam", 0), 0u);
    in.train.optimizer_builder = OptimizerBuilder::client;
    in.train.fused_optimizer = false;
    const Estimate swapped = estimate(in);
    EXPECT_NE(swapped.optimizer_step_kernel.find("DeepSpeedCPUAdam"), std::string::npos) << swapped.optimizer_step_kernel;
    bool noted = false;
    for (const auto& n : swapped.notes) noted = noted || n.find("_prepare_deepspeed") != std::string::npos;
    EXPECT_TRUE(noted);
    in.zero.zero_force_ds_cpu_optimizer = false;
    const Estimate client = estimate(in);
    EXPECT_EQ(client.optimizer_step_kernel.find("DeepSpeedCPUAdam"), std::string::npos) << client.optimizer_step_kernel;
}

// ===========================================================================
// Host memory as PyTorch pins it (aten/src/ATen/core/CachingHostAllocator.h)
// ===========================================================================

// aten/src/ATen/core/CachingHostAllocator.h allocate():
// roundSize = c10::llvm::PowerOf2Ceil(size).
TEST(HostTerms, PowerOfTwoCeil) {
    EXPECT_EQ(terms::power_of_two_ceil(0), 0u);
    EXPECT_EQ(terms::power_of_two_ceil(1), 1u);
    EXPECT_EQ(terms::power_of_two_ceil(3), 4u);
    EXPECT_EQ(terms::power_of_two_ceil(1ull << 32), 1ull << 32);
    EXPECT_EQ(terms::power_of_two_ceil((1ull << 32) + 1), 1ull << 33);
    EXPECT_EQ(terms::power_of_two_ceil(4000000000ull), 1ull << 32);  // sub_group_size 1e9 in fp32
}

// llama-2-13b, ZeRO-2 + offload_optimizer cpu on
// 8 GPUs. Tn = ceil(13,015,864,320 / 8) = 1,626,983,040; L = 32000 x 5120.
// Pinned per rank (stage_1_and_2.py __init__ / initialize_optimizer_states,
// each through PyTorch's CachingHostAllocator): master P2(4·Tn = 6.51e9) =
// 2^33, fp32 gradients 2^33, 16-bit staging P2(2·Tn = 3.25e9) = 2^32,
// temp_grad_buffer_for_cpu_offload P2(2·L = 327.7e6) = 2^29: per
// rank = 8 + 8 + 4 + 0.5 GiB = 20.50 GiB, where the plain
// byte count gives 15.46.
TEST(HostTerms, Zero2OffloadPinnedRoundedLlama13B) {
    EstimateInput in = testinputs::preset_input("llama-2-13b", 8, 2, Dtype::bf16);
    in.zero.offload_optimizer = OffloadDevice::cpu;
    const Estimate e = estimate(in);
    ASSERT_EQ(e.trainable_params, 13015864320ull);
    const uint64_t per_rank = (1ull << 33) + (1ull << 33) + (1ull << 32) + (1ull << 29);
    EXPECT_EQ(e.per_node.host_pinned, 8 * per_rank);
    EXPECT_NEAR(d(per_rank) / GiB, 20.50, 0.005);
    const double plain = (4.0 + 4.0 + 2.0) * 1626983040.0 + 2.0 * 32000.0 * 5120.0;
    EXPECT_NEAR(plain / GiB, 15.46, 0.005);
}

// ZeRO-3 full CPU offload of llama-2-70b on 16 GPUs (2 nodes x 8). Per
// rank, Tn = 4,311,040,512, sub_group_size 1e9:
//  - fp32 master 4·Tn, pageable (stage3.py _create_fp32_partitions);
//  - fp32 gradients per sub-group (initialize_optimizer_states): 4 groups
//    of 1e9 -> 4 x P2(4e9) = 4 x 2^32, and the rest 311,040,512 -> P2 = 2^31;
//  - grad_partitions_flat_buffer P2(2·Tn = 8.62e9) = 2^34 (8.6 -> 17.2 GB);
//  - 16-bit parameter flat buffer P2(2·Tn) = 2^34
//    (_create_param_groups_fp16_flat_cpu_memory);
//  - zero.Init's per-parameter pinned partitions left in PyTorch's host
//    cache (partition_parameters.py _partition_param): per layer
//    q, o: P2(2·8192²/16) = 2^23; k, v: P2(2·8192·1024/16) = 2^20;
//    gate, up, down: P2(2·8192·28672/16 = 29.4e6) = 2^25; 2 norms 2^10;
//    x 80 layers, + embedding and lm_head P2(2·32000·8192/16) = 2^25 each,
//    + final norm 2^10;
//  - CPU Adam m, v 8·Tn, pageable, from the first step.
// Steady: 865.2 GiB per node.
TEST(HostTerms, Zero3FullOffloadLlama70BSubGroupsAndStrandedBlocks) {
    EstimateInput in = testinputs::preset_input("llama-2-70b", 16, 3, Dtype::bf16);
    in.cluster.nodes = 2;
    in.zero.offload_optimizer = OffloadDevice::cpu;
    in.zero.offload_param = OffloadDevice::cpu;
    const Estimate e = estimate(in);
    const uint64_t Tn = 4311040512ull;
    const uint64_t layer = 2 * (1ull << 23) + 2 * (1ull << 20) + 3 * (1ull << 25) + 2 * (1ull << 10);
    const uint64_t stranded = 80 * layer + 2 * (1ull << 25) + (1ull << 10);
    EXPECT_EQ(stranded, 9630286848ull);
    const uint64_t pinned = 4 * (1ull << 32) + (1ull << 31) + (1ull << 34) + (1ull << 34) + stranded;
    const uint64_t per_rank = 4 * Tn + pinned + 8 * Tn;
    EXPECT_EQ(e.per_node.host_pinned, 8 * pinned);
    EXPECT_EQ(e.per_node.host_steady, 8 * per_rank + 8 * (1ull << 30));
    EXPECT_NEAR(d(e.per_node.host_steady) / GiB, 865.2, 0.05);
}

// ZeRO-3 without parameter offload, zero.Init: the 16-bit partitions are
// staged through a pageable CPU buffer at load (zero/utils.py defragment,
// stage3.py _create_fp16_partitions_with_defragmentation): + g·2·Tn per node
// (llama-2-70b on 8: 128.5 GiB).
TEST(HostTerms, Zero3LoadDefragmentStaging) {
    EstimateInput in = testinputs::preset_input("llama-2-70b", 8, 3, Dtype::bf16);
    const Estimate e = estimate(in);
    const uint64_t Tn = 68976648192ull / 8;
    EXPECT_EQ(e.per_node.host_load, 8 * (2 * Tn) + 8 * (1ull << 30));
    EXPECT_NEAR(d(8 * 2 * Tn) / GiB, 128.5, 0.05);
}

// CPU Adam's m and v (ops/adam/cpu_adam.py, lazy)
// do not exist in the first forward and backward, so a host that holds the
// load and the first step's forward overflows first at the optimizer step.
// ZeRO-3 + offload_optimizer cpu, 7e9 on 8 (numbers as in
// Phases.OffloadPinnedVsPageable): load 130.1e9 B, first forward 88.1e9 B,
// optimizer step 144.1e9 B per node.
TEST(HostTerms, FirstHostOomAtTheStepWhenAdamIsLazy) {
    EstimateInput in = testinputs::params_input(7000000000, 8, 3, Dtype::bf16);
    in.zero.offload_optimizer = OffloadDevice::cpu;
    in.cluster.host_memory = 140000000000ull;
    const Estimate e = estimate(in);
    const uint64_t Pn = 875000000, ovh = 1ull << 30, pinned = (1ull << 32) + (1ull << 31);
    EXPECT_EQ(phase(e, "forward").per_node.host_memory, 8 * (pinned + 4 * Pn + ovh));
    EXPECT_EQ(e.first_host_oom_phase, "optimizer_step");
    // Before DeepSpeed 0.13.2 initialize_optimizer_states stepped once at
    // init, so m and v were there from the load on.
    in.stack.deepspeed = "0.13.1";
    EXPECT_EQ(estimate(in).first_host_oom_phase, "load");
}

// fit keeps --gradient-checkpointing (it used to reset it
// to none, so at seq 4096 every option "never fit"). With full checkpointing
// each option's row is the estimate of that option with the user's
// checkpointing, at the GPU count found.
TEST(Fit, FewestGpusKeepsGradientCheckpointing) {
    EstimateInput in = testinputs::preset_input("llama-2-7b", 1, 0, Dtype::bf16);
    in.train.seq_len = 4096;
    in.train.checkpointing = Checkpointing::full;
    in.cluster.gpu_memory = 80ull << 30;
    const auto rows = fewest_gpus(in, 8);
    bool some = false;
    for (const auto& r : rows) {
        if (!r.value) continue;
        some = true;
        EstimateInput at = in;
        apply_candidate([&] {
            Candidate c;
            c.option = r.option;
            c.option.checkpointing = Checkpointing::full;
            c.micro_batch = in.train.micro_batch;
            c.grad_accum = in.train.grad_accum;
            c.dtype = in.train.dtype;
            c.overlap_comm = in.zero.overlap_comm.value_or(r.option.stage == 3);
            c.reduce_bucket_size = in.zero.reduce_bucket_size;
            return c;
        }(), at);
        at.cluster.gpus = int64_t(r.value);
        at.cluster.nodes = r.value <= 8 ? 1 : int64_t(r.value) / 8;
        EXPECT_EQ(r.per_gpu_total, estimate(at).per_gpu.total) << r.option.label();
        EXPECT_EQ(at.train.checkpointing, Checkpointing::full);
    }
    EXPECT_TRUE(some);
}

// ===========================================================================
// The load phase
// ===========================================================================

// ZeRO-3 without zero.Init: engine.py _configure_distributed_model moves the
// whole 16-bit module to every GPU (module.to(device)) before DeepSpeed
// partitions it, so the load holds 2 B x Ψ per GPU even with parameter
// offload: llama-2-70b, 2 x 68,976,648,192 B = 128.5 GiB, a load OOM on
// 80 GiB parts.
TEST(LoadPhase, Zero3WithoutZeroInitLoadsTheWholeModule) {
    EstimateInput in = testinputs::preset_input("llama-2-70b", 16, 3, Dtype::bf16);
    in.cluster.nodes = 2;
    in.cluster.gpu_memory = 80ull << 30;
    in.zero.offload_param = OffloadDevice::cpu;
    in.zero.offload_optimizer = OffloadDevice::cpu;
    in.zero.zero_init = false;
    const Estimate e = estimate(in);
    EXPECT_EQ(phase(e, "load").per_gpu.parameters, 2 * 68976648192ull);
    EXPECT_NEAR(d(phase(e, "load").per_gpu.parameters) / GiB, 128.5, 0.05);
    EXPECT_EQ(e.first_oom_phase, "load");
    in.zero.zero_init = true;  // partitions built as the modules are created
    EXPECT_TRUE(estimate(in).first_oom_phase.empty());
}

// ZeRO-1/2 flattening (stage_1_and_2.py __init__): from DeepSpeed 0.18.7
// (PR #7828) on the GPU when the free memory holds the flat copy, two 16-bit
// copies there briefly; before 0.18.7, or when it does not fit, on the CPU:
// the 16-bit copies plus the flat buffer, 2 x b_m x Ψ per rank on the host
// 7e9 bf16, ZeRO-2, 8 x 80 GiB, with a 16-bit load
// (--load-dtype bf16) so that the CPU flatten, not the model load, is the
// host load peak: g x 2 x 2 x 7e9 + overhead.
TEST(LoadPhase, Zero12FlattenOnGpuOrCpuByVersion) {
    const uint64_t P = 7000000000, ovh = 1ull << 30;
    EstimateInput in = testinputs::params_input(P, 8, 2, Dtype::bf16);
    in.cluster.gpu_memory = 80ull << 30;
    in.residual.load_dtype = Dtype::bf16;
    const Estimate gpu = estimate(in);
    EXPECT_EQ(phase(gpu, "load").per_gpu.parameters, 2 * 2 * P);
    EXPECT_EQ(gpu.per_node.host_load, 8 * (2 * P + ovh));  // the model load; no CPU flatten
    in.stack.deepspeed = "0.18.6";
    const Estimate cpu = estimate(in);
    EXPECT_EQ(phase(cpu, "load").per_gpu.parameters, 2 * P);
    EXPECT_EQ(cpu.per_node.host_load, 8 * (2 * 2 * P + ovh));
    // 0.18.7 but a 24 GiB card: 24 GiB - 0.5 GiB context - 14e9 B module =
    // 10.5 GiB free, less than the 14e9 B flat copy.
    in.stack.deepspeed = "0.19.6";
    in.cluster.gpu_memory = 24ull << 30;
    EXPECT_EQ(phase(estimate(in), "load").per_gpu.parameters, 2 * P);
}

// Frozen parameters are loaded in the load dtype like the rest and frozen
// afterwards (transformers from_pretrained, then requires_grad_(False)):
// 7e9 of which 1e9 trainable, fp32 load, ZeRO-2 on 8: 8 x (4 B x 7e9 + 1 GiB)
// on the host at load, not 4 B x 1e9 + 2 B x 6e9 per rank.
TEST(LoadPhase, FrozenParametersLoadInTheLoadDtype) {
    EstimateInput in = testinputs::params_input(7000000000, 8, 2, Dtype::bf16);
    in.train.trainable_params = 1000000000;
    EXPECT_EQ(estimate(in).per_node.host_load, 8 * (4 * 7000000000ull + (1ull << 30)));
}
