// Random traffic, PFC frames, dequeues and timers against one switch, with
// the accounting invariants checked after every step and every frame
// accounted for exactly once at the end.
#include <gtest/gtest.h>

#include <unordered_map>

#include "harness.hpp"

namespace rocemu::sw::test {
namespace {

using namespace rocemu::literals;

enum class Fate : uint8_t { InSwitch, Dropped, Sent };

void check_accounting(const Switch& sw, int ports) {
    const Mmu& m = sw.mmu();
    uint64_t queued = 0, charged = 0, shared = 0;
    std::size_t packets = 0;
    for (int p = 0; p < ports; ++p) {
        uint64_t port_sum = 0;
        for (int q = 0; q < kNumTc; ++q) {
            port_sum += sw.queue_depth(static_cast<PortId>(p), q).v;
            packets += sw.queue_packets(static_cast<PortId>(p), q);
            const PortId pp = static_cast<PortId>(p);
            charged += m.pg_reserved(pp, q).v + m.pg_shared(pp, q).v + m.pg_headroom(pp, q).v;
            shared += m.pg_shared(pp, q).v;
        }
        ASSERT_EQ(port_sum, m.port_bytes(static_cast<PortId>(p)).v);
        queued += port_sum;
    }
    ASSERT_EQ(queued, charged) << "ingress and egress accounting disagree";
    ASSERT_EQ(shared, m.pool_used().v);
    ASSERT_LE(m.pool_used(), sw.config().pool_size);
    ASSERT_LE(packets, sw.descriptor_capacity());
}

class SwitchInvariants : public ::testing::TestWithParam<uint64_t> {};

TEST_P(SwitchInvariants, RandomTrafficPausesAndTimersConserveEveryFrame) {
    constexpr int kPorts = 4;
    SwitchConfig cfg = sonic_default_config(kPorts, BitsPerSec::gbps(25));
    cfg.pool_size = Bytes{200000};
    cfg.queue_lossy = QueueProfile{Bytes{1518}, Threshold{true, -1, {}}};
    cfg.pfc_wd.detection_time = 200_us;
    cfg.pfc_wd.restoration_time = 300_us;
    cfg.scheduler[6].strict = true;
    cfg.wred[1] = WredProfile{true, EcnMode::All, Bytes{2000}, Bytes{12000}, 20};
    Rig r(cfg);
    Rng ops(GetParam());
    constexpr std::array<uint8_t, 5> kDscps{kDscpTc1, kDscpLossless3, kDscpLossless4, kDscpTc0, 48};

    std::unordered_map<uint32_t, Fate> fate;
    std::vector<std::pair<Nanos, PortId>> ready;  // pending TxReady
    uint64_t lossless_drops = 0;
    Nanos now{};

    auto apply = [&](const Effects& fx) {
        for (const Effect& e : fx) {
            switch (e.kind) {
                case EffectKind::Enqueued:
                    ASSERT_EQ(fate.at(e.handle), Fate::InSwitch);
                    break;
                case EffectKind::Drop: {
                    auto it = fate.find(e.handle);
                    ASSERT_NE(it, fate.end());
                    ASSERT_EQ(it->second, Fate::InSwitch) << "frame dropped twice";
                    it->second = Fate::Dropped;
                    lossless_drops += e.reason == DropReason::LosslessHeadroomFull;
                    break;
                }
                case EffectKind::TxReady: ready.emplace_back(e.at, e.port); break;
                default: break;
            }
        }
        ASSERT_EQ(r.sw->effects_overflow(), 0u);
    };
    auto run_ready = [&](Nanos until) {
        for (;;) {
            auto it = std::min_element(ready.begin(), ready.end());
            if (it == ready.end() || it->first > until) return;
            const auto [at, port] = *it;
            ready.erase(it);
            Effects fx;
            const auto tx = r.sw->dequeue(port, std::max(at, now), r.rng, fx);
            if (tx) {
                ASSERT_EQ(fate.at(tx->handle), Fate::InSwitch) << "frame sent twice or after a drop";
                fate[tx->handle] = Fate::Sent;
            }
            apply(fx);
            check_accounting(*r.sw, kPorts);
        }
    };

    for (int step = 0; step < 60000; ++step) {
        now += Nanos{static_cast<int64_t>(ops.below(200))};
        run_ready(now);
        while (r.sw->next_timer() <= now) {
            Effects fx;
            r.sw->on_timer(now, fx);
            apply(fx);
        }
        Effects fx;
        const uint64_t what = ops.below(100);
        // For a while, port 2's peer keeps pausing priority 3: a storm.
        if (step >= 20000 && step < 30000 && step % 10 == 0) {
            PfcFrameDesc f;
            f.class_enable = 1 << 3;
            f.quanta[3] = 0xFFFF;
            r.sw->on_pfc(2, f, now, fx);
        } else if (what < 80) {
            const PortId in = static_cast<PortId>(ops.below(kPorts));
            const int out = static_cast<int>(ops.below(kPorts));
            PacketDesc d = r.pkt(in, host_ip(out), kDscps[ops.below(kDscps.size())],
                                 static_cast<uint32_t>(64 + ops.below(1437)), static_cast<uint16_t>(ops.next()),
                                 static_cast<uint8_t>(ops.below(4)));
            fate[d.handle] = Fate::InSwitch;
            r.sw->on_packet(d, now, r.rng, fx);
        } else if (what < 90) {
            PfcFrameDesc f;
            const int prio = ops.below(2) ? 3 : 4;
            f.class_enable = static_cast<uint8_t>(1u << prio);
            f.quanta[prio] = static_cast<uint16_t>(ops.below(4) == 0 ? 0 : ops.below(65536));
            const PortId port = static_cast<PortId>(ops.below(kPorts));
            // A resume would end the storm's continuous pause.
            const bool storming = step >= 20000 && step < 30000;
            if (!(storming && port == 2)) r.sw->on_pfc(port, f, now, fx);
        }
        apply(fx);
        check_accounting(*r.sw, kPorts);
    }

    // Stop the pauses and drain: every frame must end sent or dropped.
    for (int p = 0; p < kPorts; ++p) {
        PfcFrameDesc resume;
        resume.class_enable = 0xFF;
        Effects fx;
        r.sw->on_pfc(static_cast<PortId>(p), resume, now, fx);
        apply(fx);
    }
    for (int i = 0; i < 1000 && !ready.empty(); ++i) {
        now += 1_ms;
        run_ready(now);
        Effects fx;
        while (r.sw->next_timer() <= now) r.sw->on_timer(now, fx), apply(fx), fx.clear();
    }
    std::size_t sent = 0, dropped = 0;
    for (const auto& [h, f] : fate) {
        ASSERT_NE(f, Fate::InSwitch) << "frame " << h << " never left";
        sent += f == Fate::Sent;
        dropped += f == Fate::Dropped;
    }
    EXPECT_EQ(r.sw->mmu().pool_used(), Bytes{0});
    EXPECT_GT(sent, 10000u);
    EXPECT_GT(dropped, 0u);
    // The run went through the mechanisms it means to check.
    EXPECT_GE(r.sw->queue_counters(2, 3).wd_storms, 1u);
    EXPECT_GE(r.sw->queue_counters(2, 3).wd_restores, 1u);
    EXPECT_GT(r.sw->queue_counters(2, 3).wd_drops, 0u);
    uint64_t marks = 0, xoff = 0, xon = 0;
    for (int p = 0; p < kPorts; ++p) {
        marks += r.sw->queue_counters(static_cast<PortId>(p), 1).ecn_marks;
        for (int pr : {3, 4}) {
            xoff += r.sw->port_counters(static_cast<PortId>(p)).pfc_tx_xoff[pr];
            xon += r.sw->port_counters(static_cast<PortId>(p)).pfc_tx_xon[pr];
        }
    }
    EXPECT_GT(marks, 0u);
    EXPECT_GT(xoff, 0u);
    EXPECT_GT(xon, 0u);
    // These senders ignore PFC, yet at this load the 160 KB headroom holds.
    EXPECT_EQ(lossless_drops, 0u);
}

INSTANTIATE_TEST_SUITE_P(Seeds, SwitchInvariants, ::testing::Values(2024u, 1u, 7u, 99u, 31337u));

}  // namespace
}  // namespace rocemu::sw::test
