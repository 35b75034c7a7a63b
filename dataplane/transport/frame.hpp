// The engine's two per-byte costs, kept cheap: finishing a frame it built
// (pad and ICRC in one CRC pass over the buffer, no copy) and placing
// received payload into host memory.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/opcode.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocemu::transport {

// finish_roce() for frames the engine builds itself: the payload was just
// written into the frame and is still in cache, and the ICRC runs over it in
// place (one CRC call, no copy of the masked headers).
inline void finish_frame(std::span<uint8_t> frame, const wire::EncodeLayout& lay) {
    uint8_t* f = frame.data();
    uint8_t* pad = f + lay.payload_off + lay.payload_len;
    for (uint8_t i = 0; i < lay.pad; ++i) pad[i] = 0;
    const size_t icrc_off = lay.frame_len - wire::kIcrcLen;
    wire::store_le32(f + icrc_off, wire::compute_icrc_in_place(f + lay.l3_off, icrc_off - lay.l3_off, lay.v6));
}

#if defined(__x86_64__)
// One cache line from `s` to `d`; streaming stores (which need `d` 16-byte
// aligned) bypass the cache.
template <bool Stream>
inline void copy_line(uint8_t* d, const uint8_t* s) {
    __m128i v[4];
    for (int k = 0; k < 4; ++k) v[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16 * k));
    for (int k = 0; k < 4; ++k) {
        if constexpr (Stream) _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16 * k), v[k]);
        else _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 16 * k), v[k]);
    }
}
#endif

// Copies received payload into host memory. Large copies use streaming
// stores: the destination is usually not in cache (a NIC's DMA does not
// read it first), and reading it for ownership would double the memory
// traffic. A store fence ends them, so whoever sees the completion that
// follows sees the data.
inline void place(void* dst, const void* src, size_t n) {
#if defined(__x86_64__)
    constexpr size_t kStreamFrom = 1024;
    if (n >= kStreamFrom) {
        auto* d = static_cast<uint8_t*>(dst);
        auto* s = static_cast<const uint8_t*>(src);
        const size_t head = (16 - (reinterpret_cast<uintptr_t>(d) & 15)) & 15;
        std::memcpy(d, s, head);
        d += head;
        s += head;
        n -= head;
        size_t i = 0;
        for (; i + 64 <= n; i += 64) copy_line<true>(d + i, s + i);
        std::memcpy(d + i, s + i, n - i);
        _mm_sfence();
        return;
    }
#endif
    std::memcpy(dst, src, n);
}

// Copies payload into a frame being built. The frame must stay in cache:
// its ICRC is computed next, and in a loopback the receiver reads it at
// once. Plain vector stores guarantee that; glibc's memcpy may switch to
// `rep movsb`, which on some CPUs writes large copies around the cache.
// The source is prefetched one packet ahead (a message's next packet comes
// from the bytes that follow), up to `src_end`.
inline void fill(void* dst, const void* src, size_t n, const void* src_end) {
#if defined(__x86_64__)
    if (n >= 256) {
        // Host memory is usually cold: ask for it well ahead of the copy.
        constexpr size_t kPrefetch = 4096;
        auto* d = static_cast<uint8_t*>(dst);
        auto* s = static_cast<const uint8_t*>(src);
        const auto* end = static_cast<const uint8_t*>(src_end);
        const size_t ahead = end - s > static_cast<ptrdiff_t>(kPrefetch) ? end - s - kPrefetch : 0;
        size_t i = 0;
        for (; i + 64 <= n; i += 64) {
            if (i < ahead) _mm_prefetch(reinterpret_cast<const char*>(s + i + kPrefetch), _MM_HINT_T0);
            copy_line<false>(d + i, s + i);
        }
        std::memcpy(d + i, s + i, n - i);
        return;
    }
#endif
    std::memcpy(dst, src, n);
}

}  // namespace rocemu::transport
