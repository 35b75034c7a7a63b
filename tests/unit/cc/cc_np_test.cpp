#include <gtest/gtest.h>

#include <array>

#include "cc/dcqcn_np.hpp"

namespace rocemu::cc {
namespace {

using namespace rocemu::literals;

TEST(CcNp, FirstCeSendsCnpWithConfiguredMarking) {
    const DcqcnConfig cfg;
    DcqcnNp np(cfg);
    NpQpState qp{Qpn{0x123456}};
    const auto cnp = np.on_ce_packet(qp, 10_us);
    ASSERT_TRUE(cnp.has_value());
    EXPECT_EQ(cnp->dest_qpn, Qpn{0x123456});
    EXPECT_EQ(cnp->dscp, 48);
    EXPECT_EQ(cnp->pcp, 6);
    EXPECT_EQ(np.counters().cnp_sent, 1u);
}

TEST(CcNp, AtMostOneCnpPerQpPerInterval) {
    DcqcnConfig cfg;
    cfg.min_time_between_cnps = 50_us;
    DcqcnNp np(cfg);
    NpQpState qp{Qpn{7}};
    int sent = 0;
    // A CE packet every microsecond for 1 ms: one CNP per 50 us window.
    for (int us = 0; us < 1000; ++us) sent += np.on_ce_packet(qp, Nanos::from_us(us)).has_value();
    EXPECT_EQ(sent, 20);
    EXPECT_EQ(np.counters().cnp_suppressed_interval, 980u);
    EXPECT_EQ(np.counters().ce_packets, 1000u);
}

TEST(CcNp, IntervalBoundaryIsInclusive) {
    DcqcnConfig cfg;
    cfg.min_time_between_cnps = 2_us;
    DcqcnNp np(cfg);
    NpQpState qp{Qpn{7}};
    EXPECT_TRUE(np.on_ce_packet(qp, 100_us));
    EXPECT_FALSE(np.on_ce_packet(qp, 100_us + 1999_ns));
    EXPECT_TRUE(np.on_ce_packet(qp, 102_us));
}

TEST(CcNp, QpsAreLimitedIndependently) {
    DcqcnConfig cfg;
    cfg.min_time_between_cnps = 50_us;
    DcqcnNp np(cfg);
    NpQpState a{Qpn{1}}, b{Qpn{2}};
    EXPECT_TRUE(np.on_ce_packet(a, 1_us));
    EXPECT_TRUE(np.on_ce_packet(b, 2_us));
    EXPECT_FALSE(np.on_ce_packet(a, 3_us));
}

TEST(CcNp, ZeroIntervalSendsForEveryCePacket) {
    DcqcnConfig cfg;
    cfg.min_time_between_cnps = 0_us;
    DcqcnNp np(cfg);
    NpQpState qp{Qpn{1}};
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(np.on_ce_packet(qp, 1_us));
}

TEST(CcNp, PeerThatCannotTakeCnpsNeverGetsOne) {
    const DcqcnConfig cfg;
    DcqcnNp np(cfg);
    NpQpState rxe{Qpn{9}, false};
    for (int us = 0; us < 100; us += 10) EXPECT_FALSE(np.on_ce_packet(rxe, Nanos::from_us(us)));
    EXPECT_EQ(np.counters().cnp_sent, 0u);
    EXPECT_EQ(np.counters().cnp_suppressed_peer, 10u);
    EXPECT_EQ(np.dump(), "dcqcn np: ce 10 cnp sent 0 suppressed: interval 0 peer 10");
}

TEST(CcNp, CnpTransportBytesMatchTheWireFormat) {
    std::array<uint8_t, kCnpTransportBytes> buf;
    buf.fill(0xAA);
    encode_cnp_transport(Qpn{0xABCDEF}, buf);
    EXPECT_EQ(buf[0], 0x81);  // CNP opcode
    EXPECT_EQ(buf[1], 0x00);  // SE, M, pad, TVer all zero
    EXPECT_EQ(buf[2], 0xFF);  // P_Key
    EXPECT_EQ(buf[3], 0xFF);
    EXPECT_EQ(buf[4], 0x40);  // BECN
    EXPECT_EQ(buf[5], 0xAB);
    EXPECT_EQ(buf[6], 0xCD);
    EXPECT_EQ(buf[7], 0xEF);
    for (std::size_t i = 8; i < kCnpTransportBytes; ++i) EXPECT_EQ(buf[i], 0) << i;  // AckReq, PSN, reserved
    EXPECT_EQ(kCnpTransportBytes, 28u);
}

}  // namespace
}  // namespace rocemu::cc
