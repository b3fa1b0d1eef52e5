// The searches' independent evaluations on the machine's cores (planner_search.h for_each_index).
#include "planner_search.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <thread>

namespace zeromem::planner_detail {

namespace {

constexpr long kMaxThreads = 64;  // a larger ZEROMEM_THREADS is taken as this

// Cores to use: ZEROMEM_THREADS when it is a positive number (at most kMaxThreads), else what the machine
// reports (1 when unknown).
size_t thread_count(size_t n) {
    size_t want = std::max(1u, std::thread::hardware_concurrency());
    if (const char* v = std::getenv("ZEROMEM_THREADS")) {
        char* end = nullptr;
        const long t = std::strtol(v, &end, 10);
        if (end != v && *end == '\0' && t > 0) want = static_cast<size_t>(std::min<long>(t, kMaxThreads));
    }
    return std::min(want, n);
}

}  // namespace

void for_each_index(size_t n, const std::function<void(size_t)>& f) {
    const size_t threads = thread_count(n);
    std::vector<std::exception_ptr> errors(n);
    std::atomic<size_t> next{0};
    const auto work = [&] {
        for (size_t i = next++; i < n; i = next++) {
            try {
                f(i);
            } catch (...) {
                errors[i] = std::current_exception();
            }
        }
    };
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
}

}  // namespace zeromem::planner_detail
