// --format csv and md for compare, plan, fit and check: one table per
// answer, each number with its unit in the column name (GiB = 2^30 bytes).
#pragma once

#include <string>
#include <vector>

namespace zeromem_cli {

struct Table {
    std::vector<std::string> header;
    std::vector<std::vector<std::string>> rows;
};

/// `t` as RFC 4180 CSV (`format` "csv") or a Markdown table ("md").
std::string render_tabular(const Table& t, const std::string& format);

/// true for the formats render_tabular writes.
bool tabular_format(const std::string& format);

}  // namespace zeromem_cli
