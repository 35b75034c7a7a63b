#include "switch/mmu.hpp"

#include <algorithm>

namespace rocemu::sw {

Mmu::Mmu(const SwitchConfig& cfg)
    : cfg_(cfg),
      pg_(cfg.ports.size() * kNumTc),
      queue_(cfg.ports.size() * kNumTc),
      port_(cfg.ports.size()),
      queue_lossless_(kNumTc) {
    for (int q = 0; q < kNumTc; ++q) queue_lossless_[q] = cfg.queue_lossless_at(q);
}

Bytes Mmu::limit(const Threshold& t) const {
    if (!t.dynamic) return t.static_th;
    const uint64_t free = cfg_.pool_size.v - pool_used_.v;
    return Bytes{t.dynamic_th >= 0 ? free << t.dynamic_th : free >> -t.dynamic_th};
}

Mmu::Verdict Mmu::query_ingress(PortId in, int pg, Bytes len) const {
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

bool Mmu::query_egress(PortId out, int q, Bytes len) const {
    if (queue_lossless_[q]) return true;
    return queue_bytes(out, q) + len <= cfg_.queue_lossy.size + limit(cfg_.queue_lossy.th);
}

void Mmu::commit(PortId in, int pg, PortId out, int q, Bytes len, Region r) {
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
    queue_[out * kNumTc + q] += len;
    port_[out] += len;
}

void Mmu::release(PortId in, int pg, PortId out, int q, Bytes len) {
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
    queue_[out * kNumTc + q] -= len;
    port_[out] -= len;
}

bool Mmu::should_xoff(PortId in, int pg) const {
    if (!cfg_.pg_lossless_at(pg)) return false;
    const PgState& s = pg_at(in, pg);
    return !s.xoff && (s.headroom.v > 0 || s.shared >= limit(cfg_.pg_lossless.th));
}

bool Mmu::should_xon(PortId in, int pg) const {
    const PgState& s = pg_at(in, pg);
    if (!s.xoff || s.headroom.v > 0) return false;
    const PgProfile& p = cfg_.pg_lossless;
    return s.shared + p.xon_offset <= limit(p.th) || s.reserved + s.shared <= p.xon;
}

}  // namespace rocemu::sw
