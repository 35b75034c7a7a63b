// Division by a run-time constant with a multiply and a shift, exact for
// every numerator below 2^48 (Granlund and Montgomery, "Division by
// invariant integers using multiplication", 1994). The switch serialises
// every frame at its port's speed; a 64-bit divide there costs tens of
// cycles per packet.
#pragma once

#include <bit>
#include <cstdint>

namespace rocemu::sw {

class ExactDiv {
public:
    static constexpr int kNumeratorBits = 48;

    // d >= 1. With k = 48 + ceil(log2 d) and m = ceil(2^k / d), the error
    // m*d - 2^k is below d <= 2^(k-48), so floor(n*m / 2^k) = floor(n / d)
    // for every n < 2^48; m < 2^49 fits in 64 bits.
    explicit constexpr ExactDiv(uint64_t d)
        : d_(d), shift_(kNumeratorBits + (d > 1 ? std::bit_width(d - 1) : 0)) {
        const unsigned __int128 two_k = static_cast<unsigned __int128>(1) << shift_;
        m_ = static_cast<uint64_t>((two_k + d - 1) / d);
    }

    constexpr uint64_t floor(uint64_t n) const {
        if (n >> kNumeratorBits) return n / d_;  // out of the exact range: never for Ethernet frames
        return static_cast<uint64_t>((static_cast<unsigned __int128>(n) * m_) >> shift_);
    }
    constexpr uint64_t ceil(uint64_t n) const { return floor(n + d_ - 1); }
    constexpr uint64_t divisor() const { return d_; }

private:
    uint64_t d_;
    int shift_;
    uint64_t m_ = 0;
};

}  // namespace rocemu::sw
