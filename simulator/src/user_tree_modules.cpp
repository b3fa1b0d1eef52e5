// The modules the simulator replays for a model given as a module tree
// (--module-tree, zeromem/module_tree.h): each module with parameters of its
// own, as DeepSpeed's hooks see them (parameter_offload.py registers hooks on
// every module; partitioned_param_coordinator.py fetch_sub_module gathers a
// module's own parameters, recurse=False), in forward order.
#include "zeromem/module_tree.h"
#include "zeromem/simulator.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <vector>

namespace zeromem::sim {

namespace {

std::vector<std::string> path_parts(const std::string& name) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (start <= name.size()) {
        const std::size_t dot = name.find('.', start);
        parts.push_back(name.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    return parts;
}

bool all_digits(const std::string& s) {
    return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// The block index: the number after a ModuleList of blocks ("model.layers.3.", GPT-2's "h.3.").
int layer_of(const std::vector<std::string>& parts) {
    for (std::size_t k = 0; k + 1 < parts.size(); ++k)
        if ((parts[k] == "layers" || parts[k] == "h" || parts[k] == "layer" || parts[k] == "blocks") &&
            all_digits(parts[k + 1]))
            return std::stoi(parts[k + 1]);
    return -1;
}

// The role the producer saves activations by (producer.cpp saved_tensors), from the module's own name as
// transformers' decoders name them; "other" saves none (a module the replay only fetches and releases).
std::string role_of(const std::vector<std::string>& parts, int layer) {
    const std::string& last = parts.back();
    static const std::map<std::string, std::string> roles = {
        {"embed_tokens", "embed_tokens"}, {"input_layernorm", "input_layernorm"},
        {"post_attention_layernorm", "post_attention_layernorm"}, {"q_proj", "q_proj"}, {"k_proj", "k_proj"},
        {"v_proj", "v_proj"}, {"o_proj", "o_proj"}, {"query_key_value", "qkv_proj"}, {"q_norm", "q_norm"},
        {"k_norm", "k_norm"}, {"gate_proj", "gate_proj"}, {"up_proj", "up_proj"}, {"down_proj", "down_proj"},
        {"lm_head", "lm_head"}};
    if (layer < 0 && last == "norm") return "final_norm";
    const auto it = roles.find(last);
    return it == roles.end() ? "other" : it->second;
}

// A block's modules in the order its forward runs them (LlamaDecoderLayer.forward: input norm, attention,
// post-attention norm, MLP); a module of another name keeps its place after the known ones.
int rank_in_block(const std::string& role) {
    static const std::map<std::string, int> rank = {
        {"input_layernorm", 0}, {"q_proj", 1},  {"qkv_proj", 1},  {"k_proj", 2},   {"v_proj", 3},
        {"q_norm", 4},          {"k_norm", 5},  {"o_proj", 6},    {"post_attention_layernorm", 7},
        {"gate_proj", 8},       {"up_proj", 9}, {"down_proj", 10}};
    const auto it = rank.find(role);
    return it == rank.end() ? 100 : it->second;
}

}  // namespace

bool tree_has_routed_experts(const ModuleTree& tree) {
    return std::any_of(tree.modules.begin(), tree.modules.end(),
                       [](const TreeModule& m) { return m.name.find(".experts.") != std::string::npos; });
}

std::vector<SimModule> modules_from_tree(const ModuleTree& tree) {
    struct Keyed {
        SimModule m;
        int segment = 0;  // 0 before the blocks, 1 in them, 2 after
        int rank = 0;
        std::size_t order = 0;
        std::string tied_module;  // the module holding the tensor a tied parameter shares
    };
    std::vector<Keyed> list;
    bool seen_block = false;
    for (std::size_t k = 0; k < tree.modules.size(); ++k) {
        const TreeModule& t = tree.modules[k];
        if (t.params.empty() || t.name.empty()) continue;  // containers: hooks, nothing of their own to fetch
        Keyed e;
        const std::vector<std::string> parts = path_parts(t.name);
        e.m.name = t.name;
        e.m.layer = layer_of(parts);
        e.m.role = role_of(parts, e.m.layer);
        for (const TreeParam& p : t.params) {
            if (p.tied_to.empty()) {
                e.m.params.push_back(p.numel);
            } else if (e.tied_module.empty()) {
                e.tied_module = p.tied_to.substr(0, p.tied_to.rfind('.'));
            }
        }
        if (e.m.layer >= 0) seen_block = true;
        e.segment = e.m.layer >= 0 ? 1 : seen_block ? 2 : 0;
        e.rank = e.m.layer >= 0 ? rank_in_block(e.m.role) : 0;
        e.order = k;
        list.push_back(std::move(e));
    }
    std::stable_sort(list.begin(), list.end(), [](const Keyed& a, const Keyed& b) {
        if (a.segment != b.segment) return a.segment < b.segment;
        if (a.m.layer != b.m.layer) return a.m.layer < b.m.layer;
        if (a.rank != b.rank) return a.rank < b.rank;
        return a.order < b.order;
    });
    std::vector<SimModule> out;
    out.reserve(list.size());
    for (auto& e : list) out.push_back(e.m);
    for (std::size_t k = 0; k < list.size(); ++k) {
        if (list[k].tied_module.empty()) continue;
        for (std::size_t j = 0; j < out.size(); ++j)
            if (out[j].name == list[k].tied_module) out[k].shares_params_with = static_cast<int>(j);
    }
    return out;
}

std::vector<SimModule> modules_of(const EstimateInput& in) {
    if (in.model.tree && !tree_has_routed_experts(*in.model.tree)) return modules_from_tree(*in.model.tree);
    if (!in.model.arch) throw InputError("the simulator replays the modules of an architecture; none is given");
    return build_modules(*in.model.arch);
}

}  // namespace zeromem::sim
