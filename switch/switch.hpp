// The soft-switch pure core: L3 forwarding (LPM, ECMP, adaptive routing),
// MMU admission, PFC generation and honouring, the PFC watchdog, WRED/ECN,
// strict-priority + DWRR scheduling and per-port serialisation.
//
// It does no I/O and reads no clock: every call carries `now`, randomness
// comes in as an Rng&, and results are effects appended to a caller-owned
// buffer. The DPDK app and the virtual-time fabric both drive it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/rng.hpp"
#include "switch/config.hpp"
#include "switch/exact_div.hpp"
#include "switch/mmu.hpp"
#include "switch/route.hpp"
#include "switch/types.hpp"

namespace rocemu::sw {

struct QueueCounters {
    uint64_t enq_pkts = 0;
    uint64_t enq_bytes = 0;
    uint64_t tx_pkts = 0;
    uint64_t tx_bytes = 0;
    uint64_t drops = 0;
    uint64_t ecn_marks = 0;
    Bytes watermark{};
    Nanos paused_time{};  // closed pause intervals; paused_time() adds the open one
    uint64_t wd_storms = 0;
    uint64_t wd_restores = 0;
    uint64_t wd_drops = 0;
};

struct PortCounters {
    uint64_t rx_pkts = 0;
    uint64_t rx_bytes = 0;
    uint64_t tx_pkts = 0;
    uint64_t tx_bytes = 0;
    // Routing and ingress drops count at the ingress port, queue drops at the
    // egress port.
    std::array<uint64_t, static_cast<std::size_t>(DropReason::kCount)> drops{};
    std::array<uint64_t, kNumTc> pfc_rx{};      // frames received naming priority i
    std::array<uint64_t, kNumTc> pfc_tx_xoff{};  // pauses (incl. refreshes) sent for priority i
    std::array<uint64_t, kNumTc> pfc_tx_xon{};   // resumes sent for priority i
};

class Switch {
public:
    explicit Switch(const SwitchConfig& cfg);
    Switch(const Switch&) = delete;
    Switch& operator=(const Switch&) = delete;

    // Back to the state the constructor leaves, keeping the config, the
    // routes and set_fast_admit: every queue empty (the caller still holds
    // the handles of what was queued), counters, pauses, XOFF, watchdog
    // storms, timers, flowlets and the MMU's accounts zero, the route cache
    // empty. Allocates nothing: for running many short experiments (a fuzz
    // input each) on one switch, which then behaves as a new one would.
    void reset();

    RouteTable& routes() { return routes_; }
    const RouteTable& routes() const { return routes_; }
    const SwitchConfig& config() const { return cfg_; }
    std::size_t num_ports() const { return hot_.size(); }

    // A received data frame. Appends Enqueued or Drop, possibly MarkCe,
    // SendPfc (XOFF out of the ingress port), WatchdogStorm and TxReady: at
    // most kMaxEffectsPerPacket.
    void on_packet(const PacketDesc& d, Nanos now, Rng& rng, Effects& fx);
    static constexpr std::size_t kMaxEffectsPerPacket = 5;
    // Burst form: processes packets while `fx` has room for their effects
    // and returns how many it took (the rest wait for the next call).
    // With `next_hop`, packet i's Enqueued effect is not written: instead
    // next_hop[i] is its neighbor id (what the effect would carry), or
    // kNotEnqueued when it was not enqueued; every other effect is the same
    // for the packets taken. As an enqueue then uses no effect room, a call
    // that starts with `fx` nearly full may take more packets than without.
    // For a runtime that rewrites each frame's L2 header from its burst
    // position, without writing and reading back an effect a frame.
    std::size_t on_burst(const PacketDesc* d, std::size_t n, Nanos now, Rng& rng, Effects& fx,
                         uint32_t* next_hop = nullptr);
    static constexpr uint32_t kNotEnqueued = 0xFFFFFFFF;

    // Start transmitting the next frame of `port`, if one is eligible and the
    // wire is free at `now`. Honours received pauses, strict priority, then
    // DWRR. May append Drop (watchdog drain, WRED at dequeue), MarkCe,
    // SendPfc (XON out of the frame's ingress port) and TxReady.
    std::optional<TxDesc> dequeue(PortId port, Nanos now, Rng& rng, Effects& fx);
    // Burst form for a runtime that sends as soon as the wire model allows:
    // what dequeue called at `from` (the TxReady time) and then at each
    // frame's end would return, for the frames starting at or before `now`,
    // at most `max` of them into `out`. Same effects, except that the port
    // is re-armed once, at the end (TxReady for the next frame's start).
    std::size_t dequeue_burst(PortId port, Nanos from, Nanos now, TxDesc* out, std::size_t max, Rng& rng,
                              Effects& fx);

    // A PFC frame received on `port`: priority i pauses queue tc_to_queue[i]
    // for quanta[i] x 512 bit times at the port's speed (0 resumes).
    void on_pfc(PortId port, const PfcFrameDesc& f, Nanos now, Effects& fx);

    // Pause expiries, XOFF refreshes and watchdog detection and restoration.
    // Stops early when `fx` runs short; call again while next_timer() <= now.
    void on_timer(Nanos now, Effects& fx);
    // Earliest time on_timer has work, or Nanos::max(). Cached: O(ports x 8)
    // only after something that can bring a deadline forward.
    Nanos next_timer() const;

    // When the wire of `port` is free for the next frame.
    Nanos tx_free_at(PortId port) const { return hot_[port].busy_until; }

    // Assembled from the hot and cold halves of the state: for telemetry, not per packet.
    PortCounters port_counters(PortId p) const;
    QueueCounters queue_counters(PortId p, int q) const;
    Bytes queue_depth(PortId p, int q) const { return mmu_.queue_bytes(p, q); }
    std::size_t queue_packets(PortId p, int q) const { return qhot(p, q).count; }
    // Descriptors preallocated: enough for the whole buffer in 60-byte frames.
    std::size_t descriptor_capacity() const { return slot_count_; }
    bool queue_paused(PortId p, int q, Nanos now) const { return paused_at(p, q, now); }
    // Total time queue q of port p has been paused by received PFC, up to now.
    Nanos paused_time(PortId p, int q, Nanos now) const;
    // Sum over the port's queues: the port's PFC pause duration.
    Nanos port_paused_time(PortId p, Nanos now) const;
    bool pg_xoff(PortId p, int pg) const { return mmu_.xoff(p, pg); }
    bool watchdog_storm(PortId p, int q) const { return (hot_[p].storms >> q) & 1; }
    const Mmu& mmu() const { return mmu_; }
    uint64_t effects_overflow() const { return effects_overflow_; }
    // Packets admitted by on_burst's fast path (admit_run), and a switch to
    // turn it off, for tests that compare it with the general path.
    uint64_t fast_admits() const { return fast_admits_; }
    void set_fast_admit(bool on) { fast_admit_ = on; }
    uint64_t bad_port_drops() const { return bad_port_drops_; }

    // One human-readable line for an effect, naming the port: what the
    // runtime logs for watchdog events (and may log for others).
    std::string describe(const Effect& e) const;
    // Every port's and non-idle queue's counters, for logs and debugging.
    std::string dump(Nanos now) const;

private:
    // Queued-packet descriptors live in one pool shared by all queues, like
    // an MMU's cells: a queue is a linked list through `next`.
    struct Slot {
        uint32_t handle;
        uint32_t len;
        uint32_t next;
        PortId in_port;
        uint8_t pg;
        uint8_t ecn;
    };
    static constexpr uint32_t kNil = 0xFFFFFFFF;
    // A port's state is split by how often it is touched, so that a packet
    // reads and writes few cache lines however many ports and queues there
    // are (issue #8: at 256 hosts, every line a packet-hop touches was last
    // used thousands of events earlier and misses L2).
    //
    // QueueHot: what enqueue and dequeue touch on the egress queue, and the
    // queue counters they bump, in one line.
    struct alignas(64) QueueHot {
        uint32_t head = kNil;
        uint32_t tail = kNil;
        uint32_t count = 0;
        // DWRR credit: at most a jumbo frame plus a quantum of weight 100.
        int32_t deficit = 0;
        bool credited = false;
        uint64_t enq_pkts = 0;
        uint64_t enq_bytes = 0;
        uint64_t tx_pkts = 0;
        uint64_t tx_bytes = 0;
        Bytes watermark{};
        bool empty() const { return count == 0; }
    };
    static_assert(sizeof(QueueHot) == 64);
    // PortHot: the port's per-packet state and counters, one line. A queue's
    // paused and storm flags live here as bit masks: the common case (no
    // pause, no storm) is then decided without touching any queue.
    struct alignas(64) PortHot {
        Nanos busy_until{};
        uint64_t rx_pkts = 0;
        uint64_t rx_bytes = 0;
        uint64_t tx_pkts = 0;
        uint64_t tx_bytes = 0;
        uint8_t nonempty = 0;  // bit q: queue q holds packets
        uint8_t paused = 0;    // bit q: queue q is paused by a received PFC frame
        uint8_t storms = 0;    // bit q: queue q is in a watchdog storm
        bool tx_armed = false;
        uint8_t dwrr_cur = 0;
        uint64_t max_frame = 0;  // MTU + L2 header: read with the rest by admission
    };
    static_assert(sizeof(PortHot) == 64);
    // Touched only while a queue is paused, in a storm, or dropping.
    struct QueueCold {
        Nanos paused_until{};
        Nanos pause_start{};  // start of the current continuous pause
        Nanos last_pfc_rx{};
        uint64_t drops = 0;
        uint64_t ecn_marks = 0;
        Nanos paused_time{};  // closed pause intervals; paused_time() adds the open one
        uint64_t wd_storms = 0;
        uint64_t wd_restores = 0;
        uint64_t wd_drops = 0;
    };
    // Timers, PFC and drop counters: on_timer, on_pfc, XOFF/XON and drops.
    struct PortCold {
        std::array<QueueCold, kNumTc> q{};
        std::array<Nanos, kNumTc> refresh_at{};
        std::array<uint64_t, static_cast<std::size_t>(DropReason::kCount)> drops{};
        std::array<uint64_t, kNumTc> pfc_rx{};
        std::array<uint64_t, kNumTc> pfc_tx_xoff{};
        std::array<uint64_t, kNumTc> pfc_tx_xon{};
    };

    QueueHot& qhot(PortId p, int q) { return queue_hot_[p * kNumTc + q]; }
    const QueueHot& qhot(PortId p, int q) const { return queue_hot_[p * kNumTc + q]; }
    bool paused_at(PortId p, int q, Nanos now) const {
        return ((hot_[p].paused >> q) & 1) && cold_[p].q[q].paused_until > now;
    }
    bool storm_drops(const PortHot& ph, int q) const {
        return ((ph.storms >> q) & 1) && cfg_.pfc_wd.action == WdAction::Drop;
    }
    bool eligible(PortId p, int q, Nanos now) const;
    // A waiting queue neither paused nor in a storm (the usual case) may
    // send; only the others need their pause deadline and the watchdog
    // (out of line, so this stays a few instructions without a frame).
    uint8_t eligible_mask(PortId p, Nanos now) const {
        const PortHot& ph = hot_[p];
        if (!(ph.nonempty & (ph.paused | ph.storms))) return ph.nonempty;
        return eligible_mask_held(p, now);
    }
    uint8_t eligible_mask_held(PortId p, Nanos now) const;
    bool has_eligible(PortId p, Nanos now) const { return eligible_mask(p, now) != 0; }
    int pick_queue(PortId p, Nanos now);
    // What routing decides about a packet, before anything it changes: the
    // first half of on_packet, done for a whole burst ahead of admit().
    // No member initialisers: on_burst's array of them is filled by
    // route_packet, not cleared first.
    struct Routed {
        DropReason drop;  // kCount: routed
        bool adaptive;    // member picked in admit(), from queue loads
        uint8_t tc;
        uint8_t pg;
        uint8_t q;
        PortId out;
        uint32_t nb;
        uint32_t group;
        uint64_t hash;
    };
    static constexpr std::size_t kBatch = 32;
    // on_burst starts loading each packet's state ahead only in switches
    // with more ports than this.
    static constexpr std::size_t kPrefetchPorts = 8;
    // What route_packet keeps of the packets before it in a burst: a run to
    // one IPv4 destination looks its route up once, and from one source
    // folds the two addresses into the flow hash once.
    struct RouteMemo {
        bool valid = false;   // dst and group are set
        bool hashed = false;  // src and addrs are set (for this dst)
        uint32_t dst = 0;
        uint32_t src = 0;
        uint32_t group = 0;
        uint64_t addrs = 0;  // flow_hash_addrs
        // Set with dst: kCount when the group routes, else the drop; the
        // group's members when it routes.
        DropReason drop = DropReason::kCount;
        RouteTable::Group g{};
    };
    Routed route_packet(const PacketDesc& d, RouteMemo& memo) const;
    // Starts loading the lines admit() will touch for this packet.
    void prefetch(const PacketDesc& d, const Routed& r) const;
    // The second half of on_packet: MMU admission, enqueue, PFC, watchdog.
    // `far`: Mmu::pg_far_below holds for the packet's PG over its whole burst.
    template <bool kNextHop>
    std::size_t burst(const PacketDesc* d, std::size_t n, Nanos now, Rng& rng, Effects& fx, uint32_t* next_hop);
    // admit()'s common case for the packets of a chunk counted at one port,
    // one after the other, from d[0]: routed, not adaptive, its PG in `far`,
    // within the MTU, a descriptor free, the egress queue takes it, its depth
    // at or below WRED Kmin (or WRED at dequeue), the queue not paused and
    // its port armed already. Such a packet gets what admit() would give it
    // (no effect but the Enqueued one, no draw), in a loop without a call, so
    // its values stay in registers. Stops at the first other packet, routed
    // into `stop`, and returns how many it took (n: all).
    template <bool kNextHop>
    std::size_t admit_run(const PacketDesc* d, std::size_t n, unsigned far, RouteMemo& memo, Effects& fx,
                          uint32_t* next_hop, Routed& stop);
    // `counted`: the caller has counted the packet at its ingress port.
    // `next_hop`: where to write the neighbor instead of an Enqueued effect (on_burst's), or null.
    void admit(const PacketDesc& d, const Routed& r, bool far, bool counted, Nanos now, Rng& rng, Effects& fx,
               uint32_t* next_hop);
    // dequeue without the final re-arming, into `tx` (not through an
    // optional on the stack: reading that back stalled on store forwarding).
    bool dequeue_frame(PortId port, Nanos now, Rng& rng, Effects& fx, TxDesc& tx);
    // dequeue_burst's run when one queue alone can send (the usual case):
    // what its frame-by-frame loop would do from `t`, with the queue's
    // eligibility decided once, its MMU bytes, counters and DWRR state
    // updated once for the run. Advances `t` to the end of the last frame.
    // kNotSole when the port is not in that state.
    std::size_t dequeue_sole(PortId port, Nanos& t, Nanos now, TxDesc* out, std::size_t max, Effects& fx);
    static constexpr std::size_t kNotSole = ~std::size_t{0};
    Slot pop(PortId p, int q);
    static void link_slot(Slot* slots, uint32_t& free, QueueHot& qs, const PacketDesc& d, uint8_t pg);
    // ECMP: the member a flow hash `h` picks out of n.
    static uint32_t hashed_member(uint64_t h, std::size_t n) { return static_cast<uint32_t>(((h >> 32) * n) >> 32); }
    // Per-TC adaptive routing (PerPacket, Flowlet), for groups of two or more.
    uint32_t adaptive_member(const RouteTable::Group& g, uint32_t group, int tc, uint64_t h, Nanos now);
    uint32_t least_loaded(const RouteTable::Group& g, uint64_t hash) const;
    void end_pause(PortId p, int q, Nanos at);
    void expire_pause(PortId p, int q, Nanos now);
    void send_pfc(PortId port, uint8_t bits, uint16_t quanta, Effects& fx);
    void xoff(PortId in, int pg, Nanos now, Effects& fx);
    void release(PortId out, int q, const Slot& s, Effects& fx);
    // The frame's ingress PG, and XON out of its port if that lets it resume.
    void release_pg(const Slot& s, Effects& fx);
    // Frames of one ingress PG whose release is summed (open: the PG is not
    // in XOFF, so no frame of the sum could have sent XON).
    struct PendingRelease {
        PortId in = static_cast<PortId>(~0u);
        uint8_t pg = 0;
        uint64_t bytes = 0;
        bool open = false;
    };
    void settle(const PendingRelease& p);
    void arm_tx(PortId port, Nanos at, Effects& fx);
    void drop(PortId counted_at, uint32_t handle, DropReason r, Effects& fx);
    // A drop at the egress queue, counted there too. Not a lambda in admit:
    // building its captures cost 3 instructions a packet that is not dropped
    // (cachegrind, rocemu_switch_core_bench burst).
    void egress_drop(PortId out, int q, uint32_t handle, DropReason r, Effects& fx);
    // The next effect slot with kind and port set; a scratch slot (counted
    // in effects_overflow) when fx is full.
    Effect& emit(Effects& fx, EffectKind kind, PortId port);
    // Serialisation of a frame plus preamble and IFG at the port's speed, rounded up.
    static Nanos wire_time(const ExactDiv& speed, Bytes frame_len);
    void watchdog_detect(PortId port, int q, Nanos now, Effects& fx);
    void watchdog_restore(PortId port, int q, Effects& fx);

    struct Flowlet {
        uint32_t group = RouteTable::kUnresolved;
        uint32_t member = 0;
        Nanos last{};
    };
    Nanos compute_next_timer() const;

    // What a packet reads of the switch itself comes first, in three lines
    // (issue #8: in a fabric of 40 switches a switch's state leaves L1
    // between two of its packets, so every line a packet reads is a miss):
    // the vectors' starts, the free list, the scalars and copies of the
    // routing fields route_packet reads (0-135), the timer cache and the
    // WRED bounds (136-207). Then the config (its hot fields first), the MMU
    // and the route table, each from a line of its own.
    std::vector<PortHot> hot_;
    std::vector<QueueHot> queue_hot_;  // port x kNumTc + queue
    std::unique_ptr<Slot[]> slots_;  // slot_count_ of them, written from fresh_ on only once linked
    uint32_t slot_count_ = 0;
    uint32_t fresh_ = 0;  // slots from here on were never linked since reset()
    uint32_t free_head_ = kNil;
    static constexpr uint32_t kSlotChunk = 4096;
    // Links the next kSlotChunk slots never linked as the free list (which
    // must be empty); false when none are left.
    bool link_fresh();
    const uint32_t num_ports_;  // hot_.size(), kept so a packet reads one word, not the vector's two ends
    // Queues in a watchdog storm, over all ports: while 0, admission skips
    // the per-queue storm test.
    uint32_t storming_ = 0;
    // May be earlier than the true next deadline (then on_timer finds
    // nothing due and recomputes), never later.
    mutable bool timer_dirty_ = true;
    uint8_t strict_mask_ = 0;
    bool wred_dequeue_ = false;  // cfg_.wred_stage == WredStage::Dequeue
    const uint8_t hash_fields_;  // cfg_.routing.hash_fields
    const uint64_t hash_seed_;   // cfg_.routing.hash_seed
    const uint64_t hash_l4_mask_;  // flow_hash_l4_mask of the configured hash fields
    std::array<ArMode, kNumTc> adaptive_{};  // cfg_.routing.adaptive
    std::vector<ExactDiv> speed_div_;        // per port: its speed in bit/s
    mutable Nanos next_timer_cache_{};
    // Per queue: the depth above which admission asks WRED at enqueue
    // (Kmin), or no bound when the profile is off or WRED runs at dequeue.
    std::array<Bytes, kNumTc> fast_kmin_{};

    alignas(64) const SwitchConfig cfg_;
    alignas(64) Mmu mmu_;
    std::vector<PortCold> cold_;
    std::array<bool, kNumTc> queue_lossless_{};
    // Per DSCP: its PG's bit (tc_to_pg[dscp_to_tc]), one load in on_burst's first pass.
    std::array<uint8_t, 64> dscp_pg_bit_{};
    std::array<int64_t, kNumTc> dwrr_quantum_{};
    std::vector<Nanos> pfc_refresh_interval_;  // per port, from its speed
    std::vector<Flowlet> flowlets_;
    uint64_t effects_overflow_ = 0;
    uint64_t fast_admits_ = 0;
    bool fast_admit_ = true;
    uint64_t bad_port_drops_ = 0;
    Effect overflow_sink_{};
    alignas(64) RouteTable routes_;
};

}  // namespace rocemu::sw
