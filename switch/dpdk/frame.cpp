#include "switch/dpdk/frame.hpp"

#include <cstring>

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/l2.hpp"

namespace rocemu::sw::live {

using wire::load_be16;
using wire::load_be32;
using wire::store_be16;

namespace {
constexpr uint8_t kProtoTcp = 6;
constexpr size_t kIpv4Min = 20, kIpv6Len = 40, kIcrcLen = 4;

void read_ports(const uint8_t* l4, size_t avail, uint8_t proto, PacketDesc& d) {
    if ((proto != wire::kIpProtoUdp && proto != kProtoTcp) || avail < 4) return;
    d.src_port = load_be16(l4);
    d.dst_port = load_be16(l4 + 2);
}

// Where L3 starts (0: truncated) and its ethertype, through one VLAN tag.
// wire::parse_eth also copies out both MACs and the tag, which the switch
// never reads: parse_frame took 126 instructions a frame with it, 74 without
// (callgrind, switch_bench net_ring 64 B).
struct L3Start {
    size_t off;
    uint16_t ethertype;
};
L3Start find_l3(std::span<const uint8_t> frame) {
    constexpr size_t kEthLen = 14, kVlanLen = 4;
    const uint8_t* f = frame.data();
    if (frame.size() < kEthLen) return {0, 0};
    const uint16_t et = load_be16(f + 12);
    if (et != wire::ethertype::kVlan) return {kEthLen, et};
    if (frame.size() < kEthLen + kVlanLen) return {0, 0};
    return {kEthLen + kVlanLen, load_be16(f + kEthLen + 2)};
}

// RFC 1624 incremental update of the IPv4 header checksum for one changed word.
void fix_checksum(uint8_t* ip, uint16_t old_word, uint16_t new_word) {
    uint32_t sum = static_cast<uint16_t>(~load_be16(ip + 10)) + static_cast<uint16_t>(~old_word) + new_word;
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    store_be16(ip + 10, static_cast<uint16_t>(~sum));
}
}  // namespace

const char* to_string(RxKind k) {
    switch (k) {
        case RxKind::Data: return "data";
        case RxKind::Pfc: return "pfc";
        case RxKind::Pause: return "pause";
        case RxKind::NotIp: return "not_ip";
        case RxKind::Truncated: return "truncated";
    }
    return "unknown";
}

RxKind parse_frame(std::span<const uint8_t> frame, PortId in_port, uint32_t handle, PacketDesc& d,
                   PfcFrameDesc& pfc) {
    const auto [l3, ethertype] = find_l3(frame);
    if (!l3) return RxKind::Truncated;
    const uint8_t* f = frame.data();
    const size_t n = frame.size();
    switch (ethertype) {
        case wire::ethertype::kMacControl: {
            if (n < l3 + 2) return RxKind::Truncated;
            if (load_be16(f + l3) == wire::kPauseOpcode) return RxKind::Pause;
            wire::Pfc p;
            if (!wire::parse_pfc(frame, p)) return load_be16(f + l3) == wire::kPfcOpcode ? RxKind::Truncated : RxKind::NotIp;
            pfc.class_enable = p.class_enable;
            pfc.quanta = p.quanta;
            return RxKind::Pfc;
        }
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

bool rewrite_l2(std::span<uint8_t> frame, const std::array<uint8_t, 6>& dst, const wire::MacAddr& src) {
    if (frame.size() < 12) return false;
    std::memcpy(frame.data(), dst.data(), 6);
    std::memcpy(frame.data() + 6, src.b.data(), 6);
    return true;
}

TtlResult decrement_ttl(std::span<uint8_t> frame) {
    const auto [l3, ethertype] = find_l3(frame);
    if (!l3) return TtlResult::NotIp;
    uint8_t* ip = frame.data() + l3;
    if (ethertype == wire::ethertype::kIpv4) {
        if (frame.size() < l3 + kIpv4Min) return TtlResult::NotIp;
        if (ip[8] <= 1) return TtlResult::Expired;
        const uint16_t old_word = load_be16(ip + 8);
        --ip[8];
        fix_checksum(ip, old_word, load_be16(ip + 8));
        return TtlResult::Decremented;
    }
    if (ethertype == wire::ethertype::kIpv6) {
        if (frame.size() < l3 + kIpv6Len) return TtlResult::NotIp;
        if (ip[7] <= 1) return TtlResult::Expired;
        --ip[7];
        return TtlResult::Decremented;
    }
    return TtlResult::NotIp;
}

bool corrupt_icrc(std::span<uint8_t> frame) {
    const auto [l3, ethertype] = find_l3(frame);
    if (!l3) return false;
    const uint8_t* ip = frame.data() + l3;
    size_t end = 0;  // one past the last byte the IP length covers
    if (ethertype == wire::ethertype::kIpv4 && frame.size() >= l3 + kIpv4Min)
        end = l3 + load_be16(ip + 2);
    else if (ethertype == wire::ethertype::kIpv6 && frame.size() >= l3 + kIpv6Len)
        end = l3 + kIpv6Len + load_be16(ip + 4);
    if (end < l3 + kIcrcLen || end > frame.size()) return false;
    frame[end - 1] ^= 0xFF;
    return true;
}

size_t build_pfc(const PfcFrameDesc& pfc, const wire::MacAddr& src, std::span<uint8_t> out) {
    wire::Pfc p;
    p.src = src;
    p.class_enable = pfc.class_enable;
    p.quanta = pfc.quanta;
    return wire::encode_pfc(p, out);
}

}  // namespace rocemu::sw::live
