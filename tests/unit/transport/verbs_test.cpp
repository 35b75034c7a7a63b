// Objects, the QP state machine and modify_qp validation.
#include <cerrno>
#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "tests/unit/transport/harness.hpp"

namespace rocemu::transport::test {
namespace {

std::unique_ptr<Engine> make_engine() {
    EngineConfig c;
    c.mac = mac_of(0);
    c.gids = {ip_of(0)};
    VerbsError e;
    auto eng = Engine::create(c, e);
    EXPECT_FALSE(e);
    return eng;
}

TEST(TransportConfig, RejectsBadValuesNamingTheKey) {
    EngineConfig c;
    VerbsError e;
    EXPECT_EQ(Engine::create(c, e), nullptr);
    EXPECT_STREQ(e.attr, "gids");
    c.gids = {ip_of(0)};
    c.cnp_dscp = 64;
    EXPECT_EQ(Engine::create(c, e), nullptr);
    EXPECT_STREQ(e.attr, "cnp_dscp");
    EXPECT_NE(e.msg.find("64"), std::string::npos);
    EXPECT_NE(e.msg.find("[0, 63]"), std::string::npos);
    c.cnp_dscp = 48;
    c.max_unacked_psns = 0;
    EXPECT_EQ(Engine::create(c, e), nullptr);
    EXPECT_STREQ(e.attr, "max_unacked_psns");
}

TEST(TransportObjects, MrKeysAccessAndLifetimes) {
    auto e = make_engine();
    auto pd = e->alloc_pd();
    ASSERT_TRUE(pd.ok());
    std::vector<uint8_t> buf(4096);
    auto bad = e->reg_mr(pd.value, buf.data(), buf.size(), kRemoteWrite);
    EXPECT_FALSE(bad.ok());
    EXPECT_STREQ(bad.error.attr, "access");
    auto mr = e->reg_mr(pd.value, buf.data(), buf.size(), kLocalWrite | kRemoteWrite);
    ASSERT_TRUE(mr.ok());
    EXPECT_NE(mr.value.lkey, 0u);
    auto mr2 = e->reg_mr(pd.value, buf.data(), buf.size(), kLocalWrite);
    EXPECT_NE(mr2.value.lkey, mr.value.lkey);
    EXPECT_EQ(e->dealloc_pd(pd.value).err, EBUSY);
    EXPECT_FALSE(e->dereg_mr(mr.value));
    EXPECT_TRUE(e->dereg_mr(mr.value));  // already gone
    EXPECT_FALSE(e->dereg_mr(mr2.value));
    EXPECT_FALSE(e->dealloc_pd(pd.value));
    EXPECT_EQ(e->create_cq(0).error.err, EINVAL);
}

// resize_cq keeps the completions waiting, in order, and grows the room for
// more; it refuses to drop any.
TEST(TransportObjects, ResizeCqKeepsWaitingCompletionsInOrder) {
    Loop L;
    Side s[2] = {make_side(L[0], {}, 4), make_side(L[1])};
    connect(L, s);
    std::vector<uint8_t> mem[2] = {std::vector<uint8_t>(4096, 7), std::vector<uint8_t>(4096)};
    MrHandle mr[2];
    for (int i = 0; i < 2; ++i)
        mr[i] = L[i].reg_mr(s[i].pd, mem[i].data(), mem[i].size(), kLocalWrite | kRemoteWrite).value;
    auto write = [&](uint64_t id) {
        SendWr w = make_wr(id, WrOpcode::RdmaWrite, mem[0].data() + id * 8, 8, mr[0].lkey);
        w.remote_addr = reinterpret_cast<uint64_t>(mem[1].data() + id * 8);
        w.rkey = mr[1].rkey;
        EXPECT_FALSE(L[0].post_send(s[0].qpn, std::array{w}, L.fx[0]));
    };
    for (uint64_t id = 1; id <= 4; ++id) write(id);
    L.settle();
    const VerbsError fewer = L[0].resize_cq(s[0].scq, 2);
    EXPECT_EQ(fewer.err, EINVAL);
    EXPECT_STREQ(fewer.attr, "cqe");
    EXPECT_EQ(L[0].resize_cq(CqHandle{99}, 16).err, EINVAL);
    ASSERT_FALSE(L[0].resize_cq(s[0].scq, 16));
    for (uint64_t id = 5; id <= 12; ++id) write(id);  // 12 waiting: more than the 4 it was created with
    L.settle();
    const std::vector<Wc> wc = drain(L[0], s[0].scq);
    ASSERT_EQ(wc.size(), 12u);
    for (uint64_t i = 0; i < wc.size(); ++i) {
        EXPECT_EQ(wc[i].wr_id, i + 1);
        EXPECT_EQ(wc[i].status, WcStatus::Success);
    }
    EXPECT_EQ(std::memcmp(mem[0].data() + 8, mem[1].data() + 8, 12 * 8), 0);
}

TEST(TransportObjects, CreateQpValidatesAttributes) {
    auto e = make_engine();
    QpInitAttr ia;
    auto r = e->create_qp(ia);
    EXPECT_STREQ(r.error.attr, "pd");
    ia.pd = e->alloc_pd().value;
    ia.send_cq = ia.recv_cq = e->create_cq(16).value;
    ia.cap.max_send_sge = 99;
    r = e->create_qp(ia);
    EXPECT_STREQ(r.error.attr, "cap.max_send_sge");
    ia.cap.max_send_sge = 2;
    ia.reliability = Reliability::Spray;
    ia.reorder_window = 100;
    r = e->create_qp(ia);
    EXPECT_STREQ(r.error.attr, "reorder_window");
    ia.reorder_window = 128;
    r = e->create_qp(ia);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.value.v, Engine::kFirstQpn);
    EXPECT_EQ(e->create_qp(ia).value.v, Engine::kFirstQpn + 1);
}

// With an SRQ the QP has no receive queue of its own: like ibverbs, its
// receive capacities are not checked then (rdma-ops had to pass 1).
TEST(TransportObjects, AQpOnAnSrqIgnoresItsReceiveCaps) {
    auto e = make_engine();
    QpInitAttr ia;
    ia.pd = e->alloc_pd().value;
    ia.send_cq = ia.recv_cq = e->create_cq(16).value;
    ia.cap.max_recv_wr = 0;
    ia.cap.max_recv_sge = 0;
    auto r = e->create_qp(ia);
    EXPECT_STREQ(r.error.attr, "cap.max_recv_wr");
    ia.cap.max_recv_wr = 4;
    r = e->create_qp(ia);
    EXPECT_STREQ(r.error.attr, "cap.max_recv_sge");
    ia.cap.max_recv_wr = 0;
    ia.srq = e->create_srq(ia.pd, 16, 1).value;
    r = e->create_qp(ia);
    EXPECT_TRUE(r.ok()) << r.error.msg;
}

struct TransportState : ::testing::Test {
    std::unique_ptr<Engine> e = make_engine();
    Effects fx;
    Qpn qp;
    CqHandle cq;
    void make(QpType t) {
        QpInitAttr ia;
        ia.qp_type = t;
        ia.pd = e->alloc_pd().value;
        cq = ia.send_cq = ia.recv_cq = e->create_cq(64).value;
        qp = e->create_qp(ia).value;
    }
    VerbsError to_init(uint32_t extra = 0) {
        QpAttr a;
        a.qp_state = QpState::Init;
        return e->modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags | extra, fx);
    }
    QpAttr rtr_attr() {
        QpAttr a;
        a.qp_state = QpState::Rtr;
        a.path_mtu = PathMtu::Mtu4096;
        a.dest_qp_num = Qpn{0x99};
        a.rq_psn = Psn{7};
        a.ah_attr.dgid = ip_of(1);
        return a;
    }
    static constexpr uint32_t kRtrMask =
        kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic | kAttrMinRnrTimer;
    static constexpr uint32_t kRtsMask =
        kAttrState | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrSqPsn | kAttrMaxQpRdAtomic;
    QpState state() {
        QpAttr a;
        QpInitAttr ia;
        e->query_qp(qp, a, ia);
        return a.qp_state;
    }
};

TEST_F(TransportState, RcWalksResetInitRtrRts) {
    make(QpType::Rc);
    EXPECT_EQ(state(), QpState::Reset);
    ASSERT_FALSE(to_init());
    EXPECT_EQ(state(), QpState::Init);
    ASSERT_FALSE(e->modify_qp(qp, rtr_attr(), kRtrMask, fx));
    EXPECT_EQ(state(), QpState::Rtr);
    QpAttr a;
    a.qp_state = QpState::Rts;
    a.sq_psn = Psn{0xFFFFF0};
    ASSERT_FALSE(e->modify_qp(qp, a, kRtsMask, fx));
    EXPECT_EQ(state(), QpState::Rts);
    QpAttr q;
    QpInitAttr ia;
    e->query_qp(qp, q, ia);
    EXPECT_EQ(q.sq_psn.value(), 0xFFFFF0u);
    EXPECT_EQ(q.rq_psn.value(), 7u);
    EXPECT_EQ(q.path_mtu, PathMtu::Mtu4096);
    a.qp_state = QpState::Sqd;
    EXPECT_FALSE(e->modify_qp(qp, a, kAttrState, fx));
    a.qp_state = QpState::Rts;
    EXPECT_FALSE(e->modify_qp(qp, a, kAttrState, fx));
}

TEST_F(TransportState, MissingRequiredAttributeIsNamed) {
    make(QpType::Rc);
    QpAttr a;
    a.qp_state = QpState::Init;
    auto err = e->modify_qp(qp, a, kAttrState | kAttrPort | kAttrAccessFlags, fx);
    EXPECT_EQ(err.err, EINVAL);
    EXPECT_STREQ(err.attr, "pkey_index");
    ASSERT_FALSE(to_init());
    err = e->modify_qp(qp, rtr_attr(), kRtrMask & ~kAttrDestQpn, fx);
    EXPECT_STREQ(err.attr, "dest_qp_num");
    err = e->modify_qp(qp, rtr_attr(), kRtrMask & ~kAttrMaxDestRdAtomic, fx);
    EXPECT_STREQ(err.attr, "max_dest_rd_atomic");
    EXPECT_EQ(state(), QpState::Init);  // a rejected modify changes nothing
}

TEST_F(TransportState, DisallowedAttributeAndTransitionAreNamed) {
    make(QpType::Rc);
    auto err = to_init(kAttrSqPsn);
    EXPECT_STREQ(err.attr, "sq_psn");
    EXPECT_NE(err.msg.find("not allowed"), std::string::npos);
    QpAttr a;
    a.qp_state = QpState::Rts;
    err = e->modify_qp(qp, a, kRtsMask, fx);
    EXPECT_STREQ(err.attr, "qp_state");
    EXPECT_NE(err.msg.find("RESET -> RTS"), std::string::npos);
}

TEST_F(TransportState, ValueRangesAreChecked) {
    make(QpType::Rc);
    ASSERT_FALSE(to_init());
    QpAttr a = rtr_attr();
    a.path_mtu = static_cast<PathMtu>(6);
    EXPECT_STREQ(e->modify_qp(qp, a, kRtrMask, fx).attr, "path_mtu");
    a = rtr_attr();
    a.min_rnr_timer = 32;
    EXPECT_STREQ(e->modify_qp(qp, a, kRtrMask, fx).attr, "min_rnr_timer");
    ASSERT_FALSE(e->modify_qp(qp, rtr_attr(), kRtrMask, fx));
    a = QpAttr{};
    a.qp_state = QpState::Rts;
    a.retry_cnt = 8;
    auto err = e->modify_qp(qp, a, kRtsMask, fx);
    EXPECT_STREQ(err.attr, "retry_cnt");
    EXPECT_NE(err.msg.find("[0, 7]"), std::string::npos);
}

TEST_F(TransportState, UdNeedsQkeyAndOnlySqPsnForRts) {
    make(QpType::Ud);
    QpAttr a;
    a.qp_state = QpState::Init;
    EXPECT_STREQ(e->modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort, fx).attr, "qkey");
    EXPECT_FALSE(e->modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrQkey, fx));
    a.qp_state = QpState::Rtr;
    EXPECT_STREQ(e->modify_qp(qp, a, kAttrState | kAttrAv, fx).attr, "ah_attr");
    EXPECT_FALSE(e->modify_qp(qp, a, kAttrState, fx));
    a.qp_state = QpState::Rts;
    EXPECT_STREQ(e->modify_qp(qp, a, kAttrState, fx).attr, "sq_psn");
    EXPECT_FALSE(e->modify_qp(qp, a, kAttrState | kAttrSqPsn, fx));
}

TEST_F(TransportState, ErrFlushesEveryOutstandingWr) {
    make(QpType::Rc);
    ASSERT_FALSE(to_init());
    std::vector<uint8_t> buf(64);
    PdHandle pd{1};
    auto mr = e->reg_mr(pd, buf.data(), buf.size(), kLocalWrite);
    for (int i = 0; i < 3; ++i) ASSERT_FALSE(e->post_recv(qp, std::array{make_recv(100 + i, buf.data(), 64, mr.value.lkey)}, fx));
    ASSERT_FALSE(e->modify_qp(qp, rtr_attr(), kRtrMask, fx));
    QpAttr a;
    a.qp_state = QpState::Rts;
    ASSERT_FALSE(e->modify_qp(qp, a, kRtsMask, fx));
    for (int i = 0; i < 2; ++i)
        ASSERT_FALSE(e->post_send(qp, std::array{make_wr(i, WrOpcode::Send, buf.data(), 8, mr.value.lkey, false)}, fx));
    a.qp_state = QpState::Err;
    ASSERT_FALSE(e->modify_qp(qp, a, kAttrState, fx));
    EXPECT_EQ(state(), QpState::Err);
    auto wcs = drain(*e, cq);
    ASSERT_EQ(wcs.size(), 5u);  // unsignaled WRs are flushed too: every WR completes
    EXPECT_EQ(wcs[0].wr_id, 0u);
    EXPECT_EQ(wcs[1].wr_id, 1u);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(wcs[2 + i].wr_id, 100u + i);
        EXPECT_EQ(wcs[2 + i].opcode, WcOpcode::Recv);
    }
    for (auto& w : wcs) EXPECT_EQ(w.status, WcStatus::WrFlushErr);
    ASSERT_EQ(fx.cq_events.size(), 1u);
    // WRs posted in ERR complete at once with a flush error.
    ASSERT_FALSE(e->post_send(qp, std::array{make_wr(7, WrOpcode::Send, buf.data(), 8, mr.value.lkey)}, fx));
    wcs = drain(*e, cq);
    ASSERT_EQ(wcs.size(), 1u);
    EXPECT_EQ(wcs[0].status, WcStatus::WrFlushErr);
    a.qp_state = QpState::Reset;
    EXPECT_FALSE(e->modify_qp(qp, a, kAttrState, fx));
    EXPECT_EQ(state(), QpState::Reset);
}

TEST_F(TransportState, PostSendNeedsRts) {
    make(QpType::Rc);
    std::vector<uint8_t> buf(8);
    auto err = e->post_send(qp, std::array{make_wr(1, WrOpcode::Send, buf.data(), 8, 0)}, fx);
    EXPECT_STREQ(err.attr, "qp_state");
}

TEST(TransportObjects, RxeUdpSourcePortMatchesCaptures) {
    // rc_send_3000B capture: QPN 0x12 on both sides, source port 49476.
    EXPECT_EQ(Engine::rxe_udp_sport(Qpn{0x12}, Qpn{0x12}), 49476);
    EXPECT_EQ(Engine::rxe_udp_sport(Qpn{0x14}, Qpn{0x14}), 49552);
    EXPECT_EQ(Engine::rxe_udp_sport(Qpn{0x16}, Qpn{0x16}), 49636);
    EXPECT_EQ(Engine::rxe_udp_sport(Qpn{0x18}, Qpn{0x18}), 49728);
}

TEST(TransportObjects, LinkDownIsCounted) {
    auto e = make_engine();
    e->on_link_state(false);
    e->on_link_state(true);
    e->on_link_state(false);
    EXPECT_EQ(e->counters().link_downed, 2u);
    std::vector<std::string> names;
    for_each_counter(e->counters(), [&](const char* n, uint64_t) { names.emplace_back(n); });
    EXPECT_NE(std::find(names.begin(), names.end(), "retry_exceeded_err"), names.end());
    EXPECT_NE(std::find(names.begin(), names.end(), "drop_unknown_qpn"), names.end());
}

TEST(TransportObjects, RnrTimerTable) {
    EXPECT_EQ(rnr_timer_delay(0), Nanos::from_ms(655.36));
    EXPECT_EQ(rnr_timer_delay(1), Nanos::from_us(10));
    EXPECT_EQ(rnr_timer_delay(14), Nanos::from_us(1280));
    EXPECT_EQ(rnr_timer_delay(31), Nanos::from_ms(491.52));
}

// A QP keeps its headers as a template built by the first frame after a
// modify_qp. Moved through RESET and connected to another peer, its next
// frame must carry the new destination QPN and PSN, with a valid ICRC: a
// template left from the first connection would stamp the old ones.
TEST(TransportTemplate, AQpConnectedAgainStampsItsNewPeer) {
    Loop L;
    L.keep_log = true;
    const Side first[2] = {make_side(L[0]), make_side(L[1])};
    connect(L, first);
    const Side again[2] = {first[0], make_side(L[1])};
    std::vector<uint8_t> mem[2] = {std::vector<uint8_t>(4096, 0x5A), std::vector<uint8_t>(4096)};
    MrHandle mr[2];
    for (int i = 0; i < 2; ++i)
        mr[i] = L[i].reg_mr(i == 0 ? first[0].pd : first[1].pd, mem[i].data(), mem[i].size(), kLocalWrite).value;
    const MrHandle mr_again = L[1].reg_mr(again[1].pd, mem[1].data(), mem[1].size(), kLocalWrite).value;
    ASSERT_FALSE(L[1].post_recv(first[1].qpn, std::array{make_recv(1, mem[1].data(), 64, mr[1].lkey)}, L.fx[1]));

    // The frames side 0 sends for one SEND ONLY (opcode 0x04) from `from` on.
    const auto send_only = [&](size_t from) {
        std::vector<wire::RocePacket> out;
        for (size_t i = from; i < L.sent[0].size(); ++i) {
            wire::RocePacket p;
            EXPECT_EQ(wire::parse_roce(L.sent[0][i], p), wire::ParseError::Ok) << "frame " << i;
            if (p.bth.opcode == 0x04) out.push_back(p);
        }
        return out;
    };
    ASSERT_FALSE(L[0].post_send(first[0].qpn, std::array{make_wr(1, WrOpcode::Send, mem[0].data(), 64, mr[0].lkey)},
                                L.fx[0]));
    L.settle(Nanos::from_ms(10));
    ASSERT_EQ(drain(L[0], first[0].scq).size(), 1u);
    std::vector<wire::RocePacket> sent = send_only(0);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].bth.dqpn, first[1].qpn);

    QpAttr reset;
    reset.qp_state = QpState::Reset;
    ASSERT_FALSE(L[0].modify_qp(first[0].qpn, reset, kAttrState, L.fx[0]));
    ConnectOpts o;
    o.psn[0] = Psn{0x7000};
    o.psn[1] = Psn{0x9000};
    connect(L, again, o);
    ASSERT_FALSE(L[1].post_recv(again[1].qpn, std::array{make_recv(2, mem[1].data() + 64, 64, mr_again.lkey)}, L.fx[1]));
    const size_t mark = L.sent[0].size();
    ASSERT_FALSE(L[0].post_send(again[0].qpn, std::array{make_wr(2, WrOpcode::Send, mem[0].data(), 64, mr[0].lkey)},
                                L.fx[0]));
    L.settle(Nanos::from_ms(20));
    sent = send_only(mark);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].bth.dqpn, again[1].qpn);
    EXPECT_EQ(sent[0].bth.psn, Psn{0x7000});
    const std::vector<Wc> got = drain(L[1], again[1].rcq);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].status, WcStatus::Success);
    EXPECT_EQ(drain(L[1], first[1].rcq).size(), 1u);  // only the first SEND reached the first peer
}

}  // namespace
}  // namespace rocemu::transport::test
