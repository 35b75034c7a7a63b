// Frame buffers that move between nodes and links by handle, never copied.
// Each buffer holds one frame of up to kFrameCapacity bytes. Buffers are
// handed out in chunks as the pool first grows (up to a fixed limit) and are
// recycled through a LIFO free list, so a run in steady state allocates
// nothing and reuses buffers that are still warm in cache.
//
// All buffers live in one address range reserved up front (pages are only
// committed when first touched) and advised to use transparent huge pages: a
// large fabric keeps thousands of frames queued, one every 4.2 KiB, and with
// 4 KiB pages nearly every header a switch or NIC reads costs a TLB miss
// (and a page walk) on top of the cache miss.
//
// The pool also knows which bytes of each buffer may be non-zero: a prefix
// (up to `dirty_end`) and one 4-byte island (the ICRC last written behind a
// zero payload); every other byte of the buffer is zero (fresh pages are).
// Every way to write into a buffer goes through the pool and widens what it
// counts as written, so the knowledge stays true. A generator frame with an
// all-zero payload then costs neither a memset nor a CRC pass over its
// payload, at the sender (with_zero_payload) or the receiver (zero_between):
// with thousands of 4 KiB frames in flight those passes evicted everything
// else from the cache.
//
// That per-buffer state (length, written prefix, island; 6 bytes) sits in
// the first cache line of the buffer's slot, in front of the frame's first
// 56 bytes (Ethernet, IP, UDP and BTH headers): a hop that reads a frame's
// length and then its headers loads one line, where a separate state array
// (46 KB at 256 hosts, more than the L1) cost a second miss per hop.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <vector>

#include <sys/mman.h>

#include "dataplane/wire/opcode.hpp"

namespace rocemu::sim {

struct FrameHandle {
    uint32_t v = UINT32_MAX;

    constexpr bool valid() const { return v != UINT32_MAX; }
    constexpr bool operator==(const FrameHandle&) const = default;
};

class FramePool {
public:
    // The longest RoCEv2 frame (4198 bytes), which every frame a fabric's
    // NICs and switches build fits: 4 KiB payloads at most.
    static constexpr uint32_t kFrameCapacity = wire::kMaxRoceFrame;
    static constexpr uint32_t kChunkFrames = 256;

    // `max_frames` bounds the buffers that may exist at once (rounded up to
    // whole chunks).
    explicit FramePool(uint32_t max_frames)
        : max_chunks_((max_frames + kChunkFrames - 1) / kChunkFrames),
          map_bytes_(std::size_t{max_chunks_} * kChunkFrames * kSlotBytes + kHugePage) {
        void* p = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                       0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        map_ = static_cast<uint8_t*>(p);
        const auto addr = reinterpret_cast<uintptr_t>(map_);
        base_ = map_ + ((addr + kHugePage - 1) / kHugePage * kHugePage - addr);
        // Advice only: without transparent huge pages the pool still works.
        madvise(base_, map_bytes_ - static_cast<std::size_t>(base_ - map_), MADV_HUGEPAGE);
    }
    ~FramePool() { munmap(map_, map_bytes_); }
    FramePool(const FramePool&) = delete;
    FramePool& operator=(const FramePool&) = delete;

    // An invalid handle when the pool is exhausted; counted in alloc_failures().
    // The new frame has length 0.
    FrameHandle alloc() {
        if (free_.empty() && !grow()) {
            ++alloc_failures_;
            return FrameHandle{};
        }
        const FrameHandle h{free_.back()};
        free_.pop_back();
        state(h).len = 0;
        ++in_use_;
        return h;
    }

    void free(FrameHandle h) {
        free_.push_back(h.v);
        --in_use_;
    }

    // The first `n` bytes of the buffer, for writing a frame into; from now
    // on they count as possibly non-zero. Precondition: n <= kFrameCapacity.
    std::span<uint8_t> buffer(FrameHandle h, uint32_t n = kFrameCapacity) {
        mark_written(state(h), n);
        return {slot(h), n};
    }
    // The first `n` bytes of the frame (fewer if it is shorter), for editing
    // headers in place: only those count as written.
    std::span<uint8_t> header(FrameHandle h, uint32_t n) {
        n = std::min<uint32_t>(n, state(h).len);
        mark_written(state(h), n);
        return {slot(h), n};
    }
    // The frame as set by set_len(), to read.
    std::span<const uint8_t> frame(FrameHandle h) const { return {slot(h), state(h).len}; }
    uint32_t len(FrameHandle h) const { return state(h).len; }
    // Precondition: len <= kFrameCapacity.
    void set_len(FrameHandle h, uint32_t len) { state(h).len = static_cast<uint16_t>(len); }

    // Makes `h` a frame of `frame_len` bytes whose bytes [payload_off,
    // frame_len - 4) are zero, zeroing only what is not known to be zero (an
    // older, longer prefix; an older island), and returns its bytes. The
    // caller writes [0, payload_off) and the last 4 bytes (the ICRC), and
    // nothing else: that is what the pool now counts as written.
    // Precondition: payload_off <= frame_len - 4, frame_len <= kFrameCapacity.
    std::span<uint8_t> with_zero_payload(FrameHandle h, uint32_t payload_off, uint32_t frame_len) {
        // The same zeroing as for a writer that wrote first: what it leaves
        // (the old bytes at the ICRC's place) the caller writes next.
        settle_zero_payload(h, payload_off, frame_len);
        return {slot(h), frame_len};
    }

    // For a writer that says afterwards what it wrote (the transport
    // engine, TxFrame::defer_zeros): the whole buffer, nothing counted as
    // written yet. The caller then calls written() or settle_zero_payload()
    // before anything else touches the frame.
    std::span<uint8_t> unmarked_buffer(FrameHandle h) { return {slot(h), kFrameCapacity}; }
    // The writer wrote (at most) the first `n` bytes.
    void written(FrameHandle h, uint32_t n) { mark_written(state(h), n); }
    // The writer wrote [0, payload_off) and the last 4 bytes of a frame of
    // `frame_len` bytes (and nothing but zeros elsewhere), leaving the bytes
    // between, its zero payload and pad, for the pool: zeroes those not known
    // to be zero, and any beyond the frame, and sets the frame's length.
    // with_zero_payload() is this for a writer that writes afterwards.
    // Precondition: payload_off <= frame_len - 4, frame_len <= kFrameCapacity.
    void settle_zero_payload(FrameHandle h, uint32_t payload_off, uint32_t frame_len) {
        State& s = state(h);
        uint8_t* p = slot(h);
        const uint32_t icrc = frame_len - 4;
        if (s.dirty_end > payload_off) zero_around(p, payload_off, s.dirty_end, icrc);
        if (s.island != kNoIsland && s.island != icrc && s.island + 4u > payload_off)
            zero_around(p, std::max<uint32_t>(s.island, payload_off), s.island + 4u, icrc);
        s.dirty_end = static_cast<uint16_t>(payload_off);
        s.island = static_cast<uint16_t>(icrc);
        s.len = static_cast<uint16_t>(frame_len);
    }
    // The first byte from which the frame is known to be zero up to its last
    // 4 bytes (its ICRC): what Engine::on_frame takes as `zero_from`.
    uint32_t zero_from(FrameHandle h) const {
        const State& s = state(h);
        const uint32_t icrc = s.len >= 4 ? s.len - 4u : 0;
        if (s.island == kNoIsland || s.island >= icrc) return s.dirty_end;
        return std::max<uint32_t>(s.dirty_end, s.island + 4u);
    }

    // True if every byte of [from, to) is known to be zero.
    bool zero_between(FrameHandle h, uint32_t from, uint32_t to) const {
        const State& s = state(h);
        return s.dirty_end <= from && (s.island == kNoIsland || s.island >= to || s.island + 4u <= from);
    }

    // A new frame holding the same bytes as `h`; invalid if exhausted.
    FrameHandle clone(FrameHandle h) {
        const FrameHandle c = alloc();
        if (c.valid()) {
            const uint32_t n = state(h).len;
            std::copy_n(slot(h), n, buffer(c, n).data());
            state(c).len = static_cast<uint16_t>(n);
        }
        return c;
    }

    // Starts loading the frame's headers (the first 128 bytes) into the cache.
    void prefetch(FrameHandle h) const {
        __builtin_prefetch(line(h));
        __builtin_prefetch(line(h) + 64);
    }

    uint32_t in_use() const { return in_use_; }
    uint32_t allocated() const { return chunks_ * kChunkFrames; }
    uint32_t max_frames() const { return max_chunks_ * kChunkFrames; }
    uint64_t alloc_failures() const { return alloc_failures_; }

private:
    static constexpr std::size_t kHugePage = std::size_t{2} << 20;
    static constexpr uint16_t kNoIsland = UINT16_MAX;

    // Bytes [0, dirty_end) and [island, island + 4) may be non-zero, the
    // rest of the buffer is zero; island >= dirty_end when there is one.
    struct State {
        uint16_t len = 0;
        uint16_t dirty_end = 0;
        uint16_t island = kNoIsland;
    };

    // Zeroes [from, to) but the 4 bytes at `keep`.
    static void zero_around(uint8_t* p, uint32_t from, uint32_t to, uint32_t keep) {
        const uint32_t a = std::min(to, keep);
        if (from < a) std::fill(p + from, p + a, uint8_t{0});
        const uint32_t b = std::max(from, keep + 4u);
        if (b < to) std::fill(p + b, p + to, uint8_t{0});
    }

    static void mark_written(State& s, uint32_t n) {
        if (n <= s.dirty_end) return;
        s.dirty_end = static_cast<uint16_t>(n);
        if (s.island != kNoIsland && s.island < n) {
            s.dirty_end = static_cast<uint16_t>(std::max<uint32_t>(n, s.island + 4u));
            s.island = kNoIsland;
        }
    }

    // A slot: its State at offset 0, the frame's kFrameCapacity bytes from
    // kFrameOffset (8-byte aligned), padded to the fewest whole lines that
    // hold them, made odd (67 lines, 4288 bytes). An odd line count puts the
    // headers of consecutive slots in every set of a cache, L1 or L2: with
    // slots of 176 lines the headers in flight at 256 hosts had 128 of a
    // 2 MiB L2's 2048 sets (1.9 misses a packet-hop; 0.01 with an odd count).
    // A slot no longer than a frame needs keeps the frames in flight on
    // fewest pages: a frame's headers and its ICRC lie 4 KiB apart, on two
    // pages, and with 4288-byte slots one frame's ICRC shares a page with
    // the next one's headers (with 9280-byte slots each frame had two pages
    // of its own). On a VM whose host maps guest memory with 4 KiB pages,
    // every page a hop touches is a TLB entry, huge pages or not.
    static constexpr std::size_t kFrameOffset = 8;
    static constexpr std::size_t kSlotBytes = ((kFrameOffset + kFrameCapacity + 63) / 64 | 1) * 64;
    static_assert(sizeof(State) <= kFrameOffset && kFrameOffset + kFrameCapacity <= kSlotBytes);
    static_assert(kSlotBytes == 67 * 64);

    uint8_t* line(FrameHandle h) const { return base_ + std::size_t{h.v} * kSlotBytes; }
    uint8_t* slot(FrameHandle h) const { return line(h) + kFrameOffset; }
    State& state(FrameHandle h) { return *std::launder(reinterpret_cast<State*>(line(h))); }
    const State& state(FrameHandle h) const { return *std::launder(reinterpret_cast<const State*>(line(h))); }

    bool grow() {
        if (chunks_ >= max_chunks_) return false;
        const uint32_t base = allocated();
        ++chunks_;
        for (uint32_t i = 0; i < kChunkFrames; ++i) new (line(FrameHandle{base + i})) State{};
        free_.reserve(base + kChunkFrames);
        // Pushed in reverse so the lowest index is handed out first.
        for (uint32_t i = kChunkFrames; i-- > 0;) free_.push_back(base + i);
        return true;
    }

    uint32_t max_chunks_;
    uint32_t chunks_ = 0;
    std::size_t map_bytes_;
    uint8_t* map_ = nullptr;
    uint8_t* base_ = nullptr;  // map_ rounded up to a huge page
    std::vector<uint32_t> free_;
    uint32_t in_use_ = 0;
    uint64_t alloc_failures_ = 0;
};

}  // namespace rocemu::sim
