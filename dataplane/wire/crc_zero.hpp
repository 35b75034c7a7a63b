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
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

// Entry v: v * x^8 mod P for a state whose low byte is v and the rest zero,
// so one zero byte takes a state s to (s >> 8) ^ kZeroByteStep[s & 0xFF].
constexpr std::array<uint32_t, 256> zero_byte_step() {
    std::array<uint32_t, 256> t{};
    for (uint32_t v = 0; v < 256; ++v) t[v] = crc_tables::shift_bits(v, 8);
    return t;
}
inline constexpr std::array<uint32_t, 256> kZeroByteStep = zero_byte_step();

#if defined(__x86_64__)
// mul_mod_p with one carry-less multiplication (a quarter of the loop's
// time): of two reflected operands the 63-bit product holds x^k at bit
// 62 - k, so shifted left by one it is a 64-bit reflected value. Its high
// half is x^0..x^31 as a state; its low half, as a state L, stands for
// L * x^32, which four zero-byte steps reduce modulo P.
__attribute__((target("pclmul"))) inline uint32_t mul_mod_p_clmul(uint32_t a, uint32_t b) {
    const __m128i p = _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(a)),
                                           _mm_cvtsi32_si128(static_cast<int>(b)), 0);
    const uint64_t product = static_cast<uint64_t>(_mm_cvtsi128_si64(p)) << 1;
    uint32_t low = static_cast<uint32_t>(product);
    for (int i = 0; i < 4; ++i) low = (low >> 8) ^ kZeroByteStep[low & 0xFF];
    return static_cast<uint32_t>(product >> 32) ^ low;
}

inline bool has_clmul() {
    static const bool has = (__builtin_cpu_init(), __builtin_cpu_supports("pclmul") != 0);
    return has;
}
#endif

// mul_mod_p, with PCLMULQDQ where the CPU has it.
inline uint32_t mul_mod_p_fast(uint32_t a, uint32_t b) {
#if defined(__x86_64__)
    if (has_clmul()) return mul_mod_p_clmul(a, b);
#endif
    return mul_mod_p(a, b);
}

}  // namespace crc_zero_detail

// The raw CRC state after `n` more zero bytes: what crc32_update(state, p, n)
// returns for n zero bytes at p. One multiplication per set bit of n.
constexpr uint32_t crc32_zeros(uint32_t state, uint64_t n) {
    for (std::size_t k = 0; n != 0; ++k, n >>= 1)
        if (n & 1) {
            const uint32_t f = crc_zero_detail::kZeroBytePowers[k];
            state = std::is_constant_evaluated() ? crc_zero_detail::mul_mod_p(f, state)
                                                 : crc_zero_detail::mul_mod_p_fast(f, state);
        }
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
