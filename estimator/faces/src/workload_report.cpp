// Rendering a workload estimate (several models per GPU): table and
// Markdown in GiB (2^30 bytes), JSON in integer bytes, CSV in both.
#include "zeromem/report.h"

#include "zeromem/util.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace zeromem {

namespace {

using ojson = nlohmann::ordered_json;

// Roles in the order they first appear.
std::vector<std::string> roles_of(const WorkloadEstimate& w) {
    std::vector<std::string> roles;
    for (const auto& p : w.phases)
        for (const auto& m : p.models)
            if (std::find(roles.begin(), roles.end(), m.role) == roles.end()) roles.push_back(m.role);
    return roles;
}

const ModelShare* share(const WorkloadPhase& p, const std::string& role) {
    for (const auto& m : p.models)
        if (m.role == role) return &m;
    return nullptr;
}

std::string fits_text(const std::optional<bool>& f) { return !f ? "?" : (*f ? "yes" : "NO"); }

// One model of the workload as the report describes it.
struct ModelLine {
    std::string role, name;
    uint64_t params = 0;
    bool trained = false;
    int stage = 0;
    OffloadDevice offload_optimizer = OffloadDevice::none, offload_param = OffloadDevice::none;
    // "reference: llama-2-7b (6.74 B params), frozen, ZeRO-3 inference engine"
    std::string text() const {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.2f B params", double(params) / 1e9);
        std::string t = role + ": " + name + " (" + buf + "), " + (trained ? "trained" : "frozen") + ", ZeRO-" +
                        std::to_string(stage);
        if (offload_optimizer != OffloadDevice::none) t += std::string(", offload_optimizer ") + to_string(offload_optimizer);
        if (offload_param != OffloadDevice::none) t += std::string(", offload_param ") + to_string(offload_param);
        return trained ? t : t + " inference engine";
    }
};

std::vector<ModelLine> model_lines(const WorkloadEstimate& w, const Resolved& res) {
    const auto& in = res.input;
    const auto& s = w.settings;
    std::vector<ModelLine> out;
    out.push_back({w.kind == Workload::ppo ? "actor" : "policy", in.model.name, in.model.params, true, in.zero.stage,
                   in.zero.offload_optimizer, in.zero.offload_param});
    auto frozen = [&](const char* role, const FrozenModel& f) {
        out.push_back({role, f.model.name, f.model.params, false, f.stage, OffloadDevice::none, f.offload_param});
    };
    if ((w.kind == Workload::dpo && !s.precompute_ref_log_probs) || w.kind == Workload::ppo) frozen("reference", s.reference);
    if (w.kind == Workload::ppo) {
        out.push_back({"critic", s.critic.model.name, s.critic.model.params, true, s.critic.stage,
                       s.critic.offload_optimizer, s.critic.offload_param});
        frozen("reward", s.reward);
    }
    return out;
}

std::string render_text(const WorkloadEstimate& w, const Resolved& res, bool md, bool explain) {
    const auto& in = res.input;
    const auto roles = roles_of(w);
    const int64_t g = in.cluster.gpus_per_node();
    std::ostringstream o;
    o << (md ? "## " : "") << "zeromem estimate, workload " << to_string(w.kind) << ": " << in.cluster.gpus
      << " GPU(s) on " << in.cluster.nodes << " node(s), micro batch " << in.train.micro_batch << ", seq "
      << in.train.seq_len << ", " << to_string(in.train.dtype) << "\n";
    for (const auto& l : model_lines(w, res)) o << (md ? "- " : "  ") << l.text() << "\n";
    o << "\nMemory per phase, GiB (2^30 bytes); each model's share per GPU, the sum per GPU (one CUDA context), per node ("
      << g << " GPUs) and host RAM per node:\n";
    std::vector<std::string> head{"phase"};
    for (const auto& r : roles) head.push_back(r);
    for (const char* c : {"per GPU", "per node", "host/node", "fits"}) head.push_back(c);
    std::vector<std::vector<std::string>> rows;
    for (const auto& p : w.phases) {
        std::vector<std::string> row{p.name};
        for (const auto& r : roles) {
            const ModelShare* m = share(p, r);
            row.push_back(m ? format_gib(double(m->gpu_bytes)) : "-");
        }
        row.push_back(format_gib(double(p.per_gpu)));
        row.push_back(format_gib(double(p.per_node_gpu)));
        row.push_back(format_gib(double(p.per_node_host)));
        row.push_back(fits_text(p.fits_gpu));
        rows.push_back(row);
    }
    std::vector<std::size_t> width(head.size(), 0);
    for (std::size_t i = 0; i < head.size(); ++i) width[i] = head[i].size();
    for (const auto& r : rows)
        for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
    auto line = [&](const std::vector<std::string>& r) {
        if (md) {
            o << "|";
            for (const auto& c : r) o << " " << c << " |";
            o << "\n";
            return;
        }
        for (std::size_t i = 0; i < r.size(); ++i) {
            const std::string pad(width[i] - r[i].size(), ' ');
            o << (i == 0 ? "  " + r[i] + pad : "  " + pad + r[i]);
        }
        o << "\n";
    };
    line(head);
    if (md) {
        o << "|";
        for (std::size_t i = 0; i < head.size(); ++i) o << (i == 0 ? " --- |" : " ---: |");
        o << "\n";
    }
    for (const auto& r : rows) line(r);
    o << "\nPeak: " << w.peak_phase << ", " << format_gib(double(w.per_gpu)) << " GiB per GPU\n";
    auto verdict = [&](const char* what, std::optional<bool> fits, uint64_t need, std::optional<uint64_t> cap) {
        o << what << ": ";
        if (!fits) {
            o << "capacity unknown\n";
            return;
        }
        o << (*fits ? "fits" : "DOES NOT FIT") << " — needs " << format_gib(double(need)) << " GiB of "
          << format_gib(double(*cap)) << " GiB\n";
    };
    verdict("GPU (sum of every model)", w.fits_gpu, w.per_gpu, in.cluster.gpu_memory);
    verdict("host RAM per node", w.fits_host, w.per_node_host, in.cluster.host_memory);
    for (const auto& n : w.notes) o << "note: " << n << "\n";
    if (explain) {
        o << "\nTerms of the workload (" << w.terms.size() << "):\n";
        for (const auto& t : w.terms)
            o << "  " << t.component << " = " << t.formula << "\n      with " << t.substituted << "\n      = " << t.bytes
              << " B = " << format_gib(double(t.bytes)) << " GiB   [" << t.source << "]\n";
        o << "\nSettings and where they came from:\n";
        for (const auto& [k, v] : res.provenance) o << "  " << k << ": " << v << "\n";
    }
    return o.str();
}

ojson render_json(const WorkloadEstimate& w, const Resolved& res, bool explain) {
    const auto& in = res.input;
    ojson j;
    j["workload"] = to_string(w.kind);
    j["models"] = ojson::array();
    for (const auto& l : model_lines(w, res))
        j["models"].push_back({{"role", l.role}, {"name", l.name}, {"params", l.params}, {"trained", l.trained},
                               {"stage", l.stage}, {"offload_optimizer", to_string(l.offload_optimizer)},
                               {"offload_param", to_string(l.offload_param)}});
    j["gpus"] = in.cluster.gpus;
    j["nodes"] = in.cluster.nodes;
    j["gpus_per_node"] = in.cluster.gpus_per_node();
    j["phases"] = ojson::array();
    for (const auto& p : w.phases) {
        ojson jp;
        jp["name"] = p.name;
        jp["models"] = ojson::array();
        for (const auto& m : p.models)
            jp["models"].push_back({{"role", m.role}, {"activity", m.activity}, {"trained", m.trained},
                                    {"gpu_bytes", m.gpu_bytes}, {"host_bytes_per_node", m.host_bytes}});
        jp["per_gpu"] = p.per_gpu;
        jp["per_node_gpu"] = p.per_node_gpu;
        jp["per_node_host"] = p.per_node_host;
        jp["fits_gpu"] = p.fits_gpu ? ojson(*p.fits_gpu) : ojson(nullptr);
        jp["fits_host"] = p.fits_host ? ojson(*p.fits_host) : ojson(nullptr);
        j["phases"].push_back(jp);
    }
    j["peak_phase"] = w.peak_phase;
    j["per_gpu"] = w.per_gpu;
    j["per_node_host"] = w.per_node_host;
    j["gpu_memory"] = in.cluster.gpu_memory ? ojson(*in.cluster.gpu_memory) : ojson(nullptr);
    j["host_memory"] = in.cluster.host_memory ? ojson(*in.cluster.host_memory) : ojson(nullptr);
    j["fits_gpu"] = w.fits_gpu ? ojson(*w.fits_gpu) : ojson(nullptr);
    j["fits_host"] = w.fits_host ? ojson(*w.fits_host) : ojson(nullptr);
    j["notes"] = w.notes;
    if (explain) {
        j["terms"] = ojson::array();
        for (const auto& t : w.terms)
            j["terms"].push_back({{"component", t.component}, {"formula", t.formula}, {"substituted", t.substituted},
                                  {"bytes", t.bytes}, {"source", t.source}});
        j["provenance"] = res.provenance;
    }
    return j;
}

std::string render_csv(const WorkloadEstimate& w) {
    std::ostringstream o;
    o << "phase,role,activity,gpu_bytes,gpu_GiB,host_bytes_per_node\n";
    for (const auto& p : w.phases) {
        for (const auto& m : p.models)
            o << p.name << "," << m.role << ",\"" << m.activity << "\"," << m.gpu_bytes << ","
              << format_gib(double(m.gpu_bytes), 3) << "," << m.host_bytes << "\n";
        o << p.name << ",sum per GPU,," << p.per_gpu << "," << format_gib(double(p.per_gpu), 3) << ","
          << p.per_node_host << "\n";
    }
    return o.str();
}

}  // namespace

std::string render_workload(const WorkloadEstimate& w, const Resolved& res, Format format, bool explain) {
    switch (format) {
        case Format::json: return render_json(w, res, explain).dump(2) + "\n";
        case Format::csv:
            if (explain) throw InputError("--explain: not available with --format csv");
            return render_csv(w);
        case Format::md: return render_text(w, res, true, explain);
        case Format::table: break;
    }
    return render_text(w, res, false, explain);
}

}  // namespace zeromem
