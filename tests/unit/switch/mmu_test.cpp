#include <gtest/gtest.h>

#include "harness.hpp"

namespace rocemu::sw::test {
namespace {

using namespace rocemu::literals;

SwitchConfig mmu_config(int dynamic_th, uint64_t reserved) {
    SwitchConfig cfg = sonic_default_config(3, BitsPerSec::gbps(100));
    cfg.pool_size = Bytes{120000};
    cfg.pg_lossless = PgProfile{Bytes{reserved}, Bytes{0}, Bytes{100000}, Bytes{2000}, Threshold{true, dynamic_th, {}}};
    cfg.wred[3] = WredProfile{};
    return cfg;
}

// Packets of 1000 B on PG3 until the first XOFF; returns how many were sent.
int packets_to_xoff(Rig& r) {
    for (int i = 1; i <= 200; ++i) {
        const Effects fx = r.send(r.pkt(0, host_ip(1), kDscpLossless3), 0_ns);
        if (find(fx, EffectKind::SendPfc)) return i;
    }
    return -1;
}

TEST(SwitchMmu, DynamicThresholdScalesWithFreePoolByAlpha) {
    // alpha = 1: XOFF once shared >= free = pool - shared, i.e. at half the pool.
    {
        Rig r(mmu_config(0, 0));
        EXPECT_EQ(packets_to_xoff(r), 60);
        EXPECT_EQ(r.sw->mmu().pool_used(), Bytes{60000});
    }
    // alpha = 1/2: shared >= (pool - shared) / 2, i.e. at a third.
    {
        Rig r(mmu_config(-1, 0));
        EXPECT_EQ(packets_to_xoff(r), 40);
    }
    // alpha = 2: at two thirds.
    {
        Rig r(mmu_config(1, 0));
        EXPECT_EQ(packets_to_xoff(r), 80);
    }
}

TEST(SwitchMmu, ReservedBytesComeBeforeTheSharedPool) {
    Rig r(mmu_config(0, 10000));
    // 10 packets fill the PG's reservation without touching the pool.
    for (int i = 0; i < 10; ++i) r.send(r.pkt(0, host_ip(1), kDscpLossless3), 0_ns);
    EXPECT_EQ(r.sw->mmu().pg_reserved(0, 3), Bytes{10000});
    EXPECT_EQ(r.sw->mmu().pool_used(), Bytes{0});
    EXPECT_EQ(packets_to_xoff(r), 60);
    EXPECT_EQ(r.sw->mmu().pg_shared(0, 3), Bytes{60000});
}

TEST(SwitchMmu, OnePgsPauseLeavesOtherPortsUnpaused) {
    Rig r(mmu_config(-1, 0));
    ASSERT_EQ(packets_to_xoff(r), 40);
    EXPECT_TRUE(r.sw->pg_xoff(0, 3));
    EXPECT_FALSE(r.sw->pg_xoff(2, 3));
    // Port 2 pauses once its own shared use s reaches half of what is then
    // free: s >= (120000 - 40000 - s) / 2, i.e. at 26667 B, the 27th packet.
    int n = 0;
    while (!find(r.send(r.pkt(2, host_ip(1), kDscpLossless3), 0_ns), EffectKind::SendPfc)) ++n;
    EXPECT_EQ(n + 1, 27);
    EXPECT_TRUE(r.sw->pg_xoff(2, 3));
}

TEST(SwitchMmu, LossyTrafficDropsWhenThePoolIsFullButLosslessUsesHeadroom) {
    SwitchConfig cfg = mmu_config(7, 0);
    cfg.pg_lossy.th = Threshold{true, 7, {}};
    cfg.queue_lossy.th = Threshold{true, 7, {}};
    Rig r(cfg);
    for (int i = 0; i < 120; ++i) ASSERT_EQ(count(r.send(r.pkt(0, host_ip(2), kDscpTc1), 0_ns), EffectKind::Enqueued), 1);
    EXPECT_EQ(r.sw->mmu().pool_used(), Bytes{120000});
    const Effects lossy = r.send(r.pkt(0, host_ip(2), kDscpTc1), 0_ns);
    ASSERT_NE(find(lossy, EffectKind::Drop), nullptr);
    EXPECT_EQ(find(lossy, EffectKind::Drop)->reason, DropReason::SharedPoolFull);
    const Effects lossless = r.send(r.pkt(1, host_ip(2), kDscpLossless3), 0_ns);
    EXPECT_EQ(count(lossless, EffectKind::Enqueued), 1);
    EXPECT_EQ(r.sw->mmu().pg_headroom(1, 3), Bytes{1000});
    EXPECT_NE(find(lossless, EffectKind::SendPfc), nullptr);
}

}  // namespace
}  // namespace rocemu::sw::test

namespace rocemu::sw::test {
namespace {

using namespace rocemu::literals;

TEST(SwitchMmu, DescriptorPoolCoversTheBufferInMinimumFrames) {
    SwitchConfig cfg = sonic_default_config(2, BitsPerSec::gbps(100));
    cfg.pool_size = Bytes{6000};
    Rig r(cfg);
    // Pool + per port (PG3 and PG4: size + xoff each), in 60-byte frames.
    const uint64_t max_bytes = 6000 + 2 * 2 * (9540 + 160272);
    EXPECT_EQ(r.sw->descriptor_capacity(), max_bytes / 60 + 1);
    // Only frames below the Ethernet minimum can run it dry, and that drop
    // has its own reason.
    std::size_t queued = 0;
    for (;;) {
        const Effects fx = r.send(r.pkt(0, host_ip(1), kDscpLossless3, 1), 0_ns);
        if (const Effect* d = find(fx, EffectKind::Drop)) {
            EXPECT_EQ(d->reason, DropReason::NoDescriptor);
            break;
        }
        ++queued;
    }
    EXPECT_EQ(queued, r.sw->descriptor_capacity());
    Effects fx;
    ASSERT_TRUE(r.sw->dequeue(1, 0_ns, r.rng, fx));
    EXPECT_EQ(count(r.send(r.pkt(0, host_ip(1), kDscpLossless3, 1), 0_ns), EffectKind::Enqueued), 1);
}

}  // namespace
}  // namespace rocemu::sw::test
