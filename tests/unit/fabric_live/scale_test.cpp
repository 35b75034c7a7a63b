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

TEST(FabricLiveScale, RcTimeoutGrowsWithTheScale) {
    EXPECT_EQ(scaled_rc_timeout(1), 14);
    EXPECT_EQ(scaled_rc_timeout(2), 15);
    EXPECT_EQ(scaled_rc_timeout(200), 22);  // 4.096 us x 2^22 = 17 s
    EXPECT_EQ(scaled_rc_timeout(1e12), 31);
}

}  // namespace
}  // namespace rocemu::fabric::live
