// The bench's page census (fabric/bench/page_census.hpp): it counts each
// page a window touches once, in the mapping it belongs to, names the code
// that touched it, leaves the memory as it was and the SIGSEGV handler as
// it found it, also when a window throws.
#include "fabric/bench/page_census.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include "common/sanitizer.hpp"

namespace rocemu::bench {
namespace {

constexpr std::size_t kPage = 4096;
constexpr std::size_t kBytes = std::size_t{32} << 20;  // watched: 16 MiB or more

// The count on the by_mapping line of the mapping holding `p` (the kernel
// may have merged it with a neighbour), or -1.
double pages_of(const std::string& by_mapping, const void* p) {
    std::istringstream in(by_mapping);
    double n;
    std::string name, range;
    const auto a = reinterpret_cast<uintptr_t>(p);
    while (in >> n >> name >> range) {
        const std::size_t dash = range.find('-');
        const uintptr_t lo = std::stoull(range.substr(0, dash), nullptr, 16);
        const uintptr_t hi = std::stoull(range.substr(dash + 1), nullptr, 16);
        if (a >= lo && a < hi) return n;
    }
    return -1;
}

class PageCensus : public ::testing::Test {
protected:
    void SetUp() override {
#ifdef ROCEMU_SANITIZED_HEAP
        GTEST_SKIP() << "no census under a sanitizer";
#endif
        void* m = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(m, MAP_FAILED);
        mem_ = static_cast<volatile uint8_t*>(m);
        for (std::size_t i = 0; i < 200; ++i) mem_[i * kPage + 7] = static_cast<uint8_t>(i);
    }
    void TearDown() override {
        if (mem_ != nullptr) munmap(const_cast<uint8_t*>(mem_), kBytes);
    }
    volatile uint8_t* mem_ = nullptr;
};

TEST_F(PageCensus, CountsEachPageOnceAWindowInItsMapping) {
    struct sigaction before {};
    sigaction(SIGSEGV, nullptr, &before);
    uint64_t sum = 0;  // checked after the windows: they run only the reads
    const CensusResult c = page_census(2, [&](uint64_t w) {
        if (w == 0) {
            for (std::size_t i = 0; i < 100; ++i) mem_[i * kPage + 7] = static_cast<uint8_t>(mem_[i * kPage + 7] + 1);
            for (std::size_t i = 0; i < 10; ++i) (void)mem_[i * kPage + 100];  // the same pages again
        } else {
            for (std::size_t i = 100; i < 150; ++i) sum += mem_[i * kPage + 7];
        }
    });
    EXPECT_EQ(sum, (100 + 149) * 50 / 2);
    EXPECT_EQ(c.windows, 2u);
    EXPECT_EQ(c.dropped, 0u);
    EXPECT_DOUBLE_EQ(pages_of(c.by_mapping, const_cast<uint8_t*>(mem_)), 75.0);  // (100 + 50) / 2
    EXPECT_GE(c.pages, 150u);
    // 100 and 50 pages from a 2 MiB-aligned start, or one more range when the mapping is not aligned.
    // Another big mapping a window touches (a heap grown past 16 MiB by the
    // tests before, in a run of the whole binary) adds its ranges: the
    // mappings and touching code say which.
    EXPECT_GE(c.huge_pages, 2u);
    EXPECT_LE(c.huge_pages, 4u) << c.by_mapping << c.by_code;
    EXPECT_NE(c.by_code.find("fabric_tests+0x"), std::string::npos) << c.by_code;
    // The memory is as the windows left it, and writable.
    for (std::size_t i = 0; i < 200; ++i) EXPECT_EQ(mem_[i * kPage + 7], static_cast<uint8_t>(i + (i < 100)));
    mem_[150 * kPage] = 1;
    struct sigaction after {};
    sigaction(SIGSEGV, nullptr, &after);
    EXPECT_EQ(after.sa_handler, before.sa_handler);
}

TEST_F(PageCensus, AWindowThatThrowsLeavesTheMemoryWritable) {
    EXPECT_THROW(page_census(3,
                             [&](uint64_t w) {
                                 mem_[w * kPage] = 1;
                                 if (w == 1) throw std::runtime_error("stop");
                             }),
                 std::runtime_error);
    for (std::size_t i = 0; i < 200; ++i) mem_[i * kPage + 1] = 2;  // faults if still watched
    EXPECT_EQ(mem_[199 * kPage + 1], 2);
}

#ifdef ROCEMU_SANITIZED_HEAP
TEST(PageCensusSanitized, Refuses) {
    EXPECT_THROW(page_census(1, [](uint64_t) {}), std::runtime_error);
}
#endif

}  // namespace
}  // namespace rocemu::bench
