// A progress line on stderr while compare, plan or fit estimate their
// options with the replayed fragmentation allowance.
#pragma once

#include "zeromem/estimate.h"

namespace zeromem_cli {

/// Wraps in's fragmentation provider (when there is one and stderr is a
/// terminal): once a second has passed, "zeromem: <cmd>: N estimates with
/// the replayed allowance, T s" on stderr, rewritten in place at most 5
/// times a second. Redirected or captured stderr gets nothing.
void show_replay_progress(zeromem::EstimateInput& in, const char* cmd);
/// Erases the line, if one was shown (call before printing the results).
void end_replay_progress();

/// While it lives, and only when stderr is a terminal: once a second has
/// passed, "zeromem: <what>, T s" on stderr, rewritten twice a second from a
/// thread of its own; erased when it goes (simulate's one long replay).
class ElapsedProgress {
public:
    explicit ElapsedProgress(const char* what);
    ~ElapsedProgress();
    ElapsedProgress(const ElapsedProgress&) = delete;
    ElapsedProgress& operator=(const ElapsedProgress&) = delete;

private:
    struct State;
    State* state_ = nullptr;
};

}  // namespace zeromem_cli
