// --workload and its flags, resolved into WorkloadSettings (see request.h).
#include "zeromem/request.h"

#include "zeromem/util.h"

#include <memory>

namespace zeromem {

namespace {

// The first workload flag in `names` that is set, or empty.
struct FlagSet {
    const char* name;
    bool set;
};

void refuse_unless(bool allowed, std::initializer_list<FlagSet> flags, const std::string& why) {
    if (allowed) return;
    for (const auto& f : flags)
        if (f.set) throw InputError(std::string(f.name) + ": " + why);
}

int stage_flag(int64_t v, const char* flag) {
    if (v < 0 || v > 3) throw InputError(std::string(flag) + ": " + std::to_string(v) + " is outside 0..3");
    return static_cast<int>(v);
}

OffloadDevice frozen_offload(const std::string& text, const char* flag) {
    const OffloadDevice d = parse_offload_device(text, flag);
    if (d == OffloadDevice::nvme)
        throw InputError(std::string(flag) + ": nvme is not modelled for a frozen model; use none or cpu");
    return d;
}

// A value model (critic, reward): the transformer with a value head
// Linear(h, 1, bias=False) in place of the LM head (DeepSpeed-Chat
// dschat/utils/model/reward_model.py RewardModel.v_head).
ModelInfo value_model(const ModelArch& arch) {
    const ParamCount pc = count_params(arch);
    ModelInfo m;
    m.name = arch.name + " (value head)";
    m.params = pc.total - pc.lm_head + static_cast<uint64_t>(arch.hidden_size);
    m.largest_layer_params = pc.largest_module;
    m.arch = arch;
    return m;
}

// --X-model or --X-hf-config, else nullopt.
std::optional<ModelArch> side_arch(const std::optional<std::string>& preset, const std::optional<std::string>& path,
                                   const char* preset_flag, const char* path_flag, const std::string& data_dir) {
    if (preset && path) throw InputError(std::string(preset_flag) + ": give " + preset_flag + " or " + path_flag + ", not both");
    try {
        if (preset) {
            std::string name = *preset;
            for (const auto& k : list_model_presets(data_dir))
                if (to_lower(k) == to_lower(name)) name = k;
            return load_model_preset(name, data_dir);
        }
        if (path) {
            ModelArch a = load_hf_config(*path);
            if (a.name.empty()) a.name = *path;
            return a;
        }
    } catch (const InputError& e) {
        throw InputError(std::string(preset ? preset_flag : path_flag) + ": " + e.what());
    }
    return std::nullopt;
}

// --rollout-*: prompt + new tokens is the sequence the actor and critic train on.
void resolve_rollout(const Request& req, Resolved& r) {
    auto& t = r.input.train;
    RolloutSettings& ro = r.workload.rollout;
    ro.batch = req.rollout_batch ? *req.rollout_batch : t.micro_batch;
    if (ro.batch <= 0) throw InputError("--rollout-batch: must be a positive integer");
    const int64_t s = t.seq_len;
    if (req.rollout_prompt_len && *req.rollout_prompt_len <= 0)
        throw InputError("--rollout-prompt-len: must be a positive integer");
    if (req.rollout_new_tokens && *req.rollout_new_tokens <= 0)
        throw InputError("--rollout-new-tokens: must be a positive integer");
    if (req.rollout_prompt_len && req.rollout_new_tokens) {
        ro.prompt_len = *req.rollout_prompt_len;
        ro.new_tokens = *req.rollout_new_tokens;
        if (req.seq_len && ro.prompt_len + ro.new_tokens != s)
            throw InputError("--seq-len: PPO trains on prompt + generated tokens; --rollout-prompt-len " +
                             std::to_string(ro.prompt_len) + " + --rollout-new-tokens " + std::to_string(ro.new_tokens) +
                             " != --seq-len " + std::to_string(s) + " (give two of the three)");
    } else {
        ro.prompt_len = req.rollout_prompt_len ? *req.rollout_prompt_len
                        : req.rollout_new_tokens ? s - *req.rollout_new_tokens : s / 2;
        ro.new_tokens = s - ro.prompt_len;
        if (ro.prompt_len <= 0 || ro.new_tokens <= 0)
            throw InputError(std::string(req.rollout_prompt_len ? "--rollout-prompt-len" : "--rollout-new-tokens") +
                             ": leaves no tokens of --seq-len " + std::to_string(s) + " for the other part");
    }
    t.seq_len = ro.prompt_len + ro.new_tokens;
    r.provenance["rollout"] = "batch " + std::to_string(ro.batch) + ", prompt " + std::to_string(ro.prompt_len) +
                              " + new " + std::to_string(ro.new_tokens) + " tokens (DeepSpeed-Chat max_prompt_seq_len, "
                              "max_answer_seq_len; default: half of --seq-len each, batch = --micro-batch)";
}

// The reference (dpo, ppo): a copy of the initial policy under its own engine.
void resolve_reference(const Request& req, Resolved& r) {
    const EstimateInput& in = r.input;
    FrozenModel& f = r.workload.reference;
    f.model = in.model;
    f.stage = req.ref_stage ? stage_flag(*req.ref_stage, "--ref-stage") : (in.zero.stage == 3 ? 3 : 0);
    f.offload_param = req.ref_offload ? frozen_offload(*req.ref_offload, "--ref-offload")
                                      : (f.stage == 3 && in.zero.stage == 3 ? in.zero.offload_param : OffloadDevice::none);
    if (f.offload_param == OffloadDevice::nvme) f.offload_param = OffloadDevice::none;
    if (f.offload_param != OffloadDevice::none && f.stage != 3)
        throw InputError("--ref-offload: parameter offload needs --ref-stage 3 (DeepSpeed offloads parameters only under ZeRO-3)");
    f.prefetch_bucket = in.model.arch ? static_cast<int64_t>(0.9 * double(in.model.arch->hidden_size) *
                                                            double(in.model.arch->hidden_size))
                                      : in.zero.stage3_prefetch_bucket_size;
    r.workload.reference_follows = !req.ref_stage && !req.ref_offload;
    r.provenance["reference"] = "stage " + std::to_string(f.stage) + ", offload_param " + to_string(f.offload_param) +
                                (req.ref_stage ? " (--ref-stage)" : " (default: 3 when the policy is ZeRO-3, else 0, "
                                                                   "as TRL prepare_deepspeed and DeepSpeed-Chat do)");
}

// DeepSpeed-Chat scores the actor's tokens with the actor's tokenizer and
// resizes the critic's and reward model's embeddings to it
// (dschat/utils/model/model_utils.py create_critic_model,
// resize_token_embeddings): a side model of another vocabulary is counted
// with its own vocab_size, which the run would not keep; said as a warning.
void warn_other_vocabulary(const std::optional<ModelArch>& side, const ModelArch& actor, const char* role,
                           std::vector<std::string>& warnings) {
    if (!side || side->vocab_size == actor.vocab_size) return;
    warnings.push_back(std::string("--workload ppo: the ") + role + " model " + side->name + " has vocab_size " +
                       std::to_string(side->vocab_size) +
                       ", the actor " + std::to_string(actor.vocab_size) +
                       ": DeepSpeed-Chat uses the actor's tokenizer for every model and resizes the others' "
                       "embeddings to it; zeromem counts this model's own vocabulary");
}

// PPO's critic (trained) and reward (frozen) models.
void resolve_critic_reward(const Request& req, Resolved& r, const std::string& data_dir) {
    const EstimateInput& in = r.input;
    WorkloadSettings& w = r.workload;
    const auto critic_arch = side_arch(req.critic_model, req.critic_hf_config, "--critic-model", "--critic-hf-config", data_dir);
    const auto reward_arch = side_arch(req.reward_model, req.reward_hf_config, "--reward-model", "--reward-hf-config", data_dir);
    if (!in.model.arch) throw InputError("--workload ppo: needs the actor's architecture (--model or --hf-config)");
    w.critic.model = value_model(critic_arch ? *critic_arch : *in.model.arch);
    w.critic.stage = req.critic_stage ? stage_flag(*req.critic_stage, "--critic-stage") : in.zero.stage;
    w.critic.offload_optimizer = req.critic_offload ? parse_offload_device(*req.critic_offload, "--critic-offload")
                                                    : in.zero.offload_optimizer;
    w.critic.offload_param = w.critic.stage == 3 ? in.zero.offload_param : OffloadDevice::none;
    if (w.critic.offload_optimizer == OffloadDevice::nvme && w.critic.stage != 3)
        throw InputError("--critic-offload: nvme needs --critic-stage 3");
    w.reward.model = reward_arch ? value_model(*reward_arch) : w.critic.model;
    w.reward.stage = req.reward_stage ? stage_flag(*req.reward_stage, "--reward-stage") : (w.critic.stage == 3 ? 3 : 0);
    w.reward.offload_param = req.reward_offload ? frozen_offload(*req.reward_offload, "--reward-offload") : OffloadDevice::none;
    if (w.reward.offload_param != OffloadDevice::none && w.reward.stage != 3)
        throw InputError("--reward-offload: parameter offload needs --reward-stage 3");
    if (w.reward.model.arch)
        w.reward.prefetch_bucket = static_cast<int64_t>(0.9 * double(w.reward.model.arch->hidden_size) *
                                                        double(w.reward.model.arch->hidden_size));
    w.critic_follows = !req.critic_stage && !req.critic_offload;
    w.reward_follows = !req.reward_stage && !req.reward_offload;
    r.provenance["critic"] = w.critic.model.name + ", stage " + std::to_string(w.critic.stage) + ", offload_optimizer " +
                             to_string(w.critic.offload_optimizer) +
                             (critic_arch ? "" : " (default: the actor's architecture with a value head)");
    r.provenance["reward"] = w.reward.model.name + ", stage " + std::to_string(w.reward.stage) +
                             (reward_arch ? "" : " (default: the critic's model; DeepSpeed-Chat starts the critic from it)");
    warn_other_vocabulary(critic_arch, *in.model.arch, "critic", r.warnings);
    warn_other_vocabulary(reward_arch, *in.model.arch, "reward", r.warnings);
}

}  // namespace

void resolve_workload(const Request& req, Resolved& r, const std::string& data_dir) {
    WorkloadSettings& w = r.workload;
    w.kind = req.workload ? parse_workload(*req.workload, "--workload") : Workload::sft;
    r.provenance["workload"] = req.workload ? "--workload " + *req.workload : "default (sft: one model)";
    const bool dpo = w.kind == Workload::dpo, ppo = w.kind == Workload::ppo;
    refuse_unless(dpo, {{"--precompute-ref-log-probs", req.precompute_ref_log_probs}},
                  "only with --workload dpo (TRL DPOTrainer's precompute_ref_log_probs)");
    refuse_unless((dpo && !req.precompute_ref_log_probs) || ppo,
                  {{"--ref-stage", req.ref_stage.has_value()}, {"--ref-offload", req.ref_offload.has_value()}},
                  "only with --workload dpo (without --precompute-ref-log-probs) or ppo, which hold a reference model");
    refuse_unless(ppo,
                  {{"--critic-model", req.critic_model.has_value()}, {"--critic-hf-config", req.critic_hf_config.has_value()},
                   {"--critic-stage", req.critic_stage.has_value()}, {"--critic-offload", req.critic_offload.has_value()},
                   {"--reward-model", req.reward_model.has_value()}, {"--reward-hf-config", req.reward_hf_config.has_value()},
                   {"--reward-stage", req.reward_stage.has_value()}, {"--reward-offload", req.reward_offload.has_value()},
                   {"--rollout-batch", req.rollout_batch.has_value()},
                   {"--rollout-prompt-len", req.rollout_prompt_len.has_value()},
                   {"--rollout-new-tokens", req.rollout_new_tokens.has_value()}},
                  "only with --workload ppo");
    if (w.kind == Workload::sft) return;
    if (r.input.cluster.tp != 1 || r.input.cluster.pp != 1)
        throw InputError("--workload " + std::string(to_string(w.kind)) +
                         ": tensor or pipeline parallelism (--tp/--pp) with several models is not modelled");
    w.precompute_ref_log_probs = req.precompute_ref_log_probs;
    if ((dpo && !w.precompute_ref_log_probs) || ppo) resolve_reference(req, r);
    if (ppo) {
        resolve_rollout(req, r);
        resolve_critic_reward(req, r, data_dir);
    }
    r.input.workload = std::make_shared<const WorkloadSettings>(r.workload);
}

void require_single_model(const Resolved& r, const std::string& subcommand) {
    if (r.workload.kind == Workload::sft) return;
    throw InputError("--workload " + std::string(to_string(r.workload.kind)) + ": zeromem " + subcommand +
                     " models one trained model; use zeromem estimate for the per-model and summed memory of this "
                     "workload, or leave --workload out");
}

}  // namespace zeromem
