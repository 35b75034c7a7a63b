#include "dataplane/dpdk/host/ipv4.hpp"

#include <algorithm>
#include <cstring>

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/l2.hpp"

namespace rocemu::host {

using wire::load_be16;
using wire::load_be32;
using wire::store_be16;
using wire::store_be32;

Ipv4Error parse_ipv4(std::span<const uint8_t> frame, size_t l3_off, Ipv4Header& out, bool check_sum,
                     size_t wire_len) {
    if (frame.size() < l3_off + 20) return Ipv4Error::Truncated;
    const uint8_t* ip = frame.data() + l3_off;
    if ((ip[0] >> 4) != 4) return Ipv4Error::BadHeader;
    out.ihl_bytes = static_cast<uint16_t>((ip[0] & 0x0F) * 4);
    out.total_len = load_be16(ip + 2);
    if (out.ihl_bytes < 20 || out.total_len < out.ihl_bytes) return Ipv4Error::BadHeader;
    if (std::max(frame.size(), wire_len) < l3_off + out.total_len) return Ipv4Error::Truncated;
    if (check_sum && wire::ip_checksum(ip, out.ihl_bytes) != 0) return Ipv4Error::BadChecksum;
    out.frag = load_be16(ip + 6);
    out.ttl = ip[8];
    out.proto = ip[9];
    out.src = load_be32(ip + 12);
    out.dst = load_be32(ip + 16);
    return Ipv4Error::Ok;
}

size_t encode_icmp_echo(const wire::L2& l2_in, uint32_t src, uint32_t dst, uint8_t ttl, const IcmpEcho& echo,
                        std::span<const uint8_t> payload, std::span<uint8_t> out) {
    wire::L2 l2 = l2_in;
    l2.ethertype = wire::ethertype::kIpv4;
    const size_t l3_off = l2.vlan ? 18 : 14;
    const size_t icmp_len = 8 + payload.size();
    const size_t len = l3_off + 20 + icmp_len;
    if (out.size() < len || 20 + icmp_len > 0xFFFF) return 0;
    uint8_t* f = out.data();
    wire::write_eth(f, l2);
    uint8_t* ip = f + l3_off;
    ip[0] = 0x45;
    ip[1] = 0;
    store_be16(ip + 2, static_cast<uint16_t>(20 + icmp_len));
    store_be16(ip + 4, echo.seq);
    store_be16(ip + 6, 0x4000);
    ip[8] = ttl;
    ip[9] = kIpProtoIcmp;
    store_be16(ip + 10, 0);
    store_be32(ip + 12, src);
    store_be32(ip + 16, dst);
    store_be16(ip + 10, wire::ip_checksum(ip, 20));
    uint8_t* icmp = ip + 20;
    icmp[0] = echo.type;
    icmp[1] = 0;
    store_be16(icmp + 2, 0);
    store_be16(icmp + 4, echo.id);
    store_be16(icmp + 6, echo.seq);
    if (!payload.empty()) std::memcpy(icmp + 8, payload.data(), payload.size());
    store_be16(icmp + 2, wire::ip_checksum(icmp, icmp_len));
    return len;
}

}  // namespace rocemu::host
