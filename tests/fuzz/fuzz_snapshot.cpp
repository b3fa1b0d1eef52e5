// libFuzzer target: the memory snapshot reader (run_log.h; pickle_reader.h's
// restricted unpickler) on arbitrary bytes behind the pickle PROTO opcode, so
// every input reaches it. Only zeromem::InputError may escape, and it is one
// line; every reading that comes back is exact (low == bytes == high) and the
// blocks kept are the reading's largest, at most kSnapshotBlocks.
#include "zeromem/run_log.h"
#include "zeromem/types.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace zeromem;
    std::string s(reinterpret_cast<const char*>(data), size);
    if (s.empty() || static_cast<unsigned char>(s[0]) != 0x80) s.insert(0, "\x80\x04", 2);
    try {
        const RunLog log = read_run_log(s, "fuzz.pickle");
        for (const auto& o : log.observations) {
            for (const auto* r : {&o.allocated, &o.reserved, &o.max_reserved})
                if (*r && ((*r)->low != (*r)->bytes || (*r)->bytes != (*r)->high || (*r)->bytes < 0)) std::abort();
            if (!o.allocated || !o.reserved || o.largest_blocks.size() > kSnapshotBlocks) std::abort();
            for (std::size_t k = 1; k < o.largest_blocks.size(); ++k)
                if (o.largest_blocks[k].size > o.largest_blocks[k - 1].size) std::abort();
        }
    } catch (const InputError& e) {
        if (std::strchr(e.what(), '\n')) std::abort();
    }
    return 0;
}
