// --explain for `zeromem simulate`: every event term with the estimator term
// it corresponds to and the DeepSpeed v0.19.6 / PyTorch code that allocates
// it, so a disagreement with the estimator points at one term.
#include "zeromem/sim_writers.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace zeromem::sim {

namespace {

struct Row {
    const char* term;
    const char* estimator_term;  // terms.h function or estimate.cpp component
    const char* source;
};

// One row per event term the producer emits (producer*.cpp).
const Row kRows[] = {
    {"parameter", "parameters", "engine.py _configure_distributed_model (module.to(device))"},
    {"fp32_master", "optimizer_states (fp32 master)", "fp16/fused_optimizer.py FP16_Optimizer.__init__ (fp32_groups_flat)"},
    {"bit16_groups_flat", "parameters; load: 16-bit module + its flat copy", "zero/stage_1_and_2.py __init__ (flatten_dense_tensors_aligned)"},
    {"fp32_partition", "optimizer_states (fp32 master)",
     "zero/stage_1_and_2.py __init__ (single_partition_of_fp32_groups); zero/stage3.py _create_fp32_partitions; "
     "bf16_optimizer.py _setup_for_real_optimizer (fp32_groups_flat_partition)"},
    {"init_fp32_grad_partition", "gradients (load): terms::zero12_init_fp32_grad_partition",
     "zero/stage_1_and_2.py initialize_optimizer_states (single_grad_partition, set to None before it returns)"},
    {"bf16_groups_flat", "parameters; load: 16-bit module + its flat copy",
     "bf16_optimizer.py _setup_for_real_optimizer (_flatten_dense_tensors_aligned)"},
    {"alignment_padding", "not in the estimator (under 2 x N_d elements)",
     "runtime/utils.py align_dense_tensors (zero pad before the flatten)"},
    {"bf16_partition_clone", "not in the estimator (load transient, b_m x Tn)",
     "bf16_optimizer.py _setup_for_real_optimizer (bf16_dp_partitions[rank].clone().float())"},
    {"bf16_optimizer_fp32_grad_buffer", "terms::bf16_optimizer_fp32_grad_buffer",
     "bf16_optimizer.py _setup_for_real_optimizer (fp32_groups_gradients_flat = zeros_like(bf16_groups_flat))"},
    {"lp_grad_fp32_copy", "not in the estimator (4 x the largest parameter, after the activations are freed)",
     "bf16_optimizer.py update_hp_grads -> _update_hp_grad (lp.grad.to(fp32))"},
    {"bf16_optimizer_allreduce_cast", "terms::bf16_optimizer_allreduce_cast",
     "engine.py allreduce_gradients -> buffered_allreduce_fallback -> allreduce_bucket (tensor.to(communication_data_type))"},
    {"temp_grad_buffer_for_gpu_offload", "terms::temp_grad_buffer_for_gpu_offload", "zero/stage_1_and_2.py __init__"},
    {"persistent_parameter", "parameters (persistent)", "zero/parameter_offload.py mark_persistent_parameters"},
    {"param_partition", "parameters (zero.Init partition)", "zero/partition_parameters.py _partition_param"},
    {"lp_param_buffer", "parameters", "zero/stage3.py _create_fp16_partitions_with_defragmentation (zero/utils.py defragment)"},
    {"grad_partitions_flat_buffer", "gradients", "zero/stage3.py _setup_for_real_optimizer"},
    {"ipg_bucket", "terms::zero12_ipg_bucket / terms::zero3_ipg_bucket",
     "zero/stage_1_and_2.py setup_buckets (from process_gradients); zero/stage3.py _setup_for_real_optimizer"},
    {"fp32_gradient_buffer", "terms::zero3_init_gradient_buffer", "zero/stage3.py initialize_optimizer_states"},
    {"checkpoint_input", "activations (full checkpointing: 2sbh per layer)", "torch.utils.checkpoint (the block's input)"},
    {"rms_norm_saved", "activations: RMSNorm's saved tensors (per layer)",
     "transformers models/llama/modeling_llama.py LlamaRMSNorm.forward (the fp32 copy and the normalized tensor); "
     "torch tools/autograd/derivatives.yaml (pow saves self, mul saves the other operand)"},
    {"attention_core_recompute", "activations (selective recompute)", "Korthikanti et al. 2022 Sec. 4.1; torch.utils.checkpoint"},
    {"logits", "activations: LM head and loss (forward)",
     "the LM head's output; transformers >= 4.46 LlamaForCausalLM.forward holds it while loss/loss_utils.py "
     "ForCausalLMLoss runs (< 4.46: freed at logits.float())"},
    {"logits_fp32", "activations: LM head and loss (forward)", "loss/loss_utils.py ForCausalLMLoss logits.float() (freed when the loss returns)"},
    {"shift_logits_fp32", "activations: LM head and loss (forward)",
     "transformers < 4.49 shift_logits = logits[..., :-1, :].contiguous() (freed when the loss returns)"},
    {"log_softmax", "activations: LM head and loss (forward, cross-entropy backward)",
     "torch aten/src/ATen/native/LossNLL.cpp cross_entropy_loss_symint -> log_softmax; saved by LogSoftmaxBackward0 (derivatives.yaml: result)"},
    {"nll_loss_grad_fp32", "activations: LM head and loss (cross-entropy backward)",
     "NllLossBackward0: nll_loss_backward's grad_input (fp32, the log-softmax output's shape)"},
    {"logits_grad_fp32", "activations: LM head and loss (cross-entropy backward)",
     "LogSoftmaxBackward0: _log_softmax_backward_data (fp32 gradient of the upcast logits; < 4.49 also SliceBackward0's zero-padded copy)"},
    {"logits_grad", "activations: LM head and loss (LM head backward)", "ToCopyBackward0: the .float() backward to the 16-bit logits"},
    {"gradient", "gradients / terms::zero2_autograd_grad_before_bucket_copy / terms::zero3_module_grad",
     "autograd param.grad; zero/stage_1_and_2.py reduce_independent_p_g_buckets_and_remove_grads; zero/stage3.py __add_grad_to_ipg_bucket"},
    {"allreduce_flat_buffer", "terms::zero12_allreduce_bucket_flatten",
     "zero/stage_1_and_2.py reduce_ipg_grads -> average_tensor -> allreduce_and_scatter -> allreduce_bucket (self.flatten)"},
    {"grad_norm_double", "terms::zero12_offload_boundary_transient (8 x Lp)",
     "zero/stage_1_and_2.py copy_grads_in_partition -> set_norm_for_param_grad_in_gpu (.double().norm(2); the "
     "replayed rank is the last, whose partition holds the LM head)"},
    {"grads_in_partition", "gradients (terms::zero12_backward_gradients, terms::zero2_accumulated_partition)",
     "zero/stage_1_and_2.py copy_grads_in_partition; kept in all_grad_tensors by independent_gradient_partition_epilogue"},
    {"reduce_scatter_concat_buffer", "terms::zero3_reduce_scatter_cat",
     "comm/coalesced_collectives.py reduce_scatter_coalesced (torch.cat); zero/stage3.py __avg_scatter_grads"},
    {"offloaded_partition_copy", "terms::zero3_gathered_params (offload_param staging)",
     "zero/partition_parameters.py all_gather_coalesced (partition copied to the device)"},
    {"allgather_flat_buffer", "terms::zero3_gathered_params (in flight)",
     "zero/partition_parameters.py all_gather_coalesced; zero/partitioned_param_coordinator.py _fetch_sub_module_impl (prefetch)"},
    {"gathered_parameter", "terms::zero3_gathered_params, terms::zero3_allgather_cat_copy",
     "zero/partition_parameters.py AllGatherCoalescedHandle.wait (param.data = torch.cat(...))"},
    {"fp32_gradient_copies", "terms::zero0_step (flatten moment)", "fp16/fused_optimizer.py step (p.grad.to(fp32) per parameter)"},
    {"fp32_flat_gradients", "terms::zero0_step", "fp16/fused_optimizer.py step (_flatten_dense_tensors)"},
    {"flat_gradient_partition", "terms::zero12_step (flatten moment)", "zero/stage_1_and_2.py step (flatten(averaged_gradients), del flat_grad_partition)"},
    {"fp32_gradient_partition", "terms::zero12_step",
     "zero/stage_1_and_2.py step (flat_grad_partition.to(fp32)); bf16_optimizer.py step (grad_partition.to(fp32))"},
    {"flat_gradient_sub_group", "terms::zero3_step (flatten moment)", "zero/stage3.py _prepare_fp32_grad_for_sub_group (flatten)"},
    {"fp32_gradient_sub_group", "terms::zero3_step", "zero/stage3.py _prepare_fp32_grad_for_sub_group (.to(fp32)); _release_sub_group"},
    {"empty_cache", "no term (returns cached free segments; no bytes)",
     "zero/stage3.py _create_fp16_partitions_with_defragmentation (gc + empty_cache after the defragment)"},
    {"exp_avg", "optimizer_states (Adam m)", "torch/optim/adamw.py _init_group (lazy, first step)"},
    {"exp_avg_sq", "optimizer_states (Adam v)", "torch/optim/adamw.py _init_group (lazy, first step)"},
    {"momentum_buffer", "optimizer_states (SGD momentum)", "torch/optim/sgd.py (lazy, first step)"},
    {"optimizer_temporary", "terms::StepMoments::optimizer (T bytes per element)",
     "torch/optim/adamw.py _multi_tensor_adamw (torch._foreach_sqrt); none for fused kernels"},
    // Mixture of experts (moe_events.cpp; Hugging Face dropless routing, rows spread evenly over the experts).
    {"moe_router_logits", "activations: MoE router logits and probabilities (S · E · b_m part)",
     "transformers modeling_mixtral.py / modeling_qwen3_moe.py / modeling_deepseek_v2.py MoE forward (router_logits = gate(x))"},
    {"moe_router_probabilities", "activations: MoE router logits and probabilities (S · E · 4 part)",
     "transformers MoE block forward (softmax(router_logits, dtype=torch.float))"},
    {"moe_routed_tokens", "activations: MoE routed token copies (dropless) (k · S · h · b_m half)",
     "transformers MoE block forward (hidden_states[top_x] per expert)"},
    {"moe_expert_output", "activations: MoE routed token copies (dropless) (k · S · h · b_m half)",
     "transformers MoE block forward (expert(x) * routing_weights, then index_add_)"},
};

// Activations saved per module (producer.cpp saved_tensors).
const char* const kActivations[] = {"embedding_dropout_mask", "layernorm_input", "attention_input", "query", "key", "value",
                                    "attention_scores", "attention_softmax", "attention_dropout_mask", "attention_output",
                                    "attention_residual_dropout_mask", "mlp_input", "mlp_gate", "mlp_up", "mlp_gate_up", "mlp_activation",
                                    "mlp_product", "mlp_dropout_mask", "lm_head_input"};

}  // namespace

const char* event_source(const std::string& term) {
    for (const Row& r : kRows)
        if (term == r.term) return r.source;
    for (const char* a : kActivations)
        if (term == a) return "autograd saved tensors (Korthikanti et al. 2022 Table 2; HF logits upcast)";
    return "";
}

const char* event_estimator_term(const std::string& term) {
    for (const Row& r : kRows)
        if (term == r.term) return r.estimator_term;
    for (const char* a : kActivations)
        if (term == a) return "activations";
    return "";
}

std::vector<EventExplanation> explain(const SimResult& r) {
    std::vector<EventExplanation> out;
    std::map<std::string, size_t> index;
    std::map<std::string, int64_t> live;
    for (size_t t = 0; t < r.timeline.size(); ++t) {
        const TimelinePoint& p = r.timeline[t];
        auto [it, fresh] = index.emplace(p.term, out.size());
        if (fresh) {
            EventExplanation e;
            e.term = p.term;
            e.component = estimator_component(p.term);
            e.estimator_term = event_estimator_term(p.term);
            e.source = event_source(p.term);
            out.push_back(e);
        }
        EventExplanation& e = out[it->second];
        if (p.bytes > 0) e.largest = std::max(e.largest, uint64_t(p.bytes));
        if (t <= r.peak_allocated_t) live[p.term] += p.bytes;
    }
    for (auto& e : out) e.bytes_at_peak = uint64_t(std::max<int64_t>(0, live[e.term]));
    return out;
}


std::string render_fragmentation(const FragmentationReport& r) {
    std::string s = "\nFragmentation, block by block (the estimator's allowance is this figure of its own replay: 2 optimizer "
                    "steps, at most 3 micro steps): " + gib_text(r.allowance) + " reserved but unallocated " +
                    (r.oom ? "at the out-of-memory" : "at the allocated peak") + " (" + r.term + " in " + r.module +
                    ", " + to_string(r.phase) + "), in segments that also hold live blocks: allocated " +
                    gib_text(r.allocated) + ", reserved " + gib_text(r.reserved) + ", of which " + gib_text(r.releasable) +
                    " in wholly free segments (CUDACachingAllocator.cpp release_cached_blocks gives those back and "
                    "retries before it raises an OOM, so they are not counted)\n";
    uint64_t rest = 0, rest_n = 0;
    size_t shown = 0;
    for (const FragmentationReport::Group& g : r.groups) {
        if (shown == 8 || g.free_block * g.count < (uint64_t(1) << 20)) {
            rest += g.free_block * g.count;
            rest_n += g.count;
            continue;
        }
        ++shown;
        s += "  " + std::to_string(g.count) + " free block" + (g.count > 1 ? "s" : "") + " of " + gib_text(g.free_block) +
             (g.count > 1 ? " (" + gib_text(g.free_block * g.count) + ")" : "") + " in " + (g.count > 1 ? "" : "a ") +
             gib_text(g.segment) + " segment" + (g.count > 1 ? "s" : "") + " holding " + g.holds + "\n";
    }
    if (rest_n) s += "  " + std::to_string(rest_n) + " smaller free blocks: " + gib_text(rest) + "\n";
    if (r.has_miss) {
        s += "  The last request that opened a segment, " + gib_text(r.miss_bytes) + " (" + r.miss_term + " in " +
             r.miss_module + ", rounded to " + std::to_string(r.miss_rounded) + " B), is larger than every free block of " +
             "its stream and pool (the largest: " + gib_text(r.miss_largest_free) + "): get_free_block takes only a free "
             "block at least as large as the request, so alloc_block " +
             (r.oom ? "had to cudaMalloc and failed even after release_cached_blocks" : "cudaMalloc'ed a new segment") +
             ". A free block is left where a smaller request took a larger cached block: should_split (remainder over "
             "1 MiB, max_split_size unlimited by default) splits it and the remainder stays in that segment until "
             "every block of the segment is freed.\n";
    }
    return s;
}

std::string render_explain(const SimResult& r) {
    std::string s = "\nEvent terms (GiB = 2^30 B; live at the peak allocated, largest single request), "
                    "the estimator term each corresponds to, and the code that allocates it:\n";
    char buf[160];
    for (const EventExplanation& e : explain(r)) {
        std::snprintf(buf, sizeof buf, "  %-32s live %8.3f GiB  largest %8.3f GiB  [%s]\n", e.term.c_str(),
                      double(e.bytes_at_peak) / 1073741824.0, double(e.largest) / 1073741824.0, e.component);
        s += buf;
        s += "      estimator: " + std::string(e.estimator_term) + "\n";
        const std::string src = e.source;
        const bool deepspeed = src.rfind("engine.py", 0) == 0 || src.rfind("fp16/", 0) == 0 || src.rfind("zero/", 0) == 0 ||
                               src.rfind("comm/", 0) == 0;
        s += "      source:    " + (deepspeed ? "DeepSpeed v0.19.6 deepspeed/runtime/" + src
                                               : (src.rfind("torch/", 0) == 0 ? "PyTorch " + src : src)) + "\n";
    }
    if (r.fragmentation) s += render_fragmentation(*r.fragmentation);
    return s + render_host_explain(r.host);
}

}  // namespace zeromem::sim
