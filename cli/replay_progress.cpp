// The progress line of compare, plan and fit (replay_progress.h).
#include "replay_progress.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
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
std::mutex g_progress_mutex;  // compare evaluates its options on several threads

}  // namespace

void show_replay_progress(zeromem::EstimateInput& in, const char* cmd) {
    if (!in.residual.fragmentation_provider || !isatty(STDERR_FILENO)) return;
    g_progress = ReplayProgress{};
    g_progress.cmd = cmd;
    auto inner = in.residual.fragmentation_provider;
    in.residual.fragmentation_provider = [inner](const zeromem::EstimateInput& x) {
        const auto bytes = inner(x);
        const std::lock_guard<std::mutex> lock(g_progress_mutex);
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
    const std::lock_guard<std::mutex> lock(g_progress_mutex);
    if (g_progress.shown) std::fputs("\r\033[K", stderr);
    g_progress.shown = false;
}

struct ElapsedProgress::State {
    std::mutex m;
    std::condition_variable cv;
    bool done = false, shown = false;
    std::thread t;
};

ElapsedProgress::ElapsedProgress(const char* what) {
    if (!isatty(STDERR_FILENO)) return;
    state_ = new State;
    State* st = state_;
    st->t = std::thread([st, what] {
        const auto start = std::chrono::steady_clock::now();
        std::unique_lock<std::mutex> lock(st->m);
        if (st->cv.wait_for(lock, std::chrono::seconds(1), [st] { return st->done; })) return;
        do {
            st->shown = true;
            std::fprintf(stderr, "\rzeromem: %s, %.0f s\033[K", what,
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
            std::fflush(stderr);
        } while (!st->cv.wait_for(lock, std::chrono::milliseconds(500), [st] { return st->done; }));
    });
}

ElapsedProgress::~ElapsedProgress() {
    if (!state_) return;
    {
        std::lock_guard<std::mutex> lock(state_->m);
        state_->done = true;
    }
    state_->cv.notify_all();
    state_->t.join();
    if (state_->shown) std::fputs("\r\033[K", stderr);
    delete state_;
}

}  // namespace zeromem_cli
