// The runtime's clock: the TSC, read once per burst and turned into Nanos
// since the clock's start. Pure cores never read it; they get `now`.
#pragma once

#include <rte_cycles.h>

#include "common/units.hpp"

namespace rocemu::dpdk {

class TscClock {
public:
    TscClock(uint64_t start_tsc, uint64_t hz) : start_(start_tsc), hz_(hz) {}
    static TscClock starting_now() { return TscClock(rte_rdtsc(), rte_get_tsc_hz()); }

    Nanos now() const { return to_nanos(rte_rdtsc()); }
    Nanos to_nanos(uint64_t tsc) const {
        const unsigned __int128 ns = static_cast<unsigned __int128>(tsc - start_) * 1000000000u / hz_;
        return Nanos{static_cast<int64_t>(ns)};
    }

private:
    uint64_t start_;
    uint64_t hz_;
};

}  // namespace rocemu::dpdk
