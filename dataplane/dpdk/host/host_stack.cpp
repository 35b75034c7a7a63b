#include "dataplane/dpdk/host/host_stack.hpp"

#include <fmt/format.h>

#include <cstring>

#include "dataplane/dpdk/host/mtu.hpp"
#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/describe.hpp"
#include "dataplane/wire/l2.hpp"

namespace rocemu::host {

using wire::load_be16;
using wire::store_be16;
using wire::store_be32;

const char* to_string(HostDrop d) {
    switch (d) {
        case HostDrop::None: return "none";
        case HostDrop::Truncated: return "truncated";
        case HostDrop::WrongDstMac: return "wrong_dst_mac";
        case HostDrop::WrongVlan: return "wrong_vlan";
        case HostDrop::UnsupportedEthertype: return "unsupported_ethertype";
        case HostDrop::ArpMalformed: return "arp_malformed";
        case HostDrop::ArpNotForUs: return "arp_not_for_us";
        case HostDrop::IpBadHeader: return "ip_bad_header";
        case HostDrop::IpBadChecksum: return "ip_bad_checksum";
        case HostDrop::IpNotForUs: return "ip_not_for_us";
        case HostDrop::IpFragment: return "ip_fragment";
        case HostDrop::IpProtoUnsupported: return "ip_proto_unsupported";
        case HostDrop::IcmpBadChecksum: return "icmp_bad_checksum";
        case HostDrop::IcmpUnsupported: return "icmp_unsupported";
        case HostDrop::RoceNotForUs: return "roce_not_for_us";
        case HostDrop::Ipv6Unsupported: return "ipv6_unsupported";
        case HostDrop::EffectsFull: return "effects_full";
        case HostDrop::Chained: return "chained";
        case HostDrop::kCount: break;
    }
    return "unknown";
}

const char* to_string(HostEvent e) {
    switch (e) {
        case HostEvent::RxFrames: return "rx_frames";
        case HostEvent::RxArpRequest: return "rx_arp_request";
        case HostEvent::RxArpReply: return "rx_arp_reply";
        case HostEvent::TxArpRequest: return "tx_arp_request";
        case HostEvent::TxArpReply: return "tx_arp_reply";
        case HostEvent::RxEchoRequest: return "rx_echo_request";
        case HostEvent::TxEchoReply: return "tx_echo_reply";
        case HostEvent::TxEchoRequest: return "tx_echo_request";
        case HostEvent::RxEchoReply: return "rx_echo_reply";
        case HostEvent::RxRoce: return "rx_roce";
        case HostEvent::RxPfc: return "rx_pfc";
        case HostEvent::RxNeighborSolicit: return "rx_neighbor_solicit";
        case HostEvent::TxNeighborAdvert: return "tx_neighbor_advert";
        case HostEvent::ArpResolved: return "arp_resolved";
        case HostEvent::ArpFailed: return "arp_failed";
        case HostEvent::kCount: break;
    }
    return "unknown";
}

HostStack::HostStack(const HostConfig& cfg)
    : cfg_(cfg),
      gids_(cfg.gid_layout, cfg.mac, cfg.ipv4 ? std::optional<uint32_t>(cfg.ipv4) : std::nullopt),
      active_mtu_(host::active_mtu(cfg.port_mtu)),
      arp_(cfg.arp) {}

RxResult HostStack::drop(HostDrop d) {
    ++counters_.drops[static_cast<size_t>(d)];
    return {RxVerdict::Drop, d, 0};
}

HostEffect* HostStack::emit(HostEffects& fx, HostEffect::Kind kind) {
    HostEffect* e = fx.emplace();
    if (!e) {
        ++counters_.drops[static_cast<size_t>(HostDrop::EffectsFull)];
        return nullptr;
    }
    e->kind = kind;
    return e;
}

wire::L2 HostStack::our_l2(const wire::MacAddr& dst, uint16_t ethertype) const {
    wire::L2 l2;
    l2.dst = dst;
    l2.src = cfg_.mac;
    l2.ethertype = ethertype;
    if (cfg_.vlan) {
        l2.vlan = true;
        l2.vid = *cfg_.vlan;
        l2.pcp = cfg_.pcp;
    }
    return l2;
}

bool HostStack::on_link(uint32_t dst) const {
    const uint32_t mask = cfg_.prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - cfg_.prefix_len);
    return (dst & mask) == (cfg_.ipv4 & mask);
}

std::optional<uint32_t> HostStack::next_hop(uint32_t dst) const {
    if (on_link(dst)) return dst;
    return cfg_.gateway;
}

void HostStack::send_arp(uint16_t oper, const wire::MacAddr& dst, const wire::MacAddr& tha, uint32_t tpa,
                         HostEffects& fx) {
    HostEffect* e = emit(fx, HostEffect::Kind::SendFrame);
    if (!e) return;
    wire::Arp arp;
    arp.oper = oper;
    arp.sha = cfg_.mac;
    arp.spa = cfg_.ipv4;
    arp.tha = tha;
    arp.tpa = tpa;
    const size_t n = wire::encode_arp(our_l2(dst, wire::ethertype::kArp), arp, e->frame);
    e->len = static_cast<uint16_t>(std::max(n, kEthMinFrame));
    count(oper == wire::kArpRequest ? HostEvent::TxArpRequest : HostEvent::TxArpReply);
}

void HostStack::announce(HostEffects& fx) { send_arp(wire::kArpRequest, wire::MacAddr::broadcast(), {}, cfg_.ipv4, fx); }

RxResult HostStack::on_frame(std::span<uint8_t> frame, Nanos now, HostEffects& fx, size_t wire_len) {
    count(HostEvent::RxFrames);
    wire::EthView eth;
    if (!wire::parse_eth(frame, eth)) return drop(HostDrop::Truncated);
    if (eth.l2.dst != cfg_.mac && !eth.l2.dst.is_multicast()) return drop(HostDrop::WrongDstMac);
    if (eth.l2.ethertype == wire::ethertype::kMacControl && !eth.l2.vlan) {
        const wire::FrameKind k = wire::classify(frame);
        if (wire_len > frame.size()) return drop(HostDrop::Chained);
        if (k == wire::FrameKind::Pfc || k == wire::FrameKind::Pause) {
            count(HostEvent::RxPfc);
            return {RxVerdict::Pfc, HostDrop::None, 0};
        }
        return drop(HostDrop::UnsupportedEthertype);
    }
    // Untagged and priority-tagged (VID 0) frames belong to an untagged host.
    const uint16_t vid = eth.l2.vlan ? eth.l2.vid : 0;
    if (vid != cfg_.vlan.value_or(0)) return drop(HostDrop::WrongVlan);
    switch (eth.l2.ethertype) {
        case wire::ethertype::kArp: return wire_len > frame.size() ? drop(HostDrop::Chained) : handle_arp(frame, now, fx);
        case wire::ethertype::kIpv4: return handle_ipv4(frame, eth.l2, eth.l3_off, fx, wire_len);
        case wire::ethertype::kIpv6: return handle_ipv6(frame, eth.l2, eth.l3_off, fx, wire_len);
        default: return drop(HostDrop::UnsupportedEthertype);
    }
}

RxResult HostStack::handle_arp(std::span<uint8_t> frame, Nanos now, HostEffects& fx) {
    wire::L2 l2;
    wire::Arp arp;
    if (!wire::parse_arp(frame, l2, arp)) return drop(HostDrop::ArpMalformed);
    const bool for_us = cfg_.ipv4 != 0 && arp.tpa == cfg_.ipv4;
    if (arp.oper == wire::kArpRequest) count(HostEvent::RxArpRequest);
    else if (arp.oper == wire::kArpReply) count(HostEvent::RxArpReply);
    else return drop(HostDrop::ArpMalformed);
    // An ARP probe (sender 0.0.0.0) announces nothing worth learning.
    if (arp.spa != 0 && arp.spa != cfg_.ipv4) {
        arp_.learn(arp.spa, arp.sha, now, for_us, [&](uint64_t cookie, const wire::MacAddr& mac) {
            count(HostEvent::ArpResolved);
            if (HostEffect* e = emit(fx, HostEffect::Kind::Resolved)) {
                e->ip = arp.spa;
                e->mac = mac;
                e->cookie = cookie;
            }
        });
    }
    if (arp.oper == wire::kArpReply) return {RxVerdict::Consumed, HostDrop::None, 0};
    if (!for_us) return drop(HostDrop::ArpNotForUs);
    wire::L2 reply_l2 = l2;
    reply_l2.dst = arp.sha;
    reply_l2.src = cfg_.mac;
    if (cfg_.vlan) reply_l2.pcp = cfg_.pcp;
    const wire::Arp reply = wire::arp_reply(arp, cfg_.mac, cfg_.ipv4);
    const size_t n = wire::encode_arp(reply_l2, reply, frame);
    count(HostEvent::TxArpReply);
    return {RxVerdict::Reply, HostDrop::None, static_cast<uint16_t>(std::max(n, std::min(frame.size(), kEthMinFrame)))};
}

RxResult HostStack::handle_ipv4(std::span<uint8_t> frame, const wire::L2& l2, size_t l3_off, HostEffects& fx,
                                size_t wire_len) {
    Ipv4Header ip;
    // A RoCEv2 frame's header checksum is left to the transport's parse
    // (wire::parse_roce checks it for every frame it takes): summing it here
    // too cost a second pass per packet.
    switch (parse_ipv4(frame, l3_off, ip, false, wire_len)) {
        case Ipv4Error::Ok: break;
        case Ipv4Error::Truncated: return drop(HostDrop::Truncated);
        case Ipv4Error::BadHeader: return drop(HostDrop::IpBadHeader);
        case Ipv4Error::BadChecksum: return drop(HostDrop::IpBadChecksum);
    }
    const bool roce = ip.proto == wire::kIpProtoUdp && wire::classify(frame) == wire::FrameKind::Roce;
    // Only RoCEv2 is taken from a chain (the transport parses the whole
    // chain); the first segment of any other may end inside its IP header,
    // which parse_ipv4 checked against the whole packet's length.
    if (!roce && wire_len > frame.size()) return drop(HostDrop::Chained);
    if (!roce && wire::ip_checksum(frame.data() + l3_off, ip.ihl_bytes) != 0) return drop(HostDrop::IpBadChecksum);
    if (ip.dst != cfg_.ipv4 || cfg_.ipv4 == 0) return drop(roce ? HostDrop::RoceNotForUs : HostDrop::IpNotForUs);
    if (ip.is_fragment()) return drop(HostDrop::IpFragment);
    if (ip.proto == wire::kIpProtoUdp) {
        if (!roce) return drop(HostDrop::IpProtoUnsupported);
        count(HostEvent::RxRoce);
        return {RxVerdict::Transport, HostDrop::None, 0};
    }
    if (ip.proto != kIpProtoIcmp) return drop(HostDrop::IpProtoUnsupported);
    uint8_t* ipb = frame.data() + l3_off;
    uint8_t* icmp = ipb + ip.ihl_bytes;
    const size_t icmp_len = ip.total_len - ip.ihl_bytes;
    if (icmp_len < 8) return drop(HostDrop::Truncated);
    if (wire::ip_checksum(icmp, icmp_len) != 0) return drop(HostDrop::IcmpBadChecksum);
    if (icmp[0] == kIcmpEchoReply && icmp[1] == 0) {
        count(HostEvent::RxEchoReply);
        if (HostEffect* e = emit(fx, HostEffect::Kind::EchoReply)) {
            e->ip = ip.src;
            e->mac = l2.src;
            e->echo_id = load_be16(icmp + 4);
            e->echo_seq = load_be16(icmp + 6);
        }
        return {RxVerdict::Consumed, HostDrop::None, 0};
    }
    if (icmp[0] != kIcmpEchoRequest || icmp[1] != 0) return drop(HostDrop::IcmpUnsupported);
    count(HostEvent::RxEchoRequest);
    // Turn the request around where it lies: same length, same tag.
    std::memcpy(frame.data(), l2.src.b.data(), 6);
    std::memcpy(frame.data() + 6, cfg_.mac.b.data(), 6);
    if (l2.vlan && cfg_.vlan) frame[14] = static_cast<uint8_t>((frame[14] & 0x1F) | (cfg_.pcp & 7) << 5);
    store_be32(ipb + 12, cfg_.ipv4);
    store_be32(ipb + 16, ip.src);
    ipb[8] = 64;
    store_be16(ipb + 10, 0);
    store_be16(ipb + 10, wire::ip_checksum(ipb, ip.ihl_bytes));
    icmp[0] = kIcmpEchoReply;
    store_be16(icmp + 2, 0);
    store_be16(icmp + 2, wire::ip_checksum(icmp, icmp_len));
    count(HostEvent::TxEchoReply);
    return {RxVerdict::Reply, HostDrop::None, static_cast<uint16_t>(l3_off + ip.total_len)};
}

RxResult HostStack::handle_ipv6(std::span<uint8_t> frame, const wire::L2& l2, size_t l3_off, HostEffects& fx,
                                size_t wire_len) {
    Ipv6Header ip;
    if (!parse_ipv6(frame, l3_off, ip, wire_len)) return drop(HostDrop::Truncated);
    if (wire::classify(frame) == wire::FrameKind::Roce) {
        if (gids_.find_v2(ip.dst) < 0) return drop(HostDrop::RoceNotForUs);
        count(HostEvent::RxRoce);
        return {RxVerdict::Transport, HostDrop::None, 0};
    }
    if (ip.next_header != kIpProtoIcmp6) return drop(HostDrop::Ipv6Unsupported);
    if (wire_len > frame.size()) return drop(HostDrop::Chained);
    const wire::IpAddr ours = link_local_gid(cfg_.mac);
    uint8_t* ipb = frame.data() + l3_off;
    uint8_t* icmp = ipb + kIpv6HeaderLen;
    const size_t icmp_len = ip.payload_len;
    if (icmp_len < 8) return drop(HostDrop::Truncated);
    if (icmp[0] != kIcmp6NeighborSolicit && icmp[0] != kIcmp6EchoRequest) return drop(HostDrop::Ipv6Unsupported);
    if (icmp6_checksum(ip.src, ip.dst, icmp, icmp_len) != 0) return drop(HostDrop::IcmpBadChecksum);
    if (icmp[0] == kIcmp6NeighborSolicit) {
        if (icmp_len < 24 || ip.hop_limit != 255) return drop(HostDrop::IpBadHeader);
        wire::IpAddr target;
        std::memcpy(target.b.data(), icmp + 8, 16);
        if (target != ours) return drop(HostDrop::IpNotForUs);
        count(HostEvent::RxNeighborSolicit);
        // A solicitation from the unspecified address (duplicate detection) is answered to all nodes.
        const bool dad = ip.src == wire::IpAddr{};
        const wire::IpAddr dst = dad ? kAllNodes : ip.src;
        HostEffect* e = emit(fx, HostEffect::Kind::SendFrame);
        if (!e) return {RxVerdict::Consumed, HostDrop::None, 0};
        const size_t n = encode_neighbor_advert(our_l2(dad ? ipv6_multicast_mac(kAllNodes) : l2.src, wire::ethertype::kIpv6), ours, dst,
                                                ours, cfg_.mac, !dad, e->frame);
        e->len = static_cast<uint16_t>(std::max(n, kEthMinFrame));
        count(HostEvent::TxNeighborAdvert);
        return {RxVerdict::Consumed, HostDrop::None, 0};
    }
    if (ip.dst != ours) return drop(HostDrop::IpNotForUs);
    count(HostEvent::RxEchoRequest);
    std::memcpy(frame.data(), l2.src.b.data(), 6);
    std::memcpy(frame.data() + 6, cfg_.mac.b.data(), 6);
    if (l2.vlan && cfg_.vlan) frame[14] = static_cast<uint8_t>((frame[14] & 0x1F) | (cfg_.pcp & 7) << 5);
    std::memcpy(ipb + 8, ours.b.data(), 16);
    std::memcpy(ipb + 24, ip.src.b.data(), 16);
    ipb[7] = 64;
    icmp[0] = kIcmp6EchoReply;
    store_be16(icmp + 2, 0);
    store_be16(icmp + 2, icmp6_checksum(ours, ip.src, icmp, icmp_len));
    count(HostEvent::TxEchoReply);
    return {RxVerdict::Reply, HostDrop::None, static_cast<uint16_t>(l3_off + kIpv6HeaderLen + icmp_len)};
}

void HostStack::on_timer(Nanos now, HostEffects& fx) {
    arp_.on_timer(
        now, [&](uint32_t ip) { send_arp(wire::kArpRequest, wire::MacAddr::broadcast(), {}, ip, fx); },
        [&](uint32_t ip, uint64_t cookie) {
            count(HostEvent::ArpFailed);
            if (HostEffect* e = emit(fx, HostEffect::Kind::ResolveFailed)) {
                e->ip = ip;
                e->cookie = cookie;
            }
        });
}

PathResult HostStack::resolve_path(const AddressVector& av, Nanos now, uint64_t cookie, HostEffects& fx) {
    PathResult r;
    const GidCheck sgid = gids_.check_sgid_index(av.sgid_index);
    if (!sgid.ok()) {
        r.error = sgid.error;
        return r;
    }
    const bool v4 = sgid.entry->gid.is_v4();
    if (v4 != av.dgid.is_v4()) {
        r.error = fmt::format("GID index {} ({}) and the destination GID {} are of different IP versions; use {}",
                              sgid.index, format_gid(sgid.entry->gid), format_gid(av.dgid),
                              av.dgid.is_v4() ? "an IPv4-mapped RoCEv2 GID index" : "a RoCEv2 IPv6 GID index");
        return r;
    }
    r.l3.v6 = !v4;
    r.l3.src = sgid.entry->gid;
    r.l3.dst = av.dgid;
    r.l3.dscp = av.traffic_class >> 2;
    r.l3.ecn = (av.traffic_class & 3) ? (av.traffic_class & 3) : cfg_.ecn;
    r.l3.ttl = av.hop_limit ? av.hop_limit : 64;
    r.l3.flow_label = av.flow_label;
    const uint16_t et = v4 ? wire::ethertype::kIpv4 : wire::ethertype::kIpv6;
    if (!v4) {
        // Link-local GIDs carry their MAC: RoCE resolves them without ND.
        const std::optional<wire::MacAddr> mac = mac_from_link_local(av.dgid);
        if (!mac) {
            r.error = fmt::format("destination GID {} is not link-local and rocemu has no IPv6 neighbour discovery",
                                  format_gid(av.dgid));
            return r;
        }
        r.l2 = our_l2(*mac, et);
        r.status = PathResult::Status::Ready;
        return r;
    }
    const std::optional<uint32_t> hop = next_hop(av.dgid.v4());
    if (!hop) {
        r.error = fmt::format("no route to {}: it is outside {}/{} and no gateway is configured",
                              wire::format_ip(av.dgid), wire::format_ip(wire::IpAddr::from_v4(cfg_.ipv4)),
                              cfg_.prefix_len);
        return r;
    }
    const ArpCache::Lookup l = arp_.resolve(*hop, now, cookie);
    switch (l.status) {
        case ArpCache::Status::Hit:
            r.l2 = our_l2(l.mac, et);
            r.status = PathResult::Status::Ready;
            return r;
        case ArpCache::Status::Pending:
            if (l.send_request) send_arp(wire::kArpRequest, wire::MacAddr::broadcast(), {}, *hop, fx);
            r.status = PathResult::Status::Pending;
            return r;
        case ArpCache::Status::Full:
            break;
    }
    r.error = fmt::format("cannot resolve {}: the ARP cache has no free entry or waiter slot",
                          wire::format_ip(wire::IpAddr::from_v4(*hop)));
    return r;
}

PingStatus HostStack::ping(uint32_t dst, uint16_t id, uint16_t seq, size_t payload_len, Nanos now, uint64_t cookie,
                           HostEffects& fx) {
    const std::optional<uint32_t> hop = next_hop(dst);
    if (!hop) return PingStatus::NoRoute;
    const ArpCache::Lookup l = arp_.resolve(*hop, now, cookie);
    if (l.status == ArpCache::Status::Full) return PingStatus::Busy;
    if (l.status == ArpCache::Status::Pending) {
        if (l.send_request) send_arp(wire::kArpRequest, wire::MacAddr::broadcast(), {}, *hop, fx);
        return PingStatus::Resolving;
    }
    HostEffect* e = emit(fx, HostEffect::Kind::SendFrame);
    if (!e) return PingStatus::Busy;
    std::array<uint8_t, 64> payload;
    payload_len = std::min(payload_len, payload.size());
    for (size_t i = 0; i < payload_len; ++i) payload[i] = static_cast<uint8_t>(i);
    const size_t n = encode_icmp_echo(our_l2(l.mac, wire::ethertype::kIpv4), cfg_.ipv4, dst, 64,
                                      IcmpEcho{kIcmpEchoRequest, id, seq}, std::span(payload.data(), payload_len),
                                      e->frame);
    e->len = static_cast<uint16_t>(std::max(n, kEthMinFrame));
    e->ip = dst;
    count(HostEvent::TxEchoRequest);
    return PingStatus::Sent;
}

}  // namespace rocemu::host
