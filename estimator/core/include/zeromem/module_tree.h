// The model as the user built it: a live torch.nn.Module's tree as written by
// zeromem's Python package (python/zeromem, `zeromem.dump_module_tree`;
// format in python/README.md), read with every field checked.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace zeromem {

/// The format version this reader reads ("format_version").
constexpr int kModuleTreeFormatVersion = 1;

/// One parameter a module holds directly (module._parameters).
struct TreeParam {
    std::string name;              ///< own name: "weight", "bias", "in_proj_weight"
    std::vector<uint64_t> shape;   ///< full shape (DeepSpeed's ds_shape under zero.Init)
    std::string dtype;             ///< as torch names it without "torch.": "float32", "bfloat16"
    bool requires_grad = true;
    uint64_t numel = 0;            ///< product of shape (1 for a scalar)
    std::string tied_to;           ///< full path of the same tensor's first listing; "" when this is it
};

/// One module, reached by the dotted path `name` ("" for the root).
struct TreeModule {
    std::string name;
    std::string cls;               ///< its class name: "Linear", "LlamaDecoderLayer"
    std::vector<TreeParam> params; ///< its own parameters, tied ones included
    /// Numel of its own parameters, each tensor once, tied ones included:
    /// sum(p.numel() for p in m.parameters(recurse=False)), what DeepSpeed's
    /// ZeRO-3 gathers for this module's forward.
    uint64_t own_params = 0;
};

/// A module tree, checked: parents before children, paths unique, every
/// tie naming an earlier parameter of the same shape, dtype and
/// requires_grad, and "totals" equal to the sums of the listed parameters.
struct ModuleTree {
    std::string source;            ///< the file read
    int format_version = kModuleTreeFormatVersion;
    std::string model_class;       ///< "transformers.models.llama.modeling_llama.LlamaForCausalLM"
    std::vector<TreeModule> modules;
    uint64_t total = 0;            ///< parameters, each tensor once (ties counted once)
    uint64_t trainable = 0;        ///< those with requires_grad
    /// The largest module's own parameters: DeepSpeed's largest_layer_params,
    /// max over model.modules() of sum(p.numel() for p in
    /// m.parameters(recurse=False)) (runtime/zero/stage3.py model_to_params).
    uint64_t largest_module = 0;
    std::string largest_module_name;   ///< its path (the first such module)
    std::string largest_module_class;
    /// The Hugging Face config.json the model was built from
    /// (PretrainedConfig.to_json_string), when the tree carries one; null
    /// otherwise.
    std::shared_ptr<const nlohmann::json> config;
};

/// Reads and checks the module tree in `path`. Throws InputError in one line
/// "PATH:LINE: /json/pointer: what is wrong" for a missing file, malformed
/// JSON, a duplicate key, a missing, ill-typed or out-of-range field, an
/// unknown key, a format version other than kModuleTreeFormatVersion, or
/// totals that disagree with the parameters listed.
ModuleTree read_module_tree(const std::string& path);

/// The same on text already read; `source` names it in messages.
ModuleTree parse_module_tree(const std::string& text, const std::string& source);

}  // namespace zeromem
