// Dropout probabilities of a Hugging Face config (internal to the library).
#pragma once

#include "zeromem/model.h"

#include <nlohmann/json.hpp>

#include <string>

namespace zeromem {

/// Sets the four dropout sites of `a` (embedding, attention probabilities,
/// attention residual, MLP residual) from `config` by the family's rule
/// `family` ("dropout" in data/architectures/families.json: per site a fixed
/// number, or the config key(s) that hold it with the config class default
/// in "dropout_defaults"). A site the rule does not name is absent (p = 0). Throws
/// InputError naming the key and `source` for a value that is not a number in
/// [0, 1].
void read_dropout_rates(ModelArch& a, const nlohmann::json& config, const nlohmann::json& family, const std::string& source);

}  // namespace zeromem
