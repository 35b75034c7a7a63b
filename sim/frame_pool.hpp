// Frame buffers that move between nodes and links by handle, never copied.
// A whole buffer holds one frame of up to kFrameCapacity bytes; a compact one
// a frame with a zero payload (below). Buffers are handed out in chunks as
// the pool first grows (up to a fixed limit) and are recycled through a LIFO
// free list per kind, so a run in steady state allocates nothing and reuses
// buffers that are still warm in cache.
//
// Each kind lives in one address range reserved up front (pages are only
// committed when first touched) and advised to use transparent huge pages: a
// large fabric keeps thousands of frames queued, and with 4 KiB pages nearly
// every header a switch or NIC reads costs a TLB miss (and a page walk) on
// top of the cache miss.
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
//
// Compact frames. A frame whose bytes past its first kCompactHead are zero
// up to its last 4 (a generator's frame, or an RC frame whose payload comes
// from a null MR: headers, zero payload, ICRC) is kept in a compact slot of
// two lines: its length, its head bytes and those last 4 bytes. Switches,
// links and NICs read headers and lengths only, so a 4 KiB frame in flight
// costs them two lines on a page shared with 31 other frames, where a whole
// slot's headers had a page of their own: on a VM whose host maps guest
// memory with 4 KiB pages every such page is a TLB entry (256 hosts paid
// 2-6 TLB misses a packet-hop). Whatever reads a compact frame whole gets it
// expanded into one buffer the pool keeps for that (frame()), and whatever
// writes into its payload first turns it into a whole frame (whole()).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <vector>

#include <sys/mman.h>

#include "dataplane/wire/opcode.hpp"

namespace rocemu::sim {

struct FrameHandle {
    static constexpr uint32_t kCompactBit = 1u << 31;

    uint32_t v = UINT32_MAX;

    constexpr bool valid() const { return v != UINT32_MAX; }
    // A frame in a compact slot (FramePool). Meaningless for an invalid handle.
    constexpr bool compact() const { return (v & kCompactBit) != 0; }
    constexpr bool operator==(const FrameHandle&) const = default;
};

class FramePool {
public:
    // The longest RoCEv2 frame (4198 bytes), which every frame a fabric's
    // NICs and switches build fits: 4 KiB payloads at most.
    static constexpr uint32_t kFrameCapacity = wire::kMaxRoceFrame;
    // The most bytes a compact frame keeps in front of its zeros: what a
    // two-line slot holds besides its state and the last 4 bytes, more than
    // any RoCEv2 frame's headers (wire::kMaxRoceHeaders, 106).
    static constexpr uint32_t kCompactHead = 116;
    static constexpr uint32_t kChunkFrames = 256;

    // `max_frames` bounds the frames that may exist at once, compact or
    // whole (rounded up to whole chunks).
    explicit FramePool(uint32_t max_frames)
        : max_chunks_((max_frames + kChunkFrames - 1) / kChunkFrames),
          whole_(max_chunks_, kSlotBytes),
          compact_(max_chunks_, kCompactSlotBytes),
          scratch_(kFrameCapacity) {}
    FramePool(const FramePool&) = delete;
    FramePool& operator=(const FramePool&) = delete;

    // A whole frame of length 0; an invalid handle when the pool is
    // exhausted, counted in alloc_failures().
    FrameHandle alloc() { return take(whole_, 0); }

    void free(FrameHandle h) {
        (h.compact() ? compact_ : whole_).free.push_back(h.v & ~FrameHandle::kCompactBit);
        --in_use_;
    }

    // A new frame of `frame_len` bytes whose bytes [payload_off, frame_len -
    // 4) are zero, compact if its head fits: the caller writes its first
    // `payload_off` bytes (head) and its last 4 (at icrc), nothing else.
    // Invalid handle when exhausted. Precondition: payload_off <= frame_len
    // - 4, frame_len <= kFrameCapacity.
    struct ZeroPayload {
        FrameHandle h;
        std::span<uint8_t> head;
        uint8_t* icrc = nullptr;
    };
    ZeroPayload alloc_zero_payload(uint32_t payload_off, uint32_t frame_len) {
        if (payload_off > kCompactHead) {
            const FrameHandle h = alloc();
            if (!h.valid()) return {};
            const std::span<uint8_t> f = with_zero_payload(h, payload_off, frame_len);
            return {h, f.first(payload_off), f.data() + frame_len - 4};
        }
        const FrameHandle h = take(compact_, FrameHandle::kCompactBit);
        if (!h.valid()) return {};
        set_compact_state(h, payload_off, frame_len);
        return {h, {slot(h), payload_off}, slot(h) + kCompactHead};
    }

    // The same frame in a compact slot if everything past its first
    // kCompactHead bytes up to its last 4 is known to be zero (`h` is freed),
    // else `h` itself. Never fails for want of room: it replaces a frame.
    FrameHandle compact(FrameHandle h) {
        if (h.compact()) return h;
        const uint32_t len = state(h).len;
        if (len < 4) return h;
        const uint32_t head = std::min(zero_from(h), len - 4);
        if (head > kCompactHead) return h;
        const FrameHandle c{grab(compact_) | FrameHandle::kCompactBit};
        set_compact_state(c, head, len);
        // All kCompactHead bytes, a fixed-size copy (a whole slot has them):
        // what lies past the head is never read.
        std::memcpy(slot(c), slot(h), kCompactHead);
        std::memcpy(slot(c) + kCompactHead, slot(h) + len - 4, 4);
        free(h);
        return c;
    }

    // The same frame in a whole slot, for writing anywhere in it (`h` is
    // freed), or `h` itself if it is whole. Never fails for want of room.
    FrameHandle whole(FrameHandle h) {
        if (!h.compact()) return h;
        const FrameHandle w{grab(whole_)};
        expand_into(h, state(w), slot(w));
        free(h);
        return w;
    }

    // The first `n` bytes of a whole frame's buffer, for writing a frame
    // into; from now on they count as possibly non-zero. Preconditions: `h`
    // is whole, n <= kFrameCapacity.
    std::span<uint8_t> buffer(FrameHandle h, uint32_t n = kFrameCapacity) {
        mark_written(state(h), n);
        return {slot(h), n};
    }
    // The first `n` bytes of the frame (fewer if it is shorter, or compact
    // with a shorter head), for editing headers in place: only those count
    // as written.
    std::span<uint8_t> header(FrameHandle h, uint32_t n) {
        n = std::min<uint32_t>(n, h.compact() ? state(h).dirty_end : state(h).len);
        mark_written(state(h), n);
        return {slot(h), n};
    }
    // The frame as set by set_len(), to read. A compact frame is expanded
    // into one buffer the pool keeps: valid until the next call to frame().
    std::span<const uint8_t> frame(FrameHandle h) const {
        if (!h.compact()) return {slot(h), state(h).len};
        expand_into(h, scratch_state_, scratch_.data());
        return {scratch_.data(), state(h).len};
    }
    // The frame's first bytes, its headers among them, to read in place: the
    // whole frame, or a compact frame's head (past which it is zero but for
    // its last 4 bytes).
    std::span<const uint8_t> headers(FrameHandle h) const {
        return {slot(h), h.compact() ? state(h).dirty_end : state(h).len};
    }
    uint32_t len(FrameHandle h) const { return state(h).len; }
    // Preconditions: `h` is whole, len <= kFrameCapacity.
    void set_len(FrameHandle h, uint32_t len) { state(h).len = static_cast<uint16_t>(len); }

    // Makes whole frame `h` a frame of `frame_len` bytes whose bytes
    // [payload_off, frame_len - 4) are zero, zeroing only what is not known
    // to be zero (an older, longer prefix; an older island), and returns its
    // bytes. The caller writes [0, payload_off) and the last 4 bytes (the
    // ICRC), and nothing else: that is what the pool now counts as written.
    // Precondition: payload_off <= frame_len - 4, frame_len <= kFrameCapacity.
    std::span<uint8_t> with_zero_payload(FrameHandle h, uint32_t payload_off, uint32_t frame_len) {
        // The same zeroing as for a writer that wrote first: what it leaves
        // (the old bytes at the ICRC's place) the caller writes next.
        settle_zero_payload(h, payload_off, frame_len);
        return {slot(h), frame_len};
    }

    // For a writer that says afterwards what it wrote (the transport
    // engine, TxFrame::defer_zeros): the whole buffer of whole frame `h`,
    // nothing counted as written yet. The caller then calls written() or
    // settle_zero_payload() before anything else touches the frame.
    std::span<uint8_t> unmarked_buffer(FrameHandle h) { return {slot(h), kFrameCapacity}; }
    // The writer wrote (at most) the first `n` bytes.
    void written(FrameHandle h, uint32_t n) { mark_written(state(h), n); }
    // The writer wrote [0, payload_off) and the last 4 bytes of a frame of
    // `frame_len` bytes (and nothing but zeros elsewhere), leaving the bytes
    // between, its zero payload and pad, for the pool: zeroes those not known
    // to be zero, and any beyond the frame, and sets the frame's length.
    // with_zero_payload() is this for a writer that writes afterwards.
    // Preconditions: `h` is whole, payload_off <= frame_len - 4, frame_len
    // <= kFrameCapacity.
    void settle_zero_payload(FrameHandle h, uint32_t payload_off, uint32_t frame_len) {
        settle(state(h), slot(h), payload_off, frame_len);
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

    // A new frame holding the same bytes as `h`, of the same kind; invalid
    // if exhausted.
    FrameHandle clone(FrameHandle h) {
        if (h.compact()) {
            const FrameHandle c = take(compact_, FrameHandle::kCompactBit);
            if (c.valid()) std::memcpy(line(c), line(h), kCompactSlotBytes);
            return c;
        }
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
    // Slots of either kind that exist, and of each kind.
    uint32_t allocated() const { return whole_allocated() + compact_allocated(); }
    uint32_t whole_allocated() const { return whole_.chunks * kChunkFrames; }
    uint32_t compact_allocated() const { return compact_.chunks * kChunkFrames; }
    uint32_t max_frames() const { return max_chunks_ * kChunkFrames; }
    uint64_t alloc_failures() const { return alloc_failures_; }

private:
    static constexpr std::size_t kHugePage = std::size_t{2} << 20;
    static constexpr uint16_t kNoIsland = UINT16_MAX;

    // Bytes [0, dirty_end) and [island, island + 4) may be non-zero, the
    // rest of the buffer is zero; island >= dirty_end when there is one. A
    // compact frame's is its head's length and its last 4 bytes.
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

    // settle_zero_payload() on any buffer of kFrameCapacity bytes and its state.
    static void settle(State& s, uint8_t* p, uint32_t payload_off, uint32_t frame_len) {
        const uint32_t icrc = frame_len - 4;
        if (s.dirty_end > payload_off) zero_around(p, payload_off, s.dirty_end, icrc);
        if (s.island != kNoIsland && s.island != icrc && s.island + 4u > payload_off)
            zero_around(p, std::max<uint32_t>(s.island, payload_off), s.island + 4u, icrc);
        s.dirty_end = static_cast<uint16_t>(payload_off);
        s.island = static_cast<uint16_t>(icrc);
        s.len = static_cast<uint16_t>(frame_len);
    }

    // Writes compact frame `h` whole into buffer `p` whose state is `s`.
    void expand_into(FrameHandle h, State& s, uint8_t* p) const {
        const State& c = state(h);
        settle(s, p, c.dirty_end, c.len);
        std::memcpy(p, slot(h), c.dirty_end);
        std::memcpy(p + c.len - 4, slot(h) + kCompactHead, 4);
    }

    void set_compact_state(FrameHandle h, uint32_t head, uint32_t frame_len) {
        State& s = state(h);
        s.len = static_cast<uint16_t>(frame_len);
        s.dirty_end = static_cast<uint16_t>(head);
        s.island = static_cast<uint16_t>(frame_len - 4);
    }

    // A whole slot: its State at offset 0, the frame's kFrameCapacity bytes
    // from kFrameOffset (8-byte aligned), padded to the fewest whole lines
    // that hold them, made odd (67 lines, 4288 bytes). An odd line count
    // puts the headers of consecutive slots in every set of a cache, L1 or
    // L2: with slots of 176 lines the headers in flight at 256 hosts had 128
    // of a 2 MiB L2's 2048 sets (1.9 misses a packet-hop; 0.01 with an odd
    // count). A slot no longer than a frame needs keeps the frames in flight
    // on fewest pages: a frame's headers and its ICRC lie 4 KiB apart, on two
    // pages, and with 4288-byte slots one frame's ICRC shares a page with
    // the next one's headers (with 9280-byte slots each frame had two pages
    // of its own). On a VM whose host maps guest memory with 4 KiB pages,
    // every page a hop touches is a TLB entry, huge pages or not.
    //
    // A compact slot: its State, kCompactHead head bytes and the frame's
    // last 4, in two lines (32 to a 4 KiB page).
    static constexpr std::size_t kFrameOffset = 8;
    static constexpr std::size_t kSlotBytes = ((kFrameOffset + kFrameCapacity + 63) / 64 | 1) * 64;
    static constexpr std::size_t kCompactSlotBytes = 128;
    static_assert(sizeof(State) <= kFrameOffset && kFrameOffset + kFrameCapacity <= kSlotBytes);
    static_assert(kSlotBytes == 67 * 64);
    static_assert(kFrameOffset + kCompactHead + 4 == kCompactSlotBytes);
    static_assert(kCompactHead >= wire::kMaxRoceHeaders);

    // One kind of slot: an address range reserved up front (pages are
    // committed when first touched, advised to be transparent huge pages),
    // handed out in chunks as needed, recycled through a LIFO free list so
    // that a run in steady state allocates nothing and reuses slots still
    // warm in cache.
    struct Slots {
        Slots(uint32_t max_chunks, std::size_t slot_bytes)
            : slot_bytes(slot_bytes), map_bytes(std::size_t{max_chunks} * kChunkFrames * slot_bytes + kHugePage) {
            void* p = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                           -1, 0);
            if (p == MAP_FAILED) throw std::bad_alloc();
            map = static_cast<uint8_t*>(p);
            const auto addr = reinterpret_cast<uintptr_t>(map);
            base = map + ((addr + kHugePage - 1) / kHugePage * kHugePage - addr);
            // Advice only: without transparent huge pages the pool still works.
            madvise(base, map_bytes - static_cast<std::size_t>(base - map), MADV_HUGEPAGE);
        }
        ~Slots() { munmap(map, map_bytes); }
        Slots(const Slots&) = delete;
        Slots& operator=(const Slots&) = delete;

        std::size_t slot_bytes;
        std::size_t map_bytes;
        uint8_t* map = nullptr;
        uint8_t* base = nullptr;  // map rounded up to a huge page
        uint32_t chunks = 0;
        std::vector<uint32_t> free;
    };

    uint8_t* line(FrameHandle h) const {
        const uint32_t i = h.v & ~FrameHandle::kCompactBit;
        return h.compact() ? compact_.base + std::size_t{i} * kCompactSlotBytes : whole_.base + std::size_t{i} * kSlotBytes;
    }
    uint8_t* slot(FrameHandle h) const { return line(h) + kFrameOffset; }
    static State& state_at(uint8_t* line) { return *std::launder(reinterpret_cast<State*>(line)); }
    State& state(FrameHandle h) { return state_at(line(h)); }
    const State& state(FrameHandle h) const { return state_at(line(h)); }

    // A new frame of kind `s` (handles or'ed with `bit`), within max_frames.
    FrameHandle take(Slots& s, uint32_t bit) {
        if (in_use_ == max_frames()) {
            ++alloc_failures_;
            return FrameHandle{};
        }
        const FrameHandle h{grab(s) | bit};
        state(h).len = 0;
        return h;
    }
    // A slot of kind `s` and one more frame in use. Each kind has room for
    // max_frames: a frame that replaces one (compact(), whole()) needs no
    // check, as what in_use counts is then one too many for a moment only.
    uint32_t grab(Slots& s) {
        if (s.free.empty()) grow(s);
        const uint32_t i = s.free.back();
        s.free.pop_back();
        ++in_use_;
        return i;
    }
    void grow(Slots& s) {
        const uint32_t base = s.chunks * kChunkFrames;
        ++s.chunks;
        for (uint32_t i = 0; i < kChunkFrames; ++i) new (s.base + std::size_t{base + i} * s.slot_bytes) State{};
        s.free.reserve(base + kChunkFrames);
        // Pushed in reverse so the lowest index is handed out first.
        for (uint32_t i = kChunkFrames; i-- > 0;) s.free.push_back(base + i);
    }

    uint32_t max_chunks_;
    Slots whole_;
    Slots compact_;
    // Where frame() expands compact frames, and what of it may be non-zero.
    mutable std::vector<uint8_t> scratch_;
    mutable State scratch_state_;
    uint32_t in_use_ = 0;
    uint64_t alloc_failures_ = 0;
};

}  // namespace rocemu::sim
