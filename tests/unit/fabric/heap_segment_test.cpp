// A fabric's own heap segment (common/heap_segment.hpp): what is allocated
// while a Use is alive lies in the segment, the segment lives as long as its
// last block, and a fabric built and destroyed leaves nothing behind.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/heap_segment.hpp"
#include "fabric/fabric.hpp"

namespace rocemu {
namespace {

// A segment, or the reason there is none (sanitizer builds replace no
// operator new, so they reserve nothing).
#define REQUIRE_SEGMENT(s)                                                                        \
    if (!(s).active()) GTEST_SKIP() << "no heap segment in this build (sanitizers) or process"

TEST(HeapSegment, BlocksAllocatedInAUseLieInTheSegmentAndOthersDoNot) {
    HeapSegment s;
    REQUIRE_SEGMENT(s);
    auto outside = std::make_unique<int>(1);
    std::unique_ptr<int> inside;
    std::vector<uint64_t> grown;
    {
        const HeapSegment::Use use(s);
        inside = std::make_unique<int>(2);
        for (uint64_t i = 0; i < 1000; ++i) grown.push_back(i);
    }
    auto after = std::make_unique<int>(3);
    EXPECT_TRUE(HeapSegment::owns(inside.get()));
    EXPECT_TRUE(HeapSegment::owns(grown.data()));
    EXPECT_FALSE(HeapSegment::owns(outside.get()));
    EXPECT_FALSE(HeapSegment::owns(after.get()));
    EXPECT_GE(s.used(), sizeof(int) + 1000 * sizeof(uint64_t));
    // Growing outside the Use moves the vector to the general heap.
    grown.resize(100000);
    EXPECT_FALSE(HeapSegment::owns(grown.data()));
    EXPECT_EQ(grown[999], 999u);
}

TEST(HeapSegment, UsesNestAndRestoreTheSegmentBefore) {
    HeapSegment a, b;
    REQUIRE_SEGMENT(a);
    REQUIRE_SEGMENT(b);
    const HeapSegment::Use ua(a);
    std::unique_ptr<int> in_b;
    {
        const HeapSegment::Use ub(b);
        in_b = std::make_unique<int>(1);
    }
    auto in_a = std::make_unique<int>(2);
    const auto* pa = reinterpret_cast<const uint8_t*>(in_a.get());
    const auto* pb = reinterpret_cast<const uint8_t*>(in_b.get());
    // Each lies in its own segment's slice of the region.
    EXPECT_TRUE(HeapSegment::owns(pa));
    EXPECT_TRUE(HeapSegment::owns(pb));
    const auto dist = pa > pb ? pa - pb : pb - pa;
    EXPECT_GE(static_cast<std::size_t>(dist), HeapSegment::kSegmentBytes - a.used() - b.used());
}

struct alignas(256) Wide {
    uint8_t b[256];
};
struct alignas(8192) Paged {
    uint8_t b[100];
};

TEST(HeapSegment, HonoursTheAlignmentAsked) {
    HeapSegment s;
    REQUIRE_SEGMENT(s);
    const HeapSegment::Use use(s);
    auto c = std::make_unique<char>('x');
    auto w = std::make_unique<Wide>();
    auto arr = std::unique_ptr<Wide[]>(new Wide[3]);
    EXPECT_TRUE(HeapSegment::owns(w.get()));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w.get()) % 256, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(arr.get()) % 256, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c.get()) % __STDCPP_DEFAULT_NEW_ALIGNMENT__, 0u);
    // Aligned as an address, not only as an offset into the segment.
    auto page = std::make_unique<Paged>();
    EXPECT_TRUE(HeapSegment::owns(page.get()));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(page.get()) % 8192, 0u);
}

// Closing the segment with a block still out keeps the block valid; the
// segment is released with that block, and not before.
TEST(HeapSegment, AClosedSegmentLivesUntilItsLastBlockIsFreed) {
    const HeapSegment::Stats before = HeapSegment::stats();
    std::string* kept = nullptr;
    {
        HeapSegment s;
        REQUIRE_SEGMENT(s);
        const HeapSegment::Use use(s);
        kept = new std::string(1000, 'k');
        auto dropped = std::make_unique<std::vector<int>>(5000, 7);
    }
    const HeapSegment::Stats held = HeapSegment::stats();
    EXPECT_EQ(held.held, before.held + 1);
    EXPECT_EQ(held.released, before.released);
    EXPECT_EQ(*kept, std::string(1000, 'k'));
    // Freed from another thread, as a report row may be.
    std::thread([kept] { delete kept; }).join();
    const HeapSegment::Stats after = HeapSegment::stats();
    EXPECT_EQ(after.held, before.held);
    EXPECT_EQ(after.released, before.released + 1);
    EXPECT_EQ(after.open, before.open);
}

TEST(HeapSegment, AReleasedSegmentIsTakenAgainFromItsStart) {
    HeapSegment probe;
    REQUIRE_SEGMENT(probe);
    std::vector<void*> firsts;
    firsts.reserve(3);  // grown inside a Use, it would hold that segment
    for (int round = 0; round < 3; ++round) {
        HeapSegment s;
        const HeapSegment::Use use(s);
        auto p = std::make_unique<uint64_t>(round);
        firsts.push_back(p.get());
        // Its pages were given back: what it holds now is what was written.
        EXPECT_EQ(*p, static_cast<uint64_t>(round));
    }
    EXPECT_EQ(firsts[0], firsts[1]);
    EXPECT_EQ(firsts[1], firsts[2]);
}

// Threads building in segments of their own while others free their
// blocks: every segment is given back once, when its last block goes.
TEST(HeapSegment, BlocksFreedAcrossThreadsReleaseEachSegmentOnce) {
    {
        HeapSegment probe;
        REQUIRE_SEGMENT(probe);
    }
    const HeapSegment::Stats before = HeapSegment::stats();
    constexpr int kThreads = 4;
    constexpr int kBlocks = 20000;
    std::vector<std::vector<int*>> made(kThreads);
    for (auto& m : made) m.reserve(kBlocks);
    {
        std::vector<std::thread> builders;
        for (int t = 0; t < kThreads; ++t)
            builders.emplace_back([&made, t] {
                HeapSegment s;
                const HeapSegment::Use use(s);
                for (int i = 0; i < kBlocks; ++i) made[t].push_back(new int(t * kBlocks + i));
            });
        for (auto& b : builders) b.join();
    }
    // Every builder closed its segment; the blocks hold them.
    EXPECT_EQ(HeapSegment::stats().held, before.held + kThreads);
    // Each thread frees another thread's blocks, checking them first.
    std::vector<std::thread> freers;
    for (int t = 0; t < kThreads; ++t)
        freers.emplace_back([&made, t] {
            const int from = (t + 1) % kThreads;
            for (int i = 0; i < kBlocks; ++i) {
                int* p = made[from][i];
                if (!HeapSegment::owns(p) || *p != from * kBlocks + i) std::abort();
                delete p;
            }
        });
    for (auto& f : freers) f.join();
    const HeapSegment::Stats after = HeapSegment::stats();
    EXPECT_EQ(after.held, before.held);
    EXPECT_EQ(after.released, before.released + kThreads);
}

// A fabric's objects lie in its segment, and a fabric built, run and
// destroyed leaves no block of its segment behind (nothing of it cached in a
// static), so a sweep's fabrics never pile up.
TEST(HeapSegment, AFabricBuildsInItsOwnSegmentAndLeavesNothingBehind) {
    {
        HeapSegment probe;
        REQUIRE_SEGMENT(probe);
    }
    const HeapSegment::Stats before = HeapSegment::stats();
    for (const char* model : {"rc", "generator"}) {
        const fabric::ConfigResult r = fabric::parse_fabric_config(
            std::string("topology: {kind: leaf_spine, leaves: 2, hosts_per_leaf: 2, spines: 2}\n"
                        "switch: {profile: lossless-100g}\nnic: {model: ") +
                model + "}\n",
            "heap.yaml");
        ASSERT_TRUE(r.config) << r.error;
        const fabric::Topology topo = fabric::generate(*r.config);
        {
            fabric::Fabric f(topo, 1);
            f.add_flow(fabric::FlowSpec{0, 3, Bytes{64 << 10}, Nanos{0}, 0xC001});
            f.start();
            EXPECT_EQ(HeapSegment::stats().open, before.open + 1) << model;
            EXPECT_TRUE(HeapSegment::owns(&f.sim().link(0))) << model;
            EXPECT_TRUE(HeapSegment::owns(f.switches().front().get())) << model;
            f.run(Nanos::from_ms(5));
            EXPECT_TRUE(f.all_done()) << model;
        }
        const HeapSegment::Stats after = HeapSegment::stats();
        EXPECT_EQ(after.open, before.open) << model;
        EXPECT_EQ(after.held, before.held) << model << ": a block of the fabric's segment outlived it";
    }
    EXPECT_EQ(HeapSegment::stats().released, before.released + 2);
}

}  // namespace
}  // namespace rocemu
