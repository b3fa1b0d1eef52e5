// The rows and provenance helpers the estimate's renderers share (report_rows.h).
#include "report_rows.h"

#include "zeromem/advice.h"
#include "zeromem/optimizer_state.h"
#include "zeromem/speed.h"
#include "zeromem/util.h"

namespace zeromem::report_detail {

namespace {

// Labels of the two optimizer-state rows (optimizer_state.h).
const char* first_state_label(Optimizer o) {
    const OptimizerInfo& i = optimizer_info(o);
    switch (o) {
        case Optimizer::sgd: case Optimizer::sgd_plain: return "SGD momentum";
        case Optimizer::adagrad: return "Adagrad sum of squares";
        case Optimizer::rmsprop: return "RMSprop square_avg";
        case Optimizer::adafactor: return "Adafactor m (only with beta1)";
        case Optimizer::lion: case Optimizer::paged_lion_32bit: return "Lion momentum (exp_avg)";
        case Optimizer::lion_8bit: case Optimizer::paged_lion_8bit: return "8-bit Lion momentum + absmax";
        default: break;
    }
    if (i.bits == 8) return "8-bit Adam m + absmax";
    return i.paged ? "paged Adam m (unified memory)" : "Adam first moment (m)";
}
const char* second_state_label(Optimizer o) {
    const OptimizerInfo& i = optimizer_info(o);
    if (o == Optimizer::adafactor) return "Adafactor v (factored r + c)";
    if (i.bits == 8) return "8-bit Adam v + absmax";
    return i.paged ? "paged Adam v (unified memory)" : "Adam second moment (v)";
}

}  // namespace

std::vector<Row> gpu_rows(const GpuMemory& m, Optimizer opt) {
    std::vector<Row> rows{
        {"parameters", "parameters", m.parameters, 1},
        {"gradients", "gradients", m.gradients, 1},
        {"optimizer_states", "optimizer states", m.optimizer_states, 1},
        {"master_weights", "fp32 master weights", m.master_weights, 2},
        {"momentum", first_state_label(opt), m.momentum, 2},
    };
    if (optimizer_info(opt).states == 2 || optimizer_info(opt).factored)
        rows.push_back({"variance", second_state_label(opt), m.variance, 2});
    rows.push_back({"activations", "activations", m.activations, 1});
    rows.push_back({"temporary_buffers", "temporary buffers", m.temporary_buffers, 1});
    rows.push_back({"cublas_workspaces", "cuBLAS/cuBLASLt workspaces", m.cublas_workspaces, 1});
    if (m.process_baseline > 0)  // the same in every phase: only with --calibration
        rows.push_back({"process_baseline", "process baseline (calibration profile)", m.process_baseline, 1});
    rows.push_back({"fragmentation", "fragmentation allowance", m.fragmentation, 1});
    rows.push_back({"cuda_context", "CUDA context", m.cuda_context, 1});
    rows.push_back({"nccl_buffers", "NCCL buffers", m.nccl_buffers, 1});
    return rows;
}

std::vector<Row> gpu_rows(const PhaseMemory& p, Optimizer opt) { return gpu_rows(p.per_gpu, opt); }
std::vector<Row> gpu_rows(const Estimate& e, Optimizer opt) { return gpu_rows(e.per_gpu, opt); }

std::vector<Row> node_rows(const Estimate& e) {
    const auto& n = e.per_node;
    return {
        {"host_memory", "host memory (peak)", n.host_memory, 1},
        {"host_pinned", "pinned (page-locked), in training", n.host_pinned, 2},
        {"host_load", "while loading the model", n.host_load, 2},
        {"host_steady", "while training", n.host_steady, 2},
        {"nvme", "NVMe", n.nvme, 1},
    };
}

// The phase whose GPU total is the peak (full convention), or none.
const PhaseMemory* peak_phase_of(const Estimate& e) {
    for (const auto& p : e.phases)
        if (p.name == e.peak_phase) return &p;
    return nullptr;
}

// Where one package's version came from ("built-in default",
// "--torch-version", "from $VIRTUAL_ENV=/x: torch-2.3.1.dist-info"): the
// parenthesised part of its provenance ("stack.torch").
std::string stack_source(const Resolved& res, const char* key) {
    const auto it = res.provenance.find(key);
    if (it == res.provenance.end()) return "built-in default";
    const std::size_t open = it->second.find(" (");
    if (open == std::string::npos || it->second.back() != ')') return it->second;
    return it->second.substr(open + 2, it->second.size() - open - 3);
}

std::string prov_of(const Resolved& res, const std::string& key, const std::string& fallback) {
    const auto it = res.provenance.find(key);
    return it == res.provenance.end() ? fallback : it->second;
}

// The advice for `e`, ranked by the speed model when the GPU preset and one
// node give it its hardware (the GPU's own intra-node interconnect), else in
// the recipe's order.
std::vector<Advice> advice_for(const Estimate& e, const Resolved& res) {
    const EstimateInput& in = res.input;
    std::optional<SpeedHardware> hw;
    if (res.gpu && in.cluster.nodes == 1) {
        try {
            hw = speed_hardware(*res.gpu, in.train.dtype, "", "", data_dir());
        } catch (const InputError&) {
            hw.reset();  // no peak for this dtype or no interconnect preset: recipe order
        }
    }
    return advise(in, e, hw ? &*hw : nullptr);
}

}  // namespace zeromem::report_detail
