// Flags whose effect a user could misread: each is refused in one line naming it, or said in a note or
// warning naming it, never dropped in silence. Expected texts are the flag and key names, PyTorch's
// documented ranges and the HF Trainer's collator names, never our own output.
#include "cli_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

using cli::Outcome;
using cli::zeromem;

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

// --host-reserve is taken from --host-memory (request.cpp resolve_host_capacity); without it there is
// nothing to take it from, and the warning says so (as --moe-capacity-factor without --ep-size).
TEST(CliFlags, HostReserveWithoutHostMemoryIsSaid) {
    const Outcome r = zeromem("estimate --params 7e9 --gpus 8 --stage 3 --host-reserve 4GiB");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("warning: --host-reserve 4GiB changes nothing without --host-memory"), std::string::npos)
        << r.err;
    EXPECT_EQ(zeromem("estimate --params 7e9 --gpus 8 --stage 3 --host-memory 1TiB --host-reserve 4GiB")
                  .err.find("changes nothing"),
              std::string::npos);
}

// PyTorch refuses garbage_collection_threshold outside (0, 1) (c10/cuda/CUDAAllocatorConfig.cpp
// parseGarbageCollectionThreshold: "set it in (0.0, 1.0)") and per_process_memory_fraction outside
// [0, 1] (parsePerProcessMemoryFraction), so zeromem does too, in one line naming the key.
TEST(CliFlags, AllocConfFractionsOutOfPyTorchsRangeAreRefused) {
    for (const char* bad : {"garbage_collection_threshold:1.5", "garbage_collection_threshold:0",
                            "garbage_collection_threshold:1", "garbage_collection_threshold:x",
                            "per_process_memory_fraction:1.5"}) {
        const Outcome r = zeromem(std::string("estimate --model llama-2-7b --gpus 8 --stage 3 --alloc-conf ") + bad);
        EXPECT_EQ(r.exit_code, 2) << bad;
        const std::string key = std::string(bad).substr(0, std::string(bad).find(':'));
        EXPECT_NE(r.err.find("--alloc-conf: " + key), std::string::npos) << r.err;
        EXPECT_EQ(lines(r.err), 1u) << r.err;
    }
    EXPECT_NE(zeromem("estimate --model llama-2-7b --alloc-conf garbage_collection_threshold:1.5").err.find("(0.0, 1.0)"),
              std::string::npos);
    for (const char* ok : {"garbage_collection_threshold:0.6", "per_process_memory_fraction:1"})
        EXPECT_EQ(zeromem(std::string("estimate --model llama-2-7b --gpus 8 --stage 3 --alloc-conf ") + ok).exit_code, 0)
            << ok;
}

// One command line for estimate, fit, compare and plan: estimate and fit take the speed model's flags
// and name each one they do not use; compare and plan use them and say nothing.
TEST(CliFlags, SpeedFlagsOnEstimateAndFitAreNamedAsUnused) {
    Outcome r = zeromem("estimate --model llama-2-7b --gpus 16 --nodes 2 --gpu A100-80GB --stage 3 --network ib-ndr400 "
                        "--global-batch 64 --verbose");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("note: --network: estimate does not use it"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("note: --global-batch: estimate does not use it"), std::string::npos) << r.err;
    r = zeromem("fit --model llama-2-7b --gpu A100-80GB --network ib-ndr400 --verbose");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("note: --network: fit does not use it"), std::string::npos) << r.err;
    r = zeromem("compare --model llama-2-7b --gpus 16 --nodes 2 --gpu A100-80GB --network ib-ndr400 --global-batch 64 "
                "--verbose");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("does not use"), std::string::npos) << r.err;
    EXPECT_EQ(zeromem("estimate --model llama-2-7b --gpus 8 --verbose").err.find("does not use"), std::string::npos);
}

// calibrate reads training logs (--log): a file over the 64 MiB input limit is named as the log it is.
TEST(CliFlags, CalibrateNamesTheOversizedLog) {
    const std::string log = cli::temp_path("huge.log");
    { std::ofstream(log).put('x'); }
    std::filesystem::resize_file(log, (64u << 20) + 1);  // sparse: no 64 MiB written
    const Outcome r = zeromem("calibrate --model llama-2-7b --gpus 8 --gpu A100-80GB --log " + log);
    std::remove(log.c_str());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(log + ": 67108865 bytes is too large for a training log (--log) (at most 64 MiB)"),
              std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("config"), std::string::npos) << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
}

// --seq-len under dynamic padding: the HF Trainer's default collator, DataCollatorWithPadding
// (transformers Trainer.__init__, given a tokenizer), pads each batch to its longest sample; the help
// says the longest batch's length is the one to give.
TEST(CliFlags, SeqLenHelpSaysTheLongestBatch) {
    const Outcome r = zeromem("estimate --help");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string help = r.out;
    help.erase(std::remove(help.begin(), help.end(), '\n'), help.end());
    std::string squeezed;  // CLI11 wraps and indents long descriptions
    for (char c : help)
        if (!(c == ' ' && !squeezed.empty() && squeezed.back() == ' ')) squeezed += c;
    EXPECT_NE(squeezed.find("Under dynamic padding it is the longest batch's length"), std::string::npos) << r.out;
    EXPECT_NE(squeezed.find("DataCollatorWithPadding"), std::string::npos) << r.out;
    EXPECT_NE(squeezed.find("group_by_length"), std::string::npos) << r.out;
}

// The flags HF Trainer users type get zeromem's flag for the same input
// (transformers TrainingArguments: bf16, per_device_train_batch_size,
// gradient_accumulation_steps; TRL SFTConfig: max_seq_length; the deepspeed
// launcher's --num_gpus), not a "did you mean" of a similar spelling.
TEST(CliFlags, HfTrainerFlagsGetZeromemsFlag) {
    struct Case {
        const char* typed;
        const char* want;
    };
    for (const Case& c : {Case{"--bf16", "zeromem's is --dtype bf16"},
                          Case{"--per_device_train_batch_size 4", "zeromem's is --micro-batch"},
                          Case{"--gradient_accumulation_steps 4", "zeromem's is --grad-accum"},
                          Case{"--max-seq-length 2048", "zeromem's is --seq-len"},
                          Case{"--zero 3", "zeromem's is --stage"},
                          Case{"--num_gpus 8", "zeromem's is --gpus"}}) {
        const Outcome r = zeromem(std::string("estimate --model llama-2-7b --gpus 8 ") + c.typed);
        EXPECT_EQ(r.exit_code, 2) << c.typed;
        EXPECT_NE(r.err.find(c.want), std::string::npos) << c.typed << ": " << r.err;
        EXPECT_EQ(lines(r.err), 1u) << r.err;
    }
}

// The HF Trainer's --gradient_checkpointing is a boolean; zeromem's
// --gradient-checkpointing given alone means mode full, the same as writing it.
TEST(CliFlags, GradientCheckpointingAloneIsFull) {
    const std::string base = "estimate --model llama-2-7b --gpus 8 --stage 3 --format json";
    const Outcome alone = zeromem(base + " --gradient-checkpointing");
    const Outcome full = zeromem(base + " --gradient-checkpointing full");
    const Outcome last = zeromem("estimate --model llama-2-7b --gpus 8 --gradient-checkpointing --stage 3 --format json");
    ASSERT_EQ(alone.exit_code, 0) << alone.err;
    EXPECT_EQ(alone.out, full.out);
    EXPECT_EQ(last.out, full.out);
    EXPECT_NE(alone.out, zeromem(base).out);  // checkpointing changes the activations
}

// --gpu with the part alone names its one preset (data/gpus has one H100, the
// H100-80GB); a part with two sizes (A100-40GB, A100-80GB) is refused, listing both.
TEST(CliFlags, GpuPartAloneNamesItsOnlyPreset) {
    const std::string base = "estimate --model llama-2-7b --gpus 8 --stage 3 --format json --gpu ";
    const Outcome part = zeromem(base + "H100");
    ASSERT_EQ(part.exit_code, 0) << part.err;
    EXPECT_EQ(part.out, zeromem(base + "H100-80GB").out);
    const Outcome two = zeromem(base + "A100");
    EXPECT_EQ(two.exit_code, 2);
    EXPECT_NE(two.err.find("A100-40GB"), std::string::npos) << two.err;
    EXPECT_NE(two.err.find("A100-80GB"), std::string::npos) << two.err;
}

}  // namespace
