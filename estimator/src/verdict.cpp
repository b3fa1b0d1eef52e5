// The verdicts of an estimate (verdict_band.h set_verdicts): fits / tight / oom for the GPU and the host.
#include "zeromem/verdict_band.h"

#include "zeromem/util.h"

namespace zeromem {

namespace {

// The three-way GPU verdict. Without an architecture the estimate holds
// model states only, so "fits" needs the margin to cover the activations a
// dense decoder of that size would store (dense_decoder_allowance); a margin
// that does not is "tight".
void set_gpu_verdict(const EstimateInput& in, Estimate& out) {
    if (!in.model.arch) {
        out.activation_allowance = dense_decoder_allowance(in, out.activation_allowance_how);
        out.notes.push_back("no architecture: the estimate counts model states only; --seq-len and --micro-batch "
                            "size only the activation allowance the GPU verdict leaves room for (" +
                            format_gib(double(out.activation_allowance)) + " GiB)");
    }
    if (!out.fits_gpu) return;
    if (!*out.fits_gpu) out.gpu_verdict = "oom";
    else if (!in.model.arch)
        out.gpu_verdict = out.per_gpu.total + out.activation_allowance <= *in.cluster.gpu_memory ? "fits" : "tight";
    else if (in.convention == Convention::full)
        out.gpu_verdict = banded_verdict(out.per_gpu.total, *in.cluster.gpu_memory, verdict_band().gpu_under);
    else out.gpu_verdict = "fits";
}

// The host verdict: "tight" inside the error band the ledger measures for host RAM.
void set_host_verdict(const EstimateInput& in, Estimate& out) {
    if (!out.fits_host) return;
    const double under = in.convention == Convention::full ? verdict_band().host_under : 0.0;
    out.host_verdict = banded_verdict(out.per_node.host_memory, *in.cluster.host_memory, under);
}

}  // namespace

void set_verdicts(const EstimateInput& in, Estimate& out) {
    if (in.cluster.gpu_memory) out.fits_gpu = out.per_gpu.total <= *in.cluster.gpu_memory;
    if (in.cluster.host_memory) out.fits_host = out.per_node.host_memory <= *in.cluster.host_memory;
    set_gpu_verdict(in, out);
    set_host_verdict(in, out);
}

}  // namespace zeromem
