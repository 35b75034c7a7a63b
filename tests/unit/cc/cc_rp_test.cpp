#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cc/cc.hpp"
#include "cc/dcqcn_rp.hpp"

namespace rocemu::cc {
namespace {

using namespace rocemu::literals;

constexpr BitsPerSec kLine = BitsPerSec::gbps(100);

double rel_err(double actual, double expected) { return std::fabs(actual - expected) / expected; }

// One increase step with target step `s`: t += s; c = (c + t) / 2. After m such
// steps from (c, t): t_m = t + m s and c_m = t_m - s + (c - t + s) / 2^m.
struct Closed {
    double c;
    double t;
    void steps(int m, double s) {
        const double c0 = c, t0 = t;
        t = t0 + m * s;
        c = t - s + (c0 - t0 + s) / std::pow(2.0, m);
    }
};

TEST(CcRp, FirstCnpCutsRateByHalfAlpha) {
    const DcqcnConfig cfg;  // ConnectX defaults
    DcqcnRp rp(cfg, kLine);
    EXPECT_FALSE(rp.rate_limited());
    EXPECT_EQ(rp.next_timer(), Nanos::max());
    rp.on_cnp(5_us);
    const double alpha = 1023.0 / 1024.0;
    EXPECT_NEAR(static_cast<double>(rp.rate().v), 100e9 * (1 - alpha / 2), 1.0);
    EXPECT_EQ(rp.target_rate(), kLine);
    EXPECT_EQ(rp.alpha(5_us), 1023u);
    EXPECT_EQ(rp.counters().rate_decreases, 1u);
    EXPECT_EQ(rp.counters().cnp_handled, 1u);
    EXPECT_EQ(rp.next_timer(), 305_us);
}

// Fast recovery for F stages, then additive increase while the slower counter
// has not passed F, then hyper increase, driven by both the timer and the
// byte counter, against the closed form.
TEST(CcRp, RecoveryStagesMatchClosedFormOverTimerAndByteEvents) {
    DcqcnConfig cfg;
    cfg.rpg_threshold = 3;
    cfg.rpg_time_reset = 55_us;
    cfg.rpg_byte_reset = Bytes{1u << 20};
    cfg.rpg_ai_rate = BitsPerSec::mbps(40);
    cfg.rpg_hai_rate = BitsPerSec::mbps(200);
    cfg.clamp_tgt_rate = true;
    cfg.dce_tcp_rtt = 55_us;
    cfg.rate_to_set_on_first_cnp = BitsPerSec::mbps(20000);
    DcqcnRp rp(cfg, kLine);

    rp.on_cnp(0_us);  // pins current = target = 20 Gb/s
    ASSERT_EQ(rp.rate(), BitsPerSec::gbps(20));
    const Nanos t_cnp = 10_us;
    rp.on_cnp(t_cnp);  // the one CNP under test
    const double a = 40e6, h = 200e6, r = 20e9, alpha = 1023.0 / 1024.0;
    Closed x{r * (1 - alpha / 2), r};
    ASSERT_LT(rel_err(rp.rate().v, x.c), 1e-6);
    ASSERT_EQ(rp.target_rate().v, r);

    auto check = [&](const char* what) {
        EXPECT_LT(rel_err(rp.rate().v, x.c), 0.01) << what;
        EXPECT_LT(rel_err(rp.rate().v, x.c), 1e-6) << what;  // tighter than the 1% the issue asks
        EXPECT_LT(rel_err(rp.target_rate().v, x.t), 1e-9) << what;
    };
    for (int k = 1; k <= 5; ++k) {
        ASSERT_EQ(rp.next_timer(), t_cnp + cfg.rpg_time_reset * k);
        rp.on_timer(rp.next_timer());
        EXPECT_EQ(rp.timer_stage(), static_cast<uint32_t>(k));
        if (k <= 3) {
            EXPECT_EQ(rp.phase(), IncreasePhase::kFastRecovery);
            x.steps(1, 0);
        } else {
            EXPECT_EQ(rp.phase(), IncreasePhase::kAdditive);  // byte stage still 0
            x.steps(1, a);
        }
        check("timer event");
    }
    const Nanos t_bytes = t_cnp + cfg.rpg_time_reset * 5 + 1_us;
    for (int b = 1; b <= 6; ++b) {
        rp.on_tx(cfg.rpg_byte_reset, t_bytes);
        EXPECT_EQ(rp.byte_stage(), static_cast<uint32_t>(b));
        if (b <= 3) {
            EXPECT_EQ(rp.phase(), IncreasePhase::kAdditive);
            x.steps(1, a);
        } else {
            EXPECT_EQ(rp.phase(), IncreasePhase::kHyper);
            x.steps(1, h);
        }
        check("byte event");
    }
    rp.on_timer(rp.next_timer());
    EXPECT_EQ(rp.phase(), IncreasePhase::kHyper);
    x.steps(1, h);
    check("timer event in hyper increase");
    EXPECT_EQ(rp.counters().rate_increases, 12u);
}

// A backlogged sender paced by the RP, timer-driven recovery from a cut at
// line rate: c_k = R - (R - c_0) / 2^k at t_cnp + k * rpg_time_reset, and the
// throughput measured in each timer interval is the rate set at its start.
TEST(CcRp, TimerDrivenRecoveryTimelineWithPacedSender) {
    DcqcnConfig cfg = load_cc_preset("dcqcn-paper").config.dcqcn;
    cfg.byte_stages_enabled = false;
    DcqcnRp rp(cfg, kLine);
    const Bytes pkt{4096};
    const Nanos t_cnp = 3_us;
    Nanos now{0};
    while (now < t_cnp) {
        rp.on_tx(pkt, now);
        now = rp.next_send_time();
    }
    rp.on_cnp(t_cnp);
    const double R = 100e9, c0 = R * (1 - 1023.0 / 2048.0);
    ASSERT_LT(rel_err(rp.rate().v, c0), 1e-9);

    uint64_t bytes_in_interval = 0;
    Nanos interval_start = t_cnp;
    double interval_rate = rp.rate().v;
    int k = 0;
    while (rp.rate_limited() && k < 60) {
        const Nanos timer = rp.next_timer();
        if (rp.next_send_time() < timer) {
            now = std::max(now, rp.next_send_time());
            rp.on_tx(pkt, now);
            bytes_in_interval += pkt.v;
            continue;
        }
        ++k;
        EXPECT_EQ(timer, t_cnp + cfg.rpg_time_reset * k);
        const double measured = bytes_in_interval * 8e9 / (timer - interval_start).v;
        EXPECT_LT(rel_err(measured, interval_rate), 0.01) << "interval " << k;
        rp.on_timer(timer);
        const double expected = R - (R - c0) / std::pow(2.0, k);
        EXPECT_LT(rel_err(rp.rate().v, expected), 0.01) << "stage " << k;
        bytes_in_interval = 0;
        interval_start = timer;
        interval_rate = rp.rate().v;
    }
    EXPECT_FALSE(rp.rate_limited());
    EXPECT_EQ(rp.rate(), kLine);
    EXPECT_GT(k, 30);  // ceil-halving 50 Gb/s of gap down to zero
    EXPECT_EQ(rp.next_timer(), Nanos::max());
}

// Byte-counter-driven recovery with the timer out of reach: increase events
// come every rpg_byte_reset bytes, so at t_{j+1} = t_j + 8 B / c_j.
TEST(CcRp, ByteDrivenRecoveryTimelineWithPacedSender) {
    DcqcnConfig cfg;
    cfg.rpg_threshold = 3;
    cfg.rpg_time_reset = 131071_us;
    cfg.rpg_byte_reset = Bytes{256 * 1024};
    cfg.rpg_ai_rate = BitsPerSec::mbps(40);
    cfg.clamp_tgt_rate = true;
    cfg.rate_to_set_on_first_cnp = BitsPerSec::mbps(20000);
    cfg.dce_tcp_rtt = 55_us;  // alpha is still the initial 1023 at the cut
    DcqcnRp rp(cfg, kLine);
    rp.on_cnp(0_us);
    rp.on_cnp(10_us);
    Closed x{20e9 * (1 - 1023.0 / 2048.0), 20e9};
    const Bytes pkt{4096};
    Nanos now = 10_us;
    double expected_t = now.v;
    uint64_t seen = rp.counters().rate_increases;
    for (int j = 1; j <= 12;) {
        const double rate_before = rp.rate().v;
        rp.on_tx(pkt, now);
        if (rp.counters().rate_increases != seen) {
            seen = rp.counters().rate_increases;
            if (j == 1) expected_t = now.v;  // first event: after the first 256 KiB
            EXPECT_LT(std::fabs(now.v - expected_t), 0.01 * (now.v - 10e3)) << "event " << j;
            expected_t = now.v + cfg.rpg_byte_reset.bits() * 1e9 / rp.rate().v;
            EXPECT_EQ(rp.byte_stage(), static_cast<uint32_t>(j));
            if (j <= 3) {
                EXPECT_EQ(rp.phase(), IncreasePhase::kFastRecovery);
                x.steps(1, 0);
            } else {
                EXPECT_EQ(rp.phase(), IncreasePhase::kAdditive);
                x.steps(1, 40e6);
            }
            EXPECT_LT(rel_err(rp.rate().v, x.c), 0.01) << "event " << j;
            EXPECT_GT(rp.rate().v, rate_before);
            ++j;
        }
        now = rp.next_send_time();
    }
    EXPECT_EQ(rp.timer_stage(), 0u);
}

TEST(CcRp, RateNeverFallsBelowMinRate) {
    DcqcnConfig cfg;
    cfg.rpg_min_rate = BitsPerSec::mbps(10000);
    DcqcnRp rp(cfg, kLine);
    for (int us = 0; us < 1000; us += 10) {
        rp.on_timer(Nanos::from_us(us));
        rp.on_cnp(Nanos::from_us(us));
        ASSERT_GE(rp.rate(), cfg.rpg_min_rate);
    }
    EXPECT_EQ(rp.rate(), cfg.rpg_min_rate);
    EXPECT_GT(rp.counters().rate_decreases, 10u);
}

TEST(CcRp, AtMostOneCutPerMonitorPeriod) {
    const DcqcnConfig cfg;  // rate_reduce_monitor_period = 4 us
    DcqcnRp rp(cfg, kLine);
    std::vector<Nanos> cut_times;
    uint64_t cuts = 0;
    for (int us = 0; us <= 20; ++us) {
        const Nanos t = Nanos::from_us(us);
        rp.on_timer(t);
        rp.on_cnp(t);
        if (rp.counters().rate_decreases != cuts) {
            cuts = rp.counters().rate_decreases;
            cut_times.push_back(t);
        }
    }
    ASSERT_EQ(cut_times.size(), 6u);
    for (std::size_t i = 1; i < cut_times.size(); ++i) EXPECT_EQ(cut_times[i] - cut_times[i - 1], 4_us);
    // Only the first CNP cut on arrival; every later one fell inside a period
    // (a CNP at the instant of a timer cut belongs to the new period).
    EXPECT_EQ(rp.counters().cnp_deferred, 20u);
}

TEST(CcRp, CnpInsideMonitorPeriodCutsAtItsEnd) {
    const DcqcnConfig cfg;
    DcqcnRp rp(cfg, kLine);
    rp.on_cnp(0_us);
    const BitsPerSec after_first = rp.rate();
    rp.on_cnp(1_us);
    EXPECT_EQ(rp.rate(), after_first);
    EXPECT_EQ(rp.next_timer(), 4_us);
    rp.on_timer(4_us);
    EXPECT_LT(rp.rate(), after_first);
    EXPECT_EQ(rp.counters().rate_decreases, 2u);
    EXPECT_EQ(rp.next_timer(), 304_us);  // the increase timer restarts at the cut
}

TEST(CcRp, MinDecFacBoundsOneCut) {
    DcqcnConfig cfg;
    cfg.rpg_gd = 10;  // alpha/1 would cut almost everything
    cfg.rpg_min_dec_fac = 25;
    DcqcnRp rp(cfg, kLine);
    rp.on_cnp(0_us);
    EXPECT_EQ(rp.rate(), BitsPerSec::gbps(25));

    cfg.rpg_min_dec_fac = 100;
    DcqcnRp frozen(cfg, kLine);
    frozen.on_cnp(0_us);
    EXPECT_EQ(frozen.rate(), kLine);
}

TEST(CcRp, AlphaFollowsTheFirmwareFixedPointUpdate) {
    DcqcnConfig cfg;
    cfg.rate_reduce_monitor_period = 1000_us;  // keep cuts out of the way
    DcqcnRp lazy(cfg, kLine), eager(cfg, kLine);
    lazy.on_cnp(0_us);
    eager.on_cnp(0_us);
    uint32_t a = 1023;
    for (int k = 1; k <= 50; ++k) {
        a = (a * 1019) >> 10;
        ASSERT_EQ(eager.alpha(Nanos::from_us(k)), a) << k;
        EXPECT_NEAR(a, 1023 * std::pow(1019.0 / 1024.0, k), k);  // floor loses < 1 per period
    }
    EXPECT_EQ(lazy.alpha(50_us), a);

    // A CNP in every period pulls alpha up by (1024 - g) per period.
    cfg.initial_alpha_value = 0;
    DcqcnRp rising(cfg, kLine);
    rising.on_cnp(0_us);
    uint32_t b = 0;
    for (int k = 1; k <= 2000; ++k) {
        rising.on_cnp(Nanos::from_us(k) - 500_ns);
        b = std::min(((b * 1019) >> 10) + 5, 1023u);
        ASSERT_EQ(rising.alpha(Nanos::from_us(k)), b) << k;
    }
    EXPECT_GT(b, 819u);  // where ceil(b * 5 / 1024) reaches the 5 added per period
}

TEST(CcRp, LongIdleDecaysAlphaToZeroCheaply) {
    const DcqcnConfig cfg;
    DcqcnRp rp(cfg, kLine);
    rp.on_cnp(0_us);
    EXPECT_EQ(rp.alpha(Nanos::from_s(10)), 0u);  // 10^7 periods
    EXPECT_TRUE(rp.rate_limited());
}

TEST(CcRp, TargetClampFollowsClampTgtRateAndAfterTimeInc) {
    const DcqcnConfig cx;  // clamp_tgt_rate 0, clamp_tgt_rate_after_time_inc 1
    DcqcnRp rp(cx, kLine);
    rp.on_cnp(0_us);
    rp.on_cnp(10_us);
    EXPECT_EQ(rp.target_rate(), kLine) << "no timer increase yet: target kept";
    rp.on_timer(310_us);
    EXPECT_EQ(rp.timer_stage(), 1u);
    const BitsPerSec before = rp.rate();
    rp.on_cnp(320_us);
    EXPECT_EQ(rp.target_rate(), before) << "a timer increase happened: target clamped";

    DcqcnConfig paper = cx;
    paper.clamp_tgt_rate = true;
    DcqcnRp rp2(paper, kLine);
    rp2.on_cnp(0_us);
    const BitsPerSec first = rp2.rate();
    rp2.on_cnp(10_us);
    EXPECT_EQ(rp2.target_rate(), first);
}

TEST(CcRp, FullRecoveryReleasesTheLimiterAndRestartsAlpha) {
    DcqcnConfig cfg;
    cfg.byte_stages_enabled = false;
    DcqcnRp rp(cfg, kLine);
    rp.on_cnp(0_us);
    int events = 0;
    while (rp.rate_limited() && events < 100) {
        rp.on_timer(rp.next_timer());
        ++events;
    }
    EXPECT_FALSE(rp.rate_limited());
    EXPECT_EQ(rp.rate(), kLine);
    EXPECT_EQ(rp.next_timer(), Nanos::max());
    rp.on_tx(Bytes{1 << 30}, Nanos::from_s(1));  // no byte stages while released
    EXPECT_EQ(rp.byte_stage(), 0u);
    const Nanos t = Nanos::from_s(2);
    rp.on_cnp(t);
    EXPECT_EQ(rp.alpha(t), cfg.initial_alpha_value);
    EXPECT_NEAR(static_cast<double>(rp.rate().v), 100e9 * (1 - 1023.0 / 2048.0), 1.0);
}

TEST(CcRp, DumpShowsStateAndCounters) {
    const DcqcnConfig cfg;
    DcqcnRp rp(cfg, kLine);
    EXPECT_NE(rp.dump().find("released rate 100.000 Gb/s"), std::string::npos) << rp.dump();
    rp.on_cnp(0_us);
    EXPECT_NE(rp.dump().find("limited rate 50.049 Gb/s target 100.000 Gb/s alpha 1023/1024"), std::string::npos)
        << rp.dump();
    EXPECT_NE(rp.dump().find("cuts 1"), std::string::npos) << rp.dump();
}

TEST(CcRp, RateToSetOnFirstCnpPinsBothRates) {
    DcqcnConfig cfg;
    cfg.rate_to_set_on_first_cnp = BitsPerSec::mbps(30000);
    DcqcnRp rp(cfg, kLine);
    rp.on_cnp(0_us);
    EXPECT_EQ(rp.rate(), BitsPerSec::gbps(30));
    EXPECT_EQ(rp.target_rate(), BitsPerSec::gbps(30));
}

TEST(CcRp, PacingGapFollowsTheCurrentRate) {
    const DcqcnConfig cfg;
    DcqcnRp rp(cfg, kLine);
    rp.on_tx(Bytes{4096}, 1_us);
    EXPECT_EQ(rp.next_send_time(), 1_us + kLine.serialise(Bytes{4096}));
    rp.on_cnp(1_us);
    // The gap being waited out stretches to the new rate at once.
    EXPECT_EQ(rp.next_send_time(), 1_us + rp.rate().serialise(Bytes{4096}));
    // Sending late by less than a gap keeps the schedule; a long idle earns no credit.
    const Nanos due = rp.next_send_time();
    rp.on_tx(Bytes{4096}, due + 100_ns);
    EXPECT_EQ(rp.next_send_time(), due + rp.rate().serialise(Bytes{4096}));
    rp.on_tx(Bytes{4096}, 1_ms);
    EXPECT_EQ(rp.next_send_time(), 1_ms + rp.rate().serialise(Bytes{4096}));
}

TEST(CcRp, QpCcDispatchesToTheConfiguredAlgorithm) {
    CcConfig none_cfg;
    none_cfg.algorithm = CcAlgorithm::kNone;
    QpCc none(none_cfg, kLine);
    none.on_cnp(0_us);
    EXPECT_EQ(none.rate(), kLine);
    EXPECT_EQ(none.counters().cnp_handled, 1u);
    EXPECT_EQ(none.counters().rate_decreases, 0u);
    EXPECT_EQ(none.next_timer(), Nanos::max());
    EXPECT_EQ(none.algorithm(), CcAlgorithm::kNone);

    const CcConfig dcqcn_cfg;
    QpCc dcqcn(dcqcn_cfg, kLine);
    dcqcn.on_cnp(0_us);
    EXPECT_LT(dcqcn.rate(), kLine);
    EXPECT_EQ(dcqcn.counters().rate_decreases, 1u);
    EXPECT_EQ(dcqcn.next_timer(), 300_us);
    EXPECT_EQ(dcqcn.window(), Bytes{UINT64_MAX});
    EXPECT_EQ(dcqcn.algorithm(), CcAlgorithm::kDcqcn);
}

}  // namespace
}  // namespace rocemu::cc
