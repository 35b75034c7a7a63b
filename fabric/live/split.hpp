// The live fabric split into processes (`rocemu fabric run --live
// --processes`): one process per switch and one for all the NICs, each cable
// a memif pair. This header is the part every process must agree on without
// talking to the others, so it is derived from the Topology alone: node
// names, which end of a cable is the memif server, socket and vdev names, how
// many ethdevs a node needs, where a node leaves its ready mark and counters,
// and the counter snapshot format. Free of DPDK.
//
// The NIC's MAC (NicWire) runs in the switch process, at the leaf end of the
// cable: so the switch and the MAC that obeys its pauses share one fabric
// clock, and the hosts process needs one ethdev per NIC (not two), which is
// what lets 32 NICs fit RTE_MAX_ETHPORTS.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fabric/live/shared_clock.hpp"
#include "fabric/topology.hpp"

namespace rocemu::fabric::live {

// The node holding every NIC, the workload and the report.
inline constexpr std::string_view kHostsNode = "hosts";

// A switch-to-switch memif ring has 2^kMemifLog2Ring slots, each buffer
// holding a whole jumbo frame: a small ring bounds what a cable holds when
// the far end is not scheduled, which the lossless headroom must absorb
// (split_headroom_frames). A NIC cable's ring is larger: the NIC's MAC sits
// after it, at the switch, so nothing in it has passed a pause; but a NIC
// drops what its port does not take (drop_tx_full), and its RC window (16
// chunks of 64 KiB per QP) can be thousands of frames.
inline constexpr uint32_t kMemifLog2Ring = 7;
inline constexpr uint32_t kMemifLog2NicRing = 12;
inline constexpr uint32_t kMemifBufferBytes = 8192;

// Lossless headroom of a split fabric in NIC-MTU frames: one-process live's
// kLiveHeadroomFrames plus a full memif ring and a switch runtime's TX buffer
// (64 frames), all of which may still arrive after an XOFF leaves.
uint32_t split_headroom_frames();

// "hosts", then every switch name in topology order. Throws
// std::invalid_argument if a switch is named "hosts".
std::vector<std::string> node_names(const Topology& t);

// The node that owns a cable end.
std::string node_of(const Topology& t, const Endpoint& e);

// One cable end as the node that owns it sees it.
struct CableEnd {
    uint32_t link = 0;      // index in Topology::links
    Endpoint end;           // this node's end
    Endpoint peer;          // the other end
    std::string peer_node;
    bool server = false;    // memif server: this node's name sorts below the peer's
    std::string devspec;    // the DPDK device string to open
    std::string socket;     // a memif end's socket file (empty for an override)
};

// The cable ends `node` owns, in link order, with memif device strings:
//   net_memif<i>,role=server|client,socket=DIR/<link>.sock,socket-abstract=no,id=0,rsize=R,bsize=B,mac=M
// (i counts the node's ends from 0; M is the end's MAC in the topology).
// `overrides` (link name -> device string) replace an end's memif, e.g. by an
// af_packet port or a real NIC when the peer runs on another machine.
// std::invalid_argument if `node` is unknown or an override names no cable of it.
std::vector<CableEnd> cable_ends(const Topology& t, std::string_view node, const std::string& link_dir,
                                 const std::map<std::string, std::string>& overrides = {});

// Removes the socket files of the memif server ends in `ends`, as closing
// those ports would: for a node that leaves with its ports open (_Exit).
void remove_server_sockets(const std::vector<CableEnd>& ends);

// A memif client end fails to start, or never comes up, when it connects
// before its server's port is started, and the nodes start in any order. So
// a node opens its server ends (and non-memif ends) first, then writes
// DIR/<node>.servers, and opens each client end once its peer's mark exists.
bool is_memif_client(const CableEnd& e);
std::string servers_path(const std::string& link_dir, std::string_view node);
// Makes the link folder of a node started by hand; false and `error` if it cannot.
bool make_link_dir(const std::string& link_dir, std::string& error);
// Waits (polling every 10 ms) until `path` exists, at most `timeout`, or
// until `stop` returns true.
bool wait_for_file(const std::string& path, Nanos timeout, const std::function<bool()>& stop = {});

// "KEY=VALUE" with neither side empty, split at the first '='.
std::optional<std::pair<std::string, std::string>> split_assignment(std::string_view v);

// "CABLE=DEVSPEC" values into a map; std::invalid_argument naming the value
// if one has no '=' or names no cable of the topology.
std::map<std::string, std::string> parse_port_overrides(const Topology& t, const std::vector<std::string>& values);

// Ethdevs `node` opens: the hosts node one per NIC; a switch one per switch
// port plus one more per NIC cable (its MAC sits between the memif and a
// net_ring port of the switch).
uint32_t ethdevs_needed(const Topology& t, std::string_view node);

// How often a switch node takes a counter snapshot.
constexpr Nanos kSnapshotEvery = Nanos::from_ms(20);
// How often a switch node with --control-listen looks for a connection.
constexpr Nanos kControlEvery = Nanos::from_ms(1);

// DIR/<node>.ready (the node's pid, written once every port of it is up) and
// DIR/<node>.counters (the counter snapshot, rewritten every kSnapshotEvery
// and at exit).
std::string ready_path(const std::string& link_dir, std::string_view node);
std::string counters_path(const std::string& link_dir, std::string_view node);

// DIR/fabric.clock: the fabric time the nodes sharing DIR share
// (shared_clock.hpp). The launcher removes an earlier run's before it starts
// the nodes.
std::string clock_path(const std::string& link_dir);
// Maps that clock for `node` (a known node of `t`), its slot being its place
// in node_names(t); nullptr and `error` if it cannot.
std::unique_ptr<SharedClock> open_node_clock(const Topology& t, const std::string& link_dir, std::string_view node,
                                             std::string& error);

// What two nodes must share to be one fabric: the fabric's name, a hash of
// its (unscaled) topology (names, ports, speeds, delays, MACs, addresses),
// of every switch's settings (QoS maps, scheduler, WRED/ECN, buffer pool and
// PG profiles, PFC, watchdog, routing) and of what switch nodes read of the
// NIC profile (MTU, DSCP; not the model, spraying or CC, which only the hosts
// node runs), the scale and the seed, as one line, e.g.
// "incast topology 9f3c2a0b1d4e5f60 scale 225 seed 1".
std::string fabric_identity(const Topology& t, double scale, uint64_t seed);

// A switch's counter snapshot: the CLOCK_MONOTONIC time it was taken (of
// the switch's machine) and its CLOCK_REALTIME, the switch, its fabric_identity(), whether every
// port of it is up, and "switch,port,counter,value" rows of every non-zero
// port counter, plus a "lossless_drops" row per port that had any. The text
// ends with "# end <rows>": parse_snapshot refuses one without it (a reply
// or file cut short, even at a line boundary).
struct SwitchSnapshot {
    int64_t at_ns = 0;
    int64_t realtime_ns = 0;  // CLOCK_REALTIME when taken; 0 if not told
    std::string node;
    std::string fabric;
    bool ready = false;
    std::vector<std::string> rows;
};
std::string format_snapshot(const SwitchSnapshot& s);
std::optional<SwitchSnapshot> parse_snapshot(std::string_view text);

// Which machine each node runs on, from "MACHINE=node,node,..." values
// (`rocemu fabric plan` and `fabric node --machine`). Every node must be on
// exactly one machine: std::invalid_argument naming the value otherwise.
std::map<std::string, std::string> parse_machines(const Topology& t, const std::vector<std::string>& values);

// Whether `v` is a PCI address as the EAL's -a takes it: DOMAIN:BUS:DEV.FN
// or BUS:DEV.FN in hex (e.g. 0000:3b:00.0, 3b:00.0). A parser of its own,
// not DPDK's rte_pci_addr_parse: this library is built without DPDK too
// (the sanitizer and fuzz builds run `fabric plan`'s parsing).
bool is_pci_address(std::string_view v);

// `fabric plan --device CABLE@MACHINE=DEV` values: the device of MACHINE's
// end of CABLE, a cable between two machines; DEV is a network interface
// (that end's af_packet port) or a PCI address (the NIC itself, under its
// DPDK PMD). Keyed by {cable, machine}. std::invalid_argument naming the
// value if it is malformed, names no cable between two machines, a machine at
// neither end of it, an end given twice, or an interface name no kernel takes.
struct PlanDevice {
    std::string iface;  // or
    std::string pci;
};
std::map<std::pair<std::string, std::string>, PlanDevice> parse_plan_devices(
    const Topology& t, const std::map<std::string, std::string>& machines, const std::vector<std::string>& values);

// The nodes on another machine than `node` (none without machines).
std::vector<std::string> nodes_elsewhere(const std::map<std::string, std::string>& machines, std::string_view node);

// Why `node` cannot run as given: a cable of it whose peer is on another
// machine (`remote` says which nodes are) but that has no --port override
// (memif reaches no further than its machine), one line per such cable;
// empty when it can.
std::vector<std::string> cables_without_port(const Topology& t, std::string_view node,
                                             const std::vector<std::string>& remote,
                                             const std::map<std::string, std::string>& overrides);

// Totals of snapshot rows, named as LiveTotals names them.
struct SwitchRowTotals {
    uint64_t pfc_frames = 0;      // tx_pfc_frames
    uint64_t ecn_marks = 0;       // ecn_marks
    uint64_t drops = 0;           // every drop_* counter
    uint64_t lossless_drops = 0;  // lossless_drops
};
SwitchRowTotals sum_rows(const std::vector<std::string>& rows);

// What was dropped between two snapshots of counter rows ("switch,port,
// counter,value" or "nic,counter,value"): every drop_* counter that rose, as
// "SIDE WHERE CAUSE" ("switch left:Ethernet2 not_ip") and by how much, in
// `after`'s order; a requester's ignored responses (drop_stale_response,
// drop_ghost_response) are not drops, as in LiveTotals.
std::vector<DropCount> drops_between(std::string_view side, const std::vector<std::string>& before,
                                     const std::vector<std::string>& after);

// The EAL arguments of `node` in a run whose launcher got `eal`: a user's
// --file-prefix X (either form) becomes X-<node>, since nodes sharing one
// prefix would share one EAL runtime folder (a secondary process's, or a
// clash). Everything else is passed as given.
std::vector<std::string> node_eal_args(const std::vector<std::string>& eal, std::string_view node);

// `--pcap LINK` split: each node that owns an end of LINK writes the frames
// that end receives to DIR/<LINK>@<node>.pcap (capture.hpp).
std::string capture_path(const std::string& link_dir, std::string_view link, std::string_view node);
// The files of LINK's owners in `link_dir`, in name order; none for a link
// `t` lacks. Any other `LINK@*.pcap` there (a reused folder's, an earlier
// run's) is not one of them.
std::vector<std::string> capture_parts(const Topology& t, const std::string& link_dir, std::string_view link);

}  // namespace rocemu::fabric::live
