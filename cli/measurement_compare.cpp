// Estimate vs measurement component by component (see measurement_compare.h).
// No MPI, no device.
#include "measurement_compare.h"

#include "zeromem/types.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace zeromem_cli {

using namespace zeromem;

namespace {

// The record of `name` at `step`: the first micro step's forward (before
// any gradient exists), else the last micro step's record; nullptr if absent.
const nlohmann::json* find_phase(const nlohmann::json& rank, const std::string& name, int step) {
    const nlohmann::json* hit = nullptr;
    for (const auto& p : rank.at("phases"))
        if (p.at("name") == name && p.at("step") == step) {
            if (name == "forward" && hit != nullptr) break;
            hit = &p;
        }
    return hit;
}

uint64_t peak(const nlohmann::json& phase, const char* where, const char* cat) {
    return phase.at("peak_bytes").at(where).at(cat).get<uint64_t>();
}

// One field of a measure result, at JSON pointer `at` of the file `where`.
struct Field {
    const nlohmann::json& j;
    std::string at;
    const std::string& where;

    [[noreturn]] void bad(const std::string& what) const {
        throw InputError(where + ": " + (at.empty() ? "/" : at) + ": " + what +
                         " (the JSON written by zeromem measure --output)");
    }
    Field key(const char* k) const {
        if (!j.is_object()) bad("expected an object, got " + j.dump());
        if (!j.contains(k)) Field{j, at + "/" + k, where}.bad("missing");
        return Field{j.at(k), at + "/" + k, where};
    }
    Field index(std::size_t i) const { return Field{j.at(i), at + "/" + std::to_string(i), where}; }
    const Field& object() const {
        if (!j.is_object()) bad("expected an object, got " + j.dump());
        return *this;
    }
    const Field& array() const {
        if (!j.is_array()) bad("expected an array, got " + j.dump());
        return *this;
    }
    void string() const {
        if (!j.is_string()) bad("expected a string, got " + j.dump());
    }
    void integer() const {
        if (!j.is_number_integer()) bad("expected an integer, got " + j.dump());
    }
    void count() const {
        if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<int64_t>() >= 0))
            bad("expected a non-negative integer (bytes or ranks), got " + j.dump());
    }
};

// One phase record of a rank: name, step and the peak byte counts compare_with_estimate reads.
void check_phase(const Field& p) {
    p.object();
    p.key("name").string();
    p.key("step").integer();
    const Field peak = p.key("peak_bytes");
    const Field device = peak.key("device");
    for (const char* cat : {"parameters", "gradients", "optimizer_states", "activations", "buffers"})
        device.key(cat).count();
    peak.key("host").key("total").count();
    peak.key("pinned").key("total").count();
}

}  // namespace

void check_measurement(const nlohmann::json& m, const std::string& where) {
    const Field top{m, "", where};
    top.object();
    top.key("model").object();
    top.key("settings").object();
    top.key("world_size").count();
    if (m.contains("oom") && !m["oom"].is_boolean()) top.key("oom").bad("expected true or false, got " + m["oom"].dump());
    const Field ranks = top.key("ranks");
    ranks.array();
    for (std::size_t r = 0; r < m["ranks"].size(); ++r) {
        const Field rank = ranks.index(r);
        const Field phases = rank.key("phases");
        phases.array();
        for (std::size_t i = 0; i < phases.j.size(); ++i) check_phase(phases.index(i));
    }
}

nlohmann::json compare_with_estimate(const Estimate& est, const EstimateInput& in, const nlohmann::json& measured,
                                     double tolerance) {
    struct Map {
        const char* est_phase;
        const char* run_phase;
        int step;
    };
    const Map maps[] = {{"load", "init", 0},
                        {"forward", "forward", 1},
                        {"backward", "backward", 1},
                        {"optimizer_step", "optimizer_step", 1},
                        {"steady_backward", "backward", 2}};
    const uint64_t g = static_cast<uint64_t>(in.cluster.gpus_per_node());
    nlohmann::json rows = nlohmann::json::array();
    bool pass = true;
    for (const auto& mp : maps) {
        const PhaseMemory* ep = nullptr;
        for (const auto& p : est.phases)
            if (p.name == mp.est_phase) ep = &p;
        if (ep == nullptr) continue;
        std::vector<const nlohmann::json*> recs;
        for (const auto& r : measured.at("ranks"))
            if (const auto* p = find_phase(r, mp.run_phase, mp.step)) recs.push_back(p);
        if (recs.empty()) continue;
        auto max_over = [&](auto fn) {
            uint64_t m = 0;
            for (const auto* p : recs) m = std::max(m, fn(*p));
            return m;
        };
        auto add = [&](const char* name, uint64_t e, uint64_t m) {
            const double rel = e == m ? 0.0 : (e == 0 ? 1.0 : (double(m) - double(e)) / double(e));
            if (std::fabs(rel) > tolerance) pass = false;
            rows.push_back({{"name", name}, {"phase", mp.est_phase}, {"estimated", e}, {"measured", m},
                            {"rel_error", rel}});
        };
        const GpuMemory& gm = ep->per_gpu;
        // The estimate's load phase is its largest moment, while a measurement
        // peaks each category on its own: the load's components are held to
        // their own peaks (Estimate::load_component_peaks: the 16-bit module
        // beside its flat copy, ZeRO-1/2's init fp32 gradient of zeros, ...).
        // The measured load ends holding what the first forward holds, so its
        // gradients and optimizer states are held to the forward's too; at
        // ZeRO-1/2 the first forward's buffers (the offload
        // temp_grad_buffer_for_gpu_offload) are made at init too; ZeRO-3's
        // forward buffers include its gathering, so not there.
        const bool load = std::string(mp.est_phase) == "load";
        const GpuMemory& own = load ? est.load_component_peaks : gm;
        uint64_t est_grads = own.gradients, est_opt = own.optimizer_states, est_buf = own.temporary_buffers;
        const uint64_t est_params = own.parameters;
        if (load)
            for (const auto& p : est.phases)
                if (p.name == "forward") {
                    est_grads = std::max(est_grads, p.per_gpu.gradients);
                    est_opt = std::max(est_opt, p.per_gpu.optimizer_states);
                    if (in.zero.stage <= 2) est_buf = std::max(est_buf, p.per_gpu.temporary_buffers);
                }
        add("parameters", est_params, max_over([](const auto& p) { return peak(p, "device", "parameters"); }));
        add("gradients", est_grads, max_over([](const auto& p) { return peak(p, "device", "gradients"); }));
        add("optimizer_states", est_opt,
            max_over([](const auto& p) { return peak(p, "device", "optimizer_states"); }));
        add("activations", gm.activations, max_over([](const auto& p) { return peak(p, "device", "activations"); }));
        add("temporary_buffers", est_buf,
            max_over([](const auto& p) { return peak(p, "device", "buffers"); }));
        if (std::string(mp.est_phase) != "load") {
            const uint64_t overhead = in.residual.host_process_overhead * g;
            const uint64_t host = ep->per_node.host_memory > overhead ? (ep->per_node.host_memory - overhead) / g : 0;
            add("host_offload", host, max_over([](const auto& p) {
                    return p.at("peak_bytes").at("host").at("total").template get<uint64_t>() +
                           p.at("peak_bytes").at("pinned").at("total").template get<uint64_t>();
                }));
            add("host_pinned", ep->per_node.host_pinned / g,
                max_over([](const auto& p) { return p.at("peak_bytes").at("pinned").at("total").template get<uint64_t>(); }));
        }
    }
    return {{"components", rows}, {"pass", pass}, {"tolerance", tolerance}};
}

}  // namespace zeromem_cli
