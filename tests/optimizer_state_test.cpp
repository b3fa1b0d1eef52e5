// Optimizer state per optimizer. Every expected value
// is hand arithmetic written here from the allocation rules the sources state:
// bitsandbytes optim/optimizer.py init_state (uint8 states, one fp32 absmax per
// 256 elements, fp32 states under min_8bit_size = 4096 elements, paging from
// 1e5 elements), transformers Adafactor (r + c fp32 values per matrix), torch
// SGD/Adagrad, DeepSpeed engine.py _configure_basic_optimizer.
#include "zeromem/config_check.h"
#include "zeromem/ds_config.h"
#include "zeromem/estimate.h"
#include "zeromem/optimizer_state.h"
#include "zeromem/planner.h"
#include "zeromem/speed.h"
#include "zeromem/gpu.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "estimate_inputs.h"

using namespace zeromem;
using nlohmann::json;

namespace {

// Llama-2-7B (h 4096, 32 layers, f 11008, V 32000, untied, RMSNorm):
// matrices 2 x 32000·4096 + 32 x (4 x 4096² + 3 x 4096·11008), vectors
// 65 x 4096 (two norms per layer and the final norm).
constexpr uint64_t kLlamaPsi = 2ull * 32000 * 4096 + 32ull * (4ull * 4096 * 4096 + 3ull * 4096 * 11008) + 65ull * 4096;

TEST(OptimizerState, Llama7bPsiIsThePublishedCount) { EXPECT_EQ(kLlamaPsi, 6738415616ull); }

TEST(OptimizerState, EightBitAdamOnOneTensor) {
    // 4096 x 4096: each state 16777216 B + 4 · 16777216/256 B absmax.
    const auto big = count_optimizer_state(Optimizer::adamw_8bit, {{4096, 4096, 1}});
    EXPECT_EQ(big.first, 16777216ull + 262144ull);
    EXPECT_EQ(big.second, 16777216ull + 262144ull);
    EXPECT_EQ(big.constants, 2ull * 262144ull);
    EXPECT_EQ(big.fp32_small, 0u);
    // 4096 elements is not under min_8bit_size: 4096 + 4·16 per state.
    EXPECT_EQ(count_optimizer_state(Optimizer::adamw_8bit, {{4096, 0, 1}}).total(), 2ull * (4096 + 64));
    // 4095 elements: fp32, 4 B per element per state.
    const auto small = count_optimizer_state(Optimizer::adamw_8bit, {{4095, 0, 3}});
    EXPECT_EQ(small.total(), 3ull * 2 * 4 * 4095);
    EXPECT_EQ(small.fp32_small, 3ull * 4095);
    // 257 blocks for 256·256 + 1 elements.
    EXPECT_EQ(count_optimizer_state(Optimizer::lion_8bit, {{65537, 0, 1}}).total(), 65537ull + 4 * 257);
}

TEST(OptimizerState, OneAndZeroStateOptimizers) {
    const std::vector<StateTensor> t = {{1000, 1000, 2}};  // 2e6 elements
    EXPECT_EQ(count_optimizer_state(Optimizer::sgd, t).total(), 8000000u);
    EXPECT_EQ(count_optimizer_state(Optimizer::sgd_plain, t).total(), 0u);
    EXPECT_EQ(count_optimizer_state(Optimizer::lion, t).total(), 8000000u);
    EXPECT_EQ(count_optimizer_state(Optimizer::adagrad, t).total(), 8000000u);
    EXPECT_EQ(count_optimizer_state(Optimizer::rmsprop, t).total(), 8000000u);
    EXPECT_EQ(count_optimizer_state(Optimizer::adamw, t).total(), 16000000u);
    EXPECT_EQ(count_optimizer_state(Optimizer::lamb, t).total(), 16000000u);
}

TEST(OptimizerState, AdafactorFactorsMatricesOnly) {
    // 4096 x 11008 matrix: 4 · (4096 + 11008); a 4096 vector: 4 · 4096.
    EXPECT_EQ(count_optimizer_state(Optimizer::adafactor, {{4096, 11008, 1}}).total(), 4ull * 15104);
    EXPECT_EQ(count_optimizer_state(Optimizer::adafactor, {{4096, 0, 1}}).total(), 4ull * 4096);
    // beta1 set: exp_avg, 4 B per element.
    EXPECT_EQ(count_optimizer_state(Optimizer::adafactor, {{10, 20, 1}}, true).total(), 4ull * 30 + 4ull * 200);
}

TEST(OptimizerState, PagedCountsTensorsFrom1e5Elements) {
    const auto p = count_optimizer_state(Optimizer::paged_adamw_32bit, {{100000, 0, 1}, {99999, 0, 1}});
    EXPECT_EQ(p.total(), 2ull * 4 * 199999);
    EXPECT_EQ(p.paged, 2ull * 4 * 100000);
    const auto q = count_optimizer_state(Optimizer::paged_adamw_8bit, {{1024, 1024, 1}});
    EXPECT_EQ(q.paged, 2ull * 1048576);  // the uint8 states, not the absmax
    EXPECT_EQ(q.total(), 2ull * (1048576 + 4 * 4096));
}

TEST(OptimizerState, Llama7bShapesSumToTheModel) {
    const ModelArch a = load_model_preset("llama-2-7b", ZEROMEM_SOURCE_DATA_DIR);
    const auto v = model_state_tensors(a, 1);
    uint64_t sum = 0;
    for (const auto& t : v) sum += t.numel() * t.count;
    EXPECT_EQ(sum, kLlamaPsi);
}

// Full-convention optimizer states (momentum + variance rows) on Llama-2-7B.
uint64_t states(Optimizer o, int stage, int64_t gpus, Dtype d = Dtype::bf16) {
    EstimateInput in = testinputs::preset_input("llama-2-7b", gpus, stage, d);
    in.train.optimizer = o;
    const Estimate e = estimate(in);
    return e.per_gpu.momentum + e.per_gpu.variance;
}

TEST(OptimizerState, Llama7bPerStage) {
    // Stage 0, per tensor: every tensor has >= 4096 elements and a multiple
    // of 256, so AdamW8bit = 2 · Ψ · (1 + 4/256).
    EXPECT_EQ(states(Optimizer::adamw_8bit, 0, 1), 2 * (kLlamaPsi + kLlamaPsi / 64));
    // Adafactor stage 0: rows + cols per matrix, full vectors.
    const uint64_t rc = 2ull * (32000 + 4096) + 32ull * (4 * 8192 + 3 * (11008 + 4096));
    EXPECT_EQ(states(Optimizer::adafactor, 0, 1), 4 * rc + 4ull * 65 * 4096);
    // Stages 1-3 on 8 GPUs: the flat partition Tn = Ψ/8 = 842301952 (exact),
    // 1-D, so Adafactor keeps 4 B/element and 8-bit Adam 2 (Tn + 4 Tn/256).
    const uint64_t Tn = kLlamaPsi / 8;
    for (int s = 1; s <= 3; ++s) {
        EXPECT_EQ(states(Optimizer::adamw_8bit, s, 8), 2 * (Tn + 4 * (Tn / 256))) << "stage " << s;
        EXPECT_EQ(states(Optimizer::adafactor, s, 8), 4 * Tn) << "stage " << s;
        EXPECT_EQ(states(Optimizer::lion, s, 8), 4 * Tn) << "stage " << s;
        EXPECT_EQ(states(Optimizer::sgd_plain, s, 8), 0u) << "stage " << s;
        EXPECT_EQ(states(Optimizer::adagrad, s, 8), 4 * Tn) << "stage " << s;
        EXPECT_EQ(states(Optimizer::adamw, s, 8), 8 * Tn) << "stage " << s;
    }
}

TEST(OptimizerState, ParamsAloneUsesOneFlatTensorAndSaysSo) {
    EstimateInput in = testinputs::params_input(1000000, 1, 0, Dtype::bf16);
    in.train.optimizer = Optimizer::adafactor;
    const Estimate e = estimate(in);
    EXPECT_EQ(e.per_gpu.momentum + e.per_gpu.variance, 4000000u);  // unfactored bound
    bool said = false;
    for (const auto& n : e.notes) said = said || n.find("upper bound") != std::string::npos;
    EXPECT_TRUE(said);
}

// ZeRO-2 optimizer offload on 8 GPUs of one node: the host holds the CPU
// optimizer's states of each rank's partition Tn = Ψ/8.
uint64_t offload_host(Optimizer o, std::optional<OptimizerBuilder> builder, bool force = true) {
    EstimateInput in = testinputs::preset_input("llama-2-7b", 8, 2, Dtype::bf16);
    in.zero.offload_optimizer = OffloadDevice::cpu;
    in.train.optimizer = o;
    in.train.optimizer_builder = builder;
    in.zero.zero_force_ds_cpu_optimizer = force;
    const Estimate e = estimate(in);
    EXPECT_EQ(e.per_gpu.momentum + e.per_gpu.variance, 0u);
    return e.per_node.host_steady;
}

TEST(OptimizerState, OffloadFollowsWhichCpuOptimizerDeepSpeedBuilds) {
    const uint64_t Tn = kLlamaPsi / 8;
    const uint64_t adam = offload_host(Optimizer::adamw, OptimizerBuilder::deepspeed);
    // DeepSpeedCPUAdagrad: 4 B/param, 4 B less than CPU Adam per element.
    EXPECT_EQ(adam - offload_host(Optimizer::adagrad, OptimizerBuilder::deepspeed), 8 * 4 * Tn);
    // DeepSpeedCPULion allocates exp_avg_sq too: as much as CPU Adam.
    EXPECT_EQ(offload_host(Optimizer::lion, OptimizerBuilder::deepspeed), adam);
    // A bitsandbytes client optimizer: accelerate swaps in DeepSpeedCPUAdam,
    // as for the client's torch AdamW.
    const uint64_t client_adam = offload_host(Optimizer::adamw, OptimizerBuilder::client);
    EXPECT_EQ(offload_host(Optimizer::adamw_8bit, OptimizerBuilder::client), client_adam);
    // zero_force_ds_cpu_optimizer false: the client's 8-bit states on host,
    // 2 (Tn + 4 Tn/256) instead of 8 Tn per rank, 8 ranks on the node.
    EXPECT_EQ(offload_host(Optimizer::adamw, OptimizerBuilder::client, false) -
                  offload_host(Optimizer::adamw_8bit, OptimizerBuilder::client, false),
              8 * (8 * Tn - 2 * (Tn + 4 * (Tn / 256))));
}

TEST(OptimizerState, NamesParse) {
    EXPECT_EQ(parse_optimizer("adamw_torch_fused", "f"), Optimizer::adamw);
    EXPECT_EQ(parse_optimizer("adamw_bnb_8bit", "f"), Optimizer::adamw_8bit);
    EXPECT_EQ(parse_optimizer("adamw_8bit", "f"), Optimizer::adamw_8bit);
    EXPECT_EQ(parse_optimizer("paged_adamw_8bit", "f"), Optimizer::paged_adamw_8bit);
    EXPECT_EQ(parse_optimizer("paged_adamw_32bit", "f"), Optimizer::paged_adamw_32bit);
    EXPECT_EQ(parse_optimizer("lion_32bit", "f"), Optimizer::lion);
    EXPECT_EQ(parse_optimizer("paged_lion_8bit", "f"), Optimizer::paged_lion_8bit);
    EXPECT_EQ(parse_optimizer("Adafactor", "f"), Optimizer::adafactor);
    EXPECT_EQ(parse_optimizer("sgd_nomomentum", "f"), Optimizer::sgd_plain);
    EXPECT_EQ(parse_optimizer("adagrad", "f"), Optimizer::adagrad);
    EXPECT_THROW(parse_optimizer("galore_adamw", "--optimizer"), InputError);
}

TEST(OptimizerState, DeepSpeedTypes) {
    std::string why;
    EXPECT_EQ(optimizer_from_ds_type("Lion", false, why), Optimizer::lion);
    EXPECT_EQ(optimizer_from_ds_type("Adagrad", false, why), Optimizer::adagrad);
    EXPECT_EQ(optimizer_from_ds_type("Lamb", false, why), Optimizer::lamb);
    EXPECT_EQ(optimizer_from_ds_type("SGD", false, why), Optimizer::sgd_plain);
    EXPECT_EQ(optimizer_from_ds_type("SGD", true, why), Optimizer::sgd);
    EXPECT_EQ(optimizer_from_ds_type("RMSprop", false, why), Optimizer::rmsprop);
    EXPECT_FALSE(optimizer_from_ds_type("sgd", false, why));  // getattr(torch.optim, "sgd") fails
    EXPECT_FALSE(optimizer_from_ds_type("Shampoo", false, why));
    EXPECT_NE(why.find("Shampoo"), std::string::npos);
}

TEST(OptimizerState, DsConfigReadsLionAndRefusesOneBitUnderZero) {
    ZeroSettings z;
    TrainingSettings t;
    Provenance p;
    apply_ds_config(json::parse(R"({"optimizer": {"type": "Lion"}})"), "c.json", {}, z, t, p);
    EXPECT_EQ(t.optimizer, Optimizer::lion);
    EXPECT_THROW(apply_ds_config(json::parse(R"({"zero_optimization": {"stage": 2},
                                                 "optimizer": {"type": "OneBitAdam"}})"),
                                 "c.json", {}, z, t, p),
                 InputError);
}

TEST(OptimizerState, CheckReportsAnUnknownTypeAtItsKey) {
    const auto f = check_ds_config(json::parse(R"({"optimizer": {"type": "Shampoo"}})"), CheckOptions{});
    bool found = false;
    for (const auto& x : f)
        found = found || (x.severity == Severity::error && x.pointer == "/optimizer/type");
    EXPECT_TRUE(found);
    const auto ok = check_ds_config(json::parse(R"({"optimizer": {"type": "Lion"}})"), CheckOptions{});
    for (const auto& x : ok) EXPECT_NE(x.pointer, "/optimizer/type") << x.message;
}

namespace {
// The InputError text apply_ds_config gives for `config`, "" when accepted.
std::string ds_error(const std::string& config) {
    ZeroSettings z;
    TrainingSettings t;
    Provenance p;
    try {
        apply_ds_config(json::parse(config), "c.json", {}, z, t, p);
    } catch (const InputError& e) {
        return e.what();
    }
    return "";
}
bool check_errs_at(const std::string& config, const std::string& pointer) {
    for (const auto& x : check_ds_config(json::parse(config), CheckOptions{}))
        if (x.severity == Severity::error && x.pointer == pointer) return true;
    return false;
}
}  // namespace

// DeepSpeed v0.19.6 engine.py _do_optimizer_sanity_check: under ZeRO (stage
// >= 1) a class outside runtime/zero/utils.py ZERO_SUPPORTED_OPTIMIZERS needs
// "zero_allow_untested_optimizer": true. _configure_basic_optimizer builds
// torch.optim.SGD / RMSprop, FusedLamb, mup MuSGD (not listed) and torch
// Adagrad, FusedAdam, FusedLion (listed).
TEST(OptimizerState, UntestedOptimizerUnderZeroNeedsTheKey) {
    for (const char* type : {"SGD", "RMSprop", "Lamb", "MuSGD", "MuAdam", "MuAdamW"}) {
        SCOPED_TRACE(type);
        const std::string cfg = std::string(R"({"zero_optimization": {"stage": 1}, "optimizer": {"type": ")") + type + R"("}})";
        const std::string err = ds_error(cfg);
        EXPECT_NE(err.find("/optimizer/type"), std::string::npos) << err;
        EXPECT_NE(err.find("zero_allow_untested_optimizer"), std::string::npos) << err;
        EXPECT_TRUE(check_errs_at(cfg, "/optimizer/type"));
        const std::string allowed = std::string(R"({"zero_allow_untested_optimizer": true, "zero_optimization": {"stage": 2}, "optimizer": {"type": ")") + type + R"("}})";
        EXPECT_EQ(ds_error(allowed), "");
        EXPECT_FALSE(check_errs_at(allowed, "/optimizer/type"));
        const std::string stage0 = std::string(R"({"optimizer": {"type": ")") + type + R"("}})";
        EXPECT_EQ(ds_error(stage0), "");  // without ZeRO there is no sanity check
    }
    for (const char* type : {"Adam", "AdamW", "Adagrad", "Lion"}) {
        SCOPED_TRACE(type);
        const std::string cfg = std::string(R"({"zero_optimization": {"stage": 3}, "optimizer": {"type": ")") + type + R"("}})";
        EXPECT_EQ(ds_error(cfg), "");
        EXPECT_FALSE(check_errs_at(cfg, "/optimizer/type"));
    }
    // The HF Trainer's client optimizer (no "optimizer" block) stays accepted.
    EXPECT_EQ(ds_error(R"({"zero_optimization": {"stage": 2}})"), "");
}

// torch.optim.SGD compares momentum with 0.0: a string is refused there, so
// it must not be read as no momentum.
TEST(OptimizerState, MomentumMustBeANumber) {
    const std::string cfg = R"({"optimizer": {"type": "SGD", "params": {"momentum": "0.9"}}})";
    EXPECT_NE(ds_error(cfg).find("/optimizer/params/momentum"), std::string::npos) << ds_error(cfg);
    EXPECT_TRUE(check_errs_at(cfg, "/optimizer/params/momentum"));
    ZeroSettings z;
    TrainingSettings t;
    Provenance p;
    apply_ds_config(json::parse(R"({"optimizer": {"type": "SGD", "params": {"momentum": 0.9}}})"), "c.json", {}, z, t, p);
    EXPECT_EQ(t.optimizer, Optimizer::sgd);
    EXPECT_EQ(deepspeed_optimizer_class(Optimizer::sgd, false).find("SGD") != std::string::npos, true);
    EXPECT_EQ(deepspeed_optimizer_class(Optimizer::sgd, false).find("FusedAdam"), std::string::npos);
}

// runtime/config.py get_optimizer_name: a block without "type" builds nothing.
TEST(OptimizerState, OptimizerBlockWithoutTypeIsRefused) {
    const std::string cfg = R"({"optimizer": {"params": {"lr": 0.001}}})";
    EXPECT_NE(ds_error(cfg).find("/optimizer/type: missing"), std::string::npos) << ds_error(cfg);
    EXPECT_TRUE(check_errs_at(cfg, "/optimizer/type"));
}

TEST(OptimizerState, CompareAcceptsEightBitAdamAndItNeedsLessThanAdamW) {
    EstimateInput base = testinputs::preset_input("llama-2-7b", 8, 0, Dtype::bf16);
    base.cluster.gpu_memory = 80000000000ull;
    const SpeedHardware hw =
        speed_hardware(load_gpu_preset("A100-80GB", ZEROMEM_SOURCE_DATA_DIR), Dtype::bf16, "", "", ZEROMEM_SOURCE_DATA_DIR);
    base.train.optimizer = Optimizer::adamw_8bit;
    const auto rows8 = compare_options(base, hw, 64);
    base.train.optimizer = Optimizer::adamw;
    const auto rows32 = compare_options(base, hw, 64);
    ASSERT_EQ(rows8.size(), rows32.size());
    size_t fits8 = 0, fits32 = 0;
    for (const auto& r : rows8) fits8 += r.fits ? 1 : 0;
    for (const auto& r : rows32) fits32 += r.fits ? 1 : 0;
    EXPECT_GE(fits8, fits32);
    // Stage 0 without offload: AdamW 8 B/param vs 8-bit 2·(1+1/64) B/param.
    for (const auto& r : rows8) {
        if (r.option.stage == 0 && r.option.offload_optimizer == OffloadDevice::none) {
            EXPECT_EQ(r.memory.per_gpu.momentum + r.memory.per_gpu.variance, 2 * (kLlamaPsi + kLlamaPsi / 64));
        }
    }
}

}  // namespace
