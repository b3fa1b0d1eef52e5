// The model presets under data/models/: a config.json with its published parameter count.
#include "zeromem/model.h"

#include "hf_config_reader.h"

#include "zeromem/types.h"
#include "zeromem/util.h"

#include <algorithm>
#include <filesystem>

namespace zeromem {

using namespace model_detail;

std::vector<std::string> list_model_presets(const std::string& data_dir) { return list_presets(data_dir, "models"); }

ModelArch load_model_preset(const std::string& name, const std::string& data_dir) {
    const std::vector<std::string> names = list_model_presets(data_dir);
    if (std::find(names.begin(), names.end(), name) == names.end())
        throw InputError(unknown_preset_message("unknown model", name, names, "or give --params or --hf-config"));
    const std::string path = (std::filesystem::path(data_dir) / "models" / (name + ".json")).string();
    const json cfg = parse_config_file(path);
    ModelArch a = arch_from_hf_config(cfg, path);
    a.name = name;
    ConfigReader r(cfg, path);
    a.published_params = r.integer({"published_params"});
    const json* src = r.find({"published_source"});
    if (!src || !src->is_string() || src->get<std::string>().empty())
        throw InputError(path + ": key 'published_source' must be a non-empty string citing published_params");
    a.published_source = src->get<std::string>();
    return a;
}

}  // namespace zeromem
