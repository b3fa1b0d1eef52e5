// The simulator on mixture-of-experts and multi-head latent attention
// models: the module tree against the published parameter counts, the
// per-expert ZeRO-3 fetch and the routed activations on a tiny MoE model
// written out here by hand, and what stays refused.
//
// Tiny MoE model (Qwen3-MoE layout, transformers modeling_qwen3_moe.py):
// h = 64, 2 layers, both MoE, 4 heads (MHA, head_dim 16), 4 experts of
// width f_e = 32, top-2, vocabulary 128, RMSNorm, untied LM head, gated
// experts. Parameters (elements):
//   embed_tokens 128x64 = 8192
//   per layer: input_layernorm 64, q/k/v/o_proj 64x64 = 4096 each,
//     post_attention_layernorm 64, mlp.gate (router) 64x4 = 256,
//     4 experts x (gate_proj 64x32, up_proj 64x32, down_proj 32x64 = 2048 each)
//     = 24576                                               -> 41344 per layer
//   final norm 64, lm_head 128x64 = 8192
//   total 8192 + 2 x 41344 + 64 + 8192 = 99136.
// Input: N_d = 2, sequence 16, micro batch 1 (S = 16 tokens), bf16 (2 B).
#include "tiny_model.h"
#include "zeromem/moe.h"
#include "zeromem/request.h"
#include "zeromem/simulator.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

using namespace zeromem;
using namespace zeromem::sim;

namespace {

ModelArch tiny_moe_arch() {
    ModelArch a = zeromem::sim::testing::tiny_arch();
    a.name = "tiny-moe";
    a.family = "qwen3_moe";
    a.model_type = "qwen3_moe";
    a.ffn_size = 0;
    a.num_experts = 4;
    a.num_experts_per_tok = 2;
    a.expert_ffn_size = 32;
    a.num_moe_layers = 2;
    return a;
}

EstimateInput tiny_moe(int stage) {
    EstimateInput in = zeromem::sim::testing::tiny_input(stage);
    in.model.arch = tiny_moe_arch();
    in.model.params = 99136;
    in.model.largest_layer_params = 8192;
    return in;
}

uint64_t tree_total(const std::vector<SimModule>& mods) {
    uint64_t t = 0;
    for (const auto& m : mods)
        for (uint64_t p : m.params) t += p;
    return t;
}

const SimModule* find(const std::vector<SimModule>& mods, const std::string& name) {
    for (const auto& m : mods)
        if (m.name == name) return &m;
    return nullptr;
}

using Row = std::tuple<std::string, std::string, uint64_t>;  // action, term, bytes

// Allocation and free rows of `module` in `phase` (spans left out).
std::vector<Row> module_rows(const EventLog& log, Phase phase, const std::string& module) {
    std::vector<Row> out;
    for (const auto& e : log.events) {
        if (e.phase != phase || log.modules[e.module] != module) continue;
        if (e.action != Action::alloc && e.action != Action::free) continue;
        out.emplace_back(e.action == Action::alloc ? "alloc" : "free", e.term, e.bytes);
    }
    return out;
}

}  // namespace

TEST(SimMoeModules, TinyMoeTree) {
    const auto mods = build_modules(tiny_moe_arch());
    // embed + 2 x (2 norms + 4 attention + router + 4 x 3 expert projections) + norm + lm_head
    ASSERT_EQ(mods.size(), 1u + 2u * (2 + 4 + 1 + 12) + 2u);
    EXPECT_EQ(tree_total(mods), 99136u);
    const SimModule* router = find(mods, "model.layers.0.mlp.gate");
    ASSERT_TRUE(router);
    EXPECT_EQ(router->params, std::vector<uint64_t>({256}));
    const SimModule* e3 = find(mods, "model.layers.1.mlp.experts.3.down_proj");
    ASSERT_TRUE(e3);
    EXPECT_EQ(e3->params, std::vector<uint64_t>({2048}));
    EXPECT_EQ(e3->expert, 3);
    EXPECT_EQ(e3->layer, 1);
}

// The published totals (tests/moe_test.cpp: from the configs, Mixtral's
// exact count published by KerasHub) are what the module tree holds.
TEST(SimMoeModules, PresetTreesHoldThePublishedCounts) {
    const auto mix = build_modules(load_model_preset("mixtral-8x7b", ZEROMEM_SOURCE_DATA_DIR));
    EXPECT_EQ(tree_total(mix), 46702792704ull);
    // modeling_mixtral.py: block_sparse_moe.gate 4096x8, experts.N.w1/w3 4096x14336, w2 14336x4096.
    ASSERT_TRUE(find(mix, "model.layers.31.block_sparse_moe.experts.7.w2"));
    EXPECT_EQ(find(mix, "model.layers.31.block_sparse_moe.experts.7.w2")->params, std::vector<uint64_t>({14336ull * 4096}));
    EXPECT_EQ(find(mix, "model.layers.0.block_sparse_moe.gate")->params, std::vector<uint64_t>({4096ull * 8}));
    // embed + 32 x (2 norms + 4 attention + router + 8 x 3) + norm + lm_head
    EXPECT_EQ(mix.size(), 1u + 32u * 31 + 2);

    const auto qwen = build_modules(load_model_preset("qwen3-30b-a3b", ZEROMEM_SOURCE_DATA_DIR));
    EXPECT_EQ(tree_total(qwen), 30532122624ull);
    // Qwen3MoeAttention q_norm / k_norm over head_dim 128.
    ASSERT_TRUE(find(qwen, "model.layers.0.self_attn.k_norm"));
    EXPECT_EQ(find(qwen, "model.layers.0.self_attn.k_norm")->params, std::vector<uint64_t>({128}));
    EXPECT_EQ(find(qwen, "model.layers.47.mlp.experts.127.gate_proj")->params, std::vector<uint64_t>({2048ull * 768}));

    const auto ds = build_modules(load_model_preset("deepseek-v2-lite", ZEROMEM_SOURCE_DATA_DIR));
    EXPECT_EQ(tree_total(ds), 15706484224ull);
    // DeepseekV2Attention without q_lora_rank: q_proj 2048 x 16(128+64);
    // kv_a_proj_with_mqa 2048 x (512+64); kv_a_layernorm 512; kv_b_proj
    // 512 x 16(128+128); o_proj 16x128 x 2048.
    EXPECT_EQ(find(ds, "model.layers.1.self_attn.q_proj")->params, std::vector<uint64_t>({2048ull * 3072}));
    EXPECT_EQ(find(ds, "model.layers.1.self_attn.kv_a_proj_with_mqa")->params, std::vector<uint64_t>({2048ull * 576}));
    EXPECT_EQ(find(ds, "model.layers.1.self_attn.kv_a_layernorm")->params, std::vector<uint64_t>({512}));
    EXPECT_EQ(find(ds, "model.layers.1.self_attn.kv_b_proj")->params, std::vector<uint64_t>({512ull * 4096}));
    EXPECT_EQ(find(ds, "model.layers.1.self_attn.o_proj")->params, std::vector<uint64_t>({2048ull * 2048}));
    // first_k_dense_replace 1: layer 0 has the dense MLP (intermediate_size 10944).
    EXPECT_EQ(find(ds, "model.layers.0.mlp.down_proj")->params, std::vector<uint64_t>({10944ull * 2048}));
    EXPECT_FALSE(find(ds, "model.layers.0.mlp.gate"));
    EXPECT_EQ(find(ds, "model.layers.1.mlp.gate")->params, std::vector<uint64_t>({64ull * 2048}));
    EXPECT_EQ(find(ds, "model.layers.26.mlp.experts.63.up_proj")->params, std::vector<uint64_t>({2048ull * 1408}));
    // n_shared_experts 2: one shared MLP of width 2 x 1408.
    EXPECT_EQ(find(ds, "model.layers.1.mlp.shared_experts.gate_proj")->params, std::vector<uint64_t>({2048ull * 2816}));
    // embed + layer 0 (2 norms, 5 MLA modules, 3 MLP) + 26 x (2 + 5 + router + 64 x 3 + 3 shared) + norm + lm_head
    EXPECT_EQ(ds.size(), 1u + 10u + 26u * (2 + 5 + 1 + 192 + 3) + 2);
}

// MLA with q_lora_rank (DeepSeek-V2): q_a_proj, q_a_layernorm, q_b_proj.
TEST(SimMoeModules, MlaWithQueryLowRank) {
    ModelArch a = tiny_moe_arch();
    a.kv_lora_rank = 16;
    a.q_lora_rank = 24;
    a.qk_nope_head_dim = 8;
    a.qk_rope_head_dim = 4;
    a.v_head_dim = 8;
    a.head_dim = 12;
    const auto mods = build_modules(a);
    EXPECT_EQ(tree_total(mods), count_params(a).total);
    EXPECT_EQ(find(mods, "model.layers.0.self_attn.q_a_proj")->params, std::vector<uint64_t>({64 * 24}));
    EXPECT_EQ(find(mods, "model.layers.0.self_attn.q_a_layernorm")->params, std::vector<uint64_t>({24}));
    EXPECT_EQ(find(mods, "model.layers.0.self_attn.q_b_proj")->params, std::vector<uint64_t>({24 * 4 * 12}));
    EXPECT_EQ(find(mods, "model.layers.0.self_attn.kv_a_proj_with_mqa")->params, std::vector<uint64_t>({64 * 20}));
    EXPECT_EQ(find(mods, "model.layers.0.self_attn.kv_b_proj")->params, std::vector<uint64_t>({16 * 4 * 16}));
    EXPECT_EQ(find(mods, "model.layers.0.self_attn.o_proj")->params, std::vector<uint64_t>({4 * 8 * 64}));
}

// Balanced routing (the replay's assumption): k x S rows spread over the E
// experts, the first (k x S) mod E one more. Sequence 5: 10 rows over 4
// experts = 3, 3, 2, 2; mlp_up of expert 1: 2 x 3 x 32 = 192 B, of expert 2:
// 2 x 2 x 32 = 128 B.
TEST(SimMoeEvents, UnevenRowsPerExpert) {
    EstimateInput in = tiny_moe(0);
    in.train.seq_len = 5;
    SimOptions opt;
    opt.steps = 1;
    const EventLog log = produce_events(in, opt);
    EXPECT_EQ(module_rows(log, Phase::forward, "model.layers.0.mlp.experts.1.up_proj"),
              std::vector<Row>({{"alloc", "mlp_up", 192}}));
    EXPECT_EQ(module_rows(log, Phase::forward, "model.layers.0.mlp.experts.2.up_proj"),
              std::vector<Row>({{"alloc", "mlp_up", 128}}));
}

// Stage 3, first forward (no prefetch yet): each expert projection is its
// own module, fetched when it runs and released after it. Expert 2's
// up_proj: 2048 elements, partitioned over N_d = 2 (1024 + 1024): the flat
// all-gather buffer 2048 x 2 B = 4096 B, the gathered parameter 4096 B, then
// mlp_up for its 2 x 16 / 4 = 8 rows: 2 x 8 x 32 = 512 B.
TEST(SimMoeEvents, Stage3FetchesEachExpert) {
    SimOptions opt;
    opt.steps = 1;
    const EventLog log = produce_events(tiny_moe(3), opt);
    const std::vector<Row> up = {
        {"alloc", "allgather_flat_buffer", 4096}, {"alloc", "gathered_parameter", 4096},
        {"free", "allgather_flat_buffer", 4096},  {"alloc", "mlp_up", 512},
        {"free", "gathered_parameter", 4096},
    };
    EXPECT_EQ(module_rows(log, Phase::forward, "model.layers.0.mlp.experts.2.up_proj"), up);
    // Every expert of both blocks is fetched in the forward.
    for (int l = 0; l < 2; ++l)
        for (int e = 0; e < 4; ++e)
            for (const char* p : {"gate_proj", "up_proj", "down_proj"}) {
                const std::string n = "model.layers." + std::to_string(l) + ".mlp.experts." + std::to_string(e) + "." + p;
                const auto r = module_rows(log, Phase::forward, n);
                ASSERT_FALSE(r.empty()) << n;
                EXPECT_EQ(r.front(), Row("alloc", "allgather_flat_buffer", 4096)) << n;
            }
    // Router: 64 x 4 = 256 elements (above the persistence threshold of
    // 100): gathered, 512 B.
    const auto gate = module_rows(log, Phase::forward, "model.layers.0.mlp.gate");
    const std::vector<Row> want_gate = {
        {"alloc", "allgather_flat_buffer", 512},
        {"alloc", "gathered_parameter", 512},
        {"free", "allgather_flat_buffer", 512},
        {"alloc", "mlp_input", 2048},                // 2 x S x h = 2 x 16 x 64
        {"alloc", "moe_router_logits", 128},         // S x E x 2 B = 16 x 4 x 2
        {"alloc", "moe_router_probabilities", 256},  // S x E x 4 B (fp32 softmax); no MLP dropout mask:
                                                     // Qwen3-MoE has no residual dropout
        {"free", "gathered_parameter", 512},
    };
    EXPECT_EQ(gate, want_gate);
}

// The routed activations of one expert: its 8 rows copied (8 x 64 x 2 B =
// 1024 B), gate 2 x 8 x 32 = 512 B, up 512 B, act(gate) and the product
// 512 B each, its output kept for the routing-weight product 1024 B. Over
// the 4 experts the routed copies and outputs are 4 x 2048 = 8192 B =
// 2 k S h b_m, the estimator's "MoE routed token copies (dropless)".
TEST(SimMoeEvents, RoutedActivationsPerExpert) {
    SimOptions opt;
    opt.steps = 1;
    const EventLog log = produce_events(tiny_moe(0), opt);
    const std::vector<Row> g = {{"alloc", "moe_routed_tokens", 1024}, {"alloc", "mlp_gate", 512}};
    const std::vector<Row> d = {
        {"alloc", "mlp_activation", 512}, {"alloc", "mlp_product", 512}, {"alloc", "moe_expert_output", 1024}};
    EXPECT_EQ(module_rows(log, Phase::forward, "model.layers.1.mlp.experts.0.gate_proj"), g);
    EXPECT_EQ(module_rows(log, Phase::forward, "model.layers.1.mlp.experts.0.down_proj"), d);
    uint64_t routed = 0, router = 0;
    for (const auto& e : log.events) {
        if (e.phase != Phase::forward || e.action != Action::alloc) continue;
        const std::string t = e.term;
        if (t == "moe_routed_tokens" || t == "moe_expert_output") routed += e.bytes;
        if (t == "moe_router_logits" || t == "moe_router_probabilities") router += e.bytes;
    }
    EXPECT_EQ(routed, 2u * 8192);  // two MoE blocks
    EXPECT_EQ(router, 2u * 16 * 4 * (2 + 4));
    // The estimator's terms for one block, same numbers.
    const auto terms = moe_activation_terms(tiny_moe_arch(), MoeSettings{}, 1, 16, 2);
    ASSERT_EQ(terms.size(), 2u);
    EXPECT_EQ(terms[0].bytes, router / 2);
    EXPECT_EQ(terms[1].bytes, routed / 2);
}

// What stays refused names its key.
TEST(SimMoeEvents, RefusedMoeInputsNameTheKey) {
    EstimateInput in = tiny_moe(2);
    in.moe.ep_size = 2;
    try {
        (void)produce_events(in, SimOptions{});
        ADD_FAILURE() << "--ep-size was replayed";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("--ep-size"), std::string::npos) << e.what();
    }
}

// Packed experts (ModelArch::fused_experts: transformers >= 5 Qwen3MoeExperts,
// MixtralExperts; gpt-oss and Llama 4 always): one module `experts` per block
// with gate_up_proj E x 2f x h = 4 x 64 x 64 = 16384 and down_proj E x h x f =
// 4 x 64 x 32 = 8192 elements, the same 99136 parameters in all. ZeRO-3
// fetches it whole: one all-gather of (16384 + 8192) x 2 B = 49152 B, a
// gathered copy per parameter (32768 B and 16384 B), then per expert (8 rows
// each, stage3 tiny_moe above) the routed copy 8 x 64 x 2 = 1024 B, the
// gate_up output 2 x 8 x 64 = 1024 B (gate and up are its views), act(gate)
// and the product 2 x 8 x 32 = 512 B each and the kept output 1024 B.
TEST(SimMoeEvents, PackedExpertsAreOneModuleFetchedWhole) {
    EstimateInput in = tiny_moe(3);
    in.model.arch->fused_experts = true;
    const auto mods = build_modules(*in.model.arch);
    EXPECT_EQ(tree_total(mods), 99136u);
    const SimModule* packed = find(mods, "model.layers.0.mlp.experts");
    ASSERT_TRUE(packed);
    EXPECT_EQ(packed->params, std::vector<uint64_t>({16384, 8192}));
    EXPECT_FALSE(find(mods, "model.layers.0.mlp.experts.0.up_proj"));
    // embed + 2 x (2 norms + 4 attention + router + packed experts) + norm + lm_head
    EXPECT_EQ(mods.size(), 1u + 2u * 8 + 2u);
    SimOptions opt;
    opt.steps = 1;
    const auto rows = module_rows(produce_events(in, opt), Phase::forward, "model.layers.0.mlp.experts");
    std::vector<Row> want = {{"alloc", "allgather_flat_buffer", 49152},
                             {"alloc", "gathered_parameter", 32768},
                             {"alloc", "gathered_parameter", 16384},
                             {"free", "allgather_flat_buffer", 49152}};
    for (int e = 0; e < 4; ++e)
        for (const Row& r : std::vector<Row>{{"alloc", "moe_routed_tokens", 1024},
                                             {"alloc", "mlp_gate_up", 1024},
                                             {"alloc", "mlp_activation", 512},
                                             {"alloc", "mlp_product", 512},
                                             {"alloc", "moe_expert_output", 1024}})
            want.push_back(r);
    want.push_back({"free", "gathered_parameter", 32768});
    want.push_back({"free", "gathered_parameter", 16384});
    EXPECT_EQ(rows, want);
}

// The fragmentation allowance comes from the replay for the MoE presets
// (no longer the 0.05 fallback of a refused input).
TEST(SimMoeEvents, FragmentationReplaysMoePresets) {
    for (const char* m : {"mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v2-lite"}) {
        Request r;
        r.model = m;
        r.gpus = 8;
        r.stage = 3;
        const Resolved res = resolve_request(r, ZEROMEM_SOURCE_DATA_DIR);
        EXPECT_TRUE(replay_fragmentation(res.input).has_value()) << m;
    }
}

// Stage 3 backward: each expert projection is fetched again when its
// backward runs, its 16-bit gradient (2048 x 2 B = 4096 B) is produced and
// copied into the IPG bucket, its saved activation (mlp_up, 512 B) and the
// gathered parameter are freed.
TEST(SimMoeEvents, Stage3BackwardRefetchesEachExpert) {
    SimOptions opt;
    opt.steps = 1;
    const EventLog log = produce_events(tiny_moe(3), opt);
    const auto r = module_rows(log, Phase::backward, "model.layers.0.mlp.experts.2.up_proj");
    ASSERT_GE(r.size(), 7u);
    EXPECT_EQ(std::vector<Row>(r.begin(), r.begin() + 4),
              std::vector<Row>({{"alloc", "allgather_flat_buffer", 4096},
                                {"alloc", "gathered_parameter", 4096},
                                {"free", "allgather_flat_buffer", 4096},
                                {"alloc", "gradient", 4096}}));
    EXPECT_EQ(std::vector<Row>(r.end() - 3, r.end()),
              std::vector<Row>({{"free", "gradient", 4096}, {"free", "mlp_up", 512}, {"free", "gathered_parameter", 4096}}));
}

// Full checkpointing: the MoE block's routed activations are rebuilt by the
// recompute just before the block's backward and freed by it (stage 0: the
// expert's gradient, 4096 B, is kept to the step).
TEST(SimMoeEvents, FullCheckpointingRecomputesTheRoutedRows) {
    EstimateInput in = tiny_moe(0);
    in.train.checkpointing = Checkpointing::full;
    SimOptions opt;
    opt.steps = 1;
    const EventLog log = produce_events(in, opt);
    EXPECT_TRUE(module_rows(log, Phase::forward, "model.layers.1.mlp.experts.1.gate_proj").empty());
    EXPECT_EQ(module_rows(log, Phase::backward, "model.layers.1.mlp.experts.1.gate_proj"),
              std::vector<Row>({{"alloc", "moe_routed_tokens", 1024},
                                {"alloc", "mlp_gate", 512},
                                {"alloc", "gradient", 4096},
                                {"free", "moe_routed_tokens", 1024},
                                {"free", "mlp_gate", 512}}));
}
