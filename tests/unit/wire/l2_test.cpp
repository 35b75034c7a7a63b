#include <gtest/gtest.h>

#include <vector>

#include "dataplane/wire/l2.hpp"

namespace rocemu::wire {
namespace {

const MacAddr kMacA{{0x02, 0, 0, 0, 0, 0x0a}};
const MacAddr kMacB{{0x02, 0, 0, 0, 0, 0x0b}};

TEST(Arp, RequestAndReplyRoundTrip) {
    for (bool vlan : {false, true}) {
        L2 l2;
        l2.src = kMacA;
        l2.dst = MacAddr::broadcast();
        l2.vlan = vlan;
        l2.vid = 100;
        l2.pcp = 3;
        Arp req{kArpRequest, kMacA, MacAddr{}, 0x0A000001, 0x0A000002};
        std::vector<uint8_t> f(64);
        const size_t n = encode_arp(l2, req, f);
        ASSERT_EQ(n, vlan ? 46u : 42u);
        f.resize(n);
        EXPECT_EQ(classify(f), FrameKind::Arp);
        L2 l2b;
        Arp got;
        ASSERT_TRUE(parse_arp(f, l2b, got));
        EXPECT_EQ(got.oper, kArpRequest);
        EXPECT_EQ(got.sha, kMacA);
        EXPECT_EQ(got.spa, 0x0A000001u);
        EXPECT_EQ(got.tpa, 0x0A000002u);
        EXPECT_EQ(l2b.vlan, vlan);
        if (vlan) {
            EXPECT_EQ(l2b.pcp, 3);
        }
    }
}

TEST(Arp, TruncatedIsRejected) {
    L2 l2;
    l2.src = kMacA;
    std::vector<uint8_t> f(64);
    f.resize(encode_arp(l2, Arp{kArpReply, kMacA, kMacB, 1, 2}, f));
    for (size_t len = 0; len < f.size(); ++len) {
        std::vector<uint8_t> t(f.begin(), f.begin() + static_cast<long>(len));
        L2 l2b;
        Arp a;
        EXPECT_FALSE(parse_arp(t, l2b, a)) << len;
    }
}

TEST(Pfc, FrameLayoutFollows8021Qbb) {
    Pfc pfc;
    pfc.src = kMacA;
    pfc.class_enable = 0x18;  // priorities 3 and 4
    pfc.quanta[3] = 0xFFFF;
    pfc.quanta[4] = 0x1234;
    std::vector<uint8_t> f(64);
    ASSERT_EQ(encode_pfc(pfc, f), 60u);
    f.resize(60);
    EXPECT_EQ(f[0], 0x01);
    EXPECT_EQ(f[5], 0x01);
    EXPECT_EQ(f[12], 0x88);
    EXPECT_EQ(f[13], 0x08);
    EXPECT_EQ(f[14], 0x01);
    EXPECT_EQ(f[15], 0x01);
    EXPECT_EQ(f[16], 0x00);
    EXPECT_EQ(f[17], 0x18);
    EXPECT_EQ(f[18 + 6], 0xFF);  // priority 3's time
    EXPECT_EQ(f[18 + 8], 0x12);  // priority 4's time
    EXPECT_EQ(classify(f), FrameKind::Pfc);
    Pfc back;
    ASSERT_TRUE(parse_pfc(f, back));
    EXPECT_EQ(back.class_enable, 0x18);
    EXPECT_EQ(back.quanta, pfc.quanta);
    EXPECT_EQ(back.src, kMacA);
}

TEST(Ecn, MarkingKeepsTheIpv4ChecksumValid) {
    RocePacket p;
    p.l3.src = IpAddr::from_v4(0xC0A80001);
    p.l3.dst = IpAddr::from_v4(0xC0A80002);
    p.l3.dscp = 26;
    p.l3.ecn = ecn::kEct0;
    p.bth.opcode = op::ACKNOWLEDGE;
    std::vector<uint8_t> f(128);
    f.resize(encode_roce(p, f));
    ASSERT_TRUE(set_ip_ecn(f, ecn::kCe));
    RocePacket q;
    ASSERT_EQ(parse_roce(f, q), ParseError::Ok);  // IP checksum and ICRC both still good
    EXPECT_EQ(q.l3.ecn, ecn::kCe);
    EXPECT_EQ(q.l3.dscp, 26);
}

TEST(Ecn, MarkingIpv6AndTagged) {
    RocePacket p;
    p.l2.vlan = true;
    p.l2.vid = 7;
    p.l3.v6 = true;
    p.l3.src.b[0] = 0xfe;
    p.l3.dst.b[0] = 0xfe;
    p.l3.dscp = 3;
    p.l3.ecn = ecn::kEct0;
    p.bth.opcode = op::ACKNOWLEDGE;
    std::vector<uint8_t> f(128);
    f.resize(encode_roce(p, f));
    ASSERT_TRUE(set_ip_ecn(f, ecn::kCe));
    RocePacket q;
    ASSERT_EQ(parse_roce(f, q), ParseError::Ok);
    EXPECT_EQ(q.l3.ecn, ecn::kCe);
    EXPECT_EQ(q.l3.dscp, 3);
}

// The word-at-a-time checksum against RFC 1071's definition (big-endian
// 16-bit words, an odd last byte padded with zero), at every length and
// alignment up to 64 bytes.
TEST(IpChecksum, MatchesTheDefinition) {
    std::vector<uint8_t> buf(80);
    uint32_t x = 12345;
    for (auto& b : buf) b = static_cast<uint8_t>((x = x * 1103515245 + 12345) >> 16);
    for (size_t off = 0; off < 4; ++off) {
        for (size_t len = 0; len <= 64; ++len) {
            const uint8_t* p = buf.data() + off;
            uint32_t sum = 0;
            for (size_t i = 0; i < len; i += 2) sum += uint32_t{p[i]} << 8 | (i + 1 < len ? p[i + 1] : 0);
            while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
            EXPECT_EQ(ip_checksum(p, len), static_cast<uint16_t>(~sum)) << "len " << len << " off " << off;
        }
    }
    buf.assign(20, 0xFF);  // every word 0xFFFF: the sum stays 0xFFFF, the checksum 0
    EXPECT_EQ(ip_checksum(buf.data(), 20), 0);
}

}  // namespace
}  // namespace rocemu::wire
