// How the live fabric slows a topology down: speeds divided, delays and
// switch timers multiplied, headroom raised for ring cables, RC timeout
// lengthened. No DPDK ports are needed.
#include <gtest/gtest.h>

#include <stdexcept>

#include "fabric/live/live.hpp"

namespace rocemu::fabric::live {
namespace {

Topology default_topology() {
    const ConfigResult r = default_fabric_config();
    EXPECT_TRUE(r.config) << r.error;
    return generate(*r.config);
}

TEST(FabricLiveScale, DefaultScaleBringsHostLinksToOneCoresBudget) {
    const Topology t = default_topology();
    ASSERT_EQ(t.nic_count(), 8u);
    // 8 host links of 100 Gbit/s over the 4 Gbit/s budget.
    EXPECT_DOUBLE_EQ(default_scale(t), 200.0);
}

TEST(FabricLiveScale, SpeedsDivideDelaysAndTimersMultiply) {
    const Topology t = default_topology();
    const Topology s = scale_topology(t, 200);
    EXPECT_EQ(s.cfg.host_link.speed.v, 500000000u);
    EXPECT_EQ(s.cfg.host_link.delay.v, 500 * 200);
    EXPECT_EQ(s.cfg.fabric_link.delay.v, 1000 * 200);
    ASSERT_EQ(s.links.size(), t.links.size());
    for (size_t i = 0; i < s.links.size(); ++i) {
        EXPECT_EQ(s.links[i].cls.speed.v * 200, t.links[i].cls.speed.v) << s.links[i].name;
        EXPECT_EQ(s.links[i].cls.delay.v, t.links[i].cls.delay.v * 200) << s.links[i].name;
    }
    for (size_t w = 0; w < s.switches.size(); ++w) {
        const sw::SwitchConfig& a = t.switches[w].cfg;
        const sw::SwitchConfig& b = s.switches[w].cfg;
        for (size_t p = 0; p < a.ports.size(); ++p) {
            EXPECT_EQ(b.ports[p].speed.v * 200, a.ports[p].speed.v);
            EXPECT_EQ(b.ports[p].propagation_delay.v, a.ports[p].propagation_delay.v * 200);
        }
        EXPECT_EQ(b.pfc_wd.detection_time.v, a.pfc_wd.detection_time.v * 200);
        EXPECT_EQ(b.pfc_wd.restoration_time.v, a.pfc_wd.restoration_time.v * 200);
        EXPECT_EQ(b.routing.flowlet_gap.v, a.routing.flowlet_gap.v * 200);
        // Two bursts of 32 NIC-MTU frames, more than lossless-100g's 160272 B.
        EXPECT_EQ(b.pg_lossless.xoff.v, 64u * (4200 + 18));
        EXPECT_EQ(b.pool_size.v, a.pool_size.v);
    }
}

TEST(FabricLiveScale, DcqcnRatesDivideAndItsTimersMultiply) {
    const Topology t = default_topology();
    const Topology s = scale_topology(t, 200);
    const cc::DcqcnConfig& a = t.cfg.nic.cc.dcqcn;
    const cc::DcqcnConfig& b = s.cfg.nic.cc.dcqcn;
    EXPECT_EQ(s.cfg.nic.cc.algorithm, t.cfg.nic.cc.algorithm);
    EXPECT_EQ(b.rpg_ai_rate.v * 200, a.rpg_ai_rate.v);
    EXPECT_EQ(b.rpg_hai_rate.v * 200, a.rpg_hai_rate.v);
    EXPECT_EQ(b.rpg_min_rate.v * 200, a.rpg_min_rate.v);
    EXPECT_EQ(b.rpg_max_rate.v, 0u) << "0 (the line rate) stays 0";
    EXPECT_EQ(b.rpg_time_reset.v, a.rpg_time_reset.v * 200);
    EXPECT_EQ(b.rate_reduce_monitor_period.v, a.rate_reduce_monitor_period.v * 200);
    EXPECT_EQ(b.min_time_between_cnps.v, a.min_time_between_cnps.v * 200);
    EXPECT_EQ(b.dce_tcp_rtt.v, a.dce_tcp_rtt.v * 200);
    EXPECT_EQ(b.rpg_byte_reset.v, a.rpg_byte_reset.v) << "bytes take s times as long at 1/s of the rate";
    EXPECT_EQ(b.dce_tcp_g, a.dce_tcp_g);
}

TEST(FabricLiveScale, ALargerHeadroomIsKept) {
    Topology t = default_topology();
    for (SwitchSpec& sw : t.switches) sw.cfg.pg_lossless.xoff = Bytes{1 << 20};
    const Topology s = scale_topology(t, 10);
    for (const SwitchSpec& sw : s.switches) EXPECT_EQ(sw.cfg.pg_lossless.xoff.v, 1u << 20);
}

TEST(FabricLiveScale, BadScalesAreRefusedWithTheReason) {
    const Topology t = default_topology();
    EXPECT_THROW(scale_topology(t, 0.5), std::invalid_argument);
    try {
        scale_topology(t, 1e6);
        FAIL() << "a 100 bit/s link was accepted";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("below 1 Mbit/s"), std::string::npos) << e.what();
    }
}

// The exponent is the smallest whose timeout covers twice the bound plus
// the scheduling slack.
TEST(FabricLiveScale, RcTimeoutIsTheSmallestCoveringTwiceTheBound) {
    EXPECT_EQ(rc_timeout_time(14).v, 67108864);  // 4.096 us x 2^14
    for (const Nanos bound : {Nanos{0}, Nanos::from_us(10), Nanos::from_ms(30), Nanos::from_ms(500), Nanos::from_s(3)}) {
        const uint8_t t = rc_timeout_for(bound);
        const Nanos want{2 * bound.v + kSchedulingSlack.v};
        EXPECT_GE(rc_timeout_time(t), want) << bound.v;
        EXPECT_LT(rc_timeout_time(t - 1), want) << bound.v;
    }
    EXPECT_EQ(rc_timeout_for(Nanos{0}), 15);  // 134 ms >= 100 ms of slack, 67 ms is not
    EXPECT_EQ(rc_timeout_for(Nanos::from_s(100000)), 31);
}

// The bound of a fabric S times slower is S times the bound (speeds divide,
// delays multiply, the window drains S times slower), so the exponent
// follows the scale where a fixed one would fire on every full queue.
TEST(FabricLiveScale, RttBoundGrowsWithTheScaleAndCoversTheQueues) {
    const Topology t = default_topology();  // leaf-spine: 4 links NIC to NIC, 3 switches on the way
    const Bytes window{16u * 65536u};
    const Nanos b1 = rtt_bound(scale_topology(t, 1), window);  // with the live headroom, as every scale has
    const Nanos b200 = rtt_bound(scale_topology(t, 200), window);
    EXPECT_NEAR(static_cast<double>(b200.v) / static_cast<double>(b1.v), 200.0, 2.0);
    // At least three full shared pools each way at the slowest port, and the window at the host link.
    const Topology s = scale_topology(t, 200);
    const sw::SwitchConfig& c = s.switches.front().cfg;
    const Nanos pool = c.ports.front().speed.serialise(c.pool_size);
    EXPECT_GE(b200.v, 6 * pool.v + s.cfg.host_link.speed.serialise(window).v);
    EXPECT_GT(rc_timeout_for(b200), rc_timeout_for(b1));
    EXPECT_GE(rc_timeout_time(rc_timeout_for(b200)).v, 2 * b200.v);
    // A larger window waits longer in the sender's MAC.
    EXPECT_GT(rtt_bound(s, Bytes{window.v * 8}), b200);
}

}  // namespace
}  // namespace rocemu::fabric::live
