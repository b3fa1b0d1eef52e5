// The hand-written 2-layer model of the simulator tests (h = 64, 4 heads,
// gated MLP 256, vocab 128): 147,776 parameters, every tensor small enough
// to write out by hand in a test.
#pragma once

#include "zeromem/model.h"

namespace zeromem::sim::testing {

inline ModelArch tiny_arch() {
    ModelArch a;
    a.name = "tiny";
    a.family = "llama";
    a.hidden_size = 64;
    a.num_layers = 2;
    a.num_heads = 4;
    a.num_kv_heads = 4;
    a.head_dim = 16;
    a.ffn_size = 256;
    a.vocab_size = 128;
    a.gated_mlp = true;
    return a;
}

}  // namespace zeromem::sim::testing
