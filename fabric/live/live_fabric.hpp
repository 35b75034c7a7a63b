// The one-process live fabric (see live.hpp): built from a scaled Topology,
// it owns the rings, the switch runtimes and the verbs devices, wires each
// cable as a net_ring pair, primes every NIC's ARP cache with its gateway
// (the leaf port) as the virtual-time NICs route everything through it, and
// runs RC WRITE flows through the verbs API on one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fabric/gen_nic.hpp"
#include "fabric/live/live.hpp"

namespace rocemu::fabric::live {

// Cumulative counters of the whole fabric.
struct LiveTotals {
    uint64_t pfc_frames = 0;      // PFC frames the switches sent
    uint64_t ecn_marks = 0;       // CE marks the switches applied
    uint64_t cnps = 0;            // CNPs the NICs sent (np_cnp_sent)
    uint64_t switch_drops = 0;    // every switch drop reason, runtime and core
    uint64_t nic_drops = 0;          // engine drop reasons (but ignored responses) and port drops
    uint64_t ignored_responses = 0;  // ACKs the requesters ignored (drop_stale_response, drop_ghost_response)
    uint64_t lossless_drops = 0;  // switch headroom overruns and lossless queue drops
    LiveTotals operator-(const LiveTotals& o) const;
};

struct FlowResult {
    uint32_t src = 0, dst = 0;
    uint64_t bytes = 0;      // completed
    Nanos first_post = Nanos::max();
    Nanos last_cqe{};
    // A flow that reports arrivals: when its receiver polled the RECV
    // completion that made its last step whole (before last_cqe, whose ACK
    // came after); zero otherwise.
    Nanos arrived{};
    bool done = false;
    int verified = -1;       // 1 matched, 0 mismatched, -1 not checked (size 0)
};

// One workload's outcome.
struct WorkloadResult {
    bool complete = false;
    Nanos time{};            // first post to last completion, in fabric time (live)
    std::vector<FlowResult> flows;
    uint64_t bad_completions = 0;
    // Turns after a scheduling gap longer than the fabric clock's step, and
    // the real time the fabric clock did not count.
    uint64_t held_back_turns = 0;
    Nanos held_back{};
    Nanos waited{};  // fabric time held back because another process sharing the clock was behind
    bool stopped = false;  // a tick returned true
    std::string error;
};

// The data queue of one switch port ("leaf0:Ethernet0"), as its counters read.
struct QueueSample {
    std::string port;
    uint64_t depth_bytes = 0;
    uint64_t paused_ns = 0;  // since the start, held by PFC from the peer
};

struct Sample {
    Nanos at{};
    uint64_t bytes = 0;
    LiveTotals totals;
    std::vector<uint64_t> flow_bytes;  // per flow, received in this run (rcvd_bytes of its receiving QPs since it began)
    std::vector<QueueSample> queues;   // ports whose data queue has a non-zero count
};

class LiveFabric {
public:
    // `topo` is already scaled. nullptr and `error` on failure.
    static std::unique_ptr<LiveFabric> build(const Topology& topo, const LiveOptions& o, double scale,
                                             std::string& error);
    ~LiveFabric();
    LiveFabric(const LiveFabric&) = delete;
    LiveFabric& operator=(const LiveFabric&) = delete;

    // Creates (once per src, dst, UDP source port) the QPs and memory of
    // every flow the fabric will run, in one call: their ACK timeout covers
    // the busiest NIC's window over all of them, so a second call is refused
    // (its QPs would raise the bound the earlier ones were made with). False
    // and `error` on failure, or when LiveOptions::stop, polled between
    // flows, says to stop.
    bool connect(const std::vector<FlowSpec>& flows, std::string& error);
    // Runs the flows (connected first) until all complete or `timeout`;
    // calls `tick` about every `every` with the bytes completed so far (a
    // tick that returns true stops the run: `stopped`), and samples the
    // totals into `samples` every `sample_every`.
    WorkloadResult run(const std::vector<FlowSpec>& flows, Nanos timeout, Nanos every,
                       const std::function<bool(Nanos, uint64_t, uint64_t)>& tick, Nanos sample_every,
                       std::vector<Sample>& samples);
    // `fresh`: a split fabric's switch counters from snapshots taken after
    // the call (slower; for the counters of a size, not for progress).
    LiveTotals totals(bool fresh = false);
    // Per switch port: "switch,port,counter,value" rows of every non-zero
    // counter (split: the switch nodes' snapshots, `fresh` as for totals()).
    std::vector<std::string> switch_port_rows(bool fresh = false);
    // The switch totals of those rows, plus the NICs' counters.
    LiveTotals totals(const std::vector<std::string>& rows);
    // The data queue (Topology::data_queue) of every switch port with a
    // non-zero depth or paused time, from those rows, and every NIC's paused time.
    std::vector<QueueSample> data_queues(const std::vector<std::string>& rows);
    // Per NIC: "nic,counter,value" rows of every non-zero engine, port and
    // MAC (NicWire) counter.
    std::vector<std::string> nic_rows();
    // Mean and largest time of one turn of the loop in the last run.
    Nanos mean_turn() const { return turns_ ? Nanos{turn_sum_.v / static_cast<int64_t>(turns_)} : Nanos{}; }
    Nanos max_turn() const { return max_turn_; }
    // Fabric time the clock skipped to catch up with nodes that ran before
    // they heard of it (FabricClock::jumped; across machines).
    Nanos clock_jumped() const;
    // The ACK timeout exponent of every QP, and the
    // round-trip bound it came from (zero when LiveOptions::rc_timeout set it).
    uint8_t rc_timeout() const;
    Nanos rtt_bound() const;
    // Frames written by --pcap so far; nullopt when this process has no end
    // of the captured link (or nothing is captured).
    std::optional<uint64_t> captured_frames() const;
    // Flushes the capture: false, with `error`, if its file did not take
    // every frame (true without a capture).
    bool flush_capture(std::string& error);

    struct Impl;

private:
    explicit LiveFabric(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
    uint64_t turns_ = 0;
    Nanos turn_sum_{}, max_turn_{};
};

}  // namespace rocemu::fabric::live
