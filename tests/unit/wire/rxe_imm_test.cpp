// Golden decode of rxe's immediate-data and RNR frames, captured by rocemu on
// the tap in tests/interop/run.sh's rdma-ops-mtu1500 pairings (rdma_ops in
// the guest, path MTU 1024, -s 65536 -n 3; tests/interop/captures/README.md):
// the last packet of the 64 KiB RDMA WRITE WITH IMM, the three packets of the
// 3000 B SEND WITH IMM, and the RNR NAK rxe's responder sent for the SEND
// posted before its receive; and (rxe_write_only_imm_srq_rnr.pcap) a
// single-packet WRITE WITH IMM, its RNR retry and an empty-SRQ RNR NAK.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dataplane/pcap/pcap.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/opcode.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocemu::wire {
namespace {

std::vector<std::vector<uint8_t>> capture_frames(const char* name) {
    pcap::Reader r(std::string(ROCEMU_INTEROP_CAPTURES_DIR) + "/" + name);
    EXPECT_TRUE(r.ok()) << r.error();
    std::vector<std::vector<uint8_t>> out;
    pcap::Frame f;
    while (r.ok() && r.next(f)) out.push_back(f.data);
    return out;
}

std::vector<std::vector<uint8_t>> rxe_imm_frames() { return capture_frames("rxe_imm_rnr.pcap"); }

// rdma_ops' byte at offset j of the message of iteration i.
uint8_t pattern(int i, size_t j) { return static_cast<uint8_t>(static_cast<size_t>(i) * 131u + j * 7u + (j >> 8) + 1u); }

struct Want {
    uint8_t opcode;
    bool has_imm;
    uint32_t imm;
    uint32_t payload_len;
    int iteration;       // rdma_ops pattern of the payload
    size_t msg_offset;   // where this packet's payload sits in the message
};

TEST(RxeImm, ParsesOpcodeImmDtPayloadAndIcrcOfRxeFrames) {
    const auto frames = rxe_imm_frames();
    ASSERT_EQ(frames.size(), 5u);
    // -n 3: the WRITE WITH IMM carries pattern 3, the SEND WITH IMM pattern 4.
    const Want want[4] = {
        {op::WRITE_LAST_IMM, true, 0x1a2b3c4d, 1024, 3, 63 * 1024},
        {op::SEND_FIRST, false, 0, 1024, 4, 0},
        {op::SEND_MIDDLE, false, 0, 1024, 4, 1024},
        {op::SEND_LAST_IMM, true, 0x5e6f7081, 952, 4, 2048},
    };
    for (size_t k = 0; k < 4; ++k) {
        RocePacket p;
        ASSERT_EQ(parse_roce(frames[k], p), ParseError::Ok) << k;
        EXPECT_EQ(p.bth.opcode, want[k].opcode) << k;
        EXPECT_EQ(p.info().has(Hdr::ImmDt), want[k].has_imm) << k;
        EXPECT_EQ(p.imm, want[k].imm) << k;
        EXPECT_EQ(p.payload_len, want[k].payload_len) << k;
        for (uint32_t j = 0; j < p.payload_len; ++j)
            ASSERT_EQ(p.payload[j], pattern(want[k].iteration, want[k].msg_offset + j)) << k << " byte " << j;
        EXPECT_EQ(compute_icrc(frames[k].data() + p.l3_off, p.frame_len - 4 - p.l3_off, p.l3.v6), p.icrc) << k;
    }
    // ImmDt is big-endian on the wire: the 4 bytes before the payload.
    RocePacket w;
    ASSERT_EQ(parse_roce(frames[0], w), ParseError::Ok);
    const uint8_t be[4] = {0x1a, 0x2b, 0x3c, 0x4d};
    EXPECT_TRUE(std::equal(be, be + 4, w.payload - 4));
    // The SEND's packets carry consecutive PSNs.
    RocePacket a, b;
    ASSERT_EQ(parse_roce(frames[1], a), ParseError::Ok);
    ASSERT_EQ(parse_roce(frames[3], b), ParseError::Ok);
    EXPECT_EQ(Psn::diff(b.bth.psn, a.bth.psn), 2);
}

// An RNR NAK from rxe's responder: rdma_ops' min_rnr_timer, the MSN of the
// last completed message, a valid ICRC. Returns the parsed packet.
RocePacket expect_rxe_rnr_nak(const std::vector<uint8_t>& f, uint32_t msn, const char* why) {
    RocePacket p;
    EXPECT_EQ(parse_roce(f, p), ParseError::Ok);
    EXPECT_EQ(p.bth.opcode, op::ACKNOWLEDGE);
    EXPECT_EQ(p.aeth.syndrome & aeth::kTypeMask, aeth::kRnrNak);
    EXPECT_EQ(p.aeth.syndrome & 0x1F, 12) << "rdma_ops' min_rnr_timer";
    EXPECT_EQ(p.aeth.msn, msn) << why;
    EXPECT_EQ(compute_icrc(f.data() + p.l3_off, p.frame_len - 4 - p.l3_off, p.l3.v6), p.icrc);
    return p;
}

TEST(RxeImm, ParsesRxeRnrNak) {
    const auto frames = rxe_imm_frames();
    ASSERT_EQ(frames.size(), 5u);
    expect_rxe_rnr_nak(frames[4], 17, "3 x 5 operations, the WRITE WITH IMM and the SEND WITH IMM completed");
}

// rxe_write_only_imm_srq_rnr.pcap (run.sh --core, rdma-ops-srq-mtu1500,
// rdma_ops -q -s 4096 -n 1): rxe's single-packet WRITE WITH IMM that rocemu
// RNR-NAKed and rxe's retry of it, then the RNR NAK rxe's responder sent when
// rocemu's single-packet WRITE WITH IMM met its empty SRQ.
TEST(RxeImm, ParsesRxeWriteOnlyWithImmItsRnrRetryAndAnEmptySrqNak) {
    const auto frames = capture_frames("rxe_write_only_imm_srq_rnr.pcap");
    ASSERT_EQ(frames.size(), 3u);
    RocePacket first, retry;
    ASSERT_EQ(parse_roce(frames[0], first), ParseError::Ok);
    ASSERT_EQ(parse_roce(frames[1], retry), ParseError::Ok);
    for (const RocePacket* p : {&first, &retry}) {
        EXPECT_EQ(p->bth.opcode, op::WRITE_ONLY_IMM);
        EXPECT_TRUE(p->info().has(Hdr::Reth));
        EXPECT_TRUE(p->info().has(Hdr::ImmDt));
        EXPECT_EQ(p->reth.va, 0x564990fb3010u);
        EXPECT_EQ(p->reth.rkey, 0x101u);
        EXPECT_EQ(p->reth.dma_len, 256u);
        EXPECT_EQ(p->imm, 0x6b7c8d9eu);
        ASSERT_EQ(p->payload_len, 256u);
        // -n 1: step 10 writes pattern n + 4 = 5.
        for (uint32_t j = 0; j < p->payload_len; ++j) ASSERT_EQ(p->payload[j], pattern(5, j)) << "byte " << j;
        // RETH, then ImmDt (big-endian), then the payload.
        const uint8_t be[4] = {0x6b, 0x7c, 0x8d, 0x9e};
        EXPECT_TRUE(std::equal(be, be + 4, p->payload - 4));
    }
    for (size_t k = 0; k < 2; ++k) {
        const RocePacket& p = k ? retry : first;
        EXPECT_EQ(compute_icrc(frames[k].data() + p.l3_off, p.frame_len - 4 - p.l3_off, p.l3.v6), p.icrc) << k;
    }
    // The retry is the same request: same PSN, nothing advanced.
    EXPECT_EQ(retry.bth.psn, first.bth.psn);
    EXPECT_EQ(retry.bth.psn.value(), 7054766u);
    const RocePacket nak =
        expect_rxe_rnr_nak(frames[2], 9, "5 operations, the WRITE WITH IMM, the SEND WITH IMM and two RNR steps completed");
    EXPECT_EQ(nak.bth.psn.value(), 6572294u) << "the PSN of the refused WRITE_ONLY_WITH_IMMEDIATE";
}

TEST(RxeImm, ReencodingReproducesEveryFrameByteForByte) {
    auto all = rxe_imm_frames();
    for (auto& f : capture_frames("rxe_write_only_imm_srq_rnr.pcap")) all.push_back(std::move(f));
    ASSERT_EQ(all.size(), 8u);
    for (const auto& f : all) {
        RocePacket p;
        ASSERT_EQ(parse_roce(f, p), ParseError::Ok);
        std::vector<uint8_t> out(f.size() + 64);
        const size_t n = encode_roce(p, out);
        ASSERT_EQ(n, p.frame_len);
        EXPECT_TRUE(std::equal(out.begin(), out.begin() + n, f.begin())) << "psn " << p.bth.psn.value();
        for (size_t i = n; i < f.size(); ++i) EXPECT_EQ(f[i], 0);
    }
}

}  // namespace
}  // namespace rocemu::wire
