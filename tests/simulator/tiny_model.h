// The hand-written 2-layer model of the simulator tests (h = 64, 4 heads,
// gated MLP 256, vocab 128): 147,776 parameters, every tensor small enough
// to write out by hand in a test.
#pragma once

#include "zeromem/estimate.h"
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

/// The tiny model on 2 GPUs at `stage`: sequence 16, micro batch 1, fused
/// optimizer, reduce bucket 20,000 elements; at stage 3 the norms (64
/// elements) persist and the matrices are partitioned (persistence
/// threshold 100).
inline EstimateInput tiny_input(int stage) {
    EstimateInput in;
    in.model.arch = tiny_arch();
    in.model.params = 147776;
    in.model.largest_layer_params = 16384;
    in.cluster.gpus = 2;
    in.train.seq_len = 16;
    in.train.micro_batch = 1;
    in.train.fused_optimizer = true;
    in.zero.stage = stage;
    in.zero.reduce_bucket_size = 20000;
    in.zero.stage3_param_persistence_threshold = 100;
    return in;
}

}  // namespace zeromem::sim::testing
