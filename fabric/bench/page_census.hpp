// Which pages a span of a run touches, and which code touches each first:
// `rocemu_fabric_bench --page-census NS` (fabric/bench/README.md, "Pages a
// simulated microsecond").
//
// On a VM whose host maps guest memory with 4 KiB pages, each page a hop
// touches is a TLB entry, huge pages or not, and a second-level TLB holds
// about 1536 of them: once a fabric touches more distinct pages between two
// visits to the same node than that, its cost per packet-hop grows with its
// size (issue #8). A census protects every big private writable mapping
// (a heap segment, the frame pool, glibc's heap: 16 MiB or more, or
// [heap]), runs one window, and records each page's first touch in it (the
// page and the instruction) from the SIGSEGV that touch raises, making the
// page accessible again at once; then again for the next window. A page
// costs one fault a window, so a census is slow: a diagnostic, not a timing.
// Single-threaded: only the calling thread may touch those mappings while
// a window runs. Not in sanitizer builds (their shadow and allocator
// mappings are big and private too): page_census() throws there.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace rocemu::bench {

struct CensusResult {
    uint64_t windows = 0;
    uint64_t pages = 0;       // first touches, summed over the windows
    uint64_t huge_pages = 0;  // the 2 MiB-aligned ranges they lie in, summed over the windows
    uint64_t dropped = 0;     // first touches not recorded: a window touched more than kMaxCensusPages
    // "pages-a-window where" lines, most first: `by_code` by the touching
    // instruction ("module+0xOFFSET", for addr2line), `by_mapping` by the
    // mapping touched ("anon|[heap] lo-hi").
    std::string by_code;
    std::string by_mapping;
};

inline constexpr uint64_t kMaxCensusPages = uint64_t{1} << 22;  // a window's, at most

// Runs `run_window(i)` for i in [0, windows) under the census. Throws
// std::runtime_error when it cannot (a sanitizer build, mprotect refused).
CensusResult page_census(uint64_t windows, const std::function<void(uint64_t)>& run_window);

}  // namespace rocemu::bench
