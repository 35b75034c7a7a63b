// PFC the NIC sends from its receive backlog: XOFF at the threshold, refreshed
// before the pause runs out, XON below the lower threshold, 802.1Qbb on the wire.
#include <gtest/gtest.h>

#include <array>

#include "dataplane/dpdk/rx_pfc.hpp"
#include "dataplane/wire/pause.hpp"

namespace rocemu::dpdk {
namespace {

using Send = RxPfc::Send;

TEST(RxPfc, OffWhenXoffIsZero) {
    RxPfc p(RxPfcConfig{});
    EXPECT_FALSE(p.enabled());
    EXPECT_EQ(p.on_backlog(100000, Nanos{0}), Send::None);
}

TEST(RxPfc, XoffAtThresholdRefreshedAtHalfThePauseXonBelowLowMark) {
    RxPfcConfig c;
    c.xoff = 64;
    c.xon = 16;
    c.priority = 3;
    c.port_speed = BitsPerSec::gbps(100);
    RxPfc p(c);
    // 0xFFFF quanta x 512 bit times at 100 Gbit/s = 335539.2 ns, rounded up; refreshed after half.
    const Nanos half{335540 / 2};
    EXPECT_EQ(p.on_backlog(63, Nanos{1000}), Send::None);
    EXPECT_EQ(p.on_backlog(64, Nanos{2000}), Send::Xoff);
    EXPECT_TRUE(p.pausing());
    EXPECT_EQ(p.on_backlog(100, Nanos{2000} + half - Nanos{1}), Send::None);
    EXPECT_EQ(p.on_backlog(16, Nanos{2000} + half), Send::Xoff) << "still at or above XON: refresh";
    EXPECT_EQ(p.on_backlog(15, Nanos{2000} + half + Nanos{1}), Send::Xon);
    EXPECT_FALSE(p.pausing());
    EXPECT_EQ(p.on_backlog(40, Nanos{400000}), Send::None) << "between XON and XOFF stays resumed";
    EXPECT_EQ(p.on_backlog(64, Nanos{400001}), Send::Xoff);
}

// A shorter pause is refreshed at its own share, still before the peer's pause runs out.
TEST(RxPfc, ConfiguredQuantaAreSentAndRefreshedAtTheConfiguredShareOfTheirTime) {
    RxPfcConfig c;
    c.xoff = 4;
    c.xon = 1;
    c.port_speed = BitsPerSec::gbps(100);
    c.pause_quanta = 1000;  // 1000 x 512 bits at 100 Gbit/s = 5120 ns
    c.refresh_percent = 25;
    RxPfc p(c);
    EXPECT_EQ(p.refresh_interval(), Nanos{1280});
    ASSERT_EQ(p.on_backlog(4, Nanos{0}), Send::Xoff);
    EXPECT_EQ(p.on_backlog(9, Nanos{1279}), Send::None);
    EXPECT_EQ(p.on_backlog(9, Nanos{1280}), Send::Xoff);
    std::array<uint8_t, 64> f{};
    ASSERT_EQ(p.encode(Send::Xoff, wire::MacAddr{}, f), wire::kPfcFrameLen);
    wire::Pfc pfc;
    ASSERT_TRUE(wire::parse_pfc(std::span(f.data(), wire::kPfcFrameLen), pfc));
    EXPECT_EQ(pfc.quanta[3], 1000);
    wire::PfcPauseState peer;
    peer.on_pfc(pfc, Nanos{1280}, c.port_speed);
    EXPECT_TRUE(peer.paused(3, Nanos{1280} + p.refresh_interval())) << "the next refresh comes inside the pause";
    EXPECT_FALSE(peer.paused(3, Nanos{1280 + 5121}));
}

TEST(RxPfc, FramesDecodeAs8021QbbAndPauseThePeerForTheirQuanta) {
    RxPfcConfig c;
    c.xoff = 1;
    c.priority = 5;
    c.port_speed = BitsPerSec::gbps(25);
    const RxPfc p(c);
    const wire::MacAddr src{{0x02, 0, 0, 0, 0, 9}};
    std::array<uint8_t, 64> f{};
    ASSERT_EQ(p.encode(Send::Xoff, src, f), wire::kPfcFrameLen);
    wire::Pfc pfc;
    ASSERT_TRUE(wire::parse_pfc(std::span(f.data(), wire::kPfcFrameLen), pfc));
    EXPECT_EQ(pfc.class_enable, 1u << 5);
    EXPECT_EQ(pfc.quanta[5], 0xFFFF);
    EXPECT_EQ(pfc.src, src);
    wire::PfcPauseState peer;
    peer.on_pfc(pfc, Nanos{0}, c.port_speed);
    EXPECT_TRUE(peer.paused(5, Nanos{1342000}));
    EXPECT_FALSE(peer.paused(3, Nanos{1}));
    ASSERT_EQ(p.encode(Send::Xon, src, f), wire::kPfcFrameLen);
    ASSERT_TRUE(wire::parse_pfc(std::span(f.data(), wire::kPfcFrameLen), pfc));
    EXPECT_EQ(pfc.class_enable, 1u << 5);
    EXPECT_EQ(pfc.quanta[5], 0);
    peer.on_pfc(pfc, Nanos{10}, c.port_speed);
    EXPECT_FALSE(peer.paused(5, Nanos{10}));
}

}  // namespace
}  // namespace rocemu::dpdk
