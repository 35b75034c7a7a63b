// The processes of a split live fabric (split.hpp): a switch node, the hosts
// node and the launcher that starts one per node and waits for them. Free
// of DPDK so the CLI can include it.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "fabric/live/live.hpp"

namespace rocemu::fabric::live {

struct NodeOptions {
    std::string link_dir;            // memif sockets, ready marks and counter snapshots
    double scale = 0;                // must be the same in every node; 0: default_scale()
    uint64_t seed = 1;
    std::vector<std::string> ports;  // CABLE=DEVSPEC: this node's end of CABLE on another device
    bool busy_poll = false;          // never sleep; else 20 us after 64 turns without work
    // A fabric clock of this node's own instead of DIR/fabric.clock, shared
    // with the other nodes of its machine (live.hpp's SplitHosts::clock).
    bool own_clock = false;
    // Across machines too (`--clock fabric`, clock_relay.hpp): a switch node
    // with control_listen answers the hosts node's clock exchanges on that
    // address (UDP); the hosts node exchanges with every switch in
    // `controls`. Without either it is the machine's clock as above.
    bool fabric_clock = false;
    std::vector<std::string> eal_args;
    // Across machines (control.hpp). A switch node serves its snapshots on
    // `control_listen` (ADDR:PORT); the hosts node reads the switches named
    // in `controls` (SWITCH=HOST:PORT) from there instead of `link_dir`.
    std::string control_listen;
    std::vector<std::string> controls;
    // MACHINE=NODE,NODE,... (split.hpp parse_machines): a cable to a node on
    // another machine needs a --port, a switch there a --control.
    std::vector<std::string> machines;
    Nanos wait = Nanos::from_s(30);  // hosts: for the NICs' links and the switch nodes to be ready
    // --pcap: what this node's ends of that link receive, into
    // split.hpp's capture_path() (the launcher merges the nodes' files).
    std::string pcap_link;
};

// Ethdevs one process can have (RTE_MAX_ETHPORTS): split.hpp's
// ethdevs_needed() of every node must fit.
uint32_t max_ethdevs_per_process();

// How long an idle node sleeps (NodeOptions::busy_poll off).
inline constexpr Nanos kNodeIdleSleep = Nanos::from_us(20);

// Runs switch `name` of `t` (not yet scaled) until SIGINT or SIGTERM: its
// ports on its cable ends, the MAC of each NIC cabled to it (NicWire, and
// proxy ARP: it answers every ARP request of its NIC with the switch port's
// MAC, as one-process live primes the NICs' caches), a counter snapshot
// every 20 ms and at exit (also served on NodeOptions::control_listen, one
// per connection), a ready mark once every port is up. On a clean
// stop the process exits with status 0 from here, without tearing its ports
// down; returns 2 with a message on stderr if the switch cannot be built.
int run_switch_node(const Topology& t, const std::string& name, const NodeOptions& o);

// The hosts node: run_live_sweep() with every NIC on its cable end, waiting
// for the switch nodes to be ready, and the switch counters of each size
// taken from their snapshots: read from the link folder, or fetched from a
// switch's control address (NodeOptions::controls). A switch that runs
// another fabric (fabric_identity) is an error naming both.
LiveResult run_hosts_node(const Topology& t, Pattern p, std::span<const Bytes> sizes, LiveOptions lo,
                          const NodeOptions& o);

// One process to start: its name, its argv (argv[0] is the binary) and where
// its stdout and stderr go (empty: the launcher's own).
struct NodeCommand {
    std::string name;
    std::vector<std::string> argv;
    std::string log;
    // The node's EAL takes rocemu's own prefix, rocemu-<pid> (no --file-prefix
    // or --in-memory among its EAL arguments): if a signal ends it, the
    // launcher removes that runtime folder, which the node no longer can.
    bool own_eal_prefix = false;
};

// How long a node has to stop after SIGTERM before the launcher sends SIGKILL.
constexpr Nanos kNodeStopGrace = Nanos::from_s(5);

struct LaunchResult {
    int status = 0;      // the first node's exit status (0 or 1) when every node ran to the end; else 2
    std::string error;   // which node failed and why
    // Nodes still running kNodeStopGrace after their SIGTERM, ended with SIGKILL: "name
    // (pid N)". A node should stop within a progress tick; one listed here
    // was stuck somewhere a stop is not heard.
    std::vector<std::string> killed_after_grace;
};

// Starts every node (fork + exec), waits for the first one (the hosts node)
// to exit, then stops the others with SIGTERM (SIGKILL after 5 s). A node
// that exits before the first one, a timeout (`timeout_s` for the whole
// run) or SIGINT/SIGTERM to the launcher stops them all, and the error names
// the node and why. When the first node gives up (exits with more than 1,
// or is killed), the error is its own, not that of the nodes stopped after
// it. Children get SIGKILL if the launcher dies.
LaunchResult launch_nodes(const std::vector<NodeCommand>& nodes, double timeout_s);

}  // namespace rocemu::fabric::live
