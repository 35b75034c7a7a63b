// A soft switch in virtual time: the sw::Switch pure core driven as a
// sim::Node. Frames arrive as bytes; the node reads the headers the core
// needs into a PacketDesc, then carries out the core's effects on the bytes:
// L2 rewrite to the next hop (and TTL), CE marking, PFC frames, drops, and
// handing a dequeued frame to the link when the core says the port is ready.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/rng.hpp"
#include "fabric/topology.hpp"
#include "sim/sim.hpp"
#include "switch/switch.hpp"

namespace rocemu::fabric {

struct SwitchNodeCounters {
    uint64_t not_ip_drops = 0;      // neither IPv4 nor PFC (ARP, IPv6, runts): not routed here
    uint64_t bad_pfc_drops = 0;     // 0x8808 frames that do not parse as PFC
    uint64_t pool_empty_drops = 0;  // a PFC frame could not be built: the frame pool is exhausted
    uint64_t pfc_frames_sent = 0;
    uint64_t ce_marked = 0;
};

// A watchdog event, time-stamped, for the run's log.
struct SwitchEvent {
    Nanos at;
    std::string text;
};

class alignas(64) SwitchNode : public sim::Node {
public:
    // `scratch` is the effects buffer the node fills and applies within each
    // call, empty in between; the switches of one Simulator can share one
    // (one thread runs them and none calls another), so its lines stay in
    // the cache across switches. Null: the node has its own.
    SwitchNode(sim::Simulator& sim, const Topology& topo, uint32_t sw_index, uint64_t seed,
               sw::Effects* scratch = nullptr);
    SwitchNode(const SwitchNode&) = delete;
    SwitchNode& operator=(const SwitchNode&) = delete;

    // Registers with the simulator; call once before linking.
    sim::NodeId attach();

    void on_frame(sim::PortId port, sim::FrameHandle h, Nanos now) override;
    void on_timer(Nanos now) override;
    void on_port_timer(sim::PortId port, Nanos now) override;
    // The core paces its ports (TxReady, port timers): its links' TxDone
    // events would tell it nothing.
    bool hears_tx_ready() const override { return false; }
    void on_link_added(sim::PortId port, sim::LinkId link) override {
        if (port < port_.size()) port_[port].link = link;
    }

    const sw::Switch& core() const { return sw_; }
    const std::string& name() const { return name_; }
    const SwitchNodeCounters& counters() const { return c_; }
    const std::vector<SwitchEvent>& events() const { return events_; }

private:
    void apply(Nanos now);
    void apply_one(const sw::Effect& e, Nanos now);
    void rearm();
    void send_pfc(sim::PortId port, const sw::PfcFrameDesc& d);

    // What every event reads comes first, next to the vtable pointer; the
    // switch core (some 15 KB) and what only set-up, PFC and the watchdog
    // read come after.
    sim::Simulator& sim_;
    std::unique_ptr<sw::Effects> own_fx_;  // null when the scratch is shared
    sw::Effects& fx_;
    Rng rng_;
    // Per port: when the core said it has a frame ready (Nanos::max(): not
    // armed), and the link out of it, which the dequeue that reads tx_at
    // sends on. A time to come is a port timer of the simulator's
    // (arm_port), whose event is stale unless it fires at the port's
    // tx_at; `tx_due_` has a bit per port whose time has come in the
    // current apply(), and `any_due_` says whether one is set. A spine has a
    // port per leaf: a heap of the armed ports of its own cost a few lines of
    // this node a packet-hop at 256 hosts, the simulator's event wheel, in
    // use by every event, none.
    struct Port {
        Nanos tx_at = Nanos::max();
        sim::LinkId link = sim::Simulator::kNoLink;
    };
    std::vector<Port> port_;
    std::vector<uint64_t> tx_due_;
    bool any_due_ = false;
    std::vector<std::array<uint8_t, 6>> port_mac_;
    SwitchNodeCounters c_;
    sw::Switch sw_;
    std::string name_;
    std::vector<SwitchEvent> events_;
};

}  // namespace rocemu::fabric
