// Workloads with several models per GPU (see workload.h): per-model shares
// of each phase and their sums.
#include "zeromem/workload.h"

#include "zeromem/generation.h"
#include "zeromem/moe.h"
#include "zeromem/process_terms.h"
#include "zeromem/stack_facts.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cmath>

namespace zeromem {

namespace {

// The per-process terms of a phase (CUDA context, NCCL buffers, cuBLAS
// workspaces, a calibrated baseline): one process per GPU holds them once, whatever it trains.
uint64_t process_bytes(const GpuMemory& m) {
    return m.cuda_context + m.nccl_buffers + m.cublas_workspaces + m.process_baseline;
}


constexpr const char* kSrcTrlDpo =
    "TRL trl/trainer/dpo_trainer.py concatenated_forward (chosen and rejected concatenated: 2b sequences), "
    "compute_ref_log_probs (reference forward under torch.no_grad)";
constexpr const char* kSrcNoGrad =
    "PyTorch autograd under torch.no_grad (no saved tensors: a layer's outputs are freed once the next layer has "
    "used them)";
constexpr const char* kSrcTrlPrepare =
    "TRL trl/models/utils.py prepare_deepspeed (the reference engine: deepspeed.initialize without an optimizer; "
    "ZeRO-3 when the policy's stage is 3, else stage 0; stage3_prefetch_bucket_size 0.9 h^2)";
constexpr const char* kSrcDsChat =
    "DeepSpeed-Chat dschat/rlhf/rlhf_engine.py (_init_actor, _init_critic: trained engines; _init_ref, _init_reward: "
    "eval engines at stage 3 if the actor's / critic's stage is 3, else 0) and ppo_trainer.py "
    "(generate_experience: actor generate, then actor, reference, reward and critic forwards)";
constexpr const char* kSrcGather =
    "TRL trl/models/utils.py unwrap_model_for_generation (ZeRO-3: deepspeed.zero.GatheredParameters over every "
    "parameter while generating); DeepSpeed-Chat hybrid engine gathers the actor for generation likewise";

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
uint64_t to_bytes(double v) { return v <= 0 ? 0 : static_cast<uint64_t>(std::llround(v)); }
uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }

std::string num(uint64_t v) { return std::to_string(v); }

// Collects --explain lines when asked.
struct Explain {
    bool on = false;
    WorkloadEstimate* out = nullptr;
    void term(const std::string& component, const std::string& formula, const std::string& subst, uint64_t bytes,
              const std::string& source) const {
        if (on) out->terms.push_back({component, formula, subst, bytes, source});
    }
};

// A frozen engine's figures, per GPU unless named per node.
struct FrozenFigures {
    uint64_t resident = 0;   // 16-bit parameters held between forwards (with fragmentation)
    uint64_t forward = 0;    // resident + gathered parameters + forward working set (with fragmentation)
    uint64_t host_node = 0;  // offloaded partitions in host RAM, per node
    std::string note;        // set when --ep-size cannot split this model's experts
};

// The parameters a frozen engine's rank holds, in elements. Under expert
// parallelism a deep copy of a DeepSpeed-MoE model holds num_experts / E_p
// experts of every MoE block (deepspeed/moe/layer.py MoE.__init__,
// num_local_experts) and ZeRO-3 partitions them over the N_d / E_p
// expert-data-parallel ranks (zeromem/moe.h expert_split). A dense model, or
// one whose experts E_p does not divide, holds every parameter.
struct FrozenHeld {
    uint64_t held = 0;       // parameters on the rank before ZeRO-3 partitioning
    uint64_t partition = 0;  // its ZeRO-3 partition
    bool split = false;      // E_p > 1 applied
};

FrozenHeld frozen_held(const EstimateInput& in, const FrozenModel& f, const std::string& role, std::string& note) {
    const int64_t ep = in.moe.ep();
    const ModelArch* a = f.model.arch ? &*f.model.arch : nullptr;
    const bool moe = a && a->num_experts > 0 && a->num_moe_layers > 0;
    if (ep > 1 && moe && a->num_experts % ep == 0) {
        EstimateInput fin = in;
        fin.model = f.model;
        const ExpertSplit sp = expert_split(fin);
        return {sp.held, sp.partition, true};
    }
    if (ep > 1 && moe)
        note = role + " model: --ep-size " + std::to_string(ep) + " does not divide its " +
               std::to_string(a->num_experts) + " experts, so it is counted holding every expert on each rank";
    return {f.model.params, ceil_div(f.model.params, u(in.cluster.data_parallel())), false};
}

uint64_t with_fragmentation(const EstimateInput& in, uint64_t alloc) {
    return alloc + to_bytes(in.residual.fragmentation_fraction * double(alloc));
}

void check_frozen(const FrozenModel& f, const std::string& role) {
    if (f.stage < 0 || f.stage > 3)
        throw InputError("--" + role + "-stage: " + std::to_string(f.stage) + " is outside 0..3");
    if (f.offload_param != OffloadDevice::none && f.stage != 3)
        throw InputError("--" + role + "-offload: parameter offload needs --" + role + "-stage 3 (DeepSpeed offloads "
                         "parameters only under ZeRO-3)");
    if (f.model.params == 0) throw InputError(role + " model: zero parameters");
}

FrozenFigures frozen_figures(const EstimateInput& in, const FrozenModel& f, const std::string& role, int64_t s,
                             int64_t b, bool logits, const Explain& ex) {
    check_frozen(f, role);
    const uint64_t bm = u(dtype_bytes(in.train.dtype));
    const uint64_t N = u(in.cluster.data_parallel());
    const uint64_t g = u(in.cluster.gpus_per_node());
    FrozenFigures r;
    const FrozenHeld held = frozen_held(in, f, role, r.note);
    const uint64_t P = held.held;
    const std::string ep = held.split ? ", experts / E_p with E_p=" + num(u(in.moe.ep())) : "";
    uint64_t params_gpu = 0, gathered = 0;
    if (f.stage == 3) {
        const uint64_t part = bm * held.partition;
        if (f.offload_param == OffloadDevice::cpu) r.host_node = part * g;
        if (f.offload_param == OffloadDevice::none) params_gpu = part;
        // In forward the coordinator holds the running module plus one prefetch bucket.
        gathered = bm * std::min<uint64_t>(P, f.model.largest_layer_params + u(std::max<int64_t>(0, f.prefetch_bucket)));
        ex.term(role + ": parameters (ZeRO-3 inference engine)",
                std::string(f.offload_param == OffloadDevice::none
                                ? "b_m · ceil(Ψ/N_d) on the GPU"
                                : "0 on the GPU; b_m · ceil(Ψ/N_d) · g in host RAM per node") +
                    (held.split ? " (experts: ceil(Ψ_experts/E_p / (N_d/E_p)))" : ""),
                "b_m=" + num(bm) + ", Ψ=" + num(P) + ", N_d=" + num(N) + ", g=" + num(g) + ep, part, kSrcTrlPrepare);
        ex.term(role + ": gathered parameters in its forward", "b_m · min(Ψ, L + stage3_prefetch_bucket_size)",
                "L=" + num(f.model.largest_layer_params) + ", prefetch=" + num(u(f.prefetch_bucket)), gathered,
                "DeepSpeed v0.19.6 partitioned_param_coordinator.py fetch_sub_module");
    } else {
        params_gpu = bm * P;
        ex.term(role + ": parameters (stage " + std::to_string(f.stage) + " inference engine, full copy)", "b_m · Ψ",
                "b_m=" + num(bm) + ", Ψ=" + num(P) + ep, params_gpu,
                "DeepSpeed v0.19.6 engine.py: without an optimizer no ZeRO-1/2 optimizer partitions anything; " +
                    std::string(kSrcTrlPrepare));
    }
    uint64_t act = 0;
    if (f.model.arch) {
        act = inference_activation_bytes(*f.model.arch, s, b, in.cluster.tp, bm, logits);
        ex.term(role + ": forward working set (no_grad)",
                "one layer's live tensors b_m·sb(2h + max(h + 2·kv·d, f or 2f)) + " +
                    std::string(logits ? "logits sbV·(b_m + 4)" : "value head sb·b_m"),
                "s=" + num(u(s)) + ", b=" + num(u(b)), act, kSrcNoGrad);
    }
    r.resident = with_fragmentation(in, params_gpu);
    r.forward = with_fragmentation(in, params_gpu + gathered + act);
    return r;
}

// A trained model's share outside its own training: its model states after a
// step (the checkpoint_save phase: parameters, gradient buffers, optimizer
// states and persistent buffers, no activations), with fragmentation.
uint64_t trained_resident(const Estimate& e, const EstimateInput& in) {
    for (const auto& p : e.phases)
        if (p.name == "checkpoint_save") {
            const GpuMemory& m = p.per_gpu;
            return with_fragmentation(in, m.parameters + m.gradients + m.optimizer_states + m.temporary_buffers);
        }
    return e.per_gpu.total - process_bytes(e.per_gpu);
}

const PhaseMemory& phase_named(const Estimate& e, const std::string& name) {
    for (const auto& p : e.phases)
        if (p.name == name) return p;
    return e.phases.front();
}

uint64_t share_of(const PhaseMemory& p) { return p.per_gpu.total - process_bytes(p.per_gpu); }

// Sums the shares of `ph` and sets its verdicts.
void finish_phase(WorkloadPhase& ph, const EstimateInput& in) {
    ph.per_gpu = process_memory(in).total();  // one process per GPU holds them once
    ph.per_node_host = 0;
    for (const auto& m : ph.models) {
        ph.per_gpu += m.gpu_bytes;
        ph.per_node_host += m.host_bytes;
    }
    ph.per_node_gpu = ph.per_gpu * u(in.cluster.gpus_per_node());
    if (in.cluster.gpu_memory) ph.fits_gpu = ph.per_gpu <= *in.cluster.gpu_memory;
    if (in.cluster.host_memory) ph.fits_host = ph.per_node_host <= *in.cluster.host_memory;
}

void summarize(WorkloadEstimate& out) {
    const WorkloadPhase* peak = nullptr;
    for (const auto& p : out.phases) {
        if (!peak || p.per_gpu > peak->per_gpu) peak = &p;
        out.per_node_host = std::max(out.per_node_host, p.per_node_host);
        if (p.fits_gpu) out.fits_gpu = out.fits_gpu.value_or(true) && *p.fits_gpu;
        if (p.fits_host) out.fits_host = out.fits_host.value_or(true) && *p.fits_host;
    }
    if (peak) {
        out.peak_phase = peak->name;
        out.per_gpu = peak->per_gpu;
    }
}

void check_cluster(const EstimateInput& in, Workload w) {
    if (in.cluster.tp != 1 || in.cluster.pp != 1)
        throw InputError(std::string("--workload ") + to_string(w) +
                         ": tensor or pipeline parallelism (--tp/--pp) with several models is not modelled; use "
                         "--tp 1 --pp 1 (TRL and DeepSpeed-Chat run ZeRO data parallelism)");
    if (in.convention != Convention::full)
        throw InputError(std::string("--workload ") + to_string(w) + ": needs --convention full (phases per model)");
}

// DPO and ORPO: the policy at micro batch 2b; DPO adds the reference.
void estimate_pairs(const EstimateInput& in, const WorkloadSettings& w, WorkloadEstimate& out, const Explain& ex) {
    EstimateInput pol = in;
    pol.train.micro_batch = 2 * in.train.micro_batch;
    pol.train.train_batch_size.reset();  // pairs: the batch arithmetic was checked on pairs
    out.policy = estimate(pol, ex.on);
    ex.term("policy: micro batch for activations and logits", "2 · b (chosen and rejected concatenated)",
            "b=" + num(u(in.train.micro_batch)) + " pairs", 0, kSrcTrlDpo);
    if (ex.on)
        for (const auto& t : out.policy.terms) out.terms.push_back({"policy: " + t.component, t.formula, t.substituted, t.bytes, t.source});
    const bool has_ref = w.kind == Workload::dpo && !w.precompute_ref_log_probs;
    FrozenFigures ref;
    if (has_ref) ref = frozen_figures(in, w.reference, "ref", in.train.seq_len, 2 * in.train.micro_batch, true, ex);
    if (!ref.note.empty()) out.notes.push_back(ref.note);
    if (w.kind == Workload::dpo && w.precompute_ref_log_probs)
        out.notes.push_back("precompute_ref_log_probs: the reference log-probs are computed before training "
                            "(TRL DPOTrainer.get_train_dataloader), so no reference model is held while training.");
    auto ref_share = [&](const char* activity, uint64_t gpu) {
        return ModelShare{"reference", activity, false, gpu, ref.host_node};
    };
    for (const auto& p : out.policy.phases) {
        if (p.name == "forward" && has_ref) {  // the reference forward precedes the policy's at every step
            WorkloadPhase rf;
            rf.name = "reference_forward";
            rf.models.push_back({"policy", "model states after a step (no activations)", true,
                                 trained_resident(out.policy, pol), out.policy.per_node.host_steady});
            rf.models.push_back(ref_share("forward under no_grad (2b sequences)", ref.forward));
            finish_phase(rf, in);
            out.phases.push_back(std::move(rf));
        }
        WorkloadPhase ph;
        ph.name = p.name;
        ph.models.push_back({"policy", "training: " + p.name, true, share_of(p), p.per_node.host_memory});
        if (has_ref) ph.models.push_back(ref_share("resident (frozen parameters)", ref.resident));
        finish_phase(ph, in);
        out.phases.push_back(std::move(ph));
    }
    out.notes.push_back("--micro-batch counts preference pairs: chosen and rejected run as one batch of 2b sequences "
                        "(TRL concatenated_forward), so the policy's activations and logits are those of 2b.");
}


// PPO's models, each estimated or sized once.
struct PpoModels {
    EstimateInput actor_in, critic_in;
    uint64_t actor_resident = 0, critic_resident = 0;
    uint64_t actor_host = 0;   // actor's steady host RAM per node (with the processes' baseline)
    uint64_t critic_host = 0;  // critic's host RAM per node beyond the processes' baseline
    uint64_t baseline = 0;     // host_process_overhead x g
    FrozenFigures ref, reward;
};

void append_terms(WorkloadEstimate& out, const Estimate& e, const std::string& prefix) {
    for (const auto& t : e.terms) out.terms.push_back({prefix + t.component, t.formula, t.substituted, t.bytes, t.source});
}

EstimateInput critic_input(const EstimateInput& in, const WorkloadSettings& w) {
    if (w.critic.stage < 0 || w.critic.stage > 3)
        throw InputError("--critic-stage: " + std::to_string(w.critic.stage) + " is outside 0..3");
    EstimateInput c = in;
    c.model = w.critic.model;
    c.train.trainable_params.reset();
    c.train.lora_rank = 0;
    c.train.load_in_bits = 16;
    c.zero.stage = w.critic.stage;
    c.zero.offload_optimizer = w.critic.offload_optimizer;
    c.zero.offload_param = w.critic.offload_param;
    c.generation.reset();  // --eval-generate describes the actor's evaluation, not the critic's
    // The critic ends in a value head (h -> 1) instead of the LM head: its
    // "logits" are sb x 1, so the activation figure uses a vocabulary of 1
    // (its parameter count is model.params, set when it was resolved).
    if (c.model.arch) c.model.arch->vocab_size = 1;
    return c;
}

PpoModels ppo_models(const EstimateInput& in, const WorkloadSettings& w, WorkloadEstimate& out, const Explain& ex) {
    const RolloutSettings& r = w.rollout;
    if (!in.model.arch) throw InputError("--workload ppo: needs the actor's architecture (--model or --hf-config)");
    if (r.prompt_len <= 0 || r.new_tokens <= 0 || r.batch <= 0)
        throw InputError("--workload ppo: --rollout-prompt-len, --rollout-new-tokens and --rollout-batch must be positive");
    PpoModels m;
    m.actor_in = in;
    m.actor_in.train.seq_len = r.prompt_len + r.new_tokens;
    out.policy = estimate(m.actor_in, ex.on);
    m.critic_in = critic_input(in, w);
    m.critic_in.train.seq_len = m.actor_in.train.seq_len;
    out.critic = estimate(m.critic_in, ex.on);
    if (ex.on) {
        append_terms(out, out.policy, "actor: ");
        append_terms(out, *out.critic, "critic: ");
    }
    m.actor_resident = trained_resident(out.policy, m.actor_in);
    m.critic_resident = trained_resident(*out.critic, m.critic_in);
    m.baseline = in.residual.host_process_overhead * u(in.cluster.gpus_per_node());
    m.actor_host = out.policy.per_node.host_steady;
    m.critic_host = out.critic->per_node.host_steady > m.baseline ? out.critic->per_node.host_steady - m.baseline : 0;
    ex.term("actor: resident model states", "parameters + gradient buffers + optimizer states after a step, + fragmentation",
            "from the actor's checkpoint_save phase", m.actor_resident, kSrcDsChat);
    ex.term("critic: resident model states", "parameters + gradient buffers + optimizer states after a step, + fragmentation",
            "from the critic's checkpoint_save phase", m.critic_resident, kSrcDsChat);
    const int64_t s = m.actor_in.train.seq_len;
    m.ref = frozen_figures(in, w.reference, "ref", s, r.batch, true, ex);
    m.reward = frozen_figures(in, w.reward, "reward", s, r.batch, false, ex);
    for (const std::string* n : {&m.ref.note, &m.reward.note})
        if (!n->empty()) out.notes.push_back(*n);
    return m;
}

// The shares of the models that are not active in a phase.
void add_resident(WorkloadPhase& ph, const PpoModels& m, bool actor, bool critic, bool ref, bool reward) {
    if (actor) ph.models.push_back({"actor", "resident (model states)", true, m.actor_resident, m.actor_host});
    if (critic) ph.models.push_back({"critic", "resident (model states)", true, m.critic_resident, m.critic_host});
    if (ref) ph.models.push_back({"reference", "resident (frozen parameters)", false, m.ref.resident, m.ref.host_node});
    if (reward) ph.models.push_back({"reward", "resident (frozen parameters)", false, m.reward.resident, m.reward.host_node});
}

// The actor generates the rollouts: its model states, the gathered 16-bit
// model under ZeRO-3, the KV cache, the prefill working set and the last
// position's logits; the other three models are resident.
WorkloadPhase ppo_generation(const EstimateInput& in, const WorkloadSettings& w, const PpoModels& m, const Explain& ex) {
    const RolloutSettings& r = w.rollout;
    const ModelArch& a = *in.model.arch;
    const uint64_t bm = u(dtype_bytes(in.train.dtype));
    // Under expert parallelism the actor's rank holds and gathers only its
    // num_experts / E_p local experts (deepspeed/moe/layer.py MoE.__init__).
    const uint64_t held = expert_split(in).held;
    const uint64_t gathered = in.zero.stage == 3 ? bm * held : 0;
    GenerationShape shape;
    shape.batch = r.batch;
    shape.prompt_len = r.prompt_len;
    shape.max_new_tokens = r.new_tokens;
    shape.tp = in.cluster.tp;
    // transformers >= 4.45: generate keeps only the last position's logits.
    const bool last_only = stack_facts(in.stack).generate_keeps_last_logits_only;
    const GenerationMemory gm = generation_memory(a, shape, bm, last_only);
    const uint64_t prefill = inference_activation_bytes(a, r.prompt_len, r.batch, in.cluster.tp, bm, false);
    // The prefill moment (prompt's cache, its forward's working set and
    // logits) or the last decoding step (the whole cache), whichever is larger.
    const uint64_t at_prefill = gm.kv_at_prefill + gm.prefill_logits.bytes + gm.step_logits.bytes + prefill;
    const uint64_t at_last = gm.kv_cache.bytes + gm.step_logits.bytes;
    const uint64_t generating = std::max(at_prefill, at_last);
    if (in.zero.stage == 3)
        ex.term("actor: parameters gathered for generation",
                in.moe.ep() > 1 ? "b_m · (non-expert + routed experts / E_p) (the rank's 16-bit model, beside its partition)"
                                : "b_m · Ψ (the whole 16-bit model, beside its partition)",
                "b_m=" + num(bm) + ", held=" + num(held), gathered, kSrcGather);
    ex.term(std::string("actor: ") + gm.kv_cache.name, gm.kv_cache.formula,
            "batch=" + num(u(r.batch)) + ", tokens=" + num(u(r.prompt_len + r.new_tokens)) + ", layers=" +
                num(u(a.num_layers)) + ", kv heads=" + num(u(a.num_kv_heads)) + ", head_dim=" + num(u(a.head_dim)),
            gm.kv_cache.bytes, gm.kv_cache.source);
    ex.term(std::string("actor: ") + gm.step_logits.name, gm.step_logits.formula, "V=" + num(u(a.vocab_size)),
            gm.step_logits.bytes, gm.step_logits.source);
    if (gm.prefill_logits.bytes > 0)
        ex.term(std::string("actor: ") + gm.prefill_logits.name, gm.prefill_logits.formula,
                "prompt=" + num(u(r.prompt_len)), gm.prefill_logits.bytes, gm.prefill_logits.source);
    ex.term("actor: prefill forward working set (no_grad)", "one layer's live tensors b_m·sb(2h + max(h + 2·kv·d, f or 2f))",
            "s=" + num(u(r.prompt_len)) + ", b=" + num(u(r.batch)), prefill, kSrcNoGrad);
    ex.term("actor: generation moment", "max(prefill: prompt cache + prefill logits + step logits + working set, "
            "last step: whole cache + step logits)", "prefill=" + num(at_prefill) + ", last step=" + num(at_last),
            generating, "zeromem generation.h generation_memory");
    WorkloadPhase ph;
    ph.name = "generation";
    const uint64_t actor = m.actor_resident + with_fragmentation(in, gathered + generating);
    ph.models.push_back({"actor", "generating rollouts (KV cache)", true, actor, m.actor_host});
    add_resident(ph, m, false, true, true, true);
    finish_phase(ph, in);
    return ph;
}

// make_experience: the actor, reference, reward and critic forwards on the
// rollouts, one after another, each under no_grad.
std::vector<WorkloadPhase> ppo_experience(const EstimateInput& in, const WorkloadSettings& w, const PpoModels& m) {
    const RolloutSettings& r = w.rollout;
    const int64_t s = r.prompt_len + r.new_tokens;
    const uint64_t bm = u(dtype_bytes(in.train.dtype));
    auto trained_forward = [&](const EstimateInput& mi, uint64_t resident, bool logits) {
        const uint64_t gathered = mi.zero.stage == 3
            ? bm * std::min<uint64_t>(mi.model.params, mi.model.largest_layer_params + u(mi.zero.stage3_prefetch_bucket_size))
            : 0;
        const uint64_t act = mi.model.arch ? inference_activation_bytes(*mi.model.arch, s, r.batch, mi.cluster.tp, bm, logits) : 0;
        return resident + with_fragmentation(in, gathered + act);
    };
    std::vector<WorkloadPhase> out(4);
    out[0].name = "experience_actor";
    out[0].models.push_back({"actor", "forward under no_grad (log-probs)", true, trained_forward(m.actor_in, m.actor_resident, true), m.actor_host});
    add_resident(out[0], m, false, true, true, true);
    out[1].name = "experience_reference";
    out[1].models.push_back({"reference", "forward under no_grad (log-probs)", false, m.ref.forward, m.ref.host_node});
    add_resident(out[1], m, true, true, false, true);
    out[2].name = "experience_reward";
    out[2].models.push_back({"reward", "forward under no_grad (score)", false, m.reward.forward, m.reward.host_node});
    add_resident(out[2], m, true, true, true, false);
    out[3].name = "experience_critic";
    out[3].models.push_back({"critic", "forward under no_grad (values)", true, trained_forward(m.critic_in, m.critic_resident, false), m.critic_host});
    add_resident(out[3], m, true, false, true, true);
    for (auto& ph : out) finish_phase(ph, in);
    return out;
}

// A trained model's share in a steady step's phase: "forward" is the first
// forward plus Adam's m and v (allocated at the first step, live from then
// on); "backward" is steady_backward; "optimizer_step" as estimated.
uint64_t steady_share(const Estimate& e, const EstimateInput& in, const std::string& name) {
    if (name == "backward") return share_of(phase_named(e, "steady_backward"));
    if (name != "forward") return share_of(phase_named(e, name));
    const GpuMemory& first = phase_named(e, "forward").per_gpu;
    const GpuMemory& later = phase_named(e, "steady_backward").per_gpu;
    const uint64_t moments = (later.momentum + later.variance) - (first.momentum + first.variance);
    return share_of(phase_named(e, "forward")) + with_fragmentation(in, moments);
}

// Host RAM of a steady step's phase (CPU Adam's states live from the first step on).
uint64_t steady_host(const Estimate& e, const std::string& name) {
    if (name == "optimizer_step") return phase_named(e, name).per_node.host_memory;
    return std::max(phase_named(e, name == "backward" ? "steady_backward" : "forward").per_node.host_memory,
                    e.per_node.host_steady);
}

// Training: the actor's, then the critic's forward, backward and step of a
// steady PPO step, the other models resident.
void ppo_training(const EstimateInput& in, const PpoModels& m, WorkloadEstimate& out) {
    for (const char* name : {"forward", "backward", "optimizer_step"}) {
        WorkloadPhase ph;
        ph.name = std::string("actor_") + name;
        ph.models.push_back({"actor", std::string("training: ") + name, true, steady_share(out.policy, m.actor_in, name),
                             steady_host(out.policy, name)});
        add_resident(ph, m, false, true, true, true);
        finish_phase(ph, in);
        out.phases.push_back(std::move(ph));
    }
    for (const char* name : {"forward", "backward", "optimizer_step"}) {
        WorkloadPhase ph;
        ph.name = std::string("critic_") + name;
        const uint64_t host = steady_host(*out.critic, name);
        ph.models.push_back({"critic", std::string("training: ") + name, true, steady_share(*out.critic, m.critic_in, name),
                             host > m.baseline ? host - m.baseline : 0});
        add_resident(ph, m, true, false, true, true);
        finish_phase(ph, in);
        out.phases.push_back(std::move(ph));
    }
}

}  // namespace

const char* to_string(Workload w) {
    switch (w) {
        case Workload::sft: return "sft";
        case Workload::dpo: return "dpo";
        case Workload::orpo: return "orpo";
        case Workload::ppo: return "ppo";
    }
    return "sft";
}

Workload parse_workload(const std::string& text, const std::string& field) {
    const std::string t = to_lower(text);
    if (t == "sft") return Workload::sft;
    if (t == "dpo") return Workload::dpo;
    if (t == "orpo") return Workload::orpo;
    if (t == "ppo") return Workload::ppo;
    throw InputError(field + ": '" + text + "' is not sft, dpo, orpo or ppo");
}

uint64_t inference_activation_bytes(const ModelArch& a, int64_t s, int64_t b, int64_t t, uint64_t bm, bool logits) {
    if (s <= 0 || b <= 0 || t <= 0 || a.hidden_size <= 0)
        throw InputError("inference forward: sequence length, micro batch, tp and hidden size must be positive");
    const double sb = double(s) * double(b);
    const double h = double(a.hidden_size);
    const double kv = double(a.num_kv_heads > 0 ? a.num_kv_heads : a.num_heads);
    const double d = double(a.head_dim > 0 ? a.head_dim : (a.num_heads > 0 ? a.hidden_size / a.num_heads : 0));
    const double attn = h + 2.0 * kv * d;
    const double mlp = double(a.ffn_size) * (a.gated_mlp ? 2.0 : 1.0);
    const double layer = sb * (2.0 * h + std::max(attn, mlp)) * double(bm) / double(t);
    const double head = logits ? sb * double(a.vocab_size) * double(bm + 4) / double(t) : sb * double(bm);
    return to_bytes(layer + head);
}

namespace {
WorkloadEstimate estimate_ppo(const EstimateInput& in, const WorkloadSettings& w, bool explain) {
    WorkloadEstimate out;
    out.kind = Workload::ppo;
    const Explain ex{explain, &out};
    const PpoModels m = ppo_models(in, w, out, ex);
    out.phases.push_back(ppo_generation(in, w, m, ex));
    for (auto& ph : ppo_experience(in, w, m)) out.phases.push_back(std::move(ph));
    ppo_training(in, m, out);
    out.notes.push_back("PPO step as in DeepSpeed-Chat step 3: generate rollouts, score them (actor, reference, reward "
                        "and critic forwards), then train the actor and the critic; the load phase of each model is in "
                        "its own estimate, not summed.");
    if (in.zero.stage == 3)
        out.notes.push_back("ZeRO-3 actor: the whole 16-bit model is gathered while generating (TRL "
                            "unwrap_model_for_generation, DeepSpeed-Chat hybrid engine).");
    summarize(out);
    return out;
}
}  // namespace

WorkloadSettings effective_workload(const EstimateInput& in, const WorkloadSettings& given) {
    WorkloadSettings w = given;
    const auto& z = in.zero;
    w.reference.model = in.model;  // the reference is a copy of the initial policy (fit varies its size)
    if (w.reference_follows) {
        w.reference.stage = z.stage == 3 ? 3 : 0;
        w.reference.offload_param = z.stage == 3 && z.offload_param == OffloadDevice::cpu ? OffloadDevice::cpu
                                                                                            : OffloadDevice::none;
    }
    if (w.critic_follows) {
        w.critic.stage = z.stage;
        w.critic.offload_optimizer = z.offload_optimizer;
        w.critic.offload_param = z.stage == 3 ? z.offload_param : OffloadDevice::none;
    }
    if (w.reward_follows) {
        w.reward.stage = w.critic.stage == 3 ? 3 : 0;
        if (w.reward.stage != 3) w.reward.offload_param = OffloadDevice::none;
    }
    return w;
}

WorkloadEstimate estimate_workload(const EstimateInput& in, const WorkloadSettings& given, bool explain) {
    if (given.kind == Workload::sft)
        throw InputError("--workload sft: one model; use estimate() (the default estimate)");
    check_cluster(in, given.kind);
    const WorkloadSettings w = effective_workload(in, given);
    WorkloadEstimate out;
    if (w.kind == Workload::ppo) {
        out = estimate_ppo(in, w, explain);
    } else {
        out.kind = w.kind;
        const Explain ex{explain, &out};
        estimate_pairs(in, w, out, ex);
        summarize(out);
    }
    out.settings = w;
    const bool has_ref = w.kind == Workload::ppo || (w.kind == Workload::dpo && !w.precompute_ref_log_probs);
    if (has_ref && w.reference_follows && in.zero.stage == 3 && in.zero.offload_param == OffloadDevice::nvme)
        out.notes.push_back("the policy offloads parameters to NVMe; the frozen reference's NVMe offload is not "
                            "modelled, so its partition is counted on the GPU (--ref-offload cpu to move it to host RAM).");
    return out;
}

std::string workload_summary(const WorkloadSettings& w) {
    switch (w.kind) {
        case Workload::sft: return "";
        case Workload::dpo:
            return w.precompute_ref_log_probs
                       ? "workload dpo with precomputed reference log-probs: memory of the policy at 2b sequences per "
                         "micro batch of b pairs; speed of the policy at b sequences"
                       : "workload dpo: memory is the sum of the policy (2b sequences per micro batch of b pairs) and a "
                         "frozen reference at each option's peak phase, the reference at stage 3 when the option is, else 0 "
                         "(unless --ref-stage); speed is the policy's alone at b sequences";
        case Workload::orpo:
            return "workload orpo: memory of the policy at 2b sequences per micro batch of b pairs; speed at b sequences";
        case Workload::ppo:
            return "workload ppo: memory is the sum of actor, critic, reward and reference at each option's peak phase "
                   "(rollout generation included); speed is the actor's training step alone";
    }
    return "";
}

Estimate memory_estimate(const EstimateInput& in) {
    if (!in.workload || in.workload->kind == Workload::sft) return estimate(in);
    const WorkloadEstimate w = estimate_workload(in, *in.workload);
    Estimate e = w.policy;
    e.per_gpu.total = w.per_gpu;
    e.per_node.host_memory = w.per_node_host;
    e.fits_gpu = w.fits_gpu;
    e.fits_host = w.fits_host;
    e.peak_phase = w.peak_phase;
    e.notes.push_back(std::string("--workload ") + to_string(w.kind) + ": the total is the sum of every model's share "
                      "at the workload's peak phase (" + w.peak_phase + "); the components are the trained model's.");
    return e;
}

}  // namespace zeromem
