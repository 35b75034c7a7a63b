// IPv4 and ICMP echo, just enough for a host to answer and send `ping`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "dataplane/wire/packet.hpp"

namespace rocemu::host {

inline constexpr uint8_t kIpProtoIcmp = 1;
inline constexpr uint8_t kIcmpEchoReply = 0, kIcmpEchoRequest = 8;

struct Ipv4Header {
    uint16_t ihl_bytes = 0;
    uint16_t total_len = 0;
    uint16_t frag = 0;  // flags and offset as on the wire
    uint8_t ttl = 0;
    uint8_t proto = 0;
    uint32_t src = 0, dst = 0;
    bool is_fragment() const { return (frag & 0x3FFF) != 0; }  // MF set or offset non-zero
};

enum class Ipv4Error : uint8_t { Ok, Truncated, BadHeader, BadChecksum };

// Reads the IPv4 header at `l3_off`, checking version, IHL and lengths, and
// the checksum unless `check_sum` is false (the caller checks it later, or
// leaves it to a parser that checks it anyway).
// `wire_len`: the whole frame's length when `frame` is only its first
// segment (an mbuf chain); 0 when `frame` is all of it.
Ipv4Error parse_ipv4(std::span<const uint8_t> frame, size_t l3_off, Ipv4Header& out, bool check_sum = true,
                     size_t wire_len = 0);

struct IcmpEcho {
    uint8_t type = kIcmpEchoRequest;
    uint16_t id = 0, seq = 0;
};

// Writes Ethernet [802.1Q] IPv4 ICMP echo (request or reply) with `payload`.
// Returns the frame length, or 0 if `out` is too small.
size_t encode_icmp_echo(const wire::L2& l2, uint32_t src, uint32_t dst, uint8_t ttl, const IcmpEcho& echo,
                        std::span<const uint8_t> payload, std::span<uint8_t> out);

}  // namespace rocemu::host
