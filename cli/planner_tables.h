// compare, plan and fit answers as tables for --format csv and md
// (tabular_output.h): one row per option, plan step or fit row.
#pragma once

#include "tabular_output.h"

#include "zeromem/planner.h"

#include <functional>
#include <string>
#include <vector>

namespace zeromem_cli {

Table compare_table_rows(const std::vector<zeromem::Candidate>& rows);
Table plan_table_rows(const zeromem::PlanResult& r);
/// `largest`: the largest model per option (else the fewest GPUs); `note`: each row's reason, as the table shows it.
Table fit_table_rows(const std::vector<zeromem::FitRow>& rows, bool largest,
                     const std::function<std::string(const zeromem::FitRow&)>& note);

}  // namespace zeromem_cli
