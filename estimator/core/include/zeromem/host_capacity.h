#pragma once
// The host RAM a training job can use: the installed size per node minus
// what the kernel and the OS keep (host_os_reserve).
#include <cstdint>
#include <string>

namespace zeromem {

/// The parts of host_os_reserve for a node with `installed` bytes of RAM.
struct HostReserve {
    /// struct page memmap: 64 B per 4 KiB page = installed / 64, reserved at
    /// boot and not in MemTotal (Documentation/filesystems/proc.rst: "physical
    /// RAM minus a few reserved bits and the kernel binary code").
    uint64_t memmap = 0;
    /// vm.min_free_kbytes, the min watermark user space cannot allocate below
    /// (mm/page_alloc.c calculate_min_free_kbytes: int_sqrt(KiB x 16) clamped
    /// to [128, 262144] KiB, over MemTotal).
    uint64_t min_watermark = 0;
    /// System daemons and kernel slab (est.).
    uint64_t os_baseline = 0;
    /// DataLoader worker processes: none at the HF Trainer's default
    /// dataloader_num_workers = 0.
    uint64_t loader_workers = 0;
    uint64_t total() const { return memmap + min_watermark + os_baseline + loader_workers; }
};

/// host_os_reserve of a node with `installed` bytes of RAM (DIMM size).
HostReserve host_os_reserve(uint64_t installed);

/// One line: how host_os_reserve is derived, with its sources.
std::string host_os_reserve_text(const HostReserve& r);

}  // namespace zeromem
