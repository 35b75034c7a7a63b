#include "switch/switch.hpp"

#include <algorithm>
#include <bit>
#include <iterator>

#include <fmt/format.h>

#include "switch/red.hpp"

namespace rocemu::sw {

namespace {
// DWRR credit per unit of SCHEDULER weight: small enough that queues
// interleave within a few frames, large enough that SONiC's weights (14/15)
// cover a jumbo frame in one round.
constexpr int64_t kDwrrUnit = 1024;
// Room on_timer and the watchdog drain keep free so that later calls in the
// same batch never lose a PFC effect.
constexpr std::size_t kEffectReserve = 24;
// A pause quantum is 512 bit times.
constexpr Bytes pause_bytes(uint32_t quanta) { return Bytes{static_cast<uint64_t>(quanta) * 64}; }

std::size_t room(const Effects& fx) { return fx.capacity() - fx.size(); }

// Smallest Ethernet frame without FCS.
constexpr uint64_t kMinFrame = 60;
// Ethernet header plus one VLAN tag: what a frame may carry beyond the MTU.
constexpr uint64_t kL2Header = 18;

}  // namespace

Switch::Switch(const SwitchConfig& cfg)
    : cfg_(cfg),
      mmu_(cfg_),
      ports_(cfg_.ports.size()),
      pfc_refresh_interval_(cfg_.ports.size()),
      flowlets_(cfg_.routing.flowlet_table_size) {
    for (int q = 0; q < kNumTc; ++q) {
        queue_lossless_[q] = cfg_.queue_lossless_at(q);
        dwrr_quantum_[q] = static_cast<int64_t>(cfg_.scheduler[q].weight) * kDwrrUnit;
        if (cfg_.scheduler[q].strict) strict_mask_ |= static_cast<uint8_t>(1u << q);
    }
    // The MMU admits at most the shared pool plus every PG's reservation and
    // every lossless PG's headroom; sized for that in minimum frames, the
    // pool cannot run dry for real Ethernet frames.
    uint64_t per_port = 0;
    for (int pg = 0; pg < kNumTc; ++pg)
        per_port += cfg_.pg_lossless_at(pg) ? cfg_.pg_lossless.size.v + cfg_.pg_lossless.xoff.v : cfg_.pg_lossy.size.v;
    const uint64_t max_bytes = cfg_.pool_size.v + per_port * ports_.size();
    slots_.resize(max_bytes / kMinFrame + 1);
    for (std::size_t i = 0; i < slots_.size(); ++i)
        slots_[i].next = i + 1 < slots_.size() ? static_cast<uint32_t>(i + 1) : kNil;
    free_head_ = 0;
    for (std::size_t p = 0; p < ports_.size(); ++p) {
        max_frame_.push_back(cfg_.ports[p].mtu + kL2Header);
        speed_div_.push_back(ExactDiv(cfg_.ports[p].speed.v));
        const Nanos pause = cfg_.ports[p].speed.serialise(pause_bytes(cfg_.pause_quanta));
        pfc_refresh_interval_[p] = Nanos{std::max<int64_t>(1, pause.v * cfg_.refresh_percent / 100)};
        ports_[p].refresh_at.fill(Nanos::max());
    }
}

Effect& Switch::emit(Effects& fx, EffectKind kind, PortId port) {
    // Copied from a constant and filled in place: an Effect built on the
    // stack and copied in stalls on store forwarding, several times a packet.
    static constexpr Effect kBlank{};
    Effect* e = &overflow_sink_;
    if (fx.push_back(kBlank))
        e = &fx[fx.size() - 1];
    else
        ++effects_overflow_;
    e->kind = kind;
    e->port = port;
    return *e;
}

void Switch::drop(PortId counted_at, uint32_t handle, DropReason r, Effects& fx) {
    ++ports_[counted_at].c.drops[static_cast<std::size_t>(r)];
    Effect& e = emit(fx, EffectKind::Drop, counted_at);
    e.reason = r;
    e.handle = handle;
}

Nanos Switch::wire_time(PortId port, Bytes frame_len) const {
    const uint64_t num = (frame_len.v + kWireOverhead.v) * 8 * 1000000000ull;
    return Nanos{static_cast<int64_t>(speed_div_[port].ceil(num))};
}

bool Switch::eligible(const QueueState& qs, Nanos now) const {
    if (qs.empty()) return false;
    // A storm's drop action drains the queue in dequeue; it never transmits.
    if (qs.storm && cfg_.pfc_wd.action == WdAction::Drop) return false;
    if (!paused_at(qs, now)) return true;
    return qs.storm && cfg_.pfc_wd.action == WdAction::Forward;
}

uint8_t Switch::eligible_mask(const PortState& ps, Nanos now) const {
    // Nothing waiting is paused and no queue is in a storm (the usual case):
    // every non-empty queue may send.
    if (!((ps.nonempty & ps.paused) | ps.storms)) return ps.nonempty;
    uint8_t m = 0;
    for (unsigned bits = ps.nonempty; bits; bits &= bits - 1) {
        const int q = std::countr_zero(bits);
        if (eligible(ps.q[q], now)) m |= static_cast<uint8_t>(1u << q);
    }
    return m;
}

Switch::Slot Switch::pop(PortState& ps, int q) {
    QueueState& qs = ps.q[q];
    const uint32_t i = qs.head;
    const Slot s = slots_[i];
    qs.head = s.next;
    if (--qs.count == 0) {
        qs.tail = kNil;
        ps.nonempty &= static_cast<uint8_t>(~(1u << q));
    }
    slots_[i].next = free_head_;
    free_head_ = i;
    return s;
}

void Switch::arm_tx(PortId port, Nanos at, Effects& fx) {
    PortState& ps = ports_[port];
    if (ps.tx_armed) return;
    ps.tx_armed = true;
    emit(fx, EffectKind::TxReady, port).at = std::max(at, ps.busy_until);
}

uint32_t Switch::least_loaded(const std::vector<uint32_t>& members, uint64_t hash) const {
    // Start the scan at the hashed member so ties spread like ECMP does.
    const std::size_t n = members.size();
    const std::size_t start = hashed_member(hash, n);
    std::size_t best = start;
    Bytes best_load = mmu_.port_bytes(routes_.neighbor(members[start]).port);
    for (std::size_t i = 1; i < n; ++i) {
        const std::size_t k = (start + i) % n;
        const Bytes load = mmu_.port_bytes(routes_.neighbor(members[k]).port);
        if (load < best_load) {
            best_load = load;
            best = k;
        }
    }
    return static_cast<uint32_t>(best);
}

uint32_t Switch::adaptive_member(const std::vector<uint32_t>& members, uint32_t group, int tc, uint64_t h,
                                 Nanos now) {
    const std::size_t n = members.size();
    switch (cfg_.routing.adaptive[tc]) {
        case ArMode::Off: return hashed_member(h, n);
        case ArMode::PerPacket: return least_loaded(members, h);
        case ArMode::Flowlet: {
            Flowlet& f = flowlets_[h & (flowlets_.size() - 1)];
            if (f.group != group || now - f.last > cfg_.routing.flowlet_gap || f.member >= n) {
                f.group = group;
                f.member = least_loaded(members, h);
            }
            f.last = now;
            return f.member;
        }
    }
    return 0;
}

void Switch::send_pfc(PortId port, uint8_t bits, uint16_t quanta, Effects& fx) {
    Effect& e = emit(fx, EffectKind::SendPfc, port);
    e.pfc.class_enable = bits;
    PortCounters& c = ports_[port].c;
    for (int p = 0; p < kNumTc; ++p) {
        if (!((bits >> p) & 1)) continue;
        e.pfc.quanta[p] = quanta;
        ++(quanta ? c.pfc_tx_xoff[p] : c.pfc_tx_xon[p]);
    }
}

void Switch::xoff(PortId in, int pg, Nanos now, Effects& fx) {
    timer_dirty_ = true;
    mmu_.set_xoff(in, pg, true);
    ports_[in].refresh_at[pg] = now + pfc_refresh_interval_[in];
    send_pfc(in, static_cast<uint8_t>(1u << pg), cfg_.pause_quanta, fx);
}

void Switch::on_packet(const PacketDesc& d, Nanos now, Rng& rng, Effects& fx) {
    if (d.in_port >= ports_.size()) {
        ++bad_port_drops_;
        Effect& e = emit(fx, EffectKind::Drop, 0);
        e.reason = DropReason::BadPort;
        e.handle = d.handle;
        return;
    }
    PortState& in = ports_[d.in_port];
    ++in.c.rx_pkts;
    in.c.rx_bytes += d.frame_len.v;

    const int tc = cfg_.dscp_to_tc[d.dscp & 63];
    const int pg = cfg_.tc_to_pg[tc];
    const int q = cfg_.tc_to_queue[tc];

    const uint32_t group = routes_.route(d);
    if (group == RouteTable::kNoRoute) return drop(d.in_port, d.handle, DropReason::NoRoute, fx);
    if (group == RouteTable::kUnresolved) return drop(d.in_port, d.handle, DropReason::NeighborMiss, fx);
    const auto& members = routes_.group(group);
    if (members.empty()) return drop(d.in_port, d.handle, DropReason::NoRoute, fx);
    uint32_t pick = 0;
    if (const std::size_t n = members.size(); n > 1) {
        const uint64_t h = flow_hash(d, cfg_.routing.hash_fields, cfg_.routing.hash_seed);
        pick = cfg_.routing.adaptive[tc] == ArMode::Off ? hashed_member(h, n)
                                                         : adaptive_member(members, group, tc, h, now);
    }
    const uint32_t nb = members[pick];
    const PortId out = routes_.neighbor(nb).port;
    PortState& op = ports_[out];
    QueueState& qs = op.q[q];

    auto egress_drop = [&](DropReason r) {
        ++qs.c.drops;
        drop(out, d.handle, r, fx);
    };
    if (d.frame_len.v > max_frame_[out]) return egress_drop(DropReason::MtuExceeded);
    if (qs.storm && cfg_.pfc_wd.action == WdAction::Drop) {
        ++qs.c.wd_drops;
        return egress_drop(DropReason::PfcWatchdog);
    }
    // SONiC's drop action also discards what the stormed port keeps sending
    // on that priority: its peer is the likely source of the storm.
    if (in.q[q].storm && cfg_.pfc_wd.action == WdAction::Drop) {
        ++in.q[q].c.wd_drops;
        return drop(d.in_port, d.handle, DropReason::PfcWatchdog, fx);
    }
    const Mmu::Verdict v = mmu_.query_ingress(d.in_port, pg, d.frame_len);
    if (v.region == Mmu::Region::Rejected) return drop(d.in_port, d.handle, v.reason, fx);
    if (!mmu_.query_egress(out, q, d.frame_len)) return egress_drop(DropReason::EgressQueueLimit);
    if (free_head_ == kNil) return egress_drop(DropReason::NoDescriptor);
    bool mark = false;
    if (cfg_.wred_stage == WredStage::Enqueue) {
        const RedVerdict rv = red_decide(cfg_.wred[q], mmu_.queue_bytes(out, q), d.ecn, rng);
        if (rv == RedVerdict::Drop) return egress_drop(DropReason::WredDrop);
        mark = rv == RedVerdict::Mark && d.ecn != kEcnCe;
    }

    mmu_.commit(d.in_port, pg, out, q, d.frame_len, v.region);
    op.nonempty |= static_cast<uint8_t>(1u << q);
    const uint32_t i = free_head_;
    free_head_ = slots_[i].next;
    slots_[i] = Slot{d.handle, static_cast<uint32_t>(d.frame_len.v), kNil, d.in_port, static_cast<uint8_t>(pg), d.ecn};
    if (qs.tail == kNil)
        qs.head = i;
    else
        slots_[qs.tail].next = i;
    qs.tail = i;
    ++qs.count;
    // A paused queue that fills starts counting towards the watchdog.
    if (qs.paused) timer_dirty_ = true;
    ++qs.c.enq_pkts;
    qs.c.enq_bytes += d.frame_len.v;
    qs.c.watermark = std::max(qs.c.watermark, mmu_.queue_bytes(out, q));

    Effect& e = emit(fx, EffectKind::Enqueued, out);
    e.queue = static_cast<uint8_t>(q);
    e.handle = d.handle;
    e.neighbor = nb;
    if (mark) {
        ++qs.c.ecn_marks;
        Effect& m = emit(fx, EffectKind::MarkCe, out);
        m.queue = static_cast<uint8_t>(q);
        m.handle = d.handle;
    }
    if (mmu_.should_xoff(d.in_port, pg)) xoff(d.in_port, pg, now, fx);

    // A queue may have been paused past detection_time while empty; the
    // watchdog only calls that a storm once something is stuck behind it.
    if (cfg_.pfc_wd.enabled && queue_lossless_[q] && !qs.storm && paused_at(qs, now) &&
        now - qs.pause_start >= cfg_.pfc_wd.detection_time)
        watchdog_detect(out, q, now, fx);
    if (eligible(qs, now)) arm_tx(out, now, fx);
}

std::size_t Switch::on_burst(const PacketDesc* d, std::size_t n, Nanos now, Rng& rng, Effects& fx) {
    std::size_t i = 0;
    for (; i < n && room(fx) >= kMaxEffectsPerPacket; ++i) on_packet(d[i], now, rng, fx);
    return i;
}

void Switch::release(PortId out, int q, const Slot& s, Effects& fx) {
    mmu_.release(s.in_port, s.pg, out, q, Bytes{s.len});
    if (mmu_.should_xon(s.in_port, s.pg)) {
        mmu_.set_xoff(s.in_port, s.pg, false);
        ports_[s.in_port].refresh_at[s.pg] = Nanos::max();
        send_pfc(s.in_port, static_cast<uint8_t>(1u << s.pg), 0, fx);
    }
}

int Switch::pick_queue(PortState& ps, Nanos now) {
    const uint8_t elig = eligible_mask(ps, now);
    if (!elig) return -1;
    if (const uint8_t strict = elig & strict_mask_) return 31 - std::countl_zero(static_cast<unsigned>(strict));
    if ((elig & (elig - 1)) == 0) {
        // A sole contender needs no arbitration and earns no credit.
        const int q = std::countr_zero(static_cast<unsigned>(elig));
        ps.q[q].deficit = 0;
        ps.q[q].credited = false;
        ps.dwrr_cur = static_cast<uint8_t>(q);
        return q;
    }
    // Terminates: an eligible DWRR queue gains a quantum on every visit.
    for (;;) {
        const int q = ps.dwrr_cur;
        QueueState& qs = ps.q[q];
        if (!((elig >> q) & 1)) {
            qs.deficit = 0;
            qs.credited = false;
            ps.dwrr_cur = static_cast<uint8_t>((q + 1) % kNumTc);
            continue;
        }
        if (!qs.credited) {
            qs.deficit += dwrr_quantum_[q];
            qs.credited = true;
        }
        const int64_t head_len = slots_[qs.head].len;
        if (head_len <= qs.deficit) {
            qs.deficit -= head_len;
            return q;
        }
        qs.credited = false;
        ps.dwrr_cur = static_cast<uint8_t>((q + 1) % kNumTc);
    }
}

std::optional<TxDesc> Switch::dequeue(PortId port, Nanos now, Rng& rng, Effects& fx) {
    if (port >= ports_.size()) return std::nullopt;
    PortState& ps = ports_[port];
    ps.tx_armed = false;
    TxDesc tx;
    if (!dequeue_frame(port, now, rng, fx, tx)) return std::nullopt;
    if (has_eligible(ps, now)) arm_tx(port, ps.busy_until, fx);
    return tx;
}

std::size_t Switch::dequeue_burst(PortId port, Nanos from, Nanos now, TxDesc* out, std::size_t max, Rng& rng,
                                  Effects& fx) {
    if (port >= ports_.size()) return 0;
    PortState& ps = ports_[port];
    ps.tx_armed = false;
    std::size_t n = 0;
    Nanos t = std::max(from, ps.busy_until);
    // Each frame starts when the previous one ends, as successive dequeue
    // calls at the TxReady times would have it; only the TxReady between
    // them is left out.
    while (n < max && t <= now && room(fx) > kEffectReserve) {
        // Nothing sent: dequeue_frame armed the port if something waits.
        if (!dequeue_frame(port, t, rng, fx, out[n])) return n;
        ++n;
        if (ps.tx_armed || !has_eligible(ps, t)) return n;
        t = ps.busy_until;
    }
    if (has_eligible(ps, t)) arm_tx(port, t, fx);
    return n;
}

bool Switch::dequeue_frame(PortId port, Nanos now, Rng& rng, Effects& fx, TxDesc& tx) {
    PortState& ps = ports_[port];

    if (ps.storms && cfg_.pfc_wd.action == WdAction::Drop) {
        for (int q = 0; q < kNumTc; ++q) {
            QueueState& qs = ps.q[q];
            while (qs.storm && !qs.empty() && room(fx) > kEffectReserve) {
                const Slot s = pop(ps, q);
                release(port, q, s, fx);
                ++qs.c.drops;
                ++qs.c.wd_drops;
                drop(port, s.handle, DropReason::PfcWatchdog, fx);
            }
            // Out of effect room: come back for the rest.
            if (qs.storm && !qs.empty()) arm_tx(port, now, fx);
        }
    }

    if (now < ps.busy_until) {
        if (has_eligible(ps, now)) arm_tx(port, ps.busy_until, fx);
        return false;
    }
    const int q = pick_queue(ps, now);
    if (q < 0) return false;
    QueueState& qs = ps.q[q];
    const Slot s = pop(ps, q);
    if (qs.empty() && !cfg_.scheduler[q].strict) {
        qs.deficit = 0;
        qs.credited = false;
        ps.dwrr_cur = static_cast<uint8_t>((q + 1) % kNumTc);
    }
    release(port, q, s, fx);
    if (cfg_.wred_stage == WredStage::Dequeue) {
        const RedVerdict rv = red_decide(cfg_.wred[q], mmu_.queue_bytes(port, q), s.ecn, rng);
        if (rv == RedVerdict::Drop) {
            ++qs.c.drops;
            drop(port, s.handle, DropReason::WredDrop, fx);
            if (has_eligible(ps, now)) arm_tx(port, now, fx);
            return false;
        }
        if (rv == RedVerdict::Mark && s.ecn != kEcnCe) {
            ++qs.c.ecn_marks;
            Effect& m = emit(fx, EffectKind::MarkCe, port);
            m.queue = static_cast<uint8_t>(q);
            m.handle = s.handle;
        }
    }
    const Bytes len{s.len};
    ++qs.c.tx_pkts;
    qs.c.tx_bytes += len.v;
    ++ps.c.tx_pkts;
    ps.c.tx_bytes += len.v;
    tx.handle = s.handle;
    tx.queue = static_cast<uint8_t>(q);
    tx.frame_len = len;
    tx.start = now;
    tx.end = now + wire_time(port, len);
    ps.busy_until = tx.end;
    return true;
}

void Switch::end_pause(PortState& ps, int q, Nanos at) {
    QueueState& qs = ps.q[q];
    qs.c.paused_time += at - qs.pause_start;
    qs.paused = false;
    ps.paused &= static_cast<uint8_t>(~(1u << q));
}

void Switch::expire_pause(PortState& ps, int q, Nanos now) {
    const QueueState& qs = ps.q[q];
    if (qs.paused && qs.paused_until <= now) end_pause(ps, q, qs.paused_until);
}

void Switch::on_pfc(PortId port, const PfcFrameDesc& f, Nanos now, Effects& fx) {
    if (port >= ports_.size()) return;
    timer_dirty_ = true;
    PortState& ps = ports_[port];
    for (int p = 0; p < kNumTc; ++p) {
        if (!((f.class_enable >> p) & 1)) continue;
        ++ps.c.pfc_rx[p];
        const int q = cfg_.tc_to_queue[p];
        QueueState& qs = ps.q[q];
        expire_pause(ps, q, now);
        if (f.quanta[p] == 0) {
            if (qs.paused) end_pause(ps, q, now);
            continue;
        }
        qs.last_pfc_rx = now;
        if (qs.storm && cfg_.pfc_wd.action != WdAction::Alert) continue;
        if (!qs.paused) {
            qs.paused = true;
            ps.paused |= static_cast<uint8_t>(1u << q);
            qs.pause_start = now;
        }
        // A new frame replaces whatever pause time was left (802.1Qbb).
        qs.paused_until = now + cfg_.ports[port].speed.serialise(pause_bytes(f.quanta[p]));
    }
    if (has_eligible(ps, now)) arm_tx(port, now, fx);
}

void Switch::watchdog_detect(PortId port, int q, Nanos now, Effects& fx) {
    QueueState& qs = ports_[port].q[q];
    timer_dirty_ = true;
    qs.storm = true;
    ++ports_[port].storms;
    ++qs.c.wd_storms;
    emit(fx, EffectKind::WatchdogStorm, port).queue = static_cast<uint8_t>(q);
    if (cfg_.pfc_wd.action == WdAction::Alert) return;
    if (qs.paused) end_pause(ports_[port], q, now);
    // Forward makes the queue sendable again; drop needs a dequeue to drain it.
    arm_tx(port, now, fx);
}

void Switch::watchdog_restore(PortId port, int q, Effects& fx) {
    QueueState& qs = ports_[port].q[q];
    qs.storm = false;
    --ports_[port].storms;
    ++qs.c.wd_restores;
    emit(fx, EffectKind::WatchdogRestore, port).queue = static_cast<uint8_t>(q);
}

void Switch::on_timer(Nanos now, Effects& fx) {
    timer_dirty_ = true;
    const PfcWdConfig& wd = cfg_.pfc_wd;
    for (std::size_t pi = 0; pi < ports_.size(); ++pi) {
        if (room(fx) < kEffectReserve) return;
        const PortId port = static_cast<PortId>(pi);
        PortState& ps = ports_[pi];
        uint8_t refresh = 0;
        for (int pg = 0; pg < kNumTc; ++pg) {
            if (ps.refresh_at[pg] > now) continue;
            refresh |= static_cast<uint8_t>(1u << pg);
            ps.refresh_at[pg] = now + pfc_refresh_interval_[pi];
        }
        if (refresh) send_pfc(port, refresh, cfg_.pause_quanta, fx);
        for (int q = 0; q < kNumTc; ++q) {
            QueueState& qs = ps.q[q];
            expire_pause(ps, q, now);
            if (!wd.enabled || !queue_lossless_[q]) continue;
            if (!qs.storm && paused_at(qs, now) && !qs.empty() && now - qs.pause_start >= wd.detection_time)
                watchdog_detect(port, q, now, fx);
            else if (qs.storm && now - qs.last_pfc_rx >= wd.restoration_time)
                watchdog_restore(port, q, fx);
        }
        if (has_eligible(ps, now)) arm_tx(port, now, fx);
    }
}

Nanos Switch::next_timer() const {
    if (timer_dirty_) {
        next_timer_cache_ = compute_next_timer();
        timer_dirty_ = false;
    }
    return next_timer_cache_;
}

Nanos Switch::compute_next_timer() const {
    const PfcWdConfig& wd = cfg_.pfc_wd;
    Nanos t = Nanos::max();
    for (const PortState& ps : ports_) {
        for (const Nanos r : ps.refresh_at) t = std::min(t, r);
        for (int q = 0; q < kNumTc; ++q) {
            const QueueState& qs = ps.q[q];
            if (qs.paused) t = std::min(t, qs.paused_until);
            if (!wd.enabled || !queue_lossless_[q]) continue;
            if (qs.storm)
                t = std::min(t, qs.last_pfc_rx + wd.restoration_time);
            else if (qs.paused && !qs.empty())
                t = std::min(t, qs.pause_start + wd.detection_time);
        }
    }
    return t;
}

std::string Switch::describe(const Effect& e) const {
    const std::string_view port = e.port < cfg_.ports.size() ? std::string_view(cfg_.ports[e.port].name) : "?";
    // The watchdog works per queue; operators think in PFC priorities.
    std::string prios;
    for (int p = 0; p < kNumTc; ++p)
        if (cfg_.tc_to_queue[p] == e.queue) prios += fmt::format("{}{}", prios.empty() ? "" : ",", p);
    switch (e.kind) {
        case EffectKind::WatchdogStorm:
            return fmt::format("PFC watchdog: storm detected on {} priority {} (queue {}, action {})", port, prios,
                               e.queue, kWdActionNames[static_cast<std::size_t>(cfg_.pfc_wd.action)]);
        case EffectKind::WatchdogRestore:
            return fmt::format("PFC watchdog: storm restored on {} priority {} (queue {})", port, prios, e.queue);
        case EffectKind::Drop:
            return fmt::format("drop handle {} at {}: {}", e.handle, port, drop_reason_name(e.reason));
        case EffectKind::SendPfc:
            return fmt::format("send PFC on {} class_enable {:#04x}", port, e.pfc.class_enable);
        case EffectKind::Enqueued:
            return fmt::format("enqueue handle {} on {} queue {}", e.handle, port, e.queue);
        case EffectKind::MarkCe: return fmt::format("mark CE on handle {}", e.handle);
        case EffectKind::TxReady: return fmt::format("{} ready at {} ns", port, e.at.v);
    }
    return {};
}

std::string Switch::dump(Nanos now) const {
    std::string out;
    for (std::size_t p = 0; p < ports_.size(); ++p) {
        const PortState& ps = ports_[p];
        const PortId id = static_cast<PortId>(p);
        fmt::format_to(std::back_inserter(out), "{}: rx {} pkts {} B, tx {} pkts {} B, paused {} ns\n",
                       cfg_.ports[p].name, ps.c.rx_pkts, ps.c.rx_bytes, ps.c.tx_pkts, ps.c.tx_bytes,
                       port_paused_time(id, now).v);
        for (std::size_t r = 0; r < ps.c.drops.size(); ++r)
            if (ps.c.drops[r])
                fmt::format_to(std::back_inserter(out), "  drop {}: {}\n",
                               drop_reason_name(static_cast<DropReason>(r)), ps.c.drops[r]);
        for (int pr = 0; pr < kNumTc; ++pr)
            if (ps.c.pfc_rx[pr] || ps.c.pfc_tx_xoff[pr] || ps.c.pfc_tx_xon[pr])
                fmt::format_to(std::back_inserter(out), "  pfc prio {}: rx {} tx xoff {} tx xon {}\n", pr,
                               ps.c.pfc_rx[pr], ps.c.pfc_tx_xoff[pr], ps.c.pfc_tx_xon[pr]);
        for (int q = 0; q < kNumTc; ++q) {
            const QueueCounters& c = ps.q[q].c;
            if (!c.enq_pkts && !c.drops && !ps.q[q].paused) continue;
            fmt::format_to(std::back_inserter(out),
                           "  q{}: depth {} B (max {} B), enq {}, tx {} pkts {} B, drops {}, ecn {}, paused {} ns{}\n",
                           q, mmu_.queue_bytes(id, q).v, c.watermark.v, c.enq_pkts, c.tx_pkts, c.tx_bytes, c.drops,
                           c.ecn_marks, paused_time(id, q, now).v, ps.q[q].storm ? ", PFC storm" : "");
        }
    }
    return out;
}

Nanos Switch::paused_time(PortId p, int q, Nanos now) const {
    const QueueState& qs = ports_[p].q[q];
    Nanos t = qs.c.paused_time;
    if (qs.paused) t += std::min(now, qs.paused_until) - qs.pause_start;
    return t;
}

Nanos Switch::port_paused_time(PortId p, Nanos now) const {
    Nanos t{};
    for (int q = 0; q < kNumTc; ++q) t += paused_time(p, q, now);
    return t;
}

}  // namespace rocemu::sw
