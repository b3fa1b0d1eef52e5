// The counting primitives shared by the parameter count (param_count.cpp) and the vision towers
// (vision_towers.cpp, family_vision_language.cpp); private to the library.
#pragma once

#include <cstdint>

namespace zeromem::model_detail {

using u64 = uint64_t;

inline u64 u(int64_t v) { return static_cast<u64>(v); }

// Parameters of a linear layer in -> out, with or without bias.
inline u64 linear(int64_t in, int64_t out, bool bias) { return u(in) * u(out) + (bias ? u(out) : 0); }

inline u64 mlp_params(int64_t h, int64_t f, bool gated, bool bias) {
    return linear(h, f, bias) * (gated ? 2 : 1) + linear(f, h, bias);
}

}  // namespace zeromem::model_detail
