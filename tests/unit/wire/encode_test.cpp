// Encode/parse round trips for every opcode, and typed errors for malformed input.
#include <gtest/gtest.h>

#include <algorithm>
#include <span>
#include <vector>

#include "common/rng.hpp"
#include "dataplane/wire/header_template.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/l2.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocemu::wire {
namespace {

RocePacket random_packet(Rng& rng, uint8_t opcode, bool v6, bool vlan, std::vector<uint8_t>& payload) {
    RocePacket p;
    for (auto& b : p.l2.src.b) b = static_cast<uint8_t>(rng.next());
    for (auto& b : p.l2.dst.b) b = static_cast<uint8_t>(rng.next());
    p.l2.vlan = vlan;
    p.l2.pcp = static_cast<uint8_t>(rng.below(8));
    p.l2.vid = static_cast<uint16_t>(rng.below(4095) + 1);
    p.l3.v6 = v6;
    if (v6) {
        for (auto& b : p.l3.src.b) b = static_cast<uint8_t>(rng.next());
        for (auto& b : p.l3.dst.b) b = static_cast<uint8_t>(rng.next());
        p.l3.src.b[0] = 0xfe;  // keep it from looking IPv4-mapped
        p.l3.dst.b[0] = 0xfe;
        p.l3.flow_label = static_cast<uint32_t>(rng.below(1 << 20));
    } else {
        p.l3.src = IpAddr::from_v4(static_cast<uint32_t>(rng.next()));
        p.l3.dst = IpAddr::from_v4(static_cast<uint32_t>(rng.next()));
        p.l3.ip_id = static_cast<uint16_t>(rng.next());
    }
    p.l3.dscp = static_cast<uint8_t>(rng.below(64));
    p.l3.ecn = static_cast<uint8_t>(rng.below(4));
    p.l3.ttl = static_cast<uint8_t>(rng.below(255) + 1);
    p.udp_sport = static_cast<uint16_t>(0xC000 | rng.below(0x4000));
    p.bth.opcode = opcode;
    p.bth.se = rng.below(2);
    p.bth.fecn = rng.below(2);
    p.bth.becn = rng.below(2);
    p.bth.ackreq = rng.below(2);
    p.bth.dqpn = Qpn{static_cast<uint32_t>(rng.next())};
    p.bth.psn = Psn{static_cast<uint32_t>(rng.next())};
    p.reth = {rng.next(), static_cast<uint32_t>(rng.next()), static_cast<uint32_t>(rng.next())};
    p.aeth = {static_cast<uint8_t>(rng.next()), static_cast<uint32_t>(rng.below(1 << 24))};
    p.atomic = {rng.next(), static_cast<uint32_t>(rng.next()), rng.next(), rng.next()};
    p.atomic_ack = rng.next();
    p.deth = {static_cast<uint32_t>(rng.next()), Qpn{static_cast<uint32_t>(rng.next())}};
    p.imm = static_cast<uint32_t>(rng.next());
    p.ieth_rkey = static_cast<uint32_t>(rng.next());
    p.feth = static_cast<uint32_t>(rng.next());
    const OpcodeInfo& info = opcode_info(opcode);
    uint32_t len = 0;
    if (info.flags & kOpFixedPayload) len = 8;
    else if (info.flags & kOpPayload) {
        // Only the last packet of a message may be unaligned.
        len = static_cast<uint32_t>(rng.below(2049));
        if (!(info.flags & kOpLast)) len &= ~3u;
    }
    payload.resize(len);
    for (auto& b : payload) b = static_cast<uint8_t>(rng.next());
    p.payload = payload.data();
    p.payload_len = len;
    return p;
}

TEST(Encode, EveryOpcodeRoundTripsThroughParse) {
    Rng rng(42);
    int opcodes = 0;
    for (int op = 0; op < 256; ++op) {
        if (!opcode_info(static_cast<uint8_t>(op)).valid()) continue;
        ++opcodes;
        for (int variant = 0; variant < 8; ++variant) {
            std::vector<uint8_t> payload;
            const RocePacket p = random_packet(rng, static_cast<uint8_t>(op), variant & 1, variant & 2, payload);
            std::vector<uint8_t> frame(9216);
            const size_t n = encode_roce(p, frame);
            ASSERT_EQ(n, roce_frame_len(p));
            frame.resize(n);
            RocePacket q;
            ASSERT_EQ(parse_roce(frame, q), ParseError::Ok) << opcode_info(static_cast<uint8_t>(op)).name;
            EXPECT_EQ(q.bth.opcode, p.bth.opcode);
            EXPECT_EQ(q.bth.psn, p.bth.psn);
            EXPECT_EQ(q.bth.dqpn, p.bth.dqpn);
            EXPECT_EQ(q.bth.ackreq, p.bth.ackreq);
            EXPECT_EQ(q.bth.becn, p.bth.becn);
            EXPECT_EQ(q.l3.src, p.l3.src);
            EXPECT_EQ(q.l3.dst, p.l3.dst);
            EXPECT_EQ(q.l3.dscp, p.l3.dscp);
            EXPECT_EQ(q.l3.ecn, p.l3.ecn);
            EXPECT_EQ(q.l2.vlan, p.l2.vlan);
            if (p.l2.vlan) {
                EXPECT_EQ(q.l2.vid, p.l2.vid);
                EXPECT_EQ(q.l2.pcp, p.l2.pcp);
            }
            EXPECT_EQ(q.payload_len, p.payload_len);
            EXPECT_TRUE(std::equal(payload.begin(), payload.end(), q.payload));
            const OpcodeInfo& info = q.info();
            if (info.has(Hdr::Reth)) {
                EXPECT_EQ(q.reth.va, p.reth.va);
                EXPECT_EQ(q.reth.rkey, p.reth.rkey);
                EXPECT_EQ(q.reth.dma_len, p.reth.dma_len);
            }
            if (info.has(Hdr::AtomicEth)) {
                EXPECT_EQ(q.atomic.swap_add, p.atomic.swap_add);
                EXPECT_EQ(q.atomic.compare, p.atomic.compare);
            }
            if (info.has(Hdr::Aeth)) {
                EXPECT_EQ(q.aeth.syndrome, p.aeth.syndrome);
                EXPECT_EQ(q.aeth.msn, p.aeth.msn);
            }
            if (info.has(Hdr::AtomicAckEth)) {
                EXPECT_EQ(q.atomic_ack, p.atomic_ack);
            }
            if (info.has(Hdr::Deth)) {
                EXPECT_EQ(q.deth.qkey, p.deth.qkey);
                EXPECT_EQ(q.deth.src_qp, p.deth.src_qp);
            }
            if (info.has(Hdr::ImmDt)) {
                EXPECT_EQ(q.imm, p.imm);
            }
            if (info.has(Hdr::Ieth)) {
                EXPECT_EQ(q.ieth_rkey, p.ieth_rkey);
            }
            // Byte-exact: encoding the parse again gives the same frame.
            std::vector<uint8_t> again(9216);
            ASSERT_EQ(encode_roce(q, again), n);
            EXPECT_TRUE(std::equal(frame.begin(), frame.end(), again.begin()));
        }
    }
    EXPECT_EQ(opcodes, 25 + 12 + 2 + 1);  // RC (with FLUSH and ATOMIC_WRITE), UC, UD, CNP
}

// Headers alone into a buffer that holds them exactly, for every opcode,
// IPv4 or IPv6, tagged or not: the same bytes encode_roce_headers writes at
// the front of a whole frame, nothing past them; one byte less is refused.
TEST(Encode, HeadersAloneFillABufferOfTheirLengthExactly) {
    Rng rng(9);
    for (int op = 0; op < 256; ++op) {
        if (!opcode_info(static_cast<uint8_t>(op)).valid()) continue;
        for (int variant = 0; variant < 4; ++variant) {
            std::vector<uint8_t> payload;
            const RocePacket p = random_packet(rng, static_cast<uint8_t>(op), variant & 1, variant & 2, payload);
            std::vector<uint8_t> whole(roce_frame_len(p));
            EncodeLayout lw;
            ASSERT_TRUE(encode_roce_headers(p, whole, lw));
            std::vector<uint8_t> head(lw.payload_off + 16, 0xA5);
            EncodeLayout lh;
            EXPECT_FALSE(encode_roce_head(p, std::span(head).first(lw.payload_off - 1u), lh));
            ASSERT_TRUE(encode_roce_head(p, std::span(head).first(lw.payload_off), lh));
            EXPECT_EQ(lh.payload_off, lw.payload_off);
            EXPECT_EQ(lh.l3_off, lw.l3_off);
            EXPECT_EQ(lh.frame_len, lw.frame_len);
            EXPECT_EQ(lh.pad, lw.pad);
            EXPECT_TRUE(std::equal(whole.begin(), whole.begin() + lw.payload_off, head.begin()))
                << opcode_info(static_cast<uint8_t>(op)).name;
            EXPECT_TRUE(std::all_of(head.begin() + lw.payload_off, head.end(), [](uint8_t b) { return b == 0xA5; }));
        }
    }
}

// The engine parses every frame into the same packet: a frame must leave
// nothing of the one before (a tag, IPv6 fields, extended headers its opcode
// lacks). Parsed into a packet last used for a tagged IPv6 frame of every
// opcode, each frame gives what a fresh packet gives.
// The template's frame against the full recipe (encode_roce_headers, then
// the ICRC over the whole masked frame), over random addresses, versions,
// tags and every opcode with random changing fields: byte for byte equal,
// ICRC included.
// A chain's first segment must hold every header, extended ones included:
// with exactly that much the split parse reads what the flat parse reads,
// with one byte less it is SplitHeaders, never a read past the segment.
TEST(Encode, SplitParseNeedsEveryHeaderInTheFirstSegment) {
    Rng rng(7);
    for (int op = 0; op < 256; ++op) {
        const OpcodeInfo& info = opcode_info(static_cast<uint8_t>(op));
        if (!info.valid()) continue;
        for (int variant = 0; variant < 4; ++variant) {
            std::vector<uint8_t> payload;
            const RocePacket p = random_packet(rng, static_cast<uint8_t>(op), variant & 1, variant & 2, payload);
            std::vector<uint8_t> frame(9216);
            frame.resize(encode_roce(p, frame));
            RocePacket flat;
            ASSERT_EQ(parse_roce(frame, flat), ParseError::Ok) << info.name;
            const size_t headers = flat.bth_off + info.hdr_len;
            // A copy as long as the segment, so a read beyond it is ASan's to see.
            std::vector<uint8_t> first(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(headers));
            RocePacket q;
            ASSERT_EQ(parse_roce_split(first, frame.size(), q), ParseError::Ok) << info.name;
            EXPECT_EQ(q.payload, nullptr);
            EXPECT_EQ(q.frame_len, flat.frame_len);
            EXPECT_EQ(q.payload_len, flat.payload_len);
            EXPECT_EQ(q.bth.psn, flat.bth.psn);
            EXPECT_EQ(q.reth.va, flat.reth.va);
            EXPECT_EQ(q.reth.rkey, flat.reth.rkey);
            EXPECT_EQ(q.reth.dma_len, flat.reth.dma_len);
            EXPECT_EQ(q.deth.qkey, flat.deth.qkey);
            EXPECT_EQ(q.atomic.swap_add, flat.atomic.swap_add);
            EXPECT_EQ(q.imm, flat.imm);
            first.pop_back();
            EXPECT_EQ(parse_roce_split(first, frame.size(), q), ParseError::SplitHeaders) << info.name;
        }
    }
}

TEST(HeaderTemplate, StampsTheSameFrameAsTheFullEncoder) {
    Rng rng(7);
    int frames = 0;
    for (int base_i = 0; base_i < 64; ++base_i) {
        std::vector<uint8_t> unused;
        const RocePacket base = random_packet(rng, op::kRc + op::SEND_ONLY, base_i & 1, base_i & 2, unused);
        HeaderTemplate tpl;
        EXPECT_FALSE(tpl.valid());
        tpl.build(base);
        ASSERT_TRUE(tpl.valid());
        for (int op = 0; op < 256; ++op) {
            if (!opcode_info(static_cast<uint8_t>(op)).valid()) continue;
            std::vector<uint8_t> payload;
            RocePacket p = random_packet(rng, static_cast<uint8_t>(op), base.l3.v6, base.l2.vlan, payload);
            // What the template holds comes from the base packet.
            p.l2 = base.l2;
            p.l3.src = base.l3.src;
            p.l3.dst = base.l3.dst;
            p.l3.dscp = base.l3.dscp;
            p.l3.ecn = base.l3.ecn;
            p.l3.ttl = base.l3.ttl;
            p.l3.flow_label = base.l3.flow_label;
            p.bth.dqpn = base.bth.dqpn;
            if (p.l3.v6) p.l3.ip_id = 0;

            std::vector<uint8_t> want(9216), got(9216, 0xA5);
            const size_t n = encode_roce(p, want);
            ASSERT_NE(n, 0u);
            EncodeLayout lay;
            ASSERT_TRUE(tpl.write(p, got, lay));
            EXPECT_EQ(lay.frame_len, n);
            EXPECT_NE(lay.crc_off, 0);
            std::copy(payload.begin(), payload.end(), got.begin() + lay.payload_off);
            finish_roce(got, lay);
            ASSERT_TRUE(std::equal(want.begin(), want.begin() + n, got.begin()))
                << opcode_info(static_cast<uint8_t>(op)).name << " v6=" << p.l3.v6 << " vlan=" << p.l2.vlan;
            RocePacket q;
            ASSERT_EQ(parse_roce(std::span<const uint8_t>(got.data(), n), q), ParseError::Ok);
            ++frames;
        }
    }
    EXPECT_EQ(frames, 64 * 40);
}

// RxIcrc against compute_icrc over IPv4 frames of a few senders mixed at
// random (each frame a template's, its changing fields random), some with a
// random header byte flipped: equal every time, whichever path it took.
TEST(RxIcrc, EqualsTheFullIcrcOverMixedAndCorruptedFrames) {
    Rng rng(11);
    std::vector<RocePacket> bases;
    std::vector<HeaderTemplate> tpls(4);
    std::vector<uint8_t> unused;
    for (auto& t : tpls) {
        bases.push_back(random_packet(rng, op::kRc + op::SEND_ONLY, false, rng.below(2), unused));
        t.build(bases.back());
    }
    static constexpr uint8_t kOps[] = {op::SEND_ONLY, op::SEND_MIDDLE, op::WRITE_FIRST, op::WRITE_MIDDLE,
                                       op::WRITE_LAST_IMM, op::ACKNOWLEDGE, op::READ_RESPONSE_MIDDLE};
    RxIcrc rx;
    int flipped = 0;
    for (int i = 0; i < 4000; ++i) {
        // Runs of one sender, as a QP's burst, then another.
        const size_t who = (i / 7 + (rng.below(5) == 0 ? 1 : 0)) % tpls.size();
        std::vector<uint8_t> payload;
        const uint8_t opc = kOps[rng.below(std::size(kOps))];
        RocePacket p = random_packet(rng, opc, false, bases[who].l2.vlan, payload);
        std::vector<uint8_t> f(9216);
        EncodeLayout lay;
        ASSERT_TRUE(tpls[who].write(p, f, lay));
        std::copy(payload.begin(), payload.end(), f.begin() + lay.payload_off);
        finish_roce(f, lay);
        uint8_t* l3 = f.data() + lay.l3_off;
        const size_t len = lay.frame_len - kIcrcLen - lay.l3_off;
        if (rng.below(10) == 0) {
            l3[rng.below(RxIcrc::kLen)] ^= static_cast<uint8_t>(1 + rng.below(255));
            ++flipped;
        }
        ASSERT_EQ(rx(l3, len), compute_icrc(l3, len, false)) << "frame " << i;
    }
    EXPECT_GT(flipped, 100);
}

// A frame too short for the template's output is refused, as by the encoder.
TEST(HeaderTemplate, RefusesABufferTooSmall) {
    Rng rng(9);
    std::vector<uint8_t> payload;
    const RocePacket p = random_packet(rng, op::kRc + op::WRITE_ONLY, false, false, payload);
    HeaderTemplate tpl;
    tpl.build(p);
    std::vector<uint8_t> out(roce_frame_len(p) - 1);
    EncodeLayout lay;
    EXPECT_FALSE(tpl.write(p, out, lay));
    out.resize(roce_frame_len(p));
    EXPECT_TRUE(tpl.write(p, out, lay));
}

TEST(Encode, ParseIntoAUsedPacketKeepsNothing) {
    Rng rng(11);
    std::vector<uint8_t> pay_a, pay_b, fa(9216), fb(9216);
    for (int op = 0; op < 256; ++op) {
        if (!opcode_info(static_cast<uint8_t>(op)).valid()) continue;
        for (int prev = 0; prev < 256; ++prev) {
            if (!opcode_info(static_cast<uint8_t>(prev)).valid()) continue;
            RocePacket used;
            fa.resize(9216);
            fa.resize(encode_roce(random_packet(rng, static_cast<uint8_t>(prev), true, true, pay_a), fa));
            ASSERT_EQ(parse_roce(fa, used), ParseError::Ok);
            fb.resize(9216);
            fb.resize(encode_roce(random_packet(rng, static_cast<uint8_t>(op), false, false, pay_b), fb));
            RocePacket fresh;
            ASSERT_EQ(parse_roce(fb, fresh), ParseError::Ok);
            ASSERT_EQ(parse_roce(fb, used), ParseError::Ok);
            const RocePacket& a = used;
            const RocePacket& b = fresh;
            ASSERT_TRUE(a.l2.dst == b.l2.dst && a.l2.src == b.l2.src && a.l2.vlan == b.l2.vlan && a.l2.pcp == b.l2.pcp &&
                        a.l2.dei == b.l2.dei && a.l2.vid == b.l2.vid && a.l2.ethertype == b.l2.ethertype);
            ASSERT_TRUE(a.l3.v6 == b.l3.v6 && a.l3.src == b.l3.src && a.l3.dst == b.l3.dst && a.l3.dscp == b.l3.dscp &&
                        a.l3.ecn == b.l3.ecn && a.l3.ttl == b.l3.ttl && a.l3.ip_id == b.l3.ip_id &&
                        a.l3.frag == b.l3.frag && a.l3.flow_label == b.l3.flow_label);
            ASSERT_TRUE(a.reth.va == b.reth.va && a.reth.rkey == b.reth.rkey && a.reth.dma_len == b.reth.dma_len);
            ASSERT_TRUE(a.aeth.syndrome == b.aeth.syndrome && a.aeth.msn == b.aeth.msn);
            ASSERT_TRUE(a.atomic.va == b.atomic.va && a.atomic.rkey == b.atomic.rkey &&
                        a.atomic.swap_add == b.atomic.swap_add && a.atomic.compare == b.atomic.compare);
            ASSERT_TRUE(a.deth.qkey == b.deth.qkey && a.deth.src_qp == b.deth.src_qp);
            ASSERT_TRUE(a.atomic_ack == b.atomic_ack && a.imm == b.imm && a.ieth_rkey == b.ieth_rkey && a.feth == b.feth)
                << "opcode " << op << " after " << prev;
        }
    }
}

TEST(Encode, CnpMatchesTheRoceV2Layout) {
    RocePacket p;
    p.l3.src = IpAddr::from_v4(0x0A000001);
    p.l3.dst = IpAddr::from_v4(0x0A000002);
    p.l3.dscp = 48;
    p.bth.opcode = op::CNP;
    p.bth.becn = true;
    p.bth.dqpn = Qpn{0x11};
    std::vector<uint8_t> f(128);
    const size_t n = encode_roce(p, f);
    ASSERT_EQ(n, 14u + 20 + 8 + 12 + 16 + 4);
    const uint8_t* bth = f.data() + 42;
    EXPECT_EQ(bth[0], 0x81);
    EXPECT_EQ(bth[2], 0xFF);
    EXPECT_EQ(bth[3], 0xFF);
    EXPECT_EQ(bth[4], 0x40);
    for (int i = 12; i < 28; ++i) EXPECT_EQ(bth[i], 0) << i;
    EXPECT_EQ(f[15] >> 2, 48);
}

class Malformed : public ::testing::Test {
protected:
    void SetUp() override {
        p.l3.src = IpAddr::from_v4(0x0A000001);
        p.l3.dst = IpAddr::from_v4(0x0A000002);
        p.bth.opcode = op::SEND_ONLY;
        p.payload = payload.data();
        p.payload_len = 64;
        frame.resize(encode_roce(p, buf));
        std::copy(buf.begin(), buf.begin() + frame.size(), frame.begin());
    }
    // Parses `f`, first giving it a valid ICRC when asked, so the check under
    // test is the one that fires.
    static ParseError reparse(std::vector<uint8_t> f, bool fix_icrc = true) {
        if (fix_icrc) refresh_icrc(f);
        RocePacket q;
        return parse_roce(f, q);
    }
    std::vector<uint8_t> payload = std::vector<uint8_t>(64, 0xAB);
    std::vector<uint8_t> buf = std::vector<uint8_t>(256);
    std::vector<uint8_t> frame = std::vector<uint8_t>(256);
    RocePacket p;
};

TEST_F(Malformed, EveryTruncationIsTypedAndSafe) {
    for (size_t len = 0; len < frame.size(); ++len) {
        std::vector<uint8_t> f(frame.begin(), frame.begin() + static_cast<long>(len));
        RocePacket q;
        const ParseError e = parse_roce(f, q);
        EXPECT_NE(e, ParseError::Ok) << len;
        EXPECT_TRUE(e == ParseError::Truncated || e == ParseError::BadLength) << len << " " << to_string(e);
    }
    RocePacket q;
    EXPECT_EQ(parse_roce(frame, q), ParseError::Ok);
}

TEST_F(Malformed, TverNotZero) {
    auto f = frame;
    f[42 + 1] |= 0x01;
    EXPECT_EQ(reparse(f), ParseError::BadTver);
}

TEST_F(Malformed, ReservedOpcode) {
    for (uint8_t op : {0x15, 0x18, 0x2c, 0x40, 0x60, 0x66, 0x80, 0xC0, 0xFF}) {
        auto f = frame;
        f[42] = op;
        EXPECT_EQ(reparse(f), ParseError::ReservedOpcode) << int(op);
    }
}

TEST_F(Malformed, PadOnANonFinalPacket) {
    auto f = frame;
    f[42] = op::SEND_FIRST;
    f[43] |= 0x10;
    EXPECT_EQ(reparse(f), ParseError::BadPadCnt);
}

TEST_F(Malformed, PayloadOnAnAck) {
    auto f = frame;
    f[42] = op::ACKNOWLEDGE;
    EXPECT_EQ(reparse(f), ParseError::BadLength);
}

TEST_F(Malformed, UdpLengthDisagrees) {
    auto f = frame;
    f[38] ^= 0x01;
    EXPECT_EQ(reparse(f, false), ParseError::BadLength);
}

TEST_F(Malformed, IpChecksumWrong) {
    auto f = frame;
    f[24] ^= 0x01;
    EXPECT_EQ(reparse(f, false), ParseError::BadIpHeader);
}

TEST_F(Malformed, NotRoce) {
    auto f = frame;
    f[37] = 0x00;  // UDP destination port 4608
    EXPECT_EQ(reparse(f, false), ParseError::NotRoce);
    f = frame;
    f[12] = 0x88;  // EtherType 0x8800
    EXPECT_EQ(reparse(f, false), ParseError::NotIp);
}

TEST(OpcodeClass, ChecksMatchTheQpClass) {
    EXPECT_EQ(check_opcode_class(op::SEND_ONLY, QpClass::Rc), ParseError::Ok);
    EXPECT_EQ(check_opcode_class(op::kUc | op::SEND_ONLY, QpClass::Rc), ParseError::WrongQpClass);
    EXPECT_EQ(check_opcode_class(op::kUd | op::SEND_ONLY, QpClass::Ud), ParseError::Ok);
    EXPECT_EQ(check_opcode_class(op::kUd | op::SEND_FIRST, QpClass::Ud), ParseError::ReservedOpcode);
    EXPECT_EQ(check_opcode_class(op::kUc | op::READ_REQUEST, QpClass::Uc), ParseError::ReservedOpcode);
    EXPECT_EQ(check_opcode_class(op::CNP, QpClass::Rc), ParseError::WrongQpClass);
}

TEST(OpcodeTable, HeaderLengthsMatchIbta) {
    EXPECT_EQ(opcode_info(op::SEND_ONLY).hdr_len, 12);
    EXPECT_EQ(opcode_info(op::WRITE_ONLY_IMM).hdr_len, 12 + 16 + 4);
    EXPECT_EQ(opcode_info(op::READ_RESPONSE_MIDDLE).hdr_len, 12);
    EXPECT_EQ(opcode_info(op::READ_RESPONSE_FIRST).hdr_len, 16);
    EXPECT_EQ(opcode_info(op::ATOMIC_ACKNOWLEDGE).hdr_len, 12 + 4 + 8);
    EXPECT_EQ(opcode_info(op::FETCH_ADD).hdr_len, 12 + 28);
    EXPECT_EQ(opcode_info(op::kUd | op::SEND_ONLY_IMM).hdr_len, 12 + 8 + 4);
    EXPECT_EQ(opcode_info(op::kUd | op::SEND_ONLY_IMM).offset[static_cast<int>(Hdr::ImmDt)], 20);
    EXPECT_EQ(opcode_info(op::FLUSH).offset[static_cast<int>(Hdr::Reth)], 16);
    EXPECT_EQ(opcode_info(op::CNP).hdr_len, 28);
}

}  // namespace
}  // namespace rocemu::wire
