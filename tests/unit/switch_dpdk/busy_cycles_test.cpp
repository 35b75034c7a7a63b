#include <gtest/gtest.h>

#include "switch/dpdk/stats.hpp"

namespace rocemu::sw::live {
namespace {

TEST(BusyCycles, LeavesOutPreemptedTurnsWithTheirFrames) {
    BusyCycles b;
    b.limit = 1000;
    b.turn(600, 32);
    b.turn(400, 8);
    b.turn(5000000, 32);  // the core was taken away in this turn
    EXPECT_EQ(b.cycles, 1000u);
    EXPECT_EQ(b.frames, 40u);
    EXPECT_EQ(b.preempted_turns, 1u);
    EXPECT_EQ(b.turns, 2u);
    EXPECT_DOUBLE_EQ(b.per_frame(), 25.0);
    EXPECT_EQ(b.line(2600000000),
              "CPU cycles/packet=25.00 (busy cycles=1000 / received packets=40 in 2 turns, 1 turns left out as "
              "preempted) at 2600 MHz");
}

TEST(BusyCycles, NoFramesIsZeroNotNan) {
    BusyCycles b;
    b.turn(100, 0);
    EXPECT_EQ(b.per_frame(), 0.0);
}

}  // namespace
}  // namespace rocemu::sw::live
