// The published Hugging Face configs the tests read (tests/data/hf_configs/published, sources in its
// counts.json), shared by the family and dropout tests.
#pragma once

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

namespace zeromem::testing {

/// The folder of the published configs, with a trailing slash.
inline const std::string kPub = std::string(ZEROMEM_TEST_DATA_DIR) + "/hf_configs/published/";

/// A JSON file parsed.
inline nlohmann::json read_json(const std::string& path) {
    std::ifstream f(path);
    return nlohmann::json::parse(f);
}

}  // namespace zeromem::testing
