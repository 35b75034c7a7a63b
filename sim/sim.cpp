#include "sim/sim.hpp"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace rocemu::sim {

namespace {

// Each link gets its own stream, independent of how many draws other links
// make, so adding a link never changes the faults seen on the others.
uint64_t link_seed(uint64_t run_seed, LinkId id) {
    uint64_t z = run_seed ^ (0x9E3779B97F4A7C15ull * (uint64_t{id} + 1));
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

}  // namespace

const char* to_string(EventKind k) {
    switch (k) {
        case EventKind::Timer: return "timer";
        case EventKind::TxDone: return "tx_done";
        case EventKind::Deliver: return "deliver";
        case EventKind::LinkState: return "link_state";
        case EventKind::PortTimer: return "port_timer";
    }
    return "?";
}

Simulator::Simulator(const SimConfig& cfg) : seed_(cfg.seed), pool_(cfg.max_frames) {}

NodeId Simulator::add_node(Node& node) {
    if (node.added_) throw std::invalid_argument("add_node: the node was added before (a node belongs to one simulator)");
    node.added_ = true;
    node.node_id_ = static_cast<NodeId>(nodes_.size());
    nodes_.push_back(&node);
    ports_.push_back(NodePorts{static_cast<uint32_t>(out_links_.size()), 0});
    return static_cast<NodeId>(nodes_.size() - 1);
}

LinkId Simulator::add_link(NodeId src, PortId src_port, NodeId dst, PortId dst_port, const LinkConfig& cfg) {
    if (const std::string err = validate(cfg); !err.empty()) throw std::invalid_argument(err);
    if (src >= nodes_.size() || dst >= nodes_.size())
        throw std::invalid_argument(
            fmt::format("link {}:{} -> {}:{}: node id out of range [0, {})", src, src_port, dst, dst_port, nodes_.size()));
    if (out_link(src, src_port) != kNoLink)
        throw std::invalid_argument(fmt::format("link from node {} port {}: port already has a link", src, src_port));
    const auto id = static_cast<LinkId>(links_.size());
    links_.emplace_back(id, LinkEnd{src, src_port}, LinkEnd{dst, dst_port}, cfg, link_seed(seed_, id),
                        nodes_[src]->hears_tx_ready());
    if (src_port >= ports_[src].count) grow_ports(src, src_port + 1u);
    out_links_[ports_[src].first + src_port] = id;
    nodes_[src]->on_link_added(src_port, id);
    return id;
}

std::pair<LinkId, LinkId> Simulator::connect(NodeId a, PortId a_port, NodeId b, PortId b_port, const LinkConfig& cfg) {
    const LinkId ab = add_link(a, a_port, b, b_port, cfg);
    const LinkId ba = add_link(b, b_port, a, a_port, cfg);
    return {ab, ba};
}

void Simulator::grow_ports(NodeId node, uint32_t count) {
    std::vector<LinkId> flat;
    std::vector<NodePorts> ports(ports_.size());
    for (NodeId n = 0; n < ports_.size(); ++n) {
        ports[n] = NodePorts{static_cast<uint32_t>(flat.size()), n == node ? count : ports_[n].count};
        for (uint32_t p = 0; p < ports[n].count; ++p)
            flat.push_back(p < ports_[n].count ? out_links_[ports_[n].first + p] : kNoLink);
    }
    ports_.swap(ports);
    out_links_.swap(flat);
}

LinkId Simulator::out_link(NodeId node, PortId port) const {
    const NodePorts& p = ports_[node];
    return port < p.count ? out_links_[p.first + port] : kNoLink;
}

Link::Send Simulator::drop_no_link(FrameHandle h) {
    ++counters_.dropped_no_link;
    pool_.free(h);
    return Link::Send::Dropped;
}

bool Simulator::tx_idle(NodeId node, PortId port) const {
    const LinkId id = out_link(node, port);
    return id != kNoLink && links_[id].idle(now_);
}

void Simulator::arm_timer(Node& node, Nanos at) {
    Node::TimerState& t = node.timer_;
    at = std::max(at, now_);
    t.due = at;
    // A later time reuses the event already queued: when it fires early it
    // re-queues itself for `due`. Only an earlier time needs a new event.
    if (at < t.queued) {
        ++t.gen;
        t.queued = at;
        queue_.push(at, EventKind::Timer, node.node_id_, t.gen);
    }
}

void Simulator::fire_timer(const Event& e) {
    Node& node = *nodes_[e.target];
    Node::TimerState& t = node.timer_;
    if (e.arg != t.gen) {
        ++counters_.stale_timers;
        return;
    }
    t.queued = Nanos::max();
    if (t.due == Nanos::max()) {
        ++counters_.stale_timers;
        return;
    }
    if (t.due > e.time) {
        ++counters_.stale_timers;
        t.queued = t.due;
        queue_.push(t.due, EventKind::Timer, e.target, t.gen);
        return;
    }
    t.due = Nanos::max();
    node.on_timer(now_);
}

void Simulator::schedule_link_state(LinkId link, Nanos at, bool up) {
    queue_.push(std::max(at, now_), EventKind::LinkState, link, up ? 1 : 0);
}

// In a large fabric thousands of frames are in flight and the one the next
// event delivers was last touched thousands of events ago, so its headers,
// its link and the node it reaches are in memory, not in the cache. Loading
// them while this event runs hides that latency, which otherwise grows with
// the fabric: two events ahead the frame and the link (whose lines then
// arrive while this event and the next run), one event ahead the node the
// link leads to, whose id is only known once the link is loaded.
void Simulator::prefetch_event(const EventQueue::Slotted& n) const {
    if (n.kind() == EventKind::Deliver) pool_.prefetch(FrameHandle{static_cast<uint32_t>(n.arg)});
    if (n.kind() == EventKind::Deliver || n.kind() == EventKind::TxDone) links_[n.target].prefetch();
}

void Simulator::prefetch_ahead(const EventQueue::Ahead& a) const {
    if (a.n == 0) return;
    const EventQueue::Slotted& n = *a.ev[0];
    prefetch_event(n);
    if (n.kind() == EventKind::Deliver)
        __builtin_prefetch(nodes_[links_[n.target].dst().node]);
    else if (n.kind() == EventKind::TxDone)
        __builtin_prefetch(nodes_[links_[n.target].src().node]);
    else if (n.kind() == EventKind::Timer || n.kind() == EventKind::PortTimer)
        __builtin_prefetch(nodes_[n.target]);
    if (a.n == 2) prefetch_event(*a.ev[1]);
}

bool Simulator::step(Nanos limit) {
    Event e;
    EventQueue::Ahead ahead;
    if (!queue_.pop_due(limit, e, ahead)) return false;
    prefetch_ahead(ahead);
    now_ = e.time;
    ++counters_.events;
    ++counters_.events_by_kind[static_cast<std::size_t>(e.kind)];
    switch (e.kind) {
        case EventKind::Timer:
            fire_timer(e);
            break;
        case EventKind::TxDone: {
            Link& l = links_[e.target];
            if (l.on_tx_done(now_, queue_, pool_)) nodes_[l.src().node]->on_tx_ready(l.src().port, now_);
            break;
        }
        case EventKind::Deliver: {
            Link& l = links_[e.target];
            const FrameHandle h = l.on_deliver(e.arg, now_, pool_);
            if (h.valid()) nodes_[l.dst().node]->on_frame(l.dst().port, h, now_);
            break;
        }
        case EventKind::PortTimer:
            nodes_[e.target]->on_port_timer(static_cast<PortId>(e.arg), now_);
            break;
        case EventKind::LinkState: {
            Link& l = links_[e.target];
            if (l.set_up(e.arg != 0, pool_)) nodes_[l.src().node]->on_link_state(l.src().port, e.arg != 0, now_);
            break;
        }
    }
    return true;
}

void Simulator::run_until(Nanos t) {
    while (step(t)) {
    }
    now_ = std::max(now_, t);
}

void Simulator::run_until_idle() {
    while (step()) {
    }
}

}  // namespace rocemu::sim
