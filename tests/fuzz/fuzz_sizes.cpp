// libFuzzer target: the size, count, integer, enum and version parsers
// (util.h, types.h, ds_schema.h). Only zeromem::InputError may escape.
#include "zeromem/ds_schema.h"
#include "zeromem/types.h"
#include "zeromem/util.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace {

template <class F>
void guarded(F&& f) {
    try {
        f();
    } catch (const zeromem::InputError&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace zeromem;
    const std::string s(reinterpret_cast<const char*>(data), size);
    guarded([&] { (void)parse_bytes(s, "f"); });
    guarded([&] { (void)parse_bytes_or_zero(s, "f"); });
    guarded([&] { (void)parse_count(s, "f"); });
    guarded([&] { (void)parse_int(s, "f"); });
    guarded([&] { (void)parse_dtype(s, "f"); });
    guarded([&] { (void)parse_offload_device(s, "f"); });
    guarded([&] { (void)parse_checkpointing(s, "f"); });
    guarded([&] { (void)parse_optimizer(s, "f"); });
    guarded([&] { (void)parse_convention(s, "f"); });
    guarded([&] { (void)parse_launcher(s, "f"); });
    guarded([&] { (void)compare_versions(s, "0.19.6", "f"); });
    (void)closest_names(s, {"zero_optimization", "train_batch_size", "fp16"}, 3);
    return 0;
}
