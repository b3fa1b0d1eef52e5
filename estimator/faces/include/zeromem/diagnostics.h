// The lines a face prints on stderr beside an answer: every warning, and the
// notes (inputs that leave the answer unchanged, flags a subcommand does not
// use, where the software stack came from) only when asked for.
#pragma once

#include <string>
#include <vector>

namespace zeromem {

/// "zeromem: warning: W" for each warning, then "zeromem: note: N" for each
/// note when `verbose`; otherwise one line counting the notes left out and
/// naming `show_switch`, the face's switch that shows them ("zeromem: 6 notes
/// not shown (--verbose shows them)"), and none when there are no notes.
/// Each line ends in a newline; "" when there is nothing to say.
std::string render_diagnostics(const std::vector<std::string>& warnings, const std::vector<std::string>& notes,
                               bool verbose, const std::string& show_switch);

}  // namespace zeromem
