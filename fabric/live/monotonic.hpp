// CLOCK_MONOTONIC for the live fabric's processes: the one clock the
// launcher, the hosts node and the switch nodes of one machine can compare
// (a switch snapshot's at_ns against the moment the hosts node asked), not
// comparable across machines. Free of DPDK (the TSC clock needs the EAL).
#pragma once

#include <cstdint>
#include <ctime>

namespace rocemu::fabric::live {

inline int64_t monotonic_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// CLOCK_REALTIME, the clock of the time stamps in a live capture (capture.cpp):
// what a switch node tells in its snapshot, so that the hosts node can say
// how far another machine's clock is from its own.
inline int64_t realtime_ns() {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

}  // namespace rocemu::fabric::live
