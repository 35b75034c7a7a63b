#include "switch/exact_div.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "common/rng.hpp"

namespace rocemu::sw {
namespace {

// Every port speed a config allows (1 Mb/s to 800 Gb/s, in Mb/s steps) and
// awkward divisors, against the hardware divide, at the edges of the exact
// range and on random numerators.
TEST(ExactDiv, MatchesDivisionBelowTwoToThe48) {
    Rng rng(7);
    std::vector<uint64_t> divisors{1, 2, 3, 7, 1000, 999999937, (1ull << 40) - 1, (1ull << 40) + 1};
    for (uint64_t mbps = 1; mbps <= 800000; mbps += 997) divisors.push_back(mbps * 1000000);
    divisors.push_back(800000ull * 1000000);
    constexpr uint64_t kTop = 1ull << ExactDiv::kNumeratorBits;
    for (const uint64_t d : divisors) {
        const ExactDiv div(d);
        for (const uint64_t n : {uint64_t{0}, uint64_t{1}, d - 1, d, d + 1, kTop - 1, kTop - d, (kTop / d) * d,
                                 (kTop / d) * d - 1}) {
            if (n >= kTop) continue;
            ASSERT_EQ(div.floor(n), n / d) << n << " / " << d;
        }
        for (int i = 0; i < 2000; ++i) {
            const uint64_t n = rng.below(kTop);
            ASSERT_EQ(div.floor(n), n / d) << n << " / " << d;
            ASSERT_EQ(div.ceil(n), (n + d - 1) / d) << n << " / " << d;
        }
    }
}

TEST(ExactDiv, FallsBackAboveTheExactRange) {
    const ExactDiv div(100000000000ull);
    for (const uint64_t n : {1ull << 48, (1ull << 63) + 12345, ~0ull - 200000000000ull})
        EXPECT_EQ(div.floor(n), n / 100000000000ull);
}

}  // namespace
}  // namespace rocemu::sw
