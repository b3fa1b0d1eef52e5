// One line of --explain, the type every part's terms are reported in.
#pragma once

#include <cstdint>
#include <string>

namespace zeromem {

/// One line of --explain: a component, its formula, the formula with
/// numbers substituted, the result and the source of the formula.
struct ExplainTerm {
    std::string component;
    std::string formula;
    std::string substituted;
    uint64_t bytes = 0;
    std::string source;
};

}  // namespace zeromem
