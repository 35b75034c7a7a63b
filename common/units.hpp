// Typed units shared by every rocemu component. No naked integers for time,
// sizes, rates or sequence numbers: mixing them up is a compile error.
#pragma once

#include <compare>
#include <cstdint>
#include <limits>

namespace rocemu {

// Time in nanoseconds. Signed, so differences are natural.
struct Nanos {
    int64_t v = 0;

    constexpr Nanos() = default;
    constexpr explicit Nanos(int64_t ns) : v(ns) {}

    static constexpr Nanos max() { return Nanos{std::numeric_limits<int64_t>::max()}; }
    static constexpr Nanos from_us(double us) { return Nanos{static_cast<int64_t>(us * 1e3)}; }
    static constexpr Nanos from_ms(double ms) { return Nanos{static_cast<int64_t>(ms * 1e6)}; }
    static constexpr Nanos from_s(double s) { return Nanos{static_cast<int64_t>(s * 1e9)}; }

    constexpr double us() const { return static_cast<double>(v) / 1e3; }
    constexpr double ms() const { return static_cast<double>(v) / 1e6; }
    constexpr double seconds() const { return static_cast<double>(v) / 1e9; }

    constexpr auto operator<=>(const Nanos&) const = default;
    constexpr Nanos operator+(Nanos o) const { return Nanos{v + o.v}; }
    constexpr Nanos operator-(Nanos o) const { return Nanos{v - o.v}; }
    constexpr Nanos& operator+=(Nanos o) { v += o.v; return *this; }
    constexpr Nanos& operator-=(Nanos o) { v -= o.v; return *this; }
    constexpr Nanos operator*(int64_t k) const { return Nanos{v * k}; }
    constexpr Nanos operator/(int64_t k) const { return Nanos{v / k}; }
};

namespace literals {
constexpr Nanos operator""_ns(unsigned long long v) { return Nanos{static_cast<int64_t>(v)}; }
constexpr Nanos operator""_us(unsigned long long v) { return Nanos{static_cast<int64_t>(v) * 1000}; }
constexpr Nanos operator""_ms(unsigned long long v) { return Nanos{static_cast<int64_t>(v) * 1000000}; }
constexpr Nanos operator""_s(unsigned long long v) { return Nanos{static_cast<int64_t>(v) * 1000000000}; }
}  // namespace literals

// A byte count.
struct Bytes {
    uint64_t v = 0;

    constexpr Bytes() = default;
    constexpr explicit Bytes(uint64_t b) : v(b) {}

    constexpr uint64_t bits() const { return v * 8; }
    constexpr auto operator<=>(const Bytes&) const = default;
    constexpr Bytes operator+(Bytes o) const { return Bytes{v + o.v}; }
    constexpr Bytes operator-(Bytes o) const { return Bytes{v - o.v}; }
    constexpr Bytes& operator+=(Bytes o) { v += o.v; return *this; }
    constexpr Bytes& operator-=(Bytes o) { v -= o.v; return *this; }
};

// A data rate in bits per second.
struct BitsPerSec {
    uint64_t v = 0;

    constexpr BitsPerSec() = default;
    constexpr explicit BitsPerSec(uint64_t bps) : v(bps) {}

    static constexpr BitsPerSec mbps(double m) { return BitsPerSec{static_cast<uint64_t>(m * 1e6)}; }
    static constexpr BitsPerSec gbps(double g) { return BitsPerSec{static_cast<uint64_t>(g * 1e9)}; }
    constexpr double as_gbps() const { return static_cast<double>(v) / 1e9; }
    constexpr double as_mbps() const { return static_cast<double>(v) / 1e6; }

    constexpr auto operator<=>(const BitsPerSec&) const = default;

    // Time to serialise `b` at this rate, rounded up to whole nanoseconds.
    constexpr Nanos serialise(Bytes b) const {
        if (v == 0) return Nanos::max();
        const unsigned __int128 num = static_cast<unsigned __int128>(b.bits()) * 1000000000u;
        return Nanos{static_cast<int64_t>((num + v - 1) / v)};
    }
    // Bytes that can be sent in `t` at this rate (rounded down).
    constexpr Bytes bytes_in(Nanos t) const {
        if (t.v <= 0) return Bytes{0};
        const unsigned __int128 bits = static_cast<unsigned __int128>(v) * static_cast<uint64_t>(t.v) / 1000000000u;
        return Bytes{static_cast<uint64_t>(bits / 8)};
    }
};

// Queue pair number: 24 bits on the wire.
struct Qpn {
    uint32_t v = 0;

    static constexpr uint32_t kMask = 0xFFFFFF;
    constexpr Qpn() = default;
    constexpr explicit Qpn(uint32_t q) : v(q & kMask) {}
    constexpr auto operator<=>(const Qpn&) const = default;
};

// Packet sequence number: 24 bits, compared by signed 24-bit difference so
// that ordering survives the wrap from 0xFFFFFF to 0.
class Psn {
public:
    static constexpr uint32_t kMask = 0xFFFFFF;
    static constexpr uint32_t kModulus = 0x1000000;

    constexpr Psn() = default;
    constexpr explicit Psn(uint32_t v) : v_(v & kMask) {}

    constexpr uint32_t value() const { return v_; }

    // Signed distance from b to a, in [-2^23, 2^23).
    static constexpr int32_t diff(Psn a, Psn b) {
        const uint32_t d = (a.v_ - b.v_) & kMask;
        return static_cast<int32_t>(d << 8) >> 8;
    }

    constexpr Psn operator+(uint32_t n) const { return Psn{v_ + n}; }
    constexpr Psn operator-(uint32_t n) const { return Psn{v_ - n}; }
    constexpr Psn& operator+=(uint32_t n) { v_ = (v_ + n) & kMask; return *this; }
    constexpr Psn& operator++() { v_ = (v_ + 1) & kMask; return *this; }

    constexpr bool operator==(const Psn&) const = default;
    friend constexpr bool operator<(Psn a, Psn b) { return diff(a, b) < 0; }
    friend constexpr bool operator<=(Psn a, Psn b) { return diff(a, b) <= 0; }
    friend constexpr bool operator>(Psn a, Psn b) { return diff(a, b) > 0; }
    friend constexpr bool operator>=(Psn a, Psn b) { return diff(a, b) >= 0; }

private:
    uint32_t v_ = 0;
};

}  // namespace rocemu
