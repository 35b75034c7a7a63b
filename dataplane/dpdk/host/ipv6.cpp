#include "dataplane/dpdk/host/ipv6.hpp"

#include <algorithm>
#include <cstring>

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/l2.hpp"

namespace rocemu::host {

using wire::load_be16;
using wire::store_be16;
using wire::store_be32;

namespace {

uint32_t add16(uint32_t acc, const uint8_t* p, size_t len) {
    for (size_t i = 0; i + 1 < len; i += 2) acc += load_be16(p + i);
    if (len & 1) acc += uint32_t{p[len - 1]} << 8;
    return acc;
}

}  // namespace

bool parse_ipv6(std::span<const uint8_t> frame, size_t l3_off, Ipv6Header& out, size_t wire_len) {
    if (frame.size() < l3_off + kIpv6HeaderLen) return false;
    const uint8_t* ip = frame.data() + l3_off;
    if ((ip[0] >> 4) != 6) return false;
    out.payload_len = load_be16(ip + 4);
    out.next_header = ip[6];
    out.hop_limit = ip[7];
    std::memcpy(out.src.b.data(), ip + 8, 16);
    std::memcpy(out.dst.b.data(), ip + 24, 16);
    return std::max(frame.size(), wire_len) >= l3_off + kIpv6HeaderLen + out.payload_len;
}

uint16_t icmp6_checksum(const wire::IpAddr& src, const wire::IpAddr& dst, const uint8_t* msg, size_t len) {
    uint32_t acc = add16(0, src.b.data(), 16);
    acc = add16(acc, dst.b.data(), 16);
    acc += static_cast<uint32_t>(len >> 16) + static_cast<uint32_t>(len & 0xFFFF);
    acc += kIpProtoIcmp6;
    acc = add16(acc, msg, len);
    while (acc >> 16) acc = (acc & 0xFFFF) + (acc >> 16);
    return static_cast<uint16_t>(~acc);
}

wire::IpAddr solicited_node(const wire::IpAddr& a) {
    wire::IpAddr g{{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff}};
    g.b[13] = a.b[13];
    g.b[14] = a.b[14];
    g.b[15] = a.b[15];
    return g;
}

wire::MacAddr ipv6_multicast_mac(const wire::IpAddr& group) {
    return wire::MacAddr{{0x33, 0x33, group.b[12], group.b[13], group.b[14], group.b[15]}};
}

size_t encode_neighbor_advert(const wire::L2& l2_in, const wire::IpAddr& src, const wire::IpAddr& dst,
                              const wire::IpAddr& target, const wire::MacAddr& target_mac, bool solicited,
                              std::span<uint8_t> out) {
    constexpr size_t kIcmpLen = 24 + 8;  // NA body, then the target link-layer address option
    wire::L2 l2 = l2_in;
    l2.ethertype = wire::ethertype::kIpv6;
    const size_t l3_off = l2.vlan ? 18 : 14;
    const size_t len = l3_off + kIpv6HeaderLen + kIcmpLen;
    if (out.size() < len) return 0;
    uint8_t* f = out.data();
    wire::write_eth(f, l2);
    uint8_t* ip = f + l3_off;
    store_be32(ip, 0x60000000);
    store_be16(ip + 4, kIcmpLen);
    ip[6] = kIpProtoIcmp6;
    ip[7] = 255;  // RFC 4861: receivers drop ND messages that crossed a router
    std::memcpy(ip + 8, src.b.data(), 16);
    std::memcpy(ip + 24, dst.b.data(), 16);
    uint8_t* icmp = ip + kIpv6HeaderLen;
    std::memset(icmp, 0, kIcmpLen);
    icmp[0] = kIcmp6NeighborAdvert;
    icmp[4] = static_cast<uint8_t>((solicited ? 0x40 : 0) | 0x20);  // S, O
    std::memcpy(icmp + 8, target.b.data(), 16);
    icmp[24] = 2;  // target link-layer address
    icmp[25] = 1;  // in units of 8 bytes
    std::memcpy(icmp + 26, target_mac.b.data(), 6);
    store_be16(icmp + 2, icmp6_checksum(src, dst, icmp, kIcmpLen));
    return len;
}

}  // namespace rocemu::host
