// Tests of the DeepSpeed schema data file (data/deepspeed_schema.json), the
// rule that no setting is silently ignored, and `check` findings.
//
// Oracles: DeepSpeed v0.19.6 runtime/zero/config.py, offload_config.py,
// precision_config.py (code defaults), transformers integrations/deepspeed.py
// trainer_config_finalize (HF "auto" rules: h=4096 gives reduce_bucket_size
// 16,777,216 and stage3_prefetch_bucket_size 15,099,494), the DeepSpeed PRs
// that changed a default (#8035, #8068, #8207, #7515); user cases C26-C29
// (tests/data/reference/user_cases.json).
#include "zeromem/config_check.h"
#include "zeromem/ds_schema.h"
#include "zeromem/request.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace zeromem;
using nlohmann::json;

namespace {

#define EXPECT_HAS(haystack, needle) \
    EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

const json& key(const std::string& ptr) {
    const json* e = ds_schema_entry(ptr);
    if (!e) throw std::runtime_error("no schema key " + ptr);
    return *e;
}

/// The config {a: {b: value}} for pointer /a/b, merged into `base`.
json with_key(json base, const std::string& ptr, const json& value) {
    if (!base.contains("train_micro_batch_size_per_gpu")) base["train_micro_batch_size_per_gpu"] = 1;
    base[json::json_pointer(ptr)] = value;
    return base;
}

/// A value of `entry`'s type that zeromem must act on: the schema's test
/// sample, else a value that is not accepted (refuse), else the default,
/// else a plain value of the type.
json sample_of(const json& e) {
    if (e.contains("sample")) return e.at("sample");
    if (e.value("refuse_if_enabled", false)) return json{{"enabled", true}};
    const std::string t = e.at("type");
    if (e.contains("refuse_unless")) {
        const json& ok = e.at("refuse_unless").front();
        if (ok.is_boolean()) return !ok.get<bool>();
    }
    if (e.contains("default") && !e.at("default").is_null()) return e.at("default");
    if (t == "bool") return true;
    if (t == "int") return 1;
    if (t == "number") return 1.0;
    if (t == "string") return "x";
    if (t == "string_list") return json::array({"x"});
    if (t == "dtype" || t == "comm_dtype") return "fp32";
    if (t == "device") return "none";
    if (t == "opaque" || t == "open_object" || t == "object") return json::object();
    return 1;
}

std::string write_temp(const std::string& name, const json& cfg) {
    // Unique per process: ctest runs tests of this binary in parallel.
    const std::string path = ::testing::TempDir() + "zeromem_" + std::to_string(::getpid()) + "_" + name;
    std::ofstream(path) << cfg.dump();
    return path;
}

/// Every number of an estimate (all phases), to tell whether a key changed it.
std::vector<uint64_t> signature(const Estimate& e) {
    std::vector<uint64_t> s;
    for (const auto& p : e.phases)
        for (uint64_t v : {p.per_gpu.total, p.per_gpu.parameters, p.per_gpu.gradients, p.per_gpu.optimizer_states,
                           p.per_gpu.activations, p.per_gpu.temporary_buffers, p.per_node.host_memory,
                           p.per_node.host_pinned, p.per_node.nvme})
            s.push_back(v);
    return s;
}

struct Outcome {
    bool refused = false;
    std::string error;
    std::vector<uint64_t> sig;
    std::vector<std::string> notes;
};

/// Resolves llama-2-7b with `cfg` as --ds-config and the context flags.
Outcome run_config(const json& cfg, const json& flags) {
    Request req;
    req.model.emplace("llama-2-7b");  // emplace: GCC 12 -Wmaybe-uninitialized misfires on optional<string> = literal
    req.gpus = flags.value("gpus", 8);
    if (flags.contains("tp")) req.tp = flags.at("tp").get<int64_t>();
    if (flags.contains("nodes")) req.nodes = flags.at("nodes").get<int64_t>();
    if (flags.contains("pp")) req.pp = flags.at("pp").get<int64_t>();
    if (flags.contains("deepspeed_version")) req.deepspeed_version = flags.at("deepspeed_version").get<std::string>();
    if (flags.value("ds_checkpointing", false)) {
        req.ds_checkpointing = true;
        req.checkpointing = "full";
    }
    // DeepSpeed refuses ZeRO-Offload with a client optimizer (engine.py
    // _configure_optimizer), so a config without an "optimizer" block names
    // DeepSpeed's AdamW, as a DeepSpeed user's config does.
    json full = cfg;
    if (!full.contains("optimizer")) full["optimizer"] = {{"type", "AdamW"}, {"params", {{"lr", 1e-5}}}};
    req.ds_config = write_temp("schema_key.json", full);
    Outcome o;
    try {
        const Resolved r = resolve_request(req, ZEROMEM_SOURCE_DATA_DIR);
        o.sig = signature(estimate(r.input));
        o.notes = r.notes;
    } catch (const InputError& e) {
        o.refused = true;
        o.error = e.what();
    }
    return o;
}

}  // namespace

// ---------------------------------------------------------------------------
// The data file

TEST(DsSchema, EveryKeyHasTypeAndMemoryMeaning) {
    const json& keys = ds_schema().at("keys");
    ASSERT_GT(keys.size(), 150u);
    for (const auto& item : keys.items()) {
        const json& e = item.value();
        SCOPED_TRACE(item.key());
        ASSERT_TRUE(e.contains("type"));
        ASSERT_TRUE(e.contains("memory"));
        const std::string m = e.at("memory");
        EXPECT_TRUE(m == "modelled" || m == "note" || m == "refuse" || m == "container") << m;
        if (m != "container") {
            EXPECT_FALSE(e.value("why", std::string()).empty());
        }
        if (m == "refuse") {
            EXPECT_TRUE(e.contains("refuse_unless") || e.value("refuse_if_enabled", false));
        }
        if (m == "modelled") {
            EXPECT_TRUE(e.contains("sample"));
        }
        if (e.contains("alias_of")) {
            EXPECT_NE(ds_schema_entry(e.at("alias_of").get<std::string>()), nullptr);
        }
    }
}

TEST(DsSchema, DefaultsMatchDeepSpeedCode) {
    // DeepSpeed v0.19.6 code defaults (runtime/zero/config.py, offload_config.py).
    EXPECT_EQ(key("/zero_optimization/stage").at("default"), 0);
    EXPECT_EQ(key("/zero_optimization/reduce_bucket_size").at("default"), 500000000);
    EXPECT_EQ(key("/zero_optimization/allgather_bucket_size").at("default"), 500000000);
    EXPECT_EQ(key("/zero_optimization/sub_group_size").at("default"), 1000000000);
    EXPECT_EQ(key("/zero_optimization/stage3_prefetch_bucket_size").at("default"), 50000000);
    EXPECT_EQ(key("/zero_optimization/stage3_param_persistence_threshold").at("default"), 100000);
    EXPECT_EQ(key("/zero_optimization/stage3_max_live_parameters").at("default"), 1000000000);
    EXPECT_EQ(key("/zero_optimization/stage3_max_reuse_distance").at("default"), 1000000000);
    EXPECT_EQ(key("/zero_optimization/mics_shard_size").at("default"), -1);
    EXPECT_EQ(key("/zero_optimization/zero_hpz_partition_size").at("default"), 1);
    EXPECT_EQ(key("/zero_optimization/offload_param/buffer_count").at("default"), 5);
    EXPECT_EQ(key("/zero_optimization/offload_param/buffer_size").at("default"), 100000000);
    EXPECT_EQ(key("/zero_optimization/offload_param/max_in_cpu").at("default"), 1000000000);
    EXPECT_EQ(key("/zero_optimization/offload_optimizer/buffer_count").at("default"), 4);
    EXPECT_EQ(key("/zero_optimization/offload_optimizer/ratio").at("default"), 1.0);
    EXPECT_EQ(key("/zero_optimization/offload_optimizer/cpuadam_cores_perc").at("default"), 0.8);
    EXPECT_EQ(key("/aio/block_size").at("default"), 1048576);
    EXPECT_EQ(key("/aio/queue_depth").at("default"), 8);
    EXPECT_EQ(key("/aio/overlap_events").at("default"), true);
    EXPECT_EQ(key("/fp16/initial_scale_power").at("default"), 16);
    EXPECT_EQ(key("/fp16/loss_scale_window").at("default"), 1000);
    EXPECT_EQ(key("/fp16/hysteresis").at("default"), 2);
    // Version-dependent defaults (pin_memory: deepspeedai/DeepSpeed#8207;
    // gradient_clipping: #8068).
    EXPECT_EQ(key("/zero_optimization/offload_param/pin_memory").at("default"), true);
    EXPECT_EQ(key("/zero_optimization/offload_param/pin_memory").at("version_defaults")[0].at("before"), "0.19.5");
    EXPECT_EQ(key("/gradient_clipping").at("default"), 1.0);
    EXPECT_EQ(key("/gradient_clipping").at("version_defaults")[0].at("before"), "0.19.3");
    EXPECT_EQ(key("/bf16/check_grad_overflow").at("version_defaults")[0].at("before"), "0.19.3");
    // Aliases (pydantic populate_by_name) and the deprecated names.
    EXPECT_EQ(key("/zero_optimization/prefetch_bucket_size").at("alias_of"),
              "/zero_optimization/stage3_prefetch_bucket_size");
    EXPECT_TRUE(key("/zero_optimization/cpu_offload").contains("deprecated"));
    EXPECT_TRUE(key("/zero_optimization/stage3_gather_fp16_weights_on_model_save").contains("deprecated"));
}

TEST(DsSchema, HfAutoKeysAreTheTrainersList) {
    // transformers integrations/deepspeed.py: the keys trainer_config_process /
    // trainer_config_finalize fill.
    const std::set<std::string> expected = {
        "/train_batch_size", "/train_micro_batch_size_per_gpu", "/gradient_accumulation_steps",
        "/gradient_clipping", "/fp16/enabled", "/bf16/enabled", "/amp/enabled", "/amp/opt_level",
        "/zero_optimization/reduce_bucket_size", "/zero_optimization/stage3_prefetch_bucket_size",
        "/zero_optimization/stage3_param_persistence_threshold", "/optimizer/params/lr",
        "/optimizer/params/betas", "/optimizer/params/eps", "/optimizer/params/weight_decay",
        "/scheduler/params/warmup_min_lr", "/scheduler/params/warmup_max_lr",
        "/scheduler/params/total_num_steps", "/scheduler/params/warmup_num_steps"};
    std::set<std::string> got;
    for (const auto& item : ds_schema().at("keys").items())
        if (item.value().contains("auto")) {
            const auto& l = item.value().at("auto");
            if (std::find(l.begin(), l.end(), "hf-trainer") != l.end()) got.insert(item.key());
        }
    EXPECT_EQ(got, expected);
}

// ---------------------------------------------------------------------------
// No setting silently ignored: every schema key changes the estimate, gets a
// note naming it, or is refused with a message naming it.

TEST(DsSchema, NoSettingSilentlyIgnored) {
    int modelled = 0, noted = 0, refused = 0;
    for (const auto& item : ds_schema().at("keys").items()) {
        const std::string& ptr = item.key();
        const json& e = item.value();
        const std::string m = e.at("memory");
        if (m == "container") continue;
        SCOPED_TRACE(ptr);
        const json context = e.value("context", json::object());
        const json flags = e.value("context_flags", json::object());
        // train_batch_size alone sets the micro batch; elsewhere a micro batch of 1 is given.
        json cfg = ptr == "/train_batch_size" ? context : with_key(context, ptr, sample_of(e));
        if (ptr == "/train_batch_size") cfg["train_batch_size"] = sample_of(e);
        const Outcome with = run_config(cfg, flags);
        if (m == "refuse") {
            EXPECT_TRUE(with.refused) << "accepted " << cfg.dump();
            EXPECT_HAS(with.error, ptr);
            EXPECT_HAS(with.error, "does not");
            ++refused;
        } else if (m == "note") {
            ASSERT_FALSE(with.refused) << with.error;
            bool named = false;
            for (const auto& n : with.notes) named = named || n.find(ptr) != std::string::npos;
            // A key inside a noted object is covered by the object's note.
            for (const auto& n : with.notes)
                named = named || (n.find(":/") != std::string::npos &&
                                  ptr.rfind(n.substr(n.find(":/") + 1, n.find(" = ") - n.find(":/") - 1) + "/", 0) == 0);
            EXPECT_TRUE(named) << "no note for " << cfg.dump();
            ++noted;
        } else {
            ASSERT_FALSE(with.refused) << with.error;
            const Outcome without = run_config(with_key(context, "/train_micro_batch_size_per_gpu",
                                                    ptr == "/train_micro_batch_size_per_gpu"
                                                        ? json(1) : json(cfg.value("train_micro_batch_size_per_gpu", 1))),
                                           flags);
            ASSERT_FALSE(without.refused) << without.error;
            EXPECT_NE(with.sig, without.sig) << cfg.dump() << " does not change the estimate";
            ++modelled;
        }
    }
    EXPECT_GT(modelled, 25);
    EXPECT_GT(noted, 60);
    EXPECT_GT(refused, 20);
}

TEST(DsSchema, ZeroPlusPlusAndMicsAreModelledNotRefused) {
    // Once refused by name: now read and modelled. llama-2-7b,
    // 16 GPUs on 2 nodes.
    const json two_nodes = {{"gpus", 16}, {"nodes", 2}};
    const Outcome plain = run_config(json::parse(R"({"train_micro_batch_size_per_gpu": 1,
        "zero_optimization": {"stage": 3}})"), two_nodes);
    for (const char* cfg : {R"({"stage": 3, "zero_hpz_partition_size": 8})", R"({"stage": 3, "mics_shard_size": 8})",
                            R"({"stage": 3, "zero_quantized_weights": true})",
                            R"({"stage": 3, "zero_quantized_gradients": true})"}) {
        SCOPED_TRACE(cfg);
        const Outcome o = run_config(json{{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", json::parse(cfg)}},
                                     two_nodes);
        ASSERT_FALSE(o.refused) << o.error;
        EXPECT_NE(o.sig, plain.sig);
    }
    // Their defaults change nothing.
    EXPECT_EQ(run_config(json::parse(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3,
        "mics_shard_size": -1, "zero_hpz_partition_size": 1, "zero_quantized_weights": false,
        "zero_quantized_gradients": false}})"), two_nodes).sig, plain.sig);
}

TEST(DsSchema, InvalidZeroPlusPlusAndMicsValuesNameTheKey) {
    auto error_of = [](const char* zero, int64_t gpus, int64_t nodes) {
        return run_config(json{{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", json::parse(zero)}},
                          json{{"gpus", gpus}, {"nodes", nodes}}).error;
    };
    // mics_utils.py _generate_mics_config: the shard size divides the data-parallel size.
    EXPECT_HAS(error_of(R"({"stage": 3, "mics_shard_size": 6})", 16, 2), "zero_optimization.mics_shard_size: 6 does not divide");
    EXPECT_HAS(error_of(R"({"stage": 3, "mics_shard_size": 32})", 16, 2), "zero_optimization.mics_shard_size: 32 does not divide");
    // utils/groups.py _create_zero_param_parallel_group: hpz divides the world size.
    EXPECT_HAS(error_of(R"({"stage": 3, "zero_hpz_partition_size": 6})", 16, 2),
               "zero_optimization.zero_hpz_partition_size: 6 does not divide the 16 GPUs");
    // runtime/zero/config.py: zero_hpz_partition_size ge=0 (the schema's min).
    EXPECT_HAS(error_of(R"({"stage": 3, "zero_hpz_partition_size": -2})", 16, 2), "zero_hpz_partition_size");
    // stage3.py asserts reduce_scatter with the qgZ all-to-all group.
    EXPECT_HAS(error_of(R"({"stage": 3, "zero_quantized_gradients": true, "reduce_scatter": false})", 16, 2),
               "zero_optimization.zero_quantized_gradients: needs reduce_scatter true");
    // mics_utils.py create_mics_comm_groups: hierarchical gather needs a shard group spanning nodes.
    EXPECT_HAS(error_of(R"({"stage": 3, "mics_shard_size": 8, "mics_hierarchical_params_gather": true})", 16, 2),
               "zero_optimization.mics_hierarchical_params_gather: the shard group of 8 GPUs fits in one node");
    EXPECT_EQ(error_of(R"({"stage": 3, "mics_shard_size": 16, "mics_hierarchical_params_gather": true})", 32, 4), "");
    // Wrong JSON types are refused by the schema, naming the key.
    EXPECT_HAS(error_of(R"({"stage": 3, "zero_quantized_weights": 8})", 16, 2), "/zero_optimization/zero_quantized_weights");
    EXPECT_HAS(error_of(R"({"stage": 3, "mics_shard_size": "eight"})", 16, 2), "/zero_optimization/mics_shard_size");
}

TEST(DsSchema, ZeroPlusPlusKeysRecordProvenance) {
    Request req;
    req.model.emplace("llama-2-7b");
    req.gpus = 16;
    req.nodes = 2;
    req.ds_config = write_temp("zeropp_prov.json", json::parse(R"({"train_micro_batch_size_per_gpu": 1,
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}},
        "zero_optimization": {"stage": 3, "zero_hpz_partition_size": 8, "zero_quantized_weights": true,
        "zero_quantized_gradients": true}})"));
    const Resolved r = resolve_request(req, ZEROMEM_SOURCE_DATA_DIR);
    EXPECT_EQ(r.input.zero.zero_hpz_partition_size, 8);
    EXPECT_TRUE(r.input.zero.zero_quantized_weights);
    EXPECT_TRUE(r.input.zero.zero_quantized_gradients);
    EXPECT_HAS(r.provenance.at("zero_optimization.zero_hpz_partition_size"), "/zero_optimization/zero_hpz_partition_size");
    EXPECT_HAS(r.provenance.at("zero_optimization.zero_quantized_weights"), "/zero_optimization/zero_quantized_weights");
    // A flag overrides the config and says so.
    req.hpz_partition_size = 4;
    req.mics_shard_size = -1;
    const Resolved f = resolve_request(req, ZEROMEM_SOURCE_DATA_DIR);
    EXPECT_EQ(f.input.zero.zero_hpz_partition_size, 4);
    EXPECT_EQ(f.provenance.at("zero_optimization.zero_hpz_partition_size"), "--hpz-partition-size");
}

// ---------------------------------------------------------------------------
// check findings

namespace {

std::vector<Finding> check(const json& cfg, CheckOptions o = {}) { return check_ds_config(cfg, o); }

const Finding* find(const std::vector<Finding>& fs, const std::string& ptr, Severity s) {
    for (const auto& f : fs)
        if (f.pointer == ptr && f.severity == s) return &f;
    return nullptr;
}

CheckOptions hf(int64_t hidden = 0) {
    CheckOptions o;
    o.launcher = Launcher::hf_trainer;
    if (hidden) o.autos.hidden_size = hidden;
    return o;
}

}  // namespace

TEST(Check, AutoUnderDeepSpeedIsAnErrorC28) {
    const auto fs = check(json::parse(R"({"train_micro_batch_size_per_gpu": 2, "gradient_clipping": "auto"})"));
    const Finding* f = find(fs, "/gradient_clipping", Severity::error);
    ASSERT_NE(f, nullptr);
    EXPECT_HAS(f->message, "filled only by the HF Trainer or accelerate");
    EXPECT_EQ(count_findings(fs, Severity::error), 1u);
    // Under the HF Trainer it resolves to max_grad_norm (HF default 1.0).
    const auto ok = check(json::parse(R"({"train_micro_batch_size_per_gpu": 2, "gradient_clipping": "auto"})"), hf());
    EXPECT_EQ(count_findings(ok, Severity::error), 0u);
    ASSERT_NE(find(ok, "/gradient_clipping", Severity::note), nullptr);
    EXPECT_HAS(find(ok, "/gradient_clipping", Severity::note)->message, "\"auto\" -> 1");
}

TEST(Check, AutoResolvesWithHiddenSizeAndFlagsTheFloatTrapC26) {
    const json cfg = json::parse(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3,
        "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto"}})");
    const auto fs = check(cfg, hf(4096));
    // h=4096: h^2 = 16,777,216; int(0.9 h^2) = 15,099,494 (trainer_config_finalize).
    EXPECT_HAS(find(fs, "/zero_optimization/reduce_bucket_size", Severity::note)->message, "16777216");
    EXPECT_HAS(find(fs, "/zero_optimization/stage3_prefetch_bucket_size", Severity::note)->message, "15099494");
    const Finding* trap = find(fs, "/zero_optimization/stage3_prefetch_bucket_size", Severity::warning);
    ASSERT_NE(trap, nullptr);
    EXPECT_HAS(trap->message, "DeepSpeed >= 0.15 rejects");
    EXPECT_HAS(trap->fix, "15099494");
    // DeepSpeed 0.14 (pydantic v1) accepted the float: no trap.
    CheckOptions old = hf(4096);
    old.deepspeed_version = "0.14.4";
    EXPECT_EQ(find(check(cfg, old), "/zero_optimization/stage3_prefetch_bucket_size", Severity::warning), nullptr);
}

TEST(Check, FractionalIntegerIsAnErrorFrom015AndAWarningBefore) {
    const json cfg = json::parse(R"({"train_micro_batch_size_per_gpu": 1,
        "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": 15099494.4}})");
    EXPECT_NE(find(check(cfg), "/zero_optimization/stage3_prefetch_bucket_size", Severity::error), nullptr);
    CheckOptions old;
    old.deepspeed_version = "0.14.2";
    EXPECT_NE(find(check(cfg, old), "/zero_optimization/stage3_prefetch_bucket_size", Severity::warning), nullptr);
}

TEST(Check, KeysNamedWrongOrMisplacedC29) {
    const auto fs = check(json::parse(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3,
        "stage3_param_persitance_threshold": 1e4, "aio": {"block_size": 1048576}, "reduce_bucket_size": 0}})"));
    EXPECT_HAS(find(fs, "/zero_optimization/stage3_param_persitance_threshold", Severity::error)->fix,
               "stage3_param_persistence_threshold");
    EXPECT_HAS(find(fs, "/zero_optimization/aio", Severity::error)->message, "belongs at the top level");
    EXPECT_HAS(find(fs, "/zero_optimization/reduce_bucket_size", Severity::error)->message, "ZeroDivisionError");
    EXPECT_EQ(count_findings(fs, Severity::error), 3u);  // all three, not only the first
}

TEST(Check, ZeroPlusPlusKeysUnknownBefore010C29) {
    CheckOptions o;
    o.deepspeed_version = "0.9.5";
    const auto fs = check(json::parse(R"({"train_micro_batch_size_per_gpu": 1,
        "zero_optimization": {"stage": 3, "zero_hpz_partition_size": 8}})"), o);
    EXPECT_HAS(find(fs, "/zero_optimization/zero_hpz_partition_size", Severity::error)->message,
               "unknown to DeepSpeed 0.9.5");
    // zeromem models hpZ now: no "cannot estimate" warning.
    EXPECT_EQ(find(fs, "/zero_optimization/zero_hpz_partition_size", Severity::warning), nullptr);
}

TEST(Check, BatchArithmeticC27) {
    // #6914: 8 != 2 x 1 x 1 on one GPU.
    CheckOptions o;
    o.gpus_known = true;
    o.autos.world_size = 1;
    const auto fs = check(json::parse(R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
        "gradient_accumulation_steps": 1})"), o);
    EXPECT_HAS(find(fs, "/train_batch_size", Severity::error)->message, "set train_batch_size to 2");
    o.autos.world_size = 4;
    EXPECT_EQ(find(check(json::parse(R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
        "gradient_accumulation_steps": 1})"), o), "/train_batch_size", Severity::error), nullptr);
    // Neither batch key: DeepSpeed asserts.
    EXPECT_NE(find(check(json::object()), "/train_batch_size", Severity::error), nullptr);
}

TEST(Check, DeprecatedKeys) {
    const auto fs = check(json::parse(R"({"train_micro_batch_size_per_gpu": 1,
        "zero_optimization": {"stage": 2, "cpu_offload": true}})"));
    EXPECT_HAS(find(fs, "/zero_optimization/cpu_offload", Severity::warning)->fix, "offload_optimizer");
    EXPECT_EQ(count_findings(fs, Severity::error), 0u);
}

TEST(Check, PinMemoryDefaultDependsOnVersion) {
    const json cfg = json::parse(R"({"train_micro_batch_size_per_gpu": 1,
        "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}})");
    const std::string ptr = "/zero_optimization/offload_optimizer/pin_memory";
    CheckOptions old;
    old.deepspeed_version = "0.19.4";  // false up to 0.19.4 (PR #8207)
    EXPECT_HAS(find(check(cfg, old), ptr, Severity::warning)->message, "defaults to false");
    EXPECT_HAS(find(check(cfg), ptr, Severity::note)->message, "defaults to true");
    // Explicit false: offload without pin_memory.
    const json off = json::parse(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2,
        "offload_optimizer": {"device": "cpu", "pin_memory": false}}})");
    EXPECT_HAS(find(check(off), ptr, Severity::warning)->message, "offload without pin_memory");
}

TEST(Check, StageDependentAndVersionDependentDefaults) {
    const auto z2 = check(json::parse(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}})"));
    EXPECT_HAS(find(z2, "/zero_optimization/overlap_comm", Severity::note)->message, "defaults to false for stage 2");
    EXPECT_HAS(find(z2, "/zero_optimization/stage", Severity::note)->message, "2Ψ + 18Ψ/N");
    CheckOptions old;
    old.deepspeed_version = "0.14.2";
    const auto z2old = check(json::parse(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}})"), old);
    EXPECT_HAS(find(z2old, "/zero_optimization/stage", Severity::note)->message, "4Ψ + 16Ψ/N");
    EXPECT_HAS(find(z2old, "/gradient_clipping", Severity::note)->message, "defaults to 0");
    const auto z3 = check(json::parse(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}})"));
    EXPECT_HAS(find(z3, "/zero_optimization/overlap_comm", Severity::note)->message, "defaults to true for stage 3");
    const auto bf = check(json::parse(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}})"), old);
    EXPECT_HAS(find(bf, "/data_types/grad_accum_dtype", Severity::note)->message, "fp32 (4 B/param)");
    EXPECT_THROW(check(json::object(), [] { CheckOptions o; o.deepspeed_version = "banana"; return o; }()), InputError);
    EXPECT_THROW(check(json::object(), [] { CheckOptions o; o.deepspeed_version = "9.0.0"; return o; }()), InputError);
}

// ---------------------------------------------------------------------------
// Memory findings (model and cluster given)

namespace {

CheckOptions with_memory(const json& cfg, Request req) {
    req.ds_config = write_temp("check_mem.json", cfg);
    CheckOptions o;
    o.memory = resolve_request(req, ZEROMEM_SOURCE_DATA_DIR).input;
    return o;
}

Request llama7b(int64_t gpus) {
    Request r;
    r.model = "llama-2-7b";
    r.gpus = gpus;
    r.optimizer_impl = "fused";  // DeepSpeedCPUAdam under offload: DeepSpeed refuses a client optimizer there
    return r;
}

}  // namespace

TEST(CheckMemory, PinnedPoolsBeyondHostRam) {
    // ZeRO-3 NVMe optimizer offload at sub_group_size 1e9: the optimizer
    // swapper pins 4 x sub_group x 4 B = 16 GB per rank (swap_tensor/
    // optimizer_utils.py OptimizerSwapper, SwapBufferManager);
    // 8 ranks need > 128 GB pinned, beyond a 64 GB node.
    const json cfg = json::parse(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3,
        "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"}}})");
    Request r = llama7b(8);
    r.host_memory = "64GB";
    const CheckOptions o = with_memory(cfg, r);
    const auto fs = check(cfg, o);
    const Finding* f = find(fs, "/zero_optimization/offload_optimizer/pin_memory", Severity::error);
    ASSERT_NE(f, nullptr);
    EXPECT_HAS(f->message, "pinned host pools");
    EXPECT_GT(estimate(*o.memory).per_node.host_pinned, 8ull * 4 * 1000000000 * 4);  // 4 buffers x 1e9 x 4 B x 8 ranks
}

TEST(CheckMemory, NvmePoolsBeyondTheDrive) {
    // ZeRO-3 optimizer on NVMe: fp32 master + m + v = 12 B/param for 6.74e9
    // params = 81 GB per node, beyond a 50 GB drive.
    const json cfg = json::parse(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3,
        "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"}}})");
    CheckOptions o = with_memory(cfg, llama7b(8));
    o.nvme_capacity = 50000000000ull;
    EXPECT_NE(find(check(cfg, o), "/zero_optimization/offload_optimizer/nvme_path", Severity::error), nullptr);
    o.nvme_capacity = 2000000000000ull;
    EXPECT_EQ(find(check(cfg, o), "/zero_optimization/offload_optimizer/nvme_path", Severity::error), nullptr);
}

TEST(CheckMemory, BucketsThatDoNotFitBesideTheModel) {
    // ZeRO-2 with overlap_comm: two reduce buckets of reduce_bucket_size
    // elements in bf16 (stage_1_and_2.py setup_buckets): 2 x 2e9 x 2 B = 8 GB
    // beside the model.
    const json cfg = json::parse(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
        "zero_optimization": {"stage": 2, "overlap_comm": true, "reduce_bucket_size": 2000000000}})");
    Request r;
    r.model = "opt-1.3b";
    r.gpus = 8;
    r.seq_len = 512;
    CheckOptions o = with_memory(cfg, r);
    const uint64_t need = estimate(*o.memory).per_gpu.total;
    o.memory->cluster.gpu_memory = need - 4000000000ull;  // fits only without ~8 GB of buckets
    const auto fs = check(cfg, o);
    const Finding* f = find(fs, "/zero_optimization/reduce_bucket_size", Severity::error);
    ASSERT_NE(f, nullptr);
    EXPECT_HAS(f->message, "buckets do not fit beside the model");
}

TEST(CheckMemory, HigherStageUsingMoreThanALowerOne) {
    // ZeRO-3's default prefetch + persistence + 5e8-element bucket cost more
    // than it saves for a small model on 2 GPUs.
    const json cfg = json::parse(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
        "zero_optimization": {"stage": 3, "reduce_bucket_size": 500000000, "stage3_prefetch_bucket_size": 500000000}})");
    Request r;
    r.params = "100M";
    r.gpus = 2;
    const CheckOptions o = with_memory(cfg, r);
    const auto fs = check(cfg, o);
    const Finding* f = find(fs, "/zero_optimization/stage", Severity::warning);
    ASSERT_NE(f, nullptr);
    EXPECT_HAS(f->message, "more than stage");
}

// Without ZeRO, DeepSpeed 0.19.6 raises NotImplementedError for bf16 weights
// with fp32 accumulation (engine.py _do_optimizer_sanity_check "unsupported
// mix"); v0.18.4 built BF16_Optimizer for it. With the model known, a ZeRO-1
// config of the same dtypes is checked without trying the refused stage 0.
TEST(Check, DtypeMixWithoutZero) {
    const json z0 = json::parse(R"({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},
        "data_types": {"grad_accum_dtype": "fp32"}, "zero_optimization": {"stage": 0}})");
    CheckOptions o;
    const auto found = check(z0, o);
    const Finding* f = find(found, "/data_types/grad_accum_dtype", Severity::error);
    ASSERT_NE(f, nullptr);
    EXPECT_HAS(f->message, "unsupported mix");
    EXPECT_HAS(f->fix, "ZeRO stage 1-3");
    o.deepspeed_version = "0.18.4";
    const auto older = check(z0, o);
    EXPECT_EQ(find(older, "/data_types/grad_accum_dtype", Severity::error), nullptr);

    json z1 = z0;
    z1["zero_optimization"]["stage"] = 1;
    Request r;
    r.model = "llama-2-7b";
    r.gpus = 8;
    const auto fs = check(z1, with_memory(z1, r));
    for (const auto& x : fs) EXPECT_NE(x.severity, Severity::error) << x.pointer << ": " << x.message;
}
