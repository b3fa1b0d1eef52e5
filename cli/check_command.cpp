// zeromem check CONFIG.json: see check_command.h.
#include "check_command.h"

#include "zeromem/config_check.h"
#include "zeromem/ds_config.h"
#include "zeromem/request.h"
#include "zeromem/util.h"

#include <iostream>

namespace zeromem_cli {

namespace {

const char* kCheckExamples = R"(
Examples:
  zeromem check ds_config.json                                   # as deepspeed.initialize reads it
  zeromem check ds_config.json --launcher hf-trainer --model llama-3-8b --gpus 8 --micro-batch 2
  zeromem check ds_config.json --deepspeed-version 0.14.2 --format json
  zeromem check ds_config.json --model llama-2-13b --gpus 8 --gpu A100-40GB --host-memory 512GiB --nvme-capacity 2TB

One line per finding: severity, JSON path, what is wrong, and the fix. Exit status 0 without errors,
1 with errors, 2 when the file or a flag cannot be read.
)";

void print_table(const std::vector<zeromem::Finding>& fs, const zeromem::CheckOptions& o, const std::string& path,
                 const std::string& version) {
    using namespace zeromem;
    for (const auto& f : fs) {
        std::cout << to_string(f.severity) << ": " << f.pointer << ": " << f.message;
        if (!f.fix.empty()) std::cout << " [fix: " << f.fix << "]";
        std::cout << "\n";
    }
    std::cout << path << ": " << count_findings(fs, Severity::error) << " error(s), "
              << count_findings(fs, Severity::warning) << " warning(s), " << count_findings(fs, Severity::note)
              << " note(s) for launcher " << to_string(o.launcher) << ", DeepSpeed " << version << "\n";
}

void print_json(const std::vector<zeromem::Finding>& fs, const zeromem::CheckOptions& o, const std::string& path,
                const std::string& version) {
    using namespace zeromem;
    nlohmann::json j;
    j["config"] = path;
    j["launcher"] = to_string(o.launcher);
    j["deepspeed_version"] = version;
    j["findings"] = nlohmann::json::array();
    for (const auto& f : fs)
        j["findings"].push_back({{"severity", to_string(f.severity)}, {"path", f.pointer}, {"message", f.message},
                                 {"fix", f.fix}});
    j["errors"] = count_findings(fs, Severity::error);
    j["warnings"] = count_findings(fs, Severity::warning);
    j["notes"] = count_findings(fs, Severity::note);
    std::cout << j.dump(2) << "\n";
}

}  // namespace

CLI::App* add_check_command(CLI::App& app, zeromem::Request& req, CheckFlags& f, bool with_options) {
    auto* chk = app.add_subcommand("check", "Check a DeepSpeed config: schema, launcher \"auto\" rules, version defaults, memory");
    chk->footer(kCheckExamples);
    if (!with_options) return chk;
    chk->add_option("config", f.config, "DeepSpeed config JSON")->required()->type_name("CONFIG.json");
    chk->add_option("--launcher", f.launcher, "deepspeed (default), hf-trainer or accelerate: who reads the file")
        ->group("Check")->type_name("NAME");
    chk->add_option_function<std::string>("--nvme-capacity", [&f](const std::string& v) { f.nvme_capacity = v; },
                                          "NVMe capacity per node, for the NVMe-pool finding (e.g. 2TB)")
        ->group("Check")->type_name("SIZE");
    chk->add_option("--format", f.format, "table (default) or json")->group("Output")->type_name("FORMAT");
    add_request_options(chk, req);
    return chk;
}

int run_check(zeromem::Request req, const CheckFlags& f, const std::string& dir) {
    using namespace zeromem;
    if (f.format != "table" && f.format != "json")
        throw InputError("--format: '" + f.format + "' is not table or json for check");
    if (req.ds_config) throw InputError("--ds-config: check takes the config as its argument, not --ds-config");
    CheckOptions o;
    o.launcher = parse_launcher(f.launcher, "--launcher");
    // --deepspeed-version is the request option every subcommand takes: the
    // rules and defaults of that release apply (default: newest known).
    o.deepspeed_version = req.deepspeed_version.value_or("");
    if (f.nvme_capacity) o.nvme_capacity = parse_bytes(*f.nvme_capacity, "--nvme-capacity");
    const nlohmann::json config = load_ds_config_file(f.config);  // InputError: unreadable (exit 2)

    o.autos.micro_batch = req.micro_batch;
    o.autos.grad_accum = req.grad_accum;
    if (req.dtype) o.autos.dtype = parse_dtype(*req.dtype, "--dtype");
    const bool model_given = req.params || req.model || req.hf_config;
    if (model_given) {
        const Resolved plain = resolve_request(req, dir);  // bad flags: InputError (exit 2)
        require_single_model(plain, "check");
        o.autos.world_size = plain.input.cluster.data_parallel();
        o.gpus_known = req.gpus.has_value();
        if (plain.input.model.arch) o.autos.hidden_size = plain.input.model.arch->hidden_size;
        req.ds_config = f.config;
        try {
            o.memory = resolve_request(req, dir).input;
        } catch (const InputError&) {
            // The config's own problems are findings, reported below.
        }
    } else if (req.gpus) {
        o.autos.world_size = *req.gpus;
        o.gpus_known = true;
    }
    const std::vector<Finding> fs = check_ds_config(config, o);
    const std::string newest = ds_schema().value("newest_version", std::string());
    const std::string version = o.deepspeed_version.empty() ? newest : o.deepspeed_version;
    if (f.format == "json") print_json(fs, o, f.config, version);
    else print_table(fs, o, f.config, version);
    return count_findings(fs, Severity::error) > 0 ? 1 : 0;
}

}  // namespace zeromem_cli
