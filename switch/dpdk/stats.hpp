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

// Forwarding cost as testpmd's --record-core-cycles counts it: TSC cycles of
// the loop turns that moved frames, per frame received. A turn longer than
// `limit` cycles had the core taken away by the scheduler (on a shared
// machine that is milliseconds); it is left out, frames and all, and counted.
struct BusyCycles {
    uint64_t limit = UINT64_MAX;
    uint64_t cycles = 0;
    uint64_t frames = 0;
    uint64_t turns = 0;  // counted ones: frames / turns is the burst the loop really got
    uint64_t preempted_turns = 0;

    void turn(uint64_t tsc_cycles, uint64_t frames_received) {
        if (tsc_cycles > limit) {
            ++preempted_turns;
            return;
        }
        cycles += tsc_cycles;
        frames += frames_received;
        ++turns;
    }
    double per_frame() const { return frames ? static_cast<double>(cycles) / static_cast<double>(frames) : 0; }
    // "CPU cycles/packet=N (busy cycles=C / received packets=F in B turns, T turns left out as preempted) at M MHz"
    std::string line(uint64_t tsc_hz) const;
};

// The lossless drops counted at a port: headroom overruns at its ingress and
// drops from its lossless egress queues (the PFC watchdog). PFC exists to keep
// this at zero.
uint64_t lossless_drops(const Switch& sw, PortId p);

}  // namespace rocemu::sw::live
