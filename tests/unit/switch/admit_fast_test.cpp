// on_burst's admission fast path (Switch::admit_run) against the general
// path (admit() alone): random bursts from one port at a time, with PFC
// frames, dequeues and timers between them, through two switches, one with
// the fast path turned off. Every effect, next hop, counter, MMU threshold
// state and random draw must be the same after every step.
#include <gtest/gtest.h>

#include <vector>

#include "harness.hpp"

namespace rocemu::sw::test {
namespace {

using namespace rocemu::literals;

constexpr int kPorts = 4;

// A small pool, so that PGs leave the far-below case, go into headroom and
// pause; lossy queues that tail-drop early; WRED/ECN on queue 3 at enqueue,
// so deep queues mark; the watchdog, so long pauses storm and drop.
SwitchConfig tight_config() {
    SwitchConfig cfg = sonic_default_config(kPorts, BitsPerSec::gbps(25));
    cfg.pool_size = Bytes{400000};
    cfg.queue_lossy = QueueProfile{Bytes{1518}, Threshold{true, -1, {}}};
    cfg.wred[3] = WredProfile{false, EcnMode::All, Bytes{20000}, Bytes{60000}, 30};
    cfg.pfc_wd.detection_time = 100_us;
    cfg.pfc_wd.restoration_time = 150_us;
    cfg.pfc_wd.action = WdAction::Drop;
    return cfg;
}

// Everything a step can change, compared field by field.
void expect_same_state(const Switch& a, const Switch& b, Nanos now, int step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    expect_same_switch_state(a, b, now);
}

void expect_same_effects(const Switch& sw, const Effects& a, const Effects& b) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i)
        ASSERT_TRUE(same_effect(a[i], b[i])) << "effect " << i << ": " << sw.describe(a[i]) << " vs "
                                             << sw.describe(b[i]);
}

class SwitchAdmitFast : public ::testing::TestWithParam<uint64_t> {};

TEST_P(SwitchAdmitFast, DecidesEveryPacketAsTheGeneralPath) {
    Rig fast(tight_config());
    Rig slow(tight_config());
    slow.sw->set_fast_admit(false);
    for (Rig* r : {&fast, &slow})
        r->sw->routes().add_route_v4(0x0A090000, 16, r->sw->routes().add_group({r->host_nb[2], r->host_nb[3]}));
    Rng gen(GetParam());
    constexpr std::array<uint8_t, 4> kDscps{kDscpLossless3, kDscpLossless4, kDscpTc0, kDscpTc1};
    Nanos now{};
    std::array<Nanos, kPorts> last_turn{};
    uint64_t packets = 0, enqueued = 0, marks = 0, xoffs = 0, xons = 0, drops = 0, storms = 0;
    for (int step = 0; step < 4000; ++step) {
        // Calm phases (queues drain, the PGs are far below their limits:
        // the fast path's case) alternate with congested ones (deep queues,
        // marks, pauses, XOFF: the general path's).
        const bool calm = (step / 250) % 2 == 0;
        now += Nanos{static_cast<int64_t>(gen.below(calm ? 20000 : 3000))};
        Effects fa, fb;
        const uint64_t op = gen.below(100);
        if (op < (calm ? 40 : 55)) {
            // A burst from one port (what the fast path needs), mostly one
            // class to the ECMP route, sometimes mixed, now and then a
            // frame over the MTU or to no route.
            const PortId in = static_cast<PortId>(gen.below(2));
            const std::size_t n = 1 + gen.below(calm ? 24 : 40);
            const bool mixed = gen.below(4) == 0;
            const uint8_t dscp = kDscps[gen.below(kDscps.size())];
            std::vector<PacketDesc> pkts;
            for (std::size_t i = 0; i < n; ++i) {
                const uint64_t kind = gen.below(100);
                const uint32_t dst = kind == 0   ? 0x0B000001u
                                     : kind < 10 ? host_ip(2 + static_cast<int>(gen.below(2)))
                                                 : 0x0A090000u | static_cast<uint32_t>(gen.below(8));
                const uint32_t len = kind == 1 ? 9200 : gen.below(3) == 0 ? 64 : 64 + static_cast<uint32_t>(gen.below(1500));
                PacketDesc d = fast.pkt(in, dst, mixed ? kDscps[gen.below(kDscps.size())] : dscp, len,
                                        static_cast<uint16_t>(0xC000 + gen.below(16)),
                                        static_cast<uint8_t>(gen.below(4)));
                pkts.push_back(d);
            }
            packets += n;
            if (gen.below(2) == 0) {
                std::vector<uint32_t> na(n, 7), nb(n, 7);
                const std::size_t ta = fast.sw->on_burst(pkts.data(), n, now, fast.rng, fa, na.data());
                const std::size_t tb = slow.sw->on_burst(pkts.data(), n, now, slow.rng, fb, nb.data());
                ASSERT_EQ(ta, tb);
                ASSERT_EQ(na, nb) << "step " << step;
                for (const uint32_t v : na) enqueued += v != Switch::kNotEnqueued;
            } else {
                ASSERT_EQ(fast.sw->on_burst(pkts.data(), n, now, fast.rng, fa),
                          slow.sw->on_burst(pkts.data(), n, now, slow.rng, fb));
                enqueued += static_cast<uint64_t>(count(fa, EffectKind::Enqueued));
            }
        } else if (op < (calm ? 95 : 85)) {
            // The egress ports send what their wires allow by now, both of
            // them in a calm phase.
            const PortId first = static_cast<PortId>(2 + gen.below(2));
            for (PortId port = first; port < (calm ? 4 : first + 1); ++port) {
                std::array<TxDesc, 32> ta{}, tb{};
                const std::size_t max = 1 + gen.below(32);
                // From the port's last turn: its wire may have been free since.
                const Nanos from = last_turn[port];
                last_turn[port] = now;
                const std::size_t na = fast.sw->dequeue_burst(port, from, now, ta.data(), max, fast.rng, fa);
                const std::size_t nb = slow.sw->dequeue_burst(port, from, now, tb.data(), max, slow.rng, fb);
                ASSERT_EQ(na, nb) << "step " << step;
                for (std::size_t i = 0; i < na; ++i) {
                    ASSERT_EQ(ta[i].handle, tb[i].handle);
                    ASSERT_EQ(ta[i].end, tb[i].end);
                }
            }
        } else if (!calm && op < 93) {
            // The receivers pause the egress ports now and then (a pause
            // or a storm anywhere sends the packets to that queue, or all
            // of them, the general way).
            PfcFrameDesc f;
            f.class_enable = static_cast<uint8_t>(1u << (3 + gen.below(2)));
            const uint16_t quanta = gen.below(4) == 0 ? 0 : static_cast<uint16_t>(gen.below(0xFFFF));
            f.quanta.fill(quanta);
            const PortId port = static_cast<PortId>(2 + gen.below(2));
            fast.sw->on_pfc(port, f, now, fa);
            slow.sw->on_pfc(port, f, now, fb);
        } else {
            fast.sw->on_timer(now, fa);
            slow.sw->on_timer(now, fb);
        }
        ASSERT_NO_FATAL_FAILURE(expect_same_effects(*fast.sw, fa, fb)) << "step " << step;
        for (const Effect& e : fa) {
            marks += e.kind == EffectKind::MarkCe;
            xoffs += e.kind == EffectKind::SendPfc && e.pfc.quanta[3] + e.pfc.quanta[4] > 0;
            xons += e.kind == EffectKind::SendPfc && e.pfc.quanta[3] + e.pfc.quanta[4] == 0;
            drops += e.kind == EffectKind::Drop;
            storms += e.kind == EffectKind::WatchdogStorm;
        }
        ASSERT_NO_FATAL_FAILURE(expect_same_state(*fast.sw, *slow.sw, now, step));
    }
    EXPECT_EQ(fast.rng.next(), slow.rng.next());
    EXPECT_EQ(fast.sw->dump(now), slow.sw->dump(now));
    // Both paths did run: a large share of the enqueued packets took the
    // fast one (the first to an unarmed port, every packet near a limit or
    // to a paused queue take admit()), and the traffic reached what sends a
    // packet the general way.
    EXPECT_EQ(slow.sw->fast_admits(), 0u);
    EXPECT_GT(fast.sw->fast_admits(), enqueued / 5);
    EXPECT_LT(fast.sw->fast_admits(), enqueued);
    EXPECT_GT(marks, 0u);
    EXPECT_GT(xoffs, 0u);
    EXPECT_GT(xons, 0u);
    EXPECT_GT(drops, 0u);
    EXPECT_GT(storms, 0u);
    EXPECT_GT(packets, 0u);
}

INSTANTIATE_TEST_SUITE_P(Seeds, SwitchAdmitFast, ::testing::Values(1u, 7u, 2026u));

}  // namespace
}  // namespace rocemu::sw::test
