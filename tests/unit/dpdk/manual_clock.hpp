// A TscClock that a test moves forward by hand: the loops that read it see
// time jump, so a test of a timeout neither sleeps nor depends on speed.
#pragma once

#include <rte_cycles.h>

#include "dataplane/dpdk/clock.hpp"

namespace rocemu::dpdk::test {

struct ManualTscClock {
    uint64_t hz = rte_get_tsc_hz();
    uint64_t tsc0 = rte_rdtsc();
    TscClock clock{tsc0, hz};

    // Time as read from now on is `by` later than the TSC says.
    void advance(Nanos by) {
        tsc0 -= static_cast<uint64_t>(static_cast<unsigned __int128>(by.v) * hz / 1000000000u);
        clock = TscClock(tsc0, hz);
    }
};

}  // namespace rocemu::dpdk::test
