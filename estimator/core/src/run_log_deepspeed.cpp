// DeepSpeed's own memory printouts (see run_log_lines.h):
//  - deepspeed/runtime/utils.py see_memory_usage(message): logs `message`,
//    then "MA {round(memory_allocated/2^30, 2)} GB Max_MA {round(max_memory_allocated
//    /2^30, 2)} GB CA {round(memory_reserved/2^30, 2)} GB Max_CA
//    {round(max_memory_reserved/2^30)} GB", then "CPU Virtual Memory:  used =
//    {round((total - available)/2^30, 2)} GB, percent = P%" (psutil, the whole
//    host), then calls reset_peak_memory_stats(): Max_MA and Max_CA are the
//    peaks since the previous call, and Max_CA is rounded to a whole GiB.
//    The "utils.py:NNN" prefix changes with the version, so the reader keys
//    on the "see_memory_usage]" tag.
//  - deepspeed/utils/timer.py ThroughputTimer.stop: "MemAllocated={round(
//    memory_allocated/2^30, 2)}GB, MaxMemAllocated={round(max_memory_allocated
//    /2^30, 2)}GB" (peaks never reset by the timer).
#include "run_log_lines.h"

namespace zeromem::run_log_detail {

namespace {

constexpr std::string_view kTag = "see_memory_usage]";

// "<name> <number> GB" at text[pos], rounded to `step` GiB.
Reading gib_field(std::string_view text, std::size_t& pos, std::string_view name, long double step, const Where& w) {
    if (!expect(text, pos, name)) w.fail("expected '" + std::string(name) + " <number> GB' at column " + std::to_string(pos + 1));
    const auto d = read_decimal(text, pos);
    if (!d || !expect(text, pos, "GB"))
        w.fail("'" + std::string(name) + "' is not followed by '<number> GB' (line cut off or malformed)");
    if (d->mantissa < 0) w.fail("'" + std::string(name) + "' is negative: torch's memory counters are not");
    return rounded(*d, kGiB, step, w);
}

void read_ma_line(std::string_view rest, const Where& w, MemoryObservation& o) {
    std::size_t pos = 0;
    o.allocated = gib_field(rest, pos, "MA", 0.01L, w);
    o.max_allocated = gib_field(rest, pos, "Max_MA", 0.01L, w);
    o.reserved = gib_field(rest, pos, "CA", 0.01L, w);
    o.max_reserved = gib_field(rest, pos, "Max_CA", 1.0L, w);  // round(x) without digits: whole GiB
    if (!trim(rest.substr(pos)).empty()) w.fail("unexpected text after 'Max_CA ... GB'");
}

Reading cpu_used(std::string_view rest, const Where& w) {
    std::size_t pos = 0;
    if (!expect(rest, pos, "CPU Virtual Memory:") || !expect(rest, pos, "used") || !expect(rest, pos, "="))
        w.fail("expected 'CPU Virtual Memory:  used = <number> GB'");
    const auto d = read_decimal(rest, pos);
    if (!d || !expect(rest, pos, "GB")) w.fail("'used =' is not followed by '<number> GB' (line cut off or malformed)");
    return rounded(*d, kGiB, 0.01L, w);
}

}  // namespace

void read_see_memory_usage(const std::vector<Line>& lines, const std::string& path, std::vector<MemoryObservation>& out) {
    std::string message;          // the last message line, waiting for its reading
    std::size_t last = SIZE_MAX;  // index in `out` of this reader's last reading
    for (const Line& l : lines) {
        const auto at = l.text.find(kTag);
        if (at == std::string_view::npos) continue;
        const std::string_view rest = trim(l.text.substr(at + kTag.size()));
        const Where w{path, l.number, LogFormat::ds_see_memory_usage};
        if (starts_with(rest, "MA ") || starts_with(rest, "MA\t")) {
            MemoryObservation o;
            o.format = LogFormat::ds_see_memory_usage;
            o.line = l.number;
            o.message = message;
            o.peak_window = PeakWindow::since_previous;
            o.host_scope = HostScope::node;
            read_ma_line(rest, w, o);
            message.clear();
            add_reading(out, std::move(o), path);
            last = out.size() - 1;
        } else if (starts_with(rest, "CPU Virtual Memory")) {
            const Reading used = cpu_used(rest, w);
            if (last != SIZE_MAX && !out[last].host) {
                out[last].host = used;
            } else {  // the excerpt starts here, or a second CPU line
                MemoryObservation o;
                o.format = LogFormat::ds_see_memory_usage;
                o.line = l.number;
                o.message = message;
                o.host = used;
                add_reading(out, std::move(o), path);
                last = out.size() - 1;
            }
        } else if (rest.size() >= 3 && std::string_view("CPU Virtual Memory:").substr(0, rest.size()) == rest) {
            w.fail("'" + std::string(rest) + "' is the start of 'CPU Virtual Memory:  used = <number> GB' (the line "
                   "is cut off)");
        } else {
            message = std::string(rest);
        }
    }
}

void read_throughput_timer(const std::vector<Line>& lines, const std::string& path, std::vector<MemoryObservation>& out) {
    for (const Line& l : lines) {
        const std::string_view t = l.text;
        std::size_t at = t.find("MemAllocated=");
        while (at != std::string_view::npos && at > 0 && t[at - 1] == 'x') at = t.find("MemAllocated=", at + 1);
        if (at == std::string_view::npos) continue;
        const Where w{path, l.number, LogFormat::ds_throughput_timer};
        MemoryObservation o;
        o.format = LogFormat::ds_throughput_timer;
        o.line = l.number;
        std::size_t pos = at + 13;
        auto d = read_decimal(t, pos);
        if (!d || !expect(t, pos, "GB")) w.fail("'MemAllocated=' is not followed by '<number>GB'");
        o.allocated = rounded(*d, kGiB, 0.01L, w);
        if (!expect(t, pos, ",") || !expect(t, pos, "MaxMemAllocated="))
            w.fail("'MaxMemAllocated=' missing after MemAllocated (line cut off?)");
        d = read_decimal(t, pos);
        if (!d || !expect(t, pos, "GB")) w.fail("'MaxMemAllocated=' is not followed by '<number>GB'");
        o.max_allocated = rounded(*d, kGiB, 0.01L, w);
        if (const auto g = t.find("global_step="); g != std::string_view::npos) {
            std::size_t e = g + 12;
            while (e < t.size() && t[e] >= '0' && t[e] <= '9') ++e;
            o.message = std::string(t.substr(g, e - g));
        } else {
            o.message = "ThroughputTimer";
        }
        add_reading(out, std::move(o), path);
    }
}

}  // namespace zeromem::run_log_detail
