// Two NICs in one process, joined back to back by a pair of crossed rte_rings
// (net_ring), driven by the real poll loop.
#include <gtest/gtest.h>
#include <rte_eth_ring.h>
#include <rte_ring.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "dataplane/dpdk/capture.hpp"
#include "dataplane/dpdk/eal.hpp"
#include "dataplane/dpdk/nic.hpp"
#include "dataplane/pcap/pcap.hpp"
#include "dataplane/wire/l2.hpp"

namespace rocemu::dpdk {
namespace {

using namespace rocemu::literals;

const wire::MacAddr kMacA{{0x02, 0, 0, 0, 0, 0x0a}};
const wire::MacAddr kMacB{{0x02, 0, 0, 0, 0, 0x0b}};
constexpr uint32_t kIpA = 0x0A000001, kIpB = 0x0A000002;

// An upper that records what the host stack reports and what RoCE arrives,
// and can be given frames to transmit.
struct Recorder {
    static constexpr bool kHandlesRoce = true;
    std::vector<host::HostEffect> effects;
    std::vector<std::vector<uint8_t>> roce_rx;
    std::vector<std::vector<uint8_t>> to_send;
    void on_roce(std::span<const uint8_t> f, Nanos) { roce_rx.emplace_back(f.begin(), f.end()); }
    void on_pfc(std::span<const uint8_t>, Nanos) {}
    void on_host_effect(const host::HostEffect& e, Nanos) { effects.push_back(e); }
    Nanos next_timer() const { return Nanos::max(); }
    void on_timer(Nanos) {}
    size_t pull_tx(std::span<TxSlot> out, Nanos) {
        size_t n = 0;
        while (n < out.size() && !to_send.empty() && out[n].buf.size() >= to_send.front().size()) {
            const std::vector<uint8_t> f = std::move(to_send.front());
            to_send.erase(to_send.begin());
            std::copy(f.begin(), f.end(), out[n].buf.begin());
            out[n++].len = static_cast<uint32_t>(f.size());
        }
        return n;
    }
    size_t count(host::HostEffect::Kind k) const {
        size_t n = 0;
        for (const auto& e : effects) n += e.kind == k;
        return n;
    }
};

host::HostConfig host_config(const wire::MacAddr& mac, uint32_t ip) {
    host::HostConfig c;
    c.mac = mac;
    c.ipv4 = ip;
    c.prefix_len = 24;
    return c;
}

// Two ports whose TX ring is the other's RX ring.
struct RingPair {
    std::unique_ptr<Port> a, b;
    rte_ring* ab = nullptr;  // A's TX, B's RX
    rte_ring* ba = nullptr;
    explicit RingPair(unsigned ring_size = 1024) {
        static int serial = 0;
        const int s = serial++;
        ab = rte_ring_create(("ab" + std::to_string(s)).c_str(), ring_size, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        ba = rte_ring_create(("ba" + std::to_string(s)).c_str(), ring_size, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        EXPECT_TRUE(ab && ba);
        const int pa = rte_eth_from_rings(("ringa" + std::to_string(s)).c_str(), &ba, 1, &ab, 1, SOCKET_ID_ANY);
        const int pb = rte_eth_from_rings(("ringb" + std::to_string(s)).c_str(), &ab, 1, &ba, 1, SOCKET_ID_ANY);
        EXPECT_GE(pa, 0);
        EXPECT_GE(pb, 0);
        std::string error;
        PortConfig cfg;
        cfg.mbufs = 1023;
        a = Port::attach(static_cast<uint16_t>(pa), cfg, error);
        EXPECT_TRUE(a) << error;
        b = Port::attach(static_cast<uint16_t>(pb), cfg, error);
        EXPECT_TRUE(b) << error;
    }
};

// Polls both NICs until `done` or two seconds pass.
template <typename NicA, typename NicB, typename Done>
bool run_until(NicA& a, NicB& b, Done&& done) {
    const Nanos deadline = a.now() + 2_s;
    while (!done()) {
        a.poll();
        b.poll();
        if (a.now() > deadline) return false;
    }
    // Let the last frames and the counter boards go out.
    const Nanos settle = a.now() + 2_ms;
    while (a.now() < settle) {
        a.poll();
        b.poll();
    }
    return true;
}

TEST(DpdkNicRing, TwoNicsResolveEachOtherAndPing) {
    RingPair ports;
    ASSERT_TRUE(ports.a && ports.b);
    const TscClock clock = TscClock::starting_now();
    host::HostStack ha(host_config(kMacA, kIpA)), hb(host_config(kMacB, kIpB));
    Recorder ua, ub;
    Nic<Recorder> a(*ports.a, ha, ua, clock), b(*ports.b, hb, ub, clock);
    a.poll();
    EXPECT_EQ(a.ping(kIpB, 7, 0, 56, 1), host::PingStatus::Resolving);
    ASSERT_TRUE(run_until(a, b, [&] { return ua.count(host::HostEffect::Kind::Resolved) == 1; }));
    for (uint16_t seq = 1; seq <= 5; ++seq) EXPECT_EQ(a.ping(kIpB, 7, seq, 56, 1), host::PingStatus::Sent);
    ASSERT_TRUE(run_until(a, b, [&] { return ua.count(host::HostEffect::Kind::EchoReply) == 5; }));

    std::vector<uint16_t> seqs;
    for (const auto& e : ua.effects)
        if (e.kind == host::HostEffect::Kind::EchoReply) seqs.push_back(e.echo_seq);
    EXPECT_EQ(seqs, (std::vector<uint16_t>{1, 2, 3, 4, 5}));
    EXPECT_EQ(hb.counters().event(host::HostEvent::RxEchoRequest), 5u);
    EXPECT_EQ(hb.counters().event(host::HostEvent::TxArpReply), 1u);
    EXPECT_EQ(hb.arp().lookup(kIpA, b.now()), kMacA);  // B learned A from its request
    // A sent one ARP request and five echo requests; B one ARP reply and five echo replies.
    EXPECT_EQ(a.stats()[PortStat::TxPackets], 6u);
    EXPECT_EQ(b.stats()[PortStat::TxPackets], 6u);
    EXPECT_EQ(a.stats()[PortStat::RxPackets], 6u);
    EXPECT_EQ(b.stats()[PortStat::RxPackets], 6u);
    EXPECT_EQ(b.board().value("tx_echo_reply"), 5u);
    EXPECT_EQ(a.board().value("rx_packets"), 6u);
}

// Frames of the IEEE local experimental EtherType 0x88B5 from `src` to `dst`,
// numbered from 0: the receiving host stack counts and drops them.
std::vector<std::vector<uint8_t>> numbered_frames(const wire::MacAddr& src, const wire::MacAddr& dst, uint16_t n) {
    std::vector<std::vector<uint8_t>> out;
    for (uint16_t i = 0; i < n; ++i) {
        std::vector<uint8_t> f(60, 0);
        std::copy(dst.b.begin(), dst.b.end(), f.begin());
        std::copy(src.b.begin(), src.b.end(), f.begin() + 6);
        f[12] = 0x88;
        f[13] = 0xB5;
        f[14] = static_cast<uint8_t>(i >> 8);
        f[15] = static_cast<uint8_t>(i);
        out.push_back(std::move(f));
    }
    return out;
}

// A NIC whose TX queue is full keeps the frames the queue refused, pulls no
// more, and sends them all once the peer drains the queue; none is dropped.
TEST(DpdkNicRing, AFullTxQueueHoldsFramesUntilThePeerDrainsIt) {
    RingPair ports(64);  // 63 frames fit in the ring
    ASSERT_TRUE(ports.a && ports.b);
    const TscClock clock = TscClock::starting_now();
    host::HostStack ha(host_config(kMacA, kIpA)), hb(host_config(kMacB, kIpB));
    Recorder ua, ub;
    Nic<Recorder> a(*ports.a, ha, ua, clock), b(*ports.b, hb, ub, clock);
    constexpr uint16_t kFrames = 200;
    ua.to_send = numbered_frames(kMacA, kMacB, kFrames);
    for (int turn = 0; turn < 20; ++turn) a.poll();  // B does not read: the ring fills
    EXPECT_EQ(a.stats()[PortStat::TxPackets], 63u);
    EXPECT_EQ(a.stats()[PortStat::DropTxFull], 0u);
    EXPECT_FALSE(ua.to_send.empty()) << "a NIC with a full queue pulls no more frames";
    ASSERT_TRUE(run_until(a, b, [&] { return b.stats()[PortStat::RxPackets] == kFrames; }));
    EXPECT_EQ(a.stats()[PortStat::TxPackets], kFrames);
    EXPECT_EQ(a.stats()[PortStat::DropTxFull], 0u);
    EXPECT_EQ(hb.counters().drop(host::HostDrop::UnsupportedEthertype), kFrames);
}

// A NIC whose TX queue is full holds its refused frames; when its receive
// backlog then calls for a pause, the PFC frame does not queue behind them:
// it is the first frame the PMD takes once the queue has room, with the
// configured pause quanta.
TEST(DpdkNicRing, PfcGoesOutAheadOfFramesAFullTxQueueHolds) {
    RingPair ports(64);  // 63 frames fit in the ring
    ASSERT_TRUE(ports.a && ports.b);
    const TscClock clock = TscClock::starting_now();
    host::HostStack ha(host_config(kMacA, kIpA));
    Recorder ua;
    NicConfig slow;
    slow.pfc_rx.xoff = 2;
    slow.pfc_rx.xon = 1;
    slow.pfc_rx.pause_quanta = 1234;
    slow.rx_max_pps = 1;  // A handles nothing for a second: what B sends waits in A's backlog
    Nic<Recorder> a(*ports.a, ha, ua, clock, nullptr, slow);
    constexpr auto kXoffPrio3 = static_cast<PortStat>(static_cast<int>(PortStat::TxPfcXoffPrio0) + 3);
    ua.to_send = numbered_frames(kMacA, kMacB, 200);
    for (int turn = 0; turn < 20; ++turn) a.poll();  // B does not read: the ring fills, A holds the rest
    ASSERT_EQ(a.stats()[PortStat::TxPackets], 63u);
    ASSERT_EQ(a.stats()[kXoffPrio3], 0u);

    // Frames for A straight into its RX ring: B's loop would read A's full ring.
    for (const std::vector<uint8_t>& f : numbered_frames(kMacB, kMacA, 8)) {
        rte_mbuf* in = rte_pktmbuf_alloc(ports.b->pool());
        ASSERT_NE(in, nullptr);
        std::memcpy(rte_pktmbuf_append(in, static_cast<uint16_t>(f.size())), f.data(), f.size());
        ASSERT_EQ(rte_ring_enqueue(ports.ba, in), 0);
    }
    a.poll();  // the backlog reaches XOFF: the pause waits, as the queue is still full
    ASSERT_GE(a.rx_backlog(), slow.pfc_rx.xoff);
    ASSERT_TRUE(a.rx_pfc().pausing());
    EXPECT_EQ(a.stats()[PortStat::DropTxFull], 0u) << "the pause is not dropped for want of room";
    EXPECT_EQ(a.stats()[kXoffPrio3], 0u) << "counted when the PMD takes it";

    rte_mbuf* m[64];
    const unsigned drained = rte_ring_dequeue_burst(ports.ab, reinterpret_cast<void**>(m), 64, nullptr);
    EXPECT_EQ(drained, 63u);
    rte_pktmbuf_free_bulk(m, drained);
    a.poll();
    const unsigned got = rte_ring_dequeue_burst(ports.ab, reinterpret_cast<void**>(m), 64, nullptr);
    ASSERT_GE(got, 2u);
    wire::Pfc pfc;
    EXPECT_TRUE(wire::parse_pfc(std::span(rte_pktmbuf_mtod(m[0], const uint8_t*), rte_pktmbuf_data_len(m[0])), pfc))
        << "the first frame after the drain is the pause";
    EXPECT_EQ(pfc.class_enable, 1u << 3);
    EXPECT_EQ(pfc.quanta[3], 1234);
    const uint8_t* next = rte_pktmbuf_mtod(m[1], const uint8_t*);
    EXPECT_EQ(next[14] << 8 | next[15], 63) << "then the held frames, in order";
    rte_pktmbuf_free_bulk(m, got);
    EXPECT_EQ(a.stats()[kXoffPrio3], 1u);
    EXPECT_EQ(a.stats()[PortStat::DropTxFull], 0u);
}

// Polls `nic` until `done` or two seconds pass.
template <typename NicT, typename Done>
bool poll_until(NicT& nic, Done&& done) {
    const Nanos deadline = nic.now() + 2_s;
    while (!done()) {
        nic.poll();
        if (nic.now() > deadline) return false;
    }
    return true;
}

// A NIC on port A alone (a NIC on B would free A's mbufs back to A's pool)
// after one turn filled its TX stash, with the rest of A's pool held here.
struct ShortPool {
    RingPair ports;
    TscClock clock = TscClock::starting_now();
    host::HostStack ha{host_config(kMacA, kIpA)};
    Recorder ua;
    std::optional<Nic<Recorder>> a;
    std::vector<std::vector<uint8_t>> frames = numbered_frames(kMacA, kMacB, 40);
    std::vector<rte_mbuf*> held;

    ShortPool() {
        // A constructor cannot ASSERT: without ports the NIC is not built,
        // and each test asserts that it was before using it.
        EXPECT_TRUE(ports.a && ports.b);
        if (!ports.a || !ports.b) return;
        a.emplace(*ports.a, ha, ua, clock);
        a->poll();
        while (rte_mbuf* x = rte_pktmbuf_alloc(ports.a->pool())) held.push_back(x);
    }
    uint64_t sent() const { return a->stats()[PortStat::TxPackets]; }
    void give_back_all() {
        rte_pktmbuf_free_bulk(held.data(), static_cast<unsigned>(held.size()));
        held.clear();
    }
    // All 40 frames reached B's side of the ring, in order.
    void expect_all_in_order() {
        rte_mbuf* m[64];
        const unsigned got = rte_ring_dequeue_burst(ports.ab, reinterpret_cast<void**>(m), 64, nullptr);
        ASSERT_EQ(got, 40u);
        for (unsigned i = 0; i < got; ++i) {
            const uint8_t* f = rte_pktmbuf_mtod(m[i], const uint8_t*);
            EXPECT_EQ(f[14] << 8 | f[15], static_cast<int>(i)) << "in order";
        }
        rte_pktmbuf_free_bulk(m, got);
    }
};

// The TX stash is refilled in bulk, all or nothing. A pool too short for a
// refill still lets the turn send what the stash holds; the rest of the
// upper's frames wait for mbufs and none is lost.
TEST(DpdkNicRing, AShortPoolStillSendsWhatTheStashHolds) {
    ShortPool t;
    ASSERT_TRUE(t.a.has_value());
    t.ua.to_send.assign(t.frames.begin(), t.frames.begin() + 10);
    ASSERT_TRUE(poll_until(*t.a, [&] { return t.sent() == 10; }));
    // 22 mbufs left in the stash, and the pool cannot refill it.
    t.ua.to_send.assign(t.frames.begin() + 10, t.frames.end());
    ASSERT_TRUE(poll_until(*t.a, [&] { return t.sent() == 32; }));
    EXPECT_EQ(t.ua.to_send.size(), 8u);
    EXPECT_GE(t.a->stats()[PortStat::TxPoolShort], 1u) << "the short refill is counted";
    EXPECT_EQ(t.a->stats()[PortStat::DropNoMbuf], 0u) << "as a wait, not a drop";

    t.give_back_all();
    ASSERT_TRUE(poll_until(*t.a, [&] { return t.sent() == 40; }));
    EXPECT_TRUE(t.ua.to_send.empty());
    t.expect_all_in_order();
    EXPECT_EQ(t.a->stats()[PortStat::DropTxFull], 0u);
}

// An empty stash and a pool with fewer free mbufs than a bulk refill: the
// turn still lends what the pool has, one mbuf at a time.
TEST(DpdkNicRing, AnEmptyStashSendsWhatAShortPoolStillHas) {
    ShortPool t;
    ASSERT_TRUE(t.a.has_value());
    constexpr unsigned kBurst = Nic<Recorder>::kBurst;
    t.ua.to_send.assign(t.frames.begin(), t.frames.begin() + kBurst);
    ASSERT_TRUE(poll_until(*t.a, [&] { return t.sent() == kBurst; }));

    constexpr unsigned kFree = 5;  // the stash is empty; the pool gets back this many
    ASSERT_GT(t.held.size(), kFree);
    rte_pktmbuf_free_bulk(t.held.data() + t.held.size() - kFree, kFree);
    t.held.resize(t.held.size() - kFree);
    t.ua.to_send.assign(t.frames.begin() + kBurst, t.frames.end());
    ASSERT_TRUE(poll_until(*t.a, [&] { return t.sent() == kBurst + kFree; }));
    EXPECT_EQ(t.ua.to_send.size(), 40u - kBurst - kFree);

    t.give_back_all();
    ASSERT_TRUE(poll_until(*t.a, [&] { return t.sent() == 40; }));
    t.expect_all_in_order();
}

TEST(DpdkNicRing, RoceFramesBuiltFromAResolvedPathReachThePeersTransport) {
    RingPair ports;
    ASSERT_TRUE(ports.a && ports.b);
    const TscClock clock = TscClock::starting_now();
    host::HostStack ha(host_config(kMacA, kIpA)), hb(host_config(kMacB, kIpB));
    Recorder ua, ub;
    Nic<Recorder> a(*ports.a, ha, ua, clock), b(*ports.b, hb, ub, clock);
    a.poll();

    host::AddressVector av;
    av.dgid = wire::IpAddr::from_v4(kIpB);
    av.sgid_index = 2;
    const host::PathResult v1 = a.resolve_path(av, 1);
    EXPECT_EQ(v1.status, host::PathResult::Status::Error);
    EXPECT_NE(v1.error.find("use GID index 3"), std::string::npos) << v1.error;

    av.sgid_index = 3;
    av.traffic_class = 26 << 2;
    ASSERT_EQ(a.resolve_path(av, 1).status, host::PathResult::Status::Pending);
    ASSERT_TRUE(run_until(a, b, [&] { return ua.count(host::HostEffect::Kind::Resolved) == 1; }));
    const host::PathResult path = a.resolve_path(av, 1);
    ASSERT_EQ(path.status, host::PathResult::Status::Ready) << path.error;

    wire::RocePacket p;
    p.l2 = path.l2;
    p.l3 = path.l3;
    p.bth.opcode = wire::op::SEND_ONLY;
    p.bth.dqpn = Qpn{0x11};
    const uint8_t payload[100] = {42};
    p.payload = payload;
    p.payload_len = sizeof payload;
    std::vector<uint8_t> frame(wire::roce_frame_len(p));
    ASSERT_EQ(wire::encode_roce(p, frame), frame.size());
    ua.to_send.push_back(frame);
    ASSERT_TRUE(run_until(a, b, [&] { return ub.roce_rx.size() == 1; }));

    wire::RocePacket got;
    ASSERT_EQ(wire::parse_roce(ub.roce_rx[0], got), wire::ParseError::Ok);
    EXPECT_EQ(got.l2.src, kMacA);
    EXPECT_EQ(got.l2.dst, kMacB);
    EXPECT_EQ(got.l3.dscp, 26);
    EXPECT_EQ(got.l3.ecn, wire::ecn::kEct0);
    EXPECT_EQ(got.payload_len, sizeof payload);
    EXPECT_EQ(hb.counters().event(host::HostEvent::RxRoce), 1u);
}

TEST(DpdkNicRing, RoceWithoutATransportIsDroppedAndCounted) {
    RingPair ports;
    ASSERT_TRUE(ports.a && ports.b);
    const TscClock clock = TscClock::starting_now();
    host::HostStack ha(host_config(kMacA, kIpA)), hb(host_config(kMacB, kIpB));
    Recorder ua;
    NoTransport none;
    Nic<Recorder> a(*ports.a, ha, ua, clock);
    Nic<NoTransport> b(*ports.b, hb, none, clock);
    wire::RocePacket p;
    p.l2.src = kMacA;
    p.l2.dst = kMacB;
    p.l3.src = wire::IpAddr::from_v4(kIpA);
    p.l3.dst = wire::IpAddr::from_v4(kIpB);
    p.bth.opcode = wire::op::SEND_ONLY;
    std::vector<uint8_t> frame(wire::roce_frame_len(p));
    ASSERT_EQ(wire::encode_roce(p, frame), frame.size());
    ua.to_send.push_back(frame);
    ASSERT_TRUE(run_until(a, b, [&] { return b.stats()[PortStat::RxPackets] == 1; }));
    EXPECT_EQ(b.stats()[PortStat::DropNoTransport], 1u);
    EXPECT_EQ(b.board().value("drop_no_transport"), 1u);
}

TEST(DpdkNicRing, CaptureWritesPcapngThatDecodes) {
    RingPair ports;
    ASSERT_TRUE(ports.a && ports.b);
    const std::string path =
        (std::filesystem::temp_directory_path() / ("rocemu-ring-" + std::to_string(getpid()) + ".pcapng")).string();
    {
        std::string error;
        std::unique_ptr<Capture> cap = Capture::open(path, 2048, error);
        ASSERT_TRUE(cap) << error;
        const TscClock clock = TscClock::starting_now();
        host::HostStack ha(host_config(kMacA, kIpA)), hb(host_config(kMacB, kIpB));
        Recorder ua, ub;
        Nic<Recorder> a(*ports.a, ha, ua, clock, cap.get()), b(*ports.b, hb, ub, clock, cap.get());
        a.poll();
        a.ping(kIpB, 1, 0, 56, 1);
        ASSERT_TRUE(run_until(a, b, [&] { return ua.count(host::HostEffect::Kind::Resolved) == 1; }));
        for (uint16_t seq = 1; seq <= 3; ++seq) a.ping(kIpB, 1, seq, 56, 1);
        ASSERT_TRUE(run_until(a, b, [&] { return ua.count(host::HostEffect::Kind::EchoReply) == 3; }));
        EXPECT_EQ(a.stats()[PortStat::CaptureLost], 0u);
    }
    pcap::Reader r(path);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.link_type(), 1);
    pcap::Frame f;
    size_t arp = 0, ip = 0;
    while (r.next(f)) {
        const wire::FrameKind k = wire::classify(f.data);
        arp += k == wire::FrameKind::Arp;
        ip += k == wire::FrameKind::Ipv4Other;
    }
    EXPECT_TRUE(r.error().empty()) << r.error();
    // Every frame is seen twice: leaving one port and arriving at the other.
    EXPECT_EQ(arp, 4u);
    EXPECT_EQ(ip, 12u);
    std::filesystem::remove(path);
}

}  // namespace
}  // namespace rocemu::dpdk
