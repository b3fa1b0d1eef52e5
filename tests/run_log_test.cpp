// The run-log readers (zeromem/run_log.h) on public excerpts
// (tests/data/run_logs, sources in its README) and on instances of the
// printers' format strings. Expected bytes are the printed numbers times the
// printer's unit, written out here:
//  - see_memory_usage / ThroughputTimer "GB" = 2^30 bytes, round(x, 2), so a
//    printed 0.31 is 31 x 2^30 / 100 bytes, +-0.005 GiB; Max_CA round(x):
//    +-0.5 GiB (deepspeed/runtime/utils.py see_memory_usage, utils/timer.py).
//  - Megatron report_memory "MB" = 2^20 bytes, printed as a full Python float.
//  - Trainer "{v >> 20}MB": MiB floored, [v, v + 1) MiB; deltas from the start.
//  - the allocator's format_size: 2 decimals of KiB/MiB/GiB.
#include "zeromem/run_log.h"
#include "zeromem/types.h"

#include "input_error.h"

#include <gtest/gtest.h>

#include <string>

namespace {

using namespace zeromem;
using zeromem::testing::contains;
using zeromem::testing::error_of;

constexpr int64_t kMiB = int64_t(1) << 20;
constexpr int64_t kGiB = int64_t(1) << 30;

// A printed GiB figure with two decimals, `hundredths` / 100 GiB, to the nearest byte.
int64_t gib_h(int64_t hundredths) { return (hundredths * kGiB + 50) / 100; }

std::string data(const std::string& name) { return std::string(ZEROMEM_TEST_DATA_DIR) + "/run_logs/" + name; }

RunLog read_file(const std::string& name) { return read_run_log_file(data(name)); }

// allocated, max_allocated, reserved as printed with two decimals; Max_CA whole GiB.
void expect_ma_line(const MemoryObservation& o, int64_t ma, int64_t max_ma, int64_t ca, int64_t max_ca_gib) {
    ASSERT_TRUE(o.allocated && o.max_allocated && o.reserved && o.max_reserved);
    EXPECT_EQ(o.allocated->bytes, gib_h(ma));
    EXPECT_EQ(o.max_allocated->bytes, gib_h(max_ma));
    EXPECT_EQ(o.reserved->bytes, gib_h(ca));
    EXPECT_EQ(o.max_reserved->bytes, max_ca_gib * kGiB);
}

TEST(RunLogSeeMemoryUsage, MistralZero3StepReadsEveryPhaseWithItsMessage) {
    const RunLog log = read_file("L09_ds_see_memory_usage_mistral7b_zero3_step.log");
    ASSERT_EQ(log.formats, std::vector<LogFormat>{LogFormat::ds_see_memory_usage});
    ASSERT_EQ(log.observations.size(), 6u);
    const char* messages[] = {"Engine before forward", "Engine after forward", "Engine before backward",
                              "Engine after backward", "Engine before step",   "Engine after step"};
    const std::size_t lines[] = {2, 5, 8, 11, 14, 18};  // the MA lines (line 16 is a log_dist timing line)
    for (std::size_t k = 0; k < 6; ++k) {
        EXPECT_EQ(log.observations[k].message, messages[k]);
        EXPECT_EQ(log.observations[k].line, lines[k]);
        EXPECT_EQ(log.observations[k].peak_window, PeakWindow::since_previous);
    }
    // "MA 61.23 GB  Max_MA 61.48 GB  CA 61.83 GB  Max_CA 62 GB", "used = 150.09 GB"
    expect_ma_line(log.observations[1], 6123, 6148, 6183, 62);
    EXPECT_EQ(log.observations[1].host->bytes, gib_h(15009));
    EXPECT_EQ(log.observations[1].host_scope, HostScope::node);
    // "MA 21.58 GB  Max_MA 62.2 GB  CA 65.09 GB  Max_CA 65 GB": Max_MA is the
    // backward's own peak (the counter was reset after "Engine before backward").
    expect_ma_line(log.observations[3], 2158, 6220, 6509, 65);
    EXPECT_EQ(log.observations[3].host->bytes, gib_h(15021));
}

TEST(RunLogSeeMemoryUsage, RangesFollowTheRounding) {
    const RunLog log = read_file("L09_ds_see_memory_usage_mistral7b_zero3_step.log");
    const MemoryObservation& o = log.observations[1];
    // round(x, 2): +-0.005 GiB = +-2^30/200 bytes
    EXPECT_EQ(o.allocated->low, (6123 * kGiB - kGiB / 2 + 50) / 100);
    EXPECT_EQ(o.allocated->high, (6123 * kGiB + kGiB / 2 + 50) / 100);
    // Max_CA round(x): 62 GiB means [61.5, 62.5] GiB
    EXPECT_EQ(o.max_reserved->low, 62 * kGiB - kGiB / 2);
    EXPECT_EQ(o.max_reserved->high, 62 * kGiB + kGiB / 2);
}

TEST(RunLogSeeMemoryUsage, OneDecimalPrintIsStillRoundedToHundredths) {
    // L11 prints "Max_MA 1.0 GB": Python's round(x, 2) dropped a trailing zero,
    // the value is 1.00 +- 0.005 GiB, not +- 0.05.
    const RunLog log = read_file("L11_ds_see_memory_usage_zero0_2080ti.log");
    ASSERT_EQ(log.observations.size(), 3u);
    EXPECT_EQ(log.observations[0].message, "before forward 6");
    EXPECT_EQ(log.observations[0].line, 6u);
    expect_ma_line(log.observations[0], 81, 124, 206, 2);
    EXPECT_EQ(log.observations[0].host->bytes, gib_h(509));
    const Reading& max_ma = *log.observations[1].max_allocated;
    EXPECT_EQ(max_ma.bytes, kGiB);
    EXPECT_EQ(max_ma.high - max_ma.low, kGiB / 100);
    EXPECT_EQ(log.observations[2].message, "before optimizer 6");
}

TEST(RunLogSeeMemoryUsage, ExcerptStartingAtAReadingHasNoMessage) {
    const RunLog log = read_file("L07_ds_see_memory_usage_zero3_optimizer_init.log");
    ASSERT_EQ(log.observations.size(), 4u);
    EXPECT_EQ(log.observations[0].message, "");
    EXPECT_EQ(log.observations[0].host->bytes, gib_h(20019));
    EXPECT_EQ(log.observations[1].message, "Before initializing optimizer states");
    EXPECT_EQ(log.observations[2].message, "After initializing optimizer states");
    EXPECT_EQ(log.observations[3].message, "After initializing ZeRO optimizer");
    EXPECT_EQ(log.observations[3].line, 11u);  // line 9 (stage3.py) is not a reading
    expect_ma_line(log.observations[3], 41, 41, 1310, 13);
    EXPECT_FALSE(log.observations[3].host);  // the excerpt is cut after the MA line
}

TEST(RunLogSeeMemoryUsage, StageThreeInitTraceAmongOtherLoggers) {
    const RunLog log = read_file("L30_ds_see_memory_usage_qwen1.5b_zero3_init.log");
    ASSERT_EQ(log.observations.size(), 10u);
    EXPECT_EQ(log.observations[0].message, "Stage 3 initialize beginning");
    expect_ma_line(log.observations[0], 72, 202, 73, 2);
    EXPECT_EQ(log.observations[6].message, "After creating fp32 partitions");
    expect_ma_line(log.observations[6], 216, 288, 289, 3);
    EXPECT_EQ(log.observations[9].message, "After initializing ZeRO optimizer");
    expect_ma_line(log.observations[9], 288, 375, 432, 4);
    EXPECT_EQ(log.observations[9].host->bytes, gib_h(6390));
}

TEST(RunLogSeeMemoryUsage, PeakSinceThePreviousCallAndAZeroMaxCa) {
    // L06: Max_MA 12.99 GB at "initialize [end]" although MA is 0.31 GB: the
    // peak of the stretch since the previous call.
    const RunLog l06 = read_file("L06_ds_see_memory_usage_zero3_offload_init.log");
    EXPECT_EQ(l06.observations[0].message, "DeepSpeedZeRoOffload initialize [end]");
    expect_ma_line(l06.observations[0], 31, 1299, 1301, 13);
    EXPECT_EQ(l06.observations[2].message, "After creating fp16 partitions: 1");
    // L15: "Max_CA 0 GB" (reset just before, under half a GiB): [0, 0.5] GiB.
    const RunLog l15 = read_file("L15_ds_see_memory_usage_zero3_lora_init.log");
    ASSERT_EQ(l15.observations.size(), 2u);
    const Reading& max_ca = *l15.observations[1].max_reserved;
    EXPECT_EQ(max_ca.bytes, 0);
    EXPECT_EQ(max_ca.low, 0);
    EXPECT_EQ(max_ca.high, kGiB / 2);
}

TEST(RunLogThroughputTimer, MemAllocatedIsGiB) {
    const RunLog log = read_file("L04_ds_throughput_timer_megatron_polaris.log");
    ASSERT_EQ(log.observations.size(), 2u);
    EXPECT_EQ(log.observations[0].format, LogFormat::ds_throughput_timer);
    EXPECT_EQ(log.observations[0].message, "global_step=199");
    EXPECT_EQ(log.observations[0].line, 1u);
    EXPECT_EQ(log.observations[0].allocated->bytes, gib_h(601));
    EXPECT_EQ(log.observations[0].max_allocated->bytes, gib_h(1952));
    EXPECT_EQ(log.observations[0].peak_window, PeakWindow::since_start);
    EXPECT_EQ(log.observations[1].message, "global_step=200");
    EXPECT_EQ(log.observations[1].line, 4u);
}

TEST(RunLogMegatron, ReportMemoryIsMiBExactToTheByte) {
    // megatron/utils.py report_memory('(after 10 iterations)'), values of L19's run
    const std::string text =
        "[Rank 0] (after 10 iterations) memory (MB) | allocated: 4162.8798828125 | max allocated: 18706.662109375 | "
        "reserved: 23816.0 | max reserved: 23816.0\n";
    const RunLog log = read_run_log(text, "m.log");
    ASSERT_EQ(log.observations.size(), 1u);
    const MemoryObservation& o = log.observations[0];
    EXPECT_EQ(o.format, LogFormat::megatron_report_memory);
    EXPECT_EQ(o.message, "(after 10 iterations)");
    EXPECT_EQ(o.rank, 0);
    EXPECT_EQ(o.allocated->bytes, 4365095936);       // 4162.8798828125 x 2^20
    EXPECT_EQ(o.max_allocated->bytes, 19615356928);  // 18706.662109375 x 2^20
    EXPECT_EQ(o.reserved->bytes, 23816 * kMiB);
    EXPECT_EQ(o.max_reserved->bytes, 23816 * kMiB);
    EXPECT_EQ(o.allocated->low, o.allocated->high);
}

TEST(RunLogTrainer, DeltasFromTheStartInFlooredMiB) {
    const RunLog log = read_file("L18_hf_trainer_memory_metrics_zero2_zero3.log");
    ASSERT_EQ(log.observations.size(), 2u);  // "# zero 2" and "# zero 3" blocks
    const MemoryObservation& z2 = log.observations[0];
    EXPECT_EQ(z2.message, "train");
    EXPECT_EQ(z2.line, 2u);
    EXPECT_EQ(z2.baseline, Baseline::since_start);
    EXPECT_EQ(z2.allocated->bytes, 1635 * kMiB);
    EXPECT_EQ(z2.allocated->high, 1636 * kMiB);  // v >> 20 floors
    EXPECT_EQ(z2.max_allocated->bytes, (1635 + 8862) * kMiB);  // alloc_delta + peaked_delta
    EXPECT_EQ(z2.host->bytes, 4429 * kMiB);
    EXPECT_EQ(z2.max_host->bytes, (4429 + 2950) * kMiB);
    EXPECT_EQ(z2.host_scope, HostScope::process);
    const MemoryObservation& z3 = log.observations[1];
    EXPECT_EQ(z3.line, 8u);
    EXPECT_EQ(z3.allocated->bytes, -399 * kMiB);  // ZeRO-3 partitioning freed more than training added
    EXPECT_EQ(z3.allocated->high, -398 * kMiB);
    EXPECT_EQ(z3.max_allocated->bytes, (10352 - 399) * kMiB);
}

TEST(RunLogTrainer, ResultsJsonHoldsBytes) {
    const std::string text = "{\n  \"epoch\": 1.0,\n  \"train_mem_gpu_alloc_delta\": 1714421760,\n"
                             "  \"train_mem_gpu_peaked_delta\": 9292480512\n}\n";
    const RunLog log = read_run_log(text, "all_results.json");
    ASSERT_EQ(log.observations.size(), 1u);
    EXPECT_EQ(log.observations[0].allocated->bytes, 1714421760);
    EXPECT_EQ(log.observations[0].max_allocated->bytes, 1714421760 + 9292480512);
    EXPECT_EQ(log.observations[0].line, 3u);
}

TEST(RunLogOom, OldMessageGivesAllocatedReservedAndDeviceUse) {
    const RunLog log = read_file("L22_torch_oom_message_v100_zero2.log");
    ASSERT_EQ(log.observations.size(), 1u);
    const MemoryObservation& o = log.observations[0];
    EXPECT_EQ(o.format, LogFormat::torch_oom_message);
    EXPECT_EQ(o.line, 2u);
    EXPECT_EQ(o.message, "out of memory on GPU 5");
    // "Tried to allocate 3.14 GiB (GPU 5; 31.75 GiB total capacity; 28.28 GiB
    // already allocated; 1.95 GiB free; 28.28 GiB reserved in total by PyTorch)"
    EXPECT_EQ(o.requested->bytes, gib_h(314));
    EXPECT_EQ(o.device_total->bytes, gib_h(3175));
    EXPECT_EQ(o.allocated->bytes, gib_h(2828));
    EXPECT_EQ(o.reserved->bytes, gib_h(2828));
    EXPECT_EQ(o.device_used->bytes, gib_h(3175) - gib_h(195));
}

TEST(RunLogOom, NewMessageAddsUnallocatedToReserved) {
    // c10/cuda/CUDACachingAllocator.cpp (torch >= 2.1) wording
    const std::string text =
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
        "79.15 GiB of which 3.06 MiB is free. Process 2384612 has 79.14 GiB memory in use. Of the allocated memory "
        "77.52 GiB is allocated by PyTorch, and 1.12 GiB is reserved by PyTorch but unallocated. If reserved but "
        "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
        "fragmentation.\n";
    const RunLog log = read_run_log(text, "oom.log");
    ASSERT_EQ(log.observations.size(), 1u);
    const MemoryObservation& o = log.observations[0];
    EXPECT_EQ(o.requested->bytes, 20 * kMiB);
    EXPECT_EQ(o.device_total->bytes, gib_h(7915));
    EXPECT_EQ(o.device_used->bytes, gib_h(7915) - (306 * kMiB + 50) / 100);
    EXPECT_EQ(o.allocated->bytes, gib_h(7752));
    EXPECT_EQ(o.reserved->bytes, gib_h(7752) + gib_h(112));
}

TEST(RunLogTorch, MemoryStatsJsonIsExact) {
    const std::string text = R"({"active.all.current": 7, "allocated_bytes.all.current": 4365095936,
      "allocated_bytes.all.peak": 19615356928, "reserved_bytes.all.current": 24972886016,
      "reserved_bytes.all.peak": 24972886016})";
    const RunLog log = read_run_log(text, "stats.json");
    ASSERT_EQ(log.observations.size(), 1u);
    EXPECT_EQ(log.observations[0].format, LogFormat::torch_memory_stats);
    EXPECT_EQ(log.observations[0].allocated->bytes, 4365095936);
    EXPECT_EQ(log.observations[0].max_allocated->bytes, 19615356928);
    EXPECT_EQ(log.observations[0].max_reserved->bytes, 24972886016);
}

TEST(RunLogTorch, MemorySummaryFloorsToItsUnit) {
    // torch/cuda/memory.py memory_summary rows: _format_size floors to whole units
    const std::string text =
        "|===========================================================================|\n"
        "|                  PyTorch CUDA memory summary, device ID 0                 |\n"
        "|---------------------------------------------------------------------------|\n"
        "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n"
        "|---------------------------------------------------------------------------|\n"
        "| Allocated memory      |   4162 MiB |  18706 MiB |  99999 GiB |  99995 GiB |\n"
        "|       from large pool |   4100 MiB |  18600 MiB |  99000 GiB |  98996 GiB |\n"
        "|---------------------------------------------------------------------------|\n"
        "| GPU reserved memory   |  23816 MiB |  23816 MiB |  23816 MiB |      0 B   |\n";
    const RunLog log = read_run_log(text, "summary.txt");
    ASSERT_EQ(log.observations.size(), 1u);
    const MemoryObservation& o = log.observations[0];
    EXPECT_EQ(o.message, "memory_summary device ID 0");
    EXPECT_EQ(o.line, 6u);
    EXPECT_EQ(o.allocated->bytes, 4162 * kMiB);
    EXPECT_EQ(o.allocated->high, 4163 * kMiB);
    EXPECT_EQ(o.max_allocated->bytes, 18706 * kMiB);
    EXPECT_EQ(o.reserved->bytes, 23816 * kMiB);
}

TEST(RunLogSystem, NvidiaSmiAndGnuTime) {
    const RunLog smi = read_run_log("index, memory.used [MiB], memory.total [MiB]\n0, 72714 MiB, 81920 MiB\n"
                                    "1, 1234 MiB, 81920 MiB\n", "smi.csv");
    ASSERT_EQ(smi.observations.size(), 2u);
    EXPECT_EQ(smi.observations[0].message, "GPU 0");
    EXPECT_EQ(smi.observations[0].device_used->bytes, 72714 * kMiB);
    EXPECT_EQ(smi.observations[1].device_total->bytes, 81920 * kMiB);
    const RunLog tv = read_run_log("\tCommand being timed: \"python train.py\"\n\tUser time (seconds): 1.5\n"
                                   "\tMaximum resident set size (kbytes): 67890123\n", "time.txt");
    ASSERT_EQ(tv.observations.size(), 1u);
    EXPECT_EQ(tv.observations[0].message, "\"python train.py\"");
    EXPECT_EQ(tv.observations[0].max_host->bytes, 67890123LL * 1024);
    EXPECT_EQ(tv.observations[0].host_scope, HostScope::process);
}

// nvidia-smi -l (a monitoring log): each GPU's highest sample is its reading, at that sample's line.
TEST(RunLogSystem, NvidiaSmiMonitoringLogKeepsEachGpusHighestSample) {
    const RunLog smi = read_run_log("index, memory.used [MiB]\n0, 1000 MiB\n1, 500 MiB\n0, 72714 MiB\n1, 600 MiB\n"
                                    "0, 72000 MiB\n1, 550 MiB\n", "smi.csv");
    ASSERT_EQ(smi.observations.size(), 2u);
    EXPECT_EQ(smi.observations[0].message, "GPU 0 (highest of 3 samples)");
    EXPECT_EQ(smi.observations[0].line, 4u);
    EXPECT_EQ(smi.observations[0].device_used->bytes, 72714 * kMiB);
    EXPECT_EQ(smi.observations[1].message, "GPU 1 (highest of 3 samples)");
    EXPECT_EQ(smi.observations[1].line, 5u);
    EXPECT_EQ(smi.observations[1].device_used->bytes, 600 * kMiB);
}

TEST(RunLogSystem, ZeromemMeasureJsonPhases) {
    // runtime/src/measure.cpp PhaseClock::end: peak_bytes / end_bytes {device: {..., total}}, host_rss_peak
    const std::string text = R"({"backend": "host", "world_size": 2, "ranks": [
      {"rank": 1, "phases": [{"name": "forward", "step": 0, "peak_bytes": {"device": {"total": 3000}},
                              "end_bytes": {"device": {"total": 2000}}, "host_rss_peak": 5000}]}]})";
    const RunLog log = read_run_log(text, "m.json");
    ASSERT_EQ(log.observations.size(), 1u);
    const MemoryObservation& o = log.observations[0];
    EXPECT_EQ(o.format, LogFormat::zeromem_measure);
    EXPECT_EQ(o.message, "forward");
    EXPECT_EQ(o.rank, 1);
    EXPECT_EQ(o.max_allocated->bytes, 3000);
    EXPECT_EQ(o.allocated->bytes, 2000);
    EXPECT_EQ(o.max_host->bytes, 5000);
    const std::string e = error_of([] { (void)read_run_log(R"({"backend": "host", "ranks": [{"rank": 0}]})", "m.json"); });
    EXPECT_TRUE(contains(e, "m.json:1: zeromem measure: a rank without a 'phases' list")) << e;
}

TEST(RunLogSystem, NvidiaSmiWordsInsideAnotherCellAreNoHeader) {
    // found by fuzz_run_log: "memory.used [MiB]" not at the start of a cell
    const std::string e = error_of([] { (void)read_run_log("x memory.used [MiB]\n0\n", "smi.csv"); });
    EXPECT_TRUE(contains(e, "no memory reading recognised")) << e;
}

// Malformed or cut-off readings: one line naming the file and the line.
TEST(RunLogErrors, CutOffReadingsNameFileAndLine) {
    struct Case {
        const char* text;
        const char* where;
        const char* what;
    } cases[] = {
        {"[x] [INFO] [utils.py:802:see_memory_usage] before forward\n"
         "[x] [INFO] [utils.py:803:see_memory_usage] MA 0.31 GB         Max_MA 12.99\n",
         "bad.log:2: see_memory_usage:", "Max_MA"},
        {"[x] [INFO] [utils.py:803:see_memory_usage] MA 0.31 GB Max_MA 0.31 GB CA 1 GB Max_CA 1 GB\n"
         "[x] [INFO] [utils.py:810:see_memory_usage] CPU Virtual Memory:  used = \n",
         "bad.log:2: see_memory_usage:", "used ="},
        {"epoch=0/micro_step=1/global_step=1, MemAllocated=6.01GB, MaxMemAll\n", "bad.log:1: ThroughputTimer:",
         "MaxMemAllocated"},
        {"\n[Rank 0] (after 10 iterations) memory (MB) | allocated: 4162.8 | max allocated: 18706.66\n",
         "bad.log:2: report_memory:", "reserved"},
        {"RuntimeError: CUDA out of memory. Tried to allocate 3.14 GiB (GPU 5; 31.75 GiB total capa\n",
         "bad.log:1: CUDA out of memory:", "cut off"},
        {"  train_mem_gpu_alloc_delta  =\n", "bad.log:1: Trainer memory metrics:", "whole number"},
        // log_metrics prints "<n>MB" after "=" (transformers metrics_format): a bare number there is a cut-off line
        {"  train_mem_cpu_alloc_delta  =     4429MB\n  train_mem_gpu_alloc_delta  =     16", "bad.log:2: Trainer memory metrics:",
         "has no 'MB'"},
        {"index, memory.used [MiB]\n0, 72x14 MiB\n", "bad.log:2: nvidia-smi:", "MiB"},
        // a table written with units (--format=csv) whose last cell lost its unit: cut off
        {"index, memory.used [MiB]\n0, 72714 MiB\n1, 7271", "bad.log:3: nvidia-smi:", "has no 'MiB'"},
        // a see_memory_usage CPU line cut inside its tag
        {"[x] [INFO] [utils.py:803:see_memory_usage] MA 0.31 GB Max_MA 0.31 GB CA 1 GB Max_CA 1 GB\n"
         "[x] [INFO] [utils.py:810:see_memory_usage] CPU V\n",
         "bad.log:2: see_memory_usage:", "the start of 'CPU Virtual Memory"},
        {"{\"allocated_bytes.all.current\": -5}", "bad.log:1: torch.cuda.memory_stats:", "is negative"},
        // readings no printer prints (found by a tester: each was fitted into a profile)
        {"[Rank 0] (after 10 iterations) memory (MB) | allocated: -5000.0 | max allocated: 1.0 | reserved: 2.0 | "
         "max reserved: 2.0\n", "bad.log:1: report_memory:", "the allocated figure is negative"},
        {"index, memory.used [MiB], memory.total [MiB]\n0, 90000 MiB, 81920 MiB\n", "bad.log:2: nvidia-smi:",
         "more is in use than the device holds"},
        {"[x] [INFO] [utils.py:803:see_memory_usage] MA 2.5 GB Max_MA 1 GB CA 3 GB Max_CA 3 GB\n",
         "bad.log:1: see_memory_usage:", "the peak allocated is below the allocated figure"},
        {"{\"allocated_bytes.all.current\": 12,\n \"allocated_bytes.all.peak\": 1", "bad.log:2:", "cut-off JSON"},
        {"{\"allocated_bytes.all.current\": 12,\n \"allocated_bytes.all.peak\": \"x\"}", "bad.log:2: torch.cuda.memory_stats:",
         "'allocated_bytes.all.peak' is not a whole number"},
        {"{\"backend\": \"host\",\n \"ranks\": [{\"rank\": 0, \"phases\": [\n  {\"name\": \"load\"},\n  {\"name\": \"forward\",\n"
         "   \"peak_bytes\": {\"device\": {\"total\": -5}}}]}]}",
         "bad.log:5: zeromem measure:", "'total' is negative"},
        {"{\"backend\": \"host\",\n \"ranks\": [{\"rank\": 0, \"phases\": [\n  {\"name\": \"load\"},\n  {\"name\": 3}]}]}",
         "bad.log:4: zeromem measure:", "a phase without a 'name'"},
        {"|   PyTorch CUDA memory summary, device ID 0   |\n| Allocated memory |  4162 MiB |  18706 MiB |\n",
         "bad.log:1: torch.cuda.memory_summary:", "cut off"},
        {"\tMaximum resident set size (kbytes): 12.5\n", "bad.log:1: /usr/bin/time -v:", "kbytes"},
        {"[x] [INFO] [utils.py:803:see_memory_usage] MA -20.83 GB Max_MA 0.31 GB CA 1 GB Max_CA 1 GB\n",
         "bad.log:1: see_memory_usage:", "negative"},
        // TrainerMemoryTracker.update_metrics sets alloc_delta and peaked_delta together; a peak without its
        // alloc_delta (peak - end, with no end) is a cut-off block, not a reading (found by a tester: dropped)
        {"  train_mem_cpu_alloc_delta  =     4429MB\n  train_mem_gpu_peaked_delta =     16MB\n",
         "bad.log:1: Trainer memory metrics:", "'train_mem_gpu_peaked_delta' without 'train_mem_gpu_alloc_delta'"},
    };
    for (const auto& c : cases) {
        const std::string e = error_of([&] { (void)read_run_log(c.text, "bad.log"); });
        EXPECT_TRUE(contains(e, c.where) && contains(e, c.what)) << c.text << "\n -> " << e;
        EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    }
}

// Written as an editor or a terminal leaves them (found by a tester): a UTF-8 byte-order mark before a
// memory_stats JSON, a tab between see_memory_usage's "MA" and its number.
TEST(RunLogTorch, ByteOrderMarkAndTabsAreRead) {
    const RunLog j = read_run_log("\xEF\xBB\xBF{\"allocated_bytes.all.current\": 1024,\n\"reserved_bytes.all.current\": 2048}",
                                  "stats.json");
    ASSERT_EQ(j.observations.size(), 1u);
    EXPECT_EQ(j.observations[0].allocated->bytes, 1024);
    EXPECT_EQ(j.observations[0].reserved->bytes, 2048);
    const RunLog t = read_run_log("[x] [INFO] [utils.py:803:see_memory_usage] MA\t0.31 GB\tMax_MA 0.5 GB CA 1 GB Max_CA 1 GB\n",
                                  "tab.log");
    ASSERT_EQ(t.observations.size(), 1u);
    EXPECT_EQ(t.observations[0].allocated->bytes, gib_h(31));
    EXPECT_EQ(t.observations[0].max_allocated->bytes, gib_h(50));
}

// A file gives at most kMaxReadings readings: the next is refused at its line, so no log (one 63 MB line of
// Trainer metrics, found by a tester, took over 15 GB) holds more than that in memory.
TEST(RunLogErrors, ReadingsPerFileAreBounded) {
    std::string lines;
    for (std::size_t k = 1; k <= kMaxReadings; ++k)
        lines += "[Rank 0] (after " + std::to_string(k) + " iterations) memory (MB) | allocated: 1.0 | max allocated: "
                 "2.0 | reserved: 4.0 | max reserved: 4.0\n";
    EXPECT_EQ(read_run_log(lines, "long.log").observations.size(), kMaxReadings);
    lines += "[Rank 0] (after 0 iterations) memory (MB) | allocated: 1.0 | max allocated: 2.0 | reserved: 4.0 | max reserved: 4.0\n";
    const std::string e = error_of([&] { (void)read_run_log(lines, "long.log"); });
    EXPECT_TRUE(contains(e, "long.log:" + std::to_string(kMaxReadings + 1) + ": report_memory: more than 50000 memory readings")) << e;
    std::string one_line;
    for (std::size_t k = 0; k <= kMaxReadings; ++k) one_line += "train_mem_gpu_alloc_delta: 1 ";
    const std::string t = error_of([&] { (void)read_run_log(one_line, "one.log"); });
    EXPECT_TRUE(contains(t, "one.log:1: Trainer memory metrics: more than 50000 memory readings")) << t;
}

TEST(RunLogErrors, TextWithoutReadingsIsAnError) {
    const std::string e = error_of([] { (void)read_run_log("loss 1.0\nloss 0.9\n", "train.log"); });
    EXPECT_TRUE(contains(e, "train.log: no memory reading recognised")) << e;
    const std::string missing = error_of([] { (void)read_run_log_file("/nonexistent/run.log"); });
    EXPECT_TRUE(contains(missing, "/nonexistent/run.log")) << missing;
    EXPECT_EQ(error_of([] { (void)read_run_log_file(""); }), "no file name given for the training log (--log) (an empty path)");
    // A file name with a newline stays one line (InputError escapes control bytes).
    const std::string odd = error_of([] { (void)read_run_log("loss 1.0\n", "we\nird.log"); });
    EXPECT_TRUE(contains(odd, "we\\x0aird.log: no memory reading recognised")) << odd;
}

}  // namespace
