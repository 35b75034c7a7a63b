// QpSched: the min tree the engine's scans read (dataplane/transport/sched.hpp),
// against a plain array of the same times.
#include <gtest/gtest.h>

#include <vector>

#include "common/rng.hpp"
#include "dataplane/transport/sched.hpp"

namespace rocemu::transport {
namespace {

// Random times per slot and key (a third never due), marked and flushed in
// random batches while the slot count grows: after every flush, min() is the
// array's minimum and for_due() visits exactly the due slots of its range,
// in slot order.
TEST(TransportSched, MatchesAScanOfEverySlot) {
    Rng rng(11);
    QpSched s;
    std::vector<QpSched::Times> ref;
    auto draw = [&] {
        QpSched::Times t;
        for (Nanos& v : t) {
            const uint64_t r = rng.below(3);
            v = r == 0 ? Nanos::max() : r == 1 ? QpSched::kAlways : Nanos{static_cast<int64_t>(rng.below(1000))};
        }
        return t;
    };
    for (int round = 0; round < 300; ++round) {
        if (round % 20 == 0) {  // more slots, never due until marked
            const size_t n = ref.size() + 1 + rng.below(40);
            s.resize(static_cast<uint32_t>(n));
            ref.resize(n, QpSched::kNever);
        }
        for (uint64_t m = rng.below(8); m > 0; --m) {
            const auto slot = static_cast<uint32_t>(rng.below(ref.size()));
            ref[slot] = draw();
            s.mark(slot);
            s.mark(slot);  // twice is once
        }
        s.flush([&](uint32_t slot) { return ref[slot]; });
        for (int k = 0; k < QpSched::kKeys; ++k) {
            const auto key = static_cast<QpSched::Key>(k);
            Nanos min = Nanos::max();
            for (const QpSched::Times& t : ref) min = std::min(min, t[k]);
            ASSERT_EQ(s.min(key), min) << "round " << round << " key " << k;
            const Nanos now{static_cast<int64_t>(rng.below(1100))};
            const auto lo = static_cast<uint32_t>(rng.below(ref.size()));
            const auto hi = static_cast<uint32_t>(lo + rng.below(ref.size() - lo + 1));
            std::vector<uint32_t> want, got;
            for (uint32_t i = lo; i < hi; ++i)
                if (ref[i][k] <= now) want.push_back(i);
            EXPECT_TRUE(s.for_due(key, now, lo, hi, [&](uint32_t slot) {
                got.push_back(slot);
                return true;
            }));
            ASSERT_EQ(got, want) << "round " << round << " key " << k;
        }
    }
}

// for_due stops at the first slot whose call returns false, and says so.
TEST(TransportSched, ForDueStopsWhenAsked) {
    QpSched s;
    s.resize(10);
    for (uint32_t i = 0; i < 10; ++i) s.mark(i);
    s.flush([](uint32_t slot) {
        QpSched::Times t = QpSched::kNever;
        t[QpSched::Send] = Nanos{slot % 2 == 0 ? 5 : 50};
        return t;
    });
    EXPECT_EQ(s.min(QpSched::Send), Nanos{5});
    EXPECT_EQ(s.min(QpSched::Timer), Nanos::max());
    std::vector<uint32_t> got;
    EXPECT_FALSE(s.for_due(QpSched::Send, Nanos{10}, 3, 10, [&](uint32_t slot) {
        got.push_back(slot);
        return slot < 6;
    }));
    EXPECT_EQ(got, (std::vector<uint32_t>{4, 6}));
    EXPECT_TRUE(s.for_due(QpSched::Send, Nanos{4}, 0, 10, [](uint32_t) { return false; }));
}

}  // namespace
}  // namespace rocemu::transport
