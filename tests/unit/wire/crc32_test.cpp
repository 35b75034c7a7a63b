// The fused copy+CRC paths against a bit-at-a-time CRC-32, over every length
// around the thresholds and line boundaries, odd source and destination
// offsets and arbitrary states: the vector folding must give the same state
// as the definition, and the copies (and stream_copy's) must write exactly
// the destination span.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "dataplane/wire/crc32.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocemu::wire {
namespace {

uint32_t reference(uint32_t state, const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        state ^= p[i];
        for (int b = 0; b < 8; ++b) state = (state >> 1) ^ (0xEDB88320u & (0u - (state & 1)));
    }
    return state;
}

class Crc32 : public ::testing::Test {
protected:
    void SetUp() override {
        src.resize(10000);
        for (auto& b : src) b = static_cast<uint8_t>(rng());
    }

    // Checks one (length, offsets, state) case for all three entry points.
    void check(size_t n, size_t soff, size_t doff, uint32_t state) {
        const uint8_t* s = src.data() + soff;
        const uint32_t want = reference(state, s, n);
        ASSERT_EQ(crc32_update(state, s, n), want) << n;
        for (bool stream : {false, true}) {
            std::vector<uint8_t> dst(n + doff + 64, 0xA5);
            const uint32_t got = stream ? crc32_place(state, dst.data() + doff, s, n)
                                        : crc32_copy(state, dst.data() + doff, s, n, s + n);
            ASSERT_EQ(got, want) << "n " << n << " doff " << doff << " stream " << stream;
            ASSERT_TRUE(std::equal(s, s + n, dst.begin() + doff)) << n;
            for (size_t i = 0; i < doff; ++i) ASSERT_EQ(dst[i], 0xA5) << "wrote before the destination";
            for (size_t i = doff + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xA5) << "wrote past the destination";
        }
        // stream_copy: the same copy without the CRC.
        std::vector<uint8_t> dst(n + doff + 64, 0xA5);
        stream_copy(dst.data() + doff, s, n);
        ASSERT_TRUE(std::equal(s, s + n, dst.begin() + doff)) << "stream_copy n " << n << " doff " << doff;
        for (size_t i = 0; i < doff; ++i) ASSERT_EQ(dst[i], 0xA5) << "stream_copy wrote before the destination";
        for (size_t i = doff + n; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0xA5) << "stream_copy wrote past the destination";
    }

    std::mt19937 rng{7};
    std::vector<uint8_t> src;
};

TEST_F(Crc32, EveryLengthUpTo1100) {
    for (size_t n = 0; n <= 1100; ++n) check(n, n % 61, n % 67, static_cast<uint32_t>(rng()));
}

TEST_F(Crc32, RandomLengthsAndOffsets) {
    for (int i = 0; i < 2000; ++i) check(rng() % 9300, rng() % 64, rng() % 64, static_cast<uint32_t>(rng()));
}

TEST_F(Crc32, ChainedPiecesEqualOneCall) {
    const uint32_t whole = crc32_update(kIcrcSeed, src.data(), 5000);
    std::vector<uint8_t> dst(5000);
    uint32_t st = crc32_update(kIcrcSeed, src.data(), 77);
    st = crc32_copy(st, dst.data() + 77, src.data() + 77, 4000, src.data() + 5000);
    st = crc32_place(st, dst.data() + 4077, src.data() + 4077, 923);
    EXPECT_EQ(st, whole);
}

// ACKs in a row, each field that may vary drawn at random, a second peer now
// and then, and a byte outside the varying fields flipped now and then (as a
// corrupted frame): AckIcrc must always give the frame's own ICRC.
TEST(AckIcrc, EqualsTheFullIcrcWhateverChanges) {
    std::mt19937 rng(3);
    AckIcrc ack;
    std::vector<uint8_t> f(128);
    for (int i = 0; i < 20000; ++i) {
        RocePacket p;
        p.l3.src = IpAddr::from_v4(rng() % 16 == 0 ? 0x0A000099u : 0x0A000001u);
        p.l3.dst = IpAddr::from_v4(0x0A000002u);
        p.l3.ip_id = static_cast<uint16_t>(rng());
        p.l3.ecn = static_cast<uint8_t>(rng() % 4);
        p.l3.ttl = static_cast<uint8_t>(rng());
        p.udp_sport = static_cast<uint16_t>(0xC000 | (rng() & 0x3FFF));
        p.bth.opcode = op::ACKNOWLEDGE;
        p.bth.becn = rng() % 2;
        p.bth.dqpn = Qpn{static_cast<uint32_t>(rng())};
        p.bth.psn = Psn{static_cast<uint32_t>(rng())};
        p.aeth = {static_cast<uint8_t>(rng()), static_cast<uint32_t>(rng() & 0xFFFFFF)};
        f.resize(128);
        f.resize(encode_roce(p, f));
        ASSERT_EQ(f.size(), 14 + AckIcrc::kLen + 4);
        if (rng() % 16 == 0) f[14 + 12 + rng() % 4] ^= 0x10;  // an IP source byte: not a varying field
        const uint32_t want = compute_icrc(f.data() + 14, AckIcrc::kLen, false);
        ASSERT_EQ(ack(f.data() + 14), want) << i;
    }
}

}  // namespace
}  // namespace rocemu::wire

#if defined(__x86_64__)
#include <cpuid.h>
#include <isa-l/crc.h>

namespace rocemu::wire {
namespace {

// Whether the upper halves of the vector registers are in use (XINUSE bit 2,
// read with XGETBV ECX=1), or -1 where the CPU cannot say.
int upper_halves_in_use() {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(0xD, 1, &a, &b, &c, &d) || !(a & 4u)) return -1;  // XGETBV with ECX=1
    uint32_t lo = 0, hi = 0;
    asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    return (lo >> 2) & 1;
}

// ISA-L's AVX-512 CRC returns with the vector registers' upper halves dirty
// (no VZEROUPPER), which slows every legacy-SSE instruction after it;
// isal_crc32_gzip_refl, the project's only way to call it, leaves them clean.
TEST(IsalCrc32, LeavesTheVectorRegistersUpperHalvesClean) {
    std::vector<uint8_t> buf(4096, 0x5A);
    const uint32_t raw = crc32_gzip_refl(0, buf.data(), buf.size());
    const int dirty_after_raw = upper_halves_in_use();
    if (dirty_after_raw < 0) GTEST_SKIP() << "the CPU does not report XINUSE";
    const uint32_t ours = isal_crc32_gzip_refl(0, buf.data(), buf.size());
    EXPECT_EQ(ours, raw);
    EXPECT_EQ(upper_halves_in_use(), 0);
    if (dirty_after_raw == 0) GTEST_SKIP() << "this machine's ISA-L left them clean itself (no AVX-512 path)";
}

}  // namespace
}  // namespace rocemu::wire
#endif
