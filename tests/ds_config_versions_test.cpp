// The DeepSpeed config read as the DeepSpeed release in force reads it: the
// legacy offload booleans and the keys a release does not know. Expected
// behaviour from DeepSpeed's own code at the named tags
// (github.com/deepspeedai/DeepSpeed):
//  - v0.4.2 .. v0.6.7 runtime/zero/config.py DeepSpeedZeroConfig._initialize:
//    "cpu_offload" / "cpu_offload_params", when present, win over the
//    offload_optimizer / offload_param blocks, which are then not read; true
//    means get_default_offload_*_config() whose device is "cpu"
//    (offload_constants.py OFFLOAD_*_DEVICE_DEFAULT). Unknown keys are ignored.
//  - v0.7.0 (599758968, #2004, "Refactor ZeRO configs to use Pydantic"):
//    cpu_offload_params becomes cpu_offload_param, a deprecated pydantic
//    field; extra="forbid" refuses unknown keys; a deprecated key together
//    with its replacement is refused (config_utils.py
//    _process_deprecated_field). In v0.7.0 alone the new_param_fn builds
//    DeepSpeedZeroOffload*Config() with its default device none (no
//    offload); v0.7.1 (5870f36c5, #2208) passes device=cpu.
//  - offload_optimizer.ratio first in v0.12.3 (b1cb0dfc4, #4636).
#include "zeromem/ds_config.h"
#include "zeromem/ds_schema.h"

#include <gtest/gtest.h>

#include <string>

using namespace zeromem;
using nlohmann::json;

namespace {

struct Applied {
    ZeroSettings zero;
    TrainingSettings train;
    Provenance prov;
};

Applied read_as(const std::string& version, const char* text) {
    Applied a;
    apply_ds_config(json::parse(text), "cfg.json", AutoSources{}, a.zero, a.train, a.prov, version);
    return a;
}

std::string error_as(const std::string& version, const char* text) {
    try {
        read_as(version, text);
    } catch (const InputError& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected InputError under DeepSpeed " << version << " for " << text;
    return {};
}

#define EXPECT_HAS(haystack, needle) \
    EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "missing '" << (needle) << "' in: " << (haystack)

constexpr const char* kZ3Params = R"({"zero_optimization": {"stage": 3, "cpu_offload": true, "cpu_offload_params": true}})";
constexpr const char* kZ3Param = R"({"zero_optimization": {"stage": 3, "cpu_offload": true, "cpu_offload_param": true}})";

}  // namespace

TEST(DsConfigVersions, CpuOffloadParamsIsReadBeforeTheRenameAndRefusedAfter) {
    // 0.6.7, the last release before the rename: both booleans map to device cpu.
    const Applied old = read_as("0.6.7", kZ3Params);
    EXPECT_EQ(old.zero.offload_optimizer, OffloadDevice::cpu);
    EXPECT_EQ(old.zero.offload_param, OffloadDevice::cpu);
    EXPECT_HAS(old.prov.at("zero_optimization.offload_param.device"), "cfg.json:/zero_optimization/cpu_offload_params");
    EXPECT_HAS(old.prov.at("zero_optimization.offload_param.device"), "DeepSpeed 0.6.7");
    // 0.4.2, the oldest release zeromem knows, reads it the same way.
    EXPECT_EQ(read_as("0.4.2", kZ3Params).zero.offload_param, OffloadDevice::cpu);
    // From 0.7.1 the old spelling is an unknown pydantic field.
    const std::string e = error_as("0.7.1", kZ3Params);
    EXPECT_HAS(e, "cfg.json: /zero_optimization/cpu_offload_params: no longer read by DeepSpeed 0.7.1");
    EXPECT_HAS(e, "599758968");
    EXPECT_HAS(e, "refuses it");
    EXPECT_HAS(e, "write \"cpu_offload_param\" instead");
    EXPECT_HAS(error_as("0.19.6", kZ3Params), "no longer read by DeepSpeed 0.19.6");
}

TEST(DsConfigVersions, CpuOffloadParamIsReadFromTheRenameAndRefusedBefore) {
    const Applied now = read_as("0.7.1", kZ3Param);
    EXPECT_EQ(now.zero.offload_optimizer, OffloadDevice::cpu);
    EXPECT_EQ(now.zero.offload_param, OffloadDevice::cpu);
    EXPECT_EQ(read_as("0.19.6", kZ3Param).zero.offload_param, OffloadDevice::cpu);
    // 0.6.7 looks up only "cpu_offload_params": the singular is ignored there,
    // so the run would not offload parameters; zeromem refuses it by name.
    const std::string e = error_as("0.6.7", kZ3Param);
    EXPECT_HAS(e, "cfg.json: /zero_optimization/cpu_offload_param: unknown to DeepSpeed 0.6.7");
    EXPECT_HAS(e, "cpu_offload_params");
    EXPECT_HAS(e, "DeepSpeed 0.6.7 ignores it");
    EXPECT_HAS(e, "upgrade DeepSpeed to 0.7.0");
}

TEST(DsConfigVersions, DeepSpeed070BuildsTheLegacyOffloadWithDeviceNone) {
    // v0.7.0 new_param_fn: DeepSpeedZeroOffloadOptimizerConfig() (device
    // none); v0.7.1 passes device=cpu (#2208).
    const Applied a = read_as("0.7.0", kZ3Param);
    EXPECT_EQ(a.zero.offload_optimizer, OffloadDevice::none);
    EXPECT_EQ(a.zero.offload_param, OffloadDevice::none);
    EXPECT_HAS(a.prov.at("zero_optimization.offload_optimizer.device"), "#2208");
    EXPECT_EQ(read_as("0.7.1", kZ3Param).zero.offload_optimizer, OffloadDevice::cpu);
}

TEST(DsConfigVersions, LegacyKeyBesideItsBlock) {
    constexpr const char* both = R"({"zero_optimization": {"stage": 2, "cpu_offload": true,
        "offload_optimizer": {"device": "cpu"}}})";
    // Before 0.7.0 the boolean wins and the block is not read: refused, naming why.
    EXPECT_HAS(error_as("0.6.7", both), "/zero_optimization/cpu_offload: DeepSpeed 0.6.7 reads it and does not read "
                                        "the offload_optimizer block");
    // From 0.7.0 DeepSpeed itself refuses the pair.
    EXPECT_HAS(error_as("0.19.6", both), "/zero_optimization/cpu_offload: DeepSpeed 0.19.6 refuses it together with "
                                         "offload_optimizer");
    // false means no offload under every release.
    EXPECT_EQ(read_as("0.4.2", R"({"zero_optimization": {"stage": 2, "cpu_offload": false}})").zero.offload_optimizer,
              OffloadDevice::none);
}

TEST(DsConfigVersions, KeysNewerThanTheReleaseAreRefusedNamingIt) {
    constexpr const char* ratio = R"({"zero_optimization": {"stage": 3, "sub_group_size": 100000000,
        "offload_optimizer": {"device": "cpu", "ratio": 0.3}}})";
    // 0.12.2 has no ratio field: DeepSpeedZeroOffloadOptimizerConfig refuses it.
    const std::string e = error_as("0.12.2", ratio);
    EXPECT_HAS(e, "/zero_optimization/offload_optimizer/ratio: unknown to DeepSpeed 0.12.2");
    EXPECT_HAS(e, "b1cb0dfc4");
    EXPECT_HAS(e, "refuses it");
    EXPECT_DOUBLE_EQ(read_as("0.12.3", ratio).zero.offload_optimizer_ratio, 0.3);
    // The short pydantic field names exist from 0.7.0 only.
    EXPECT_HAS(error_as("0.6.7", R"({"zero_optimization": {"stage": 3, "prefetch_bucket_size": 1000}})"),
               "unknown to DeepSpeed 0.6.7");
    EXPECT_EQ(read_as("0.7.0", R"({"zero_optimization": {"stage": 3, "prefetch_bucket_size": 1000}})")
                  .zero.stage3_prefetch_bucket_size,
              1000);
}

TEST(DsConfigVersions, CheckReportsTheSameGates) {
    const auto p = version_gated_keys(json::parse(kZ3Params), "0.7.1");
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].pointer, "/zero_optimization/cpu_offload_params");
    EXPECT_TRUE(version_gated_keys(json::parse(kZ3Params), "0.6.7").empty());
}

TEST(DsConfigVersions, AnIgnoredKeyWithoutMemoryEffectIsLeftToItsNote) {
    // round_robin_gradients first in v0.4.4 (4d420df56, #1256); 0.4.2 ignores
    // it and it changes no buffer (schema "note").
    constexpr const char* rr = R"({"zero_optimization": {"stage": 1, "round_robin_gradients": true}})";
    EXPECT_TRUE(version_gated_keys(json::parse(rr), "0.4.2").empty());
    EXPECT_EQ(read_as("0.4.2", rr).zero.stage, 1);
}
