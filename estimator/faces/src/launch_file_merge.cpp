// --from FILE into the request (zeromem/launch_file.h): the command line
// wins over the file, and --explain names the file's line for every value
// taken from it.
#include "zeromem/launch_file.h"

#include <optional>
#include <string>

namespace zeromem {

namespace {

std::string shown(const std::string& v) { return v; }
std::string shown(int64_t v) { return std::to_string(v); }
std::string shown(bool v) { return v ? "true" : "false"; }

// One request field: the file's value where the command line left it unset;
// a note where both give one.
template <class T>
void take(const char* flag, std::optional<T> Request::*field, const LaunchFile& file, Request& out) {
    const std::optional<T>& from_file = file.values.*field;
    if (!from_file) return;
    const auto src = file.trail.sources.find(flag);
    const std::string where = src == file.trail.sources.end() ? file.trail.path : src->second;
    if (out.*field) {
        out.launch.notes.push_back(std::string(flag) + " " + shown(*(out.*field)) + " replaces " + where + " (" +
                                   shown(*from_file) + ")");
        out.launch.sources.erase(flag);
        return;
    }
    out.*field = from_file;
}

}  // namespace

Request merge_launch_file(const Request& req, const LaunchFile& file) {
    Request out = req;
    out.launch = file.trail;
    const bool model_given = req.params || req.model || req.hf_config || req.module_tree;
    if (model_given && (file.values.model || file.values.hf_config)) {
        out.launch.notes.push_back("the model flag replaces " + file.trail.path + "'s model_name_or_path");
        out.launch.sources.erase("--model");
        out.launch.sources.erase("--hf-config");
    } else {
        if (!model_given && !file.trail.model_error.empty()) throw InputError(file.trail.model_error);
        take("--model", &Request::model, file, out);
        take("--hf-config", &Request::hf_config, file, out);
    }
    take("--gpus", &Request::gpus, file, out);
    take("--nodes", &Request::nodes, file, out);
    take("--dtype", &Request::dtype, file, out);
    take("--micro-batch", &Request::micro_batch, file, out);
    take("--seq-len", &Request::seq_len, file, out);
    take("--grad-accum", &Request::grad_accum, file, out);
    take("--gradient-checkpointing", &Request::checkpointing, file, out);
    take("--optimizer", &Request::optimizer, file, out);
    take("--optimizer-impl", &Request::optimizer_impl, file, out);
    take("--attention", &Request::attention, file, out);
    take("--stage", &Request::stage, file, out);
    take("--offload-optimizer", &Request::offload_optimizer, file, out);
    take("--offload-param", &Request::offload_param, file, out);
    take("--zero-init", &Request::zero_init, file, out);
    take("--gather-on-save", &Request::gather_on_save, file, out);
    take("--ds-config", &Request::ds_config, file, out);
    take("--lora-rank", &Request::lora_rank, file, out);
    take("--lora-target", &Request::lora_targets, file, out);
    take("--load-in", &Request::load_in, file, out);
    take("--workload", &Request::workload, file, out);
    return out;
}

namespace {

// A provenance or error text that names `flag` first ("--micro-batch", "--no-zero-init 0", "--seq-len: ...").
bool names_flag(const std::string& text, const std::string& flag) {
    auto starts = [&](const std::string& f) {
        return text.rfind(f, 0) == 0 && (text.size() == f.size() || text[f.size()] == ' ' || text[f.size()] == ':' ||
                                         text[f.size()] == '/');
    };
    return starts(flag) || (flag.rfind("--", 0) == 0 && starts("--no-" + flag.substr(2)));
}

}  // namespace

std::string launch_file_origin(const Request& req, const std::string& message) {
    for (const auto& [flag, where] : req.launch.sources)
        if (names_flag(message, flag)) return " (" + flag + " is " + where + " of --from)";
    return {};
}

void attribute_launch_file(const Request& req, Resolved& r) {
    if (req.launch.kind.empty()) return;
    for (auto& [setting, source] : r.provenance)
        for (const auto& [flag, where] : req.launch.sources)
            if (names_flag(source, flag)) {
                source = where + " (" + req.launch.kind + ", --from)";
                break;
            }
    for (const char* flag : {"--model", "--hf-config"})
        if (const auto it = req.launch.sources.find(flag); it != req.launch.sources.end())
            r.provenance["model.params"] += " (" + it->second + ", --from)";
    if (const auto it = req.launch.sources.find("--ds-config"); it != req.launch.sources.end())
        r.provenance["deepspeed_config"] = *req.ds_config + " (" + it->second + ", --from)";
    r.notes.insert(r.notes.begin(), req.launch.notes.begin(), req.launch.notes.end());
    r.warnings.insert(r.warnings.begin(), req.launch.warnings.begin(), req.launch.warnings.end());
}

}  // namespace zeromem
