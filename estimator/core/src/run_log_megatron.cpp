// Megatron(-DeepSpeed) megatron/utils.py report_memory(name): "[Rank N] <name>
// memory (MB) | allocated: {memory_allocated / 2^20} | max allocated:
// {max_memory_allocated / 2^20} | reserved: {memory_reserved / 2^20} | max
// reserved: {max_memory_reserved / 2^20}" ("MB" is MiB), called from
// training.py as report_memory('(after {iteration} iterations)') once, after
// the first logged iteration, by data-parallel rank 0 of each model-parallel
// group. The values are Python floats printed in full (repr), exact to the
// byte; the peaks count from the start (never reset).
#include "run_log_lines.h"

namespace zeromem::run_log_detail {

namespace {

constexpr std::string_view kTag = "memory (MB)";

Reading mib_field(std::string_view t, std::size_t& pos, std::string_view name, const Where& w) {
    if (!expect(t, pos, "|") || !expect(t, pos, name) || !expect(t, pos, ":"))
        w.fail("expected '| " + std::string(name) + ": <MiB>' (line cut off or malformed)");
    const auto d = read_decimal(t, pos);
    if (!d) w.fail("'" + std::string(name) + ":' is not followed by a number");
    return rounded(*d, kMiB, 0.0L, w);
}

}  // namespace

void read_megatron_report_memory(const std::vector<Line>& lines, const std::string& path,
                                 std::vector<MemoryObservation>& out) {
    for (const Line& l : lines) {
        const std::string_view t = l.text;
        const auto at = t.find(kTag);
        if (at == std::string_view::npos || t.find("| allocated", at) == std::string_view::npos) continue;
        const Where w{path, l.number, LogFormat::megatron_report_memory};
        MemoryObservation o;
        o.format = LogFormat::megatron_report_memory;
        o.line = l.number;
        std::string_view name = t.substr(0, at);
        if (const auto r = name.find("[Rank "); r != std::string_view::npos) {
            std::size_t pos = r + 6;
            const auto d = read_decimal(name, pos);
            if (!d || d->decimals != 0 || pos >= name.size() || name[pos] != ']') w.fail("malformed '[Rank N]'");
            o.rank = static_cast<int>(d->mantissa);
            name = name.substr(pos + 1);
        }
        o.message = std::string(trim(name));
        std::size_t pos = at + kTag.size();
        o.allocated = mib_field(t, pos, "allocated", w);
        o.max_allocated = mib_field(t, pos, "max allocated", w);
        o.reserved = mib_field(t, pos, "reserved", w);
        o.max_reserved = mib_field(t, pos, "max reserved", w);
        add_reading(out, std::move(o), path);
    }
}

}  // namespace zeromem::run_log_detail
