// Buffer accounting in the style of an MMU: the switch first queries whether
// a packet may be admitted (and into which region), then commits, and on
// dequeue releases. Ingress is accounted per (port, priority group), egress
// per (port, queue); both share one pool. Pure bookkeeping: no packets here.
#pragma once

#include <algorithm>
#include <array>
#include <memory>

#include "switch/config.hpp"

namespace rocemu::sw {

class Mmu {
public:
    // Where an admitted packet is charged. Lossless PGs overflow into their
    // headroom once over the shared threshold; that is what triggers XOFF.
    enum class Region : uint8_t { Reserved, Shared, Headroom, Rejected };
    struct Verdict {
        Region region = Region::Rejected;
        DropReason reason = DropReason::SharedPoolFull;
    };

    explicit Mmu(const SwitchConfig& cfg);
    // Every account back to zero and no PG in XOFF, as constructed.
    void reset();

    Verdict query_ingress(PortId in, int pg, Bytes len) const;
    // Lossy queues tail-drop at their threshold; lossless queues always pass
    // (their bound is the ingress PG and PFC).
    bool query_egress(PortId out, int q, Bytes len) const;
    void commit(PortId in, int pg, PortId out, int q, Bytes len, Region r);
    // Release comes in two halves, so that a run of frames leaving one queue
    // settles each frame's PG (which decides XON) one by one and the queue's
    // total once.
    void release_pg(PortId in, int pg, Bytes len);
    void release_queue(PortId out, int q, Bytes total) {
        queue_[out * kNumTc + q] -= total;
        port_[out] -= total;
    }

    // XOFF once the PG spills into headroom or reaches its shared threshold.
    bool should_xoff(PortId in, int pg) const;
    // XON once headroom is empty and shared use is xon_offset below the
    // threshold, or total use is at or below xon.
    bool should_xon(PortId in, int pg) const;
    void set_xoff(PortId in, int pg, bool on) { pg_at(in, pg).xoff = on; }
    bool xoff(PortId in, int pg) const { return pg_at(in, pg).xoff; }

    Bytes pg_reserved(PortId in, int pg) const { return pg_at(in, pg).reserved; }
    Bytes pg_shared(PortId in, int pg) const { return pg_at(in, pg).shared; }
    Bytes pg_headroom(PortId in, int pg) const { return pg_at(in, pg).headroom; }
    Bytes queue_bytes(PortId out, int q) const { return queue_[out * kNumTc + q]; }
    Bytes port_bytes(PortId out) const { return port_[out]; }
    Bytes pool_used() const { return pool_used_; }
    // Start loading what query_ingress/commit (and query_egress) will touch.
    void prefetch_pg(PortId in, int pg) const { __builtin_prefetch(&pg_at(in, pg), 1); }
    void prefetch_queue(PortId out, int q) const {
        __builtin_prefetch(&queue_[out * kNumTc + q], 1);
        __builtin_prefetch(&port_[out], 1);
    }
    // Current shared limit of a threshold, given the pool's free space now.
    Bytes limit(const Threshold& t) const { return limit_at(t, pool_used_); }
    // The limit were the pool `pool_used` full.
    Bytes limit_at(const Threshold& t, Bytes pool_used) const;
    // True when up to `total` more bytes charged to (in, pg), packet by
    // packet, in any mix of PGs and regions, leave every packet's
    // query_ingress at Reserved or Shared and should_xoff false: pool use,
    // the PG's shared use and the dynamic limit are taken at their worst,
    // after all of it. Then commit_reserved decides and charges each packet alone.
    bool pg_far_below(PortId in, int pg, Bytes total) const;
    // query_ingress and commit for a PG that pg_far_below said is far below
    // its limits: reserved while the PG's reservation takes the packet, else
    // shared (never headroom, never rejected). One look at the PG instead of
    // a query and a commit that looks again.
    void commit_reserved(PortId in, int pg, PortId out, int q, Bytes len) {
        PgState& s = pg_at(in, pg);
        if (s.reserved + len <= pg_size_[pg]) {
            s.reserved += len;
        } else {
            s.shared += len;
            pool_used_ += len;
        }
        charge_queue(out, q, len);
    }

private:
    struct PgState {
        Bytes reserved{};
        Bytes shared{};
        Bytes headroom{};
        bool xoff = false;
    };
    const PgProfile& profile(int pg) const { return cfg_.pg_lossless_at(pg) ? cfg_.pg_lossless : cfg_.pg_lossy; }
    PgState& pg_at(PortId in, int pg) { return pg_[in * kNumTc + pg]; }
    void charge_queue(PortId out, int q, Bytes len) {
        queue_[out * kNumTc + q] += len;
        port_[out] += len;
    }
    const PgState& pg_at(PortId in, int pg) const { return pg_[in * kNumTc + pg]; }

    // What a packet reads, in the first 48 bytes (one line where the switch
    // aligns the Mmu): arrays, not vectors, whose ends no packet reads
    // (issue #8: the three vectors alone took 72 bytes, two lines).
    Bytes pool_used_{};
    const SwitchConfig& cfg_;
    std::unique_ptr<PgState[]> pg_;  // port x kNumTc + PG
    std::unique_ptr<Bytes[]> queue_;  // port x kNumTc + queue
    std::unique_ptr<Bytes[]> port_;
    std::array<bool, kNumTc> queue_lossless_{};
    std::array<Bytes, kNumTc> pg_size_{};  // profile(pg).size: a PG's reservation, per packet without the lossless test
};

// Inline: every packet goes through these.
inline Bytes Mmu::limit_at(const Threshold& t, Bytes pool_used) const {
    if (!t.dynamic) return t.static_th;
    const uint64_t free = cfg_.pool_size.v - pool_used.v;
    return Bytes{t.dynamic_th >= 0 ? free << t.dynamic_th : free >> -t.dynamic_th};
}

inline bool Mmu::pg_far_below(PortId in, int pg, Bytes total) const {
    const PgState& s = pg_at(in, pg);
    const Bytes pool_after = pool_used_ + total;
    if (pool_after > cfg_.pool_size) return false;
    // A lossless PG in headroom and not yet paused sends XOFF on its next packet.
    if (cfg_.pg_lossless_at(pg) && !s.xoff && s.headroom.v > 0) return false;
    // Strict: should_xoff fires at the limit itself.
    return s.shared + total < limit_at(profile(pg).th, pool_after);
}

inline Mmu::Verdict Mmu::query_ingress(PortId in, int pg, Bytes len) const {
    const PgProfile& p = profile(pg);
    const PgState& s = pg_at(in, pg);
    if (s.reserved + len <= p.size) return {Region::Reserved, {}};
    const bool pool_ok = pool_used_ + len <= cfg_.pool_size;
    if (pool_ok && s.shared + len <= limit(p.th)) return {Region::Shared, {}};
    if (cfg_.pg_lossless_at(pg)) {
        if (s.headroom + len <= p.xoff) return {Region::Headroom, {}};
        return {Region::Rejected, DropReason::LosslessHeadroomFull};
    }
    return {Region::Rejected, pool_ok ? DropReason::IngressPgLimit : DropReason::SharedPoolFull};
}

inline bool Mmu::query_egress(PortId out, int q, Bytes len) const {
    if (queue_lossless_[q]) return true;
    return queue_bytes(out, q) + len <= cfg_.queue_lossy.size + limit(cfg_.queue_lossy.th);
}

inline void Mmu::commit(PortId in, int pg, PortId out, int q, Bytes len, Region r) {
    PgState& s = pg_at(in, pg);
    switch (r) {
        case Region::Reserved: s.reserved += len; break;
        case Region::Shared:
            s.shared += len;
            pool_used_ += len;
            break;
        case Region::Headroom: s.headroom += len; break;
        case Region::Rejected: return;
    }
    charge_queue(out, q, len);
}

inline void Mmu::release_pg(PortId in, int pg, Bytes len) {
    // Packets are charged whole to one region but released headroom first,
    // then shared, then reserved: the totals stay exact and headroom drains
    // first, which is what lets a paused PG resume.
    PgState& s = pg_at(in, pg);
    Bytes left = len;
    const Bytes from_hdrm = std::min(s.headroom, left);
    s.headroom -= from_hdrm;
    left -= from_hdrm;
    const Bytes from_shared = std::min(s.shared, left);
    s.shared -= from_shared;
    pool_used_ -= from_shared;
    left -= from_shared;
    s.reserved -= std::min(s.reserved, left);
}

inline bool Mmu::should_xoff(PortId in, int pg) const {
    if (!cfg_.pg_lossless_at(pg)) return false;
    const PgState& s = pg_at(in, pg);
    return !s.xoff && (s.headroom.v > 0 || s.shared >= limit(cfg_.pg_lossless.th));
}

inline bool Mmu::should_xon(PortId in, int pg) const {
    const PgState& s = pg_at(in, pg);
    if (!s.xoff || s.headroom.v > 0) return false;
    const PgProfile& p = cfg_.pg_lossless;
    return s.shared + p.xon_offset <= limit(p.th) || s.reserved + s.shared <= p.xon;
}

}  // namespace rocemu::sw
