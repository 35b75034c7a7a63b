// CRC-32 (the reflected Ethernet polynomial 0xEDB88320) as a raw state: no
// inversion on entry or exit, so a caller can seed it, chain calls over the
// pieces of a frame and invert once at the end, as rxe does for the ICRC.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rocemu::wire {

// The state after `n` more bytes (ISA-L).
uint32_t crc32_update(uint32_t state, const uint8_t* p, size_t n);

// ISA-L's crc32_gzip_refl (it inverts on entry and exit), the only way this
// project calls it: its AVX-512 version returns without VZEROUPPER, and the
// vector registers' dirty upper halves then slow every legacy-SSE
// instruction of this baseline x86-64 build until some AVX code clears them
// (a generator fabric run after a 256-host RC run in the same process: 30-50
// % more CPU per packet-hop). This clears them after the call.
uint32_t isal_crc32_gzip_refl(uint32_t seed, const uint8_t* p, size_t n);

// The same, and the bytes are copied from `src` to `dst` as they are read:
// one pass for a payload that goes into a frame and into its ICRC. With
// AVX-512 VPCLMULQDQ, every cache line is loaded once, stored (the stores
// stay in cache) and folded into the CRC in the same loop, so the CRC runs
// in the shadow of the copy from cold memory; the source is prefetched
// ahead, up to `src_end`. Elsewhere, and below 320 bytes, memcpy and then
// crc32_update.
uint32_t crc32_copy(uint32_t state, uint8_t* dst, const uint8_t* src, size_t n, const uint8_t* src_end);

// crc32_copy for received payload going to host memory: the stores stream
// past the cache (no read for ownership of cold memory) and a store fence
// ends them.
uint32_t crc32_place(uint32_t state, uint8_t* dst, const uint8_t* src, size_t n);

// crc32_place's copy without the CRC, for payload already checked: whole
// destination lines take streaming stores (512-bit with AVX-512, else
// 128-bit), the ragged ends plain ones; a store fence ends them.
void stream_copy(uint8_t* dst, const uint8_t* src, size_t n);

}  // namespace rocemu::wire
