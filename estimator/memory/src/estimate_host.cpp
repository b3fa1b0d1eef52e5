// Host RAM and NVMe of the full convention, per rank, then per node.
#include "estimate_detail.h"

#include "zeromem/util.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace zeromem {

using namespace estimate_detail;

namespace estimate_detail {

// NVMe bytes per node: the optimizer swapper writes fp32 params, optimizer
// states and fp32 gradients; parameter files are written at zero.Init.
uint64_t nvme_bytes(const FullContext& c) {
    const auto& z = c.in.zero;
    uint64_t per_rank = 0;
    if (z.offload_optimizer == OffloadDevice::nvme) per_rank += (4 + 4) * c.Tn + c.opt_state.total();
    if (z.offload_param == OffloadDevice::nvme) per_rank += c.bm * ceil_div(c.Pr, c.N);
    return per_rank * c.g;
}


// Host bytes per rank of the model at load without zero.Init, by load path
// (transformers modeling_utils.py from_pretrained): the model in the load dtype
// (plus frozen storage), with single_file also the 16-bit state dict (2 B
// per parameter of a single non-sharded checkpoint), with
// device_map only one module's parameters at a time (L · load bytes, an upper
// bound for one parameter; safetensors shards are file-backed page cache).
uint64_t host_model_per_rank(const FullContext& c, uint64_t lb, double frozen_load) {
    const uint64_t model = to_bytes(double(c.Tr) * double(lb) + frozen_load);
    switch (effective_load_path(c.in)) {
        case LoadPath::single_file: return single_file_state_dict(c.in) ? model + 2 * c.Pr : model;
        case LoadPath::host_copy: return model;
        case LoadPath::device_map: return c.L * lb;
    }
    return model;
}

// Per-rank host bytes summed by lifetime (and pinned), from terms::host_terms.
struct HostSums {
    uint64_t init = 0, backward = 0, lazy = 0, load_tmp = 0, save_rank = 0, save_node = 0, save_rank0 = 0,
             under_model_load = 0, before_init = 0, before_zero_optimizer = 0;
    uint64_t pinned_init = 0, pinned_backward = 0, pinned_lazy = 0;
};

// Sums the host terms by lifetime, explaining each non-zero one.
HostSums sum_host_terms(const FullContext& c, const Explainer& ex) {
    const auto& in = c.in;
    const auto& z = in.zero;
    const int s = z.stage;
    const uint64_t L = c.L;
    auto n2s = [&](uint64_t v) { return ex.on ? num(double(v)) : std::string(); };
    const uint64_t module_state = c.bm * c.Tr + to_bytes(c.frozen_bytes);
    uint64_t largest_gpu_opt = 0;
    if (z.offload_optimizer == OffloadDevice::none)
        largest_gpu_opt = 4 * (s == 0 && !c.sz.bf16_optimizer ? c.Tr : (s == 3 ? c.sz.sub : c.Tn));
    const bool gather_save = s == 3 && z.stage3_gather_16bit_weights_on_model_save;
    const std::vector<terms::HostTerm> list = terms::host_terms(c.sz, module_state, largest_gpu_opt, gather_save, c.bm * c.P);
    HostSums u;
    const std::string subst = ex.on ? "Tn=" + n2s(c.Tn) + ", sub=" + n2s(c.sz.sub) + ", b_m=" + n2s(c.bm) + ", b_a=" +
                                          n2s(c.ba) + ", L=" + n2s(L) + ", pin_memory " +
                                          (c.sz.pin_optimizer ? "true" : "false") + ", torch " + in.stack.torch +
                                          (c.sz.round_pinned ? " (pinned sizes rounded to powers of two)" : "")
                                    : std::string();
    for (const auto& t : list) {
        if (t.during_zero_init) u.under_model_load += t.bytes;
        if (t.built_before_zero_optimizer) u.before_zero_optimizer += t.bytes;
        switch (t.life) {
            case terms::HostLife::init: u.init += t.bytes; if (t.pinned) u.pinned_init += t.bytes; break;
            case terms::HostLife::backward: u.backward += t.bytes; if (t.pinned) u.pinned_backward += t.bytes; break;
            case terms::HostLife::lazy: u.lazy += t.bytes; if (t.pinned) u.pinned_lazy += t.bytes; break;
            case terms::HostLife::load_transient:
                (t.before_init ? u.before_init : u.load_tmp) = std::max(t.before_init ? u.before_init : u.load_tmp, t.bytes);
                break;
            case terms::HostLife::save_transient: (t.once_per_node ? u.save_node : u.save_rank) += t.bytes; break;
        }
        if (t.rank0_only) u.save_rank0 += t.bytes;  // inside save_node: rank 0's node
        if (ex.on && t.bytes > 0) {
            static const char* life_names[] = {"from load", "from the first backward", "from the first step",
                                               "while loading", "while saving a checkpoint"};
            ex.term((std::string("host (") + (t.rank0_only ? "rank 0 only" : t.once_per_node ? "per node" : "per rank") + ", " +
                     life_names[static_cast<int>(t.life)] + (t.pinned ? ", pinned" : "") + "): " + t.name).c_str(),
                    t.formula, subst, t.bytes, term_source(terms::Term{t.name, t.formula, t.source, t.bytes}).c_str());
        }
    }
    return u;
}

// Host bytes per node of the load phase: the model as loaded (zero.Init,
// single-file, device-map or whole per rank) or the engine's init buffers.
uint64_t host_load_phase(const FullContext& c, const HostSums& u, uint64_t overhead, const Explainer& ex) {
    const auto& in = c.in;
    const auto& z = in.zero;
    const int s = z.stage;
    const uint64_t g = c.g, L = c.L;
    auto n2s = [&](uint64_t v) { return ex.on ? num(double(v)) : std::string(); };
    const uint64_t lb = static_cast<uint64_t>(dtype_bytes(in.residual.load_dtype));
    const bool zero_init = s == 3 && z.zero_init;
    // Frozen parameters are loaded in the load dtype like the rest and only
    // then frozen (quantized ones are loaded quantized).
    const double frozen_load = in.train.load_in_bits != 16 ? c.frozen_bytes : double(c.Fr) * double(lb);
    const LoadPath lp = effective_load_path(in);
    const uint64_t host_model =
        overhead + g * (zero_init ? L * lb + u.under_model_load : host_model_per_rank(c, lb, frozen_load));
    // The optimizer's host states and the pinned offload/swap pools are
    // allocated while deepspeed.initialize builds the engine, after the
    // materialised module has moved to the GPU (or, under zero.Init, after
    // its last module was built and partitioned); the load transients
    // (defragment staging, pageable sources of pinned copies, the init
    // gradient buffer) come one at a time on top of what init built.
    const uint64_t host_init = overhead + g * (u.init + u.load_tmp);
    const uint64_t load = std::max({host_model, host_init, overhead + g * (u.before_init > 0 ? u.before_init + u.before_zero_optimizer : 0)});
    if (ex.on) ex.term("host: model load (per node)",
            zero_init ? "g · (L · load bytes + process overhead) (zero.Init: one module at a time per rank)"
            : single_file_state_dict(in) ? "g · (Ψ · load bytes + 2 · Ψ state dict + process overhead) (single-file)"
            : lp == LoadPath::device_map ? "g · (L · load bytes + process overhead) (device-map: straight to the GPU)"
                                         : "g · (Ψ · load bytes + process overhead) (every rank materialises the whole model)",
            "g=" + n2s(g) + ", " + (zero_init ? "L=" + n2s(L) : "Ψ=" + n2s(c.Pr) + ", L=" + n2s(L)) + ", load dtype " +
                to_string(in.residual.load_dtype) + ", load path " + (zero_init ? "zero.Init" : to_string(lp)),
            host_model, "transformers modeling_utils.py from_pretrained (low_cpu_mem_usage, device_map, "
                        "is_deepspeed_zero3_enabled -> zero.Init); DeepSpeed estimate_zero3_model_states_mem_needs");
    if (ex.on && host_init > host_model)
        ex.term("host: load phase (per node)",
                "max(model load, g · (buffers built by deepspeed.initialize + the largest load transient) + overhead)",
                "model load=" + n2s(host_model) + " B, engine init=" + n2s(host_init) + " B", load,
                "DeepSpeed v0.19.6 stage_1_and_2.py / stage3.py __init__, zero/utils.py defragment, swap_tensor/*.py");
    return load;
}

HostFigures host_memory_full(const FullContext& c, const Explainer& ex) {
    const auto& in = c.in;
    const uint64_t g = c.g;
    const HostSums u = sum_host_terms(c, ex);
    const uint64_t overhead = in.residual.host_process_overhead * g;  // every rank's process baseline
    HostFigures h;
    h.first_forward = overhead + g * u.init;
    h.first_backward = h.first_forward + g * u.backward;
    h.steady = h.first_backward + g * u.lazy;
    h.pinned_first = g * (u.pinned_init + u.pinned_backward);
    h.pinned_steady = h.pinned_first + g * u.pinned_lazy;
    h.pinned_init = g * u.pinned_init;
    h.nvme = nvme_bytes(c);
    h.save_extra = g * u.save_rank + u.save_node;
    h.save_rank0 = u.save_rank0;
    h.load = host_load_phase(c, u, overhead, ex);
    return h;
}

// The summary: components each at their own peak, totals at the peak phase,
// the first phase that overflows, and the per-node host figures.
void summarize_phases(const FullContext& c, const GpuMemory& st, uint64_t act_backward, const HostFigures& host,
                      uint64_t host_act, Estimate& out, const Explainer& ex) {
    const EstimateInput& in = c.in;
    // --- summary: components at their own peak, totals at the peak phase ---------
    auto& m = out.per_gpu;
    m = st;
    m.activations = act_backward;
    m.temporary_buffers = 0;
    for (const auto& p : out.phases) m.temporary_buffers = std::max(m.temporary_buffers, p.per_gpu.temporary_buffers);
    for (const auto& p : out.phases) m.activations = std::max(m.activations, p.per_gpu.activations);  // generation's KV cache
    const PhaseMemory* gpu_peak = &out.phases[0];
    const PhaseMemory* host_peak = &out.phases[0];
    for (const auto& p : out.phases) {
        if (p.per_gpu.total > gpu_peak->per_gpu.total) gpu_peak = &p;
        if (p.per_node.host_memory > host_peak->per_node.host_memory) host_peak = &p;
    }
    m.cuda_context = c.proc.cuda_context;
    m.nccl_buffers = c.proc.nccl_buffers;
    m.cublas_workspaces = c.proc.cublas_workspaces;
    m.process_baseline = c.proc.process_baseline;
    m.fragmentation = gpu_peak->per_gpu.fragmentation;
    m.allocated = gpu_peak->per_gpu.allocated;
    m.reserved = gpu_peak->per_gpu.reserved;
    m.total = gpu_peak->per_gpu.total;
    out.peak_phase = gpu_peak->name;
    out.host_peak_phase = host_peak->name;
    for (const auto& p : out.phases) {  // chronological: the first phase that overflows
        if (out.first_oom_phase.empty() && p.fits_gpu.has_value() && !*p.fits_gpu) out.first_oom_phase = p.name;
        if (out.first_host_oom_phase.empty() && p.fits_host.has_value() && !*p.fits_host)
            out.first_host_oom_phase = p.name;
    }
    auto& node = out.per_node;
    node.host_memory = host_peak->per_node.host_memory;
    node.host_pinned = host.pinned_steady;
    node.host_load = host.load;
    node.host_steady = host.steady + host_act;
    node.nvme = host.nvme;
    if (ex.on) {
        if (c.proc.terms)
            for (const auto& t : *c.proc.terms) ex.term(t.component.c_str(), t.formula, t.substituted, t.bytes, t.source.c_str());
        if (in.residual.fragmentation_bytes)
            ex.term("fragmentation",
                    "bytes from " + in.residual.fragmentation_source +
                        (in.residual.load_fragmentation_bytes
                             ? " (every phase but the load, which takes the same reading at its own allocated peak: " +
                                   num(double(*in.residual.load_fragmentation_bytes)) + " B)"
                             : " (every phase)"),
                    num(double(*in.residual.fragmentation_bytes)) + " B at the " + gpu_peak->name + " phase",
                    m.fragmentation, "PyTorch caching allocator reserve (c10/cuda/CUDACachingAllocator.cpp)");
        else
            ex.term("fragmentation", "fraction · allocated bytes of the phase (--fragmentation)",
                    num(in.residual.fragmentation_fraction) + " at the " + gpu_peak->name + " phase", m.fragmentation,
                    "PyTorch caching allocator reserve; a few percent of capacity");
    }
}

}  // namespace estimate_detail

}  // namespace zeromem
