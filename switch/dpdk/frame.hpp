// The byte-level half of the switch runtime, free of DPDK: what a received
// frame is (a PacketDesc for the core, a PFC frame, or a drop with its
// reason), and the rewrites the core's effects ask for (L2 to the next hop,
// TTL, CE marks, injected corruption). It works on plain byte spans so the
// tests need no EAL and the simulated fabric could share it.
#pragma once

#include "dataplane/wire/pause.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include "common/units.hpp"
#include "dataplane/wire/packet.hpp"
#include "switch/link.hpp"
#include "switch/types.hpp"

namespace rocemu::sw::live {

enum class RxKind : uint8_t {
    Data,       // IPv4 or IPv6: a PacketDesc for the core
    Pfc,        // 802.1Qbb: a PfcFrameDesc for Switch::on_pfc
    Pause,      // 802.3x link PAUSE: counted, not honoured (the core speaks PFC)
    NotIp,      // ARP, LLDP, anything else: the switch routes IP only
    Truncated,  // shorter than the headers it announces
};
const char* to_string(RxKind k);

// Classifies `frame` and fills `desc` (Data) or `pfc` (Pfc). Only the bytes
// of `frame` are read. L4 ports are read for UDP and TCP, unless the packet
// is a non-first IPv4 fragment.
RxKind parse_frame(std::span<const uint8_t> frame, PortId in_port, uint32_t handle, PacketDesc& desc,
                   PfcFrameDesc& pfc);

// Routed L2: destination = the neighbor's MAC, source = the egress port's.
// An 802.1Q tag, if any, stays. False if the frame is shorter than 12 bytes.
bool rewrite_l2(std::span<uint8_t> frame, const std::array<uint8_t, 6>& dst, const wire::MacAddr& src);

enum class TtlResult : uint8_t { Decremented, Expired, NotIp };
// Decrements the IPv4 TTL (keeping the header checksum right) or the IPv6
// hop limit. A packet that arrives with 0 or 1 is Expired and left as is.
TtlResult decrement_ttl(std::span<uint8_t> frame);

// Breaks the frame's RoCEv2 ICRC (the last 4 bytes the IP length covers) so
// the receiving NIC drops it as bad_icrc. False if the frame is not IP or is
// too short to carry one.
bool corrupt_icrc(std::span<uint8_t> frame);

// Writes a PFC frame from `src` into `out` (at least 60 bytes). Returns its length.
size_t build_pfc(const PfcFrameDesc& pfc, const wire::MacAddr& src, std::span<uint8_t> out);

// The pauses a sender honours: priority p may not start a frame before
// until(p). Shared with the emulated NIC, so both honour PFC alike.
using PauseState = wire::PfcPauseState;

}  // namespace rocemu::sw::live
