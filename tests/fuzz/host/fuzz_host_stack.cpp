// libFuzzer target: the NIC's host stack (rocemu_host: ARP, ICMP echo, IPv6
// neighbour discovery and ICMPv6 echo, 802.1Q) fed a script of random
// frames, timer ticks, pings and path resolutions. A frame's bytes come from
// the input; a shape byte lays a template over it (ARP, ICMP echo, ICMPv6
// echo, neighbour solicitation, RoCEv2, PFC; tagged or not) and points it at
// us (our MAC, broadcast or the solicited-node group; our IPv4 address or
// link-local GID) with lengths and the IPv4/ICMP/ICMPv6 checksums
// recomputed, so the handlers behind the filters are reached. Each frame is copied into a buffer of
// exactly its length (ASan sees any write past it); now and then it is
// handed in as the first segment of a longer chain.
// Invariants (abort on failure):
//   - a Reply is no longer than the frame it was written over, at least
//     Ethernet's minimum (60 bytes) unless that frame was a runt, and parses
//     back: ARP reply from us, or IPv4 ICMP echo reply with good header and
//     ICMP checksums, or ICMPv6 (echo reply, neighbour advertisement) with a
//     good checksum, sent from our MAC;
//   - every SendFrame effect fits kHostFrameMax and parses back the same way;
//   - a Drop verdict carries a reason, and the reason's counter moved.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "tests/fuzz/common/fuzz_input.hpp"

#include "dataplane/dpdk/host/gid.hpp"
#include "dataplane/dpdk/host/host_stack.hpp"
#include "dataplane/dpdk/host/ipv4.hpp"
#include "dataplane/dpdk/host/ipv6.hpp"
#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/l2.hpp"

using namespace rocemu;
using namespace rocemu::host;

namespace {

[[noreturn]] void fail(const char* what) { fuzz::fail("fuzz_host_stack", what); }
using fuzz::Input;

const wire::MacAddr kMac{{0x02, 0x00, 0x00, 0x00, 0x00, 0x0A}};
constexpr uint32_t kIp = 0x0A000002;  // 10.0.0.2/24, gateway 10.0.0.254

// A frame the stack wrote (a reply or an effect) must be something it may send.
// `min_len`: Ethernet's minimum, or less for a reply written over a runt.
void check_sent(std::span<const uint8_t> f, size_t min_len = kEthMinFrame) {
    wire::L2 l2;
    const size_t l3 = wire::parse_eth(f, l2);
    if (!l3) fail("sent frame: truncated Ethernet header");
    if (l2.src != kMac) fail("sent frame: not from our MAC");
    if (f.size() < min_len) fail("sent frame: shorter than Ethernet's minimum (or than the runt it answers)");
    switch (l2.ethertype) {
        case wire::ethertype::kArp: {
            wire::Arp arp;
            if (!wire::parse_arp(f, l2, arp)) fail("sent ARP does not parse");
            if (arp.sha != kMac || arp.spa != kIp) fail("sent ARP does not name us as the sender");
            break;
        }
        case wire::ethertype::kIpv4: {
            Ipv4Header ip;
            if (parse_ipv4(f, l3, ip) != Ipv4Error::Ok) fail("sent IPv4 does not parse (or bad header checksum)");
            if (ip.src != kIp || ip.proto != kIpProtoIcmp) fail("sent IPv4 is not ICMP from us");
            if (wire::ip_checksum(f.data() + l3 + ip.ihl_bytes, ip.total_len - ip.ihl_bytes) != 0)
                fail("sent ICMP has a bad checksum");
            break;
        }
        case wire::ethertype::kIpv6: {
            Ipv6Header ip;
            if (!parse_ipv6(f, l3, ip)) fail("sent IPv6 does not parse");
            if (ip.next_header != kIpProtoIcmp6) fail("sent IPv6 is not ICMPv6");
            if (icmp6_checksum(ip.src, ip.dst, f.data() + l3 + kIpv6HeaderLen, ip.payload_len) != 0)
                fail("sent ICMPv6 has a bad checksum");
            break;
        }
        default:
            fail("sent frame of an unexpected ethertype");
    }
}

struct Harness {
    std::unique_ptr<HostStack> st;
    Nanos now{1};
    wire::IpAddr ll;
    bool vlan = false;

    explicit Harness(uint8_t c) {
        HostConfig cfg;
        cfg.mac = kMac;
        cfg.ipv4 = kIp;
        cfg.prefix_len = 24;
        if (c & 1) cfg.gateway = 0x0A0000FE;
        if (c & 2) {
            cfg.vlan = static_cast<uint16_t>(100);
            cfg.pcp = 3;
            vlan = true;
        }
        cfg.gid_layout = c & 4 ? GidLayout::Rxe : GidLayout::ConnectX;
        cfg.port_mtu = Bytes{c & 8 ? 9000u : 1500u};
        st = std::make_unique<HostStack>(cfg);
        ll = link_local_gid(kMac);
    }

    void effects(const HostEffects& fx) {
        for (const HostEffect& e : fx)
            if (e.kind == HostEffect::Kind::SendFrame) {
                if (e.len > kHostFrameMax) fail("SendFrame longer than kHostFrameMax");
                check_sent(std::span<const uint8_t>(e.frame.data(), e.len));
            }
    }

    // Shapes the frame's headers from `shape` and points it at us, with its
    // lengths and checksums right: bits 0-2 pick a template (raw, ARP
    // request, ICMP echo, ICMPv6 echo, neighbour solicitation, RoCEv2 over
    // IPv4, PFC, UDP over IPv6), bit 3 adds an 802.1Q tag, bits 4-5 the
    // destination MAC (as is, ours, broadcast, IPv6 multicast), bit 6 keeps
    // the input's lengths and checksums instead of fixing them, bit 7 sends
    // IPv6 to the solicited-node group.
    void patch(std::vector<uint8_t>& f, uint8_t shape, uint16_t vid) {
        const uint8_t tpl = shape & 7;
        if (f.size() < 18 || tpl == 0) return;
        uint8_t* e = f.data();
        switch (shape >> 4 & 3) {
            case 1: std::memcpy(e, kMac.b.data(), 6); break;
            case 2: std::memset(e, 0xFF, 6); break;
            case 3: std::memcpy(e, ipv6_multicast_mac(solicited_node(ll)).b.data(), 6); break;
            default: break;
        }
        size_t l3 = 14;
        if (shape & 8) {
            wire::store_be16(e + 12, wire::ethertype::kVlan);
            wire::store_be16(e + 14, vid);
            l3 = 18;
        }
        static constexpr uint16_t kTypes[] = {0, wire::ethertype::kArp, wire::ethertype::kIpv4,
                                              wire::ethertype::kIpv6, wire::ethertype::kIpv6, wire::ethertype::kIpv4,
                                              wire::ethertype::kMacControl, wire::ethertype::kIpv6};
        wire::store_be16(e + l3 - 2, kTypes[tpl]);
        uint8_t* ip = e + l3;
        const size_t avail = f.size() - l3;
        const bool fix = !(shape & 0x40);
        if (tpl == 1 && avail >= 28) {
            wire::store_be16(ip, 1);
            wire::store_be16(ip + 2, wire::ethertype::kIpv4);
            ip[4] = 6;
            ip[5] = 4;
            if (fix) wire::store_be16(ip + 6, ip[7] & 1 ? wire::kArpRequest : wire::kArpReply);
            wire::store_be32(ip + 24, kIp);
        } else if ((tpl == 2 || tpl == 5) && avail >= 28) {
            if (fix) ip[0] = 0x45;
            const size_t ihl = (ip[0] & 0x0F) * 4u;
            if (ihl < 20 || ihl + 8 > avail) return;
            ip[9] = tpl == 2 ? kIpProtoIcmp : 17;
            if (fix) wire::store_be16(ip + 6, 0x4000);
            const size_t total = fix ? avail : std::min<size_t>(avail, wire::load_be16(ip + 2));
            wire::store_be16(ip + 2, static_cast<uint16_t>(total));
            wire::store_be32(ip + 16, kIp);
            if (total < ihl + 8) return;  // a short IP length kept as is
            if (tpl == 2) {
                if (fix) ip[ihl] = kIcmpEchoRequest, ip[ihl + 1] = 0;
                wire::store_be16(ip + ihl + 2, 0);
                wire::store_be16(ip + ihl + 2, wire::ip_checksum(ip + ihl, total - ihl));
            } else {
                wire::store_be16(ip + ihl + 2, 4791);
            }
            wire::store_be16(ip + 10, 0);
            if (fix) wire::store_be16(ip + 10, wire::ip_checksum(ip, ihl));
        } else if ((tpl == 3 || tpl == 4 || tpl == 7) && avail >= kIpv6HeaderLen + 8) {
            ip[0] = static_cast<uint8_t>(0x60 | (ip[0] & 0x0F));
            const size_t pay = avail - kIpv6HeaderLen;
            if (fix) wire::store_be16(ip + 4, static_cast<uint16_t>(pay));
            ip[6] = tpl == 7 ? 17 : kIpProtoIcmp6;
            const wire::IpAddr dst = shape & 0x80 ? solicited_node(ll) : ll;
            std::memcpy(ip + 24, dst.b.data(), 16);
            uint8_t* m = ip + kIpv6HeaderLen;
            if (tpl == 7) {
                wire::store_be16(m + 2, 4791);
                return;
            }
            m[0] = tpl == 3 ? kIcmp6EchoRequest : kIcmp6NeighborSolicit;
            if (fix) {
                m[1] = 0;
                ip[7] = 255;
                if (tpl == 4 && pay >= 24) std::memcpy(m + 8, ll.b.data(), 16);  // the target: us
            }
            wire::IpAddr src;
            std::memcpy(src.b.data(), ip + 8, 16);
            wire::store_be16(m + 2, 0);
            wire::store_be16(m + 2, icmp6_checksum(src, dst, m, pay));
        } else if (tpl == 6 && avail >= 2) {
            wire::store_be16(ip, 0x0101);
        }
    }

    void frame(Input& in, uint8_t op) {
        const uint8_t shape = in.u8();
        const uint16_t vid = in.u8() & 1 ? 100 : in.u16();
        const size_t len = in.u16() % 1600;
        std::vector<uint8_t> f(len);
        for (size_t i = 0; i < len; ++i) f[i] = in.u8();
        patch(f, shape, vid);
        size_t wire_len = 0;
        if ((op & 7) == 3) wire_len = len + 1 + in.u16() % 8000;  // the first segment of a chain
        HostEffects fx;
        const HostCounters before = st->counters();
        const RxResult r = st->on_frame(f, now, fx, wire_len);
        effects(fx);
        switch (r.verdict) {
            case RxVerdict::Reply:
                if (r.reply_len > f.size()) fail("reply longer than the frame buffer");
                check_sent(std::span<const uint8_t>(f.data(), r.reply_len), std::min(f.size(), kEthMinFrame));
                break;
            case RxVerdict::Drop:
                if (r.drop == HostDrop::None || r.drop >= HostDrop::kCount) fail("drop without a reason");
                if (st->counters().drop(r.drop) != before.drop(r.drop) + 1) fail("drop not counted under its reason");
                break;
            default:
                if (r.drop != HostDrop::None) fail("a verdict other than Drop carries a drop reason");
                break;
        }
    }

    void step(Input& in) {
        const uint8_t op = in.u8();
        switch (op & 7) {
            case 0:
            case 1:
            case 2:
            case 3:
                frame(in, op);
                break;
            case 4: {  // to the next ARP timer, or a little
                const Nanos t = st->next_timer();
                if (op & 0x80 && t != Nanos::max() && t > now) now = t;
                else now += Nanos::from_ms(in.u8());
                HostEffects fx;
                st->on_timer(now, fx);
                effects(fx);
                break;
            }
            case 5: {
                HostEffects fx;
                const uint32_t dst = op & 0x80 ? in.u32() : 0x0A000000 | in.u8();
                (void)st->ping(dst, in.u16(), in.u16(), in.u8(), now, in.u8(), fx);
                effects(fx);
                break;
            }
            case 6: {
                AddressVector av;
                if (op & 0x80) {
                    for (auto& b : av.dgid.b) b = in.u8();
                } else if (op & 0x40) {
                    av.dgid = wire::IpAddr::from_v4(0x0A000000 | in.u8());
                } else {
                    av.dgid = link_local_gid(wire::MacAddr{{2, 0, 0, 0, 1, in.u8()}});
                }
                av.sgid_index = in.u8() % 4;
                av.traffic_class = in.u8();
                HostEffects fx;
                const PathResult pr = st->resolve_path(av, now, in.u8(), fx);
                effects(fx);
                if (pr.status == PathResult::Status::Error && pr.error.empty()) fail("a path error says nothing");
                break;
            }
            default: {
                HostEffects fx;
                st->announce(fx);
                effects(fx);
                break;
            }
        }
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    Input in{data, size};
    Harness h(in.u8());
    for (int steps = 0; !in.empty() && steps < 256; ++steps) h.step(in);
    return 0;
}
