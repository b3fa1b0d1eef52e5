#include "zeromem/setting_flags.h"

#include <map>

namespace zeromem {

std::string flag_spelling(const SettingChange& c) {
    static const std::map<std::string, std::string> flags = {
        {"zero_optimization.stage", "--stage"},
        {"zero_optimization.offload_optimizer.device", "--offload-optimizer"},
        {"zero_optimization.offload_param.device", "--offload-param"},
        {"gradient_checkpointing", "--gradient-checkpointing"},
        {"train_micro_batch_size_per_gpu", "--micro-batch"},
        {"gradient_accumulation_steps", "--grad-accum"},
        {"generation.num_beams", "--num-beams"},
        {"dtype", "--dtype"},
        {"load_dtype", "--load-dtype"},
    };
    if (c.path == "zero.Init") return c.value == "true" ? "--zero-init" : "--no-zero-init";
    const auto it = flags.find(c.path);
    if (it == flags.end()) return c.path + "=" + c.value;
    return it->second + " " + c.value;
}

std::string flag_spelling(const std::vector<SettingChange>& changes) {
    std::string out;
    for (const auto& c : changes) out += (out.empty() ? "" : " ") + flag_spelling(c);
    return out;
}

}  // namespace zeromem
