// Bad input is handled per IBTA: a NAK or a counted drop, never a crash.
// Frames are crafted by hand and fed to a responder in RTS.
#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "tests/unit/transport/harness.hpp"

namespace rocemu::transport::test {
namespace {

struct TransportBadInput : ::testing::Test {
    Loop L;
    Side s[2];
    std::vector<uint8_t> mem = std::vector<uint8_t>(1 << 16);
    MrHandle mr;

    void SetUp() override {
        L.keep_log = true;
        for (int i = 0; i < 2; ++i) s[i] = make_side(L[i]);
        mr = L[1].reg_mr(s[1].pd, mem.data(), mem.size(), kLocalWrite | kRemoteWrite | kRemoteRead).value;
        connect(L, s);
    }
    Psn epsn() {
        QpAttr a;
        QpInitAttr ia;
        L[1].query_qp(s[1].qpn, a, ia);
        return a.rq_psn;
    }
    // A request from side 0's QP to side 1's QP.
    wire::RocePacket req(uint8_t opcode) {
        wire::RocePacket p;
        p.l2.src = mac_of(0);
        p.l2.dst = mac_of(1);
        p.l3.src = ip_of(0);
        p.l3.dst = ip_of(1);
        p.bth.opcode = opcode;
        p.bth.dqpn = s[1].qpn;
        p.bth.psn = epsn();
        p.bth.ackreq = true;
        return p;
    }
    // Delivers a frame to side 1 and returns what side 1 sent in answer.
    std::vector<wire::RocePacket> deliver(const wire::RocePacket& p, std::vector<uint8_t> payload = {}) {
        wire::RocePacket q = p;
        q.payload = payload.data();
        q.payload_len = static_cast<uint32_t>(payload.size());
        std::vector<uint8_t> f(9216);
        f.resize(wire::encode_roce(q, f));
        EXPECT_GT(f.size(), 0u);
        L[1].on_frame(f, L.now, L.fx[1]);
        const size_t before = L.sent[1].size();
        L.filter = [](int, const wire::RocePacket&, uint64_t) { return Delivery{.drop = true}; };
        L.pump();
        std::vector<wire::RocePacket> out;
        answers.assign(L.sent[1].begin() + before, L.sent[1].end());
        for (auto& a : answers) {
            wire::RocePacket r;
            EXPECT_EQ(wire::parse_roce(a, r), wire::ParseError::Ok);
            out.push_back(r);
        }
        return out;
    }
    uint64_t drops(DropReason r) { return L[1].counters().drops[static_cast<size_t>(r)]; }
    QpState state() {
        QpAttr a;
        QpInitAttr ia;
        L[1].query_qp(s[1].qpn, a, ia);
        return a.qp_state;
    }
    std::vector<std::vector<uint8_t>> answers;
};

TEST_F(TransportBadInput, WrongOpcodeClassIsDropped) {
    auto out = deliver(req(wire::op::kUc | wire::op::SEND_ONLY), std::vector<uint8_t>(8));
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(drops(DropReason::WrongQpClass), 1u);
    out = deliver(req(wire::op::kUd | wire::op::SEND_ONLY), std::vector<uint8_t>(8));
    EXPECT_EQ(drops(DropReason::WrongQpClass), 2u);
    EXPECT_EQ(state(), QpState::Rts);
}

TEST_F(TransportBadInput, UnknownQpnAndQpnZeroAreDropped) {
    auto p = req(wire::op::SEND_ONLY);
    p.bth.dqpn = Qpn{0x777};
    EXPECT_TRUE(deliver(p).empty());
    p.bth.dqpn = Qpn{0};
    EXPECT_TRUE(deliver(p).empty());
    EXPECT_EQ(drops(DropReason::UnknownQpn), 2u);
}

TEST_F(TransportBadInput, WrongPkeyAndForeignAddressesAreDropped) {
    auto p = req(wire::op::SEND_ONLY);
    p.bth.pkey = 0x8001;
    EXPECT_TRUE(deliver(p).empty());
    EXPECT_EQ(drops(DropReason::BadPkey), 1u);
    p = req(wire::op::SEND_ONLY);
    p.l3.src = wire::IpAddr::from_v4(0x01020304);
    EXPECT_TRUE(deliver(p).empty());
    EXPECT_EQ(drops(DropReason::AddressMismatch), 1u);
    p = req(wire::op::SEND_ONLY);
    p.l3.dst = wire::IpAddr::from_v4(0x01020304);
    EXPECT_TRUE(deliver(p).empty());
    EXPECT_EQ(drops(DropReason::NotForUs), 1u);
}

TEST_F(TransportBadInput, BadIcrcIsDropped) {
    auto p = req(wire::op::SEND_ONLY);
    std::vector<uint8_t> f(9216);
    f.resize(wire::encode_roce(p, f));
    f[f.size() - 1] ^= 1;
    L[1].on_frame(f, L.now, L.fx[1]);
    EXPECT_EQ(drops(DropReason::BadIcrc), 1u);
}

// A full-size WRITE continuation is placed while its ICRC is computed. With
// a bad ICRC it is still dropped for it, changes no responder state, and may
// only have touched the bytes its retransmission then writes. One sent to
// another GID is not placed at all.
TEST_F(TransportBadInput, WriteMiddleWithBadIcrcOrForeignDstTouchesOnlyItsOwnBytes) {
    constexpr uint32_t kMtu = 1024;
    std::vector<uint8_t> data(3 * kMtu);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13 + 5);
    const Psn first = epsn();
    auto part = [&](uint8_t opcode, uint32_t k, wire::IpAddr dst = ip_of(1)) {
        auto p = req(opcode);
        p.l3.dst = dst;
        p.bth.psn = first + k;
        p.reth = {reinterpret_cast<uint64_t>(mem.data()), mr.rkey, 3 * kMtu};
        p.payload = data.data() + k * kMtu;
        p.payload_len = kMtu;
        std::vector<uint8_t> f(9216);
        f.resize(wire::encode_roce(p, f));
        return f;
    };
    L[1].on_frame(part(wire::op::WRITE_FIRST, 0), L.now, L.fx[1]);
    ASSERT_EQ(epsn(), first + 1);
    L[1].on_frame(part(wire::op::WRITE_MIDDLE, 1, wire::IpAddr::from_v4(0x01020304)), L.now, L.fx[1]);
    EXPECT_EQ(drops(DropReason::NotForUs), 1u);
    EXPECT_EQ(epsn(), first + 1);
    EXPECT_TRUE(std::all_of(mem.begin() + kMtu, mem.end(), [](uint8_t b) { return b == 0; }));
    const size_t payload_off = part(wire::op::WRITE_MIDDLE, 1).size() - wire::kIcrcLen - kMtu;
    for (size_t at : {payload_off + 200, payload_off - wire::kBthLen}) {  // a payload byte, the opcode
        auto bad = part(wire::op::WRITE_MIDDLE, 1);
        bad[at] ^= 0x20;
        L[1].on_frame(bad, L.now, L.fx[1]);
    }
    EXPECT_EQ(drops(DropReason::BadIcrc), 2u);
    EXPECT_EQ(epsn(), first + 1);
    EXPECT_EQ(state(), QpState::Rts);
    EXPECT_TRUE(std::all_of(mem.begin() + 2 * kMtu, mem.end(), [](uint8_t b) { return b == 0; }));
    L[1].on_frame(part(wire::op::WRITE_MIDDLE, 1), L.now, L.fx[1]);
    L[1].on_frame(part(wire::op::WRITE_LAST, 2), L.now, L.fx[1]);
    EXPECT_EQ(epsn(), first + 3);
    EXPECT_EQ(0, std::memcmp(mem.data(), data.data(), data.size()));
    EXPECT_EQ(L[1].counters().drops[static_cast<size_t>(DropReason::ParseError)], 0u);
}

TEST_F(TransportBadInput, PsnAheadGetsOneSequenceNak) {
    auto p = req(wire::op::WRITE_ONLY);
    const Psn expected = epsn();
    p.bth.psn = expected + 1000;
    p.reth = {reinterpret_cast<uint64_t>(mem.data()), mr.rkey, 4};
    auto out = deliver(p, std::vector<uint8_t>(4));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].bth.opcode, wire::op::ACKNOWLEDGE);
    EXPECT_EQ(out[0].aeth.syndrome, wire::aeth::kNakPsnSeqError);
    EXPECT_EQ(out[0].bth.psn, expected);
    p.bth.psn = expected + 1001;
    EXPECT_TRUE(deliver(p, std::vector<uint8_t>(4)).empty());  // one NAK per gap
    EXPECT_EQ(L[1].counters().out_of_seq_request, 2u);
    EXPECT_EQ(state(), QpState::Rts);
}

TEST_F(TransportBadInput, PsnBehindIsADuplicate) {
    auto p = req(wire::op::SEND_ONLY);
    p.bth.psn = epsn() - 5;
    auto out = deliver(p);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].aeth.syndrome & wire::aeth::kTypeMask, wire::aeth::kAck);
    EXPECT_EQ(out[0].bth.psn, epsn() - 1);
    EXPECT_EQ(L[1].counters().duplicate_request, 1u);
}

// A runtime that receives without pulling frames (its port paused) lets the
// QP's response queue fill: each answer that no longer fits is a counted
// drop, never a silent one, and the queued ones still leave once pulled.
TEST_F(TransportBadInput, AnswersBeyondAFullResponseQueueAreCountedDrops) {
    auto p = req(wire::op::SEND_ONLY);
    p.bth.psn = epsn() - 5;
    std::vector<uint8_t> f(9216);
    f.resize(wire::encode_roce(p, f));
    constexpr uint32_t kDuplicates = 300;
    for (uint32_t i = 0; i < kDuplicates; ++i) L[1].on_frame(f, L.now, L.fx[1]);
    EXPECT_EQ(L[1].counters().duplicate_request, kDuplicates);
    const uint64_t full = drops(DropReason::RespQueueFull);
    EXPECT_GT(full, 0u);
    EXPECT_EQ(L[1].qp_counters(s[1].qpn)->drops[static_cast<size_t>(DropReason::RespQueueFull)], full);
    const size_t before = L.sent[1].size();
    L.filter = [](int, const wire::RocePacket&, uint64_t) { return Delivery{.drop = true}; };
    L.pump();
    EXPECT_EQ(L.sent[1].size() - before + full, kDuplicates) << "every duplicate's ACK either left or was counted";
    EXPECT_STREQ(to_string(DropReason::RespQueueFull), "drop_resp_queue_full");
}

// The response queue's depth is the QP's (QpInitAttr::resp_queue): with 4
// entries, 4 answers wait and every further one is a counted drop; with the
// default, 256 wait.
TEST(TransportRespQueue, ItsDepthIsTheQpsAndEachAnswerBeyondItIsACountedDrop) {
    for (const uint16_t depth : {uint16_t{4}, uint16_t{256}}) {
        Loop L;
        QpInitAttr tmpl;
        tmpl.resp_queue = depth;
        Side s[2] = {make_side(L[0]), make_side(L[1], tmpl)};
        connect(L, s);
        QpAttr a;
        QpInitAttr ia;
        L[1].query_qp(s[1].qpn, a, ia);
        EXPECT_EQ(ia.resp_queue, depth);
        wire::RocePacket p;
        p.l2.src = mac_of(0);
        p.l2.dst = mac_of(1);
        p.l3.src = ip_of(0);
        p.l3.dst = ip_of(1);
        p.bth.opcode = wire::op::SEND_ONLY;
        p.bth.dqpn = s[1].qpn;
        p.bth.psn = a.rq_psn - 5;
        p.bth.ackreq = true;
        std::vector<uint8_t> f(9216);
        f.resize(wire::encode_roce(p, f));
        constexpr uint32_t kDuplicates = 300;
        for (uint32_t i = 0; i < kDuplicates; ++i) L[1].on_frame(f, L.now, L.fx[1]);
        EXPECT_EQ(L[1].qp_counters(s[1].qpn)->drops[static_cast<size_t>(DropReason::RespQueueFull)],
                  kDuplicates - depth)
            << "depth " << depth;
    }
}

TEST(TransportRespQueue, CreateQpRejectsADepthThatIsNotAPowerOfTwoUpTo4096) {
    Loop L;
    const PdHandle pd = L[0].alloc_pd().value;
    const CqHandle cq = L[0].create_cq(16).value;
    for (const uint16_t bad : {uint16_t{0}, uint16_t{3}, uint16_t{8192}}) {
        QpInitAttr ia;
        ia.pd = pd;
        ia.send_cq = ia.recv_cq = cq;
        ia.resp_queue = bad;
        const auto r = L[0].create_qp(ia);
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_EQ(r.error.err, EINVAL);
        EXPECT_STREQ(r.error.attr, "resp_queue");
        EXPECT_NE(r.error.msg.find(fmt::format("resp_queue: {} is not a power of two in [1, 4096]", bad)),
                  std::string::npos)
            << r.error.msg;
    }
    QpInitAttr ok;
    ok.pd = pd;
    ok.send_cq = ok.recv_cq = cq;
    ok.resp_queue = 1;
    EXPECT_TRUE(L[0].create_qp(ok).ok());
}

TEST_F(TransportBadInput, RkeyViolationGetsRemoteAccessNak) {
    auto p = req(wire::op::WRITE_ONLY);
    p.reth = {reinterpret_cast<uint64_t>(mem.data()), mr.rkey + 1, 4};
    auto out = deliver(p, std::vector<uint8_t>(4));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].aeth.syndrome, wire::aeth::kNakRemoteAccess);
    EXPECT_EQ(state(), QpState::Err);
}

TEST_F(TransportBadInput, BoundsViolationGetsRemoteAccessNak) {
    auto p = req(wire::op::WRITE_ONLY);
    p.reth = {reinterpret_cast<uint64_t>(mem.data()) + mem.size() - 2, mr.rkey, 4};
    auto out = deliver(p, std::vector<uint8_t>(4));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].aeth.syndrome, wire::aeth::kNakRemoteAccess);
}

TEST_F(TransportBadInput, LengthNotMatchingRethGetsInvalidRequestNak) {
    auto p = req(wire::op::WRITE_ONLY);
    p.reth = {reinterpret_cast<uint64_t>(mem.data()), mr.rkey, 100};
    auto out = deliver(p, std::vector<uint8_t>(40));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].aeth.syndrome, wire::aeth::kNakInvalidRequest);
    EXPECT_EQ(mem[0], 0);  // nothing placed
    EXPECT_EQ(state(), QpState::Err);
}

TEST_F(TransportBadInput, FirstPacketShorterThanMtuGetsInvalidRequestNak) {
    auto p = req(wire::op::WRITE_FIRST);
    p.reth = {reinterpret_cast<uint64_t>(mem.data()), mr.rkey, 4000};
    auto out = deliver(p, std::vector<uint8_t>(100));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].aeth.syndrome, wire::aeth::kNakInvalidRequest);
}

TEST_F(TransportBadInput, ReadLargerThanAllowedGetsInvalidRequestNak) {
    auto p = req(wire::op::READ_REQUEST);
    p.reth = {reinterpret_cast<uint64_t>(mem.data()), mr.rkey, 0x80000001u};
    auto out = deliver(p);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].aeth.syndrome, wire::aeth::kNakInvalidRequest);
}

TEST_F(TransportBadInput, MiddleWithoutFirstGetsInvalidRequestNak) {
    auto out = deliver(req(wire::op::SEND_MIDDLE), std::vector<uint8_t>(1024));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].aeth.syndrome, wire::aeth::kNakInvalidRequest);
}

TEST_F(TransportBadInput, AtomicOnMrWithoutAtomicAccessGetsRemoteAccessNak) {
    auto p = req(wire::op::FETCH_ADD);
    p.atomic = {reinterpret_cast<uint64_t>(mem.data()), mr.rkey, 1, 0};
    auto out = deliver(p);
    ASSERT_EQ(out.size(), 1u);
    // The QP was connected with REMOTE_ATOMIC, but the MR lacks it.
    EXPECT_EQ(out[0].aeth.syndrome, wire::aeth::kNakRemoteAccess);
}

TEST_F(TransportBadInput, SendWithInvalidateGetsInvalidRequestNak) {
    auto out = deliver(req(wire::op::SEND_ONLY_INV));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].aeth.syndrome, wire::aeth::kNakInvalidRequest);
}

TEST_F(TransportBadInput, AtomicWriteGetsInvalidRequestNak) {
    auto out = deliver(req(wire::op::ATOMIC_WRITE), std::vector<uint8_t>(8));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].aeth.syndrome, wire::aeth::kNakInvalidRequest);
}

TEST_F(TransportBadInput, FlushGetsInvalidRequestNak) {
    auto out = deliver(req(wire::op::FLUSH));
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].aeth.syndrome, wire::aeth::kNakInvalidRequest);
}

TEST_F(TransportBadInput, ResponsesToNothingAreGhosts) {
    auto p = req(wire::op::ACKNOWLEDGE);
    p.aeth = {0x1F, 1};
    EXPECT_TRUE(deliver(p).empty());
    p = req(wire::op::READ_RESPONSE_ONLY);
    EXPECT_TRUE(deliver(p, std::vector<uint8_t>(16)).empty());
    EXPECT_EQ(drops(DropReason::GhostResponse), 2u);
    EXPECT_EQ(state(), QpState::Rts);
}

TEST_F(TransportBadInput, CnpIsCountedForTheNamedQp) {
    auto p = req(wire::op::CNP);
    p.bth.becn = true;
    p.bth.psn = Psn{0};
    deliver(p);
    EXPECT_EQ(L[1].qp_counters(s[1].qpn)->rp_cnp_handled, 1u);
    ASSERT_EQ(L.fx[1].cnp_received.size(), 1u);
    EXPECT_EQ(L.fx[1].cnp_received[0], s[1].qpn);
}

}  // namespace
}  // namespace rocemu::transport::test
