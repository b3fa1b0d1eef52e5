// The simulator's modules of a module tree (user_tree_modules.cpp): each
// module with parameters of its own, in forward order, tied tensors once.
// Oracles: the architecture's module list (module_tree.cpp build_modules,
// which follows transformers' LlamaDecoderLayer.forward) for a tree of the same
// model, and the replay of that architecture for the whole step.
#include "zeromem/model.h"
#include "zeromem/module_tree.h"
#include "zeromem/request.h"
#include "zeromem/simulator.h"

#include <gtest/gtest.h>

#include <string>

using namespace zeromem;
using namespace zeromem::sim;

namespace {

std::string tree_file(const std::string& name) { return std::string(ZEROMEM_TEST_DATA_DIR) + "/module_trees/" + name; }

// tiny_llama.json lists its modules as named_modules() registers them: a block's q/k/v/o and MLP before
// its two norms; the replay needs the order forward runs them.
TEST(TreeModules, LlamaTreeIsTheArchitecturesModulesInForwardOrder) {
    const ModuleTree tree = read_module_tree(tree_file("tiny_llama.json"));
    ASSERT_TRUE(tree.config);
    const ModelArch arch = arch_from_hf_config(*tree.config, "tiny_llama.json");
    const std::vector<SimModule> want = build_modules(arch), got = modules_from_tree(tree);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < want.size(); ++k) {
        EXPECT_EQ(got[k].name, want[k].name) << k;
        EXPECT_EQ(got[k].role, want[k].role) << want[k].name;
        EXPECT_EQ(got[k].layer, want[k].layer) << want[k].name;
        EXPECT_EQ(got[k].params, want[k].params) << want[k].name;
        EXPECT_EQ(got[k].shares_params_with, want[k].shares_params_with) << want[k].name;
    }
    EXPECT_FALSE(tree_has_routed_experts(tree));
}

// tiny_tied.json: embed (10 x 4), layers.0.attn, layers.0.norm, and an lm_head whose weight is embed's
// (tied_to "embed.weight"): the head holds no tensor of its own and shares the embedding's.
TEST(TreeModules, TiedHeadSharesTheEmbeddingAndUnknownNamesSaveNothing) {
    const ModuleTree tree = read_module_tree(tree_file("tiny_tied.json"));
    const std::vector<SimModule> got = modules_from_tree(tree);
    uint64_t total = 0;
    int head = -1, embed = -1;
    for (std::size_t k = 0; k < got.size(); ++k) {
        for (uint64_t p : got[k].params) total += p;
        if (got[k].name == "lm_head") head = int(k);
        if (got[k].name == "embed") embed = int(k);
    }
    EXPECT_EQ(total, tree.total);  // each tensor once
    ASSERT_GE(head, 0);
    ASSERT_GE(embed, 0);
    EXPECT_EQ(got[std::size_t(head)].shares_params_with, embed);
    EXPECT_EQ(got[std::size_t(head)].role, "lm_head");
    EXPECT_EQ(got[std::size_t(embed)].role, "other");  // not transformers' embed_tokens: fetched, saves nothing
    EXPECT_LT(embed, head);
}

// The whole replay: the tree of a model and that model's architecture give the same step, event for event.
TEST(TreeModules, ReplayOfTheTreeIsTheReplayOfItsArchitecture) {
    for (int stage : {0, 1, 2, 3}) {
        Request req;
        req.module_tree = tree_file("tiny_llama.json");
        req.gpus = 2;
        req.stage = stage;
        req.seq_len = 64;
        const Resolved with_tree = resolve_request(req, ZEROMEM_SOURCE_DATA_DIR);
        ASSERT_TRUE(with_tree.input.model.tree);
        EstimateInput arch_only = with_tree.input;
        arch_only.model.tree.reset();
        SimOptions opt;
        opt.steps = 2;
        const SimResult a = simulate(with_tree.input, opt), b = simulate(arch_only, opt);
        EXPECT_EQ(a.peak_allocated, b.peak_allocated) << "stage " << stage;
        EXPECT_EQ(a.peak_reserved, b.peak_reserved) << "stage " << stage;
        EXPECT_EQ(a.peak_event, b.peak_event) << "stage " << stage;
        ASSERT_EQ(a.phases.size(), b.phases.size());
        for (std::size_t k = 0; k < a.phases.size(); ++k)
            EXPECT_EQ(a.phases[k].peak_allocated, b.phases[k].peak_allocated) << "stage " << stage << " phase " << k;
    }
}

}  // namespace
