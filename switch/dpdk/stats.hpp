// The counters one switch port publishes (telemetry, `rocemu counters`, the
// exit report): the runtime's own, the core's per port and per queue, and
// the port's link faults. Free of DPDK; names are [a-z0-9_].
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "switch/link.hpp"
#include "switch/switch.hpp"

namespace rocemu::sw::live {

enum class RtStat : uint8_t {
    RxFrames,          // everything rx_burst returned on the port
    RxBytes,
    TxFrames,          // frames the device accepted (data and PFC)
    TxBytes,
    TxPfc,             // PFC frames the device accepted, storms included
    RxPfc,             // well-formed 802.1Qbb frames handed to the core
    RxPause,           // 802.3x PAUSE: ignored
    DropNotIp,         // ARP, LLDP and other non-IP frames: the switch routes IP only
    DropTruncated,
    DropMultiSegment,  // a frame spread over several mbufs
    DropNoHandle,      // more frames in flight than handles (never when pools are sized as configured)
    DropTtlExpired,    // TTL 0 or 1 with TTL decrement on
    DropLinkDown,      // sent while the link was down
    DropLinkLoss,      // random loss on the link
    DropLinkFcs,       // corrupted on the link with a bad FCS: the peer's MAC discards it
    CorruptIcrc,       // corrupted on the link with a bad ICRC: delivered, the peer's NIC drops it
    PfcNoMbuf,         // a PFC frame that could not be sent for lack of an mbuf or TX room
    kCount,
};
const char* to_string(RtStat s);

struct RtPortStats {
    std::array<uint64_t, static_cast<size_t>(RtStat::kCount)> v{};
    void add(RtStat s, uint64_t n = 1) { v[static_cast<size_t>(s)] += n; }
    uint64_t operator[](RtStat s) const { return v[static_cast<size_t>(s)]; }
};

// Counter names in publishing order.
const std::vector<std::string>& port_counter_names();
// Values in the order of port_counter_names(); `out` has that size.
void collect_port_counters(const Switch& sw, PortId p, Nanos now, const RtPortStats& rt, const LinkCounters& link,
                           std::span<uint64_t> out);

// The lossless drops counted at a port: headroom overruns at its ingress and
// drops from its lossless egress queues (the PFC watchdog). PFC exists to keep
// this at zero.
uint64_t lossless_drops(const Switch& sw, PortId p);

}  // namespace rocemu::sw::live
