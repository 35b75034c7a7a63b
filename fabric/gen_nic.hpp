// A traffic-generating RoCEv2 NIC in virtual time. Each flow it sends is an
// RDMA WRITE stream (real RoCEv2 frames with ICRC, built by the wire layer)
// paced by the flow's own congestion control (cc::QpCc: DCQCN or none); the
// port serialises at line rate including preamble and IFG and honours PFC
// pauses per priority. As a receiver it counts goodput per flow, returns a
// CNP for CE-marked arrivals (the DCQCN notification point) and can be made
// to stall, pausing its switch port forever: the stuck receiver of a PFC
// storm.
//
// It models the data path only: no ACKs, no retransmission, no reordering
// buffer (out-of-order arrivals are counted and accepted, as a spraying NIC's
// reorder buffer would). The RC transport engine replaces it when it lands.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cc/cc.hpp"
#include "cc/dcqcn_np.hpp"
#include "common/slot_sched.hpp"
#include "common/units.hpp"
#include "dataplane/wire/packet.hpp"
#include "dataplane/wire/pause.hpp"
#include "fabric/nic_pause.hpp"
#include "fabric/topology.hpp"
#include "sim/sim.hpp"

namespace rocemu::fabric {

// QPNs are unique across the fabric: flow f uses QPN kFlowQpnBase + f at
// both ends, so a data packet or a CNP names its flow directly.
inline constexpr uint32_t kFlowQpnBase = 0x100;

struct FlowSpec {
    uint32_t src = 0;  // NIC indices
    uint32_t dst = 0;
    Bytes size{};  // bytes of WRITE payload
    Nanos start{};
    uint16_t sport = 0xC000;  // UDP source port: the flow's ECMP entropy
    // The RC model sends `size` in `steps` equal steps (the last takes the
    // remainder). Step k > 0 starts once flow `after`'s step k-1 has arrived
    // at this flow's source, whose data it forwards (a ring's data
    // dependency, as NCCL's next step waits for the data, not for the ACKs
    // of its own previous step, which the QP still sends in order); without
    // an `after`, once this flow's step k-1 has completed. The generator
    // model streams `size` at once.
    uint32_t steps = 1;
    uint32_t after = kNoFlow;
    // The RC model opens step 0 of a gated flow only once flow `gate` has
    // arrived whole at this flow's source (a halving-doubling stage reduces
    // and sends on what its partner sent in the stage before: the data, not
    // the ACKs; completed at its own source if it reports no arrivals) and
    // flow `behind` has opened all its steps (the same rank's stage before:
    // a rank posts its stages in order). `start` then does not apply. The
    // generator model ignores both too.
    uint32_t gate = kNoFlow;
    uint32_t behind = kNoFlow;
    // Its receiver reports its arrival also with a single step (a gate's).
    bool notify = false;
    static constexpr uint32_t kNoFlow = UINT32_MAX;

    bool gated() const { return gate != kNoFlow; }
    // Its WRITEs carry their step as an immediate and its receiver reports
    // each step's arrival (StepArrivals): a stepped flow's and a gate's.
    bool reports_arrival() const { return steps > 1 || notify; }
};

// Why flow `id` of `flows` cannot be gated as it says: its `gate` or
// `behind` names no other flow of them, or it is behind a flow without a
// gate; empty if it can. Both RC runtimes check it before a run.
std::string gate_problem(std::span<const FlowSpec> flows, uint32_t id);

// Bytes of step k of a flow of `size` in `steps` (the last takes the remainder).
inline uint64_t step_bytes(uint64_t size, uint32_t steps, uint32_t k) {
    return size / steps + (k + 1 == steps ? size % steps : 0);
}

// A stepped flow's receive side, in both RC runtimes: the bytes arrived per
// step, counted from the RECV completions of its WRITEs with immediate (the
// immediate names the step; a step's chunks may come over several QPs in any
// order between them), and how many steps from the first have arrived whole.
class StepArrivals {
public:
    StepArrivals() = default;
    StepArrivals(uint64_t size, uint32_t steps) : size_(size), got_(steps, 0) {}
    // Counts `bytes` of step `step` (an unknown step counts nothing) and
    // returns how many more steps have arrived whole.
    uint32_t add(uint32_t step, uint64_t bytes) {
        if (step >= got_.size()) return 0;
        got_[step] += bytes;
        const uint32_t before = arrived_;
        const auto n = static_cast<uint32_t>(got_.size());
        while (arrived_ < n && got_[arrived_] >= step_bytes(size_, n, arrived_)) ++arrived_;
        return arrived_ - before;
    }
    uint32_t arrived() const { return arrived_; }
    bool complete() const { return arrived_ == got_.size(); }

private:
    uint64_t size_ = 0;
    std::vector<uint64_t> got_;
    uint32_t arrived_ = 0;
};

// Receive-side state of one flow, also what the report reads.
struct FlowStats {
    uint64_t tx_bytes = 0;  // payload sent
    uint64_t tx_pkts = 0;
    uint64_t rx_bytes = 0;  // payload received
    uint64_t rx_pkts = 0;
    uint64_t rx_out_of_order = 0;
    uint64_t ce_rx = 0;
    uint64_t cnp_tx = 0;
    uint64_t cnp_rx = 0;
    Nanos first_tx = Nanos::max();
    Nanos last_rx{};
    bool done = false;  // every byte arrived
};

// A stuck receiver's pauses, for both NIC models: the longest XOFF for its
// data priority, sent again every half pause time so the port never resumes
// (what a NIC whose receive buffer stays full does).
class StuckPause {
public:
    StuckPause(const std::array<uint8_t, 6>& mac, uint8_t prio, BitsPerSec speed)
        : mac_(mac), prio_(prio), speed_(speed) {}
    // The first pause is due at `at`.
    void start(Nanos at) { next_ = at; }
    // When the next pause is due (Nanos::max() if not stuck).
    Nanos next() const { return next_; }
    // The pause frame in a new frame from the pool (invalid if the pool is
    // empty), and the wire time it takes (frame, preamble and IFG); the next
    // one is due half a pause time from `now`.
    sim::FrameHandle take(sim::FramePool& pool, Nanos now, Nanos& wire_time);

private:
    std::array<uint8_t, 6> mac_;
    uint8_t prio_;
    BitsPerSec speed_;
    Nanos next_ = Nanos::max();
};

struct NicCounters {
    uint64_t tx_frames = 0;
    uint64_t tx_bytes = 0;
    uint64_t rx_frames = 0;
    uint64_t pfc_rx = 0;
    uint64_t pfc_tx = 0;
    uint64_t cnp_tx = 0;
    uint64_t cnp_rx = 0;
    // Drops, by reason.
    uint64_t bad_frame_drops = 0;   // not RoCEv2/PFC, or failed parsing (ICRC)
    uint64_t unknown_qp_drops = 0;  // names no flow of this NIC
    uint64_t stalled_drops = 0;     // arrived while the receiver was stuck
    uint64_t pool_empty_drops = 0;  // no frame buffer to build into
    uint64_t cnp_queue_drops = 0;   // CNP backlog full
};

class alignas(64) GenNic : public sim::Node {
public:
    // `flows_done` counts flows whose last byte arrived, fabric-wide.
    GenNic(sim::Simulator& sim, const Topology& topo, uint32_t nic_index, std::vector<FlowStats>& stats,
           uint32_t& flows_done);
    GenNic(const GenNic&) = delete;
    GenNic& operator=(const GenNic&) = delete;

    sim::NodeId attach();

    // Flows are added before the run starts.
    void add_tx_flow(uint32_t flow, const FlowSpec& f, const NicSpec& dst);
    void add_rx_flow(uint32_t flow, const FlowSpec& f);
    // From `at`, the receiver stops draining and keeps its port paused.
    void stall_from(Nanos at);
    void start();

    void on_frame(sim::PortId port, sim::FrameHandle h, Nanos now) override;
    void on_timer(Nanos now) override;
    // Paces its port itself (busy_until_): its link's TxDone events would
    // tell it nothing.
    bool hears_tx_ready() const override { return false; }
    void on_link_added(sim::PortId port, sim::LinkId link) override {
        if (port == 0) link_ = link;
    }

    const NicCounters& counters() const { return c_; }
    bool paused(Nanos now) const { return pause_.paused(now); }
    // Time data was held back by received pauses, up to `now`.
    Nanos paused_time(Nanos now) const { return pause_.paused_time(now); }
    // The sending rate DCQCN allows a flow right now.
    BitsPerSec flow_rate(uint32_t flow) const;
    const NicSpec& spec() const { return spec_; }

private:
    // What send_data and rearm test first (sent, psn, the spec) share the
    // first line; the packet template, which only a sent frame reads, is last.
    struct TxFlow {
        uint32_t flow;
        Psn psn{0};
        uint64_t sent = 0;
        FlowSpec spec;
        cc::QpCc cc;
        wire::RocePacket tmpl;
    };
    struct RxFlow {
        uint32_t flow;
        uint64_t size;
        Psn expected{0};
        std::array<uint8_t, 6> src_mac;
        cc::NpQpState np;
        wire::IpAddr peer_ip;
    };

    // Per tx flow (slot i is tx_[i]), when on_timer must look at it (its
    // congestion control's timer) and when send_data may send from it (its
    // start and pacing passed, bytes left): the scans visit only those due,
    // in flow order, not all of a NIC's flows (255 in a 256-NIC
    // all-to-all). Whatever changes a flow's cc or bytes sent marks its slot.
    enum SchedKey : uint8_t { kTimerKey, kSendKey, kSchedKeys };
    using Sched = SlotSched<kSchedKeys>;
    Sched::Times times(const TxFlow& t) const;
    void flush_sched();
    TxFlow* find_tx(uint32_t flow);
    const TxFlow* find_tx(uint32_t flow) const;

    void try_send(Nanos now);
    bool send_cnp(Nanos now);
    bool send_data(Nanos now);
    void send_pause(Nanos now);
    void rearm(Nanos now);
    bool icrc_ok(const wire::RocePacket& p, sim::FrameHandle h, std::span<const uint8_t> frame) const;
    void receive_roce(const wire::RocePacket& p, Nanos now);

    // In the order a frame sent or received reads them: the scalars, the
    // flow tables, the counters and the pause state in the first lines; the
    // NIC's spec and profile (set-up and CNPs) after them.
    sim::Simulator& sim_;
    uint32_t rdma_mtu_;
    Nanos busy_until_{};
    sim::LinkId link_ = sim::Simulator::kNoLink;  // out of port 0
    Nanos stall_at_ = Nanos::max();
    BitsPerSec line_rate_;
    uint32_t rr_ = 0;
    uint16_t ip_id_ = 0;
    uint8_t prio_ = 3;  // 802.1p priority the data is paused on
    bool spraying_;     // profile_.spraying
    std::vector<FlowStats>& stats_;
    uint32_t& flows_done_;
    std::vector<TxFlow> tx_;
    std::vector<RxFlow> rx_;
    std::size_t cnp_head_ = 0;
    StuckPause stuck_;
    std::vector<uint32_t> rx_index_;  // flow -> index into rx_, or UINT32_MAX
    std::vector<uint32_t> cnp_queue_;  // flows owed a CNP, FIFO
    Sched sched_;
    std::vector<std::pair<uint32_t, uint32_t>> tx_by_flow_;  // (flow, index into tx_), sorted
    NicPause pause_;
    NicCounters c_;
    const NicSpec spec_;
    const NicProfile profile_;
    cc::DcqcnNp np_;  // keeps a pointer into profile_
    std::array<uint8_t, 6> gateway_mac_;
};

}  // namespace rocemu::fabric
