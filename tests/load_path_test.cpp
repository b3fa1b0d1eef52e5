// Load paths of the HF loader. Expected values are hand arithmetic from
// transformers modeling_utils.py from_pretrained: host-copy (also low_cpu_mem_usage) holds
// one copy per rank, single-file the model and the 16-bit state dict,
// device-map one module at a time; under ZeRO-3 with the HF integration
// zero.Init decides.
#include "zeromem/estimate.h"

#include <gtest/gtest.h>

#include "estimate_inputs.h"

using namespace zeromem;

namespace {

// Llama-2-7B: Ψ = 6738415616, largest module the 32000 x 4096 embedding.
constexpr uint64_t kPsi = 6738415616ull;
constexpr uint64_t kLargest = 32000ull * 4096;

uint64_t host_model_load(int stage, std::optional<LoadPath> path, const std::string& transformers = "5.0") {
    EstimateInput in = testinputs::preset_input("llama-2-7b", 8, stage, Dtype::bf16);
    in.residual.load_dtype = Dtype::bf16;  // 2 B per parameter on the host
    in.residual.load_path = path;
    in.stack.transformers = transformers;
    const Estimate e = estimate(in, true);
    for (const auto& t : e.terms)
        if (t.component == "host: model load (per node)") return t.bytes;
    ADD_FAILURE() << "no model-load term";
    return 0;
}

TEST(LoadPath, HostBytesPerPathOnEightRanks) {
    // transformers < 4.50: a single file's whole state dict is loaded beside the model.
    const uint64_t copy = host_model_load(2, LoadPath::single_file, "4.49");
    const uint64_t meta = host_model_load(2, LoadPath::host_copy, "4.49");
    const uint64_t direct = host_model_load(2, LoadPath::device_map);
    EXPECT_EQ(copy - meta, 8 * 2 * kPsi);               // the 16-bit state dict on each of 8 ranks
    EXPECT_EQ(meta - direct, 8 * 2 * (kPsi - kLargest));  // one module instead of the model
}

TEST(LoadPath, SingleFileAddsNoStateDictFromTransformers450) {
    // From ~4.50 (huggingface/transformers#36033) the meta-device loader fills the
    // model one parameter at a time, single file or not: one copy per rank.
    EXPECT_EQ(host_model_load(2, LoadPath::single_file, "5.0"), host_model_load(2, LoadPath::host_copy, "5.0"));
    EXPECT_EQ(host_model_load(2, LoadPath::single_file, "4.50"), host_model_load(2, LoadPath::host_copy, "4.50"));
    EXPECT_EQ(host_model_load(2, LoadPath::single_file, "5.0") - host_model_load(2, LoadPath::device_map, "5.0"),
              8 * 2 * (kPsi - kLargest));
}

TEST(LoadPath, DefaultIsOneHostCopyPerRank) {
    // Ψ · 2 B per rank on 8 ranks, whatever the transformers version.
    EXPECT_EQ(host_model_load(1, std::nullopt, "5.0") - host_model_load(1, LoadPath::device_map),
              8 * 2 * (kPsi - kLargest));
    EXPECT_EQ(host_model_load(1, std::nullopt, "4.40"), host_model_load(1, LoadPath::host_copy, "4.40"));
}

TEST(LoadPath, ZeroInitDecidesUnderStage3) {
    // zero.Init: one module at a time per rank, whatever the load path.
    EXPECT_EQ(host_model_load(3, LoadPath::device_map), host_model_load(3, LoadPath::single_file));
    EXPECT_EQ(host_model_load(3, LoadPath::host_copy), host_model_load(2, LoadPath::device_map));
}

TEST(LoadPath, Parse) {
    EXPECT_EQ(parse_load_path("device-map", "f"), LoadPath::device_map);
    EXPECT_EQ(parse_load_path("low_cpu_mem_usage", "f"), LoadPath::host_copy);
    EXPECT_EQ(parse_load_path("single-file", "f"), LoadPath::single_file);
    EXPECT_EQ(parse_load_path("Host-Copy", "f"), LoadPath::host_copy);
    EXPECT_THROW(parse_load_path("disk", "--load-path"), InputError);
}

}  // namespace

namespace {

// device-map with an fp32 load dtype (transformers < 5 without torch_dtype)
// and ZeRO-3 without zero.Init: the GPU holds 4 B · Ψ before DeepSpeed casts
// the module to 16 bits, where the host path brings the cast 2 B · Ψ module
// (engine.py _configure_distributed_model, module.to(device)).
uint64_t load_parameters(LoadPath path) {
    EstimateInput in = testinputs::preset_input("llama-2-7b", 8, 3, Dtype::bf16);
    in.zero.zero_init = false;
    in.residual.load_dtype = Dtype::fp32;
    in.residual.load_path = path;
    for (const auto& p : estimate(in).phases)
        if (p.name == "load") return p.per_gpu.parameters;
    ADD_FAILURE() << "no load phase";
    return 0;
}

TEST(LoadPath, DeviceMapPutsTheLoadDtypeModelOnTheGpu) {
    EXPECT_EQ(load_parameters(LoadPath::device_map), 4 * kPsi);
    EXPECT_EQ(load_parameters(LoadPath::host_copy), 2 * kPsi);
}

}  // namespace
