// Hugging Face Hub ids in the local cache (hf_hub.h).
#include "hf_hub.h"

#include "zeromem/types.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cstdlib>
#include <system_error>
#include <vector>

namespace zeromem {

namespace fs = std::filesystem;

fs::path hf_hub_cache() {
    if (const char* c = std::getenv("HF_HUB_CACHE"); c && *c) return c;
    if (const char* h = std::getenv("HF_HOME"); h && *h) return fs::path(h) / "hub";
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return fs::path(x) / "huggingface" / "hub";
    const char* home = std::getenv("HOME");
    return fs::path(home && *home ? home : "/") / ".cache" / "huggingface" / "hub";
}

bool looks_like_hub_id(const std::string& s) {
    if (s.empty() || s[0] == '/' || s[0] == '.' || s[0] == '~') return false;
    if (std::count(s.begin(), s.end(), '/') != 1 || s.back() == '/') return false;
    return s.size() < 5 || s.compare(s.size() - 5, 5, ".json") != 0;
}

// The config.json of a Hub id in the local cache: the snapshot refs/main
// names, else the first snapshot with a config.json. Layout:
// <cache>/models--ORG--NAME/{refs/main, snapshots/<commit>/config.json}.
std::string cached_hub_config(const std::string& id) {
    std::string folder = "models--" + id;
    folder.replace(folder.find('/'), 1, "--");
    const fs::path repo = hf_hub_cache() / folder;
    std::error_code ec;
    std::string commit;
    try {
        commit = read_text_file((repo / "refs" / "main").string());
    } catch (const InputError&) {
    }
    while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
    if (!commit.empty() && fs::is_regular_file(repo / "snapshots" / commit / "config.json", ec))
        return (repo / "snapshots" / commit / "config.json").string();
    std::vector<std::string> found;
    for (fs::directory_iterator it(repo / "snapshots", ec), end; !ec && it != end; it.increment(ec))
        if (std::error_code file_ec; fs::is_regular_file(it->path() / "config.json", file_ec))  // a loop is no file
            found.push_back((it->path() / "config.json").string());
    std::sort(found.begin(), found.end());
    if (found.empty())
        throw InputError("--hf-config: '" + id + "' is not a file or directory, and the Hub model is not in the local "
                         "Hugging Face cache (" + (hf_hub_cache() / folder / "snapshots").string() +
                         "; zeromem works offline): run `huggingface-cli download " + id +
                         " config.json` or pass the path of its config.json");
    return found.front();
}

// --hf-config as users have it: a config.json, a model directory holding
// one, or a Hub id ("meta-llama/Llama-2-7b-hf") found in the local cache.
std::string resolve_hf_config_path(const std::string& arg) {
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
        const fs::path cfg = fs::path(arg) / "config.json";
        if (!fs::is_regular_file(cfg, ec))
            throw InputError("--hf-config: " + arg + " is a directory without a config.json");
        return cfg.string();
    }
    if (!fs::exists(arg, ec) && looks_like_hub_id(arg)) return cached_hub_config(arg);
    return arg;
}

}  // namespace zeromem
