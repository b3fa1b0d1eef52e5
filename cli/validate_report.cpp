// `zeromem validate` without MPI (see validate_report.h): reading a saved
// measurement, checking it matches the inputs, and the comparison table.
// Linked into the lean zeromem, which runs `validate --measurement` itself,
// and into zeromem-measure.
#include "validate_report.h"

#include "measurement_compare.h"
#include "zeromem/util.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace zeromem_cli {

namespace {

// Reads a `zeromem measure --output` file. Errors: InputError naming
// --measurement and the file for a missing file, a directory, an empty file,
// text that is not JSON, or a field of the measure result that is missing or
// of the wrong type, named by its JSON pointer (measurement_compare.h check_measurement).
json load_measurement(const std::string& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const std::string at = "--measurement: " + path;
    const char* expected = " (expected the JSON written by zeromem measure --output)";
    if (!fs::exists(path, ec)) throw zeromem::InputError(at + ": no such file");
    if (fs::is_directory(path, ec)) throw zeromem::InputError(at + " is a directory" + expected);
    std::ifstream in(path);
    if (!in) throw zeromem::InputError(at + ": cannot read");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) throw zeromem::InputError(at + " is empty" + expected);
    json m;
    try {
        m = json::parse(text);
    } catch (const json::parse_error& e) {
        throw zeromem::InputError(at + " is not valid JSON (at byte " + std::to_string(e.byte) + ")" + expected);
    }
    check_measurement(m, at);  // names the first bad field by its JSON pointer
    return m;
}

// Refuses a measurement of another run than the inputs describe: model,
// layers, ZeRO stage, ranks, micro batch, gradient accumulation steps,
// sequence length and dtype, as the measure JSON records them.
void check_measurement_matches(const json& m, const zeromem::EstimateInput& in, const std::string& path) {
    std::string diffs;
    auto differ = [&](const std::string& what, const json& obj, const char* key, const json& given) {
        const json recorded = obj.contains(key) ? obj[key] : json();
        if (recorded == given) return;
        diffs += (diffs.empty() ? "" : "; ") + what + " " + recorded.dump() + " in the file, " + given.dump() +
                 " in the inputs";
    };
    const json& mm = m["model"];
    const json& st = m["settings"];
    differ("model", mm, "name", in.model.name);
    differ("layers (--layers)", mm, "layers", in.model.arch ? in.model.arch->num_layers : int64_t{0});
    differ("zero_optimization.stage", st, "zero_optimization.stage", in.zero.stage);
    differ("ranks (--gpus)", m, "world_size", in.cluster.gpus);
    differ("train_micro_batch_size_per_gpu", st, "train_micro_batch_size_per_gpu", in.train.micro_batch);
    differ("gradient_accumulation_steps", st, "gradient_accumulation_steps", in.train.grad_accum);
    differ("seq_len", st, "seq_len", in.train.seq_len);
    differ("dtype", st, "dtype", zeromem::to_string(in.train.dtype));
    if (!diffs.empty())
        throw zeromem::InputError("--measurement: " + path + " does not match the inputs: " + diffs);
}

}  // namespace

std::string gib4(uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", double(b) / 1073741824.0);
    return buf;
}

zeromem::Resolved resolve_runtime_request(const zeromem::Request& req, const MeasureFlags& f, const std::string& dir,
                                          bool print_warnings) {
    if (req.module_tree)  // the runtime builds its model from the architecture, not from the tree
        throw zeromem::InputError("--module-tree: measure and validate build their model from the architecture "
                                  "(--model or --hf-config); the tree's model is not built");
    zeromem::Resolved res = zeromem::resolve_request(req, dir);
    zeromem::require_single_model(res, "measure");
    if (f.layers > 0) {  // the estimate of the K-layer model the runtime builds
        res.input.model.arch = zeromem::runtime::runtime_arch(res.input, f.layers);
        const zeromem::ParamCount pc = zeromem::count_params(*res.input.model.arch);
        res.input.model.params = pc.total;
        res.input.model.largest_layer_params = pc.largest_module;
    }
    if (print_warnings)
        for (const auto& w : res.warnings) std::cerr << "zeromem: warning: " << w << "\n";
    return res;
}

void check_validate_flags(const MeasureFlags& f) {
    if (f.format != "table" && f.format != "json") throw zeromem::InputError("--format: use table or json");
    if (!(f.tolerance >= 0)) throw zeromem::InputError("--tolerance: must be a fraction >= 0");
}

int report_validation(const zeromem::EstimateInput& in, const json& m, const MeasureFlags& f) {
    const bool from_file = !f.measurement.empty();
    const zeromem::Estimate e = zeromem::estimate(in);
    json cmp;
    try {
        cmp = compare_with_estimate(e, in, m, f.tolerance);
    } catch (const json::exception& ex) {
        if (!from_file) throw;
        throw zeromem::InputError("--measurement: " + f.measurement + " is not a measure result: " + ex.what());
    }
    json out = cmp;
    out["oom"] = m.value("oom", false);
    if (f.format == "json") {
        std::cout << out.dump(2) << "\n";
    } else {
        std::printf("zeromem validate: full-convention estimate vs measurement (max over %zu ranks); GiB = 2^30 bytes\n",
                    m["ranks"].size());
        std::printf("%-18s %-16s %12s %12s %9s\n", "component", "phase", "estimated", "measured", "error");
        for (const auto& c : cmp["components"])
            std::printf("%-18s %-16s %12s %12s %8.2f%%%s\n", c["name"].get<std::string>().c_str(),
                        c["phase"].get<std::string>().c_str(), gib4(c["estimated"]).c_str(),
                        gib4(c["measured"]).c_str(), 100.0 * c["rel_error"].get<double>(),
                        std::abs(c["rel_error"].get<double>()) > f.tolerance ? "  FAIL" : "");
        std::printf("%s (tolerance %.1f%%)\n", cmp["pass"].get<bool>() ? "PASS" : "FAIL", 100.0 * f.tolerance);
    }
    return cmp["pass"].get<bool>() && !m.value("oom", false) ? 0 : 1;
}

int run_validate_file(const zeromem::Request& req_in, const MeasureFlags& f, const std::string& dir) {
    restore_stderr();
    check_validate_flags(f);
    const json m = load_measurement(f.measurement);
    zeromem::Request req = req_in;
    if (!req.gpus && m["world_size"].is_number_integer()) req.gpus = m["world_size"].get<int64_t>();
    zeromem::Resolved res = resolve_runtime_request(req, f, dir, true);
    res.input.convention = zeromem::Convention::full;
    check_measurement_matches(m, res.input, f.measurement);
    return report_validation(res.input, m, f);
}

}  // namespace zeromem_cli
