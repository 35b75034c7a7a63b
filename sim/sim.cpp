#include "sim/sim.hpp"

#include <algorithm>
#include <functional>
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

Simulator::Simulator(const SimConfig& cfg)
    : seed_(cfg.seed), pool_(cfg.max_frames), window_(cfg.window), reverse_order_(cfg.reverse_window_order) {
    if (window_ > Nanos{0}) queue_.set_keyed(1);
}

NodeId Simulator::add_node(Node& node) {
    if (queue_.keyed() && nodes_.size() + 2 > (uint32_t{1} << (64 - 8 - EventQueue::kOriginShift)))
        throw std::invalid_argument("time windows: more than 65534 nodes");
    nodes_.push_back(&node);
    if (queue_.keyed()) {
        queue_.set_keyed(static_cast<uint32_t>(nodes_.size() + 1));
        buckets_.emplace_back();
    }
    timers_.emplace_back();
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
    links_.emplace_back(id, LinkEnd{src, src_port}, LinkEnd{dst, dst_port}, cfg, link_seed(seed_, id));
    // A frame arrives no sooner than this after it starts (tx_end >= now).
    Nanos min_delay = cfg.propagation_delay;
    if (!cfg.paths.empty()) min_delay = *std::min_element(cfg.paths.begin(), cfg.paths.end());
    min_delay_ = std::min(min_delay_, min_delay);
    if (src_port >= ports_[src].count) grow_ports(src, src_port + 1u);
    out_links_[ports_[src].first + src_port] = id;
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

Link::Send Simulator::transmit(NodeId node, PortId port, FrameHandle h) {
    const LinkId id = out_link(node, port);
    if (id == kNoLink) {
        ++counters_.dropped_no_link;
        pool_.free(h);
        return Link::Send::Dropped;
    }
    return links_[id].send(h, now_, queue_, pool_);
}

bool Simulator::tx_idle(NodeId node, PortId port) const {
    const LinkId id = out_link(node, port);
    return id != kNoLink && links_[id].idle();
}

void Simulator::arm_timer(NodeId node, Nanos at) {
    TimerState& t = timers_[node];
    at = std::max(at, now_);
    t.due = at;
    // A later time reuses the event already queued: when it fires early it
    // re-queues itself for `due`. Only an earlier time needs a new event.
    if (at < t.queued) {
        ++t.gen;
        t.queued = at;
        queue_.push(at, EventKind::Timer, node, t.gen);
    }
}

void Simulator::cancel_timer(NodeId node) { timers_[node].due = Nanos::max(); }

void Simulator::fire_timer(const Event& e) {
    TimerState& t = timers_[e.target];
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
    nodes_[e.target]->on_timer(now_);
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
void Simulator::prefetch_event(const Event& n) const {
    if (n.kind == EventKind::Deliver) pool_.prefetch(FrameHandle{static_cast<uint32_t>(n.arg)});
    if (n.kind == EventKind::Deliver || n.kind == EventKind::TxDone) links_[n.target].prefetch();
}

void Simulator::prefetch_next() const {
    if (queue_.empty()) return;
    const Event n = queue_.top();
    prefetch_event(n);
    if (n.kind == EventKind::Deliver)
        __builtin_prefetch(nodes_[links_[n.target].dst().node]);
    else if (n.kind == EventKind::TxDone)
        __builtin_prefetch(nodes_[links_[n.target].src().node]);
    else if (n.kind == EventKind::Timer)
        __builtin_prefetch(nodes_[n.target]);
    if (Event after; queue_.peek_second(after)) prefetch_event(after);
}

bool Simulator::step() {
    if (queue_.empty()) return false;
    const Event e = queue_.pop();
    prefetch_next();
    if (queue_.keyed()) queue_.set_origin(owner(e) + 1);
    dispatch(e);
    return true;
}

void Simulator::dispatch(const Event& e) {
    now_ = e.time;
    ++counters_.events;
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
        case EventKind::LinkState: {
            Link& l = links_[e.target];
            if (l.set_up(e.arg != 0, pool_)) nodes_[l.src().node]->on_link_state(l.src().port, e.arg != 0, now_);
            break;
        }
    }
}

NodeId Simulator::owner(const Event& e) const {
    switch (e.kind) {
        case EventKind::Timer: return e.target;
        case EventKind::Deliver: return links_[e.target].dst().node;
        case EventKind::TxDone:
        case EventKind::LinkState: break;
    }
    return links_[e.target].src().node;
}

// One window [t, end): every event due in it is taken from the queue into
// its node's bucket, then each node runs its bucket merged with what it
// schedules for itself before `end` (the queue's local heap), in (time, seq)
// order. A bucket comes out of the queue in time order, so only ties at one
// ns can be out of seq order: an insertion sort puts them right in about one
// comparison an event. A link state change is read by both ends of its link
// (up_, epoch_), so a window holding one stops right after that ns and runs
// all its events in one (time, seq) order instead.
void Simulator::run_window(Nanos limit) {
    const int64_t start = queue_.top_time().v;
    const int64_t w = window().v;
    int64_t end = limit.v - start < w ? limit.v + 1 : start + w;
    bool serial = false;
    while (!queue_.empty() && queue_.top_time().v < end) {
        const Event e = queue_.pop();
        if (e.kind == EventKind::LinkState && !serial) {
            serial = true;
            end = e.time.v + 1;
        }
        const NodeId o = owner(e);
        std::vector<Event>& b = buckets_[o];
        if (b.empty()) touched_.push_back(o);
        b.push_back(e);
    }
    ++counters_.windows;
    queue_.set_window_end(end);
    tap_stage_.set_active(true);
    Nanos last = now_;
    const auto run_one = [&](const Event& e, NodeId o) {
        queue_.set_origin(o + 1);
        tap_stage_.set_origin(o + 1);
        last = std::max(last, e.time);
        dispatch(e);
    };
    if (serial) {
        ++counters_.serial_windows;
        for (const NodeId n : touched_) {
            for (const Event& e : buckets_[n]) queue_.push_local(e);
            buckets_[n].clear();
        }
        while (!queue_.local_empty()) {
            const Event e = queue_.pop_local();
            run_one(e, owner(e));
        }
    } else {
        if (reverse_order_)
            std::sort(touched_.begin(), touched_.end(), std::greater<>());
        else
            std::sort(touched_.begin(), touched_.end());
        for (const NodeId n : touched_) {
            std::vector<Event>& b = buckets_[n];
            for (std::size_t i = 1; i < b.size(); ++i) {
                const Event e = b[i];
                std::size_t j = i;
                for (; j > 0 && EventQueue::before(e, b[j - 1]); --j) b[j] = b[j - 1];
                b[j] = e;
            }
            std::size_t i = 0;
            for (;;) {
                if (!queue_.local_empty() && (i == b.size() || EventQueue::before(queue_.local_top(), b[i]))) {
                    const Event e = queue_.pop_local();
                    const NodeId o = owner(e);
                    if (o != n) ++counters_.window_violations;
                    run_one(e, o);
                } else if (i < b.size()) {
                    run_one(b[i++], n);
                } else {
                    break;
                }
            }
            b.clear();
        }
    }
    touched_.clear();
    queue_.set_window_end(INT64_MIN);
    queue_.set_origin(0);
    tap_stage_.set_active(false);
    tap_stage_.set_origin(0);
    tap_stage_.flush();
    now_ = last;
}

void Simulator::run_until(Nanos t) {
    if (window() > Nanos{0}) {
        while (!queue_.empty() && queue_.top_time() <= t) run_window(t);
    } else {
        while (!queue_.empty() && queue_.top_time() <= t) step();
    }
    now_ = std::max(now_, t);
}

void Simulator::run_until_idle() {
    if (window() > Nanos{0}) {
        while (!queue_.empty()) run_window(Nanos::max());
        return;
    }
    while (step()) {
    }
}

}  // namespace rocemu::sim
