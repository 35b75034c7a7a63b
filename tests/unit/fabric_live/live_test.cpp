// Small fabrics on DPDK in one process, in real time: a dumbbell incast and
// a tiny leaf-spine. Every flow's bytes must complete and land intact, with
// no lossless drop; the incast's bottleneck must make the leaf send PFC.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <string>

#include "dataplane/dpdk/eal.hpp"
#include "dataplane/pcap/pcap.hpp"
#include "fabric/live/live.hpp"
#include "fabric/live/live_fabric.hpp"
#include "fabric/workload.hpp"

namespace rocemu::fabric::live {
namespace {

class EalEnvironment : public ::testing::Environment {
public:
    void TearDown() override { dpdk::Eal::cleanup(); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new EalEnvironment);

// A fabric file: `shape` is the topology mapping; 100 Gbit/s links, the
// default NIC and the lossless-100g profile.
Topology topology(const std::string& shape) {
    const std::string yaml = "topology: " + shape + R"(
links:
  host: {speed_gbps: 100, delay_ns: 500}
  fabric: {speed_gbps: 100, delay_ns: 1000}
nic: {cc: connectx-default, mtu: 4200}
switch: {profile: lossless-100g}
)";
    const ConfigResult r = parse_fabric_config(yaml, "test.yaml");
    EXPECT_TRUE(r.config) << r.error;
    return generate(*r.config);
}

const char* const kDumbbell = "{kind: dumbbell, left_hosts: 4, right_hosts: 1}";
const char* const kLeafSpine = "{kind: leaf_spine, leaves: 2, hosts_per_leaf: 2, spines: 2}";

LiveOptions options() {
    LiveOptions o;
    o.eal_args = {"--log-level", "lib.eal:error"};
    o.timeout_s = 60;
    return o;
}

void expect_clean(const LiveResult& r) {
    ASSERT_TRUE(r.error.empty()) << r.error;
    for (const LiveRow& row : r.rows) {
        SCOPED_TRACE(row.row.size.v);
        EXPECT_TRUE(row.complete);
        EXPECT_GT(row.flows, 0u);
        EXPECT_EQ(row.verified, row.flows);
        EXPECT_EQ(row.mismatched, 0u);
        EXPECT_EQ(row.bad_completions, 0u);
        EXPECT_EQ(row.lossless_drops, 0u);
        EXPECT_EQ(row.nic_drops, 0u);
        EXPECT_EQ(row.row.drops, 0u);
        EXPECT_GT(row.live_time.v, 0);
        // Scaled back, the time is the live time over the scale.
        EXPECT_NEAR(static_cast<double>(row.row.time.v), static_cast<double>(row.live_time.v) / r.scale, 1.0);
    }
}

TEST(FabricLive, DumbbellIncastDeliversEveryByteAndTheLeafSendsPfc) {
    Topology t = topology(kDumbbell);
    // A 1 MiB shared pool: with alpha 1/4 (dynamic_th -2) a sender's PG
    // passes XOFF near 200 KiB, and each sender has 4 QPs x 512 KiB in flight.
    for (SwitchSpec& sw : t.switches) sw.cfg.pool_size = Bytes{1u << 20};
    LiveOptions o = options();
    o.qps_per_flow = 4;
    const std::string dir = ::testing::TempDir() + "fabric_live_incast";
    std::filesystem::remove_all(dir);
    o.out_dir = dir;
    const Bytes sizes[] = {Bytes{2u << 20}};
    const LiveResult r = run_live_sweep(t, Pattern::Incast, sizes, o);
    expect_clean(r);
    EXPECT_DOUBLE_EQ(r.scale, 125.0);  // 5 x 100 Gbit/s over 4
    ASSERT_EQ(r.rows.size(), 1u);
    const LiveRow& row = r.rows[0];
    EXPECT_EQ(row.flows, 4u);
    EXPECT_GT(row.row.pfc, 0u);
    EXPECT_GT(row.row.ecn, 0u);
    // Scaled back, the receiver's 100 Gbit/s link bounds what arrives:
    // 12.5 GB/s less framing.
    EXPECT_GT(row.row.algbw_gbs, 0.5);
    EXPECT_LE(row.row.algbw_gbs, 12.5);
    // The report folder: the sweep, per-flow and counter CSVs.
    for (const char* f : {"live_incast_sweep.csv", "live_incast_2097152B_flows.csv", "live_incast_2097152B_totals.csv",
                          "live_incast_2097152B_switch_ports.csv"}) {
        std::ifstream in(dir + "/" + f);
        std::string header;
        EXPECT_TRUE(std::getline(in, header)) << f;
    }
    std::ifstream ports(dir + "/live_incast_2097152B_switch_ports.csv");
    const std::string text((std::istreambuf_iterator<char>(ports)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("left,"), std::string::npos);
    EXPECT_NE(text.find(",pfc_tx_xoff_p3,"), std::string::npos);
}

// A stop (a user's Ctrl-C) ends the size in progress at its next tick: the
// sweep returns the sizes before it, names the one it stopped, and its CSV,
// written as each size finishes, holds exactly those rows.
TEST(FabricLive, AStopEndsTheSweepAndKeepsTheSizesBefore) {
    const Topology t = topology(kDumbbell);
    LiveOptions o = options();
    const std::string dir = ::testing::TempDir() + "fabric_live_stop";
    std::filesystem::remove_all(dir);
    o.out_dir = dir;
    const std::string csv = dir + "/live_incast_sweep.csv";
    int polls_after_row = 0;
    o.stop = [&] { return std::filesystem::exists(csv) && ++polls_after_row == 1; };
    const Bytes sizes[] = {Bytes{256u << 10}, Bytes{256u << 20}, Bytes{1u << 20}};
    const LiveResult r = run_live_sweep(t, Pattern::Incast, sizes, o);
    expect_clean(r);
    ASSERT_EQ(r.rows.size(), 1u);
    EXPECT_EQ(r.rows[0].row.size, Bytes{256u << 10});
    ASSERT_TRUE(r.stopped_in);
    EXPECT_EQ(*r.stopped_in, Bytes{256u << 20});
    EXPECT_EQ(r.sizes, 3u);
    EXPECT_EQ(polls_after_row, 1);
    std::ifstream in(csv);
    std::string header, row, more;
    EXPECT_TRUE(std::getline(in, header));
    EXPECT_TRUE(std::getline(in, row));
    EXPECT_TRUE(row.starts_with("262144,")) << row;
    EXPECT_FALSE(std::getline(in, more)) << more;
    EXPECT_FALSE(std::filesystem::exists(dir + "/live_incast_268435456B_flows.csv"));
}

// Every frame a switch sends carries its port's MAC as the source. The
// switch ports are ring ethdevs, whose driver has no mac_addr_set: the MAC
// stayed 00:00:00:00:00:00, and a Linux bridge between a switch node and a
// hosts node on another machine dropped every such frame (seen with
// tests/e2e/fabric_guest_machine.sh).
TEST(FabricLive, SwitchFramesComeFromTheirPortMac) {
    const Topology t = topology("{kind: dumbbell, left_hosts: 2, right_hosts: 1}");
    const std::optional<uint32_t> l = t.find_link("h2-right");
    ASSERT_TRUE(l);
    const Endpoint& sw = t.links[*l].a.is_switch ? t.links[*l].a : t.links[*l].b;
    const std::array<uint8_t, 6> port_mac = t.switches[sw.index].port_mac[sw.port];
    LiveOptions o = options();
    o.pcap_link = "h2-right";
    o.pcap_path = ::testing::TempDir() + "fabric_live_macs.pcap";
    const Bytes sizes[] = {Bytes{256u << 10}};
    expect_clean(run_live_sweep(t, Pattern::Incast, sizes, o));
    pcap::Reader in(o.pcap_path);
    ASSERT_TRUE(in.ok()) << in.error();
    pcap::Frame f;
    uint64_t from_port = 0, from_zero = 0;
    while (in.next(f)) {
        ASSERT_GE(f.data.size(), 12u);
        const std::array<uint8_t, 6> src{f.data[6], f.data[7], f.data[8], f.data[9], f.data[10], f.data[11]};
        from_port += src == port_mac;
        from_zero += src == std::array<uint8_t, 6>{};
    }
    EXPECT_GT(from_port, 100u);  // two senders' 256 KiB reach h2 through that port
    EXPECT_EQ(from_zero, 0u);
}

// Each sender's window (64 QPs x 16 x 64 KiB = 64 MiB, 16384 frames) is
// four times its NIC's mbuf pool: the NIC must wait for its MAC (a full TX
// queue holds the frames) rather than drain its pool, which it counted as
// drop_no_mbuf on every refill that found it empty.
TEST(FabricLive, AWindowLargerThanTheNicPoolIsHeldBackNotCountedAsDrops) {
    const Topology t = topology(kDumbbell);
    LiveOptions o = options();
    o.qps_per_flow = 64;
    const Bytes sizes[] = {Bytes{64u << 20}};
    const LiveResult r = run_live_sweep(t, Pattern::Incast, sizes, o);
    expect_clean(r);
    ASSERT_EQ(r.rows.size(), 1u);
    EXPECT_EQ(r.rows[0].flows, 4u);
}

TEST(FabricLive, LeafSpinePermutationAndBothAllReducesComplete) {
    const Topology t = topology(kLeafSpine);
    const Bytes sizes[] = {Bytes{256u << 10}, Bytes{1u << 20}};
    const LiveResult perm = run_live_sweep(t, Pattern::Permutation, sizes, options());
    expect_clean(perm);
    ASSERT_EQ(perm.rows.size(), 2u);
    EXPECT_EQ(perm.rows[0].flows, 4u);
    // A second fabric in the same process: ring all-reduce over 4 ranks,
    // 2(n-1) = 6 steps per flow, each step once its predecessor's has
    // arrived (its WRITEs with immediate counted by the receiver).
    const LiveResult ring = run_live_sweep(t, Pattern::RingAllReduce, sizes, options());
    expect_clean(ring);
    ASSERT_EQ(ring.rows.size(), 2u);
    EXPECT_EQ(ring.rows[1].flows, 4u);
    EXPECT_EQ(ring.rows[1].verified, 4u);
    EXPECT_NEAR(ring.rows[1].row.busbw_gbs, ring.rows[1].row.algbw_gbs * 1.5, 1e-9);
    // Three QPs a flow: a 1 MiB step's four chunks arrive over all three,
    // in any order between them, and the receiver adds them up by step.
    LiveOptions three = options();
    three.qps_per_flow = 3;
    const LiveResult ring3 = run_live_sweep(t, Pattern::RingAllReduce, sizes, three);
    expect_clean(ring3);
    ASSERT_EQ(ring3.rows.size(), 2u);
    EXPECT_EQ(ring3.rows[1].flows, 4u);
    EXPECT_EQ(ring3.rows[1].verified, 4u);
    // Halving-doubling: 2 log2(4) = 4 stages of a flow per rank, each stage
    // opened by the arrival of its partner's data of the stage before (the
    // RECV completions of its WRITEs with immediate).
    const LiveResult hd = run_live_sweep(t, Pattern::HdAllReduce, sizes, options());
    expect_clean(hd);
    ASSERT_EQ(hd.rows.size(), 2u);
    EXPECT_EQ(hd.rows[1].flows, 16u);
    EXPECT_EQ(hd.rows[1].verified, 16u);
    EXPECT_NEAR(hd.rows[1].row.busbw_gbs, hd.rows[1].row.algbw_gbs * 1.5, 1e-9);
}

// Live as in virtual time, a halving-doubling stage opens once its
// partner's data of the stage before has arrived (its RECV completions
// polled), not once that data's ACKs are back, and after the rank's own
// stage before has opened: every gated flow's first WRITE is posted no
// earlier than its gate's arrival and its own previous stage's first
// WRITE, and some before the gate's last completion.
TEST(FabricLive, HalvingDoublingStagesOpenOnTheirPartnersData) {
    const Topology t = topology(kLeafSpine);
    const double scale = default_scale(t);
    std::string error;
    const auto fab = LiveFabric::build(scale_topology(t, scale), options(), scale, error);
    ASSERT_TRUE(fab) << error;
    Workload w;
    w.pattern = Pattern::HdAllReduce;
    w.size = Bytes{256u << 10};
    Rng rng(1);
    const std::vector<FlowSpec> flows = make_flows(t, w, rng);
    ASSERT_EQ(flows.size(), 16u);
    ASSERT_TRUE(fab->connect(flows, error)) << error;
    std::vector<Sample> samples;
    const WorkloadResult r = fab->run(flows, Nanos::from_s(60), Nanos::from_s(1), nullptr, Nanos::from_s(100), samples);
    ASSERT_TRUE(r.complete) << r.error;
    uint32_t before_the_acks = 0;
    for (uint32_t i = 0; i < flows.size(); ++i) {
        const FlowResult& f = r.flows[i];
        EXPECT_EQ(f.verified, 1) << "flow " << i;
        EXPECT_GT(f.arrived, Nanos{0}) << "flow " << i << ": its arrival was not reported";
        if (!flows[i].gated()) continue;
        const FlowResult& gate = r.flows[flows[i].gate];
        EXPECT_GE(f.first_post, gate.arrived) << "flow " << i;
        EXPECT_GE(f.first_post, r.flows[flows[i].behind].first_post) << "flow " << i;
        before_the_acks += f.first_post < gate.last_cqe;
    }
    EXPECT_GT(before_the_acks, 0u) << "every stage waited for its gate's ACKs";
}

// Ring all-reduce over 4 ranks has no flow at 2 B (a chunk per rank is
// less than a byte) and 4 flows at 256 KiB: the sweep's QPs are all made
// before the first size, so the ACK timeout covers the 256 KiB flows'
// window as in a sweep of that size alone, and the run reports it once for
// every QP (made per size, the 2 B size's empty window set the one shown).
TEST(FabricLive, EveryQpOfASweepHasTheTimeoutOfItsWholeWindow) {
    const Topology t = topology(kLeafSpine);
    LiveOptions o = options();
    o.qps_per_flow = 64;  // a 64 MiB window: 0.5 s at the scaled 1 Gbit/s host link
    const Bytes alone[] = {Bytes{256u << 10}};
    const LiveResult one = run_live_sweep(t, Pattern::RingAllReduce, alone, o);
    expect_clean(one);
    ASSERT_GT(one.rc_timeout, 0);
    ASSERT_NE(rc_timeout_for(rtt_bound(scale_topology(t, one.scale), Bytes{})), one.rc_timeout);
    const Bytes sizes[] = {Bytes{2}, Bytes{256u << 10}};
    const LiveResult both = run_live_sweep(t, Pattern::RingAllReduce, sizes, o);
    ASSERT_TRUE(both.error.empty()) << both.error;
    ASSERT_EQ(both.rows.size(), 2u);
    EXPECT_EQ(both.rows[0].flows, 0u);
    EXPECT_EQ(both.rows[1].flows, 4u);
    EXPECT_TRUE(both.rows[1].complete);
    EXPECT_EQ(both.rows[1].verified, 4u);
    EXPECT_EQ(both.rc_timeout, one.rc_timeout);
    size_t notes = 0;
    for (const std::string& n : both.notes)
        if (n.starts_with("RC ACK timeout")) {
            ++notes;
            EXPECT_TRUE(n.starts_with(fmt::format("RC ACK timeout {} (", one.rc_timeout))) << n;
            EXPECT_NE(n.find("on every QP"), std::string::npos) << n;
        }
    EXPECT_EQ(notes, 1u);
}

TEST(FabricLive, BadOptionsAreReportedNotRun) {
    const Topology t = topology(kLeafSpine);
    LiveOptions o = options();
    o.qps_per_flow = 0;
    const Bytes sizes[] = {Bytes{4096}};
    EXPECT_NE(run_live_sweep(t, Pattern::Permutation, sizes, o).error.find("--qps 0"), std::string::npos);
    o = options();
    o.scale = 1e9;
    EXPECT_NE(run_live_sweep(t, Pattern::Permutation, sizes, o).error.find("below 1 Mbit/s"), std::string::npos);
}

}  // namespace
}  // namespace rocemu::fabric::live
