// An RDMA NIC in virtual time built on the RC transport: a
// transport::Engine (verbs: PD, MR, CQ, RC QPs; requester, responder,
// completer; ACKs, retransmission) as a sim::Node. Frames the engine builds
// leave one at a time when the port is free (line rate, 20 B preamble/IFG per
// frame, as the switch counts) and not paused by PFC; received frames go to
// Engine::on_frame, PFC frames pause the port's data priority. Each QP is
// paced by its own cc::QpCc: CNPs the engine reports cut its rate, and the
// engine is told when the QP may send next (Engine::set_next_send).
//
// Not yet used by Fabric, whose hosts are GenNic traffic generators; the
// tests drive it on a leaf built by hand.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "cc/cc.hpp"
#include "dataplane/transport/engine.hpp"
#include "fabric/topology.hpp"
#include "sim/sim.hpp"

namespace rocemu::fabric {

struct EngineNicCounters {
    uint64_t tx_frames = 0;
    uint64_t rx_frames = 0;
    uint64_t pfc_rx = 0;
    uint64_t cnp_rx = 0;
    uint64_t completions = 0;
    uint64_t failed_completions = 0;  // status other than Success
    uint64_t pool_empty_drops = 0;    // no frame buffer for the engine to fill
};

class EngineNic : public sim::Node {
public:
    // Throws std::invalid_argument if the engine config is rejected.
    EngineNic(sim::Simulator& sim, const Topology& topo, uint32_t nic_index);
    EngineNic(const EngineNic&) = delete;
    EngineNic& operator=(const EngineNic&) = delete;

    sim::NodeId attach();

    // A memory region of `bytes` (zeroed) with local and remote write access.
    struct Region {
        uint8_t* addr = nullptr;
        uint64_t len = 0;
        uint32_t lkey = 0;
        uint32_t rkey = 0;
    };
    Region add_region(uint64_t bytes);
    // An RC QP in RESET; connect() moves it to RTS towards the peer's QP.
    Qpn create_qp();
    void connect(Qpn local, Qpn remote, const NicSpec& peer, Psn sq_psn, Psn rq_psn);
    // One signaled RDMA WRITE of [src, src+len) to the peer's remote_addr.
    bool post_write(Qpn qp, uint64_t wr_id, const Region& src, uint32_t len, uint64_t remote_addr, uint32_t rkey);

    void on_frame(sim::PortId port, sim::FrameHandle h, Nanos now) override;
    void on_timer(Nanos now) override;

    const EngineNicCounters& counters() const { return c_; }
    const transport::Engine& engine() const { return *eng_; }
    BitsPerSec qp_rate(Qpn qp) const;

private:
    struct QpCtx {
        Qpn qpn;
        cc::QpCc cc;
    };
    QpCtx* ctx(Qpn q);
    void handle(Nanos now);
    void try_send(Nanos now);
    void rearm(Nanos now);

    sim::Simulator& sim_;
    const NicSpec spec_;
    const NicProfile profile_;
    const BitsPerSec line_rate_;
    const std::array<uint8_t, 6> gateway_mac_;
    const uint8_t prio_;
    std::unique_ptr<transport::Engine> eng_;
    transport::Effects fx_;
    transport::PdHandle pd_;
    transport::CqHandle cq_;
    std::vector<std::unique_ptr<uint8_t[]>> memory_;
    std::vector<QpCtx> qps_;
    sim::NodeId id_ = 0;
    Nanos busy_until_{};
    Nanos paused_until_{};
    Nanos engine_timer_ran_ = Nanos::max();
    EngineNicCounters c_;
};

}  // namespace rocemu::fabric
