#include "sim/frame_pool.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

namespace rocemu::sim {
namespace {

TEST(SimFramePool, GrowsLazilyUpToItsLimit) {
    FramePool pool(1000);  // rounds up to 4 chunks of 256
    EXPECT_EQ(pool.allocated(), 0u);
    EXPECT_EQ(pool.max_frames(), 1024u);
    std::set<uint32_t> seen;
    for (uint32_t i = 0; i < 1024; ++i) {
        const FrameHandle h = pool.alloc();
        ASSERT_TRUE(h.valid());
        EXPECT_TRUE(seen.insert(h.v).second) << "handle " << h.v << " handed out twice";
    }
    EXPECT_EQ(pool.allocated(), 1024u);
    EXPECT_EQ(pool.in_use(), 1024u);
    EXPECT_FALSE(pool.alloc().valid());
    EXPECT_FALSE(pool.alloc().valid());
    EXPECT_EQ(pool.alloc_failures(), 2u);
}

TEST(SimFramePool, FreedHandlesAreReusedWithoutGrowing) {
    FramePool pool(512);
    std::vector<FrameHandle> hs;
    for (int i = 0; i < 200; ++i) hs.push_back(pool.alloc());
    const uint32_t grown = pool.allocated();
    for (int round = 0; round < 1000; ++round) {
        pool.free(hs[round % hs.size()]);
        hs[round % hs.size()] = pool.alloc();
        ASSERT_TRUE(hs[round % hs.size()].valid());
    }
    EXPECT_EQ(pool.allocated(), grown);
    EXPECT_EQ(pool.in_use(), 200u);
}

TEST(SimFramePool, FramesKeepTheirOwnBytes) {
    FramePool pool(600);
    std::vector<FrameHandle> hs;
    for (uint32_t i = 0; i < 600; ++i) {
        const FrameHandle h = pool.alloc();
        ASSERT_TRUE(h.valid());
        auto buf = pool.buffer(h);
        ASSERT_EQ(buf.size(), FramePool::kFrameCapacity);
        const uint32_t len = 60 + i * 13 % 9000;
        std::fill_n(buf.begin(), len, static_cast<uint8_t>(i));
        buf[FramePool::kFrameCapacity - 1] = static_cast<uint8_t>(i + 1);
        pool.set_len(h, len);
        hs.push_back(h);
    }
    for (uint32_t i = 0; i < 600; ++i) {
        const auto f = pool.frame(hs[i]);
        ASSERT_EQ(f.size(), 60 + i * 13 % 9000);
        EXPECT_TRUE(std::all_of(f.begin(), f.end(), [&](uint8_t b) { return b == static_cast<uint8_t>(i); }));
        EXPECT_EQ(pool.buffer(hs[i])[FramePool::kFrameCapacity - 1], static_cast<uint8_t>(i + 1));
    }
}

TEST(SimFramePool, CloneCopiesBytesAndLength) {
    FramePool pool(256);
    const FrameHandle a = pool.alloc();
    auto buf = pool.buffer(a);
    for (int i = 0; i < 100; ++i) buf[i] = static_cast<uint8_t>(i * 3);
    pool.set_len(a, 100);
    const FrameHandle b = pool.clone(a);
    ASSERT_TRUE(b.valid());
    EXPECT_NE(a, b);
    EXPECT_TRUE(std::ranges::equal(pool.frame(a), pool.frame(b)));
    pool.frame(a)[0] = 0xFF;
    EXPECT_EQ(pool.frame(b)[0], 0);
    EXPECT_EQ(pool.in_use(), 2u);
}

}  // namespace
}  // namespace rocemu::sim
