// Compile-time tables for updating a CRC state by linearity: what one byte
// at a fixed place in a fixed-length message adds to the raw CRC-32 state
// (reflected polynomial 0xEDB88320, the state crc32_update keeps).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace rocemu::wire::crc_tables {

using Table = std::array<uint32_t, 256>;

constexpr uint32_t shift_bits(uint32_t s, size_t bits) {
    for (size_t i = 0; i < bits; ++i) s = (s >> 1) ^ (0xEDB88320u & (0u - (s & 1u)));
    return s;
}

// Entry b: the raw state, from zero, of a message of `len` bytes that is zero
// but for byte b at `off`. Linear in b, so built from its eight bits.
constexpr Table byte_at(size_t off, size_t len) {
    uint32_t basis[8]{};
    for (int i = 0; i < 8; ++i) basis[i] = shift_bits(shift_bits(1u << i, 8), 8 * (len - 1 - off));
    Table t{};
    for (uint32_t b = 0; b < 256; ++b)
        for (int i = 0; i < 8; ++i)
            if (b >> i & 1) t[b] ^= basis[i];
    return t;
}

template <size_t N>
constexpr std::array<Table, N> for_offsets(const std::array<uint8_t, N>& offs, size_t len) {
    std::array<Table, N> r{};
    for (size_t k = 0; k < N; ++k) r[k] = byte_at(offs[k], len);
    return r;
}

// Whether two messages of Len bytes agree wherever `fixed` is 0xFF, compared
// as they are in 8-byte words (the last one may overlap): masking a copy
// first would stall each wide load on the byte stores before it.
template <size_t Len>
bool agree(const uint8_t* now, const uint8_t* last, const std::array<uint8_t, Len>& fixed) {
    static_assert(Len >= 8);
    uint64_t other = 0;
#pragma GCC unroll 8
    for (size_t i = 0; i < Len; i += 8) {
        const size_t at = i + 8 <= Len ? i : Len - 8;
        uint64_t a, b, m;
        std::memcpy(&a, now + at, 8);
        std::memcpy(&b, last + at, 8);
        std::memcpy(&m, fixed.data() + at, 8);
        other |= (a ^ b) & m;
    }
    return other == 0;
}

// The state of `now` from `state`, that of `last`, when the two differ only
// at `offs` (whose tables `t` are).
template <size_t N>
uint32_t update(uint32_t state, const uint8_t* now, const uint8_t* last, const std::array<uint8_t, N>& offs,
                const std::array<Table, N>& t) {
#pragma GCC unroll 16
    for (size_t k = 0; k < N; ++k) state ^= t[k][now[offs[k]] ^ last[offs[k]]];
    return state;
}

}  // namespace rocemu::wire::crc_tables
