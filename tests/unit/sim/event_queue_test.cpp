#include "sim/event_queue.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "common/rng.hpp"

namespace rocemu::sim {
namespace {

TEST(SimEventQueue, PopsInTimeOrder) {
    EventQueue q;
    for (int64_t t : {50, 10, 40, 20, 30}) q.push(Nanos{t}, EventKind::Timer, static_cast<uint32_t>(t), 0);
    std::vector<int64_t> order;
    while (!q.empty()) order.push_back(q.pop().time.v);
    EXPECT_EQ(order, (std::vector<int64_t>{10, 20, 30, 40, 50}));
}

// Wheel events are stored packed (the kind in seq's top byte): every field
// of every kind must come back as pushed, from the wheel and from the heap.
TEST(SimEventQueue, EveryFieldSurvivesBothTiers) {
    EventQueue q;
    const EventKind kinds[] = {EventKind::Timer, EventKind::TxDone, EventKind::Deliver, EventKind::LinkState,
                               EventKind::PortTimer};
    std::vector<Event> pushed;
    for (uint32_t i = 0; i < 400; ++i) {
        // Near (the wheel) and far (the heap) times, the largest targets and args.
        const Nanos t{static_cast<int64_t>(i % 2 == 0 ? i : EventQueue::kWheelSpanNs * 3 + i)};
        const uint64_t arg = i % 3 == 0 ? ~uint64_t{0} - i : uint64_t{i} << 32 | (UINT32_MAX - i);
        const EventKind kind = kinds[i % std::size(kinds)];
        q.push(t, kind, UINT32_MAX - i, arg);
        pushed.push_back(Event{t, i, arg, UINT32_MAX - i, kind});
    }
    std::sort(pushed.begin(), pushed.end(), [](const Event& a, const Event& b) {
        return a.time < b.time || (a.time == b.time && a.seq < b.seq);
    });
    for (const Event& want : pushed) {
        ASSERT_FALSE(q.empty());
        const Event top = q.top();
        const Event got = q.pop();
        for (const Event& e : {top, got}) {
            ASSERT_EQ(e.time, want.time);
            ASSERT_EQ(e.seq, want.seq);
            ASSERT_EQ(e.arg, want.arg);
            ASSERT_EQ(e.target, want.target);
            ASSERT_EQ(e.kind, want.kind);
        }
    }
    EXPECT_TRUE(q.empty());
}

// push_first() events run before every push()ed event of their nanosecond,
// in their own push order, from the wheel and from the far heap alike.
TEST(SimEventQueue, PushFirstRunsBeforeTheOthersOfItsNanosecond) {
    for (const int64_t t : {int64_t{5}, EventQueue::kWheelSpanNs * 4 + 5}) {
        EventQueue q;
        q.push(Nanos{t}, EventKind::Deliver, 1, 0);
        q.push_first(Nanos{t}, EventKind::PortTimer, 2, 0);
        q.push(Nanos{t - 1}, EventKind::Deliver, 3, 0);
        q.push(Nanos{t}, EventKind::Deliver, 4, 0);
        q.push_first(Nanos{t}, EventKind::PortTimer, 5, 0);
        q.push_first(Nanos{t + 1}, EventKind::PortTimer, 6, 0);
        std::vector<uint32_t> order;
        while (!q.empty()) {
            const Event top = q.top();
            const Event e = q.pop();
            EXPECT_EQ(top.target, e.target);
            EXPECT_EQ(e.time, Nanos{e.target == 3 ? t - 1 : e.target == 6 ? t + 1 : t});
            order.push_back(e.target);
        }
        EXPECT_EQ(order, (std::vector<uint32_t>{3, 2, 5, 1, 4, 6})) << "t " << t;
    }
    // Pushed first at the time of the event being run (itself pushed first).
    EventQueue q;
    q.push_first(Nanos{9}, EventKind::PortTimer, 1, 0);
    q.push(Nanos{9}, EventKind::Deliver, 2, 0);
    EXPECT_EQ(q.pop().target, 1u);
    q.push_first(Nanos{9}, EventKind::PortTimer, 3, 0);
    EXPECT_EQ(q.pop().target, 3u);
    EXPECT_EQ(q.pop().target, 2u);
}

// A random mix of both pushes, near and far, interleaved with pops, against
// the order the queue promises: (time, pushed first before not, seq).
TEST(SimEventQueue, MixedPushesMatchTheirOrder) {
    Rng rng(5);
    EventQueue q;
    struct Want {
        int64_t time;
        bool first;
        uint64_t seq;
        bool operator<(const Want& o) const {
            return time != o.time ? time < o.time : first != o.first ? first : seq < o.seq;
        }
    };
    std::set<Want> want;
    int64_t now = 0;
    uint64_t seq = 0;
    for (int step = 0; step < 200000; ++step) {
        if (want.empty() || rng.below(2) == 0) {
            static constexpr uint64_t kSpans[] = {1, 3, 30, EventQueue::kWheelSpanNs * 2};
            const int64_t t = now + 1 + static_cast<int64_t>(rng.below(kSpans[rng.below(4)]));
            const bool first = rng.below(3) == 0;
            if (first)
                q.push_first(Nanos{t}, EventKind::PortTimer, 0, seq);
            else
                q.push(Nanos{t}, EventKind::Deliver, 0, seq);
            want.insert(Want{t, first, seq++});
        } else {
            const Event e = q.pop();
            const Want w = *want.begin();
            want.erase(want.begin());
            ASSERT_EQ(e.time.v, w.time) << "step " << step;
            ASSERT_EQ(e.arg, w.seq) << "step " << step;
            ASSERT_EQ(e.kind, w.first ? EventKind::PortTimer : EventKind::Deliver);
            now = e.time.v;
        }
    }
}

TEST(SimEventQueue, EqualTimesAreFifo) {
    EventQueue q;
    // Interleave two times so the heap has to move equal keys around.
    for (uint32_t i = 0; i < 1000; ++i) q.push(Nanos{i % 2 == 0 ? 7 : 3}, EventKind::Deliver, i, 0);
    std::vector<uint32_t> threes, sevens;
    while (!q.empty()) {
        const Event e = q.pop();
        (e.time.v == 3 ? threes : sevens).push_back(e.target);
        if (e.time.v == 3) {
            EXPECT_TRUE(sevens.empty()) << "a later time ran before an earlier one";
        }
    }
    ASSERT_EQ(threes.size(), 500u);
    ASSERT_EQ(sevens.size(), 500u);
    EXPECT_TRUE(std::is_sorted(threes.begin(), threes.end()));
    EXPECT_TRUE(std::is_sorted(sevens.begin(), sevens.end()));
}

TEST(SimEventQueue, MatchesStableSortOnRandomTimes) {
    Rng rng(11);
    EventQueue q;
    std::vector<std::pair<int64_t, uint32_t>> ref;
    for (uint32_t i = 0; i < 100000; ++i) {
        const auto t = static_cast<int64_t>(rng.below(500));  // many ties
        q.push(Nanos{t}, EventKind::Timer, i, i);
        ref.emplace_back(t, i);
    }
    std::stable_sort(ref.begin(), ref.end(), [](auto& a, auto& b) { return a.first < b.first; });
    for (const auto& [t, id] : ref) {
        ASSERT_FALSE(q.empty());
        const Event e = q.pop();
        ASSERT_EQ(e.time.v, t);
        ASSERT_EQ(e.target, id);
        ASSERT_EQ(e.arg, id);
    }
    EXPECT_TRUE(q.empty());
}

// The way a simulation uses it: pop the earliest, push a few in its future.
TEST(SimEventQueue, InterleavedPushPopMatchesOrderedSetAndStopsGrowing) {
    Rng rng(5);
    EventQueue q;
    std::set<std::tuple<int64_t, uint64_t, uint32_t>> ref;
    uint32_t next_id = 0;
    for (int i = 0; i < 1000; ++i) {
        const auto t = static_cast<int64_t>(rng.below(100));
        ref.emplace(t, q.pushed(), next_id);
        q.push(Nanos{t}, EventKind::Timer, next_id++, 0);
    }
    std::size_t cap_after_warmup = 0;
    for (int step = 0; step < 200000; ++step) {
        const Event e = q.pop();
        const auto expect = *ref.begin();
        ref.erase(ref.begin());
        ASSERT_EQ(e.time.v, std::get<0>(expect));
        ASSERT_EQ(e.seq, std::get<1>(expect));
        ASSERT_EQ(e.target, std::get<2>(expect));
        // One pop, one push: the backlog stays at 1000. Delays within the
        // wheel window, just past it, and far beyond it.
        static constexpr uint64_t kSpans[] = {100, EventQueue::kWheelSpanNs + 50, 10000000};
        const int64_t t = e.time.v + static_cast<int64_t>(rng.below(kSpans[rng.below(3)]));
        ref.emplace(t, q.pushed(), next_id);
        q.push(Nanos{t}, EventKind::Timer, next_id++, 0);
        if (step == 100000) cap_after_warmup = q.capacity();
    }
    EXPECT_EQ(q.size(), 1000u);
    // Storage follows the backlog (each tier at most doubles past its own
    // peak), not the 200k events that went through it.
    EXPECT_LE(q.capacity(), 4000u);
    EXPECT_EQ(q.capacity(), cap_after_warmup);
}

// pop_due's look-ahead is a prefetch hint: the events it names must be the
// ones popped next and after that, whatever the mix of near and far times.
TEST(SimEventQueue, PopDueNamesTheEventsPoppedNext) {
    Rng rng(11);
    EventQueue q;
    for (uint32_t i = 0; i < 640; ++i) q.push(Nanos{static_cast<int64_t>(rng.below(300))}, EventKind::Timer, i, 0);
    uint32_t next_id = 640;
    uint64_t named[3] = {};
    EventQueue::Ahead ahead;
    Event e;
    for (int step = 0; step < 100000; ++step) {
        ASSERT_TRUE(q.pop_due(Nanos::max(), e, ahead));
        ++named[ahead.n];
        Event last = e;
        // Copied: the hint's pointers are void after the next pop.
        const uint8_t told_n = ahead.n;
        Event told[2];
        for (uint8_t i = 0; i < told_n; ++i) told[i] = ahead.ev[i]->event();
        for (uint8_t i = 0; i < told_n; ++i) {
            ASSERT_TRUE(q.pop_due(Nanos::max(), last, ahead)) << "step " << step;
            ASSERT_EQ(last.seq, told[i].seq) << "step " << step;
            ASSERT_EQ(last.time, told[i].time);
            ASSERT_EQ(last.target, told[i].target);
            ASSERT_EQ(last.kind, told[i].kind);
        }
        // Events due now (into the slot being popped), dense near ones, now
        // and then one far beyond the wheel or just behind the slot base
        // wraps round to; as many pushed as popped.
        static constexpr uint64_t kSpans[] = {1, 1, 4, 4, 40, 40, EventQueue::kWheelSpanNs - 1,
                                              3 * EventQueue::kWheelSpanNs};
        for (uint8_t i = 0; i <= told_n; ++i)
            q.push(last.time + Nanos{static_cast<int64_t>(rng.below(kSpans[rng.below(8)]))}, EventKind::Timer,
                   next_id++, 0);
        ASSERT_EQ(q.size(), 640u);
    }
    // A hint that never names anything, or never two, would pass the loop above.
    EXPECT_GT(named[1], 10000u) << named[0] << " " << named[2];
    EXPECT_GT(named[2], 5000u) << named[0] << " " << named[1];
}

// An event due after the limit stays queued, as does everything behind it.
TEST(SimEventQueue, PopDueLeavesEventsPastTheLimit) {
    EventQueue q;
    q.push(Nanos{10}, EventKind::Timer, 1, 0);
    q.push(Nanos{3 * EventQueue::kWheelSpanNs}, EventKind::Deliver, 2, 7);
    Event e;
    EventQueue::Ahead ahead;
    EXPECT_FALSE(q.pop_due(Nanos{9}, e, ahead));
    ASSERT_TRUE(q.pop_due(Nanos{10}, e, ahead));
    EXPECT_EQ(e.target, 1u);
    EXPECT_EQ(ahead.n, 0u);  // the far event is beyond the wheel: no hint
    EXPECT_FALSE(q.pop_due(Nanos{3 * EventQueue::kWheelSpanNs - 1}, e, ahead));
    EXPECT_EQ(q.size(), 1u);
    ASSERT_TRUE(q.pop_due(Nanos{3 * EventQueue::kWheelSpanNs}, e, ahead));
    EXPECT_EQ(e.target, 2u);
    EXPECT_EQ(e.kind, EventKind::Deliver);
    EXPECT_EQ(e.arg, 7u);
    EXPECT_TRUE(q.empty());
    EXPECT_FALSE(q.pop_due(Nanos::max(), e, ahead));
}

// An event queued far ahead is overtaken in push order by one pushed later
// for the same time once the window has reached it: FIFO must still hold.
TEST(SimEventQueue, FarEventsKeepFifoWithLaterDirectPushes) {
    EventQueue q;
    const Nanos far{5 * EventQueue::kWheelSpanNs + 17};
    q.push(far, EventKind::Timer, 1, 0);
    q.push(Nanos{0}, EventKind::Timer, 100, 0);
    // Walk time forward the way a simulation does, one hop at a time.
    for (int64_t t = 0; t < far.v - 10; t += 1000) {
        const Event e = q.pop();
        ASSERT_EQ(e.target, 100u);
        q.push(Nanos{std::min<int64_t>(t + 1000, far.v - 10)}, EventKind::Timer, 100, 0);
    }
    q.push(far, EventKind::Timer, 2, 0);
    q.push(far, EventKind::Timer, 3, 0);
    std::vector<uint32_t> at_far;
    while (!q.empty()) {
        const Event e = q.pop();
        if (e.time == far) at_far.push_back(e.target);
    }
    EXPECT_EQ(at_far, (std::vector<uint32_t>{1, 2, 3}));
}

TEST(SimEventQueue, WrapsRoundTheWheelManyTimes) {
    EventQueue q;
    Rng rng(9);
    int64_t now = 0;
    q.push(Nanos{0}, EventKind::Timer, 0, 0);
    uint64_t popped = 0;
    // One event chain hopping by up to 1.5 windows: it crosses slot 0 of
    // the wheel thousands of times and goes through the far heap.
    while (popped < 50000) {
        const Event e = q.pop();
        ASSERT_GE(e.time.v, now);
        ASSERT_EQ(e.arg, popped);
        now = e.time.v;
        ++popped;
        q.push(Nanos{now + 1 + static_cast<int64_t>(rng.below(EventQueue::kWheelSpanNs * 3 / 2))}, EventKind::Timer, 0,
               popped);
        ASSERT_EQ(q.size(), 1u);
    }
    EXPECT_GT(now, static_cast<int64_t>(EventQueue::kWheelSpanNs) * 1000);
}

}  // namespace
}  // namespace rocemu::sim
