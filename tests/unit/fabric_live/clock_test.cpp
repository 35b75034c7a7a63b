// The live fabric's clock, driven by real times given as values: a
// process's scheduling gaps are stepped over, and processes sharing the
// clock (split fabric on one machine) stay within a step of each other,
// whoever stops, leaves or dies. No EAL needed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <random>
#include <vector>
#include <string>

#include "fabric/live/clock_relay.hpp"
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

// --clock fabric: two machines, each with its own clock file (link folder),
// whose hosts node and switch node exchange their machine's time over UDP
// on loopback. Real times are values as above; only the datagrams are real,
// so a wait for one is a bounded loop of turns, never a sleep.
constexpr uint64_t kFabric = 0xfab;
constexpr Nanos kEvery = kStep / 2;
constexpr int kTurnsBound = 200000;

// Turns `clocks`, in this order, at real times kTurn apart from `real` on:
// `n` times, or fewer once `until()` holds.
template <typename Until>
void turn(Nanos& real, std::initializer_list<FabricClock*> clocks, int n, Until until) {
    for (int i = 0; i < n && !until(); ++i) {
        real += kTurn;
        for (FabricClock* c : clocks) c->advance(real);
    }
}
void turn(Nanos& real, std::initializer_list<FabricClock*> clocks, int n) {
    turn(real, clocks, n, [] { return false; });
}

TEST(ClockDatagram, RoundTripsAndRefusesWhatIsNotOne) {
    const ClockDatagram d{ClockDatagram::kReply, 7, 0x01020304, 0x0102030405060708ull, 0xa1a2a3a4a5a6a7a8ull, -5};
    const auto b = encode(d);
    EXPECT_EQ(b[0], 'R');
    EXPECT_EQ(b[8], 7);  // little-endian
    EXPECT_EQ(b[12], 0x04);
    EXPECT_EQ(b[16], 0x08);
    const std::optional<ClockDatagram> back = decode_clock_datagram(b);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->kind, d.kind);
    EXPECT_EQ(back->tag, d.tag);
    EXPECT_EQ(back->seq, d.seq);
    EXPECT_EQ(back->fabric, d.fabric);
    EXPECT_EQ(back->domain, d.domain);
    EXPECT_EQ(back->time, d.time);
    EXPECT_FALSE(decode_clock_datagram(std::span<const uint8_t>(b.data(), b.size() - 1)));
    for (const size_t at : {size_t{0}, size_t{4}, size_t{5}}) {
        auto bad = b;
        bad[at] ^= 0x40;
        EXPECT_FALSE(decode_clock_datagram(bad)) << "byte " << at;
    }
    EXPECT_NE(clock_fabric_id("fabric a scale 75"), clock_fabric_id("fabric a scale 150"));
    // Whatever arrives: what decodes encodes back to the same bytes (the
    // zero bytes included), and nothing else does. Random tails behind a
    // right header, and the header's bytes changed one at a time.
    std::mt19937_64 rng(7);
    size_t decoded = 0;
    for (int i = 0; i < 20000; ++i) {
        std::vector<uint8_t> in(i % 3 == 0 ? rng() % 64 : kClockDatagramBytes);
        for (uint8_t& x : in) x = static_cast<uint8_t>(rng());
        if (in.size() >= 6 && i % 2 == 0) std::memcpy(in.data(), b.data(), 6);  // a right header
        const bool broken = i % 4 == 0 && in.size() >= 6;
        if (broken) in[rng() % 6] ^= static_cast<uint8_t>(1u << (rng() % 8));  // one of its bits off
        const std::optional<ClockDatagram> got = decode_clock_datagram(in);
        if (!got) continue;
        EXPECT_FALSE(broken) << "input " << i;
        ++decoded;
        const auto again = encode(*got);
        for (const size_t zero : {6, 7}) in[zero] = 0;  // not carried
        EXPECT_TRUE(std::equal(again.begin(), again.end(), in.begin(), in.end())) << "input " << i;
    }
    EXPECT_GT(decoded, 1000u);
}

class ClockRelayTest : public ::testing::Test {
protected:
    void SetUp() override {
        for (std::string* d : {&dir_a_, &dir_b_}) {
            char tmpl[] = "/tmp/rocemu_relay_test.XXXXXX";
            ASSERT_NE(mkdtemp(tmpl), nullptr);
            *d = tmpl;
        }
    }
    void TearDown() override {
        std::filesystem::remove_all(dir_a_);
        std::filesystem::remove_all(dir_b_);
    }
    // Slot `self` of 2 in machine a's or b's clock file.
    static std::unique_ptr<SharedClock> open_in(const std::string& dir, uint32_t self) {
        std::string error;
        std::unique_ptr<SharedClock> c = SharedClock::open(dir + "/fabric.clock", 2, self, error);
        EXPECT_TRUE(c) << error;
        return c;
    }
    static std::shared_ptr<ClockRelay> switch_relay() {
        std::string error;
        std::shared_ptr<ClockRelay> r = ClockRelay::for_hosts(HostPort{"127.0.0.1", 0}, kFabric, error);
        EXPECT_TRUE(r) << error;
        return r;
    }
    static std::shared_ptr<ClockRelay> hosts_relay(std::vector<uint16_t> ports, uint64_t fabric = kFabric) {
        std::vector<HostPort> peers;
        for (const uint16_t p : ports) peers.push_back(HostPort{"127.0.0.1", p});
        std::string error;
        std::shared_ptr<ClockRelay> r =
            ClockRelay::to_switches(std::move(peers), fabric, kStep * FabricClock::kJumpSteps, error);
        EXPECT_TRUE(r) << error;
        return r;
    }
    std::string dir_a_, dir_b_;
};

TEST_F(ClockRelayTest, AStoppedSwitchNodeOnAnotherMachineHoldsTheHostsNode) {
    auto sb = open_in(dir_b_, 1), ha = open_in(dir_a_, 0);
    auto rb = switch_relay();
    sb->attach(rb, kEvery);
    auto ra = hosts_relay({rb->port()});
    ha->attach(ra, kEvery);
    EXPECT_NE(ha->domain(), sb->domain());
    FabricClock h(kStep, Nanos{}), s(kStep, Nanos{});
    h.share(ha.get());
    s.share(sb.get());
    Nanos real{};
    turn(real, {&h, &s}, kTurnsBound, [&] { return ra->heard(0); });
    ASSERT_TRUE(ra->heard(0));
    // Both scheduled: they move on together, at the real time's pace.
    const Nanos h0 = h.now(), s0 = s.now(), real0 = real;
    for (int i = 0; i < 1000; ++i) {
        real += kTurn;
        h.advance(real);
        s.advance(real);
        ASSERT_LE(h.now() - s.now(), kLead + kStep) << "turn " << i;
        ASSERT_LE(s.now() - h.now(), kLead + kStep) << "turn " << i;
    }
    EXPECT_GE(h.now() - h0, (real - real0) * 9 / 10);
    EXPECT_GE(s.now() - s0, (real - real0) * 9 / 10);
    // The switch node is not scheduled for 10 ms: the hosts node stops a
    // lead past the time it last heard from it.
    const Nanos waited0 = h.waited();
    turn(real, {&h}, 1000);
    EXPECT_LE(h.now(), s.now() + kLead);
    EXPECT_GE(h.waited() - waited0, Nanos::from_ms(9));
    EXPECT_GT(ra->sent(), 0u);
    EXPECT_GT(rb->received(), 0u);
    EXPECT_EQ(ra->ignored() + rb->ignored(), 0u);
    EXPECT_EQ(h.jumped() + s.jumped(), Nanos{});
}

TEST_F(ClockRelayTest, AMachineHeardForTheFirstTimeIsCaughtUpWithNotWaitedFor) {
    auto sb = open_in(dir_b_, 1), ha = open_in(dir_a_, 0);
    auto rb = switch_relay();
    sb->attach(rb, kEvery);
    FabricClock h(kStep, Nanos{}), s(kStep, Nanos{});
    s.share(sb.get());
    Nanos real{};
    turn(real, {&s}, 5000);  // the switch node alone for 50 ms
    EXPECT_EQ(s.now(), Nanos::from_ms(50));
    // The hosts node starts, on its own clock at 0.
    auto ra = hosts_relay({rb->port()});
    ha->attach(ra, kEvery);
    h.advance(real);
    h.share(ha.get());
    turn(real, {&h, &s}, kTurnsBound, [&] { return h.jumped() > Nanos{}; });
    EXPECT_GE(h.jumped(), Nanos::from_ms(49));
    turn(real, {&h, &s}, 100);
    EXPECT_LE(s.now() - h.now(), kLead + kStep);
    // The switch node waited for the hosts node's first, far-behind time
    // only until the hosts node had caught up: a few exchanges, not 50 ms.
    EXPECT_LT(s.waited(), kStep * 4);
    EXPECT_EQ(s.jumped(), Nanos{});
}

TEST_F(ClockRelayTest, TheOtherSideStartedFirstTooTheSwitchNodeCatchesUp) {
    auto sb = open_in(dir_b_, 1), ha = open_in(dir_a_, 0);
    auto rb = switch_relay();
    sb->attach(rb, kEvery);
    auto ra = hosts_relay({rb->port()});
    ha->attach(ra, kEvery);
    FabricClock h(kStep, Nanos{}), s(kStep, Nanos{});
    h.share(ha.get());
    Nanos real{};
    turn(real, {&h}, 5000);  // the hosts node alone for 50 ms, asking
    EXPECT_EQ(h.now(), Nanos::from_ms(50));
    s.advance(real);
    s.share(sb.get());  // its machine alone: starts at its own time
    const Nanos s_start = real;
    // It first takes the questions its socket kept while it did not run
    // (the oldest; the rest were lost), then the fresh ones: it may jump
    // more than once.
    turn(real, {&s, &h}, kTurnsBound, [&] { return ra->heard(0); });
    ASSERT_TRUE(ra->heard(0));
    turn(real, {&h, &s}, 100);
    EXPECT_LE(h.now() - s.now(), kLead + kStep);
    EXPECT_LE(s.now() - h.now(), kLead + kStep);
    // What it did not run itself since it started (its first turn's step
    // and the real time since), it jumped.
    EXPECT_GE(s.jumped(), s.now() - kStep - (real - s_start));
    EXPECT_GE(s.jumped(), Nanos::from_ms(45));
    EXPECT_EQ(h.jumped(), Nanos{});
}

// Three machines started at different times: the hosts node tells each the
// latest time of all until they agree, so the one behind jumps ahead instead
// of the one ahead waiting for it (it hears of it only through the hosts
// node, as the least time of the others).
TEST_F(ClockRelayTest, ThreeMachinesStartedAtDifferentTimesAllGoOnFromTheLatest) {
    char tmpl[] = "/tmp/rocemu_relay_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir_c = tmpl;
    auto sb = open_in(dir_b_, 1), sc = open_in(dir_c, 1), ha = open_in(dir_a_, 0);
    auto rb = switch_relay(), rc = switch_relay();
    sb->attach(rb, kEvery);
    sc->attach(rc, kEvery);
    FabricClock h(kStep, Nanos{}), b(kStep, Nanos{}), c(kStep, Nanos{});
    c.share(sc.get());
    Nanos real{};
    turn(real, {&c}, 4000);  // c alone for 40 ms
    b.advance(real);
    b.share(sb.get());
    turn(real, {&b, &c}, 1000);  // then b too, for 10 ms
    EXPECT_EQ(c.now() - b.now(), Nanos::from_ms(40) - kStep);
    auto ra = hosts_relay({rb->port(), rc->port()});
    ha->attach(ra, kEvery);
    h.advance(real);
    h.share(ha.get());
    const Nanos c0 = c.now(), real0 = real;
    turn(real, {&h, &b, &c}, kTurnsBound, [&] { return ra->synced(); });
    ASSERT_TRUE(ra->synced());
    turn(real, {&h, &b, &c}, 1000);
    for (const FabricClock* x : {&h, &b}) {
        EXPECT_LE(c.now() - x->now(), kLead + kStep);
        EXPECT_LE(x->now() - c.now(), kLead + kStep);
    }
    EXPECT_GE(b.jumped(), Nanos::from_ms(39));
    EXPECT_GE(h.jumped(), Nanos::from_ms(49));
    // c, ahead, went on at the real time's pace, never waiting for b.
    EXPECT_LT(c.waited(), kStep * 4);
    EXPECT_GE(c.now() - c0, real - real0 - kStep * 4);
    sc.reset();
    std::filesystem::remove_all(dir_c);
}

TEST_F(ClockRelayTest, AHostsNodeThatIsGoneHoldsNobody) {
    auto sb = open_in(dir_b_, 1);
    auto rb = switch_relay();
    sb->attach(rb, kEvery);
    FabricClock s(kStep, Nanos{});
    s.share(sb.get());
    Nanos real{};
    {
        auto ha = open_in(dir_a_, 0);
        auto ra = hosts_relay({rb->port()});
        ha->attach(ra, kEvery);
        FabricClock h(kStep, Nanos{});
        h.share(ha.get());
        turn(real, {&h, &s}, kTurnsBound, [&] { return ra->heard(0); });
        ASSERT_TRUE(ra->heard(0));
        EXPECT_NE(sb->others_min(), Nanos::max());  // its view of machine a
    }  // the hosts node exits: its relay says so
    turn(real, {&s}, kTurnsBound, [&] { return sb->others_min() == Nanos::max(); });
    EXPECT_EQ(sb->others_min(), Nanos::max());
    const Nanos waited0 = s.waited(), s0 = s.now();
    turn(real, {&s}, 1000);
    EXPECT_EQ(s.waited(), waited0);
    EXPECT_EQ(s.now() - s0, Nanos::from_ms(10));
}

// Two switch nodes the test plays itself, to see what the hosts node tells
// each and how it takes their answers.
class FakeSwitch {
public:
    FakeSwitch() {
        fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_in sa{};
        sa.sin_family = AF_INET;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof sa;
        EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
        getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
        port_ = ntohs(sa.sin_port);
    }
    ~FakeSwitch() { close(fd_); }
    uint16_t port() const { return port_; }
    // The latest question waiting (up to 1 s for the first), with its sender.
    std::optional<ClockDatagram> latest() {
        std::optional<ClockDatagram> got;
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 1000) != 1) return got;
        uint8_t b[64];
        socklen_t len = sizeof from_;
        for (ssize_t n; (n = recvfrom(fd_, b, sizeof b, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from_), &len)) > 0;
             len = sizeof from_)
            got = decode_clock_datagram(std::span<const uint8_t>(b, static_cast<size_t>(n)));
        return got;
    }
    void answer(uint32_t tag, uint64_t domain, Nanos t, uint64_t fabric = kFabric, uint32_t seq = 0) {
        const auto b = encode(ClockDatagram{ClockDatagram::kReply, tag, seq, fabric, domain, t.v});
        EXPECT_EQ(sendto(fd_, b.data(), b.size(), 0, reinterpret_cast<sockaddr*>(&from_), sizeof from_),
                  static_cast<ssize_t>(b.size()));
    }

private:
    int fd_ = -1;
    uint16_t port_ = 0;
    sockaddr_in from_{};
};

// Each answer echoes the exchange it answers, so the hosts side knows each
// switch's round trip in real time (given as values here: exact).
TEST_F(ClockRelayTest, TheHostsSideMeasuresEachSwitchsRoundTrip) {
    FakeSwitch f;
    auto r = hosts_relay({f.port()});
    const Nanos t = Nanos::from_ms(1);
    // Exchanges at `real`, then `apart` after each other, until the relay
    // has taken `answers` in all.
    const auto until_taken = [&](Nanos real, uint64_t answers, Nanos apart = Nanos{}) {
        for (int i = 0; i < kTurnsBound && r->received() < answers; ++i, real += apart) r->exchange(t, real);
        ASSERT_EQ(r->received(), answers);
    };
    r->exchange(t, Nanos::from_ms(1));
    std::optional<ClockDatagram> q = f.latest();
    ASSERT_TRUE(q);
    f.answer(0, 5, t, kFabric, q->seq);
    until_taken(Nanos::from_us(1250), 1);
    EXPECT_EQ(r->round_trips(0).count, 1u);
    EXPECT_EQ(r->round_trips(0).min, Nanos::from_us(250));
    EXPECT_EQ(r->round_trips(0).max, Nanos::from_us(250));
    // The latest question (asked at 1.25 ms) answered at 1.6 ms.
    q = f.latest();
    ASSERT_TRUE(q);
    f.answer(0, 5, t, kFabric, q->seq);
    until_taken(Nanos::from_us(1600), 2);
    const ClockRelay::RoundTrips& rt = r->round_trips(0);
    EXPECT_EQ(rt.count, 2u);
    EXPECT_EQ(rt.max, Nanos::from_us(350));
    EXPECT_GE(rt.within(0.5), Nanos::from_us(250));  // the bucket's bound: at most 1/16 above
    EXPECT_LE(rt.within(0.5), Nanos::from_us(250) + Nanos::from_us(250) / 16);
    EXPECT_EQ(rt.within(1.0), Nanos::from_us(350));
    // An answer to an exchange it did not ask (or asked too long ago) is
    // taken but not timed.
    q = f.latest();
    ASSERT_TRUE(q);
    f.answer(0, 5, t, kFabric, q->seq + 100000);
    until_taken(Nanos::from_us(1700), 3);
    EXPECT_EQ(r->round_trips(0).count, 2u);
    // Nor is one taken after this side was away for longer than the
    // catching up's bound (4 steps, 400 us): the wait was its own.
    q = f.latest();
    ASSERT_TRUE(q);
    f.answer(0, 5, t, kFabric, q->seq);
    until_taken(Nanos::from_ms(3), 4, Nanos::from_us(500));
    EXPECT_EQ(r->round_trips(0).count, 2u);
}

// Buckets: exact to the microsecond below 64 us, then within 1/16.
TEST(ClockRoundTrips, BucketsBoundEveryTimeWithinASixteenth) {
    for (int64_t us : {0, 1, 63, 64, 65, 100, 127, 128, 1000, 4095, 4096, 123456, 1 << 29}) {
        const size_t b = ClockRelay::RoundTrips::bucket(Nanos::from_us(us));
        ASSERT_LT(b, ClockRelay::RoundTrips::kBuckets) << us;
        const Nanos up = ClockRelay::RoundTrips::upper(b);
        EXPECT_GT(up, Nanos::from_us(us)) << us;
        EXPECT_LE(up.v, Nanos::from_us(us).v + std::max<int64_t>(1000, Nanos::from_us(us).v / 16)) << us;
        if (b > 0) {
            EXPECT_LE(ClockRelay::RoundTrips::upper(b - 1), Nanos::from_us(us)) << us;
        }
    }
    EXPECT_EQ(ClockRelay::RoundTrips::bucket(Nanos::from_s(100000)), ClockRelay::RoundTrips::kBuckets - 1);
    EXPECT_EQ(ClockRelay::RoundTrips::bucket(Nanos{-5}), 0u);
}

TEST_F(ClockRelayTest, NoMachineIsToldItsOwnTimeBack) {
    FakeSwitch f0, f1;
    auto ha = open_in(dir_a_, 0);
    auto ra = hosts_relay({f0.port(), f1.port()});
    ha->attach(ra, kEvery);
    FabricClock h(kStep, Nanos{});
    h.share(ha.get());
    Nanos real = Nanos::from_ms(1);
    h.advance(real);  // 1 ms: asks both
    std::optional<ClockDatagram> q0 = f0.latest(), q1 = f1.latest();
    ASSERT_TRUE(q0 && q1);
    EXPECT_EQ(q0->kind, ClockDatagram::kTime);
    EXPECT_EQ(q0->tag, 0u);
    EXPECT_EQ(q1->tag, 1u);
    EXPECT_EQ(q0->time, kStep.v);  // its first turn's step
    // Both answer from machine 5, whose slowest node is 10 us behind (within
    // the catching up's bound, so from the next exchange on the hosts node
    // waits for it).
    const Nanos behind = h.now() - Nanos::from_us(10);
    f0.answer(0, 5, behind);
    f1.answer(1, 5, behind);
    // The next exchanges: the hosts node waits for machine 5 (a lead past
    // it) but tells neither switch machine 5's own time.
    for (int i = 0; i < kTurnsBound && !(ra->heard(0) && ra->heard(1)); ++i) {
        real += kEvery;
        h.advance(real);
    }
    ASSERT_TRUE(ra->heard(0) && ra->heard(1));
    // Held: it stops within a lead past the time it read last, which is at
    // most a lead past machine 5's, and stays there.
    for (int i = 0; i < 20; ++i) {
        real += kEvery;
        h.advance(real);
    }
    const Nanos held = h.now();
    EXPECT_LE(held, behind + kLead * 2);
    for (int i = 0; i < 20; ++i) {
        real += kEvery;
        h.advance(real);
    }
    EXPECT_EQ(h.now(), held);
    q0 = f0.latest();
    ASSERT_TRUE(q0);
    EXPECT_EQ(q0->time, h.now().v);
    // f1 turns out to be on another machine, 6: f0 is now told its time.
    f1.answer(1, 6, behind + Nanos::from_us(10));
    for (int i = 0; i < 100; ++i) {
        real += kEvery;
        h.advance(real);
        q0 = f0.latest();
        ASSERT_TRUE(q0);
        if (q0->time == (behind + Nanos::from_us(10)).v) break;
    }
    EXPECT_EQ(q0->time, (behind + Nanos::from_us(10)).v);
    // An answer for another fabric changes nothing and is counted.
    f0.answer(0, 5, Nanos::from_ms(100), kFabric + 1);
    const Nanos before = h.now();
    for (int i = 0; i < kTurnsBound && ra->ignored() == 0; ++i) {
        real += kEvery;
        h.advance(real);
    }
    EXPECT_EQ(ra->ignored(), 1u);
    EXPECT_EQ(h.now(), before);  // still held by machine 5
}

}  // namespace
}  // namespace rocemu::fabric::live
