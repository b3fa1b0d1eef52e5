// compare's table: the head lines, one row per option and the ordering statement.
#pragma once

#include "zeromem/planner.h"
#include "zeromem/request.h"
#include "zeromem/speed.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zeromem_cli {

/// The columns a terminal takes: every line of compare's default table and its head wraps to it.
constexpr std::size_t kCompareColumns = 120;

/// What decides compare's and plan's numbers besides the head line: where the dtype came from, the
/// optimizer implementation, overlap_comm per stage, the reduce bucket, the save-time gather, the
/// attention kind (and the generation and workload, when given). One line, "<heading>: ...".
std::string compare_settings(const zeromem::Resolved& res, const std::string& heading = "Settings");

/// `text` broken at spaces into lines of at most `width` columns, each after the first indented by
/// `indent` spaces; a word longer than a line stands alone. Newlines in `text` start a new line.
std::string wrap_text(const std::string& text, std::size_t width, std::size_t indent);

/// Prints compare's table for `rows` (compare_options' result, in that order) on stdout. Default: option,
/// micro batch x accumulation, GPU and host memory, the verdict, step time, tokens/s and MFU, every line
/// within kCompareColumns. `wide`: also the step time's terms (compute, exposed communication, optimizer,
/// offload, per-parameter, other; '*' where a term rests on a calibrated or estimated constant) and
/// TFLOP/s, one row per option on one line whatever its length.
void print_compare_table(const std::vector<zeromem::Candidate>& rows, const zeromem::Resolved& res,
                         const zeromem::SpeedHardware& hw, int64_t global_batch, bool wide);

}  // namespace zeromem_cli
