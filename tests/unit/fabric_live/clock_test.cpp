// The live fabric's clock, driven by real times given as values: a
// process's scheduling gaps are stepped over, and processes sharing the
// clock (split fabric on one machine) stay within a step of each other,
// whoever stops, leaves or dies. No EAL needed.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "fabric/live/fabric_clock.hpp"
#include "fabric/live/shared_clock.hpp"

namespace rocemu::fabric::live {
namespace {

constexpr Nanos kStep = Nanos::from_us(100);
constexpr Nanos kTurn = Nanos::from_us(10);
constexpr Nanos kLead = kStep * FabricClock::kLeadSteps;  // how far a member may run ahead of the slowest

class SharedClockTest : public ::testing::Test {
protected:
    void SetUp() override {
        char tmpl[] = "/tmp/rocemu_clock_test.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::string path() const { return dir_ + "/fabric.clock"; }
    std::unique_ptr<SharedClock> open(uint32_t self, uint32_t nodes = 3) {
        std::string error;
        std::unique_ptr<SharedClock> c = SharedClock::open(path(), nodes, self, error);
        EXPECT_TRUE(c) << error;
        return c;
    }
    std::string dir_;
};

TEST(FabricClock, AGapAdvancesItOneStepAndIsCounted) {
    FabricClock c(kStep, Nanos{});
    EXPECT_EQ(c.advance(Nanos::from_us(50)), Nanos::from_us(50));
    EXPECT_EQ(c.advance(Nanos::from_us(1050)), Nanos::from_us(150));  // a 1 ms gap
    EXPECT_EQ(c.held_back_turns(), 1u);
    EXPECT_EQ(c.held_back(), Nanos::from_us(900));
    EXPECT_EQ(c.advance(Nanos::from_us(1060)), Nanos::from_us(160));
    EXPECT_EQ(c.waited(), Nanos{});
}

TEST_F(SharedClockTest, ProcessesStayWithinAStepOfTheOneThatStopped) {
    auto sa = open(0), sb = open(1);
    FabricClock a(kStep, Nanos{}), b(kStep, Nanos{});
    a.share(sa.get());
    b.share(sb.get());
    // b is not scheduled for 10 ms: a stops a lead past it.
    Nanos real{};
    for (int i = 0; i < 1000; ++i) {
        real += kTurn;
        a.advance(real);
    }
    EXPECT_EQ(a.now(), kLead);
    EXPECT_EQ(a.waited(), real - kLead);
    // Both scheduled again, turning in turn: they move on together.
    const Nanos from = a.now();
    for (int i = 0; i < 500; ++i) {
        real += kTurn;
        b.advance(real);
        a.advance(real);
        ASSERT_LE(a.now() - b.now(), kLead) << "turn " << i;
        ASSERT_LE(b.now() - a.now(), kLead) << "turn " << i;
    }
    // b's first turn after its gap moved it one step; since then each turn
    // moved both by the real time that passed.
    EXPECT_EQ(b.held_back_turns(), 1u);
    EXPECT_GE(a.now() - from, Nanos::from_us(4900));
    EXPECT_GE(b.now(), Nanos::from_us(4900));
}

TEST_F(SharedClockTest, AloneItRunsFreeAndAJoinerStartsAtTheOthersTime) {
    auto sa = open(0), sc = open(2);
    FabricClock a(kStep, Nanos{});
    a.share(sa.get());
    for (int i = 1; i <= 300; ++i) a.advance(kTurn * i);
    EXPECT_EQ(a.now(), Nanos::from_us(3000));
    EXPECT_EQ(a.waited(), Nanos{});
    // A node that starts later, with a clock of its own at 40 us.
    FabricClock c(kStep, Nanos{});
    c.advance(Nanos::from_us(40));
    c.share(sc.get());
    EXPECT_EQ(c.now(), Nanos::from_us(3000));
    // From here a waits for c: c does not turn, a stops a lead past it.
    for (int i = 301; i <= 600; ++i) a.advance(kTurn * i);
    EXPECT_EQ(a.now(), Nanos::from_us(3000) + kLead);
}

// Why a node shares its clock whenever it turns it (the hosts node while it
// waits for the switch nodes, too): one that turned on its own past the
// others cannot go back when it joins them, so it stands still until they
// catch up, and what it measures meanwhile takes no time.
TEST_F(SharedClockTest, AClockThatRanAheadAloneStandsStillOnJoiningUntilTheOthersCatchUp) {
    auto sa = open(0), sh = open(1);
    FabricClock a(kStep, Nanos{}), h(kStep, Nanos{});
    a.share(sa.get());
    for (int i = 1; i <= 300; ++i) h.advance(kTurn * i);  // on its own: 3 ms
    for (int i = 1; i <= 100; ++i) a.advance(kTurn * i);  // 1 ms
    {
        const ClockSharing sharing(h, sh.get());
        EXPECT_EQ(h.now(), Nanos::from_us(3000));
        for (int i = 301; i <= 400; ++i) h.advance(kTurn * i);
        EXPECT_EQ(h.now(), Nanos::from_us(3000));  // a is more than a lead behind
        EXPECT_EQ(sa->others_min(), Nanos::from_us(3000));
    }
    EXPECT_EQ(sa->others_min(), Nanos::max());  // the guard left
}

TEST_F(SharedClockTest, ANodeThatLeftHoldsNobody) {
    auto sa = open(0), sb = open(1);
    FabricClock a(kStep, Nanos{}), b(kStep, Nanos{});
    a.share(sa.get());
    b.share(sb.get());
    b.share(nullptr);  // as a node does when it stops, or between sizes
    for (int i = 1; i <= 1000; ++i) a.advance(kTurn * i);
    EXPECT_EQ(a.now(), Nanos::from_ms(10));
    EXPECT_EQ(a.waited(), Nanos{});
}

// A process that joined and died without leaving (kill -9).
pid_t join_and_die(const std::string& path, uint32_t slot) {
    const pid_t pid = fork();
    if (pid == 0) {
        std::string error;
        std::unique_ptr<SharedClock> s = SharedClock::open(path, 3, slot, error);
        if (!s) _exit(1);
        s->join(Nanos{});
        _exit(0);  // no destructor: the slot stays taken
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return pid;
}

TEST_F(SharedClockTest, ANodeThatDiedIsDroppedOnceWaitedForLongEnough) {
    auto sa = open(0);
    FabricClock a(kStep, Nanos{});
    a.share(sa.get());
    join_and_die(path(), 1);
    Nanos real{};
    while (real < FabricClock::kLookForGoneAfter) {
        real += kTurn;
        a.advance(real);
    }
    EXPECT_EQ(a.now(), kLead);  // held by the dead one until now
    for (int i = 0; i < 100; ++i) {
        real += kTurn;
        a.advance(real);
    }
    EXPECT_GT(a.now(), kLead + Nanos::from_us(900));
}

TEST_F(SharedClockTest, AnEarlierRunsSlotsHoldNobody) {
    join_and_die(path(), 1);  // the file as a killed run left it
    auto sa = open(0);
    FabricClock a(kStep, Nanos{});
    a.share(sa.get());
    for (int i = 1; i <= 100; ++i) a.advance(kTurn * i);
    EXPECT_EQ(a.now(), Nanos::from_ms(1));
    EXPECT_EQ(sa->others_min(), Nanos::max());
}

TEST_F(SharedClockTest, AFileThatCannotBeMadeIsAnErrorNamingIt) {
    std::string error;
    EXPECT_EQ(SharedClock::open(dir_ + "/no/such/fabric.clock", 3, 0, error), nullptr);
    EXPECT_NE(error.find(dir_ + "/no/such/fabric.clock"), std::string::npos) << error;
    EXPECT_NE(error.find("No such file"), std::string::npos) << error;
    EXPECT_EQ(SharedClock::open(path(), 3, 3, error), nullptr);
    EXPECT_NE(error.find("slot 3 of 3"), std::string::npos) << error;
}

}  // namespace
}  // namespace rocemu::fabric::live
