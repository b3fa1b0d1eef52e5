// libFuzzer target: the software-stack readers (zeromem/stack_detect.h): a
// `pip freeze` output (parse_pip_freeze), core metadata (metadata_version)
// and PEP 503 name normalisation. Only zeromem::InputError may escape.
#include "zeromem/stack_detect.h"
#include "zeromem/types.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace zeromem;
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const FoundStack s = parse_pip_freeze(text, "fuzz.txt");
        for (const auto* v : {&s.deepspeed, &s.torch, &s.transformers})
            if (*v) (void)compare_versions((*v)->version, "0.19.6", "fuzz");
    } catch (const InputError&) {
    }
    try {
        (void)compare_versions(metadata_version(text, "METADATA", "stack.torch"), "2.8", "fuzz");
    } catch (const InputError&) {
    }
    const std::string n = normalize_distribution_name(text);
    if (normalize_distribution_name(n) != n) __builtin_trap();  // normalising twice changes nothing
    return 0;
}
