// Hugging Face Hub ids as users name models: "meta-llama/Llama-2-7b-hf",
// found in the local Hub cache (zeromem works offline).
#pragma once

#include <filesystem>
#include <string>

namespace zeromem {

/// The Hub cache folder: $HF_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub or ~/.cache/huggingface/hub.
std::filesystem::path hf_hub_cache();

/// "org/name" (a Hub model id), not a path.
bool looks_like_hub_id(const std::string& s);

/// The config.json of a Hub id in the local cache; InputError naming
/// --hf-config and the command that downloads it when it is not there.
std::string cached_hub_config(const std::string& id);

/// --hf-config as users have it: a config.json, a model directory holding
/// one, or a Hub id ("meta-llama/Llama-2-7b-hf") found in the local cache.
std::string resolve_hf_config_path(const std::string& arg);

}  // namespace zeromem
