// `zeromem plan` when the GPU fits and the node's RAM does not: step 10
// searches ZeRO-Infinity's host-RAM knobs (the ones `estimate`'s host advice
// names), the emitted config carries them, and `estimate --ds-config` on that
// file gives the plan's own figures. With --for hf-trainer the plan keeps
// stage3_gather_16bit_weights_on_model_save on where the host has room, so
// trainer.save_model() writes consolidated weights, and says what it costs.
#include "cli_runner.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <sys/stat.h>

using cli::json_of;
using cli::zeromem;

namespace {

const std::string k405b = cli::testdata("hf_configs/published/llama-3.1-405b.json");
const std::string kCluster = " --gpus 8 --gpu H100-80GB --host-memory 1TiB";

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(cli::slurp(path)); }

}  // namespace

// Llama-3.1-405B on one node of 8 x H100 with 1 TiB: ZeRO-Infinity fits the GPU
// but not the host at DeepSpeed's defaults (sub_group_size 1e9,
// runtime/zero/config.py; pinned offload_optimizer buffers). Plan tries the
// smaller swap buffers, then the pageable 16-bit gradient buffer, and the
// emitted file holds what it chose: sub_group_size 1e8 and
// offload_optimizer.pin_memory false.
TEST(PlanHost, SearchesZeroInfinityHostKnobsAndEmitsThem) {
    const std::string emit = cli::temp_path("plan405b.json");
    const cli::Outcome r = zeromem("plan --hf-config " + k405b + kCluster + " --for hf-trainer --emit '" + emit + "'");
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 4) << r.err << r.out;
    EXPECT_NE(r.out.find("step 10  ZeRO-Infinity's host buffers: zero_optimization.sub_group_size=1e8"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("zero_optimization.offload_optimizer.pin_memory=false"), std::string::npos) << r.out;
    // offload_param.buffer_size is already DeepSpeed's 1e8 (offload_config.py): a trial names only what it changes.
    EXPECT_EQ(r.out.find("offload_param.buffer_size=1e8"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\nWinner: ZeRO-3 + optimizer nvme + params nvme"), std::string::npos) << r.out;
    const nlohmann::json cfg = read_json(emit);
    std::remove(emit.c_str());
    const auto& z = cfg["zero_optimization"];
    EXPECT_EQ(z["stage"], 3);
    EXPECT_EQ(z["sub_group_size"].get<double>(), 1e8);
    EXPECT_EQ(z["offload_optimizer"]["device"], "nvme");
    EXPECT_EQ(z["offload_optimizer"]["pin_memory"], false);
    EXPECT_FALSE(z["offload_param"].contains("buffer_size"));
}

// The emitted file, read back by `estimate --ds-config` at the micro batch,
// accumulation and checkpointing the plan states, gives the plan winner's GPU
// and host figures: the two paths apply the same settings.
TEST(PlanHost, EmittedConfigEstimatesToThePlansFigures) {
    const std::string emit = cli::temp_path("plan405b_back.json");
    const nlohmann::json p = json_of("plan --hf-config " + k405b + kCluster + " --for hf-trainer --emit '" + emit + "'");
    ASSERT_TRUE(p["winner"].is_object()) << p.dump();
    const auto& w = p["winner"];
    const std::string args = "estimate --hf-config " + k405b + kCluster + " --ds-config '" + emit + "' --dtype bf16" +
                             " --micro-batch " + std::to_string(w["micro_batch"].get<int64_t>()) + " --grad-accum " +
                             std::to_string(w["grad_accum"].get<int64_t>()) + " --gradient-checkpointing " +
                             w["gradient_checkpointing"].get<std::string>();
    const nlohmann::json e = json_of(args);
    std::remove(emit.c_str());
    EXPECT_EQ(w["sub_group_size"], 100000000);
    EXPECT_EQ(w["offload_optimizer_pin_memory"], false);
    EXPECT_EQ(e["per_node"]["host_memory"], w["host_memory"]) << args;
    EXPECT_EQ(e["per_gpu"]["total"], w["per_gpu_total"]) << args;
    EXPECT_EQ(e["fits_host"], true);
}

// Llama-2-13B on 8 x A100-80GB with 2 TiB, planned for the HF Trainer: the
// winner is ZeRO-3 and the host has room for rank 0's consolidated 16-bit
// state dict (DeepSpeed engine.py _zero3_consolidated_16bit_state_dict gathers
// every parameter and keeps a CPU copy on rank 0: 2 bytes x Ψ, Ψ = 13,015,864,320
// for Llama-2-13b-hf, 26,031,728,640 B = 24.24 GiB), so the emitted config keeps
// stage3_gather_16bit_weights_on_model_save on and the plan says what it costs.
TEST(PlanHost, HfTrainerPlanKeepsTheGatherAtSaveWhereTheHostHasRoom) {
    const std::string emit = cli::temp_path("plan13b.json");
    const std::string args = "plan --model llama-2-13b --gpus 8 --gpu A100-80GB --host-memory 2TiB --for hf-trainer";
    const cli::Outcome r = zeromem(args + " --emit '" + emit + "'");
    ASSERT_TRUE(r.exit_code == 0 || r.exit_code == 4) << r.err;
    EXPECT_NE(r.out.find("\nWinner: ZeRO-3"), std::string::npos) << r.out;
    const double save_gib = 2.0 * 13015864320.0 / 1073741824.0;
    char line[256];
    std::snprintf(line, sizeof line, "stage3_gather_16bit_weights_on_model_save on, so trainer.save_model() writes "
                                     "consolidated 16-bit weights: it costs rank 0's node %.2f GiB", save_gib);
    EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
    EXPECT_EQ(read_json(emit)["zero_optimization"]["stage3_gather_16bit_weights_on_model_save"], true);
    std::remove(emit.c_str());
    EXPECT_EQ(json_of(args)["stage3_gather_16bit_weights_on_model_save"], true);
    // Without --for hf-trainer DeepSpeed's own default (off, runtime/zero/config.py) stays and nothing is said.
    const cli::Outcome ds = zeromem("plan --model llama-2-13b --gpus 8 --gpu A100-80GB --host-memory 2TiB");
    EXPECT_EQ(ds.out.find("stage3_gather_16bit_weights_on_model_save on, so"), std::string::npos);
}

// The 405B on 1 TiB: with the gather on, rank 0's node would also hold the
// 2Ψ-byte state dict (755.9 GiB for Ψ = 405.85e9) beside ZeRO-Infinity's host
// buffers, and nothing fits; the plan falls back to the input's setting (off)
// and says how to recover the weights.
TEST(PlanHost, HfTrainerPlanTurnsTheGatherOffOnlyWhenNothingFitsWithIt) {
    const nlohmann::json p = json_of("plan --hf-config " + k405b + kCluster + " --for hf-trainer");
    EXPECT_EQ(p["stage3_gather_16bit_weights_on_model_save"], false);
    const cli::Outcome r = zeromem("plan --hf-config " + k405b + kCluster + " --for hf-trainer");
    EXPECT_NE(r.out.find("stage3_gather_16bit_weights_on_model_save off: with it on nothing fits"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("zero_to_fp32.py"), std::string::npos);
}

// --emit writes a regular file or fails: a full device (the write fails at the flush) and a FIFO (opening it
// would block until a reader comes) are one clear error and a nonzero exit, never "wrote".
TEST(PlanEmit, RefusesWhatIsNotARegularFileAndReportsAFailedWrite) {
    const std::string plan = "plan --model llama-2-7b --gpus 8 --gpu A100-80GB --emit ";
    cli::expect_error(plan + "/dev/full", "--emit: ");
    const std::string fifo = cli::temp_path("emit.fifo");
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    cli::expect_error(plan + "'" + fifo + "'", "is not a regular file");
    std::remove(fifo.c_str());
}

// An answer written to a full device never reached its reader: exit 2 with one line, never a silent 0.
TEST(AnswerOutput, AFailedWriteToStandardOutputIsAnError) {
    const auto r = cli::run_shell(std::string("{ '") + ZEROMEM_BINARY +
                                  "' estimate --model llama-2-7b --gpus 8 --stage 3 --format json >/dev/full; }");
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("cannot write the answer to standard output"), std::string::npos) << r.err;
}
