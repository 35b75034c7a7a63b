// The bottleneck on the project's soft switch: senders on ports 0..N-1, the
// receiver on port N, data on lossless DSCP 3 with ECT(0). The switch's MMU
// decides marking (WRED on queue 3) and PFC; XOFF/XON frames it sends out of
// a sender's port pause that sender. CNPs return outside the switch after
// cnp_delay, as in the marking-queue model.
#include <algorithm>
#include <string>
#include <vector>

#include "cc/sim/bottleneck.hpp"
#include "cc/sim/host_side.hpp"
#include "common/rng.hpp"
#include "switch/switch.hpp"

namespace rocemu::cc::sim {

using detail::Ev;
using detail::HostSide;

namespace {

constexpr uint8_t kDataDscp = 3;  // SONiC: TC3, queue 3, lossless PG 3
constexpr int kDataQueue = 3;
constexpr int kDataPriority = 3;
constexpr uint8_t kEcnEct0 = 2;

constexpr uint32_t host_ip(int port) { return (10u << 24) | (static_cast<uint32_t>(port) << 8) | 1u; }

sw::SwitchConfig switch_config(const BottleneckConfig& c) {
    sw::SwitchConfig s = sw::sonic_default_config(static_cast<std::size_t>(c.flows) + 1, c.link_rate);
    s.wred[kDataQueue].ecn = sw::EcnMode::All;
    s.wred[kDataQueue].green_min_threshold = c.kmin;
    s.wred[kDataQueue].green_max_threshold = c.kmax;
    s.wred[kDataQueue].green_drop_probability = static_cast<uint32_t>(c.pmax * 100 + 0.5);
    // Storm detection would drop lossless traffic if a pause outlived it; CC
    // is what is under test here.
    s.pfc_wd.enabled = false;
    return s;
}

}  // namespace

BottleneckResult Bottleneck::run_soft_switch() {
    BottleneckResult res;
    const sw::SwitchConfig scfg = switch_config(cfg_);
    if (std::string err = sw::validate(scfg); !err.empty()) {
        res.error = "soft switch config: " + err;
        return res;
    }
    sw::Switch fabric(scfg);
    const sw::PortId rx_port = static_cast<sw::PortId>(cfg_.flows);
    for (int p = 0; p <= cfg_.flows; ++p)
        fabric.routes().learn_host_v4(host_ip(p), static_cast<sw::PortId>(p), {0x02, 0, 0, 0, 0, static_cast<uint8_t>(p)});

    HostSide hosts(cfg_, res);
    Rng rng(cfg_.seed);
    const Bytes pkt = cfg_.packet_bytes;
    const Nanos host_ser = cfg_.link_rate.serialise(pkt);
    struct InFlight {
        int flow;
        bool ce;
    };
    std::vector<InFlight> handles;  // indexed by switch handle
    sw::Effects fx;
    Nanos fabric_timer_at = Nanos::max();
    uint64_t fabric_timer_gen = 0;

    auto apply = [&](Nanos now) {
        for (const sw::Effect& e : fx) {
            switch (e.kind) {
                case sw::EffectKind::MarkCe:
                    if (!handles[e.handle].ce) ++res.ce_marked;
                    handles[e.handle].ce = true;
                    break;
                case sw::EffectKind::Drop: ++res.fabric_drops; break;
                case sw::EffectKind::TxReady: hosts.push(e.at, Ev::FabricTx, e.port, 0); break;
                case sw::EffectKind::SendPfc:
                    if (e.port < rx_port && ((e.pfc.class_enable >> kDataPriority) & 1)) {
                        const uint16_t quanta = e.pfc.quanta[kDataPriority];
                        if (quanta != 0) {
                            ++res.pfc_pauses;
                            res.last_xoff = now;
                        }
                        // One quantum is 512 bit times at the port's speed.
                        const Nanos pause = cfg_.link_rate.serialise(Bytes{uint64_t{quanta} * 64});
                        hosts.push(now + cfg_.link_delay, Ev::Pause, e.port, static_cast<uint64_t>(pause.v));
                    }
                    break;
                case sw::EffectKind::Enqueued:
                case sw::EffectKind::WatchdogStorm:
                case sw::EffectKind::WatchdogRestore: break;
            }
        }
        fx.clear();
        const Nanos t = fabric.next_timer();
        if (t != fabric_timer_at) {
            fabric_timer_at = t;
            ++fabric_timer_gen;
            if (t != Nanos::max()) hosts.push(std::max(t, now), Ev::FabricTimer, 0, fabric_timer_gen);
        }
    };

    while (!hosts.empty()) {
        const detail::Event e = hosts.pop();
        if (e.t > cfg_.duration) break;
        const Nanos now = e.t;
        switch (e.kind) {
            case Ev::Arrive: {
                sw::PacketDesc d;
                d.handle = static_cast<uint32_t>(handles.size());
                handles.push_back({e.flow, false});
                d.frame_len = pkt;
                d.in_port = static_cast<sw::PortId>(e.flow);
                d.dscp = kDataDscp;
                d.ecn = kEcnEct0;
                d.ip_proto = 17;
                d.src_port = static_cast<uint16_t>(0xC000 + e.flow);
                d.dst_port = 4791;
                d.src_v4 = host_ip(e.flow);
                d.dst_v4 = host_ip(cfg_.flows);
                fabric.on_packet(d, now, rng, fx);
                apply(now);
                res.max_queue = std::max(res.max_queue, fabric.queue_depth(rx_port, kDataQueue));
                break;
            }
            case Ev::FabricTx: {
                const std::optional<sw::TxDesc> tx = fabric.dequeue(static_cast<sw::PortId>(e.flow), now, rng, fx);
                apply(now);
                if (tx && e.flow == static_cast<int>(rx_port)) {
                    const InFlight& f = handles[tx->handle];
                    hosts.push(tx->end + cfg_.link_delay, Ev::Receive, f.flow, f.ce);
                }
                break;
            }
            case Ev::FabricTimer:
                if (e.arg != fabric_timer_gen) break;
                fabric_timer_at = Nanos::max();
                fabric.on_timer(now, fx);
                apply(now);
                break;
            default:
                if (hosts.handle(e, fabric.queue_depth(rx_port, kDataQueue)))
                    hosts.push(now + host_ser + cfg_.link_delay, Ev::Arrive, e.flow, 0);
                break;
        }
    }
    hosts.finish(cfg_.duration);
    return res;
}

}  // namespace rocemu::cc::sim
