// Two engines on the virtual-time runtime: each is a sim::Node at one end of
// a pair of sim links (link::Model: serialisation, delay or K paths, jitter,
// reordering, loss, duplication, ICRC corruption), driven the way a runtime
// drives it: a frame is pulled from the engine whenever its link is free, and
// the node sleeps until Engine::next_timer(). Events run in (time, seq) order
// and every random draw comes from the links' seeded Rngs, so a seed replays
// exactly.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "dataplane/transport/engine.hpp"
#include "sim/sim.hpp"
#include "tests/unit/transport/harness.hpp"

namespace rocemu::transport::test {

class EngineNode : public sim::Node {
public:
    EngineNode(sim::Simulator& s, Engine& e, Effects& fx) : sim_(s), eng_(e), fx_(fx) { id_ = s.add_node(*this); }

    sim::NodeId id() const { return id_; }
    // Times on_timer ran and left a deadline that had already passed: a
    // runtime sleeping until next_timer() would spin on it.
    uint64_t spins() const { return spins_; }

    void on_frame(sim::PortId, sim::FrameHandle h, Nanos now) override {
        eng_.on_frame(sim_.pool().frame(h), now, fx_);
        sim_.pool().free(h);
        service(now);
    }
    void on_timer(Nanos now) override {
        if (eng_.next_timer() <= now) {
            eng_.on_timer(now, fx_);
            if (eng_.next_timer() <= now) ++spins_;
        }
        service(now);
    }
    void on_tx_ready(sim::PortId, Nanos now) override { service(now); }

    // Hands the link the engine's next frame if the link is free, and sleeps
    // until the engine's next deadline. Called after every event and after
    // work is posted from outside.
    void service(Nanos now) {
        if (sim_.tx_idle(id_, 0)) {
            const sim::FrameHandle h = sim_.pool().alloc();
            if (h.valid()) {
                TxFrame f;
                f.buf = sim_.pool().buffer(h);
                if (eng_.tx_burst(std::span<TxFrame>(&f, 1), now, fx_) == 1) {
                    sim_.pool().set_len(h, f.len);
                    sim_.transmit(id_, 0, h);
                } else {
                    sim_.pool().free(h);
                }
            }
        }
        const Nanos t = eng_.next_timer();
        if (t == Nanos::max()) {
            sim_.cancel_timer(id_);
        } else {
            // A deadline that has passed fires once, now; on_timer counts a repeat.
            const Nanos at = t > now ? t : now;
            if (at != sim_.timer(id_)) sim_.arm_timer(id_, at);
        }
    }

private:
    sim::Simulator& sim_;
    Engine& eng_;
    Effects& fx_;
    sim::NodeId id_ = 0;
    uint64_t spins_ = 0;
};

// The Loop interface (operator[], fx, now, run, settle) on the simulator.
class SimLoop {
public:
    SimLoop(EngineConfig base, const sim::LinkConfig& link, uint64_t seed)
        : sim_(sim::SimConfig{.seed = seed, .max_frames = 4096}) {
        for (int s = 0; s < 2; ++s) eng[s] = make_engine(base, s);
        for (int s = 0; s < 2; ++s) node_[s] = std::make_unique<EngineNode>(sim_, *eng[s], fx[s]);
        links_ = sim_.connect(node_[0]->id(), 0, node_[1]->id(), 0, link);
    }

    std::unique_ptr<Engine> eng[2];
    Effects fx[2];

    Engine& operator[](int s) { return *eng[s]; }
    Nanos now() const { return sim_.now(); }
    sim::Simulator& sim() { return sim_; }
    const sim::Link& link(int from) const { return sim_.link(from == 0 ? links_.first : links_.second); }
    uint64_t spins() const { return node_[0]->spins() + node_[1]->spins(); }

    // Runs events until `done` holds (checked after each), or until the next
    // event lies beyond `limit` or none is left; returns whether `done` held.
    // Work `done` posts is picked up at once.
    template <typename Done>
    bool run(Done&& done, Nanos limit) {
        kick();
        if (done()) return true;
        return sim_.run_until_cond(
            [&] {
                const bool d = done();
                kick();
                return d;
            },
            limit);
    }
    void settle(Nanos limit) {
        kick();
        sim_.run_until_cond([] { return false; }, limit);
    }

private:
    void kick() {
        for (auto& n : node_) n->service(sim_.now());
    }

    sim::Simulator sim_;
    std::unique_ptr<EngineNode> node_[2];
    std::pair<sim::LinkId, sim::LinkId> links_;
};

}  // namespace rocemu::transport::test
