// Buffer accounting in the style of an MMU: the switch first queries whether
// a packet may be admitted (and into which region), then commits, and on
// dequeue releases. Ingress is accounted per (port, priority group), egress
// per (port, queue); both share one pool. Pure bookkeeping: no packets here.
#pragma once

#include <vector>

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

    Verdict query_ingress(PortId in, int pg, Bytes len) const;
    // Lossy queues tail-drop at their threshold; lossless queues always pass
    // (their bound is the ingress PG and PFC).
    bool query_egress(PortId out, int q, Bytes len) const;
    void commit(PortId in, int pg, PortId out, int q, Bytes len, Region r);
    void release(PortId in, int pg, PortId out, int q, Bytes len);

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
    // Current shared limit of a threshold, given the pool's free space now.
    Bytes limit(const Threshold& t) const;

private:
    struct PgState {
        Bytes reserved{};
        Bytes shared{};
        Bytes headroom{};
        bool xoff = false;
    };
    const PgProfile& profile(int pg) const { return cfg_.pg_lossless_at(pg) ? cfg_.pg_lossless : cfg_.pg_lossy; }
    PgState& pg_at(PortId in, int pg) { return pg_[in * kNumTc + pg]; }
    const PgState& pg_at(PortId in, int pg) const { return pg_[in * kNumTc + pg]; }

    const SwitchConfig& cfg_;
    std::vector<PgState> pg_;
    std::vector<Bytes> queue_;
    std::vector<Bytes> port_;
    std::vector<bool> queue_lossless_;
    Bytes pool_used_{};
};

}  // namespace rocemu::sw
