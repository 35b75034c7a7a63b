// The transport engine on the DPDK runtime: two NICs in one process over a
// crossed net_ring pair, QPs connected through ARP-resolved address vectors.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <numeric>
#include <thread>
#include <vector>

#include "dataplane/dpdk/eal.hpp"
#include "dataplane/dpdk/roce_nic.hpp"
#include "dataplane/dpdk/telemetry_client.hpp"
#include "tests/unit/dpdk/manual_clock.hpp"
#include "tests/unit/dpdk/ring_roce_nic.hpp"

namespace rocemu::dpdk {
namespace {

using namespace rocemu::literals;
using namespace rocemu::transport;

using RoceNic = test::RingRoceNic;

class DpdkRoceRing : public ::testing::Test {
protected:
    void SetUp() override { make({}); }
    void make(const test::RingRoceNicOptions& o, unsigned ring_size = 1024) {
        static int serial = 0;
        const std::string s = std::to_string(serial++);
        std::string error;
        rings_ = RingPair::create("roce" + s, ring_size, error);
        ASSERT_TRUE(rings_) << error;
        n[0] = std::make_unique<RoceNic>(*rings_, 0, "roce_a" + s, 1, clock, o);
        n[1] = std::make_unique<RoceNic>(*rings_, 1, "roce_b" + s, 2, clock, o);
        ASSERT_TRUE(n[0]->engine && n[1]->engine);
    }
    void poll() {
        n[0]->nic->poll();
        n[1]->nic->poll();
    }
    template <typename Done>
    bool poll_until(Done&& done) {
        const Nanos deadline = n[0]->nic->now() + 3_s;
        while (!done()) {
            poll();
            if (n[0]->nic->now() > deadline) return false;
        }
        return true;
    }
    // RESET -> INIT -> RTR (through fill_av) -> RTS, each QP aimed at the other.
    void connect() {
        for (int i = 0; i < 2; ++i) {
            RoceNic& me = *n[i];
            QpAttr a;
            a.qp_state = QpState::Init;
            a.qp_access_flags = kRemoteWrite | kRemoteRead;
            ASSERT_FALSE(me.engine->modify_qp(me.qpn, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags,
                                              me.upper->effects()));
            a.qp_state = QpState::Rtr;
            a.dest_qp_num = n[1 - i]->qpn;
            a.rq_psn = Psn{1000u * static_cast<uint32_t>(2 - i)};
            a.path_mtu = PathMtu::Mtu1024;
            a.ah_attr.dgid = wire::IpAddr::from_v4(n[1 - i]->stack.config().ipv4);
            a.ah_attr.sgid_index = 3;
            host::PathResult r;
            ASSERT_TRUE(poll_until([&] {
                r = fill_av(*me.nic, a.ah_attr, me.qpn.v);
                return r.status != host::PathResult::Status::Pending;
            }));
            ASSERT_EQ(r.status, host::PathResult::Status::Ready) << r.error;
            EXPECT_EQ(a.ah_attr.dmac, n[1 - i]->stack.config().mac);
            const uint32_t rtr = kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
                                 kAttrMaxDestRdAtomic | kAttrMinRnrTimer;
            const VerbsError e = me.engine->modify_qp(me.qpn, a, rtr, me.upper->effects());
            ASSERT_FALSE(e) << e.msg;
            a.qp_state = QpState::Rts;
            a.sq_psn = Psn{1000u * static_cast<uint32_t>(i + 1)};
            const uint32_t rts =
                kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxQpRdAtomic;
            ASSERT_FALSE(me.engine->modify_qp(me.qpn, a, rts, me.upper->effects()));
        }
    }

    // A 3000-byte SEND into a RECV at b.buf and a WRITE to b.buf + 4096,
    // both from a.buf (1024 + 1024 + 952 bytes each at MTU 1024).
    void post_send_and_write() {
        RoceNic& a = *n[0];
        RoceNic& b = *n[1];
        RecvWr rwr;
        rwr.wr_id = 7;
        rwr.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(b.buf.data()), 4096, b.mr.lkey});
        ASSERT_FALSE(b.engine->post_recv(b.qpn, std::span(&rwr, 1), b.upper->effects()));
        SendWr send;
        send.wr_id = 1;
        send.opcode = WrOpcode::Send;
        send.send_flags = kSendSignaled;
        send.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(a.buf.data()), 3000, a.mr.lkey});
        SendWr write = send;
        write.wr_id = 2;
        write.opcode = WrOpcode::RdmaWrite;
        write.remote_addr = reinterpret_cast<uint64_t>(b.buf.data() + 4096);
        write.rkey = b.mr.rkey;
        const SendWr wrs[] = {send, write};
        ASSERT_FALSE(a.engine->post_send(a.qpn, wrs, a.upper->effects()));
    }
    // Until a has both send completions and b its receive one.
    bool wait_completions(std::vector<Wc>& wa, std::vector<Wc>& wb) {
        return poll_until([&] {
            Wc wc[8];
            for (uint32_t k = n[0]->engine->poll_cq(n[0]->cq, wc), i = 0; i < k; ++i) wa.push_back(wc[i]);
            for (uint32_t k = n[1]->engine->poll_cq(n[1]->cq, wc), i = 0; i < k; ++i) wb.push_back(wc[i]);
            return wa.size() == 2 && wb.size() == 1;
        });
    }
    // Both of post_send_and_write's WRs succeeded and their 3000 bytes lie
    // at b.buf and b.buf + 4096.
    void expect_send_and_write_landed(const std::vector<Wc>& wa) const {
        const RoceNic& a = *n[0];
        const RoceNic& b = *n[1];
        EXPECT_EQ(wa[0].status, WcStatus::Success);
        EXPECT_EQ(wa[1].status, WcStatus::Success);
        EXPECT_TRUE(std::equal(a.buf.begin(), a.buf.begin() + 3000, b.buf.begin()));
        EXPECT_TRUE(std::equal(a.buf.begin(), a.buf.begin() + 3000, b.buf.begin() + 4096));
    }

    test::ManualTscClock clk;
    const TscClock& clock = clk.clock;
    std::unique_ptr<RingPair> rings_;  // outlives the NICs
    std::unique_ptr<RoceNic> n[2];
};

TEST_F(DpdkRoceRing, WrongGidIndexFailsBeforeRtrAndNamesTheRightOne) {
    transport::AddressVector av;
    av.dgid = wire::IpAddr::from_v4(n[1]->stack.config().ipv4);
    av.sgid_index = 2;
    host::PathResult r = fill_av(*n[0]->nic, av, 1);
    EXPECT_EQ(r.status, host::PathResult::Status::Error);
    EXPECT_EQ(r.error,
              "GID index 2 is a RoCEv1 GID (::ffff:10.0.0.1) and rocemu speaks RoCEv2 only; "
              "use GID index 3 (RoCEv2 ::ffff:10.0.0.1)");
    av.sgid_index = 4;
    r = fill_av(*n[0]->nic, av, 1);
    EXPECT_EQ(r.error,
              "GID index 4 does not exist: this port's GID table (connectx layout) has indexes 0-3; "
              "use GID index 3 (RoCEv2 ::ffff:10.0.0.1)");
    EXPECT_EQ(n[0]->nic->stats()[PortStat::TxPackets], 0u);  // nothing went out
}

TEST_F(DpdkRoceRing, RcSendAndWriteCompleteAcrossThePorts) {
    connect();
    RoceNic& a = *n[0];
    RoceNic& b = *n[1];
    std::iota(a.buf.begin(), a.buf.begin() + 3000, uint8_t{1});
    post_send_and_write();
    std::vector<Wc> wa, wb;
    ASSERT_TRUE(wait_completions(wa, wb));
    expect_send_and_write_landed(wa);
    EXPECT_EQ(wb[0].wr_id, 7u);
    EXPECT_EQ(wb[0].byte_len, 3000u);
    // 3000 bytes at MTU 1024 is three packets, twice; every one crossed the rings.
    EXPECT_GE(a.engine->counters().sent_pkts, 6u);
    EXPECT_EQ(b.stack.counters().event(host::HostEvent::RxRoce), b.engine->counters().rcvd_pkts);
    EXPECT_EQ(a.nic->stats()[PortStat::DropTxFull], 0u);
}

// With a profile, a net_ring port (which takes chains) sends payload of
// 1 KiB or more from the MR's pages: header mbuf, attached payload, pad +
// ICRC. The receiver takes the chain as it is.
class DpdkZeroCopyRing : public DpdkRoceRing {
protected:
    void SetUp() override { make_zero_copy(1024); }
    void make_zero_copy(unsigned ring_size) {
        test::RingRoceNicOptions o;
        NicProfile p;
        p.cc.algorithm = cc::CcAlgorithm::kNone;
        p.zero_copy_min = 1024;  // net_ring's default is to copy
        o.profile = p;
        make(o, ring_size);
        ASSERT_TRUE(n[0]->port->takes_chains());
        EXPECT_EQ(n[0]->port->zero_copy_default(), 0u);
        EXPECT_EQ(n[0]->engine->config().zero_copy_min, 1024u);
    }
};

TEST_F(DpdkZeroCopyRing, ChainsFromMrPagesArriveAsTheirBytes) {
    connect();
    RoceNic& a = *n[0];
    RoceNic& b = *n[1];
    for (size_t i = 0; i < 3000; ++i) a.buf[i] = static_cast<uint8_t>(i * 13 + i / 7);
    post_send_and_write();
    std::vector<Wc> wa, wb;
    ASSERT_TRUE(wait_completions(wa, wb));
    expect_send_and_write_landed(wa);
    EXPECT_EQ(wb[0].byte_len, 3000u);
    EXPECT_EQ(a.nic->stats()[PortStat::TxZeroCopy], 4u);
    EXPECT_EQ(a.nic->stats()[PortStat::TxZeroCopyShort], 0u);
    EXPECT_EQ(b.nic->stats()[PortStat::DropMultiSegment], 0u);
    EXPECT_EQ(b.stack.counters().event(host::HostEvent::RxRoce), b.engine->counters().rcvd_pkts);
    for (const uint64_t d : b.engine->counters().drops) EXPECT_EQ(d, 0u);
    // Once the receiver has freed the chains, the MR is free to go.
    ASSERT_TRUE(poll_until([&] { return !a.engine->dereg_mr(a.mr); }));
}

TEST_F(DpdkZeroCopyRing, AnMrIsNotDeregisteredWhileItsPagesAreInFlight) {
    connect();
    post_send_and_write();
    RoceNic& a = *n[0];
    // Only the sender runs: its chains wait in the ring, unread.
    while (a.nic->stats()[PortStat::TxZeroCopy] < 4) a.nic->poll();
    a.nic->flush();
    const VerbsError busy = a.engine->dereg_mr(a.mr);
    EXPECT_EQ(busy.err, EBUSY);
    EXPECT_EQ(busy.msg, "MR has 4 zero-copy frames in flight that read its memory");
    std::vector<Wc> wa, wb;
    ASSERT_TRUE(wait_completions(wa, wb));
    ASSERT_TRUE(poll_until([&] { return !a.engine->dereg_mr(a.mr); }));
}

// The responder sends READ RESPONSE payload of 1 KiB or more from its MR's
// pages too: the MR is pinned while the chains wait in the ring, the
// requester takes them as chains, and the bytes arrive.
TEST_F(DpdkZeroCopyRing, ReadResponsesLeaveFromTheRespondersMrPages) {
    connect();
    RoceNic& a = *n[0];
    RoceNic& b = *n[1];
    for (size_t i = 0; i < 3000; ++i) b.buf[i] = static_cast<uint8_t>(i * 17 + i / 3);
    SendWr read;
    read.wr_id = 3;
    read.opcode = WrOpcode::RdmaRead;
    read.send_flags = kSendSignaled;
    read.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(a.buf.data() + 4096), 3000, a.mr.lkey});
    read.remote_addr = reinterpret_cast<uint64_t>(b.buf.data());
    read.rkey = b.mr.rkey;
    const auto& sb = b.nic->stats();
    // The request crosses; then only the responder runs: its responses wait in the ring, unread.
    const uint64_t sent = a.nic->stats()[PortStat::TxPackets];
    ASSERT_FALSE(a.engine->post_send(a.qpn, std::span(&read, 1), a.upper->effects()));
    while (a.nic->stats()[PortStat::TxPackets] == sent) a.nic->poll();
    a.nic->flush();
    while (sb[PortStat::TxZeroCopy] < 2) b.nic->poll();
    b.nic->flush();
    EXPECT_EQ(sb[PortStat::TxZeroCopy], 2u);  // FIRST and MIDDLE (1024 bytes); LAST (952) copied
    const VerbsError busy = b.engine->dereg_mr(b.mr);
    EXPECT_EQ(busy.err, EBUSY);
    EXPECT_EQ(busy.msg, "MR has 2 zero-copy frames in flight that read its memory");
    std::vector<Wc> wa;
    ASSERT_TRUE(poll_until([&] {
        Wc wc[4];
        for (uint32_t k = a.engine->poll_cq(a.cq, wc), i = 0; i < k; ++i) wa.push_back(wc[i]);
        return !wa.empty();
    }));
    EXPECT_EQ(wa[0].status, WcStatus::Success);
    EXPECT_TRUE(std::equal(b.buf.begin(), b.buf.begin() + 3000, a.buf.begin() + 4096));
    EXPECT_EQ(a.nic->stats()[PortStat::DropMultiSegment], 0u);
    for (const uint64_t d : a.engine->counters().drops) EXPECT_EQ(d, 0u);
    EXPECT_FALSE(b.engine->dereg_mr(b.mr)) << "the requester freed the chains";
}

// A peer that stops draining (a memif peer that stopped): the sender's
// chains wait in its TX queue, pinning the MR, until the PMD has refused them
// for longer than tx_timeout (1 s); the watchdog then drops them, which
// takes them off the MR, and the loop goes on.
class DpdkZeroCopyStuckRing : public DpdkZeroCopyRing {
protected:
    void SetUp() override { make_zero_copy(4); }  // 3 frames fit in a ring
};

TEST_F(DpdkZeroCopyStuckRing, TheTxTimeoutReleasesTheMrPagesAStuckQueueHeld) {
    connect();
    post_send_and_write();
    RoceNic& a = *n[0];
    // Only the sender runs: 3 frames fill the ring, the others wait.
    while (a.nic->stats()[PortStat::TxZeroCopy] < 4) a.nic->poll();
    a.nic->flush();  // the ring takes what it has room for, if the loop did not offer it yet
    a.nic->flush();  // and refuses the rest: the watchdog's wait starts
    EXPECT_EQ(a.nic->stats()[PortStat::TxPackets], 4u);  // ARP and 3 in the ring
    EXPECT_EQ(a.engine->dereg_mr(a.mr).err, EBUSY);
    EXPECT_EQ(a.nic->stats()[PortStat::DropTxTimeout], 0u);
    clk.advance(1100_ms);
    a.nic->poll();
    EXPECT_EQ(a.nic->stats()[PortStat::TxTimeouts], 1u);
    EXPECT_GE(a.nic->stats()[PortStat::DropTxTimeout], 3u);  // the WRITE's (and what the engine retransmitted)
    // What the ring holds is the peer's now: read and freed, the MR is free.
    rte_mbuf* m[8];
    EXPECT_EQ(rte_eth_rx_burst(n[1]->port->id(), 0, m, 8), 3u);
    rte_pktmbuf_free_bulk(m, 3);
    EXPECT_FALSE(a.engine->dereg_mr(a.mr)) << "no dropped frame still pins it";
}

// Without two free mbufs for a chain, a lendable frame is made whole in its
// header mbuf: the bytes still arrive, and nothing keeps the MR pinned.
TEST_F(DpdkZeroCopyRing, ShortOfMbufsForAChainAFrameGoesWhole) {
    connect();
    RoceNic& a = *n[0];
    RoceNic& b = *n[1];
    for (size_t i = 0; i < 3000; ++i) a.buf[i] = static_cast<uint8_t>(i * 11 + i / 5);
    post_send_and_write();
    std::vector<rte_mbuf*> held;
    while (rte_mbuf* m = rte_pktmbuf_alloc(a.port->pool())) held.push_back(m);
    ASSERT_FALSE(held.empty());
    // Only the sender runs, and it gets its mbufs back one a turn: at most
    // one is ever free, never the two a chain needs.
    const auto& st = a.nic->stats();
    for (int turn = 0; turn < 1000 && st[PortStat::TxZeroCopyShort] < 4; ++turn) {
        if (!held.empty() && rte_mempool_avail_count(a.port->pool()) == 0) {
            rte_pktmbuf_free(held.back());
            held.pop_back();
        }
        a.nic->poll();
    }
    a.nic->flush();
    EXPECT_EQ(st[PortStat::TxZeroCopyShort], 4u);  // 1024 + 1024 of the WRITE and of the SEND
    EXPECT_EQ(st[PortStat::TxZeroCopy], 0u);
    for (rte_mbuf* m : held) rte_pktmbuf_free(m);
    std::vector<Wc> wa, wb;
    ASSERT_TRUE(wait_completions(wa, wb));
    expect_send_and_write_landed(wa);
    EXPECT_EQ(b.nic->stats()[PortStat::DropMultiSegment], 0u);
    for (const uint64_t d : b.engine->counters().drops) EXPECT_EQ(d, 0u);
    EXPECT_FALSE(a.engine->dereg_mr(a.mr));  // the whole frames released their pins when made
}

TEST_F(DpdkRoceRing, PfcPauseOfTheRocePriorityHoldsTransmissionForThePauseTime) {
    connect();
    RoceNic& a = *n[0];
    SendWr write;
    write.wr_id = 9;
    write.opcode = WrOpcode::RdmaWrite;
    write.send_flags = kSendSignaled;
    write.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(a.buf.data()), 64, a.mr.lkey});
    write.remote_addr = reinterpret_cast<uint64_t>(n[1]->buf.data());
    write.rkey = n[1]->mr.rkey;
    ASSERT_FALSE(a.engine->post_send(a.qpn, std::span(&write, 1), a.upper->effects()));

    // 1000 quanta at the default 100 Gbit/s port speed: 512000 bit times = 5120 ns.
    wire::Pfc pfc;
    pfc.class_enable = 1u << EngineUpper::kDefaultPfcPriority;
    pfc.quanta[EngineUpper::kDefaultPfcPriority] = 1000;
    std::array<uint8_t, 64> frame{};
    ASSERT_EQ(wire::encode_pfc(pfc, frame), wire::kPfcFrameLen);
    const Nanos t0{int64_t{1} << 50};  // after any time the loop has seen
    a.upper->on_pfc(std::span(frame.data(), wire::kPfcFrameLen), t0);

    std::vector<uint8_t> buf(16384);
    TxSlot out{buf};
    EXPECT_EQ(a.upper->pull_tx(std::span(&out, 1), t0), 0u);
    EXPECT_EQ(a.upper->pull_tx(std::span(&out, 1), t0 + Nanos{5119}), 0u);
    EXPECT_EQ(a.upper->pull_tx(std::span(&out, 1), t0 + Nanos{5120}), 1u) << "the WRITE goes once the pause expires";
    EXPECT_GT(out.len, 0u);

    // A pause of another priority does not hold the NIC, and a resume (time 0) ends a pause at once.
    pfc.class_enable = 1u << 5;
    pfc.quanta = {};
    pfc.quanta[5] = 0xFFFF;
    wire::encode_pfc(pfc, frame);
    a.upper->on_pfc(std::span(frame.data(), wire::kPfcFrameLen), t0 + Nanos{6000});
    EXPECT_FALSE(a.upper->tx_paused(t0 + Nanos{6001}));
    pfc.class_enable = 1u << EngineUpper::kDefaultPfcPriority;
    pfc.quanta = {};
    pfc.quanta[EngineUpper::kDefaultPfcPriority] = 0xFFFF;
    wire::encode_pfc(pfc, frame);
    a.upper->on_pfc(std::span(frame.data(), wire::kPfcFrameLen), t0 + Nanos{7000});
    EXPECT_TRUE(a.upper->tx_paused(t0 + Nanos{7001}));
    pfc.quanta[EngineUpper::kDefaultPfcPriority] = 0;
    wire::encode_pfc(pfc, frame);
    a.upper->on_pfc(std::span(frame.data(), wire::kPfcFrameLen), t0 + Nanos{8000});
    EXPECT_FALSE(a.upper->tx_paused(t0 + Nanos{8000}));
    EXPECT_EQ(a.upper->pauses().xoff_frames(EngineUpper::kDefaultPfcPriority), 2u);
    EXPECT_EQ(a.upper->pauses().xon_frames(EngineUpper::kDefaultPfcPriority), 1u);
}

TEST_F(DpdkRoceRing, EngineAndQpCountersAreAnsweredByTheLoopToAnotherThread) {
    connect();
    RoceNic& a = *n[0];
    SendWr write;
    write.wr_id = 1;
    write.opcode = WrOpcode::RdmaWrite;
    write.send_flags = kSendSignaled;
    write.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(a.buf.data()), 100, a.mr.lkey});
    write.remote_addr = reinterpret_cast<uint64_t>(n[1]->buf.data());
    write.rkey = n[1]->mr.rkey;
    ASSERT_FALSE(a.engine->post_send(a.qpn, std::span(&write, 1), a.upper->effects()));
    Wc wc;
    ASSERT_TRUE(poll_until([&] { return a.engine->poll_cq(a.cq, std::span(&wc, 1)) == 1; }));

    CounterQuery qp, list, missing;
    qp.kind = CounterQuery::Kind::Qp;
    qp.qpn = a.qpn.v;
    list.kind = CounterQuery::Kind::QpList;
    missing.kind = CounterQuery::Kind::Qp;
    missing.qpn = 0x999;
    std::atomic<bool> done{false};
    bool answered[3] = {};
    std::thread asker([&] {
        answered[0] = a.nic->board().mailbox().ask(qp, 2000);
        answered[1] = a.nic->board().mailbox().ask(list, 2000);
        answered[2] = a.nic->board().mailbox().ask(missing, 2000);
        done = true;
    });
    ASSERT_TRUE(poll_until([&] { return done.load(); }));
    asker.join();
    EXPECT_TRUE(answered[0] && answered[1] && answered[2]);
    EXPECT_TRUE(a.nic->board().answers_queries);
    ASSERT_TRUE(qp.found);
    uint64_t sent = 0;
    for (const auto& [name, v] : qp.values)
        if (name == "sent_pkts") sent = v;
    EXPECT_EQ(sent, a.engine->qp_counters(a.qpn)->sent_pkts);
    EXPECT_GE(sent, 1u);
    ASSERT_EQ(list.values.size(), 1u);
    EXPECT_EQ(list.values[0].second, a.qpn.v);
    EXPECT_FALSE(missing.found);
}

// The same counters, through this process's own telemetry socket, read the
// way `rocemu counters` reads them.
TEST_F(DpdkRoceRing, TelemetrySocketServesPortEngineAndQpCounters) {
    connect();
    std::optional<std::vector<PortReport>> ports;
    std::string error;
    // One read from another thread, while this one keeps the loops (which answer it) running.
    auto read_once = [&] {
        std::atomic<bool> done{false};
        std::thread reader([&] {
            ports = read_counters(Eal::file_prefix(), error);
            done = true;
        });
        const bool answered = poll_until([&] { return done.load(); });
        reader.join();
        return answered && ports && ports->size() == 2;
    };
    auto field = [](const Fields& f, const std::string& k) {
        for (const auto& [name, v] : f)
            if (name == k) return v;
        return std::string("missing");
    };
    auto port_a = [&]() -> const PortReport& {
        return (*ports)[0].id == n[0]->port->id() ? (*ports)[0] : (*ports)[1];
    };
    // The port board is republished every millisecond, so a read right after
    // the ARP exchange may predate it: read until the reply shows (bounded).
    ASSERT_TRUE(poll_until([&] { return read_once() && field(port_a().counters, "rx_arp_reply") != "0"; }))
        << error;
    const PortReport& a = port_a();
    EXPECT_EQ(a.name, n[0]->port->name());
    EXPECT_EQ(field(a.counters, "tx_arp_request"), "1");
    EXPECT_EQ(field(a.counters, "rx_arp_reply"), "1");
    ASSERT_TRUE(a.engine);
    EXPECT_NE(field(*a.engine, "sent_pkts"), "missing");
    ASSERT_EQ(a.qps.size(), 1u);
    EXPECT_EQ(a.qps[0].qpn, static_cast<long>(n[0]->qpn.v));
    EXPECT_NE(field(a.qps[0].counters, "rcvd_pkts"), "missing");
}

TEST(DpdkQueryMailbox, AnUnservedQuestionTimesOut) {
    QueryMailbox box;
    CounterQuery q;
    EXPECT_FALSE(box.ask(q, 5));
    // A late server finds nothing to answer.
    bool called = false;
    box.serve([&](CounterQuery&) { called = true; });
    EXPECT_FALSE(called);
}

}  // namespace
}  // namespace rocemu::dpdk
