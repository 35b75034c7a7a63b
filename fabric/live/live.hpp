// The live fabric: the Topology of a fabric file run on DPDK in real time, in
// one process. Every NIC is a verbs device (transport engine, host stack,
// poll loop) on a net_ring port; every switch is the switch/dpdk runtime with
// its ports on net_ring; each cable is a pair of rings. One thread polls
// everything round-robin. Link rates are divided by a scale factor so that
// one core can carry them; delays and switch timers are multiplied by it, so
// the live fabric is the configured one slowed down, and the report scales
// times and bandwidths back. The same sweep runs as the hosts node of a
// fabric split into processes (LiveOptions::split, node.hpp).
//
// This header is free of DPDK so the CLI can include it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/live/shared_clock.hpp"
#include "fabric/scenario.hpp"
#include "fabric/topology.hpp"
#include "fabric/workload.hpp"

namespace rocemu::fabric::live {

// Sum of host link speeds one core carries in the one-process fabric: the
// default scale brings the fabric's host links down to this.
inline constexpr double kCoreBudgetGbps = 4.0;

// The default scale factor: the fabric's summed host link speed over
// kCoreBudgetGbps, at least 1, rounded up to an integer.
double default_scale(const Topology& t);

// Frames a live lossless PG must absorb after its XOFF leaves: what the
// sender pushed into the ring in its last turn and what the switch read in
// the same burst (two bursts of 32).
inline constexpr uint32_t kLiveHeadroomFrames = 64;

// The same fabric `s` times slower: port and link speeds / s; propagation
// delays, the PFC watchdog's detection and restoration times and the flowlet
// gap x s. The lossless PG headroom (xoff) is raised to `headroom_frames`
// frames of the NIC MTU where the profile's is smaller. Throws
// std::invalid_argument if s < 1 or a scaled speed would drop below 1 Mbit/s.
Topology scale_topology(const Topology& t, double s, uint32_t headroom_frames = kLiveHeadroomFrames);

// The priority group (and PFC priority) of the NICs' RoCE traffic: their
// DSCP through the switch profile's DSCP-to-TC and TC-to-PG maps.
int pfc_priority(const Topology& t);

// The longest a frame and its ACK can take in the (scaled) fabric `t` with
// every queue on the way full. Each direction crosses the longest shortest
// path between two NICs; per link, its propagation delay and one NIC-MTU
// frame at its speed; per switch on it, the switch's shared pool and every
// port's lossless reserve and headroom drained at its slowest port; and the
// sender's MAC drains `nic_window` (what the NIC's QPs have in flight) at the
// slowest host link. Everything in it grows with the scale.
Nanos rtt_bound(const Topology& t, Bytes nic_window);

// Real time a live process can be descheduled (gaps of 8-90 ms were seen on
// the shared 2 cores). The NICs' timers run on the TSC while the fabric
// clock leaves such gaps out, so an ACK can come that much later.
inline constexpr Nanos kSchedulingSlack = Nanos::from_ms(100);

// The RC ACK timeout exponent (IBTA `timeout`: 4.096 us x 2^t) for a round
// trip bound: the smallest t whose timeout is at least twice the bound plus
// kSchedulingSlack, within [1, 31].
uint8_t rc_timeout_for(Nanos rtt_bound);
Nanos rc_timeout_time(uint8_t t);

// The NICs' side of a fabric split into processes.
struct SplitHosts {
    std::vector<std::string> nic_devspecs;  // per NIC; empty: not split
    // Per NIC: the peer's servers mark to wait for before opening it (a memif
    // client end, split.hpp), or empty. `servers_mark` is written once the
    // other NICs are open.
    std::vector<std::string> nic_peer_marks;
    // Per NIC: its cable's name when the user gave this end's device
    // (--port), else empty; such a NIC's device and driver are printed once
    // it is open ("cable h0-left: NIC h0 on 0000:00:04.0 (net_virtio)").
    std::vector<std::string> nic_cables;
    std::string servers_mark;
    // The switch nodes not ready yet, each as the wait for it is described
    // ("switch node left at 10.0.0.1:7700 (connect: Connection refused)"):
    // no QP is set up before none is left. Throws std::runtime_error when a
    // switch can never be ready (it runs another fabric).
    std::function<std::vector<std::string>()> switches_waiting;
    Nanos link_wait = Nanos::from_s(30);    // for the NICs' links and the switch nodes
    // Every switch's counter rows ("switch,port,counter,value", split.hpp);
    // `fresh`: only from snapshots taken after the call; else they may be the
    // rows read up to one snapshot period (20 ms) before. Throws
    // std::runtime_error when a switch's counters cannot be had.
    std::function<std::vector<std::string>(bool fresh)> switch_rows;
    // The fabric clock shared with the switch nodes of this machine
    // (split.hpp's open_node_clock); null: not shared. Taken part in while
    // the clock turns: waiting for the switch nodes, and while a size runs.
    std::shared_ptr<SharedClock> clock;
};

struct LiveOptions {
    double scale = 0;            // 0: default_scale()
    uint32_t qps_per_flow = 1;   // RC QPs per flow (NCCL_IB_QPS_PER_CONNECTION); chunks go round-robin
    uint64_t seed = 1;
    std::string out_dir;         // report folder; empty writes nothing
    double timeout_s = 120;      // live seconds per size before the run gives up
    std::vector<std::string> eal_args;
    // Receives a progress line now and then (overwrite-style, no newline).
    std::function<void(const std::string&)> progress;
    // Polled with the progress (every 250 ms): true stops the size in
    // progress (a user's Ctrl-C); the sweep keeps the sizes before it.
    std::function<bool()> stop;
    // Sleep this long after 64 loop turns without work (0: spin). Separate
    // processes sharing few cores need it; one process does not.
    Nanos idle_sleep{};
    // The hosts node of a split fabric (split.hpp): set, the fabric holds
    // only the NICs, each on its cable end's device.
    SplitHosts split;
    // --pcap: the frames of this link, as its ends here receive them
    // (capture.hpp), into `pcap_path`; empty path: live_<workload>_<link>.pcap
    // in `out_dir`.
    std::string pcap_link;
    std::string pcap_path;
    // The QPs' ACK timeout exponent; 0: rc_timeout_for(rtt_bound()) of the
    // scaled fabric with the NIC's whole window in flight.
    uint8_t rc_timeout = 0;
};

struct LiveRow {
    SweepRow row;             // nccl-tests columns, times and bandwidths scaled back to the configured rates
    Nanos live_time{};        // as measured, first WRITE posted to last completion
    bool complete = false;    // every flow's every byte completed before the timeout
    uint64_t flows = 0;
    uint64_t verified = 0;    // flows whose destination region matched the source
    uint64_t mismatched = 0;  // flows whose destination region did not
    uint64_t bad_completions = 0;  // CQEs with a status other than success
    uint64_t lossless_drops = 0;   // switch headroom overruns and lossless queue drops
    uint64_t nic_drops = 0;        // the NICs' share of row.drops: engine and port drops (none on a lossless fabric)
};

struct LiveResult {
    double scale = 1;
    uint32_t ranks = 0;
    std::vector<LiveRow> rows;
    uint8_t rc_timeout = 0;          // the ACK timeout exponent of every QP of the run
    std::vector<std::string> files;  // report files written
    std::vector<std::string> notes;  // what the run reports beyond the table (loop speed, headroom)
    std::string error;               // set when the fabric could not be built or run
    std::size_t sizes = 0;            // sizes asked for
    std::optional<Bytes> stopped_in;  // the size LiveOptions::stop stopped (no row)
    // LiveFabric::build succeeded. A split hosts node whose fabric did not
    // come up (refused, timed out or stopped) has its ports left open and
    // leaves with _Exit (LiveFabric::build says why).
    bool fabric_up = false;
};

// nccl-tests style: one workload per size on one live fabric (built once,
// QPs reused across sizes), counters taken per size.
LiveResult run_live_sweep(const Topology& topo, Pattern p, std::span<const Bytes> sizes, const LiveOptions& o);

// The summary table: size, scaled-back time, algbw, busbw, live time, PFC,
// ECN, CNP, drops, verified flows.
std::string format_live_sweep(Pattern p, const LiveResult& r);

}  // namespace rocemu::fabric::live
