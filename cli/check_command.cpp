// zeromem check CONFIG.json: see check_command.h.
#include "check_command.h"

#include "zeromem/simulator.h"

#include "tabular_output.h"

#include "zeromem/config_check.h"
#include "zeromem/ds_config.h"
#include "zeromem/request.h"
#include "zeromem/util.h"

#include <iostream>
#include <map>

namespace zeromem_cli {

namespace {

const char* kCheckExamples = R"(
Examples:
  zeromem check ds_config.json                                   # "auto" values: as the HF Trainer reads it, else deepspeed.initialize
  zeromem check ds_config.json --launcher deepspeed              # a script that passes the file to deepspeed.initialize itself
  zeromem check ds_config.json --launcher hf-trainer --model llama-3-8b --gpus 8 --micro-batch 2
  zeromem check ds_config.json --deepspeed-version 0.14.2 --format json
  zeromem check ds_config.json --model llama-2-13b --gpus 8 --gpu A100-40GB --host-memory 512GiB --nvme-capacity 2TB

One line per finding: FILE:LINE (the line of the key, or of the block it belongs in), severity, JSON path,
what is wrong, and the fix. Without --launcher, a file with "auto" values is checked as the HF Trainer
reads it, and the first line says so. Exit status 0 without errors, 1 with errors, 2 when the file or a
flag cannot be read.
)";

/// A located finding: the file, and the line of its key (0: none).
struct Located {
    const zeromem::Finding* finding;
    int line;
};

void print_table(const std::vector<Located>& fs, const std::vector<zeromem::Finding>& all, zeromem::Launcher l,
                 const std::string& path, const std::string& version) {
    using namespace zeromem;
    for (const auto& [f, line] : fs) {
        std::cout << path << (line > 0 ? ":" + std::to_string(line) : std::string()) << ": " << to_string(f->severity)
                  << ": " << f->pointer << ": " << f->message;
        if (!f->fix.empty()) std::cout << " [fix: " << f->fix << "]";
        std::cout << "\n";
    }
    std::cout << path << ": " << count_findings(all, Severity::error) << " error(s), "
              << count_findings(all, Severity::warning) << " warning(s), " << count_findings(all, Severity::note)
              << " note(s) for launcher " << to_string(l) << ", DeepSpeed " << version << "\n";
}

// --format csv / md: one row per finding.
void print_tabular(const std::vector<Located>& fs, const std::string& path, const std::string& format) {
    Table t{{"file", "line", "severity", "pointer", "message", "fix"}, {}};
    for (const auto& [f, line] : fs)
        t.rows.push_back({path, line > 0 ? std::to_string(line) : "", zeromem::to_string(f->severity), f->pointer,
                          f->message, f->fix});
    std::cout << render_tabular(t, format);
}

void print_json(const std::vector<Located>& fs, const std::vector<zeromem::Finding>& all, zeromem::Launcher l,
                const std::string& path, const std::string& version) {
    using namespace zeromem;
    nlohmann::json j;
    j["config"] = path;
    j["launcher"] = to_string(l);
    j["deepspeed_version"] = version;
    j["findings"] = nlohmann::json::array();
    for (const auto& [f, line] : fs)
        j["findings"].push_back({{"severity", to_string(f->severity)}, {"path", f->pointer},
                                 {"line", line > 0 ? nlohmann::json(line) : nlohmann::json()},
                                 {"message", f->message}, {"fix", f->fix}});
    j["errors"] = count_findings(all, Severity::error);
    j["warnings"] = count_findings(all, Severity::warning);
    j["notes"] = count_findings(all, Severity::note);
    std::cout << j.dump(2) << "\n";
}

/// --launcher, or the default for this file: a file with "auto" values is
/// written for the HF Trainer / accelerate (the HF docs' templates are), so
/// without --launcher it is checked as the HF Trainer reads it, and a first
/// finding says so and how to check it as deepspeed.initialize reads it.
zeromem::Launcher launcher_for(const CheckFlags& f, const nlohmann::json& config,
                               std::vector<zeromem::Finding>& said) {
    using namespace zeromem;
    if (f.launcher) return parse_launcher(*f.launcher, "--launcher");
    const std::vector<std::string> autos = auto_value_pointers(config);
    if (autos.empty()) return Launcher::deepspeed;
    said.push_back({Severity::note, "/",
                    "--launcher not given; the file sets " + std::to_string(autos.size()) +
                        " key(s) to \"auto\" (first " + autos.front() +
                        "), which only the HF Trainer and accelerate fill, so it is checked as --launcher hf-trainer "
                        "reads it",
                    "for a script that passes the file to deepspeed.initialize itself, --launcher deepspeed (there "
                    "each \"auto\" is an error)"});
    return Launcher::hf_trainer;
}

/// The config applied to the model and cluster flags (the memory findings'
/// input), or the refusal that stopped it, at the key the reader names.
void resolve_memory(zeromem::Request req, const std::string& config_path, const std::string& dir,
                    zeromem::CheckOptions& o) {
    using namespace zeromem;
    req.ds_config = config_path;
    try {
        const Resolved res = resolve_request(req, dir);
        o.memory = res.input;
        o.gpu = res.gpu;
        sim::use_replayed_fragmentation(*o.memory, req.fragmentation.has_value());  // as estimate sizes it
    } catch (const ConfigError& e) {
        o.memory_refusal = Finding{Severity::error, e.pointer(), e.detail(), ""};
    } catch (const InputError& e) {
        o.memory_refusal = Finding{Severity::error, "/", e.what(), ""};
    }
}

}  // namespace

CLI::App* add_check_command(CLI::App& app, zeromem::Request& req, CheckFlags& f, bool with_options) {
    auto* chk = app.add_subcommand("check", "Check a DeepSpeed config: schema, launcher \"auto\" rules, version defaults, memory");
    chk->footer(kCheckExamples);
    if (!with_options) return chk;
    chk->add_option("config", f.config, "DeepSpeed config JSON")->required()->type_name("CONFIG.json");
    chk->add_option_function<std::string>(
           "--launcher", [&f](const std::string& v) { f.launcher = v; },
           "who reads the file: deepspeed (a script passing it to deepspeed.initialize), hf-trainer or accelerate; "
           "default hf-trainer when the file has \"auto\" values, else deepspeed")
        ->group("Check")->type_name("NAME");
    chk->add_option_function<std::string>("--nvme-capacity", [&f](const std::string& v) { f.nvme_capacity = v; },
                                          "NVMe capacity per node, for the NVMe-pool finding (e.g. 2TB)")
        ->group("Check")->type_name("SIZE");
    chk->add_option("--format", f.format, "table (default), json, csv or md (one row per finding)")->group("Output")->type_name("FORMAT");
    add_request_options(chk, req);
    return chk;
}

int run_check(zeromem::Request req, const CheckFlags& f, const std::string& dir) {
    using namespace zeromem;
    if (f.format != "table" && f.format != "json" && !tabular_format(f.format))
        throw InputError("--format: '" + f.format + "' is not table, json, csv or md for check");
    if (req.ds_config) throw InputError("--ds-config: check takes the config as its argument, not --ds-config");
    if (req.from)
        throw InputError("--from: check reads the DeepSpeed config given as its argument; `zeromem estimate --from " +
                         *req.from + "` reads a launcher's file");
    const std::string text = read_text_file(f.config);                // InputError: unreadable (exit 2)
    const nlohmann::json config = parse_ds_config_text(text, f.config);  // InputError: malformed (exit 2)
    std::vector<Finding> fs;
    CheckOptions o;
    o.launcher = launcher_for(f, config, fs);
    // --deepspeed-version is the request option every subcommand takes: the
    // rules and defaults of that release apply (default: newest known).
    o.deepspeed_version = req.deepspeed_version.value_or("");
    if (f.nvme_capacity) o.nvme_capacity = parse_bytes(*f.nvme_capacity, "--nvme-capacity");

    o.autos.micro_batch = req.micro_batch;
    o.autos.grad_accum = req.grad_accum;
    if (req.dtype) o.autos.dtype = parse_dtype(*req.dtype, "--dtype");
    const bool model_given = req.params || req.model || req.hf_config || req.module_tree;
    if (model_given) {
        const Resolved plain = resolve_request(req, dir);  // bad flags: InputError (exit 2)
        require_single_model(plain, "check");
        o.autos.world_size = plain.input.cluster.data_parallel();
        o.gpus_known = req.gpus.has_value();
        if (plain.input.model.arch) o.autos.hidden_size = plain.input.model.arch->hidden_size;
        resolve_memory(req, f.config, dir, o);
    } else if (req.gpus) {
        o.autos.world_size = *req.gpus;
        o.gpus_known = true;
    }
    for (auto& x : check_ds_config(config, o)) fs.push_back(std::move(x));
    const std::map<std::string, int> lines = ds_config_key_lines(text);
    std::vector<Located> located;
    for (const auto& x : fs) located.push_back({&x, ds_config_line_of(lines, x.pointer)});
    const std::string newest = ds_schema().value("newest_version", std::string());
    const std::string version = o.deepspeed_version.empty() ? newest : o.deepspeed_version;
    if (tabular_format(f.format)) print_tabular(located, f.config, f.format);
    else if (f.format == "json") print_json(located, fs, o.launcher, f.config, version);
    else print_table(located, fs, o.launcher, f.config, version);
    return count_findings(fs, Severity::error) > 0 ? 1 : 0;
}

}  // namespace zeromem_cli
