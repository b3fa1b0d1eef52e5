// zeromem calibrate --log FILE ...: see calibrate_command.h.
#include "calibrate_command.h"
#include "options.h"

#include "zeromem/calibrate.h"
#include "zeromem/calibration_profile.h"
#include "zeromem/estimate.h"
#include "zeromem/request.h"
#include "zeromem/run_log.h"
#include "zeromem/sim_writers.h"
#include "zeromem/simulator.h"
#include "zeromem/types.h"

#include <fstream>
#include <iostream>
#include <optional>

namespace zeromem_cli {

namespace {

const char* kCalibrateExamples = R"(
Examples:
  zeromem calibrate --log train.log --model mistral-7b --gpus 2 --gpu A100-80GB --stage 3 --offload-optimizer cpu
  zeromem calibrate --log rank0.log --log nvidia-smi.csv --ds-config ds.json --model llama-2-7b --gpus 8 --format json

Reads, recognised by content: DeepSpeed see_memory_usage and ThroughputTimer lines, Megatron report_memory,
HF Trainer memory metrics, torch.cuda.memory_stats() JSON, memory_summary(), the CUDA out-of-memory message,
nvidia-smi --query-gpu=memory.used --format=csv, /usr/bin/time -v, zeromem measure JSON and the
torch.cuda.memory._dump_snapshot pickle (read without running it; its largest blocks are matched to the
estimate's components). Each reading is
matched to an estimate phase by its message and printed beside the estimate: GiB (2^30 bytes) in the table,
bytes in --format json. Exit status 0, or 2 when a log or flag cannot be read.
)";

// Whether the run's micro batch and sequence length were both given (a flag, the DeepSpeed config, --from),
// not the defaults: then the activations are the run's, and calibrate fits no scale on them.
bool activations_stated(const zeromem::Provenance& prov) {
    for (const char* k : {"train_micro_batch_size_per_gpu", "seq_len"}) {
        const auto it = prov.find(k);
        if (it == prov.end() || it->second.rfind("default", 0) == 0) return false;
    }
    return true;
}

}  // namespace

CLI::App* add_calibrate_command(CLI::App& app, zeromem::Request& req, CalibrateFlags& f, bool with_options) {
    auto* cal = app.add_subcommand("calibrate", "Hold a real run's memory readings (its logs) against the estimate, phase by phase");
    cal->footer(kCalibrateExamples);
    if (!with_options) return cal;
    cal->add_option("--log", f.logs, "A log or readings file of the run (repeatable)")
        ->required()->group("Calibrate")->type_name("FILE");
    cal->add_option("--output", f.output, "Write the calibration profile fitted from the logs (process baseline, "
                    "reserved share, and a factor on the activations when micro batch or sequence is not given; needs "
                    "--gpu) for `estimate --calibration`")->group("Output")->type_name("PROFILE.json");
    cal->add_option("--format", f.format, "table (default) or json")->group("Output")->type_name("FORMAT");
    add_verbose_flag(cal, f.verbose);
    add_request_options(cal, req);
    return cal;
}

int run_calibrate(const zeromem::Request& req, const CalibrateFlags& f, const std::string& dir) {
    using namespace zeromem;
    if (f.format != "table" && f.format != "json")
        throw InputError("--format: '" + f.format + "' is not table or json for calibrate");
    std::vector<RunLog> logs;
    for (const auto& path : f.logs) logs.push_back(read_run_log_file(path));  // InputError: exit 2
    Resolved res = resolve_request(req, dir);
    require_single_model(res, "calibrate");
    sim::use_replayed_fragmentation(res.input, req.fragmentation.has_value() || res.fragmentation_fitted);  // as estimate does
    if (res.input.convention != Convention::full)
        throw InputError("--convention: calibrate compares phases, which only the full convention has");
    const Estimate e = estimate(res.input);
    print_diagnostics(res.warnings, res.notes, f.verbose);
    const Calibration c = calibrate(logs, e, res.input, sim::snapshot_frame_component);
    std::optional<CalibrationProfile> profile;
    if (!f.output.empty() || !res.input.cluster.gpu_name.empty())
        profile = fit_calibration_profile(c, res.input, f.logs, activations_stated(res.provenance));  // no --gpu: InputError
    if (!f.output.empty()) {
        std::ofstream out(f.output);
        // the logs' names may hold any bytes: written as JSON with U+FFFD for what is not UTF-8
        out << calibration_profile_json(*profile).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        out.close();  // a full disk shows when the buffer is written out
        if (!out) throw InputError("--output: cannot write " + f.output);
    }
    if (f.format == "json") {
        nlohmann::json j = calibration_json(c);
        j["peak_phase"] = e.peak_phase;
        j["profile"] = profile ? calibration_profile_json(*profile) : nlohmann::json();
        std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";  // frames' names: any bytes
    } else {
        std::cout << render_calibration_table(c);
        if (!f.output.empty()) std::cout << "calibration profile written to " << f.output << "\n";
    }
    return 0;
}

}  // namespace zeromem_cli
