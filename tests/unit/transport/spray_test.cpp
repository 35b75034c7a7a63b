// Spraying mode, exact sequences: path entropy per packet, reordering inside
// the window without NAKs, direct placement of WRITE data, and selective
// retransmission of exactly the missing PSNs.
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "tests/unit/transport/harness.hpp"

namespace rocemu::transport::test {
namespace {

struct TransportSpray : ::testing::Test {
    Loop L;
    Side s[2];
    std::vector<uint8_t> mem[2];
    MrHandle mr[2];

    void setup(SprayPolicy policy = SprayPolicy::RoundRobin, uint16_t window = 64) {
        QpInitAttr t;
        t.reliability = Reliability::Spray;
        t.spray_policy = policy;
        t.spray_paths = 4;
        t.reorder_window = window;
        L.keep_log = true;
        for (int i = 0; i < 2; ++i) {
            s[i] = make_side(L[i], t);
            mem[i].assign(1 << 20, 0);
            mr[i] = L[i].reg_mr(s[i].pd, mem[i].data(), mem[i].size(), kLocalWrite | kRemoteWrite | kRemoteRead).value;
        }
        for (size_t k = 0; k < mem[0].size(); ++k) mem[0][k] = static_cast<uint8_t>(k * 31 + 7);
        connect(L, s);
    }
    const Counters& qc(int side) { return *L[side].qp_counters(s[side].qpn); }
    void write(uint64_t id, uint32_t len, size_t roff) {
        SendWr w = make_wr(id, WrOpcode::RdmaWrite, mem[0].data(), len, mr[0].lkey);
        w.remote_addr = reinterpret_cast<uint64_t>(mem[1].data() + roff);
        w.rkey = mr[1].rkey;
        ASSERT_FALSE(L[0].post_send(s[0].qpn, std::array{w}, L.fx[0]));
    }
    std::vector<Wc> wait(size_t n) {
        std::vector<Wc> got;
        L.run([&] {
            auto m = drain(L[0], s[0].scq);
            got.insert(got.end(), m.begin(), m.end());
            return got.size() >= n;
        });
        return got;
    }
};

TEST_F(TransportSpray, RoundRobinUsesEveryPath) {
    setup();
    write(1, 16 * 1024, 0);
    auto wcs = wait(1);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::Success);
    std::set<uint16_t> ports;
    for (auto& f : L.sent[0]) {
        wire::RocePacket p;
        ASSERT_EQ(wire::parse_roce(f, p), wire::ParseError::Ok);
        EXPECT_GE(p.udp_sport, 0xC000);
        ports.insert(p.udp_sport);
    }
    EXPECT_EQ(ports.size(), 4u);
    EXPECT_EQ(0, std::memcmp(mem[0].data(), mem[1].data(), 16 * 1024));
}

TEST_F(TransportSpray, ReorderInsideWindowNeedsNoNakAndPlacesDirectly) {
    setup();
    // After the FIRST, packets take up to 12 us longer (under sack_delay),
    // so each group of four arrives reversed.
    L.filter = [&](int from, const wire::RocePacket& p, uint64_t) {
        Delivery d;
        const int32_t i = Psn::diff(p.bth.psn, Psn{100});
        if (from == 0 && i > 0) d.extra = Nanos{3000 * int64_t(4 - i % 4)};
        return d;
    };
    write(1, 16 * 1024, 0);
    write(2, 5000, 100000);
    auto wcs = wait(2);
    ASSERT_EQ(wcs.size(), 2u);
    EXPECT_EQ(wcs[0].wr_id, 1u);  // completions stay in order
    EXPECT_EQ(wcs[1].wr_id, 2u);
    EXPECT_EQ(0, std::memcmp(mem[0].data(), mem[1].data(), 16 * 1024));
    EXPECT_EQ(0, std::memcmp(mem[0].data(), mem[1].data() + 100000, 5000));
    EXPECT_GT(qc(1).out_of_seq_request, 0u);  // it really was reordered
    EXPECT_GT(qc(1).direct_placed, 0u);
    EXPECT_EQ(qc(0).rcvd_seq_err, 0u);        // ... and no NAK came back
    EXPECT_EQ(qc(0).sent_pkts, 16u + 5u);     // nothing resent
    EXPECT_EQ(qc(1).drops[static_cast<size_t>(DropReason::OutOfWindow)], 0u);
}

// Packets that arrive before their WRITE's FIRST cannot be placed yet (the
// RETH is in the FIRST): they are staged in their reorder slot while their
// ICRC is computed. A corrupted one is dropped for its ICRC and leaves
// nothing held; its resend completes the WRITE byte for byte.
TEST_F(TransportSpray, PacketsBeforeTheirFirstAreStagedAndACorruptOneIsDropped) {
    setup();
    std::set<int32_t> seen;
    L.filter = [&](int from, const wire::RocePacket& p, uint64_t) {
        Delivery d;
        if (from != 0) return d;
        const int32_t i = Psn::diff(p.bth.psn, Psn{100});
        const bool again = !seen.insert(i).second;
        if (i == 0) d.extra = Nanos{10000};  // the FIRST comes last, within sack_delay
        if (i == 2 && !again) d.corrupt = true;
        return d;
    };
    write(1, 8 * 1024, 4096);
    auto wcs = wait(1);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::Success);
    EXPECT_EQ(0, std::memcmp(mem[0].data(), mem[1].data() + 4096, 8 * 1024));
    EXPECT_TRUE(std::all_of(mem[1].begin(), mem[1].begin() + 4096, [](uint8_t b) { return b == 0; }));
    EXPECT_TRUE(std::all_of(mem[1].begin() + 4096 + 8 * 1024, mem[1].end(), [](uint8_t b) { return b == 0; }));
    EXPECT_EQ(L[1].counters().drops[static_cast<size_t>(DropReason::BadIcrc)], 1u);
    EXPECT_GE(qc(1).out_of_seq_request, 6u);  // every packet but the FIRST and the lost one came early
    EXPECT_EQ(qc(0).selective_retransmits, 1u);
}

// READ responses are sprayed too: every path carries some, they arrive in
// any order, are placed by PSN, and the READ completes once, with no retry.
// A WRITE behind the READ is acknowledged before the READ's last response
// arrives; its completion waits for the READ's, in send-queue order.
TEST_F(TransportSpray, ReadResponsesAreSprayedAndPlacedInAnyOrder) {
    setup();
    for (size_t k = 0; k < mem[1].size(); ++k) mem[1][k] = static_cast<uint8_t>(k * 13 + 1);
    L.filter = [&](int from, const wire::RocePacket& p, uint64_t) {
        Delivery d;
        // Responses in groups of four arrive reversed (under sack_delay).
        if (from == 1 && (p.info().flags & wire::kOpRead))
            d.extra = Nanos{3000 * int64_t(4 - Psn::diff(p.bth.psn, Psn{100}) % 4)};
        return d;
    };
    SendWr r = make_wr(1, WrOpcode::RdmaRead, mem[0].data(), 16 * 1024, mr[0].lkey);
    r.remote_addr = reinterpret_cast<uint64_t>(mem[1].data() + 4096);
    r.rkey = mr[1].rkey;
    ASSERT_FALSE(L[0].post_send(s[0].qpn, std::array{r}, L.fx[0]));
    write(2, 100, 200000);
    auto wcs = wait(2);
    ASSERT_EQ(wcs.size(), 2u);
    EXPECT_EQ(wcs[0].wr_id, 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::Success);
    EXPECT_EQ(wcs[1].wr_id, 2u);
    EXPECT_EQ(0, std::memcmp(mem[0].data(), mem[1].data() + 4096, 16 * 1024));
    std::set<uint16_t> ports;
    for (auto& f : L.sent[1]) {
        wire::RocePacket p;
        ASSERT_EQ(wire::parse_roce(f, p), wire::ParseError::Ok);
        if (p.info().flags & wire::kOpRead) ports.insert(p.udp_sport);
    }
    EXPECT_EQ(ports.size(), 4u);
    EXPECT_EQ(qc(0).completer_retry_err, 0u);  // reordering alone never re-requests
    EXPECT_EQ(qc(1).duplicate_request, 0u);
    EXPECT_EQ(qc(0).sent_pkts, 2u);  // the READ request and the WRITE
}

// A READ response that stays missing behind later ones is asked for again
// after sack_delay, from the first missing response only.
TEST_F(TransportSpray, MissingReadResponseIsReRequestedFromTheHole) {
    setup();
    for (size_t k = 0; k < mem[1].size(); ++k) mem[1][k] = static_cast<uint8_t>(k * 13 + 1);
    bool dropped = false;
    L.filter = [&](int from, const wire::RocePacket& p, uint64_t) {
        Delivery d;
        if (from == 1 && (p.info().flags & wire::kOpRead) && Psn::diff(p.bth.psn, Psn{100}) == 5 && !dropped)
            d.drop = dropped = true;
        return d;
    };
    SendWr r = make_wr(1, WrOpcode::RdmaRead, mem[0].data(), 16 * 1024, mr[0].lkey);
    r.remote_addr = reinterpret_cast<uint64_t>(mem[1].data() + 4096);
    r.rkey = mr[1].rkey;
    ASSERT_FALSE(L[0].post_send(s[0].qpn, std::array{r}, L.fx[0]));
    auto wcs = wait(1);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::Success);
    EXPECT_TRUE(dropped);
    EXPECT_EQ(0, std::memcmp(mem[0].data(), mem[1].data() + 4096, 16 * 1024));
    EXPECT_EQ(qc(0).completer_retry_err, 1u);
    EXPECT_LT(L.now, Nanos::from_us(100));  // sack_delay (16 us), not the retransmit timeout (4 ms)
    // The retry asked for responses 5..15 only.
    ASSERT_GE(L.sent[0].size(), 2u);
    wire::RocePacket again;
    ASSERT_EQ(wire::parse_roce(L.sent[0][1], again), wire::ParseError::Ok);
    EXPECT_EQ(again.bth.opcode, wire::op::READ_REQUEST);
    EXPECT_EQ(Psn::diff(again.bth.psn, Psn{100}), 5);
    EXPECT_EQ(again.reth.dma_len, 16u * 1024 - 5 * 1024);
}

TEST_F(TransportSpray, LossIsRepairedByResendingOnlyTheMissingPsn) {
    setup();
    Psn lost;
    bool dropped = false;
    L.filter = [&](int from, const wire::RocePacket& p, uint64_t idx) {
        Delivery d;
        if (from == 0 && idx == 5 && !dropped) {
            d.drop = dropped = true;
            lost = p.bth.psn;
        }
        return d;
    };
    write(1, 16 * 1024, 0);
    auto wcs = wait(1);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::Success);
    EXPECT_EQ(0, std::memcmp(mem[0].data(), mem[1].data(), 16 * 1024));
    EXPECT_EQ(qc(1).sack_sent, 1u);
    EXPECT_EQ(qc(0).selective_retransmits, 1u);
    EXPECT_EQ(qc(0).sent_pkts, 17u);  // 16 + exactly the lost one
    EXPECT_EQ(qc(0).completer_retry_err, 0u);
    // The resent frame carries the lost PSN.
    wire::RocePacket last;
    ASSERT_EQ(wire::parse_roce(L.sent[0].back(), last), wire::ParseError::Ok);
    EXPECT_EQ(last.bth.psn, lost);
    EXPECT_LT(L.now, Nanos::from_us(100));  // no retransmit timeout was needed
}

TEST_F(TransportSpray, SackIsAValidSequenceNak) {
    setup();
    L.filter = [&](int from, const wire::RocePacket&, uint64_t idx) {
        Delivery d;
        d.drop = from == 0 && idx == 2;
        return d;
    };
    write(1, 8 * 1024, 0);
    wait(1);
    bool seen = false;
    for (auto& f : L.sent[1]) {
        wire::RocePacket p;
        ASSERT_EQ(wire::parse_roce(f, p), wire::ParseError::Ok);
        if (p.bth.opcode == wire::op::ACKNOWLEDGE && p.aeth.syndrome == wire::aeth::kNakPsnSeqError) seen = true;
    }
    EXPECT_TRUE(seen);
}

TEST_F(TransportSpray, PacketsBeyondTheWindowAreDroppedAndRecovered) {
    setup(SprayPolicy::RoundRobin, 16);
    // The first packet is held back so long that the window fills.
    L.filter = [&](int from, const wire::RocePacket&, uint64_t idx) {
        Delivery d;
        if (from == 0 && idx == 0) d.extra = Nanos::from_us(50);
        return d;
    };
    write(1, 64 * 1024, 0);
    auto wcs = wait(1);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::Success);
    EXPECT_EQ(0, std::memcmp(mem[0].data(), mem[1].data(), 64 * 1024));
}

TEST_F(TransportSpray, PathAwareAvoidsAMarkingPath) {
    setup(SprayPolicy::PathAware);
    // A switch on one path marks every packet ECN-CE; the responder echoes
    // the mark on the ACK, sent back on the same source port.
    std::optional<uint16_t> bad;
    L.filter = [&](int from, const wire::RocePacket& p, uint64_t) {
        Delivery d;
        if (from == 0 && !bad) bad = p.udp_sport;
        d.ce = from == 0 && p.udp_sport == *bad;
        return d;
    };
    for (int i = 0; i < 40; ++i) {
        write(i + 1, 1024, 0);  // one packet, one ACK each
        ASSERT_EQ(wait(1).size(), 1u);
    }
    std::map<uint16_t, int> per_port;
    for (auto& f : L.sent[0]) {
        wire::RocePacket p;
        ASSERT_EQ(wire::parse_roce(f, p), wire::ParseError::Ok);
        ++per_port[p.udp_sport];
    }
    ASSERT_EQ(per_port.size(), 4u);
    for (auto& [port, n] : per_port) {
        if (port != *bad) {
            EXPECT_GT(n, 3 * per_port[*bad]) << "port " << port;
        }
    }
    EXPECT_GT(qc(1).np_ecn_marked_roce_packets, 0u);
}

}  // namespace
}  // namespace rocemu::transport::test
