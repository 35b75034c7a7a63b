#include <gtest/gtest.h>

#include "common/units.hpp"

namespace rocemu {
namespace {

TEST(Units, PsnComparesAcrossTheWrap) {
    const Psn top{0xFFFFFF};
    const Psn zero{0};
    EXPECT_LT(top, zero);
    EXPECT_GT(zero, top);
    EXPECT_EQ(top + 1, zero);
    EXPECT_EQ(zero - 1, top);
    EXPECT_EQ(Psn::diff(zero, top), 1);
    EXPECT_EQ(Psn::diff(top, zero), -1);
    EXPECT_EQ(Psn::diff(Psn{0x7FFFFF}, Psn{0}), 0x7FFFFF);
    EXPECT_EQ(Psn::diff(Psn{0x800000}, Psn{0}), -0x800000);
    Psn p{0xFFFFFE};
    ++p;
    ++p;
    EXPECT_EQ(p.value(), 0u);
}

TEST(Units, QpnIs24Bits) { EXPECT_EQ(Qpn{0x1234567}.v, 0x234567u); }

TEST(Units, SerialisationTime) {
    EXPECT_EQ(BitsPerSec::gbps(100).serialise(Bytes{1250}).v, 100);
    EXPECT_EQ(BitsPerSec::gbps(400).serialise(Bytes{64}).v, 2);  // 1.28 ns rounds up
    EXPECT_EQ(BitsPerSec::gbps(40).bytes_in(Nanos{1000}).v, 5000u);
    EXPECT_EQ(BitsPerSec{0}.serialise(Bytes{1}), Nanos::max());
}

}  // namespace
}  // namespace rocemu
