#include "common/sparse_buffer.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/heap_segment.hpp"

namespace rocemu {
namespace {

constexpr std::size_t kPage = SparseBuffer::kPage;

// How many pages of [p, p + bytes) are resident.
std::size_t resident_pages(const uint8_t* p, std::size_t bytes) {
    std::vector<unsigned char> v(bytes / kPage);
    EXPECT_EQ(mincore(const_cast<uint8_t*>(p), bytes, v.data()), 0);
    return static_cast<std::size_t>(std::count_if(v.begin(), v.end(), [](unsigned char c) { return c & 1; }));
}

bool all_zero(const uint8_t* p, std::size_t n) {
    return std::all_of(p, p + n, [](uint8_t b) { return b == 0; });
}

TEST(SparseBuffer, IsZeroedPageAlignedAndSizedAsAsked) {
    const SparseBuffer b(10000);
    ASSERT_NE(b.data(), nullptr);
    EXPECT_TRUE(b.in_region());
    EXPECT_EQ(b.size(), 10000u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kPage, 0u);
    EXPECT_TRUE(all_zero(b.data(), b.size()));
    const SparseBuffer none(0);
    EXPECT_EQ(none.data(), nullptr);
    EXPECT_EQ(none.size(), 0u);
}

// Built while a fabric's heap segment (transparent huge pages) is in use and
// its blocks around it are written, the buffer still commits only the pages
// written into it.
TEST(SparseBuffer, CommitsOnlyThePagesWrittenEvenAmongHugePageBlocks) {
    constexpr std::size_t kBytes = std::size_t{64} << 20;
    HeapSegment seg;
    HeapSegment::Use use(seg);
    auto before = std::make_unique<uint8_t[]>(std::size_t{4} << 20);
    SparseBuffer b(kBytes);
    auto after = std::make_unique<uint8_t[]>(std::size_t{4} << 20);
    std::fill_n(before.get(), std::size_t{4} << 20, 1);
    std::fill_n(after.get(), std::size_t{4} << 20, 1);
    ASSERT_TRUE(b.in_region());
    EXPECT_FALSE(HeapSegment::owns(b.data()));
    EXPECT_EQ(resident_pages(b.data(), kBytes), 0u);
    std::size_t written = 0;
    for (std::size_t off = 5 * kPage + 17; off < kBytes; off += 97 * kPage, ++written) b.data()[off] = 0xA5;
    EXPECT_EQ(resident_pages(b.data(), kBytes), written);
}

TEST(SparseBuffer, AFreedBufferGivesItsPagesBackAndComesBackZeroed) {
    constexpr std::size_t kBytes = std::size_t{1} << 20;
    SparseBuffer a(kBytes);
    std::fill_n(a.data(), kBytes, 0x5A);
    uint8_t* const at = a.data();
    EXPECT_EQ(resident_pages(at, kBytes), kBytes / kPage);
    a.reset();
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_EQ(a.size(), 0u);
    EXPECT_EQ(resident_pages(at, kBytes), 0u);
    // The next buffer of that size takes the freed slice, zero again.
    const SparseBuffer b(kBytes);
    EXPECT_EQ(b.data(), at);
    EXPECT_TRUE(all_zero(b.data(), kBytes));
}

TEST(SparseBuffer, MovesItsPagesAndFreesWhatItHeldBefore) {
    SparseBuffer a(3 * kPage);
    a.data()[0] = 7;
    uint8_t* const at = a.data();
    SparseBuffer b(std::move(a));
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_EQ(b.data(), at);
    EXPECT_EQ(b.size(), 3 * kPage);
    EXPECT_EQ(b.data()[0], 7);
    SparseBuffer c(2 * kPage);
    c.data()[0] = 9;
    uint8_t* const old = c.data();
    c = std::move(b);
    EXPECT_EQ(c.data(), at);
    EXPECT_EQ(c.data()[0], 7);
    EXPECT_EQ(b.data(), nullptr);
    // c's old slice went back: free, and reused zeroed.
    EXPECT_EQ(resident_pages(old, 2 * kPage), 0u);
    const SparseBuffer d(2 * kPage);
    EXPECT_EQ(d.data(), old);
    EXPECT_EQ(d.data()[0], 0);
}

}  // namespace
}  // namespace rocemu
