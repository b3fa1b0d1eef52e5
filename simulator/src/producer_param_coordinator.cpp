// The ZeRO-3 parameter coordinator (producer.h): DeepSpeed v0.19.6
// runtime/zero/partitioned_param_coordinator.py (fetch, prefetch, release)
// with partition_parameters.py's coalesced all-gather.
#include "producer.h"

#include <algorithm>

namespace zeromem::sim::detail {

// partition_parameters.py all-gather: one flat buffer of
// sum(ceil(numel/N)*N) elements on the all-gather stream (with offloaded
// params, this rank's partition is first copied to the GPU).
void Producer::issue_allgather(const uint32_t* units, size_t count, uint32_t m) {
    Handle h;
    uint64_t padded = 0;
    for (size_t j = 0; j < count; ++j) padded += unit_padded_[units[j]];
    uint64_t staged = 0;
    if (off_par_) staged = alloc("offloaded_partition_copy", bm_ * padded / N_, ag_, m + 1);
    h.flat = alloc("allgather_flat_buffer", bm_ * padded, ag_, m + 1);
    release(staged, m + 1);
    h.first = handle_units_.size();
    h.count = count;
    handle_units_.insert(handle_units_.end(), units, units + count);
    for (size_t j = 0; j < count; ++j) {
        const uint32_t u = units[j];
        unit_state_[u] = 1;
        unit_handle_[u] = handles_.size();
        available_numel_ += unit_numel_[u];
    }
    handles_.push_back(std::move(h));
}

// AllGatherCoalescedHandle.wait: every param of the handle is built by a
// torch.cat of the per-rank slices (a copy); then the flat buffer goes.
void Producer::wait_handle(size_t hi, uint32_t m) {
    Handle& h = handles_[hi];
    if (h.done) return;
    for (size_t j = h.first; j < h.first + h.count; ++j) {
        const uint32_t u = handle_units_[j];
        for (uint64_t p : unit_np_params_[u]) gathered_[u].push_back(alloc("gathered_parameter", bm_ * p, ag_, m + 1));
        unit_state_[u] = 2;
    }
    release(h.flat, m + 1);
    h.done = true;
}

// _fetch_sub_module_impl: gather the module's missing params, wait, then
// (trace complete) prefetch ahead.
void Producer::fetch_sub_module(uint32_t m, size_t visit) {
    const uint32_t u = unit_[m];
    if (unit_numel_[u] > 0) {
        if (unit_state_[u] == 0) issue_allgather(&u, 1, m);
        if (unit_state_[u] == 1) wait_handle(unit_handle_[u], m);
    }
    if (complete_) prefetch(visit, m);
}

// Prefetch: walk the trace collecting units not available until
// min(stage3_prefetch_bucket_size, stage3_max_live_parameters - available)
// elements are collected; one coalesced all-gather.
void Producer::prefetch(size_t visit, uint32_t m) {
    const auto& z = in_.zero;
    const int64_t room = z.stage3_max_live_parameters - static_cast<int64_t>(available_numel_);
    const int64_t budget = std::min<int64_t>(z.stage3_prefetch_bucket_size, room);
    if (budget <= 0) return;
    std::vector<uint32_t>& units = prefetch_units_;
    units.clear();
    uint64_t numel = 0;
    size_t i = std::max(visit + 1, prefetch_cursor_);
    for (; i < visits_.size() && static_cast<int64_t>(numel) < budget; ++i) {
        const uint32_t u = unit_[visits_[i].module];
        if (unit_numel_[u] == 0 || unit_state_[u] != 0) continue;
        if (std::find(units.begin(), units.end(), u) != units.end()) continue;
        units.push_back(u);
        numel += unit_numel_[u];
    }
    prefetch_cursor_ = i;  // the walk is linear in the visits, not visits x look-ahead (MoE: ~640 experts ahead)
    if (!units.empty()) issue_allgather(units.data(), units.size(), m);
}

// release_sub_module: free the gathered params unless (trace complete) the
// unit is used again within stage3_max_reuse_distance elements.
void Producer::release_sub_module(uint32_t m, size_t visit) {
    const uint32_t u = unit_[m];
    if (unit_state_[u] != 2) return;
    if (complete_ && next_use_[visit] >= 0) {
        const uint64_t walked = visit_prefix_[static_cast<size_t>(next_use_[visit])] - visit_prefix_[visit + 1];
        if (static_cast<int64_t>(walked) < in_.zero.stage3_max_reuse_distance) return;
    }
    for (uint64_t id : gathered_[u]) release(id, m + 1);
    gathered_[u].clear();
    unit_state_[u] = 0;
    available_numel_ -= unit_numel_[u];
    if (next_use_[visit] >= 0) prefetch_cursor_ = std::min(prefetch_cursor_, static_cast<size_t>(next_use_[visit]));
}

void Producer::release_all_gathered() {
    prefetch_cursor_ = 0;
    for (size_t hi = 0; hi < handles_.size(); ++hi)
        if (!handles_[hi].done) wait_handle(hi, root_);
    for (uint32_t u = 0; u < unit_state_.size(); ++u) {
        if (unit_state_[u] != 2) continue;
        for (uint64_t id : gathered_[u]) release(id, u + 1);
        gathered_[u].clear();
        unit_state_[u] = 0;
        available_numel_ -= unit_numel_[u];
    }
    handles_.clear();
    handle_units_.clear();
}

}  // namespace zeromem::sim::detail
