// Model architectures: exact parameter counts (count_params, active_ffn_width, describe_arch).
//
// The counting follows the module layout of each family's Hugging Face
// transformers implementation (modeling_<family>.py). Only nn.Parameter
// tensors are counted; registered buffers (rotary inv_freq, GPT-2's causal
// mask "attn.bias", ALiBi slopes) are not parameters, even where a
// checkpoint happens to store them.
#include "zeromem/model.h"

#include "param_count.h"

#include "zeromem/types.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <tuple>

namespace zeromem {

using namespace model_detail;

namespace {

void require_positive(const ModelArch& a, const char* field, int64_t v) {
    if (v <= 0)
        throw InputError("model '" + (a.name.empty() ? std::string("<unnamed>") : a.name) + "': " + field +
                         " must be positive, got " + std::to_string(v));
}

void require_non_negative(const ModelArch& a, const char* field, int64_t v) {
    if (v < 0)
        throw InputError("model '" + (a.name.empty() ? std::string("<unnamed>") : a.name) + "': " + field +
                         " must not be negative, got " + std::to_string(v));
}

// The parts of one block, shared by the dense, MoE and T5 decoder blocks.
struct BlockParts {
    u64 attention = 0;      // self-attention incl. q/k norms and sinks
    u64 dense_mlp = 0;      // MLP of a dense block
    u64 moe = 0;            // router + all routed experts + shared expert (+ its gate)
    u64 one_expert = 0;     // one routed expert
    u64 norms = 0;          // norms of one block
    u64 largest = 0;        // largest single module inside a block
    std::string largest_name;
};

void take_larger(u64& best, std::string& best_name, u64 v, const char* name) {
    if (v > best) {
        best = v;
        best_name = name;
    }
}

// Attention of one block. Standard: q h x a*d, k and v h x kv*d, o a*d x h
// (+ q/k RMSNorm over d, + one sink per head). MLA (DeepSeek-V2/V3,
// modeling_deepseek_v3.py DeepseekV3Attention): q_a h x r_q (+ norm r_q),
// q_b r_q x a*(nope+rope) (or q_proj h x a*(nope+rope) without r_q),
// kv_a_proj_with_mqa h x (r_kv+rope) (+ norm r_kv), kv_b r_kv x a*(nope+v),
// o a*v x h.
void count_attention(const ModelArch& a, BlockParts& p) {
    const int64_t h = a.hidden_size;
    if (a.kv_lora_rank > 0) {
        const int64_t qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
        const bool b = a.attn_out_bias;  // attention_bias: q_a, kv_a and o_proj
        u64 q = 0;
        if (a.q_lora_rank > 0) {
            const u64 qa = linear(h, a.q_lora_rank, b), qb = linear(a.q_lora_rank, a.num_heads * qk, false);
            q = qa + u(a.q_lora_rank) + qb;
            take_larger(p.largest, p.largest_name, qa, "MLA q_a_proj");
            take_larger(p.largest, p.largest_name, qb, "MLA q_b_proj");
        } else {
            q = linear(h, a.num_heads * qk, false);
            take_larger(p.largest, p.largest_name, q, "MLA q_proj");
        }
        const u64 kva = linear(h, a.kv_lora_rank + a.qk_rope_head_dim, b);
        const u64 kvb = linear(a.kv_lora_rank, a.num_heads * (a.qk_nope_head_dim + a.v_head_dim), false);
        const u64 o = linear(a.num_heads * a.v_head_dim, h, b);
        p.attention = q + kva + u(a.kv_lora_rank) + kvb + o;
        take_larger(p.largest, p.largest_name, kva, "MLA kv_a_proj_with_mqa");
        take_larger(p.largest, p.largest_name, kvb, "MLA kv_b_proj");
        take_larger(p.largest, p.largest_name, o, "attention o_proj");
        return;
    }
    const int64_t q_out = a.num_heads * a.head_dim, kv_out = a.num_kv_heads * a.head_dim;
    const u64 q = linear(h, q_out, a.qkv_bias), kv = linear(h, kv_out, a.qkv_bias), o = linear(q_out, h, a.attn_out_bias);
    const u64 qk_norm = a.qk_norm ? 2 * u(a.head_dim) * (a.norm_has_bias ? 2 : 1) : 0;
    p.attention = q + 2 * kv + o + qk_norm + (a.attention_sinks ? u(a.num_heads) : 0);
    if (a.fused_qkv)
        take_larger(p.largest, p.largest_name, q + 2 * kv, "fused qkv projection");
    else
        take_larger(p.largest, p.largest_name, std::max(q, kv), q >= kv ? "attention q_proj" : "attention k_proj");
    take_larger(p.largest, p.largest_name, o, "attention o_proj");
}

void count_mlps(const ModelArch& a, BlockParts& p) {
    const int64_t h = a.hidden_size;
    p.dense_mlp = mlp_params(h, a.ffn_size, a.gated_mlp, a.mlp_bias);
    if (a.num_layers > a.num_moe_layers) {
        if (a.fused_gate_up && a.gated_mlp)
            take_larger(p.largest, p.largest_name, 2 * linear(h, a.ffn_size, a.mlp_bias), "fused gate_up_proj");
        else
            take_larger(p.largest, p.largest_name, linear(h, a.ffn_size, a.mlp_bias), "MLP up/gate projection");
        take_larger(p.largest, p.largest_name, linear(a.ffn_size, h, a.mlp_bias), "MLP down projection");
    }
    if (a.num_experts <= 0 || a.num_moe_layers <= 0) return;
    p.one_expert = mlp_params(h, a.expert_ffn_size, a.gated_mlp, a.expert_bias);
    const u64 router = linear(h, a.num_experts, a.router_bias);
    const u64 shared = a.shared_expert_ffn_size > 0 ? mlp_params(h, a.shared_expert_ffn_size, a.gated_mlp, false) : 0;
    p.moe = router + u(a.num_experts) * p.one_expert + shared + (a.shared_expert_gate ? u(h) : 0);
    if (a.fused_experts) {
        take_larger(p.largest, p.largest_name, u(a.num_experts) * p.one_expert, "fused experts (all experts of a block)");
    } else {
        take_larger(p.largest, p.largest_name, linear(h, a.expert_ffn_size, a.expert_bias), "one expert's up/gate projection");
        take_larger(p.largest, p.largest_name, linear(a.expert_ffn_size, h, a.expert_bias), "one expert's down projection");
    }
    take_larger(p.largest, p.largest_name, router, "MoE router");
    if (shared > 0) take_larger(p.largest, p.largest_name, linear(h, a.shared_expert_ffn_size, false), "shared expert projection");
}

void check_sizes(const ModelArch& a) {
    require_positive(a, "hidden_size", a.hidden_size);
    require_positive(a, "num_layers", a.num_layers);
    require_positive(a, "num_heads", a.num_heads);
    require_positive(a, "num_kv_heads", a.num_kv_heads);
    require_positive(a, "head_dim", a.head_dim);
    if (a.num_moe_layers < a.num_layers) require_positive(a, "ffn_size", a.ffn_size);
    require_positive(a, "vocab_size", a.vocab_size);
    if (a.learned_positions) require_positive(a, "max_position_embeddings", a.max_position_embeddings);
    require_non_negative(a, "norms_per_layer", a.norms_per_layer);
    require_non_negative(a, "position_offset", a.position_offset);
    require_non_negative(a, "word_embed_proj_dim", a.word_embed_proj_dim);
    require_non_negative(a, "num_moe_layers", a.num_moe_layers);
    require_non_negative(a, "num_decoder_layers", a.num_decoder_layers);
    if (a.num_moe_layers > a.num_layers || a.num_decoder_layers > a.num_layers)
        throw InputError("model '" + a.name + "': more MoE or decoder blocks than num_layers " +
                         std::to_string(a.num_layers));
    if (a.num_experts > 0 && a.num_moe_layers > 0) {
        require_positive(a, "expert_ffn_size", a.expert_ffn_size);
        require_positive(a, "num_experts_per_tok", a.num_experts_per_tok);
        if (a.num_experts_per_tok > a.num_experts)
            throw InputError("model '" + a.name + "': num_experts_per_tok " + std::to_string(a.num_experts_per_tok) +
                             " is more than num_experts " + std::to_string(a.num_experts));
    }
    if (a.kv_lora_rank > 0) {
        require_positive(a, "qk_nope_head_dim", a.qk_nope_head_dim);
        require_positive(a, "v_head_dim", a.v_head_dim);
        require_non_negative(a, "qk_rope_head_dim", a.qk_rope_head_dim);
    }
    // Each size below 2^31 keeps products of two sizes within int64.
    for (const auto& [field, v] : {std::pair<const char*, int64_t>{"hidden_size", a.hidden_size},
                                   {"num_layers", a.num_layers}, {"num_heads", a.num_heads},
                                   {"num_kv_heads", a.num_kv_heads}, {"head_dim", a.head_dim},
                                   {"ffn_size", a.ffn_size}, {"vocab_size", a.vocab_size},
                                   {"max_position_embeddings", a.max_position_embeddings},
                                   {"norms_per_layer", a.norms_per_layer}, {"position_offset", a.position_offset},
                                   {"word_embed_proj_dim", a.word_embed_proj_dim}, {"num_experts", a.num_experts},
                                   {"num_experts_per_tok", a.num_experts_per_tok},
                                   {"expert_ffn_size", a.expert_ffn_size},
                                   {"shared_expert_ffn_size", a.shared_expert_ffn_size},
                                   {"q_lora_rank", a.q_lora_rank}, {"kv_lora_rank", a.kv_lora_rank},
                                   {"qk_nope_head_dim", a.qk_nope_head_dim}, {"qk_rope_head_dim", a.qk_rope_head_dim},
                                   {"v_head_dim", a.v_head_dim}})
        if (v > 2147483647)
            throw InputError("model '" + (a.name.empty() ? std::string("<unnamed>") : a.name) + "': " + field +
                             " is too large: " + std::to_string(v) + " (at most 2147483647)");
}

// Input embedding: tokens, learned positions, token types, embedding norm,
// OPT's project_in/out.
u64 count_embedding(const ModelArch& a, u64& largest, std::string& largest_name) {
    const int64_t h = a.hidden_size;
    const int64_t e = a.word_embed_proj_dim > 0 ? a.word_embed_proj_dim : h;
    u64 emb = u(a.vocab_size) * u(e);
    if (a.learned_positions) {
        const u64 pos = u(a.max_position_embeddings + a.position_offset) * u(h);
        emb += pos;
        take_larger(largest, largest_name, pos, "position embedding");
    }
    emb += u(a.type_vocab_size) * u(h);
    if (a.embedding_norm) emb += 2 * u(h);
    if (e != h) {
        emb += 2 * u(e) * u(h);
        take_larger(largest, largest_name, u(e) * u(h), "embedding projection");
    }
    return emb;
}

// Final norm of each stack, then the LM head (untied weight, bias) or, for
// encoder-only models, the pooler and masked-LM head. Sets c.lm_head and
// appends to c.blocks; returns the parameters other than c.lm_head.
u64 count_heads(const ModelArch& a, u64 stacks, ParamCount& c, u64& largest, std::string& largest_name) {
    const int64_t h = a.hidden_size;
    const int64_t e = a.word_embed_proj_dim > 0 ? a.word_embed_proj_dim : h;
    const u64 norm = a.norm_has_bias ? 2 * u(h) : u(h);
    u64 tail = 0;
    if (a.final_norm) {
        c.blocks.push_back({"final norm", stacks, norm});
        tail += stacks * norm;
    }
    if (a.encoder_only) {
        if (a.pooler) {
            c.blocks.push_back({"pooler", 1, linear(h, h, true)});
            tail += linear(h, h, true);
        }
        if (a.mlm_head) {
            const u64 mlm = linear(h, h, true) + 2 * u(h) + u(a.vocab_size);  // decoder weight tied to the embedding
            c.blocks.push_back({"masked-LM head (decoder tied)", 1, mlm});
            tail += mlm;
        }
        return tail;
    }
    if (!a.tied_embeddings) c.lm_head = u(a.vocab_size) * u(e);
    if (a.lm_head_bias) c.lm_head += u(a.vocab_size);
    if (c.lm_head > 0) {
        c.blocks.push_back({a.tied_embeddings ? "LM head bias (weight tied)" : "LM head", 1, c.lm_head});
        take_larger(largest, largest_name, c.lm_head, "LM head");
    }
    return tail;
}

}  // namespace

// Counts the parameters in double first and refuses sizes whose integer
// count would overflow (far beyond any real model); throws InputError.
static void check_count_fits(const ModelArch& a) {
    const int64_t h = a.hidden_size;
    const int64_t e = a.word_embed_proj_dim > 0 ? a.word_embed_proj_dim : h;
    const int64_t q_out = a.num_heads * a.head_dim, kv_out = a.num_kv_heads * a.head_dim;
    const double H = double(h), Q = double(q_out), KV = double(kv_out), F = double(a.ffn_size);
    const double layer = H * (Q + 2 * KV) + Q * H + 3 * H * F + double(a.norms_per_layer) * 2 * H;
    // MoE blocks: router, every routed expert and the shared expert; MLA's
    // low-rank projections.
    const double moe = a.num_experts > 0 ? double(a.num_moe_layers) *
                                               (H * double(a.num_experts) +
                                                3 * H * (double(a.num_experts) * double(a.expert_ffn_size) +
                                                         double(a.shared_expert_ffn_size)))
                                         : 0.0;
    const double mla = double(a.num_layers) * (double(a.q_lora_rank) + double(a.kv_lora_rank)) *
                       (H + double(a.num_heads) * double(a.head_dim + a.v_head_dim));
    const double approx = double(a.num_layers) * layer + moe + mla + 2 * double(a.vocab_size) * double(e) +
                          double(a.max_position_embeddings + a.position_offset) * H + 2 * double(e) * H;
    if (!(approx < 1e17)) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3g", approx);
        throw InputError("model '" + (a.name.empty() ? std::string("<unnamed>") : a.name) +
                         "': its sizes give about " + buf + " parameters, more than zeromem counts (1e17)");
    }
}

// Layout counted (per family the fields are set by arch_from_hf_config):
//   embedding  = V x e (e = word_embed_proj_dim if set, else h)
//              + (max_position_embeddings + position_offset) x h   if learned_positions
//              + type_vocab_size x h                               (BERT token types)
//              + 2h                                                if embedding_norm (BLOOM, BERT)
//              + 2 x (e x h)                                       if e != h (OPT project_in/out, no bias)
//   attention  = q: h x (a*d) [+a*d], k and v: h x (kv*d) [+kv*d] each  (qkv_bias)
//              + o: (a*d) x h [+h]                                      (attn_out_bias)
//              + q_norm, k_norm: d each (qk_norm) + a sinks (gpt-oss); or MLA (count_attention)
//   dense MLP  = gated: gate, up h x f [+f each], down f x h [+h]       (mlp_bias)
//                plain: up h x f [+f], down f x h [+h]
//   MoE        = router h x E [+E] + E experts (MLP of width f_e) + shared MLP [+ h gate]
//   block      = attention + (dense MLP or MoE) + norms_per_layer x (h, or 2h with norm_has_bias);
//                a T5 decoder block adds cross-attention and one more norm
//   final norm = h or 2h if final_norm (twice for encoder-decoder: one per stack)
//   lm_head    = V x e [+V] unless tied; encoder-only: pooler / masked-LM head instead
//   vision     = vision_layers x vision_block_params + vision_other_params + projector_params
ParamCount count_params(const ModelArch& a) {
    check_sizes(a);
    const int64_t h = a.hidden_size;
    const int64_t e = a.word_embed_proj_dim > 0 ? a.word_embed_proj_dim : h;
    const u64 norm = a.norm_has_bias ? 2 * u(h) : u(h);

    check_count_fits(a);
    ParamCount c;
    c.blocks.reserve(10);  // at most ten kinds of block below: one allocation
    std::string largest_name = "token embedding";
    u64 largest = u(a.vocab_size) * u(e);
    c.embedding = count_embedding(a, largest, largest_name);
    c.blocks.push_back({"embedding", 1, c.embedding});

    // Blocks.
    BlockParts p;
    count_attention(a, p);
    count_mlps(a, p);
    p.norms = u(a.norms_per_layer) * norm;
    const u64 dense_block = p.attention + p.dense_mlp + p.norms;
    const u64 moe_block = p.attention + p.moe + p.norms;
    const u64 n_moe = a.num_experts > 0 ? u(a.num_moe_layers) : 0;
    const u64 n_dec = u(a.num_decoder_layers);
    const u64 n_dense = u(a.num_layers) - n_moe - n_dec;
    u64 blocks_total = 0;
    if (n_dec > 0) {
        const u64 dec_block = dense_block + p.attention + norm;  // + cross-attention and its norm
        c.blocks.push_back({"encoder block", n_dense, dense_block});
        c.blocks.push_back({"decoder block (self + cross attention)", n_dec, dec_block});
        blocks_total = n_dense * dense_block + n_dec * dec_block;
        c.per_layer = dec_block;
    } else {
        const char* dense_name = a.encoder_only ? "encoder block" : "decoder block";
        if (n_dense > 0) c.blocks.push_back({n_moe > 0 ? "decoder block (dense MLP)" : dense_name, n_dense, dense_block});
        if (n_moe > 0) c.blocks.push_back({"decoder block (MoE)", n_moe, moe_block});
        blocks_total = n_dense * dense_block + n_moe * moe_block;
        c.per_layer = n_moe > 0 ? moe_block : dense_block;
    }
    take_larger(largest, largest_name, p.largest, p.largest_name.c_str());
    if (a.relative_attention_buckets > 0) {
        const u64 stacks = n_dec > 0 ? 2 : 1;
        c.blocks.push_back({"relative attention bias", stacks, u(a.relative_attention_buckets) * u(a.num_heads)});
        blocks_total += stacks * u(a.relative_attention_buckets) * u(a.num_heads);
    }

    const u64 tail = count_heads(a, n_dec > 0 ? 2 : 1, c, largest, largest_name);

    // Vision tower and projector.
    if (a.vision_layers > 0 || a.vision_other_params > 0 || a.projector_params > 0) {
        c.blocks.push_back({"vision block", u(a.vision_layers), a.vision_block_params});
        c.blocks.push_back({"vision embeddings, norms and mergers", 1, a.vision_other_params});
        if (a.projector_params > 0) c.blocks.push_back({"vision-to-text projector", 1, a.projector_params});
        c.vision = u(a.vision_layers) * a.vision_block_params + a.vision_other_params + a.projector_params;
        take_larger(largest, largest_name, a.vision_largest_module, "vision module");
    }

    c.total = c.embedding + blocks_total + tail + c.lm_head + c.vision;
    c.active = c.total - n_moe * u(a.num_experts - a.num_experts_per_tok) * p.one_expert;
    c.one_expert = n_moe > 0 ? p.one_expert : 0;
    c.routed_experts = n_moe * u(a.num_experts) * c.one_expert;
    c.largest_module = largest;
    c.largest_module_name = largest_name;
    return c;
}

namespace {

// Every member of the architecture, for equality.
auto members(const ModelArch& a) {
    return std::tie(a.name, a.family, a.hidden_size, a.num_layers, a.num_heads, a.num_kv_heads, a.head_dim,
                    a.ffn_size, a.vocab_size, a.max_position_embeddings, a.gated_mlp, a.tied_embeddings,
                    a.learned_positions, a.qkv_bias, a.attn_out_bias, a.mlp_bias, a.norm_has_bias,
                    a.norms_per_layer, a.rms_norm_saved_bytes, a.final_norm, a.embedding_norm, a.position_offset,
                    a.word_embed_proj_dim, a.fused_qkv, a.published_params, a.published_source, a.model_type,
                    a.lm_head_bias, a.qk_norm, a.attention_sinks, a.fused_gate_up, a.q_lora_rank, a.kv_lora_rank,
                    a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim, a.num_experts, a.num_experts_per_tok,
                    a.expert_ffn_size, a.shared_expert_ffn_size, a.num_moe_layers, a.shared_expert_gate,
                    a.router_bias, a.expert_bias, a.packs_experts_from_transformers_5, a.fused_experts,
                    a.num_decoder_layers, a.relative_attention_buckets, a.encoder_only, a.type_vocab_size,
                    a.pooler, a.mlm_head, a.embedding_dropout, a.attention_dropout, a.attention_residual_dropout,
                    a.mlp_residual_dropout, a.vision_kind, a.vision_hidden_size, a.vision_layers,
                    a.vision_ffn_size, a.vision_block_params, a.vision_other_params, a.projector_params,
                    a.vision_largest_module, a.warnings);
}

}  // namespace

bool operator==(const ModelArch& a, const ModelArch& b) {
#if defined(__GLIBCXX__) && defined(__x86_64__)
    static_assert(sizeof(ModelArch) == 536, "a member was added to ModelArch: add it to members() too");
#endif
    return members(a) == members(b);
}

std::shared_ptr<const ParamCount> shared_param_count(const ModelArch& arch) {
    thread_local ModelArch last_arch;
    thread_local std::shared_ptr<const ParamCount> last;
    if (last && arch == last_arch) return last;
    last = std::make_shared<const ParamCount>(count_params(arch));
    last_arch = arch;
    return last;
}

int64_t active_ffn_width(const ModelArch& a) {
    if (a.num_experts > 0 && a.num_moe_layers > 0)
        return a.num_experts_per_tok * a.expert_ffn_size + a.shared_expert_ffn_size;
    return a.ffn_size;
}

std::string describe_arch(const ModelArch& a) {
    const ParamCount c = count_params(a);
    std::ostringstream o;
    auto yn = [](bool b) { return b ? "yes" : "no"; };
    o << "family " << (a.family.empty() ? "(hand-built)" : a.family);
    if (!a.model_type.empty() && a.model_type != a.family) o << " (model_type " << a.model_type << ")";
    o << ": h=" << a.hidden_size << ", blocks=" << a.num_layers << ", heads=" << a.num_heads << ", kv heads=" << a.num_kv_heads
      << ", head_dim=" << a.head_dim << ", vocab=" << a.vocab_size << "\n";
    o << "  layout: tied embeddings " << yn(a.tied_embeddings) << ", "
      << (a.gated_mlp ? "gated 3-matrix MLP" : "2-matrix MLP") << " f=" << a.ffn_size << ", "
      << (a.norm_has_bias ? "LayerNorm" : "RMSNorm") << " x" << a.norms_per_layer << "/block, biases: qkv "
      << yn(a.qkv_bias) << ", out " << yn(a.attn_out_bias) << ", mlp " << yn(a.mlp_bias) << ", lm_head " << yn(a.lm_head_bias)
      << (a.qk_norm ? ", q/k norm" : "") << (a.fused_qkv ? ", fused qkv" : "") << (a.learned_positions ? ", learned positions" : "")
      << "\n";
    if (a.kv_lora_rank > 0)
        o << "  attention: MLA, q_lora_rank " << a.q_lora_rank << ", kv_lora_rank " << a.kv_lora_rank << ", qk_nope "
          << a.qk_nope_head_dim << " + qk_rope " << a.qk_rope_head_dim << ", v_head_dim " << a.v_head_dim << "\n";
    if (a.num_experts > 0 && a.num_moe_layers > 0)
        o << "  MoE: " << a.num_moe_layers << " of " << a.num_layers << " blocks, " << a.num_experts << " routed experts (top-"
          << a.num_experts_per_tok << ") of width " << a.expert_ffn_size << ", shared expert width " << a.shared_expert_ffn_size
          << "; " << c.active << " of " << c.total << " parameters active per token\n";
    if (a.num_decoder_layers > 0)
        o << "  encoder-decoder: " << (a.num_layers - a.num_decoder_layers) << " encoder + " << a.num_decoder_layers
          << " decoder blocks\n";
    if (a.encoder_only) o << "  encoder-only" << (a.pooler ? ", pooler" : "") << (a.mlm_head ? ", masked-LM head" : "") << "\n";
    if (!a.vision_kind.empty())
        o << "  vision tower: " << a.vision_kind << ", " << a.vision_layers << " blocks of width " << a.vision_hidden_size
          << ", " << c.vision << " parameters with the projector\n";
    o << "  parameters per block:\n";
    for (const auto& b : c.blocks)
        o << "    " << b.name << ": " << b.count << " x " << b.params << " = " << b.count * b.params << "\n";
    o << "  total " << c.total << "; largest module (DeepSpeed's largest_layer_params) " << c.largest_module << " ("
      << c.largest_module_name << ")\n";
    return o.str();
}

// LoRA adapters of `rank` on the projections `targets` (peft LoraLayer: A is r x in, B is out x r, per
// targeted linear of every layer).
uint64_t lora_params(const ModelArch& arch, int64_t rank, const std::string& targets) {
    if (rank <= 0) throw InputError("--lora-rank: must be positive");
    const int64_t h = arch.hidden_size;
    const int64_t hd = arch.head_dim > 0 ? arch.head_dim : h / arch.num_heads;
    const int64_t q = arch.num_heads * hd, kv = arch.num_kv_heads * hd, f = arch.ffn_size;
    int64_t per_layer = 0;
    std::size_t pos = 0;
    while (pos <= targets.size()) {
        const std::size_t comma = targets.find(',', pos);
        const std::string name = targets.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        if (name == "q") per_layer += rank * (h + q);
        else if (name == "k" || name == "v") per_layer += rank * (h + kv);
        else if (name == "o") per_layer += rank * (q + h);
        else if (name == "gate" || name == "up") per_layer += rank * (h + f);
        else if (name == "down") per_layer += rank * (f + h);
        else throw InputError("--lora-target: unknown projection '" + name + "' (use q,k,v,o,gate,up,down)");
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return static_cast<uint64_t>(per_layer * arch.num_layers);
}

}  // namespace zeromem
