// Event-level tests of the host producer and replay on the tiny model
// (tiny_model.h: 147,776 parameters, 2 GPUs on one node). Every expected
// value is derived by hand below from DeepSpeed v0.19.6's code (cited per
// line) and PyTorch's pinned rounding (CachingHostAllocator.h allocate,
// PowerOf2Ceil): P2(x) is the
// next power of two.
#include "tiny_model.h"
#include "zeromem/host_allocator.h"
#include "zeromem/sim_writers.h"
#include "zeromem/simulator.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

using namespace zeromem;
using namespace zeromem::sim;

namespace {

constexpr uint64_t kBaseline = 1073741824ull;  // ResidualSettings::host_process_overhead default, per rank

// (term, kind, +bytes / -bytes) of every alloc/free in the load phase after
// the model load, i.e. what deepspeed.initialize does on the host.
using Row = std::tuple<std::string, HostKind, int64_t>;
std::vector<Row> init_rows(const HostEventLog& log) {
    std::vector<Row> rows;
    const std::string part = "zero.Init's per-parameter pinned partitions left in PyTorch's host cache";
    for (const auto& e : log.events) {
        if (e.phase != Phase::load) break;
        const std::string term = e.term;
        if (term == "model load" || term == "host_process_overhead") continue;
        if (e.action == HostAction::alloc && term != part) rows.emplace_back(term, e.kind, static_cast<int64_t>(e.bytes));
        if (e.action == HostAction::free) rows.emplace_back(term, e.kind, -static_cast<int64_t>(e.bytes));
    }
    return rows;
}

}  // namespace

// ZeRO-2, offload_optimizer cpu, pin_memory true, DeepSpeed 0.19.6, torch 2.8.
// Ψ = 147,776; the flat group is padded to a multiple of 2·N_d = 4:
// 147,776 already is, so Tn = 73,888 elements. b_m = 2 (bf16).
//  fp32 master: 4·Tn = 295,552 B, pinned P2 = 524,288 (2^19)
//  16-bit staging: 2·Tn = 147,776 B, pinned P2 = 262,144 (2^18)
//  temp_grad_buffer_for_cpu_offload: 2 · largest parameter (gate/up/down
//  64x256 = 16,384) = 32,768 B = 2^15, not rounded
//  fp32 gradient partition: 295,552 B -> 524,288 pinned.
TEST(HostEvents, TinyStage2CpuOptimizerOffloadSequence) {
    EstimateInput in = zeromem::sim::testing::tiny_input(2);
    in.zero.offload_optimizer = OffloadDevice::cpu;
    const HostEventLog log = produce_host_events(in, 2);
    const std::vector<Row> expected = {
        {"fp32 master's pageable source beside its pinned copy", HostKind::pageable, 295552},   // .clone().to(cpu, fp32)
        {"fp32 master (single_partition_of_fp32_groups)", HostKind::pinned, 295552},          // pin_memory
        {"fp32 master's pageable source beside its pinned copy", HostKind::pageable, -295552},  // name rebound
        {"pageable source of a pinned copy", HostKind::pageable, 147776},                       // torch.full
        {"16-bit parameter staging (param_buffer_of_bit16_for_cpu_offload_groups)", HostKind::pinned, 147776},
        {"pageable source of a pinned copy", HostKind::pageable, 32768},  // temp_grad_buffer zeros
        {"temp_grad_buffer_for_cpu_offload", HostKind::pinned, 32768},
        {"pageable source of a pinned copy", HostKind::pageable, -32768},
        {"pageable source of a pinned copy", HostKind::pageable, 295552},  // single_grad_partition zeros
        {"fp32 gradient partition", HostKind::pinned, 295552},
        {"pageable source of a pinned copy", HostKind::pageable, -295552},
        {"pageable source of a pinned copy", HostKind::pageable, -147776},  // temp_buffer_bit16 at __init__'s end
    };
    EXPECT_EQ(init_rows(log), expected);

    const HostResult r = replay_host(log, host_allocator_config(in.stack.torch));
    // Load peak at the fp32 gradient partition's pinned copy: 524,288 +
    // 147,776 (staging source) + 262,144 + 32,768 + 295,552 (zeros) +
    // 524,288 = 1,786,816 above the baseline. The fp32 model load (4 B x
    // 147,776 = 591,104) is lower.
    EXPECT_EQ(r.peak_in({Phase::load}), kBaseline + 1786816);
    // Steady: the four pinned buffers 524,288 + 262,144 + 32,768 + 524,288 =
    // 1,343,488, plus CPU Adam's m and v at the first step, 2 x 4 x 73,888 =
    // 591,104 (cpu_adam.py step, zeros_like): 1,934,592.
    EXPECT_EQ(r.peak_in({Phase::forward, Phase::backward}), kBaseline + 1343488);
    EXPECT_EQ(r.peak_in({Phase::optimizer_step, Phase::steady_forward, Phase::steady_backward}), kBaseline + 1934592);
    EXPECT_EQ(r.peak_per_rank, kBaseline + 1934592);
    EXPECT_EQ(r.peak_per_node(), 2 * (kBaseline + 1934592));  // 2 ranks on the node
    EXPECT_EQ(r.peak_pinned, 1343488u);
    EXPECT_EQ(r.peak_event, "CPU Adam m and v");
    EXPECT_EQ(r.nvme, 0u);
}

// ZeRO-3, offload_param cpu + offload_optimizer cpu, pin_memory true,
// zero.Init, sub_group_size 1e9 (one sub-group). Each parameter's partition
// is ceil(numel/2) elements x 2 B, and every one is a power of two: embed
// 8,192 B, norms 64 B, q/k/v/o 4,096 B, gate/up/down 16,384 B, lm_head
// 8,192 B: Σ = 147,776 B = 2 · Tn, Tn = 73,888, nothing rounded.
//  16-bit flat buffer: P2(147,776) = 262,144 pinned (always pinned:
//  stage3.py _create_param_groups_fp16_flat_cpu_memory); the per-parameter
//  blocks (147,776) stay cached.
//  fp32 master 295,552 pageable (after a 295,552 conversion copy).
//  fp32 gradients: zeros 295,552 + pinned 524,288.
//  grad_partitions_flat_buffer: zeros 147,776 + pinned 262,144.
TEST(HostEvents, TinyStage3CpuParamAndOptimizerOffloadSequence) {
    EstimateInput in = zeromem::sim::testing::tiny_input(3);
    in.zero.offload_optimizer = OffloadDevice::cpu;
    in.zero.offload_param = OffloadDevice::cpu;
    const HostEventLog log = produce_host_events(in, 2);
    const char* part = "zero.Init's per-parameter pinned partitions left in PyTorch's host cache";
    std::vector<Row> expected = {{"16-bit parameter flat buffer", HostKind::pinned, 147776}};
    // _move_to_flat_buffer drops each of the 21 per-parameter partitions (embedding, 2 x 9 per layer, final norm, LM head).
    for (int64_t b : {8192, 64, 4096, 4096, 4096, 4096, 64, 16384, 16384, 16384, 64, 4096, 4096, 4096, 4096, 64, 16384,
                      16384, 16384, 64, 8192})
        expected.emplace_back(part, HostKind::pinned, -b);
    const std::vector<Row> rest = {
        {"fp32 master conversion + clone of one sub-group", HostKind::pageable, 295552},
        {"fp32 master partitions", HostKind::pageable, 295552},
        {"fp32 master conversion + clone of one sub-group", HostKind::pageable, -295552},
        {"init gradient_buffer of the largest sub-group", HostKind::pageable, 295552},
        {"pageable source of a pinned copy", HostKind::pageable, 295552},
        {"fp32 gradients, one pinned buffer per sub-group", HostKind::pinned, 295552},
        {"pageable source of a pinned copy", HostKind::pageable, -295552},
        {"init gradient_buffer of the largest sub-group", HostKind::pageable, -295552},
        {"pageable source of a pinned copy", HostKind::pageable, 147776},
        {"grad_partitions_flat_buffer", HostKind::pinned, 147776},
        {"pageable source of a pinned copy", HostKind::pageable, -147776},
    };
    expected.insert(expected.end(), rest.begin(), rest.end());
    EXPECT_EQ(init_rows(log), expected);

    const HostResult r = replay_host(log, host_allocator_config(in.stack.torch));
    // Load peak at the sub-group's pinned gradient: cached 147,776 + flat
    // 262,144 + master 295,552 + gradient_buffer 295,552 + zeros 295,552 +
    // pinned 524,288 = 1,820,864.
    EXPECT_EQ(r.peak_in({Phase::load}), kBaseline + 1820864);
    // After init: 147,776 + 262,144 + 295,552 + 524,288 + 262,144 = 1,491,904;
    // first step adds m and v, 591,104: 2,083,008.
    EXPECT_EQ(r.peak_in({Phase::forward, Phase::backward}), kBaseline + 1491904);
    EXPECT_EQ(r.peak_in({Phase::optimizer_step, Phase::steady_backward}), kBaseline + 2083008);
    // Pinned: 147,776 cached + 262,144 + 524,288 + 262,144 = 1,196,352.
    EXPECT_EQ(r.peak_pinned, 1196352u);
    EXPECT_EQ(r.peak_phase, Phase::optimizer_step);
}

// NVMe: ZeRO-3 with offload_optimizer nvme writes per sub-group the fp32
// master (4 · 73,888 = 295,552 B, a multiple of the 1,024 B aio block: 256
// elements; 73,888 = 288.6 x 256 -> 289 x 256 = 73,984 elements = 295,936 B),
// the fp32 gradients (295,936 B) and Adam's m and v (2 x 295,936 B): 4 x
// 295,936 = 1,183,744 B per rank. The swap buffers: buffer_count 4 x
// 295,936 B page-locked, exact.
TEST(HostEvents, TinyStage3NvmeOptimizerFilesAndBuffers) {
    EstimateInput in = zeromem::sim::testing::tiny_input(3);
    in.zero.offload_optimizer = OffloadDevice::nvme;
    const HostResult r = simulate_host(in, 2);
    EXPECT_EQ(r.nvme, 1183744u);
    // Pinned: 4 x 295,936 = 1,183,744 locked + grad_partitions_flat_buffer
    // P2(147,776) = 262,144.
    EXPECT_EQ(r.peak_pinned, 1183744u + 262144u);
}

TEST(HostEvents, NoOffloadIsTheBaselineAndTheModelLoad) {
    // ZeRO-2 without offload: the baseline, then the fp32 model on the host
    // (4 x 147,776 = 591,104) while loading; afterwards only the baseline.
    EstimateInput in = zeromem::sim::testing::tiny_input(2);
    const HostResult r = simulate_host(in, 1);
    EXPECT_EQ(r.peak_in({Phase::load}), kBaseline + 591104);
    EXPECT_EQ(r.peak_in({Phase::optimizer_step}), kBaseline);
    EXPECT_EQ(r.peak_pinned, 0u);
}

TEST(HostEvents, SimulateCarriesTheHostReplayIntoJsonAndTable) {
    EstimateInput in = zeromem::sim::testing::tiny_input(2);
    in.zero.offload_optimizer = OffloadDevice::cpu;
    const SimResult s = simulate(in, SimOptions{});
    EXPECT_EQ(s.host.peak_per_rank, kBaseline + 1934592);
}

// The host object of --format json: integer bytes, the keys documented in
// host_allocator.h, and the GPU keys unchanged beside it.
TEST(HostEvents, JsonHostObjectAndTableLines) {
    EstimateInput in = zeromem::sim::testing::tiny_input(2);
    in.zero.offload_optimizer = OffloadDevice::cpu;
    const SimResult s = simulate(in, SimOptions{});
    const nlohmann::json j = to_json(s);
    for (const char* k : {"peak_allocated", "peak_reserved", "peak_event", "peak_module", "oom", "phases", "timeline"})
        EXPECT_TRUE(j.contains(k)) << k;
    const nlohmann::json& h = j.at("host");
    EXPECT_EQ(h.at("peak_per_rank").get<uint64_t>(), kBaseline + 1934592);  // hand-derived above
    EXPECT_EQ(h.at("peak_per_node").get<uint64_t>(), 2 * (kBaseline + 1934592));
    EXPECT_EQ(h.at("pinned").get<uint64_t>(), 1343488u);
    EXPECT_EQ(h.at("nvme").get<uint64_t>(), 0u);
    EXPECT_EQ(h.at("peak_event"), "CPU Adam m and v");
    EXPECT_EQ(h.at("peak_phase"), "optimizer_step");
    ASSERT_FALSE(h.at("timeline").empty());
    const auto& row = h.at("timeline").at(1);
    for (const char* k : {"t", "event", "phase", "module", "kind", "bytes", "allocated", "resident", "pinned", "nvme"})
        EXPECT_TRUE(row.contains(k)) << k;
    EXPECT_TRUE(row.at("bytes").is_number_integer());
    EXPECT_EQ(row.at("event"), "host_process_overhead");
    const std::string table = render_table(s);
    EXPECT_NE(table.find("peak host RAM"), std::string::npos);
    EXPECT_NE(table.find("per node"), std::string::npos);
    const std::string ex = render_explain(s);
    EXPECT_NE(ex.find("stage_1_and_2.py initialize_optimizer_states"), std::string::npos);
    // replay() alone does not replay the host: null.
    EXPECT_TRUE(to_json(replay(produce_events(in, SimOptions{}), SimOptions{}, std::nullopt)).at("host").is_null());
}
