// libFuzzer target: the run-log readers (run_log.h) on arbitrary text. Only
// zeromem::InputError may escape; every reading that comes back has
// low <= bytes <= high.
#include "zeromem/run_log.h"
#include "zeromem/types.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace zeromem;
    const std::string s(reinterpret_cast<const char*>(data), size);
    try {
        const RunLog log = read_run_log(s, "fuzz.log");
        for (const auto& o : log.observations)
            for (const auto* r : {&o.allocated, &o.max_allocated, &o.reserved, &o.max_reserved, &o.host, &o.max_host,
                                  &o.device_used, &o.device_total, &o.requested})
                if (*r && ((*r)->low > (*r)->bytes || (*r)->bytes > (*r)->high)) std::abort();
    } catch (const InputError&) {
    }
    return 0;
}
