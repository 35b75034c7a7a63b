#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "fabric/engine_nic.hpp"
#include "fabric/fabric.hpp"
#include "fabric/switch_node.hpp"

namespace rocemu::fabric {
namespace {

// One leaf with three RC NICs on it, cabled as the topology says.
struct Bed {
    explicit Bed(const std::string& nic_yaml) {
        const ConfigResult r = parse_fabric_config(
            "topology: {kind: leaf_spine, leaves: 1, hosts_per_leaf: 3, spines: 0}\n"
            "switch: {profile: lossless-100g}\n" +
                nic_yaml,
            "bed.yaml");
        EXPECT_TRUE(r.config) << r.error;
        topo = generate(*r.config);
        leaf = std::make_unique<SwitchNode>(sim, topo, 0, 1);
        const sim::NodeId leaf_id = leaf->attach();
        for (uint32_t n = 0; n < topo.nic_count(); ++n) {
            nics.push_back(std::make_unique<EngineNic>(sim, topo, n));
            const sim::NodeId id = nics.back()->attach();
            sim.connect(id, 0, leaf_id, topo.nics[n].sw_port, link_config(topo.cfg.host_link));
        }
    }
    // An RC connection from NIC a to NIC b.
    std::pair<Qpn, Qpn> connect(uint32_t a, uint32_t b) {
        const Qpn qa = nics[a]->create_qp(EngineNic::QpEnd::Sender), qb = nics[b]->create_qp(EngineNic::QpEnd::Receiver);
        nics[a]->connect(qa, qb, topo.nics[b], Psn{100}, Psn{7000});
        nics[b]->connect(qb, qa, topo.nics[a], Psn{7000}, Psn{100});
        return {qa, qb};
    }

    sim::Simulator sim{sim::SimConfig{1, 1u << 16}};
    Topology topo;
    std::unique_ptr<SwitchNode> leaf;
    std::vector<std::unique_ptr<EngineNic>> nics;
};

TEST(FabricEngineNic, RdmaWriteCrossesTheSwitchIntactAtLineRate) {
    Bed bed("nic: {cc: connectx-default, mtu: 4200}\n");
    const uint32_t len = 1 << 20;
    auto src = bed.nics[0]->add_region(len);
    auto dst = bed.nics[1]->add_region(len);
    for (uint32_t i = 0; i < len; ++i) src.addr[i] = static_cast<uint8_t>(i * 31 + 7);
    const auto [qa, qb] = bed.connect(0, 1);
    ASSERT_TRUE(bed.nics[0]->post_write(qa, 1, src, len, reinterpret_cast<uint64_t>(dst.addr), dst.rkey));
    bed.sim.run_until_cond([&] { return bed.nics[0]->counters().completions == 1; }, Nanos::from_ms(10));
    ASSERT_EQ(bed.nics[0]->counters().completions, 1u);
    EXPECT_EQ(bed.nics[0]->counters().failed_completions, 0u);
    EXPECT_EQ(std::memcmp(src.addr, dst.addr, len), 0);
    // 1 MiB at 100 Gbit/s is 84 us of payload; framing, ACK turnaround and
    // two hops add little.
    const double us = bed.sim.now().us();
    EXPECT_GT(us, 84.0);
    EXPECT_LT(us, 84.0 * 1.15);
    EXPECT_EQ(bed.nics[0]->engine().counters().completer_retry_err, 0u);
}

// A flow's sender QP gets a send queue and no room for answers, its
// receiver QP the reverse: the sizes the engine was asked for.
TEST(FabricEngineNic, EachEndOfAFlowIsSizedForItsOwnSide) {
    Bed bed("nic: {cc: none, mtu: 4200}\n");
    const auto [qa, qb] = bed.connect(0, 1);
    transport::QpAttr a;
    transport::QpInitAttr sender, receiver;
    ASSERT_FALSE(bed.nics[0]->engine().query_qp(qa, a, sender));
    ASSERT_FALSE(bed.nics[1]->engine().query_qp(qb, a, receiver));
    EXPECT_EQ(sender.cap.max_send_wr, EngineNic::kChunksInFlight);
    EXPECT_EQ(sender.resp_queue, 1u);
    EXPECT_EQ(receiver.cap.max_send_wr, 1u);
    EXPECT_EQ(receiver.resp_queue, EngineNic::kRespQueue);
    EXPECT_EQ(sender.cap.max_recv_wr, 1u);
    EXPECT_EQ(receiver.cap.max_recv_wr, 1u);
    EXPECT_EQ(sender.cap.max_inline_data, 0u);
}

TEST(FabricEngineNic, IncastOverRcIsLosslessAndWindowBounded) {
    Bed bed("nic: {cc: none, mtu: 4200}\n");
    const uint32_t len = 8 << 20;
    auto dst = bed.nics[1]->add_region(2 * uint64_t{len});
    EngineNic::Region src[2] = {bed.nics[0]->add_region(len), bed.nics[2]->add_region(len)};
    std::memset(src[0].addr, 0xA5, len);
    std::memset(src[1].addr, 0x5A, len);
    const auto [q0, r0] = bed.connect(0, 1);
    const auto [q2, r2] = bed.connect(2, 1);
    ASSERT_TRUE(bed.nics[0]->post_write(q0, 1, src[0], len, reinterpret_cast<uint64_t>(dst.addr), dst.rkey));
    ASSERT_TRUE(bed.nics[2]->post_write(q2, 2, src[1], len, reinterpret_cast<uint64_t>(dst.addr) + len, dst.rkey));
    bed.sim.run_until_cond(
        [&] { return bed.nics[0]->counters().completions + bed.nics[2]->counters().completions == 2; },
        Nanos::from_ms(50));
    // What the run reached, should it stop short of both completions.
    SCOPED_TRACE(::testing::Message()
                 << "at " << bed.sim.now().us() << " us: frames sent " << bed.nics[0]->counters().tx_frames << " / "
                 << bed.nics[2]->counters().tx_frames << ", PFC received " << bed.nics[0]->counters().pfc_rx << " / "
                 << bed.nics[2]->counters().pfc_rx << ", retries " << bed.nics[0]->engine().counters().completer_retry_err
                 << ", sequence errors " << bed.nics[0]->engine().counters().rcvd_seq_err);
    EXPECT_EQ(bed.nics[0]->counters().completions, 1u);
    EXPECT_EQ(bed.nics[2]->counters().completions, 1u);
    EXPECT_EQ(std::memcmp(src[0].addr, dst.addr, len), 0);
    EXPECT_EQ(std::memcmp(src[1].addr, dst.addr + len, len), 0);
    // Each requester keeps at most 128 unacknowledged packets in flight, so
    // the receiver's port never queues more than two windows.
    const sw::PortId to_rx = bed.topo.nics[1].sw_port;
    const Bytes window{128 * (4096 + 78)};
    EXPECT_GT(bed.leaf->core().queue_counters(to_rx, 3).watermark, Bytes{0});
    EXPECT_LE(bed.leaf->core().queue_counters(to_rx, 3).watermark, window + window);
    // 16 MiB through one 100 Gbit/s port: no faster than the port.
    EXPECT_GT(bed.sim.now().seconds(), 2.0 * len * 8 / 100e9);
    uint64_t drops = 0;
    for (std::size_t p = 0; p < bed.leaf->core().num_ports(); ++p)
        for (const uint64_t d : bed.leaf->core().port_counters(static_cast<sw::PortId>(p)).drops) drops += d;
    EXPECT_EQ(drops, 0u);
    EXPECT_EQ(bed.nics[0]->engine().counters().completer_retry_err, 0u);
}

// DCQCN keeps a timer per QP; the NIC wakes for the earliest of them
// (EngineNic::cc_next_) without walking its QPs at every event. An incast
// over two QPs per sender cuts every QP's rate with CNPs at its own times;
// with the senders idle afterwards only those timers raise the rates again,
// so each QP recovers only if the NIC woke for each QP's own timer.
TEST(FabricEngineNic, EveryQpsDcqcnTimerFiresAfterAnIncast) {
    Bed bed("nic: {cc: connectx-default, mtu: 4200}\n");
    const uint32_t len = 4 << 20;
    auto dst = bed.nics[1]->add_region(4 * uint64_t{len});
    struct Sender {
        uint32_t nic;
        Qpn qp;
    };
    std::vector<Sender> senders;
    for (const uint32_t nic : {0u, 2u})
        for (int k = 0; k < 2; ++k) {
            const auto [q, r] = bed.connect(nic, 1);
            const EngineNic::Region src = bed.nics[nic]->null_region(len);
            ASSERT_TRUE(bed.nics[nic]->post_write(q, senders.size(), src, len,
                                                  reinterpret_cast<uint64_t>(dst.addr) + senders.size() * len, dst.rkey));
            senders.push_back({nic, q});
        }
    const BitsPerSec line = bed.nics[0]->qp_rate(senders[0].qp);
    bed.sim.run_until_cond(
        [&] { return bed.nics[0]->counters().completions + bed.nics[2]->counters().completions == 4; },
        Nanos::from_ms(20));
    ASSERT_EQ(bed.nics[0]->counters().completions + bed.nics[2]->counters().completions, 4u);
    ASSERT_GT(bed.nics[0]->counters().cnp_rx, 0u);
    ASSERT_GT(bed.nics[2]->counters().cnp_rx, 0u);
    std::vector<BitsPerSec> cut;
    for (const Sender& s : senders) {
        cut.push_back(bed.nics[s.nic]->qp_rate(s.qp));
        EXPECT_LT(cut.back(), line) << "QP " << s.qp.v << " was never cut";
    }
    const uint64_t events = bed.sim.counters().events;
    bed.sim.run_until(bed.sim.now() + Nanos::from_ms(5));
    for (std::size_t i = 0; i < senders.size(); ++i)
        EXPECT_GT(bed.nics[senders[i].nic]->qp_rate(senders[i].qp), cut[i]) << "QP " << senders[i].qp.v;
    // Timers, not a wake-up at every nanosecond.
    EXPECT_LT(bed.sim.counters().events - events, 100000u);
}

}  // namespace
}  // namespace rocemu::fabric
