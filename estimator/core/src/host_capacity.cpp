#include "zeromem/host_capacity.h"

#include "zeromem/util.h"

#include <algorithm>

namespace zeromem {

namespace {

constexpr uint64_t kGiB = 1ull << 30;
// System daemons (systemd, journald, sshd, the NVIDIA persistence daemon) and
// the kernel's own slab and page tables on an idle node: an estimate, not a
// measured public figure; --host-reserve replaces the whole reserve.
constexpr uint64_t kOsBaseline = 1 * kGiB;

// floor(sqrt(v)), as the kernel's int_sqrt.
uint64_t int_sqrt(uint64_t v) {
    uint64_t lo = 0, hi = std::min<uint64_t>(v, 1ull << 32);
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo + 1) / 2;
        if (mid <= v / mid) lo = mid; else hi = mid - 1;
    }
    return lo;
}

}  // namespace

HostReserve host_os_reserve(uint64_t installed) {
    HostReserve r;
    r.memmap = installed / 64;  // sizeof(struct page) 64 B per 4096 B page
    const uint64_t mem_total_kib = (installed - r.memmap) / 1024;
    r.min_watermark = std::clamp<uint64_t>(int_sqrt(mem_total_kib * 16), 128, 262144) * 1024;
    r.os_baseline = kOsBaseline;
    r.loader_workers = 0;
    return r;
}

std::string host_os_reserve_text(const HostReserve& r) {
    return format_gib(double(r.total())) + " GiB = struct page memmap " + format_gib(double(r.memmap)) +
           " GiB (64 B per 4 KiB page, 1/64 of the installed RAM, not in MemTotal: "
           "https://www.linux.com/news/minimizing-struct-page-overhead-2/, kernel "
           "Documentation/filesystems/proc.rst MemTotal) + min watermark " +
           format_gib(double(r.min_watermark)) +
           " GiB (vm.min_free_kbytes = int_sqrt(MemTotal KiB x 16), at most 256 MiB, mm/page_alloc.c "
           "calculate_min_free_kbytes) + OS baseline " +
           format_gib(double(r.os_baseline)) +
           " GiB (system daemons and kernel slab, est.) + DataLoader workers 0 (the HF Trainer's "
           "dataloader_num_workers defaults to 0); --host-reserve SIZE replaces it (0 when --host-memory is "
           "what `free` shows available)";
}

}  // namespace zeromem
