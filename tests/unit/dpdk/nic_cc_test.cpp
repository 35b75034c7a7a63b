// DCQCN, PFC generation and deferred ARP in the live NIC: two NICs in one
// process over a crossed net_ring pair, driven through the real poll loop.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "dataplane/dpdk/eal.hpp"
#include "dataplane/dpdk/roce_nic.hpp"
#include "tests/unit/dpdk/ring_roce_nic.hpp"

namespace rocemu::dpdk {
namespace {

using namespace rocemu::literals;
using namespace rocemu::transport;

constexpr size_t kBuf = 1 << 20;
constexpr uint32_t kWrite = 16384;

using CcNic = test::RingRoceNic;

test::RingRoceNicOptions options(const NicProfile& p) {
    test::RingRoceNicOptions o;
    o.profile = p;
    o.buf = kBuf;
    o.mbufs = 4095;
    o.cqe = 4096;
    o.max_send_wr = 1024;
    o.tx_drain = Nanos{0};
    o.arp_retransmit = 50_ms;  // an unanswered ARP fails after 3 probes, 150 ms
    return o;
}

// A profile whose DCQCN recovers in well under a second: short timers, big steps.
NicProfile fast_profile() {
    NicProfile p;
    p.cc = cc::load_cc_preset("aggressive").config;
    p.cc.dcqcn.rpg_time_reset = 20_us;
    p.cc.dcqcn.rpg_hai_rate = BitsPerSec::gbps(20);
    p.cc.dcqcn.rpg_ai_rate = BitsPerSec::gbps(5);
    return p;
}

class DpdkNicCc : public ::testing::Test {
protected:
    void make(const NicProfile& sender, const NicProfile& receiver) {
        static int serial = 0;
        const std::string s = std::to_string(serial++);
        std::string error;
        rings_ = RingPair::create("cc" + s, 4096, error);
        ASSERT_TRUE(rings_) << error;
        n[0] = std::make_unique<CcNic>(*rings_, 0, "cc_a" + s, 1, clock, options(sender));
        n[1] = std::make_unique<CcNic>(*rings_, 1, "cc_b" + s, 2, clock, options(receiver));
        ASSERT_TRUE(n[0]->engine && n[1]->engine);
    }
    void poll() {
        n[0]->nic->poll();
        n[1]->nic->poll();
    }
    // The bound is the test's own clock, not a NIC's: a NIC's time is the
    // one it read at its last turn (0 before its first).
    template <typename Done>
    bool poll_until(Done&& done, Nanos limit = 5_s) {
        const Nanos deadline = clock.now() + limit;
        while (!done()) {
            poll();
            if (clock.now() > deadline) return false;
        }
        return true;
    }
    static QpAttr rtr_attr(const CcNic& me, const CcNic& peer) {
        QpAttr a;
        a.qp_state = QpState::Rtr;
        a.dest_qp_num = peer.qpn;
        a.rq_psn = Psn{1000};
        a.path_mtu = PathMtu::Mtu1024;
        a.ah_attr.dgid = wire::IpAddr::from_v4(peer.stack.config().ipv4);
        a.ah_attr.sgid_index = 3;
        a.max_dest_rd_atomic = 1;
        (void)me;
        return a;
    }
    static constexpr uint32_t kRtr = kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
                                     kAttrMaxDestRdAtomic | kAttrMinRnrTimer;
    static void to_init(CcNic& me) {
        QpAttr a;
        a.qp_state = QpState::Init;
        a.qp_access_flags = kRemoteWrite;
        ASSERT_FALSE(me.engine->modify_qp(me.qpn, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags,
                                          me.upper->effects()));
    }
    static void to_rts(CcNic& me) {
        QpAttr a;
        a.qp_state = QpState::Rts;
        a.sq_psn = Psn{1000};
        const uint32_t rts =
            kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxQpRdAtomic;
        ASSERT_FALSE(me.engine->modify_qp(me.qpn, a, rts, me.upper->effects()));
    }
    // Both QPs to RTS; RTR through fill_av (polling until ARP answers).
    void connect() {
        for (int i = 0; i < 2; ++i) {
            CcNic& me = *n[i];
            to_init(me);
            QpAttr a = rtr_attr(me, *n[1 - i]);
            host::PathResult r;
            ASSERT_TRUE(poll_until([&] {
                r = fill_av(*me.nic, a.ah_attr, me.qpn.v);
                return r.status != host::PathResult::Status::Pending;
            })) << "NIC " << i << " at " << me.nic->now().v << " ns, test clock " << clock.now().v << " ns, ARP resolved "
                << me.stack.arp().counters().resolved << " failed " << me.stack.arp().counters().failed;
            ASSERT_EQ(r.status, host::PathResult::Status::Ready) << r.error;
            ASSERT_FALSE(me.engine->modify_qp(me.qpn, a, kRtr, me.upper->effects()));
            to_rts(me);
        }
    }
    // Keeps `depth` WRITEs of kWrite bytes in flight from NIC 0 to NIC 1.
    void pump(uint32_t depth) {
        CcNic& a = *n[0];
        Wc wc[64];
        for (uint32_t k; (k = a.engine->poll_cq(a.cq, wc)) > 0;)
            for (uint32_t i = 0; i < k; ++i) {
                EXPECT_EQ(wc[i].status, WcStatus::Success);
                --in_flight_;
                ++completed_;
            }
        while (in_flight_ < depth) {
            SendWr w;
            w.wr_id = posted_;
            w.opcode = WrOpcode::RdmaWrite;
            w.send_flags = kSendSignaled;
            const uint64_t off = (posted_ % (kBuf / kWrite)) * kWrite;
            w.sg_list.push_back(Sge{reinterpret_cast<uint64_t>(a.buf.data() + off), kWrite, a.mr.lkey});
            w.remote_addr = reinterpret_cast<uint64_t>(n[1]->buf.data() + off);
            w.rkey = n[1]->mr.rkey;
            if (a.engine->post_send(a.qpn, std::span(&w, 1), a.upper->effects())) return;
            ++posted_;
            ++in_flight_;
        }
        a.upper->effects().clear();
        n[1]->upper->effects().clear();
    }

    TscClock clock = TscClock::starting_now();
    std::unique_ptr<RingPair> rings_;  // outlives the NICs
    std::unique_ptr<CcNic> n[2];
    uint64_t posted_ = 0;
    uint32_t in_flight_ = 0;
    uint64_t completed_ = 0;
};

TEST_F(DpdkNicCc, CeMarksGiveCnpsThatCutTheSenderRateWhichRecoversWhenMarkingStops) {
    NicProfile receiver = fast_profile();
    receiver.mark_ce_every = 8;
    make(fast_profile(), receiver);
    connect();
    CcNic& a = *n[0];
    CcNic& b = *n[1];
    const BitsPerSec line = a.opts.profile->port_speed;

    // Marked data: the receiver's notification point sends CNPs, the sender cuts.
    ASSERT_TRUE(poll_until([&] {
        pump(8);
        const cc::QpCc* c = a.upper->qp_cc(a.qpn);
        return c && c->counters().rate_decreases >= 3 && c->rate() < line;
    })) << "no rate decrease; CNPs sent " << b.engine->counters().np_cnp_sent;
    EXPECT_GT(b.nic->stats()[PortStat::LabCeMarked], 0u);
    EXPECT_GT(b.engine->counters().np_ecn_marked_roce_packets, 0u);
    EXPECT_GT(b.engine->counters().np_cnp_sent, 0u);
    EXPECT_GT(a.engine->counters().rp_cnp_handled, 0u);
    EXPECT_EQ(a.upper->cnp_ignored(), 0u);
    // The QP's counters, as telemetry and `rocemu counters` get them.
    const uint64_t rate_mbps = a.qp_counter("rp_current_rate_mbps");
    EXPECT_LT(rate_mbps, line.v / 1000000);
    EXPECT_GE(a.qp_counter("rp_target_rate_mbps"), rate_mbps);
    EXPECT_GE(a.qp_counter("rp_rate_decreases"), 3u);
    EXPECT_GT(a.qp_counter("rp_cnp_handled"), 0u);
    EXPECT_GT(b.qp_counter("np_cnp_sent"), 0u);
    // CNPs leave with cnp_dscp / cnp_802p_prio and are paced per QP: never more than marked packets.
    EXPECT_LE(b.engine->counters().np_cnp_sent, b.engine->counters().np_ecn_marked_roce_packets);

    // Marking stops: the rate climbs back to line rate through the timer and byte stages.
    b.nic->set_mark_ce_every(0);
    const uint64_t cnps = b.engine->counters().np_cnp_sent;
    ASSERT_TRUE(poll_until([&] {
        pump(8);
        return a.upper->qp_cc(a.qpn)->rate() == line;
    })) << "rate stuck at " << a.upper->qp_cc(a.qpn)->rate().as_gbps() << " Gbit/s";
    EXPECT_GT(a.upper->qp_cc(a.qpn)->counters().rate_increases, 0u);
    EXPECT_LE(b.engine->counters().np_cnp_sent, cnps + 1) << "CNPs after marking stopped";
    EXPECT_EQ(a.qp_counter("rp_current_rate_mbps"), line.v / 1000000);
    EXPECT_EQ(a.nic->stats()[PortStat::DropTxFull], 0u);
    EXPECT_GT(completed_, 0u);

    // The engine-wide sums.
    CounterQuery q;
    a.upper->answer(q);
    uint64_t dec = 0;
    for (const auto& [name, v] : q.values)
        if (name == "rp_rate_decreases") dec = v;
    EXPECT_EQ(dec, a.upper->qp_cc(a.qpn)->counters().rate_decreases);
}

TEST_F(DpdkNicCc, NoCnpPeerMarksAreCountedButNoCnpIsSent) {
    NicProfile receiver = fast_profile();
    receiver.mark_ce_every = 4;
    receiver.send_cnp = false;
    make(fast_profile(), receiver);
    connect();
    ASSERT_TRUE(poll_until([&] {
        pump(8);
        return n[1]->engine->counters().np_ecn_marked_roce_packets >= 50;
    }));
    EXPECT_EQ(n[1]->engine->counters().np_cnp_sent, 0u);
    EXPECT_EQ(n[0]->engine->counters().rp_cnp_handled, 0u);
    EXPECT_EQ(n[0]->upper->qp_cc(n[0]->qpn)->rate(), n[0]->opts.profile->port_speed);
    EXPECT_EQ(n[0]->upper->qp_cc(n[0]->qpn)->counters().rate_decreases, 0u);
}

TEST_F(DpdkNicCc, CcNoneSendsNoCnpAndIgnoresCnps) {
    NicProfile none = fast_profile();
    none.cc.algorithm = cc::CcAlgorithm::kNone;
    none.mark_ce_every = 4;
    NicProfile dcqcn = fast_profile();
    dcqcn.mark_ce_every = 4;
    make(none, dcqcn);  // the receiver sends CNPs; the sender has no reaction point
    connect();
    ASSERT_TRUE(poll_until([&] {
        pump(8);
        return n[0]->engine->counters().rp_cnp_handled >= 5;
    }));
    EXPECT_EQ(n[0]->upper->qp_cc(n[0]->qpn), nullptr);
    EXPECT_EQ(n[0]->upper->cnp_ignored(), n[0]->engine->counters().rp_cnp_handled);
    EXPECT_EQ(n[0]->engine->counters().np_cnp_sent, 0u);
}

// Issue 7: a NIC slow to handle what it receives pauses its peer with PFC
// instead of dropping.
TEST_F(DpdkNicCc, SlowReceiverSendsPfcThatPausesTheSenderAndResumesItBelowXon) {
    NicProfile receiver;
    receiver.pfc_rx_xoff = 48;
    receiver.pfc_rx_xon = 8;
    receiver.rx_max_pps = 20000;  // far below what the sender offers
    make(NicProfile{}, receiver);
    connect();
    CcNic& a = *n[0];
    CcNic& b = *n[1];
    const int prio = b.opts.profile->pfc_priority;
    auto xoff_sent = [&] { return b.nic->stats()[static_cast<PortStat>(static_cast<int>(PortStat::TxPfcXoffPrio0) + prio)]; };
    auto xon_sent = [&] { return b.nic->stats()[static_cast<PortStat>(static_cast<int>(PortStat::TxPfcXonPrio0) + prio)]; };

    // The backlog passes XOFF; the pause is refreshed while it stays above XON.
    // The receiver drains in real time (48 - 8 frames at 20 kpps: 2 ms), so a
    // thread descheduled that long finds it below XON again: wait for a state
    // with the receiver pausing rather than expect it at the third XOFF.
    ASSERT_TRUE(poll_until([&] {
        pump(16);
        return a.upper->pauses().xoff_frames(prio) >= 3 && b.nic->rx_pfc().pausing();
    })) << "backlog " << b.nic->rx_backlog() << ", XOFF sent " << xoff_sent();
    EXPECT_GE(xoff_sent(), 3u);
    EXPECT_GE(b.nic->stats()[PortStat::RxBacklogMax], receiver.pfc_rx_xoff);
    EXPECT_LT(b.nic->stats()[PortStat::RxBacklogMax], Nic<EngineUpper>::kRxBacklog);
    for (int p = 0; p < 8; ++p)
        if (p != prio) {
            EXPECT_EQ(a.upper->pauses().xoff_frames(p), 0u) << "priority " << p;
        }

    // The receiver catches up: XON, and the sender finishes everything.
    b.nic->set_rx_max_pps(0);
    ASSERT_TRUE(poll_until([&] { pump(0); return in_flight_ == 0; }));
    EXPECT_FALSE(b.nic->rx_pfc().pausing());
    EXPECT_GE(xon_sent(), 1u);
    EXPECT_EQ(a.upper->pauses().xon_frames(prio), xon_sent());
    EXPECT_EQ(a.upper->pauses().xoff_frames(prio), xoff_sent()) << "every PFC frame decoded as 802.1Qbb";
    EXPECT_EQ(a.stack.counters().event(host::HostEvent::RxPfc), xoff_sent() + xon_sent());
    EXPECT_EQ(a.nic->stats()[PortStat::DropTxFull], 0u);
    EXPECT_EQ(b.engine->counters().duplicate_request, 0u) << "nothing was lost and sent again";
    EXPECT_EQ(b.engine->counters().out_of_seq_request, 0u);
}

// Issue 5: a modify_qp that waits for ARP completes when the reply arrives,
// with no caller polling fill_av.
TEST_F(DpdkNicCc, DeferredRtrIsAppliedWhenArpResolves) {
    make(NicProfile{}, NicProfile{});
    CcNic& a = *n[0];
    to_init(a);
    const QpAttr want = rtr_attr(a, *n[1]);
    const host::PathResult r = modify_qp_resolving(*a.nic, *a.upper, a.qpn, want, kRtr);
    ASSERT_EQ(r.status, host::PathResult::Status::Pending);
    ASSERT_NE(a.upper->deferred(a.qpn), nullptr);
    EXPECT_EQ(a.upper->deferred(a.qpn)->status, DeferredModify::Status::Pending);
    ASSERT_TRUE(poll_until([&] { return a.upper->deferred(a.qpn)->status != DeferredModify::Status::Pending; }));
    ASSERT_EQ(a.upper->deferred(a.qpn)->status, DeferredModify::Status::Done) << a.upper->deferred(a.qpn)->error;
    QpAttr got;
    QpInitAttr init;
    ASSERT_FALSE(a.engine->query_qp(a.qpn, got, init));
    EXPECT_EQ(got.qp_state, QpState::Rtr);
    EXPECT_EQ(got.ah_attr.dmac, n[1]->stack.config().mac);

    // Resolved now: the next one applies at once.
    const QpAttr again = rtr_attr(a, *n[1]);
    QpAttr rts = again;
    rts.qp_state = QpState::Rts;
    rts.sq_psn = Psn{1};
    const uint32_t rts_mask =
        kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxQpRdAtomic;
    EXPECT_EQ(modify_qp_resolving(*a.nic, *a.upper, a.qpn, rts, rts_mask).status, host::PathResult::Status::Ready);
    EXPECT_EQ(a.upper->deferred(a.qpn)->status, DeferredModify::Status::Done) << a.upper->deferred(a.qpn)->error;
    // A refused modify is reported, not lost.
    rts.qp_state = QpState::Rtr;
    modify_qp_resolving(*a.nic, *a.upper, a.qpn, rts, kAttrState);
    EXPECT_EQ(a.upper->deferred(a.qpn)->status, DeferredModify::Status::Failed);
    EXPECT_FALSE(a.upper->deferred(a.qpn)->error.empty());
}

TEST_F(DpdkNicCc, DeferredRtrFailsWhenNoArpReplyComes) {
    make(NicProfile{}, NicProfile{});
    CcNic& a = *n[0];
    to_init(a);
    QpAttr want = rtr_attr(a, *n[1]);
    want.ah_attr.dgid = wire::IpAddr::from_v4(0x0A000063u);  // 10.0.0.99: nobody
    ASSERT_EQ(modify_qp_resolving(*a.nic, *a.upper, a.qpn, want, kRtr).status, host::PathResult::Status::Pending);
    ASSERT_TRUE(poll_until([&] { return a.upper->deferred(a.qpn)->status != DeferredModify::Status::Pending; }, 10_s));
    EXPECT_EQ(a.upper->deferred(a.qpn)->status, DeferredModify::Status::Failed);
    EXPECT_EQ(a.upper->deferred(a.qpn)->error, "no ARP reply for 10.0.0.99");
}

}  // namespace
}  // namespace rocemu::dpdk
