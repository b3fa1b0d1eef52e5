// The load phase of the full convention: the GPU after deepspeed.initialize (and after a
// device_map load), before the first step.
#include "estimate_detail.h"

#include "zeromem/util.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace zeromem {

using namespace estimate_detail;

namespace estimate_detail {

// finish_gpu for the load phase: its own replayed allowance when there is one.
void finish_load_gpu(GpuMemory& m, const FullContext& c) {
    const ResidualSettings& r = c.in.residual;
    finish_gpu_with(m, c, r.load_fragmentation_bytes ? r.load_fragmentation_bytes : r.fragmentation_bytes);
}

// The load phase: deepspeed.initialize has built the engine and the ZeRO
// optimizer; Adam's m and v do not exist yet.
// The whole 16-bit module before DeepSpeed partitions or flattens it:
// trainable parameters in the model dtype plus the frozen storage.
uint64_t module_bytes(const FullContext& c) { return c.bm * c.Tr + to_bytes(c.frozen_bytes); }

// ZeRO-1/2 (stage_1_and_2.py __init__) flattens each parameter group on the
// GPU when the free memory holds the flat copy (DeepSpeed >= 0.18.7, PR
// #7828), else on the CPU. Unknown capacity: the GPU path.
bool zero12_flattens_on_gpu(const FullContext& c) {
    if (!c.facts.flattens_bit16_on_gpu_when_it_fits) return false;
    if (!c.in.cluster.gpu_memory) return true;
    const uint64_t used = c.proc.total() + module_bytes(c);
    return *c.in.cluster.gpu_memory >= used && *c.in.cluster.gpu_memory - used >= c.bm * c.Tr;
}

// The load path in effect: the given one, else one host copy per rank
// (from_pretrained without a device_map, under every launcher).
LoadPath effective_load_path(const EstimateInput& in) { return in.residual.load_path.value_or(LoadPath::host_copy); }

// Whether single-file loading adds the 16-bit state dict: only before
// transformers ~4.50, whose from_pretrained loads a non-sharded file's whole
// state dict before building the model; from #36033 (~4.50) the model is built
// on the meta device and filled one parameter at a time (transformers
// modeling_utils.py _load_pretrained_model).
bool single_file_state_dict(const EstimateInput& in) {
    return effective_load_path(in) == LoadPath::single_file &&
           stack_facts(in.stack).single_file_loads_whole_state_dict;
}

// device_map without zero.Init: from_pretrained materialises every
// parameter on the GPU in the load dtype before deepspeed.initialize casts
// the module (engine.py _configure_distributed_model, one parameter at a
// time): load bytes · Ψ on the GPU, more than the 16-bit module when the
// load dtype is fp32. Zero when the path does not apply.
GpuMemory device_map_load_gpu(const FullContext& c, const Explainer& ex) {
    GpuMemory m;
    const bool zero_init = c.in.zero.stage == 3 && c.in.zero.zero_init;
    if (zero_init || effective_load_path(c.in) != LoadPath::device_map) return m;
    const uint64_t lb = static_cast<uint64_t>(dtype_bytes(c.in.residual.load_dtype));
    m.parameters = lb * c.Pr;
    finish_load_gpu(m, c);
    if (ex.on)
        ex.term("load: the model in the load dtype on the GPU (device-map, before DeepSpeed casts it)",
                "load bytes · Ψ", "Ψ=" + num(double(c.Pr)) + ", load bytes=" + num(double(lb)), m.parameters,
                "transformers modeling_utils.py from_pretrained (device_map); DeepSpeed engine.py "
                "_configure_distributed_model");
    return m;
}

// Each DeepSpeed component of `m` raised to `other`'s where that is larger.
void raise_components(GpuMemory& m, const GpuMemory& other) {
    m.parameters = std::max(m.parameters, other.parameters);
    m.gradients = std::max(m.gradients, other.gradients);
    m.optimizer_states = std::max(m.optimizer_states, other.optimizer_states);
    m.activations = std::max(m.activations, other.activations);
    m.temporary_buffers = std::max(m.temporary_buffers, other.temporary_buffers);
}

// The load phase: deepspeed.initialize has built the engine and the ZeRO
// optimizer; Adam's m and v do not exist yet. Its peak is the largest of its
// moments: the module moved whole to the GPU (engine.py
// _configure_distributed_model, module.to(device)) before ZeRO-3 without
// zero.Init partitions it or ZeRO-1/2 flattens it (two 16-bit copies on the
// GPU when the flat copy is made there), then the optimizer's buffers.
GpuMemory load_gpu(const FullContext& c, const GpuMemory& st, const Explainer& ex, GpuMemory* peaks) {
    const terms::Sizes& s = c.sz;
    const auto& z = c.in.zero;
    GpuMemory ld;
    ld.master_weights = st.master_weights;
    ld.optimizer_states = ld.master_weights;
    GpuMemory whole;  // the module before partitioning / flattening
    if (s.stage == 3) {
        // hpZ: zero.Init gives every parameter, persistent ones too, a secondary partition.
        ld.parameters = st.parameters - terms::hpz_secondary_partition(s, false).bytes +
                        terms::hpz_secondary_partition(s, true).bytes;
        if (!z.zero_init) whole.parameters = module_bytes(c);
        // initialize_optimizer_states frees its fp32 gradient_buffer before
        // the IPG bucket and grad_partitions_flat_buffer are allocated: the
        // load peak is the larger of the two moments.
        const terms::Term init_buf = terms::zero3_init_gradient_buffer(s);
        const uint64_t after = st.gradients + sum_bytes(persistent_temporaries(s));
        if (init_buf.bytes > after) {
            ld.temporary_buffers = init_buf.bytes;
            sum_terms({init_buf}, "load", c, ex);
        } else {
            ld.gradients = st.gradients;
            ld.temporary_buffers = sum_terms(persistent_temporaries(s), "load", c, ex);
        }
    } else {
        ld.parameters = st.parameters;
        ld.gradients = terms::bf16_optimizer_fp32_grad_buffer(s).bytes;
        ld.temporary_buffers = sum_terms(persistent_temporaries(s), "load", c, ex);
        // initialize_optimizer_states: the fp32 gradient of zeros beside the
        // flat 16-bit group and the fp32 master, the load's last moment.
        const terms::Term init_grad = terms::zero12_init_fp32_grad_partition(s);
        ld.gradients += init_grad.bytes;
        if (ex.on && init_grad.bytes > 0)
            ex.term((std::string("gradients (load): ") + init_grad.name).c_str(), init_grad.formula,
                    "Tn=" + num(double(s.Tn)), init_grad.bytes, term_source(init_grad).c_str());
        // BF16_Optimizer flattens where the params are, the GPU (bf16_optimizer.py _setup_for_real_optimizer).
        if (s.bf16_optimizer || (s.stage >= 1 && zero12_flattens_on_gpu(c))) whole.parameters = module_bytes(c) + c.bm * c.Tr;
    }
    finish_load_gpu(ld, c);
    *peaks = ld;
    if (whole.parameters > 0) {
        finish_load_gpu(whole, c);
        if (ex.on)
            ex.term(s.stage == 3 ? "load: whole 16-bit module on every GPU before partitioning (no zero.Init)"
                                 : "load: 16-bit module + its flat copy while flattening on the GPU",
                    s.stage == 3 ? "b_m · Ψ_t + frozen" : "2 · b_m · Ψ_t + frozen",
                    "Ψ_t=" + num(double(c.Tr)) + ", b_m=" + num(double(c.bm)), whole.parameters,
                    s.stage == 3 ? "DeepSpeed v0.19.6 deepspeed/runtime/engine.py _configure_distributed_model (module.to(device))"
                                 : "DeepSpeed v0.19.6 deepspeed/runtime/zero/stage_1_and_2.py __init__ (flatten on the accelerator, >= 0.18.7)");
        // On a tie the earlier moment (the module before it is flattened or
        // partitioned) is the one reported.
        raise_components(*peaks, whole);
        if (whole.total >= ld.total) ld = whole;
    }
    const GpuMemory direct = device_map_load_gpu(c, ex);
    raise_components(*peaks, direct);
    return direct.total > ld.total ? direct : ld;
}

}  // namespace estimate_detail

}  // namespace zeromem
