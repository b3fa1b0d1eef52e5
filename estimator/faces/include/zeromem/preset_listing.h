#pragma once
// The preset listings (`zeromem models`, `gpus`, `interconnects`, `hosts`):
// each preset in data/ as one line of text or one JSON object, for either face.
#include <string>

namespace zeromem {

enum class PresetKind { models, gpus, interconnects, hosts };

/// Every preset of `kind` under `data_dir`, sorted by name: one line each
/// ("table"), or a JSON array of objects whose sizes are in bytes and rates
/// in bytes/s ("json"). Throws InputError for a malformed preset file.
std::string render_preset_listing(PresetKind kind, const std::string& data_dir, bool json);

}  // namespace zeromem
