// The switch runtime through real ethdevs in one process: net_ring pairs join
// a sender NIC to switch port Ethernet0 and switch port Ethernet4 to a
// receiver. Time is handed in by the test (the runtime never reads a clock),
// so the run is deterministic and needs no sleeps.
#include <gtest/gtest.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <cstdio>
#include <cstring>

#include "dataplane/dpdk/eal.hpp"
#include "dataplane/dpdk/port.hpp"
#include "dataplane/wire/l2.hpp"
#include "switch/dpdk/frame.hpp"
#include "switch/dpdk/runtime.hpp"
#include "switch/dpdk/setup.hpp"

namespace rocemu::sw::live {
namespace {

using namespace rocemu::literals;

class EalEnvironment : public ::testing::Environment {
public:
    void SetUp() override {
        std::string error;
        ASSERT_TRUE(dpdk::Eal::init({"--log-level", "lib.eal:error"}, error)) << error;
    }
    void TearDown() override { dpdk::Eal::cleanup(); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new EalEnvironment);

// A host port and a switch port whose TX ring is the other's RX ring.
struct Cable {
    std::unique_ptr<dpdk::Port> host, sw;
    explicit Cable(const std::string& tag) {
        rte_ring* up = rte_ring_create(("up" + tag).c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        rte_ring* down = rte_ring_create(("dn" + tag).c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        EXPECT_TRUE(up && down);
        const int h = rte_eth_from_rings(("h" + tag).c_str(), &down, 1, &up, 1, SOCKET_ID_ANY);
        const int s = rte_eth_from_rings(("s" + tag).c_str(), &up, 1, &down, 1, SOCKET_ID_ANY);
        EXPECT_GE(h, 0);
        EXPECT_GE(s, 0);
        dpdk::PortConfig pc;
        pc.link_wait = Nanos{0};
        pc.mbufs = 4095;
        std::string err;
        host = dpdk::Port::attach(static_cast<uint16_t>(h), pc, err);
        EXPECT_TRUE(host) << err;
        sw = dpdk::Port::attach(static_cast<uint16_t>(s), pc, err);
        EXPECT_TRUE(sw) << err;
    }
};

const std::array<uint8_t, 6> kReceiverMac{0x02, 0, 0, 0, 0, 0x0b};
constexpr uint32_t kReceiverIp = 0x0A010002;

std::vector<uint8_t> roce_frame(uint32_t psn, size_t size) {
    static const std::vector<uint8_t> payload(9000, 0x5A);
    wire::RocePacket p;
    p.l2.dst = wire::MacAddr{{0x02, 0, 0, 0, 0, 0xee}};
    p.l2.src = wire::MacAddr{{0x02, 0, 0, 0, 0, 0x0a}};
    p.l2.ethertype = wire::ethertype::kIpv4;
    p.l3.src = wire::IpAddr::from_v4(0x0A000001);
    p.l3.dst = wire::IpAddr::from_v4(kReceiverIp);
    p.l3.dscp = 3;  // TC3: lossless under the SONiC defaults
    p.l3.ecn = wire::ecn::kEct0;
    p.bth.opcode = 0x64;
    p.bth.dqpn = Qpn{0x11};
    p.bth.psn = Psn{psn};
    p.deth.src_qp = Qpn{0x12};
    p.payload = payload.data();
    p.payload_len = static_cast<uint32_t>(size - 66);
    std::vector<uint8_t> f(wire::roce_frame_len(p));
    EXPECT_EQ(wire::encode_roce(p, f), f.size());
    return f;
}

struct Outcome {
    uint64_t received = 0;
    bool in_order = true;
    bool rewritten = true;
    bool checksums_ok = true;
    uint64_t ce = 0;
    uint64_t sender_xoff = 0, sender_xon = 0;
    uint64_t lossless_drops = 0;
    uint64_t xoff_sent = 0, xon_sent = 0;
    uint64_t board_xoff = 0;
    Nanos sender_paused{};
    bool drained = false;
};

// Ethernet0 (40G) takes a sender offering 1 KiB frames every 100 ns (80
// Gbit/s); Ethernet4 drains them at 10 Gbit/s to the receiver.
Outcome run(bool honour_pfc, uint32_t frames, const std::string& tag) {
    SwitchConfig cfg = sonic_default_config(2, BitsPerSec::gbps(40));
    cfg.ports[1].speed = BitsPerSec::gbps(10);
    cfg.pool_size = Bytes{1 << 20};
    cfg.pg_lossless.th = Threshold{true, -2, {}};
    cfg.wred[3].wred_green_enable = false;
    cfg.wred[3].green_min_threshold = Bytes{20000};
    cfg.wred[3].green_max_threshold = Bytes{200000};
    cfg.wred[3].green_drop_probability = 100;
    cfg.pfc_wd.enabled = false;
    EXPECT_EQ(validate(cfg), "");

    Cable a("a" + tag), b("b" + tag);
    Switch sw(cfg);
    sw.routes().learn_host_v4(kReceiverIp, 1, kReceiverMac);
    Outcome o;
    {
        SwitchRuntime rt(sw, {a.sw.get(), b.sw.get()}, {LinkConfig{.speed = cfg.ports[0].speed},
                                                          LinkConfig{.speed = cfg.ports[1].speed}},
                         nullptr);
        PauseState pauses;
        uint32_t next = 0;
        uint32_t expect_psn = 0;
        Nanos now = 1_us;
        const Nanos step = 100_ns;
        const Nanos limit = 20_ms;
        for (; now < limit; now += step) {
            if (next < frames && !pauses.paused(3, now)) {
                const auto f = roce_frame(next, 1024);
                rte_mbuf* m = rte_pktmbuf_alloc(a.host->pool());
                std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(f.size())), f.data(), f.size());
                if (rte_eth_tx_burst(a.host->id(), 0, &m, 1) == 1) ++next;
                else rte_pktmbuf_free(m);
            }
            rt.poll(now);
            rte_mbuf* rx[64];
            uint16_t n = rte_eth_rx_burst(a.host->id(), 0, rx, 64);
            for (uint16_t i = 0; i < n; ++i) {
                PacketDesc d;
                PfcFrameDesc pfc;
                const std::span<const uint8_t> f(rte_pktmbuf_mtod(rx[i], const uint8_t*), rte_pktmbuf_data_len(rx[i]));
                if (parse_frame(f, 0, 0, d, pfc) == RxKind::Pfc && honour_pfc) pauses.on_pfc(pfc, now, cfg.ports[0].speed);
            }
            rte_pktmbuf_free_bulk(rx, n);
            if (pauses.paused(3, now)) o.sender_paused += step;
            n = rte_eth_rx_burst(b.host->id(), 0, rx, 64);
            for (uint16_t i = 0; i < n; ++i) {
                const std::span<uint8_t> f(rte_pktmbuf_mtod(rx[i], uint8_t*), rte_pktmbuf_data_len(rx[i]));
                wire::RocePacket p;
                const wire::ParseError e = wire::parse_roce(f, p);
                o.checksums_ok = o.checksums_ok && e == wire::ParseError::Ok && wire::ip_checksum(f.data() + 14, 20) == 0;
                o.in_order = o.in_order && p.bth.psn.value() >= expect_psn;
                expect_psn = p.bth.psn.value() + 1;
                o.rewritten = o.rewritten && p.l2.dst.b == kReceiverMac && p.l2.src == b.sw->mac();
                o.ce += p.l3.ecn == wire::ecn::kCe;
                ++o.received;
            }
            rte_pktmbuf_free_bulk(rx, n);
            if (next == frames && rt.held() == 0 && o.received + lossless_drops(sw, 0) >= frames) break;
        }
        o.drained = now < limit;
        rt.publish(now);
        o.board_xoff = rt.board(0).value("pfc_tx_xoff_p3");
        o.lossless_drops = lossless_drops(sw, 0) + lossless_drops(sw, 1);
        o.xoff_sent = sw.port_counters(0).pfc_tx_xoff[3];
        o.xon_sent = sw.port_counters(0).pfc_tx_xon[3];
        o.sender_xoff = pauses.xoff_frames(3);
        o.sender_xon = pauses.xon_frames(3);
    }
    std::printf("honour_pfc=%d received=%lu lossless_drops=%lu xoff_sent=%lu xon_sent=%lu sender_xoff=%lu "
                "sender_xon=%lu sender_paused_us=%.1f ce=%lu\n",
                honour_pfc, o.received, o.lossless_drops, o.xoff_sent, o.xon_sent, o.sender_xoff, o.sender_xon,
                o.sender_paused.us(), o.ce);
    return o;
}

TEST(SwitchDpdkRing, SlowEgressPausesTheSenderWithNoLosslessDrop) {
    constexpr uint32_t kFrames = 3000;
    const Outcome o = run(true, kFrames, "pfc");
    EXPECT_TRUE(o.drained);
    EXPECT_GT(o.xoff_sent, 0u) << "the switch never paused the sender";
    EXPECT_GT(o.sender_xoff, 0u) << "no XOFF reached the sender";
    EXPECT_GT(o.xon_sent, 0u) << "the switch never resumed the sender";
    EXPECT_GT(o.sender_xon, 0u);
    EXPECT_GT(o.sender_paused, 100_us);
    EXPECT_EQ(o.lossless_drops, 0u);
    EXPECT_EQ(o.received, kFrames);
    EXPECT_TRUE(o.in_order);
    EXPECT_TRUE(o.rewritten) << "L2 not rewritten to the neighbor";
    EXPECT_TRUE(o.checksums_ok) << "a forwarded frame has a bad IP checksum or ICRC";
    EXPECT_GT(o.ce, 0u) << "the queue passed Kmin but nothing was marked";
    EXPECT_EQ(o.board_xoff, o.xoff_sent) << "telemetry board disagrees with the core";
}

TEST(SwitchDpdkRing, ASenderIgnoringPauseOverrunsTheHeadroom) {
    constexpr uint32_t kFrames = 3000;
    const Outcome o = run(false, kFrames, "nopfc");
    EXPECT_GT(o.xoff_sent, 0u);
    EXPECT_GT(o.lossless_drops, 0u) << "the headroom absorbed an unpaused 8:1 overload: the test proves nothing";
    EXPECT_EQ(o.received + o.lossless_drops, kFrames);
}

// Faults on Ethernet4's egress link, driven through the runtime: 200 frames,
// one every microsecond, from the sender to the receiver (both ports 10G).
struct FaultOutcome {
    uint64_t received = 0, bad_icrc = 0, pfc_at_sender = 0, storm_quanta = 0;
    Nanos first_arrival = Nanos::max();
    RtPortStats egress, ingress;
    LinkCounters egress_link;
};

FaultOutcome run_faults(const LinkConfig& ingress_link, const LinkConfig& egress_link, const std::string& tag) {
    constexpr uint32_t kFrames = 200;
    SwitchConfig cfg = sonic_default_config(2, BitsPerSec::gbps(10));
    Cable a("fa" + tag), b("fb" + tag);
    Switch sw(cfg);
    sw.routes().learn_host_v4(kReceiverIp, 1, kReceiverMac);
    FaultOutcome o;
    SwitchRuntime rt(sw, {a.sw.get(), b.sw.get()}, {ingress_link, egress_link}, nullptr);
    const Nanos t0 = 1_us;
    for (Nanos now = t0; now < t0 + 400_us; now += 100_ns) {
        const auto sent = static_cast<uint32_t>((now - t0).v / 1000);
        if ((now - t0).v % 1000 == 0 && sent < kFrames) {
            const auto f = roce_frame(sent, 512);
            rte_mbuf* m = rte_pktmbuf_alloc(a.host->pool());
            std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(f.size())), f.data(), f.size());
            EXPECT_EQ(rte_eth_tx_burst(a.host->id(), 0, &m, 1), 1);
        }
        rt.poll(now);
        rte_mbuf* rx[64];
        uint16_t n = rte_eth_rx_burst(b.host->id(), 0, rx, 64);
        for (uint16_t i = 0; i < n; ++i) {
            wire::RocePacket p;
            const std::span<const uint8_t> f(rte_pktmbuf_mtod(rx[i], const uint8_t*), rte_pktmbuf_data_len(rx[i]));
            o.bad_icrc += wire::parse_roce(f, p) == wire::ParseError::BadIcrc;
            o.first_arrival = std::min(o.first_arrival, now);
            ++o.received;
        }
        rte_pktmbuf_free_bulk(rx, n);
        n = rte_eth_rx_burst(a.host->id(), 0, rx, 64);
        for (uint16_t i = 0; i < n; ++i) {
            PacketDesc d;
            PfcFrameDesc pfc;
            const std::span<const uint8_t> f(rte_pktmbuf_mtod(rx[i], const uint8_t*), rte_pktmbuf_data_len(rx[i]));
            if (parse_frame(f, 0, 0, d, pfc) == RxKind::Pfc) {
                ++o.pfc_at_sender;
                o.storm_quanta = pfc.quanta[3];
            }
        }
        rte_pktmbuf_free_bulk(rx, n);
    }
    o.egress = rt.stats(1);
    o.ingress = rt.stats(0);
    o.egress_link = rt.link(1).counters();
    return o;
}

TEST(SwitchDpdkRing, LinkFaultsApplyToTheEgressPort) {
    const LinkConfig clean{.speed = BitsPerSec::gbps(10)};
    LinkConfig l = clean;
    l.loss_rate = 1.0;
    FaultOutcome o = run_faults(clean, l, "loss");
    EXPECT_EQ(o.received, 0u);
    EXPECT_EQ(o.egress[RtStat::DropLinkLoss], 200u);

    l = clean;
    l.corrupt_rate = 1.0;
    l.corrupt_as = Corruption::BadIcrc;
    o = run_faults(clean, l, "icrc");
    EXPECT_EQ(o.received, 200u);
    EXPECT_EQ(o.bad_icrc, 200u) << "delivered frames must fail the receiver's ICRC check";
    EXPECT_EQ(o.egress[RtStat::CorruptIcrc], 200u);

    l.corrupt_as = Corruption::BadFcs;
    o = run_faults(clean, l, "fcs");
    EXPECT_EQ(o.received, 0u);
    EXPECT_EQ(o.egress[RtStat::DropLinkFcs], 200u);

    l = clean;
    l.up_down = {{51_us, false}, {101_us, true}};
    o = run_faults(clean, l, "down");
    EXPECT_EQ(o.egress[RtStat::DropLinkDown], 50u);
    EXPECT_EQ(o.received, 150u);
    EXPECT_EQ(o.bad_icrc, 0u);

    l = clean;
    l.propagation_delay = 20_us;
    o = run_faults(clean, l, "delay");
    EXPECT_EQ(o.received, 200u);
    EXPECT_GE(o.first_arrival, 21_us) << "the first frame (sent at 1 us) crossed a 20 us link early";
    EXPECT_LT(o.first_arrival, 23_us);
    // A delay alone leaves the link plain: the runtime times its bursts in one
    // call (Link::transmit_plain), which must count every frame as transmit does.
    EXPECT_EQ(o.egress_link.frames, 200u);
    EXPECT_EQ(o.egress_link.bytes, 200u * roce_frame(0, 512).size());
}

TEST(SwitchDpdkRing, PfcStormComesOutOfThePort) {
    LinkConfig storm{.speed = BitsPerSec::gbps(10)};
    std::string err;
    ASSERT_TRUE(apply_link_keys("storm_prio=3,storm_start_ms=0,storm_stop_ms=0.1,storm_period_us=10", storm, err)) << err;
    const FaultOutcome o = run_faults(storm, LinkConfig{.speed = BitsPerSec::gbps(10)}, "storm");
    EXPECT_EQ(o.pfc_at_sender, 10u);
    EXPECT_EQ(o.storm_quanta, 0xFFFF);
    EXPECT_EQ(o.ingress[RtStat::TxPfc], 10u);
}

// Frames dropped on receipt: each port keeps the first of each reason, and
// the log line says what it was (a stray IPv6 multicast with hop limit 1, as
// a kernel's MLD report is, and a RoCE frame at TTL 1, under TTL decrement;
// an LLDP frame, not IP).
TEST(SwitchDpdkRing, KeepsTheFirstFrameOfEachReceiveDrop) {
    SwitchConfig cfg = sonic_default_config(2, BitsPerSec::gbps(10));
    Cable a("fd"), b("fe");
    Switch sw(cfg);
    sw.routes().learn_host_v4(kReceiverIp, 1, kReceiverMac);
    RuntimeOptions ro;
    ro.ttl_decrement = true;
    SwitchRuntime rt(sw, {a.sw.get(), b.sw.get()}, {LinkConfig{}, LinkConfig{}}, nullptr, ro);
    std::vector<uint8_t> mld(90, 0);
    const uint8_t mld_head[] = {0x33, 0x33, 0, 0, 0, 0x16, 0x02, 0, 0, 0, 0, 0x0a, 0x86, 0xdd, 0x60, 0, 0, 0, 0, 36, 0, 1};
    std::copy(std::begin(mld_head), std::end(mld_head), mld.begin());
    mld[22] = 0xfe;
    mld[23] = 0x80;
    mld[38] = 0xff;
    mld[39] = 0x02;
    mld[53] = 0x16;
    std::vector<uint8_t> lldp(60, 0);
    lldp[12] = 0x88;
    lldp[13] = 0xcc;
    // As a frame that went round a routing loop: TTL 1, header checksum right.
    const auto at_ttl1 = [](uint32_t psn) {
        std::vector<uint8_t> f = roce_frame(psn, 512);
        while (decrement_ttl(f) == TtlResult::Decremented) {}
        EXPECT_EQ(f[14 + 8], 1);
        return f;
    };
    const std::vector<uint8_t> ttl1 = at_ttl1(7), ttl1b = at_ttl1(8);
    const std::vector<const std::vector<uint8_t>*> frames{&mld, &lldp, &ttl1, &lldp, &ttl1b};
    for (const std::vector<uint8_t>* f : frames) {
        rte_mbuf* m = rte_pktmbuf_alloc(a.host->pool());
        std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(f->size())), f->data(), f->size());
        ASSERT_EQ(rte_eth_tx_burst(a.host->id(), 0, &m, 1), 1);
    }
    rt.poll(1_us);
    EXPECT_EQ(rt.stats(0)[RtStat::DropTtlExpired], 3u);
    EXPECT_EQ(rt.stats(0)[RtStat::DropNotIp], 2u);
    const std::vector<DroppedFrame>& d = rt.first_drops();
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(d[0].why, RtStat::DropTtlExpired);
    EXPECT_EQ(d[0].port, 0);
    EXPECT_EQ(d[0].len, 90u);
    EXPECT_EQ(describe_head({d[0].head.data(), d[0].head_len}, d[0].len),
              "IPv6 fe80:0:0:0:0:0:0:0 > ff02:0:0:0:0:0:0:16 next header 0 hop limit 1 (90 bytes)");
    EXPECT_EQ(d[1].why, RtStat::DropNotIp);
    EXPECT_EQ(describe_head({d[1].head.data(), d[1].head_len}, d[1].len), "other (60 bytes, ethertype 0x88cc)");
    // The TTL-1 RoCE frame was the second of its reason: not kept; alone, its line.
    const std::string roce = describe_head({ttl1.data(), DroppedFrame::kHead}, ttl1.size());
    EXPECT_NE(roce.find("10.0.0.1:"), std::string::npos) << roce;
    EXPECT_NE(roce.find("> 10.1.0.2 "), std::string::npos) << roce;
    EXPECT_TRUE(roce.ends_with("icrc not read ttl 1")) << roce;
}

}  // namespace
}  // namespace rocemu::sw::live
