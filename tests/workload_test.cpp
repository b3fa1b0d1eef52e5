// --workload dpo|orpo|ppo: per-model shares and their sums, checked against
// hand arithmetic written here. Llama-2-7b: Ψ = 6,738,415,616 parameters
// (Meta's published count; the Hugging Face model card of
// meta-llama/Llama-2-7b-hf), h = 4096, 32 layers, 32 heads (no GQA),
// head_dim 128, f = 11008 (SwiGLU), V = 32000, untied LM head.
#include "zeromem/planner.h"
#include "zeromem/report.h"
#include "zeromem/request.h"
#include "zeromem/workload.h"

#include "input_error.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace {

using namespace zeromem;
using zeromem::testing::contains;
using zeromem::testing::error_of;

constexpr uint64_t kPsi = 6738415616ULL;     // Llama-2-7b parameters
constexpr uint64_t kEmbed = 32000ULL * 4096; // largest module: embedding (= LM head) V x h
// The per-process terms one process per GPU holds once (process_terms.h), on 8
// GPUs of one node without a GPU preset (unknown architecture and interconnect):
//  - CUDA context, the largest lazy figure: 426 MiB = 446,693,376 B;
//  - NCCL: WORLD + the data-parallel clone (groups.py _clone_world_group), 24
//    ring channels (H100's NVLink assumed) x (LL 524,288 + LL128 4,915,200 +
//    SIMPLE 4,194,304) = 2 x 231,211,008 = 462,422,016 B;
//  - cuBLAS: 2 handles x (32 MiB, the larger Hopper default, + 1 MiB cuBLASLt)
//    = 69,206,016 B (CublasHandlePool.cpp).
constexpr uint64_t kProcess = (426ULL << 20) + 2ULL * 24 * (524288 + 4915200 + 4194304) +
                              2ULL * ((32ULL << 20) + (1ULL << 20));

Request llama_request(const char* workload, int64_t stage) {
    Request r;
    r.model = "llama-2-7b";
    r.gpus = 8;
    r.stage = stage;
    r.seq_len = 1024;
    r.micro_batch = 1;
    r.fragmentation = 0.0;  // shares then are plain sums of the terms below
    r.workload = workload;
    return r;
}

Resolved resolve(const Request& r) { return resolve_request(r, ZEROMEM_SOURCE_DATA_DIR); }

const WorkloadPhase& phase(const WorkloadEstimate& w, const std::string& name) {
    for (const auto& p : w.phases)
        if (p.name == name) return p;
    ADD_FAILURE() << "no phase " << name;
    return w.phases.front();
}

const ModelShare* share(const WorkloadPhase& p, const std::string& role) {
    for (const auto& m : p.models)
        if (m.role == role) return &m;
    return nullptr;
}

// Forward-only working set by hand: one layer b_m·sb(2h + max(h + 2·kv·d, 2f))
// plus logits sb·V·(b_m + 4) (or a value head sb·b_m).
uint64_t llama_forward_set(uint64_t s, uint64_t b, bool logits) {
    const uint64_t sb = s * b;
    const uint64_t layer = sb * (2 * 4096 + std::max<uint64_t>(4096 + 2 * 32 * 128, 2 * 11008)) * 2;
    return layer + (logits ? sb * 32000 * (2 + 4) : sb * 2);
}

TEST(Workload, ParsesNamesAndRefusesOthers) {
    EXPECT_EQ(parse_workload("DPO", "--workload"), Workload::dpo);
    EXPECT_EQ(parse_workload("ppo", "--workload"), Workload::ppo);
    EXPECT_TRUE(contains(error_of([] { parse_workload("rlhf", "--workload"); }), "--workload"));
}

TEST(Workload, DpoStage3ReferenceIsPartitionedAndThePolicyRunsTwiceTheBatch) {
    const Resolved r = resolve(llama_request("dpo", 3));
    ASSERT_EQ(r.input.model.params, kPsi);
    EXPECT_EQ(r.workload.reference.stage, 3);  // TRL prepare_deepspeed: ZeRO-3 policy -> ZeRO-3 reference
    const WorkloadEstimate w = estimate_workload(r.input, r.workload);
    std::vector<std::string> names;
    for (const auto& p : w.phases) names.push_back(p.name);
    EXPECT_EQ(names, (std::vector<std::string>{"load", "reference_forward", "forward", "backward", "optimizer_step",
                                               "steady_backward", "checkpoint_save"}));
    const uint64_t ref_params = 2 * ((kPsi + 7) / 8);  // b_m · ceil(Ψ/N_d) = 1,684,603,904 B
    EXPECT_EQ(ref_params, 1684603904ULL);
    for (const auto& p : w.phases) {
        if (p.name == "reference_forward") continue;
        const ModelShare* ref = share(p, "reference");
        ASSERT_NE(ref, nullptr) << p.name;
        EXPECT_FALSE(ref->trained);
        EXPECT_EQ(ref->gpu_bytes, ref_params) << p.name;
        // The sum: policy + reference + one process's terms.
        EXPECT_EQ(p.per_gpu, share(p, "policy")->gpu_bytes + ref_params + kProcess) << p.name;
        EXPECT_EQ(p.per_node_gpu, 8 * p.per_gpu);
    }
    // Reference forward: its partition + the gathered module and prefetch
    // (b_m · (L + 0.9 h^2), TRL's stage3_prefetch_bucket_size) + the no_grad
    // working set of 2b = 2 sequences of 1024 tokens.
    const uint64_t gathered = 2 * (kEmbed + 15099494);  // 0.9 · 4096^2 = 15,099,494.4
    const uint64_t fwd = llama_forward_set(1024, 2, true);
    EXPECT_EQ(fwd, 123731968ULL + 393216000ULL);
    EXPECT_EQ(share(phase(w, "reference_forward"), "reference")->gpu_bytes, ref_params + gathered + fwd);
    // The policy's activations are those of micro batch 2b: linear in b, so
    // twice the SFT policy's at b.
    const Estimate sft = estimate(r.input);
    const Estimate& pol = w.policy;
    EXPECT_EQ(pol.phases[1].name, "forward");
    const uint64_t a1 = sft.phases[1].per_gpu.activations, a2 = pol.phases[1].per_gpu.activations;
    EXPECT_NEAR(double(a2), 2.0 * double(a1), 2.0);
    EXPECT_EQ(pol.phases[1].per_gpu.parameters, sft.phases[1].per_gpu.parameters);  // same model states
    EXPECT_EQ(pol.phases[1].per_gpu.optimizer_states, sft.phases[1].per_gpu.optimizer_states);
    EXPECT_EQ(w.peak_phase, "steady_backward");
}

TEST(Workload, DpoBelowStage3KeepsAFullReferenceAndCpuOffloadMovesItToTheHost) {
    const WorkloadEstimate w2 = [] {
        const Resolved r = resolve(llama_request("dpo", 2));
        EXPECT_EQ(r.workload.reference.stage, 0);  // TRL: stage != 3 -> the reference runs at stage 0
        return estimate_workload(r.input, r.workload);
    }();
    EXPECT_EQ(share(phase(w2, "forward"), "reference")->gpu_bytes, 2 * kPsi);  // 13,476,831,232 B
    Request q = llama_request("dpo", 3);
    q.ref_offload = "cpu";
    const Resolved r3 = resolve(q);
    const WorkloadEstimate w3 = estimate_workload(r3.input, r3.workload);
    const ModelShare* ref = share(phase(w3, "backward"), "reference");
    EXPECT_EQ(ref->gpu_bytes, 0U);
    EXPECT_EQ(ref->host_bytes, 8 * 2 * ((kPsi + 7) / 8));  // 8 ranks' partitions on one node
}

TEST(Workload, PrecomputedReferenceAndOrpoHoldNoReference) {
    Request q = llama_request("dpo", 3);
    q.precompute_ref_log_probs = true;
    const Resolved r = resolve(q);
    const WorkloadEstimate w = estimate_workload(r.input, r.workload);
    Request o = llama_request("orpo", 3);
    const Resolved ro = resolve(o);
    const WorkloadEstimate wo = estimate_workload(ro.input, ro.workload);
    for (const WorkloadEstimate* e : {&w, &wo}) {
        EXPECT_EQ(e->phases.size(), 6U);
        for (const auto& p : e->phases) {
            EXPECT_EQ(share(p, "reference"), nullptr) << p.name;
            EXPECT_EQ(p.per_gpu, share(p, "policy")->gpu_bytes + kProcess);
        }
    }
    // ORPO's policy is the same 2b policy as DPO's.
    EXPECT_EQ(wo.policy.per_gpu.total, w.policy.per_gpu.total);
}

TEST(Workload, PpoSumsFourModelsAndGeneratesWithAKvCache) {
    Request q = llama_request("ppo", 3);
    q.seq_len.reset();
    q.rollout_prompt_len = 256;
    q.rollout_new_tokens = 256;
    q.rollout_batch = 4;
    const Resolved r = resolve(q);
    EXPECT_EQ(r.input.train.seq_len, 512);
    // Critic and reward: the transformer with Linear(h, 1) instead of the LM head.
    const uint64_t value_params = kPsi - kEmbed + 4096;
    EXPECT_EQ(r.workload.critic.model.params, value_params);
    EXPECT_EQ(r.workload.reward.model.params, value_params);
    EXPECT_EQ(r.workload.reward.stage, 3);
    const WorkloadEstimate w = estimate_workload(r.input, r.workload);
    ASSERT_TRUE(w.critic.has_value());
    const WorkloadPhase& gen = phase(w, "generation");
    EXPECT_EQ(gen.models.size(), 4U);
    EXPECT_EQ(share(gen, "reference")->gpu_bytes, 2 * ((kPsi + 7) / 8));
    EXPECT_EQ(share(gen, "reward")->gpu_bytes, 2 * ((value_params + 7) / 8));
    // Generation on top of the actor's resident states: the gathered 16-bit
    // model 2Ψ, then the larger of the prefill moment (the prompt's cache
    // 4 x 256 x 32 layers x 2 x 32 heads x 128 x 2 B = 0.5 GiB, the step
    // logits 4 x V x (2 + 4 + 4) B and the prefill working set of 4 x 256
    // tokens) and the last step (the whole cache over 512 tokens = 1 GiB,
    // and the step logits).
    const uint64_t resident = share(phase(w, "critic_forward"), "actor")->gpu_bytes;
    const uint64_t step_logits = 4ULL * 32000 * 10;
    const uint64_t at_prefill = 536870912ULL + step_logits + llama_forward_set(256, 4, false);
    const uint64_t at_last = 1073741824ULL + step_logits;
    EXPECT_LT(at_prefill, at_last);
    const uint64_t extra = 2 * kPsi + at_last;
    EXPECT_EQ(share(gen, "actor")->gpu_bytes, resident + extra);
    // A steady step's actor forward holds Adam's m and v, which the first
    // forward (the actor's own estimate) does not: 8 B x ceil(Ψ/N_d).
    const PhaseMemory& first = w.policy.phases[1];
    ASSERT_EQ(first.name, "forward");
    EXPECT_EQ(share(phase(w, "actor_forward"), "actor")->gpu_bytes,
              first.per_gpu.total - kProcess + 8 * ((kPsi + 7) / 8));
    uint64_t sum = kProcess;
    for (const auto& m : gen.models) sum += m.gpu_bytes;
    EXPECT_EQ(gen.per_gpu, sum);
    // The verdict is on the sum: the peak phase's total.
    uint64_t peak = 0;
    for (const auto& p : w.phases) peak = std::max(peak, p.per_gpu);
    EXPECT_EQ(w.per_gpu, peak);
    EXPECT_FALSE(w.fits_gpu.has_value());  // no --gpu-memory given
}

TEST(Workload, FlagsAreCheckedAndNamed) {
    Request bad = llama_request("grpo", 3);
    EXPECT_TRUE(contains(error_of([&] { resolve(bad); }), "--workload"));
    Request stage = llama_request("dpo", 3);
    stage.ref_stage = 4;
    EXPECT_TRUE(contains(error_of([&] { resolve(stage); }), "--ref-stage"));
    Request pre = llama_request("orpo", 3);
    pre.precompute_ref_log_probs = true;
    EXPECT_TRUE(contains(error_of([&] { resolve(pre); }), "--precompute-ref-log-probs"));
    Request sft = llama_request("sft", 3);
    sft.precompute_ref_log_probs = true;
    EXPECT_TRUE(contains(error_of([&] { resolve(sft); }), "--precompute-ref-log-probs"));
    Request critic = llama_request("dpo", 3);
    critic.critic_stage = 2;
    EXPECT_TRUE(contains(error_of([&] { resolve(critic); }), "--critic-stage"));
    Request offload = llama_request("dpo", 2);
    offload.ref_offload = "cpu";  // reference at stage 0: nothing to offload
    EXPECT_TRUE(contains(error_of([&] { resolve(offload); }), "--ref-offload"));
    Request nvme = llama_request("dpo", 3);
    nvme.ref_offload = "nvme";
    EXPECT_TRUE(contains(error_of([&] { resolve(nvme); }), "--ref-offload"));
    Request ppo = llama_request("ppo", 3);
    ppo.rollout_prompt_len = 2048;  // all of --seq-len 1024 and more
    EXPECT_TRUE(contains(error_of([&] { resolve(ppo); }), "--rollout-prompt-len"));
    Request noarch;
    noarch.params = "7e9";
    noarch.workload = "ppo";
    EXPECT_TRUE(contains(error_of([&] { resolve(noarch); }), "--workload ppo"));
    const Resolved one = resolve(llama_request("dpo", 3));
    EXPECT_TRUE(contains(error_of([&] { require_single_model(one, "fit"); }), "--workload dpo"));
}

// DeepSpeed-Chat uses the actor's tokenizer for all four models: a critic or
// reward model of another vocabulary (Llama-3: 128256 tokens; Llama-2 actor:
// 32000, both from the presets' config.json) is warned about; one of the
// same vocabulary (Mistral-7B: 32000) is not.
TEST(Workload, PpoSideModelOfAnotherVocabularyIsWarned) {
    Request q = llama_request("ppo", 3);
    q.critic_model = "llama-3-8b";
    const Resolved r = resolve(q);
    bool critic = false;
    for (const auto& w : r.warnings) critic = critic || (contains(w, "critic model") && contains(w, "128256") && contains(w, "32000"));
    EXPECT_TRUE(critic);
    Request same = llama_request("ppo", 3);
    same.critic_model = "mistral-7b";
    same.reward_model = "mistral-7b";
    for (const auto& w : resolve(same).warnings) EXPECT_FALSE(contains(w, "vocab_size")) << w;
    Request reward = llama_request("ppo", 3);
    reward.reward_model = "llama-3-8b";
    bool warned = false;
    for (const auto& w : resolve(reward).warnings) warned = warned || contains(w, "reward model");
    EXPECT_TRUE(warned);
}

TEST(Workload, JsonCarriesEveryModelPerPhaseAndTheSums) {
    Request q = llama_request("dpo", 3);
    q.gpu_memory = "80GiB";
    const Resolved r = resolve(q);
    const WorkloadEstimate w = estimate_workload(r.input, r.workload, true);
    const auto j = nlohmann::json::parse(render_workload(w, r, Format::json, true));
    EXPECT_EQ(j["workload"], "dpo");
    ASSERT_EQ(j["models"].size(), 2U);
    EXPECT_EQ(j["models"][1]["role"], "reference");
    EXPECT_EQ(j["models"][1]["stage"], 3);
    EXPECT_EQ(j["models"][1]["trained"], false);
    EXPECT_EQ(j["models"][1]["params"].get<uint64_t>(), kPsi);
    ASSERT_EQ(j["phases"].size(), w.phases.size());
    const auto& rf = j["phases"][1];
    EXPECT_EQ(rf["name"], "reference_forward");
    EXPECT_EQ(rf["models"][1]["role"], "reference");
    EXPECT_EQ(rf["per_gpu"].get<uint64_t>(),
              rf["models"][0]["gpu_bytes"].get<uint64_t>() + rf["models"][1]["gpu_bytes"].get<uint64_t>() + kProcess);
    EXPECT_EQ(rf["per_node_gpu"].get<uint64_t>(), 8 * rf["per_gpu"].get<uint64_t>());
    EXPECT_EQ(j["per_gpu"].get<uint64_t>(), w.per_gpu);
    EXPECT_EQ(j["fits_gpu"].get<bool>(), w.per_gpu <= 85899345920ULL);
    EXPECT_FALSE(j["terms"].empty());
    bool named = false;  // --explain names the reference's terms and their source
    for (const auto& t : j["terms"])
        named = named || (contains(t["component"], "ref: parameters") && contains(t["source"], "prepare_deepspeed"));
    EXPECT_TRUE(named);
    const std::string table = render_workload(w, r, Format::table, false);
    EXPECT_TRUE(contains(table, "reference_forward"));
    EXPECT_TRUE(contains(table, "GiB"));
    EXPECT_TRUE(contains(error_of([&] { render_workload(w, r, Format::csv, true); }), "--explain"));
}

}  // namespace

namespace {

// The planner judges the sum: memory_estimate() carries the workload's peak.
TEST(Workload, PlannerMemoryIsTheSumAndTheReferenceFollowsThePolicyStage) {
    Request q = llama_request("dpo", 3);
    q.gpu_memory = "80GiB";
    const Resolved r = resolve(q);
    ASSERT_TRUE(r.input.workload);
    const WorkloadEstimate w = estimate_workload(r.input, r.workload);
    const Estimate e = memory_estimate(r.input);
    EXPECT_EQ(e.per_gpu.total, w.per_gpu);
    EXPECT_EQ(e.fits_gpu, w.fits_gpu);
    EXPECT_GT(e.per_gpu.total, estimate(r.input).per_gpu.total);
    // The planner tries stage 2: the reference then runs at stage 0 (TRL),
    // a full 16-bit copy of 2Ψ on every GPU.
    EstimateInput s2 = r.input;
    s2.zero.stage = 2;
    const WorkloadEstimate w2 = estimate_workload(s2, r.workload);
    EXPECT_EQ(w2.settings.reference.stage, 0);
    EXPECT_EQ(share(phase(w2, "forward"), "reference")->gpu_bytes, 2 * kPsi);
    // A stage given by flag is kept.
    Request fixed = llama_request("dpo", 3);
    fixed.ref_stage = 3;
    const Resolved rf = resolve(fixed);
    EstimateInput f2 = rf.input;
    f2.zero.stage = 2;
    EXPECT_EQ(estimate_workload(f2, rf.workload).settings.reference.stage, 3);
    // No workload: memory_estimate is estimate.
    const Resolved sft = resolve(llama_request("sft", 3));
    EXPECT_FALSE(sft.input.workload);
    EXPECT_EQ(memory_estimate(sft.input).per_gpu.total, estimate(sft.input).per_gpu.total);
}

// fit: a DPO run needs at least as many GPUs as SFT of the same model, per
// option, and the count it finds fits.
TEST(Workload, FewestGpusForDpoIsNoFewerThanForSft) {
    Request q = llama_request("dpo", 3);
    q.gpu_memory = "40GiB";
    const Resolved dpo = resolve(q);
    const Resolved sft = resolve([] { Request s = llama_request("sft", 3); s.gpu_memory = "40GiB"; return s; }());
    const auto rows_dpo = fewest_gpus(dpo.input, 8, 64);
    const auto rows_sft = fewest_gpus(sft.input, 8, 64);
    ASSERT_EQ(rows_dpo.size(), rows_sft.size());
    bool some = false;
    for (const FitRow& d : rows_dpo) {  // rows are ranked (fit_ranks_before): pair them by option
        if (d.value == 0) continue;
        some = true;
        const auto s = std::find_if(rows_sft.begin(), rows_sft.end(),
                                    [&](const FitRow& r) { return r.option.label() == d.option.label(); });
        ASSERT_NE(s, rows_sft.end()) << d.option.label();
        EXPECT_GE(d.value, s->value) << d.option.label();
        EXPECT_LE(d.per_gpu_total, 40ULL << 30) << d.option.label();
    }
    EXPECT_TRUE(some);
}

}  // namespace

// Expert parallelism reaches the frozen reference: a deep copy of a
// DeepSpeed-MoE policy holds num_experts / E_p experts per block
// (deepspeed/moe/layer.py MoE.__init__ num_local_experts). Mixtral-8x7B:
// Ψ = 46,702,792,704 (KerasHub mixtral_8_7b_en), routed experts
// 32 · 8 · 3 · 4096 · 14336 = 45,097,156,608, so 1,605,636,096 non-expert.
TEST(Workload, DpoReferenceUnderExpertParallelismHoldsItsLocalExperts) {
    constexpr uint64_t kMixPsi = 46702792704ULL, kRouted = 32ULL * 8 * 3 * 4096 * 14336;
    constexpr uint64_t kNonExpert = kMixPsi - kRouted;
    Request q;
    q.model = "mixtral-8x7b";
    q.gpus = 8;
    q.stage = 2;
    q.seq_len = 1024;
    q.micro_batch = 1;
    q.fragmentation = 0.0;
    q.workload = "dpo";
    q.ep_size = 8;
    const Resolved r2 = resolve(q);
    const WorkloadEstimate w2 = estimate_workload(r2.input, r2.workload);
    // Stage 2 -> the reference at stage 0: b_m · (non-expert + routed / 8) = 2 · 7,242,780,672.
    EXPECT_EQ(share(phase(w2, "forward"), "reference")->gpu_bytes, 2 * (kNonExpert + kRouted / 8));
    EXPECT_EQ(2 * (kNonExpert + kRouted / 8), 14485561344ULL);
    // Stage 3 on 16 GPUs, E_p 8: non-experts over N_d = 16, the rank's experts over N_d / E_p = 2:
    // 2 · (1,605,636,096 / 16 + 5,637,144,576 / 2) = 2 · (100,352,256 + 2,818,572,288).
    q.gpus = 16;
    q.stage = 3;
    const Resolved r3 = resolve(q);
    const WorkloadEstimate w3 = estimate_workload(r3.input, r3.workload);
    EXPECT_EQ(share(phase(w3, "backward"), "reference")->gpu_bytes, 2ULL * (100352256ULL + 2818572288ULL));
}

// Mixtral-8x7B under PPO with --ep-size 8, 256 + 256 rollout tokens.
Request mixtral_ppo_request(int64_t gpus, int64_t stage) {
    Request q;
    q.model = "mixtral-8x7b";
    q.gpus = gpus;
    q.stage = stage;
    q.micro_batch = 1;
    q.fragmentation = 0.0;
    q.workload = "ppo";
    q.ep_size = 8;
    q.rollout_prompt_len = 256;
    q.rollout_new_tokens = 256;
    return q;
}

// PPO under --ep-size 8 at stage 2 (frozen models at stage 0): the
// reference and the Mixtral reward (value head Linear(h, 1) instead of the
// 32000 x 4096 LM head) hold 1 of 8 experts per block; a reward model
// whose experts 8 does not divide holds them all, and a note says so.
TEST(Workload, PpoFrozenMoeModelsUnderExpertParallelism) {
    constexpr uint64_t kMixPsi = 46702792704ULL, kRouted = 32ULL * 8 * 3 * 4096 * 14336;
    const uint64_t value_params = kMixPsi - 32000ULL * 4096 + 4096;
    Resolved r = resolve(mixtral_ppo_request(8, 2));
    ASSERT_EQ(r.workload.reward.model.params, value_params);
    const WorkloadEstimate w = estimate_workload(r.input, r.workload);
    const WorkloadPhase& gen = phase(w, "generation");
    EXPECT_EQ(share(gen, "reference")->gpu_bytes, 2 * (kMixPsi - kRouted + kRouted / 8));
    EXPECT_EQ(share(gen, "reward")->gpu_bytes, 2 * (value_params - kRouted + kRouted / 8));
    // The same reward model described with 6 experts: 8 does not divide them.
    r.workload.reward.model.arch->num_experts = 6;
    const WorkloadEstimate w6 = estimate_workload(r.input, r.workload);
    EXPECT_EQ(share(phase(w6, "generation"), "reward")->gpu_bytes, 2 * value_params);
    bool noted = false;
    for (const auto& n : w6.notes) noted = noted || contains(n, "does not divide its 6 experts");
    EXPECT_TRUE(noted);
}

// PPO rollouts at stage 3 under --ep-size 8 on 16 GPUs: the actor gathers
// only its rank's model for generation, b_m · (non-expert + routed / 8) =
// 2 · (46,702,792,704 − 45,097,156,608 + 5,637,144,576) = 14,485,561,344 B,
// not the whole 2 · 46.7e9 (deepspeed/moe/layer.py num_local_experts).
TEST(Workload, PpoRolloutGatherUnderExpertParallelismHoldsTheLocalExperts) {
    constexpr uint64_t kMixPsi = 46702792704ULL, kRouted = 32ULL * 8 * 3 * 4096 * 14336;
    const Resolved r = resolve(mixtral_ppo_request(16, 3));
    const WorkloadEstimate w = estimate_workload(r.input, r.workload, true);
    uint64_t gathered = 0;
    for (const auto& t : w.terms)
        if (contains(t.component, "actor: parameters gathered for generation")) gathered = t.bytes;
    EXPECT_EQ(gathered, 2 * (kMixPsi - kRouted + kRouted / 8));
    EXPECT_EQ(gathered, 14485561344ULL);
}
