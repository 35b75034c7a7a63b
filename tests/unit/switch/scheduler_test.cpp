#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <tuple>
#include <vector>

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

// on_burst routes a whole burst before it admits any packet of it; what
// comes out must be what on_packet gives one packet at a time: the same
// effects in the same order, the same counters and the same random draws.
// The traffic has WRED marks at enqueue, XOFF, ECMP, per-packet adaptive
// routing (which reads the queue loads the burst itself changes), and
// drops for no route, a bad port and full buffers.
// Six 100G ports, a small pool, lossy queues that tail-drop early, WRED
// marking on queue 3, per-packet adaptive routing for TC1, and 10.9/16 over
// ECMP to hosts 3, 4 and 5.
SwitchConfig mixed_config(int ports) {
    SwitchConfig cfg = sonic_default_config(ports, BitsPerSec::gbps(100));
    cfg.pool_size = Bytes{120000};
    cfg.queue_lossy = QueueProfile{Bytes{1518}, Threshold{true, -1, {}}};
    cfg.wred[3] = WredProfile{false, EcnMode::All, Bytes{2000}, Bytes{30000}, 50};
    cfg.routing.adaptive[1] = ArMode::PerPacket;
    return cfg;
}
void add_mixed_route(Rig& r) {
    r.sw->routes().add_route_v4(0x0A090000, 16,
                                r.sw->routes().add_group({r.host_nb[3], r.host_nb[4], r.host_nb[5]}));
}
// 400 packets from ports 0-2 in three classes: to the ECMP route, to hosts
// directly, to no route, and now and then from a port that does not exist.
std::vector<PacketDesc> mixed_traffic(Rig& r, PortId bad_port) {
    Rng gen(7);
    constexpr std::array<uint8_t, 3> kDscps{kDscpLossless3, kDscpTc1, kDscpTc0};
    std::vector<PacketDesc> pkts;
    for (int i = 0; i < 400; ++i) {
        const uint64_t kind = gen.below(10);
        const uint32_t dst = kind == 0   ? 0x0B000001u  // no route
                             : kind < 3 ? host_ip(3 + static_cast<int>(gen.below(3)))
                                        : 0x0A090000u | static_cast<uint32_t>(gen.below(65536));
        PacketDesc d = r.pkt(static_cast<PortId>(gen.below(3)), dst, kDscps[gen.below(kDscps.size())],
                             static_cast<uint32_t>(64 + gen.below(1400)), static_cast<uint16_t>(gen.next()));
        if (gen.below(50) == 0) d.in_port = bad_port;
        pkts.push_back(d);
    }
    return pkts;
}
// Two switches of mixed_config with the route, and the traffic for them.
struct MixedPair {
    static constexpr int kPorts = 6;
    Rig one{mixed_config(kPorts)};
    Rig two{mixed_config(kPorts)};
    std::vector<PacketDesc> pkts;
    MixedPair() {
        for (Rig* r : {&one, &two}) add_mixed_route(*r);
        pkts = mixed_traffic(one, kPorts + 1);
    }
};

TEST(SwitchBurst, BurstAdmitsLikeOnePacketAtATime) {
    MixedPair pair;
    Rig& one = pair.one;
    Rig& burst = pair.two;
    const std::vector<PacketDesc>& pkts = pair.pkts;

    Effects fx_one, fx_burst;
    std::size_t marks = 0, xoffs = 0, drops = 0;
    for (std::size_t at = 0; at < pkts.size(); at += 40) {
        const std::size_t n = std::min<std::size_t>(40, pkts.size() - at);
        const Nanos now = Nanos::from_us(static_cast<int64_t>(at));
        for (std::size_t i = 0; i < n; ++i) one.sw->on_packet(pkts[at + i], now, one.rng, fx_one);
        ASSERT_EQ(burst.sw->on_burst(pkts.data() + at, n, now, burst.rng, fx_burst), n);
        ASSERT_EQ(fx_one.size(), fx_burst.size());
        for (std::size_t i = 0; i < fx_one.size(); ++i) {
            ASSERT_TRUE(same_effect(fx_one[i], fx_burst[i])) << "effect " << i << " of burst " << at / 40 << ": "
                                                            << one.sw->describe(fx_one[i]) << " vs "
                                                            << burst.sw->describe(fx_burst[i]);
            marks += fx_one[i].kind == EffectKind::MarkCe;
            xoffs += fx_one[i].kind == EffectKind::SendPfc;
            drops += fx_one[i].kind == EffectKind::Drop;
        }
        fx_one.clear();
        fx_burst.clear();
    }
    // The traffic did exercise what the second pass decides.
    EXPECT_GT(marks, 0u);
    EXPECT_GT(xoffs, 0u);
    EXPECT_GT(drops, 0u);
    EXPECT_EQ(one.rng.next(), burst.rng.next());
    EXPECT_EQ(one.sw->dump(Nanos::from_us(500)), burst.sw->dump(Nanos::from_us(500)));
    EXPECT_EQ(one.sw->bad_port_drops(), burst.sw->bad_port_drops());
    EXPECT_GT(one.sw->bad_port_drops(), 0u);
}

// With a next-hop array, on_burst writes each enqueued packet's neighbor at
// its position instead of an Enqueued effect, and kNotEnqueued for the
// others; every other effect, counter and random draw is as without it.
TEST(SwitchBurst, NextHopsReplaceTheEnqueuedEffects) {
    MixedPair pair;
    Rig& fx_rig = pair.one;
    Rig& nh_rig = pair.two;
    const std::vector<PacketDesc>& pkts = pair.pkts;

    std::size_t enqueued = 0, not_enqueued = 0;
    for (std::size_t at = 0; at < pkts.size(); at += 40) {
        const std::size_t n = std::min<std::size_t>(40, pkts.size() - at);
        const Nanos now = Nanos::from_us(static_cast<int64_t>(at));
        Effects with_fx, with_nh;
        std::vector<uint32_t> nh(n, 12345);
        ASSERT_EQ(fx_rig.sw->on_burst(pkts.data() + at, n, now, fx_rig.rng, with_fx), n);
        ASSERT_EQ(nh_rig.sw->on_burst(pkts.data() + at, n, now, nh_rig.rng, with_nh, nh.data()), n);
        std::vector<uint32_t> expect(n, Switch::kNotEnqueued);
        Effects others;
        for (const Effect& e : with_fx) {
            if (e.kind != EffectKind::Enqueued) {
                others.push_back(e);
                continue;
            }
            const auto it = std::find_if(pkts.begin() + static_cast<std::ptrdiff_t>(at),
                                         pkts.begin() + static_cast<std::ptrdiff_t>(at + n),
                                         [&](const PacketDesc& d) { return d.handle == e.handle; });
            ASSERT_NE(it, pkts.begin() + static_cast<std::ptrdiff_t>(at + n));
            expect[static_cast<std::size_t>(it - pkts.begin()) - at] = e.neighbor;
        }
        EXPECT_EQ(nh, expect) << "burst " << at / 40;
        ASSERT_EQ(others.size(), with_nh.size());
        for (std::size_t i = 0; i < others.size(); ++i)
            ASSERT_TRUE(same_effect(others[i], with_nh[i])) << fx_rig.sw->describe(others[i]) << " vs "
                                                            << nh_rig.sw->describe(with_nh[i]);
        for (const uint32_t v : nh) ++(v == Switch::kNotEnqueued ? not_enqueued : enqueued);
    }
    EXPECT_GT(enqueued, 0u);
    EXPECT_GT(not_enqueued, 0u);
    EXPECT_EQ(fx_rig.rng.next(), nh_rig.rng.next());
    EXPECT_EQ(fx_rig.sw->dump(Nanos::from_us(500)), nh_rig.sw->dump(Nanos::from_us(500)));
}

// What a runtime sees draining `port` turn by turn, at 1 us turns from 0 to
// `turns` us: the frames sent and every effect other than TxReady.
struct Drained {
    std::vector<TxDesc> txs;
    std::vector<std::tuple<EffectKind, uint32_t, PortId>> effects;
};

// The runtime's loop either with one dequeue per frame at its TxReady time
// (burst == 0) or with dequeue_burst of at most `burst` frames. A PFC pause
// of priority 3 reaches the port at 5 us in both. `arrive`, if set, runs at
// the start of every turn (packets received then).
Drained drain_turns(Rig& r, PortId port, Nanos ready, int turns, std::size_t burst,
                    const std::function<void(int turn, Effects& fx)>& arrive = {}) {
    Drained d;
    const auto take = [&](Effects& fx, Nanos& next) {
        for (const Effect& e : fx) {
            if (e.kind == EffectKind::TxReady && e.port == port) next = e.at;
            else if (e.kind != EffectKind::TxReady) d.effects.emplace_back(e.kind, e.handle, e.port);
        }
        fx.clear();
    };
    Effects fx;
    for (int turn = 0; turn <= turns; ++turn) {
        const Nanos now = Nanos::from_us(turn);
        if (arrive) {
            arrive(turn, fx);
            take(fx, ready);
        }
        if (turn == 5) {
            PfcFrameDesc pause;
            pause.class_enable = 1u << 3;
            pause.quanta[3] = 20;  // 1024 ns at 10G
            r.sw->on_pfc(port, pause, now, fx);
            take(fx, ready);
        }
        while (r.sw->next_timer() <= now) {
            r.sw->on_timer(now, fx);
            take(fx, ready);
        }
        while (ready <= now) {
            const Nanos t = std::max(ready, r.sw->tx_free_at(port));
            if (t > now) {
                ready = t;
                break;
            }
            ready = Nanos::max();
            if (burst == 0) {
                const auto tx = r.sw->dequeue(port, t, r.rng, fx);
                take(fx, ready);
                if (tx) d.txs.push_back(*tx);
            } else {
                std::vector<TxDesc> out(burst);
                const std::size_t n = r.sw->dequeue_burst(port, t, now, out.data(), burst, r.rng, fx);
                take(fx, ready);
                d.txs.insert(d.txs.end(), out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n));
            }
        }
    }
    return d;
}

// The same frames at the same times, and the same effects, as `one` (one dequeue per frame).
void expect_same(const Drained& b, const Drained& one, std::size_t burst) {
    ASSERT_EQ(b.txs.size(), one.txs.size()) << "burst " << burst;
    for (std::size_t i = 0; i < one.txs.size(); ++i) {
        EXPECT_EQ(b.txs[i].handle, one.txs[i].handle) << "burst " << burst << " frame " << i;
        EXPECT_EQ(b.txs[i].queue, one.txs[i].queue) << "burst " << burst << " frame " << i;
        EXPECT_EQ(b.txs[i].start, one.txs[i].start) << "burst " << burst << " frame " << i;
        EXPECT_EQ(b.txs[i].end, one.txs[i].end) << "burst " << burst << " frame " << i;
    }
    EXPECT_EQ(b.effects, one.effects) << "burst " << burst;
}

TEST(SwitchBurst, DequeueBurstSendsWhatSuccessiveDequeuesWould) {
    // Lossless, lossy and DWRR queues, ECN marks drawn at dequeue (so the
    // random draws must come in the same order) and a pause in the middle.
    SwitchConfig cfg = sonic_default_config(3, BitsPerSec::gbps(10));
    cfg.wred_stage = WredStage::Dequeue;
    cfg.wred[3].ecn = EcnMode::All;
    cfg.wred[3].green_min_threshold = Bytes{500};
    cfg.wred[3].green_max_threshold = Bytes{6000};
    cfg.wred[3].green_drop_probability = 50;
    const auto run = [&](std::size_t burst) {
        Rig r(cfg);
        Effects fx;
        Nanos ready = Nanos::max();
        for (int i = 0; i < 60; ++i) {
            const uint8_t dscp = i % 3 == 0 ? kDscpLossless3 : i % 3 == 1 ? kDscpTc0 : kDscpTc1;
            r.sw->on_packet(r.pkt(static_cast<PortId>(i % 2), host_ip(2), dscp, 200 + 37 * (i % 11)), 0_ns, r.rng,
                            fx);
        }
        for (const Effect& e : fx)
            if (e.kind == EffectKind::TxReady && e.port == 2) ready = e.at;
        return drain_turns(r, 2, ready, 40, burst);
    };
    const Drained one = run(0);
    ASSERT_EQ(one.txs.size(), 60u);
    int marks = 0;
    for (const auto& e : one.effects) marks += std::get<0>(e) == EffectKind::MarkCe;
    ASSERT_GT(marks, 0);
    for (const std::size_t burst : {1u, 5u, 32u}) {
        const Drained b = run(burst);
        expect_same(b, one, burst);
    }
}

TEST(SwitchBurst, ASoleQueueRunSendsWhatSuccessiveDequeuesWould) {
    // dequeue_burst sends a run from the one queue holding frames in one go
    // (MMU bytes, counters and DWRR state updated once). Its frames, times
    // and effects must be those of one dequeue per frame: XONs while two
    // ingress PGs drain below their threshold, a pause on that queue, a
    // second and third queue filling mid-run (DWRR then resumes from the
    // state the run left), and a refill that reuses the run's freed slots.
    SwitchConfig cfg = sonic_default_config(3, BitsPerSec::gbps(100));
    cfg.pg_lossless = PgProfile{Bytes{0}, Bytes{0}, Bytes{40000}, Bytes{5000}, Threshold{false, 0, Bytes{20000}}};
    const auto run = [&](std::size_t burst) {
        Rig r(cfg);
        const auto send = [&](int n, uint8_t dscp, Nanos now, Effects& fx) {
            for (int i = 0; i < n; ++i)
                r.sw->on_packet(r.pkt(static_cast<PortId>(i % 2), host_ip(2), dscp, 600 + 50 * (i % 9)), now, r.rng,
                                fx);
        };
        Drained d = drain_turns(r, 2, Nanos::max(), 40, burst, [&](int turn, Effects& fx) {
            const Nanos now = Nanos::from_us(turn);
            if (turn == 0) send(70, kDscpLossless3, now, fx);
            if (turn == 8) {
                send(8, kDscpTc0, now, fx);
                send(8, kDscpTc1, now, fx);
            }
            if (turn == 12) {
                send(40, kDscpLossless3, now, fx);
                send(30, kDscpTc0, now, fx);
            }
            if (turn == 20) send(30, kDscpTc1, now, fx);
            if (turn == 21) send(5, kDscpTc0, now, fx);
            // A sole queue emptied by a run, then two queues at once: DWRR
            // starts after the emptied one.
            if (turn == 30) send(3, kDscpLossless3, now, fx);
            if (turn == 32) {
                send(4, kDscpLossless3, now, fx);
                send(4, kDscpTc0, now, fx);
            }
        });
        const uint64_t xons = r.sw->port_counters(0).pfc_tx_xon[3] + r.sw->port_counters(1).pfc_tx_xon[3];
        return std::tuple{std::move(d), r.sw->dump(Nanos::from_us(50)), xons};
    };
    const auto [one, one_dump, one_xons] = run(0);
    ASSERT_EQ(one.txs.size(), 202u);
    ASSERT_GE(one_xons, 2u) << "the PGs of ports 0 and 1 went over the threshold and back";
    for (const std::size_t burst : {1u, 3u, 32u}) {
        const auto [b, b_dump, b_xons] = run(burst);
        expect_same(b, one, burst);
        EXPECT_EQ(b_dump, one_dump) << "burst " << burst;
        EXPECT_EQ(b_xons, one_xons) << "burst " << burst;
    }
}

// on_burst skips the shared-limit query and the XOFF check for a PG that
// its whole burst cannot take near a limit (Mmu::pg_far_below), and a sole
// queue's run releases the frames of a PG not in XOFF as one sum. Bursts
// from one port at a time fill two lossless PGs through their reservation,
// the shared pool and into headroom (XOFF), alongside lossy traffic, then
// drain them (XON): every turn's effects, frames, times, counters and PG
// accounting must be those of one on_packet and one dequeue per frame.
TEST(SwitchBurst, BurstsFarBelowTheLimitsAdmitAndDrainLikeOnePacketAtATime) {
    SwitchConfig cfg = sonic_default_config(3, BitsPerSec::gbps(100));
    cfg.pool_size = Bytes{200000};
    cfg.pg_lossless.th = Threshold{true, -1, {}};
    struct Run {
        Drained d;
        std::string dump;
        std::vector<uint64_t> pg_bytes;  // reserved, shared, headroom of PG 3 of ports 0 and 1, every turn
        uint64_t xoffs, xons;
    };
    const auto run = [&](bool bursts) {
        Rig r(cfg);
        Rng gen(11);
        std::vector<uint64_t> pg_bytes;
        Drained d = drain_turns(r, 2, Nanos::max(), 60, bursts ? 32 : 0, [&](int turn, Effects& fx) {
            for (const PortId in : {PortId{0}, PortId{1}})
                pg_bytes.insert(pg_bytes.end(), {r.sw->mmu().pg_reserved(in, 3).v, r.sw->mmu().pg_shared(in, 3).v,
                                                 r.sw->mmu().pg_headroom(in, 3).v});
            if (turn >= 24) return;
            std::vector<PacketDesc> burst;
            const auto in = static_cast<PortId>(turn % 2);
            for (int i = 0; i < 32; ++i) {
                const uint8_t dscp = gen.below(4) == 0 ? kDscpTc0 : kDscpLossless3;
                burst.push_back(r.pkt(in, host_ip(2), dscp, static_cast<uint32_t>(64 + gen.below(1400)),
                                      static_cast<uint16_t>(0xC000 + i)));
            }
            const Nanos now = Nanos::from_us(turn);
            if (bursts) ASSERT_EQ(r.sw->on_burst(burst.data(), burst.size(), now, r.rng, fx), burst.size());
            else
                for (const PacketDesc& p : burst) r.sw->on_packet(p, now, r.rng, fx);
        });
        const PortCounters c0 = r.sw->port_counters(0), c1 = r.sw->port_counters(1);
        return Run{std::move(d), r.sw->dump(Nanos::from_us(70)), std::move(pg_bytes),
                   c0.pfc_tx_xoff[3] + c1.pfc_tx_xoff[3], c0.pfc_tx_xon[3] + c1.pfc_tx_xon[3]};
    };
    const Run one = run(false);
    ASSERT_EQ(one.d.txs.size(), 24u * 32u) << "nothing dropped";
    ASSERT_GE(one.xoffs, 2u) << "both PGs went over their shared limit";
    ASSERT_GE(one.xons, 2u) << "and drained back";
    const Run b = run(true);
    expect_same(b.d, one.d, 32);
    EXPECT_EQ(b.dump, one.dump);
    EXPECT_EQ(b.pg_bytes, one.pg_bytes);
    EXPECT_EQ(b.xoffs, one.xoffs);
    EXPECT_EQ(b.xons, one.xons);
}

}  // namespace
}  // namespace rocemu::sw::test
