// The engine's two per-byte costs, kept cheap: writing the payload of a frame
// it builds together with its ICRC, and placing received payload into host
// memory.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

#include "dataplane/wire/bytes.hpp"
#include "dataplane/wire/crc32.hpp"
#include "dataplane/wire/crc_zero.hpp"
#include "dataplane/wire/icrc.hpp"
#include "dataplane/wire/opcode.hpp"
#include "dataplane/wire/packet.hpp"

namespace rocemu::transport {

// Writes the payload of a frame whose headers are encoded, then finishes it
// (pad, ICRC). A small payload is copied and the whole frame then takes one
// CRC call (a call costs as much as a few hundred bytes of CRC), from the
// header template's state when the headers came from one; a
// large one is CRCed while it is copied, so each payload byte is read once
// and the CRC runs in the shadow of the copy from host memory.
class FrameWriter {
public:
    static constexpr uint32_t kFusedFrom = 512;

    FrameWriter(std::span<uint8_t> frame, const wire::EncodeLayout& lay)
        : f_(frame.data()), lay_(lay), dst_(f_ + lay.payload_off), fused_(lay.payload_len >= kFusedFrom) {
        if (!fused_) return;
        if (lay.crc_off == 0) state_ = wire::icrc_begin(f_ + lay.l3_off, lay.payload_off - lay.l3_off, lay.v6);
        else if (lay.payload_off == lay.crc_off) state_ = lay.crc_state;
        else state_ = wire::crc32_update(lay.crc_state, f_ + lay.crc_off, lay.payload_off - lay.crc_off);
    }

    // Appends `n` payload bytes from `src`, part of a source that ends at
    // `src_end` (the copy may prefetch up to there).
    void put(const uint8_t* src, size_t n, const uint8_t* src_end) {
        if (fused_) state_ = wire::crc32_copy(state_, dst_, src, n, src_end);
        else std::memcpy(dst_, src, n);
        dst_ += n;
    }

    // Appends `n` zero bytes (a null MR's). `write` false: the caller makes
    // them zero (TxFrame::defer_zeros); only for a fused writer, whose CRC
    // does not read the frame.
    void put_zeros(size_t n, bool write = true) {
        if (write || !fused_) std::memset(dst_, 0, n);
        if (fused_) state_ = wire::crc32_zeros(state_, n);
        dst_ += n;
    }
    bool fused() const { return fused_; }

    // Zero copy: `n` payload bytes at `src` stay where they are and are only
    // read, for the ICRC; pad and ICRC go to `tail` (returns their length)
    // instead of after the headers. Only for a payload of kFusedFrom or more.
    uint8_t finish_apart(const uint8_t* src, size_t n, uint8_t* tail) {
        uint32_t st = wire::crc32_update(state_, src, n);
        for (uint8_t i = 0; i < lay_.pad; ++i) tail[i] = 0;
        if (lay_.pad) st = wire::crc32_update(st, tail, lay_.pad);
        wire::store_le32(tail + lay_.pad, ~st);
        return static_cast<uint8_t>(lay_.pad + wire::kIcrcLen);
    }

    void finish() {
        uint8_t* pad = f_ + lay_.payload_off + lay_.payload_len;
        for (uint8_t i = 0; i < lay_.pad; ++i) pad[i] = 0;
        const size_t icrc_off = lay_.frame_len - wire::kIcrcLen;
        uint32_t icrc;
        if (fused_) icrc = ~(lay_.pad ? wire::crc32_update(state_, pad, lay_.pad) : state_);
        else if (lay_.crc_off != 0) icrc = ~wire::crc32_update(lay_.crc_state, f_ + lay_.crc_off, icrc_off - lay_.crc_off);
        else icrc = wire::compute_icrc_in_place(f_ + lay_.l3_off, icrc_off - lay_.l3_off, lay_.v6);
        wire::store_le32(f_ + icrc_off, icrc);
    }

private:
    uint8_t* f_;
    const wire::EncodeLayout& lay_;
    uint8_t* dst_;
    bool fused_;
    uint32_t state_ = 0;
};

// Copies received payload into host memory. Large copies use streaming
// stores: the destination is usually not in cache (a NIC's DMA does not
// read it first), and reading it for ownership would double the memory
// traffic. A store fence ends them, so whoever sees the completion that
// follows sees the data.
// `cached`: the destination is known to stay in cache, plain stores.
inline void place(void* dst, const void* src, size_t n, bool cached = false) {
    constexpr size_t kStreamFrom = 1024;
    if (n >= kStreamFrom && !cached) wire::stream_copy(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), n);
    else std::memcpy(dst, src, n);
}

}  // namespace rocemu::transport
