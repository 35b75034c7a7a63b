// TscClock turns cycles into nanoseconds without a divide; it must give the
// divide's result exactly.
#include <gtest/gtest.h>

#include <random>

#include "dataplane/dpdk/clock.hpp"

namespace rocemu::dpdk {
namespace {

int64_t divided(uint64_t cycles, uint64_t hz) {
    return static_cast<int64_t>(static_cast<unsigned __int128>(cycles) * 1000000000u / hz);
}

TEST(DpdkTscClock, ToNanosEqualsThe128BitDivide) {
    // Round and odd rates, below and above 1 GHz (a whole part of 0 and > 0).
    const uint64_t rates[] = {1000000000, 2099999999, 2100000007, 2445417000, 3000000000, 4999999937, 999999937, 25000000};
    std::mt19937_64 rng(7);
    for (const uint64_t hz : rates) {
        // Where the quotient still fits Nanos, and below 2^63 cycles (more is
        // a count behind the start, below).
        const auto limit = static_cast<uint64_t>(std::min<unsigned __int128>(
            static_cast<unsigned __int128>(INT64_MAX) * hz / 1000000000u, INT64_MAX));
        const uint64_t start = rng();  // the count wraps between start and now
        const TscClock clock(start, hz);
        auto check = [&](uint64_t d) {
            ASSERT_EQ(clock.to_nanos(start + d).v, divided(d, hz)) << "hz " << hz << " cycles " << d;
        };
        for (uint64_t d = 0; d < 100000; ++d) check(d);
        // Either side of whole seconds, where the quotient is exact.
        for (uint64_t k = 1; k < 1000000; k *= 7) {
            for (uint64_t e = 0; e < 3; ++e) {
                check(k * hz + e);
                check(k * hz - e);
            }
        }
        for (int i = 0; i < 200000; ++i) check(rng() % limit);
        check(limit);
        // A count read on a CPU whose TSC is behind the one that started the
        // clock: the start, not a wrapped difference near 2^64.
        for (const uint64_t behind : {uint64_t{1}, uint64_t{1000}, hz})
            EXPECT_EQ(clock.to_nanos(start - behind).v, 0) << "hz " << hz << " behind " << behind;
    }
}

}  // namespace
}  // namespace rocemu::dpdk
