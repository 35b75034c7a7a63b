// The transport engine plugged into the poll loop: EngineUpper is the
// NicUpper that feeds RoCEv2 frames, timers and TX pulls to a
// transport::Engine, runs DCQCN for its requester QPs (transport::CcDriver)
// and completes address vectors when ARP answers. fill_av() is the step a QP
// takes before RTR: check the GID index, resolve the destination (ARP) and
// put the MAC, VLAN/PCP and DSCP/ECN into the engine's address vector.
//
//   VerbsError err;
//   auto engine = transport::Engine::create(engine_config(stack, profile), err);  // null: err says why
//   EngineUpper upper(*engine, profile);
//   Nic<EngineUpper> nic(port, stack, upper, clock, nullptr, nic_config(profile));
//   init.peer_accepts_cnp = profile.cnp_enabled();   // at create_qp
//   attr.ah_attr = {...};  // dgid, sgid_index, traffic_class
//   while ((r = fill_av(nic, attr.ah_attr, qpn.v)).status == Pending) nic.poll();
//   if (r.status == Error) fail with r.error;  else engine->modify_qp(qpn, attr, mask, upper.effects());
//   // or, without waiting: modify_qp_resolving(nic, upper, qpn, attr, mask), then poll
//   // until upper.deferred(qpn)->status is no longer Pending.
//
// The port's mbufs must hold transport::Engine::kMinTxBuf bytes
// (PortConfig::min_frame_room), which tx_burst requires of every buffer.
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dataplane/dpdk/nic.hpp"
#include "dataplane/dpdk/nic_profile.hpp"
#include "dataplane/transport/cc_driver.hpp"
#include "dataplane/transport/engine.hpp"
#include "dataplane/wire/describe.hpp"
#include "dataplane/wire/l2.hpp"
#include "dataplane/wire/pause.hpp"

namespace rocemu::dpdk {

// The engine's view of this NIC: its MAC, the same GID table (RoCEv1 entries
// included so indexes match; fill_av refuses them) and the active MTU.
inline transport::EngineConfig engine_config(const host::HostStack& stack, transport::EngineConfig base = {}) {
    base.mac = stack.config().mac;
    base.gids.clear();
    for (size_t i = 0; i < stack.gids().size(); ++i) base.gids.push_back(stack.gids()[i].gid);
    switch (stack.active_mtu().v) {
        case 256: base.active_mtu = transport::PathMtu::Mtu256; break;
        case 512: base.active_mtu = transport::PathMtu::Mtu512; break;
        case 1024: base.active_mtu = transport::PathMtu::Mtu1024; break;
        case 2048: base.active_mtu = transport::PathMtu::Mtu2048; break;
        default: base.active_mtu = transport::PathMtu::Mtu4096; break;
    }
    return base;
}

// The same, with the profile's notification-point knobs (CNP DSCP, 802.1p
// priority and spacing).
inline transport::EngineConfig engine_config(const host::HostStack& stack, const NicProfile& profile,
                                             transport::EngineConfig base = {}) {
    base.cnp_dscp = profile.cc.dcqcn.cnp_dscp;
    base.cnp_pcp = profile.cc.dcqcn.cnp_802p_prio;
    base.min_time_between_cnps = profile.cc.dcqcn.min_time_between_cnps;
    base.coalesce_acks = profile.coalesce_acks;
    return engine_config(stack, base);
}

// The same, for an engine on `port`: zero copy only where the port takes chains.
inline transport::EngineConfig engine_config(const host::HostStack& stack, const NicProfile& profile, const Port& port,
                                             transport::EngineConfig base = {}) {
    base.zero_copy_min = port.takes_chains() ? profile.zero_copy_min.value_or(port.zero_copy_default()) : 0;
    return engine_config(stack, profile, base);
}

// The loop's part of the profile: PFC from the receive backlog and the lab knobs.
inline NicConfig nic_config(const NicProfile& profile, NicConfig base = {}) {
    base.pfc_rx.xoff = profile.pfc_rx_xoff;
    base.pfc_rx.xon = profile.pfc_rx_xon;
    base.pfc_rx.pause_quanta = profile.pfc_pause_quanta;
    base.pfc_rx.refresh_percent = profile.pfc_refresh_percent;
    base.pfc_rx.priority = profile.pfc_priority;
    base.pfc_rx.port_speed = profile.port_speed;
    base.mark_ce_every = profile.mark_ce_every;
    base.rx_max_pps = profile.rx_max_pps;
    base.tx_timeout = profile.tx_timeout;
    return base;
}

// Copies a Ready path into the engine's address vector.
inline void complete_av(const host::PathResult& r, transport::AddressVector& av) {
    av.dmac = r.l2.dst;
    av.vlan = r.l2.vlan;
    av.vlan_id = r.l2.vid;
    av.pcp = r.l2.pcp;
    av.traffic_class = static_cast<uint8_t>(r.l3.dscp << 2 | r.l3.ecn);
    av.hop_limit = r.l3.ttl;
}

inline host::AddressVector host_av(const transport::AddressVector& av) {
    host::AddressVector hav;
    hav.dgid = av.dgid;
    hav.sgid_index = av.sgid_index;
    hav.traffic_class = av.traffic_class;
    hav.hop_limit = av.hop_limit;
    hav.flow_label = av.flow_label;
    return hav;
}

// A modify_qp with an address vector that waited for ARP (modify_qp_resolving).
struct DeferredModify {
    enum class Status : uint8_t { Pending, Done, Failed };
    Qpn qpn;
    transport::QpAttr attr;
    uint32_t mask = 0;
    Status status = Status::Pending;
    std::string error;  // Failed: no ARP reply, or what modify_qp refused
};

class EngineUpper {
public:
    static constexpr bool kHandlesRoce = true;

    // The NIC sends its RoCE traffic (data, ACKs and CNPs alike) on one PFC
    // priority; a pause of that priority holds all of it. Priority 3 is the
    // lossless RoCE class of SONiC's and mlx5's usual setup.
    static constexpr int kDefaultPfcPriority = 3;
    // How far a QP may run ahead of its DCQCN pacing schedule: the loop reads
    // the clock once per burst, and a burst of a QP should leave at its rate,
    // not one frame per turn.
    static constexpr Nanos kPacingSlack = Nanos::from_us(10);

    // Without congestion control: data leaves as fast as the loop pulls it.
    explicit EngineUpper(transport::Engine& engine, int pfc_priority = kDefaultPfcPriority,
                         BitsPerSec port_speed = BitsPerSec::gbps(100))
        : engine_(engine), pfc_priority_(pfc_priority), port_speed_(port_speed) {}
    // With the profile's congestion control (profile.cc; DCQCN by default):
    // each requester QP gets its own reaction point when it first sends
    // data, and is paced at its current rate.
    EngineUpper(transport::Engine& engine, const NicProfile& profile)
        : engine_(engine), pfc_priority_(profile.pfc_priority), port_speed_(profile.port_speed), cc_cfg_(profile.cc) {
        if (cc_cfg_.algorithm != cc::CcAlgorithm::kNone) cc_.emplace(engine_, cc_cfg_, port_speed_, kPacingSlack);
    }
    EngineUpper(const EngineUpper&) = delete;
    EngineUpper& operator=(const EngineUpper&) = delete;

    // The loop hands over its host stack, which completes deferred address vectors.
    void bind_host(host::HostStack& stack) { host_ = &stack; }

    void on_roce(std::span<const uint8_t> frame, Nanos now) {
        engine_.on_frame(frame, now, fx_);
        after_rx(now);
    }
    void on_roce_chain(std::span<const std::span<const uint8_t>> segs, Nanos now) {
        engine_.on_frame_chain(segs, now, fx_);
        after_rx(now);
    }
    // The host stack has counted the frame (rx_pfc); here it pauses TX.
    void on_pfc(std::span<const uint8_t> frame, Nanos now) {
        wire::Pfc pfc;
        if (wire::parse_pfc(frame, pfc)) pauses_.on_pfc(pfc, now, port_speed_);
    }
    bool tx_paused(Nanos now) const { return pauses_.paused(pfc_priority_, now); }
    const wire::PfcPauseState& pauses() const { return pauses_; }
    // ARP answered (or gave up) for a deferred modify_qp: apply it, or fail it.
    // fill_av() callers that poll see the same resolution by calling again.
    void on_host_effect(const host::HostEffect& e, Nanos now) {
        using K = host::HostEffect::Kind;
        if (e.kind != K::Resolved && e.kind != K::ResolveFailed) return;
        for (DeferredModify& d : deferred_) {
            if (d.status != DeferredModify::Status::Pending || d.qpn.v != e.cookie) continue;
            if (e.kind == K::ResolveFailed || !host_) {
                d.status = DeferredModify::Status::Failed;
                d.error = host_ ? "no ARP reply for " + wire::format_ip(d.attr.ah_attr.dgid)
                                : std::string("no host stack to complete the address vector (not on a Nic)");
                continue;
            }
            host::HostEffects scratch;  // a hit sends nothing
            const host::PathResult r = host_->resolve_path(host_av(d.attr.ah_attr), now, e.cookie, scratch);
            if (r.status == host::PathResult::Status::Pending) continue;  // an older waiter; a newer reply follows
            if (r.status == host::PathResult::Status::Error) {
                d.status = DeferredModify::Status::Failed;
                d.error = r.error;
                continue;
            }
            apply(d, &r);
        }
    }
    Nanos next_timer() const {
        const Nanos t = engine_.next_timer();
        return cc_ ? std::min(t, cc_->next_timer()) : t;
    }
    void on_timer(Nanos now) {
        if (cc_ && cc_->next_timer() <= now) cc_->on_timer(now);
        if (engine_.next_timer() <= now) engine_.on_timer(now, fx_);
    }
    // Fills the loop's slots from the engine. Without congestion control in
    // one tx_burst; with it one frame per call, so that each data frame moves
    // its QP's pacing gate before the engine picks the next.
    size_t pull_tx(std::span<TxSlot> out, Nanos now) {
        if (tx_paused(now)) return 0;
        const size_t step = cc_ ? 1 : frames_.size();
        size_t n = 0;
        while (n < out.size()) {
            const size_t want = std::min(step, out.size() - n);
            for (size_t i = 0; i < want; ++i) frames_[i] = transport::TxFrame{out[n + i].buf};
            const uint32_t got = engine_.tx_burst(std::span(frames_.data(), want), now, fx_);
            if (cc_) {
                // First data of a QP: its reaction point starts released, at line rate.
                for (uint32_t i = 0; i < got; ++i)
                    if (frames_[i].data && !cc_->qp_cc(frames_[i].qpn)) cc_->attach(frames_[i].qpn);
                cc_->after_tx(std::span(frames_.data(), got), now);
            }
            for (uint32_t i = 0; i < got; ++i) {
                const transport::TxFrame& f = frames_[i];
                TxSlot& s = out[n + i];
                s.len = f.len;
                s.ext = f.ext;
                if (!f.ext) continue;
                s.ext_len = f.ext_len;
                s.pin = f.pin;
                std::memcpy(s.tail, f.tail, sizeof s.tail);
                s.tail_len = f.tail_len;
            }
            n += got;
            if (got < want) break;
        }
        return n;
    }

    // A destroyed QP's number may come back: its successor starts afresh.
    void on_qp_destroyed(Qpn qpn) {
        if (cc_) cc_->detach(qpn);
        std::erase_if(deferred_, [&](const DeferredModify& d) { return d.qpn == qpn; });
    }

    // Parks a modify_qp whose address vector waits for ARP (cookie = qpn).
    void defer_modify(Qpn qpn, const transport::QpAttr& attr, uint32_t mask) {
        std::erase_if(deferred_, [&](const DeferredModify& d) { return d.qpn == qpn; });
        deferred_.push_back(DeferredModify{qpn, attr, mask, DeferredModify::Status::Pending, {}});
    }
    // Applies the parked modify_qp of `qpn` with its path (null: no address
    // vector in it) and records the outcome.
    void apply_deferred(Qpn qpn, const host::PathResult* path) {
        for (DeferredModify& d : deferred_)
            if (d.qpn == qpn) apply(d, path);
    }
    const DeferredModify* deferred(Qpn qpn) const {
        for (const DeferredModify& d : deferred_)
            if (d.qpn == qpn) return &d;
        return nullptr;
    }

    // The QP's reaction point, when congestion control runs and the QP has sent data.
    const cc::QpCc* qp_cc(Qpn qpn) const { return cc_ ? cc_->qp_cc(qpn) : nullptr; }
    const cc::CcConfig& cc_config() const { return cc_cfg_; }
    // CNPs for a QP without a reaction point (congestion control none, or no data sent yet).
    uint64_t cnp_ignored() const { return cnp_ignored_; }

    // Engine-wide or per-QP counters for telemetry; runs on the loop thread.
    void answer(CounterQuery& q) const {
        auto put = [&q](const char* name, uint64_t v) { q.values.emplace_back(name, v); };
        switch (q.kind) {
            case CounterQuery::Kind::Engine: {
                q.found = true;
                transport::for_each_counter(engine_.counters(), put);
                cc::RpCounters sum;
                for (uint32_t i = 0; i < engine_.config().max_qp; ++i)
                    if (const cc::QpCc* c = qp_cc(Qpn{transport::Engine::kFirstQpn + i})) {
                        sum.rate_decreases += c->counters().rate_decreases;
                        sum.rate_increases += c->counters().rate_increases;
                        sum.cnp_deferred += c->counters().cnp_deferred;
                    }
                put("rp_cnp_ignored", cnp_ignored_);
                put_rp(put, sum);
                return;
            }
            case CounterQuery::Kind::QpList:
                q.found = true;
                for (uint32_t i = 0; i < engine_.config().max_qp; ++i) {
                    const Qpn qpn{transport::Engine::kFirstQpn + i};
                    if (engine_.qp_counters(qpn)) q.values.emplace_back("qpn", qpn.v);
                }
                return;
            case CounterQuery::Kind::Qp:
                if (const transport::Counters* c = engine_.qp_counters(Qpn{q.qpn})) {
                    q.found = true;
                    transport::for_each_counter(*c, put);
                    if (const cc::QpCc* r = qp_cc(Qpn{q.qpn})) {
                        put_rp(put, r->counters());
                        put("rp_current_rate_mbps", r->rate().v / 1000000);
                        put("rp_target_rate_mbps", r->target_rate().v / 1000000);
                    }
                }
                return;
        }
    }

    // CQ events the engine reported; the application clears them. CNPs are
    // taken out at once (they drive the reaction points).
    transport::Effects& effects() { return fx_; }

private:
    // CNPs are consumed here: the reaction point is this object's job.
    void after_rx(Nanos now) {
        if (fx_.cnp_received.empty()) return;
        for (const Qpn q : fx_.cnp_received)
            if (!cc_ || !cc_->qp_cc(q)) ++cnp_ignored_;
        if (cc_) cc_->after_rx(fx_, now);
        fx_.cnp_received.clear();
    }
    void apply(DeferredModify& d, const host::PathResult* path) {
        if (path) complete_av(*path, d.attr.ah_attr);
        const transport::VerbsError err = engine_.modify_qp(d.qpn, d.attr, d.mask, fx_);
        d.status = err ? DeferredModify::Status::Failed : DeferredModify::Status::Done;
        d.error = err.msg;
    }

    template <typename Put>
    static void put_rp(Put& put, const cc::RpCounters& c) {
        put("rp_rate_decreases", c.rate_decreases);
        put("rp_rate_increases", c.rate_increases);
        put("rp_cnp_deferred", c.cnp_deferred);
    }

    transport::Engine& engine_;
    transport::Effects fx_;
    std::array<transport::TxFrame, 32> frames_;  // pull_tx's, one Nic burst
    int pfc_priority_;
    BitsPerSec port_speed_;
    wire::PfcPauseState pauses_;
    cc::CcConfig cc_cfg_{cc::CcAlgorithm::kNone, {}, false};
    std::optional<transport::CcDriver> cc_;
    uint64_t cnp_ignored_ = 0;
    host::HostStack* host_ = nullptr;
    std::vector<DeferredModify> deferred_;
};

// Completes `av` for RTR. Pending: an ARP request is out; poll the NIC (and
// its peer, in one-thread setups) and call again. Error: `error` says what is
// wrong, e.g. a RoCEv1 or missing GID index and the index to use instead.
template <NicUpper Upper>
host::PathResult fill_av(Nic<Upper>& nic, transport::AddressVector& av, uint64_t cookie) {
    host::PathResult r = nic.resolve_path(host_av(av), cookie);
    if (r.status == host::PathResult::Status::Ready) complete_av(r, av);
    return r;
}

// modify_qp with kAttrAv that never waits on ARP. Ready: applied at once.
// Pending: parked in the upper and applied by the loop when the ARP reply
// arrives (upper.deferred(qpn) says Done, or Failed and why). Error: the
// GID or route is wrong (r.error). Without kAttrAv it is plain modify_qp.
inline host::PathResult modify_qp_resolving(Nic<EngineUpper>& nic, EngineUpper& upper, Qpn qpn,
                                            const transport::QpAttr& attr, uint32_t mask) {
    host::PathResult r;
    r.status = host::PathResult::Status::Ready;
    if (mask & transport::kAttrAv) r = nic.resolve_path(host_av(attr.ah_attr), qpn.v);
    if (r.status == host::PathResult::Status::Error) return r;
    upper.defer_modify(qpn, attr, mask);
    if (r.status == host::PathResult::Status::Ready) upper.apply_deferred(qpn, mask & transport::kAttrAv ? &r : nullptr);
    return r;
}

}  // namespace rocemu::dpdk
