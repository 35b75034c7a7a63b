// Simulator tests: timers, run modes, ports, and whole-run determinism.
#include "sim/sim.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <tuple>

#include "dataplane/pcap/pcap.hpp"
#include "test_nodes.hpp"

namespace rocemu::sim {
namespace {

using namespace rocemu::literals;
using test::Sink;
using test::Source;

class TimerNode : public Node {
public:
    explicit TimerNode(Simulator& sim) : sim_(sim), id_(sim.add_node(*this)) {}
    NodeId id() const { return id_; }
    std::vector<Nanos> fired;
    Nanos rearm_after{0};  // when > 0, re-arms itself this long after each expiry
    void on_frame(PortId, FrameHandle h, Nanos) override { sim_.pool().free(h); }
    void on_timer(Nanos now) override {
        EXPECT_EQ(now, sim_.now());
        fired.push_back(now);
        if (rearm_after.v > 0 && fired.size() < 5) sim_.arm_timer(id_, now + rearm_after);
    }

private:
    Simulator& sim_;
    NodeId id_;
};

TEST(SimTimer, FiresOnceAtTheArmedTime) {
    Simulator sim(SimConfig{});
    TimerNode n(sim);
    sim.arm_timer(n.id(), 100_ns);
    EXPECT_EQ(sim.timer(n.id()), 100_ns);
    sim.run_until_idle();
    EXPECT_EQ(n.fired, std::vector<Nanos>{100_ns});
    EXPECT_EQ(sim.timer(n.id()), Nanos::max());
    EXPECT_EQ(sim.now(), 100_ns);
}

TEST(SimTimer, MovingEarlierSupersedesTheOldExpiry) {
    Simulator sim(SimConfig{});
    TimerNode n(sim);
    sim.arm_timer(n.id(), 100_ns);
    sim.arm_timer(n.id(), 50_ns);
    sim.run_until_idle();
    EXPECT_EQ(n.fired, std::vector<Nanos>{50_ns});
    EXPECT_EQ(sim.counters().stale_timers, 1u);
}

TEST(SimTimer, MovingLaterFiresOnlyAtTheNewTime) {
    Simulator sim(SimConfig{});
    TimerNode n(sim);
    sim.arm_timer(n.id(), 100_ns);
    sim.arm_timer(n.id(), 300_ns);
    sim.arm_timer(n.id(), 200_ns);
    sim.run_until(150_ns);
    EXPECT_TRUE(n.fired.empty());
    sim.run_until_idle();
    EXPECT_EQ(n.fired, std::vector<Nanos>{200_ns});
}

TEST(SimTimer, CancelAndRearm) {
    Simulator sim(SimConfig{});
    TimerNode n(sim);
    sim.arm_timer(n.id(), 100_ns);
    sim.cancel_timer(n.id());
    sim.run_until_idle();
    EXPECT_TRUE(n.fired.empty());
    sim.arm_timer(n.id(), 10_ns);  // already in the past: fires now
    sim.run_until_idle();
    EXPECT_EQ(n.fired, std::vector<Nanos>{100_ns});
    n.rearm_after = 1_us;
    sim.arm_timer(n.id(), 2_us);
    sim.run_until_idle();
    EXPECT_EQ(n.fired, (std::vector<Nanos>{100_ns, 2_us, 3_us, 4_us, 5_us}));
}

TEST(SimTimer, ManyRearmsKeepTheQueueSmall) {
    Simulator sim(SimConfig{});
    TimerNode n(sim);
    // A retransmit timer pushed further out on every ACK.
    for (int64_t i = 1; i <= 100000; ++i) sim.arm_timer(n.id(), Nanos{1000 + i});
    EXPECT_EQ(sim.queue().size(), 1u);
    sim.run_until_idle();
    EXPECT_EQ(n.fired, std::vector<Nanos>{Nanos{101000}});
}

TEST(SimTimer, TimersOfNodesAreIndependentAndTiesAreFifo) {
    Simulator sim(SimConfig{});
    TimerNode a(sim), b(sim), c(sim);
    std::vector<NodeId> order;
    struct Rec : Node {
        std::vector<NodeId>* order;
        NodeId id;
        void on_frame(PortId, FrameHandle, Nanos) override {}
        void on_timer(Nanos) override { order->push_back(id); }
    };
    Rec r[3];
    for (int i = 0; i < 3; ++i) {
        r[i].order = &order;
        r[i].id = sim.add_node(r[i]);
    }
    sim.arm_timer(r[2].id, 500_ns);
    sim.arm_timer(r[0].id, 500_ns);
    sim.arm_timer(r[1].id, 500_ns);
    sim.arm_timer(a.id(), 10_ns);
    sim.arm_timer(b.id(), 20_ns);
    sim.run_until_idle();
    EXPECT_EQ(order, (std::vector<NodeId>{r[2].id, r[0].id, r[1].id}));
    EXPECT_EQ(a.fired, std::vector<Nanos>{10_ns});
    EXPECT_EQ(b.fired, std::vector<Nanos>{20_ns});
    EXPECT_TRUE(c.fired.empty());
}

TEST(SimRun, UntilConditionStopsRightAfterTheEvent) {
    Simulator sim(SimConfig{});
    Source src(sim, 100, [](uint64_t i) { return test::tagged_frame(i, 1250); });  // 100 ns at 100G
    Sink dst(sim);
    sim.add_link(src.id(), 0, dst.id(), 0, test::bare_link());
    src.start();
    EXPECT_TRUE(sim.run_until_cond([&] { return dst.got().size() == 10; }));
    EXPECT_EQ(dst.got().size(), 10u);
    EXPECT_EQ(sim.now(), 1000_ns);
    EXPECT_FALSE(sim.run_until_cond([&] { return dst.got().size() == 1000; }, 5000_ns));
    EXPECT_EQ(dst.got().size(), 50u);
    EXPECT_FALSE(sim.run_until_cond([] { return false; }));
    EXPECT_EQ(dst.got().size(), 100u);
}

TEST(SimRun, RunUntilAdvancesTimeWithoutEvents) {
    Simulator sim(SimConfig{});
    sim.run_until(3_ms);
    EXPECT_EQ(sim.now(), 3_ms);
    EXPECT_FALSE(sim.step());
}

TEST(SimRun, TransmitOnAPortWithoutALinkIsCountedAndFreed) {
    Simulator sim(SimConfig{});
    Sink n(sim);
    EXPECT_EQ(sim.transmit(n.id(), 3, test::make_frame(sim, test::tagged_frame(1, 60))), Link::Send::Dropped);
    EXPECT_EQ(sim.counters().dropped_no_link, 1u);
    EXPECT_EQ(sim.pool().in_use(), 0u);
    EXPECT_FALSE(sim.tx_idle(n.id(), 3));
    EXPECT_EQ(sim.out_link(n.id(), 3), Simulator::kNoLink);
}

TEST(SimRun, LinkStateChangesReachTheSendingEndOnce) {
    struct Watcher : Node {
        std::vector<std::tuple<PortId, bool, Nanos>> seen;
        void on_frame(PortId, FrameHandle, Nanos) override {}
        void on_link_state(PortId port, bool up, Nanos now) override { seen.emplace_back(port, up, now); }
    };
    Simulator sim(SimConfig{});
    Watcher a, b;
    const NodeId ia = sim.add_node(a), ib = sim.add_node(b);
    const auto [ab, ba] = sim.connect(ia, 4, ib, 9, test::bare_link());
    sim.schedule_link_state(ab, 10_ns, false);
    sim.schedule_link_state(ba, 10_ns, false);
    sim.schedule_link_state(ab, 15_ns, false);  // already down: no news
    sim.schedule_link_state(ab, 20_ns, true);
    sim.schedule_link_state(ba, 30_ns, true);
    sim.run_until_idle();
    using S = std::tuple<PortId, bool, Nanos>;
    EXPECT_EQ(a.seen, (std::vector<S>{{4, false, 10_ns}, {4, true, 20_ns}}));
    EXPECT_EQ(b.seen, (std::vector<S>{{9, false, 10_ns}, {9, true, 30_ns}}));
}

// Each node hears of the links out of its ports as they are added, with
// the ids out_link() gives; transmit_on with such an id sends on that link,
// and with kNoLink drops and counts as transmit on a port without a link
// does.
TEST(SimRun, NodesHearOfTheirLinksAndTransmitOnThem) {
    struct Recorder : Node {
        std::vector<std::pair<PortId, LinkId>> added;
        void on_frame(PortId, FrameHandle, Nanos) override {}
        void on_link_added(PortId port, LinkId link) override { added.emplace_back(port, link); }
    };
    Simulator sim(SimConfig{});
    Recorder a, b;
    const NodeId ia = sim.add_node(a), ib = sim.add_node(b);
    Sink sink(sim);
    const auto [ab, ba] = sim.connect(ia, 4, ib, 9, test::bare_link());
    const LinkId a_sink = sim.add_link(ia, 1, sink.id(), 0, test::bare_link());
    using P = std::pair<PortId, LinkId>;
    EXPECT_EQ(a.added, (std::vector<P>{{4, ab}, {1, a_sink}}));
    EXPECT_EQ(b.added, (std::vector<P>{{9, ba}}));
    EXPECT_EQ(sim.out_link(ia, 1), a_sink);

    EXPECT_EQ(sim.transmit_on(a_sink, test::make_frame(sim, test::tagged_frame(7, 60))), Link::Send::Started);
    EXPECT_EQ(sim.transmit_on(Simulator::kNoLink, test::make_frame(sim, test::tagged_frame(8, 60))),
              Link::Send::Dropped);
    sim.run_until_idle();
    ASSERT_EQ(sink.got().size(), 1u);
    EXPECT_EQ(sink.got()[0].tag, 7u);
    EXPECT_EQ(sim.link(a_sink).counters().delivered_frames, 1u);
    EXPECT_EQ(sim.counters().dropped_no_link, 1u);
    EXPECT_EQ(sim.pool().in_use(), 0u);
}

// A node's timer lives in the node, so a node joins one simulator once.
TEST(SimRun, ANodeIsAddedOnce) {
    Simulator a(SimConfig{}), b(SimConfig{});
    Sink n(a);
    EXPECT_THROW(a.add_node(n), std::invalid_argument);
    EXPECT_THROW(b.add_node(n), std::invalid_argument);
    EXPECT_EQ(a.node_count(), 1u);
    EXPECT_EQ(b.node_count(), 0u);
}

// A node arming, reading and cancelling its timer by reference (as the
// fabric's nodes do) and the same by id act on one timer.
TEST(SimTimer, ByReferenceAndByIdAreTheSameTimer) {
    Simulator sim(SimConfig{});
    TimerNode n(sim), other(sim);
    sim.arm_timer(n.id(), 40_ns);
    EXPECT_EQ(sim.timer(static_cast<const Node&>(n)), 40_ns);
    sim.arm_timer(static_cast<Node&>(n), 25_ns);  // earlier: supersedes 40
    EXPECT_EQ(sim.timer(n.id()), 25_ns);
    EXPECT_EQ(sim.timer(other.id()), Nanos::max());
    sim.arm_timer(other.id(), 30_ns);
    sim.cancel_timer(static_cast<Node&>(other));
    sim.run_until_idle();
    EXPECT_EQ(n.fired, std::vector<Nanos>{25_ns});
    EXPECT_TRUE(other.fired.empty());
    EXPECT_EQ(sim.timer(n.id()), Nanos::max());
}

TEST(SimPortTimer, EveryArmFiresAtItsTimeWithItsPortTiesInArmOrder) {
    struct Ports : Node {
        std::vector<std::pair<PortId, Nanos>> seen;
        int timers = 0;
        void on_frame(PortId, FrameHandle, Nanos) override {}
        void on_timer(Nanos) override { ++timers; }
        void on_port_timer(PortId port, Nanos now) override { seen.emplace_back(port, now); }
    };
    Simulator sim(SimConfig{});
    Ports a, b;
    const NodeId ia = sim.add_node(a), ib = sim.add_node(b);
    sim.arm_port(ia, 7, 40_ns);
    sim.arm_port(ia, 3, 20_ns);
    sim.arm_port(ib, 3, 20_ns);
    sim.arm_port(ia, 7, 20_ns);  // moved earlier: the 40 ns arm still fires, the node tells it is stale
    sim.arm_port(ia, 1, 20_ns);
    sim.run_until(10_ns);
    sim.arm_port(ia, 9, 5_ns);  // past: fires at now
    sim.run_until_idle();
    using S = std::pair<PortId, Nanos>;
    EXPECT_EQ(a.seen, (std::vector<S>{{9, 10_ns}, {3, 20_ns}, {7, 20_ns}, {1, 20_ns}, {7, 40_ns}}));
    EXPECT_EQ(b.seen, (std::vector<S>{{3, 20_ns}}));
    // Port timers are not the node's timer, and leave its state alone.
    EXPECT_EQ(a.timers + b.timers, 0);
    EXPECT_EQ(sim.timer(ia), Nanos::max());
    EXPECT_EQ(sim.counters().events, 6u);
}

// A port timer runs before a frame that arrives in the same nanosecond, even
// one whose delivery was scheduled first: a switch serves the port that
// frees at t before it routes what arrives at t.
TEST(SimPortTimer, RunsBeforeAFrameArrivingInItsNanosecond) {
    struct Rec : Node {
        Simulator* sim = nullptr;
        std::vector<std::string> seen;
        void on_frame(PortId, FrameHandle h, Nanos now) override {
            seen.push_back("frame@" + std::to_string(now.v));
            sim->pool().free(h);
        }
        void on_port_timer(PortId port, Nanos now) override {
            seen.push_back("port" + std::to_string(port) + "@" + std::to_string(now.v));
        }
    };
    Simulator sim(SimConfig{});
    Rec a, b;
    a.sim = b.sim = &sim;
    const NodeId ia = sim.add_node(a), ib = sim.add_node(b);
    LinkConfig c = test::bare_link();
    c.propagation_delay = 100_ns;
    sim.connect(ia, 0, ib, 0, c);
    // 100 bytes at 100 Gbit/s: 8 ns on the wire, so it arrives at 108 ns.
    ASSERT_NE(sim.transmit(ia, 0, test::make_frame(sim, test::tagged_frame(1, 100))), Link::Send::Dropped);
    sim.arm_port(ib, 4, 108_ns);
    sim.arm_port(ib, 5, 107_ns);
    sim.run_until_idle();
    EXPECT_EQ(b.seen, (std::vector<std::string>{"port5@107", "port4@108", "frame@108"}));
}

// Forwards everything arriving on ports 0 and 1 out of port 2.
class Merger : public Node {
public:
    explicit Merger(Simulator& sim) : sim_(sim), id_(sim.add_node(*this)) {}
    NodeId id() const { return id_; }
    void on_frame(PortId, FrameHandle h, Nanos) override { sim_.transmit(id_, 2, h); }

private:
    Simulator& sim_;
    NodeId id_;
};

struct RunResult {
    std::vector<LinkCounters> links;
    std::vector<std::pair<Nanos, std::vector<uint8_t>>> arrivals;
    uint64_t events = 0;
    std::string pcap;
};

std::string read_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Two senders through lossy, duplicating, corrupting, jittery and sprayed
// links into a 40G bottleneck with a finite queue, every link tapped into one
// shared pcap.
RunResult faulty_run(uint64_t seed, const std::filesystem::path& pcap_path) {
    RunResult r;
    {
        pcap::Writer tap(pcap_path.string());
        EXPECT_TRUE(tap.ok());
        Simulator sim(SimConfig{.seed = seed, .max_frames = 4096});
        Source a(sim, 3000, [](uint64_t i) { return test::roce_frame(static_cast<uint32_t>(i), 0xC000, 1024); });
        Source b(sim, 3000, [](uint64_t i) {
            return test::roce_frame(static_cast<uint32_t>(i + 100000), static_cast<uint16_t>(0xC000 + i), 700);
        });
        Merger m(sim);
        Sink s(sim, true);
        LinkConfig la = test::bare_link();
        la.loss_rate = 0.01;
        la.duplicate_rate = 0.01;
        la.corrupt_rate = 0.01;
        la.corrupt_as = Corruption::BadIcrc;
        la.propagation_delay = 700_ns;
        LinkConfig lb = test::bare_link();
        lb.jitter = 300_ns;
        lb.jitter_reorders = true;
        for (int64_t d : {200, 900, 400}) lb.paths.push_back(Nanos{d});
        LinkConfig bottleneck = test::bare_link();
        bottleneck.speed = BitsPerSec::gbps(40);
        bottleneck.queue_limit = Bytes{64 * 1024};
        bottleneck.propagation_delay = 1_us;
        const LinkId ids[] = {sim.add_link(a.id(), 0, m.id(), 0, la), sim.add_link(b.id(), 0, m.id(), 1, lb),
                              sim.add_link(m.id(), 2, s.id(), 0, bottleneck)};
        for (LinkId id : ids) sim.set_taps(id, &tap, &tap);
        sim.schedule_link_state(ids[0], 100_us, false);
        sim.schedule_link_state(ids[0], 120_us, true);
        a.start();
        b.start();
        sim.run_until_idle();
        for (LinkId id : ids) r.links.push_back(sim.link(id).counters());
        for (const auto& g : s.got()) r.arrivals.emplace_back(g.t, g.bytes);
        r.events = sim.counters().events;
        EXPECT_EQ(sim.pool().in_use(), 0u);
    }
    r.pcap = read_file(pcap_path);
    return r;
}

TEST(SimDeterminism, SameSeedGivesIdenticalCountersAndPcaps) {
    const auto dir = std::filesystem::temp_directory_path() / ("rocemu_sim_det_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const RunResult r1 = faulty_run(7, dir / "run1.pcap");
    const RunResult r2 = faulty_run(7, dir / "run2.pcap");
    const RunResult r3 = faulty_run(8, dir / "run3.pcap");
    std::filesystem::remove_all(dir);

    // The run really exercised every fault.
    EXPECT_GT(r1.links[0].dropped(LinkDrop::Loss), 0u);
    EXPECT_GT(r1.links[0].duplicated, 0u);
    EXPECT_GT(r1.links[0].corrupted, 0u);
    EXPECT_GT(r1.links[0].dropped(LinkDrop::LinkDown), 0u);
    EXPECT_GT(r1.links[2].dropped(LinkDrop::QueueFull), 0u);
    EXPECT_GT(r1.pcap.size(), 6000u * 700);

    EXPECT_EQ(r1.links, r2.links);
    EXPECT_EQ(r1.events, r2.events);
    EXPECT_EQ(r1.arrivals, r2.arrivals);
    EXPECT_TRUE(r1.pcap == r2.pcap) << "pcaps differ for the same seed";

    EXPECT_NE(r1.links, r3.links);
    EXPECT_FALSE(r1.pcap == r3.pcap);
}

}  // namespace
}  // namespace rocemu::sim
