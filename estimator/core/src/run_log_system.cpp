// Readings of the system's tools (see run_log_lines.h):
//  - nvidia-smi --query-gpu=[index,]memory.used[,memory.total] --format=csv[,nounits]:
//    a header "memory.used [MiB]" then one row per GPU, "<n> MiB" (NVML's bytes
//    / 2^20, whole MiB). The figure is the whole device: every process's
//    memory and the CUDA contexts, not only PyTorch's.
//  - GNU time -v: "Maximum resident set size (kbytes): N", the peak resident
//    set (getrusage ru_maxrss, KiB on Linux) of the largest process it waited for.
#include "run_log_lines.h"

#include <map>
#include <string>
#include <vector>

namespace zeromem::run_log_detail {

namespace {

std::vector<std::string_view> csv_cells(std::string_view t) {
    std::vector<std::string_view> cells;
    for (std::size_t p = 0;;) {
        const auto q = t.find(',', p);
        cells.push_back(trim(t.substr(p, q == std::string_view::npos ? std::string_view::npos : q - p)));
        if (q == std::string_view::npos) break;
        p = q + 1;
    }
    return cells;
}

// "<n> MiB" or "<n>" (--format=csv,nounits) in whole MiB; every cell of a table is written one way, so a
// number without its unit in a table that has it (`with_unit`, set by the first cell) is a cut-off line.
Reading mib_cell(std::string_view cell, const Where& w, std::optional<bool>& with_unit) {
    std::size_t pos = 0;
    const auto d = read_decimal(cell, pos);
    const std::string_view unit = trim(cell.substr(pos));
    if (!d || d->decimals != 0 || !(unit.empty() || unit == "MiB")) w.fail("expected '<whole number> MiB', got '" + std::string(cell) + "'");
    if (!with_unit) with_unit = !unit.empty();
    if (*with_unit != !unit.empty())
        w.fail("'" + std::string(cell) + "' " + (unit.empty() ? "has no 'MiB' where the table's other cells have it (the "
                                                               "line is cut off)"
                                                             : "has 'MiB' where the table's other cells have none"));
    return floored(*d, kMiB, 1.0L, w);
}

// Column of `name` in the header cells, or -1.
int column(const std::vector<std::string_view>& header, std::string_view name) {
    for (std::size_t k = 0; k < header.size(); ++k)
        if (starts_with(header[k], name)) return static_cast<int>(k);
    return -1;
}

}  // namespace

void read_nvidia_smi(const std::vector<Line>& lines, const std::string& path, std::vector<MemoryObservation>& out) {
    std::vector<std::string_view> header;
    int used = -1, total = -1, index = -1, row = 0;
    std::optional<bool> with_unit;  // the table's cells carry "MiB" (csv) or not (csv,nounits)
    struct Peak {
        MemoryObservation obs;
        std::size_t samples = 0;
    };
    std::map<std::string, Peak> peaks;  // by the index column's value ("" without one)
    std::vector<std::string> order;     // GPUs in the order they first appear
    for (const Line& l : lines) {
        const std::string_view t = trim(l.text);
        if (t.find("memory.used [MiB]") != std::string_view::npos) {
            header = csv_cells(t);
            used = column(header, "memory.used");
            total = column(header, "memory.total");
            index = column(header, "index");
            if (used < 0) header.clear();  // the words inside another cell: not a query header
            with_unit.reset();
            continue;
        }
        if (header.empty()) continue;
        const auto cells = csv_cells(t);
        if (cells.size() != header.size() || t.empty()) {  // the table ended
            header.clear();
            continue;
        }
        const Where w{path, l.number, LogFormat::nvidia_smi_csv};
        MemoryObservation o;
        o.format = LogFormat::nvidia_smi_csv;
        o.line = l.number;
        const std::string gpu = index >= 0 ? std::string(cells[std::size_t(index)]) : std::string();
        o.message = index >= 0 ? "GPU " + gpu : "nvidia-smi row " + std::to_string(++row);
        o.device_used = mib_cell(cells[std::size_t(used)], w, with_unit);
        if (total >= 0) o.device_total = mib_cell(cells[std::size_t(total)], w, with_unit);
        // A monitoring log (-l / --loop) samples each GPU many times: each GPU's highest reading is the one
        // held against the estimate (its first row at that value), with the number of samples it was taken
        // from; a log without the index column is one series.
        Peak& pk = peaks[gpu];
        ++pk.samples;
        if (pk.samples == 1 || o.device_used->bytes > pk.obs.device_used->bytes) pk.obs = std::move(o);
        if (pk.samples == 1) order.push_back(gpu);
    }
    for (const auto& gpu : order) {
        Peak& pk = peaks[gpu];
        if (pk.samples > 1)
            pk.obs.message = (gpu.empty() ? std::string("nvidia-smi") : "GPU " + gpu) + " (highest of " +
                             std::to_string(pk.samples) + " samples)";
        add_reading(out, std::move(pk.obs), path);
    }
}

void read_gnu_time(const std::vector<Line>& lines, const std::string& path, std::vector<MemoryObservation>& out) {
    constexpr std::string_view kTag = "Maximum resident set size (kbytes):";
    std::string command = "/usr/bin/time -v";
    for (const Line& l : lines) {
        const std::string_view t = trim(l.text);
        if (starts_with(t, "Command being timed:")) command = std::string(trim(t.substr(20)));
        if (!starts_with(t, kTag)) continue;
        const Where w{path, l.number, LogFormat::gnu_time_verbose};
        std::size_t pos = kTag.size();
        const auto d = read_decimal(t, pos);
        if (!d || d->decimals != 0 || d->mantissa < 0 || !trim(t.substr(pos)).empty())
            w.fail("expected a whole number of kbytes after 'Maximum resident set size (kbytes):'");
        MemoryObservation o;
        o.format = LogFormat::gnu_time_verbose;
        o.line = l.number;
        o.message = command;
        o.host_scope = HostScope::process;
        o.max_host = rounded(*d, kKiB, 0.0L, w);
        add_reading(out, std::move(o), path);
    }
}

}  // namespace zeromem::run_log_detail
