// The descriptor pool: one pool shared by all queues, a queue a linked list
// through it. Random traffic over three egress ports and three queues each,
// dequeued one frame at a time and in bursts (the sole-queue run and the
// frame-by-frame loop), must leave every queue in FIFO order, and a drained
// switch must hold its whole capacity again.
#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "harness.hpp"

namespace rocemu::sw::test {
namespace {

using namespace rocemu::literals;

class SwitchDescriptors : public ::testing::TestWithParam<uint64_t> {};

TEST_P(SwitchDescriptors, QueuesStayInOrderOnEveryDequeuePathAndGiveEveryDescriptorBack) {
    constexpr int kPorts = 4;
    SwitchConfig cfg = sonic_default_config(kPorts, BitsPerSec::gbps(100));
    cfg.pool_size = Bytes{200000};
    Rig r(cfg);
    Rng ops(GetParam());
    constexpr std::array<uint8_t, 3> kDscps{kDscpLossless3, kDscpTc0, kDscpLossless4};
    std::map<std::pair<int, int>, std::deque<uint32_t>> queued;  // (port, queue) -> handles, oldest first
    Nanos now{};
    uint64_t sent = 0, enqueued = 0;
    auto take = [&](PortId port, const TxDesc& tx) {
        std::deque<uint32_t>& q = queued[{port, tx.queue}];
        ASSERT_FALSE(q.empty()) << "port " << port << " queue " << int{tx.queue} << " sent a frame it did not hold";
        ASSERT_EQ(tx.handle, q.front()) << "port " << port << " queue " << int{tx.queue} << " out of order";
        q.pop_front();
        ++sent;
    };
    auto dequeue = [&](PortId port, bool burst) {
        Effects fx;
        if (burst) {
            TxDesc out[16];
            const std::size_t max = 1 + ops.next() % 16;
            const std::size_t n = r.sw->dequeue_burst(port, now, now, out, max, r.rng, fx);
            for (std::size_t i = 0; i < n; ++i) take(port, out[i]);
        } else if (const std::optional<TxDesc> tx = r.sw->dequeue(port, now, r.rng, fx)) {
            take(port, *tx);
        }
    };
    for (int step = 0; step < 20000; ++step) {
        now += 40_ns;
        if (ops.next() % 100 < 55) {
            // Mostly towards port 1, so that its queues grow long.
            const uint64_t pick = ops.next() % 4;
            const int to = pick < 2 ? 1 : static_cast<int>(pick);
            const uint32_t len = 64 + static_cast<uint32_t>(ops.next() % 1450);
            const PacketDesc d = r.pkt(0, host_ip(to), kDscps[ops.next() % kDscps.size()], len);
            for (const Effect& e : r.send(d, now))
                if (e.kind == EffectKind::Enqueued) {
                    queued[{e.port, e.queue}].push_back(e.handle);
                    ++enqueued;
                }
        } else {
            dequeue(static_cast<PortId>(1 + ops.next() % 3), ops.next() % 2);
        }
        if (::testing::Test::HasFatalFailure()) return;
    }
    // Drain: time enough for every port to send everything.
    for (int round = 0; round < 100000 && sent < enqueued; ++round) {
        now += 1_us;
        for (PortId p = 1; p < kPorts; ++p) dequeue(p, round % 2);
        if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_GT(enqueued, 5000u);
    EXPECT_EQ(sent, enqueued);
    for (const auto& [key, q] : queued) EXPECT_TRUE(q.empty()) << "port " << key.first << " queue " << key.second;
    // Every descriptor is back: a queue takes the pool's whole capacity in
    // 1-byte frames (below the Ethernet minimum, only they can run it dry).
    std::size_t n = 0;
    for (;;) {
        const Effects fx = r.send(r.pkt(0, host_ip(2), kDscpLossless3, 1), now);
        if (const Effect* d = find(fx, EffectKind::Drop)) {
            EXPECT_EQ(d->reason, DropReason::NoDescriptor);
            break;
        }
        ++n;
    }
    EXPECT_EQ(n, r.sw->descriptor_capacity());
}

INSTANTIATE_TEST_SUITE_P(Seeds, SwitchDescriptors, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace rocemu::sw::test
