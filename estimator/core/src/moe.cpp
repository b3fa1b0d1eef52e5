// Mixture-of-experts: expert parallelism and the MoE block's activation
// terms. Sources are cited per function in zeromem/moe.h.
#include "zeromem/moe.h"

#include "zeromem/input.h"
#include "zeromem/model.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace zeromem {
namespace {

uint64_t ceil_div_u(uint64_t a, uint64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

std::string n2s(uint64_t v) { return std::to_string(v); }

std::string real(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
}

// Routed-expert parameters of the model (0 without an architecture or for
// a dense one).
uint64_t routed_expert_params(const EstimateInput& in) {
    if (!in.model.arch || in.model.arch->num_experts <= 0) return 0;  // dense: no routed experts to count
    return shared_param_count(*in.model.arch)->routed_experts;
}

}  // namespace

ExpertSplit expert_split(const EstimateInput& in) {
    ExpertSplit s;
    const uint64_t N = static_cast<uint64_t>(std::max<int64_t>(1, in.cluster.data_parallel()));
    const uint64_t ep = static_cast<uint64_t>(std::max<int64_t>(1, in.moe.ep()));
    const uint64_t routed = std::min(routed_expert_params(in), in.model.params);
    s.non_expert = in.model.params - routed;
    s.expert_rank = routed / ep;  // E_p divides num_experts (validate_moe), so this is exact
    s.held = s.non_expert + s.expert_rank;
    s.expert_dp = std::max<uint64_t>(1, N / ep);
    s.partition = ceil_div_u(s.non_expert, N) + ceil_div_u(s.expert_rank, s.expert_dp);
    return s;
}

void validate_moe(const EstimateInput& in) {
    const MoeSettings& m = in.moe;
    if (!(m.capacity_factor > 0) || !std::isfinite(m.capacity_factor))
        throw InputError("--moe-capacity-factor: must be a positive number");
    if (!m.ep_size) return;
    const int64_t ep = *m.ep_size;
    if (ep < 1) throw InputError("--ep-size: must be a positive integer, got " + std::to_string(ep));
    const ModelArch* a = in.model.arch ? &*in.model.arch : nullptr;
    const bool moe = a && a->num_experts > 0 && a->num_moe_layers > 0;
    if (!moe) {
        if (ep > 1)
            throw InputError(std::string("--ep-size: expert parallelism needs a mixture-of-experts model") +
                             (a ? "; '" + a->name + "' is dense" : "; give --model or --hf-config (--params has no experts)"));
        return;
    }
    if (a->num_experts % ep != 0)
        throw InputError("--ep-size: " + std::to_string(ep) + " does not divide the model's " +
                         std::to_string(a->num_experts) + " experts (deepspeed/moe/layer.py MoE: num_experts % ep_size == 0)");
    const int64_t nd = in.cluster.data_parallel();
    if (nd % ep != 0)
        throw InputError("--ep-size: " + std::to_string(ep) + " does not divide the data-parallel size N_d = " +
                         std::to_string(nd) + " (deepspeed/utils/groups.py _create_expert_and_data_parallel)");
    if (ep > 1 && (in.cluster.tp > 1 || in.cluster.pp > 1))
        throw InputError("--ep-size: expert parallelism together with --tp/--pp is not modelled by zeromem");
}

int64_t moe_capacity(int64_t tokens, int64_t experts, int64_t k, double capacity_factor, int64_t min_capacity) {
    if (tokens <= 0 || experts <= 0 || k <= 0)
        throw InputError("MoE capacity: tokens, experts and top-k must be positive");
    const double c = std::ceil(double(tokens) / double(experts) * (capacity_factor * double(k)));
    // Below 2^53 the double is exact and the conversion well defined; no
    // real capacity comes near it (C <= k · S for any factor <= E).
    if (!(c < 9007199254740992.0))
        throw InputError("--moe-capacity-factor " + real(capacity_factor) + ": expert capacity C = " + real(c) +
                         " tokens overflows 64-bit bytes (at most 2^53 tokens)");
    return std::max<int64_t>(static_cast<int64_t>(c), min_capacity);
}

namespace {

std::vector<MoeTerm> hf_terms(const ModelArch& a, uint64_t S, uint64_t bm) {
    const uint64_t E = static_cast<uint64_t>(a.num_experts), k = static_cast<uint64_t>(a.num_experts_per_tok);
    const uint64_t h = static_cast<uint64_t>(a.hidden_size);
    const std::string src = "transformers models/" + (a.model_type.empty() ? a.family : a.model_type) +
                            " sparse MoE block forward";
    std::vector<MoeTerm> t;
    t.push_back({"MoE router logits and probabilities",
                 "S · E · (b_m + 4) per MoE block (router logits, their fp32 softmax kept for backward)",
                 "S=" + n2s(S) + " tokens, E=" + n2s(E) + ", b_m=" + n2s(bm),
                 src + " (router Linear(h, E), softmax(router_logits, dtype=float32))", S * E * (bm + 4), false});
    t.push_back({"MoE routed token copies (dropless)",
                 "2 · k · S · h · b_m per MoE block (each token gathered for its k experts, and the k expert "
                 "outputs kept for the routing-weight product)",
                 "k=" + n2s(k) + ", S=" + n2s(S) + ", h=" + n2s(h) + ", b_m=" + n2s(bm),
                 src + " (hidden_states[token_idx] per expert, expert output * routing_weights, index_add_)",
                 2 * k * S * h * bm, false});
    return t;
}

// Refuses a DeepSpeed-MoE term whose bytes, counted in double, would not
// fit 64-bit bytes (huge capacity factors): the flag is named.
uint64_t checked_bytes(double bytes, const MoeSettings& m, const char* term) {
    if (!(bytes < 4611686018427387904.0))  // 2^62: a block's terms summed still fit 64 bits
        throw InputError("--moe-capacity-factor " + real(m.capacity_factor) + ": " + term +
                         " overflows 64-bit bytes; give a smaller factor");
    return static_cast<uint64_t>(bytes);
}

std::vector<MoeTerm> deepspeed_terms(const ModelArch& a, const MoeSettings& m, uint64_t S, uint64_t bm) {
    const int64_t Ei = a.num_experts, ki = a.num_experts_per_tok;
    const uint64_t E = static_cast<uint64_t>(Ei), k = static_cast<uint64_t>(ki);
    const uint64_t h = static_cast<uint64_t>(a.hidden_size), fe = static_cast<uint64_t>(a.expert_ffn_size);
    const uint64_t C = static_cast<uint64_t>(
        moe_capacity(static_cast<int64_t>(S), Ei, ki, m.capacity_factor, m.min_capacity));
    const std::string caps = "C = max(ceil(k · S / E · capacity_factor), min_capacity) = " + n2s(C) +
                             " (capacity_factor " + real(m.capacity_factor) + ", min_capacity " +
                             n2s(static_cast<uint64_t>(m.min_capacity)) + ")";
    const char* src = "DeepSpeed v0.19.6 deepspeed/moe/sharded_moe.py";
    std::vector<MoeTerm> t;
    t.push_back({"MoE router (fp32 gate)", "4 · S · (h + E) per MoE block (fp32 gate input, fp32 gates)",
                 "S=" + n2s(S) + " tokens, h=" + n2s(h) + ", E=" + n2s(E),
                 std::string(src) + " TopKGate.forward (input.float(), fp32 wg), topkgating (softmax)",
                 4 * S * (h + E), false});
    t.push_back({"MoE dispatched tokens (capacity)",
                 "(E · C + k · S) · h · b_m per MoE block (expert input E x C x h after the all-to-all, routed "
                 "outputs kept for the gate product); " + caps,
                 "E=" + n2s(E) + ", C=" + n2s(C) + ", k=" + n2s(k) + ", S=" + n2s(S) + ", h=" + n2s(h) + ", b_m=" + n2s(bm),
                 std::string(src) + " MOELayer.forward (_sparse_encode, _AllToAll, experts, _sparse_decode)",
                 checked_bytes((double(E) * double(C) + double(k * S)) * double(h * bm), m, "MoE dispatched tokens"),
                 false});
    const uint64_t rows = E * C > k * S ? E * C - k * S : 0;
    const uint64_t per_row = (a.gated_mlp ? 4 : 2) * fe * bm;
    const uint64_t padding = checked_bytes(double(rows) * double(per_row), m, "MoE capacity padding");
    t.push_back({"MoE capacity padding in the experts",
                 "max(0, E · C - k · S) rows · (4 gated | 2 plain) · f_e · b_m per MoE block (expert MLP rows beyond "
                 "the k · S the activation formula counts)",
                 "rows=" + n2s(rows) + ", f_e=" + n2s(fe) + ", b_m=" + n2s(bm),
                 std::string(src) + " MOELayer.forward (experts run on E x C slots)", padding, false});
    if (m.ep() > 1)
        t.push_back({"MoE all-to-all buffers", "2 · E · C · h · b_m (send and receive buffers of one all-to-all)",
                     "E=" + n2s(E) + ", C=" + n2s(C) + ", h=" + n2s(h) + ", b_m=" + n2s(bm),
                     std::string(src) + " _AllToAll.forward (dist.all_to_all_single into a new tensor)",
                     checked_bytes(2.0 * double(E) * double(C) * double(h * bm), m, "MoE all-to-all buffers"), true});
    return t;
}

}  // namespace

std::vector<MoeTerm> moe_activation_terms(const ModelArch& arch, const MoeSettings& moe, int64_t micro_batch,
                                          int64_t seq_len, uint64_t bm) {
    if (arch.num_experts <= 0 || arch.num_moe_layers <= 0) return {};
    if (micro_batch <= 0 || seq_len <= 0) throw InputError("MoE activations: micro batch and sequence must be positive");
    const uint64_t S = static_cast<uint64_t>(micro_batch) * static_cast<uint64_t>(seq_len);
    return moe.deepspeed_moe() ? deepspeed_terms(arch, moe, S, bm) : hf_terms(arch, S, bm);
}

}  // namespace zeromem
