#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "harness.hpp"

namespace rocemu::sw::test {
namespace {

using namespace rocemu::literals;

TEST(SwitchLpm, LongestPrefixWinsV4AndV6) {
    Lpm<uint32_t> v4;
    v4.insert(0, 0, 1);
    v4.insert(0x0A000000, 8, 2);
    v4.insert(0x0A010000, 16, 3);
    v4.insert(0x0A010200, 24, 4);
    EXPECT_EQ(v4.lookup(0x0A010203), 4u);
    EXPECT_EQ(v4.lookup(0x0A010303), 3u);
    EXPECT_EQ(v4.lookup(0x0A020303), 2u);
    EXPECT_EQ(v4.lookup(0x0B000001), 1u);
    EXPECT_TRUE(v4.erase(0, 0));
    EXPECT_FALSE(v4.lookup(0x0B000001).has_value());
    v4.insert(0x0A010200, 24, 9);  // replace keeps one entry
    EXPECT_EQ(v4.lookup(0x0A0102FF), 9u);

    Lpm<Ipv6Key> v6;
    std::array<uint8_t, 16> p{0x20, 0x01, 0x0d, 0xb8};
    v6.insert(ipv6_key(p), 32, 7);
    p[15] = 5;
    v6.insert(ipv6_key(p), 128, 8);
    EXPECT_EQ(v6.lookup(ipv6_key(p)), 8u);
    p[15] = 6;
    EXPECT_EQ(v6.lookup(ipv6_key(p)), 7u);
    p[0] = 0x30;
    EXPECT_FALSE(v6.lookup(ipv6_key(p)).has_value());
}

TEST(SwitchRouting, ForwardsToLearnedHostAndDropsMissesWithReasons) {
    Rig r(sonic_default_config(4, BitsPerSec::gbps(100)));
    r.sw->routes().add_connected_v4(0x0A000500, 24);
    Effects fx = r.send(r.pkt(0, host_ip(2), kDscpTc1), 0_ns);
    const Effect* e = find(fx, EffectKind::Enqueued);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->port, 2);
    EXPECT_EQ(e->queue, 1);
    EXPECT_EQ(e->neighbor, r.host_nb[2]);
    EXPECT_EQ(r.sw->routes().neighbor(e->neighbor).mac[5], 2);

    fx = r.send(r.pkt(0, 0x0A000507, kDscpTc1), 0_ns);
    ASSERT_EQ(fx.size(), 1u);
    EXPECT_EQ(fx[0].kind, EffectKind::Drop);
    EXPECT_EQ(fx[0].reason, DropReason::NeighborMiss);

    fx = r.send(r.pkt(0, 0xC0A80001, kDscpTc1), 0_ns);
    ASSERT_EQ(fx.size(), 1u);
    EXPECT_EQ(fx[0].reason, DropReason::NoRoute);
    EXPECT_EQ(r.sw->port_counters(0).drops[static_cast<int>(DropReason::NoRoute)], 1u);
    EXPECT_EQ(r.sw->port_counters(0).drops[static_cast<int>(DropReason::NeighborMiss)], 1u);
    EXPECT_EQ(drop_reason_name(DropReason::NoRoute), "no_route");

    PacketDesc bad = r.pkt(9, host_ip(1), kDscpTc1);
    fx = r.send(bad, 0_ns);
    EXPECT_EQ(fx[0].reason, DropReason::BadPort);
    EXPECT_EQ(r.sw->bad_port_drops(), 1u);
}

TEST(SwitchRouting, RouteChangesReachDestinationsAlreadySeen) {
    // IPv4 lookups are cached per destination: each change below must still
    // decide the next packet to that same destination.
    Rig r(sonic_default_config(4, BitsPerSec::gbps(100)));
    const uint32_t dst = 0x0A000507;
    EXPECT_EQ(r.send(r.pkt(0, dst, kDscpTc1), 0_ns)[0].reason, DropReason::NoRoute);
    r.sw->routes().add_connected_v4(0x0A000500, 24);
    EXPECT_EQ(r.send(r.pkt(0, dst, kDscpTc1), 0_ns)[0].reason, DropReason::NeighborMiss);
    r.sw->routes().add_route_v4(0x0A000000, 16, r.sw->routes().add_group({r.host_nb[1]}));
    EXPECT_EQ(r.send(r.pkt(0, dst, kDscpTc1), 0_ns)[0].reason, DropReason::NeighborMiss);  // the /24 is longer
    r.sw->routes().learn_host_v4(dst, 3, {0x02, 0, 0, 0, 5, 7});
    EXPECT_EQ(enqueued_port(r.send(r.pkt(0, dst, kDscpTc1), 0_ns)), 3);
    r.sw->routes().add_route_v4(dst, 32, r.sw->routes().add_group({r.host_nb[2]}));
    EXPECT_EQ(enqueued_port(r.send(r.pkt(0, dst, kDscpTc1), 0_ns)), 2);
    // A neighbour of the /16, not looked up before, takes the /16.
    EXPECT_EQ(enqueued_port(r.send(r.pkt(0, 0x0A000607, kDscpTc1), 0_ns)), 1);
}

// The cache's epoch is 16 bits: after 65536 route changes (65535 if the
// wrap skipped a value) it comes round to an entry's epoch again, and that
// entry, from before the changes, must not decide the packet. An entry also
// carries its group (first member, size): an ECMP group's hit spreads over
// all its members.
TEST(SwitchRouting, CachedRoutesDoNotOutliveTheEpochsWrap) {
    Rig r(sonic_default_config(4, BitsPerSec::gbps(100)));
    RouteTable& rt = r.sw->routes();
    const std::array<uint32_t, 4> dsts{0x0B010203, 0x0B010709, 0x0B012801, 0x0B016305};
    rt.add_route_v4(0x0B000000, 8, rt.add_group({r.host_nb[1]}));
    for (const uint32_t dst : dsts) EXPECT_EQ(enqueued_port(r.send(r.pkt(0, dst, kDscpTc1), 0_ns)), 1);  // cached
    rt.add_route_v4(0x0B010000, 16, rt.add_group({r.host_nb[2], r.host_nb[3]}));
    int changes = 1;
    for (std::size_t k = 0; k < dsts.size(); ++k) {
        for (; changes < 65534 + static_cast<int>(k); ++changes) rt.add_route_v4(0xC0A80000, 16, 0);
        std::set<int> ports;
        for (uint16_t sport = 0; sport < 64; ++sport)
            ports.insert(enqueued_port(r.send(r.pkt(0, dsts[k], kDscpTc1, 1000, 0xC000 + sport), 0_ns)));
        EXPECT_EQ(ports, (std::set<int>{2, 3})) << "after " << changes << " changes";
    }
    const RouteTable::Routed hit = rt.route_group(r.pkt(0, dsts[0], kDscpTc1));
    EXPECT_EQ(hit.g.size, 2u);
    EXPECT_EQ(rt.group(hit.group).size(), 2u);
}

TEST(SwitchRouting, Ipv6RouteForwards) {
    Rig r(sonic_default_config(2, BitsPerSec::gbps(100)));
    std::array<uint8_t, 16> host{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    r.sw->routes().learn_host_v6(host, 1, {2, 0, 0, 0, 0, 9});
    PacketDesc d = r.pkt(0, 0, kDscpTc1);
    d.ipv6 = true;
    d.dst_v6 = host;
    Effects fx = r.send(d, 0_ns);
    const Effect* e = find(fx, EffectKind::Enqueued);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->port, 1);
}

// An ECMP route 10.9.0.0/16 over the hosts on ports 1..n.
uint32_t add_ecmp(Rig& r, int n) {
    std::vector<uint32_t> members;
    for (int p = 1; p <= n; ++p) members.push_back(r.host_nb[p]);
    const uint32_t g = r.sw->routes().add_group(members);
    r.sw->routes().add_route_v4(0x0A090000, 16, g);
    return g;
}
constexpr uint32_t kEcmpDst = 0x0A090001;

TEST(SwitchEcmp, UdpSourcePortSpreadsEvenly) {
    constexpr int kMembers = 4;
    constexpr int kFlows = 40000;
    SwitchConfig cfg = sonic_default_config(kMembers + 1, BitsPerSec::gbps(100));
    Rig r(cfg);
    add_ecmp(r, kMembers);
    std::array<int, kMembers + 1> hits{};
    for (int i = 0; i < kFlows; ++i) {
        Effects fx = r.send(r.pkt(0, kEcmpDst, kDscpTc1, 64, static_cast<uint16_t>(0xC000 + i)), 0_ns);
        const Effect* e = find(fx, EffectKind::Enqueued);
        ASSERT_NE(e, nullptr);
        ++hits[e->port];
    }
    // Chi-square with 3 degrees of freedom; 16.27 is the 0.1% critical value.
    const double expected = static_cast<double>(kFlows) / kMembers;
    double chi2 = 0;
    for (int p = 1; p <= kMembers; ++p) chi2 += std::pow(hits[p] - expected, 2) / expected;
    EXPECT_LT(chi2, 16.27) << hits[1] << " " << hits[2] << " " << hits[3] << " " << hits[4];
}

TEST(SwitchEcmp, SameFlowSamePathAndHashFieldsAreConfigurable) {
    SwitchConfig cfg = sonic_default_config(5, BitsPerSec::gbps(100));
    {
        Rig r(cfg);
        add_ecmp(r, 4);
        const int first = enqueued_port(r.send(r.pkt(0, kEcmpDst, kDscpTc1, 64, 0xC123), 0_ns));
        for (int i = 0; i < 100; ++i)
            EXPECT_EQ(enqueued_port(r.send(r.pkt(0, kEcmpDst, kDscpTc1, 64, 0xC123), 0_ns)), first);
    }
    // Without L4_SRC_PORT in the hash, varying the source port cannot move the flow.
    cfg.routing.hash_fields = kHashSrcIp | kHashDstIp | kHashProto | kHashDstPort;
    Rig r(cfg);
    add_ecmp(r, 4);
    const int first = enqueued_port(r.send(r.pkt(0, kEcmpDst, kDscpTc1, 64, 0xC000), 0_ns));
    for (int i = 1; i < 200; ++i)
        EXPECT_EQ(enqueued_port(r.send(r.pkt(0, kEcmpDst, kDscpTc1, 64, static_cast<uint16_t>(0xC000 + i)), 0_ns)),
                  first);
}

// Load ports 1..3 with `bytes[p]` of traffic straight to their hosts.
void preload(Rig& r, const std::array<uint32_t, 4>& kb) {
    for (int p = 1; p <= 3; ++p)
        for (uint32_t i = 0; i < kb[p]; ++i) r.send(r.pkt(0, host_ip(p), kDscpTc1, 1000), 0_ns);
}

// The L4 half of the flow hash packs the selected fields into one word
// under a mask computed once per configuration; for every field selection
// that must be the word built field by field, so ECMP picks do not change.
TEST(SwitchEcmp, MaskedL4HashIsTheFieldByFieldHash) {
    Rng gen(11);
    for (unsigned fields = 0; fields < 64; ++fields) {
        const auto f = static_cast<uint8_t>(fields);
        for (int i = 0; i < 50; ++i) {
            PacketDesc d;
            d.in_port = static_cast<PortId>(gen.below(64));
            d.ip_proto = static_cast<uint8_t>(gen.below(256));
            d.src_port = static_cast<uint16_t>(gen.next());
            d.dst_port = static_cast<uint16_t>(gen.next());
            d.src_v4 = static_cast<uint32_t>(gen.next());
            d.dst_v4 = static_cast<uint32_t>(gen.next());
            const uint64_t addrs = flow_hash_addrs(d, f, 42);
            const uint64_t l4 = (f & kHashProto ? uint64_t{d.ip_proto} << 48 : 0) |
                                (f & kHashInPort ? uint64_t{d.in_port} << 32 : 0) |
                                (f & kHashSrcPort ? uint64_t{d.src_port} << 16 : 0) |
                                (f & kHashDstPort ? uint64_t{d.dst_port} : 0);
            const uint64_t expect = detail::fmix64((addrs ^ l4) * detail::kHashMul);
            ASSERT_EQ(flow_hash_rest_masked(addrs, d, flow_hash_l4_mask(f)), expect) << "fields " << fields;
            ASSERT_EQ(flow_hash(d, f, 42), expect) << "fields " << fields;
        }
    }
}

TEST(SwitchAdaptiveRouting, PerPacketPicksLeastQueuedMemberOnlyForOptedInTc) {
    SwitchConfig cfg = sonic_default_config(4, BitsPerSec::gbps(100));
    cfg.routing.adaptive[3] = ArMode::PerPacket;
    Rig r(cfg);
    add_ecmp(r, 3);
    preload(r, {0, 30, 10, 20});
    // Every packet of one flow goes to the least loaded port, and as that
    // port fills up the choice moves.
    std::array<int, 4> hits{};
    for (int i = 0; i < 10; ++i) {
        const int port = enqueued_port(r.send(r.pkt(0, kEcmpDst, kDscpLossless3, 1000, 0xC001), 0_ns));
        ASSERT_GE(port, 0);
        ++hits[port];
    }
    EXPECT_EQ(hits[2], 10);
    for (int i = 0; i < 20; ++i) r.send(r.pkt(0, kEcmpDst, kDscpLossless3, 1000, 0xC001), 0_ns);
    // Now ports 2 and 3 each hold 20 KB or more; AR keeps them level, never
    // touching port 1 (30 KB) until they pass it.
    EXPECT_EQ(r.sw->mmu().port_bytes(1), Bytes{30000});
    EXPECT_LE(r.sw->mmu().port_bytes(2).v > r.sw->mmu().port_bytes(3).v
                  ? r.sw->mmu().port_bytes(2).v - r.sw->mmu().port_bytes(3).v
                  : r.sw->mmu().port_bytes(3).v - r.sw->mmu().port_bytes(2).v,
              1000u);

    // TC1 is not opted in: a flow stays on its hashed port whatever the load.
    const int hashed = enqueued_port(r.send(r.pkt(0, kEcmpDst, kDscpTc1, 1000, 0xC002), 0_ns));
    preload(r, {0, 50, 50, 50});
    EXPECT_EQ(enqueued_port(r.send(r.pkt(0, kEcmpDst, kDscpTc1, 1000, 0xC002), 0_ns)), hashed);
}

TEST(SwitchAdaptiveRouting, FlowletSticksWithinGapAndRepicksAfterIt) {
    SwitchConfig cfg = sonic_default_config(4, BitsPerSec::gbps(100));
    cfg.routing.adaptive[3] = ArMode::Flowlet;
    cfg.routing.flowlet_gap = 10_us;
    Rig r(cfg);
    add_ecmp(r, 3);
    preload(r, {0, 30, 10, 20});
    const auto port_of = [&](Nanos t) {
        return enqueued_port(r.send(r.pkt(0, kEcmpDst, kDscpLossless3, 1000, 0xC001), t));
    };
    EXPECT_EQ(port_of(0_ns), 2);
    // Port 2 becomes the most loaded, but packets 5 us apart stay in the flowlet.
    preload(r, {0, 0, 40, 0});
    for (int i = 1; i <= 5; ++i) EXPECT_EQ(port_of(Nanos{i * 5000}), 2);
    // A gap longer than 10 us starts a new flowlet on the least loaded port.
    EXPECT_EQ(port_of(25_us + 10_us + 1_ns), 3);
}

}  // namespace
}  // namespace rocemu::sw::test
