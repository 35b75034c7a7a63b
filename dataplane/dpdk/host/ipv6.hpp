// IPv6 and ICMPv6, just enough for the NIC's link-local address (its
// link-local GID) to answer neighbour solicitation and `ping -6`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "dataplane/wire/packet.hpp"

namespace rocemu::host {

inline constexpr uint8_t kIpProtoIcmp6 = 58;
inline constexpr uint8_t kIcmp6EchoRequest = 128, kIcmp6EchoReply = 129;
inline constexpr uint8_t kIcmp6NeighborSolicit = 135, kIcmp6NeighborAdvert = 136;
inline constexpr size_t kIpv6HeaderLen = 40;

struct Ipv6Header {
    uint16_t payload_len = 0;
    uint8_t next_header = 0;
    uint8_t hop_limit = 0;
    wire::IpAddr src, dst;
};

// False unless the version is 6 and the payload lies inside the frame.
// `wire_len` as parse_ipv4's.
bool parse_ipv6(std::span<const uint8_t> frame, size_t l3_off, Ipv6Header& out, size_t wire_len = 0);

// The ICMPv6 checksum over the pseudo-header and `msg`. Over a message whose
// checksum field is right, the result is 0.
uint16_t icmp6_checksum(const wire::IpAddr& src, const wire::IpAddr& dst, const uint8_t* msg, size_t len);

// ff02::1:ffXX:XXXX, where a neighbour solicitation for `a` is sent.
wire::IpAddr solicited_node(const wire::IpAddr& a);
// 33:33 followed by the group's low 32 bits (RFC 2464).
wire::MacAddr ipv6_multicast_mac(const wire::IpAddr& group);
inline const wire::IpAddr kAllNodes{{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01}};

// Writes Ethernet [802.1Q] IPv6 ICMPv6 neighbour advertisement for `target`
// with its link-layer address option, hop limit 255. Returns the length, 0 if
// `out` is too small.
size_t encode_neighbor_advert(const wire::L2& l2, const wire::IpAddr& src, const wire::IpAddr& dst,
                              const wire::IpAddr& target, const wire::MacAddr& target_mac, bool solicited,
                              std::span<uint8_t> out);

}  // namespace rocemu::host
