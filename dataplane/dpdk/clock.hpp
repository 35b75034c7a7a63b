// The runtime's clock: the TSC, read once per burst and turned into Nanos
// since the clock's start. Pure cores never read it; they get `now`.
#pragma once

#include <rte_cycles.h>

#include "common/units.hpp"

namespace rocemu::dpdk {

// Loops convert once per turn, and the plain 128-bit divide is a __udivti3
// call of around 100 cycles that showed in their profiles. So 1e9/hz is kept
// as a whole part and a 64-bit binary fraction: their product with the cycle
// count is the exact quotient or one short of it, and a remainder check
// settles which. The result equals the divide for every count.
class TscClock {
public:
    TscClock(uint64_t start_tsc, uint64_t hz)
        : start_(start_tsc), hz_(hz), whole_(kNsPerS / hz),
          frac_(static_cast<uint64_t>((static_cast<unsigned __int128>(kNsPerS % hz) << 64) / hz)) {}
    static TscClock starting_now() { return TscClock(rte_rdtsc(), rte_get_tsc_hz()); }

    Nanos now() const { return to_nanos(rte_rdtsc()); }
    Nanos to_nanos(uint64_t tsc) const {
        const uint64_t d = tsc - start_;
        // A count behind the start (read on a CPU whose TSC lags) is the
        // start, not a wrapped difference of centuries: differences of 2^63
        // cycles or more (58 years at 5 GHz) are taken as behind.
        if (static_cast<int64_t>(d) < 0) return Nanos{0};
        uint64_t ns = d * whole_ + static_cast<uint64_t>((static_cast<unsigned __int128>(d) * frac_) >> 64);
        // d*1e9 - ns*hz is below 2*hz, so its low 64 bits are all of it.
        ns += d * kNsPerS - ns * hz_ >= hz_;
        return Nanos{static_cast<int64_t>(ns)};
    }

private:
    static constexpr uint64_t kNsPerS = 1000000000u;
    uint64_t start_;
    uint64_t hz_;
    uint64_t whole_;  // 1e9 / hz
    uint64_t frac_;   // (1e9 % hz) / hz, times 2^64
};

}  // namespace rocemu::dpdk
