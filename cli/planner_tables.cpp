// compare, plan and fit as tables (planner_tables.h). GiB = 2^30 bytes.
#include "planner_tables.h"

#include "zeromem/util.h"

#include <cstdio>

namespace zeromem_cli {

namespace {

std::string seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", s);
    return buf;
}

std::string whole(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
}

std::string gib_cell(uint64_t bytes) { return zeromem::format_gib(double(bytes)); }

std::string verdict(const zeromem::Candidate& c) { return !c.fits ? "oom" : c.tight ? "tight" : "fits"; }

std::vector<std::string> candidate_cells(const zeromem::Candidate& c) {
    using namespace zeromem;
    return {c.option.label(), to_string(c.option.checkpointing), std::to_string(c.micro_batch),
            std::to_string(c.grad_accum), c.overlap_comm ? "on" : "off", std::to_string(c.reduce_bucket_size),
            gib_cell(c.memory.per_gpu.total), verdict(c), gib_cell(c.memory.per_node.host_memory),
            gib_cell(c.memory.per_node.nvme), seconds(c.time.total), whole(c.time.tokens_per_s)};
}

const std::vector<std::string> kCandidateHeader = {
    "option", "gradient_checkpointing", "micro_batch", "grad_accum", "overlap_comm", "reduce_bucket_size",
    "per_gpu_GiB", "gpu_verdict", "host_per_node_GiB", "nvme_per_node_GiB", "step_s", "tokens_per_s"};

}  // namespace

Table compare_table_rows(const std::vector<zeromem::Candidate>& rows) {
    Table t{kCandidateHeader, {}};
    for (const auto& c : rows) t.rows.push_back(candidate_cells(c));
    return t;
}

Table plan_table_rows(const zeromem::PlanResult& r) {
    Table t;
    t.header = {"recipe_step", "action", "outcome"};
    for (const auto& h : kCandidateHeader) t.header.push_back(h);
    const std::vector<std::string> none(kCandidateHeader.size());
    for (const auto& s : r.steps) {
        std::vector<std::string> row = {std::to_string(s.recipe_step), s.action, s.outcome};
        const auto cells = s.candidate ? candidate_cells(*s.candidate) : none;
        row.insert(row.end(), cells.begin(), cells.end());
        t.rows.push_back(row);
    }
    if (r.winner) {
        std::vector<std::string> row = {"winner", "what plan writes (--emit)",
                                        r.winner_replayed ? "replayed through the simulator: fits" : "closed forms"};
        const auto cells = candidate_cells(*r.winner);
        row.insert(row.end(), cells.begin(), cells.end());
        t.rows.push_back(row);
    }
    return t;
}

Table fit_table_rows(const std::vector<zeromem::FitRow>& rows, bool largest,
                     const std::function<std::string(const zeromem::FitRow&)>& note) {
    Table t;
    t.header = {"option", largest ? "max_params" : "min_gpus", "per_gpu_GiB", "verdict",
                largest ? "max_params_with_margin" : "min_gpus_with_margin", "unbounded", "note"};
    for (const auto& r : rows)
        t.rows.push_back({r.option.label(), r.value ? std::to_string(r.value) : "",
                          r.value ? gib_cell(r.per_gpu_total) : "", !r.value ? "" : r.tight ? "tight" : "fits",
                          r.with_margin ? std::to_string(r.with_margin) : "", r.unbounded ? "true" : "false", note(r)});
    return t;
}

}  // namespace zeromem_cli
