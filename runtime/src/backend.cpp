// Backend: allocation accounting shared by every backend, host RSS, timers.
#include "zeromem/runtime/backend.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

namespace zeromem::runtime {

const char* to_string(Category c) {
    switch (c) {
        case Category::parameters: return "parameters";
        case Category::gradients: return "gradients";
        case Category::optimizer_states: return "optimizer_states";
        case Category::activations: return "activations";
        case Category::buffers: return "buffers";
        case Category::workspace: return "workspace";
    }
    return "?";
}

const char* to_string(Where w) {
    switch (w) {
        case Where::device: return "device";
        case Where::host: return "host";
        case Where::pinned: return "pinned";
    }
    return "?";
}

uint64_t pinned_block_bytes(uint64_t bytes) {
    if (bytes <= 1) return bytes;
    uint64_t p = 1;
    while (p < bytes) p <<= 1;
    return p;
}

uint64_t reserved_bytes(const Tensor& t) {
    return t.where == Where::pinned ? pinned_block_bytes(t.bytes()) : t.bytes();
}

Tensor Backend::alloc(int64_t numel, DType dtype, Category category, Where where) {
    Tensor t;
    t.numel = numel;
    t.dtype = dtype;
    t.category = category;
    t.where = where;
    const uint64_t bytes = reserved_bytes(t);
    const int w = static_cast<int>(where), c = static_cast<int>(category);
    auto describe = [&]() {
        return std::string("out of memory: ") + std::to_string(bytes) + " B of " + to_string(category) + " on " +
               to_string(where) + " with " + std::to_string(usage_.total_current[w]) + " B in use";
    };
    if (where == Where::device && capacity_ > 0 && usage_.total_current[w] + bytes > capacity_)
        throw OutOfMemory(describe() + " (capacity " + std::to_string(capacity_) + " B)", bytes, category, where);
    if (total_capacity_ > 0) {
        uint64_t in_use = 0;
        for (uint64_t b : usage_.total_current) in_use += b;
        if (in_use + bytes > total_capacity_)
            throw OutOfMemory(describe() + "; this rank's bytes in all places would be " + std::to_string(in_use + bytes) +
                                  " B, over its " + std::to_string(total_capacity_) + " B (" + total_capacity_why_ + ")",
                              bytes, category, where);
    }
    if (bytes > 0) {
        t.data = raw_alloc(bytes, where);
        if (t.data == nullptr) throw OutOfMemory(describe(), bytes, category, where);
    }
    usage_.current[w][c] += bytes;
    usage_.total_current[w] += bytes;
    if (usage_.current[w][c] > usage_.peak[w][c]) usage_.peak[w][c] = usage_.current[w][c];
    if (usage_.total_current[w] > usage_.total_peak[w]) usage_.total_peak[w] = usage_.total_current[w];
    return t;
}

void Backend::free(Tensor& t) {
    if (t.numel == 0 && t.data == nullptr) return;
    const uint64_t bytes = reserved_bytes(t);
    const int w = static_cast<int>(t.where), c = static_cast<int>(t.category);
    if (t.data != nullptr) raw_free(t.data, t.where);
    usage_.current[w][c] -= bytes;
    usage_.total_current[w] -= bytes;
    t = Tensor{};
}

void Backend::reset_peaks() {
    usage_.peak = usage_.current;
    usage_.total_peak = usage_.total_current;
}

uint64_t Backend::host_rss_peak() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("VmHWM:", 0) == 0) {
            unsigned long long kb = 0;
            if (std::sscanf(line.c_str() + 6, "%llu", &kb) == 1) return kb * 1024ULL;
        }
    }
    return 0;
}

void Backend::reset_host_rss_peak() {
    // Writing 5 resets the peak RSS (VmHWM) to the current RSS (Linux >= 4.0,
    // Documentation/filesystems/proc.rst "clear_refs").
    std::ofstream f("/proc/self/clear_refs");
    if (f) f << "5";
}

double Backend::now() {
    synchronize();
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

}  // namespace zeromem::runtime
