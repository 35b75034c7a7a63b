#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "switch/link.hpp"

namespace rocemu::sw {
namespace {

using namespace rocemu::literals;

TEST(SwitchLink, SerialisesAtSpeedThenPropagates) {
    LinkConfig cfg;
    cfg.speed = BitsPerSec::gbps(10);
    cfg.propagation_delay = 500_ns;
    Link link(cfg);
    Rng rng(1);
    // (1000 + 20) bytes x 8 / 10 Gb/s = 816 ns.
    const LinkDelivery a = link.transmit(Bytes{1000}, 100_ns, rng);
    EXPECT_EQ(a.fate, LinkFate::Delivered);
    EXPECT_EQ(a.tx_end, 916_ns);
    EXPECT_EQ(a.arrival, 1416_ns);
    // Offered while the wire is busy: starts when the first frame ends.
    const LinkDelivery b = link.transmit(Bytes{1000}, 200_ns, rng);
    EXPECT_EQ(b.tx_end, 916_ns + 816_ns);
    EXPECT_EQ(b.arrival, 916_ns + 816_ns + 500_ns);
    EXPECT_EQ(link.counters().frames, 2u);
}

TEST(SwitchLink, BackToBackFramesDoNotDriftFromBitsOverSpeed) {
    LinkConfig cfg;
    cfg.speed = BitsPerSec::gbps(25);
    Link link(cfg);
    Rng rng(1);
    // 1538 + 20 bytes at 25 Gb/s is 498.56 ns: rounding each frame up would
    // gain 0.44 ns a frame.
    constexpr uint64_t kWireBits = (1538 + 20) * 8;
    Nanos now{};
    for (uint64_t i = 0; i < 100000; ++i) {
        const LinkDelivery d = link.transmit(Bytes{1538}, now, rng);
        const unsigned __int128 exact_ps = static_cast<unsigned __int128>(i + 1) * kWireBits * 1000000000000ull / cfg.speed.v;
        const auto ceil_ns = static_cast<int64_t>((exact_ps + 999) / 1000);
        ASSERT_EQ(d.tx_end.v, ceil_ns) << "frame " << i;
        now = d.tx_end;
    }
}

void expect_rate(uint64_t k, uint64_t n, double p) {
    const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(k), static_cast<double>(n) * p, 5 * sd);
}

// The runtime's burst path: transmit_plain must leave the wire and the
// counters where one transmit() a frame does, at whole-ps speeds (a
// multiply a frame) and others (a divide and a remainder), with frames
// offered back to back, behind a busy wire and after idle gaps.
TEST(SwitchLink, TransmitPlainTimesABurstAsFrameByFrameTransmitsDo) {
    struct Offer {
        Bytes len;
        Nanos at;
    };
    for (const BitsPerSec speed :
         {BitsPerSec::gbps(100), BitsPerSec::gbps(25), BitsPerSec{3000000000}, BitsPerSec{7000000}}) {
        LinkConfig cfg;
        cfg.speed = speed;
        cfg.propagation_delay = 700_ns;
        Link one(cfg), burst(cfg);
        ASSERT_TRUE(burst.plain());
        EXPECT_EQ(burst.propagation_delay(), 700_ns);
        Rng rng(1), draw(7);
        Nanos now{};
        for (int round = 0; round < 200; ++round) {
            std::vector<Offer> offers(1 + draw.below(32));
            for (Offer& o : offers) {
                o.len = Bytes{60 + draw.below(9000)};
                // Back to back, a little early (the wire still busy) or after a gap.
                const Nanos free = one.busy_until();
                switch (draw.below(3)) {
                    case 0: o.at = free; break;
                    case 1: o.at = free - 3_ns; break;
                    default: o.at = free + Nanos{1 + static_cast<int64_t>(draw.below(5000))}; break;
                }
                now = o.at = std::max(o.at, now);
                const LinkDelivery d = one.transmit(o.len, o.at, rng);
                ASSERT_EQ(d.arrival - d.tx_end, 700_ns);
            }
            burst.transmit_plain(std::span<const Offer>(offers), [](const Offer& o) { return o.len; },
                                 [](const Offer& o) { return o.at; });
            ASSERT_EQ(burst.busy_until(), one.busy_until()) << speed.v << " b/s, round " << round;
            ASSERT_EQ(burst.counters().frames, one.counters().frames);
            ASSERT_EQ(burst.counters().bytes, one.counters().bytes);
        }
        // The sub-nanosecond remainder too: the next frame ends at the same time.
        EXPECT_EQ(burst.transmit(Bytes{1500}, now, rng).tx_end, one.transmit(Bytes{1500}, now, rng).tx_end);
    }
}

TEST(SwitchLink, ALinkWithAnyFaultOrPathsIsNotPlain) {
    const auto plain_with = [](auto set) {
        LinkConfig cfg;
        set(cfg);
        return Link(cfg).plain();
    };
    EXPECT_TRUE(plain_with([](LinkConfig& c) { c.propagation_delay = 5_ns; }));
    EXPECT_FALSE(plain_with([](LinkConfig& c) { c.loss_rate = 0.1; }));
    EXPECT_FALSE(plain_with([](LinkConfig& c) { c.corrupt_rate = 0.1; }));
    EXPECT_FALSE(plain_with([](LinkConfig& c) { c.reorder_rate = 0.1; }));
    EXPECT_FALSE(plain_with([](LinkConfig& c) { c.jitter = 5_ns; }));
    EXPECT_FALSE(plain_with([](LinkConfig& c) { c.duplicate_rate = 0.1; }));
    EXPECT_FALSE(plain_with([](LinkConfig& c) { c.paths.push_back(5_ns); }));
    EXPECT_FALSE(plain_with([](LinkConfig& c) { c.up_down.push_back({100_ns, false}); }));
}

TEST(SwitchLink, PathsJitterAndDuplicatesAsInVirtualTime) {
    LinkConfig cfg;
    cfg.speed = BitsPerSec::gbps(100);
    for (int64_t d : {1000, 5000, 2000}) cfg.paths.push_back(Nanos{d});
    cfg.jitter = 400_ns;
    cfg.jitter_reorders = true;
    cfg.duplicate_rate = 0.03;
    Link link(cfg);
    Rng rng(5);
    constexpr uint64_t n = 60000;
    uint64_t dups = 0;
    Nanos now{};
    for (uint64_t i = 0; i < n; ++i) {
        const uint32_t sport = 0xC000 + static_cast<uint32_t>(i * 7);
        const LinkDelivery d = link.transmit(Bytes{1000}, now, rng, sport);
        now = d.tx_end;
        const Nanos extra = d.arrival - d.tx_end - cfg.paths[sport % 3];
        ASSERT_GE(extra, 0_ns) << "frame " << i;
        ASSERT_LE(extra, 400_ns) << "frame " << i;
        dups += d.duplicate;
    }
    expect_rate(dups, n, 0.03);
    EXPECT_EQ(link.counters().duplicated, dups);
}

TEST(SwitchLink, LossCorruptionAndReorderHappenAtTheirRates) {
    LinkConfig cfg;
    cfg.loss_rate = 0.01;
    cfg.corrupt_rate = 0.02;
    cfg.corrupt_as = Corruption::BadIcrc;
    cfg.reorder_rate = 0.05;
    cfg.reorder_delay = 3_us;
    cfg.propagation_delay = 1_us;
    Link link(cfg);
    Rng rng(99);
    constexpr uint64_t n = 100000;
    uint64_t lost = 0, bad = 0, late = 0;
    Nanos now{};
    for (uint64_t i = 0; i < n; ++i) {
        const LinkDelivery d = link.transmit(Bytes{64}, now, rng);
        now = d.tx_end;
        if (d.fate == LinkFate::LostRandom) {
            ++lost;
            continue;
        }
        bad += d.corruption == Corruption::BadIcrc;
        late += d.arrival - d.tx_end == 4_us;
        EXPECT_TRUE(d.arrival - d.tx_end == 1_us || d.arrival - d.tx_end == 4_us);
    }
    expect_rate(lost, n, 0.01);
    expect_rate(bad, n - lost, 0.02);
    expect_rate(late, n - lost, 0.05);
    EXPECT_EQ(link.counters().lost_random, lost);
    EXPECT_EQ(link.counters().corrupted, bad);
    EXPECT_EQ(link.counters().reordered, late);
}

TEST(SwitchLink, DownAndUpAtScheduledTimes) {
    LinkConfig cfg;
    cfg.up_down = {{20_us, true}, {10_us, false}};  // given out of order on purpose
    Link link(cfg);
    Rng rng(1);
    EXPECT_TRUE(link.up(9999_ns));
    EXPECT_FALSE(link.up(10_us));
    EXPECT_EQ(link.transmit(Bytes{100}, 15_us, rng).fate, LinkFate::LostLinkDown);
    EXPECT_EQ(link.next_event(15_us), 20_us);
    EXPECT_TRUE(link.up(20_us));
    EXPECT_EQ(link.transmit(Bytes{100}, 20_us, rng).fate, LinkFate::Delivered);
    EXPECT_EQ(link.counters().lost_down, 1u);
}

TEST(SwitchLink, PfcStormSendsPausesEveryPeriodBetweenStartAndStop) {
    LinkConfig cfg;
    PfcStorm s;
    s.start = 1_us;
    s.stop = 1_us + 50_us;
    s.period = 10_us;
    s.frame.class_enable = 1 << 3;
    s.frame.quanta[3] = 0xFFFF;
    cfg.storm = s;
    Link link(cfg);
    EXPECT_FALSE(link.poll_storm(0_ns));
    std::vector<Nanos> sent;
    for (Nanos t = link.next_event(0_ns); t != Nanos::max(); t = link.next_event(t)) {
        const auto f = link.poll_storm(t);
        ASSERT_TRUE(f);
        EXPECT_EQ(f->class_enable, 1 << 3);
        EXPECT_EQ(f->quanta[3], 0xFFFF);
        EXPECT_FALSE(link.poll_storm(t));
        sent.push_back(t);
    }
    EXPECT_EQ(sent, (std::vector<Nanos>{1_us, 11_us, 21_us, 31_us, 41_us}));
    EXPECT_EQ(link.counters().storm_frames, 5u);
}

}  // namespace
}  // namespace rocemu::sw
