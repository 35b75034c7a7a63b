// What the scripted fuzz targets share: the input read as a byte stream, and
// how an invariant failure is reported (abort, so libFuzzer saves the input).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace rocemu::fuzz {

[[noreturn]] inline void fail(const char* target, const char* what) {
    std::fprintf(stderr, "%s invariant: %s\n", target, what);
    std::abort();
}

// The input as a stream of little-endian values; zeros once it is used up.
struct Input {
    const uint8_t* p;
    size_t n;
    bool empty() const { return n == 0; }
    uint8_t u8() {
        if (!n) return 0;
        --n;
        return *p++;
    }
    uint16_t u16() { return static_cast<uint16_t>(u8() | u8() << 8); }
    uint32_t u32() { return u16() | static_cast<uint32_t>(u16()) << 16; }
    uint64_t u64() { return u32() | static_cast<uint64_t>(u32()) << 32; }
};

}  // namespace rocemu::fuzz
