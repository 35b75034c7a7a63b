#include "dataplane/wire/icrc.hpp"

#include <array>
#include <cstring>

#include "dataplane/wire/crc32.hpp"
#include "dataplane/wire/crc_tables.hpp"
#include "dataplane/wire/opcode.hpp"

namespace rocemu::wire {

namespace {
constexpr size_t kIpv4Len = 20, kIpv6Len = 40, kUdpLen = 8;
// ISA-L's crc32_gzip_refl inverts its input and output, so starting it from
// the inverted seed continues rxe's raw CRC state, and its output is already
// the inverted value rxe stores.
constexpr uint32_t kSeed = ~kIcrcSeed;
// One ISA-L call costs about as much for 48 bytes as for 256 (its setup
// dominates), so a packet up to this size is copied whole and takes one call.
constexpr size_t kOneCall = 256;

// Offsets (from the IP header) of the bytes the ICRC sees as all ones.
struct VariantBytes {
    uint8_t off[8];
    uint8_t n;
};
constexpr VariantBytes variant_bytes(const std::array<uint8_t, 7>& off) {
    VariantBytes v{};
    for (size_t i = 0; i < off.size(); ++i) v.off[i] = off[i];
    v.n = off.size();
    return v;
}
constexpr VariantBytes kV4 = variant_bytes(kIcrcMaskedIpv4);
static_assert(kIcrcMaskedIpv4[4] == kIpv4Len + 6 && kIcrcMaskedIpv4[6] == kIpv4Len + kUdpLen + 4);
constexpr VariantBytes kV6{{1, 2, 3, 7, kIpv6Len + 6, kIpv6Len + 7, kIpv6Len + kUdpLen + 4}, 7};

// IPv6 byte 0 keeps its version nibble; the traffic class's low nibble is masked.
inline void mask_variant(uint8_t* l3, bool v6) {
    const VariantBytes& vb = v6 ? kV6 : kV4;
    for (uint8_t i = 0; i < vb.n; ++i) l3[vb.off[i]] = 0xFF;
    if (v6) l3[0] |= 0x0F;
}

constexpr size_t masked_len(bool v6) { return (v6 ? kIpv6Len : kIpv4Len) + kUdpLen + kBthLen; }
}  // namespace

uint32_t icrc_begin(const uint8_t* l3, size_t len, bool v6) {
    alignas(64) uint8_t buf[kOneCall];
    std::memcpy(buf, l3, len);
    mask_variant(buf, v6);
    return crc32_update(kIcrcSeed, buf, len);
}

namespace {

// Offsets from the IPv4 header of the ACK bytes that may change from one
// ACK to the next: IP ID, UDP source port, BTH destination QP and PSN, AETH.
constexpr std::array<uint8_t, 14> kAckVarying = {4, 5, 20, 21, 33, 34, 35, 37, 38, 39, 40, 41, 42, 43};
constexpr size_t kAckVaryingN = kAckVarying.size();

// For each varying offset, what each value of that byte adds to the state
// of a 44-byte message.
constexpr std::array<crc_tables::Table, kAckVaryingN> kAckTables =
    crc_tables::for_offsets(kAckVarying, AckIcrc::kLen);

// 0xFF where two ACKs must agree for the tables to apply: neither a varying
// byte nor one the ICRC masks.
constexpr std::array<uint8_t, AckIcrc::kLen> ack_fixed_mask() {
    std::array<uint8_t, AckIcrc::kLen> m{};
    for (auto& b : m) b = 0xFF;
    for (uint8_t off : kAckVarying) m[off] = 0;
    for (uint8_t i = 0; i < kV4.n; ++i) m[kV4.off[i]] = 0;
    return m;
}
constexpr std::array<uint8_t, AckIcrc::kLen> kAckFixed = ack_fixed_mask();

}  // namespace

uint32_t AckIcrc::operator()(const uint8_t* l3) { return ~follow_.state(l3, kAckFixed, kAckVarying, kAckTables); }

uint32_t compute_icrc(const uint8_t* l3, size_t len, bool v6) {
    const size_t head = len <= kOneCall ? len : masked_len(v6);
    const uint32_t state = icrc_begin(l3, head, v6);
    return ~(head == len ? state : crc32_update(state, l3 + head, len - head));
}

uint32_t compute_icrc_in_place(uint8_t* l3, size_t len, bool v6) {
    // Whole words around the variant bytes are saved and put back, so the
    // masking costs a handful of moves.
    const size_t udp = v6 ? kIpv6Len : kIpv4Len;
    uint8_t* bth = l3 + udp + kUdpLen;
    uint64_t ip_lo;   // bytes 0..7: v4 TOS, v6 traffic class, flow label, hop limit
    uint32_t ip_hi;   // bytes 8..11: v4 TTL and checksum
    uint16_t csum;    // UDP checksum
    std::memcpy(&ip_lo, l3, 8);
    std::memcpy(&ip_hi, l3 + 8, 4);
    std::memcpy(&csum, l3 + udp + 6, 2);
    const uint8_t bth4 = bth[4];
    mask_variant(l3, v6);
    const uint32_t crc = isal_crc32_gzip_refl(kSeed, l3, len);
    std::memcpy(l3, &ip_lo, 8);
    std::memcpy(l3 + 8, &ip_hi, 4);
    std::memcpy(l3 + udp + 6, &csum, 2);
    bth[4] = bth4;
    return crc;
}

}  // namespace rocemu::wire
