// ZeRO++ (hpZ, qwZ, qgZ; Wang et al. 2023, arXiv:2306.10209) and MiCS
// (DeepSpeed runtime/zero/mics.py): memory terms, validation, check and the
// speed model's communication volume. Expected values are hand arithmetic
// written here from the published llama-2-7b shape (data/models/llama-2-7b.json:
// h 4096, ffn 11008, 32 layers, vocab 32000, untied; Ψ = 6,738,415,616,
// KerasHub llama2_7b_en) and the DeepSpeed v0.19.6 allocations each term
// cites, never from zeromem's own output.
#include "estimate_inputs.h"

#include "zeromem/config_check.h"
#include "zeromem/speed.h"
#include "zeromem/zeropp.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

using namespace zeromem;
using testinputs::preset_input;

namespace {

// llama-2-7b, by hand: per layer 4·4096² (attention) + 3·4096·11008 (MLP)
// + 2·4096 (norms) = 202,383,360; × 32 = 6,476,267,520; + embedding and LM
// head 2 · 32000 · 4096 = 262,144,000; + final norm 4096.
constexpr uint64_t kPsi = 6738415616ull;
// Persistent (ZeRO-3 keeps whole, numel <= 1e5): the 65 RMSNorm weights.
constexpr uint64_t kPersist = 65ull * 4096;
// Largest module: the embedding (= LM head), 32000 · 4096.
constexpr uint64_t kL = 131072000ull;

EstimateInput llama_stage3(int64_t gpus, int64_t nodes) {
    EstimateInput in = preset_input("llama-2-7b", gpus, 3, Dtype::bf16);
    in.cluster.nodes = nodes;
    return in;
}

const PhaseMemory& phase(const Estimate& e, const std::string& name) {
    for (const auto& p : e.phases)
        if (p.name == name) return p;
    throw std::logic_error("no phase " + name);
}

uint64_t term_bytes(const Estimate& e, const std::string& needle) {
    for (const auto& t : e.terms)
        if (t.component.find(needle) != std::string::npos) return t.bytes;
    return 0;
}

}  // namespace

TEST(ZeroPP, PresetIsTheHandCountedLlama) {
    const EstimateInput in = llama_stage3(16, 2);
    ASSERT_EQ(in.model.params, kPsi);
    ASSERT_EQ(in.model.largest_layer_params, kL);
}

// hpZ, 16 GPUs on 2 nodes, zero_hpz_partition_size 8, bf16: the secondary
// partition (partition_parameters.py _partition_param_sec) of the
// non-persistent parameters while training, of all of them at load, none
// after the step (stage3.py invalidate_secondary_tensor).
TEST(ZeroPP, HpzSecondaryPartitionBytesPerPhase) {
    EstimateInput in = llama_stage3(16, 2);
    const Estimate plain = estimate(in);
    in.zero.zero_hpz_partition_size = 8;
    const Estimate hpz = estimate(in, true);
    // Training: 2 B · ceil((Ψ - persistent) / 8) = 2 · ceil(6,738,149,376 / 8) = 2 · 842,268,672.
    const uint64_t train = 2ull * 842268672ull;
    ASSERT_EQ(train, 1684537344ull);
    // Load: 2 B · ceil(Ψ / 8) = 2 · 842,301,952.
    const uint64_t load = 2ull * 842301952ull;
    // Primary partition: 2 B · (ceil(Ψ/16) + persistent) = 2 · (421,150,976 + 266,240).
    const uint64_t primary = 2ull * (421150976ull + kPersist);
    EXPECT_EQ(plain.per_gpu.parameters, primary);
    EXPECT_EQ(hpz.per_gpu.parameters, primary + train);
    EXPECT_EQ(hpz.per_gpu.parameters, 2527371776ull);
    for (const char* name : {"forward", "backward", "optimizer_step", "steady_backward"})
        EXPECT_EQ(phase(hpz, name).per_gpu.parameters - phase(plain, name).per_gpu.parameters, train) << name;
    EXPECT_EQ(phase(hpz, "load").per_gpu.parameters - phase(plain, "load").per_gpu.parameters, load);
    EXPECT_EQ(phase(hpz, "checkpoint_save").per_gpu.parameters, phase(plain, "checkpoint_save").per_gpu.parameters);
    EXPECT_EQ(term_bytes(hpz, "hpZ secondary partition"), train);
    // Parameter offload to the CPU: the secondary partition lives on the host, not the GPU.
    in.zero.offload_param = OffloadDevice::cpu;
    in.zero.offload_optimizer = OffloadDevice::cpu;
    const Estimate off = estimate(in, true);
    EXPECT_EQ(off.per_gpu.parameters, 2 * kPersist);
    EXPECT_GE(term_bytes(off, "hpZ secondary partitions (offload_param cpu)"), load);
}

// The paper convention adds 2Ψ/hpz to the stage-3 parameters.
TEST(ZeroPP, HpzPaperConvention) {
    EstimateInput in = llama_stage3(16, 2);
    in.convention = Convention::paper;
    in.zero.zero_hpz_partition_size = 8;
    // 2Ψ/16 + 2Ψ/8 = 842,301,952 + 1,684,603,904.
    EXPECT_EQ(estimate(in).per_gpu.parameters, 842301952ull + 1684603904ull);
}

// MiCS shard 8 on 32 GPUs (4 nodes) holds the model states of stage 3 on 8
// GPUs: Tn = ceil(Ψ/8) = 842,301,952; parameters 2·(Tn + persistent) =
// 1,685,136,384; gradients 2·Tn = 1,684,603,904; fp32 master + Adam m, v
// 12·Tn = 10,107,623,424.
TEST(ZeroPP, MicsShardEqualsStage3OnTheShard) {
    EstimateInput mics = llama_stage3(32, 4);
    mics.zero.mics_shard_size = 8;
    const EstimateInput eight = llama_stage3(8, 1);
    const Estimate a = estimate(mics), b = estimate(eight);
    EXPECT_EQ(a.per_gpu.parameters, 1685136384ull);
    EXPECT_EQ(a.per_gpu.gradients, 1684603904ull);
    EXPECT_EQ(a.per_gpu.optimizer_states, 10107623424ull);
    EXPECT_EQ(b.per_gpu.parameters, a.per_gpu.parameters);
    EXPECT_EQ(b.per_gpu.gradients, a.per_gpu.gradients);
    EXPECT_EQ(b.per_gpu.optimizer_states, a.per_gpu.optimizer_states);
    // Paper convention: (2 + 2 + 12)Ψ/8 = 16 · 842,301,952 (Ψ divisible by 8).
    mics.convention = Convention::paper;
    EXPECT_EQ(estimate(mics).per_gpu.total, 16ull * 842301952ull);
}

// qwZ forward gather of one fetch, 16 GPUs: n = max(L, prefetch 5e7) =
// 131,072,000 int8 bytes + fp32 scales 4 · 16 · ceil(8,192,000/8000) = 65,536
// + local fp16 copy and int8 partition 3 · 8,192,000 = 24,576,000.
// Backward with hpZ 8 gathers in the group of 8: local 16,384,000 -> scales
// 4 · 8 · 2048 = 65,536 and 3 · 16,384,000 = 49,152,000. bf16 adds the fp16
// conversions (CUDAQuantizer.quantize .to(torch.half): 2 · local; wait's fp16
// torch.cat of the embedding before .to(bf16): 2 · L = 262,144,000).
TEST(ZeroPP, QwzQuantizedGatherBuffers) {
    EstimateInput in = llama_stage3(16, 2);
    in.train.dtype = Dtype::fp16;
    in.zero.zero_quantized_weights = true;
    const Estimate e = estimate(in, true);
    EXPECT_EQ(term_bytes(e, "(forward): qwZ"), 131072000ull + 65536ull + 24576000ull);
    in.zero.zero_hpz_partition_size = 8;
    const Estimate h = estimate(in, true);
    EXPECT_EQ(term_bytes(h, "(backward): qwZ"), 131072000ull + 65536ull + 49152000ull);
    in.train.dtype = Dtype::bf16;
    const Estimate b = estimate(in, true);
    EXPECT_EQ(term_bytes(b, "(forward): qwZ"), 131072000ull + 65536ull + 24576000ull + 2 * 8192000ull + 262144000ull);
}

// qgZ on 2 nodes of 8 (coalesced_collectives.py all_to_all_quant_reduce)
// for the largest gradient n = L = 131,072,000: int4 intra send + receive
// 65,536,000 · 2; inter send + receive 2 · n/16 = 16,384,000; fp16
// dequantized 2 · n/8 = 32,768,000; averaged slice 4 · n/16 = 32,768,000;
// scales 8 · 32000 (max(vocab, h, N)) + 8 · 4000 = 288,000. The bucket's
// reduce-scatter concatenation (reduce_bucket_size · 2 B) is not made.
TEST(ZeroPP, QgzAllToAllBuffers) {
    EstimateInput in = llama_stage3(16, 2);
    in.zero.zero_quantized_gradients = true;
    const Estimate e = estimate(in, true);
    EXPECT_EQ(term_bytes(e, "(backward): qgZ"), 131072000ull + 16384000ull + 32768000ull + 32768000ull + 288000ull);
    EXPECT_EQ(term_bytes(e, "reduce_scatter_coalesced cat"), 0u);
    // One node: DeepSpeed keeps the reduce-scatter (stage3.py __avg_scatter_grads).
    EstimateInput one = llama_stage3(8, 1);
    one.zero.zero_quantized_gradients = true;
    const Estimate o = estimate(one, true);
    EXPECT_EQ(term_bytes(o, "(backward): qgZ"), 0u);
    EXPECT_EQ(term_bytes(o, "reduce_scatter_coalesced cat"), 500000000ull * 2);
}

TEST(ZeroPP, InvalidSettingsNameTheKey) {
    auto error_of = [](EstimateInput in) {
        try {
            estimate(in);
        } catch (const InputError& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EstimateInput in = llama_stage3(16, 2);
    in.zero.mics_shard_size = 6;
    EXPECT_NE(error_of(in).find("zero_optimization.mics_shard_size: 6 does not divide"), std::string::npos);
    in.zero.mics_shard_size = 8;
    in.zero.zero_hpz_partition_size = 8;
    EXPECT_NE(error_of(in).find("zero_optimization.zero_hpz_partition_size"), std::string::npos);
    in.zero.zero_hpz_partition_size = 1;
    in.zero.mics_hierarchical_params_gather = true;
    EXPECT_NE(error_of(in).find("zero_optimization.mics_hierarchical_params_gather"), std::string::npos);
    // mics.py allreduce_mics_shard_grads: "Local sharding has no support for CPU offloading".
    in.zero.mics_hierarchical_params_gather = false;
    in.zero.offload_optimizer = OffloadDevice::cpu;
    EXPECT_NE(error_of(in).find("zero_optimization.mics_shard_size: MiCS with replicas"), std::string::npos);
    in.zero.offload_optimizer = OffloadDevice::none;
    // Below stage 3 DeepSpeed ignores MiCS: a note, not an error.
    in.zero.mics_hierarchical_params_gather = false;
    in.zero.stage = 2;
    EXPECT_EQ(error_of(in), "");
    bool noted = false;
    for (const auto& n : estimate(in).notes) noted = noted || n.find("mics_shard_size acts in ZeRO stage 3 only") != std::string::npos;
    EXPECT_TRUE(noted);
}

// `zeromem check` no longer warns that it cannot estimate these keys.
TEST(ZeroPP, CheckReportsThemModelled) {
    const auto fs = check_ds_config(nlohmann::json::parse(R"({"train_micro_batch_size_per_gpu": 1,
        "zero_optimization": {"stage": 3, "zero_hpz_partition_size": 8, "zero_quantized_weights": true,
        "zero_quantized_gradients": true, "mics_shard_size": -1}})"), CheckOptions{});
    for (const auto& f : fs) {
        EXPECT_EQ(f.pointer.find("hpz"), std::string::npos) << f.message;
        EXPECT_EQ(f.pointer.find("quantized"), std::string::npos) << f.message;
        EXPECT_EQ(f.pointer.find("mics"), std::string::npos) << f.message;
    }
    for (const char* k : {"/zero_optimization/zero_hpz_partition_size", "/zero_optimization/zero_quantized_weights",
                          "/zero_optimization/zero_quantized_gradients", "/zero_optimization/mics_shard_size",
                          "/zero_optimization/mics_hierarchical_params_gather"})
        EXPECT_EQ(ds_schema_entry(k)->at("memory"), "modelled") << k;
}

// `zeromem check` with the GPU count refuses what DeepSpeed asserts, at the key.
TEST(ZeroPP, CheckRefusesIndivisibleSizesAtTheKey) {
    CheckOptions o;
    o.gpus_known = true;
    o.autos.world_size = 16;
    const auto fs = check_ds_config(nlohmann::json::parse(R"({"train_micro_batch_size_per_gpu": 1,
        "zero_optimization": {"stage": 3, "mics_shard_size": 6}})"), o);
    bool found = false;
    for (const auto& f : fs)
        found = found || (f.severity == Severity::error && f.pointer == "/zero_optimization/mics_shard_size" &&
                          f.message.find("6 does not divide") != std::string::npos);
    EXPECT_TRUE(found);
    const auto ok = check_ds_config(nlohmann::json::parse(R"({"train_micro_batch_size_per_gpu": 1,
        "zero_optimization": {"stage": 3, "mics_shard_size": 8, "zero_hpz_partition_size": 1}})"), o);
    EXPECT_EQ(count_findings(ok, Severity::error), 0u);
    // The finding names the key once, as its pointer: the message does not repeat it.
    for (const auto& f : fs) {
        if (f.pointer == "/zero_optimization/mics_shard_size") {
            EXPECT_EQ(f.message.rfind("6 does not divide", 0), 0u) << f.message;
        }
    }
}

// engine.py _configure_zero_optimizer builds MiCS only for mics_shard_size
// > 0; mics_hierarchical_params_gather only acts with MiCS. Values DeepSpeed
// ignores get a note naming the key (no setting silently ignored).
TEST(ZeroPP, IgnoredMicsSettingsAreNoted) {
    auto noted = [](const EstimateInput& in, const std::string& needle) {
        for (const auto& n : estimate(in).notes)
            if (n.find(needle) != std::string::npos) return true;
        return false;
    };
    EstimateInput in = llama_stage3(8, 1);
    EXPECT_FALSE(noted(in, "mics_shard_size ="));
    for (int64_t m : {0, -7}) {
        in.zero.mics_shard_size = m;
        EXPECT_TRUE(noted(in, "mics_shard_size = " + std::to_string(m))) << m;
    }
    in.zero.mics_shard_size = -1;
    in.zero.mics_hierarchical_params_gather = true;
    EXPECT_TRUE(noted(in, "mics_hierarchical_params_gather acts only with MiCS"));
}

// ZeRO++ paper (Wang et al. 2023) Sec. 3-4: ZeRO-3 moves M forward, M
// backward and M of gradients across nodes (3M); qwZ halves the forward
// all-gather (int8 + one fp32 scale per <= 8000 elements), hpZ keeps the
// backward all-gather inside the node (0 cross-node), qgZ quarters the
// gradient volume (int4 + scales): 0.5M + 0 + 0.25M = 0.75M, 4x less.
TEST(ZeroPP, SpeedCommunicationVolumeFollowsThePaper) {
    const GpuSpec gpu = load_gpu_preset("A100-80GB", ZEROMEM_SOURCE_DATA_DIR);
    const SpeedHardware hw = speed_hardware(gpu, Dtype::bf16, "", "ib-hdr200", ZEROMEM_SOURCE_DATA_DIR);
    EstimateInput in = llama_stage3(16, 2);
    const StepTime base = step_time(in, hw);
    const double M = double(kPsi) * 2;
    EXPECT_DOUBLE_EQ(base.comm_bytes_forward, M);
    EXPECT_DOUBLE_EQ(base.comm_bytes_backward, M);
    EXPECT_DOUBLE_EQ(base.comm_bytes_gradients, M);
    EXPECT_DOUBLE_EQ(base.comm_bytes_cross_node, 3 * M);

    in.zero.zero_quantized_weights = true;
    const StepTime qw = step_time(in, hw);
    EXPECT_NEAR(qw.comm_bytes_forward / base.comm_bytes_forward, 0.5, 1e-3);
    EXPECT_LT(qw.comm_total, base.comm_total);

    in.zero.zero_quantized_weights = false;
    in.zero.zero_hpz_partition_size = 8;
    const StepTime hp = step_time(in, hw);
    EXPECT_DOUBLE_EQ(hp.comm_bytes_cross_node, 2 * M);  // backward stays in the node
    EXPECT_LT(hp.comm_total, base.comm_total);

    in.zero.zero_hpz_partition_size = 1;
    in.zero.zero_quantized_gradients = true;
    const StepTime qg = step_time(in, hw);
    EXPECT_NEAR(qg.comm_bytes_gradients / base.comm_bytes_gradients, 0.25, 1e-3);

    in.zero.zero_quantized_weights = true;
    in.zero.zero_hpz_partition_size = 8;
    const StepTime all = step_time(in, hw);
    EXPECT_NEAR(all.comm_bytes_cross_node / base.comm_bytes_cross_node, 0.25, 1e-3);
    EXPECT_LT(all.exposed_comm, base.exposed_comm);
}

// MiCS: gathers inside the shard group (one node when it fits), gradients
// also all-reduced across the replicas (mics.py allreduce_mics_shard_grads):
// M/8 of the 16-bit gradients with shard 8.
TEST(ZeroPP, MicsSpeedGroups) {
    const GpuSpec gpu = load_gpu_preset("A100-80GB", ZEROMEM_SOURCE_DATA_DIR);
    const SpeedHardware hw = speed_hardware(gpu, Dtype::bf16, "", "ib-hdr200", ZEROMEM_SOURCE_DATA_DIR);
    EstimateInput in = llama_stage3(32, 4);
    const StepTime base = step_time(in, hw);
    in.zero.mics_shard_size = 8;
    const StepTime m = step_time(in, hw);
    const double M = double(kPsi) * 2;
    EXPECT_DOUBLE_EQ(m.comm_bytes_gradients, M + M / 8);
    EXPECT_DOUBLE_EQ(m.comm_bytes_cross_node, M / 8);  // only the replica all-reduce leaves the node
    EXPECT_DOUBLE_EQ(base.comm_bytes_cross_node, 3 * M);
    // Each rank updates Ψ/8 instead of Ψ/32: the GPU Adam step (linear in
    // the parameters updated: ~28 B of HBM traffic each) takes 4x as long.
    EXPECT_NEAR(m.optimizer / base.optimizer, 4.0, 1e-9);
    // 4 accumulation steps: 4 reduce-scatters, one replica all-reduce at the
    // boundary (allreduce_mics_shard_grads returns early otherwise).
    in.train.grad_accum = 4;
    EXPECT_DOUBLE_EQ(step_time(in, hw).comm_bytes_gradients, 4 * M + M / 8);
}
