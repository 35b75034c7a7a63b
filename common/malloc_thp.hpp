// Heap memory on transparent huge pages. glibc's malloc asks the kernel for
// them only when its tunable glibc.malloc.hugetlb=1 says so (glibc 2.35 and
// later; the kernel's THP mode "madvise", Debian's default, then backs the
// heap with 2 MiB pages), and tunables are read once, when the process
// starts. A virtual-time fabric of hundreds of RC NICs keeps their engines'
// state in thousands of heap pages, and with 4 KiB pages nearly every NIC
// the simulation turns to costs a TLB miss: 6 % of an RC packet-hop at 256
// hosts (fabric/bench/README.md). So rocemu and its fabric bench start
// themselves again, once, with the tunable added.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>

#include <unistd.h>

#include "common/sanitizer.hpp"

namespace rocemu {

inline constexpr std::string_view kMallocThpTunable = "glibc.malloc.hugetlb";

// Whether the tunables string `cur` (GLIBC_TUNABLES, maybe null) names
// glibc.malloc.hugetlb (any value).
inline bool malloc_thp_chosen(const char* cur) {
    return cur != nullptr && std::string_view(cur).find(kMallocThpTunable) != std::string_view::npos;
}

// Call first thing in main(). Unless GLIBC_TUNABLES names the tunable
// already (this is the second start, or the user chose: hugetlb=0 keeps 4 KiB
// pages and starts nothing again, as under valgrind, whose exec of
// /proc/self/exe would leave the tool), adds glibc.malloc.hugetlb=1 and
// executes the same program with the same arguments (same PID). Returns if
// it did not restart, or the exec failed (the process goes on as it is).
inline void restart_with_malloc_thp(char** argv) {
#ifdef ROCEMU_SANITIZED_HEAP
    (void)argv;  // the sanitizer's allocator ignores glibc's tunables
#else
    const char* cur = std::getenv("GLIBC_TUNABLES");
    if (malloc_thp_chosen(cur)) return;
    std::string v(kMallocThpTunable);
    v += "=1";
    if (cur != nullptr && *cur != '\0') v = std::string(cur) + ":" + v;
    if (setenv("GLIBC_TUNABLES", v.c_str(), 1) != 0) return;
    execv("/proc/self/exe", argv);
#endif
}

}  // namespace rocemu
