// Library side of the new-user checks: size units refused alike, preset folders that
// are missing or empty, the data folder lookup, plausibility warnings and
// the HF Trainer's precision rules in resolve_request.
#include "zeromem/request.h"
#include "zeromem/util.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;

std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const zeromem::InputError& e) {
        return e.what();
    }
    return "";
}

fs::path scratch(const std::string& name) {
    return fs::temp_directory_path() / ("zeromem_req_" + std::to_string(::getpid()) + "_" + name);
}

bool warned(const zeromem::Resolved& r, const std::string& what) {
    for (const auto& w : r.warnings)
        if (w.find(what) != std::string::npos) return true;
    return false;
}

}  // namespace

TEST(RequestUx, SingleLetterSizeUnitsAreRefusedWithValidSuggestions) {
    for (const char* t : {"80G", "512M", "1T", "64k"}) {
        const std::string m = message_of([&] { zeromem::parse_bytes(t, "--host-memory"); });
        ASSERT_FALSE(m.empty()) << t;
        EXPECT_NE(m.find("ambiguous"), std::string::npos) << m;
        // Both suggestions parse.
        const std::string num(t, std::string(t).size() - 1);
        const char up = static_cast<char>(std::toupper(t[std::string(t).size() - 1]));
        EXPECT_NO_THROW(zeromem::parse_bytes(num + up + "B", "x"));
        EXPECT_NO_THROW(zeromem::parse_bytes(num + up + "iB", "x"));
        EXPECT_NE(m.find(num + up + "B"), std::string::npos) << m;
        EXPECT_NE(m.find(num + up + "iB"), std::string::npos) << m;
    }
}

TEST(RequestUx, MissingOrEmptyPresetFolderIsAnError) {
    const fs::path root = scratch("data");
    fs::remove_all(root);
    EXPECT_NE(message_of([&] { zeromem::list_presets(root.string(), "gpus"); }).find("data folder missing"),
              std::string::npos);
    fs::create_directories(root / "gpus");
    EXPECT_NE(message_of([&] { zeromem::list_presets(root.string(), "gpus"); }).find("no presets"), std::string::npos);
    fs::remove_all(root);
}

TEST(RequestUx, DataDirFallsBackToTheEnvironmentOutsideAnInstall) {
    // The test binary is not installed (no ../share/zeromem/data beside it).
    setenv("ZEROMEM_DATA_DIR", "/some/where", 1);
    EXPECT_EQ(zeromem::data_dir(), "/some/where");
    unsetenv("ZEROMEM_DATA_DIR");
    EXPECT_EQ(zeromem::data_dir(), ZEROMEM_SOURCE_DATA_DIR);
}

TEST(RequestUx, PlausibilityWarnings) {
    zeromem::Request q;
    q.model = "llama-2-7b";
    q.seq_len = 4097;  // llama-2: max_position_embeddings 4096 (config.json)
    EXPECT_TRUE(warned(zeromem::resolve_request(q, ZEROMEM_SOURCE_DATA_DIR), "max_position_embeddings"));
    q.seq_len = 4096;
    EXPECT_FALSE(warned(zeromem::resolve_request(q, ZEROMEM_SOURCE_DATA_DIR), "max_position_embeddings"));
    q.gpus = 6;
    q.tp = 3;  // 32 heads are not divisible by 3
    EXPECT_TRUE(warned(zeromem::resolve_request(q, ZEROMEM_SOURCE_DATA_DIR), "does not divide"));
    q.tp = 2;
    EXPECT_FALSE(warned(zeromem::resolve_request(q, ZEROMEM_SOURCE_DATA_DIR), "does not divide"));
}

// transformers HfTrainerDeepSpeedConfig: "auto" follows --bf16/--fp16; an
// explicit value that contradicts them is a mismatch error.
TEST(RequestUx, PrecisionFollowsTheTrainerRules) {
    const fs::path cfg = scratch("ds.json");
    std::ofstream(cfg) << R"({"bf16": {"enabled": true}, "train_micro_batch_size_per_gpu": 1})";
    zeromem::Request q;
    q.params = "7e9";
    q.ds_config = cfg.string();
    EXPECT_EQ(zeromem::resolve_request(q, ZEROMEM_SOURCE_DATA_DIR).input.train.dtype, zeromem::Dtype::bf16);
    q.dtype = "bf16";
    EXPECT_EQ(zeromem::resolve_request(q, ZEROMEM_SOURCE_DATA_DIR).input.train.dtype, zeromem::Dtype::bf16);
    q.dtype = "fp16";
    EXPECT_NE(message_of([&] { zeromem::resolve_request(q, ZEROMEM_SOURCE_DATA_DIR); }).find("contradicts"),
              std::string::npos);
    std::ofstream(cfg) << R"({"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": 1})";
    q.dtype = "fp16";
    const auto r = zeromem::resolve_request(q, ZEROMEM_SOURCE_DATA_DIR);
    EXPECT_EQ(r.input.train.dtype, zeromem::Dtype::fp16);
    EXPECT_FALSE(warned(r, "DTYPE ASSUMED"));
    q.dtype.reset();
    const auto a = zeromem::resolve_request(q, ZEROMEM_SOURCE_DATA_DIR);
    EXPECT_EQ(a.input.train.dtype, zeromem::Dtype::fp32);
    EXPECT_TRUE(warned(a, "DTYPE ASSUMED fp32"));
    fs::remove(cfg);
}
