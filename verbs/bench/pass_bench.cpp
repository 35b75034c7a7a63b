// rocemu_pass_bench: what one pass over a 4 KiB RDMA WRITE frame costs, the
// unit in which the memif path's floor is counted (dataplane/dpdk/README.md,
// "The floor"). A frame is 4170 B (Ethernet to ICRC); each pass reads the
// frame once:
//   memcpy          what the memif PMD does on each side (and all that
//                   testpmd txonly -> rxonly does to a frame's payload);
//   CRC             the ICRC alone (ISA-L, as the engine's small frames);
//   copy+CRC        the engine's fused pass (crc32_copy), requester side;
//   place+CRC       the same with streaming stores, responder side
//                   (crc32_place: WRITE MIDDLE and LAST);
//   stream          the streaming copy alone (stream_copy: a WRITE ONLY
//                   or FIRST, placed after its ICRC was checked);
// over frames cycled through an 8 MiB ring (1024 x 8 KiB, the size of the
// bench's memif rings, so the frames come from the last-level cache as in
// the two-process run), through a 128 MiB one (cold: source and destination
// in memory, as a large MR) and over one frame (L1), in CPU time of the thread
// (time the scheduler gives other processes is not counted; their cache and
// memory traffic still is). Not part of ctest.
//
// Usage: rocemu_pass_bench [rounds]   (default 3; each line gives the range)
#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dataplane/wire/crc32.hpp"

namespace {

double thread_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}
constexpr size_t kFrame = 4170, kSlot = 8192, kSlots = 1024, kColdSlots = 16384;
constexpr size_t kFramesPerRound = 1u << 20;

struct Range {
    double lo = 1e300, hi = 0;
    void add(double v) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
};

// CPU ns per frame of `pass(src, dst)` over `slots` slots of each buffer.
template <typename Pass>
double ns_per_frame(std::vector<uint8_t>& src, std::vector<uint8_t>& dst, size_t slots, Pass&& pass) {
    const double t0 = thread_ns();
    for (size_t i = 0; i < kFramesPerRound; ++i) {
        const size_t at = (i % slots) * kSlot;
        pass(src.data() + at, dst.data() + at);
    }
    return (thread_ns() - t0) / kFramesPerRound;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace rocemu::wire;
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
    if (rounds < 1) {
        fmt::print(stderr, "usage: rocemu_pass_bench [rounds >= 1]\n");
        return 2;
    }
    std::vector<uint8_t> src(kSlot * kColdSlots, 1), dst(kSlot * kColdSlots, 2);
    volatile uint32_t sink = 0;  // keeps the CRCs computed
    struct Row {
        const char* name;
        void (*pass)(const uint8_t*, uint8_t*, volatile uint32_t&);
    };
    const Row rows[] = {
        {"memcpy", [](const uint8_t* s, uint8_t* d, volatile uint32_t&) { std::memcpy(d, s, kFrame); }},
        {"CRC", [](const uint8_t* s, uint8_t*, volatile uint32_t& k) { k = crc32_update(k, s, kFrame); }},
        {"copy+CRC", [](const uint8_t* s, uint8_t* d, volatile uint32_t& k) {
             k = crc32_copy(k, d, s, kFrame, s + kFrame);
         }},
        {"place+CRC", [](const uint8_t* s, uint8_t* d, volatile uint32_t& k) { k = crc32_place(k, d, s, kFrame); }},
        {"stream", [](const uint8_t* s, uint8_t* d, volatile uint32_t&) { stream_copy(d, s, kFrame); }},
    };
    fmt::print("one pass over a {} B frame, CPU ns per frame (Gbit/s of frame), {} rounds of {} frames\n", kFrame, rounds,
               kFramesPerRound);
    fmt::print("{:<10} {:>28} {:>28} {:>28}\n", "pass", "8 MiB ring (LLC)", "128 MiB ring (cold)", "one frame (L1)");
    for (const Row& r : rows) {
        Range ring, cold, hot;
        for (int k = 0; k < rounds; ++k) {
            auto pass = [&](const uint8_t* s, uint8_t* d) { r.pass(s, d, sink); };
            ring.add(ns_per_frame(src, dst, kSlots, pass));
            cold.add(ns_per_frame(src, dst, kColdSlots, pass));
            hot.add(ns_per_frame(src, dst, 1, pass));
        }
        auto gbps = [](double ns) { return kFrame * 8 / ns; };
        auto col = [&](const Range& x) {
            return fmt::format("{:>7.0f}-{:<5.0f} ({:5.1f}-{:5.1f})", x.lo, x.hi, gbps(x.hi), gbps(x.lo));
        };
        fmt::print("{:<10} {} {} {}\n", r.name, col(ring), col(cold), col(hot));
    }
    return 0;
}
