#include "dataplane/wire/crc32.hpp"

#include <isa-l/crc.h>

#include <algorithm>
#include <cstring>

#include "dataplane/wire/crc_tables.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rocemu::wire {

namespace {
// The state after one byte: entry b is what byte b adds to a zero state.
constexpr crc_tables::Table kByte = crc_tables::byte_at(0, 1);
// Up to this many bytes (an ACK's AETH, a pad) a table step per byte costs
// less than ISA-L's call and setup.
constexpr size_t kByTable = 8;
}  // namespace

#if defined(__x86_64__)
namespace {
// VZEROUPPER, where the CPU has AVX (where it has not, ISA-L used none).
__attribute__((target("avx"))) void clear_upper_halves() { _mm256_zeroupper(); }
const bool kAvx = __builtin_cpu_supports("avx");
}  // namespace
#endif

uint32_t isal_crc32_gzip_refl(uint32_t seed, const uint8_t* p, size_t n) {
    const uint32_t crc = crc32_gzip_refl(seed, p, n);
#if defined(__x86_64__)
    if (kAvx) clear_upper_halves();
#endif
    return crc;
}

uint32_t crc32_update(uint32_t state, const uint8_t* p, size_t n) {
    if (n <= kByTable) {
        for (size_t i = 0; i < n; ++i) state = (state >> 8) ^ kByte[(state ^ p[i]) & 0xFF];
        return state;
    }
    // ISA-L's crc32_gzip_refl inverts on entry and exit.
    return ~isal_crc32_gzip_refl(~state, p, n);
}

namespace {

#if defined(__x86_64__)

#define ROCEMU_CLMUL512 __attribute__((target("avx512f,pclmul,vpclmulqdq")))

// Folding constants for the reflected polynomial (Intel, "Fast CRC
// Computation for Generic Polynomials Using PCLMULQDQ"): moving a 128-bit
// lane forward by D bits multiplies its low half by x^(D+32) mod P and its
// high half by x^(D-32) mod P, both bit-reflected and shifted left by one.
struct FoldK {
    uint64_t lo, hi;
};
constexpr FoldK kBy256B{0x11542778a, 0x1322d1430};  // D = 2048
constexpr FoldK kBy64B{0x154442bd4, 0x1c6e41596};   // D = 512
constexpr FoldK kBy48B{0x03db1ecdc, 0x174359406};   // D = 384
constexpr FoldK kBy32B{0x0f1da05aa, 0x15a546366};   // D = 256
constexpr FoldK kBy16B{0x1751997d0, 0x0ccaa009e};   // D = 128
constexpr uint64_t kX64 = 0x163cd6124;              // 64 -> 32 bits
constexpr uint64_t kPoly = 0x1db710641, kMu = 0x1f7011641;  // Barrett: P, floor(x^64 / P)

ROCEMU_CLMUL512 inline __m128i fold128(__m128i x, FoldK k) {
    const __m128i kv = _mm_set_epi64x(static_cast<int64_t>(k.hi), static_cast<int64_t>(k.lo));
    return _mm_xor_si128(_mm_clmulepi64_si128(x, kv, 0x00), _mm_clmulepi64_si128(x, kv, 0x11));
}

ROCEMU_CLMUL512 inline __m512i fold512(__m512i x, FoldK k) {
    const auto lo = static_cast<int64_t>(k.lo), hi = static_cast<int64_t>(k.hi);
    const __m512i kv = _mm512_set_epi64(hi, lo, hi, lo, hi, lo, hi, lo);
    return _mm512_xor_si512(_mm512_clmulepi64_epi128(x, kv, 0x00), _mm512_clmulepi64_epi128(x, kv, 0x11));
}

// 128 bits of folded state -> the 32-bit CRC state.
ROCEMU_CLMUL512 inline uint32_t reduce(__m128i x) {
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    const __m128i k16 = _mm_set_epi64x(static_cast<int64_t>(kBy16B.hi), static_cast<int64_t>(kBy16B.lo));
    // 128 -> 64 bits (with 32 zero bits appended): the low half moves up by x^64.
    x = _mm_xor_si128(_mm_srli_si128(x, 8), _mm_clmulepi64_si128(x, k16, 0x10));
    const __m128i k64 = _mm_set_epi64x(0, static_cast<int64_t>(kX64));
    x = _mm_xor_si128(_mm_srli_si128(x, 4), _mm_clmulepi64_si128(_mm_and_si128(x, mask32), k64, 0x00));
    const __m128i pm = _mm_set_epi64x(static_cast<int64_t>(kMu), static_cast<int64_t>(kPoly));
    __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x, mask32), pm, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), pm, 0x00);
    return static_cast<uint32_t>(_mm_cvtsi128_si32(_mm_srli_si128(_mm_xor_si128(x, t), 4)));
}

// One cache line, loaded from `s` and stored to `d`: kept in cache, or
// streamed past it (`d` 64-byte aligned).
template <bool Stream>
ROCEMU_CLMUL512 inline __m512i take(uint8_t* d, const uint8_t* s) {
    const __m512i v = _mm512_loadu_si512(s);
    if constexpr (Stream) _mm512_stream_si512(reinterpret_cast<__m512i*>(d), v);
    else _mm512_storeu_si512(d, v);
    return v;
}

// n is a multiple of 64 and at least 256. Four accumulators a cache line
// each, folded 256 bytes at a time, keep the multiplies off the critical
// path, so the loop runs at the speed of the copy.
template <bool Stream>
ROCEMU_CLMUL512 uint32_t copy_lines(uint32_t state, uint8_t* d, const uint8_t* s, size_t n, const uint8_t* src_end) {
    constexpr uintptr_t kPrefetch = 4096;
    const uintptr_t end = reinterpret_cast<uintptr_t>(src_end);
    // The state enters as an XOR into the first four bytes.
    __m512i a0 = _mm512_xor_si512(take<Stream>(d, s), _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(state))));
    __m512i a1 = take<Stream>(d + 64, s + 64), a2 = take<Stream>(d + 128, s + 128), a3 = take<Stream>(d + 192, s + 192);
    size_t i = 256;
    for (; i + 256 <= n; i += 256) {
        // The four lines kPrefetch ahead, if the source reaches that far.
        const uintptr_t ahead = reinterpret_cast<uintptr_t>(s + i) + kPrefetch;
        if (ahead + 256 <= end) {
            for (uintptr_t k = 0; k < 4; ++k) _mm_prefetch(reinterpret_cast<const char*>(ahead + 64 * k), _MM_HINT_T0);
        }
        a0 = _mm512_xor_si512(fold512(a0, kBy256B), take<Stream>(d + i, s + i));
        a1 = _mm512_xor_si512(fold512(a1, kBy256B), take<Stream>(d + i + 64, s + i + 64));
        a2 = _mm512_xor_si512(fold512(a2, kBy256B), take<Stream>(d + i + 128, s + i + 128));
        a3 = _mm512_xor_si512(fold512(a3, kBy256B), take<Stream>(d + i + 192, s + i + 192));
    }
    __m512i x = _mm512_xor_si512(fold512(a0, kBy64B), a1);
    x = _mm512_xor_si512(fold512(x, kBy64B), a2);
    x = _mm512_xor_si512(fold512(x, kBy64B), a3);
    for (; i < n; i += 64) x = _mm512_xor_si512(fold512(x, kBy64B), take<Stream>(d + i, s + i));
    // Four 128-bit lanes, oldest first, into one.
    alignas(64) __m128i lane[4];
    _mm512_store_si512(lane, x);
    __m128i y = lane[3];
    y = _mm_xor_si128(y, fold128(lane[2], kBy16B));
    y = _mm_xor_si128(y, fold128(lane[1], kBy32B));
    y = _mm_xor_si128(y, fold128(lane[0], kBy48B));
    return reduce(y);
}

const bool kClmul512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq");

#endif

}  // namespace

namespace {

// Whole cache lines go through copy_lines; the bytes before them (up to the
// destination's next line when streaming) and after them are copied and
// CRCed on their own, the state chained through all three.
template <bool Stream>
uint32_t copy_crc(uint32_t state, uint8_t* dst, const uint8_t* src, size_t n, const uint8_t* src_end) {
#if defined(__x86_64__)
    if (kClmul512 && n >= 320) {
        const size_t head = Stream ? (0 - reinterpret_cast<uintptr_t>(dst)) & 63 : 0;
        const size_t body = (n - head) & ~size_t{63};
        const size_t tail = n - head - body;
        if (head) {
            std::memcpy(dst, src, head);
            state = crc32_update(state, src, head);
        }
        state = copy_lines<Stream>(state, dst + head, src + head, body, src_end);
        if (tail) {
            std::memcpy(dst + head + body, src + head + body, tail);
            state = crc32_update(state, src + head + body, tail);
        }
        if constexpr (Stream) _mm_sfence();
        return state;
    }
#endif
    (void)src_end;
    std::memcpy(dst, src, n);
    return crc32_update(state, src, n);
}

}  // namespace

#if defined(__x86_64__)
namespace {
// n is a multiple of 64; d is 64-byte aligned.
ROCEMU_CLMUL512 void stream_lines512(uint8_t* d, const uint8_t* s, size_t n) {
    for (size_t i = 0; i < n; i += 64) take<true>(d + i, s + i);
}

// n is a multiple of 64; d is 16-byte aligned.
void stream_lines128(uint8_t* d, const uint8_t* s, size_t n) {
    for (size_t i = 0; i < n; i += 64) {
        const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
        const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
        const __m128i v2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
        const __m128i v3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), v0);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), v1);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), v2);
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), v3);
    }
}
}  // namespace
#endif

void stream_copy(uint8_t* dst, const uint8_t* src, size_t n) {
#if defined(__x86_64__)
    const uintptr_t align = kClmul512 ? 64 : 16;
    const size_t head = std::min(n, (0 - reinterpret_cast<uintptr_t>(dst)) & (align - 1));
    const size_t body = (n - head) & ~size_t{63};
    std::memcpy(dst, src, head);
    if (kClmul512) stream_lines512(dst + head, src + head, body);
    else stream_lines128(dst + head, src + head, body);
    std::memcpy(dst + head + body, src + head + body, n - head - body);
    _mm_sfence();
#else
    std::memcpy(dst, src, n);
#endif
}

uint32_t crc32_copy(uint32_t state, uint8_t* dst, const uint8_t* src, size_t n, const uint8_t* src_end) {
    return copy_crc<false>(state, dst, src, n, src_end);
}

uint32_t crc32_place(uint32_t state, uint8_t* dst, const uint8_t* src, size_t n) {
    return copy_crc<true>(state, dst, src, n, src + n);
}

}  // namespace rocemu::wire
