// Pieces of resolve_request (request.cpp) that live in files of their own:
// the model (request_model.cpp), the cluster and capacities
// (request_cluster.cpp), and the small checks they share.
#pragma once

#include "zeromem/request.h"

#include <cstdint>
#include <string>

namespace zeromem::request_detail {

/// Larger than any cluster built; keeps the arithmetic far from overflow.
constexpr int64_t kMaxGpus = 1 << 20;
/// The GPUs of a typical training node (DGX A100, DGX H100: 8; a 16-GPU DGX-2 says --nodes 1).
constexpr int64_t kGpusPerTypicalNode = 8;

/// `v`, or InputError naming `flag` when it is not positive.
int64_t positive(int64_t v, const char* flag);

/// True when a size is written with a decimal unit (KB, MB, GB, TB).
bool decimal_unit(const std::string& text);

/// The model source (--params, --model or --hf-config), the module tree over
/// it (module_tree_request.cpp) and --largest-layer-params into r.input.model.
void resolve_model(const Request& req, const std::string& data_dir, Resolved& r);
/// The GPU count and layout (--gpus, --nodes, --tp, --pp) into `cluster`.
void resolve_parallelism(const Request& req, ClusterSettings& cluster, Provenance& prov);
/// --ep-size and --moe-capacity-factor.
void resolve_moe_flags(const Request& req, Resolved& r);
/// --host-memory and --host-reserve: the usable host RAM per node.
void resolve_host_capacity(const Request& req, Resolved& r);
/// --gpu / --gpu-memory (and the host capacity): the device capacity.
void resolve_device_memory(const Request& req, const std::string& data_dir, Resolved& r);

}  // namespace zeromem::request_detail
