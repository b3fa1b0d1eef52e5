// The progress line of compare, plan and fit (replay_progress.h).
#include "replay_progress.h"

#include <chrono>
#include <cstdio>
#include <unistd.h>

namespace zeromem_cli {

namespace {

/// A progress line on stderr while compare, plan or fit replay their
/// options (qwen3-30b-a3b's fit takes seconds): once a second has passed,
/// "zeromem: <cmd>: N estimates with the replayed allowance, T s" rewritten in place at most 5
/// times a second, and erased before the results print. Only when stderr is
/// a terminal, so redirected and captured outputs are unchanged.
struct ReplayProgress {
    const char* cmd = "";
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), last{};
    int calls = 0;  ///< estimates that asked for the replayed allowance
    bool shown = false;
};
ReplayProgress g_progress;

}  // namespace

void show_replay_progress(zeromem::EstimateInput& in, const char* cmd) {
    if (!in.residual.fragmentation_provider || !isatty(STDERR_FILENO)) return;
    g_progress = ReplayProgress{};
    g_progress.cmd = cmd;
    auto inner = in.residual.fragmentation_provider;
    in.residual.fragmentation_provider = [inner](const zeromem::EstimateInput& x) {
        const auto bytes = inner(x);
        ReplayProgress& p = g_progress;
        ++p.calls;
        const auto now = std::chrono::steady_clock::now();
        if (now - p.start >= std::chrono::seconds(1) && now - p.last >= std::chrono::milliseconds(200)) {
            p.last = now;
            p.shown = true;
            std::fprintf(stderr, "\rzeromem: %s: %d estimates with the replayed allowance, %.0f s\033[K", p.cmd, p.calls,
                         std::chrono::duration<double>(now - p.start).count());
            std::fflush(stderr);
        }
        return bytes;
    };
}

void end_replay_progress() {
    if (g_progress.shown) std::fputs("\r\033[K", stderr);
    g_progress.shown = false;
}

}  // namespace zeromem_cli
