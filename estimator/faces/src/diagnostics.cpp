#include "zeromem/diagnostics.h"

namespace zeromem {

std::string render_diagnostics(const std::vector<std::string>& warnings, const std::vector<std::string>& notes,
                               bool verbose, const std::string& show_switch) {
    std::string out;
    for (const auto& w : warnings) out += "zeromem: warning: " + w + "\n";
    if (verbose) {
        for (const auto& n : notes) out += "zeromem: note: " + n + "\n";
    } else if (!notes.empty()) {
        out += "zeromem: " + std::to_string(notes.size()) + (notes.size() == 1 ? " note" : " notes") + " not shown (" +
               show_switch + " shows " + (notes.size() == 1 ? "it" : "them") + ")\n";
    }
    return out;
}

}  // namespace zeromem
