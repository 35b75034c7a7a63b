// Switch::reset: a switch that carried traffic (packets still queued, PGs
// in XOFF, queues paused and in watchdog storms, flowlets learned, counters
// and the route cache filled) and was then reset behaves as a new switch
// with the same config and routes: fed the same steps, the two give the
// same effects, frames, counters, MMU accounts, timers and random draws
// after every step.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "harness.hpp"

namespace rocemu::sw::test {
namespace {

using namespace rocemu::literals;

constexpr int kPorts = 4;
constexpr uint32_t kEcmpNet = 0x0A090000;

// A small pool (drops, XOFF, headroom), WRED/ECN at enqueue on queue 3,
// a fast watchdog that drops, flowlet routing on TC 3 and per-packet on
// TC 1 over an ECMP group of ports 2 and 3.
SwitchConfig reset_config() {
    SwitchConfig cfg = sonic_default_config(kPorts, BitsPerSec::gbps(25));
    cfg.pool_size = Bytes{200000};
    cfg.queue_lossy = QueueProfile{Bytes{1518}, Threshold{true, -1, {}}};
    cfg.wred[3] = WredProfile{false, EcnMode::All, Bytes{20000}, Bytes{60000}, 30};
    cfg.pfc_wd.detection_time = 100_us;
    cfg.pfc_wd.restoration_time = 150_us;
    cfg.pfc_wd.action = WdAction::Drop;
    cfg.routing.adaptive[3] = ArMode::Flowlet;
    cfg.routing.adaptive[1] = ArMode::PerPacket;
    cfg.routing.flowlet_table_size = 16;
    return cfg;
}

std::unique_ptr<Rig> make_rig() {
    auto r = std::make_unique<Rig>(reset_config());
    r->sw->routes().add_route_v4(kEcmpNet, 16, r->sw->routes().add_group({r->host_nb[2], r->host_nb[3]}));
    return r;
}

// One random step of traffic (a burst or a packet from one port, to a host,
// the ECMP group or no route), dequeues, PFC frames to the egress ports or a
// timer, on every rig alike. Returns each rig's effects and frames sent.
struct StepOut {
    Effects fx;
    std::vector<TxDesc> tx;
};

void step(Rng& gen, Nanos now, uint32_t& handle, const std::vector<Rig*>& rigs, std::vector<StepOut>& out) {
    constexpr std::array<uint8_t, 5> kDscps{kDscpLossless3, kDscpLossless4, kDscpTc0, kDscpTc1, 46};
    out.assign(rigs.size(), StepOut{});
    const uint64_t op = gen.below(100);
    if (op < 50) {
        const PortId in = static_cast<PortId>(gen.below(2));
        const std::size_t n = 1 + gen.below(32);
        std::vector<PacketDesc> pkts;
        for (std::size_t i = 0; i < n; ++i) {
            const uint64_t kind = gen.below(100);
            const uint32_t dst = kind == 0   ? 0x0B000001u
                                 : kind < 20 ? host_ip(2 + static_cast<int>(gen.below(2)))
                                             : kEcmpNet | static_cast<uint32_t>(gen.below(8));
            const uint32_t len = kind == 1 ? 9300 : 64 + static_cast<uint32_t>(gen.below(4000));
            PacketDesc d = rigs[0]->pkt(in, dst, kDscps[gen.below(kDscps.size())], len,
                                        static_cast<uint16_t>(0xC000 + gen.below(16)), static_cast<uint8_t>(gen.below(4)));
            d.handle = handle++;
            pkts.push_back(d);
        }
        const bool one = gen.below(4) == 0;
        for (std::size_t r = 0; r < rigs.size(); ++r) {
            if (one) rigs[r]->sw->on_packet(pkts[0], now, rigs[r]->rng, out[r].fx);
            else rigs[r]->sw->on_burst(pkts.data(), n, now, rigs[r]->rng, out[r].fx);
        }
    } else if (op < 80) {
        const PortId port = static_cast<PortId>(gen.below(kPorts));
        const std::size_t max = 1 + gen.below(16);
        const Nanos from = now - Nanos{static_cast<int64_t>(gen.below(20000))};
        for (std::size_t r = 0; r < rigs.size(); ++r) {
            std::array<TxDesc, 16> txs{};
            const std::size_t k = rigs[r]->sw->dequeue_burst(port, from, now, txs.data(), max, rigs[r]->rng, out[r].fx);
            out[r].tx.assign(txs.begin(), txs.begin() + static_cast<std::ptrdiff_t>(k));
        }
    } else if (op < 90) {
        PfcFrameDesc f;
        f.class_enable = static_cast<uint8_t>(1u << (3 + gen.below(2)));
        f.quanta.fill(gen.below(5) == 0 ? 0 : static_cast<uint16_t>(gen.below(0xFFFF)));
        const PortId port = static_cast<PortId>(2 + gen.below(2));
        for (std::size_t r = 0; r < rigs.size(); ++r) rigs[r]->sw->on_pfc(port, f, now, out[r].fx);
    } else {
        for (std::size_t r = 0; r < rigs.size(); ++r) rigs[r]->sw->on_timer(now, out[r].fx);
    }
}

void expect_same(const Switch& a, const Switch& b, const StepOut& oa, const StepOut& ob, Nanos now) {
    ASSERT_EQ(oa.fx.size(), ob.fx.size());
    for (std::size_t i = 0; i < oa.fx.size(); ++i)
        ASSERT_TRUE(same_effect(oa.fx[i], ob.fx[i])) << a.describe(oa.fx[i]) << " vs " << b.describe(ob.fx[i]);
    ASSERT_EQ(oa.tx.size(), ob.tx.size());
    for (std::size_t i = 0; i < oa.tx.size(); ++i) {
        ASSERT_EQ(oa.tx[i].handle, ob.tx[i].handle);
        ASSERT_EQ(oa.tx[i].queue, ob.tx[i].queue);
        ASSERT_EQ(oa.tx[i].start, ob.tx[i].start);
        ASSERT_EQ(oa.tx[i].end, ob.tx[i].end);
    }
    ASSERT_NO_FATAL_FAILURE(expect_same_switch_state(a, b, now));
    ASSERT_EQ(a.fast_admits(), b.fast_admits());
}

// What a used switch holds that a new one does not.
struct Dirt {
    std::size_t queued = 0;
    bool xoff = false, paused = false, storm = false;
};

Dirt dirt(const Switch& sw, Nanos now) {
    Dirt d;
    for (int p = 0; p < kPorts; ++p)
        for (int i = 0; i < kNumTc; ++i) {
            const PortId port = static_cast<PortId>(p);
            d.queued += sw.queue_packets(port, i);
            d.xoff |= sw.pg_xoff(port, i);
            d.paused |= sw.queue_paused(port, i, now);
            d.storm |= sw.watchdog_storm(port, i);
        }
    return d;
}

class SwitchReset : public ::testing::TestWithParam<uint64_t> {};

TEST_P(SwitchReset, BehavesAsANewSwitch) {
    // Traffic until the switch holds packets, XOFF, a pause and a storm at once.
    std::unique_ptr<Rig> used = make_rig();
    Rng gen(GetParam());
    Nanos now{};
    uint32_t handle = 1;
    std::vector<StepOut> out;
    bool dirty = false;
    uint64_t storms = 0;
    for (int s = 0; s < 20000 && !dirty; ++s) {
        now += Nanos{static_cast<int64_t>(gen.below(4000))};
        step(gen, now, handle, {used.get()}, out);
        for (const Effect& e : out[0].fx) storms += e.kind == EffectKind::WatchdogStorm;
        const Dirt d = dirt(*used->sw, now);
        dirty = d.queued > 0 && d.xoff && d.paused && d.storm;
    }
    ASSERT_TRUE(dirty) << "the traffic never left the switch queued, in XOFF, paused and in a storm at once";
    EXPECT_GT(storms, 0u);
    EXPECT_GT(used->sw->port_counters(0).rx_pkts, 0u);

    used->sw->reset();
    // The same routes, made the same way: what the fuzz harness relies on.
    std::unique_ptr<Rig> fresh = make_rig();
    ASSERT_EQ(used->sw->descriptor_capacity(), fresh->sw->descriptor_capacity());
    // Same draws from here; handles past the first phase's, so that any
    // frame of it that the reset left behind would show.
    used->rng = Rng(99);
    fresh->rng = Rng(99);
    handle = 1u << 24;
    // Time starts again too: a reset switch is one that has seen nothing.
    now = Nanos{};
    ASSERT_NO_FATAL_FAILURE(expect_same(*used->sw, *fresh->sw, StepOut{}, StepOut{}, now));
    uint64_t sent = 0, marks = 0, xoffs = 0;
    storms = 0;
    for (int s = 0; s < 4000; ++s) {
        now += Nanos{static_cast<int64_t>(gen.below(4000))};
        step(gen, now, handle, {used.get(), fresh.get()}, out);
        ASSERT_NO_FATAL_FAILURE(expect_same(*used->sw, *fresh->sw, out[0], out[1], now)) << "step " << s;
        for (const TxDesc& t : out[0].tx) ASSERT_GE(t.handle, 1u << 24) << "a frame from before the reset";
        sent += out[0].tx.size();
        for (const Effect& e : out[0].fx) {
            if (e.kind == EffectKind::Drop || e.kind == EffectKind::Enqueued || e.kind == EffectKind::MarkCe) {
                ASSERT_GE(e.handle, 1u << 24) << "an effect on a frame from before the reset";
            }
            marks += e.kind == EffectKind::MarkCe;
            xoffs += e.kind == EffectKind::SendPfc && e.pfc.quanta[3] + e.pfc.quanta[4] > 0;
            storms += e.kind == EffectKind::WatchdogStorm;
        }
    }
    EXPECT_EQ(used->rng.next(), fresh->rng.next());
    EXPECT_EQ(used->sw->dump(now), fresh->sw->dump(now));
    // The second phase reached what the first did.
    EXPECT_GT(sent, 0u);
    EXPECT_GT(marks, 0u);
    EXPECT_GT(xoffs, 0u);
    EXPECT_GT(storms, 0u);
}

INSTANTIATE_TEST_SUITE_P(Seeds, SwitchReset, ::testing::Values(1u, 7u, 2026u));

}  // namespace
}  // namespace rocemu::sw::test
