#include <gtest/gtest.h>

#include "harness.hpp"

namespace rocemu::sw::test {
namespace {

using namespace rocemu::literals;

// Drain `n` frames from `port`, each as soon as the wire is free, and return
// bytes sent per queue.
std::array<uint64_t, kNumTc> drain(Rig& r, PortId port, int n, Nanos& now) {
    std::array<uint64_t, kNumTc> bytes{};
    for (int i = 0; i < n; ++i) {
        Effects fx;
        now = std::max(now, r.sw->tx_free_at(port));
        auto tx = r.sw->dequeue(port, now, r.rng, fx);
        if (!tx) break;
        bytes[tx->queue] += tx->frame_len.v;
    }
    return bytes;
}

TEST(SwitchScheduler, StrictPriorityServesHigherQueueFirst) {
    SwitchConfig cfg = sonic_default_config(2, BitsPerSec::gbps(100));
    cfg.scheduler[6].strict = true;
    Rig r(cfg);
    for (int i = 0; i < 5; ++i) r.send(r.pkt(0, host_ip(1), kDscpTc1), 0_ns);
    for (int i = 0; i < 5; ++i) r.send(r.pkt(0, host_ip(1), 48), 0_ns);  // CNP DSCP -> TC6
    Nanos now{};
    for (int i = 0; i < 5; ++i) {
        Effects fx;
        now = r.sw->tx_free_at(1);
        EXPECT_EQ(r.sw->dequeue(1, now, r.rng, fx)->queue, 6);
    }
    Effects fx;
    EXPECT_EQ(r.sw->dequeue(1, r.sw->tx_free_at(1), r.rng, fx)->queue, 1);
}

struct DwrrCase {
    uint32_t w0, w1, len0, len1;
};

class SwitchDwrr : public ::testing::TestWithParam<DwrrCase> {};

TEST_P(SwitchDwrr, ByteSharesFollowWeights) {
    const DwrrCase c = GetParam();
    SwitchConfig cfg = sonic_default_config(2, BitsPerSec::gbps(100));
    cfg.scheduler[0].weight = c.w0;
    cfg.scheduler[1].weight = c.w1;
    Rig r(cfg);
    for (int i = 0; i < 3000; ++i) {
        r.send(r.pkt(0, host_ip(1), kDscpTc0, c.len0), 0_ns);
        r.send(r.pkt(0, host_ip(1), kDscpTc1, c.len1), 0_ns);
    }
    Nanos now{};
    // Both queues stay backlogged over the whole measurement.
    const auto bytes = drain(r, 1, 2000, now);
    ASSERT_GT(r.sw->queue_packets(1, 0), 0u);
    ASSERT_GT(r.sw->queue_packets(1, 1), 0u);
    const double share0 = static_cast<double>(bytes[0]) / static_cast<double>(bytes[0] + bytes[1]);
    const double want0 = static_cast<double>(c.w0) / (c.w0 + c.w1);
    // DWRR is exact to within one quantum plus one frame per queue.
    const double slack = (static_cast<double>((c.w0 + c.w1) * 1024 + c.len0 + c.len1)) /
                         static_cast<double>(bytes[0] + bytes[1]);
    EXPECT_NEAR(share0, want0, slack);
    EXPECT_LT(slack, 0.05);
}

void PrintTo(const DwrrCase& c, std::ostream* os) {
    *os << "weights " << c.w0 << ":" << c.w1 << ", frames " << c.len0 << "/" << c.len1 << " B";
}

INSTANTIATE_TEST_SUITE_P(Weights, SwitchDwrr,
                         ::testing::Values(DwrrCase{1, 3, 1000, 1000}, DwrrCase{14, 15, 1500, 1500},
                                           DwrrCase{2, 6, 1500, 256}, DwrrCase{5, 1, 256, 1500}));

TEST(SwitchScheduler, SerialisesAtPortSpeedAndSignalsReadiness) {
    Rig r(sonic_default_config(2, BitsPerSec::gbps(10)));
    Effects fx = r.send(r.pkt(0, host_ip(1), kDscpTc1, 1000), 100_ns);
    const Effect* ready = find(fx, EffectKind::TxReady);
    ASSERT_NE(ready, nullptr);
    EXPECT_EQ(ready->port, 1);
    EXPECT_EQ(ready->at, 100_ns);
    // A second arrival while readiness is pending adds no new TxReady.
    EXPECT_EQ(count(r.send(r.pkt(0, host_ip(1), kDscpTc1, 1000), 150_ns), EffectKind::TxReady), 0);

    fx.clear();
    auto tx = r.sw->dequeue(1, 200_ns, r.rng, fx);
    ASSERT_TRUE(tx);
    // (1000 + 20) bytes x 8 / 10 Gb/s = 816 ns on the wire.
    EXPECT_EQ(tx->start, 200_ns);
    EXPECT_EQ(tx->end, 1016_ns);
    ready = find(fx, EffectKind::TxReady);
    ASSERT_NE(ready, nullptr);
    EXPECT_EQ(ready->at, 1016_ns);
    fx.clear();
    EXPECT_FALSE(r.sw->dequeue(1, 1015_ns, r.rng, fx));
    EXPECT_TRUE(r.sw->dequeue(1, 1016_ns, r.rng, fx));
    EXPECT_EQ(r.sw->port_counters(1).tx_pkts, 2u);
    EXPECT_EQ(r.sw->port_counters(1).tx_bytes, 2000u);
    EXPECT_EQ(r.sw->queue_counters(1, 1).watermark, Bytes{2000});
    EXPECT_EQ(r.sw->queue_depth(1, 1), Bytes{0});
}

TEST(SwitchScheduler, FramesOverTheEgressMtuDrop) {
    SwitchConfig cfg = sonic_default_config(3, BitsPerSec::gbps(100));
    cfg.ports[1].mtu = 1500;
    Rig r(cfg);
    EXPECT_EQ(count(r.send(r.pkt(0, host_ip(1), kDscpTc1, 1518), 0_ns), EffectKind::Enqueued), 1);
    const Effects fx = r.send(r.pkt(0, host_ip(1), kDscpTc1, 1519), 0_ns);
    ASSERT_NE(find(fx, EffectKind::Drop), nullptr);
    EXPECT_EQ(find(fx, EffectKind::Drop)->reason, DropReason::MtuExceeded);
    EXPECT_EQ(r.sw->port_counters(1).drops[static_cast<int>(DropReason::MtuExceeded)], 1u);
    // Port 2 keeps the default 9100.
    EXPECT_EQ(count(r.send(r.pkt(0, host_ip(2), kDscpTc1, 9118), 0_ns), EffectKind::Enqueued), 1);
}

TEST(SwitchScheduler, LossyQueueTailDropsAtItsThreshold) {
    SwitchConfig cfg = sonic_default_config(2, BitsPerSec::gbps(100));
    cfg.queue_lossy = QueueProfile{Bytes{0}, Threshold{false, 0, Bytes{10000}}};
    Rig r(cfg);
    int drops = 0;
    for (int i = 0; i < 15; ++i) {
        const Effects fx = r.send(r.pkt(0, host_ip(1), kDscpTc1, 1000), 0_ns);
        if (const Effect* d = find(fx, EffectKind::Drop)) {
            EXPECT_EQ(d->reason, DropReason::EgressQueueLimit);
            ++drops;
        }
    }
    EXPECT_EQ(drops, 5);
    EXPECT_EQ(r.sw->queue_counters(1, 1).drops, 5u);
    EXPECT_EQ(r.sw->port_counters(1).drops[static_cast<int>(DropReason::EgressQueueLimit)], 5u);
    const std::string dump = r.sw->dump(0_ns);
    EXPECT_NE(dump.find("Ethernet0: rx 15 pkts 15000 B"), std::string::npos) << dump;
    EXPECT_NE(dump.find("drop egress_queue_limit: 5"), std::string::npos) << dump;
    EXPECT_NE(dump.find("q1: depth 10000 B (max 10000 B), enq 10"), std::string::npos) << dump;
}

}  // namespace
}  // namespace rocemu::sw::test

namespace rocemu::sw::test {
namespace {

using namespace rocemu::literals;

TEST(SwitchBurst, TakesWhatFitsInTheEffectBufferAndNoMore) {
    Rig r(sonic_default_config(2, BitsPerSec::gbps(100)));
    std::vector<PacketDesc> burst;
    for (int i = 0; i < 100; ++i) burst.push_back(r.pkt(0, host_ip(1), kDscpTc1, 200));
    Effects fx;
    const std::size_t taken = r.sw->on_burst(burst.data(), burst.size(), 0_ns, r.rng, fx);
    EXPECT_EQ(taken, 100u);
    EXPECT_EQ(count(fx, EffectKind::Enqueued), 100);
    // Nearly full: a packet is taken only while a worst case still fits.
    // These each produce one effect, so with room for 10 it takes 6 (room
    // 10, 9, 8, 7, 6, 5) and stops at room 4.
    while (fx.size() < Effects::capacity() - 2 * Switch::kMaxEffectsPerPacket) fx.push_back(Effect{});
    EXPECT_EQ(r.sw->on_burst(burst.data(), burst.size(), 0_ns, r.rng, fx), 6u);
    EXPECT_EQ(Effects::capacity() - fx.size(), 4u);
    EXPECT_EQ(r.sw->effects_overflow(), 0u);
}

}  // namespace
}  // namespace rocemu::sw::test
