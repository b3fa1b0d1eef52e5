// The simulator's reserved-minus-allocated as the estimator's default
// fragmentation allowance: the tiny model of tiny_model.h, where the
// replay's peak reserved and peak allocated follow by hand from the caching
// allocator's rules (c10/cuda/CUDACachingAllocator.cpp round_size,
// get_allocation_size, should_split), and the faces' wiring through the CLI.
#include "../cli_runner.h"
#include "tiny_model.h"
#include "zeromem/estimate.h"
#include "zeromem/request.h"
#include "zeromem/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

using namespace zeromem;
using namespace zeromem::sim;
using zeromem::sim::testing::tiny_arch;
using cli::json_of;
using cli::Outcome;

namespace {

// The tiny model at stage 1 or 2 on 2 GPUs (tiny_model.h, as events_test.cpp).
EstimateInput tiny_zero12(int stage) { return zeromem::sim::testing::tiny_input(stage); }

// By hand. Peak allocated is at the second (steady) step's
// fp32_gradient_partition (stage_1_and_2.py step): bit16_groups_flat
// 295552 B, fp32_partition 4 x 73888 = 295552, Adam exp_avg and exp_avg_sq
// 295552 each (created at the first step), the 16-bit grads_in_partition
// 147776 and its flat copy 147776, and the fp32 cast 295552. Blocks round up
// to 512 B (A.1): 295552 -> 295936, 147776 -> 147968, so 5 x 295936 + 2 x
// 147968 = 1775616 B. Every request is <= 1 MiB, so it comes from the small
// pool's 2 MiB segments (A.2), all on the compute stream; the live blocks
// never exceed 1775616 B < 2 MiB and fit one segment: reserved 2097152 B at
// the allocated peak (and at any time).
constexpr uint64_t kTinyZero12PeakAllocated = 5 * 295936 + 2 * 147968;
constexpr uint64_t kTinyZero12Fragmentation = 2097152 - kTinyZero12PeakAllocated;  // 321536 B
// The load phase's own: its allocated peak is initialize_optimizer_states'
// fp32 gradient of zeros (stage_1_and_2.py single_grad_partition, 4 x 73888
// = 295552 B) beside bit16_groups_flat and fp32_partition, three 295936 B
// blocks in the same 2 MiB segment (the module's freed parameters give
// their bytes back to it).
constexpr uint64_t kTinyZero12LoadFragmentation = 2097152 - 3 * 295936;  // 1209344 B

}  // namespace

TEST(SimFragmentation, TinyModelReplayByHand) {
    static_assert(kTinyZero12Fragmentation == 321536, "2 MiB segment minus the allocated peak");
    for (int stage : {1, 2}) {
        SimOptions opt;
        const EstimateInput r = fragmentation_replay_input(tiny_zero12(stage), opt);
        EXPECT_EQ(opt.steps, 2);
        const SimResult res = replay(produce_events(r, opt), opt, std::nullopt);
        EXPECT_EQ(res.peak_allocated, kTinyZero12PeakAllocated) << "stage " << stage;
        EXPECT_EQ(res.peak_reserved, 2097152u) << "stage " << stage;
        EXPECT_EQ(res.reserved_at_peak, 2097152u) << "stage " << stage;
        EXPECT_EQ(replay_fragmentation(tiny_zero12(stage)), kTinyZero12Fragmentation) << "stage " << stage;
    }
}

// Every phase takes the replay's allowance but the load, which takes its own
// (reserved - allocated at the load's allocated peak: what later phases
// fragment is not there yet).
TEST(SimFragmentation, EstimateUsesTheReplayInEveryPhase) {
    EstimateInput in = tiny_zero12(2);
    use_replayed_fragmentation(in, false);
    const Estimate e = estimate(in, true);
    EXPECT_EQ(e.per_gpu.fragmentation, kTinyZero12LoadFragmentation);  // each component at its own peak
    ASSERT_FALSE(e.phases.empty());
    for (const auto& p : e.phases) {
        const uint64_t want = p.name == "load" ? kTinyZero12LoadFragmentation : kTinyZero12Fragmentation;
        EXPECT_EQ(p.per_gpu.fragmentation, want) << p.name;
        const GpuMemory& m = p.per_gpu;
        // + the per-process terms (process_terms.h): cuBLAS workspaces in the
        // allocator, the CUDA context and NCCL buffers outside it.
        EXPECT_EQ(m.total, m.parameters + m.gradients + m.optimizer_states + m.activations + m.temporary_buffers +
                               m.cublas_workspaces + m.cuda_context + m.nccl_buffers + want)
            << p.name;
    }
    const std::optional<FragmentationAllowance> a = replay_fragmentation_allowance(in);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->bytes, kTinyZero12Fragmentation);
    EXPECT_EQ(a->load_bytes, kTinyZero12LoadFragmentation);
    bool stated = false;
    for (const auto& t : e.terms)
        if (t.component == "fragmentation") stated = t.formula.find("simulator's replay") != std::string::npos;
    EXPECT_TRUE(stated) << "--explain states the replay as the source";
}

TEST(SimFragmentation, ExplicitFractionWins) {
    EstimateInput in = tiny_zero12(2);
    in.residual.fragmentation_fraction = 0.05;
    use_replayed_fragmentation(in, true);  // the user passed --fragmentation
    EXPECT_FALSE(in.residual.fragmentation_provider);
    const Estimate e = estimate(in);
    const GpuMemory& m = e.per_gpu;
    // The fraction applies to the allocated bytes: everything but what is
    // outside the allocator (context, NCCL) and the allowance itself.
    const uint64_t alloc = m.total - m.cuda_context - m.nccl_buffers - m.fragmentation;
    EXPECT_EQ(alloc, m.allocated);
    EXPECT_EQ(m.fragmentation, static_cast<uint64_t>(std::llround(0.05 * double(alloc))));
    // An explicit byte figure wins over an injected provider too.
    in.residual.fragmentation_bytes = 12345;
    in.residual.fragmentation_source = "test";
    in.residual.fragmentation_provider = [](const EstimateInput&) {
        return std::optional<FragmentationAllowance>(FragmentationAllowance{999, 999});
    };
    EXPECT_EQ(estimate(in).per_gpu.fragmentation, 12345u);
}

TEST(SimFragmentation, UnreplayableInputFallsBackToTheFraction) {
    EstimateInput in = tiny_zero12(2);
    in.model.arch.reset();  // --params only: no module tree
    EXPECT_EQ(replay_fragmentation(in), std::nullopt);
    in.model.arch = tiny_arch();
    in.model.arch->num_experts = 4;  // MoE: the producer refuses it
    in.model.arch->num_moe_layers = 2;
    EXPECT_EQ(replay_fragmentation(in), std::nullopt);
}

TEST(SimFragmentation, CliParamsOnlyFallsBackWithANote) {
    const auto j = json_of("estimate --params 7e9 --gpus 8 --stage 3");
    const auto& m = j["per_gpu_in_peak_phase"];
    const uint64_t frag = m["fragmentation"].get<uint64_t>();
    const uint64_t alloc = m["total"].get<uint64_t>() - m["cuda_context"].get<uint64_t>() -
                           m["nccl_buffers"].get<uint64_t>() - frag;
    EXPECT_EQ(frag, static_cast<uint64_t>(std::llround(0.05 * double(alloc))));
    bool noted = false;
    for (const auto& n : j["notes"]) noted = noted || n.get<std::string>().find("fixed fraction 0.05") != std::string::npos;
    EXPECT_TRUE(noted) << j["notes"].dump();
}

TEST(SimFragmentation, CliExplainNamesTheSource) {
    const std::string args = "estimate --model llama-2-7b --gpus 8 --stage 3 --micro-batch 1 --seq-len 1024 --explain";
    const Outcome replayed = cli::zeromem(args);
    ASSERT_EQ(replayed.exit_code, 0) << replayed.err;
    EXPECT_NE(replayed.out.find("fragmentation = bytes from the simulator's replay"), std::string::npos) << replayed.out;
    const Outcome fixed = cli::zeromem(args + " --fragmentation 0.05");
    ASSERT_EQ(fixed.exit_code, 0) << fixed.err;
    EXPECT_NE(fixed.out.find("fragmentation = fraction"), std::string::npos);
    EXPECT_EQ(fixed.out.find("simulator's replay"), std::string::npos);
}

// ZeRO++ and MiCS are not replayed: simulate refuses them naming the key,
// and the estimate falls back to the fixed fraction (no replayed allowance).
TEST(Fragmentation, ZeroPlusPlusIsNotReplayedAndFallsBack) {
    Request r;
    r.model = "llama-2-7b";
    r.gpus = 16;
    r.nodes = 2;
    r.stage = 3;
    r.hpz_partition_size = 8;
    const Resolved res = resolve_request(r, ZEROMEM_SOURCE_DATA_DIR);
    try {
        sim::simulate(res.input, sim::SimOptions{});
        ADD_FAILURE() << "simulate replayed hpZ";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("zero_hpz_partition_size"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(sim::replay_fragmentation(res.input).has_value());
}

namespace {

// The allowance as simulator.h defines it, computed the long way: a full
// replay gives the allocated peak's timeline index; a second replay of the
// events up to that point, then torch.cuda.empty_cache(), gives reserved
// minus allocated there. `released`, when given, receives the bytes that
// empty_cache gave back.
uint64_t replay_then_empty_cache(const EstimateInput& in, uint64_t* released = nullptr) {
    SimOptions opt;
    const EventLog log = produce_events(fragmentation_replay_input(in, opt), opt);
    const SimResult full = replay(log, opt, std::nullopt);
    EventLog prefix;
    prefix.modules = log.modules;
    uint64_t points = 0;
    for (const Event& e : log.events) {
        prefix.events.push_back(e);
        if (e.action != Action::span_begin && e.action != Action::span_end && points++ == full.peak_allocated_t) break;
    }
    Event ec = prefix.events.back();
    ec.action = Action::empty_cache;
    ec.bytes = 0;
    prefix.events.push_back(ec);
    const SimResult at_peak = replay(prefix, opt, std::nullopt);
    const TimelinePoint& last = at_peak.timeline.back();
    if (released) *released = at_peak.timeline[at_peak.timeline.size() - 2].reserved - last.reserved;
    return last.reserved - std::min(last.reserved, last.allocated);
}

// A wider model (h = 1024, gated MLP 2816, vocab 32000, 3 layers) whose
// tensors span the small pool, the 20 MiB segments and own segments.
EstimateInput wide_input(int stage, Checkpointing ckpt, int64_t micro_batch) {
    EstimateInput in = zeromem::sim::testing::tiny_input(stage);
    ModelArch& a = *in.model.arch;
    a.hidden_size = 1024;
    a.num_layers = 3;
    a.num_heads = 8;
    a.num_kv_heads = 8;
    a.head_dim = 128;
    a.ffn_size = 2816;
    a.vocab_size = 32000;
    in.cluster.gpus = 4;
    in.train.seq_len = 512;
    in.train.micro_batch = micro_batch;
    in.train.grad_accum = 4;
    in.train.checkpointing = ckpt;
    in.zero.reduce_bucket_size = 5000000;
    in.zero.stage3_param_persistence_threshold = 10000;
    return in;
}

}  // namespace

// The one-pass replay of replay_fragmentation (no timeline; empty_cache's
// release counted, not done) against the long way, over stages,
// checkpointing, micro batches and optimizer offload.
TEST(SimFragmentation, OnePassEqualsReplayThenEmptyCache) {
    int cases = 0, nonzero = 0, released_some = 0;
    for (int stage : {0, 1, 2, 3})
        for (Checkpointing ckpt : {Checkpointing::none, Checkpointing::selective, Checkpointing::full})
            for (int64_t mb : {1, 3})
                for (bool offload : {false, true}) {
                    if (offload && stage == 0) continue;
                    EstimateInput in = wide_input(stage, ckpt, mb);
                    if (offload) in.zero.offload_optimizer = OffloadDevice::cpu;
                    const std::optional<uint64_t> got = replay_fragmentation(in);
                    ASSERT_TRUE(got) << "stage " << stage;
                    uint64_t released = 0;
                    EXPECT_EQ(*got, replay_then_empty_cache(in, &released))
                        << "stage " << stage << " ckpt " << static_cast<int>(ckpt) << " mb " << mb << " offload " << offload;
                    ++cases;
                    nonzero += *got > 0;
                    released_some += released > 0;
                }
    EXPECT_EQ(cases, 42);
    EXPECT_GT(nonzero, 30) << "the cases should leave unallocated parts of segments in use";
    EXPECT_GT(released_some, 0) << "some cases should hold wholly free segments at the peak";
    EXPECT_EQ(replay_then_empty_cache(tiny_zero12(2)), kTinyZero12Fragmentation);
}

// The cached provider answers every input as the uncached replay does, when
// inputs share a replay (offload to nvme or cpu: the same GPU allocations)
// and when they do not, in any order and when asked again.
TEST(SimFragmentation, CachedProviderAgreesWithTheReplay) {
    const auto provider = fragmentation_provider();
    std::vector<EstimateInput> inputs;
    for (int stage : {1, 2, 3})
        for (OffloadDevice d : {OffloadDevice::none, OffloadDevice::cpu, OffloadDevice::nvme}) {
            EstimateInput in = wide_input(stage, Checkpointing::full, 2);
            in.zero.offload_optimizer = d;
            inputs.push_back(in);
        }
    for (int round = 0; round < 2; ++round)
        for (const EstimateInput& in : inputs) {
            const std::optional<uint64_t> want = replay_fragmentation(in);
            ASSERT_TRUE(want);
            const std::optional<FragmentationAllowance> got = provider(in);
            ASSERT_TRUE(got);
            EXPECT_EQ(got->bytes, *want) << "stage " << in.zero.stage << " round " << round;
        }
    EXPECT_NE(replay_fragmentation(inputs[0]), replay_fragmentation(inputs[6]))
        << "stages 1 and 3 should differ, or the test shows nothing";
}

// PYTORCH_CUDA_ALLOC_CONF reaches the replayed allowance (--alloc-conf of
// estimate): the provider answers each configuration as a direct replay with
// it does, although both configurations give the same event log (its cache
// folds the configuration into the log's fingerprint), and a bad string is
// refused with the flag's name before any replay.
TEST(SimFragmentation, AllocConfReachesTheReplay) {
    Request r;
    r.model = "llama-2-7b";
    r.gpus = 8;
    r.stage = 2;
    r.fragmentation.reset();
    EstimateInput plain = resolve_request(r, ZEROMEM_SOURCE_DATA_DIR).input;
    EstimateInput expandable = plain;
    expandable.residual.alloc_conf = "expandable_segments:True";
    const auto provider = fragmentation_provider();
    const auto a = provider(plain), b = provider(expandable);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->bytes, *replay_fragmentation(plain));
    EXPECT_EQ(b->bytes, *replay_fragmentation(expandable));
    EXPECT_NE(a->bytes, b->bytes);
    EstimateInput bad = plain;
    bad.residual.alloc_conf = "no_such_key:1";
    try {
        use_replayed_fragmentation(bad, false);
        ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("--alloc-conf"), std::string::npos) << e.what();
    }
}

// The simulator's output carries the per-process terms as their own fields,
// sized as the estimator sizes them (process_terms.h): on 8 A100s of one node
// the context is 400,000,000 B (Ampere, lazy loading), NCCL's WORLD and
// data-parallel rings 2 x 24 x (524,288 + 4,915,200 + 4,194,304) B, cuBLAS
// 2 x (4096 KiB x 2 + 16 KiB x 8 + 1024 KiB) B inside the allocator.
TEST(SimFragmentation, SimulateListsTheProcessTerms) {
    const auto j = json_of("simulate --model llama-2-7b --gpus 8 --gpu A100-80GB --stage 2 --steps 1");
    EXPECT_EQ(j.at("cuda_context").get<uint64_t>(), 400000000u);
    EXPECT_EQ(j.at("nccl_buffers").get<uint64_t>(), 2u * 24u * (524288u + 4915200u + 4194304u));
    EXPECT_EQ(j.at("cublas_workspaces").get<uint64_t>(), 2u * (4096u * 1024u * 2u + 16u * 1024u * 8u + 1048576u));
    EXPECT_TRUE(j.at("cublas_in_allocator").get<bool>());
    EXPECT_EQ(j.at("nvidia_smi_at_peak_reserved").get<uint64_t>(),
              j.at("peak_reserved").get<uint64_t>() + 400000000u + 462422016u + 19136512u);
}
