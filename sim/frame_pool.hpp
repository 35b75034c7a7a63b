// Frame buffers that move between nodes and links by handle, never copied.
// Each buffer holds one frame of up to kFrameCapacity bytes. Buffers are
// allocated in chunks as the pool first grows (up to a fixed limit) and are
// recycled through a LIFO free list, so a run in steady state allocates
// nothing and reuses buffers that are still warm in cache.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

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
        : max_chunks_((max_frames + kChunkFrames - 1) / kChunkFrames) {
        chunks_.reserve(max_chunks_);
    }
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

    uint32_t in_use() const { return in_use_; }
    uint32_t allocated() const { return static_cast<uint32_t>(chunks_.size()) * kChunkFrames; }
    uint32_t max_frames() const { return max_chunks_ * kChunkFrames; }
    uint64_t alloc_failures() const { return alloc_failures_; }

private:
    uint8_t* slot(FrameHandle h) const {
        return chunks_[h.v / kChunkFrames].get() + std::size_t{h.v % kChunkFrames} * kFrameCapacity;
    }

    bool grow() {
        if (chunks_.size() >= max_chunks_) return false;
        const uint32_t base = allocated();
        // Left uninitialised on purpose: pages are only touched when used.
        chunks_.push_back(std::unique_ptr<uint8_t[]>(new uint8_t[std::size_t{kChunkFrames} * kFrameCapacity]));
        lens_.resize(base + kChunkFrames);
        free_.reserve(base + kChunkFrames);
        // Pushed in reverse so the lowest index is handed out first.
        for (uint32_t i = kChunkFrames; i-- > 0;) free_.push_back(base + i);
        return true;
    }

    uint32_t max_chunks_;
    std::vector<std::unique_ptr<uint8_t[]>> chunks_;
    std::vector<uint16_t> lens_;
    std::vector<uint32_t> free_;
    uint32_t in_use_ = 0;
    uint64_t alloc_failures_ = 0;
};

}  // namespace rocemu::sim
