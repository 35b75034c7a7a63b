// The DPDK-free glue of the switch runtime: frames in, PacketDesc and PFC
// out; the rewrites effects ask for, checked on real bytes.
#include <gtest/gtest.h>

#include <vector>

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/l2.hpp"
#include "switch/dpdk/frame.hpp"

namespace rocemu::sw::live {
namespace {

using namespace rocemu::literals;

wire::RocePacket ud_packet(bool v6, uint8_t dscp, uint8_t ecn, uint16_t sport, const std::vector<uint8_t>& payload) {
    wire::RocePacket p;
    p.l2.dst = wire::MacAddr{{0x02, 0, 0, 0, 0, 0x0b}};
    p.l2.src = wire::MacAddr{{0x02, 0, 0, 0, 0, 0x0a}};
    p.l2.ethertype = v6 ? wire::ethertype::kIpv6 : wire::ethertype::kIpv4;
    if (v6) {
        p.l3.v6 = true;
        p.l3.src.b = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        p.l3.dst.b = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    } else {
        p.l3.src = wire::IpAddr::from_v4(0x0A000001);
        p.l3.dst = wire::IpAddr::from_v4(0x0A010002);
    }
    p.l3.dscp = dscp;
    p.l3.ecn = ecn;
    p.udp_sport = sport;
    p.bth.opcode = 0x64;
    p.bth.dqpn = Qpn{0x11};
    p.deth.src_qp = Qpn{0x12};
    p.payload = payload.data();
    p.payload_len = static_cast<uint32_t>(payload.size());
    return p;
}

std::vector<uint8_t> encode(const wire::RocePacket& p) {
    std::vector<uint8_t> f(wire::roce_frame_len(p));
    EXPECT_EQ(wire::encode_roce(p, f), f.size());
    return f;
}

const std::vector<uint8_t> kPayload(200, 0x5A);

TEST(SwitchDpdkFrame, Ipv4RoceBecomesADescriptor) {
    const auto f = encode(ud_packet(false, 3, wire::ecn::kEct0, 0xC123, kPayload));
    PacketDesc d;
    PfcFrameDesc pfc;
    ASSERT_EQ(parse_frame(f, 5, 77, d, pfc), RxKind::Data);
    EXPECT_EQ(d.handle, 77u);
    EXPECT_EQ(d.in_port, 5);
    EXPECT_EQ(d.frame_len, Bytes{f.size()});
    EXPECT_FALSE(d.ipv6);
    EXPECT_EQ(d.dscp, 3);
    EXPECT_EQ(d.ecn, wire::ecn::kEct0);
    EXPECT_EQ(d.ip_proto, wire::kIpProtoUdp);
    EXPECT_EQ(d.src_v4, 0x0A000001u);
    EXPECT_EQ(d.dst_v4, 0x0A010002u);
    EXPECT_EQ(d.src_port, 0xC123);
    EXPECT_EQ(d.dst_port, wire::kRoceUdpPort);
}

TEST(SwitchDpdkFrame, VlanTaggedAndIpv6FramesParse) {
    auto p = ud_packet(false, 4, wire::ecn::kEct1, 0xC001, kPayload);
    p.l2.vlan = true;
    p.l2.vid = 100;
    p.l2.pcp = 3;
    auto f = encode(p);
    PacketDesc d;
    PfcFrameDesc pfc;
    ASSERT_EQ(parse_frame(f, 0, 0, d, pfc), RxKind::Data);
    EXPECT_EQ(d.dscp, 4);
    EXPECT_EQ(d.ecn, wire::ecn::kEct1);
    EXPECT_EQ(d.dst_port, wire::kRoceUdpPort);
    // A tag cut short, and a tag with no room for the IPv4 header behind it.
    EXPECT_EQ(parse_frame(std::span(f).first(16), 0, 0, d, pfc), RxKind::Truncated);
    EXPECT_EQ(parse_frame(std::span(f).first(18 + 19), 0, 0, d, pfc), RxKind::Truncated);

    f = encode(ud_packet(true, 46, wire::ecn::kCe, 0xC002, kPayload));
    ASSERT_EQ(parse_frame(f, 0, 0, d, pfc), RxKind::Data);
    EXPECT_TRUE(d.ipv6);
    EXPECT_EQ(d.dscp, 46);
    EXPECT_EQ(d.ecn, wire::ecn::kCe);
    EXPECT_EQ(d.dst_v6[15], 2);
    EXPECT_EQ(d.src_port, 0xC002);
}

TEST(SwitchDpdkFrame, NonFirstFragmentHasNoPorts) {
    auto f = encode(ud_packet(false, 3, 0, 0xC003, kPayload));
    wire::store_be16(f.data() + 14 + 6, 0x0010);  // fragment offset 16 x 8 bytes
    PacketDesc d;
    PfcFrameDesc pfc;
    ASSERT_EQ(parse_frame(f, 0, 0, d, pfc), RxKind::Data);
    EXPECT_EQ(d.src_port, 0);
    EXPECT_EQ(d.dst_port, 0);
}

// parse_frame takes untagged IPv4 frames without options that hold the L4
// ports through a fast path: each field must be what the general parse gives,
// at the length limits (the ports just in, just cut off), for TCP, UDP and
// other protocols, fragments, options and every TOS byte's DSCP and ECN.
TEST(SwitchDpdkFrame, TheIpv4FastPathAgreesWithTheGeneralParse) {
    const auto base = encode(ud_packet(false, 3, wire::ecn::kEct0, 0xC123, kPayload));
    const auto same = [](const PacketDesc& a, const PacketDesc& b) {
        return a.handle == b.handle && a.frame_len == b.frame_len && a.in_port == b.in_port && a.dscp == b.dscp &&
               a.ecn == b.ecn && a.ipv6 == b.ipv6 && a.ip_proto == b.ip_proto && a.src_port == b.src_port &&
               a.dst_port == b.dst_port && a.src_v4 == b.src_v4 && a.dst_v4 == b.dst_v4 && a.src_v6 == b.src_v6 &&
               a.dst_v6 == b.dst_v6;
    };
    std::size_t fast = 0, cases = 0;
    for (const uint8_t vihl : {0x45, 0x46, 0x44}) {
        for (const uint8_t proto : {wire::kIpProtoUdp, uint8_t{6}, uint8_t{1}}) {
            for (const uint16_t frag : {0x0000, 0x2000, 0x4000, 0x0001}) {
                for (const uint8_t tos : {0x00, 0x0E, 0x0F, 0xB9, 0xFF}) {
                    for (std::size_t len = 30; len <= 64; ++len) {
                        auto f = base;
                        f[14] = vihl;
                        f[15] = tos;
                        f[14 + 9] = proto;
                        wire::store_be16(f.data() + 14 + 6, frag);
                        const std::span<const uint8_t> frame = std::span(f).first(len);
                        // Both descriptors start from the same leftovers of an IPv6 frame.
                        PacketDesc a, b;
                        PfcFrameDesc pa, pb;
                        ASSERT_EQ(parse_frame(encode(ud_packet(true, 46, 3, 0xC002, kPayload)), 1, 1, a, pa),
                                  RxKind::Data);
                        b = a;
                        const RxKind ka = parse_frame(frame, 7, 42, a, pa);
                        const RxKind kb = parse_frame_general(frame, 7, 42, b, pb);
                        ASSERT_EQ(ka, kb) << "len " << len << " vihl " << int{vihl};
                        EXPECT_TRUE(same(a, b)) << "len " << len << " vihl " << int{vihl} << " proto " << int{proto}
                                                << " frag " << frag << " tos " << int{tos};
                        ++cases;
                        if (vihl == 0x45 && len >= 38) {
                            ++fast;
                            EXPECT_EQ(a.dscp, tos >> 2);
                            EXPECT_EQ(a.ecn, tos & 3);
                            const bool ports = proto != 1 && (frag & 0x1FFF) == 0;
                            EXPECT_EQ(a.src_port, ports ? 0xC123 : 0) << len;
                            EXPECT_EQ(a.dst_port, ports ? wire::kRoceUdpPort : 0) << len;
                        }
                    }
                }
            }
        }
    }
    EXPECT_GT(fast, cases / 4);
}

// The runtime reuses its descriptors frame after frame and the parser no
// longer clears them: nothing the core reads may carry over from the last.
TEST(SwitchDpdkFrame, AReusedDescriptorKeepsNothingOfTheFrameBefore) {
    PacketDesc d;
    PfcFrameDesc pfc;
    ASSERT_EQ(parse_frame(encode(ud_packet(true, 46, wire::ecn::kCe, 0xC002, kPayload)), 1, 1, d, pfc), RxKind::Data);
    auto v4 = encode(ud_packet(false, 3, 0, 0xC003, kPayload));
    wire::store_be16(v4.data() + 14 + 6, 0x0010);  // a non-first fragment: no ports read
    ASSERT_EQ(parse_frame(v4, 2, 2, d, pfc), RxKind::Data);
    EXPECT_FALSE(d.ipv6);
    EXPECT_EQ(d.src_port, 0);
    EXPECT_EQ(d.dst_port, 0);
    EXPECT_EQ(d.src_v4, 0x0A000001u);

    ASSERT_EQ(parse_frame(encode(ud_packet(false, 3, 0, 0xC004, kPayload)), 1, 1, d, pfc), RxKind::Data);
    auto v6 = encode(ud_packet(true, 46, 0, 0xC005, kPayload));
    v6[14 + 6] = 59;  // next header "none": no L4 ports
    ASSERT_EQ(parse_frame(v6, 2, 2, d, pfc), RxKind::Data);
    EXPECT_TRUE(d.ipv6);
    EXPECT_EQ(d.src_v4, 0u);
    EXPECT_EQ(d.dst_v4, 0u);
    EXPECT_EQ(d.src_port, 0);
    EXPECT_EQ(d.dst_port, 0);
}

TEST(SwitchDpdkFrame, PfcPauseArpAndTruncatedFrames) {
    PfcFrameDesc out;
    out.class_enable = 0x18;
    out.quanta[3] = 0xFFFF;
    out.quanta[4] = 7;
    std::vector<uint8_t> f(wire::kPfcFrameLen);
    ASSERT_EQ(build_pfc(out, wire::MacAddr{{0x02, 0, 0, 0, 0, 0x0c}}, f), wire::kPfcFrameLen);
    PacketDesc d;
    PfcFrameDesc pfc;
    ASSERT_EQ(parse_frame(f, 0, 0, d, pfc), RxKind::Pfc);
    EXPECT_EQ(pfc.class_enable, 0x18);
    EXPECT_EQ(pfc.quanta[3], 0xFFFF);
    EXPECT_EQ(pfc.quanta[4], 7);
    EXPECT_EQ(pfc.quanta[0], 0);

    wire::store_be16(f.data() + 14, wire::kPauseOpcode);
    EXPECT_EQ(parse_frame(f, 0, 0, d, pfc), RxKind::Pause);

    std::vector<uint8_t> arp(64);
    wire::Arp a;
    a.oper = wire::kArpRequest;
    wire::L2 l2;
    l2.dst = wire::MacAddr::broadcast();
    ASSERT_GT(wire::encode_arp(l2, a, arp), 0u);
    EXPECT_EQ(parse_frame(arp, 0, 0, d, pfc), RxKind::NotIp);

    const auto roce = encode(ud_packet(false, 3, 0, 0xC000, kPayload));
    EXPECT_EQ(parse_frame(std::span(roce).first(14 + 19), 0, 0, d, pfc), RxKind::Truncated);
    EXPECT_EQ(parse_frame(std::span(roce).first(10), 0, 0, d, pfc), RxKind::Truncated);
}

TEST(SwitchDpdkFrame, L2RewriteKeepsTheTagAndTheIcrc) {
    auto p = ud_packet(false, 3, 0, 0xC000, kPayload);
    p.l2.vlan = true;
    p.l2.vid = 42;
    auto f = encode(p);
    const std::array<uint8_t, 6> nb{0x02, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE};
    const wire::MacAddr mine{{0x02, 0x11, 0x22, 0x33, 0x44, 0x55}};
    ASSERT_TRUE(rewrite_l2(f, nb, mine));
    wire::RocePacket back;
    ASSERT_EQ(wire::parse_roce(f, back), wire::ParseError::Ok);
    EXPECT_EQ(back.l2.dst.b, nb);
    EXPECT_EQ(back.l2.src, mine);
    EXPECT_TRUE(back.l2.vlan);
    EXPECT_EQ(back.l2.vid, 42);
}

TEST(SwitchDpdkFrame, TtlDecrementKeepsTheChecksumAndTheIcrc) {
    auto f = encode(ud_packet(false, 3, 0, 0xC000, kPayload));
    const uint8_t ttl = f[14 + 8];
    ASSERT_EQ(decrement_ttl(f), TtlResult::Decremented);
    EXPECT_EQ(f[14 + 8], ttl - 1);
    EXPECT_EQ(wire::ip_checksum(f.data() + 14, 20), 0);
    wire::RocePacket back;
    EXPECT_EQ(wire::parse_roce(f, back), wire::ParseError::Ok);

    f[14 + 8] = 1;
    const auto before = f;
    EXPECT_EQ(decrement_ttl(f), TtlResult::Expired);
    EXPECT_EQ(f, before);

    auto v6 = encode(ud_packet(true, 3, 0, 0xC000, kPayload));
    const uint8_t hops = v6[14 + 7];
    ASSERT_EQ(decrement_ttl(v6), TtlResult::Decremented);
    EXPECT_EQ(v6[14 + 7], hops - 1);
}

TEST(SwitchDpdkFrame, CeMarkKeepsTheIcrc) {
    auto f = encode(ud_packet(false, 3, wire::ecn::kEct0, 0xC000, kPayload));
    ASSERT_TRUE(wire::set_ip_ecn(f, kEcnCe));
    PacketDesc d;
    PfcFrameDesc pfc;
    ASSERT_EQ(parse_frame(f, 0, 0, d, pfc), RxKind::Data);
    EXPECT_EQ(d.ecn, kEcnCe);
    EXPECT_EQ(wire::ip_checksum(f.data() + 14, 20), 0);
    wire::RocePacket back;
    EXPECT_EQ(wire::parse_roce(f, back), wire::ParseError::Ok);
}

TEST(SwitchDpdkFrame, CorruptIcrcBreaksOnlyTheIcrcEvenWithPadding) {
    for (const bool v6 : {false, true}) {
        auto f = encode(ud_packet(v6, 3, 0, 0xC000, kPayload));
        f.resize(f.size() + 6, 0);  // Ethernet padding after the ICRC must not fool it
        wire::RocePacket back;
        ASSERT_EQ(wire::parse_roce(f, back), wire::ParseError::Ok);
        ASSERT_TRUE(corrupt_icrc(f));
        EXPECT_EQ(wire::parse_roce(f, back), wire::ParseError::BadIcrc) << "v6=" << v6;
        EXPECT_EQ(wire::parse_roce(f, back, wire::ParseOptions{.verify_icrc = false}), wire::ParseError::Ok);
    }
    std::vector<uint8_t> arp(60);
    EXPECT_FALSE(corrupt_icrc(arp));
}

TEST(SwitchDpdkFrame, PauseStateHonoursQuantaAtTheLinkSpeed) {
    PauseState s;
    PfcFrameDesc xoff;
    xoff.class_enable = 1 << 3;
    xoff.quanta[3] = 0xFFFF;
    xoff.quanta[4] = 0xFFFF;  // not enabled: ignored
    const Nanos t0 = 1_ms;
    s.on_pfc(xoff, t0, BitsPerSec::gbps(100));
    // 65535 x 512 bits at 100 Gbit/s = 335.5392 us, rounded up.
    EXPECT_EQ(s.until(3), t0 + Nanos{335540});
    EXPECT_TRUE(s.paused(3, t0 + 335_us));
    EXPECT_FALSE(s.paused(3, t0 + 336_us));
    EXPECT_FALSE(s.paused(4, t0));
    EXPECT_EQ(s.xoff_frames(3), 1u);

    PfcFrameDesc xon;
    xon.class_enable = 1 << 3;
    s.on_pfc(xoff, t0, BitsPerSec::gbps(10));
    EXPECT_TRUE(s.paused(3, t0 + 3_ms));  // ten times longer at 10 Gbit/s
    s.on_pfc(xon, t0 + 10_us, BitsPerSec::gbps(10));
    EXPECT_FALSE(s.paused(3, t0 + 10_us));
    EXPECT_EQ(s.xon_frames(3), 1u);
}

}  // namespace
}  // namespace rocemu::sw::live
