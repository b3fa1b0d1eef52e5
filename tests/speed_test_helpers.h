// Helpers shared by the step-time model's tests (speed_test.cpp,
// speed_more_test.cpp): models from presets, Hugging Face configs or
// hand-written architectures, cluster throughput, and a relative-tolerance
// assertion that prints the measured value beside the model's.
#pragma once

#include "zeromem/estimate.h"
#include "zeromem/model.h"
#include "zeromem/speed.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

namespace zeromem::speed_testing {

/// A model with its architecture, parameter count and largest module from
/// count_params (model.h).
inline ModelInfo with_arch(const ModelArch& a) {
    ModelInfo m;
    m.arch = a;
    m.params = count_params(a).total;
    m.largest_layer_params = count_params(a).largest_module;
    m.name = a.name;
    return m;
}

/// A model from a Hugging Face config.json object (named "test").
inline ModelInfo from_hf(const nlohmann::json& cfg) { return with_arch(arch_from_hf_config(cfg, "test")); }

/// A preset of data/models by name.
inline ModelInfo preset(const std::string& name) {
    ModelInfo m = with_arch(load_model_preset(name, ZEROMEM_SOURCE_DATA_DIR));
    m.name = name;
    return m;
}

/// Samples per second over the whole cluster: tokens/s over the sequence length.
inline double samples_per_s(const EstimateInput& in, const SpeedHardware& h, const SpeedConstants& k = {}) {
    return step_time(in, h, k).tokens_per_s / double(in.train.seq_len);
}

/// |got / want - 1| <= tol, with both values and the relative error on failure.
inline ::testing::AssertionResult within(double got, double want, double tol) {
    const double rel = got / want - 1.0;
    if (std::fabs(rel) <= tol) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << got << ", measured " << want << " (" << rel * 100
                                         << "%, tolerance " << tol * 100 << "%)";
}

}  // namespace zeromem::speed_testing
