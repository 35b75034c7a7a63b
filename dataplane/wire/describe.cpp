#include "dataplane/wire/describe.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/l2.hpp"

namespace rocemu::wire {

std::string format_ip(const IpAddr& a) {
    if (a.is_v4()) return fmt::format("{}.{}.{}.{}", a.b[12], a.b[13], a.b[14], a.b[15]);
    std::string s;
    for (int i = 0; i < 16; i += 2) {
        if (i) s += ':';
        s += fmt::format("{:x}", a.b[i] << 8 | a.b[i + 1]);
    }
    return s;
}

std::string format_mac(const MacAddr& m) {
    return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m.b[0], m.b[1], m.b[2], m.b[3], m.b[4], m.b[5]);
}

namespace {

std::string aeth_text(const Aeth& a) {
    const uint8_t type = a.syndrome & aeth::kTypeMask;
    const char* kind = "ACK";
    if (type == aeth::kRnrNak) kind = "RNR_NAK";
    else if (type == aeth::kNak) {
        switch (a.syndrome) {
            case aeth::kNakPsnSeqError: kind = "NAK_PSN_SEQ_ERR"; break;
            case aeth::kNakInvalidRequest: kind = "NAK_INV_REQ"; break;
            case aeth::kNakRemoteAccess: kind = "NAK_REM_ACCESS"; break;
            case aeth::kNakRemoteOperational: kind = "NAK_REM_OP"; break;
            default: kind = "NAK"; break;
        }
    } else if (type != aeth::kAck) kind = "AETH_RESERVED";
    return fmt::format(" aeth={}/0x{:02x} msn={}", kind, a.syndrome, a.msn);
}

}  // namespace

std::string describe_roce(const RocePacket& p, ParseError verdict) {
    // A frame that does not parse has no trustworthy fields beyond the
    // point where it broke: none are shown rather than zeros that look real.
    if (verdict != ParseError::Ok && verdict != ParseError::BadIcrc)
        return fmt::format("RoCEv2 frame (UDP port 4791) that does not parse: error={}", to_string(verdict));
    const OpcodeInfo& info = p.info();
    std::string s = fmt::format("{}:{} > {} {:<34} qp=0x{:06x} psn={:<8} {}{}{}{}", format_ip(p.l3.src), p.udp_sport,
                                format_ip(p.l3.dst), info.valid() ? info.name : fmt::format("OPCODE_0x{:02x}", p.bth.opcode),
                                p.bth.dqpn.v, p.bth.psn.value(), p.bth.ackreq ? 'A' : '-', p.bth.se ? 'S' : '-',
                                p.bth.fecn ? 'F' : '-', p.bth.becn ? 'B' : '-');
    if (p.l3.ecn == ecn::kCe) s += " ecn=CE";
    if (info.valid()) {
        if (info.has(Hdr::Reth)) s += fmt::format(" va=0x{:x} rkey=0x{:x} dlen={}", p.reth.va, p.reth.rkey, p.reth.dma_len);
        if (info.has(Hdr::AtomicEth))
            s += fmt::format(" va=0x{:x} rkey=0x{:x} swap_add=0x{:x} cmp=0x{:x}", p.atomic.va, p.atomic.rkey,
                             p.atomic.swap_add, p.atomic.compare);
        if (info.has(Hdr::Aeth)) s += aeth_text(p.aeth);
        if (info.has(Hdr::AtomicAckEth)) s += fmt::format(" orig=0x{:x}", p.atomic_ack);
        if (info.has(Hdr::Deth)) s += fmt::format(" qkey=0x{:x} sqp=0x{:06x}", p.deth.qkey, p.deth.src_qp.v);
        if (info.has(Hdr::ImmDt)) s += fmt::format(" imm=0x{:08x}", p.imm);
        if (info.has(Hdr::Ieth)) s += fmt::format(" inv_rkey=0x{:x}", p.ieth_rkey);
    }
    s += fmt::format(" len={}", p.payload_len);
    if (verdict == ParseError::Ok) s += " icrc=ok";
    else s += fmt::format(" icrc=BAD(0x{:08x})", p.icrc);
    return s;
}

std::string describe_other(std::span<const uint8_t> frame) {
    const FrameKind kind = classify(frame);
    EthView eth;
    parse_eth(frame, eth);
    switch (kind) {
        case FrameKind::Arp: {
            L2 l2;
            Arp arp;
            if (!parse_arp(frame, l2, arp)) return "ARP (malformed)";
            const IpAddr spa = IpAddr::from_v4(arp.spa), tpa = IpAddr::from_v4(arp.tpa);
            if (arp.oper == kArpRequest) return fmt::format("ARP who-has {} tell {}", format_ip(tpa), format_ip(spa));
            return fmt::format("ARP {} is-at {}", format_ip(spa), format_mac(arp.sha));
        }
        case FrameKind::Pfc: {
            Pfc pfc;
            if (!parse_pfc(frame, pfc)) return "PFC (malformed)";
            std::string s = fmt::format("PFC from {} enable=0x{:02x}", format_mac(pfc.src), pfc.class_enable);
            for (int i = 0; i < 8; ++i)
                if (pfc.class_enable & (1 << i)) s += fmt::format(" p{}={}", i, pfc.quanta[i]);
            return s;
        }
        case FrameKind::Ipv4Other:
            if (eth.l3_off && frame.size() >= eth.l3_off + 20u) {
                const uint8_t* ip = frame.data() + eth.l3_off;
                return fmt::format("IPv4 {} > {} proto {} ttl {} ({} bytes)",
                                   format_ip(IpAddr::from_v4(load_be32(ip + 12))),
                                   format_ip(IpAddr::from_v4(load_be32(ip + 16))), ip[9], ip[8], frame.size());
            }
            break;
        case FrameKind::Ipv6Other:
            if (eth.l3_off && frame.size() >= eth.l3_off + 40u) {
                const uint8_t* ip = frame.data() + eth.l3_off;
                IpAddr src, dst;
                std::copy_n(ip + 8, 16, src.b.begin());
                std::copy_n(ip + 24, 16, dst.b.begin());
                return fmt::format("IPv6 {} > {} next header {} hop limit {} ({} bytes)", format_ip(src),
                                   format_ip(dst), ip[6], ip[7], frame.size());
            }
            break;
        default: break;
    }
    return fmt::format("{} ({} bytes, ethertype 0x{:04x})", to_string(kind), frame.size(), eth.l2.ethertype);
}

}  // namespace rocemu::wire
