#include <gtest/gtest.h>

#include <cmath>

#include "harness.hpp"
#include "switch/red.hpp"

namespace rocemu::sw::test {
namespace {

using namespace rocemu::literals;

constexpr uint64_t kKmin = 100000;
constexpr uint64_t kKmax = 200000;

WredProfile profile(uint32_t pmax_percent, bool wred_green, EcnMode ecn) {
    WredProfile w;
    w.wred_green_enable = wred_green;
    w.ecn = ecn;
    w.green_min_threshold = Bytes{kKmin};
    w.green_max_threshold = Bytes{kKmax};
    w.green_drop_probability = pmax_percent;
    return w;
}

TEST(SwitchWred, RampIsZeroBelowKminLinearToPmaxAtKmaxOneAbove) {
    const WredProfile w = profile(20, true, EcnMode::All);
    EXPECT_EQ(red_probability(w, Bytes{0}), 0.0);
    EXPECT_EQ(red_probability(w, Bytes{kKmin}), 0.0);
    EXPECT_DOUBLE_EQ(red_probability(w, Bytes{kKmin + 25000}), 0.05);
    EXPECT_DOUBLE_EQ(red_probability(w, Bytes{kKmin + 50000}), 0.10);
    EXPECT_DOUBLE_EQ(red_probability(w, Bytes{kKmax}), 0.20);
    EXPECT_EQ(red_probability(w, Bytes{kKmax + 1}), 1.0);
}

// k successes in n trials against p: within 5 binomial standard deviations.
void expect_binomial(uint64_t k, uint64_t n, double p) {
    const double mean = static_cast<double>(n) * p;
    const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
    EXPECT_NEAR(static_cast<double>(k), mean, 5 * sd + 1e-9) << "n=" << n << " p=" << p;
}

TEST(SwitchWred, DecisionsFollowTheRampStatistically) {
    const WredProfile w = profile(10, false, EcnMode::All);
    Rng rng(7);
    for (const uint64_t q : {kKmin, kKmin + 10000, kKmin + 50000, kKmin + 90000, kKmax, kKmax + 1}) {
        constexpr uint64_t n = 200000;
        uint64_t marks = 0;
        for (uint64_t i = 0; i < n; ++i) marks += red_decide(w, Bytes{q}, kEcnEct0, rng) == RedVerdict::Mark;
        expect_binomial(marks, n, red_probability(w, Bytes{q}));
    }
}

TEST(SwitchWred, NonEctIsDroppedOnlyWithWredEnabledAndEcnNoneDropsAll) {
    Rng rng(1);
    const Bytes over{kKmax + 1};
    EXPECT_EQ(red_decide(profile(5, true, EcnMode::All), over, kEcnNotEct, rng), RedVerdict::Drop);
    EXPECT_EQ(red_decide(profile(5, false, EcnMode::All), over, kEcnNotEct, rng), RedVerdict::Pass);
    EXPECT_EQ(red_decide(profile(5, true, EcnMode::None), over, kEcnEct0, rng), RedVerdict::Drop);
    EXPECT_EQ(red_decide(profile(5, false, EcnMode::All), over, kEcnEct0, rng), RedVerdict::Mark);
    EXPECT_EQ(red_decide(WredProfile{}, over, kEcnEct0, rng), RedVerdict::Pass);
}

// Keep queue 1 of port 1 at a constant depth: each step enqueues one probe
// and, unless the probe was dropped, transmits one packet. Returns the number of probes marked (at
// enqueue) or of transmitted packets marked (at dequeue).
uint64_t hold_depth_and_count_marks(WredStage stage, uint64_t depth, uint64_t steps, uint8_t ecn,
                                    uint64_t* drops = nullptr) {
    SwitchConfig cfg = sonic_default_config(2, BitsPerSec::gbps(100));
    cfg.wred[1] = profile(10, true, EcnMode::All);
    cfg.wred_stage = stage;
    Rig r(cfg);
    constexpr uint32_t kLen = 1000;
    for (uint64_t i = 0; i < depth / kLen; ++i) r.send(r.pkt(0, host_ip(1), kDscpTc1, kLen, 0xC000, kEcnEct0), 0_ns);
    EXPECT_EQ(r.sw->queue_depth(1, 1), Bytes{depth});
    const uint64_t prefill_marks = r.sw->queue_counters(1, 1).ecn_marks;
    uint64_t marks = 0;
    Nanos now{};
    for (uint64_t i = 0; i < steps; ++i) {
        now = std::max(now, r.sw->tx_free_at(1));
        Effects fx;
        r.sw->on_packet(r.pkt(0, host_ip(1), kDscpTc1, kLen, 0xC000, ecn), now, r.rng, fx);
        if (count(fx, EffectKind::Drop)) {
            if (drops) ++*drops;
            continue;
        }
        r.sw->dequeue(1, now, r.rng, fx);
        marks += static_cast<uint64_t>(count(fx, EffectKind::MarkCe));
    }
    EXPECT_EQ(r.sw->queue_counters(1, 1).ecn_marks - prefill_marks, marks);
    return marks;
}

TEST(SwitchWred, SwitchMarksAtEnqueueWithRampProbability) {
    constexpr uint64_t n = 40000;
    // At enqueue the probe sees the standing depth.
    for (const uint64_t depth : {kKmin, kKmin + 30000, kKmin + 70000}) {
        const uint64_t marks = hold_depth_and_count_marks(WredStage::Enqueue, depth, n, kEcnEct0);
        expect_binomial(marks, n, red_probability(profile(10, true, EcnMode::All), Bytes{depth}));
    }
}

TEST(SwitchWred, SwitchMarksAtDequeueWithRampProbability) {
    constexpr uint64_t n = 40000;
    // At dequeue the departing packet sees the depth it leaves behind: the
    // standing depth (after the probe was added, one packet went out).
    for (const uint64_t depth : {kKmin + 30000, kKmin + 70000}) {
        const uint64_t marks = hold_depth_and_count_marks(WredStage::Dequeue, depth, n, kEcnEct0);
        expect_binomial(marks, n, red_probability(profile(10, true, EcnMode::All), Bytes{depth}));
    }
}

TEST(SwitchWred, CeIsNotRemarkedAndNonEctIsDroppedOnTheRamp) {
    EXPECT_EQ(hold_depth_and_count_marks(WredStage::Enqueue, kKmax + 1000, 500, kEcnCe), 0u);
    uint64_t drops = 0;
    EXPECT_EQ(hold_depth_and_count_marks(WredStage::Enqueue, kKmax + 1000, 500, kEcnNotEct, &drops), 0u);
    EXPECT_EQ(drops, 500u);
}

}  // namespace
}  // namespace rocemu::sw::test
