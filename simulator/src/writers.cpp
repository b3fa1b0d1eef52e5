// Table, JSON, CSV and Chrome-trace writers of a SimResult.
#include "zeromem/sim_writers.h"

#include "zeromem/util.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace zeromem::sim {

using zeromem::InputError;

namespace {

std::string gib(uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", double(b) / 1073741824.0);
    return buf;
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string o = "\"";
    for (char c : s) {
        if (c == '"') o += '"';
        o += c;
    }
    return o + "\"";
}

}  // namespace

std::string render_table(const SimResult& r) {
    std::ostringstream o;
    o << "Simulated GPU memory of one rank (PyTorch caching allocator model), GiB = 2^30 bytes\n";
    // An out-of-memory at the first allocation leaves no peak event.
    auto at = [](const std::string& event, const std::string& module) {
        return event.empty() ? std::string("  (no allocation succeeded)") : "  at " + event + " in " + module;
    };
    o << "  peak allocated  " << gib(r.peak_allocated) << " GiB" << at(r.peak_event, r.peak_module) << "\n";
    o << "  peak reserved   " << gib(r.peak_reserved) << " GiB" << at(r.peak_reserved_event, r.peak_reserved_module)
      << (r.capacity ? "" : " (unbounded: no GPU capacity given)") << "\n";
    o << "  reserved - allocated at the allocated peak: " << gib(r.reserved_at_peak - r.peak_allocated) << " GiB\n";
    const ProcessMemory& pm = r.process;
    o << "  not replayed, per process (sized from the input as the estimator sizes them):\n"
      << "    cuBLAS/cuBLASLt workspaces " << gib(pm.cublas_workspaces) << " GiB ("
      << (pm.cublas_in_allocator ? "inside" : "outside") << " the caching allocator)\n"
      << "    CUDA context               " << gib(pm.cuda_context) << " GiB (outside the allocator)\n"
      << "    NCCL buffers               " << gib(pm.nccl_buffers) << " GiB (outside the allocator)\n";
    if (pm.process_baseline > 0)
        o << "    process baseline           " << gib(pm.process_baseline)
          << " GiB (the calibration profile's, inside the allocator)\n";
    o << "  nvidia-smi at the reserved peak ~ " << gib(r.peak_reserved + pm.total())
      << " GiB (peak reserved + these)\n";
    o << "  live at the allocated peak (requested bytes, estimator terms):";
    for (int i = 0; i < kComponentCount; ++i) o << (i ? ", " : " ") << kComponents[i] << " " << gib(r.peak_composition[static_cast<size_t>(i)]);
    o << " GiB\n\n";
    o << "  phase              peak allocated   peak reserved\n";
    for (const auto& p : r.phases) {
        char line[128];
        std::snprintf(line, sizeof line, "  %-18s %10s GiB  %10s GiB\n", to_string(p.phase), gib(p.peak_allocated).c_str(),
                      gib(p.peak_reserved).c_str());
        o << line;
    }
    if (r.oom) {
        // PyTorch's OutOfMemoryError text (CUDACachingAllocator.cpp malloc).
        const auto& m = r.oom->info;
        const uint64_t total = r.oom->device_total ? r.oom->device_total : m.capacity;
        const uint64_t outside = total - std::min(total, m.capacity);  // CUDA context etc.
        const uint64_t used = std::min(total, m.reserved + outside);
        o << "\nOutOfMemoryError: CUDA out of memory. Tried to allocate " << gib(m.requested) << " GiB. GPU 0 has a total capacity of "
          << gib(total) << " GiB of which " << gib(total - used) << " GiB is free. Of the allocated memory " << gib(m.allocated)
          << " GiB is allocated by PyTorch, and " << gib(m.reserved - m.allocated)
          << " GiB is reserved by PyTorch but unallocated. (event " << r.oom->term << " in " << r.oom->module << ", phase "
          << to_string(r.oom->phase) << ")\n";
    }
    o << render_host_table(r.host);
    return o.str();
}

nlohmann::json to_json(const SimResult& r) {
    nlohmann::json j;
    j["peak_allocated"] = r.peak_allocated;
    j["peak_reserved"] = r.peak_reserved;
    j["cublas_workspaces"] = r.process.cublas_workspaces;
    j["cublas_in_allocator"] = r.process.cublas_in_allocator;
    j["cuda_context"] = r.process.cuda_context;
    j["nccl_buffers"] = r.process.nccl_buffers;
    j["process_baseline"] = r.process.process_baseline;
    j["nvidia_smi_at_peak_reserved"] = r.peak_reserved + r.process.total();
    j["peak_event"] = r.peak_event;
    j["peak_module"] = r.peak_module;
    if (r.oom) {
        const auto& m = r.oom->info;
        j["oom"] = {{"requested", m.requested}, {"allocated", m.allocated}, {"reserved", m.reserved},
                    {"capacity", m.capacity},   {"event", r.oom->term},     {"module", r.oom->module},
                    {"phase", to_string(r.oom->phase)}, {"t", r.oom->t}};
    } else {
        j["oom"] = nullptr;
    }
    j["phases"] = nlohmann::json::array();
    for (const auto& p : r.phases)
        j["phases"].push_back({{"name", to_string(p.phase)}, {"peak_allocated", p.peak_allocated}, {"peak_reserved", p.peak_reserved}});
    auto& tl = j["timeline"] = nlohmann::json::array();
    for (const auto& p : r.timeline)
        tl.push_back({{"t", p.t}, {"event", p.term}, {"phase", to_string(p.phase)}, {"module", r.modules[p.module]},
                      {"stream", to_string(p.stream)}, {"bytes", p.bytes}, {"allocated", p.allocated}, {"reserved", p.reserved}});
    j["host"] = host_to_json(r.host);
    return j;
}

std::string render_csv(const SimResult& r) {
    std::ostringstream o;
    o << "t,event,phase,module,stream,bytes,allocated,reserved\n";
    for (const auto& p : r.timeline)
        o << p.t << ',' << p.term << ',' << to_string(p.phase) << ',' << csv_field(r.modules[p.module]) << ','
          << to_string(p.stream) << ',' << p.bytes << ',' << p.allocated << ',' << p.reserved << '\n';
    return o.str();
}

nlohmann::json chrome_trace(const SimResult& r) {
    using nlohmann::json;
    json ev = json::array();
    ev.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", "rank 0 (simulated)"}}}});
    for (int s = 0; s < 3; ++s)
        ev.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", s},
                      {"args", {{"name", std::string(to_string(static_cast<Stream>(s))) + " stream"}}}});
    for (const auto& p : r.timeline) {
        ev.push_back({{"name", "allocated"}, {"ph", "C"}, {"ts", p.t}, {"pid", 0}, {"args", {{"bytes", p.allocated}}}});
        ev.push_back({{"name", "reserved"}, {"ph", "C"}, {"ts", p.t}, {"pid", 0}, {"args", {{"bytes", p.reserved}}}});
    }
    for (const auto& s : r.spans)
        ev.push_back({{"name", r.modules[s.module]}, {"cat", s.pass}, {"ph", "X"}, {"ts", s.begin},
                      {"dur", s.end - s.begin}, {"pid", 0}, {"tid", 0},
                      {"args", {{"phase", to_string(s.phase)}}}});
    if (r.oom)
        ev.push_back({{"name", "OutOfMemoryError"}, {"ph", "i"}, {"s", "g"}, {"ts", r.oom->t}, {"pid", 0}, {"tid", 0},
                      {"args", {{"requested", r.oom->info.requested}, {"module", r.oom->module}}}});
    return json{{"traceEvents", ev}};
}

void check_writable(const std::string& path, const std::string& flag) {
    const bool existed = std::ifstream(path).good();
    std::ofstream probe(path, std::ios::binary | std::ios::app);  // appends nothing: an existing file is left as it is
    if (!probe) throw InputError(flag + ": cannot write '" + path + "'");
    probe.close();
    if (!existed) std::remove(path.c_str());
}

uint64_t write_file(const std::string& path, const std::string& text, const std::string& flag) {
    std::error_code ec;
    const auto kind = std::filesystem::status(path, ec).type();
    const bool direct = kind != std::filesystem::file_type::not_found && kind != std::filesystem::file_type::regular &&
                        kind != std::filesystem::file_type::none;  // a pipe or device (/dev/stdout): written as is
    const std::string partial = direct ? path : path + ".partial";
    std::ofstream f(partial, std::ios::binary);
    if (!f) throw InputError(flag + ": cannot write '" + path + "'");
    f << text;
    f.close();
    if (!f || (!direct && std::rename(partial.c_str(), path.c_str()) != 0)) {
        if (!direct) std::remove(partial.c_str());
        throw InputError(flag + ": cannot write '" + path + "'");
    }
    return text.size();
}

std::string wrote_line(const std::string& path, uint64_t bytes) {
    char size[48];
    if (bytes >= (uint64_t(1) << 20))
        std::snprintf(size, sizeof size, "%.1f MiB", double(bytes) / double(uint64_t(1) << 20));
    else
        std::snprintf(size, sizeof size, "%.1f KiB", double(bytes) / 1024.0);
    return "wrote " + path + " (" + size + ")";
}

}  // namespace zeromem::sim
