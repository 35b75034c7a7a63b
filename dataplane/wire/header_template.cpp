#include "dataplane/wire/header_template.hpp"

#include <array>
#include <cstring>

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/crc32.hpp"
#include "dataplane/wire/crc_tables.hpp"
#include "dataplane/wire/headers.hpp"
#include "dataplane/wire/icrc.hpp"

namespace rocemu::wire {

namespace {

constexpr size_t kIpv4Len = 20, kIpv6Len = 40, kUdpLen = 8;
constexpr size_t kMaxBthSpan = kIpv6Len + kUdpLen + kBthLen;

// The bytes (offsets from the IP header) that change from frame to frame
// and that the ICRC covers: IP length (and IPv4 ID), UDP source port and
// length, BTH opcode, BTH byte 1 (SE, PadCnt), AckReq and PSN.
template <size_t N>
struct Changing {
    size_t span;  // IP + UDP + BTH
    std::array<uint8_t, N> off;
};
constexpr Changing<14> kV4{kIpv4Len + kUdpLen + kBthLen, {2, 3, 4, 5, 20, 21, 24, 25, 28, 29, 36, 37, 38, 39}};
constexpr Changing<12> kV6{kIpv6Len + kUdpLen + kBthLen, {4, 5, 40, 41, 44, 45, 48, 49, 56, 57, 58, 59}};

// For each changing offset, what each value of that byte adds to the state.
template <size_t N>
using Tables = std::array<crc_tables::Table, N>;
constexpr Tables<14> kV4Tables = crc_tables::for_offsets(kV4.off, kV4.span);
constexpr Tables<12> kV6Tables = crc_tables::for_offsets(kV6.off, kV6.span);

// XORs in the table entry of each changing byte, given in the order of the
// offsets, from the values the frame gets (not read back from the frame,
// which would wait on the stores that just wrote them).
template <size_t N, typename... B>
uint32_t fold_changes(uint32_t state, const Tables<N>& t, B... bytes) {
    static_assert(sizeof...(B) == N);
    size_t k = 0;
    ((state ^= t[k++][static_cast<uint8_t>(bytes)]), ...);
    return state;
}

// 0xFF where two IPv4 frames must agree for the tables to apply: neither a
// changing byte nor one the ICRC masks.
constexpr std::array<uint8_t, RxIcrc::kLen> rx_fixed_mask() {
    std::array<uint8_t, RxIcrc::kLen> m{};
    for (auto& b : m) b = 0xFF;
    for (uint8_t off : kV4.off) m[off] = 0;
    for (uint8_t off : kIcrcMaskedIpv4) m[off] = 0;
    return m;
}
constexpr std::array<uint8_t, RxIcrc::kLen> kRxFixed = rx_fixed_mask();
static_assert(RxIcrc::kLen == kV4.span);

}  // namespace

uint32_t RxIcrc::state(const uint8_t* l3) { return follow_.state(l3, kRxFixed, kV4.off, kV4Tables); }

uint32_t RxIcrc::operator()(const uint8_t* l3, size_t len) {
    const uint32_t s = state(l3);
    return ~(len == kLen ? s : crc32_update(s, l3 + kLen, len - kLen));
}

void HeaderTemplate::build(const RocePacket& p) {
    // The template is the encoder's own output for a packet that carries no
    // payload and no extended header, so its fixed bytes are the encoder's.
    RocePacket t = p;
    t.bth.opcode = op::kRc + op::SEND_ONLY;
    t.payload_len = 0;
    EncodeLayout lay;
    alignas(64) uint8_t frame[kMaxLen + kIcrcLen];
    encode_roce_headers(t, frame, lay);
    std::memcpy(hdr_, frame, lay.payload_off);
    // write() copies all kMaxLen bytes: those past the headers stay zero, so
    // that a frame whose payload the engine leaves unwritten (TxFrame::
    // defer_zeros) gets no stale bytes of an earlier, longer template.
    std::fill(hdr_ + lay.payload_off, hdr_ + kMaxLen, uint8_t{0});
    len_ = static_cast<uint8_t>(lay.payload_off);
    l3_off_ = static_cast<uint8_t>(lay.l3_off);
    v6_ = lay.v6;
    uint8_t* l3 = hdr_ + l3_off_;
    const size_t bth = (v6_ ? kIpv6Len : kIpv4Len) + kUdpLen;
    bth1_ = l3[bth + 1] & 0x4F;

    if (!v6_) {
        uint32_t sum = 0;
        for (size_t i = 0; i < kIpv4Len; i += 2)
            if (i != 2 && i != 4 && i != 10) sum += load_be16(l3 + i);
        ip_sum_ = sum;
    }

    uint8_t masked[kMaxBthSpan];
    const size_t span = v6_ ? kV6.span : kV4.span;
    std::memcpy(masked, l3, span);
    if (v6_) {
        for (uint8_t off : kV6.off) masked[off] = 0;
    } else {
        for (uint8_t off : kV4.off) masked[off] = 0;
    }
    state_ = icrc_begin(masked, span, v6_);
    valid_ = true;
}

bool HeaderTemplate::write(const RocePacket& p, std::span<uint8_t> out, EncodeLayout& lay) const {
    const OpcodeInfo& info = p.info();
    if (!info.valid()) return false;
    const uint8_t pad = static_cast<uint8_t>(roce_pad(p.payload_len));
    const size_t len = size_t{len_} - kBthLen + info.hdr_len + p.payload_len + pad + kIcrcLen;
    if (len > out.size() || len > 0xFFFF) return false;
    uint8_t* f = out.data();
    // A whole-template copy is a few vector moves; the frame's own bytes
    // behind the BTH are written next anyway.
    if (out.size() >= kMaxLen) std::memcpy(f, hdr_, kMaxLen);
    else std::memcpy(f, hdr_, len_);

    uint8_t* l3 = f + l3_off_;
    const uint16_t l3_len = static_cast<uint16_t>(len - l3_off_);
    uint8_t* udp;
    if (v6_) {
        store_be16(l3 + 4, static_cast<uint16_t>(l3_len - kIpv6Len));
        udp = l3 + kIpv6Len;
    } else {
        store_be16(l3 + 2, l3_len);
        store_be16(l3 + 4, p.l3.ip_id);
        uint32_t sum = ip_sum_ + l3_len + p.l3.ip_id;
        sum = (sum & 0xFFFF) + (sum >> 16);
        sum = (sum & 0xFFFF) + (sum >> 16);
        store_be16(l3 + 10, static_cast<uint16_t>(~sum));
        udp = l3 + kIpv4Len;
    }
    const uint16_t udp_len = static_cast<uint16_t>(l3_len - (udp - l3));
    store_be16(udp, p.udp_sport);
    store_be16(udp + 4, udp_len);

    uint8_t* bth = udp + kUdpLen;
    const Bth& b = p.bth;
    const uint8_t b1 = static_cast<uint8_t>(bth1_ | (b.se ? 0x80 : 0) | pad << 4);
    const uint32_t apsn = (b.ackreq ? 0x80000000u : 0) | b.psn.value();
    // One store for both bytes: GCC otherwise merges the two byte stores
    // through a stack slot and reloads it as a word, which stalls on store
    // forwarding (half of this function's time in perf).
    store_be16(bth, static_cast<uint16_t>(b.opcode << 8 | b1));
    bth[4] = static_cast<uint8_t>((b.fecn ? 0x80 : 0) | (b.becn ? 0x40 : 0));
    store_be32(bth + 8, apsn);
    write_ext_headers(bth, info, p);

    lay.l3_off = l3_off_;
    lay.payload_off = static_cast<uint16_t>(len_ - kBthLen + info.hdr_len);
    lay.payload_len = p.payload_len;
    lay.pad = pad;
    lay.v6 = v6_;
    lay.frame_len = len;
    lay.crc_off = len_;
    if (v6_) {
        const uint16_t plen = static_cast<uint16_t>(l3_len - kIpv6Len);
        lay.crc_state = fold_changes(state_, kV6Tables, plen >> 8, plen, p.udp_sport >> 8, p.udp_sport, udp_len >> 8,
                                     udp_len, b.opcode, b1, apsn >> 24, apsn >> 16, apsn >> 8, apsn);
    } else {
        const uint16_t id = p.l3.ip_id;
        lay.crc_state = fold_changes(state_, kV4Tables, l3_len >> 8, l3_len, id >> 8, id, p.udp_sport >> 8,
                                     p.udp_sport, udp_len >> 8, udp_len, b.opcode, b1, apsn >> 24, apsn >> 16,
                                     apsn >> 8, apsn);
    }
    return true;
}

}  // namespace rocemu::wire
