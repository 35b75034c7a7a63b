// The deterministic virtual-time runtime. One Simulator owns the event queue,
// the frame pool and the links; nodes (NIC adapters, switches, traffic
// generators) sit at the link ends and are driven one event at a time on one
// thread. Events run in (time, seq) order and every random draw comes from a
// per-link Rng derived from the run seed, so the same setup and seed give the
// same counters and byte-identical pcaps.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "common/units.hpp"
#include "sim/event_queue.hpp"
#include "sim/frame_pool.hpp"
#include "sim/link.hpp"

namespace rocemu::sim {

class Simulator;

// Whatever sits at the end of links. Nodes keep their NodeId (from
// add_node) and act through the Simulator. A node belongs to one
// Simulator, added once: its timer lives in it.
class Node {
public:
    virtual ~Node() = default;
    // A frame arrived on `port`. The node now owns `h`: it must transmit it
    // or give it back with pool().free().
    virtual void on_frame(PortId port, FrameHandle h, Nanos now) = 0;
    // The timer armed with arm_timer() is due.
    virtual void on_timer(Nanos now) { (void)now; }
    // The link out of `port` finished serialising and has nothing queued:
    // the moment a node that keeps its own queues (PFC, priorities, pacing)
    // hands over its next frame.
    virtual void on_tx_ready(PortId port, Nanos now) {
        (void)port;
        (void)now;
    }
    // False if the node never uses on_tx_ready (it paces its ports itself).
    // Its links then queue a TxDone event only while a frame waits behind
    // another, not one for every frame: asked once, when a link out of the
    // node is added.
    virtual bool hears_tx_ready() const { return true; }
    // A time armed with Simulator::arm_port() for `port` has come. Every
    // arm is delivered, also one the node has since moved: the node tells
    // its live arm from stale ones (by `now`).
    virtual void on_port_timer(PortId port, Nanos now) {
        (void)port;
        (void)now;
    }
    // The link out of `port` went down or came back up (carrier). Taking a
    // cable down means scheduling both of its links, so each end hears once.
    virtual void on_link_state(PortId port, bool up, Nanos now) {
        (void)port;
        (void)up;
        (void)now;
    }
    // A link out of `port` was added (set-up): a node that keeps `link` can
    // send with Simulator::transmit_on, which looks nothing up.
    virtual void on_link_added(PortId port, LinkId link) {
        (void)port;
        (void)link;
    }
    // The id add_node gave the node.
    NodeId node_id() const { return node_id_; }

private:
    friend class Simulator;
    // The node's one timer (Simulator::arm_timer). It lives in the node, not
    // in a table of the simulator's: the Timer event that fires it reads the
    // node's first line for the call anyway, and so does a node arming its
    // own timer, so the timer costs no line of its own.
    struct TimerState {
        Nanos due = Nanos::max();     // when the node wants on_timer
        Nanos queued = Nanos::max();  // earliest live Timer event in the queue
        uint64_t gen = 0;             // Timer events carrying another gen are stale
    };
    TimerState timer_;
    NodeId node_id_ = 0;  // from add_node
    bool added_ = false;  // add_node refuses a node added before
};

struct SimConfig {
    uint64_t seed = 1;
    uint32_t max_frames = 1u << 16;  // frame buffers that may exist at once
};

struct SimCounters {
    uint64_t events = 0;
    uint64_t events_by_kind[kEventKinds] = {};  // by EventKind
    uint64_t stale_timers = 0;      // timer events superseded by a later arm or cancel
    uint64_t dropped_no_link = 0;   // transmit() on a port with no link
};

class Simulator {
public:
    explicit Simulator(const SimConfig& cfg);
    Simulator(const Simulator&) = delete;
    Simulator& operator=(const Simulator&) = delete;

    // --- Building the topology (not while running) ----------------------------
    // The node must outlive the Simulator. Throws std::invalid_argument if
    // the node was added before (to this or another Simulator).
    NodeId add_node(Node& node);
    // One direction from (src, src_port) to (dst, dst_port). Throws
    // std::invalid_argument if the config is invalid (the message names the
    // key, value and range), a node id is unknown, or src_port already has a
    // link. Invalidates references returned by link().
    LinkId add_link(NodeId src, PortId src_port, NodeId dst, PortId dst_port, const LinkConfig& cfg);
    // Both directions with the same config: first a->b, then b->a.
    std::pair<LinkId, LinkId> connect(NodeId a, PortId a_port, NodeId b, PortId b_port, const LinkConfig& cfg);

    // --- What nodes call ------------------------------------------------------
    Nanos now() const { return now_; }
    FramePool& pool() { return pool_; }
    const FramePool& pool() const { return pool_; }
    // Hands `h` (a valid handle the node owns) to the link out of `port`;
    // the link owns it from here on, including when it drops it (the result
    // says so, a counter says why).
    Link::Send transmit(NodeId node, PortId port, FrameHandle h) { return transmit_on(out_link(node, port), h); }
    // The same with the link the node heard of in on_link_added (kNoLink:
    // the port has none, and the frame is dropped).
    Link::Send transmit_on(LinkId link, FrameHandle h) {
        if (link == kNoLink) return drop_no_link(h);
        return links_[link].send(h, now_, queue_, pool_);
    }
    // True if the port has a link and nothing is serialising or queued on it.
    bool tx_idle(NodeId node, PortId port) const;
    // One timer per node. Arming again moves it (earlier or later); a time
    // in the past fires at now(). Superseded expiries are never delivered.
    // A node arming its own passes itself, which reads no table.
    void arm_timer(Node& node, Nanos at);
    void arm_timer(NodeId node, Nanos at) { arm_timer(*nodes_[node], at); }
    void cancel_timer(Node& node) { node.timer_.due = Nanos::max(); }
    void cancel_timer(NodeId node) { cancel_timer(*nodes_[node]); }
    // When the node's timer is due, or Nanos::max() if it is not armed.
    Nanos timer(const Node& node) const { return node.timer_.due; }
    Nanos timer(NodeId node) const { return timer(*nodes_[node]); }
    // A timer per (node, port), as many as the node arms: on_port_timer(port)
    // at `at`, before every other kind of event due at that nanosecond
    // (EventQueue::push_first), or after the running event if `at` is not
    // later than now(). One event in the queue, no state here: a node with a
    // time per port (a switch's port free again) needs no queue of its own,
    // and its port is served before the frames that arrive as it frees.
    void arm_port(NodeId node, PortId port, Nanos at) {
        if (at > now_)
            queue_.push_first(at, EventKind::PortTimer, node, port);
        else
            queue_.push(now_, EventKind::PortTimer, node, port);
    }

    // --- Faults and capture ---------------------------------------------------
    void schedule_link_state(LinkId link, Nanos at, bool up);
    void set_taps(LinkId link, pcap::Writer* tx, pcap::Writer* rx) { links_[link].set_taps(tx, rx); }

    // --- Running --------------------------------------------------------------
    // Runs the next event if one is due at or before `limit`; false if none is.
    bool step(Nanos limit = Nanos::max());
    // Runs every event due at or before `t`, then sets now() to `t`.
    void run_until(Nanos t);
    // Runs until no event is left.
    void run_until_idle();
    // Runs events until `stop()` returns true (checked after each event),
    // the next event lies beyond `limit`, or none is left. True if `stop` did.
    template <typename Stop>
    bool run_until_cond(Stop&& stop, Nanos limit = Nanos::max()) {
        while (step(limit))
            if (stop()) return true;
        return false;
    }

    // --- Inspection -----------------------------------------------------------
    Link& link(LinkId id) { return links_[id]; }
    const Link& link(LinkId id) const { return links_[id]; }
    std::size_t link_count() const { return links_.size(); }
    std::size_t node_count() const { return nodes_.size(); }
    // The link out of (node, port), or kNoLink.
    static constexpr LinkId kNoLink = UINT32_MAX;
    LinkId out_link(NodeId node, PortId port) const;
    const SimCounters& counters() const { return counters_; }
    const EventQueue& queue() const { return queue_; }
    uint64_t seed() const { return seed_; }

private:
    void fire_timer(const Event& e);
    Link::Send drop_no_link(FrameHandle h);
    // Gives `node` `count` port slots (setup only).
    void grow_ports(NodeId node, uint32_t count);
    void prefetch_event(const EventQueue::Slotted& n) const;
    void prefetch_ahead(const EventQueue::Ahead& a) const;

    uint64_t seed_;
    Nanos now_{0};
    EventQueue queue_;
    FramePool pool_;
    std::vector<Node*> nodes_;
    // The link out of (node, port) is out_links_[ports_[node].first + port]:
    // one flat table, rebuilt when a node gains ports (at setup), so the
    // lookup on every transmit touches two small hot arrays.
    struct NodePorts {
        uint32_t first = 0;
        uint32_t count = 0;
    };
    std::vector<NodePorts> ports_;
    std::vector<LinkId> out_links_;
    std::vector<Link> links_;
    SimCounters counters_;
};

}  // namespace rocemu::sim
