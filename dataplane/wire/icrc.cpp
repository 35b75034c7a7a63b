#include "dataplane/wire/icrc.hpp"

#include <isa-l/crc.h>

#include <cstring>

#include "dataplane/wire/opcode.hpp"

namespace rocemu::wire {

namespace {
constexpr size_t kIpv4Len = 20, kIpv6Len = 40, kUdpLen = 8;
// ISA-L's crc32_gzip_refl inverts its input and output, so starting it from
// ~0xDEBB20E3 continues rxe's raw CRC state, and its output is already the
// inverted value rxe stores.
constexpr uint32_t kSeed = ~0xDEBB20E3u;
}  // namespace

uint32_t crc32(uint32_t crc, const uint8_t* data, size_t len) {
    return crc32_gzip_refl(crc, data, len);
}

uint32_t compute_icrc(const uint8_t* l3, size_t len, bool v6) {
    const size_t ip_len = v6 ? kIpv6Len : kIpv4Len;
    const size_t masked_len = ip_len + kUdpLen + kBthLen;
    uint8_t hdr[kIpv6Len + kUdpLen + kBthLen];
    std::memcpy(hdr, l3, masked_len);
    if (v6) {
        hdr[0] |= 0x0F;  // traffic class, low nibble of byte 0 ...
        hdr[1] = 0xFF;   // ... rest of traffic class and flow label
        hdr[2] = 0xFF;
        hdr[3] = 0xFF;
        hdr[7] = 0xFF;  // hop limit
    } else {
        hdr[1] = 0xFF;  // TOS
        hdr[8] = 0xFF;  // TTL
        hdr[10] = 0xFF;  // header checksum
        hdr[11] = 0xFF;
    }
    hdr[ip_len + 6] = 0xFF;  // UDP checksum
    hdr[ip_len + 7] = 0xFF;
    hdr[ip_len + kUdpLen + 4] = 0xFF;  // BTH FECN, BECN, reserved
    uint32_t crc = crc32_gzip_refl(kSeed, hdr, masked_len);
    return crc32_gzip_refl(crc, l3 + masked_len, len - masked_len);
}

}  // namespace rocemu::wire
