#include "dataplane/wire/l2.hpp"

#include <bit>
#include <cstring>

#include "dataplane/wire/bytes.hpp"

namespace rocemu::wire {

namespace {
constexpr size_t kEthLen = 14, kVlanLen = 4;
}

size_t parse_eth(std::span<const uint8_t> frame, L2& l2) {
    const uint8_t* f = frame.data();
    if (frame.size() < kEthLen) return 0;
    std::memcpy(l2.dst.b.data(), f, 6);
    std::memcpy(l2.src.b.data(), f + 6, 6);
    uint16_t et = load_be16(f + 12);
    size_t off = kEthLen;
    l2.vlan = false;
    l2.pcp = 0;
    l2.dei = false;
    l2.vid = 0;
    if (et == ethertype::kVlan) {
        if (frame.size() < kEthLen + kVlanLen) return 0;
        const uint16_t tci = load_be16(f + 14);
        l2.vlan = true;
        l2.pcp = static_cast<uint8_t>(tci >> 13);
        l2.dei = tci & 0x1000;
        l2.vid = tci & 0x0FFF;
        et = load_be16(f + 16);
        off += kVlanLen;
    }
    l2.ethertype = et;
    return off;
}

bool parse_eth(std::span<const uint8_t> frame, EthView& out) {
    out.l3_off = static_cast<uint16_t>(parse_eth(frame, out.l2));
    return out.l3_off != 0;
}

size_t write_eth(uint8_t* f, const L2& l2) {
    std::memcpy(f, l2.dst.b.data(), 6);
    std::memcpy(f + 6, l2.src.b.data(), 6);
    if (l2.vlan) {
        store_be16(f + 12, ethertype::kVlan);
        store_be16(f + 14, static_cast<uint16_t>((l2.pcp & 7) << 13 | (l2.dei ? 0x1000 : 0) | (l2.vid & 0x0FFF)));
        store_be16(f + 16, l2.ethertype);
        return kEthLen + kVlanLen;
    }
    store_be16(f + 12, l2.ethertype);
    return kEthLen;
}

uint16_t ip_checksum(const uint8_t* p, size_t len) {
    // The one's-complement sum does not depend on byte order (RFC 1071), so
    // it runs over native 32-bit words and is swapped once at the end.
    uint64_t sum = 0;
    size_t i = 0;
    for (; i + 4 <= len; i += 4) {
        uint32_t w;
        std::memcpy(&w, p + i, 4);
        sum += w;
    }
    if (i + 2 <= len) {
        uint16_t w;
        std::memcpy(&w, p + i, 2);
        sum += w;
        i += 2;
    }
    if (i < len) {
        uint8_t last[2] = {p[i], 0};
        uint16_t w;
        std::memcpy(&w, last, 2);
        sum += w;
    }
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    uint16_t folded = static_cast<uint16_t>(sum);
    if constexpr (std::endian::native == std::endian::little) folded = __builtin_bswap16(folded);
    return static_cast<uint16_t>(~folded);
}

bool set_ip_ecn(std::span<uint8_t> frame, uint8_t ecn_bits) {
    EthView eth;
    if (!parse_eth(frame, eth)) return false;
    uint8_t* ip = frame.data() + eth.l3_off;
    if (eth.l2.ethertype == ethertype::kIpv4) {
        if (frame.size() < eth.l3_off + 20u) return false;
        const uint16_t old_word = load_be16(ip);
        ip[1] = static_cast<uint8_t>((ip[1] & ~3) | (ecn_bits & 3));
        const uint16_t new_word = load_be16(ip);
        // RFC 1624: HC' = ~(~HC + ~m + m')
        uint32_t sum = static_cast<uint16_t>(~load_be16(ip + 10)) + static_cast<uint16_t>(~old_word) + new_word;
        while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
        store_be16(ip + 10, static_cast<uint16_t>(~sum));
        return true;
    }
    if (eth.l2.ethertype == ethertype::kIpv6) {
        if (frame.size() < eth.l3_off + 40u) return false;
        ip[1] = static_cast<uint8_t>((ip[1] & ~0x30) | (ecn_bits & 3) << 4);
        return true;
    }
    return false;
}

size_t encode_arp(const L2& l2_in, const Arp& arp, std::span<uint8_t> out) {
    L2 l2 = l2_in;
    l2.ethertype = ethertype::kArp;
    const size_t need = (l2.vlan ? kVlanLen : 0) + kArpFrameLen;
    if (out.size() < need) return 0;
    uint8_t* f = out.data();
    uint8_t* a = f + write_eth(f, l2);
    store_be16(a, 1);  // Ethernet
    store_be16(a + 2, ethertype::kIpv4);
    a[4] = 6;
    a[5] = 4;
    store_be16(a + 6, arp.oper);
    std::memcpy(a + 8, arp.sha.b.data(), 6);
    store_be32(a + 14, arp.spa);
    std::memcpy(a + 18, arp.tha.b.data(), 6);
    store_be32(a + 24, arp.tpa);
    return need;
}

bool parse_arp(std::span<const uint8_t> frame, L2& l2, Arp& out) {
    EthView eth;
    if (!parse_eth(frame, eth) || eth.l2.ethertype != ethertype::kArp) return false;
    if (frame.size() < eth.l3_off + 28u) return false;
    const uint8_t* a = frame.data() + eth.l3_off;
    if (load_be16(a) != 1 || load_be16(a + 2) != ethertype::kIpv4 || a[4] != 6 || a[5] != 4) return false;
    l2 = eth.l2;
    out.oper = load_be16(a + 6);
    std::memcpy(out.sha.b.data(), a + 8, 6);
    out.spa = load_be32(a + 14);
    std::memcpy(out.tha.b.data(), a + 18, 6);
    out.tpa = load_be32(a + 24);
    return true;
}

size_t encode_pfc(const Pfc& pfc, std::span<uint8_t> out) {
    if (out.size() < kPfcFrameLen) return 0;
    uint8_t* f = out.data();
    std::memset(f, 0, kPfcFrameLen);
    L2 l2;
    l2.dst = kPfcDstMac;
    l2.src = pfc.src;
    l2.ethertype = ethertype::kMacControl;
    uint8_t* p = f + write_eth(f, l2);
    store_be16(p, kPfcOpcode);
    store_be16(p + 2, pfc.class_enable);
    for (int i = 0; i < 8; ++i) store_be16(p + 4 + 2 * i, pfc.quanta[i]);
    return kPfcFrameLen;
}

bool parse_pfc(std::span<const uint8_t> frame, Pfc& out) {
    if (frame.size() < kEthLen + 20) return false;
    const uint8_t* f = frame.data();
    if (load_be16(f + 12) != ethertype::kMacControl || load_be16(f + 14) != kPfcOpcode) return false;
    std::memcpy(out.src.b.data(), f + 6, 6);
    out.class_enable = static_cast<uint8_t>(load_be16(f + 16));
    for (int i = 0; i < 8; ++i) out.quanta[i] = load_be16(f + 18 + 2 * i);
    return true;
}

FrameKind classify(std::span<const uint8_t> frame) {
    EthView eth;
    if (!parse_eth(frame, eth)) return FrameKind::Truncated;
    const uint8_t* f = frame.data();
    const size_t n = frame.size();
    switch (eth.l2.ethertype) {
        case ethertype::kArp:
            return FrameKind::Arp;
        case ethertype::kMacControl:
            if (n < eth.l3_off + 2u) return FrameKind::Truncated;
            if (load_be16(f + eth.l3_off) == kPfcOpcode) return FrameKind::Pfc;
            if (load_be16(f + eth.l3_off) == kPauseOpcode) return FrameKind::Pause;
            return FrameKind::Other;
        case ethertype::kIpv4: {
            if (n < eth.l3_off + 28u) return FrameKind::Ipv4Other;
            const uint8_t* ip = f + eth.l3_off;
            const size_t ihl = size_t{ip[0] & 0x0Fu} * 4;
            if (ip[9] == kIpProtoUdp && n >= eth.l3_off + ihl + 4 && load_be16(ip + ihl + 2) == kRoceUdpPort)
                return FrameKind::Roce;
            return FrameKind::Ipv4Other;
        }
        case ethertype::kIpv6: {
            if (n < eth.l3_off + 44u) return FrameKind::Ipv6Other;
            const uint8_t* ip = f + eth.l3_off;
            if (ip[6] == kIpProtoUdp && load_be16(ip + 42) == kRoceUdpPort) return FrameKind::Roce;
            return FrameKind::Ipv6Other;
        }
        default:
            return FrameKind::Other;
    }
}

const char* to_string(FrameKind k) {
    switch (k) {
        case FrameKind::Truncated: return "truncated";
        case FrameKind::Roce: return "RoCEv2";
        case FrameKind::Arp: return "ARP";
        case FrameKind::Pfc: return "PFC";
        case FrameKind::Pause: return "PAUSE";
        case FrameKind::Ipv4Other: return "IPv4";
        case FrameKind::Ipv6Other: return "IPv6";
        case FrameKind::Other: return "other";
    }
    return "other";
}

}  // namespace rocemu::wire
