// GPU presets carry the capacity the device reports (usable_bytes) beside the
// label, with its public source.
#include "zeromem/gpu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace {

const std::string kData = ZEROMEM_SOURCE_DATA_DIR;

// torch prints the OOM message's "total capacity" with 2 decimals of GiB; a
// preset stores round(x * 2^30). Each figure is the one its usable_source
// quotes from a public CUDA out-of-memory message naming the card.
uint64_t gib2(double x) { return static_cast<uint64_t>(std::llround(x * 1073741824.0)); }

TEST(GpuPreset, UsableBytesAreTheReportedTotals) {
    struct Row {
        const char* name;
        uint64_t usable;
        const char* url;
    };
    const Row rows[] = {
        {"A100-40GB", gib2(39.50), "TianheWu/CoSeR/issues/10"},
        {"A100-80GB", gib2(79.14), "lianqi1008/Control-GIC/issues/6"},
        {"A10G-24GB", gib2(22.49), "stable-diffusion-webui/issues/1259"},
        {"A800-80GB", gib2(79.35), "LlamaFactory/issues/1158"},
        {"H100-80GB", gib2(79.11), "vllm-project/vllm/issues/12756"},
        {"V100-16GB", gib2(15.78), "Shift-GCN/issues/34"},
        {"V100-32GB", gib2(31.74), "ChatGLM-Finetuning/issues/73"},
        {"RTX-3090-24GB", gib2(23.70), "GaoLii/DSP/issues/10"},
        {"RTX-4090-24GB", gib2(23.64), "ali-vilab/VGen/issues/104"},
        // nvidia-smi totals in MiB (thundergolfer.com/blog/nvidia-gpu-memory-capacity).
        {"H200-141GB", 143771ull << 20, "nvidia-gpu-memory-capacity"},
        {"L40S-48GB", 46068ull << 20, "nvidia-gpu-memory-capacity"},
    };
    for (const auto& r : rows) {
        const zeromem::GpuSpec g = zeromem::load_gpu_preset(r.name, kData);
        ASSERT_TRUE(g.usable_bytes.has_value()) << r.name;
        EXPECT_EQ(*g.usable_bytes, r.usable) << r.name;
        EXPECT_LT(*g.usable_bytes, g.memory_bytes) << r.name << ": the reported total is below the label";
        EXPECT_NE(g.usable_source.find(r.url), std::string::npos) << r.name << ": " << g.usable_source;
    }
    // No public report of the TITAN RTX's total was found: the label is used.
    EXPECT_FALSE(zeromem::load_gpu_preset("TITAN-RTX-24GB", kData).usable_bytes.has_value());
}

}  // namespace
