// Golden decode of rxe's immediate-data and RNR frames, captured by rocemu on
// the tap in tests/interop/run.sh's rdma-ops-mtu1500 pairings (rdma_ops in
// the guest, path MTU 1024, -s 65536 -n 3; tests/interop/captures/README.md):
// the last packet of the 64 KiB RDMA WRITE WITH IMM, the three packets of the
// 3000 B SEND WITH IMM, and the RNR NAK rxe's responder sent for the SEND
// posted before its receive.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dataplane/pcap/pcap.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/opcode.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocemu::wire {
namespace {

std::vector<std::vector<uint8_t>> rxe_imm_frames() {
    pcap::Reader r(std::string(ROCEMU_INTEROP_CAPTURES_DIR) + "/rxe_imm_rnr.pcap");
    EXPECT_TRUE(r.ok()) << r.error();
    std::vector<std::vector<uint8_t>> out;
    pcap::Frame f;
    while (r.ok() && r.next(f)) out.push_back(f.data);
    return out;
}

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

TEST(RxeImm, ParsesRxeRnrNak) {
    const auto frames = rxe_imm_frames();
    ASSERT_EQ(frames.size(), 5u);
    RocePacket p;
    ASSERT_EQ(parse_roce(frames[4], p), ParseError::Ok);
    EXPECT_EQ(p.bth.opcode, op::ACKNOWLEDGE);
    EXPECT_EQ(p.aeth.syndrome & aeth::kTypeMask, aeth::kRnrNak);
    EXPECT_EQ(p.aeth.syndrome & 0x1F, 12) << "rdma_ops' min_rnr_timer";
    EXPECT_EQ(p.aeth.msn, 17u) << "3 x 5 operations, the WRITE WITH IMM and the SEND WITH IMM completed";
    EXPECT_EQ(compute_icrc(frames[4].data() + p.l3_off, p.frame_len - 4 - p.l3_off, p.l3.v6), p.icrc);
}

TEST(RxeImm, ReencodingReproducesEveryFrameByteForByte) {
    for (const auto& f : rxe_imm_frames()) {
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
