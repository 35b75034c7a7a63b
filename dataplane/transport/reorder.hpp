// A power-of-two window of flags over 24-bit PSNs, the bookkeeping behind the
// spraying responder's reorder buffer and the requester's selective
// retransmission. Like rte_reorder it never reads a clock and owns no
// packets; the caller slides it forward when it drains in order.
#pragma once

#include <cstdint>
#include <vector>

#include "common/units.hpp"

namespace rocemu::transport {

class PsnWindow {
public:
    // `size` must be a power of two.
    void init(uint32_t size) {
        size_ = size;
        bits_.assign((size + 63) / 64, 0);
    }
    void reset(Psn base) {
        base_ = base;
        for (auto& w : bits_) w = 0;
    }

    uint32_t size() const { return size_; }
    Psn base() const { return base_; }
    // True when p lies in [base, base + size).
    bool contains(Psn p) const {
        const int32_t d = Psn::diff(p, base_);
        return d >= 0 && static_cast<uint32_t>(d) < size_;
    }
    bool test(Psn p) const { return bits_[idx(p) >> 6] >> (idx(p) & 63) & 1; }
    void set(Psn p) { bits_[idx(p) >> 6] |= uint64_t{1} << (idx(p) & 63); }
    void clear(Psn p) { bits_[idx(p) >> 6] &= ~(uint64_t{1} << (idx(p) & 63)); }
    // Moves the base one PSN forward, forgetting the flag of the old base.
    void advance() {
        clear(base_);
        ++base_;
    }

private:
    uint32_t idx(Psn p) const { return p.value() & (size_ - 1); }

    std::vector<uint64_t> bits_;
    uint32_t size_ = 0;
    Psn base_;
};

}  // namespace rocemu::transport
