// Optimizer state per implementation; sources in optimizer_state.h.
#include "zeromem/optimizer_state.h"

#include <algorithm>
#include <utility>

#include "zeromem/util.h"

namespace zeromem {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

//                                 name              st bits paged  factored bnb   implementation
const OptimizerInfo kInfos[] = {
    {"adamw",             2, 32, false, false, false, "FusedAdam / torch AdamW / DeepSpeedCPUAdam"},
    {"adam",              2, 32, false, false, false, "FusedAdam / torch Adam / DeepSpeedCPUAdam"},
    {"sgd",               1, 32, false, false, false, "torch.optim.SGD with momentum (momentum_buffer)"},
    {"sgd_nomomentum",    0, 32, false, false, false, "torch.optim.SGD, momentum 0 (no state)"},
    {"adagrad",           1, 32, false, false, false, "torch.optim.Adagrad (sum) / DeepSpeedCPUAdagrad (exp_avg_sq)"},
    {"rmsprop",           1, 32, false, false, false, "torch.optim.RMSprop (square_avg; momentum 0, not centered)"},
    {"lion",              1, 32, false, false, false, "DeepSpeed FusedLion / bitsandbytes Lion (exp_avg)"},
    {"lamb",              2, 32, false, false, false, "DeepSpeed FusedLamb (exp_avg, exp_avg_sq)"},
    {"adamw_8bit",        2, 8,  false, false, true,  "bitsandbytes AdamW8bit (Optimizer2State)"},
    {"paged_adamw_8bit",  2, 8,  true,  false, true,  "bitsandbytes PagedAdamW8bit (Optimizer2State, paged)"},
    {"paged_adamw_32bit", 2, 32, true,  false, true,  "bitsandbytes PagedAdamW32bit (Optimizer2State, paged)"},
    {"lion_8bit",         1, 8,  false, false, true,  "bitsandbytes Lion8bit (Optimizer1State)"},
    {"paged_lion_8bit",   1, 8,  true,  false, true,  "bitsandbytes PagedLion8bit (Optimizer1State, paged)"},
    {"paged_lion_32bit",  1, 32, true,  false, true,  "bitsandbytes PagedLion32bit (Optimizer1State, paged)"},
    {"adafactor",         1, 32, false, true,  false, "transformers Adafactor (factored second moment)"},
};

// Bytes of one state of `n` elements: uint8 plus an fp32 absmax per block
// for 8-bit states of tensors of at least min_8bit_size elements, else fp32.
std::pair<uint64_t, uint64_t> one_state(uint64_t n, int bits) {
    if (bits == 8 && n >= kBnbMin8bitSize) {
        const uint64_t absmax = 4 * ceil_div(n, kBnbBlockSize);
        return {n + absmax, absmax};
    }
    return {4 * n, 0};
}

void add_tensor(const OptimizerInfo& info, const StateTensor& t, bool beta1, OptimizerStateBytes& out) {
    const uint64_t n = t.numel();
    if (info.factored) {
        const uint64_t second = t.cols > 0 ? 4 * (t.rows + t.cols) : 4 * n;
        out.second += t.count * second;
        if (beta1) out.first += t.count * 4 * n;
        return;
    }
    if (info.states == 0) return;
    const auto [bytes, absmax] = one_state(n, info.bits);
    out.first += t.count * bytes;
    if (info.states == 2) out.second += t.count * bytes;
    const uint64_t states = uint64_t(info.states);
    out.constants += t.count * absmax * states;
    if (info.bits == 8 && n < kBnbMin8bitSize) out.fp32_small += t.count * n;
    if (info.paged && n >= kBnbPagedMin) out.paged += t.count * (bytes - absmax) * states;
}

}  // namespace

const OptimizerInfo& optimizer_info(Optimizer o) { return kInfos[static_cast<int>(o)]; }

const char* to_string(Optimizer o) { return optimizer_info(o).name; }

int optimizer_state_bytes(Optimizer o) { return static_cast<int>(optimizer_state_bytes_per_element(o)); }

double optimizer_state_bytes_per_element(Optimizer o) {
    const OptimizerInfo& i = optimizer_info(o);
    if (i.bits == 8) return i.states * (1.0 + 4.0 / double(kBnbBlockSize));
    return 4.0 * i.states;
}

const char* optimizer_names_help() {
    return "adamw (default; HF adamw_torch, adamw_torch_fused), adam, sgd (with momentum), sgd_nomomentum, adagrad, "
           "rmsprop, lion (lion_32bit), lamb, adamw_8bit (adamw_bnb_8bit), paged_adamw_8bit, paged_adamw_32bit, "
           "lion_8bit, paged_lion_8bit, paged_lion_32bit, adafactor";
}

Optimizer parse_optimizer(const std::string& text, const std::string& field) {
    const std::string t = to_lower(text);
    static const std::pair<const char*, Optimizer> aliases[] = {
        {"adamw_torch", Optimizer::adamw},        {"adamw_torch_fused", Optimizer::adamw},
        {"adamw_hf", Optimizer::adamw},           {"adamw_apex_fused", Optimizer::adamw},
        {"sgd_momentum", Optimizer::sgd},         {"sgd_plain", Optimizer::sgd_plain},
        {"lion_32bit", Optimizer::lion},          {"adamw_bnb_8bit", Optimizer::adamw_8bit},
        {"rmsprop_bnb", Optimizer::rmsprop},      {"rmsprop_bnb_32bit", Optimizer::rmsprop},
    };
    for (const auto& [name, o] : aliases)
        if (t == name) return o;
    for (size_t i = 0; i < sizeof kInfos / sizeof kInfos[0]; ++i)
        if (t == kInfos[i].name) return static_cast<Optimizer>(i);
    throw InputError(field + ": '" + text + "' is not an optimizer zeromem counts (use " + optimizer_names_help() +
                     ")");
}

OptimizerStateBytes count_optimizer_state(Optimizer o, const std::vector<StateTensor>& tensors, bool beta1) {
    OptimizerStateBytes out;
    const OptimizerInfo& info = optimizer_info(o);
    for (const StateTensor& t : tensors) add_tensor(info, t, beta1, out);
    return out;
}

std::vector<StateTensor> flat_tensors(uint64_t numel, uint64_t chunk) {
    std::vector<StateTensor> v;
    if (numel == 0) return v;
    chunk = std::max<uint64_t>(1, std::min(chunk, numel));
    if (numel / chunk > 0) v.push_back({chunk, 0, numel / chunk});
    if (numel % chunk > 0) v.push_back({numel % chunk, 0, 1});
    return v;
}

std::vector<StateTensor> model_state_tensors(const ModelArch& a, uint64_t tp) {
    std::vector<StateTensor> v;
    const bool plain = a.num_experts == 0 && a.kv_lora_rank == 0 && a.num_decoder_layers == 0 && !a.encoder_only &&
                       a.word_embed_proj_dim == 0 && !a.embedding_norm && !a.qk_norm && !a.attention_sinks &&
                       !a.lm_head_bias && a.type_vocab_size == 0 && a.relative_attention_buckets == 0;
    if (!plain || a.hidden_size <= 0 || a.num_layers <= 0) return v;
    const uint64_t h = uint64_t(a.hidden_size), f = uint64_t(a.ffn_size), L = uint64_t(a.num_layers);
    const uint64_t hd = uint64_t(a.head_dim > 0 ? a.head_dim : a.hidden_size / std::max<int64_t>(1, a.num_heads));
    const uint64_t q = uint64_t(a.num_heads) * hd, kv = uint64_t(a.num_kv_heads) * hd;
    tp = std::max<uint64_t>(1, tp);
    auto mat = [&](uint64_t rows, uint64_t cols, uint64_t count) {
        if (rows > 0 && cols > 0 && count > 0) v.push_back({ceil_div(rows, tp), cols, count});
    };
    auto vec = [&](uint64_t n, uint64_t count) {
        if (n > 0 && count > 0) v.push_back({ceil_div(n, tp), 0, count});
    };
    mat(uint64_t(a.vocab_size), h, a.tied_embeddings ? 1 : 2);
    if (a.learned_positions) mat(uint64_t(a.max_position_embeddings + a.position_offset), h, 1);
    if (a.fused_qkv) mat(q + 2 * kv, h, L);
    else mat(q, h, L), mat(kv, h, 2 * L);
    mat(h, q, L);                                  // o_proj
    mat(f, h, (a.gated_mlp ? 2 : 1) * L);          // gate/up (out x in)
    mat(h, f, L);                                  // down
    if (a.qkv_bias) vec(q + 2 * kv, L);
    if (a.attn_out_bias) vec(h, L);
    if (a.mlp_bias) vec(f, (a.gated_mlp ? 2 : 1) * L), vec(h, L);
    vec(h, uint64_t(a.norms_per_layer) * L * (a.norm_has_bias ? 2 : 1));
    if (a.final_norm) vec(h, a.norm_has_bias ? 2 : 1);
    if (tp == 1) {
        uint64_t sum = 0;
        for (const auto& t : v) sum += t.numel() * t.count;
        if (sum != shared_param_count(a)->total) v.clear();
    }
    return v;
}

std::optional<Optimizer> optimizer_from_ds_type(const std::string& type, bool sgd_momentum, std::string& why) {
    const std::string t = to_lower(type);
    // DeepSpeed's own names (runtime/config.py DEEPSPEED_OPTIMIZERS), any case.
    if (t == "adam") return Optimizer::adam;
    if (t == "adamw") return Optimizer::adamw;
    if (t == "adagrad") return Optimizer::adagrad;
    if (t == "lion") return Optimizer::lion;
    if (t == "lamb") return Optimizer::lamb;
    if (t == "muadam") return Optimizer::adam;   // mup MuAdam: Adam's states
    if (t == "muadamw") return Optimizer::adamw;
    if (t == "musgd") return sgd_momentum ? Optimizer::sgd : Optimizer::sgd_plain;
    if (t == "onebitadam" || t == "zerooneadam" || t == "onebitlamb") return Optimizer::adam;
    // Other names: getattr(torch.optim, type), case-sensitive.
    if (type == "SGD") return sgd_momentum ? Optimizer::sgd : Optimizer::sgd_plain;
    if (type == "AdamW") return Optimizer::adamw;
    if (type == "RMSprop") return Optimizer::rmsprop;
    if (t == "sgd" || t == "rmsprop") {
        why = "DeepSpeed looks up torch.optim." + type + " case-sensitively (engine.py _configure_basic_optimizer); "
              "torch spells it " + (t == "sgd" ? std::string("SGD") : std::string("RMSprop"));
        return std::nullopt;
    }
    why = "\"" + type + "\" is not an optimizer zeromem counts (DeepSpeed's Adam, AdamW, Lamb, Lion, Adagrad, "
          "OneBitAdam, ZeroOneAdam, OneBitLamb, MuAdam, MuAdamW, MuSGD, and torch.optim SGD, RMSprop); its state "
          "per parameter is not modelled";
    return std::nullopt;
}

std::string deepspeed_optimizer_class(Optimizer o, bool torch_adam) {
    switch (o) {
        case Optimizer::adam:
        case Optimizer::adamw:
            return torch_adam ? "torch Adam(W) (torch_adam)" : "FusedAdam, DeepSpeedCPUAdam under offload";
        case Optimizer::adagrad: return "torch Adagrad, DeepSpeedCPUAdagrad under offload";
        case Optimizer::lion: return "FusedLion, DeepSpeedCPULion under offload";
        case Optimizer::lamb: return "FusedLamb";
        case Optimizer::sgd:
        case Optimizer::sgd_plain: return "torch SGD (or mup MuSGD)";
        case Optimizer::rmsprop: return "torch RMSprop";
        default: return to_string(o);
    }
}

bool zero_tested_optimizer_type(const std::string& type) {
    const std::string t = to_lower(type);
    return t == "adam" || t == "adamw" || t == "adagrad" || t == "lion" || t == "muon" || t == "onebitadam" ||
           t == "zerooneadam" || t == "onebitlamb";
}

}  // namespace zeromem
