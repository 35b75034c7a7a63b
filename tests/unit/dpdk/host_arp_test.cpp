#include <gtest/gtest.h>

#include <vector>

#include "dataplane/dpdk/host/arp_cache.hpp"

namespace rocemu::host {
namespace {

using namespace rocemu::literals;

const wire::MacAddr kMacB{{0x02, 0, 0, 0, 0, 0x0b}};
constexpr uint32_t kIpB = 0x0A000002;

struct Recorder {
    std::vector<uint64_t> resolved, failed;
    std::vector<uint32_t> probes;
};

TEST(DpdkArpCache, MissStartsOneResolutionAndQueuesEveryWaiter) {
    ArpCache c;
    const auto first = c.resolve(kIpB, 0_ns, 11);
    EXPECT_EQ(first.status, ArpCache::Status::Pending);
    EXPECT_TRUE(first.send_request);
    const auto second = c.resolve(kIpB, 1_us, 12);
    EXPECT_EQ(second.status, ArpCache::Status::Pending);
    EXPECT_FALSE(second.send_request);
    EXPECT_EQ(c.waiters(), 2u);

    Recorder r;
    c.learn(kIpB, kMacB, 2_us, false, [&](uint64_t cookie, const wire::MacAddr& mac) {
        EXPECT_EQ(mac, kMacB);
        r.resolved.push_back(cookie);
    });
    EXPECT_EQ(r.resolved, (std::vector<uint64_t>{11, 12}));
    EXPECT_EQ(c.waiters(), 0u);
    EXPECT_EQ(c.counters().resolved, 1u);
    const auto hit = c.resolve(kIpB, 3_us, 13);
    EXPECT_EQ(hit.status, ArpCache::Status::Hit);
    EXPECT_EQ(hit.mac, kMacB);
}

TEST(DpdkArpCache, EntriesExpireAfterReachableTime) {
    ArpConfig cfg;
    cfg.reachable_time = 10_s;
    ArpCache c(cfg);
    c.learn(kIpB, kMacB, 1_s, true, [](uint64_t, const wire::MacAddr&) {});
    EXPECT_TRUE(c.lookup(kIpB, 10_s));
    EXPECT_EQ(c.next_timer(), 11_s);
    EXPECT_FALSE(c.lookup(kIpB, 11_s));
    c.on_timer(11_s, [](uint32_t) { FAIL(); }, [](uint32_t, uint64_t) { FAIL(); });
    EXPECT_EQ(c.size(), 0u);
    EXPECT_EQ(c.next_timer(), Nanos::max());
}

TEST(DpdkArpCache, UnsolicitedInformationDoesNotCreateEntries) {
    ArpCache c;
    c.learn(kIpB, kMacB, 0_ns, false, [](uint64_t, const wire::MacAddr&) {});
    EXPECT_EQ(c.size(), 0u);
    c.learn(kIpB, kMacB, 0_ns, true, [](uint64_t, const wire::MacAddr&) {});
    EXPECT_EQ(c.size(), 1u);
    const wire::MacAddr moved{{0x02, 0, 0, 0, 0, 0x0c}};
    c.learn(kIpB, moved, 1_ns, false, [](uint64_t, const wire::MacAddr&) {});
    EXPECT_EQ(c.lookup(kIpB, 2_ns), moved);
}

TEST(DpdkArpCache, ProbesAreRetransmittedThenTheResolutionFails) {
    ArpConfig cfg;
    cfg.retransmit_time = 1_s;
    cfg.max_probes = 3;
    ArpCache c(cfg);
    ASSERT_TRUE(c.resolve(kIpB, 0_ns, 7).send_request);  // probe 1
    Recorder r;
    auto tick = [&](Nanos now) {
        c.on_timer(now, [&](uint32_t ip) { r.probes.push_back(ip); },
                   [&](uint32_t ip, uint64_t cookie) {
                       EXPECT_EQ(ip, kIpB);
                       r.failed.push_back(cookie);
                   });
    };
    tick(Nanos::from_ms(999));
    EXPECT_TRUE(r.probes.empty());
    EXPECT_EQ(c.next_timer(), 1_s);
    tick(1_s);
    tick(2_s);
    EXPECT_EQ(r.probes, (std::vector<uint32_t>{kIpB, kIpB}));
    EXPECT_TRUE(r.failed.empty());
    tick(3_s);
    EXPECT_EQ(r.failed, (std::vector<uint64_t>{7}));
    EXPECT_EQ(c.counters().failed, 1u);
    EXPECT_EQ(c.size(), 0u);
    EXPECT_EQ(c.waiters(), 0u);
}

TEST(DpdkArpCache, WaiterQueueIsBounded) {
    ArpCache c;
    for (uint64_t i = 0; i < ArpCache::kWaiters; ++i)
        EXPECT_EQ(c.resolve(kIpB + static_cast<uint32_t>(i % 3), 0_ns, i).status, ArpCache::Status::Pending);
    EXPECT_EQ(c.resolve(kIpB, 0_ns, 999).status, ArpCache::Status::Full);
    EXPECT_EQ(c.counters().waiters_full, 1u);
    EXPECT_EQ(c.waiters(), ArpCache::kWaiters);
}

TEST(DpdkArpCache, AFullCacheEvictsTheReachableEntryClosestToExpiry) {
    ArpCache c;
    for (uint32_t i = 0; i < ArpCache::kEntries; ++i)
        c.learn(0x0B000000 + i, kMacB, Nanos{static_cast<int64_t>(i) + 1}, true,
                [](uint64_t, const wire::MacAddr&) {});
    EXPECT_EQ(c.size(), ArpCache::kEntries);
    c.learn(kIpB, kMacB, 1_s, true, [](uint64_t, const wire::MacAddr&) {});
    EXPECT_EQ(c.counters().evicted, 1u);
    EXPECT_FALSE(c.lookup(0x0B000000, 1_s));
    EXPECT_TRUE(c.lookup(0x0B000001, 1_s));
    EXPECT_TRUE(c.lookup(kIpB, 1_s));
}

}  // namespace
}  // namespace rocemu::host
