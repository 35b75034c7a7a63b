// A whole fabric in virtual time: one Simulator holding a SwitchNode per
// switch and a NIC per NIC of a Topology (an EngineNic with RC QPs, or a
// GenNic traffic generator, as nic.model says), cabled as the topology says,
// with flows to run, optional pcap capture of named links and a sampler for
// time series. One thread, deterministic: the same topology, flows and seed
// give identical counters and byte-identical pcaps.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/heap_segment.hpp"
#include "dataplane/pcap/pcap.hpp"
#include "fabric/engine_nic.hpp"
#include "fabric/gen_nic.hpp"
#include "fabric/switch_node.hpp"
#include "fabric/topology.hpp"
#include "sim/sim.hpp"

namespace rocemu::fabric {

// Fabric-wide totals at the end of (or during) a run.
struct Totals {
    uint64_t pfc_frames = 0;      // sent by switches and NICs
    uint64_t pfc_xoff = 0;        // switch XOFFs (incl. refreshes)
    uint64_t ecn_marks = 0;       // CE marks by switches
    uint64_t cnps = 0;            // CNPs sent by NICs
    uint64_t switch_drops = 0;    // every reason
    uint64_t watchdog_drops = 0;  // PFC watchdog's share of switch_drops
    uint64_t nic_drops = 0;
    uint64_t ignored_responses = 0;  // ACKs RC requesters discarded (late duplicates): nothing lost, not drops
    uint64_t fabric_link_bytes = 0;  // bytes carried by switch-to-switch links, both directions
    uint64_t sim_events = 0;
    uint64_t frames_delivered = 0;  // over every link
    Bytes max_queue{};              // deepest egress queue seen anywhere
    Nanos nic_paused{};             // total time NICs held data back for PFC
    bool operator==(const Totals&) const = default;
};

// The sim link for a cable of this class: its speed and propagation delay,
// no extra wire overhead (the nodes pace every frame with it).
sim::LinkConfig link_config(const LinkClass& c);

class Fabric : private FlowSink {
public:
    Fabric(const Topology& topo, uint64_t seed);
    Fabric(const Fabric&) = delete;
    Fabric& operator=(const Fabric&) = delete;

    // Before start(): flows, stalls, captures. With the RC model a flow is
    // an RC QP pair (one QP on each NIC, connected to each other) and a
    // kChunk memory region on each side. Throws std::invalid_argument for a
    // flow whose ends are not two of the fabric's NICs; start() throws it if
    // a flow's `after` names no other flow.
    uint32_t add_flow(const FlowSpec& f);
    // NIC `nic` becomes a stuck receiver at `at`: it stops draining what
    // arrives and keeps its port paused (EngineNic::stall_from,
    // GenNic::stall_from). Throws std::invalid_argument for an unknown NIC.
    void stall(uint32_t nic, Nanos at);
    // Taps both directions of the named link into one pcap. False (with a
    // message) if the link is unknown or the file cannot be written.
    bool capture(std::string_view link, const std::string& path, std::string& error);
    // Why a capture's file did not get every frame (a full disk), once run()
    // has flushed it; empty if it did.
    const std::string& capture_error() const { return capture_error_; }
    // RC model, a flow that reports arrivals (FlowSpec::reports_arrival):
    // when its receiver saw its last step arrive whole, before its sender's
    // last completion (FlowStats::last_rx); zero until then. Kept apart from
    // FlowStats, which the NICs update as packets go, to leave that as it was.
    Nanos arrived_at(uint32_t flow) const { return arrived_at_[flow]; }
    void start();

    // Runs until every flow has delivered all its bytes or `limit`, calling
    // `sample(now)` every `every` of virtual time (if set), and `tick(now)`
    // (if set) every kTickEvents events, for a caller that shows progress by
    // its own clock; a tick that returns true stops the run there (a user's
    // Ctrl-C). Returns the virtual time reached. stats() is complete at each
    // sample and on return.
    static constexpr uint32_t kTickEvents = 1u << 16;
    Nanos run(Nanos limit, Nanos every = Nanos{0}, const std::function<void(Nanos)>& sample = {},
              const std::function<bool(Nanos)>& tick = {});
    bool all_done() const;

    const Topology& topology() const { return topo_; }
    // Bytes the fabric's heap segment handed out (0 without one).
    std::size_t heap_bytes() const { return heap_.used(); }
    sim::Simulator& sim() { return sim_; }
    Nanos now() const { return sim_.now(); }
    const std::vector<std::unique_ptr<SwitchNode>>& switches() const { return switches_; }
    NicModel model() const { return topo_.cfg.nic.model; }
    // Empty unless model() is Generator.
    const std::vector<std::unique_ptr<GenNic>>& nics() const { return nics_; }
    // Empty unless model() is Rc.
    const std::vector<std::unique_ptr<EngineNic>>& rc_nics() const { return rc_nics_; }
    uint32_t nic_count() const { return static_cast<uint32_t>(topo_.nics.size()); }
    bool nic_paused(uint32_t nic, Nanos now) const;
    const std::vector<FlowSpec>& flows() const { return flows_; }
    const std::vector<FlowStats>& stats() const { return stats_; }
    Totals totals() const;
    // The data queue (the one the NIC profile's DSCP maps to).
    int data_queue() const { return data_queue_; }
    // Links as built: [topology link][0 = a->b, 1 = b->a].
    sim::LinkId sim_link(uint32_t topo_link, int dir) const { return links_[topo_link][dir]; }
    // Every switch's watchdog events, in time order.
    std::vector<SwitchEvent> events() const;
    // The drops of totals() by cause, causes with none left out, in a fixed
    // order (switch causes, then the RC engines', then the NIC adapters');
    // with `ignored`, the responses RC requesters ignored instead
    // (Totals::ignored_responses, "nic drop_ghost_response" ...).
    std::vector<DropCount> drop_reasons(bool ignored = false) const;

private:
    // Calls f(side, cause, count, ignored) for every drop counter of the
    // fabric, side "switch" or "nic", `ignored` for the responses an RC
    // requester ignores: totals() sums them, drop_reasons() names them.
    template <typename F>
    void for_each_drop(F&& f) const;
    void on_step_done(uint32_t flow, Nanos now) override;
    void on_step_arrived(uint32_t flow, Nanos now) override;
    // Opens the flow's next steps whose data has come (see FlowSpec::after).
    void maybe_begin(uint32_t flow, Nanos now);
    // Opens the gated flows waiting for this one (FlowSpec::gate, behind)
    // whose gate has arrived and whose rank's stage before has opened.
    void open_waiters(uint32_t flow, Nanos now);
    // Flow `flow`'s data is all at its receiver: reported there if the flow
    // reports arrivals, else completed at its sender.
    bool arrived_whole(uint32_t flow) const;
    // RC model: copies each flow's receive-side counts (payload bytes
    // executed, packets, out of order, CE-marked, CNPs sent) from its
    // receiving QP into stats_, as the generator NIC counts them per flow as
    // they happen; before every sample and at the run's end.
    void sync_receiver_stats();

    // The fabric's objects come from a heap segment of their own: built
    // while build_ is set (the constructor) and in add_flow, stall, capture
    // and start; they then lie together whatever the process allocated
    // before (common/heap_segment.hpp). First, so it is released last.
    HeapSegment heap_;
    std::optional<HeapSegment::Use> build_;
    Topology topo_;
    sim::Simulator sim_;
    sw::Effects switch_fx_;  // the switches' shared effects scratch (SwitchNode)
    std::vector<std::unique_ptr<SwitchNode>> switches_;
    std::vector<std::unique_ptr<GenNic>> nics_;
    std::vector<std::unique_ptr<EngineNic>> rc_nics_;
    // RC model, per flow: steps completed and begun, and the flows whose
    // next step waits for this one.
    std::vector<uint32_t> steps_done_;     // completed at the sender
    std::vector<uint32_t> steps_arrived_;  // arrived whole at the receiver (FlowSpec::reports_arrival)
    std::vector<Nanos> arrived_at_;        // when the last one did
    std::vector<uint32_t> steps_begun_;
    // RC model, per flow: the receiving NIC and QP, whose counters give the
    // flow's receive-side stats (sync_receiver_stats).
    std::vector<std::pair<uint32_t, Qpn>> rx_qps_;
    std::vector<std::vector<uint32_t>> followers_;
    std::vector<std::vector<uint32_t>> waiters_;  // the flows whose `gate` or `behind` names this one
    std::vector<std::array<sim::LinkId, 2>> links_;
    std::vector<FlowSpec> flows_;
    std::vector<FlowStats> stats_;
    std::vector<std::unique_ptr<pcap::Writer>> writers_;
    std::string capture_error_;
    int data_queue_ = 3;
    uint32_t done_ = 0;
};

}  // namespace rocemu::fabric
