// The model in resolve_request (request.cpp): --params, --model or
// --hf-config, the module tree over them, and --largest-layer-params.
#include "hf_hub.h"
#include "request_detail.h"

#include "zeromem/ds_config.h"
#include "zeromem/model.h"
#include "zeromem/util.h"

#include <string>
#include <vector>

namespace zeromem::request_detail {

namespace {

// A preset name as the files spell it, matched case-insensitively.
std::string preset_spelling(const std::string& name, const std::vector<std::string>& known) {
    for (const auto& k : known)
        if (to_lower(k) == to_lower(name)) return k;
    return name;
}

// count_params of an architecture read from --model or --hf-config: an impossible value (a negative
// hidden_size) names the flag, the file and, when the file spells the key so, its line.
ParamCount counted_from_file(const ModelArch& arch, const Request& req, const std::string& data_dir) {
    try {
        return count_params(arch);
    } catch (const InputError& e) {
        std::string msg = e.what();
        if (msg.rfind("model '", 0) == 0 && msg.find("': ") != std::string::npos) msg = msg.substr(msg.find("': ") + 3);
        const std::string flag = req.model ? "--model" : "--hf-config";
        const std::string path = req.model ? data_dir + "/models/" + *req.model + ".json" : resolve_hf_config_path(*req.hf_config);
        int line = 0;
        try {
            line = ds_config_line_of(ds_config_key_lines(read_text_file(path)), "/" + msg.substr(0, msg.find(' ')));
        } catch (const InputError&) {
        }
        throw InputError(flag + ": " + path + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " + msg);
    }
}

}  // namespace

void resolve_model(const Request& req, const std::string& data_dir, Resolved& r) {
    EstimateInput& in = r.input;
    Provenance& prov = r.provenance;
    const int sources = int(req.params.has_value()) + int(req.model.has_value()) + int(req.hf_config.has_value());
    if (sources == 0 && !req.module_tree) throw InputError("model: give one of --params, --model, --hf-config or --module-tree");
    if (sources > 1) throw InputError("model: give only one of --params, --model and --hf-config");
    if (req.params) {
        in.model.params = parse_count(*req.params, "--params");
        in.model.name = *req.params + " parameters";
        prov["model.params"] = "--params " + *req.params;
    } else if (sources == 1) {  // else --module-tree alone
        ModelArch arch;
        try {
            arch = req.model ? load_model_preset(preset_spelling(*req.model, list_model_presets(data_dir)), data_dir)
                             : load_hf_config(resolve_hf_config_path(*req.hf_config));
        } catch (const InputError& e) {
            const std::string flag = req.model ? "--model" : "--hf-config";
            const std::string msg = e.what();
            throw InputError(msg.rfind(flag, 0) == 0 ? msg : flag + ": " + msg);
        }
        // A Hub id names the model: its cached file is snapshots/<commit>/config.json, whose stem says nothing.
        if (req.hf_config && (arch.name.empty() || (looks_like_hub_id(*req.hf_config) && arch.name == "config")))
            arch.name = *req.hf_config;
        const ParamCount pc = counted_from_file(arch, req, data_dir);
        for (const auto& w : arch.warnings) r.warnings.push_back(w);
        in.model.params = pc.total;
        in.model.largest_layer_params = pc.largest_module;
        in.model.name = arch.name;
        in.model.arch = arch;
        const std::string from = req.model ? "preset data/models/" + *req.model + ".json" : *req.hf_config;
        prov["model.params"] = "counted from the architecture (" + from + ")";
        prov["model.largest_layer_params"] = "largest single module, counted from the architecture (" + from + ")";
    }
    apply_module_tree(req, r);  // the counts of the model as built, over those of the architecture
    if (req.largest_layer_params) {
        in.model.largest_layer_params = parse_count(*req.largest_layer_params, "--largest-layer-params");
        prov["model.largest_layer_params"] = "--largest-layer-params " + *req.largest_layer_params;
    } else if (!in.model.arch && !req.module_tree) {
        prov["model.largest_layer_params"] = "unknown (0): pass --largest-layer-params or use --model/--hf-config";
    }
    if (in.model.largest_layer_params > in.model.params)
        throw InputError("--largest-layer-params: larger than the whole model (" + std::to_string(in.model.params) + ")");
}

}  // namespace zeromem::request_detail
