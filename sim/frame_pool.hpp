// Frame buffers that move between nodes and links by handle, never copied.
// Each buffer holds one frame of up to kFrameCapacity bytes. Buffers are
// handed out in chunks as the pool first grows (up to a fixed limit) and are
// recycled through a LIFO free list, so a run in steady state allocates
// nothing and reuses buffers that are still warm in cache.
//
// All buffers live in one address range reserved up front (pages are only
// committed when first touched) and advised to use transparent huge pages: a
// large fabric keeps thousands of frames queued, one every 9 KiB, and with
// 4 KiB pages nearly every header a switch or NIC reads costs a TLB miss
// (and a page walk) on top of the cache miss.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <vector>

#include <sys/mman.h>

namespace rocemu::sim {

struct FrameHandle {
    uint32_t v = UINT32_MAX;

    constexpr bool valid() const { return v != UINT32_MAX; }
    constexpr bool operator==(const FrameHandle&) const = default;
};

class FramePool {
public:
    static constexpr uint32_t kFrameCapacity = 9216;
    static constexpr uint32_t kChunkFrames = 256;

    // `max_frames` bounds the buffers that may exist at once (rounded up to
    // whole chunks).
    explicit FramePool(uint32_t max_frames)
        : max_chunks_((max_frames + kChunkFrames - 1) / kChunkFrames),
          map_bytes_(std::size_t{max_chunks_} * kChunkFrames * kFrameCapacity + kHugePage) {
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
        lens_[h.v] = 0;
        ++in_use_;
        return h;
    }

    void free(FrameHandle h) {
        free_.push_back(h.v);
        --in_use_;
    }

    // The whole buffer, for writing a frame into.
    std::span<uint8_t> buffer(FrameHandle h) { return {slot(h), kFrameCapacity}; }
    // The frame as set by set_len().
    std::span<uint8_t> frame(FrameHandle h) { return {slot(h), lens_[h.v]}; }
    std::span<const uint8_t> frame(FrameHandle h) const { return {slot(h), lens_[h.v]}; }
    uint32_t len(FrameHandle h) const { return lens_[h.v]; }
    // Precondition: len <= kFrameCapacity.
    void set_len(FrameHandle h, uint32_t len) { lens_[h.v] = static_cast<uint16_t>(len); }

    // A new frame holding the same bytes as `h`; invalid if exhausted.
    FrameHandle clone(FrameHandle h) {
        const FrameHandle c = alloc();
        if (c.valid()) {
            const uint32_t n = lens_[h.v];
            std::copy_n(slot(h), n, slot(c));
            lens_[c.v] = static_cast<uint16_t>(n);
        }
        return c;
    }

    // Starts loading the frame's headers (the first 128 bytes) into the cache.
    void prefetch(FrameHandle h) const {
        __builtin_prefetch(slot(h));
        __builtin_prefetch(slot(h) + 64);
    }

    uint32_t in_use() const { return in_use_; }
    uint32_t allocated() const { return chunks_ * kChunkFrames; }
    uint32_t max_frames() const { return max_chunks_ * kChunkFrames; }
    uint64_t alloc_failures() const { return alloc_failures_; }

private:
    static constexpr std::size_t kHugePage = std::size_t{2} << 20;

    uint8_t* slot(FrameHandle h) const { return base_ + std::size_t{h.v} * kFrameCapacity; }

    bool grow() {
        if (chunks_ >= max_chunks_) return false;
        const uint32_t base = allocated();
        ++chunks_;
        lens_.resize(base + kChunkFrames);
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
    std::vector<uint16_t> lens_;
    std::vector<uint32_t> free_;
    uint32_t in_use_ = 0;
    uint64_t alloc_failures_ = 0;
};

}  // namespace rocemu::sim
