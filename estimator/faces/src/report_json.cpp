// `zeromem estimate --format json` (report.h render): integer bytes, the phases, verdicts and advice.
#include "report_rows.h"

#include "zeromem/advice.h"
#include "zeromem/setting_flags.h"
#include "zeromem/util.h"

namespace zeromem::report_detail {

namespace {

using ojson = nlohmann::ordered_json;

// Writes the resolved input (model, cluster, zero_optimization, training) into j.
void put_inputs_json(ojson& j, const EstimateInput& in) {
    j["model"] = {{"name", in.model.name},
                  {"params", in.model.params},
                  {"largest_layer_params", in.model.largest_layer_params}};
    if (in.model.arch) {
        j["model"]["active_params"] = count_params(*in.model.arch).active;
        j["model"]["family"] = in.model.arch->family;
    }
    j["cluster"] = {{"gpus", in.cluster.gpus}, {"nodes", in.cluster.nodes},
                    {"gpus_per_node", in.cluster.gpus_per_node()}, {"gpu", in.cluster.gpu_name},
                    {"tp", in.cluster.tp}, {"pp", in.cluster.pp}, {"data_parallel", in.cluster.data_parallel()}};
    j["cluster"]["gpu_memory"] = in.cluster.gpu_memory ? ojson(*in.cluster.gpu_memory) : ojson(nullptr);
    j["cluster"]["host_memory"] = in.cluster.host_memory ? ojson(*in.cluster.host_memory) : ojson(nullptr);
    j["cluster"]["host_os_reserve"] = in.cluster.host_memory ? ojson(in.cluster.host_reserve) : ojson(nullptr);
    j["zero_optimization"] = {{"stage", in.zero.stage},
                              {"offload_optimizer", to_string(in.zero.offload_optimizer)},
                              {"offload_param", to_string(in.zero.offload_param)},
                              {"zero_init", in.zero.zero_init},
                              {"overlap_comm", in.zero.overlap_comm_effective()},
                              {"reduce_bucket_size", in.zero.reduce_bucket_size}};
    j["training"] = {{"dtype", to_string(in.train.dtype)},
                     {"train_micro_batch_size_per_gpu", in.train.micro_batch},
                     {"gradient_accumulation_steps", in.train.grad_accum},
                     {"seq_len", in.train.seq_len},
                     {"gradient_checkpointing", to_string(in.train.checkpointing)},
                     {"optimizer", to_string(in.train.optimizer)}};
}

// The phases, each with its per-GPU components, per-node host/NVMe, fits and three-way verdicts.
ojson phases_json(const Estimate& e, Optimizer optimizer) {
    ojson phases = ojson::array();
    for (const auto& p : e.phases) {
        ojson pg;
        for (const auto& r : gpu_rows(p, optimizer)) pg[r.key] = r.bytes;
        pg["allocated"] = p.per_gpu.allocated;
        pg["reserved"] = p.per_gpu.reserved;
        pg["total"] = p.per_gpu.total;
        phases.push_back({{"name", p.name},
                          {"per_gpu", pg},
                          {"per_node", {{"host_memory", p.per_node.host_memory},
                                        {"host_pinned", p.per_node.host_pinned},
                                        {"nvme", p.per_node.nvme}}},
                          {"fits_gpu", p.fits_gpu ? ojson(*p.fits_gpu) : ojson(nullptr)},
                          {"fits_host", p.fits_host ? ojson(*p.fits_host) : ojson(nullptr)},
                          {"gpu_verdict", p.gpu_verdict ? ojson(*p.gpu_verdict) : ojson(nullptr)},
                          {"host_verdict", p.host_verdict ? ojson(*p.host_verdict) : ojson(nullptr)}});
    }
    return phases;
}

// Writes the --explain terms, the provenance and the architecture into j.
void put_explain_json(ojson& j, const Estimate& e, const Resolved& res) {
    const auto& in = res.input;
    ojson terms = ojson::array();
    for (const auto& t : e.terms)
        terms.push_back({{"component", t.component}, {"formula", t.formula},
                         {"substituted", t.substituted}, {"bytes", t.bytes}, {"source", t.source}});
    j["explain"] = terms;
    ojson prov = ojson::object();
    for (const auto& [k, v] : res.provenance) prov[k] = v;
    j["provenance"] = prov;
    if (in.model.arch) j["architecture"] = describe_arch(*in.model.arch);
}

}  // namespace

ojson to_json(const Estimate& e, const Resolved& res, bool explain) {
    const auto& in = res.input;
    ojson j;
    j["zeromem_version"] = version();
    j["convention"] = to_string(e.convention);
    put_inputs_json(j, in);
    ojson g;
    for (const auto& r : gpu_rows(e, in.train.optimizer)) g[r.key] = r.bytes;
    g["allocated"] = e.per_gpu.allocated;  // torch.cuda.max_memory_allocated at the peak phase
    g["reserved"] = e.per_gpu.reserved;    // max_memory_reserved: allocated + fragmentation
    g["total"] = e.per_gpu.total;          // nvidia-smi: reserved + context + NCCL (what the verdict compares)
    j["per_gpu"] = g;  // each component at its own peak; total = the peak phase's
    if (const PhaseMemory* peak = peak_phase_of(e)) {
        ojson pk;
        for (const auto& r : gpu_rows(*peak, in.train.optimizer)) pk[r.key] = r.bytes;
        pk["allocated"] = peak->per_gpu.allocated;
        pk["reserved"] = peak->per_gpu.reserved;
        pk["total"] = peak->per_gpu.total;
        j["per_gpu_in_peak_phase"] = pk;  // the components that add up to the total
    }
    j["settings"] = {{"dtype", to_string(in.train.dtype)},
                     {"dtype_source", prov_of(res, "dtype", "default")},
                     {"optimizer", to_string(in.train.optimizer)},
                     {"optimizer_implementation", in.train.fused_optimizer ? "deepspeed" : "torch"},
                     {"overlap_comm", in.zero.overlap_comm_effective()},
                     {"overlap_comm_source", in.zero.overlap_comm ? "set" : "DeepSpeed default for the stage"},
                     {"stage3_gather_16bit_weights_on_model_save", in.zero.stage3_gather_16bit_weights_on_model_save},
                     {"attention", in.train.flash_attention ? "flash" : "eager"}};
    ojson n;
    for (const auto& r : node_rows(e)) n[r.key] = r.bytes;
    j["per_node"] = n;
    j["fits_gpu"] = e.fits_gpu ? ojson(*e.fits_gpu) : ojson(nullptr);
    j["gpu_verdict"] = e.gpu_verdict ? ojson(*e.gpu_verdict) : ojson(nullptr);
    j["host_verdict"] = e.host_verdict ? ojson(*e.host_verdict) : ojson(nullptr);
    if (!in.model.arch)
        j["activation_allowance"] = {{"bytes", e.activation_allowance}, {"how", e.activation_allowance_how}};
    j["fits_host"] = e.fits_host ? ojson(*e.fits_host) : ojson(nullptr);
    j["peak_phase"] = e.peak_phase;
    j["host_peak_phase"] = e.host_peak_phase;
    j["first_oom_phase"] = e.first_oom_phase.empty() ? ojson(nullptr) : ojson(e.first_oom_phase);
    j["first_host_oom_phase"] = e.first_host_oom_phase.empty() ? ojson(nullptr) : ojson(e.first_host_oom_phase);
    j["rank0_only"] = ojson(nullptr);  // what only global rank 0 holds (estimate.h RankZeroOnly)
    if (const auto& r = e.rank0_only)
        j["rank0_only"] = {{"phase", r->phase},
                           {"host_memory", r->host_bytes},
                           {"what", r->what},
                           {"gathered_module_gpu_every_rank", r->gathered_module_gpu},
                           {"other_nodes_host_peak", r->other_nodes_host_peak},
                           {"other_nodes_host_peak_phase", r->other_nodes_host_peak_phase}};
    j["trainable_params"] = e.trainable_params;
    j["frozen_params"] = e.frozen_params;
    j["phases"] = phases_json(e, in.train.optimizer);
    ojson adv = ojson::array();
    for (const auto& a : advice_for(e, res)) {
        ojson changes = ojson::array();
        for (const auto& c : a.changes) changes.push_back({{"path", c.path}, {"value", c.value}});
        adv.push_back({{"resource", a.resource}, {"phase", a.phase}, {"need", a.need}, {"capacity", a.capacity},
                       {"found", a.found}, {"change", flag_spelling(a.changes)}, {"changes", changes}, {"why", a.why},
                       {"need_after", a.need_after}, {"tight", a.tight}});
    }
    j["advice"] = adv;
    j["notes"] = e.notes;
    j["calibration"] = res.calibration.empty() ? ojson() : ojson(res.calibration);
    if (e.convention == Convention::full) {
        const auto& st = in.stack;
        j["software"] = {{"deepspeed", st.deepspeed}, {"torch", st.torch}, {"transformers", st.transformers},
                         {"from", {{"deepspeed", stack_source(res, "stack.deepspeed")},
                                   {"torch", stack_source(res, "stack.torch")},
                                   {"transformers", stack_source(res, "stack.transformers")}}},
                         {"optimizer_step", e.optimizer_step_kernel}};
    }
    j["warnings"] = res.warnings;
    if (explain) put_explain_json(j, e, res);
    return j;
}

}  // namespace zeromem::report_detail
