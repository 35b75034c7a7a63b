// The transport engine plugged into the poll loop: EngineUpper is the
// NicUpper that feeds RoCEv2 frames, timers and TX pulls to a
// transport::Engine, and fill_av() is the step a QP takes before RTR:
// check the GID index, resolve the destination (ARP) and put the MAC,
// VLAN/PCP and DSCP/ECN into the engine's address vector.
//
//   transport::Engine engine(engine_config(stack));
//   EngineUpper upper(engine);
//   Nic<EngineUpper> nic(port, stack, upper, clock);
//   attr.ah_attr = {...};  // dgid, sgid_index, traffic_class
//   while ((r = fill_av(nic, attr.ah_attr, qpn.v)).status == Pending) nic.poll();
//   if (r.status == Error) fail with r.error;  else engine.modify_qp(qpn, attr, mask, upper.effects());
//
// The port's mbufs must hold transport::Engine::kMinTxBuf bytes
// (PortConfig::min_frame_room), which tx_burst requires of every buffer.
#pragma once

#include <span>

#include "dataplane/dpdk/nic.hpp"
#include "dataplane/wire/l2.hpp"
#include "dataplane/wire/pause.hpp"
#include "dataplane/transport/engine.hpp"

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

class EngineUpper {
public:
    static constexpr bool kHandlesRoce = true;

    // The NIC sends its RoCE traffic (data, ACKs and CNPs alike) on one PFC
    // priority; a pause of that priority holds all of it. Priority 3 is the
    // lossless RoCE class of SONiC's and mlx5's usual setup.
    static constexpr int kDefaultPfcPriority = 3;

    explicit EngineUpper(transport::Engine& engine, int pfc_priority = kDefaultPfcPriority,
                         BitsPerSec port_speed = BitsPerSec::gbps(100))
        : engine_(engine), pfc_priority_(pfc_priority), port_speed_(port_speed) {}

    void on_roce(std::span<const uint8_t> frame, Nanos now) { engine_.on_frame(frame, now, fx_); }
    // The host stack has counted the frame (rx_pfc); here it pauses TX.
    void on_pfc(std::span<const uint8_t> frame, Nanos now) {
        wire::Pfc pfc;
        if (wire::parse_pfc(frame, pfc)) pauses_.on_pfc(pfc, now, port_speed_);
    }
    bool tx_paused(Nanos now) const { return pauses_.paused(pfc_priority_, now); }
    const wire::PfcPauseState& pauses() const { return pauses_; }
    // Resolutions are picked up by calling fill_av() again.
    void on_host_effect(const host::HostEffect&, Nanos) {}
    Nanos next_timer() const { return engine_.next_timer(); }
    void on_timer(Nanos now) { engine_.on_timer(now, fx_); }
    size_t pull_tx(std::span<uint8_t> out, Nanos now) {
        if (tx_paused(now)) return 0;
        transport::TxFrame f;
        f.buf = out;
        return engine_.tx_burst(std::span(&f, 1), now, fx_) ? f.len : 0;
    }

    // Engine-wide or per-QP counters for telemetry; runs on the loop thread.
    void answer(CounterQuery& q) const {
        auto put = [&q](const char* name, uint64_t v) { q.values.emplace_back(name, v); };
        switch (q.kind) {
            case CounterQuery::Kind::Engine:
                q.found = true;
                transport::for_each_counter(engine_.counters(), put);
                return;
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
                }
                return;
        }
    }

    // CQ events and CNPs the engine reported; the application clears them.
    transport::Effects& effects() { return fx_; }

private:
    transport::Engine& engine_;
    transport::Effects fx_;
    int pfc_priority_;
    BitsPerSec port_speed_;
    wire::PfcPauseState pauses_;
};

// Completes `av` for RTR. Pending: an ARP request is out; poll the NIC (and
// its peer, in one-thread setups) and call again. Error: `error` says what is
// wrong, e.g. a RoCEv1 or missing GID index and the index to use instead.
template <NicUpper Upper>
host::PathResult fill_av(Nic<Upper>& nic, transport::AddressVector& av, uint64_t cookie) {
    host::AddressVector hav;
    hav.dgid = av.dgid;
    hav.sgid_index = av.sgid_index;
    hav.traffic_class = av.traffic_class;
    hav.hop_limit = av.hop_limit;
    hav.flow_label = av.flow_label;
    host::PathResult r = nic.resolve_path(hav, cookie);
    if (r.status != host::PathResult::Status::Ready) return r;
    av.dmac = r.l2.dst;
    av.vlan = r.l2.vlan;
    av.vlan_id = r.l2.vid;
    av.pcp = r.l2.pcp;
    av.traffic_class = static_cast<uint8_t>(r.l3.dscp << 2 | r.l3.ecn);
    av.hop_limit = r.l3.ttl;
    return r;
}

}  // namespace rocemu::dpdk
