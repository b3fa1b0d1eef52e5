// Fitting, writing, reading and applying a calibration profile (see
// zeromem/calibration_profile.h).
#include "zeromem/calibration_profile.h"

#include "zeromem/ds_config.h"
#include "zeromem/estimate.h"
#include "zeromem/process_terms.h"
#include "zeromem/util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

namespace zeromem {

namespace {

constexpr const char* kFormat = "zeromem calibration profile 1";
// The largest figures a profile holds, written and read alike: bytes of one GPU's terms (2^50, a PiB),
// and a factor on the activations (beyond 1000 the estimate's setup is not the run's).
constexpr uint64_t kMaxBytes = uint64_t(1) << 50;
constexpr double kMaxActivationScale = 1000.0;

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

// An out-of-memory message is the allocator at a failed request, in the middle of a phase the run did not
// finish (allocated: what was held before it; reserved: after the cached blocks were released to retry,
// CUDACachingAllocator.cpp malloc's release_cached_blocks): not a phase's reading to fit a term on, except
// what it says about the memory outside the allocator (fit_outside_allocator).
bool oom_message(const CalibrationRow& r) { return r.observation.format == LogFormat::torch_oom_message; }

// A row's measured peak allocated: max_allocated, else the allocated bytes where the reading gives no peak.
int64_t peak(const CalibrationRow& r) { return r.measured.max_allocated ? *r.measured.max_allocated : *r.measured.allocated; }

// The earliest row with a measured and estimated absolute allocated figure.
void fit_baseline(const Calibration& c, CalibrationProfile& p) {
    for (const auto& r : c.rows) {
        if (oom_message(r)) continue;
        if (r.observation.baseline != Baseline::absolute || !r.measured.allocated || !r.estimated.allocated) continue;
        if (std::llabs(*r.measured.allocated - *r.estimated.allocated) > int64_t(kMaxBytes)) continue;
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
    for (const auto& r : c.rows)
        if (!oom_message(r) && r.observation.baseline == Baseline::absolute && r.measured.allocated && r.measured.reserved &&
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

int64_t activations_term(const CalibrationRow& r) {
    for (const auto& t : r.terms)
        if (t.name == "activations") return t.bytes;
    return 0;
}

// The factor on the activations that makes the reading with the largest
// measured peak come out at its measured bytes, once the fitted baseline is
// added: (measured - baseline - (estimated - activations)) / activations,
// taken only where the row's estimate is its own phase's allocated bytes
// (a see_memory_usage peak since the previous call; not a peak since the
// start that an earlier phase sets).
void fit_activation_scale(const Calibration& c, CalibrationProfile& p) {
    const CalibrationRow* best = nullptr;
    auto est = [](const CalibrationRow& r) { return r.estimated.max_allocated ? *r.estimated.max_allocated : *r.estimated.allocated; };
    for (const auto& r : c.rows) {
        if (oom_message(r) || r.observation.baseline != Baseline::absolute || !r.measured.allocated) continue;
        if (!(r.estimated.max_allocated || r.estimated.allocated) || activations_term(r) <= 0) continue;
        if (est(r) != r.phase_allocated) continue;
        if (!best || peak(r) > peak(*best)) best = &r;
    }
    if (!best) return;
    const int64_t m = peak(*best), e = est(*best), act = activations_term(*best);
    const int64_t base = p.process_baseline.value_or(0);
    const double f = double(m - std::max<int64_t>(0, base) - (e - act)) / double(act);
    if (!(f > 0.0)) return;  // the rest of the estimate already exceeds the reading: no activations to scale
    if (f > kMaxActivationScale) return;  // the estimate's setup is not the run's: no factor stands for that
    p.activation_scale = f;
    p.activation_scale_evidence = {{"factor", f},
                                   {"log", best->log_path},
                                   {"source_line", best->observation.line},
                                   {"phase", best->phase},
                                   {"measured_peak_allocated", m},
                                   {"estimated_peak_allocated", e},
                                   {"estimated_activations", act}};
}

// What the device held beyond the caching allocator at the first reading that gives both (an out-of-memory
// message: total capacity - free, and reserved by PyTorch): the CUDA context, NCCL's buffers and anything
// else outside the allocator, which no allocator counter separates.
void fit_outside_allocator(const Calibration& c, CalibrationProfile& p) {
    for (const auto& r : c.rows) {
        if (!r.measured.device_used || !r.measured.reserved || *r.measured.device_used < *r.measured.reserved) continue;
        if (*r.measured.device_used - *r.measured.reserved > int64_t(kMaxBytes)) continue;
        p.outside_allocator = *r.measured.device_used - *r.measured.reserved;
        p.outside_allocator_evidence = {{"bytes", *p.outside_allocator},
                                        {"log", r.log_path},
                                        {"source_line", r.observation.line},
                                        {"measured_device_used", *r.measured.device_used},
                                        {"measured_reserved", *r.measured.reserved}};
        return;
    }
}

std::string stack_text(const std::string& gpu, const SoftwareStack& s) {
    return gpu + ", deepspeed " + s.deepspeed + ", torch " + s.torch + ", transformers " + s.transformers;
}

}  // namespace

// The factor above is linear in the activations of the moment the phase peaks at before scaling. Where a
// phase is the larger of two moments with different activations (ZeRO-3's LM head and blocks,
// estimate_backward.cpp zero3_backward_peak), the scaled estimate can peak at the other one, so the factor is
// solved again on the moment the calibrated estimate peaks at, (measured - (allocated - activations)) /
// (activations / factor), until it holds: each moment is linear in the factor, so a few rounds settle it.
void refine_activation_scale(const EstimateInput& in, CalibrationProfile& p) {
    if (!p.activation_scale) return;
    const std::string phase = p.activation_scale_evidence.value("phase", std::string());
    const int64_t m = p.activation_scale_evidence.value("measured_peak_allocated", int64_t(0));
    for (int round = 0; round < 4; ++round) {
        EstimateInput x = in;
        Provenance prov;
        apply_calibration_profile(p, "(the profile being fitted)", true, x, prov);
        const Estimate e = estimate(x);
        const auto ph = std::find_if(e.phases.begin(), e.phases.end(), [&](const PhaseMemory& q) { return q.name == phase; });
        if (ph == e.phases.end()) return;
        const int64_t alloc = int64_t(ph->per_gpu.allocated), act = int64_t(ph->per_gpu.activations);
        const double f = *p.activation_scale;
        if (alloc == m || act <= 0) return;
        const double next = double(m - (alloc - act)) / (double(act) / f);
        if (!(next > 0.0) || next > kMaxActivationScale || std::abs(next - f) <= 1e-12 * f) return;
        p.activation_scale = next;
        p.activation_scale_evidence["factor"] = next;
        p.activation_scale_evidence["estimated_activations"] = int64_t(std::llround(double(act) / f));
    }
}

CalibrationProfile fit_calibration_profile(const Calibration& c, const EstimateInput& in,
                                           const std::vector<std::string>& logs, bool activations_stated) {
    if (in.cluster.gpu_name.empty())
        throw InputError("--gpu: a calibration profile records the GPU type it was fitted on; name the run's GPU preset");
    CalibrationProfile p;
    p.gpu = in.cluster.gpu_name;
    p.stack = in.stack;
    p.inputs = inputs_json(in, logs);
    fit_baseline(c, p);
    fit_reserved_share(c, p);
    if (!activations_stated) fit_activation_scale(c, p);
    fit_outside_allocator(c, p);
    refine_activation_scale(in, p);
    return p;
}

nlohmann::json calibration_profile_json(const CalibrationProfile& p) {
    return {{"format", kFormat},
            {"fitted_on",
             {{"gpu", p.gpu}, {"deepspeed", p.stack.deepspeed}, {"torch", p.stack.torch}, {"transformers", p.stack.transformers}}},
            {"inputs", p.inputs},
            {"process_baseline", p.process_baseline ? p.process_baseline_evidence : nlohmann::json()},
            {"reserved_share", p.reserved_share ? p.reserved_share_evidence : nlohmann::json()},
            {"activation_scale", p.activation_scale ? p.activation_scale_evidence : nlohmann::json()},
            {"outside_allocator", p.outside_allocator ? p.outside_allocator_evidence : nlohmann::json()}};
}

CalibrationProfile read_calibration_profile(const std::string& path) {
    return parse_calibration_profile(read_text_file(path, "calibration profile (--calibration)"), path);
}

CalibrationProfile parse_calibration_profile(const std::string& text, const std::string& path) {
    nlohmann::json j;
    std::vector<std::set<std::string>> seen;  // the keys of each open object, by depth
    std::string duplicate;
    bool too_deep = false;
    constexpr int kMaxDepth = 16;  // the profile nests 3 deep; its evidence objects hold numbers and strings
    const nlohmann::json::parser_callback_t keys = [&](int depth, nlohmann::json::parse_event_t event,
                                                       nlohmann::json& parsed) {
        const auto d = static_cast<std::size_t>(depth);
        if (depth > kMaxDepth) too_deep = true;
        if (too_deep) return false;  // dropped: nothing that deep is kept (copying it would recurse)
        if (event == nlohmann::json::parse_event_t::object_start) {
            if (seen.size() < d + 2) seen.resize(d + 2);
            seen[d + 1].clear();
        } else if (event == nlohmann::json::parse_event_t::key && d < seen.size() && duplicate.empty() &&
                   !seen[d].insert(parsed.get<std::string>()).second) {
            duplicate = parsed.get<std::string>();
        }
        return true;
    };
    try {
        j = nlohmann::json::parse(text, keys);
    } catch (const nlohmann::json::parse_error& e) {
        throw InputError(path + ":" + std::to_string(json_error_line(text, e.byte)) +
                         ": calibration profile: malformed or cut-off JSON");
    } catch (const nlohmann::json::out_of_range&) {
        throw InputError(path + ": calibration profile: a JSON number is out of range");
    }
    const std::map<std::string, int> lines = ds_config_key_lines(text);
    // FILE:LINE of the field (or of its nearest written ancestor): calibration profile: what.
    auto bad = [&](const std::string& pointer, const std::string& what) -> void {
        const int line = ds_config_line_of(lines, pointer);
        throw InputError(path + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": calibration profile: " + what);
    };
    if (too_deep) bad("/", "nested deeper than 16 levels (a profile nests 3)");
    if (!j.is_object()) bad("/", "not a JSON object");
    if (!duplicate.empty()) bad("/" + duplicate, "the key '" + duplicate + "' is given twice");
    // The profile's own keys only: a misspelled one would drop its term without a word.
    static const std::vector<std::string> known = {"format",         "fitted_on",        "inputs",
                                                   "process_baseline", "reserved_share", "activation_scale",
                                                   "outside_allocator"};
    for (const auto& [key, value] : j.items())
        if (std::find(known.begin(), known.end(), key) == known.end()) {
            std::string close;
            for (const auto& k : known)
                if (edit_distance(key, k) <= 3) close = k;
            bad("/" + key, "unknown key '" + key + "'" + (close.empty() ? std::string() : " (did you mean '" + close + "'?)"));
        }
    if (!j.contains("format") || j["format"] != kFormat) bad("/format", "'format' is not \"" + std::string(kFormat) + "\"");
    CalibrationProfile p;
    const auto& on = j.contains("fitted_on") ? j["fitted_on"] : nlohmann::json();
    for (const char* k : {"gpu", "deepspeed", "torch", "transformers"})
        if (!on.is_object() || !on.contains(k) || !on[k].is_string())
            bad(std::string("/fitted_on/") + k, std::string("'fitted_on.") + k + "' missing or not a string");
    p.gpu = on["gpu"].get<std::string>();
    p.stack = {on["deepspeed"].get<std::string>(), on["torch"].get<std::string>(), on["transformers"].get<std::string>()};
    if (j.contains("inputs")) p.inputs = j["inputs"];
    if (const auto& b = j.value("process_baseline", nlohmann::json()); !b.is_null()) {
        if (!b.is_object() || !b.contains("bytes") || !b["bytes"].is_number_integer())
            bad("/process_baseline/bytes", "'process_baseline.bytes' is not a whole number");
        if (b["bytes"].is_number_unsigned() ? b["bytes"].get<uint64_t>() > kMaxBytes
                                            : std::llabs(b["bytes"].get<int64_t>()) > int64_t(kMaxBytes))
            bad("/process_baseline/bytes", "'process_baseline.bytes' is beyond +-2^50 bytes");
        p.process_baseline = b["bytes"].get<int64_t>();
        p.process_baseline_evidence = b;
    }
    if (const auto& s = j.value("reserved_share", nlohmann::json()); !s.is_null()) {
        if (!s.is_object() || !s.contains("fraction") || !s["fraction"].is_number())
            bad("/reserved_share/fraction", "'reserved_share.fraction' is not a number");
        const double f = s["fraction"].get<double>();
        if (!(f >= 0.0 && f < 1.0)) bad("/reserved_share/fraction", "'reserved_share.fraction' is outside [0, 1)");
        p.reserved_share = f;
        p.reserved_share_evidence = s;
    }
    if (const auto& a = j.value("activation_scale", nlohmann::json()); !a.is_null()) {
        if (!a.is_object() || !a.contains("factor") || !a["factor"].is_number())
            bad("/activation_scale/factor", "'activation_scale.factor' is not a number");
        const double f = a["factor"].get<double>();
        if (!(f > 0.0 && f <= kMaxActivationScale)) bad("/activation_scale/factor", "'activation_scale.factor' is outside (0, 1000]");
        p.activation_scale = f;
        p.activation_scale_evidence = a;
    }
    if (const auto& o = j.value("outside_allocator", nlohmann::json()); !o.is_null()) {
        if (!o.is_object() || !o.contains("bytes") || !o["bytes"].is_number_integer() || o["bytes"].get<int64_t>() < 0 ||
            o["bytes"].get<int64_t>() > int64_t(kMaxBytes))
            bad("/outside_allocator/bytes", "'outside_allocator.bytes' is not a whole number of bytes in [0, 2^50]");
        p.outside_allocator = o["bytes"].get<int64_t>();
        p.outside_allocator_evidence = o;
    }
    if (j.contains("inputs") && !j["inputs"].is_object()) bad("/inputs", "'inputs' is not an object");
    for (const char* k : {"micro_batch", "seq_len", "stage"})
        if (p.inputs.is_object() && p.inputs.contains(k) &&
            (!p.inputs[k].is_number_integer() || p.inputs[k].get<int64_t>() < 0 || p.inputs[k].get<int64_t>() > (int64_t(1) << 40)))
            bad(std::string("/inputs/") + k, std::string("'inputs.") + k + "' is not a whole number in [0, 2^40]");
    if (p.inputs.is_object() && p.inputs.contains("params") &&
        (!p.inputs["params"].is_number_integer() || p.inputs["params"].get<int64_t>() < 0 ||
         p.inputs["params"].get<int64_t>() > int64_t(kMaxBytes)))
        bad("/inputs/params", "'inputs.params' is not a whole number in [0, 2^50]");
    if (p.inputs.is_object() && p.inputs.contains("model") && !p.inputs["model"].is_string())
        bad("/inputs/model", "'inputs.model' is not a string");
    return p;
}

CalibrationApplied apply_calibration_profile(const CalibrationProfile& p, const std::string& path, bool force,
                                             EstimateInput& in, Provenance& prov) {
    const std::string fitted = stack_text(p.gpu, p.stack);
    const std::string here = stack_text(in.cluster.gpu_name.empty() ? "no --gpu" : in.cluster.gpu_name, in.stack);
    CalibrationApplied out;
    std::vector<std::string> terms;  // the header's list
    if (fitted != here) {
        if (!force)
            throw InputError("--calibration: " + path + " was fitted on " + fitted + ", this estimate is for " + here +
                             "; pass --force-calibration to apply it anyway");
        out.warnings.push_back("--calibration: " + path + " was fitted on " + fitted + " and is applied to " + here +
                               " (--force-calibration)");
    }
    const auto fit_at = [&](const char* k) {
        return p.inputs.is_object() && p.inputs.contains(k) && p.inputs[k].is_number_integer() ? p.inputs[k].get<int64_t>()
                                                                                               : int64_t(-1);
    };
    const auto fit_text = [&](const char* k) {
        return p.inputs.is_object() && p.inputs.contains(k) && p.inputs[k].is_string() ? p.inputs[k].get<std::string>()
                                                                                       : std::string("?");
    };
    // The terms are what one model's run held beyond its modelled terms: another model (by its parameter
    // count, Ψ) is warned of, and its activations are not scaled by the fitted model's factor.
    const bool same_model = fit_at("params") < 0 || static_cast<uint64_t>(fit_at("params")) == in.model.params;
    if (!same_model)
        out.warnings.push_back("--calibration: " + path + " was fitted on " + fit_text("model") + " (" +
                               std::to_string(fit_at("params")) + " parameters) and is applied to " + in.model.name +
                               " (" + std::to_string(in.model.params) + " parameters): its process baseline and "
                               "memory outside the allocator are that run's, and its activation factor is not applied");
    if (p.process_baseline) {
        in.residual.process_baseline = uint64_t(std::max<int64_t>(0, *p.process_baseline));
        prov["process_baseline"] = "calibration profile " + path + " (measured - estimated allocated at the run's "
                                   "earliest reading)";
        terms.push_back("process baseline " + format_gib(double(in.residual.process_baseline)) + " GiB");
        out.notes.push_back("from calibration profile " + path + ": process baseline " +
                            format_gib(double(in.residual.process_baseline)) + " GiB allocated in every phase" +
                            (*p.process_baseline < 0 ? " (the fitted " + format_gib(double(*p.process_baseline)) +
                                                           " GiB is below 0: the estimate was above the run there; "
                                                           "no bytes are taken off)"
                                                     : std::string()));
        // The baseline is what the run held beyond the terms modelled for its own setup; another stage or
        // offload models other tensors, which the baseline may already hold (a whole model loaded before
        // partitioning, a state the run kept on the GPU).
        if (fit_at("stage") >= 0 && (fit_at("stage") != in.zero.stage ||
                                     fit_text("offload_optimizer") != to_string(in.zero.offload_optimizer) ||
                                     fit_text("offload_param") != to_string(in.zero.offload_param)))
            out.warnings.push_back(
                "--calibration: " + path + "'s process baseline (" + format_gib(double(in.residual.process_baseline)) +
                " GiB) was fitted at ZeRO-" + std::to_string(fit_at("stage")) + " (offload_optimizer " +
                fit_text("offload_optimizer") + ", offload_param " + fit_text("offload_param") +
                "): what that run held beyond the terms modelled for it; this estimate's stage or offload models "
                "other tensors, which the baseline may already count");
    }
    if (p.activation_scale) {
        char f[64];
        std::snprintf(f, sizeof f, "%.4f", *p.activation_scale);
        if (same_model && fit_at("micro_batch") == in.train.micro_batch && fit_at("seq_len") == in.train.seq_len) {
            in.residual.activation_scale = *p.activation_scale;
            prov["activation_scale"] = "calibration profile " + path + " (the run's peak over the estimate's activations)";
            terms.push_back(std::string("activations x ") + f);
            out.notes.push_back("from calibration profile " + path + ": activations x " + f +
                                " (fitted at micro batch " + std::to_string(in.train.micro_batch) + ", seq " +
                                std::to_string(in.train.seq_len) + ", which the run did not state)");
        } else if (same_model) {
            out.warnings.push_back("--calibration: " + path + "'s activation factor x " + f +
                                   " is not applied: it was fitted at micro batch " +
                                   std::to_string(fit_at("micro_batch")) + ", seq " + std::to_string(fit_at("seq_len")) +
                                   ", this estimate is for micro batch " + std::to_string(in.train.micro_batch) +
                                   ", seq " + std::to_string(in.train.seq_len));
        }
    }
    if (p.outside_allocator) {
        // The run's CUDA context + NCCL buffers (+ cuBLAS's pool before torch 2.0): the context is what is
        // left once the modelled NCCL buffers and an outside-allocator cuBLAS pool are taken off.
        ProcessMemory modelled = process_memory(in);
        const int64_t others = int64_t(modelled.nccl_buffers) + (modelled.cublas_in_allocator ? 0 : int64_t(modelled.cublas_workspaces));
        const int64_t ctx = std::max<int64_t>(0, *p.outside_allocator - others);
        in.residual.cuda_context = uint64_t(ctx);
        prov["cuda_context"] = "calibration profile " + path + " (the run's memory outside the allocator less the "
                               "modelled NCCL buffers)";
        terms.push_back("CUDA context " + format_gib(double(ctx)) + " GiB");
        out.notes.push_back("from calibration profile " + path + ": CUDA context " + format_gib(double(ctx)) +
                            " GiB (the run's " + format_gib(double(*p.outside_allocator)) +
                            " GiB outside the allocator less the modelled NCCL buffers " + format_gib(double(others)) +
                            " GiB)");
    }
    if (p.reserved_share) {
        in.residual.fragmentation_fraction = *p.reserved_share;
        in.residual.fragmentation_bytes.reset();
        in.residual.fragmentation_provider = nullptr;
        prov["fragmentation"] = "calibration profile " + path + " (reserved - allocated share of the run)";
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.4f", *p.reserved_share);
        terms.push_back(std::string("fragmentation ") + buf + " of allocated");
        out.notes.push_back("from calibration profile " + path + ": fragmentation fraction " + buf +
                            " of the allocated bytes (the run's reserved-but-unallocated share)");
    }
    out.header = "Calibration: " + path + " (fitted on " + fitted + "): ";
    for (std::size_t k = 0; k < terms.size(); ++k) out.header += (k ? ", " : "") + terms[k];
    if (terms.empty()) out.header += "no term applies";
    return out;
}

}  // namespace zeromem
