#include "sim/frame_pool.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <utility>
#include <vector>

namespace rocemu::sim {
namespace {

TEST(SimFramePool, GrowsLazilyUpToItsLimit) {
    FramePool pool(1000);  // rounds up to 4 chunks of 256
    EXPECT_EQ(pool.allocated(), 0u);
    EXPECT_EQ(pool.max_frames(), 1024u);
    std::set<uint32_t> seen;
    for (uint32_t i = 0; i < 1024; ++i) {
        const FrameHandle h = pool.alloc();
        ASSERT_TRUE(h.valid());
        EXPECT_TRUE(seen.insert(h.v).second) << "handle " << h.v << " handed out twice";
    }
    EXPECT_EQ(pool.allocated(), 1024u);
    EXPECT_EQ(pool.in_use(), 1024u);
    EXPECT_FALSE(pool.alloc().valid());
    EXPECT_FALSE(pool.alloc().valid());
    EXPECT_EQ(pool.alloc_failures(), 2u);
}

TEST(SimFramePool, FreedHandlesAreReusedWithoutGrowing) {
    FramePool pool(512);
    std::vector<FrameHandle> hs;
    for (int i = 0; i < 200; ++i) hs.push_back(pool.alloc());
    const uint32_t grown = pool.allocated();
    for (int round = 0; round < 1000; ++round) {
        pool.free(hs[round % hs.size()]);
        hs[round % hs.size()] = pool.alloc();
        ASSERT_TRUE(hs[round % hs.size()].valid());
    }
    EXPECT_EQ(pool.allocated(), grown);
    EXPECT_EQ(pool.in_use(), 200u);
}

TEST(SimFramePool, FramesKeepTheirOwnBytes) {
    FramePool pool(600);
    std::vector<FrameHandle> hs;
    for (uint32_t i = 0; i < 600; ++i) {
        const FrameHandle h = pool.alloc();
        ASSERT_TRUE(h.valid());
        auto buf = pool.buffer(h);
        ASSERT_EQ(buf.size(), FramePool::kFrameCapacity);
        const uint32_t len = 60 + i * 13 % (FramePool::kFrameCapacity - 60);
        std::fill_n(buf.begin(), len, static_cast<uint8_t>(i));
        buf[FramePool::kFrameCapacity - 1] = static_cast<uint8_t>(i + 1);
        pool.set_len(h, len);
        hs.push_back(h);
    }
    for (uint32_t i = 0; i < 600; ++i) {
        const auto f = pool.frame(hs[i]);
        ASSERT_EQ(f.size(), 60 + i * 13 % (FramePool::kFrameCapacity - 60));
        EXPECT_TRUE(std::all_of(f.begin(), f.end(), [&](uint8_t b) { return b == static_cast<uint8_t>(i); }));
        EXPECT_EQ(pool.buffer(hs[i])[FramePool::kFrameCapacity - 1], static_cast<uint8_t>(i + 1));
    }
}

// Each buffer's length and zero-knowledge live next to its bytes: writing
// a whole buffer, last byte included, must leave every other buffer's alone.
TEST(SimFramePool, WholeBufferWritesLeaveOtherBuffersStateAlone) {
    FramePool pool(512);
    std::vector<FrameHandle> hs;
    for (uint32_t i = 0; i < 512; ++i) {
        hs.push_back(pool.alloc());
        ASSERT_TRUE(hs.back().valid());
    }
    for (uint32_t i = 0; i < 512; i += 2) {
        pool.with_zero_payload(hs[i + 1], 100, 4200);  // odd ones: a zero payload, 4200 long
        auto buf = pool.buffer(hs[i]);                 // even ones: every byte written
        std::fill(buf.begin(), buf.end(), uint8_t{0xFF});
        pool.set_len(hs[i], FramePool::kFrameCapacity);
    }
    for (uint32_t i = 0; i < 512; i += 2) {
        EXPECT_EQ(pool.len(hs[i]), FramePool::kFrameCapacity);
        EXPECT_FALSE(pool.zero_between(hs[i], 100, 4196));
        EXPECT_EQ(pool.len(hs[i + 1]), 4200u);
        EXPECT_TRUE(pool.zero_between(hs[i + 1], 100, 4196));
        const auto f = pool.frame(hs[i + 1]);
        EXPECT_TRUE(std::all_of(f.begin() + 100, f.begin() + 4196, [](uint8_t b) { return b == 0; }));
    }
}

TEST(SimFramePool, CloneCopiesBytesAndLength) {
    FramePool pool(256);
    const FrameHandle a = pool.alloc();
    auto buf = pool.buffer(a);
    for (int i = 0; i < 100; ++i) buf[i] = static_cast<uint8_t>(i * 3);
    pool.set_len(a, 100);
    const FrameHandle b = pool.clone(a);
    ASSERT_TRUE(b.valid());
    EXPECT_NE(a, b);
    EXPECT_TRUE(std::ranges::equal(pool.frame(a), pool.frame(b)));
    pool.buffer(a, 1)[0] = 0xFF;
    EXPECT_EQ(pool.frame(b)[0], 0);
    EXPECT_EQ(pool.in_use(), 2u);
}

// --- What the pool knows to be zero --------------------------------------

// The first byte of the buffer that is not zero although the pool says it
// is, or -1 if what the pool knows holds for the whole buffer.
int wrongly_zero(FramePool& pool, FrameHandle h) {
    const uint32_t len = pool.len(h);
    pool.set_len(h, FramePool::kFrameCapacity);
    const std::span<const uint8_t> all = std::as_const(pool).frame(h);
    int bad = -1;
    for (uint32_t i = 0; i < all.size() && bad < 0; ++i)
        if (all[i] != 0 && pool.zero_between(h, i, i + 1)) bad = static_cast<int>(i);
    pool.set_len(h, len);
    return bad;
}

bool all_zero(std::span<const uint8_t> s) {
    return std::ranges::all_of(s, [](uint8_t b) { return b == 0; });
}

// A generator-style frame: a zero payload after `hdr` header bytes of 0x11,
// and its last 4 bytes (the ICRC) 0xEE.
std::span<uint8_t> written_frame(FramePool& pool, FrameHandle h, uint32_t hdr, uint32_t len) {
    const auto f = pool.with_zero_payload(h, hdr, len);
    std::fill_n(f.begin(), hdr, uint8_t{0x11});
    std::fill_n(f.begin() + len - 4, 4, uint8_t{0xEE});
    return f;
}

TEST(SimFramePoolZero, AFreshFrameIsKnownZero) {
    FramePool pool(256);
    const FrameHandle h = pool.alloc();
    EXPECT_TRUE(pool.zero_between(h, 0, FramePool::kFrameCapacity));
}

TEST(SimFramePoolZero, BufferCountsWhatItHandsOutAsWritten) {
    FramePool pool(256);
    const FrameHandle h = pool.alloc();
    const auto b = pool.buffer(h, 100);
    ASSERT_EQ(b.size(), 100u);
    std::fill(b.begin(), b.end(), uint8_t{0x5A});
    EXPECT_FALSE(pool.zero_between(h, 99, 100));
    EXPECT_TRUE(pool.zero_between(h, 100, FramePool::kFrameCapacity));
    EXPECT_EQ(wrongly_zero(pool, h), -1);
    // The whole buffer by default.
    pool.buffer(h)[FramePool::kFrameCapacity - 1] = 1;
    EXPECT_FALSE(pool.zero_between(h, FramePool::kFrameCapacity - 1, FramePool::kFrameCapacity));
    EXPECT_EQ(wrongly_zero(pool, h), -1);
}

TEST(SimFramePoolZero, HeaderEditsCountOnlyTheHeaderAndStopAtTheFrame) {
    FramePool pool(256);
    const FrameHandle h = pool.alloc();
    const auto f = pool.with_zero_payload(h, 54, 1078);
    std::fill_n(f.begin(), 54, uint8_t{0x11});
    std::fill_n(f.begin() + 1074, 4, uint8_t{0x22});
    EXPECT_EQ(pool.header(h, 34).size(), 34u);
    EXPECT_TRUE(pool.zero_between(h, 54, 1074));
    // Asked for more than the frame: only the frame's bytes.
    pool.set_len(h, 40);
    EXPECT_EQ(pool.header(h, 100).size(), 40u);
    EXPECT_TRUE(pool.zero_between(h, 54, 1074));
    pool.set_len(h, 1078);
    const auto more = pool.header(h, 60);
    more[59] = 7;
    EXPECT_FALSE(pool.zero_between(h, 54, 1074));
    EXPECT_TRUE(pool.zero_between(h, 60, 1074));
    EXPECT_EQ(wrongly_zero(pool, h), -1);
}

TEST(SimFramePoolZero, ZeroPayloadClearsALongerOldPrefix) {
    FramePool pool(256);
    const FrameHandle h = pool.alloc();
    const auto b = pool.buffer(h);
    std::fill(b.begin(), b.end(), uint8_t{0xAB});
    const auto f = pool.with_zero_payload(h, 70, 4170);
    ASSERT_EQ(f.size(), 4170u);
    EXPECT_EQ(pool.len(h), 4170u);
    EXPECT_TRUE(all_zero(f.subspan(70, 4096)));
    EXPECT_TRUE(pool.zero_between(h, 70, 4166));
    // The island (ICRC) is the caller's to write; everything past the frame is zero now.
    EXPECT_TRUE(pool.zero_between(h, 4170, FramePool::kFrameCapacity));
    std::fill_n(f.begin() + 4166, 4, uint8_t{0xCD});
    EXPECT_FALSE(pool.zero_between(h, 70, 4167));
    EXPECT_EQ(wrongly_zero(pool, h), -1);
}

TEST(SimFramePoolZero, ZeroPayloadClearsAnOldIslandInsideTheNewPayload) {
    FramePool pool(256);
    const FrameHandle h = pool.alloc();
    auto f = written_frame(pool, h, 54, 2102);
    pool.free(h);
    ASSERT_EQ(pool.alloc(), h);  // LIFO: the same buffer, old bytes and all
    // A longer frame: the old ICRC now sits in the middle of the payload.
    f = pool.with_zero_payload(h, 54, 4154);
    EXPECT_TRUE(all_zero(f.subspan(54, 4154 - 4 - 54)));
    std::fill_n(f.begin() + 4150, 4, uint8_t{0xEE});
    EXPECT_EQ(wrongly_zero(pool, h), -1);
    // A shorter one: the old ICRC lies past it and is cleared too.
    f = pool.with_zero_payload(h, 54, 1078);
    EXPECT_TRUE(all_zero(f.subspan(54, 1078 - 4 - 54)));
    std::fill_n(f.begin() + 1074, 4, uint8_t{0xEE});
    EXPECT_EQ(wrongly_zero(pool, h), -1);
    EXPECT_TRUE(pool.zero_between(h, 1078, FramePool::kFrameCapacity));
}

// The transport engine writes first and leaves its zero payload to the pool
// (settle_zero_payload): an old ICRC that half overlaps the new one is
// cleared where it lies outside it, and the new ICRC is kept.
TEST(SimFramePoolZero, SettlingAZeroPayloadKeepsTheNewIcrcAndClearsTheOldOne) {
    FramePool pool(256);
    const FrameHandle h = pool.alloc();
    written_frame(pool, h, 54, 1078);  // ICRC 0xEE at [1074, 1078)
    auto b = pool.unmarked_buffer(h);
    std::fill_n(b.begin(), 70, uint8_t{0x55});
    std::fill_n(b.begin() + 1076, 4, uint8_t{0x66});  // the new ICRC at [1076, 1080)
    pool.settle_zero_payload(h, 70, 1080);
    const auto f = pool.frame(h);
    ASSERT_EQ(f.size(), 1080u);
    EXPECT_TRUE(all_zero(f.subspan(70, 1076 - 70))) << "the payload, with the old ICRC's first half";
    EXPECT_EQ(f[1076], 0x66);
    EXPECT_EQ(f[1079], 0x66);
    EXPECT_EQ(pool.zero_from(h), 70u);
    EXPECT_EQ(wrongly_zero(pool, h), -1);
    // A longer old prefix past the new frame is cleared as well.
    pool.buffer(h, 4000);
    std::fill_n(pool.unmarked_buffer(h).begin(), 4000, uint8_t{0x77});
    b = pool.unmarked_buffer(h);
    std::fill_n(b.begin(), 58, uint8_t{0x55});
    std::fill_n(b.begin() + 1074, 4, uint8_t{0x66});
    pool.settle_zero_payload(h, 58, 1078);
    EXPECT_TRUE(all_zero(pool.frame(h).subspan(58, 1074 - 58)));
    EXPECT_EQ(wrongly_zero(pool, h), -1);
    pool.set_len(h, FramePool::kFrameCapacity);
    EXPECT_TRUE(all_zero(pool.frame(h).subspan(1078)));
}

TEST(SimFramePoolZero, AWriteOverTheIslandSwallowsIt) {
    FramePool pool(256);
    const FrameHandle h = pool.alloc();
    auto f = pool.with_zero_payload(h, 54, 1078);
    std::fill_n(f.begin() + 1074, 4, uint8_t{0xEE});
    pool.buffer(h, 1076);  // ends inside the island
    EXPECT_FALSE(pool.zero_between(h, 1077, 1078));
    EXPECT_TRUE(pool.zero_between(h, 1078, FramePool::kFrameCapacity));
    EXPECT_EQ(wrongly_zero(pool, h), -1);
}

TEST(SimFramePoolZero, ACloneIsWrittenUpToItsLength) {
    FramePool pool(256);
    const FrameHandle a = pool.alloc();
    written_frame(pool, a, 54, 1078);
    const FrameHandle b = pool.clone(a);
    ASSERT_TRUE(b.valid());
    EXPECT_FALSE(pool.zero_between(b, 1074, 1078));
    EXPECT_TRUE(pool.zero_between(b, 1078, FramePool::kFrameCapacity));
    EXPECT_EQ(wrongly_zero(pool, b), -1);
}

// Every writer, in random order with random sizes, writing non-zero bytes
// wherever it is allowed to: what the pool knows must stay true, and a zero
// payload must read zero.
TEST(SimFramePoolZero, RandomWritersKeepTheKnowledgeTrue) {
    FramePool pool(256);
    std::mt19937 rng(11);
    std::vector<FrameHandle> hs;
    for (int i = 0; i < 4; ++i) hs.push_back(pool.alloc());
    auto pick = [&](uint32_t lo, uint32_t hi) { return lo + static_cast<uint32_t>(rng() % (hi - lo + 1)); };
    for (int step = 0; step < 3000; ++step) {
        FrameHandle& h = hs[rng() % hs.size()];
        switch (rng() % 9) {
            case 0: {  // a whole-buffer writer (engine frame, PFC, encode_roce)
                const uint32_t n = pick(1, FramePool::kFrameCapacity);
                const auto b = pool.buffer(h, n);
                for (int k = 0; k < 8; ++k) b[rng() % n] = static_cast<uint8_t>(1 + rng() % 255);
                pool.set_len(h, pick(0, n));
                break;
            }
            case 1: {  // a header edit
                const auto b = pool.header(h, pick(0, 80));
                if (!b.empty()) b[rng() % b.size()] = 0x7F;
                break;
            }
            case 2: {  // a generator frame
                const uint32_t flen = pick(64, FramePool::kFrameCapacity);
                const uint32_t off = pick(30, std::min<uint32_t>(90, flen - 4));
                const auto f = pool.with_zero_payload(h, off, flen);
                ASSERT_TRUE(all_zero(f.subspan(off, flen - 4 - off))) << step;
                std::fill_n(f.begin(), off, uint8_t{0x33});
                std::fill_n(f.begin() + flen - 4, 4, uint8_t{0x44});
                ASSERT_TRUE(pool.zero_between(h, off, flen - 4));
                break;
            }
            case 3: {  // a duplicate on a link
                const FrameHandle c = pool.clone(h);
                ASSERT_TRUE(c.valid());
                pool.free(h);
                h = c;
                break;
            }
            case 4:  // back to the pool and out again: the same bytes
                pool.free(h);
                h = pool.alloc();
                break;
            case 6: {  // the transport engine leaving a zero payload (TxFrame::defer_zeros)
                const uint32_t flen = pick(64, FramePool::kFrameCapacity);
                const uint32_t off = pick(30, std::min<uint32_t>(90, flen - 4));
                const auto b = pool.unmarked_buffer(h);
                std::fill_n(b.begin(), off, uint8_t{0x55});
                std::fill_n(b.begin() + flen - 4, 4, uint8_t{0x66});
                pool.settle_zero_payload(h, off, flen);
                ASSERT_EQ(pool.len(h), flen);
                ASSERT_TRUE(all_zero(pool.frame(h).subspan(off, flen - 4 - off))) << step;
                ASSERT_TRUE(std::ranges::all_of(pool.frame(h).subspan(flen - 4),
                                                [](uint8_t x) { return x == 0x66; }))
                    << "the ICRC it wrote is kept, step " << step;
                ASSERT_EQ(pool.zero_from(h), off) << step;
                break;
            }
            case 7: {  // the engine writing a whole frame and saying how much
                const uint32_t n = pick(1, FramePool::kFrameCapacity);
                const auto b = pool.unmarked_buffer(h);
                for (int k = 0; k < 8; ++k) b[rng() % n] = static_cast<uint8_t>(1 + rng() % 255);
                pool.written(h, n);
                pool.set_len(h, pick(0, n));
                break;
            }
            case 8: {  // sent compact if it can be, made whole again by a corrupting link
                const std::vector<uint8_t> before(pool.frame(h).begin(), pool.frame(h).end());
                const FrameHandle c = pool.compact(h);
                ASSERT_TRUE(std::ranges::equal(pool.frame(c), before)) << step;
                h = pool.whole(c);
                ASSERT_TRUE(std::ranges::equal(pool.frame(h), before)) << step;
                break;
            }
            default: {  // a corrupting link
                if (pool.len(h) == 0) break;
                const auto b = pool.buffer(h, pool.len(h));
                b[rng() % b.size()] ^= 0x01;
                break;
            }
        }
        ASSERT_EQ(wrongly_zero(pool, h), -1) << "step " << step;
        // zero_from (what a receiving engine is told) holds too.
        const uint32_t len = pool.len(h);
        if (len >= 4 && pool.zero_from(h) < len - 4) {
            ASSERT_TRUE(all_zero(pool.frame(h).subspan(pool.zero_from(h), len - 4 - pool.zero_from(h))))
                << "step " << step;
        }
    }
}


// --- Compact frames --------------------------------------------------------

// The bytes a frame of `len` with head bytes `head_byte` up to `head`, zeros,
// and an ICRC of `icrc_byte` has.
std::vector<uint8_t> expected_frame(uint32_t head, uint32_t len, uint8_t head_byte, uint8_t icrc_byte) {
    std::vector<uint8_t> f(len, 0);
    std::fill_n(f.begin(), head, head_byte);
    std::fill_n(f.end() - 4, 4, icrc_byte);
    return f;
}

FrameHandle zero_payload_frame(FramePool& pool, uint32_t head, uint32_t len, uint8_t head_byte, uint8_t icrc_byte) {
    const FramePool::ZeroPayload z = pool.alloc_zero_payload(head, len);
    if (!z.h.valid()) return z.h;
    EXPECT_EQ(z.head.size(), head);
    std::fill(z.head.begin(), z.head.end(), head_byte);
    std::fill_n(z.icrc, 4, icrc_byte);
    return z.h;
}

TEST(SimFramePoolCompact, AZeroPayloadFrameWhoseHeadFitsIsCompact) {
    FramePool pool(256);
    const FrameHandle h = zero_payload_frame(pool, 70, 4170, 0x11, 0xEE);
    ASSERT_TRUE(h.valid());
    EXPECT_TRUE(h.compact());
    EXPECT_EQ(pool.len(h), 4170u);
    EXPECT_EQ(pool.headers(h).size(), 70u);
    EXPECT_TRUE(std::ranges::all_of(pool.headers(h), [](uint8_t b) { return b == 0x11; }));
    EXPECT_TRUE(std::ranges::equal(pool.frame(h), expected_frame(70, 4170, 0x11, 0xEE)));
    EXPECT_TRUE(pool.zero_between(h, 70, 4166));
    EXPECT_FALSE(pool.zero_between(h, 69, 4166));
    EXPECT_FALSE(pool.zero_between(h, 70, 4167));
    EXPECT_EQ(pool.zero_from(h), 70u);
    EXPECT_EQ(pool.in_use(), 1u);
    pool.free(h);
    EXPECT_EQ(pool.in_use(), 0u);
}

TEST(SimFramePoolCompact, AHeadLongerThanACompactSlotHoldsTakesAWholeSlot) {
    FramePool pool(256);
    const uint32_t head = FramePool::kCompactHead + 1;
    const FrameHandle h = zero_payload_frame(pool, head, 1200, 0x22, 0xDD);
    ASSERT_TRUE(h.valid());
    EXPECT_FALSE(h.compact());
    EXPECT_TRUE(std::ranges::equal(pool.frame(h), expected_frame(head, 1200, 0x22, 0xDD)));
    EXPECT_TRUE(pool.zero_between(h, head, 1196));
    EXPECT_EQ(wrongly_zero(pool, h), -1);
    // The longest head that fits does fit.
    const FrameHandle c = zero_payload_frame(pool, FramePool::kCompactHead, 1200, 0x22, 0xDD);
    EXPECT_TRUE(c.compact());
    EXPECT_TRUE(std::ranges::equal(pool.frame(c), expected_frame(FramePool::kCompactHead, 1200, 0x22, 0xDD)));
}

// One buffer holds every compact frame frame() expands: what a longer head
// or an ICRC elsewhere left in it must not show through the next one.
TEST(SimFramePoolCompact, ExpandingOneFrameAfterAnotherShowsOnlyItsOwnBytes) {
    FramePool pool(1024);
    std::mt19937 rng(7);
    std::vector<std::pair<FrameHandle, std::vector<uint8_t>>> frames;
    for (int i = 0; i < 400; ++i) {
        const uint32_t len = 8 + rng() % (FramePool::kFrameCapacity - 7);
        const uint32_t head = std::min<uint32_t>(rng() % (FramePool::kCompactHead + 1), len - 4);
        const auto hb = static_cast<uint8_t>(1 + rng() % 255), ib = static_cast<uint8_t>(1 + rng() % 255);
        const FrameHandle h = zero_payload_frame(pool, head, len, hb, ib);
        ASSERT_TRUE(h.compact());
        frames.emplace_back(h, expected_frame(head, len, hb, ib));
    }
    for (int round = 0; round < 3000; ++round) {
        const auto& [h, want] = frames[rng() % frames.size()];
        ASSERT_TRUE(std::ranges::equal(pool.frame(h), want)) << "round " << round;
    }
}

TEST(SimFramePoolCompact, CompactingAWholeFrameKeepsItsBytesAndFreesItsSlot) {
    FramePool pool(256);
    // The engine's way: written first, then the pool told where the zeros are.
    const FrameHandle w = pool.alloc();
    auto b = pool.unmarked_buffer(w);
    std::fill_n(b.begin(), 4000, uint8_t{0x77});  // an older frame's bytes
    pool.written(w, 4000);
    b = pool.unmarked_buffer(w);
    std::fill_n(b.begin(), 58, uint8_t{0x55});
    std::fill_n(b.begin() + 1074, 4, uint8_t{0x66});
    pool.settle_zero_payload(w, 58, 1078);
    const FrameHandle c = pool.compact(w);
    ASSERT_TRUE(c.compact());
    EXPECT_EQ(pool.in_use(), 1u);
    EXPECT_TRUE(std::ranges::equal(pool.frame(c), expected_frame(58, 1078, 0x55, 0x66)));
    EXPECT_EQ(pool.alloc(), w) << "the whole slot went back to the pool, to be taken next";

    // A short frame written whole (an ACK: a template's bytes beyond it):
    // all but its last 4 bytes are its head.
    const FrameHandle a = pool.alloc();
    std::fill_n(pool.buffer(a, 98).begin(), 98, uint8_t{0x31});
    pool.set_len(a, 62);
    const FrameHandle ca = pool.compact(a);
    ASSERT_TRUE(ca.compact());
    EXPECT_EQ(pool.headers(ca).size(), 58u);
    EXPECT_TRUE(std::ranges::equal(pool.frame(ca), std::vector<uint8_t>(62, 0x31)));

    // A payload not known to be zero stays whole.
    const FrameHandle p = pool.alloc();
    std::fill_n(pool.buffer(p, 1078).begin(), 1078, uint8_t{0x42});
    pool.set_len(p, 1078);
    EXPECT_EQ(pool.compact(p), p);
}

TEST(SimFramePoolCompact, MadeWholeAFrameCanBeWrittenAnywhere) {
    FramePool pool(256);
    // A whole slot with an older frame's bytes, freed, is what whole() takes.
    const FrameHandle old = pool.alloc();
    std::fill(pool.buffer(old).begin(), pool.buffer(old).end(), uint8_t{0x99});
    pool.free(old);
    const FrameHandle c = zero_payload_frame(pool, 54, 2102, 0x11, 0xEE);
    const FrameHandle w = pool.whole(c);
    EXPECT_FALSE(w.compact());
    EXPECT_EQ(w, old);
    EXPECT_EQ(pool.in_use(), 1u);
    EXPECT_TRUE(std::ranges::equal(pool.frame(w), expected_frame(54, 2102, 0x11, 0xEE)));
    EXPECT_EQ(wrongly_zero(pool, w), -1);
    pool.buffer(w, 2102)[1000] = 5;
    EXPECT_FALSE(pool.zero_between(w, 54, 2098));
    EXPECT_EQ(pool.whole(w), w);
}

TEST(SimFramePoolCompact, HeaderEditsOfACompactFrameStayInItsHead) {
    FramePool pool(256);
    const FrameHandle h = zero_payload_frame(pool, 54, 1078, 0x11, 0xEE);
    EXPECT_EQ(pool.header(h, 100).size(), 54u);
    pool.header(h, 34)[20] = 0x3C;
    std::vector<uint8_t> want = expected_frame(54, 1078, 0x11, 0xEE);
    want[20] = 0x3C;
    EXPECT_TRUE(std::ranges::equal(pool.frame(h), want));
    EXPECT_TRUE(pool.zero_between(h, 54, 1074));
}

TEST(SimFramePoolCompact, ACloneIsCompactAndIndependent) {
    FramePool pool(256);
    const FrameHandle a = zero_payload_frame(pool, 70, 4170, 0x11, 0xEE);
    const FrameHandle b = pool.clone(a);
    ASSERT_TRUE(b.valid());
    EXPECT_TRUE(b.compact());
    EXPECT_NE(a, b);
    pool.header(a, 1)[0] = 0;
    EXPECT_TRUE(std::ranges::equal(pool.frame(b), expected_frame(70, 4170, 0x11, 0xEE)));
    EXPECT_EQ(pool.in_use(), 2u);
}

// Compact and whole frames share one bound; replacing a frame by the other
// kind works at the bound.
TEST(SimFramePoolCompact, BothKindsShareTheLimit) {
    FramePool pool(256);
    std::vector<FrameHandle> hs;
    for (int i = 0; i < 200; ++i) hs.push_back(pool.alloc());
    for (int i = 0; i < 56; ++i) hs.push_back(zero_payload_frame(pool, 54, 1078, 1, 2));
    EXPECT_TRUE(std::ranges::all_of(hs, [](FrameHandle h) { return h.valid(); }));
    EXPECT_FALSE(pool.alloc_zero_payload(54, 1078).h.valid());
    EXPECT_FALSE(pool.alloc().valid());
    EXPECT_FALSE(pool.clone(hs.back()).valid());
    EXPECT_EQ(pool.alloc_failures(), 3u);
    const FrameHandle w = pool.whole(hs.back());
    EXPECT_FALSE(w.compact());
    const FrameHandle c = pool.compact(w);
    EXPECT_TRUE(c.compact());
    EXPECT_TRUE(std::ranges::equal(pool.frame(c), expected_frame(54, 1078, 1, 2)));
    EXPECT_EQ(pool.in_use(), 256u);
    EXPECT_EQ(pool.alloc_failures(), 3u);
}

}  // namespace
}  // namespace rocemu::sim
