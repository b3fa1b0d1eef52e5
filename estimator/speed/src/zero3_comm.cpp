// The bytes of ZeRO-3's collectives per micro-step (zeromem/zero3_comm.h).
#include "zeromem/zero3_comm.h"

#include <algorithm>

namespace zeromem {

Zero3CommVolume zero3_comm_volume(const EstimateInput& in, double trainable) {
    Zero3CommVolume v;
    const auto& z = in.zero;
    if (z.stage != 3) return v;
    const int64_t nd = in.cluster.data_parallel(), g = in.cluster.gpus_per_node();
    const double w = double(dtype_bytes(in.train.communication_dtype.value_or(in.train.dtype)));
    const double psi = double(in.model.params);
    const int64_t m = z.partition_size(nd);
    v.gather_group = m;
    v.backward_group = z.hpz_active() ? std::min(z.zero_hpz_partition_size, in.cluster.gpus) : m;
    v.replicas = nd / std::max<int64_t>(1, m);
    // qwZ: 1 B per element + one fp32 scale per CUDAQuantizer group of <= 8000
    // elements (partition_parameters.py CUDAQuantizer.quantize).
    const double weight_bytes = z.zero_quantized_weights ? 1.0 + 4.0 / 8000.0 : w;
    v.forward_gather = psi * weight_bytes;
    v.backward_gather = psi * weight_bytes;
    // qgZ: int4 (0.5 B per element) + fp32 scales, here one per 2048-element
    // group at most (all_to_all_quant_reduce groups = max(rows, cols, N) of
    // a matrix, e.g. 4096 x 4096 -> 4096 groups of 4096), on several nodes only.
    v.qgz = z.zero_quantized_gradients && in.cluster.nodes > 1;
    v.gradient_reduce = trainable * (v.qgz ? 0.5 + 4.0 / 4096.0 : w);
    v.replica_allreduce = v.replicas > 1 ? trainable * w / double(m) : 0;
    auto spans = [&](int64_t group) { return group > g; };  // contiguous ranks: node-local when it fits in one
    const bool multi = in.cluster.nodes > 1;
    if (multi && spans(v.gather_group)) v.cross_node += v.forward_gather;
    if (multi && spans(v.backward_group)) v.cross_node += v.backward_gather;
    if (multi && (v.qgz || spans(v.gather_group))) v.cross_node += v.gradient_reduce;
    if (multi && v.replicas > 1) v.replica_cross_node = v.replica_allreduce;  // replicas sit on other nodes
    v.cross_node += v.replica_cross_node;
    return v;
}

}  // namespace zeromem
