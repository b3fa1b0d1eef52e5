// The activation allowance of a verdict without an architecture: what a
// dense decoder of the given parameter count would store (zeromem/estimate.h).
#include "zeromem/estimate.h"

#include "zeromem/util.h"

#include <algorithm>
#include <cmath>

namespace zeromem {

namespace {
uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
uint64_t to_bytes(double v) { return v <= 0 ? 0 : static_cast<uint64_t>(std::llround(v)); }
}  // namespace

DenseShape dense_decoder_shape(uint64_t params) {
    DenseShape d;
    const double p = double(params);
    d.layers = std::max<int64_t>(1, std::llround(std::cbrt(p / (12.0 * 128.0 * 128.0))));
    d.hidden = std::max<int64_t>(1, std::llround(std::sqrt(p / (12.0 * double(d.layers)))));
    d.heads = std::max<int64_t>(1, std::llround(double(d.hidden) / 128.0));
    return d;
}

uint64_t dense_decoder_allowance(const EstimateInput& in, std::string& how) {
    const auto& t = in.train;
    const DenseShape d = dense_decoder_shape(in.model.params);
    const int64_t tp = in.cluster.tp, pp = in.cluster.pp;
    const bool sp = t.sequence_parallel && tp > 1;
    const uint64_t layers = ceil_div(static_cast<uint64_t>(d.layers), static_cast<uint64_t>(pp));
    // 1F1B: the first stage holds up to pp micro batches (as the full estimate).
    const uint64_t in_flight = pp > 1 ? std::min<uint64_t>(uint64_t(pp), uint64_t(t.grad_accum)) : 1;
    const uint64_t per_layer = activation_bytes_per_layer(t.seq_len, t.micro_batch, d.hidden, d.heads, tp,
                                                          t.checkpointing, t.flash_attention, sp);
    const uint64_t recompute = t.checkpointing == Checkpointing::full
                                   ? activation_bytes_per_layer(t.seq_len, t.micro_batch, d.hidden, d.heads, tp,
                                                                Checkpointing::none, t.flash_attention, sp)
                                   : 0;
    const double sbh = double(t.seq_len) * double(t.micro_batch) * double(d.hidden);
    const double io = pp == 1 ? 5.0 * sbh : sbh;
    const double scale = t.dtype == Dtype::fp32 ? 2.0 : 1.0;
    const uint64_t bytes = to_bytes(scale * (double(layers * in_flight * per_layer) + double(recompute) + io));
    how = format_gib(double(bytes)) + " GiB, the activations of a dense decoder of " +
          std::to_string(in.model.params) + " parameters shaped as GPT-3 (h = 128 L, 12 h^2 per layer: L = " +
          std::to_string(d.layers) + ", h = " + std::to_string(d.hidden) + ", " + std::to_string(d.heads) +
          " heads; Brown et al. 2020 Table 2.1) by Korthikanti et al. 2022 (arXiv:2205.05198) Table 2: " +
          std::to_string(layers) + " layers x " + std::to_string(in_flight) + " in flight x " +
          std::to_string(per_layer) + " B per layer (s=" + std::to_string(t.seq_len) + ", b=" +
          std::to_string(t.micro_batch) + ", checkpointing " + to_string(t.checkpointing) +
          (t.flash_attention ? ", flash attention" : ", eager attention") + ", t=" + std::to_string(tp) + ")" +
          (recompute ? " + one recomputed layer " + std::to_string(recompute) + " B" : std::string()) + " + " +
          (pp == 1 ? "5" : "1") + " sbh for the embedding output and final norm" + (scale != 1.0 ? ", x2 for fp32" : "") +
          "; the logits are not counted (vocabulary unknown); give --model or --hf-config for the real activations";
    return bytes;
}

}  // namespace zeromem
