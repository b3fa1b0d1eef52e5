// compare's table (see compare_table.h).
#include "compare_table.h"
#include "options.h"

#include "zeromem/generation.h"
#include "zeromem/optimizer_state.h"
#include "zeromem/util.h"
#include "zeromem/workload.h"

#include <algorithm>
#include <cstdio>

namespace zeromem_cli {

namespace {

/// "1.234" or "1.234*" when the term rests on a calibrated/estimated constant.
std::string term_cell(double seconds, bool marked) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f%s", seconds, marked ? "*" : " ");
    return buf;
}

bool has_term(const std::vector<zeromem::CalibrationNote>& notes, const char* term) {
    for (const auto& n : notes)
        if (n.term == term) return true;
    return false;
}

/// `line` split after each "; " and ". ": the clauses and sentences a wrapped line keeps whole where they
/// fit (so "Host: dgx-a100." or "GiB (2^30 bytes)." is never cut in two).
std::vector<std::string> clauses(const std::string& line) {
    std::vector<std::string> out;
    std::size_t from = 0;
    auto next = [&line](std::size_t pos) { return std::min(line.find("; ", pos), line.find(". ", pos)); };
    for (std::size_t at = next(from); at != std::string::npos; at = next(from)) {
        out.push_back(line.substr(from, at + 1 - from));
        from = at + 2;
    }
    out.push_back(line.substr(from));
    return out;
}

std::vector<std::string> words(const std::string& s) {
    std::vector<std::string> out;
    std::size_t from = 0;
    for (std::size_t at = s.find(' '); at != std::string::npos; at = s.find(' ', from)) {
        if (at > from) out.push_back(s.substr(from, at - from));
        from = at + 1;
    }
    if (from < s.size()) out.push_back(s.substr(from));
    return out;
}

/// One paragraph of wrap_text: clauses packed whole, a clause longer than a line by words.
void wrap_paragraph(const std::string& para, std::size_t width, std::size_t indent, std::string& out) {
    std::string cur;
    bool first = true;
    auto room = [&] { return first ? width : width - std::min(width, indent); };
    auto flush = [&] {
        out += (first ? std::string() : std::string(indent, ' ')) + cur + "\n";
        cur.clear();
        first = false;
    };
    for (const auto& clause : clauses(para)) {
        if ((cur.empty() ? 0 : cur.size() + 1) + clause.size() <= room()) {
            cur += (cur.empty() ? "" : " ") + clause;
            continue;
        }
        if (!cur.empty()) flush();
        if (clause.size() <= room()) {
            cur = clause;
            continue;
        }
        for (const auto& w : words(clause)) {
            if (!cur.empty() && cur.size() + 1 + w.size() > room()) flush();
            cur += (cur.empty() ? "" : " ") + w;
        }
    }
    if (!cur.empty() || first) flush();
}

void print_head(const zeromem::Resolved& res, const zeromem::SpeedHardware& hw, int64_t global, bool wide) {
    using namespace zeromem;
    const EstimateInput& in = res.input;
    char head[512];
    std::snprintf(head, sizeof head, "%s (%.2f B params), %lld x %s (%lld node%s, %s), global batch %lld, seq %lld tokens, %s",
                  in.model.name.c_str(), double(in.model.params) / 1e9, (long long)in.cluster.gpus, hw.gpu_name.c_str(),
                  (long long)in.cluster.nodes, in.cluster.nodes > 1 ? "s" : "", hw.intra.name.c_str(), (long long)global,
                  (long long)in.train.seq_len, to_string(in.train.dtype));
    const std::string host = hw.host ? hw.host->name : "none given (--host), CPU Adam 1.5e9 params/s per node";
    const std::string times =
        wide ? "Times are seconds per optimizer step per GPU: compute, exposed communication, optimizer step, offload "
               "transfers (PCIe/NVMe), per-parameter overhead (hooks, bucket bookkeeping, launches per tensor/module), "
               "other (ZeRO-2/3 bookkeeping, fixed cost). * = the term rests on a calibrated or estimated constant "
               "(--format json lists them). Host: " + host + ". Memory in GiB (2^30 bytes)."
             : "Step time in seconds per optimizer step per GPU (--wide adds its terms and TFLOP/s). Host: " + host +
                   ". Memory in GiB (2^30 bytes).";
    std::printf("%s", wrap_text(head, kCompareColumns, 2).c_str());
    std::printf("%s", wrap_text(compare_settings(res), kCompareColumns, 2).c_str());
    std::printf("%s\n", wrap_text(times, kCompareColumns, 2).c_str());
}

/// One row; `wide` adds the step time's terms (a term resting on a calibrated/estimated constant ends in '*').
void print_row(const zeromem::Candidate& c, const zeromem::EstimateInput& in, const zeromem::SpeedHardware& hw,
               int width, bool wide) {
    using namespace zeromem;
    const StepTime& t = c.time;
    std::printf("%-*s %5lld x%-4lld %7s %8s %-5s %7.3f", width, c.option.label().c_str(), (long long)c.micro_batch,
                (long long)c.grad_accum, gib(c.memory.per_gpu.total).c_str(), gib(c.memory.per_node.host_memory).c_str(),
                c.fits ? (c.tight ? "tight" : "yes") : "no", t.total);
    if (wide) {
        EstimateInput ci = in;
        apply_candidate(c, ci);
        const auto notes = calibration_notes(ci, hw, c.time);
        std::printf(" %9s %9s %9s %9s %9s %9s", term_cell(t.compute, has_term(notes, "compute")).c_str(),
                    term_cell(t.exposed_comm, has_term(notes, "exposed_comm")).c_str(),
                    term_cell(t.optimizer, has_term(notes, "optimizer")).c_str(),
                    term_cell(t.offload, has_term(notes, "offload")).c_str(),
                    term_cell(t.per_param, has_term(notes, "per_param")).c_str(),
                    term_cell(t.overhead, has_term(notes, "overhead")).c_str());
    }
    std::printf(" %8.0f", t.tokens_per_s);
    if (wide) std::printf(" %7.1f", t.tflops_per_gpu);
    std::printf(" %5.1f\n", t.mfu * 100);
}

}  // namespace

std::string compare_settings(const zeromem::Resolved& res, const std::string& heading) {
    using namespace zeromem;
    const auto& in = res.input;
    const auto it = res.provenance.find("dtype");
    return heading + ": dtype " + to_string(in.train.dtype) + " (" +
           (it == res.provenance.end() ? "default" : it->second) + "); optimizer " + to_string(in.train.optimizer) +
           (in.train.optimizer_builder == OptimizerBuilder::deepspeed
                ? " built by DeepSpeed (" + deepspeed_optimizer_class(in.train.optimizer, in.train.torch_adam) + ")"
                : std::string(" built by the client (HF Trainer), DeepSpeedCPUAdam under optimizer offload")) +
           "; overlap_comm " +
           (in.zero.overlap_comm ? (*in.zero.overlap_comm ? "on" : "off") + std::string(" for every stage")
                                 : std::string("DeepSpeed's default per stage (on for stage 3, off for 0-2)")) +
           "; reduce_bucket_size " + std::to_string(in.zero.reduce_bucket_size) +
           "; stage3_gather_16bit_weights_on_model_save " +
           (in.zero.stage3_gather_16bit_weights_on_model_save ? "on" : "off") + "; attention " +
           (in.train.flash_attention ? "flash" : "eager") +
           (in.generation ? "; " + describe_generation(*in.generation, in.train.seq_len) : std::string()) +
           (in.workload && in.workload->kind != Workload::sft ? "\n" + workload_summary(*in.workload) : std::string()) +
           (res.calibration.empty() ? std::string() : "\n" + res.calibration);
}

std::string wrap_text(const std::string& text, std::size_t width, std::size_t indent) {
    std::string out;
    std::size_t from = 0;
    for (std::size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', from)) {
        wrap_paragraph(text.substr(from, at - from), width, indent, out);
        from = at + 1;
    }
    wrap_paragraph(text.substr(from), width, indent, out);
    return out;
}

void print_compare_table(const std::vector<zeromem::Candidate>& rows, const zeromem::Resolved& res,
                         const zeromem::SpeedHardware& hw, int64_t global_batch, bool wide) {
    print_head(res, hw, global_batch, wide);
    std::size_t longest = 6;  // "option"
    for (const auto& c : rows) longest = std::max(longest, c.option.label().size());
    const int width = int(longest);
    std::printf("%-*s %11s %7s %8s %-5s %7s", width, "option", "micro x acc", "GPU GiB", "host GiB", "fits", "step s");
    if (wide) std::printf(" %9s %9s %9s %9s %9s %9s", "compute", "comm", "optim", "offload", "per-param", "other");
    std::printf(" %8s", "tokens/s");
    if (wide) std::printf(" %7s", "TFLOP/s");
    std::printf(" %5s\n", "MFU%");
    for (const auto& c : rows) print_row(c, res.input, hw, width, wide);
    std::printf("\n");
    for (const auto& line : zeromem::ordering_statement(rows))
        std::printf("%s", wrap_text(line, kCompareColumns, 2).c_str());
}

}  // namespace zeromem_cli
