// DCQCN through the engine's hooks: ECN-CE marks make the responder send
// CNPs, the requester's cc::QpCc cuts its rate, and the pacing gate spaces
// the data out.
#include <cstring>

#include "dataplane/transport/cc_driver.hpp"
#include "tests/unit/transport/harness.hpp"

namespace rocemu::transport::test {
namespace {

// Runs a 256 KiB WRITE, marking every data packet CE when `mark`; returns
// the virtual time it took and the driver's view of the QP.
struct Outcome {
    Nanos took;
    BitsPerSec rate;
    uint64_t cnp_handled;
    bool data_ok;
    uint64_t lent;  // frames sent zero copy
};

Outcome run(bool mark, uint32_t zc = 0) {
    EngineConfig ecfg;
    ecfg.zero_copy_min = zc;
    Loop L(ecfg);
    QpInitAttr t;
    t.peer_accepts_cnp = true;
    Side s[2];
    std::vector<uint8_t> mem[2];
    MrHandle mr[2];
    for (int i = 0; i < 2; ++i) {
        s[i] = make_side(L[i], t);
        mem[i].assign(1 << 20, static_cast<uint8_t>(i));
        mr[i] = L[i].reg_mr(s[i].pd, mem[i].data(), mem[i].size(), kLocalWrite | kRemoteWrite).value;
    }
    ConnectOpts o;
    o.mtu = PathMtu::Mtu4096;
    connect(L, s, o);
    const auto cfg = cc::load_cc_preset("connectx-default");
    EXPECT_TRUE(cfg.ok()) << cfg.error;
    const BitsPerSec line = BitsPerSec::gbps(100);
    CcDriver drv(L[0], cfg.config, line);
    drv.attach(s[0].qpn);
    uint64_t lent = 0;
    L.tx_hook = [&](int side, std::span<const TxFrame> f) {
        if (side != 0) return;
        drv.after_tx(f, L.now);
        for (const TxFrame& x : f) lent += x.ext != nullptr;
    };
    L.rx_hook = [&](int side) {
        if (side == 0) drv.after_rx(L.fx[0], L.now);
        L.fx[side].cnp_received.clear();
    };
    L.hook_next_timer = [&] { return drv.next_timer(); };
    L.hook_on_timer = [&](Nanos now) { drv.on_timer(now); };
    L.filter = [&](int from, const wire::RocePacket&, uint64_t) {
        Delivery d;
        d.ce = mark && from == 0;
        return d;
    };
    for (size_t k = 0; k < (256u << 10); ++k) mem[0][k] = static_cast<uint8_t>(k * 5);
    SendWr w = make_wr(1, WrOpcode::RdmaWrite, mem[0].data(), 256 << 10, mr[0].lkey);
    w.remote_addr = reinterpret_cast<uint64_t>(mem[1].data());
    w.rkey = mr[1].rkey;
    EXPECT_FALSE(L[0].post_send(s[0].qpn, std::array{w}, L.fx[0]));
    bool done = L.run([&] { return !drain(L[0], s[0].scq).empty(); });
    EXPECT_TRUE(done);
    const cc::QpCc* c = drv.qp_cc(s[0].qpn);
    return {L.now, c->rate(), c->counters().cnp_handled,
            std::memcmp(mem[0].data(), mem[1].data(), 256 << 10) == 0, lent};
}

TEST(TransportCc, ZeroCopyFramesArePacedLikeCopiedOnes) {
    const Outcome copied = run(true, 0);
    const Outcome lent = run(true, 1024);
    EXPECT_EQ(copied.lent, 0u);
    EXPECT_EQ(lent.lent, 64u);  // every 4 KiB packet of the 256 KiB WRITE
    EXPECT_TRUE(lent.data_ok);
    EXPECT_GT(lent.cnp_handled, 0u);
    EXPECT_EQ(copied.cnp_handled, lent.cnp_handled);
    EXPECT_EQ(copied.took.v, lent.took.v);
}

TEST(TransportCc, CnpsCutTheRateAndPaceTheQp) {
    const Outcome clean = run(false);
    const Outcome marked = run(true);
    EXPECT_TRUE(clean.data_ok);
    EXPECT_TRUE(marked.data_ok);
    EXPECT_EQ(clean.cnp_handled, 0u);
    EXPECT_EQ(clean.rate, BitsPerSec::gbps(100));
    EXPECT_GT(marked.cnp_handled, 0u);
    EXPECT_LT(marked.rate, BitsPerSec::gbps(100));
    EXPECT_GT(marked.took, clean.took);  // paced below line rate
}

// Every packet of a QP carries its traffic class, ECN bits included: the
// responder's ACKs and atomic ACKs as well as the requester's data (a
// not-ECT ACK is what a switch's WRED drops on a congested lossless queue).
// CNPs alone are not ECT.
TEST(TransportCc, AcksCarryTheQpsEcnBitsAndCnpsAreNotEct) {
    Loop L;
    L.keep_log = true;
    QpInitAttr t;
    t.peer_accepts_cnp = true;
    Side s[2];
    std::vector<uint8_t> mem[2];
    MrHandle mr[2];
    const uint32_t acc = kLocalWrite | kRemoteWrite | kRemoteAtomic;
    for (int i = 0; i < 2; ++i) {
        s[i] = make_side(L[i], t);
        mem[i].assign(64 << 10, static_cast<uint8_t>(i));
        mr[i] = L[i].reg_mr(s[i].pd, mem[i].data(), mem[i].size(), acc).value;
    }
    ConnectOpts o;
    o.traffic_class = static_cast<uint8_t>(26 << 2 | wire::ecn::kEct0);
    connect(L, s, o);
    L.filter = [&](int from, const wire::RocePacket&, uint64_t) {
        Delivery d;
        d.ce = from == 0;  // every request arrives CE-marked: the responder owes CNPs
        return d;
    };
    SendWr w = make_wr(1, WrOpcode::RdmaWrite, mem[0].data(), 32 << 10, mr[0].lkey);
    w.remote_addr = reinterpret_cast<uint64_t>(mem[1].data());
    w.rkey = mr[1].rkey;
    SendWr a = make_wr(2, WrOpcode::AtomicFetchAndAdd, mem[0].data() + (40 << 10), 8, mr[0].lkey);
    a.remote_addr = reinterpret_cast<uint64_t>(mem[1].data() + (40 << 10));
    a.rkey = mr[1].rkey;
    a.compare_add = 1;
    EXPECT_FALSE(L[0].post_send(s[0].qpn, std::array{w, a}, L.fx[0]));
    size_t done = 0;
    EXPECT_TRUE(L.run([&] { return (done += drain(L[0], s[0].scq).size()) == 2; }));
    L.settle();

    uint32_t data = 0, acks = 0, atomic_acks = 0, cnps = 0;
    for (int side = 0; side < 2; ++side) {
        for (const std::vector<uint8_t>& f : L.sent[side]) {
            wire::RocePacket p;
            ASSERT_EQ(wire::parse_roce(f, p), wire::ParseError::Ok);
            if (p.bth.opcode == wire::op::CNP) {
                EXPECT_EQ(side, 1);
                EXPECT_EQ(p.l3.ecn, wire::ecn::kNotEct);
                ++cnps;
                continue;
            }
            EXPECT_EQ(p.l3.ecn, wire::ecn::kEct0) << "opcode " << int{p.bth.opcode} << " from side " << side;
            EXPECT_EQ(p.l3.dscp, 26) << "opcode " << int{p.bth.opcode} << " from side " << side;
            acks += p.bth.opcode == wire::op::ACKNOWLEDGE;
            atomic_acks += p.bth.opcode == wire::op::ATOMIC_ACKNOWLEDGE;
            data += side == 0;
        }
    }
    EXPECT_GT(data, 8u);
    EXPECT_GT(acks, 0u);
    EXPECT_EQ(atomic_acks, 1u);
    EXPECT_GT(cnps, 0u);
}

}  // namespace
}  // namespace rocemu::transport::test
