// Fitting, writing, reading and applying a calibration profile (see
// zeromem/calibration_profile.h).
#include "zeromem/process_terms.h"
#include "zeromem/calibration_profile.h"

#include "zeromem/util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace zeromem {

namespace {

constexpr const char* kFormat = "zeromem calibration profile 1";

nlohmann::json inputs_json(const EstimateInput& in, const std::vector<std::string>& logs) {
    return {{"model", in.model.name},
            {"params", in.model.params},
            {"gpus", in.cluster.gpus},
            {"nodes", in.cluster.nodes},
            {"stage", in.zero.stage},
            {"offload_optimizer", to_string(in.zero.offload_optimizer)},
            {"offload_param", to_string(in.zero.offload_param)},
            {"dtype", to_string(in.train.dtype)},
            {"micro_batch", in.train.micro_batch},
            {"seq_len", in.train.seq_len},
            {"logs", logs}};
}

// The earliest row with a measured and estimated absolute allocated figure.
void fit_baseline(const Calibration& c, CalibrationProfile& p) {
    for (const auto& r : c.rows) {
        if (r.observation.baseline != Baseline::absolute || !r.measured.allocated || !r.estimated.allocated) continue;
        p.process_baseline = *r.measured.allocated - *r.estimated.allocated;
        p.process_baseline_evidence = {{"bytes", *p.process_baseline},
                                       {"log", r.log_path},
                                       {"source_line", r.observation.line},
                                       {"phase", r.phase},
                                       {"measured_allocated", *r.measured.allocated},
                                       {"estimated_allocated", *r.estimated.allocated}};
        return;
    }
}

// (reserved - peak allocated) / peak allocated at the reading with the
// largest peak: the caching allocator keeps what it reserved for the peak
// (until empty_cache), so the reserved bytes printed after it less the peak
// are its reserved-but-unallocated share, the estimate's fragmentation
// fraction. The allocated bytes stand in where a reading has no peak.
void fit_reserved_share(const Calibration& c, CalibrationProfile& p) {
    const CalibrationRow* best = nullptr;
    auto peak = [](const CalibrationRow& r) { return r.measured.max_allocated ? *r.measured.max_allocated : *r.measured.allocated; };
    for (const auto& r : c.rows)
        if (r.observation.baseline == Baseline::absolute && r.measured.allocated && r.measured.reserved &&
            peak(r) > 0 && *r.measured.reserved >= peak(r) && (!best || peak(r) > peak(*best)))
            best = &r;
    if (!best) return;
    const int64_t a = peak(*best), res = *best->measured.reserved;
    const double share = double(res - a) / double(a);
    if (!(share < 1.0)) return;  // reserved beyond twice the peak: not a fragmentation share (empty_cache, another pool)
    p.reserved_share = share;
    p.reserved_share_evidence = {{"fraction", share},
                                 {"log", best->log_path},
                                 {"source_line", best->observation.line},
                                 {"measured_peak_allocated", a},
                                 {"measured_reserved", res}};
}

std::string stack_text(const std::string& gpu, const SoftwareStack& s) {
    return gpu + ", deepspeed " + s.deepspeed + ", torch " + s.torch + ", transformers " + s.transformers;
}

}  // namespace

CalibrationProfile fit_calibration_profile(const Calibration& c, const EstimateInput& in,
                                           const std::vector<std::string>& logs) {
    if (in.cluster.gpu_name.empty())
        throw InputError("--gpu: a calibration profile records the GPU type it was fitted on; name the run's GPU preset");
    CalibrationProfile p;
    p.gpu = in.cluster.gpu_name;
    p.stack = in.stack;
    p.inputs = inputs_json(in, logs);
    fit_baseline(c, p);
    fit_reserved_share(c, p);
    return p;
}

nlohmann::json calibration_profile_json(const CalibrationProfile& p) {
    return {{"format", kFormat},
            {"fitted_on",
             {{"gpu", p.gpu}, {"deepspeed", p.stack.deepspeed}, {"torch", p.stack.torch}, {"transformers", p.stack.transformers}}},
            {"inputs", p.inputs},
            {"process_baseline", p.process_baseline ? p.process_baseline_evidence : nlohmann::json()},
            {"reserved_share", p.reserved_share ? p.reserved_share_evidence : nlohmann::json()}};
}

CalibrationProfile read_calibration_profile(const std::string& path) {
    const std::string text = read_text_file(path, "calibration profile (--calibration)");
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    auto bad = [&](const std::string& what) -> void { throw InputError(path + ": calibration profile: " + what); };
    if (j.is_discarded() || !j.is_object()) bad("not a JSON object (malformed or cut off)");
    if (j.value("format", std::string()) != kFormat) bad("'format' is not \"" + std::string(kFormat) + "\"");
    CalibrationProfile p;
    const auto& on = j.contains("fitted_on") ? j["fitted_on"] : nlohmann::json();
    for (const char* k : {"gpu", "deepspeed", "torch", "transformers"})
        if (!on.is_object() || !on.contains(k) || !on[k].is_string()) bad(std::string("'fitted_on.") + k + "' missing or not a string");
    p.gpu = on["gpu"].get<std::string>();
    p.stack = {on["deepspeed"].get<std::string>(), on["torch"].get<std::string>(), on["transformers"].get<std::string>()};
    if (j.contains("inputs")) p.inputs = j["inputs"];
    if (const auto& b = j.value("process_baseline", nlohmann::json()); !b.is_null()) {
        if (!b.is_object() || !b.contains("bytes") || !b["bytes"].is_number_integer()) bad("'process_baseline.bytes' is not a whole number");
        p.process_baseline = b["bytes"].get<int64_t>();
        p.process_baseline_evidence = b;
    }
    if (const auto& s = j.value("reserved_share", nlohmann::json()); !s.is_null()) {
        if (!s.is_object() || !s.contains("fraction") || !s["fraction"].is_number()) bad("'reserved_share.fraction' is not a number");
        const double f = s["fraction"].get<double>();
        if (!(f >= 0.0 && f < 1.0)) bad("'reserved_share.fraction' is outside [0, 1)");
        p.reserved_share = f;
        p.reserved_share_evidence = s;
    }
    return p;
}

std::vector<std::string> apply_calibration_profile(const CalibrationProfile& p, const std::string& path, bool force,
                                                   EstimateInput& in, Provenance& prov) {
    const std::string fitted = stack_text(p.gpu, p.stack);
    const std::string here = stack_text(in.cluster.gpu_name.empty() ? "no --gpu" : in.cluster.gpu_name, in.stack);
    std::vector<std::string> notes;
    if (fitted != here) {
        if (!force)
            throw InputError("--calibration: " + path + " was fitted on " + fitted + ", this estimate is for " + here +
                             "; pass --force-calibration to apply it anyway");
        notes.push_back("calibration profile " + path + " fitted on " + fitted + " applied to " + here +
                        " (--force-calibration)");
    }
    if (p.process_baseline) {
        // The modelled context (the architecture's, or --cuda-context) plus the fitted baseline.
        const uint64_t modelled = in.residual.cuda_context ? *in.residual.cuda_context : process_memory(in).cuda_context;
        const int64_t ctx = std::max<int64_t>(0, int64_t(modelled) + *p.process_baseline);
        in.residual.cuda_context = uint64_t(ctx);
        prov["cuda_context"] = "calibration profile " + path + " (CUDA context + fitted process baseline " +
                               std::to_string(*p.process_baseline) + " B)";
        notes.push_back("from calibration profile " + path + ": cuda_context " + format_gib(double(ctx)) +
                        " GiB (includes the fitted process baseline " + format_gib(double(*p.process_baseline)) + " GiB)");
    }
    if (p.reserved_share) {
        in.residual.fragmentation_fraction = *p.reserved_share;
        in.residual.fragmentation_bytes.reset();
        in.residual.fragmentation_provider = nullptr;
        prov["fragmentation"] = "calibration profile " + path + " (reserved - allocated share of the run)";
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.4f", *p.reserved_share);
        notes.push_back("from calibration profile " + path + ": fragmentation fraction " + buf +
                        " of the allocated bytes (the run's reserved-but-unallocated share)");
    }
    return notes;
}

}  // namespace zeromem
