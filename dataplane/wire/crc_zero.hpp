// CRC-32 over zero bytes without reading them. The CRC is linear: n zero
// bytes after a raw state s (crc32.hpp) leave s * x^(8n) mod P, so the
// state after a header and an all-zero payload takes the header's CRC and a
// few multiplications modulo P, whatever the payload's length. The virtual-
// time fabric's generator frames carry such payloads; reading 4 KiB per
// frame to CRC them (at the sender and again at the receiver) was most of
// its cache misses.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "dataplane/wire/icrc.hpp"

namespace rocemu::wire {

namespace crc_zero_detail {

// The reflected Ethernet polynomial: bit 31 holds x^0, bit 0 holds x^31.
inline constexpr uint32_t kPoly = 0xEDB88320u;

// a * b mod P, both reflected. Each step moves b one power of x up.
constexpr uint32_t mul_mod_p(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (int i = 31; i >= 0; --i) {
        product ^= b & (0u - ((a >> i) & 1u));
        b = (b >> 1) ^ (kPoly & (0u - (b & 1u)));
    }
    return product;
}

// x^(8 * 2^k) mod P: the factor 2^k zero bytes apply.
constexpr std::array<uint32_t, 64> zero_byte_powers() {
    std::array<uint32_t, 64> t{};
    t[0] = 0x80000000u >> 8;  // x^8
    for (std::size_t k = 1; k < t.size(); ++k) t[k] = mul_mod_p(t[k - 1], t[k - 1]);
    return t;
}
inline constexpr std::array<uint32_t, 64> kZeroBytePowers = zero_byte_powers();

}  // namespace crc_zero_detail

// The raw CRC state after `n` more zero bytes: what crc32_update(state, p, n)
// returns for n zero bytes at p. One multiplication per set bit of n.
constexpr uint32_t crc32_zeros(uint32_t state, uint64_t n) {
    for (std::size_t k = 0; n != 0; ++k, n >>= 1)
        if (n & 1) state = crc_zero_detail::mul_mod_p(crc_zero_detail::kZeroBytePowers[k], state);
    return state;
}

// The ICRC of a RoCEv2 packet whose `zeros` bytes behind its headers
// (payload and pad, up to the ICRC) are all zero: `l3` points at the IP
// header, `hdr_len` counts from there to the payload (IP+UDP+BTH at least,
// at most 256). Equal to compute_icrc(l3, hdr_len + zeros, v6) over such a
// packet, with only its headers read.
inline uint32_t icrc_zero_payload(const uint8_t* l3, std::size_t hdr_len, std::size_t zeros, bool v6) {
    return ~crc32_zeros(icrc_begin(l3, hdr_len, v6), zeros);
}

}  // namespace rocemu::wire
