// config.json reader: the vision-language wrappers (LLaVA, Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Llama 4, Gemma 3).
#include "model_families.h"

#include "param_count.h"

#include "zeromem/types.h"

#include <algorithm>

namespace zeromem::model_detail {

// Vision-language wrappers: the text model from text_config (or the flat
// top-level keys, Qwen2-VL/Qwen2.5-VL style), the tower from vision_config.
void read_vision_language(ModelArch& a, const ConfigReader& r, const json& fam, const std::string& model_type, int depth) {
    const std::string text_default = fam.at("text").get<std::string>();
    const std::string vision = fam.at("vision").get<std::string>();
    const json* vc = r.find({"vision_config"});  // read before flat text keys are checked
    const json* text = r.find({"text_config"});
    if (text && !text->is_object()) throw InputError(r.source() + ": key 'text_config' must be an object");
    if (text) {
        json tc = *text;
        // A wrapper's top-level tie_word_embeddings applies when text_config has none.
        if (!tc.contains("tie_word_embeddings"))
            if (const json* t = r.find({"tie_word_embeddings"})) tc["tie_word_embeddings"] = *t;
        ConfigReader tr(tc, r.source() + " text_config");
        tr.allow_size_defaults();
        std::string tt = tc.contains("model_type") && tc["model_type"].is_string() ? tc["model_type"].get<std::string>() : text_default;
        if (!family_rules(tt)) tt = text_default;  // e.g. "vicuna": the wrapper's text family
        const auto fam_t = family_rules(tt);
        if (fam_t && fam_t->value("reader", "") == "vision_language")
            throw InputError(r.source() + ": text_config has model_type '" + tt + "', itself a vision-language wrapper");
        a = read_family(tr, tt, depth + 1);
    } else {
        a = read_family(r, text_default, depth + 1);
    }
    if (vc && !vc->is_object()) throw InputError(r.source() + ": key 'vision_config' must be an object");
    const json empty = json::object();
    const json& v = vc ? *vc : empty;
    ConfigReader vr(v, r.source() + " vision_config");
    if (!vc)
        a.warnings.push_back(r.source() + ": no 'vision_config': the vision tower is counted with the defaults of " +
                             model_type + "'s transformers config class, which may not match the checkpoint");
    std::string vkind = vision;
    if (vision == "clip" && v.contains("model_type") && v["model_type"] == "siglip_vision_model") vkind = "siglip";
    if (vkind == "clip" || vkind == "siglip") {
        // LlavaConfig's default tower: CLIP ViT-L/14 at 336 px.
        const json llava_default = {{"hidden_size", 1024}, {"intermediate_size", 4096}, {"num_hidden_layers", 24},
                                    {"patch_size", 14}, {"image_size", 336}};
        read_clip_or_siglip(a, vr, vkind == "siglip", vc ? empty : llava_default);
        if (model_type == "gemma3") {  // Gemma3MultiModalProjector: weight (vision h, text h) + RMSNorm(vision h)
            a.projector_params = u(a.vision_hidden_size) * u(a.hidden_size) + u(a.vision_hidden_size);
        } else {  // LlavaMultiModalProjector: linear_1, GELU, linear_2
            int64_t taps = 1;
            if (const json* fl = r.find({"vision_feature_layer"}); fl && fl->is_array()) taps = static_cast<int64_t>(fl->size());
            const bool bias = r.boolean_or({"multimodal_projector_bias"}, true);
            a.projector_params = linear(a.vision_hidden_size * taps, a.hidden_size, bias) + linear(a.hidden_size, a.hidden_size, bias);
        }
        a.vision_largest_module = std::max(a.vision_largest_module, a.projector_params);
    } else if (vkind == "qwen2_vl") {
        read_qwen2_vl_tower(a, vr);
    } else if (vkind == "qwen2_5_vl") {
        read_qwen2_5_vl_tower(a, vr);
    } else if (vkind == "qwen3_vl") {
        read_qwen3_vl_tower(a, vr);
    } else if (vkind == "llama4") {
        read_llama4_tower(a, vr, a.hidden_size);
    }
    a.model_type = model_type;
    a.family = model_type;
}

}  // namespace zeromem::model_detail
