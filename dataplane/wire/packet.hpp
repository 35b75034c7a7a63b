// Parsed RoCEv2 frames and the encoder that turns them back into bytes.
//
// parse_roce() reads Ethernet [802.1Q] IPv4|IPv6 UDP/4791 BTH [ext headers]
// payload pad ICRC, caching every field once. encode_roce() writes the same
// fields back; for any frame rxe sends, encode(parse(frame)) == frame.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "common/units.hpp"
#include "dataplane/wire/opcode.hpp"

namespace rocemu::wire {

struct MacAddr {
    std::array<uint8_t, 6> b{};
    constexpr bool operator==(const MacAddr&) const = default;
    bool is_multicast() const { return b[0] & 1; }
    static constexpr MacAddr broadcast() { return MacAddr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}; }
};

// An IP address held as 16 bytes; IPv4 addresses are IPv4-mapped IPv6
// (::ffff:a.b.c.d), which is also exactly the RoCEv2 GID of that address.
struct IpAddr {
    std::array<uint8_t, 16> b{};

    // Two 8-byte words: the defaulted comparison calls memcmp, which the
    // receive path paid three times per frame.
    constexpr bool operator==(const IpAddr& o) const {
        if (std::is_constant_evaluated()) return b == o.b;
        uint64_t x[2], y[2];
        std::memcpy(x, b.data(), 16);
        std::memcpy(y, o.b.data(), 16);
        return ((x[0] ^ y[0]) | (x[1] ^ y[1])) == 0;
    }
    bool is_v4() const {
        for (int i = 0; i < 10; ++i)
            if (b[i] != 0) return false;
        return b[10] == 0xff && b[11] == 0xff;
    }
    uint32_t v4() const { return uint32_t{b[12]} << 24 | uint32_t{b[13]} << 16 | uint32_t{b[14]} << 8 | b[15]; }
    static IpAddr from_v4(uint32_t a) {
        IpAddr r;
        r.b[10] = r.b[11] = 0xff;
        r.b[12] = static_cast<uint8_t>(a >> 24);
        r.b[13] = static_cast<uint8_t>(a >> 16);
        r.b[14] = static_cast<uint8_t>(a >> 8);
        r.b[15] = static_cast<uint8_t>(a);
        return r;
    }
};

namespace ethertype {
inline constexpr uint16_t kIpv4 = 0x0800, kArp = 0x0806, kVlan = 0x8100, kIpv6 = 0x86DD, kMacControl = 0x8808;
}
inline constexpr uint8_t kIpProtoUdp = 17;

// IP ECN codepoints (low two bits of TOS / traffic class).
namespace ecn {
inline constexpr uint8_t kNotEct = 0, kEct1 = 1, kEct0 = 2, kCe = 3;
}

struct L2 {
    MacAddr dst, src;
    bool vlan = false;
    uint8_t pcp = 0;
    bool dei = false;
    uint16_t vid = 0;
    uint16_t ethertype = 0;  // the inner one when tagged
};

struct L3 {
    bool v6 = false;
    IpAddr src, dst;
    uint8_t dscp = 0;
    uint8_t ecn = 0;
    uint8_t ttl = 64;  // hop limit for IPv6
    uint16_t ip_id = 0;
    uint16_t frag = 0x4000;  // IPv4 flags and fragment offset: DF, as rxe sends
    uint32_t flow_label = 0;
};

struct Bth {
    uint8_t opcode = 0;
    bool se = false;
    bool mig = false;
    uint8_t pad = 0;  // PadCnt
    uint8_t tver = 0;
    uint16_t pkey = kDefaultPkey;
    bool fecn = false;
    bool becn = false;
    Qpn dqpn;
    bool ackreq = false;
    Psn psn;
};

struct Reth {
    uint64_t va = 0;
    uint32_t rkey = 0;
    uint32_t dma_len = 0;
};

struct Aeth {
    uint8_t syndrome = 0;
    uint32_t msn = 0;
};

struct AtomicEth {
    uint64_t va = 0;
    uint32_t rkey = 0;
    uint64_t swap_add = 0;
    uint64_t compare = 0;
};

struct Deth {
    uint32_t qkey = 0;
    Qpn src_qp;
};

// A RoCEv2 packet: every header field, plus where the payload lies in the
// frame it was parsed from (or comes from, when encoding).
struct RocePacket {
    L2 l2;
    L3 l3;
    uint16_t udp_sport = 0xC000;
    uint16_t udp_dport = kRoceUdpPort;
    uint16_t udp_csum = 0;
    Bth bth;
    Reth reth;
    Aeth aeth;
    AtomicEth atomic;
    uint64_t atomic_ack = 0;  // AtomicAckETH: original remote data
    Deth deth;
    uint32_t imm = 0;        // ImmDt, as the host value of its big-endian bytes
    uint32_t ieth_rkey = 0;  // IETH
    uint32_t feth = 0;       // FETH (FLUSH)

    const uint8_t* payload = nullptr;
    uint32_t payload_len = 0;  // without pad

    // Filled by the parser.
    uint32_t icrc = 0;       // as carried on the wire
    uint16_t frame_len = 0;  // up to the end of the ICRC (Ethernet padding excluded)
    uint16_t l3_off = 0;
    uint16_t bth_off = 0;

    const OpcodeInfo& info() const { return opcode_info(bth.opcode); }
};

// Typed parse errors. Each maps to a drop reason with a counter in the runtime.
enum class ParseError : uint8_t {
    Ok = 0,
    Truncated,        // frame shorter than the headers it announces
    NotIp,            // EtherType is neither IPv4 nor IPv6
    BadIpHeader,      // version, IHL, fragment, or checksum wrong
    NotUdp,           // IP protocol is not UDP
    NotRoce,          // UDP destination port is not 4791
    BadLength,        // IP and UDP lengths disagree, or payload length wrong for the opcode
    ReservedOpcode,   // opcode not defined (or RD, which nobody speaks)
    WrongQpClass,     // opcode not valid for the QP's transport class
    BadPadCnt,        // pad on a non-final packet, or payload+pad not 4-byte aligned
    BadTver,          // BTH transport version is not 0
    BadIcrc,          // invariant CRC mismatch
    SplitHeaders,     // a chained frame whose first segment does not hold every header
    kCount,
};

const char* to_string(ParseError e);

struct ParseOptions {
    bool verify_icrc = true;
};

// Parses one Ethernet frame carrying RoCEv2. On success every field of `out`
// is written (headers the opcode lacks read as zero), so one packet can be
// reused frame after frame. On error, fields parsed so far stay in `out`;
// nothing beyond `frame` is ever read.
ParseError parse_roce(std::span<const uint8_t> frame, RocePacket& out, ParseOptions opts = {});

// The same for a frame of `frame_len` bytes received in several segments
// (an mbuf chain), `first` being the first: every header must lie in it
// (else SplitHeaders). Fills every header field, frame_len and payload_len;
// `payload` is null and `icrc` is not read: the payload starts at
// bth_off + info().hdr_len of the chain, and the caller reads the ICRC from
// the chain's bytes at frame_len - 4.
ParseError parse_roce_split(std::span<const uint8_t> first, size_t frame_len, RocePacket& out);

// Checks that an opcode is one a QP of class `cls` may receive.
ParseError check_opcode_class(uint8_t opcode, QpClass cls);

// Pad bytes after a payload of `payload_len` (BTH PadCnt): to a multiple of 4.
constexpr uint32_t roce_pad(uint32_t payload_len) { return (4 - (payload_len & 3)) & 3; }

// Frame length encode_roce() will produce for this packet.
size_t roce_frame_len(const RocePacket& p);

// Writes the frame (headers, payload copied from p.payload, pad, ICRC) into
// `out`. Computes IP/UDP lengths, the IPv4 checksum and the ICRC; PadCnt is
// derived from payload_len. Returns the frame length, or 0 if `out` is too
// small or the opcode is not valid.
size_t encode_roce(const RocePacket& p, std::span<uint8_t> out);

// Where encode_roce_headers() put things, for finish_roce().
struct EncodeLayout {
    uint16_t l3_off = 0;
    uint16_t payload_off = 0;
    uint32_t payload_len = 0;
    uint8_t pad = 0;
    bool v6 = false;
    size_t frame_len = 0;
    // When crc_off != 0: the raw ICRC state over [l3_off, crc_off) is
    // already known (HeaderTemplate), so the ICRC continues from there.
    uint16_t crc_off = 0;
    uint32_t crc_state = 0;
};

// Writes the headers only and returns the layout; the caller then places
// payload_len bytes at payload_off itself (the fast path's one copy) and
// calls finish_roce(), which writes the pad and the ICRC. Returns false if
// `out` is too small or the opcode is not valid.
bool encode_roce_headers(const RocePacket& p, std::span<uint8_t> out, EncodeLayout& lay);
// The same headers into a buffer that holds them only (lay.payload_off
// bytes, what the layout says), for a frame whose payload, pad and ICRC are
// kept elsewhere. False if `head` is too small or the opcode is not valid.
bool encode_roce_head(const RocePacket& p, std::span<uint8_t> head, EncodeLayout& lay);
void finish_roce(std::span<uint8_t> frame, const EncodeLayout& lay);

// The extended headers `info` lists, from `p`, behind the BTH at `bth`.
void write_ext_headers(uint8_t* bth, const OpcodeInfo& info, const RocePacket& p);

// Recomputes and stores the ICRC of a frame whose headers parse (whatever its
// current ICRC). For tools and fuzzers that edit frames. False if it does not
// parse as RoCEv2.
bool refresh_icrc(std::span<uint8_t> frame);

}  // namespace rocemu::wire
