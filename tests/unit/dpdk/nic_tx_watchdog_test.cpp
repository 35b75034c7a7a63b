// The NIC loop's TX guards over a net_ring port whose peer never reads: a
// frame longer than the port carries is dropped before the PMD, and a head
// the PMD refuses for longer than tx_timeout is dropped by the watchdog. The
// clock is the test's own and moved forward by hand, so no test waits.
#include <gtest/gtest.h>
#include <rte_ethdev.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/dpdk/nic.hpp"
#include "tests/unit/dpdk/manual_clock.hpp"

namespace rocemu::dpdk {
namespace {

using namespace rocemu::literals;

// An upper that lends frames of the lengths in `whole` (all in the mbuf)
// and `lent` (60 bytes of headers there, the rest from `mr` as zero copy,
// pinned on `pin` until the chain is freed), alternating while both last.
struct Lender {
    static constexpr bool kHandlesRoce = true;
    std::vector<uint32_t> whole, lent;
    std::vector<uint8_t> mr = std::vector<uint8_t>(9000, 0x5a);
    std::atomic<uint32_t> pin{0};
    size_t pulled = 0;
    void on_roce(std::span<const uint8_t>, Nanos) {}
    void on_pfc(std::span<const uint8_t>, Nanos) {}
    void on_host_effect(const host::HostEffect&, Nanos) {}
    Nanos next_timer() const { return Nanos::max(); }
    void on_timer(Nanos) {}
    size_t pull_tx(std::span<TxSlot> out, Nanos) {
        size_t n = 0;
        for (; n < out.size() && (!whole.empty() || !lent.empty()); ++n, ++pulled) {
            const bool zc = !lent.empty() && (whole.empty() || pulled % 2);
            std::vector<uint32_t>& from = zc ? lent : whole;
            const uint32_t len = from.front();
            from.erase(from.begin());
            TxSlot& s = out[n];
            s.len = zc ? 60 : len;
            std::fill_n(s.buf.begin(), s.len, uint8_t{0});
            s.buf[0] = 0x02;  // to 02:..., EtherType 0x88B5 (local experimental)
            s.buf[12] = 0x88;
            s.buf[13] = 0xB5;
            if (!zc) continue;
            s.ext = mr.data();
            s.ext_len = len - 64;
            s.tail_len = 4;
            s.pin = &pin;
            pin.fetch_add(1);
        }
        return n;
    }
};

class DpdkNicTxGuard : public ::testing::Test {
protected:
    void make(unsigned ring_size, NicConfig nc = {}) {
        static int serial = 0;
        const std::string s = std::to_string(serial++);
        std::string error;
        rings_ = RingPair::create("txg" + s, ring_size, error);
        ASSERT_TRUE(rings_) << error;
        PortConfig pc;
        pc.mbufs = 1023;
        pc.min_frame_room = 2048;
        a_ = rings_->port(0, "txg_a" + s, pc, error);
        ASSERT_TRUE(a_) << error;
        b_ = rings_->port(1, "txg_b" + s, pc, error);
        ASSERT_TRUE(b_) << error;
        ASSERT_TRUE(a_->takes_chains());
        host::HostConfig hc;
        hc.mac = wire::MacAddr{{0x02, 0, 0, 0, 0, 1}};
        hc.ipv4 = 0x0A000001;
        hc.prefix_len = 24;
        stack_ = std::make_unique<host::HostStack>(hc);
        nic_ = std::make_unique<Nic<Lender>>(*a_, *stack_, up_, clk_.clock, nullptr, nc);
    }
    void advance(Nanos by) { clk_.advance(by); }
    // What reached the peer's side of the ring, freed unread (which takes
    // chains off the pin).
    unsigned drain_peer() {
        unsigned total = 0;
        rte_mbuf* m[32];
        while (const uint16_t k = rte_eth_rx_burst(b_->id(), 0, m, 32)) {
            rte_pktmbuf_free_bulk(m, k);
            total += k;
        }
        return total;
    }
    const PortStats& st() const { return nic_->stats(); }

    test::ManualTscClock clk_;
    Lender up_;
    std::unique_ptr<RingPair> rings_;  // outlives the ports
    std::unique_ptr<Port> a_, b_;
    std::unique_ptr<host::HostStack> stack_;
    std::unique_ptr<Nic<Lender>> nic_;
};

// At MTU 1500 a port carries frames of up to 1518 bytes (header and VLAN
// tag, no FCS). Longer ones are dropped before the PMD, whole or lent from
// an MR (whose pin is then released); the others go out.
TEST_F(DpdkNicTxGuard, AFrameLongerThanThePortCarriesIsDroppedBeforeThePmd) {
    make(1024);
    ASSERT_EQ(a_->mtu(), 1500);
    up_.whole = {1518, 1519};
    up_.lent = {1518, 1564};
    nic_->poll();
    nic_->flush();
    EXPECT_EQ(st()[PortStat::DropTxOversize], 2u);
    EXPECT_EQ(st()[PortStat::TxPackets], 2u);
    EXPECT_EQ(st()[PortStat::TxBytes], 2u * 1518);
    EXPECT_EQ(st()[PortStat::TxZeroCopy], 1u);
    EXPECT_EQ(up_.pin.load(), 1u) << "only the chain in the ring pins the MR";
    EXPECT_EQ(drain_peer(), 2u);
    EXPECT_EQ(up_.pin.load(), 0u);
}

// A peer that never drains its ring: the refused frames wait (as for a busy
// wire) until the PMD has refused them for longer than tx_timeout, then the
// watchdog drops and counts them, frees their chains (the MR's pin falls to
// what the ring holds) and the loop pulls new frames, whose wait starts anew.
TEST_F(DpdkNicTxGuard, AQueueThePeerNeverDrainsIsDroppedAfterTheTxTimeout) {
    make(64);  // 63 frames fit in the ring
    constexpr unsigned kBurst = Nic<Lender>::kBurst;
    up_.whole.assign(100, 200);
    up_.lent.assign(100, 1200);
    for (int turn = 0; turn < 20; ++turn) nic_->poll();
    ASSERT_EQ(st()[PortStat::TxPackets], 63u);
    ASSERT_EQ(up_.pulled, 63u + kBurst) << "a full queue: the loop pulls no more";
    const uint32_t in_ring = up_.pin.load() - 16;  // the queued 32 alternate, half lent

    advance(900_ms);
    nic_->poll();
    EXPECT_EQ(st()[PortStat::DropTxTimeout], 0u) << "refused for 0.9 s: still waiting";
    EXPECT_EQ(st()[PortStat::DropTxFull], 0u);

    advance(200_ms);
    nic_->poll();
    EXPECT_EQ(st()[PortStat::TxTimeouts], 1u);
    EXPECT_EQ(st()[PortStat::DropTxTimeout], kBurst);
    EXPECT_EQ(up_.pin.load(), in_ring) << "the dropped chains are off the MR";
    nic_->poll();
    EXPECT_EQ(up_.pulled, 63u + 2 * kBurst) << "then the loop goes on";
    nic_->poll();
    EXPECT_EQ(st()[PortStat::TxTimeouts], 1u) << "a new refusal waits its own tx_timeout";
    advance(1100_ms);
    nic_->poll();
    EXPECT_EQ(st()[PortStat::TxTimeouts], 2u);
    EXPECT_EQ(st()[PortStat::DropTxTimeout], 2 * kBurst);
    EXPECT_EQ(nic_->board().value("tx_timeouts"), 2u) << "published as telemetry and rocemu counters read it";
    EXPECT_EQ(nic_->board().value("drop_tx_timeout"), 2 * kBurst);

    // Once the peer drains, what is left goes out, and the pins with it.
    EXPECT_EQ(drain_peer(), 63u);
    for (int turn = 0; turn < 20; ++turn) {
        nic_->poll();
        nic_->flush();
        drain_peer();
    }
    EXPECT_EQ(st()[PortStat::TxPackets], 200u - 2 * kBurst);
    EXPECT_EQ(up_.pin.load(), 0u);
    EXPECT_EQ(st()[PortStat::TxTimeouts], 2u);
}

// tx_timeout 0: the loop waits for the peer however long it takes.
TEST_F(DpdkNicTxGuard, AZeroTxTimeoutWaitsForever) {
    NicConfig nc;
    nc.tx_timeout = Nanos{0};
    make(64, nc);
    up_.whole.assign(200, 100);
    for (int turn = 0; turn < 20; ++turn) nic_->poll();
    ASSERT_EQ(st()[PortStat::TxPackets], 63u);
    advance(Nanos::from_s(3600));
    nic_->poll();
    EXPECT_EQ(st()[PortStat::DropTxTimeout], 0u);
    EXPECT_EQ(st()[PortStat::TxTimeouts], 0u);
    EXPECT_EQ(drain_peer(), 63u);
    nic_->poll();
    EXPECT_EQ(st()[PortStat::TxPackets], 63u + Nic<Lender>::kBurst);
}

}  // namespace
}  // namespace rocemu::dpdk
