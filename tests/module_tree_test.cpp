// The module tree reader (zeromem/module_tree.h) and --module-tree in
// resolve_request. Expected counts are the arithmetic of the shapes written
// in tests/data/module_trees (hand-written; the Llama one laid out as
// transformers' modeling_llama.py LlamaForCausalLM registers its modules).
// The files written by the Python package are tested in
// tests/python/module_tree_test.py; malformed files on the command line in
// tests/data/malformed/cases.txt.
#include "zeromem/estimate.h"
#include "zeromem/module_tree.h"
#include "zeromem/request.h"

#include "input_error.h"

#include <gtest/gtest.h>

#include <string>

namespace {

using namespace zeromem;
using zeromem::testing::contains;
using zeromem::testing::error_of;

std::string tree_file(const std::string& name) { return std::string(ZEROMEM_TEST_DATA_DIR) + "/module_trees/" + name; }

bool warned(const Resolved& r, const std::string& what) {
    for (const auto& w : r.warnings)
        if (contains(w, what)) return true;
    return false;
}

Resolved resolve_tree(const std::string& name, const std::string& hf_config = "") {
    Request req;
    req.module_tree = tree_file(name);
    if (!hf_config.empty()) req.hf_config = std::string(ZEROMEM_TEST_DATA_DIR) + "/runtime/" + hf_config;
    return resolve_request(req, ZEROMEM_SOURCE_DATA_DIR);
}

// A tree with one module and `params` as its parameter list.
std::string one_module(const std::string& params, const std::string& totals = "\"parameters\": 4, \"trainable\": 4") {
    return "{\"format\": \"zeromem-module-tree\", \"format_version\": 1, \"totals\": {" + totals +
           "},\n\"modules\": [\n{\"name\": \"\", \"class\": \"M\", \"parameters\": [" + params + "]}\n]}";
}

TEST(ModuleTree, TiedLmHeadCountedOnceFrozenNormNotTrainable) {
    const ModuleTree t = read_module_tree(tree_file("tiny_tied.json"));
    // embed 10x4, attn Linear(4, 4) weight + bias, LayerNorm(4) weight + bias
    // (frozen); lm_head.weight is embed.weight.
    const uint64_t embed = 10 * 4, attn = 4 * 4 + 4, norm = 4 + 4;
    EXPECT_EQ(t.total, embed + attn + norm);
    EXPECT_EQ(t.trainable, embed + attn);
    ASSERT_EQ(t.modules.size(), 7u);
    EXPECT_EQ(t.modules[6].name, "lm_head");
    EXPECT_EQ(t.modules[6].params[0].tied_to, "embed.weight");
    EXPECT_EQ(t.modules[6].own_params, embed);  // ZeRO-3 gathers the tied weight for the head too
    // The largest module's own parameters: embed and lm_head both hold 40;
    // the first listed is named.
    EXPECT_EQ(t.largest_module, embed);
    EXPECT_EQ(t.largest_module_name, "embed");
    EXPECT_EQ(t.largest_module_class, "Embedding");
    EXPECT_FALSE(t.config);
}

TEST(ModuleTree, LlamaTreeAgreesWithTheCountOfItsConfig) {
    const ModuleTree t = read_module_tree(tree_file("tiny_llama.json"));
    // h 8, f 16, V 32, one layer: embed V h, q/k/v/o 4 h^2 (2 heads of 4,
    // no GQA), gate/up/down 3 h f, two RMSNorms 2h, final norm h, untied
    // lm_head V h.
    const uint64_t h = 8, f = 16, V = 32;
    const uint64_t total = V * h + (4 * h * h + 3 * h * f + 2 * h) + h + V * h;
    EXPECT_EQ(t.total, total);
    EXPECT_EQ(t.trainable, total);
    EXPECT_EQ(t.largest_module, V * h);
    EXPECT_EQ(t.largest_module_name, "model.embed_tokens");
    ASSERT_TRUE(t.config);
    EXPECT_EQ(count_params(arch_from_hf_config(*t.config, "tiny_llama.json")).total, total);
}

TEST(ModuleTree, TreeAloneGivesCountsAndSaysActivationsAreNotEstimated) {
    const Resolved r = resolve_tree("tiny_tied.json");
    EXPECT_EQ(r.input.model.params, 68u);
    EXPECT_EQ(r.input.model.largest_layer_params, 40u);
    ASSERT_TRUE(r.input.train.trainable_params);
    EXPECT_EQ(*r.input.train.trainable_params, 60u);
    EXPECT_FALSE(r.input.model.arch);
    EXPECT_TRUE(warned(r, "activations are not estimated, as with --params")) << r.warnings.size();
    EXPECT_FALSE(warned(r, "fewer than a million"));
    EXPECT_TRUE(contains(r.provenance.at("model.largest_layer_params"), "'embed' (Embedding), 40 own parameters"));
    const Estimate e = estimate(r.input);
    EXPECT_EQ(e.trainable_params, 60u);
}

TEST(ModuleTree, ConfigInTheTreeGivesTheArchitecture) {
    const Resolved r = resolve_tree("tiny_llama.json");
    ASSERT_TRUE(r.input.model.arch);
    EXPECT_EQ(r.input.model.arch->family, "llama");
    EXPECT_EQ(r.input.model.arch->hidden_size, 8);
    EXPECT_EQ(r.input.model.params, 1176u);
    EXPECT_FALSE(r.input.train.trainable_params);
    EXPECT_FALSE(warned(r, "no architecture"));
}

TEST(ModuleTree, CountsOverAnotherArchitectureAreFollowedWithAWarning) {
    const Resolved r = resolve_tree("tiny_tied.json", "llama_10m_config.json");
    ASSERT_TRUE(r.input.model.arch);
    EXPECT_EQ(r.input.model.params, 68u);
    EXPECT_TRUE(warned(r, "holds 68 parameters, the architecture of"));
}

TEST(ModuleTree, RefusalsNameFileLineAndField) {
    EXPECT_EQ(error_of([] { parse_module_tree("[]", "t.json"); }), "t.json: /: a module tree must be a JSON object, got an array");
    EXPECT_EQ(error_of([] { parse_module_tree("{\"format\": \"zeromem-module-tree\", \"format_version\": 1}", "t.json"); }),
              "t.json: /: missing key 'modules'");
    EXPECT_EQ(error_of([] { parse_module_tree(one_module(""), "t.json"); }),
              "t.json:2: /modules: no module holds a parameter");
    EXPECT_EQ(error_of([] {
                  parse_module_tree(one_module("{\"name\": \"w\", \"shape\": [4], \"dtype\": \"float32\", \"requires_grad\": true},"
                                               "{\"name\": \"v\", \"shape\": [4], \"dtype\": \"float32\", \"requires_grad\": true, \"tied_to\": \"w\"},"
                                               "{\"name\": \"u\", \"shape\": [4], \"dtype\": \"float32\", \"requires_grad\": true, \"tied_to\": \"v\"}"),
                                    "t.json");
              }),
              "t.json:3: /modules/0/parameters/2/tied_to: 'v' is itself tied: name the tensor's first listing");
    EXPECT_EQ(error_of([] {
                  parse_module_tree(one_module("{\"name\": \"w\", \"shape\": [4], \"dtype\": \"torch.float32\", \"requires_grad\": true}"),
                                    "t.json");
              }),
              "t.json:3: /modules/0/parameters/0/dtype: \"torch.float32\" is not a torch dtype name (e.g. \"float32\", \"bfloat16\")");
    EXPECT_EQ(error_of([] {
                  parse_module_tree("{\"format\": \"zeromem-module-tree\", \"format_version\": 1, \"totals\": {},\n\"modules\": [\n"
                                    "{\"name\": \"a\", \"class\": \"M\", \"parameters\": []}]}",
                                    "t.json");
              }),
              "t.json:3: /modules/0/name: the first module is the root, named \"\", got \"a\"");
    EXPECT_EQ(error_of([] { parse_module_tree("{\"format\": \"zeromem-module-tree\",\n\"format_version\": 1.0}", "t.json"); }),
              "t.json:2: /format_version: must be an integer, got a non-integer number 1.0");
}

TEST(ModuleTree, ScalarParameterHasOneElement) {
    const ModuleTree t = parse_module_tree(
        one_module("{\"name\": \"w\", \"shape\": [], \"dtype\": \"float32\", \"requires_grad\": true},"
                   "{\"name\": \"b\", \"shape\": [3], \"dtype\": \"float32\", \"requires_grad\": false}",
                   "\"parameters\": 4, \"trainable\": 1"),
        "t.json");
    EXPECT_EQ(t.total, 4u);  // torch.Size([]).numel() == 1
    EXPECT_EQ(t.trainable, 1u);
}

TEST(ModuleTree, FrozenBaseFromTheTreeTakesLoadIn) {
    Request req;
    req.module_tree = tree_file("tiny_tied.json");
    req.load_in = "4bit";
    const Resolved r = resolve_request(req, ZEROMEM_SOURCE_DATA_DIR);
    EXPECT_EQ(r.input.train.load_in_bits, 4);
}

}  // namespace
