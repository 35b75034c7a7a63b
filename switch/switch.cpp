#include "switch/switch.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <iterator>
#include <type_traits>

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
    : hot_(cfg.ports.size()),
      queue_hot_(cfg.ports.size() * kNumTc),
      num_ports_(static_cast<uint32_t>(cfg.ports.size())),
      wred_dequeue_(cfg.wred_stage == WredStage::Dequeue),
      hash_fields_(cfg.routing.hash_fields),
      hash_seed_(cfg.routing.hash_seed),
      hash_l4_mask_(flow_hash_l4_mask(cfg.routing.hash_fields)),
      adaptive_(cfg.routing.adaptive),
      cfg_(cfg),
      mmu_(cfg_),
      cold_(cfg_.ports.size()),
      pfc_refresh_interval_(cfg_.ports.size()),
      flowlets_(cfg_.routing.flowlet_table_size) {
    for (int q = 0; q < kNumTc; ++q) {
        queue_lossless_[q] = cfg_.queue_lossless_at(q);
        dwrr_quantum_[q] = static_cast<int64_t>(cfg_.scheduler[q].weight) * kDwrrUnit;
        if (cfg_.scheduler[q].strict) strict_mask_ |= static_cast<uint8_t>(1u << q);
        // Above Kmin, admit() asks red_decide, which passes without a draw
        // when the profile is off.
        fast_kmin_[q] = cfg_.wred_stage == WredStage::Enqueue && cfg_.wred[q].active()
                            ? cfg_.wred[q].green_min_threshold
                            : Bytes{~uint64_t{0}};
    }
    for (std::size_t dscp = 0; dscp < dscp_pg_bit_.size(); ++dscp)
        dscp_pg_bit_[dscp] = static_cast<uint8_t>(1u << cfg_.tc_to_pg[cfg_.dscp_to_tc[dscp]]);
    // The MMU admits at most the shared pool plus every PG's reservation and
    // every lossless PG's headroom; sized for that in minimum frames, the
    // pool cannot run dry for real Ethernet frames.
    uint64_t per_port = 0;
    for (int pg = 0; pg < kNumTc; ++pg)
        per_port += cfg_.pg_lossless_at(pg) ? cfg_.pg_lossless.size.v + cfg_.pg_lossless.xoff.v : cfg_.pg_lossy.size.v;
    const uint64_t max_bytes = cfg_.pool_size.v + per_port * hot_.size();
    // Allocated, not written: a descriptor's page is touched when the free
    // list first reaches it (link_fresh), so a big pool (4.5 MiB a switch in
    // a 256-host fabric) costs only what a run uses.
    slot_count_ = static_cast<uint32_t>(max_bytes / kMinFrame + 1);
    slots_.reset(new Slot[slot_count_]);
    for (std::size_t p = 0; p < hot_.size(); ++p) {
        speed_div_.push_back(ExactDiv(cfg_.ports[p].speed.v));
        const Nanos pause = cfg_.ports[p].speed.serialise(pause_bytes(cfg_.pause_quanta));
        pfc_refresh_interval_[p] = Nanos{std::max<int64_t>(1, pause.v * cfg_.refresh_percent / 100)};
    }
    reset();
}

// Everything a packet, a PFC frame or a timer can change, set as a new
// switch has it: the constructor ends here, so a reset switch is a new one.
void Switch::reset() {
    std::fill(hot_.begin(), hot_.end(), PortHot{});
    for (std::size_t p = 0; p < hot_.size(); ++p) hot_[p].max_frame = cfg_.ports[p].mtu + kL2Header;
    std::fill(queue_hot_.begin(), queue_hot_.end(), QueueHot{});
    // Descriptors as a new pool has them: zero, on the free list in index
    // order (nothing should read a free one; if something did, it reads what
    // it would in a new switch). Linked a chunk at a time, when the list runs
    // dry (link_fresh): the list hands out the same slots in the same order
    // as one linked whole.
    free_head_ = kNil;
    fresh_ = 0;
    link_fresh();
    storming_ = 0;
    timer_dirty_ = true;
    next_timer_cache_ = Nanos{};
    mmu_.reset();
    for (PortCold& c : cold_) {
        c = PortCold{};
        c.refresh_at.fill(Nanos::max());
    }
    std::fill(flowlets_.begin(), flowlets_.end(), Flowlet{});
    effects_overflow_ = 0;
    fast_admits_ = 0;
    bad_port_drops_ = 0;
    overflow_sink_ = Effect{};
    routes_.clear_cache();
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

void Switch::egress_drop(PortId out, int q, uint32_t handle, DropReason r, Effects& fx) {
    ++cold_[out].q[q].drops;
    drop(out, handle, r, fx);
}

void Switch::drop(PortId counted_at, uint32_t handle, DropReason r, Effects& fx) {
    ++cold_[counted_at].drops[static_cast<std::size_t>(r)];
    Effect& e = emit(fx, EffectKind::Drop, counted_at);
    e.reason = r;
    e.handle = handle;
}

Nanos Switch::wire_time(const ExactDiv& speed, Bytes frame_len) {
    const uint64_t num = (frame_len.v + kWireOverhead.v) * 8 * 1000000000ull;
    return Nanos{static_cast<int64_t>(speed.ceil(num))};
}

bool Switch::eligible(PortId p, int q, Nanos now) const {
    const PortHot& ph = hot_[p];
    if (!((ph.nonempty >> q) & 1)) return false;
    const bool storm = (ph.storms >> q) & 1;
    // A storm's drop action drains the queue in dequeue; it never transmits.
    if (storm && cfg_.pfc_wd.action == WdAction::Drop) return false;
    if (!paused_at(p, q, now)) return true;
    return storm && cfg_.pfc_wd.action == WdAction::Forward;
}

uint8_t Switch::eligible_mask_held(PortId p, Nanos now) const {
    const PortHot& ph = hot_[p];
    const uint8_t held = ph.paused | ph.storms;
    uint8_t m = ph.nonempty & static_cast<uint8_t>(~held);
    const PortCold& pc = cold_[p];
    const WdAction action = cfg_.pfc_wd.action;
    // Decided as eligible() does.
    for (unsigned bits = ph.nonempty & held; bits; bits &= bits - 1) {
        const int q = std::countr_zero(bits);
        const uint8_t bit = static_cast<uint8_t>(1u << q);
        const bool storm = ph.storms & bit;
        if (storm && action == WdAction::Drop) continue;
        const bool paused = (ph.paused & bit) && pc.q[q].paused_until > now;
        if (!paused || (storm && action == WdAction::Forward)) m |= bit;
    }
    return m;
}

bool Switch::link_fresh() {
    if (fresh_ == slot_count_) return false;
    const uint32_t n = std::min(kSlotChunk, slot_count_ - fresh_);
    // One memset and a pointer loop: std::fill and indexing cost 4x as much
    // in the fuzz build, whose sanitizers check every slot.
    static_assert(std::is_trivially_copyable_v<Slot>);
    Slot* s = slots_.get() + fresh_;
    std::memset(static_cast<void*>(s), 0, n * sizeof(Slot));
    uint32_t next = fresh_;
    for (Slot* const last = s + n - 1; s != last; ++s) s->next = ++next;
    s->next = free_head_;
    free_head_ = fresh_;
    fresh_ += n;
    return true;
}

Switch::Slot Switch::pop(PortId p, int q) {
    QueueHot& qs = qhot(p, q);
    const uint32_t i = qs.head;
    const Slot s = slots_[i];
    qs.head = s.next;
    if (--qs.count == 0) {
        qs.tail = kNil;
        hot_[p].nonempty &= static_cast<uint8_t>(~(1u << q));
    }
    slots_[i].next = free_head_;
    free_head_ = i;
    return s;
}

void Switch::arm_tx(PortId port, Nanos at, Effects& fx) {
    PortHot& ps = hot_[port];
    if (ps.tx_armed) return;
    ps.tx_armed = true;
    emit(fx, EffectKind::TxReady, port).at = std::max(at, ps.busy_until);
}

uint32_t Switch::least_loaded(const RouteTable::Group& g, uint64_t hash) const {
    // Start the scan at the hashed member so ties spread like ECMP does.
    const std::size_t n = g.size;
    const std::size_t start = hashed_member(hash, n);
    std::size_t best = start;
    Bytes best_load = mmu_.port_bytes(routes_.member(g.first + static_cast<uint32_t>(start)).port);
    for (std::size_t i = 1; i < n; ++i) {
        const std::size_t k = (start + i) % n;
        const Bytes load = mmu_.port_bytes(routes_.member(g.first + static_cast<uint32_t>(k)).port);
        if (load < best_load) {
            best_load = load;
            best = k;
        }
    }
    return static_cast<uint32_t>(best);
}

uint32_t Switch::adaptive_member(const RouteTable::Group& g, uint32_t group, int tc, uint64_t h, Nanos now) {
    // route_packet hands Off groups their ECMP member itself, so only the
    // two adaptive modes get here.
    if (adaptive_[tc] == ArMode::PerPacket) return least_loaded(g, h);
    Flowlet& f = flowlets_[h & (flowlets_.size() - 1)];
    if (f.group != group || now - f.last > cfg_.routing.flowlet_gap || f.member >= g.size) {
        f.group = group;
        f.member = least_loaded(g, h);
    }
    f.last = now;
    return f.member;
}

void Switch::send_pfc(PortId port, uint8_t bits, uint16_t quanta, Effects& fx) {
    Effect& e = emit(fx, EffectKind::SendPfc, port);
    e.pfc.class_enable = bits;
    PortCold& c = cold_[port];
    for (int p = 0; p < kNumTc; ++p) {
        if (!((bits >> p) & 1)) continue;
        e.pfc.quanta[p] = quanta;
        ++(quanta ? c.pfc_tx_xoff[p] : c.pfc_tx_xon[p]);
    }
}

void Switch::xoff(PortId in, int pg, Nanos now, Effects& fx) {
    timer_dirty_ = true;
    mmu_.set_xoff(in, pg, true);
    cold_[in].refresh_at[pg] = now + pfc_refresh_interval_[in];
    send_pfc(in, static_cast<uint8_t>(1u << pg), cfg_.pause_quanta, fx);
}

// The packet into the free descriptor `free` (which moves to the next one),
// at the tail of `qs`, counted there.
[[gnu::always_inline]] inline void Switch::link_slot(Slot* slots, uint32_t& free, QueueHot& qs, const PacketDesc& d,
                                                     uint8_t pg) {
    const uint32_t i = free;
    free = slots[i].next;
    slots[i] = Slot{d.handle, static_cast<uint32_t>(d.frame_len.v), kNil, d.in_port, pg, d.ecn};
    if (qs.tail == kNil)
        qs.head = i;
    else
        slots[qs.tail].next = i;
    qs.tail = i;
    ++qs.count;
    ++qs.enq_pkts;
    qs.enq_bytes += d.frame_len.v;
}

// Inlined into on_packet and on_burst: as calls, passing a Routed between
// them cost about 50 instructions a packet (cachegrind, fabric bench).
[[gnu::always_inline]] inline Switch::Routed Switch::route_packet(const PacketDesc& d, RouteMemo& memo) const {
    // Not value-initialised (3 stores a packet): every path sets every
    // field, the usual one (routed, ECMP) without a store twice.
    Routed r;
    r.adaptive = false;
    // A drop: the fields it does not decide are zero (a bad port's tc, pg, q too).
    const auto dropped = [&r](DropReason why) {
        r.drop = why;
        r.nb = r.group = 0;
        r.out = 0;
        r.hash = 0;
        return r;
    };
    if (d.in_port >= num_ports_) {
        r.tc = r.pg = r.q = 0;
        return dropped(DropReason::BadPort);
    }
    r.drop = DropReason::kCount;
    r.tc = cfg_.dscp_to_tc[d.dscp & 63];
    r.pg = cfg_.tc_to_pg[r.tc];
    r.q = cfg_.tc_to_queue[r.tc];
    // Routes do not change within a burst: the same IPv4 destination as the
    // packet before takes the same group.
    if (d.ipv6 || !memo.valid || memo.dst != d.dst_v4) {
        const RouteTable::Routed rt = routes_.route_group(d);
        const uint32_t group = rt.group;
        memo = RouteMemo{.valid = !d.ipv6, .hashed = false, .dst = d.dst_v4, .src = 0, .group = group, .addrs = 0};
        memo.drop = group == RouteTable::kNoRoute      ? DropReason::NoRoute
                    : group == RouteTable::kUnresolved ? DropReason::NeighborMiss
                                                       : DropReason::kCount;
        if (memo.drop == DropReason::kCount) {
            memo.g = rt.g;
            if (memo.g.size == 0) memo.drop = DropReason::NoRoute;
        }
    }
    if (memo.drop != DropReason::kCount) return dropped(memo.drop);
    const RouteTable::Group& g = memo.g;
    r.group = memo.group;
    uint32_t pick = 0;
    r.hash = 0;
    if (g.size > 1) {
        const uint8_t fields = hash_fields_;
        if (d.ipv6) {
            r.hash = flow_hash(d, fields, hash_seed_);
        } else {
            if (!memo.hashed || memo.src != d.src_v4) {
                memo.addrs = flow_hash_addrs(d, fields, hash_seed_);
                memo.src = d.src_v4;
                memo.hashed = true;
            }
            r.hash = flow_hash_rest_masked(memo.addrs, d, hash_l4_mask_);
        }
        // Adaptive picks read queue occupancy, which the packets ahead in
        // the burst change: they wait for admit() (which sets nb and out).
        if (adaptive_[r.tc] != ArMode::Off) {
            r.adaptive = true;
            r.nb = 0;
            r.out = 0;
            return r;
        }
        pick = hashed_member(r.hash, g.size);
    }
    const RouteTable::Member& m = routes_.member(g.first + pick);
    r.nb = m.neighbor;
    r.out = m.port;
    return r;
}

void Switch::prefetch(const PacketDesc& d, const Routed& r) const {
    if (r.drop != DropReason::kCount) return;
    __builtin_prefetch(&hot_[d.in_port], 1);
    mmu_.prefetch_pg(d.in_port, r.pg);
    if (r.adaptive) return;
    __builtin_prefetch(&hot_[r.out], 1);
    __builtin_prefetch(&qhot(r.out, r.q), 1);
    mmu_.prefetch_queue(r.out, r.q);
}

[[gnu::always_inline]] inline void Switch::admit(const PacketDesc& d, const Routed& r, bool far, bool counted,
                                                 Nanos now, Rng& rng, Effects& fx, uint32_t* next_hop) {
    if (r.drop == DropReason::BadPort) [[unlikely]] {
        ++bad_port_drops_;
        Effect& e = emit(fx, EffectKind::Drop, 0);
        e.reason = DropReason::BadPort;
        e.handle = d.handle;
        return;
    }
    PortHot& in = hot_[d.in_port];
    if (!counted) {
        ++in.rx_pkts;
        in.rx_bytes += d.frame_len.v;
    }
    if (r.drop != DropReason::kCount) [[unlikely]]
        return drop(d.in_port, d.handle, r.drop, fx);
    const int q = r.q;
    const int pg = r.pg;
    uint32_t nb = r.nb;
    PortId out = r.out;
    if (r.adaptive) {
        const RouteTable::Group& g = routes_.group_ref(r.group);
        const RouteTable::Member& m = routes_.member(g.first + adaptive_member(g, r.group, r.tc, r.hash, now));
        nb = m.neighbor;
        out = m.port;
    }
    PortHot& op = hot_[out];
    QueueHot& qs = qhot(out, q);

    if (d.frame_len.v > op.max_frame) return egress_drop(out, q, d.handle, DropReason::MtuExceeded, fx);
    if (storming_ && ((op.storms | in.storms) & (1u << q))) {
        if (storm_drops(op, q)) {
            ++cold_[out].q[q].wd_drops;
            return egress_drop(out, q, d.handle, DropReason::PfcWatchdog, fx);
        }
        // SONiC's drop action also discards what the stormed port keeps
        // sending on that priority: its peer is the likely source of the storm.
        if (storm_drops(in, q)) {
            ++cold_[d.in_port].q[q].wd_drops;
            return drop(d.in_port, d.handle, DropReason::PfcWatchdog, fx);
        }
    }
    // Far below its limits, the PG admits into reserved or shared: no
    // rejection, and the region is looked up as it is committed.
    Mmu::Region region = Mmu::Region::Reserved;
    if (!far) {
        const Mmu::Verdict v = mmu_.query_ingress(d.in_port, pg, d.frame_len);
        if (v.region == Mmu::Region::Rejected) return drop(d.in_port, d.handle, v.reason, fx);
        region = v.region;
    }
    if (!mmu_.query_egress(out, q, d.frame_len)) return egress_drop(out, q, d.handle, DropReason::EgressQueueLimit, fx);
    if (free_head_ == kNil && !link_fresh()) return egress_drop(out, q, d.handle, DropReason::NoDescriptor, fx);
    bool mark = false;
    // At or below Kmin red_decide passes without a draw, and so does it
    // with the profile off (no bound then): a compare decides the usual
    // short queue, without reading the profile.
    if (mmu_.queue_bytes(out, q) > fast_kmin_[q]) {
        const RedVerdict rv = red_decide(cfg_.wred[q], mmu_.queue_bytes(out, q), d.ecn, rng);
        if (rv == RedVerdict::Drop) return egress_drop(out, q, d.handle, DropReason::WredDrop, fx);
        mark = rv == RedVerdict::Mark && d.ecn != kEcnCe;
    }

    if (far) mmu_.commit_reserved(d.in_port, pg, out, q, d.frame_len);
    else mmu_.commit(d.in_port, pg, out, q, d.frame_len, region);
    op.nonempty |= static_cast<uint8_t>(1u << q);
    link_slot(slots_.get(), free_head_, qs, d, static_cast<uint8_t>(pg));
    const bool paused = (op.paused >> q) & 1;
    qs.watermark = std::max(qs.watermark, mmu_.queue_bytes(out, q));

    if (next_hop) {
        *next_hop = nb;
    } else {
        Effect& e = emit(fx, EffectKind::Enqueued, out);
        e.queue = static_cast<uint8_t>(q);
        e.handle = d.handle;
        e.neighbor = nb;
    }
    if (mark) {
        ++cold_[out].q[q].ecn_marks;
        Effect& m = emit(fx, EffectKind::MarkCe, out);
        m.queue = static_cast<uint8_t>(q);
        m.handle = d.handle;
    }
    if (!far && mmu_.should_xoff(d.in_port, pg)) xoff(d.in_port, pg, now, fx);

    if (paused) {
        // A paused queue that fills starts counting towards the watchdog.
        timer_dirty_ = true;
        // A queue may have been paused past detection_time while empty; the
        // watchdog only calls that a storm once something is stuck behind it.
        if (cfg_.pfc_wd.enabled && queue_lossless_[q] && !((op.storms >> q) & 1) && paused_at(out, q, now) &&
            now - cold_[out].q[q].pause_start >= cfg_.pfc_wd.detection_time)
            watchdog_detect(out, q, now, fx);
    }
    // Armed already by the packets ahead of it, usually: decided first.
    if (!op.tx_armed && (!(((op.paused | op.storms) >> q) & 1) || eligible(out, q, now))) arm_tx(out, now, fx);
}

// Inlined into burst() (out of line it took 5.7 instructions a frame more,
// callgrind, switch_bench net_ring 64 B).
template <bool kNextHop>
std::size_t Switch::admit_run(const PacketDesc* d, std::size_t n, unsigned far, RouteMemo& memo, Effects& fx,
                              uint32_t* next_hop, Routed& stop) {
    // In locals: through the members, the compiler would reload them after
    // every store to a slot or a queue (which could alias them).
    RouteMemo m = memo;
    uint32_t free = free_head_;
    Slot* const slots = slots_.get();
    PortHot* const hot = hot_.data();
    QueueHot* const queues = queue_hot_.data();
    std::size_t j = 0;
    for (; j < n; ++j) {
        const PacketDesc& p = d[j];
        const Routed r = route_packet(p, m);
        if (r.drop != DropReason::kCount || r.adaptive || !((far >> r.pg) & 1) || free == kNil) [[unlikely]] {
            stop = r;
            break;
        }
        const int q = r.q;
        const PortId out = r.out;
        PortHot& op = hot[out];
        const uint8_t bit = static_cast<uint8_t>(1u << q);
        const Bytes len = p.frame_len;
        // What admit() tests before it commits, and the tests after it that
        // could add an effect (a mark, a pause's watchdog, arming the port).
        if (!op.tx_armed || (op.paused & bit) || len.v > op.max_frame || !mmu_.query_egress(out, q, len) ||
            mmu_.queue_bytes(out, q) > fast_kmin_[q]) [[unlikely]] {
            stop = r;
            break;
        }
        // admit()'s far path from here, without its tests that passed above.
        mmu_.commit_reserved(p.in_port, r.pg, out, q, len);
        op.nonempty |= bit;
        QueueHot& qs = queues[out * kNumTc + q];
        link_slot(slots, free, qs, p, r.pg);
        qs.watermark = std::max(qs.watermark, mmu_.queue_bytes(out, q));
        if constexpr (kNextHop) {
            next_hop[j] = r.nb;
        } else {
            Effect& e = emit(fx, EffectKind::Enqueued, out);
            e.queue = r.q;
            e.handle = p.handle;
            e.neighbor = r.nb;
        }
    }
    free_head_ = free;
    memo = m;
    fast_admits_ += j;
    return j;
}

void Switch::on_packet(const PacketDesc& d, Nanos now, Rng& rng, Effects& fx) {
    RouteMemo memo;
    admit(d, route_packet(d, memo), false, false, now, rng, fx, nullptr);
}

std::size_t Switch::on_burst(const PacketDesc* d, std::size_t n, Nanos now, Rng& rng, Effects& fx,
                             uint32_t* next_hop) {
    return next_hop ? burst<true>(d, n, now, rng, fx, next_hop) : burst<false>(d, n, now, rng, fx, nullptr);
}

// kNextHop: next_hop is set (decided once a burst, not a packet).
template <bool kNextHop>
std::size_t Switch::burst(const PacketDesc* d, std::size_t n, Nanos now, Rng& rng, Effects& fx, uint32_t* next_hop) {
    // VPP-style: route the whole burst first (routing reads only tables the
    // burst does not change), starting the loads of each packet's ingress,
    // egress and MMU lines, then admit the packets in order, so effects,
    // counters and random draws are those of on_packet one by one.
    std::array<Routed, kBatch> routed;
    RouteMemo memo;
    // A few ports' hot state stays in L1 (9 lines a port): the loads are
    // started ahead only when there are more.
    const bool ahead = hot_.size() > kPrefetchPorts;
    std::size_t done = 0;
    while (done < n) {
        const std::size_t k = std::min(n - done, kBatch);
        const PortId in = d[done].in_port;
        bool one_port = true;
        uint64_t bytes = 0;
        unsigned pgs = 0;
        if (ahead) {
            for (std::size_t j = 0; j < k; ++j) {
                routed[j] = route_packet(d[done + j], memo);
                prefetch(d[done + j], routed[j]);
                one_port &= d[done + j].in_port == in;
                bytes += d[done + j].frame_len.v;
                pgs |= 1u << routed[j].pg;
            }
        } else {
            // Without the loads to start, each packet is routed right before
            // its admission (below), its Routed not stored into an array and
            // read back: only the chunk's PGs are needed first. A packet's PG
            // is its DSCP's (route_packet's r.pg, set for every packet but a
            // bad port's, which is not one_port).
            for (std::size_t j = 0; j < k; ++j) {
                one_port &= d[done + j].in_port == in;
                bytes += d[done + j].frame_len.v;
                pgs |= dscp_pg_bit_[d[done + j].dscp & 63];
            }
        }
        // PGs that the whole chunk cannot take near a limit: their packets'
        // admission needs no shared-limit query and no XOFF check.
        unsigned far = 0;
        if (one_port && in < hot_.size())
            for (unsigned b = pgs; b; b &= b - 1) {
                const int pg = std::countr_zero(b);
                if (mmu_.pg_far_below(in, pg, Bytes{bytes})) far |= 1u << pg;
            }
        // Each packet adds at most kMaxEffectsPerPacket effects: with room
        // for the chunk, no packet's own check can fail.
        const bool roomy = room(fx) >= k * kMaxEffectsPerPacket;
        // Then every packet of the chunk is taken: its port's receive
        // counters are bumped once, with the chunk's sum.
        const bool counted = roomy && one_port && in < hot_.size();
        if (counted) {
            hot_[in].rx_pkts += k;
            hot_[in].rx_bytes += bytes;
        }
        // The common case's runs go through admit_run; the packet that ends
        // a run (routed by it) and those of other chunks through admit().
        const bool fast = counted && !ahead && fast_admit_;
        std::size_t j = 0;
        while (j < k) {
            Routed r;
            bool routed_here = false;
            // A storm (which admit() can start) sends every packet through its storm test.
            if (fast && !storming_) {
                j += admit_run<kNextHop>(d + done + j, k - j, far, memo, fx, kNextHop ? next_hop + done + j : nullptr, r);
                if (j == k) break;
                routed_here = true;
            }
            if (!roomy && room(fx) < kMaxEffectsPerPacket) return done + j;
            uint32_t* nh = nullptr;
            if constexpr (kNextHop) {
                nh = next_hop + done + j;
                *nh = kNotEnqueued;
            }
            if (ahead) {
                admit(d[done + j], routed[j], (far >> routed[j].pg) & 1, counted, now, rng, fx, nh);
            } else {
                // Routing reads only tables admission does not change (an
                // adaptive pick waits for admit): the same Routed as routed
                // in the loop above.
                if (!routed_here) r = route_packet(d[done + j], memo);
                admit(d[done + j], r, (far >> r.pg) & 1, counted, now, rng, fx, nh);
            }
            ++j;
        }
        done += k;
    }
    return done;
}

// Inlined into dequeue_sole's per-frame loop: as a call it cost 42
// instructions a frame (callgrind, switch_bench net_ring 64 B).
[[gnu::always_inline]] inline void Switch::release_pg(const Slot& s, Effects& fx) {
    mmu_.release_pg(s.in_port, s.pg, Bytes{s.len});
    if (mmu_.should_xon(s.in_port, s.pg)) {
        mmu_.set_xoff(s.in_port, s.pg, false);
        cold_[s.in_port].refresh_at[s.pg] = Nanos::max();
        send_pfc(s.in_port, static_cast<uint8_t>(1u << s.pg), 0, fx);
    }
}

void Switch::settle(const PendingRelease& p) {
    if (p.open && p.bytes) mmu_.release_pg(p.in, p.pg, Bytes{p.bytes});
}

void Switch::release(PortId out, int q, const Slot& s, Effects& fx) {
    mmu_.release_queue(out, q, Bytes{s.len});
    release_pg(s, fx);
}

int Switch::pick_queue(PortId p, Nanos now) {
    PortHot& ps = hot_[p];
    const uint8_t elig = eligible_mask(p, now);
    if (!elig) return -1;
    if (const uint8_t strict = elig & strict_mask_) return 31 - std::countl_zero(static_cast<unsigned>(strict));
    if ((elig & (elig - 1)) == 0) {
        // A sole contender needs no arbitration and earns no credit.
        const int q = std::countr_zero(static_cast<unsigned>(elig));
        QueueHot& qs = qhot(p, q);
        qs.deficit = 0;
        qs.credited = false;
        ps.dwrr_cur = static_cast<uint8_t>(q);
        return q;
    }
    // Terminates: an eligible DWRR queue gains a quantum on every visit.
    for (;;) {
        const int q = ps.dwrr_cur;
        QueueHot& qs = qhot(p, q);
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
        const int32_t head_len = static_cast<int32_t>(slots_[qs.head].len);
        if (head_len <= qs.deficit) {
            qs.deficit -= head_len;
            return q;
        }
        qs.credited = false;
        ps.dwrr_cur = static_cast<uint8_t>((q + 1) % kNumTc);
    }
}

std::optional<TxDesc> Switch::dequeue(PortId port, Nanos now, Rng& rng, Effects& fx) {
    if (port >= hot_.size()) return std::nullopt;
    PortHot& ps = hot_[port];
    ps.tx_armed = false;
    TxDesc tx;
    if (!dequeue_frame(port, now, rng, fx, tx)) return std::nullopt;
    if (has_eligible(port, now)) arm_tx(port, ps.busy_until, fx);
    return tx;
}

std::size_t Switch::dequeue_burst(PortId port, Nanos from, Nanos now, TxDesc* out, std::size_t max, Rng& rng,
                                  Effects& fx) {
    if (port >= hot_.size()) return 0;
    PortHot& ps = hot_[port];
    ps.tx_armed = false;
    Nanos t = std::max(from, ps.busy_until);
    std::size_t n = dequeue_sole(port, t, now, out, max, fx);
    // A sole queue's run ends as the loop below would: with the queue empty
    // (unarmed), or on the loop's own conditions (which then hold again).
    if (n == kNotSole) n = 0;
    else if (ps.nonempty == 0) return n;
    // Each frame starts when the previous one ends, as successive dequeue
    // calls at the TxReady times would have it; only the TxReady between
    // them is left out.
    while (n < max && t <= now && room(fx) > kEffectReserve) {
        // Nothing sent: dequeue_frame armed the port if something waits.
        if (!dequeue_frame(port, t, rng, fx, out[n])) return n;
        ++n;
        if (ps.tx_armed || !has_eligible(port, t)) return n;
        t = ps.busy_until;
    }
    if (has_eligible(port, t)) arm_tx(port, t, fx);
    return n;
}

std::size_t Switch::dequeue_sole(PortId port, Nanos& t, Nanos now, TxDesc* out, std::size_t max, Effects& fx) {
    PortHot& ps = hot_[port];
    const uint8_t ne = ps.nonempty;
    // Exactly one queue holds frames and it is neither paused nor stormed:
    // it is the only eligible queue for the whole run, since a dequeue
    // changes no pause or storm and enqueues nothing.
    if (!ne || (ne & (ne - 1)) || (ne & (ps.paused | ps.storms))) return kNotSole;
    const int q = std::countr_zero(static_cast<unsigned>(ne));
    // WRED at dequeue draws per frame and may drop: the frame-by-frame path.
    if (cfg_.wred_stage == WredStage::Dequeue && cfg_.wred[q].active()) return kNotSole;
    QueueHot& qs = qhot(port, q);
    const ExactDiv& speed = speed_div_[port];
    const uint32_t first = qs.head;
    uint32_t i = first, last = kNil;
    uint64_t bytes = 0;
    std::size_t n = 0;
    // Runs of equal frames serialise alike: the last frame's wire time is reused.
    uint32_t timed_len = ~0u;
    Nanos timed{};
    // Frames of one ingress PG that is not in XOFF release it as one sum:
    // the release is greedy (headroom, shared, reserved), so its parts add
    // up, and no XON can be due on the way.
    PendingRelease pend;
    // The checks of dequeue_burst's loop, before every frame. Only a
    // frame's own release (an XON) adds effects: the room is read again then.
    std::size_t fx_room = room(fx);
    // The queue's count bounds the run: the chain needs no end test.
    const std::size_t lim = std::min<std::size_t>(max, qs.count);
    // In locals for the loop: through `t` and `pend`, the compiler stored and
    // reloaded them around every TxDesc store (which could alias them).
    Nanos at = t;
    const uint8_t queue = static_cast<uint8_t>(q);
    const Slot* const slots = slots_.get();
    // One frame into out[n]: its TxDesc, its wire time, the run's sums.
    const auto send = [&](const Slot& s) {
        const uint32_t len = s.len;
        TxDesc& tx = out[n++];
        tx.handle = s.handle;
        tx.queue = queue;
        tx.frame_len = Bytes{len};
        tx.start = at;
        if (len != timed_len) {
            timed_len = len;
            timed = wire_time(speed, Bytes{len});
        }
        at += timed;
        tx.end = at;
        bytes += len;
        last = i;
        i = s.next;
    };
    while (n < lim && at <= now && fx_room > kEffectReserve) {
        const Slot& s = slots[i];
        if (s.in_port != pend.in || s.pg != pend.pg) {
            settle(pend);
            pend = PendingRelease{s.in_port, s.pg, 0, !mmu_.xoff(s.in_port, s.pg)};
        }
        if (!pend.open) {
            release_pg(s, fx);
            fx_room = room(fx);
            send(s);
            continue;
        }
        // The frames of this open PG that follow, with nothing but their
        // sum to release: a loop without a call (the effect room cannot
        // change in it), so its variables stay in registers.
        const PortId in = pend.in;
        const uint8_t pg = pend.pg;
        const uint64_t before = bytes;
        do {
            const Slot& f = slots[i];
            if (f.in_port != in || f.pg != pg) break;
            send(f);
        } while (n < lim && at <= now);
        pend.bytes += bytes - before;
    }
    t = at;
    settle(pend);
    if (n == 0) return 0;
    // The run's slots are a chain from `first` to `last`: freed in one splice.
    slots_[last].next = free_head_;
    free_head_ = first;
    qs.head = i;
    qs.count -= static_cast<uint32_t>(n);
    mmu_.release_queue(port, q, Bytes{bytes});
    qs.tx_pkts += n;
    qs.tx_bytes += bytes;
    ps.tx_pkts += n;
    ps.tx_bytes += bytes;
    ps.busy_until = t;
    // What pick_queue gives a sole contender, and dequeue_frame a queue it emptied.
    if (!cfg_.scheduler[q].strict) {
        qs.deficit = 0;
        qs.credited = false;
        ps.dwrr_cur = static_cast<uint8_t>(q);
    }
    if (qs.count == 0) {
        qs.tail = kNil;
        ps.nonempty = 0;
        if (!cfg_.scheduler[q].strict) ps.dwrr_cur = static_cast<uint8_t>((q + 1) % kNumTc);
    }
    return n;
}

bool Switch::dequeue_frame(PortId port, Nanos now, Rng& rng, Effects& fx, TxDesc& tx) {
    PortHot& ps = hot_[port];

    if (ps.storms && cfg_.pfc_wd.action == WdAction::Drop) {
        for (int q = 0; q < kNumTc; ++q) {
            const QueueHot& qs = qhot(port, q);
            const bool storm = (ps.storms >> q) & 1;
            while (storm && !qs.empty() && room(fx) > kEffectReserve) {
                const Slot s = pop(port, q);
                release(port, q, s, fx);
                ++cold_[port].q[q].drops;
                ++cold_[port].q[q].wd_drops;
                drop(port, s.handle, DropReason::PfcWatchdog, fx);
            }
            // Out of effect room: come back for the rest.
            if (storm && !qs.empty()) arm_tx(port, now, fx);
        }
    }

    if (now < ps.busy_until) {
        if (has_eligible(port, now)) arm_tx(port, ps.busy_until, fx);
        return false;
    }
    const int q = pick_queue(port, now);
    if (q < 0) return false;
    QueueHot& qs = qhot(port, q);
    const Slot s = pop(port, q);
    if (qs.empty() && !((strict_mask_ >> q) & 1)) {
        qs.deficit = 0;
        qs.credited = false;
        ps.dwrr_cur = static_cast<uint8_t>((q + 1) % kNumTc);
    }
    release(port, q, s, fx);
    if (wred_dequeue_) {
        const RedVerdict rv = red_decide(cfg_.wred[q], mmu_.queue_bytes(port, q), s.ecn, rng);
        if (rv == RedVerdict::Drop) {
            ++cold_[port].q[q].drops;
            drop(port, s.handle, DropReason::WredDrop, fx);
            if (has_eligible(port, now)) arm_tx(port, now, fx);
            return false;
        }
        if (rv == RedVerdict::Mark && s.ecn != kEcnCe) {
            ++cold_[port].q[q].ecn_marks;
            Effect& m = emit(fx, EffectKind::MarkCe, port);
            m.queue = static_cast<uint8_t>(q);
            m.handle = s.handle;
        }
    }
    const Bytes len{s.len};
    ++qs.tx_pkts;
    qs.tx_bytes += len.v;
    ++ps.tx_pkts;
    ps.tx_bytes += len.v;
    tx.handle = s.handle;
    tx.queue = static_cast<uint8_t>(q);
    tx.frame_len = len;
    tx.start = now;
    tx.end = now + wire_time(speed_div_[port], len);
    ps.busy_until = tx.end;
    return true;
}

void Switch::end_pause(PortId p, int q, Nanos at) {
    QueueCold& qc = cold_[p].q[q];
    qc.paused_time += at - qc.pause_start;
    hot_[p].paused &= static_cast<uint8_t>(~(1u << q));
}

void Switch::expire_pause(PortId p, int q, Nanos now) {
    const Nanos until = cold_[p].q[q].paused_until;
    if (((hot_[p].paused >> q) & 1) && until <= now) end_pause(p, q, until);
}

void Switch::on_pfc(PortId port, const PfcFrameDesc& f, Nanos now, Effects& fx) {
    if (port >= hot_.size()) return;
    timer_dirty_ = true;
    PortHot& ps = hot_[port];
    PortCold& pc = cold_[port];
    for (int p = 0; p < kNumTc; ++p) {
        if (!((f.class_enable >> p) & 1)) continue;
        ++pc.pfc_rx[p];
        const int q = cfg_.tc_to_queue[p];
        QueueCold& qc = pc.q[q];
        const uint8_t bit = static_cast<uint8_t>(1u << q);
        expire_pause(port, q, now);
        if (f.quanta[p] == 0) {
            if (ps.paused & bit) end_pause(port, q, now);
            continue;
        }
        qc.last_pfc_rx = now;
        if ((ps.storms & bit) && cfg_.pfc_wd.action != WdAction::Alert) continue;
        if (!(ps.paused & bit)) {
            ps.paused |= bit;
            qc.pause_start = now;
        }
        // A new frame replaces whatever pause time was left (802.1Qbb).
        qc.paused_until = now + cfg_.ports[port].speed.serialise(pause_bytes(f.quanta[p]));
    }
    if (has_eligible(port, now)) arm_tx(port, now, fx);
}

void Switch::watchdog_detect(PortId port, int q, Nanos now, Effects& fx) {
    timer_dirty_ = true;
    if (!((hot_[port].storms >> q) & 1)) ++storming_;
    hot_[port].storms |= static_cast<uint8_t>(1u << q);
    ++cold_[port].q[q].wd_storms;
    emit(fx, EffectKind::WatchdogStorm, port).queue = static_cast<uint8_t>(q);
    if (cfg_.pfc_wd.action == WdAction::Alert) return;
    if ((hot_[port].paused >> q) & 1) end_pause(port, q, now);
    // Forward makes the queue sendable again; drop needs a dequeue to drain it.
    arm_tx(port, now, fx);
}

void Switch::watchdog_restore(PortId port, int q, Effects& fx) {
    if ((hot_[port].storms >> q) & 1) --storming_;
    hot_[port].storms &= static_cast<uint8_t>(~(1u << q));
    ++cold_[port].q[q].wd_restores;
    emit(fx, EffectKind::WatchdogRestore, port).queue = static_cast<uint8_t>(q);
}

void Switch::on_timer(Nanos now, Effects& fx) {
    timer_dirty_ = true;
    const PfcWdConfig& wd = cfg_.pfc_wd;
    for (std::size_t pi = 0; pi < hot_.size(); ++pi) {
        if (room(fx) < kEffectReserve) return;
        const PortId port = static_cast<PortId>(pi);
        PortCold& pc = cold_[pi];
        uint8_t refresh = 0;
        for (int pg = 0; pg < kNumTc; ++pg) {
            if (pc.refresh_at[pg] > now) continue;
            refresh |= static_cast<uint8_t>(1u << pg);
            pc.refresh_at[pg] = now + pfc_refresh_interval_[pi];
        }
        if (refresh) send_pfc(port, refresh, cfg_.pause_quanta, fx);
        for (int q = 0; q < kNumTc; ++q) {
            expire_pause(port, q, now);
            if (!wd.enabled || !queue_lossless_[q]) continue;
            const QueueCold& qc = pc.q[q];
            const bool storm = (hot_[pi].storms >> q) & 1;
            if (!storm && paused_at(port, q, now) && !qhot(port, q).empty() &&
                now - qc.pause_start >= wd.detection_time)
                watchdog_detect(port, q, now, fx);
            else if (storm && !((hot_[pi].paused >> q) & 1) && now - qc.last_pfc_rx >= wd.restoration_time)
                watchdog_restore(port, q, fx);  // alert leaves pauses on: restore once the last one ran out
        }
        if (has_eligible(port, now)) arm_tx(port, now, fx);
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
    for (std::size_t p = 0; p < hot_.size(); ++p) {
        const PortHot& ph = hot_[p];
        const PortCold& pc = cold_[p];
        for (const Nanos r : pc.refresh_at) t = std::min(t, r);
        for (int q = 0; q < kNumTc; ++q) {
            const QueueCold& qc = pc.q[q];
            const bool paused = (ph.paused >> q) & 1;
            if (paused) t = std::min(t, qc.paused_until);
            if (!wd.enabled || !queue_lossless_[q]) continue;
            // A storm queue still paused (action alert) restores no earlier
            // than the pause's end, which is already in t.
            const bool storm = (ph.storms >> q) & 1;
            if (storm && !paused)
                t = std::min(t, qc.last_pfc_rx + wd.restoration_time);
            else if (!storm && paused && !qhot(static_cast<PortId>(p), q).empty())
                t = std::min(t, qc.pause_start + wd.detection_time);
        }
    }
    return t;
}

PortCounters Switch::port_counters(PortId p) const {
    const PortHot& ph = hot_[p];
    const PortCold& pc = cold_[p];
    return PortCounters{.rx_pkts = ph.rx_pkts, .rx_bytes = ph.rx_bytes, .tx_pkts = ph.tx_pkts, .tx_bytes = ph.tx_bytes,
                        .drops = pc.drops, .pfc_rx = pc.pfc_rx, .pfc_tx_xoff = pc.pfc_tx_xoff, .pfc_tx_xon = pc.pfc_tx_xon};
}

QueueCounters Switch::queue_counters(PortId p, int q) const {
    const QueueHot& qh = qhot(p, q);
    const QueueCold& qc = cold_[p].q[q];
    return QueueCounters{.enq_pkts = qh.enq_pkts, .enq_bytes = qh.enq_bytes, .tx_pkts = qh.tx_pkts,
                         .tx_bytes = qh.tx_bytes, .drops = qc.drops, .ecn_marks = qc.ecn_marks,
                         .watermark = qh.watermark, .paused_time = qc.paused_time, .wd_storms = qc.wd_storms,
                         .wd_restores = qc.wd_restores, .wd_drops = qc.wd_drops};
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
    for (std::size_t p = 0; p < hot_.size(); ++p) {
        const PortId id = static_cast<PortId>(p);
        const PortCounters c = port_counters(id);
        fmt::format_to(std::back_inserter(out), "{}: rx {} pkts {} B, tx {} pkts {} B, paused {} ns\n",
                       cfg_.ports[p].name, c.rx_pkts, c.rx_bytes, c.tx_pkts, c.tx_bytes,
                       port_paused_time(id, now).v);
        for (std::size_t r = 0; r < c.drops.size(); ++r)
            if (c.drops[r])
                fmt::format_to(std::back_inserter(out), "  drop {}: {}\n",
                               drop_reason_name(static_cast<DropReason>(r)), c.drops[r]);
        for (int pr = 0; pr < kNumTc; ++pr)
            if (c.pfc_rx[pr] || c.pfc_tx_xoff[pr] || c.pfc_tx_xon[pr])
                fmt::format_to(std::back_inserter(out), "  pfc prio {}: rx {} tx xoff {} tx xon {}\n", pr,
                               c.pfc_rx[pr], c.pfc_tx_xoff[pr], c.pfc_tx_xon[pr]);
        for (int q = 0; q < kNumTc; ++q) {
            const QueueCounters qc = queue_counters(id, q);
            if (!qc.enq_pkts && !qc.drops && !((hot_[p].paused >> q) & 1)) continue;
            fmt::format_to(std::back_inserter(out),
                           "  q{}: depth {} B (max {} B), enq {}, tx {} pkts {} B, drops {}, ecn {}, paused {} ns{}\n",
                           q, mmu_.queue_bytes(id, q).v, qc.watermark.v, qc.enq_pkts, qc.tx_pkts, qc.tx_bytes, qc.drops,
                           qc.ecn_marks, paused_time(id, q, now).v, watchdog_storm(id, q) ? ", PFC storm" : "");
        }
    }
    return out;
}

Nanos Switch::paused_time(PortId p, int q, Nanos now) const {
    const QueueCold& qc = cold_[p].q[q];
    Nanos t = qc.paused_time;
    if ((hot_[p].paused >> q) & 1) t += std::min(now, qc.paused_until) - qc.pause_start;
    return t;
}

Nanos Switch::port_paused_time(PortId p, Nanos now) const {
    Nanos t{};
    for (int q = 0; q < kNumTc; ++q) t += paused_time(p, q, now);
    return t;
}

}  // namespace rocemu::sw
