// --module-tree in resolve_request: the parameter counts of the model as the
// user built it (zeromem/module_tree.h), over the architecture that sizes the
// activations.
#include "zeromem/module_tree.h"
#include "zeromem/request.h"

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

namespace zeromem {

namespace {

// "LlamaForCausalLM" of "transformers.models.llama.modeling_llama.LlamaForCausalLM".
std::string short_class(const std::string& qualified) {
    const auto dot = qualified.rfind('.');
    return dot == std::string::npos ? qualified : qualified.substr(dot + 1);
}

// Flags that give what the tree gives are refused rather than one silently
// winning.
void refuse_count_flags(const Request& req) {
    if (req.params) throw InputError("--module-tree: the tree gives the parameter count; drop --params");
    if (req.trainable_params)
        throw InputError("--trainable-params: the module tree gives the trainable parameters (requires_grad); give "
                         "one of them");
    if (req.lora_rank)
        throw InputError("--lora-rank: the module tree gives the trainable parameters; dump it after peft's "
                         "get_peft_model, and its adapters count as trainable and the frozen base as frozen");
}

// The architecture the config in the tree describes, when zeromem reads its
// family; else the reason it cannot, for the warning.
std::string adopt_tree_config(const ModuleTree& tree, Resolved& r) {
    if (!tree.config) return "the tree carries no config.json";
    try {
        ModelArch a = arch_from_hf_config(*tree.config, tree.source + " (its config)");
        (void)count_params(a);  // every size checked here, before the architecture is used
        if (a.name.empty()) a.name = short_class(tree.model_class);
        for (const auto& w : a.warnings) r.warnings.push_back(w);
        r.input.model.arch = a;
        r.input.model.name = a.name;
        r.provenance["model.arch"] = "the config.json carried by the module tree " + tree.source;
        return "";
    } catch (const InputError& e) {
        return std::string("its config is not read: ") + e.what();
    }
}

}  // namespace

void apply_module_tree(const Request& req, Resolved& r) {
    if (!req.module_tree) return;
    refuse_count_flags(req);
    const std::string& path = *req.module_tree;
    ModuleTree tree;
    try {
        tree = read_module_tree(path);
    } catch (const InputError& e) {
        throw InputError(std::string("--module-tree: ") + e.what());
    }
    EstimateInput& in = r.input;
    const std::string n = std::to_string(tree.total);
    if (!in.model.arch) {
        in.model.name = tree.model_class.empty() ? path : short_class(tree.model_class);
        const std::string why = adopt_tree_config(tree, r);
        if (!why.empty())
            r.warnings.push_back("--module-tree " + path + ": no architecture (" + why +
                                 "): activations are not estimated, as with --params; add --hf-config or --model "
                                 "for them");
    } else if (const uint64_t counted = count_params(*in.model.arch).total; counted != tree.total) {
        r.warnings.push_back("--module-tree " + path + " holds " + n + " parameters, the architecture of " +
                             in.model.arch->name + " counts " + std::to_string(counted) +
                             ": parameters, gradients and optimizer states follow the tree, activations the "
                             "architecture");
    }
    in.model.params = tree.total;
    in.model.largest_layer_params = tree.largest_module;
    in.model.tree = std::make_shared<const ModuleTree>(tree);
    r.provenance["model.params"] = "counted from the module tree " + path + ": " + n + " parameters, each tied tensor once";
    r.provenance["model.largest_layer_params"] = "largest module of the module tree " + path + ": '" +
                                                 tree.largest_module_name + "' (" + tree.largest_module_class + "), " +
                                                 std::to_string(tree.largest_module) + " own parameters";
    if (tree.trainable < tree.total) {
        in.train.trainable_params = tree.trainable;
        r.provenance["trainable_params"] = "requires_grad in the module tree " + path + ": " +
                                           std::to_string(tree.trainable) + " of " + n + " parameters";
    }
}

}  // namespace zeromem
