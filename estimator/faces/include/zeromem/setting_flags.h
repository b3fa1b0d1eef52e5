// The faces' spelling of a setting: the zeromem flag that sets a DeepSpeed
// config or HF Trainer path, for the text the faces print. The library names
// settings by path; only this table knows the flags.
#pragma once

#include "zeromem/advice.h"

#include <string>
#include <vector>

namespace zeromem {

/// "--stage 3" for {"zero_optimization.stage", "3"}; a path without a flag is
/// written as `path=value` (a DeepSpeed config key the user sets in the file).
std::string flag_spelling(const SettingChange& c);

/// The changes joined by spaces, each spelled by flag_spelling.
std::string flag_spelling(const std::vector<SettingChange>& changes);

}  // namespace zeromem
