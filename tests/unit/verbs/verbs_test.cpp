// The verbs API on two devices in one process over a crossed net_ring pair,
// in both progress modes: the application's thread drives the NICs (App), or
// each device has its own poll thread and WRs and completions cross
// lock-free queues (Lcore).
#include <gtest/gtest.h>
#include <rte_eth_ring.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "dataplane/dpdk/eal.hpp"
#include "verbs/verbs.hpp"

namespace rocemu::verbs {
namespace {

using transport::kAttrAccessFlags;
using transport::kAttrAv;
using transport::kAttrDestQpn;
using transport::kAttrMaxDestRdAtomic;
using transport::kAttrMaxQpRdAtomic;
using transport::kAttrMinRnrTimer;
using transport::kAttrPathMtu;
using transport::kAttrPkeyIndex;
using transport::kAttrPort;
using transport::kAttrQkey;
using transport::kAttrRetryCnt;
using transport::kAttrRnrRetry;
using transport::kAttrRqPsn;
using transport::kAttrSqPsn;
using transport::kAttrState;
using transport::kAttrTimeout;

const std::vector<std::string> kEal = {"--log-level", "lib.eal:error"};

class EalEnvironment : public ::testing::Environment {
public:
    void TearDown() override { dpdk::Eal::cleanup(); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new EalEnvironment);

constexpr uint32_t kAllAccess = transport::kLocalWrite | transport::kRemoteWrite | transport::kRemoteRead |
                                transport::kRemoteAtomic;
constexpr size_t kBuf = 1 << 20;

struct Side {
    std::unique_ptr<Context> ctx;
    PdHandle pd;
    CqHandle cq;
    Qpn qpn;
    std::vector<uint8_t> buf = std::vector<uint8_t>(2 * kBuf);
    MrHandle mr;
    uint32_t ip = 0;
    uint8_t* send_area() { return buf.data(); }
    uint8_t* recv_area() { return buf.data() + kBuf; }
    Sge sge(uint8_t* at, uint32_t len) const { return Sge{reinterpret_cast<uint64_t>(at), len, mr.lkey}; }
};

class VerbsRing : public ::testing::TestWithParam<Progress> {
protected:
    void SetUp() override {
        static int serial = 0;
        const std::string s = std::to_string(serial++);
        std::string error;
        ASSERT_TRUE(dpdk::Eal::init(kEal, error)) << error;
        ab_ = rte_ring_create(("vab" + s).c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        ba_ = rte_ring_create(("vba" + s).c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        ASSERT_TRUE(ab_ && ba_);
        rte_ring* rx[2] = {ba_, ab_};
        rte_ring* tx[2] = {ab_, ba_};
        for (int i = 0; i < 2; ++i) {
            const int id = rte_eth_from_rings(("verbs_" + s + "_" + std::to_string(i)).c_str(), &rx[i], 1, &tx[i], 1,
                                              SOCKET_ID_ANY);
            ASSERT_GE(id, 0);
            DeviceOptions o;
            o.attach_port = id;
            o.mbufs = 2047;
            o.progress = GetParam();
            o.host.ip = fmt_ip(i) + "/24";
            o.host.mac = "02:00:00:00:10:0" + std::to_string(i + 1);
            o.nic.zero_copy_min = zero_copy_min();
            if (i == 0) o.interrupted = [this] { return stop_asked_ && ++stop_polls_ > 3; };
            n[i].ip = 0x0A0A0001u + static_cast<uint32_t>(i);
            n[i].ctx = Context::open(o, kEal, error);
            ASSERT_TRUE(n[i].ctx) << error;
            Side& d = n[i];
            ASSERT_EQ(d.ctx->alloc_pd(d.pd), 0);
            ASSERT_EQ(d.ctx->create_cq(1024, nullptr, d.cq), 0);
            ASSERT_EQ(d.ctx->reg_mr(d.pd, d.buf.data(), d.buf.size(), kAllAccess, d.mr), 0) << d.ctx->last_error();
        }
    }
    void TearDown() override {
        n[0].ctx.reset();
        n[1].ctx.reset();
        rte_ring_free(ab_);
        rte_ring_free(ba_);
    }
    static std::string fmt_ip(int i) { return "10.10.0." + std::to_string(i + 1); }
    virtual uint32_t zero_copy_min() const { return 0; }

    void create_qps(QpType type) {
        for (Side& d : n) {
            QpInitAttr ia;
            ia.qp_type = type;
            ia.pd = d.pd;
            ia.send_cq = d.cq;
            ia.recv_cq = d.cq;
            ia.cap.max_send_wr = 512;
            ia.cap.max_recv_wr = 512;
            ASSERT_EQ(d.ctx->create_qp(ia, d.qpn), 0) << d.ctx->last_error();
        }
    }

    // The ibv_rc_pingpong sequence: INIT, RTR (address resolved), RTS.
    void connect_rc() {
        create_qps(QpType::Rc);
        for (int i = 0; i < 2; ++i) {
            Side& me = n[i];
            QpAttr a;
            a.qp_state = QpState::Init;
            a.qp_access_flags = kAllAccess;
            ASSERT_EQ(me.ctx->modify_qp(me.qpn, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags), 0)
                << me.ctx->last_error();
            a.qp_state = QpState::Rtr;
            a.dest_qp_num = n[1 - i].qpn;
            a.rq_psn = Psn{0x100u * static_cast<uint32_t>(2 - i)};
            a.path_mtu = PathMtu::Mtu1024;
            a.max_dest_rd_atomic = 16;
            a.min_rnr_timer = 12;
            a.ah_attr.dgid = wire::IpAddr::from_v4(n[1 - i].ip);
            a.ah_attr.sgid_index = 3;
            a.ah_attr.hop_limit = 1;
            ASSERT_EQ(me.ctx->modify_qp(me.qpn, a,
                                        kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
                                            kAttrMaxDestRdAtomic | kAttrMinRnrTimer),
                      0)
                << me.ctx->last_error();
            a.qp_state = QpState::Rts;
            a.sq_psn = Psn{0x100u * static_cast<uint32_t>(i + 1)};
            a.max_rd_atomic = 16;
            ASSERT_EQ(me.ctx->modify_qp(me.qpn, a,
                                        kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry |
                                            kAttrMaxQpRdAtomic),
                      0)
                << me.ctx->last_error();
        }
    }

    // Polls both CQs until `want[i]` completions arrived on side i (5 s at most).
    bool collect(std::vector<Wc> (&got)[2], const size_t (&want)[2]) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (got[0].size() < want[0] || got[1].size() < want[1]) {
            for (int i = 0; i < 2; ++i) {
                Wc wc[16];
                const int k = n[i].ctx->poll_cq(n[i].cq, wc);
                if (k < 0) return false;
                got[i].insert(got[i].end(), wc, wc + k);
            }
            if (std::chrono::steady_clock::now() > deadline) return false;
        }
        return true;
    }

    rte_ring* ab_ = nullptr;
    rte_ring* ba_ = nullptr;
    Side n[2];
    // Side 0's DeviceOptions::interrupted: true from its 4th call once asked.
    bool stop_asked_ = false;
    int stop_polls_ = 0;
};

TEST_P(VerbsRing, QueriesDescribeTheDeviceLikeIbverbs) {
    Context& c = *n[0].ctx;
    DeviceAttr d;
    ASSERT_EQ(c.query_device(d), 0);
    EXPECT_GT(d.max_qp, 0u);
    EXPECT_EQ(d.phys_port_cnt, 1);
    EXPECT_EQ(d.node_guid, 0x000000fffe001001ull);
    PortAttr p;
    ASSERT_EQ(c.query_port(1, p), 0);
    EXPECT_EQ(p.state, PortState::Active);
    EXPECT_EQ(p.active_mtu, PathMtu::Mtu1024);  // a 1500-byte port, as rxe
    EXPECT_EQ(p.link_layer, LinkLayer::Ethernet);
    EXPECT_EQ(p.lid, 0);
    EXPECT_EQ(p.gid_tbl_len, 4u);  // connectx layout
    EXPECT_EQ(c.query_port(2, p), EINVAL);
    Gid g;
    ASSERT_EQ(c.query_gid(1, 3, g), 0);
    const Gid v4 = wire::IpAddr::from_v4(n[0].ip).b;
    EXPECT_EQ(g, v4);
    GidType t;
    ASSERT_EQ(c.query_gid_type(1, 2, t), 0);
    EXPECT_EQ(t, GidType::RoceV1);
    ASSERT_EQ(c.query_gid_type(1, 3, t), 0);
    EXPECT_EQ(t, GidType::RoceV2);
    EXPECT_EQ(c.query_gid(1, 9, g), EINVAL);
    EXPECT_NE(c.last_error().find("GID index 9"), std::string::npos);
    const std::vector<std::string> devs = get_device_list();
    EXPECT_NE(std::find(devs.begin(), devs.end(), c.name()), devs.end());
}

TEST_P(VerbsRing, ErrorsAreErrnoValuesWithAMessage) {
    create_qps(QpType::Rc);
    Side& a = n[0];
    QpAttr attr;
    attr.qp_state = QpState::Rtr;  // RESET -> RTR skips INIT
    EXPECT_EQ(a.ctx->modify_qp(a.qpn, attr, kAttrState), EINVAL);
    EXPECT_FALSE(a.ctx->last_error().empty());
    MrHandle mr;
    EXPECT_EQ(a.ctx->reg_mr(PdHandle{999}, a.buf.data(), 16, 0, mr), EINVAL);
    Wc wc;
    EXPECT_EQ(a.ctx->poll_cq(CqHandle{999}, std::span(&wc, 1)), -EINVAL);

    attr.qp_state = QpState::Init;
    ASSERT_EQ(a.ctx->modify_qp(a.qpn, attr, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags), 0);
    attr.qp_state = QpState::Rtr;
    attr.dest_qp_num = n[1].qpn;
    attr.ah_attr.dgid = wire::IpAddr::from_v4(n[1].ip);
    attr.ah_attr.sgid_index = 0;  // RoCEv1 link-local in the connectx layout
    EXPECT_EQ(a.ctx->modify_qp(a.qpn, attr,
                               kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic |
                                   kAttrMinRnrTimer),
              EINVAL);
    EXPECT_NE(a.ctx->last_error().find("GID index 0 is a RoCEv1 GID"), std::string::npos) << a.ctx->last_error();
    EXPECT_NE(a.ctx->last_error().find("use GID index 1 (RoCEv2 fe80:"), std::string::npos) << a.ctx->last_error();
    attr.ah_attr.sgid_index = 3;
    attr.path_mtu = PathMtu::Mtu4096;  // the ring port carries 1500 bytes: max_mtu 1024
    EXPECT_EQ(a.ctx->modify_qp(a.qpn, attr,
                               kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic |
                                   kAttrMinRnrTimer),
              EINVAL);
    EXPECT_NE(a.ctx->last_error().find("path_mtu 4096 is larger than port 1's max_mtu 1024 (port MTU 1500"),
              std::string::npos)
        << a.ctx->last_error();

    EXPECT_STREQ(wc_status_str(WcStatus::Success), "success");
    EXPECT_STREQ(wc_status_str(WcStatus::WrFlushErr), "Work Request Flushed Error");
    EXPECT_STREQ(wc_status_str(WcStatus::RetryExcErr), "transport retry counter exceeded");
    EXPECT_STREQ(wc_status_str(WcStatus::GeneralErr), "general error");
}

// An address nobody answers waits for ARP (5 s, then ETIMEDOUT), turning
// the poll loops; DeviceOptions::interrupted ends that wait with EINTR, and
// the QP stays as it was: the same call to a peer that answers succeeds.
TEST_P(VerbsRing, AnInterruptEndsAWaitForAnArpReplyWithEintr) {
    create_qps(QpType::Rc);
    Side& a = n[0];
    QpAttr attr;
    attr.qp_state = QpState::Init;
    attr.qp_access_flags = kAllAccess;
    ASSERT_EQ(a.ctx->modify_qp(a.qpn, attr, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags), 0);
    attr.qp_state = QpState::Rtr;
    attr.dest_qp_num = n[1].qpn;
    attr.path_mtu = PathMtu::Mtu1024;
    attr.ah_attr.dgid = wire::IpAddr::from_v4(0x0A0A004Du);  // 10.10.0.77: on the subnet, nobody's
    attr.ah_attr.sgid_index = 3;
    const uint32_t rtr = kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic |
                         kAttrMinRnrTimer;
    stop_asked_ = true;
    EXPECT_EQ(a.ctx->modify_qp(a.qpn, attr, rtr), EINTR);
    EXPECT_EQ(stop_polls_, 4);
    EXPECT_NE(a.ctx->last_error().find("interrupted while waiting for the ARP reply for 10.10.0.77"),
              std::string::npos)
        << a.ctx->last_error();
    stop_asked_ = false;
    attr.ah_attr.dgid = wire::IpAddr::from_v4(n[1].ip);
    EXPECT_EQ(a.ctx->modify_qp(a.qpn, attr, rtr), 0) << a.ctx->last_error();
}

TEST_P(VerbsRing, RcEveryOpMovesTheRightBytes) {
    connect_rc();
    Side& a = n[0];
    Side& b = n[1];
    for (size_t i = 0; i < kBuf; ++i) a.send_area()[i] = static_cast<uint8_t>(i * 7 + 3);
    for (size_t i = 0; i < kBuf; ++i) b.send_area()[i] = static_cast<uint8_t>(i * 13 + 1);
    uint64_t* counter = reinterpret_cast<uint64_t*>(b.recv_area() + kBuf - 64);
    *counter = 40;

    RecvWr r;
    r.wr_id = 100;
    r.sg_list.push_back(b.sge(b.recv_area(), 70000));
    ASSERT_EQ(b.ctx->post_recv(b.qpn, std::span(&r, 1)), 0);

    std::vector<SendWr> wrs(5);
    wrs[0].wr_id = 1;
    wrs[0].opcode = WrOpcode::Send;
    wrs[0].sg_list.push_back(a.sge(a.send_area(), 65536));
    wrs[1].wr_id = 2;
    wrs[1].opcode = WrOpcode::RdmaWrite;
    wrs[1].sg_list.push_back(a.sge(a.send_area(), 1));
    wrs[1].remote_addr = reinterpret_cast<uint64_t>(b.recv_area() + 100000);
    wrs[1].rkey = b.mr.rkey;
    wrs[2] = wrs[1];
    wrs[2].wr_id = 3;
    wrs[2].sg_list[0].length = kBuf / 2;
    wrs[2].remote_addr = reinterpret_cast<uint64_t>(b.recv_area() + 200000);
    wrs[3].wr_id = 4;
    wrs[3].opcode = WrOpcode::RdmaRead;
    wrs[3].sg_list.push_back(a.sge(a.recv_area(), 300000));
    wrs[3].remote_addr = reinterpret_cast<uint64_t>(b.send_area());
    wrs[3].rkey = b.mr.rkey;
    wrs[4].wr_id = 5;
    wrs[4].opcode = WrOpcode::AtomicFetchAndAdd;
    wrs[4].sg_list.push_back(a.sge(a.recv_area() + kBuf - 8, 8));
    wrs[4].remote_addr = reinterpret_cast<uint64_t>(counter);
    wrs[4].rkey = b.mr.rkey;
    wrs[4].compare_add = 2;
    for (SendWr& w : wrs) w.send_flags = transport::kSendSignaled;
    ASSERT_EQ(a.ctx->post_send(a.qpn, wrs), 0) << a.ctx->last_error();

    std::vector<Wc> got[2];
    ASSERT_TRUE(collect(got, {5, 1}));
    for (size_t i = 0; i < 5; ++i) {
        EXPECT_EQ(got[0][i].status, WcStatus::Success) << wc_status_str(got[0][i].status);
        EXPECT_EQ(got[0][i].wr_id, i + 1);
    }
    EXPECT_EQ(got[0][3].opcode, WcOpcode::RdmaRead);
    EXPECT_EQ(got[1][0].wr_id, 100u);
    EXPECT_EQ(got[1][0].opcode, WcOpcode::Recv);
    EXPECT_EQ(got[1][0].byte_len, 65536u);
    EXPECT_EQ(std::memcmp(a.send_area(), b.recv_area(), 65536), 0);
    EXPECT_EQ(b.recv_area()[100000], a.send_area()[0]);
    EXPECT_EQ(std::memcmp(a.send_area(), b.recv_area() + 200000, kBuf / 2), 0);
    EXPECT_EQ(std::memcmp(b.send_area(), a.recv_area(), 300000), 0);
    uint64_t orig;
    std::memcpy(&orig, a.recv_area() + kBuf - 8, 8);
    EXPECT_EQ(orig, 40u);
    EXPECT_EQ(*counter, 42u);

    Counters pc, qc;
    ASSERT_EQ(a.ctx->query_counters(pc), 0);
    ASSERT_EQ(a.ctx->query_qp_counters(a.qpn, qc), 0);
    EXPECT_GE(qc.sent_pkts, 64u + 512u + 3u);  // SEND 64 pkts, WRITEs 1 + 512, READ request, atomic
    EXPECT_EQ(pc.sent_pkts, qc.sent_pkts);
    EXPECT_EQ(a.ctx->query_qp_counters(Qpn{0x999}, qc), EINVAL);
    uint64_t tx = 0;
    for (const auto& [name, v] : a.ctx->port_counters())
        if (name == "tx_packets") tx = v;
    EXPECT_GT(tx, 0u);  // port_counters() publishes the loop's counters first
}

TEST_P(VerbsRing, UdSendCarriesTheGrhAndSourceQp) {
    create_qps(QpType::Ud);
    for (Side& d : n) {
        QpAttr a;
        a.qp_state = QpState::Init;
        a.qkey = 0x11111111;
        ASSERT_EQ(d.ctx->modify_qp(d.qpn, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrQkey), 0)
            << d.ctx->last_error();
        a.qp_state = QpState::Rtr;
        ASSERT_EQ(d.ctx->modify_qp(d.qpn, a, kAttrState), 0) << d.ctx->last_error();
        a.qp_state = QpState::Rts;
        a.sq_psn = Psn{7};
        ASSERT_EQ(d.ctx->modify_qp(d.qpn, a, kAttrState | kAttrSqPsn), 0) << d.ctx->last_error();
    }
    Side& a = n[0];
    Side& b = n[1];
    RecvWr r;
    r.wr_id = 9;
    r.sg_list.push_back(b.sge(b.recv_area(), 1024 + 40));
    ASSERT_EQ(b.ctx->post_recv(b.qpn, std::span(&r, 1)), 0);
    AddressVector av;
    av.dgid = wire::IpAddr::from_v4(b.ip);
    av.sgid_index = 3;
    AhHandle ah;
    ASSERT_EQ(a.ctx->create_ah(a.pd, av, ah), 0) << a.ctx->last_error();
    std::iota(a.send_area(), a.send_area() + 1024, uint8_t{5});
    SendWr s;
    s.wr_id = 8;
    s.opcode = WrOpcode::Send;
    s.send_flags = transport::kSendSignaled;
    s.sg_list.push_back(a.sge(a.send_area(), 1024));
    s.ah = ah;
    s.remote_qpn = b.qpn;
    s.remote_qkey = 0x11111111;
    ASSERT_EQ(a.ctx->post_send(a.qpn, std::span(&s, 1)), 0);
    std::vector<Wc> got[2];
    ASSERT_TRUE(collect(got, {1, 1}));
    EXPECT_EQ(got[0][0].status, WcStatus::Success);
    EXPECT_EQ(got[1][0].status, WcStatus::Success);
    EXPECT_EQ(got[1][0].byte_len, 1024u + 40u);
    EXPECT_EQ(got[1][0].src_qp, a.qpn);
    EXPECT_TRUE(got[1][0].wc_flags & transport::kWcGrh);
    EXPECT_EQ(std::memcmp(a.send_area(), b.recv_area() + 40, 1024), 0);

    AddressVector bad = av;
    bad.sgid_index = 2;
    EXPECT_EQ(a.ctx->create_ah(a.pd, bad, ah), EINVAL);
}

TEST_P(VerbsRing, SrqFeedsTheQpAndTheChannelReportsTheCq) {
    Side& b = n[1];
    SrqHandle srq;
    ASSERT_EQ(b.ctx->create_srq(b.pd, 64, 1, srq), 0) << b.ctx->last_error();
    std::unique_ptr<CompChannel> ch;
    ASSERT_EQ(b.ctx->create_comp_channel(ch), 0);
    CqHandle rcq;
    ASSERT_EQ(b.ctx->create_cq(64, ch.get(), rcq), 0);
    for (Side& d : n) {
        QpInitAttr ia;
        ia.pd = d.pd;
        ia.send_cq = d.cq;
        ia.recv_cq = &d == &b ? rcq : d.cq;
        if (&d == &b) ia.srq = srq;
        ASSERT_EQ(d.ctx->create_qp(ia, d.qpn), 0) << d.ctx->last_error();
    }
    for (int i = 0; i < 2; ++i) {
        Side& me = n[i];
        QpAttr a;
        a.qp_state = QpState::Init;
        ASSERT_EQ(me.ctx->modify_qp(me.qpn, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags), 0);
        a.qp_state = QpState::Rtr;
        a.dest_qp_num = n[1 - i].qpn;
        a.ah_attr.dgid = wire::IpAddr::from_v4(n[1 - i].ip);
        a.ah_attr.sgid_index = 3;
        ASSERT_EQ(me.ctx->modify_qp(me.qpn, a,
                                    kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn |
                                        kAttrMaxDestRdAtomic | kAttrMinRnrTimer),
                  0)
            << me.ctx->last_error();
        a.qp_state = QpState::Rts;
        ASSERT_EQ(me.ctx->modify_qp(me.qpn, a,
                                    kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry |
                                        kAttrMaxQpRdAtomic),
                  0);
    }
    RecvWr r;
    r.wr_id = 55;
    r.sg_list.push_back(b.sge(b.recv_area(), 256));
    ASSERT_EQ(b.ctx->post_srq_recv(srq, std::span(&r, 1)), 0);
    ASSERT_EQ(b.ctx->req_notify_cq(rcq), 0);
    CqHandle fired;
    EXPECT_EQ(ch->get_cq_event(Nanos::from_ms(20), fired), ETIMEDOUT);  // nothing sent yet

    Side& a = n[0];
    std::memset(a.send_area(), 0x7b, 200);
    SendWr s;
    s.wr_id = 1;
    s.opcode = WrOpcode::Send;
    s.sg_list.push_back(a.sge(a.send_area(), 200));
    ASSERT_EQ(a.ctx->post_send(a.qpn, std::span(&s, 1)), 0);
    // In App mode the wait turns both devices' loops, so the SEND leaves a.
    ASSERT_EQ(ch->get_cq_event(Nanos::from_s(3), fired), 0);
    EXPECT_EQ(fired.id, rcq.id);
    Wc wc;
    ASSERT_EQ(b.ctx->poll_cq(rcq, std::span(&wc, 1)), 1);
    EXPECT_EQ(wc.wr_id, 55u);
    EXPECT_EQ(wc.byte_len, 200u);
    EXPECT_EQ(b.recv_area()[199], 0x7b);
}

// A CQ armed for events whose channel the application destroyed keeps
// working without events: its next completion must not reach the freed
// channel (it did: a null dereference on the poll thread).
TEST_P(VerbsRing, AnArmedCqOutlivesItsDestroyedChannel) {
    Side& a = n[0];
    Side& b = n[1];
    std::unique_ptr<CompChannel> ch;
    ASSERT_EQ(b.ctx->create_comp_channel(ch), 0);
    CqHandle on_channel;
    ASSERT_EQ(b.ctx->create_cq(64, ch.get(), on_channel), 0);
    b.cq = on_channel;  // b's QP completes sends and receives there
    connect_rc();
    RecvWr r;
    r.wr_id = 7;
    r.sg_list.push_back(b.sge(b.recv_area(), 256));
    ASSERT_EQ(b.ctx->post_recv(b.qpn, std::span(&r, 1)), 0);
    ASSERT_EQ(b.ctx->req_notify_cq(on_channel), 0);
    ch.reset();

    std::memset(a.send_area(), 0x5c, 100);
    SendWr s;
    s.wr_id = 1;
    s.opcode = WrOpcode::Send;
    s.send_flags = transport::kSendSignaled;
    s.sg_list.push_back(a.sge(a.send_area(), 100));
    ASSERT_EQ(a.ctx->post_send(a.qpn, std::span(&s, 1)), 0);
    std::vector<Wc> got[2];
    ASSERT_TRUE(collect(got, {1, 1}));
    EXPECT_EQ(got[1][0].wr_id, 7u);
    EXPECT_EQ(got[1][0].byte_len, 100u);
    EXPECT_EQ(b.recv_area()[99], 0x5c);
    // It has no channel now: arming it is refused, as for a CQ created without one.
    EXPECT_EQ(b.ctx->req_notify_cq(on_channel), EINVAL);
}

// Hundreds of WRs in flight at once (in Lcore mode, through the post queue); completions in order.
TEST_P(VerbsRing, ManyWritesInFlightCompleteInOrder) {
    connect_rc();
    Side& a = n[0];
    Side& b = n[1];
    constexpr int kWrs = 2000;
    for (size_t i = 0; i < 4096; ++i) a.send_area()[i] = static_cast<uint8_t>(i);
    int posted = 0, done = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (done < kWrs) {
        while (posted < kWrs && posted - done < 256) {
            SendWr w;
            w.wr_id = static_cast<uint64_t>(posted);
            w.opcode = WrOpcode::RdmaWrite;
            w.send_flags = transport::kSendSignaled;
            w.sg_list.push_back(a.sge(a.send_area() + posted % 64, 64));
            w.remote_addr = reinterpret_cast<uint64_t>(b.recv_area() + 64 * posted);
            w.rkey = b.mr.rkey;
            ASSERT_EQ(a.ctx->post_send(a.qpn, std::span(&w, 1)), 0) << a.ctx->last_error();
            ++posted;
        }
        Wc wc[32];
        const int k = a.ctx->poll_cq(a.cq, wc);
        for (int i = 0; i < k; ++i) {
            ASSERT_EQ(wc[i].status, WcStatus::Success);
            ASSERT_EQ(wc[i].wr_id, static_cast<uint64_t>(done));
            ++done;
        }
        if (GetParam() == Progress::App) b.ctx->progress();
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << done << " of " << kWrs;
    }
    for (int i = 0; i < kWrs; i += 97)
        ASSERT_EQ(std::memcmp(b.recv_area() + 64 * i, a.send_area() + i % 64, 64), 0) << i;
}

// The same, with request payload lent from the MR (EngineConfig::zero_copy_min).
class VerbsRingZeroCopy : public VerbsRing {
protected:
    uint32_t zero_copy_min() const override { return 1024; }
};

// Lent frames stuck in the wire (the peer is gone, nobody reads the ring)
// keep the MR: dereg_mr drives the NIC for a while, then says EBUSY, and
// succeeds once the frames are gone.
TEST_P(VerbsRingZeroCopy, DeregMrWaitsForLentFramesToLeave) {
    connect_rc();
    Side& a = n[0];
    n[1].ctx.reset();
    SendWr w;
    w.wr_id = 1;
    w.opcode = WrOpcode::RdmaWrite;
    w.sg_list.push_back(a.sge(a.send_area(), 16 << 10));
    w.remote_addr = 0x1000;
    w.rkey = 1;
    ASSERT_EQ(a.ctx->post_send(a.qpn, std::span(&w, 1)), 0) << a.ctx->last_error();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (rte_ring_count(ab_) < 16 && std::chrono::steady_clock::now() < deadline) a.ctx->progress();
    // No retransmissions from here on: the frames in the ring are all there are.
    ASSERT_EQ(a.ctx->destroy_qp(a.qpn), 0);
    const unsigned queued = rte_ring_count(ab_);
    ASSERT_GE(queued, 16u);  // every packet of the WRITE
    // The loop publishes its counters every millisecond (from the lcore, or
    // from progress() in App mode); port_counters() publishes first, so the
    // last frames are counted at once.
    uint64_t lent = 0;
    for (const auto& [name, v] : a.ctx->port_counters())
        if (name == "tx_zero_copy") lent = v;
    EXPECT_EQ(lent, queued);
    EXPECT_EQ(a.ctx->dereg_mr(a.mr), EBUSY);
    EXPECT_NE(a.ctx->last_error().find("in flight"), std::string::npos) << a.ctx->last_error();
    void* m = nullptr;
    while (rte_ring_dequeue(ab_, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    EXPECT_EQ(a.ctx->dereg_mr(a.mr), 0) << a.ctx->last_error();
}

INSTANTIATE_TEST_SUITE_P(Verbs, VerbsRingZeroCopy, ::testing::Values(Progress::App, Progress::Lcore),
                         [](const auto& info) { return info.param == Progress::App ? "App" : "Lcore"; });

INSTANTIATE_TEST_SUITE_P(Verbs, VerbsRing, ::testing::Values(Progress::App, Progress::Lcore),
                         [](const auto& info) { return info.param == Progress::App ? "App" : "Lcore"; });

}  // namespace
}  // namespace rocemu::verbs
