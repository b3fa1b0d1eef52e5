// The software stack of a request (see request.h resolve_stack): built-in
// defaults, then the versions installed where the user runs (or a pip freeze
// file), then --stack NAME=V, then the single-version flags, which win.
#include "zeromem/request.h"

#include "zeromem/ds_schema.h"
#include "zeromem/model.h"
#include "zeromem/stack_detect.h"
#include "zeromem/stack_facts.h"
#include "zeromem/util.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace zeromem {

namespace {

// Where the versions come from before --stack NAME=V and the flags.
enum class StackSource { builtin, environment, environment_and_path, file };

// The source chosen by --stack defaults|auto, --stack-from and
// $ZEROMEM_STACK (the command line wins over the environment variable).
// `why` says why the built-in stack is pinned.
StackSource stack_source(const Request& req, std::string& why) {
    const std::string word = req.stack ? to_lower(*req.stack) : std::string();
    const std::string env = to_lower(req.environment.zeromem_stack);
    if (req.stack_from) {
        if (word == "defaults" || word == "auto")
            throw InputError("--stack-from: cannot be combined with --stack " + word + " (one source of versions)");
        return StackSource::file;
    }
    if (word == "defaults") return why = "--stack defaults", StackSource::builtin;
    if (word == "auto") return StackSource::environment_and_path;
    if (env == "defaults") return why = "ZEROMEM_STACK=defaults", StackSource::builtin;
    if (env == "auto") return StackSource::environment_and_path;
    if (!env.empty())
        throw InputError("ZEROMEM_STACK: '" + req.environment.zeromem_stack + "' is not defaults or auto");
    return StackSource::environment;
}

// The versions the chosen source holds (empty: nothing read).
FoundStack read_source(const Request& req, StackSource source) {
    switch (source) {
    case StackSource::builtin: return {};
    case StackSource::environment: return detect_stack(req.environment, false);
    case StackSource::environment_and_path: return detect_stack(req.environment, true);
    case StackSource::file: break;
    }
    // A pip freeze output is a small regular file: a directory, FIFO or device (/dev/zero) is refused
    // before it is read, and so is a file past 16 MiB (thousands of times a real environment's).
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path path(*req.stack_from);
    if (fs::is_directory(path, ec)) throw InputError("--stack-from: " + *req.stack_from + " is a directory, not a pip freeze output");
    if (!fs::is_regular_file(path, ec))
        throw InputError("--stack-from: " + *req.stack_from + (fs::exists(path, ec) ? " is not a regular file" : " does not exist"));
    if (fs::file_size(path, ec) > (uint64_t(16) << 20))
        throw InputError("--stack-from: " + *req.stack_from + " is larger than 16 MiB: not a pip freeze output");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError("--stack-from: cannot read " + *req.stack_from);
    std::ostringstream text;
    text << in.rdbuf();
    return parse_pip_freeze(text.str(), *req.stack_from);
}

// The newest version zeromem knows of each package: DeepSpeed's from the
// schema, torch's and transformers' the built-in stack's.
std::string newest_known(const std::string& package) {
    if (package == "deepspeed") return ds_schema().value("newest_version", std::string("0.19.6"));
    const SoftwareStack builtin;
    return package == "torch" ? builtin.torch : builtin.transformers;
}

const char* display_name(const std::string& package) {
    return package == "deepspeed" ? "DeepSpeed" : package == "torch" ? "torch" : "transformers";
}

// Sets one package's version from `from` (a flag, or "from <source>"),
// checking it: an unparsable version or a DeepSpeed older than the oldest
// known is an error naming `field`; a version newer than the newest known is
// followed as the newest known, with a warning.
void set_version(const std::string& package, std::string& slot, const std::string& value, const std::string& from,
                 const std::string& field, Resolved& r) {
    compare_versions(value, "0", field);
    const std::string newest = newest_known(package);
    if (package == "deepspeed") {  // the releases zeromem knows, as `check` does
        const std::string oldest = ds_schema().value("oldest_version", std::string("0.4.2"));
        if (compare_versions(value, oldest, field) < 0)
            throw InputError(field + ": DeepSpeed " + value + " is older than the versions zeromem knows (" + oldest +
                             " to " + newest + ")");
    }
    std::string& prov = r.provenance["stack." + package];
    if (compare_versions(value, newest, field) > 0) {
        slot = newest;
        prov = newest + " (" + from + " says " + value + ", newer than the newest " + display_name(package) +
               " zeromem knows: followed as " + newest + ")";
        r.warnings.push_back(field + ": " + display_name(package) + " " + value + " is newer than the newest zeromem " +
                             "knows (" + newest + "); the estimate follows " + newest +
                             "'s behaviour, which may differ from " + value + "'s");
        return;
    }
    slot = value;
    prov = value + " (" + from + ")";
}

// --stack deepspeed=V,torch=V,transformers=V, each package named once.
void apply_stack_list(const std::string& text, SoftwareStack& stack, Resolved& r) {
    std::set<std::string> named;
    std::size_t pos = 0;
    while (pos <= text.size()) {
        const std::size_t comma = text.find(',', pos);
        const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        const std::size_t eq = item.find('=');
        if (eq == std::string::npos)
            throw InputError("--stack: '" + item +
                             "' is not NAME=VERSION (deepspeed, torch, transformers), auto or defaults");
        const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
        std::string* slot = name == "deepspeed" ? &stack.deepspeed
                            : name == "torch"   ? &stack.torch
                            : name == "transformers" ? &stack.transformers : nullptr;
        if (!slot) throw InputError("--stack: unknown package '" + name + "' (use deepspeed, torch, transformers)");
        if (!named.insert(name).second) throw InputError("--stack: " + name + " is given twice");
        set_version(name, *slot, value, "--stack", "--stack", r);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
}

// Whether --stack NAME=V or the package's own flag sets `package` (then the
// installed version is not read: an explicit version wins, even over one
// zeromem would refuse).
bool given_explicitly(const Request& req, const std::string& package) {
    if (package == "deepspeed" && req.deepspeed_version) return true;
    if (package == "torch" && req.torch_version) return true;
    if (package == "transformers" && req.transformers_version) return true;
    if (!req.stack) return false;
    const std::string list = "," + *req.stack;
    return list.find("," + package + "=") != std::string::npos;
}

}  // namespace

void resolve_stack(const Request& req, Resolved& r) {
    SoftwareStack& stack = r.input.stack;
    std::string pinned;
    const StackSource source = stack_source(req, pinned);
    r.provenance["stack.deepspeed"] = stack.deepspeed + " (built-in default)";
    r.provenance["stack.torch"] = stack.torch + " (built-in default)";
    r.provenance["stack.transformers"] = stack.transformers + " (built-in default)";
    const StackEnvironment& env = req.environment;
    if (!pinned.empty() && (!env.virtual_env.empty() || !env.conda_prefix.empty()))
        r.notes.push_back("software stack: " + pinned + " pins the built-in stack; " +
                          (!env.virtual_env.empty() ? "$VIRTUAL_ENV=" + env.virtual_env
                                                    : "$CONDA_PREFIX=" + env.conda_prefix) +
                          " is not read");
    const FoundStack found = read_source(req, source);
    for (const auto& n : found.notes) r.notes.push_back("software stack: " + n);
    const std::pair<const char*, std::string*> packages[] = {
        {"deepspeed", &stack.deepspeed}, {"torch", &stack.torch}, {"transformers", &stack.transformers}};
    for (const auto& [name, slot] : packages) {
        const auto& v = name == std::string("deepspeed") ? found.deepspeed
                        : name == std::string("torch")   ? found.torch : found.transformers;
        if (v && given_explicitly(req, name)) continue;
        if (v) set_version(name, *slot, v->version, "from " + v->source, "stack." + std::string(name) + " (" + v->source + ")", r);
        else if (!found.where.empty())
            r.provenance[std::string("stack.") + name] = *slot + " (built-in default: no " + name + " in " + found.where + ")";
    }
    const std::string word = req.stack ? to_lower(*req.stack) : std::string();
    if (req.stack && word != "auto" && word != "defaults") apply_stack_list(*req.stack, stack, r);
    if (req.deepspeed_version)
        set_version("deepspeed", stack.deepspeed, *req.deepspeed_version, "--deepspeed-version", "--deepspeed-version", r);
    if (req.torch_version) set_version("torch", stack.torch, *req.torch_version, "--torch-version", "--torch-version", r);
    if (req.transformers_version)
        set_version("transformers", stack.transformers, *req.transformers_version, "--transformers-version",
                    "--transformers-version", r);
}

void apply_stack_to_architecture(const Request& req, Resolved& r) {
    EstimateInput& in = r.input;
    if (!in.model.arch || req.module_tree) return;
    ModelArch& a = *in.model.arch;
    if (a.fused_experts || !a.packs_experts_from_transformers_5 || !stack_facts(in.stack).packs_moe_experts) return;
    a.fused_experts = true;
    r.provenance["model.experts"] = "one packed module per MoE block (experts.gate_up_proj, experts.down_proj): "
                                    "transformers " + in.stack.transformers + " (>= 5.0) builds them so";
    if (req.largest_layer_params) return;
    const ParamCount pc = count_params(a);
    if (pc.largest_module <= in.model.largest_layer_params) return;
    in.model.largest_layer_params = pc.largest_module;
    r.provenance["model.largest_layer_params"] = "largest single module, counted from the architecture: " +
                                                 pc.largest_module_name + " (transformers " + in.stack.transformers +
                                                 " packs the routed experts of a block into one module)";
}

}  // namespace zeromem
