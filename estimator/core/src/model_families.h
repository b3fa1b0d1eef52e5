// The config.json readers, one per family (family_*.cpp), the vision towers (vision_towers.cpp) and the
// dispatch between them (model_families.cpp); private to the library.
#pragma once

#include "hf_config_reader.h"

#include "zeromem/model.h"

#include <string>

namespace zeromem::model_detail {

// Family readers: each fills `a` from the config `r` (family_<name>.cpp).
void read_gpt2(ModelArch& a, const ConfigReader& r);
void read_opt(ModelArch& a, const ConfigReader& r);
void read_gpt_neox(ModelArch& a, const ConfigReader& r);
void read_falcon(ModelArch& a, const ConfigReader& r, const std::string& model_type);
void read_bloom(ModelArch& a, const ConfigReader& r);
void read_decoder(ModelArch& a, const ConfigReader& r, const json& fam);
void read_t5(ModelArch& a, const ConfigReader& r, const json& fam, bool encoder_model);
void read_bert(ModelArch& a, const ConfigReader& r, const json& fam, const std::string& arch_name);
void read_vision_language(ModelArch& a, const ConfigReader& r, const json& fam, const std::string& model_type, int depth);

// Parts read_decoder adds: the MoE layout (family_moe.cpp) and multi-head latent attention (family_mla.cpp).
void read_moe(ModelArch& a, const ConfigReader& r, const json& fam, const std::string& kind);
void read_mla(ModelArch& a, const ConfigReader& r, const json& fam);

// Vision towers (vision_towers.cpp): each sets the vision_* fields of `a` from vision_config `r`.
void read_clip_or_siglip(ModelArch& a, const ConfigReader& r, bool siglip, const json& defaults);
void read_qwen2_vl_tower(ModelArch& a, const ConfigReader& r);
void read_qwen2_5_vl_tower(ModelArch& a, const ConfigReader& r);
void read_qwen3_vl_tower(ModelArch& a, const ConfigReader& r);
void read_llama4_tower(ModelArch& a, const ConfigReader& r, int64_t text_hidden);

/// The architecture of `r` read by the reader families.json names for `model_type` (model_families.cpp);
/// `depth` counts text_config nesting.
ModelArch read_family(const ConfigReader& r, const std::string& model_type, int depth);

}  // namespace zeromem::model_detail
