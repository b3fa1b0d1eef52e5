// libFuzzer target: --from FILE (zeromem/launch_file.h), a LLaMA-Factory
// training YAML, an accelerate config YAML or a TrainingArguments JSON read
// into the request and merged over an empty command line. Relative paths in
// the input resolve against a folder that does not exist, Hub ids against an
// empty cache. Only zeromem::InputError may escape.
#include "zeromem/launch_file.h"
#include "zeromem/util.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace zeromem;
    static const bool once = [] { return setenv("HF_HUB_CACHE", "/nonexistent/zeromem-fuzz-hub", 1) == 0; }();
    (void)once;
    if (size == 0) return 0;
    // The first byte picks the syntax (a .json file is read as JSON, anything else as YAML).
    const std::string path = data[0] & 1 ? "/nonexistent/zeromem-fuzz/args.json" : "/nonexistent/zeromem-fuzz/train.yaml";
    const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        const LaunchFile f = parse_launch_file(text, path, ZEROMEM_SOURCE_DATA_DIR);
        (void)merge_launch_file(Request{}, f);
    } catch (const InputError&) {
    }
    return 0;
}
