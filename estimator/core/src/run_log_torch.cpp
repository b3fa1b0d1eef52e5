// PyTorch's and the HF Trainer's memory printouts (see run_log_lines.h):
//  - the caching allocator's out-of-memory message (c10/cuda/
//    CUDACachingAllocator.cpp), sizes by format_size: 2 decimals of bytes,
//    KiB, MiB or GiB. torch >= 2.1: "CUDA out of memory. Tried to allocate X.
//    GPU N has a total capacity of Y of which Z is free. [Process P has ...
//    memory in use. ]Of the allocated memory A is allocated by PyTorch, and B
//    is reserved by PyTorch but unallocated." Before: "... Tried to allocate X
//    (GPU N; Y total capacity; A already allocated; Z free; R reserved in total
//    by PyTorch)" (before 1.4 "R cached").
//  - torch.cuda.memory_summary() (torch/cuda/memory.py): rows "| Allocated
//    memory | cur | peak | ... |" and "| GPU reserved memory | ...", sizes by
//    _format_size: whole units, floored (sz //= 1024).
//  - transformers TrainerMemoryTracker metrics <stage>_mem_{gpu,cpu}_{alloc,
//    peaked}_delta: alloc_delta = end - start, peaked_delta = peak - end ("add
//    up alloc_delta + peaked_delta and you know how much memory was needed",
//    trainer_pt_utils.py log_metrics); printed by log_metrics as "{v >> 20}MB"
//    (MiB, floored), raw bytes in the metrics dict and *_results.json.
#include "run_log_lines.h"

#include <map>

namespace zeromem::run_log_detail {

namespace {

Reading plus(const Reading& a, const Reading& b) { return {a.bytes + b.bytes, a.low + b.low, a.high + b.high}; }
Reading minus(const Reading& a, const Reading& b) { return {a.bytes - b.bytes, a.low - b.high, a.high - b.low}; }

// A format_size size ("3.14 GiB", "512 bytes") at t[pos].
std::optional<Reading> read_size(std::string_view t, std::size_t& pos, const Where& w) {
    std::size_t p = pos;
    const auto d = read_decimal(t, p);
    if (!d) return std::nullopt;
    while (p < t.size() && t[p] == ' ') ++p;
    std::size_t e = p;
    while (e < t.size() && ((t[e] >= 'a' && t[e] <= 'z') || (t[e] >= 'A' && t[e] <= 'Z'))) ++e;
    const long double unit = binary_unit(t.substr(p, e - p));
    if (unit == 0.0L) return std::nullopt;
    pos = e;
    return rounded(*d, unit, unit == 1.0L ? 0.0L : 0.01L, w);
}

Reading need_size(std::string_view t, std::size_t& pos, const char* what, const Where& w) {
    const auto r = read_size(t, pos, w);
    if (!r) w.fail(std::string("expected a size (e.g. '3.14 GiB') ") + what + " (message cut off or malformed)");
    return *r;
}

std::string gpu_index(std::string_view t, std::size_t& pos, const Where& w) {
    const auto d = read_decimal(t, pos);
    if (!d || d->decimals != 0 || d->mantissa < 0) w.fail("expected the GPU index after 'GPU'");
    return std::to_string(d->mantissa);
}

// The part after "Tried to allocate X" of a torch < 2.1 message: "(GPU N; ...)".
void read_old_oom(std::string_view t, std::size_t pos, const Where& w, MemoryObservation& o) {
    const auto close = t.find(')', pos);
    if (!expect(t, pos, "GPU") || close == std::string_view::npos) w.fail("expected '(GPU N; ...)' (message cut off?)");
    o.message = "out of memory on GPU " + gpu_index(t, pos, w);
    std::optional<Reading> free;
    while (expect(t, pos, ";")) {
        const Reading r = need_size(t, pos, "in the '(GPU N; ...)' list", w);
        const std::string_view label = trim(t.substr(pos, std::min(t.find_first_of(";)", pos), close) - pos));
        if (label == "total capacity") o.device_total = r;
        else if (label == "already allocated") o.allocated = r;
        else if (label == "free") free = r;
        else if (label == "reserved in total by PyTorch" || label == "cached") o.reserved = r;
        pos = std::min(t.find_first_of(";)", pos), close);
    }
    if (!o.device_total || !o.allocated) w.fail("the '(GPU N; ...)' list lacks 'total capacity' or 'already allocated'");
    if (free) o.device_used = minus(*o.device_total, *free);
}

// The part after "Tried to allocate X" of a torch >= 2.1 message.
void read_new_oom(std::string_view t, std::size_t pos, const Where& w, MemoryObservation& o) {
    if (!expect(t, pos, "GPU")) w.fail("expected '. GPU N has a total capacity of ...' (message cut off?)");
    o.message = "out of memory on GPU " + gpu_index(t, pos, w);
    if (!expect(t, pos, "has a total capacity of")) w.fail("expected 'has a total capacity of'");
    o.device_total = need_size(t, pos, "after 'has a total capacity of'", w);
    if (!expect(t, pos, "of which")) w.fail("expected 'of which <size> is free'");
    o.device_used = minus(*o.device_total, need_size(t, pos, "after 'of which'", w));
    const auto of = t.find("Of the allocated memory", pos);
    if (of == std::string_view::npos) w.fail("'Of the allocated memory ...' missing (message cut off?)");
    pos = of + 23;
    o.allocated = need_size(t, pos, "after 'Of the allocated memory'", w);
    if (!expect(t, pos, "is allocated by PyTorch, and")) w.fail("expected 'is allocated by PyTorch, and'");
    const Reading unallocated = need_size(t, pos, "before 'is reserved by PyTorch but unallocated'", w);
    if (!expect(t, pos, "is reserved by PyTorch but unallocated")) w.fail("expected 'is reserved by PyTorch but unallocated'");
    o.reserved = plus(*o.allocated, unallocated);
}

}  // namespace

void read_oom_messages(const std::vector<Line>& lines, const std::string& path, std::vector<MemoryObservation>& out) {
    constexpr std::string_view kTag = "CUDA out of memory. Tried to allocate";
    for (const Line& l : lines) {
        const std::string_view t = l.text;
        const auto at = t.find(kTag);
        if (at == std::string_view::npos) continue;
        const Where w{path, l.number, LogFormat::torch_oom_message};
        MemoryObservation o;
        o.format = LogFormat::torch_oom_message;
        o.line = l.number;
        std::size_t pos = at + kTag.size();
        o.requested = need_size(t, pos, "after 'Tried to allocate'", w);
        if (expect(t, pos, "(")) read_old_oom(t, pos, w, o);
        else if (expect(t, pos, ".")) read_new_oom(t, pos, w, o);
        else w.fail("expected '(GPU N; ...' or '. GPU N has ...' after the requested size");
        add_reading(out, std::move(o), path);
    }
}

void read_memory_summary(const std::vector<Line>& lines, const std::string& path, std::vector<MemoryObservation>& out) {
    std::optional<MemoryObservation> open;  // a summary whose rows are still to come
    std::size_t header = 0;
    auto row = [&](std::string_view t, const Where& w, std::optional<Reading>& cur, std::optional<Reading>& peak) {
        std::vector<std::string_view> cells;
        for (std::size_t p = 1; p < t.size();) {
            const auto q = t.find('|', p);
            if (q == std::string_view::npos) break;
            cells.push_back(trim(t.substr(p, q - p)));
            p = q + 1;
        }
        if (cells.size() < 3) w.fail("a row with fewer than the Cur Usage and Peak Usage columns (cut off?)");
        for (int k = 1; k <= 2; ++k) {
            std::size_t pos = 0;
            const auto d = read_decimal(cells[std::size_t(k)], pos);
            const long double unit = binary_unit(trim(cells[std::size_t(k)].substr(pos)));
            if (!d || d->decimals != 0 || unit == 0.0L) w.fail("expected '<whole number> <B|KiB|MiB|GiB|TiB>' in a size column");
            (k == 1 ? cur : peak) = floored(*d, unit, 1.0L, w);
        }
    };
    for (const Line& l : lines) {
        const std::string_view t = trim(l.text);
        const Where w{path, l.number, LogFormat::torch_memory_summary};
        if (t.find("PyTorch CUDA memory summary") != std::string_view::npos) {
            if (open) Where{path, header, LogFormat::torch_memory_summary}.fail("summary without its 'GPU reserved memory' row (cut off?)");
            open = MemoryObservation{};
            open->format = LogFormat::torch_memory_summary;
            header = l.number;
            const auto id = t.find("device ID");
            open->message = id == std::string_view::npos ? "memory_summary" : "memory_summary " + std::string(trim(t.substr(id, t.find('|', id) - id)));
        } else if (open && starts_with(t, "| Allocated memory")) {
            open->line = l.number;
            row(t, w, open->allocated, open->max_allocated);
        } else if (open && starts_with(t, "| GPU reserved memory")) {
            row(t, w, open->reserved, open->max_reserved);
            if (!open->allocated) w.fail("'GPU reserved memory' row before the 'Allocated memory' row");
            add_reading(out, *open, path);
            open.reset();
        }
    }
    if (open) Where{path, header, LogFormat::torch_memory_summary}.fail("summary without its 'GPU reserved memory' row (cut off?)");
}

namespace {

// One stage's Trainer metrics as printed, before they become a reading.
struct TrainerBlock {
    std::size_t line = 0;
    std::string stage;
    std::map<std::string, Reading> values;  // "gpu_alloc", "gpu_peaked", "cpu_alloc", "cpu_peaked"
};

MemoryObservation trainer_observation(const TrainerBlock& b) {
    MemoryObservation o;
    o.format = LogFormat::hf_trainer_metrics;
    o.line = b.line;
    o.message = b.stage;
    o.baseline = Baseline::since_start;
    o.host_scope = HostScope::process;  // psutil Process().memory_info().rss
    auto get = [&](const char* k) -> std::optional<Reading> {
        const auto it = b.values.find(k);
        return it == b.values.end() ? std::nullopt : std::optional<Reading>(it->second);
    };
    o.allocated = get("gpu_alloc");
    o.host = get("cpu_alloc");
    if (o.allocated && get("gpu_peaked")) o.max_allocated = plus(*o.allocated, *get("gpu_peaked"));
    if (o.host && get("cpu_peaked")) o.max_host = plus(*o.host, *get("cpu_peaked"));
    return o;
}

}  // namespace

void read_trainer_metrics(const std::vector<Line>& lines, const std::string& path, std::vector<MemoryObservation>& out) {
    std::map<std::string, TrainerBlock> open;  // per stage
    auto close = [&](const std::string& stage) {
        if (const auto it = open.find(stage); it != open.end()) {
            // peaked_delta is the peak above the stage's end (peak - end): without alloc_delta (end - start)
            // it says nothing about the memory in use, and log_metrics prints both (TrainerMemoryTracker.update_metrics).
            for (const char* dev : {"gpu", "cpu"})
                if (it->second.values.count(dev + std::string("_peaked")) && !it->second.values.count(dev + std::string("_alloc")))
                    Where{path, it->second.line, LogFormat::hf_trainer_metrics}.fail(
                        "'" + stage + "_mem_" + dev + "_peaked_delta' without '" + stage + "_mem_" + dev +
                        "_alloc_delta' (the peak is counted from the stage's end, which alloc_delta gives; the block is cut off?)");
            add_reading(out, trainer_observation(it->second), path);
            open.erase(it);
        }
    };
    for (const Line& l : lines) {
        const std::string_view t = l.text;
        for (std::size_t at = t.find("_mem_"); at != std::string_view::npos; at = t.find("_mem_", at + 5)) {
            std::size_t s = at;
            while (s > 0 && t[s - 1] >= 'a' && t[s - 1] <= 'z') --s;
            const std::string stage(t.substr(s, at - s));
            std::size_t pos = at + 5;
            std::string kind;
            for (const char* k : {"gpu_alloc_delta", "gpu_peaked_delta", "cpu_alloc_delta", "cpu_peaked_delta"})
                if (t.substr(pos, std::char_traits<char>::length(k)) == k) kind = k;
            if (stage.empty() || kind.empty()) continue;
            const Where w{path, l.number, LogFormat::hf_trainer_metrics};
            pos += kind.size();
            while (pos < t.size() && (t[pos] == '"' || t[pos] == '\'')) ++pos;
            const bool formatted = expect(t, pos, "=");  // Trainer.log_metrics: "key = value" (else a dict's "key: value")
            if (!formatted && !expect(t, pos, ":")) w.fail("'" + stage + "_mem_" + kind + "' without '= <n>MB' or ': <bytes>'");
            const auto d = read_decimal(t, pos);
            if (!d || d->decimals != 0) w.fail("'" + stage + "_mem_" + kind + "' is not followed by a whole number");
            // log_metrics prints metrics_format's f"{v >> 20}MB" (floored MiB) for every _mem_ key
            // (transformers trainer_pt_utils.py metrics_format); a dict or JSON holds the bytes.
            const bool mib = expect(t, pos, "MB");
            if (formatted && !mib)
                w.fail("'" + stage + "_mem_" + kind + " = " + std::to_string(d->mantissa) +
                       "' has no 'MB': Trainer.log_metrics prints '<n>MB' after '=' (the line is cut off)");
            const Reading r = mib ? floored(*d, kMiB, 1.0L, w) : rounded(*d, 1.0L, 0.0L, w);
            const std::string key = kind.substr(0, kind.size() - 6);  // drop "_delta"
            if (open.count(stage) && open[stage].values.count(key)) close(stage);  // a second block of the stage
            if (!open.count(stage) && open.size() >= kMaxReadings) w.fail("more than " + std::to_string(kMaxReadings) + " Trainer stages open at once");
            TrainerBlock& b = open[stage];
            if (b.values.empty()) {
                b.line = l.number;
                b.stage = stage;
            }
            b.values[key] = r;
        }
    }
    while (!open.empty()) close(open.begin()->first);
}

}  // namespace zeromem::run_log_detail
