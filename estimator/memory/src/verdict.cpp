// The verdicts of an estimate (verdict_band.h set_verdicts): fits / tight / oom for the GPU and the host,
// overall and per phase, by one rule.
#include "zeromem/verdict_band.h"

#include "zeromem/util.h"

namespace zeromem {

namespace {

// The three-way GPU verdict of `total` bytes per GPU. Without an
// architecture the estimate holds model states only, so "fits" needs the
// margin to cover the activations a dense decoder of that size would store
// (`allowance`, dense_decoder_allowance); a margin that does not is "tight".
const char* gpu_verdict_of(const EstimateInput& in, uint64_t total, uint64_t allowance) {
    const uint64_t cap = *in.cluster.gpu_memory;
    if (total > cap) return "oom";
    if (!in.model.arch) return total + allowance <= cap ? "fits" : "tight";
    if (in.convention == Convention::full) return banded_verdict_word(total, cap, verdict_band().gpu_under);
    return "fits";
}

// The host verdict of `need` bytes per node: "tight" inside the error band the ledger measures for host RAM.
const char* host_verdict_of(const EstimateInput& in, uint64_t need) {
    const double under = in.convention == Convention::full ? verdict_band().host_under : 0.0;
    return banded_verdict_word(need, *in.cluster.host_memory, under);
}

}  // namespace

void set_verdicts(const EstimateInput& in, Estimate& out) {
    if (!in.model.arch) {
        out.activation_allowance = dense_decoder_allowance(in, out.activation_allowance_how);
        out.notes.push_back("no architecture: the estimate counts model states only; --seq-len and --micro-batch "
                            "size only the activation allowance the GPU verdict leaves room for (" +
                            format_gib(double(out.activation_allowance)) + " GiB)");
    }
    if (in.cluster.gpu_memory) {
        out.fits_gpu = out.per_gpu.total <= *in.cluster.gpu_memory;
        out.gpu_verdict = gpu_verdict_of(in, out.per_gpu.total, out.activation_allowance);
        for (PhaseMemory& p : out.phases) p.gpu_verdict = gpu_verdict_of(in, p.per_gpu.total, out.activation_allowance);
    }
    if (in.cluster.host_memory) {
        out.fits_host = out.per_node.host_memory <= *in.cluster.host_memory;
        out.host_verdict = host_verdict_of(in, out.per_node.host_memory);
        for (PhaseMemory& p : out.phases) p.host_verdict = host_verdict_of(in, p.per_node.host_memory);
    }
}

std::string tight_words(const Estimate& e) {
    if (!e.activation_allowance_how.empty())  // set by set_verdicts without an architecture
        return "tight: the margin does not cover the activation allowance of " +
               format_gib(double(e.activation_allowance)) + " GiB (no architecture: model states only)";
    return "tight: within the estimate's error band below the GPU capacity";
}

std::string verdict_words(const std::string& verdict) {
    return verdict == "oom" ? "does not fit" : verdict;
}

}  // namespace zeromem
