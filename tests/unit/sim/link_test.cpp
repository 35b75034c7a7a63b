// Link model tests: exact serialisation, propagation, fault rates,
// corruption, K paths, jitter, down/up, the transmit queue and the taps.
#include "sim/link.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "dataplane/pcap/pcap.hpp"
#include "sim/sim.hpp"
#include "switch/config.hpp"
#include "test_nodes.hpp"

namespace rocemu::sim {
namespace {

using test::Sink;
using test::Source;

// ceil(bits * 1e9 / rate) in ns: when the last of `bits` leaves a link that
// started sending at 0.
int64_t ceil_ns(unsigned __int128 bits, BitsPerSec rate) {
    const unsigned __int128 num = bits * 1000000000u;
    return static_cast<int64_t>((num + rate.v - 1) / rate.v);
}

struct Pair {
    Simulator sim;
    Source src;
    Sink dst;
    LinkId link;

    Pair(const LinkConfig& cfg, uint64_t count, Source::Make make, bool keep_bytes = false, uint64_t seed = 1,
         bool tx_ready = true)
        : sim(SimConfig{.seed = seed, .max_frames = 1u << 15}),
          src(sim, count, std::move(make), tx_ready),
          dst(sim, keep_bytes),
          link(sim.add_link(src.id(), 0, dst.id(), 0, cfg)) {}

    const LinkCounters& counters() const { return sim.link(link).counters(); }
};

class SimLinkExact : public ::testing::TestWithParam<uint64_t> {};

TEST_P(SimLinkExact, BackToBackMillionFramesDoNotDrift) {
    constexpr uint32_t kLen = 1538;  // not a whole number of ns at these rates
    constexpr uint64_t kCount = 1000000;
    LinkConfig cfg = test::bare_link();
    cfg.speed = BitsPerSec{GetParam()};
    cfg.propagation_delay = Nanos{500};
    Pair p(cfg, kCount, [](uint64_t i) { return test::tagged_frame(i, kLen); });
    p.src.start();
    p.sim.run_until_idle();

    const auto& got = p.dst.got();
    ASSERT_EQ(got.size(), kCount);
    for (uint64_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(got[i].tag, i);
        ASSERT_EQ(got[i].t.v, ceil_ns(static_cast<unsigned __int128>(i + 1) * kLen * 8, cfg.speed) + 500)
            << "frame " << i;
    }
    EXPECT_EQ(p.counters().tx_bytes, kCount * kLen);
    EXPECT_EQ(p.sim.pool().in_use(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Rates, SimLinkExact,
                         ::testing::Values(BitsPerSec::gbps(100).v, BitsPerSec::gbps(400).v, BitsPerSec::gbps(800).v,
                                           BitsPerSec::gbps(56).v));

TEST(SimLink, QueuedBurstOfMixedSizesIsExact) {
    LinkConfig cfg = test::bare_link();
    cfg.speed = BitsPerSec::gbps(800);
    cfg.propagation_delay = Nanos{1234};
    std::vector<uint32_t> lens;
    Rng rng(3);
    for (int i = 0; i < 20000; ++i) lens.push_back(64 + static_cast<uint32_t>(rng.below(FramePool::kFrameCapacity - 64 + 1)));
    Pair p(cfg, lens.size(), [&](uint64_t i) { return test::tagged_frame(i, lens[i]); });
    p.src.set_pull(false);
    p.src.burst();
    EXPECT_EQ(p.sim.link(p.link).queued_frames(), lens.size() - 1);
    p.sim.run_until_idle();

    ASSERT_EQ(p.dst.got().size(), lens.size());
    unsigned __int128 bits = 0;
    for (std::size_t i = 0; i < lens.size(); ++i) {
        bits += lens[i] * 8;
        ASSERT_EQ(p.dst.got()[i].t.v, ceil_ns(bits, cfg.speed) + 1234) << "frame " << i;
    }
    EXPECT_EQ(p.src.tx_ready_calls(), 1u);  // once, when the queue ran dry
}

TEST(SimLink, PropagationAndIdleRestart) {
    LinkConfig cfg = test::bare_link();
    cfg.speed = BitsPerSec::gbps(100);
    cfg.propagation_delay = Nanos{2500};
    Pair p(cfg, 2, [](uint64_t i) { return test::tagged_frame(i, 1001); });  // 80.08 ns
    p.src.set_pull(false);
    p.src.start();
    p.sim.run_until(Nanos{10000});
    p.src.start();  // the link has been idle since 81 ns: serialisation starts now
    p.sim.run_until_idle();
    ASSERT_EQ(p.dst.got().size(), 2u);
    EXPECT_EQ(p.dst.got()[0].t.v, 81 + 2500);
    EXPECT_EQ(p.dst.got()[1].t.v, 10000 + 81 + 2500);
}

// A link without faults or paths takes link::Model's short path; a single
// path of the same delay takes the full one. Both must time every frame the
// same, on a speed with whole picoseconds per byte and on one without.
TEST(SimLink, PlainLinkTimesFramesLikeTheFullModel) {
    for (const BitsPerSec speed : {BitsPerSec::gbps(100), BitsPerSec{3000000007ull}}) {
        LinkConfig plain = test::bare_link();
        plain.speed = speed;
        plain.propagation_delay = Nanos{700};
        LinkConfig full = plain;
        full.paths.push_back(Nanos{700});
        const auto make = [](uint64_t i) { return test::tagged_frame(i, 64 + static_cast<uint32_t>(i * 37 % 1400)); };
        Pair a(plain, 500, make);
        Pair b(full, 500, make);
        for (Pair* p : {&a, &b}) {
            p->src.start();
            p->sim.run_until_idle();
        }
        ASSERT_EQ(a.dst.got().size(), 500u);
        ASSERT_EQ(b.dst.got().size(), 500u);
        for (std::size_t k = 0; k < 500; ++k) ASSERT_EQ(a.dst.got()[k].t, b.dst.got()[k].t) << "frame " << k;
        EXPECT_EQ(a.counters(), b.counters());
        EXPECT_EQ(a.counters().tx_frames, 500u);
    }
}

// Binomial bound: |observed - n p| within 5 standard deviations.
void expect_binomial(uint64_t observed, uint64_t n, double prob) {
    const double mean = static_cast<double>(n) * prob;
    const double sd = std::sqrt(mean * (1 - prob));
    EXPECT_NEAR(static_cast<double>(observed), mean, 5 * sd) << "n=" << n << " p=" << prob;
}

constexpr uint64_t kFaultFrames = 100000;

TEST(SimLink, LossRateWithinBinomialBounds) {
    LinkConfig cfg = test::bare_link();
    cfg.loss_rate = 0.02;
    Pair p(cfg, kFaultFrames, [](uint64_t i) { return test::tagged_frame(i, 256); });
    p.src.start();
    p.sim.run_until_idle();
    const uint64_t lost = p.counters().dropped(LinkDrop::Loss);
    expect_binomial(lost, kFaultFrames, 0.02);
    EXPECT_EQ(p.dst.got().size(), kFaultFrames - lost);
    EXPECT_EQ(p.counters().tx_frames, kFaultFrames);  // lost frames still occupied the wire
    EXPECT_EQ(p.counters().delivered_frames, kFaultFrames - lost);
    EXPECT_EQ(p.sim.pool().in_use(), 0u);
}

TEST(SimLink, DuplicationRateWithinBinomialBounds) {
    LinkConfig cfg = test::bare_link();
    cfg.duplicate_rate = 0.03;
    Pair p(cfg, kFaultFrames, [](uint64_t i) { return test::tagged_frame(i, 256); });
    p.src.start();
    p.sim.run_until_idle();
    const uint64_t dups = p.counters().duplicated;
    expect_binomial(dups, kFaultFrames, 0.03);
    const auto& got = p.dst.got();
    ASSERT_EQ(got.size(), kFaultFrames + dups);
    uint64_t adjacent_twins = 0;
    for (std::size_t i = 1; i < got.size(); ++i) {
        ASSERT_LE(got[i - 1].tag, got[i].tag);
        if (got[i - 1].tag == got[i].tag) {
            ++adjacent_twins;
            EXPECT_EQ(got[i - 1].t, got[i].t);
        }
    }
    EXPECT_EQ(adjacent_twins, dups);
    EXPECT_EQ(p.sim.pool().in_use(), 0u);
}

TEST(SimLink, CorruptionBreaksExactlyTheIcrc) {
    LinkConfig cfg = test::bare_link();
    cfg.corrupt_rate = 0.05;
    cfg.corrupt_as = Corruption::BadIcrc;
    // Every fourth frame has no payload, so the PSN is what gets hit.
    auto make = [](uint64_t i) { return test::roce_frame(static_cast<uint32_t>(i), 0xC001, i % 4 == 0 ? 0 : 512); };
    Pair p(cfg, 40000, make, true);
    p.src.start();
    p.sim.run_until_idle();
    const auto& got = p.dst.got();
    ASSERT_EQ(got.size(), 40000u);
    uint64_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const std::vector<uint8_t> sent = make(i);
        ASSERT_EQ(got[i].bytes.size(), sent.size());
        wire::RocePacket pkt;
        const wire::ParseError e = wire::parse_roce(got[i].bytes, pkt);
        if (got[i].bytes == sent) {
            EXPECT_EQ(e, wire::ParseError::Ok);
            continue;
        }
        ++bad;
        EXPECT_EQ(e, wire::ParseError::BadIcrc) << "frame " << i << ": " << wire::to_string(e);
        std::size_t diffs = 0, where = 0;
        for (std::size_t b = 0; b < sent.size(); ++b)
            if (sent[b] != got[i].bytes[b]) ++diffs, where = b;
        EXPECT_EQ(diffs, 1u);
        EXPECT_GE(where, pkt.bth_off + 5u);
        EXPECT_LT(where, sent.size() - wire::kIcrcLen);
    }
    EXPECT_EQ(bad, p.counters().corrupted);
    expect_binomial(bad, 40000, 0.05);
}

// A compact frame (zero payload, headers and ICRC kept) is made whole to be
// corrupted; duplicates stay compact. Each frame arrives as sent or with one
// byte of its payload or PSN changed, and nothing leaks from the pool.
TEST(SimLink, CompactFramesAreCorruptedAndDuplicatedLikeWholeOnes) {
    LinkConfig cfg = test::bare_link();
    cfg.corrupt_rate = 0.05;
    cfg.corrupt_as = Corruption::BadIcrc;
    cfg.duplicate_rate = 0.05;
    auto make = [](uint64_t i) { return test::roce_frame(static_cast<uint32_t>(i), 0xC001, 1024, true); };
    const uint32_t head = 14 + 20 + 8 + 12;  // Ethernet, IPv4, UDP, BTH
    Pair p(cfg, 20000, make, true);
    p.src.set_compact_head(head);
    p.src.start();
    p.sim.run_until_idle();
    const auto& got = p.dst.got();
    ASSERT_EQ(got.size(), 20000u + p.counters().duplicated);
    uint64_t bad = 0;
    for (const auto& a : got) {
        wire::RocePacket pkt;
        const wire::ParseError e = wire::parse_roce(a.bytes, pkt);
        ASSERT_TRUE(e == wire::ParseError::Ok || e == wire::ParseError::BadIcrc) << wire::to_string(e);
        const std::vector<uint8_t> sent = make(pkt.bth.psn.value());
        ASSERT_EQ(a.bytes.size(), sent.size());
        std::size_t diffs = 0, where = 0;
        for (std::size_t b = 0; b < sent.size(); ++b)
            if (sent[b] != a.bytes[b]) ++diffs, where = b;
        if (e == wire::ParseError::Ok) {
            EXPECT_EQ(diffs, 0u);
            continue;
        }
        ++bad;
        EXPECT_EQ(diffs, 1u);
        EXPECT_GE(where, head) << "the payload is what gets hit";
        EXPECT_LT(where, sent.size() - wire::kIcrcLen);
    }
    // A corrupted frame's duplicate carries the same error.
    EXPECT_GE(bad, p.counters().corrupted);
    expect_binomial(p.counters().corrupted, 20000, 0.05);
    EXPECT_GT(p.counters().duplicated, 0u);
    EXPECT_EQ(p.sim.pool().in_use(), 0u);
}

uint32_t psn_of(const std::vector<uint8_t>& f) {
    wire::RocePacket pkt;
    EXPECT_EQ(wire::parse_roce(f, pkt), wire::ParseError::Ok);
    return pkt.bth.psn.value();
}

TEST(SimLink, FcsModeAndNonRoceCorruptionDrop) {
    for (const bool roce : {true, false}) {
        LinkConfig cfg = test::bare_link();
        cfg.corrupt_rate = 0.1;
        cfg.corrupt_as = roce ? Corruption::BadFcs : Corruption::BadIcrc;
        auto make = [roce](uint64_t i) {
            return roce ? test::roce_frame(static_cast<uint32_t>(i), 0xC001, 64) : test::tagged_frame(i, 64);
        };
        Pair p(cfg, 20000, make, true);
        p.src.start();
        p.sim.run_until_idle();
        const uint64_t fcs = p.counters().dropped(LinkDrop::BadFcs);
        expect_binomial(fcs, 20000, 0.1);
        EXPECT_EQ(p.counters().corrupted, 0u);
        ASSERT_EQ(p.dst.got().size(), 20000 - fcs);
        for (const auto& a : p.dst.got()) EXPECT_EQ(a.bytes, make(roce ? psn_of(a.bytes) : a.tag));
    }
}

TEST(SimLink, KPathsReorderAndEachPathKeepsItsDelay) {
    LinkConfig cfg = test::bare_link();
    cfg.speed = BitsPerSec::gbps(400);
    for (int64_t d : {1000, 5000, 2000, 3000}) cfg.paths.push_back(Nanos{d});
    constexpr uint32_t kLen = 1098;  // 58 bytes of headers and ICRC, 1040 of payload
    constexpr uint64_t kCount = 4000;
    // A sprayer: the source port changes every packet.
    Pair p(cfg, kCount, [](uint64_t i) { return test::roce_frame(static_cast<uint32_t>(i), 0xC000 + static_cast<uint16_t>(i * 7), kLen - 58); }, true);
    p.src.start();
    p.sim.run_until_idle();
    const auto& got = p.dst.got();
    ASSERT_EQ(got.size(), kCount);
    ASSERT_EQ(got[0].bytes.size(), kLen);
    uint64_t inversions = 0;
    uint32_t prev = 0;
    std::array<uint64_t, 4> per_path{};
    for (std::size_t k = 0; k < got.size(); ++k) {
        const uint32_t psn = psn_of(got[k].bytes);
        if (k > 0 && psn < prev) ++inversions;
        prev = psn;
        const uint16_t sport = static_cast<uint16_t>(0xC000 + psn * 7);
        const std::size_t path = sport % 4;
        ++per_path[path];
        const int64_t tx_end = ceil_ns(static_cast<unsigned __int128>(psn + 1) * kLen * 8, cfg.speed);
        ASSERT_EQ(got[k].t.v - tx_end, cfg.paths[path].v) << "psn " << psn;
    }
    EXPECT_GT(inversions, kCount / 4);
    for (uint64_t n : per_path) EXPECT_EQ(n, kCount / 4);
}

TEST(SimLink, NonRoceFramesTakePathZero) {
    LinkConfig cfg = test::bare_link();
    cfg.paths.push_back(Nanos{700});
    cfg.paths.push_back(Nanos{9000});
    Pair p(cfg, 50, [](uint64_t i) { return test::tagged_frame(i, 100); });
    p.src.start();
    p.sim.run_until_idle();
    ASSERT_EQ(p.dst.got().size(), 50u);
    for (std::size_t i = 0; i < 50; ++i)
        EXPECT_EQ(p.dst.got()[i].t.v, ceil_ns(static_cast<unsigned __int128>(i + 1) * 800, cfg.speed) + 700);
}

TEST(SimLink, JitterWithinBoundsAndOrderedUnlessAllowed) {
    for (const bool reorders : {false, true}) {
        LinkConfig cfg = test::bare_link();
        cfg.speed = BitsPerSec::gbps(100);
        cfg.propagation_delay = Nanos{1000};
        cfg.jitter = Nanos{2000};
        cfg.jitter_reorders = reorders;
        constexpr uint64_t kCount = 20000;
        Pair p(cfg, kCount, [](uint64_t i) { return test::tagged_frame(i, 500); });  // 40 ns each
        p.src.start();
        p.sim.run_until_idle();
        const auto& got = p.dst.got();
        ASSERT_EQ(got.size(), kCount);
        uint64_t inversions = 0;
        int64_t min_extra = INT64_MAX, max_extra = 0;
        for (std::size_t k = 0; k < got.size(); ++k) {
            if (k > 0 && got[k].tag < got[k - 1].tag) ++inversions;
            const int64_t base = static_cast<int64_t>(got[k].tag + 1) * 40 + 1000;
            const int64_t extra = got[k].t.v - base;
            min_extra = std::min(min_extra, extra);
            max_extra = std::max(max_extra, extra);
            if (reorders) {
                ASSERT_GE(extra, 0);
                ASSERT_LE(extra, 2000);
            }
        }
        if (reorders) {
            EXPECT_GT(inversions, kCount / 4);
            EXPECT_LT(min_extra, 100);
            EXPECT_GT(max_extra, 1900);
        } else {
            // Held back behind earlier frames, never ahead of its own draw.
            EXPECT_EQ(inversions, 0u);
            EXPECT_GE(min_extra, 0);
            EXPECT_GT(max_extra, 1900);
        }
    }
}

// Sends one 1000-byte frame every microsecond from a timer.
class Ticker : public Node {
public:
    Ticker(Simulator& sim, uint64_t count) : sim_(sim), id_(sim.add_node(*this)), count_(count) {}
    NodeId id() const { return id_; }
    void on_frame(PortId, FrameHandle h, Nanos) override { sim_.pool().free(h); }
    void on_timer(Nanos now) override {
        sim_.transmit(id_, 0, test::make_frame(sim_, test::tagged_frame(sent_, 1000)));
        if (++sent_ < count_) sim_.arm_timer(id_, now + Nanos{1000});
    }

private:
    Simulator& sim_;
    NodeId id_;
    uint64_t count_;
    uint64_t sent_ = 0;
};

TEST(SimLink, DownDropsQueuedInFlightAndNewFramesUntilUp) {
    Simulator sim(SimConfig{});
    Ticker tx(sim, 150);
    Sink rx(sim);
    LinkConfig cfg = test::bare_link();
    cfg.speed = BitsPerSec::gbps(10);  // 800 ns per frame
    cfg.propagation_delay = Nanos{10000};
    const LinkId l = sim.add_link(tx.id(), 0, rx.id(), 0, cfg);
    sim.arm_timer(tx.id(), Nanos{0});  // frame k leaves at k us and arrives at k us + 10.8 us
    sim.schedule_link_state(l, Nanos{50500}, false);
    sim.schedule_link_state(l, Nanos{100500}, true);
    sim.run_until(Nanos{60000});
    EXPECT_FALSE(sim.link(l).up());
    sim.run_until_idle();
    EXPECT_TRUE(sim.link(l).up());

    std::vector<uint64_t> tags;
    for (const auto& a : rx.got()) tags.push_back(a.tag);
    std::vector<uint64_t> expect;
    for (uint64_t k = 0; k <= 39; ++k) expect.push_back(k);  // arrived before 50.5 us
    for (uint64_t k = 101; k < 150; ++k) expect.push_back(k);  // sent after the link came up
    EXPECT_EQ(tags, expect);
    // 40..50 were on the wire at 50.5 us, 51..100 were sent into a dead link.
    EXPECT_EQ(sim.link(l).counters().dropped(LinkDrop::LinkDown), 61u);
    EXPECT_EQ(sim.pool().in_use(), 0u);
}

TEST(SimLink, GoingDownFlushesTheQueue) {
    LinkConfig cfg = test::bare_link();
    cfg.speed = BitsPerSec::gbps(1);  // 8 us per 1000 B
    Pair p(cfg, 10, [](uint64_t i) { return test::tagged_frame(i, 1000); });
    p.src.set_pull(false);
    p.src.burst();
    EXPECT_EQ(p.sim.link(p.link).queued_frames(), 9u);
    p.sim.schedule_link_state(p.link, Nanos{4000}, false);
    p.sim.run_until(Nanos{5000});
    EXPECT_EQ(p.sim.link(p.link).queued_frames(), 0u);
    EXPECT_EQ(p.sim.link(p.link).queued_bytes().v, 0u);
    p.sim.run_until_idle();
    EXPECT_TRUE(p.dst.got().empty());
    EXPECT_EQ(p.counters().dropped(LinkDrop::LinkDown), 10u);
    EXPECT_EQ(p.sim.pool().in_use(), 0u);
}

TEST(SimLink, FiniteQueueDropsOverflowAndSignalsReady) {
    LinkConfig cfg = test::bare_link();
    cfg.queue_limit = Bytes{3000};
    Pair p(cfg, 10, [](uint64_t i) { return test::tagged_frame(i, 1000); });
    p.src.set_pull(false);
    p.src.burst();  // one serialising, three queued, six dropped
    EXPECT_EQ(p.sim.link(p.link).queued_bytes().v, 3000u);
    EXPECT_FALSE(p.sim.tx_idle(p.src.id(), 0));
    p.sim.run_until_idle();
    EXPECT_TRUE(p.sim.tx_idle(p.src.id(), 0));
    EXPECT_EQ(p.counters().dropped(LinkDrop::QueueFull), 6u);
    ASSERT_EQ(p.dst.got().size(), 4u);
    for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(p.dst.got()[i].tag, i);
    EXPECT_EQ(p.src.tx_ready_calls(), 1u);
}

// A source that paces itself hears no TxDone, so its link queues one only
// for a frame that waits behind another. Frames offered at random times,
// some in bursts and some in the nanosecond the wire frees, must arrive as
// they do on a link that ends every frame with a TxDone: same order, same
// times, same counters; the events saved are exactly the frames that did
// not wait.
TEST(SimLink, WithoutTxReadyFramesKeepTheirTimesAndOnlyWaitingOnesCostATxDone) {
    LinkConfig cfg = test::bare_link();
    cfg.speed = BitsPerSec::gbps(1);  // 8 us per 1000 B
    cfg.propagation_delay = Nanos{300};
    std::vector<test::Arrival> got[2];
    LinkCounters counters[2];
    uint64_t events[2] = {};
    uint64_t queued[2] = {};
    for (const bool tx_ready : {true, false}) {
        Pair p(cfg, 0, {}, false, 1, tx_ready);
        Rng rng(17);
        Nanos t{0};
        for (uint64_t i = 0; i < 3000; ++i) {
            // Gaps of whole frames meet a wire that frees in that nanosecond.
            const uint64_t pick = rng.below(4);
            t += Nanos{static_cast<int64_t>(pick == 0 ? 0 : pick == 1 ? 8000 * rng.below(3) : rng.below(30000))};
            p.sim.run_until(t);
            const Link::Send r = p.sim.transmit(p.src.id(), 0, test::make_frame(p.sim, test::tagged_frame(i, 1000)));
            ASSERT_NE(r, Link::Send::Dropped);
            queued[tx_ready] += r == Link::Send::Queued;
        }
        p.sim.run_until_idle();
        got[tx_ready] = p.dst.got();
        counters[tx_ready] = p.counters();
        events[tx_ready] = p.sim.counters().events;
        EXPECT_EQ(p.sim.pool().in_use(), 0u);
        EXPECT_TRUE(p.sim.tx_idle(p.src.id(), 0));
    }
    ASSERT_EQ(got[0].size(), 3000u);
    ASSERT_EQ(got[1].size(), 3000u);
    for (std::size_t i = 0; i < 3000; ++i) {
        EXPECT_EQ(got[0][i].tag, i);
        EXPECT_EQ(got[0][i].t, got[1][i].t) << "frame " << i;
    }
    EXPECT_EQ(counters[0], counters[1]);
    EXPECT_EQ(queued[0], queued[1]);
    EXPECT_GT(queued[0], 300u);   // bursts did wait
    EXPECT_LT(queued[0], 2700u);  // and most frames did not
    EXPECT_EQ(events[1], 2 * 3000u);
    EXPECT_EQ(events[0], 3000u + queued[0]);
}

// Sends a frame at 0 and one from a timer armed before it for the
// nanosecond the first one's last bit leaves: the timer's event runs before
// that frame's TxDone.
class TieSender : public Node {
public:
    explicit TieSender(Simulator& sim, bool hears) : sim_(sim), id_(sim.add_node(*this)), hears_(hears) {}
    NodeId id() const { return id_; }
    void start() {
        sim_.arm_timer(id_, Nanos{8000});
        sim_.transmit(id_, 0, test::make_frame(sim_, test::tagged_frame(0, 1000)));  // 0 .. 8000 ns
    }
    void on_frame(PortId, FrameHandle h, Nanos) override { sim_.pool().free(h); }
    void on_timer(Nanos) override { sent_at_tie = sim_.transmit(id_, 0, test::make_frame(sim_, test::tagged_frame(1, 1000))); }
    void on_tx_ready(PortId port, Nanos now) override { ready.emplace_back(now, sim_.tx_idle(id_, port)); }
    bool hears_tx_ready() const override { return hears_; }

    Link::Send sent_at_tie = Link::Send::Dropped;
    std::vector<std::pair<Nanos, bool>> ready;  // when on_tx_ready came, and whether the link was idle

private:
    Simulator& sim_;
    NodeId id_;
    bool hears_;
};

// A frame sent in the nanosecond the wire frees, before that frame's TxDone
// has run, waits for it: on_tx_ready then comes once, when the second frame
// has left and the link is idle, never while it serialises. Without
// tx_ready there is no TxDone to wait for and the frame starts at once.
TEST(SimLink, AFrameSentAsTheWireFreesWaitsForItsTxDone) {
    for (const bool hears : {true, false}) {
        SCOPED_TRACE(hears ? "tx_ready" : "no tx_ready");
        Simulator sim(SimConfig{});
        TieSender src(sim, hears);
        Sink dst(sim);
        LinkConfig cfg = test::bare_link();
        cfg.speed = BitsPerSec::gbps(1);
        sim.add_link(src.id(), 0, dst.id(), 0, cfg);
        src.start();
        sim.run_until_idle();
        EXPECT_EQ(src.sent_at_tie, hears ? Link::Send::Queued : Link::Send::Started);
        ASSERT_EQ(dst.got().size(), 2u);
        EXPECT_EQ(dst.got()[1].t.v, 16000);
        if (hears) {
            ASSERT_EQ(src.ready.size(), 1u);
            EXPECT_EQ(src.ready[0].first.v, 16000);
            EXPECT_TRUE(src.ready[0].second);
        } else {
            EXPECT_TRUE(src.ready.empty());
        }
        // Timer and two Deliver, and with tx_ready the two TxDone.
        EXPECT_EQ(sim.counters().events, hears ? 5u : 3u);
        const auto kind = [&](EventKind k) { return sim.counters().events_by_kind[static_cast<std::size_t>(k)]; };
        EXPECT_EQ(kind(EventKind::Timer), 1u);
        EXPECT_EQ(kind(EventKind::Deliver), 2u);
        EXPECT_EQ(kind(EventKind::TxDone), hears ? 2u : 0u);
        EXPECT_EQ(kind(EventKind::PortTimer) + kind(EventKind::LinkState), 0u);
    }
}

// Without TxDone events the link still knows when its wire is busy: it is
// not idle until the frame's last bit has left, and a frame sent while the
// link is down and up again behind a TxDone still queued (its queue was
// dropped) waits for that TxDone, which is never doubled.
TEST(SimLink, WithoutTxReadyDownAndUpKeepTheWireAndOneTxDone) {
    LinkConfig cfg = test::bare_link();
    cfg.speed = BitsPerSec::gbps(1);
    Pair p(cfg, 10, [](uint64_t i) { return test::tagged_frame(i, 1000); }, false, 1, false);
    p.src.set_pull(false);
    p.src.start();  // 0 .. 8000 ns, no TxDone
    p.sim.run_until(Nanos{7999});
    EXPECT_FALSE(p.sim.tx_idle(p.src.id(), 0));
    p.sim.run_until(Nanos{8000});
    EXPECT_TRUE(p.sim.tx_idle(p.src.id(), 0));
    EXPECT_EQ(p.sim.counters().events, 1u);  // its Deliver

    p.src.burst();  // 8000 .. 80000: one serialising, eight queued, one TxDone
    EXPECT_EQ(p.sim.link(p.link).queued_frames(), 8u);
    p.sim.schedule_link_state(p.link, Nanos{12000}, false);
    p.sim.schedule_link_state(p.link, Nanos{13000}, true);
    p.sim.run_until(Nanos{13000});
    EXPECT_EQ(p.sim.link(p.link).queued_frames(), 0u);
    // The wire is still busy with frame 1 (lost) until 16000; the TxDone
    // queued for it is still due then.
    EXPECT_FALSE(p.sim.tx_idle(p.src.id(), 0));
    const auto frame = [&](uint64_t tag) { return test::make_frame(p.sim, test::tagged_frame(tag, 1000)); };
    EXPECT_EQ(p.sim.transmit(p.src.id(), 0, frame(100)), Link::Send::Queued);
    EXPECT_EQ(p.sim.transmit(p.src.id(), 0, frame(101)), Link::Send::Queued);
    p.sim.run_until_idle();
    ASSERT_EQ(p.dst.got().size(), 3u);
    EXPECT_EQ(p.dst.got()[0].t.v, 8000);
    EXPECT_EQ(p.dst.got()[1].tag, 100u);
    EXPECT_EQ(p.dst.got()[1].t.v, 24000);
    EXPECT_EQ(p.dst.got()[2].tag, 101u);
    EXPECT_EQ(p.dst.got()[2].t.v, 32000);
    // Events: 3 Deliver, 2 LinkState, the Deliver of the lost frame 1, and
    // the TxDones at 16000 (starts 100) and 24000 (starts 101); a doubled
    // TxDone would start 101 early or show as one more event.
    EXPECT_EQ(p.sim.counters().events, 3u + 2u + 1u + 2u);
    EXPECT_EQ(p.src.tx_ready_calls(), 0u);
    EXPECT_EQ(p.sim.pool().in_use(), 0u);
}

TEST(SimLink, TapsRecordEntryAndArrivalWithVirtualTimes) {
    const auto dir = std::filesystem::temp_directory_path() / ("rocemu_sim_tap_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    LinkConfig cfg = test::bare_link();
    cfg.speed = BitsPerSec::gbps(40);
    cfg.propagation_delay = Nanos{300};
    cfg.loss_rate = 0.2;
    uint64_t delivered = 0, sent = 0;
    {
        pcap::Writer tx((dir / "tx.pcap").string()), rx((dir / "rx.pcap").string());
        ASSERT_TRUE(tx.ok() && rx.ok());
        Pair p(cfg, 200, [](uint64_t i) { return test::roce_frame(static_cast<uint32_t>(i), 0xC000, 1000); }, true);
        p.sim.set_taps(p.link, &tx, &rx);
        p.src.start();
        p.sim.run_until_idle();
        sent = p.counters().tx_frames;
        delivered = p.counters().delivered_frames;
        ASSERT_LT(delivered, sent);
        ASSERT_EQ(delivered, p.dst.got().size());
        tx.flush();
        rx.flush();

        pcap::Reader rtx((dir / "tx.pcap").string()), rrx((dir / "rx.pcap").string());
        ASSERT_TRUE(rtx.ok() && rrx.ok());
        pcap::Frame f;
        uint64_t n = 0;
        const uint32_t len = static_cast<uint32_t>(test::roce_frame(0, 0xC000, 1000).size());
        while (rtx.next(f)) {
            EXPECT_EQ(f.data, test::roce_frame(static_cast<uint32_t>(n), 0xC000, 1000));
            // Stamped when serialisation starts: the exact end of the previous frame.
            EXPECT_EQ(f.ts.v, static_cast<int64_t>(static_cast<unsigned __int128>(n) * len * 8 * 1000000000u / cfg.speed.v));
            ++n;
        }
        EXPECT_EQ(n, sent);
        n = 0;
        while (rrx.next(f)) {
            ASSERT_LT(n, p.dst.got().size());
            EXPECT_EQ(f.ts, p.dst.got()[n].t);
            EXPECT_EQ(f.data, p.dst.got()[n].bytes);
            ++n;
        }
        EXPECT_EQ(n, delivered);
    }
    std::filesystem::remove_all(dir);
}

// The virtual-time link and the live switch's link are one model: with the
// same config and seed, every frame meets the same fate at the same times.
TEST(SimLink, SameFaultScenarioAsTheLiveLinkModel) {
    LinkConfig cfg;  // with the switch's preamble and IFG
    cfg.speed = BitsPerSec::gbps(25);
    cfg.propagation_delay = Nanos{1000};
    cfg.loss_rate = 0.05;
    cfg.corrupt_rate = 0.03;
    cfg.corrupt_as = Corruption::BadFcs;
    cfg.reorder_rate = 0.1;
    cfg.reorder_delay = Nanos{3000};
    cfg.jitter = Nanos{500};
    cfg.duplicate_rate = 0.02;
    cfg.up_down = {{Nanos{200000}, false}, {Nanos{260000}, true}};
    constexpr uint64_t kSeed = 42;
    constexpr uint64_t kCount = 2000;
    constexpr uint32_t kLen = 1000;

    FramePool pool(1u << 12);
    EventQueue q;
    Link vlink(0, LinkEnd{0, 0}, LinkEnd{1, 0}, cfg, kSeed);
    for (uint64_t i = 0; i < kCount; ++i) {
        const FrameHandle h = pool.alloc();
        ASSERT_TRUE(h.valid());
        const auto bytes = test::tagged_frame(i, kLen);
        std::copy(bytes.begin(), bytes.end(), pool.buffer(h).begin());
        pool.set_len(h, kLen);
        vlink.send(h, Nanos{0}, q, pool);
    }
    std::vector<std::pair<uint64_t, Nanos>> virtual_arrivals;
    while (!q.empty()) {
        const Event e = q.pop();
        if (e.kind == EventKind::TxDone) {
            vlink.on_tx_done(e.time, q, pool);
        } else if (const FrameHandle h = vlink.on_deliver(e.arg, e.time, pool); h.valid()) {
            virtual_arrivals.emplace_back(test::tag_of(pool.frame(h)), e.time);
            pool.free(h);
        }
    }

    link::Model live(cfg);
    Rng rng(kSeed);
    std::vector<std::pair<uint64_t, Nanos>> live_arrivals;
    Nanos now{0};
    for (uint64_t i = 0; i < kCount; ++i) {
        const link::Delivery d = live.transmit(Bytes{kLen}, now, rng);
        now = d.tx_end;
        if (d.fate != link::Fate::Delivered || d.corruption == Corruption::BadFcs) continue;
        live_arrivals.emplace_back(i, d.arrival);
        if (d.duplicate) live_arrivals.emplace_back(i, d.arrival);
    }
    std::sort(virtual_arrivals.begin(), virtual_arrivals.end());
    std::sort(live_arrivals.begin(), live_arrivals.end());
    EXPECT_EQ(virtual_arrivals, live_arrivals);

    const link::Counters& lc = live.counters();
    const LinkCounters& vc = vlink.counters();
    EXPECT_GT(lc.lost_down, 0u);
    EXPECT_GT(lc.reordered, 0u);
    EXPECT_GT(lc.duplicated, 0u);
    EXPECT_EQ(vc.dropped(LinkDrop::LinkDown), lc.lost_down);
    EXPECT_EQ(vc.dropped(LinkDrop::Loss), lc.lost_random);
    EXPECT_EQ(vc.dropped(LinkDrop::BadFcs), lc.corrupted);
    EXPECT_EQ(vc.duplicated, lc.duplicated);
    EXPECT_EQ(pool.in_use(), 0u);
}

// The switch's YAML parser is the one link parser: what it reads runs in
// virtual time as it would on a live port.
TEST(SimLink, ParsedYamlConfigDrivesTheVirtualLink) {
    const sw::LinkConfigResult r = sw::parse_link_config(
        "speed: 10000\npropagation_delay_ns: 2000\ndown_up: [{at_ns: 50000, up: false}, {at_ns: 100000, up: true}]\n");
    ASSERT_TRUE(r.config) << r.error;
    // 1000 + 20 bytes at 10 Gb/s: 816 ns a frame. Frame 62 would start at
    // 50592 ns, inside the down window: it and every frame offered after it
    // take no wire and are lost at once.
    Pair p(*r.config, 200, [](uint64_t i) { return test::tagged_frame(i, 1000); });
    p.src.start();
    p.sim.run_until_idle();
    const auto& got = p.dst.got();
    ASSERT_EQ(got.size(), 62u);
    for (uint64_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].tag, i);
        EXPECT_EQ(got[i].t.v, static_cast<int64_t>(i + 1) * 816 + 2000);
    }
    EXPECT_EQ(p.counters().dropped(LinkDrop::LinkDown), 138u);
}

TEST(SimLink, ValidateNamesKeyValueAndRange) {
    LinkConfig ok;
    EXPECT_EQ(validate(ok), "");
    LinkConfig bad = ok;
    bad.loss_rate = 1.5;
    EXPECT_EQ(validate(bad), "LINK.loss_rate: 1.5 out of range [0, 1]");
    bad = ok;
    bad.speed = BitsPerSec{0};
    EXPECT_NE(validate(bad).find("LINK.speed: 0 Mb/s"), std::string::npos);
    bad = ok;
    bad.paths.push_back(Nanos{10});
    bad.paths.push_back(Nanos{-1});
    EXPECT_EQ(validate(bad), "LINK.paths_ns[1]: -1 out of range [0, 1000000000]");
    bad = ok;
    bad.jitter = Nanos{-5};
    EXPECT_NE(validate(bad).find("LINK.jitter_ns"), std::string::npos);
    bad = ok;
    bad.duplicate_rate = std::nan("");
    EXPECT_NE(validate(bad).find("LINK.duplicate_rate"), std::string::npos);

    Simulator sim(SimConfig{});
    Sink a(sim), b(sim);
    bad = ok;
    bad.corrupt_rate = -0.1;
    EXPECT_THROW(sim.add_link(a.id(), 0, b.id(), 0, bad), std::invalid_argument);
    EXPECT_THROW(sim.add_link(a.id(), 0, 7, 0, ok), std::invalid_argument);
    sim.add_link(a.id(), 0, b.id(), 0, ok);
    EXPECT_THROW(sim.add_link(a.id(), 0, b.id(), 1, ok), std::invalid_argument);
    EXPECT_EQ(sim.link_count(), 1u);
}

}  // namespace
}  // namespace rocemu::sim
