// The byte-level half of the switch runtime, free of DPDK: what a received
// frame is (a PacketDesc for the core, a PFC frame, or a drop with its
// reason), and the rewrites the core's effects ask for (L2 to the next hop,
// TTL, CE marks, injected corruption). It works on plain byte spans so the
// tests need no EAL and the simulated fabric could share it.
#pragma once

#include "dataplane/wire/pause.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "common/units.hpp"
#include "dataplane/wire/bytes.hpp"
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

namespace frame_detail {
inline constexpr uint8_t kProtoTcp = 6;
inline constexpr size_t kIpv4Min = 20, kIpv6Len = 40;
// Ethernet, a 20-byte IPv4 header and the two L4 ports: parse_frame's fast path.
inline constexpr size_t kFastLen = 14 + kIpv4Min + 4;

inline void read_ports(const uint8_t* l4, size_t avail, uint8_t proto, PacketDesc& d) {
    if ((proto != wire::kIpProtoUdp && proto != kProtoTcp) || avail < 4) return;
    d.src_port = wire::load_be16(l4);
    d.dst_port = wire::load_be16(l4 + 2);
}

// Where L3 starts (0: truncated) and its ethertype, through one VLAN tag.
// wire::parse_eth also copies out both MACs and the tag, which the switch
// never reads: parse_frame took 126 instructions a frame with it, 74 without
// (callgrind, switch_bench net_ring 64 B).
struct L3Start {
    size_t off;
    uint16_t ethertype;
};
inline L3Start find_l3(std::span<const uint8_t> frame) {
    constexpr size_t kEthLen = 14, kVlanLen = 4;
    const uint8_t* f = frame.data();
    if (frame.size() < kEthLen) return {0, 0};
    const uint16_t et = wire::load_be16(f + 12);
    if (et != wire::ethertype::kVlan) return {kEthLen, et};
    if (frame.size() < kEthLen + kVlanLen) return {0, 0};
    return {kEthLen + kVlanLen, wire::load_be16(f + kEthLen + 2)};
}

// MAC control frames (PAUSE, PFC): out of line, they are rare.
RxKind parse_control(std::span<const uint8_t> frame, size_t l3, PfcFrameDesc& pfc);
}  // namespace frame_detail

// parse_frame without its IPv4 fast path: every frame type. Also what the
// tests hold the fast path to.
inline RxKind parse_frame_general(std::span<const uint8_t> frame, PortId in_port, uint32_t handle, PacketDesc& d,
                                  PfcFrameDesc& pfc) {
    using namespace frame_detail;
    using wire::load_be16;
    using wire::load_be32;
    const uint8_t* f = frame.data();
    const size_t n = frame.size();
    const auto [l3, ethertype] = find_l3(frame);
    if (!l3) return RxKind::Truncated;
    switch (ethertype) {
        case wire::ethertype::kMacControl: return parse_control(frame, l3, pfc);
        case wire::ethertype::kIpv4: {
            if (n < l3 + kIpv4Min) return RxKind::Truncated;
            const uint8_t* ip = f + l3;
            const size_t ihl = (ip[0] & 0x0F) * 4u;
            if (ihl < kIpv4Min || n < l3 + ihl) return RxKind::Truncated;
            // Each field the core reads for IPv4 is written, the IPv6
            // addresses are not: clearing the whole descriptor cost a
            // 72-byte store per frame, most of it for IPv6 fields.
            d.ipv6 = false;
            d.dscp = ip[1] >> 2;
            d.ecn = ip[1] & 3;
            d.ip_proto = ip[9];
            d.src_v4 = load_be32(ip + 12);
            d.dst_v4 = load_be32(ip + 16);
            d.src_port = d.dst_port = 0;
            const bool first_fragment = (load_be16(ip + 6) & 0x1FFF) == 0;
            if (first_fragment) read_ports(ip + ihl, n - l3 - ihl, d.ip_proto, d);
            break;
        }
        case wire::ethertype::kIpv6: {
            if (n < l3 + kIpv6Len) return RxKind::Truncated;
            const uint8_t* ip = f + l3;
            const uint8_t tc = static_cast<uint8_t>((ip[0] & 0x0F) << 4 | ip[1] >> 4);
            d.ipv6 = true;
            d.src_v4 = d.dst_v4 = 0;
            d.src_port = d.dst_port = 0;
            d.dscp = tc >> 2;
            d.ecn = tc & 3;
            d.ip_proto = ip[6];
            std::memcpy(d.src_v6.data(), ip + 8, 16);
            std::memcpy(d.dst_v6.data(), ip + 24, 16);
            read_ports(ip + kIpv6Len, n - l3 - kIpv6Len, d.ip_proto, d);
            break;
        }
        default:
            return RxKind::NotIp;
    }
    d.handle = handle;
    d.frame_len = Bytes{n};
    d.in_port = in_port;
    return RxKind::Data;
}

// parse_frame's fast path: untagged IPv4 without options, long enough for
// the L4 ports (every RoCEv2 frame). True, with `d` filled, for such a
// frame; false, with `d` untouched, for any other. One length check, the
// fields in a few loads, the ports as one word: exactly what
// parse_frame_general gives such a frame
// (SwitchDpdkFrame.TheIpv4FastPathAgreesWithTheGeneralParse).
[[gnu::always_inline]] inline bool parse_ipv4_fast(std::span<const uint8_t> frame, PortId in_port, uint32_t handle,
                                                   PacketDesc& d) {
    using namespace frame_detail;
    using namespace wire;  // load_be16, load_be32, the ethertypes and protocols
    const size_t n = frame.size();
    const uint8_t* f = frame.data();
    if (n < kFastLen || load_be16(f + 12) != ethertype::kIpv4 || f[14] != 0x45) return false;
    const uint8_t* ip = f + 14;
    const uint8_t tos = ip[1];
    const uint8_t proto = ip[9];
    d.ipv6 = false;
    d.dscp = tos >> 2;
    d.ecn = tos & 3;
    d.ip_proto = proto;
    d.src_v4 = load_be32(ip + 12);
    d.dst_v4 = load_be32(ip + 16);
    const bool ports = (proto == kIpProtoUdp || proto == kProtoTcp) && (load_be16(ip + 6) & 0x1FFF) == 0;
    const uint32_t l4 = ports ? load_be32(ip + kIpv4Min) : 0;
    d.src_port = static_cast<uint16_t>(l4 >> 16);
    d.dst_port = static_cast<uint16_t>(l4);
    d.handle = handle;
    d.frame_len = Bytes{n};
    d.in_port = in_port;
    return true;
}

// Classifies `frame` and fills `d` (Data) or `pfc` (Pfc). Only the bytes
// of `frame` are read. L4 ports are read for UDP and TCP, unless the packet
// is a non-first IPv4 fragment. Inlined (forced: GCC kept it a call): the
// runtime parses every frame, and the call cost about 16 instructions a
// frame (callgrind, switch_bench net_ring 64 B).
[[gnu::always_inline]] inline RxKind parse_frame(std::span<const uint8_t> frame, PortId in_port, uint32_t handle,
                                                 PacketDesc& d, PfcFrameDesc& pfc) {
    if (parse_ipv4_fast(frame, in_port, handle, d)) [[likely]]
        return RxKind::Data;
    return parse_frame_general(frame, in_port, handle, d, pfc);
}

// Routed L2: destination = the neighbor's MAC, source = the egress port's.
// An 802.1Q tag, if any, stays. False if the frame is shorter than 12 bytes.
bool rewrite_l2(std::span<uint8_t> frame, const std::array<uint8_t, 6>& dst, const wire::MacAddr& src);

enum class TtlResult : uint8_t { Decremented, Expired, NotIp };
// One line for a frame known by its first bytes `head` (all of it, or the
// start) and its length: a RoCEv2 frame as `rocemu pcap` lists it, plus its
// TTL or hop limit; anything else as wire::describe_other does.
std::string describe_head(std::span<const uint8_t> head, size_t len);

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
