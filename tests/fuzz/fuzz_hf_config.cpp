// libFuzzer target: Hugging Face config.json reading (arch_from_hf_config),
// parameter counting and a ZeRO-3 estimate of the architecture read. Only
// zeromem::InputError may escape.
#include "zeromem/estimate.h"
#include "zeromem/model.h"
#include "zeromem/util.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace zeromem;
    const nlohmann::json cfg = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (cfg.is_discarded()) return 0;
    try {
        const ModelArch arch = arch_from_hf_config(cfg, "fuzz.json");
        const ParamCount pc = count_params(arch);
        EstimateInput in;
        in.model.params = pc.total;
        in.model.largest_layer_params = pc.largest_module;
        in.model.arch = arch;
        in.cluster.gpus = 8;
        in.zero.stage = 3;
        (void)estimate(in, /*explain=*/true);
    } catch (const InputError&) {
    }
    return 0;
}
