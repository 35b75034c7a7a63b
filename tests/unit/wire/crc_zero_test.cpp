// crc32_zeros and icrc_zero_payload against the CRC run over real zero
// buffers: every length up to past a jumbo frame's payload from many states,
// and the ICRC of real RoCEv2 frames with zero payloads of many sizes.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "dataplane/wire/crc32.hpp"
#include "dataplane/wire/crc_zero.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocemu::wire {
namespace {

TEST(CrcZero, EqualsTheCrcOverZeroBytesForEveryLengthAndManyStates) {
    const std::vector<uint8_t> zeros(9300, 0);
    std::mt19937 rng(7);
    std::vector<uint32_t> states = {0u, 0xFFFFFFFFu, kIcrcSeed, 0x80000000u, 1u};
    for (int i = 0; i < 6; ++i) states.push_back(static_cast<uint32_t>(rng()));
    for (const uint32_t s : states)
        for (size_t n = 0; n <= zeros.size(); ++n)
            ASSERT_EQ(crc32_zeros(s, n), crc32_update(s, zeros.data(), n)) << "state " << s << " n " << n;
}

// Lengths past what a buffer can check: extending by a then by b must equal
// extending by a + b, for random splits whose carries cross every bit of the
// count; a wrong power for any bit breaks this for some split.
TEST(CrcZero, ExtensionsComposeForRandomLengthsAcrossEveryBit) {
    std::mt19937_64 rng(11);
    for (int i = 0; i < 2000; ++i) {
        const uint32_t s = static_cast<uint32_t>(rng());
        const int bits = 1 + i % 62;
        const uint64_t a = rng() >> (64 - bits), b = rng() >> (64 - bits);
        ASSERT_EQ(crc32_zeros(crc32_zeros(s, a), b), crc32_zeros(s, a + b)) << "a " << a << " b " << b;
    }
}

// The carry-less multiplication crc32_zeros takes at run time (where the
// CPU has it) against the bit loop it takes at compile time, and the loop
// against itself at compile time: over random and edge operands.
TEST(CrcZero, ClmulMultiplicationEqualsTheBitLoop) {
    static_assert(crc32_zeros(0x12345678u, 4096) == crc_zero_detail::mul_mod_p(crc_zero_detail::kZeroBytePowers[12],
                                                                                 0x12345678u));
#if defined(__x86_64__)
    if (!crc_zero_detail::has_clmul()) GTEST_SKIP() << "no PCLMULQDQ on this CPU";
    std::mt19937 rng(5);
    std::vector<uint32_t> edge = {0u, 1u, 0x80000000u, 0xFFFFFFFFu, crc_zero_detail::kPoly};
    for (const uint32_t a : edge)
        for (const uint32_t b : edge)
            ASSERT_EQ(crc_zero_detail::mul_mod_p_clmul(a, b), crc_zero_detail::mul_mod_p(a, b)) << a << " * " << b;
    for (int i = 0; i < 200000; ++i) {
        const uint32_t a = static_cast<uint32_t>(rng()), b = static_cast<uint32_t>(rng());
        ASSERT_EQ(crc_zero_detail::mul_mod_p_clmul(a, b), crc_zero_detail::mul_mod_p(a, b)) << a << " * " << b;
    }
#else
    GTEST_SKIP() << "x86-64 only";
#endif
}

TEST(CrcZero, IcrcOfZeroPayloadFramesEqualsTheFullIcrc) {
    for (const bool v6 : {false, true})
        // Last or only packets, so that every length (with its pad) is valid.
        for (const uint8_t opcode : {op::WRITE_ONLY, op::WRITE_LAST, op::SEND_ONLY})
            for (uint32_t len = 0; len <= 4100; len += (len < 80 ? 1 : 97)) {
                RocePacket p;
                p.l3.v6 = v6;
                p.l3.src = v6 ? IpAddr{} : IpAddr::from_v4(0x0A000001);
                p.l3.dst = v6 ? IpAddr{} : IpAddr::from_v4(0x0A000002);
                p.l3.ecn = ecn::kEct0;
                p.bth.opcode = opcode;
                p.bth.psn = Psn{len * 31};
                p.bth.dqpn = Qpn{0x101};
                p.reth.rkey = 0x1234;
                p.reth.dma_len = len;
                const std::vector<uint8_t> payload(len, 0);
                p.payload = payload.data();
                p.payload_len = len;
                std::vector<uint8_t> f(roce_frame_len(p));
                ASSERT_EQ(encode_roce(p, f), f.size());
                RocePacket q;
                ASSERT_EQ(parse_roce(f, q), ParseError::Ok);
                const size_t hdr = static_cast<size_t>(q.payload - f.data()) - q.l3_off;
                const size_t zeros = q.frame_len - 4 - q.l3_off - hdr;
                EXPECT_EQ(icrc_zero_payload(f.data() + q.l3_off, hdr, zeros, v6), q.icrc)
                    << "v6 " << v6 << " opcode " << int{opcode} << " len " << len;
            }
}

TEST(CrcZero, ANonZeroPayloadByteIsNotWhatTheZeroIcrcAssumes) {
    RocePacket p;
    p.l3.src = IpAddr::from_v4(0x0A000001);
    p.l3.dst = IpAddr::from_v4(0x0A000002);
    p.bth.opcode = op::WRITE_MIDDLE;
    std::vector<uint8_t> payload(1024, 0);
    payload[517] = 0x40;
    p.payload = payload.data();
    p.payload_len = 1024;
    std::vector<uint8_t> f(roce_frame_len(p));
    ASSERT_EQ(encode_roce(p, f), f.size());
    RocePacket q;
    ASSERT_EQ(parse_roce(f, q), ParseError::Ok);
    const size_t hdr = static_cast<size_t>(q.payload - f.data()) - q.l3_off;
    EXPECT_NE(icrc_zero_payload(f.data() + q.l3_off, hdr, 1024, false), q.icrc);
}

}  // namespace
}  // namespace rocemu::wire
