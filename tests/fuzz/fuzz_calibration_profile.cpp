// libFuzzer target: calibration profile reading (parse_calibration_profile)
// and applying it to an estimate of the GPU and stack it names (forced, so
// any GPU name reaches apply_calibration_profile), then a ZeRO-3 estimate
// with an architecture, so the fitted activation factor is used. Only
// zeromem::InputError may escape.
#include "zeromem/calibration_profile.h"
#include "zeromem/estimate.h"
#include "zeromem/model.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace zeromem;
    try {
        const CalibrationProfile p =
            parse_calibration_profile(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json");
        (void)calibration_profile_json(p);
        EstimateInput in;
        in.model.arch = ModelArch{};
        in.model.arch->hidden_size = 256;
        in.model.arch->num_layers = 2;
        in.model.arch->num_heads = 4;
        in.model.arch->num_kv_heads = 4;
        in.model.arch->head_dim = 64;
        in.model.arch->ffn_size = 1024;
        in.model.arch->vocab_size = 1000;
        in.model.params = count_params(*in.model.arch).total;
        in.cluster.gpus = 8;
        in.cluster.gpu_name = "A100-80GB";
        in.zero.stage = 3;
        Provenance prov;
        (void)apply_calibration_profile(p, "fuzz.json", /*force=*/true, in, prov);
        (void)estimate(in, /*explain=*/true);
    } catch (const InputError&) {
    }
    return 0;
}
