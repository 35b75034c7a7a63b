// Throughput of the virtual-time runtime: frames stream through a chain of
// forwarding nodes at line rate. Prints events/s, simulated frames/s (one
// frame crossing one link) and time per simulated frame for 16 and 256
// nodes, so the cost per packet can be compared across sizes. Then the
// runtime's own share of the fabric target: one simulated second of a 2:1
// incast at 40 Gbit/s, with two paced senders and a plain forwarding node
// standing in for NICs and the switch.
#include <chrono>
#include <ctime>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "sim/sim.hpp"

using namespace rocemu;
using namespace rocemu::sim;

namespace {

constexpr uint32_t kFrameLen = 1024;

// Port 0 faces the previous node, port 1 the next.
class ChainNode : public Node {
public:
    ChainNode(Simulator& sim, bool source, bool sink, uint64_t to_send)
        : sim_(sim), id_(sim.add_node(*this)), source_(source), sink_(sink), to_send_(to_send) {}

    NodeId id() const { return id_; }
    uint64_t received() const { return received_; }

    void kick() {
        if (source_) on_tx_ready(1, sim_.now());
    }

    void on_frame(PortId, FrameHandle h, Nanos) override {
        if (sink_) {
            ++received_;
            sim_.pool().free(h);
            return;
        }
        sim_.transmit(id_, 1, h);
    }

    void on_tx_ready(PortId port, Nanos) override {
        if (!source_ || to_send_ == 0) return;
        const FrameHandle h = sim_.pool().alloc();
        if (!h.valid()) return;
        sim_.pool().set_len(h, kFrameLen);
        --to_send_;
        sim_.transmit(id_, port, h);
    }

private:
    Simulator& sim_;
    NodeId id_;
    bool source_, sink_;
    uint64_t to_send_;
    uint64_t received_ = 0;
};

struct Result {
    uint32_t nodes;
    uint64_t frame_hops;
    uint64_t events;
    double wall_s;
    double cpu_s;
    Nanos sim_time;
};

Result run_chain(uint32_t nodes, uint64_t frame_hop_budget) {
    const uint64_t frames = frame_hop_budget / (nodes - 1);
    Simulator sim(SimConfig{.seed = 42, .max_frames = 1u << 20});
    std::vector<std::unique_ptr<ChainNode>> chain;
    for (uint32_t i = 0; i < nodes; ++i)
        chain.push_back(std::make_unique<ChainNode>(sim, i == 0, i + 1 == nodes, i == 0 ? frames : 0));
    LinkConfig cfg{.wire_overhead = Bytes{0}};
    cfg.speed = BitsPerSec::gbps(100);
    cfg.propagation_delay = Nanos{1000};
    for (uint32_t i = 0; i + 1 < nodes; ++i) sim.add_link(chain[i]->id(), 1, chain[i + 1]->id(), 0, cfg);

    // CPU time next to wall time: on a shared machine it is the steadier one.
    const std::clock_t c0 = std::clock();
    const auto t0 = std::chrono::steady_clock::now();
    chain.front()->kick();
    sim.run_until_idle();
    const auto t1 = std::chrono::steady_clock::now();
    const std::clock_t c1 = std::clock();

    uint64_t hops = 0;
    for (std::size_t i = 0; i < sim.link_count(); ++i) hops += sim.link(static_cast<LinkId>(i)).counters().delivered_frames;
    if (chain.back()->received() != frames) std::fprintf(stderr, "chain of %u lost frames\n", nodes);
    return {nodes, hops, sim.counters().events, std::chrono::duration<double>(t1 - t0).count(),
            static_cast<double>(c1 - c0) / CLOCKS_PER_SEC, sim.now()};
}

// Sends a 1024-byte frame every `gap` from its timer.
class PacedSender : public Node {
public:
    PacedSender(Simulator& sim, Nanos gap) : sim_(sim), id_(sim.add_node(*this)), gap_(gap) {}
    NodeId id() const { return id_; }
    void on_frame(PortId, FrameHandle h, Nanos) override { sim_.pool().free(h); }
    void on_timer(Nanos now) override {
        const FrameHandle h = sim_.pool().alloc();
        if (h.valid()) {
            sim_.pool().set_len(h, kFrameLen);
            sim_.transmit(id_, 0, h);
        }
        sim_.arm_timer(id_, now + gap_);
    }

private:
    Simulator& sim_;
    NodeId id_;
    Nanos gap_;
};

// Ports 0 and 1 in, port 2 out.
class Merge : public Node {
public:
    explicit Merge(Simulator& sim) : sim_(sim), id_(sim.add_node(*this)) {}
    NodeId id() const { return id_; }
    void on_frame(PortId, FrameHandle h, Nanos) override { sim_.transmit(id_, 2, h); }

private:
    Simulator& sim_;
    NodeId id_;
};

void run_incast() {
    Simulator sim(SimConfig{.seed = 42, .max_frames = 1u << 16});
    // 1024 B every 410 ns is 19.98 Gbit/s per sender: together just under
    // the 40 Gbit/s bottleneck, as DCQCN would settle them.
    PacedSender a(sim, Nanos{410}), b(sim, Nanos{410});
    Merge sw(sim);
    ChainNode sink(sim, false, true, 0);
    LinkConfig cfg{.wire_overhead = Bytes{0}};
    cfg.speed = BitsPerSec::gbps(40);
    cfg.propagation_delay = Nanos{1000};
    sim.connect(a.id(), 0, sw.id(), 0, cfg);
    sim.connect(b.id(), 0, sw.id(), 1, cfg);
    sim.connect(sw.id(), 2, sink.id(), 0, cfg);
    sim.arm_timer(a.id(), Nanos{0});
    sim.arm_timer(b.id(), Nanos{205});

    const std::clock_t c0 = std::clock();
    const auto t0 = std::chrono::steady_clock::now();
    sim.run_until(Nanos{1000000000});
    const auto t1 = std::chrono::steady_clock::now();
    const std::clock_t c1 = std::clock();
    std::printf("incast 2:1 at 40 Gbit/s, 1 simulated second: %llu frames received, %llu events, %.3f s wall, %.3f s cpu\n",
                static_cast<unsigned long long>(sink.received()), static_cast<unsigned long long>(sim.counters().events),
                std::chrono::duration<double>(t1 - t0).count(), static_cast<double>(c1 - c0) / CLOCKS_PER_SEC);
}

}  // namespace

int main() {
    constexpr uint64_t kBudget = 20000000;
    std::printf("%6s %12s %12s %8s %8s %10s %10s %10s %10s\n", "nodes", "frame-hops", "events", "wall s", "cpu s",
                "Mevents/s", "Mframes/s", "ns/frame", "sim ms");
    double first = 0;
    for (uint32_t nodes : {16u, 256u}) {
        const Result r = run_chain(nodes, kBudget);
        // Rates and the per-frame cost use CPU time.
        const double ns_per_frame = r.cpu_s * 1e9 / static_cast<double>(r.frame_hops);
        if (first == 0) first = ns_per_frame;
        std::printf("%6u %12llu %12llu %8.3f %8.3f %10.2f %10.2f %10.1f %10.3f\n", r.nodes,
                    static_cast<unsigned long long>(r.frame_hops), static_cast<unsigned long long>(r.events), r.wall_s,
                    r.cpu_s, static_cast<double>(r.events) / r.cpu_s / 1e6,
                    static_cast<double>(r.frame_hops) / r.cpu_s / 1e6, ns_per_frame, r.sim_time.ms());
        if (nodes == 256) std::printf("cost per simulated frame, 256 vs 16 nodes: %.2fx\n", ns_per_frame / first);
    }
    run_incast();
    return 0;
}
