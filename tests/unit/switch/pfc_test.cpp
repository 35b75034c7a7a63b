#include <gtest/gtest.h>

#include "harness.hpp"

namespace rocemu::sw::test {
namespace {

using namespace rocemu::literals;

constexpr int kPg = 3;
constexpr uint64_t kThreshold = 20000;
constexpr uint64_t kHeadroom = 40000;
constexpr uint64_t kXonOffset = 5000;

// A lossless PG with a static 20 KB shared threshold, 40 KB headroom and a
// 5 KB XON offset, so every transition falls on a known packet.
SwitchConfig pfc_config() {
    SwitchConfig cfg = sonic_default_config(3, BitsPerSec::gbps(100));
    cfg.pg_lossless = PgProfile{Bytes{0}, Bytes{0}, Bytes{kHeadroom}, Bytes{kXonOffset},
                                Threshold{false, 0, Bytes{kThreshold}}};
    cfg.wred[3] = WredProfile{};
    return cfg;
}

const Effect* pfc_on(const Effects& fx, PortId port) {
    for (const Effect& e : fx)
        if (e.kind == EffectKind::SendPfc && e.port == port) return &e;
    return nullptr;
}

TEST(SwitchPfcGeneration, XoffAtThresholdThenHeadroomAbsorbsWithoutDrops) {
    Rig r(pfc_config());
    for (int i = 1; i <= 19; ++i) EXPECT_EQ(pfc_on(r.send(r.pkt(0, host_ip(1), kDscpLossless3), 0_ns), 0), nullptr);
    const Effects fx = r.send(r.pkt(0, host_ip(1), kDscpLossless3), 0_ns);
    const Effect* xoff = pfc_on(fx, 0);
    ASSERT_NE(xoff, nullptr) << "XOFF when the PG's shared use reaches 20 KB";
    EXPECT_EQ(xoff->pfc.class_enable, 1 << kPg);
    EXPECT_EQ(xoff->pfc.quanta[kPg], 0xFFFF);
    EXPECT_TRUE(r.sw->pg_xoff(0, kPg));
    // In-flight data lands in headroom: no drop and no repeated XOFF.
    for (int i = 0; i < 40; ++i) {
        const Effects f = r.send(r.pkt(0, host_ip(1), kDscpLossless3), 1_us);
        EXPECT_EQ(count(f, EffectKind::Drop), 0);
        EXPECT_EQ(pfc_on(f, 0), nullptr);
    }
    EXPECT_EQ(r.sw->mmu().pg_headroom(0, kPg), Bytes{kHeadroom});
    // Only a headroom overrun drops lossless traffic, and it says so.
    const Effects over = r.send(r.pkt(0, host_ip(1), kDscpLossless3), 2_us);
    ASSERT_EQ(count(over, EffectKind::Drop), 1);
    EXPECT_EQ(find(over, EffectKind::Drop)->reason, DropReason::LosslessHeadroomFull);
    EXPECT_EQ(r.sw->port_counters(0).pfc_tx_xoff[kPg], 1u);
    // Lossy traffic from the same port is unaffected by the lossless PG.
    EXPECT_EQ(count(r.send(r.pkt(0, host_ip(2), kDscpTc1), 2_us), EffectKind::Enqueued), 1);
}

TEST(SwitchPfcGeneration, XonOnlyAfterDrainingXonOffsetBelowThreshold) {
    Rig r(pfc_config());
    for (int i = 0; i < 30; ++i) r.send(r.pkt(0, host_ip(1), kDscpLossless3), 0_ns);  // 20 KB shared + 10 KB headroom
    ASSERT_TRUE(r.sw->pg_xoff(0, kPg));
    Nanos now{};
    int dequeued = 0;
    const Effect* xon = nullptr;
    Effects fx;
    while (!xon) {
        fx.clear();
        now = r.sw->tx_free_at(1);
        ASSERT_TRUE(r.sw->dequeue(1, now, r.rng, fx));
        ++dequeued;
        xon = pfc_on(fx, 0);
    }
    // 10 releases drain the headroom, 5 more bring shared use to 15 KB =
    // threshold - xon_offset.
    EXPECT_EQ(dequeued, 15);
    EXPECT_EQ(xon->pfc.class_enable, 1 << kPg);
    EXPECT_EQ(xon->pfc.quanta[kPg], 0);
    EXPECT_FALSE(r.sw->pg_xoff(0, kPg));
    EXPECT_EQ(r.sw->port_counters(0).pfc_tx_xon[kPg], 1u);
    // Hysteresis: refilling 4 KB (to 19 KB) sends nothing; reaching 20 KB does.
    for (int i = 0; i < 4; ++i) EXPECT_EQ(pfc_on(r.send(r.pkt(0, host_ip(1), kDscpLossless3), now), 0), nullptr);
    EXPECT_NE(pfc_on(r.send(r.pkt(0, host_ip(1), kDscpLossless3), now), 0), nullptr);
}

TEST(SwitchPfcGeneration, RefreshesPauseBeforeItsQuantaRunOut) {
    Rig r(pfc_config());
    const Nanos t0 = 1_us;
    for (int i = 0; i < 20; ++i) r.send(r.pkt(0, host_ip(1), kDscpLossless3), t0);
    ASSERT_TRUE(r.sw->pg_xoff(0, kPg));
    // 65535 quanta x 512 bits at 100 Gb/s = 335539.2 ns, rounded up; refresh at 50%.
    const Nanos pause = BitsPerSec::gbps(100).serialise(Bytes{65535ull * 64});
    EXPECT_EQ(pause, Nanos{335540});
    const Nanos refresh = Nanos{pause.v / 2};
    EXPECT_EQ(r.sw->next_timer(), t0 + refresh);
    Effects fx;
    r.sw->on_timer(t0 + refresh - 1_ns, fx);
    EXPECT_EQ(pfc_on(fx, 0), nullptr);
    for (int k = 1; k <= 3; ++k) {
        fx.clear();
        const Nanos due = r.sw->next_timer();
        EXPECT_EQ(due, t0 + refresh * k);
        r.sw->on_timer(due, fx);
        const Effect* again = pfc_on(fx, 0);
        ASSERT_NE(again, nullptr);
        EXPECT_EQ(again->pfc.class_enable, 1 << kPg);
        EXPECT_EQ(again->pfc.quanta[kPg], 0xFFFF);
        EXPECT_LT(refresh, pause);
    }
    EXPECT_EQ(r.sw->port_counters(0).pfc_tx_xoff[kPg], 4u);
    // After XON there is nothing left to refresh.
    Nanos now = t0;
    while (r.sw->pg_xoff(0, kPg)) {
        fx.clear();
        now = std::max(now, r.sw->tx_free_at(1));
        ASSERT_TRUE(r.sw->dequeue(1, now, r.rng, fx));
    }
    EXPECT_EQ(r.sw->next_timer(), Nanos::max());
}

PfcFrameDesc pause(int prio, uint16_t quanta) {
    PfcFrameDesc f;
    f.class_enable = static_cast<uint8_t>(1u << prio);
    f.quanta[prio] = quanta;
    return f;
}

TEST(SwitchPfcHonouring, PausesForQuantaTimes512BitTimesAtPortSpeed) {
    struct Case {
        double gbps;
        uint16_t quanta;
        int64_t ns;
    };
    // 100G: 1 quantum = 5.12 ns; 25G: 20.48 ns; 10G: 51.2 ns (rounded up to whole ns).
    for (const Case c : {Case{100, 1000, 5120}, Case{100, 1, 6}, Case{25, 100, 2048}, Case{10, 65535, 3355392},
                         Case{400, 3, 4}}) {
        SCOPED_TRACE(c.gbps);
        Rig r(sonic_default_config(2, BitsPerSec::gbps(c.gbps)));
        r.send(r.pkt(0, host_ip(1), kDscpLossless3), 0_ns);
        Effects fx;
        const Nanos t = 1_us;
        r.sw->on_pfc(1, pause(3, c.quanta), t, fx);
        EXPECT_TRUE(r.sw->queue_paused(1, 3, t));
        EXPECT_EQ(r.sw->next_timer(), t + Nanos{c.ns});
        EXPECT_FALSE(r.sw->dequeue(1, t + Nanos{c.ns - 1}, r.rng, fx));
        fx.clear();
        r.sw->on_timer(t + Nanos{c.ns}, fx);
        const Effect* ready = find(fx, EffectKind::TxReady);
        ASSERT_NE(ready, nullptr);
        EXPECT_EQ(ready->at, t + Nanos{c.ns});
        EXPECT_TRUE(r.sw->dequeue(1, t + Nanos{c.ns}, r.rng, fx));
        EXPECT_EQ(r.sw->paused_time(1, 3, 1_s), Nanos{c.ns});
        EXPECT_EQ(r.sw->port_counters(1).pfc_rx[3], 1u);
    }
}

TEST(SwitchPfcHonouring, PausesOnlyListedPrioritiesAndResumeEndsEarly) {
    Rig r(sonic_default_config(2, BitsPerSec::gbps(100)));
    r.send(r.pkt(0, host_ip(1), kDscpLossless3), 0_ns);
    r.send(r.pkt(0, host_ip(1), kDscpLossless4), 0_ns);
    Effects fx;
    r.sw->on_pfc(1, pause(3, 0xFFFF), 0_ns, fx);
    auto tx = r.sw->dequeue(1, 0_ns, r.rng, fx);
    ASSERT_TRUE(tx);
    EXPECT_EQ(tx->queue, 4);
    EXPECT_FALSE(r.sw->dequeue(1, tx->end, r.rng, fx));
    // A refresh extends the pause from its own arrival, not the first one.
    r.sw->on_pfc(1, pause(3, 1000), 3_us, fx);
    EXPECT_TRUE(r.sw->queue_paused(1, 3, 3_us + 5119_ns));
    fx.clear();
    r.sw->on_pfc(1, pause(3, 0), 4_us, fx);  // XON
    EXPECT_NE(find(fx, EffectKind::TxReady), nullptr);
    tx = r.sw->dequeue(1, 4_us, r.rng, fx);
    ASSERT_TRUE(tx);
    EXPECT_EQ(tx->queue, 3);
    EXPECT_EQ(r.sw->paused_time(1, 3, 10_us), 4_us);
    EXPECT_EQ(r.sw->port_paused_time(1, 10_us), 4_us);
}

SwitchConfig wd_config(WdAction action) {
    SwitchConfig cfg = sonic_default_config(2, BitsPerSec::gbps(100));
    cfg.pfc_wd.detection_time = 1_ms;
    cfg.pfc_wd.restoration_time = 2_ms;
    cfg.pfc_wd.action = action;
    return cfg;
}

// A peer pausing priority 3 every 100 us from `from` until `to`, with the
// switch's timers run in between; returns the effects seen.
std::vector<Effect> storm(Rig& r, Nanos from, Nanos to, Nanos until) {
    std::vector<Effect> seen;
    Nanos next_pfc = from;
    for (;;) {
        const Nanos t = std::min(next_pfc < to ? next_pfc : Nanos::max(), r.sw->next_timer());
        if (t > until) break;
        Effects fx;
        if (t == next_pfc && next_pfc < to) {
            r.sw->on_pfc(1, pause(3, 0xFFFF), t, fx);
            next_pfc += 100_us;
        } else {
            r.sw->on_timer(t, fx);
        }
        seen.insert(seen.end(), fx.begin(), fx.end());
    }
    return seen;
}

const Effect* event(const std::vector<Effect>& v, EffectKind k) {
    for (const Effect& e : v)
        if (e.kind == k) return &e;
    return nullptr;
}

TEST(SwitchPfcWatchdog, DetectsAfterDetectionTimeDropsThenRestores) {
    Rig r(wd_config(WdAction::Drop));
    const Nanos start = 10_us;
    const Nanos stop = 5_ms;
    auto seen = storm(r, start, stop, start + 50_us);
    // Packets arriving at a paused queue: nothing to send, so no TxReady yet.
    for (int i = 0; i < 3; ++i)
        EXPECT_EQ(count(r.send(r.pkt(0, host_ip(1), kDscpLossless3), start + 50_us), EffectKind::TxReady), 0);
    seen = storm(r, start + 100_us, stop, start + 1_ms - 1_ns);
    EXPECT_EQ(event(seen, EffectKind::WatchdogStorm), nullptr);
    EXPECT_EQ(r.sw->next_timer(), start + 1_ms);
    seen = storm(r, start + 1_ms, stop, start + 1_ms);
    const Effect* st = event(seen, EffectKind::WatchdogStorm);
    ASSERT_NE(st, nullptr);
    EXPECT_EQ(st->port, 1);
    EXPECT_EQ(st->queue, 3);
    const Effect* drain = event(seen, EffectKind::TxReady);
    ASSERT_NE(drain, nullptr) << "the runtime must be told to call dequeue to drain";
    EXPECT_EQ(drain->port, 1);
    EXPECT_TRUE(r.sw->watchdog_storm(1, 3));
    EXPECT_EQ(r.sw->queue_counters(1, 3).wd_storms, 1u);
    const std::string log = r.sw->describe(*st);
    EXPECT_NE(log.find("Ethernet4"), std::string::npos) << log;
    EXPECT_NE(log.find("priority 3"), std::string::npos) << log;
    EXPECT_NE(log.find("drop"), std::string::npos) << log;
    // The stormed port's own traffic on that priority is dropped at ingress.
    const Effects from_storm = r.send(r.pkt(1, host_ip(0), kDscpLossless3), start + 1_ms);
    ASSERT_EQ(count(from_storm, EffectKind::Drop), 1);
    EXPECT_EQ(find(from_storm, EffectKind::Drop)->reason, DropReason::PfcWatchdog);
    EXPECT_EQ(count(r.send(r.pkt(1, host_ip(0), kDscpLossless4), start + 1_ms), EffectKind::Enqueued), 1);

    // Action drop: the stuck packets and new arrivals are dropped, and the
    // pauses that keep coming are ignored.
    Effects fx;
    EXPECT_FALSE(r.sw->dequeue(1, start + 1_ms, r.rng, fx));
    EXPECT_EQ(count(fx, EffectKind::Drop), 3);
    EXPECT_EQ(find(fx, EffectKind::Drop)->reason, DropReason::PfcWatchdog);
    const Effects arrival = r.send(r.pkt(0, host_ip(1), kDscpLossless3), start + 2_ms);
    EXPECT_EQ(find(arrival, EffectKind::Drop)->reason, DropReason::PfcWatchdog);
    EXPECT_EQ(r.sw->queue_counters(1, 3).wd_drops, 5u);

    // The last pause arrives at 4.91 ms; restoration 2 ms later.
    const Nanos last = start + 100_us * 49;
    seen = storm(r, start + 1_ms + 100_us, stop, last + 2_ms - 1_ns);
    EXPECT_EQ(event(seen, EffectKind::WatchdogRestore), nullptr);
    seen = storm(r, stop, stop, last + 2_ms);
    const Effect* rs = event(seen, EffectKind::WatchdogRestore);
    ASSERT_NE(rs, nullptr);
    EXPECT_EQ(rs->port, 1);
    EXPECT_EQ(rs->queue, 3);
    EXPECT_FALSE(r.sw->watchdog_storm(1, 3));
    EXPECT_EQ(count(r.send(r.pkt(0, host_ip(1), kDscpLossless3), last + 2_ms), EffectKind::Enqueued), 1);
    fx.clear();
    EXPECT_TRUE(r.sw->dequeue(1, last + 2_ms, r.rng, fx));
}

TEST(SwitchPfcWatchdog, ForwardIgnoresPausesAlertOnlyReports) {
    {
        Rig r(wd_config(WdAction::Forward));
        r.send(r.pkt(0, host_ip(1), kDscpLossless3), 0_ns);
        storm(r, 0_ns, 3_ms, 1_ms);
        EXPECT_TRUE(r.sw->watchdog_storm(1, 3));
        Effects fx;
        EXPECT_TRUE(r.sw->dequeue(1, 1_ms, r.rng, fx));
    }
    {
        Rig r(wd_config(WdAction::Alert));
        r.send(r.pkt(0, host_ip(1), kDscpLossless3), 0_ns);
        const auto seen = storm(r, 0_ns, 3_ms, 1_ms);
        EXPECT_NE(event(seen, EffectKind::WatchdogStorm), nullptr);
        Effects fx;
        EXPECT_FALSE(r.sw->dequeue(1, 1_ms, r.rng, fx));
        EXPECT_TRUE(r.sw->queue_paused(1, 3, 1_ms));
    }
}

// Alert leaves the pause on. A single pause longer than restoration_time
// (0xFFFF quanta at 10 Gbit/s: 3.355 ms) must not restore while it runs:
// the queue would qualify again at once, and detect and restore would
// alternate for ever at the same time (a runtime loops while
// next_timer() <= now). The storm is restored when the pause runs out.
TEST(SwitchPfcWatchdog, AlertRestoresOnlyOnceAPauseLongerThanRestorationEnds) {
    SwitchConfig cfg = sonic_default_config(2, BitsPerSec::gbps(10));
    cfg.pfc_wd.detection_time = 20_us;
    cfg.pfc_wd.restoration_time = 30_us;
    cfg.pfc_wd.action = WdAction::Alert;
    Rig r(cfg);
    r.send(r.pkt(0, host_ip(1), kDscpLossless3), 0_ns);
    Effects fx;
    r.sw->on_pfc(1, pause(3, 0xFFFF), 0_ns, fx);
    const Nanos pause_end = BitsPerSec::gbps(10).serialise(Bytes{uint64_t{0xFFFF} * 64});
    std::vector<std::pair<EffectKind, Nanos>> events;
    int calls = 0;
    for (Nanos t; (t = r.sw->next_timer()) <= 10_ms;) {
        Effects out;
        r.sw->on_timer(t, out);
        for (const Effect& e : out)
            if (e.kind == EffectKind::WatchdogStorm || e.kind == EffectKind::WatchdogRestore) events.push_back({e.kind, t});
        ASSERT_GT(r.sw->next_timer(), t) << "the timer stays due at " << t.v << " ns";
        ASSERT_LT(++calls, 1000);
    }
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].first, EffectKind::WatchdogStorm);
    EXPECT_EQ(events[0].second, 20_us);
    EXPECT_EQ(events[1].first, EffectKind::WatchdogRestore);
    EXPECT_GE(events[1].second, pause_end);
    EXPECT_FALSE(r.sw->watchdog_storm(1, 3));
    fx.clear();
    EXPECT_TRUE(r.sw->dequeue(1, events[1].second, r.rng, fx));  // unpaused: the stuck frame leaves
}

TEST(SwitchPfcWatchdog, EmptyQueueIsNoStormUntilSomethingIsStuck) {
    Rig r(wd_config(WdAction::Drop));
    auto seen = storm(r, 0_ns, 10_ms, 3_ms);
    EXPECT_EQ(event(seen, EffectKind::WatchdogStorm), nullptr);
    // Paused for 3 ms already: the first packet stuck behind it is a storm.
    const Effects fx = r.send(r.pkt(0, host_ip(1), kDscpLossless3), 3_ms);
    EXPECT_NE(find(fx, EffectKind::WatchdogStorm), nullptr);
}

}  // namespace
}  // namespace rocemu::sw::test

namespace rocemu::sw::test {
namespace {

using namespace rocemu::literals;

TEST(SwitchPfcGeneration, TimerWorkSpreadsOverCallsWhenTheEffectBufferIsShort) {
    constexpr int kPorts = 64;
    SwitchConfig cfg = sonic_default_config(kPorts, BitsPerSec::gbps(100));
    cfg.pg_lossless = PgProfile{Bytes{0}, Bytes{0}, Bytes{40000}, Bytes{500}, Threshold{false, 0, Bytes{2000}}};
    Rig r(cfg);
    for (int p = 0; p < kPorts; ++p)
        for (int i = 0; i < 2; ++i) r.send(r.pkt(static_cast<PortId>(p), host_ip((p + 1) % kPorts), kDscpLossless3), 0_ns);
    for (int p = 0; p < kPorts; ++p) ASSERT_TRUE(r.sw->pg_xoff(static_cast<PortId>(p), 3));

    const Nanos due = r.sw->next_timer();
    ASSERT_LT(due, Nanos::max());
    int refreshes = 0;
    int calls = 0;
    while (r.sw->next_timer() <= due) {
        Effects fx;
        while (fx.size() < Effects::capacity() - 40) fx.push_back(Effect{});
        r.sw->on_timer(due, fx);
        refreshes += count(fx, EffectKind::SendPfc);
        ++calls;
        ASSERT_LT(calls, 100);
    }
    EXPECT_EQ(refreshes, kPorts);
    EXPECT_GT(calls, 1);
    EXPECT_EQ(r.sw->effects_overflow(), 0u);
    for (int p = 0; p < kPorts; ++p) EXPECT_EQ(r.sw->port_counters(static_cast<PortId>(p)).pfc_tx_xoff[3], 2u);
}

}  // namespace
}  // namespace rocemu::sw::test
