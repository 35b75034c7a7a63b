// The command line of `rocemu switch`: binding config ports to devices,
// neighbors and ECMP routes, link faults; and the counter layout.
#include <gtest/gtest.h>

#include "switch/dpdk/setup.hpp"
#include "switch/dpdk/stats.hpp"

namespace rocemu::sw::live {
namespace {

using namespace rocemu::literals;

SwitchConfig four_ports() {
    SwitchConfig c = sonic_default_config(4, BitsPerSec::gbps(100));
    c.ports[1].speed = BitsPerSec::gbps(10);
    c.ports[1].propagation_delay = 300_ns;
    return c;
}

TEST(SwitchDpdkSetup, BindsConfigPortsInTheGivenOrder) {
    LiveOptions o;
    o.ports = {"Ethernet4=net_ring0", "Ethernet0=net_memif0,role=server,socket=/tmp/s.sock"};
    std::string err;
    const auto s = make_live_setup(four_ports(), o, err);
    ASSERT_TRUE(s) << err;
    ASSERT_EQ(s->config.ports.size(), 2u);
    EXPECT_EQ(s->config.ports[0].name, "Ethernet4");
    EXPECT_EQ(s->config.ports[1].name, "Ethernet0");
    EXPECT_EQ(s->devspecs[1], "net_memif0,role=server,socket=/tmp/s.sock");
    // The link of a port serialises at the port's speed, with its propagation delay.
    EXPECT_EQ(s->links[0].speed, BitsPerSec::gbps(10));
    EXPECT_EQ(s->links[0].propagation_delay, 300_ns);
    EXPECT_EQ(s->links[1].speed, BitsPerSec::gbps(100));
}

TEST(SwitchDpdkSetup, BadBindingsNameTheOptionAndTheChoices) {
    std::string err;
    LiveOptions o;
    EXPECT_FALSE(make_live_setup(four_ports(), o, err));
    EXPECT_NE(err.find("--port"), std::string::npos) << err;
    o.ports = {"Ethernet5=net_ring0"};
    EXPECT_FALSE(make_live_setup(four_ports(), o, err));
    EXPECT_EQ(err, "--port Ethernet5=net_ring0: expected NAME=DEVSPEC with NAME one of Ethernet0, Ethernet4, "
                   "Ethernet8, Ethernet12");
    o.ports = {"Ethernet0=net_ring0", "Ethernet0=net_ring1"};
    EXPECT_FALSE(make_live_setup(four_ports(), o, err));
    EXPECT_NE(err.find("bound twice"), std::string::npos) << err;
}

TEST(SwitchDpdkSetup, NeighborsAndEcmpRoutesGoIntoTheRouteTable) {
    LiveOptions o;
    o.ports = {"Ethernet0=a", "Ethernet4=b", "Ethernet8=c"};
    o.neighbors = {"10.0.0.2=02:00:00:00:00:02@Ethernet0", "10.1.0.1=02:00:00:00:01:01@Ethernet4",
                   "10.2.0.1=02:00:00:00:02:01@Ethernet8"};
    o.routes = {"10.9.0.0/16=10.1.0.1,10.2.0.1"};
    std::string err;
    const auto s = make_live_setup(four_ports(), o, err);
    ASSERT_TRUE(s) << err;
    RouteTable rt;
    install_routes(*s, rt);
    PacketDesc d;
    d.dst_v4 = 0x0A000002;
    auto g = rt.lookup(d);
    ASSERT_TRUE(g);
    ASSERT_EQ(rt.group(*g).size(), 1u);
    EXPECT_EQ(rt.neighbor(rt.group(*g)[0]).port, 0);
    EXPECT_EQ(rt.neighbor(rt.group(*g)[0]).mac[5], 0x02);
    d.dst_v4 = 0x0A09ABCD;
    g = rt.lookup(d);
    ASSERT_TRUE(g);
    ASSERT_EQ(rt.group(*g).size(), 2u);
    EXPECT_EQ(rt.neighbor(rt.group(*g)[0]).port, 1);
    EXPECT_EQ(rt.neighbor(rt.group(*g)[1]).port, 2);
    d.dst_v4 = 0x0B000001;
    EXPECT_FALSE(rt.lookup(d));
}

TEST(SwitchDpdkSetup, BadNeighborsAndRoutesAreRefused) {
    std::string err;
    LiveOptions o;
    o.ports = {"Ethernet0=a"};
    o.neighbors = {"10.0.0.2=02:00:00:00:00:02@Ethernet4"};  // not bound
    EXPECT_FALSE(make_live_setup(four_ports(), o, err));
    EXPECT_NE(err.find("--neighbor"), std::string::npos) << err;
    o.neighbors = {"10.0.0.2=02:00:00:00:00:02@Ethernet0"};
    o.routes = {"10.9.0.0/33=10.0.0.2"};
    EXPECT_FALSE(make_live_setup(four_ports(), o, err));
    EXPECT_NE(err.find("LEN in [0, 32]"), std::string::npos) << err;
    o.routes = {"10.9.0.0/16=10.0.0.3"};
    EXPECT_FALSE(make_live_setup(four_ports(), o, err));
    EXPECT_EQ(err, "--route 10.9.0.0/16=10.0.0.3: next hop '10.0.0.3' is not a --neighbor");
}

TEST(SwitchDpdkSetup, LinkKeysSetFaultsAndStorms) {
    LinkConfig l;
    std::string err;
    ASSERT_TRUE(apply_link_keys("loss=0.01,corrupt=0.5,corrupt_as=icrc,reorder=0.2,reorder_delay_us=5,down_ms=10,"
                                "up_ms=20,storm_prio=3,storm_start_ms=1,storm_stop_ms=2,storm_period_us=20",
                                l, err))
        << err;
    EXPECT_DOUBLE_EQ(l.loss_rate, 0.01);
    EXPECT_DOUBLE_EQ(l.corrupt_rate, 0.5);
    EXPECT_EQ(l.corrupt_as, Corruption::BadIcrc);
    EXPECT_DOUBLE_EQ(l.reorder_rate, 0.2);
    EXPECT_EQ(l.reorder_delay, 5_us);
    ASSERT_EQ(l.up_down.size(), 2u);
    EXPECT_EQ(l.up_down[0], std::make_pair(10_ms, false));
    EXPECT_EQ(l.up_down[1], std::make_pair(20_ms, true));
    ASSERT_TRUE(l.storm);
    EXPECT_EQ(l.storm->start, 1_ms);
    EXPECT_EQ(l.storm->stop, 2_ms);
    EXPECT_EQ(l.storm->period, 20_us);
    EXPECT_EQ(l.storm->frame.class_enable, 1 << 3);
    EXPECT_EQ(l.storm->frame.quanta[3], 0xFFFF);

    // The storm then runs as the link model says: one pause per period in [start, stop).
    Link link(l);
    int frames = 0;
    for (Nanos t = 0_ms; t < 3_ms; t += 1_us)
        while (link.poll_storm(t)) ++frames;
    EXPECT_EQ(frames, 50);
}

TEST(SwitchDpdkSetup, BadLinkKeysNameKeyValueAndRange) {
    LinkConfig l;
    std::string err;
    EXPECT_FALSE(apply_link_keys("loss=1.5", l, err));
    EXPECT_EQ(err, "--link loss: '1.5' is not a number in [0, 1]");
    EXPECT_FALSE(apply_link_keys("corrupt_as=crc", l, err));
    EXPECT_EQ(err, "--link corrupt_as: 'crc' is not one of fcs, icrc");
    EXPECT_FALSE(apply_link_keys("storm_period_us=10", l, err));
    EXPECT_EQ(err, "--link: a PFC storm needs storm_prio (0-7)");
    EXPECT_FALSE(apply_link_keys("jitter=1", l, err));
    EXPECT_NE(err.find("unknown key 'jitter'"), std::string::npos) << err;

    LiveOptions o;
    o.ports = {"Ethernet0=a"};
    o.links = {"Ethernet4:loss=0.1"};
    EXPECT_FALSE(make_live_setup(four_ports(), o, err));
    EXPECT_NE(err.find("a bound port (Ethernet0)"), std::string::npos) << err;
}

TEST(SwitchDpdkSetup, LinkFileTakesFaultsButKeepsThePortSpeed) {
    LiveOptions o;
    o.ports = {"Ethernet0=a", "Ethernet4=b"};
    o.link_files = {"Ethernet4=" ROCEMU_SOURCE_DIR "/configs/switch/link-faults.yaml"};
    std::string err;
    const auto s = make_live_setup(four_ports(), o, err);
    ASSERT_TRUE(s) << err;
    EXPECT_EQ(s->links[1].speed, BitsPerSec::gbps(10)) << "the core paces Ethernet4 at 10G; its link must agree";
    EXPECT_DOUBLE_EQ(s->links[1].loss_rate, 0.0001);
    EXPECT_EQ(s->links[1].corrupt_as, Corruption::BadIcrc);
    ASSERT_TRUE(s->links[1].storm);
    EXPECT_EQ(s->links[1].storm->frame.class_enable, 1 << 3);
    EXPECT_DOUBLE_EQ(s->links[0].loss_rate, 0.0);

    o.link_files = {"Ethernet4=/nonexistent/link.yaml"};
    EXPECT_FALSE(make_live_setup(four_ports(), o, err));
    EXPECT_EQ(err, "--link-file Ethernet4=/nonexistent/link.yaml: cannot read /nonexistent/link.yaml");
}

TEST(SwitchDpdkStats, EveryNamedCounterHasAValue) {
    const SwitchConfig c = four_ports();
    Switch sw(c);
    Rng rng(1);
    Effects fx;
    sw.routes().learn_host_v4(0x0A000002, 1, {2, 0, 0, 0, 0, 2});
    PacketDesc d;
    d.frame_len = Bytes{1000};
    d.dscp = 3;
    d.dst_v4 = 0x0A000002;
    sw.on_packet(d, 1_us, rng, fx);
    RtPortStats rt;
    rt.add(RtStat::RxFrames, 7);
    LinkCounters lc;
    lc.storm_frames = 9;
    const auto& names = port_counter_names();
    std::vector<uint64_t> v(names.size(), 12345);
    collect_port_counters(sw, 1, 2_us, rt, lc, v);
    const auto at = [&](std::string_view n) {
        for (size_t i = 0; i < names.size(); ++i)
            if (names[i] == n) return v[i];
        ADD_FAILURE() << "no counter " << n;
        return uint64_t{0};
    };
    EXPECT_EQ(at("rx_frames"), 7u);
    EXPECT_EQ(at("q3_depth_bytes"), 1000u);
    EXPECT_EQ(at("q3_watermark_bytes"), 1000u);
    EXPECT_EQ(at("link_storm_frames"), 9u);
    EXPECT_EQ(at("lossless_drops"), 0u);
    for (uint64_t x : v) EXPECT_NE(x, 12345u);  // every slot written
    for (const auto& n : names) EXPECT_EQ(n.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_"), std::string::npos);
}

}  // namespace
}  // namespace rocemu::sw::live
