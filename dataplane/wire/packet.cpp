#include "dataplane/wire/packet.hpp"

#include <algorithm>
#include <cstring>

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/crc32.hpp"
#include "dataplane/wire/headers.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/l2.hpp"

namespace rocemu::wire {

namespace {
constexpr size_t kEthLen = 14, kVlanLen = 4, kIpv4Len = 20, kIpv6Len = 40, kUdpLen = 8;

constexpr const char* kParseErrorNames[] = {
    "ok", "truncated", "not_ip", "bad_ip_header", "not_udp", "not_roce", "bad_length",
    "reserved_opcode", "wrong_qp_class", "bad_padcnt", "bad_tver", "bad_icrc", "split_headers",
};
static_assert(std::size(kParseErrorNames) == static_cast<size_t>(ParseError::kCount));

// Headers the opcode does not carry read as zero, so a packet reused for
// the next frame keeps nothing from the last one.
void read_ext_headers(const uint8_t* bth, const OpcodeInfo& info, RocePacket& out) {
    using B = const uint8_t;
    auto at = [&](Hdr h) { return bth + info.offset[static_cast<int>(h)]; };
    if (info.has(Hdr::Deth)) {
        DethView<B> v{at(Hdr::Deth)};
        out.deth = {v.qkey(), v.src_qp()};
    } else {
        out.deth = {};
    }
    out.feth = info.has(Hdr::Feth) ? FethView<B>{at(Hdr::Feth)}.value() : 0;
    if (info.has(Hdr::Reth)) {
        RethView<B> v{at(Hdr::Reth)};
        out.reth = {v.va(), v.rkey(), v.dma_len()};
    } else {
        out.reth = {};
    }
    if (info.has(Hdr::AtomicEth)) {
        AtomicEthView<B> v{at(Hdr::AtomicEth)};
        out.atomic = {v.va(), v.rkey(), v.swap_add(), v.compare()};
    } else {
        out.atomic = {};
    }
    if (info.has(Hdr::Aeth)) {
        AethView<B> v{at(Hdr::Aeth)};
        out.aeth = {v.syndrome(), v.msn()};
    } else {
        out.aeth = {};
    }
    out.atomic_ack = info.has(Hdr::AtomicAckEth) ? AtomicAckEthView<B>{at(Hdr::AtomicAckEth)}.value() : 0;
    out.imm = info.has(Hdr::ImmDt) ? ImmDtView<B>{at(Hdr::ImmDt)}.value() : 0;
    out.ieth_rkey = info.has(Hdr::Ieth) ? IethView<B>{at(Hdr::Ieth)}.value() : 0;
}

}  // namespace

const char* to_string(ParseError e) {
    const auto i = static_cast<size_t>(e);
    return i < std::size(kParseErrorNames) ? kParseErrorNames[i] : "unknown";
}

ParseError check_opcode_class(uint8_t opcode, QpClass cls) {
    const OpcodeInfo& info = opcode_info(opcode);
    if (!info.valid()) return ParseError::ReservedOpcode;
    return info.cls == cls ? ParseError::Ok : ParseError::WrongQpClass;
}

namespace {

// `f` holds the first `hdr_n` bytes of a frame of `n` bytes (all of it when
// the frame is flat). Every header must lie in those first bytes; the
// payload, pad and ICRC may lie beyond them, and are not read.
ParseError parse_headers(const uint8_t* f, size_t hdr_n, size_t n, RocePacket& out) {
    // Conservative: a chain too short for the headers is split too.
    const auto split = [&](size_t need) { return hdr_n < std::min(need, n); };
    size_t off = parse_eth(std::span(f, hdr_n), out.l2);
    if (off == 0) return n > hdr_n ? ParseError::SplitHeaders : ParseError::Truncated;

    if (out.l2.ethertype == ethertype::kIpv4) {
        if (n < off + kIpv4Len) return ParseError::Truncated;
        if (split(off + kIpv4Len + kUdpLen + kBthLen)) return ParseError::SplitHeaders;
        const uint8_t* ip = f + off;
        if (ip[0] != 0x45) return ParseError::BadIpHeader;  // version 4, no options (rxe assumes none)
        out.l3.v6 = false;
        out.l3.flow_label = 0;
        out.l3.dscp = ip[1] >> 2;
        out.l3.ecn = ip[1] & 3;
        out.l3.ip_id = load_be16(ip + 4);
        out.l3.frag = load_be16(ip + 6);
        out.l3.ttl = ip[8];
        out.l3.src = IpAddr::from_v4(load_be32(ip + 12));
        out.l3.dst = IpAddr::from_v4(load_be32(ip + 16));
        if (out.l3.frag & 0x3FFF) return ParseError::BadIpHeader;  // fragments are not RoCE
        if (ip_checksum(ip, kIpv4Len) != 0) return ParseError::BadIpHeader;
        if (ip[9] != kIpProtoUdp) return ParseError::NotUdp;
        const size_t total = load_be16(ip + 2);
        if (total < kIpv4Len + kUdpLen) return ParseError::BadLength;
        if (n < off + total) return ParseError::Truncated;
        out.l3_off = static_cast<uint16_t>(off);
        out.frame_len = static_cast<uint16_t>(off + total);
        off += kIpv4Len;
    } else if (out.l2.ethertype == ethertype::kIpv6) {
        if (n < off + kIpv6Len) return ParseError::Truncated;
        if (split(off + kIpv6Len + kUdpLen + kBthLen)) return ParseError::SplitHeaders;
        const uint8_t* ip = f + off;
        if ((ip[0] >> 4) != 6) return ParseError::BadIpHeader;
        const uint8_t tc = static_cast<uint8_t>((ip[0] << 4) | (ip[1] >> 4));
        out.l3.v6 = true;
        out.l3.ip_id = 0;
        out.l3.frag = L3{}.frag;
        out.l3.dscp = tc >> 2;
        out.l3.ecn = tc & 3;
        out.l3.flow_label = load_be24(ip + 1) & 0xFFFFF;
        out.l3.ttl = ip[7];
        std::memcpy(out.l3.src.b.data(), ip + 8, 16);
        std::memcpy(out.l3.dst.b.data(), ip + 24, 16);
        if (ip[6] != kIpProtoUdp) return ParseError::NotUdp;
        const size_t plen = load_be16(ip + 4);
        if (plen < kUdpLen) return ParseError::BadLength;
        if (n < off + kIpv6Len + plen) return ParseError::Truncated;
        out.l3_off = static_cast<uint16_t>(off);
        out.frame_len = static_cast<uint16_t>(off + kIpv6Len + plen);
        off += kIpv6Len;
    } else {
        return ParseError::NotIp;
    }

    const uint8_t* udp = f + off;
    out.udp_sport = load_be16(udp);
    out.udp_dport = load_be16(udp + 2);
    out.udp_csum = load_be16(udp + 6);
    if (out.udp_dport != kRoceUdpPort) return ParseError::NotRoce;
    if (load_be16(udp + 4) != out.frame_len - off) return ParseError::BadLength;
    off += kUdpLen;

    if (out.frame_len < off + kBthLen + kIcrcLen) return ParseError::Truncated;
    const BthView<const uint8_t> bth{f + off};
    out.bth_off = static_cast<uint16_t>(off);
    out.bth = {bth.opcode(), bth.se(), bth.mig(), bth.pad(), bth.tver(), bth.pkey(),
               bth.fecn(), bth.becn(), bth.dqpn(), bth.ackreq(), bth.psn()};
    if (out.bth.tver != 0) return ParseError::BadTver;

    const OpcodeInfo& info = opcode_info(out.bth.opcode);
    if (!info.valid()) return ParseError::ReservedOpcode;
    const size_t after_bth = out.frame_len - off;  // headers + payload + pad + ICRC
    if (after_bth < size_t{info.hdr_len} + kIcrcLen) return ParseError::Truncated;
    if (split(off + info.hdr_len)) return ParseError::SplitHeaders;
    read_ext_headers(bth.data(), info, out);

    const size_t body = after_bth - info.hdr_len - kIcrcLen;  // payload + pad
    if (out.bth.pad > body) return ParseError::BadPadCnt;
    out.payload = bth.data() + info.hdr_len;
    out.payload_len = static_cast<uint32_t>(body - out.bth.pad);
    if (!(info.flags & kOpPayload)) {
        if (body != 0) return ParseError::BadLength;
    } else {
        if (body % 4 != 0) return ParseError::BadPadCnt;
        if (out.bth.pad != 0 && !(info.flags & kOpLast))
            return ParseError::BadPadCnt;  // only the last packet of a message carries pad
        if ((info.flags & kOpFixedPayload) && out.payload_len != 8) return ParseError::BadLength;
    }
    return ParseError::Ok;
}

}  // namespace

ParseError parse_roce_split(std::span<const uint8_t> first, size_t frame_len, RocePacket& out) {
    const ParseError e = parse_headers(first.data(), first.size(), frame_len, out);
    out.payload = nullptr;
    return e;
}

ParseError parse_roce(std::span<const uint8_t> frame, RocePacket& out, ParseOptions opts) {
    const uint8_t* f = frame.data();
    const ParseError e = parse_headers(f, frame.size(), frame.size(), out);
    if (e != ParseError::Ok) return e;
    out.icrc = load_le32(f + out.frame_len - kIcrcLen);
    if (opts.verify_icrc &&
        compute_icrc(f + out.l3_off, out.frame_len - kIcrcLen - out.l3_off, out.l3.v6) != out.icrc)
        return ParseError::BadIcrc;
    return ParseError::Ok;
}

size_t roce_frame_len(const RocePacket& p) {
    const OpcodeInfo& info = p.info();
    const uint32_t pad = roce_pad(p.payload_len);
    return kEthLen + (p.l2.vlan ? kVlanLen : 0) + (p.l3.v6 ? kIpv6Len : kIpv4Len) + kUdpLen + info.hdr_len +
           p.payload_len + pad + kIcrcLen;
}

namespace {

// The headers of `p`, a frame of `len` bytes, from `f` on.
void write_roce_headers(const RocePacket& p, const OpcodeInfo& info, size_t len, uint8_t* f, EncodeLayout& lay) {
    // The EtherType follows from the IP version, whatever p.l2 holds.
    size_t off = write_eth(f, p.l2);
    store_be16(f + off - 2, p.l3.v6 ? ethertype::kIpv6 : ethertype::kIpv4);
    lay.l3_off = static_cast<uint16_t>(off);
    lay.v6 = p.l3.v6;
    lay.pad = static_cast<uint8_t>(roce_pad(p.payload_len));
    lay.payload_len = p.payload_len;
    lay.frame_len = len;
    lay.crc_off = 0;

    const size_t l3_len = len - off;
    const uint8_t tos = static_cast<uint8_t>(p.l3.dscp << 2 | (p.l3.ecn & 3));
    if (p.l3.v6) {
        uint8_t* ip = f + off;
        store_be32(ip, 6u << 28 | uint32_t{tos} << 20 | (p.l3.flow_label & 0xFFFFF));
        store_be16(ip + 4, static_cast<uint16_t>(l3_len - kIpv6Len));
        ip[6] = kIpProtoUdp;
        ip[7] = p.l3.ttl;
        std::memcpy(ip + 8, p.l3.src.b.data(), 16);
        std::memcpy(ip + 24, p.l3.dst.b.data(), 16);
        off += kIpv6Len;
    } else {
        uint8_t* ip = f + off;
        ip[0] = 0x45;
        ip[1] = tos;
        store_be16(ip + 2, static_cast<uint16_t>(l3_len));
        store_be16(ip + 4, p.l3.ip_id);
        store_be16(ip + 6, p.l3.frag);
        ip[8] = p.l3.ttl;
        ip[9] = kIpProtoUdp;
        const uint32_t src = p.l3.src.v4(), dst = p.l3.dst.v4();
        store_be32(ip + 12, src);
        store_be32(ip + 16, dst);
        // Summed from the field values: reading back the bytes just stored
        // one by one would stall on store forwarding.
        uint32_t sum = (0x45u << 8 | tos) + static_cast<uint32_t>(l3_len) + p.l3.ip_id + p.l3.frag +
                       (uint32_t{p.l3.ttl} << 8 | kIpProtoUdp) + (src >> 16) + (src & 0xFFFF) + (dst >> 16) +
                       (dst & 0xFFFF);
        while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
        store_be16(ip + 10, static_cast<uint16_t>(~sum));
        off += kIpv4Len;
    }

    uint8_t* udp = f + off;
    store_be16(udp, p.udp_sport);
    store_be16(udp + 2, p.udp_dport);
    store_be16(udp + 4, static_cast<uint16_t>(len - off));
    store_be16(udp + 6, p.udp_csum);
    off += kUdpLen;

    uint8_t* bth = f + off;
    const Bth& b = p.bth;
    BthView<uint8_t>{bth}.set(b.opcode, b.se, b.mig, lay.pad, b.tver, b.pkey, b.fecn, b.becn, b.dqpn, b.ackreq, b.psn);
    write_ext_headers(bth, info, p);
    lay.payload_off = static_cast<uint16_t>(off + info.hdr_len);
}

}  // namespace

bool encode_roce_headers(const RocePacket& p, std::span<uint8_t> out, EncodeLayout& lay) {
    const OpcodeInfo& info = p.info();
    if (!info.valid()) return false;
    const size_t len = roce_frame_len(p);
    if (len > out.size() || len > 0xFFFF) return false;
    write_roce_headers(p, info, len, out.data(), lay);
    return true;
}

bool encode_roce_head(const RocePacket& p, std::span<uint8_t> head, EncodeLayout& lay) {
    const OpcodeInfo& info = p.info();
    if (!info.valid()) return false;
    const size_t len = roce_frame_len(p);
    if (len - p.payload_len - roce_pad(p.payload_len) - kIcrcLen > head.size() || len > 0xFFFF) return false;
    write_roce_headers(p, info, len, head.data(), lay);
    return true;
}

void write_ext_headers(uint8_t* bth, const OpcodeInfo& info, const RocePacket& p) {
    using B = uint8_t;
    auto at = [&](Hdr h) { return bth + info.offset[static_cast<int>(h)]; };
    if (info.has(Hdr::Deth)) DethView<B>{at(Hdr::Deth)}.set(p.deth.qkey, p.deth.src_qp);
    if (info.has(Hdr::Feth)) FethView<B>{at(Hdr::Feth)}.set(p.feth);
    if (info.has(Hdr::Reth)) RethView<B>{at(Hdr::Reth)}.set(p.reth.va, p.reth.rkey, p.reth.dma_len);
    if (info.has(Hdr::AtomicEth))
        AtomicEthView<B>{at(Hdr::AtomicEth)}.set(p.atomic.va, p.atomic.rkey, p.atomic.swap_add, p.atomic.compare);
    if (info.has(Hdr::Aeth)) AethView<B>{at(Hdr::Aeth)}.set(p.aeth.syndrome, p.aeth.msn);
    if (info.has(Hdr::AtomicAckEth)) AtomicAckEthView<B>{at(Hdr::AtomicAckEth)}.set(p.atomic_ack);
    if (info.has(Hdr::ImmDt)) ImmDtView<B>{at(Hdr::ImmDt)}.set(p.imm);
    if (info.has(Hdr::Ieth)) IethView<B>{at(Hdr::Ieth)}.set(p.ieth_rkey);
    if (info.has(Hdr::CnpPad)) std::memset(at(Hdr::CnpPad), 0, kHdrLen[static_cast<int>(Hdr::CnpPad)]);
}

void finish_roce(std::span<uint8_t> frame, const EncodeLayout& lay) {
    uint8_t* f = frame.data();
    uint8_t* pad = f + lay.payload_off + lay.payload_len;
    for (uint8_t i = 0; i < lay.pad; ++i) pad[i] = 0;
    const size_t icrc_off = lay.frame_len - kIcrcLen;
    store_le32(f + icrc_off, lay.crc_off != 0 ? ~crc32_update(lay.crc_state, f + lay.crc_off, icrc_off - lay.crc_off)
                                              : compute_icrc(f + lay.l3_off, icrc_off - lay.l3_off, lay.v6));
}

size_t encode_roce(const RocePacket& p, std::span<uint8_t> out) {
    EncodeLayout lay;
    if (!encode_roce_headers(p, out, lay)) return 0;
    if (p.payload_len != 0) std::memcpy(out.data() + lay.payload_off, p.payload, p.payload_len);
    finish_roce(out, lay);
    return lay.frame_len;
}

bool refresh_icrc(std::span<uint8_t> frame) {
    RocePacket p;
    const ParseError e = parse_roce(frame, p, {.verify_icrc = false});
    if (e != ParseError::Ok) return false;
    const size_t icrc_off = p.frame_len - kIcrcLen;
    store_le32(frame.data() + icrc_off, compute_icrc(frame.data() + p.l3_off, icrc_off - p.l3_off, p.l3.v6));
    return true;
}

}  // namespace rocemu::wire
