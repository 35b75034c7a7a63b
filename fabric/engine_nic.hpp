// An RDMA NIC in virtual time built on the RC transport: a
// transport::Engine (verbs: PD, MR, CQ, RC QPs; requester, responder,
// completer; ACKs, retransmission) as a sim::Node. Frames the engine builds
// leave one at a time when the port is free (line rate, 20 B preamble/IFG per
// frame, as the switch counts) and not paused by PFC; received frames go to
// Engine::on_frame, PFC frames pause the port's data priority. Each QP is
// paced by its own cc::QpCc: CNPs the engine reports cut its rate, and the
// engine is told when the QP may send next (Engine::set_next_send).
//
// Fabric drives it with flows: each flow is one RC QP pair whose message is
// posted as signaled RDMA WRITEs of at most kChunk bytes, at most
// kChunksInFlight at a time, in steps (a collective's steps): the NIC opens
// step 0 at the flow's start, reports each finished step to its FlowSink and
// opens a later step when told (begin_step), whether or not its earlier
// steps are finished (the QP keeps them in order). A stepped flow's WRITEs
// carry their step as an immediate, and its receiving NIC reports each step
// once its bytes have all arrived (FlowSink::on_step_arrived), as a
// collective's next step waits for the data it forwards, not for the ACKs
// of its own; so do a flow's that gates another (FlowSpec::reports_arrival).
// Per-flow progress goes into the FlowStats the Fabric owns: tx_bytes
// counts bytes posted, last_rx the time of the last WRITE completion; the
// receive side (rx_bytes, packets, CE marks, CNPs) comes from the receiving
// QP (Fabric::sync_receiver_stats).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "cc/cc.hpp"
#include "dataplane/transport/engine.hpp"
#include "fabric/gen_nic.hpp"
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
    uint64_t post_errors = 0;         // flow WRITEs the engine refused
    uint64_t pfc_tx = 0;              // pauses sent as a stuck receiver
    uint64_t stalled_drops = 0;       // frames that arrived while the receiver was stuck
};

class FlowSink {
public:
    // A flow's step has completed at its sender (its last WRITE's CQE arrived).
    virtual void on_step_done(uint32_t flow, Nanos now) = 0;
    // A step of a flow that reports arrivals (FlowSpec::reports_arrival) has
    // arrived whole at its receiver (the RECV completions of its WRITEs with
    // immediate add up to the step's bytes).
    virtual void on_step_arrived(uint32_t flow, Nanos now) = 0;

protected:
    ~FlowSink() = default;
};

class alignas(64) EngineNic : public sim::Node {
public:
    static constexpr uint32_t kChunk = 64 * 1024;
    static constexpr uint32_t kChunksInFlight = 16;
    // A sending QP's send queue: a flow keeps at most kChunksInFlight WRITEs
    // posted (post_write's caller no more either).
    static constexpr uint32_t kSqDepth = kChunksInFlight;
    // RECVs the receiving QP of a flow that reports arrivals keeps posted,
    // one consumed by each WRITE with immediate and posted again as its
    // completion is handled:
    // at most kChunksInFlight are outstanding, so no WRITE meets an empty
    // queue (an RNR NAK).
    static constexpr uint32_t kRecvDepth = 2 * kChunksInFlight;
    static constexpr uint16_t kRespQueue = 64;  // a receiving QP's queued answers
    static constexpr uint32_t kMaxQps = 1u << 20;  // the engine's largest max_qp
    static constexpr uint64_t kArenaBytes = uint64_t{256} << 20;

    // Throws std::invalid_argument if the engine config is rejected.
    EngineNic(sim::Simulator& sim, const Topology& topo, uint32_t nic_index);
    ~EngineNic() override;
    EngineNic(const EngineNic&) = delete;
    EngineNic& operator=(const EngineNic&) = delete;

    sim::NodeId attach();

    // A memory region of `bytes` (zeroed) with local and remote write access,
    // carved from the NIC's arena, which the first call maps. The arena is
    // mapped at an address derived from the NIC index when that range is
    // free, so RETH virtual addresses, and with them the pcaps, repeat from
    // run to run. Throws std::invalid_argument when the arena (kArenaBytes)
    // is exhausted or cannot be mapped.
    struct Region {
        uint8_t* addr = nullptr;  // null for null and discard regions: no memory
        uint64_t va = 0;          // the address a peer's RETH names
        uint64_t len = 0;
        uint32_t lkey = 0;
        uint32_t rkey = 0;
    };
    Region add_region(uint64_t bytes);
    // A sink of `bytes` for peers' WRITEs whose payload nobody reads, in a
    // discard MR of its own (Engine::alloc_discard_mr): each WRITE is checked
    // and acknowledged as into add_region's memory, and its payload is
    // dropped, so a receiver touches no memory for it. Its va is numbered
    // from the fixed address the NICs' shared sink arena had before discard
    // regions (the same for every NIC), so RETHs and pcaps repeat from run to
    // run and match earlier builds'; it grows by `bytes` per call without
    // bound (nothing is mapped).
    Region discard_region(uint64_t bytes);
    // A source of `bytes` in the NIC's null MR (Engine::alloc_null_mr):
    // WRITEs from it carry zeros, as from a zeroed region, but no memory is
    // read and the frame pool zeroes only what an earlier frame left in a
    // buffer. Its addr is null (a null MR covers every address).
    Region null_region(uint64_t bytes);
    // An RC QP in RESET; connect() moves it to RTS towards the peer's QP. A
    // flow is one-way: its sender's QP only posts WRITEs, its receiver's only
    // answers them, and each is given room for its own side only (a 256-NIC
    // all-to-all has 130560 QPs). The receiver of a flow that reports
    // arrivals (StepReceiver) also has room for kRecvDepth RECVs.
    enum class QpEnd : uint8_t { Sender, Receiver, StepReceiver };
    Qpn create_qp(QpEnd end);
    // `udp_sport` is the QP's ECMP entropy; 0 derives it from the QPNs as rxe does.
    void connect(Qpn local, Qpn remote, const NicSpec& peer, Psn sq_psn, Psn rq_psn, uint16_t udp_sport = 0);
    // One signaled RDMA WRITE of [src, src+len) to the peer's remote_addr.
    bool post_write(Qpn qp, uint64_t wr_id, const Region& src, uint32_t len, uint64_t remote_addr, uint32_t rkey);

    // Flows (set before the run). `stats` is indexed by flow id.
    void set_flow_sink(std::vector<FlowStats>* stats, FlowSink* sink) {
        stats_ = stats;
        sink_ = sink;
    }
    // Flow `flow` sends `spec.size` bytes in `spec.steps` steps on `qp` (in
    // RTS), every chunk from `src` to [remote_addr, +kChunk) under `rkey`.
    void add_tx_flow(uint32_t flow, const FlowSpec& spec, Qpn qp, const Region& src, uint64_t remote_addr,
                     uint32_t rkey);
    // The receiving end of a flow on `qp`. One that reports arrivals
    // (spec.reports_arrival(); `qp` a StepReceiver in RTS) posts its RECVs
    // and reports each step's arrival; others need nothing.
    void add_rx_flow(uint32_t flow, const FlowSpec& spec, Qpn qp);
    // Arms the node for the flows' start times (Fabric::start).
    void begin_flows() { rearm(sim_.now()); }
    // Opens the flow's next step; its WRITEs are posted at `now`, after
    // those of the steps before it.
    void begin_step(uint32_t flow, Nanos now);
    // From `at` the NIC stops draining its receive side, as when the host
    // stops posting receive buffers: it keeps its port paused (an XOFF for
    // the data priority, refreshed every half pause time) and drops whatever
    // still arrives (stalled_drops), PFC frames excepted. Set before start.
    void stall_from(Nanos at);

    // Port paused by a received PFC frame (data priority) at `now`, and the
    // total paused time up to `now`.
    bool paused(Nanos now) const { return pause_.paused(now); }
    Nanos paused_time(Nanos now) const { return pause_.paused_time(now); }
    const NicSpec& spec() const { return spec_; }

    void on_frame(sim::PortId port, sim::FrameHandle h, Nanos now) override;
    void on_timer(Nanos now) override;
    // Paces its port itself (busy_until_): its link's TxDone events would
    // tell it nothing.
    bool hears_tx_ready() const override { return false; }
    void on_link_added(sim::PortId port, sim::LinkId link) override {
        if (port == 0) link_ = link;
    }

    const EngineNicCounters& counters() const { return c_; }
    const transport::Engine& engine() const { return *eng_; }
    BitsPerSec qp_rate(Qpn qp) const;

private:
    struct QpCtx {
        Qpn qpn;
        cc::QpCc cc;
        uint32_t flow = UINT32_MAX;
        Nanos cc_at = Nanos::max();  // cc.next_timer() as cc_changed last saw it
    };
    struct TxFlow {
        uint32_t flow;
        Qpn qp;
        Region src;
        uint64_t remote_addr;
        uint32_t rkey;
        Nanos start;
        uint64_t size;
        uint32_t steps;
        uint32_t step = 0;       // the step being posted (== steps when all are)
        uint32_t opened = 0;     // steps whose WRITEs may be posted (step < opened)
        uint32_t acked_step = 0; // the oldest step not completed (== steps when done)
        bool imm = false;        // WRITEs with the step as immediate (FlowSpec::reports_arrival)
        bool started = false;    // step 0 opened
        uint64_t posted = 0;     // bytes of `step` posted
        uint64_t acked = 0;      // bytes of `acked_step` completed
        uint32_t in_flight = 0;
    };
    // The receiving end of a flow that reports arrivals.
    struct RxFlow {
        uint32_t flow;
        Qpn qp;
        StepArrivals steps;
    };
    QpCtx* ctx(Qpn q);
    TxFlow* tx_flow(uint32_t flow);
    // The QP's DCQCN timer may have changed: keep cc_armed_ and cc_next_ right.
    void cc_changed(QpCtx& c);
    // The earliest DCQCN timer of all QPs (Nanos::max(): none armed).
    Nanos cc_next();
    // A flow to look at in the next post_due().
    void mark_due(const TxFlow& f);
    // Drops started flows from unstarted_ and recomputes next_start_.
    void prune_unstarted();
    void post_due(Nanos now);
    // Starts `f` if its time has come (`started` is set then) and posts what its window allows.
    void post_flow(TxFlow& f, Nanos now, bool& started);
    void on_completion(const transport::Wc& wc, Nanos now);
    // A RECV completion of a WRITE with immediate (a flow that reports arrivals).
    void on_arrival(const transport::Wc& wc, Nanos now);
    bool post_recvs(Qpn qp, uint32_t n);
    void handle(Nanos now);
    void try_send(Nanos now);
    void send_pause(Nanos now);
    void rearm(Nanos now);

    // What an event reads, first, after sim::Node's own line (its vtable
    // pointer and timer): a 256-NIC fabric visits each NIC about every
    // microsecond, too seldom for its lines to stay in the first-level
    // cache, so each line an event reads is a miss. The scalars and the
    // table headers every frame or timer reads share the next three lines;
    // the effects buffer (whose two counts every event reads), the spec,
    // profile and set-up state come after.
    sim::Simulator& sim_;
    std::unique_ptr<transport::Engine> eng_;
    Nanos busy_until_{};
    Nanos stall_at_ = Nanos::max();
    Nanos next_start_ = Nanos::max();  // the earliest start among unstarted_
    // At most the earliest DCQCN timer of all QPs, and equal to it unless
    // cc_stale_ (that QP's timer moved later since): rearm and on_timer read
    // this line instead of walking cc_armed_ and the QPs' contexts, two
    // loads in a chain from beyond the L1 at every event of a large fabric.
    Nanos cc_next_ = Nanos::max();
    bool cc_stale_ = false;
    const BitsPerSec line_rate_;
    sim::LinkId link_ = sim::Simulator::kNoLink;  // out of port 0
    const uint8_t prio_;
    bool post_due_ = false;
    std::vector<FlowStats>* stats_ = nullptr;
    StuckPause stuck_;
    // A NIC of a 256-NIC all-to-all holds 510 QPs and 255 flows, so nothing
    // per event walks them all:
    std::vector<uint64_t> cc_armed_;     // bit per qps_ index: its DCQCN timer is armed
    std::vector<uint32_t> unstarted_;    // tx_ indices of flows not started, in order
    std::vector<QpCtx> qps_;
    std::vector<uint32_t> ctx_at_;       // qps_ index by QPN - Engine::kFirstQpn
    EngineNicCounters c_;
    // On a line of its own: paused() reads its first bytes and the data
    // priority's pause time.
    alignas(64) NicPause pause_;
    transport::Effects fx_;
    FlowSink* sink_ = nullptr;
    std::vector<TxFlow> tx_;
    std::vector<RxFlow> rx_;  // looked up by QP (rx_at_)
    std::vector<std::pair<uint32_t, uint32_t>> rx_at_;  // (QPN, rx_ index), sorted
    std::vector<std::pair<uint32_t, uint32_t>> flow_at_;  // (flow id, tx_ index), sorted
    std::vector<uint64_t> due_;  // bit per tx_ index: post_due() looks at it (a completion, a step opened)
    const NicSpec spec_;
    const NicProfile profile_;
    const std::array<uint8_t, 6> gateway_mac_;
    transport::PdHandle pd_;
    transport::CqHandle cq_;
    uint32_t cq_need_ = 0;        // WQEs the QPs can have posted at once: the CQ has room for them
    uint32_t cq_room_ = kSqDepth;  // the CQ's entries
    uint8_t* arena_ = nullptr;  // mapped by the first add_region()
    transport::MrHandle null_mr_{};  // allocated by the first null_region()
    uint64_t arena_used_ = 0;
    uint64_t discard_used_ = 0;
    const uint32_t nic_index_;
};

}  // namespace rocemu::fabric
