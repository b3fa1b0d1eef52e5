// --format csv and md (tabular_output.h).
#include "tabular_output.h"

namespace zeromem_cli {

namespace {

std::string csv_cell(const std::string& v) {
    if (v.find_first_of(",\"\n\r") == std::string::npos) return v;
    std::string out = "\"";
    for (char c : v) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
}

std::string md_cell(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '|') out += "\\|";
        else if (c == '\n') out += ' ';
        else out += c;
    }
    return out;
}

}  // namespace

bool tabular_format(const std::string& format) { return format == "csv" || format == "md"; }

std::string render_tabular(const Table& t, const std::string& format) {
    const bool md = format == "md";
    auto line = [&](const std::vector<std::string>& cells) {
        std::string out = md ? "| " : "";
        for (std::size_t i = 0; i < cells.size(); ++i)
            out += (i ? (md ? " | " : ",") : "") + (md ? md_cell(cells[i]) : csv_cell(cells[i]));
        return out + (md ? " |\n" : "\n");
    };
    std::string out = line(t.header);
    if (md) {
        out += "|";
        for (std::size_t i = 0; i < t.header.size(); ++i) out += "---|";
        out += "\n";
    }
    for (const auto& r : t.rows) out += line(r);
    return out;
}

}  // namespace zeromem_cli
