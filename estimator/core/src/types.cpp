#include "zeromem/types.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace zeromem {

const char* to_string(Dtype d) {
    switch (d) {
        case Dtype::fp32: return "fp32";
        case Dtype::fp16: return "fp16";
        case Dtype::bf16: return "bf16";
    }
    return "?";
}

Dtype parse_dtype(const std::string& text, const std::string& field) {
    const std::string t = to_lower(text);
    if (t == "fp32" || t == "float32" || t == "float") return Dtype::fp32;
    if (t == "fp16" || t == "float16" || t == "half") return Dtype::fp16;
    if (t == "bf16" || t == "bfloat16") return Dtype::bf16;
    throw InputError(field + ": '" + text + "' is not a dtype (use fp32, fp16 or bf16)");
}

const char* to_string(OffloadDevice d) {
    switch (d) {
        case OffloadDevice::none: return "none";
        case OffloadDevice::cpu: return "cpu";
        case OffloadDevice::nvme: return "nvme";
    }
    return "?";
}

OffloadDevice parse_offload_device(const std::string& text, const std::string& field) {
    const std::string t = to_lower(text);
    if (t == "none") return OffloadDevice::none;
    if (t == "cpu") return OffloadDevice::cpu;
    if (t == "nvme") return OffloadDevice::nvme;
    throw InputError(field + ": '" + text + "' is not an offload device (use none, cpu or nvme)");
}

const char* to_string(Checkpointing c) {
    switch (c) {
        case Checkpointing::none: return "none";
        case Checkpointing::full: return "full";
        case Checkpointing::selective: return "selective";
    }
    return "?";
}

Checkpointing parse_checkpointing(const std::string& text, const std::string& field) {
    const std::string t = to_lower(text);
    if (t == "none" || t == "off" || t == "false" || t == "0") return Checkpointing::none;
    if (t == "full" || t == "on" || t == "true" || t == "1") return Checkpointing::full;
    if (t == "selective") return Checkpointing::selective;
    throw InputError(field + ": '" + text + "' is not a checkpointing mode (use none, full or selective)");
}

// to_string(Optimizer), parse_optimizer: estimator/src/optimizer_state.cpp.

const char* to_string(Convention c) {
    switch (c) {
        case Convention::paper: return "paper";
        case Convention::deepspeed: return "deepspeed";
        case Convention::full: return "full";
    }
    return "?";
}

Convention parse_convention(const std::string& text, const std::string& field) {
    const std::string t = to_lower(text);
    if (t == "paper") return Convention::paper;
    if (t == "deepspeed") return Convention::deepspeed;
    if (t == "full") return Convention::full;
    throw InputError(field + ": '" + text + "' is not a convention (use paper, deepspeed or full)");
}

namespace {
// The numeric parts of a dotted version, up to four ("2.8.0+cu128" -> 2, 8,
// 0; a local or pre-release suffix after '+' or a letter ends the last part).
// No allocation: the estimator compares versions on every estimate.
struct VersionParts {
    long p[4] = {0, 0, 0, 0};
};

VersionParts version_parts(const std::string& v, const std::string& field) {
    VersionParts out;
    std::size_t i = 0;
    int n = 0;
    while (i < v.size() && n < 4) {
        std::size_t j = i;
        long value = 0;
        while (j < v.size() && v[j] >= '0' && v[j] <= '9' && j - i < 9) value = value * 10 + (v[j++] - '0');
        if (j == i) break;
        out.p[n++] = value;
        if (j >= v.size() || v[j] != '.') break;
        i = j + 1;
    }
    if (n == 0) throw InputError(field + ": '" + v + "' is not a version (e.g. 2.8 or 0.19.6)");
    return out;
}
}  // namespace

int compare_versions(const std::string& a, const std::string& b, const std::string& field) {
    const VersionParts x = version_parts(a, field), y = version_parts(b, field);
    for (int i = 0; i < 4; ++i)
        if (x.p[i] != y.p[i]) return x.p[i] < y.p[i] ? -1 : 1;
    return 0;
}

}  // namespace zeromem
