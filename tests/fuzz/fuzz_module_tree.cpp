// libFuzzer target: module tree reading (parse_module_tree), the
// architecture of the config.json a tree carries, and a ZeRO-3 estimate of
// the counts read. Only zeromem::InputError may escape.
#include "zeromem/estimate.h"
#include "zeromem/model.h"
#include "zeromem/module_tree.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace zeromem;
    try {
        const ModuleTree tree = parse_module_tree(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
        EstimateInput in;
        in.model.params = tree.total;
        in.model.largest_layer_params = tree.largest_module;
        if (tree.trainable < tree.total) in.train.trainable_params = tree.trainable;
        if (tree.config) {
            try {
                const ModelArch arch = arch_from_hf_config(*tree.config, "fuzz.json (its config)");
                (void)count_params(arch);
                in.model.arch = arch;
            } catch (const InputError&) {  // a tree without an architecture zeromem reads
            }
        }
        in.cluster.gpus = 8;
        in.zero.stage = 3;
        (void)estimate(in, /*explain=*/true);
    } catch (const InputError&) {
    }
    return 0;
}
