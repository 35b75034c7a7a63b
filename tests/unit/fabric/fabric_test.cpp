#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "fabric/fabric.hpp"
#include "fabric/gen_nic.hpp"
#include "fabric/report.hpp"
#include "fabric/workload.hpp"

namespace rocemu::fabric {
namespace {

Topology make(const std::string& yaml) {
    const ConfigResult r = parse_fabric_config(yaml, "test.yaml");
    EXPECT_TRUE(r.config) << r.error;
    return generate(*r.config);
}

const char* kLeafSpine8 =
    "topology: {kind: leaf_spine, leaves: 2, hosts_per_leaf: 4, spines: 2}\n"
    "links: {host: {speed_gbps: 100, delay_ns: 500}, fabric: {speed_gbps: 100, delay_ns: 1000}}\n"
    "switch: {profile: lossless-100g}\n";

const char* kLeafSpine =
    "topology: {kind: leaf_spine, leaves: 2, hosts_per_leaf: 2, spines: 2}\n"
    "links: {host: {speed_gbps: 100, delay_ns: 500}, fabric: {speed_gbps: 100, delay_ns: 1000}}\n"
    "switch: {profile: lossless-100g}\n";

// An RC NIC keeps its flows that have not started apart from the rest and
// posts only for flows with something new (started, a completion, a step
// opened): flows added out of start order, and one NIC holding several,
// still each send first at their own start and complete.
TEST(FabricRun, RcFlowsStartAtTheirOwnTimesWhateverTheirOrder) {
    Fabric f(make(kLeafSpine8), 1);
    const int64_t starts_us[] = {30, 0, 12, 5, 30, 21};
    const uint32_t dsts[] = {5, 6, 7, 4, 1, 2};
    std::vector<uint32_t> ids;
    for (int i = 0; i < 6; ++i)
        ids.push_back(f.add_flow(FlowSpec{static_cast<uint32_t>(i % 2), dsts[i], Bytes{256 << 10},
                                          Nanos::from_us(static_cast<double>(starts_us[i])),
                                          static_cast<uint16_t>(0xC000 + i)}));
    f.start();
    f.run(Nanos::from_ms(10));
    ASSERT_TRUE(f.all_done());
    for (int i = 0; i < 6; ++i) {
        const FlowStats& s = f.stats()[ids[i]];
        EXPECT_EQ(s.first_tx, Nanos::from_us(static_cast<double>(starts_us[i]))) << "flow " << i;
        EXPECT_EQ(s.rx_bytes, uint64_t{256 << 10}) << "flow " << i;
    }
    EXPECT_EQ(f.totals().switch_drops, 0u);
}

// A flow between NICs the fabric does not have, or from a NIC to itself,
// is refused with the reason (it used to reach the NIC array out of range:
// `fabric run -c default.yaml --scenario incast` crashed with SIGSEGV), on
// both NIC models, and leaves the fabric as it was.
TEST(FabricRun, AFlowNeedsTwoOfTheFabricsNics) {
    for (const char* model : {"rc", "generator"}) {
        Fabric f(make(std::string(kLeafSpine) + "nic: {model: " + model + "}\n"), 1);
        ASSERT_EQ(f.nic_count(), 4u);
        for (const auto& [src, dst] : {std::pair{0u, 4u}, std::pair{7u, 1u}, std::pair{2u, 2u}}) {
            try {
                f.add_flow(FlowSpec{src, dst, Bytes{4096}, Nanos{0}, 0xC000});
                ADD_FAILURE() << model << ": flow " << src << " -> " << dst << " accepted";
            } catch (const std::invalid_argument& e) {
                EXPECT_NE(std::string(e.what()).find("NICs 0 to 3"), std::string::npos) << e.what();
            }
        }
        EXPECT_TRUE(f.flows().empty()) << model;
        f.add_flow(FlowSpec{0, 3, Bytes{4096}, Nanos{0}, 0xC000});
        f.start();
        f.run(Nanos::from_ms(1));
        EXPECT_TRUE(f.all_done()) << model;
    }
}

TEST(FabricRun, OneFlowCrossesTheFabricAtLineRate) {
    Fabric f(make(kLeafSpine), 1);
    const Bytes size{4 << 20};
    const uint32_t id = f.add_flow(FlowSpec{0, 3, size, Nanos{0}, 0xC123});
    f.start();
    f.run(Nanos::from_ms(10));
    const FlowStats& s = f.stats()[id];
    ASSERT_TRUE(s.done);
    EXPECT_EQ(s.rx_bytes, size.v);
    EXPECT_EQ(s.rx_out_of_order, 0u);
    // Goodput: payload over the whole wire cost cannot beat the line, and
    // an uncongested path should come within a few percent of it.
    const double secs = (s.last_rx - s.first_tx).seconds();
    const double gbps = static_cast<double>(size.bits()) / secs / 1e9;
    const double frame_eff = 4096.0 / (4096 + 78 + 20);
    EXPECT_LT(gbps, 100 * frame_eff);
    EXPECT_GT(gbps, 0.95 * 100 * frame_eff);
    const Totals t = f.totals();
    EXPECT_EQ(t.switch_drops, 0u);
    EXPECT_EQ(t.nic_drops, 0u);
    EXPECT_EQ(t.pfc_frames, 0u);
}

// Frames with a zero payload travel compact (sim/README.md): an incast that
// keeps hundreds of frames queued needs compact slots for them, and whole
// slots only for building a frame (the RC NIC) and for PFC frames. Both NIC
// models, the same bytes delivered.
TEST(FabricRun, IncastFramesTravelCompact) {
    for (const NicModel model : {NicModel::Rc, NicModel::Generator}) {
        Topology topo = make(kLeafSpine8);
        topo.cfg.nic.model = model;
        Fabric f(topo, 1);
        for (uint32_t src = 1; src < 8; ++src)
            f.add_flow(FlowSpec{src, 0, Bytes{1 << 20}, Nanos{0}, static_cast<uint16_t>(0xC000 + src)});
        f.start();
        f.run(Nanos::from_ms(10));
        ASSERT_TRUE(f.all_done());
        const sim::FramePool& pool = f.sim().pool();
        EXPECT_GT(pool.compact_allocated(), sim::FramePool::kChunkFrames) << nic_model_name(model);
        EXPECT_EQ(pool.whole_allocated(), sim::FramePool::kChunkFrames) << nic_model_name(model);
        EXPECT_EQ(pool.in_use(), 0u);
        EXPECT_EQ(f.totals().nic_drops, 0u);
    }
}

TEST(FabricRun, IncastWithoutCcIsLosslessThroughPfc) {
    // The generator has no window: 4 senders flood the bottleneck until PFC
    // holds them (RC windows bound this incast below XOFF; see below).
    Fabric f(make("topology: {kind: dumbbell, left_hosts: 4, right_hosts: 1}\nnic: {cc: none, model: generator}\n"
                  "switch: {profile: lossless-100g}\n"),
             1);
    for (uint32_t s = 0; s < 4; ++s)
        f.add_flow(FlowSpec{s, 4, Bytes{8 << 20}, Nanos{0}, static_cast<uint16_t>(0xC000 + s)});
    f.start();
    f.run(Nanos::from_ms(50));
    ASSERT_TRUE(f.all_done());
    const Totals t = f.totals();
    EXPECT_GT(t.pfc_xoff, 0u);
    EXPECT_EQ(t.switch_drops, 0u);
    EXPECT_EQ(t.cnps, 0u);
    EXPECT_GT(t.nic_paused, Nanos{0});
    EXPECT_GT(t.ecn_marks, 0u);  // marking happens; nobody reacts
}

TEST(FabricRun, RcIncastStaysWithinTheWindowsWithoutPfcAndIsLossless) {
    // 4 RC senders: at most 4 windows of 128 packets can queue at the
    // bottleneck, less than the shared buffer lets a PG fill before XOFF.
    Fabric f(make("topology: {kind: dumbbell, left_hosts: 4, right_hosts: 1}\nnic: {cc: none}\n"
                  "switch: {profile: lossless-100g}\n"),
             1);
    ASSERT_EQ(f.model(), NicModel::Rc);
    for (uint32_t s = 0; s < 4; ++s)
        f.add_flow(FlowSpec{s, 4, Bytes{8 << 20}, Nanos{0}, static_cast<uint16_t>(0xC000 + s)});
    f.start();
    f.run(Nanos::from_ms(50));
    ASSERT_TRUE(f.all_done());
    const Totals t = f.totals();
    EXPECT_EQ(t.switch_drops, 0u);
    EXPECT_EQ(t.nic_drops, 0u);
    EXPECT_EQ(t.pfc_xoff, 0u);
    EXPECT_LE(t.max_queue.v, 4u * 128 * (4096 + 78));
    EXPECT_GT(t.max_queue.v, 128u * 4096);  // more than one window did queue
    for (const auto& n : f.rc_nics()) EXPECT_EQ(n->counters().failed_completions, 0u);
    for (const FlowStats& s : f.stats()) EXPECT_EQ(s.rx_bytes, uint64_t{8} << 20);
}

// Nine hosts on one leaf, no DCQCN: hosts 0-7 send to host 8.
const char* kIncast9 =
    "topology: {kind: leaf_spine, leaves: 1, hosts_per_leaf: 9, spines: 0}\nnic: {cc: none}\n"
    "switch: {profile: lossless-100g}\n";

// Four RC flows (QP pairs) from each of hosts 0-7 to host 8.
void add_incast_flows(Fabric& f, Bytes size) {
    for (uint32_t s = 0; s < 8; ++s)
        for (uint32_t q = 0; q < 4; ++q)
            f.add_flow(FlowSpec{s, 8, size, Nanos{0}, static_cast<uint16_t>(0xC000 + s * 4 + q)});
}

TEST(FabricRun, RcIncastWithFourQpsPerSenderPassesXoffAndStaysLossless) {
    // Four RC windows per sender (2 MiB) exceed the PG's dynamic XOFF
    // threshold, so PFC holds the senders, and nothing is lost.
    Fabric f(make(kIncast9), 1);
    add_incast_flows(f, Bytes{512 << 10});
    f.start();
    f.run(Nanos::from_ms(20));
    ASSERT_TRUE(f.all_done());
    const Totals t = f.totals();
    EXPECT_GT(t.pfc_xoff, 0u);
    EXPECT_GT(t.nic_paused, Nanos{0});
    EXPECT_EQ(t.switch_drops, 0u);
    EXPECT_EQ(t.nic_drops, 0u);
}

// flows.csv's rates are means over Recorder::kRateSamples samples. 32 RC
// flows into one 100 Gbit/s port get ~3 Gbit/s each, about one 4 KiB packet
// per 10 us sample, so one sample reads 0, 3.3 or 6.6 Gbit/s; the means
// stay near the share.
TEST(FabricReport, FlowRatesAreMeansThatShowEachFlowsShare) {
    Fabric f(make(kIncast9), 1);
    add_incast_flows(f, Bytes{64 << 20});
    Recorder rec(f, "incast");
    f.start();
    f.run(Nanos::from_us(600), Nanos::from_us(10), [&](Nanos now) { rec.sample(now); });
    const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "fabric_rate_means";
    std::filesystem::remove_all(dir);
    rec.write(dir.string());
    std::ifstream csv(dir / "incast_flows.csv");
    std::string line;
    ASSERT_TRUE(std::getline(csv, line));  // the header
    std::size_t rows = 0, swinging = 0;
    for (std::size_t r = 0; std::getline(csv, line); ++r) {
        std::vector<double> v;
        for (std::size_t at = line.find(','); at != std::string::npos; at = line.find(',', at + 1))
            v.push_back(std::stod(line.substr(at + 1)));
        ASSERT_EQ(v.size(), 32u) << line;
        if (rec.time(r) < Nanos::from_us(200)) continue;
        double sum = 0;
        for (const double x : v) sum += x;
        for (std::size_t k = 0; k < v.size(); ++k) {
            EXPECT_GT(v[k], 0.5 * sum / 32) << "row " << r << ": " << line;
            EXPECT_LT(v[k], 1.5 * sum / 32) << "row " << r << ": " << line;
            swinging += rec.flow_rate(r, k) == 0;  // one sample alone
        }
        ++rows;
    }
    EXPECT_GE(rows, 35u);
    EXPECT_GT(swinging, 0u);
}

TEST(FabricRun, StuckRcReceiverPausesItsPortAndStopsCompletions) {
    Fabric f(make("topology: {kind: leaf_spine, leaves: 1, hosts_per_leaf: 3, spines: 0}\nnic: {cc: none}\n"
                  "switch: {profile: lossless-100g}\n"),
             1);
    const uint32_t id = f.add_flow(FlowSpec{0, 2, Bytes{1ull << 30}, Nanos{0}, 0xC001});
    f.stall(2, Nanos::from_us(100));
    EXPECT_THROW(f.stall(3, Nanos{0}), std::invalid_argument);
    f.start();
    f.run(Nanos::from_us(150));
    const uint64_t acked = f.stats()[id].rx_bytes;
    EXPECT_GT(acked, 0u);
    f.run(Nanos::from_ms(2));
    // Nothing completes once the receiver is stuck; its pauses reach the
    // leaf, which holds what the sender's window lets through, and nothing is dropped.
    EXPECT_EQ(f.stats()[id].rx_bytes, acked);
    const EngineNic& stuck = *f.rc_nics()[2];
    EXPECT_GT(stuck.counters().pfc_tx, 2u);  // refreshed every half pause time
    const Totals t = f.totals();
    EXPECT_EQ(t.switch_drops, 0u);
    EXPECT_GE(t.pfc_frames, stuck.counters().pfc_tx);
    EXPECT_EQ(t.nic_drops, stuck.counters().stalled_drops);
    const SwitchNode& leaf = *f.switches()[0];
    EXPECT_GT(leaf.core().port_paused_time(static_cast<sw::PortId>(f.topology().nics[2].sw_port), f.now()),
              Nanos::from_ms(1));
}

TEST(FabricRun, StuckGeneratorReceiverPausesItsPortAndStopsGoodput) {
    Fabric f(make("topology: {kind: leaf_spine, leaves: 1, hosts_per_leaf: 3, spines: 0}\n"
                  "nic: {cc: none, model: generator}\nswitch: {profile: lossless-100g}\n"),
             1);
    const uint32_t id = f.add_flow(FlowSpec{0, 2, Bytes{1ull << 30}, Nanos{0}, 0xC001});
    f.stall(2, Nanos::from_us(100));
    f.start();
    f.run(Nanos::from_us(150));
    const uint64_t got = f.stats()[id].rx_bytes;
    EXPECT_GT(got, 0u);
    f.run(Nanos::from_ms(2));
    EXPECT_EQ(f.stats()[id].rx_bytes, got);
    const GenNic& stuck = *f.nics()[2];
    EXPECT_GT(stuck.counters().pfc_tx, 2u);
    EXPECT_TRUE(f.nic_paused(0, f.now())) << "the pause spreads back to the unwindowed sender";
    EXPECT_EQ(f.totals().switch_drops, 0u);
}

TEST(FabricRun, DcqcnReactsToMarksWithCnps) {
    Fabric f(make("topology: {kind: dumbbell, left_hosts: 4, right_hosts: 1}\nnic: {cc: connectx-default}\n"
                  "switch: {profile: lossless-100g}\n"),
             1);
    for (uint32_t s = 0; s < 4; ++s)
        f.add_flow(FlowSpec{s, 4, Bytes{8 << 20}, Nanos{0}, static_cast<uint16_t>(0xC000 + s)});
    f.start();
    f.run(Nanos::from_ms(50));
    ASSERT_TRUE(f.all_done());
    const Totals t = f.totals();
    EXPECT_GT(t.cnps, 0u);
    uint64_t cnp_rx = 0;
    for (const FlowStats& s : f.stats()) cnp_rx += s.cnp_rx;
    EXPECT_EQ(cnp_rx, t.cnps);  // lossless: every CNP reaches its sender
}

TEST(FabricRun, RcRingAllReduceRunsItsStepsInOrder) {
    const Topology topo = make(kLeafSpine);
    Workload w;
    w.pattern = Pattern::RingAllReduce;
    w.size = Bytes{4 << 20};
    Rng rng(3);
    const std::vector<FlowSpec> flows = make_flows(topo, w, rng);
    const uint32_t n = topo.nic_count();
    ASSERT_EQ(flows.size(), n);
    Fabric f(topo, 1);
    for (const FlowSpec& fl : flows) {
        EXPECT_EQ(fl.steps, 2 * (n - 1));
        EXPECT_EQ(fl.dst, (fl.src + 1) % n);
        EXPECT_EQ(flows[fl.after].dst, fl.src);  // waits for the data it forwards
        f.add_flow(fl);
    }
    f.start();
    f.run(Nanos::from_ms(20));
    ASSERT_TRUE(f.all_done());
    Nanos first = Nanos::max(), last{};
    for (const FlowStats& s : f.stats()) {
        EXPECT_EQ(s.rx_bytes, w.size.v / n * 2 * (n - 1));
        first = std::min(first, s.first_tx);
        last = std::max(last, s.last_rx);
    }
    // Steps are sequential: each costs at least a chunk's serialisation and
    // the one-way trip of its data over two host links (1 us), so the whole
    // cannot beat 2(n-1) chunks back to back plus that per step; nor should
    // it take many times that.
    const Nanos chunk = BitsPerSec::gbps(100).serialise(Bytes{w.size.v / n});
    const Nanos floor = chunk * (2 * (n - 1)) + Nanos{1000} * (2 * (n - 1));
    EXPECT_GT(last - first, floor);
    EXPECT_LT(last - first, floor * 2);
    EXPECT_EQ(f.totals().switch_drops, 0u);
}

// First WRITE of any flow to the last completion of any.
Nanos completion(const Fabric& f) {
    Nanos first = Nanos::max(), last{};
    for (const FlowStats& s : f.stats()) {
        first = std::min(first, s.first_tx);
        last = std::max(last, s.last_rx);
    }
    return last - first;
}

// The workload's flows (drawn with Rng(3)) on a fresh fabric, run for up to
// 20 simulated ms.
std::unique_ptr<Fabric> run_workload(const Topology& topo, Pattern p, Bytes size) {
    Workload w;
    w.pattern = p;
    w.size = size;
    Rng rng(3);
    auto f = std::make_unique<Fabric>(topo, 1);
    for (const FlowSpec& fl : make_flows(topo, w, rng)) f->add_flow(fl);
    f->start();
    f->run(Nanos::from_ms(20));
    return f;
}

// An RC NIC holds a QP per flow it sends or receives: the target of a
// 1070:1 incast holds 1070, past the transport engine's default limit of
// 1024 QPs, which stopped such a fabric with "max_qp reached" until 7
// December.
TEST(FabricRun, AnIncastOfMoreThanAThousandSendersRuns) {
    const Topology topo = make(
        "topology: {kind: leaf_spine, leaves: 17, hosts_per_leaf: 63, spines: 1}\nswitch: {profile: lossless-100g}\n");
    ASSERT_EQ(topo.nic_count(), 1071u);
    const auto f = run_workload(topo, Pattern::Incast, Bytes{64});
    ASSERT_TRUE(f->all_done());
    uint64_t rx = 0;
    for (const FlowStats& s : f->stats()) rx += s.rx_bytes;
    EXPECT_EQ(rx, 1070u * 64);
}

// A step counts as arrived once its bytes are all in, and only after every
// step before it: chunks over several QPs come in any order between them.
TEST(FabricWorkload, StepArrivalsCountWholeStepsInOrder) {
    StepArrivals a(10, 3);  // steps of 3, 3 and 4 bytes
    EXPECT_EQ(a.add(1, 3), 0u);  // step 1 whole, step 0 not yet
    EXPECT_EQ(a.add(0, 2), 0u);
    EXPECT_EQ(a.add(7, 100), 0u);  // no such step: nothing counted
    EXPECT_EQ(a.add(0, 1), 2u);  // step 0 whole: steps 0 and 1 arrived
    EXPECT_EQ(a.arrived(), 2u);
    EXPECT_FALSE(a.complete());
    EXPECT_EQ(a.add(2, 3), 0u);  // the last step takes the remainder
    EXPECT_EQ(a.add(2, 1), 1u);
    EXPECT_TRUE(a.complete());
}

// Halving-doubling over 8 ranks: 2 log2(8) = 6 stages of one flow per rank,
// partners at distance 1, 2, 4 then 4, 2, 1 (rank XOR distance) with size/2
// ... size/8 and back; every rank sends what a ring sends in all.
TEST(FabricWorkload, HalvingDoublingPairsRanksByDistanceAndWaitsForTheStageBefore) {
    const Topology topo = make(
        "topology: {kind: leaf_spine, leaves: 2, hosts_per_leaf: 4, spines: 2}\n"
        "switch: {profile: lossless-100g}\n");
    const uint32_t n = topo.nic_count();
    ASSERT_EQ(n, 8u);
    Workload w;
    w.pattern = Pattern::HdAllReduce;
    w.size = Bytes{1 << 20};
    Rng rng(5);
    const std::vector<FlowSpec> flows = make_flows(topo, w, rng);
    ASSERT_EQ(flows.size(), 6 * n);
    const uint32_t dist[] = {1, 2, 4, 4, 2, 1};
    std::vector<uint64_t> sent(n, 0);
    std::set<std::tuple<uint32_t, uint32_t, uint16_t>> keys;
    for (uint32_t i = 0; i < flows.size(); ++i) {
        const FlowSpec& f = flows[i];
        const uint32_t stage = i / n;
        EXPECT_EQ(f.dst, f.src ^ dist[stage]) << "flow " << i;
        EXPECT_EQ(f.size.v, w.size.v / (2 * dist[stage])) << "flow " << i;
        EXPECT_EQ(f.steps, 1u);
        EXPECT_TRUE(keys.insert({f.src, f.dst, f.sport}).second) << "flow " << i << ": its QP key is taken";
        sent[f.src] += f.size.v;
        if (stage == 0) {
            EXPECT_FALSE(f.gated());
            continue;
        }
        // It is behind its own flow of the stage before and gated by the
        // one that brought the stage's data, whose arrival is reported.
        ASSERT_TRUE(f.gated()) << "flow " << i;
        const FlowSpec& own = flows[f.behind];
        const FlowSpec& in = flows[f.gate];
        EXPECT_EQ(f.behind / n, stage - 1);
        EXPECT_EQ(f.gate / n, stage - 1);
        EXPECT_EQ(own.src, f.src);
        EXPECT_EQ(in.dst, f.src);
        EXPECT_EQ(in.src, f.src ^ dist[stage - 1]);
        EXPECT_TRUE(in.reports_arrival());
    }
    for (uint32_t r = 0; r < n; ++r) EXPECT_EQ(sent[r], w.size.v / n * 2 * (n - 1)) << "rank " << r;
    EXPECT_DOUBLE_EQ(busbw_factor(Pattern::HdAllReduce, n), busbw_factor(Pattern::RingAllReduce, n));
}

TEST(FabricWorkload, SizesParseWithBinarySuffixesWithinOneTebibyte) {
    EXPECT_EQ(parse_size("4096"), Bytes{4096});
    EXPECT_EQ(parse_size("64K"), Bytes{64 << 10});
    EXPECT_EQ(parse_size("16m"), Bytes{16 << 20});
    EXPECT_EQ(parse_size("1G"), Bytes{1ull << 30});
    EXPECT_EQ(parse_size("1024G"), kMaxSize);
    for (const char* bad : {"", "0", "0K", "K", "-1", "+1", " 1", "1 ", "1.5M", "1KB", "1T", "1025G", "1099511627777",
                            "99999999999999999999999", "17179869185G"})
        EXPECT_FALSE(parse_size(bad)) << "'" << bad << "'";
}

// nccl-tests' -b 8 -e 128M -f 2 and -b 1M -e 4M -i 1M.
TEST(FabricWorkload, SizeRangesStepAsNcclTestsDo) {
    std::string error;
    const std::vector<Bytes> doubling = size_range(Bytes{8}, Bytes{128 << 20}, 2, Bytes{1 << 20}, error);
    ASSERT_EQ(doubling.size(), 25u) << error;
    for (size_t i = 0; i < doubling.size(); ++i) EXPECT_EQ(doubling[i].v, uint64_t{8} << i);
    EXPECT_EQ(size_range(Bytes{8 << 10}, Bytes{1 << 20}, 4, Bytes{0}, error),
              (std::vector<Bytes>{Bytes{8 << 10}, Bytes{32 << 10}, Bytes{128 << 10}, Bytes{512 << 10}}));
    EXPECT_EQ(size_range(Bytes{1 << 20}, Bytes{4 << 20}, 1, Bytes{1 << 20}, error),
              (std::vector<Bytes>{Bytes{1 << 20}, Bytes{2 << 20}, Bytes{3 << 20}, Bytes{4 << 20}}));
    EXPECT_EQ(size_range(Bytes{5}, Bytes{5}, 2, Bytes{0}, error), std::vector<Bytes>{Bytes{5}});
    // Near the top of the range nothing overflows into a small size.
    EXPECT_EQ(size_range(Bytes{UINT64_MAX - 1}, Bytes{UINT64_MAX}, 1, Bytes{UINT64_MAX}, error).size(), 1u);
    EXPECT_EQ(size_range(Bytes{1ull << 62}, Bytes{UINT64_MAX}, 4, Bytes{0}, error).size(), 1u);
    const auto refused = [&](Bytes lo, Bytes hi, uint64_t f, Bytes step, const char* why) {
        std::string e;
        EXPECT_TRUE(size_range(lo, hi, f, step, e).empty()) << why;
        EXPECT_NE(e.find(why), std::string::npos) << e;
    };
    refused(Bytes{2}, Bytes{1}, 2, Bytes{0}, "larger than the largest");
    refused(Bytes{1}, Bytes{8}, 1, Bytes{0}, "a step of 0 B");
    refused(Bytes{0}, Bytes{8}, 2, Bytes{0}, "sizes start at 1 B");
    refused(Bytes{1}, Bytes{1 << 20}, 1, Bytes{1024}, "more than 128 sizes");
}

TEST(FabricWorkload, CollectivesRefuseSizesAndRankCountsTheyCannotSplit) {
    const Topology eight = make(kLeafSpine8);
    EXPECT_EQ(workload_problem(eight, Pattern::HdAllReduce, Bytes{1 << 20}), "");
    EXPECT_NE(workload_problem(eight, Pattern::HdAllReduce, Bytes{4}).find("sizes start at 8 B"), std::string::npos);
    EXPECT_NE(workload_problem(eight, Pattern::RingAllReduce, Bytes{7}).find("sizes start at 8 B"), std::string::npos);
    EXPECT_NE(workload_problem(eight, Pattern::AllToAll, Bytes{7}).find("sizes start at 8 B"), std::string::npos);
    EXPECT_EQ(workload_problem(eight, Pattern::Permutation, Bytes{1}), "");
    const Topology six = make(
        "topology: {kind: leaf_spine, leaves: 2, hosts_per_leaf: 3, spines: 2}\nswitch: {profile: lossless-100g}\n");
    const std::string why = workload_problem(six, Pattern::HdAllReduce, Bytes{1 << 20});
    EXPECT_NE(why.find("power-of-two number of ranks; the fabric has 6"), std::string::npos) << why;
    EXPECT_EQ(workload_problem(six, Pattern::RingAllReduce, Bytes{1 << 20}), "");
    Rng rng(1);
    Workload w;
    w.pattern = Pattern::HdAllReduce;
    EXPECT_TRUE(make_flows(six, w, rng).empty());
    // A single NIC: nothing to send anywhere, for every pattern (all_to_all
    // printed a row of zeros until 7 December).
    const Topology one = make(
        "topology: {kind: leaf_spine, leaves: 1, hosts_per_leaf: 1, spines: 0}\nswitch: {profile: lossless-100g}\n");
    for (const Pattern p :
         {Pattern::Incast, Pattern::Permutation, Pattern::AllToAll, Pattern::RingAllReduce, Pattern::HdAllReduce})
        EXPECT_NE(workload_problem(one, p, Bytes{1 << 20}).find("at least 2"), std::string::npos) << pattern_name(p);
}

// On RC a stage opens only when the data it reduces and sends on has
// arrived (its gate, the partner's flow of the stage before) and the rank's
// own flow of the stage before has opened: no flow's first WRITE leaves
// before either. The gate's data arrives before its sender's last
// completion, the ACK's one-way trip later.
TEST(FabricRun, RcHalvingDoublingRunsItsStagesInOrder) {
    for (const bool spray : {false, true}) {
        SCOPED_TRACE(spray ? "spraying" : "one path per flow");
        const Topology topo = make(std::string(kLeafSpine8) + (spray ? "nic: {spraying: true}\n" : ""));
        Workload w;
        w.pattern = Pattern::HdAllReduce;
        w.size = Bytes{1 << 20};
        Rng rng(3);
        const std::vector<FlowSpec> flows = make_flows(topo, w, rng);
        Fabric f(topo, 1);
        for (const FlowSpec& fl : flows) f.add_flow(fl);
        f.start();
        f.run(Nanos::from_ms(20));
        ASSERT_TRUE(f.all_done());
        EXPECT_EQ(f.totals().switch_drops, 0u);
        const std::vector<FlowStats>& st = f.stats();
        uint32_t before_the_acks = 0;
        for (uint32_t i = 0; i < flows.size(); ++i) {
            EXPECT_EQ(st[i].rx_bytes, flows[i].size.v);
            EXPECT_GT(f.arrived_at(i), Nanos{0}) << "flow " << i << ": its arrival was not reported";
            EXPECT_LT(f.arrived_at(i), st[i].last_rx) << "flow " << i;
            if (!flows[i].gated()) continue;
            EXPECT_GE(st[i].first_tx, f.arrived_at(flows[i].gate)) << "flow " << i;
            EXPECT_GE(st[i].first_tx, st[flows[i].behind].first_tx) << "flow " << i;
            before_the_acks += st[i].first_tx < st[flows[i].gate].last_rx;
        }
        EXPECT_GT(before_the_acks, 0u) << "every stage waited for its gate's ACKs";
        // The first stage alone sends size/2 from every rank.
        EXPECT_GT(completion(f), BitsPerSec::gbps(100).serialise(Bytes{w.size.v / 2}));
    }
}

// This process's resident memory (/proc/self/statm).
uint64_t resident_bytes() {
    std::ifstream in("/proc/self/statm");
    uint64_t size = 0, resident = 0;
    in >> size >> resident;
    return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// A spraying RC QP's reorder buffer is about 1 MiB (a page for each of 256
// PSNs), of which reordering fills a few slots (here oblivious spraying:
// the switches hash each packet's UDP port). A 16-host all-to-all has 480
// such QPs: had their buffers been resident (as they were when they came from
// the fabric's heap segment, on huge pages), the run would have added 500
// MiB.
TEST(FabricRun, SprayingReorderBuffersCommitOnlyTheSlotsReorderingFills) {
    const Topology topo = make(
        "topology: {kind: leaf_spine, leaves: 2, hosts_per_leaf: 8, spines: 4}\n"
        "links: {host: {speed_gbps: 100, delay_ns: 500}, fabric: {speed_gbps: 100, delay_ns: 1000}}\n"
        "nic: {spraying: true}\nswitch: {profile: lossless-100g, adaptive_routing: off}\n");
    Workload w;
    w.pattern = Pattern::AllToAll;
    w.size = Bytes{1 << 20};
    Rng rng(1);
    const std::vector<FlowSpec> flows = make_flows(topo, w, rng);
    ASSERT_EQ(flows.size(), 240u);
    const uint64_t buffers = 2 * flows.size() * transport::Qp::reorder_bytes(transport::QpInitAttr{}.reorder_window);
    const uint64_t before = resident_bytes();
    Fabric f(topo, 1);
    for (const FlowSpec& fl : flows) f.add_flow(fl);
    f.start();
    f.run(Nanos::from_ms(20));
    ASSERT_TRUE(f.all_done());
    uint64_t out_of_order = 0;
    for (const auto& n : f.rc_nics()) out_of_order += n->engine().counters().out_of_seq_request;
    EXPECT_GT(out_of_order, 0u) << "no reordering: the buffers were not used";
    const uint64_t grown = resident_bytes() - before;
    EXPECT_LT(grown, buffers / 4) << "resident memory grew by " << (grown >> 20) << " MiB; the reorder buffers take "
                                  << (buffers >> 20) << " MiB";
}

// Where latency rules (64 KiB over 8 ranks: 8 KiB ring chunks), 6 stages
// beat the ring's 14 steps; both wait for the data, not for the ACKs.
TEST(FabricRun, RcHalvingDoublingBeatsTheRingOnSmallSizes) {
    const Topology topo = make(kLeafSpine8);
    Nanos took[2];
    for (const Pattern p : {Pattern::RingAllReduce, Pattern::HdAllReduce}) {
        const auto f = run_workload(topo, p, Bytes{64 << 10});
        ASSERT_TRUE(f->all_done()) << pattern_name(p);
        took[p == Pattern::HdAllReduce] = completion(*f);
    }
    EXPECT_LT(took[1] * 10, took[0] * 9) << "ring " << took[0].us() << " us, halving-doubling " << took[1].us() << " us";
}

// A ring step opens once the data it forwards has arrived, as NCCL's do,
// not once its own previous step's ACKs are back: with slow host links (2 us
// each way, 100 ns between switches) a step's data needs about 4 us, its
// round trip about 8. So 14 steps of a small all-reduce over 8 ranks take
// more than 14 one-way trips and far less than 14 round trips.
TEST(FabricRun, RcRingStepsOpenOnTheDataNotOnTheAcks) {
    const Topology topo = make(
        "topology: {kind: leaf_spine, leaves: 2, hosts_per_leaf: 4, spines: 2}\n"
        "links: {host: {speed_gbps: 100, delay_ns: 2000}, fabric: {speed_gbps: 100, delay_ns: 100}}\n"
        "switch: {profile: lossless-100g}\n");
    const uint32_t n = topo.nic_count();
    ASSERT_EQ(n, 8u);
    const Bytes size{8 << 10};
    const auto f = run_workload(topo, Pattern::RingAllReduce, size);
    ASSERT_TRUE(f->all_done());
    const Nanos one_way = Nanos{2 * 2000};
    const Nanos took = completion(*f);
    EXPECT_GT(took, one_way * (2 * (n - 1)));
    EXPECT_LT(took, one_way * 2 * (2 * (n - 1)) * 3 / 4) << took.us() << " us";
    // Every step's data was counted in by its receiver.
    for (uint32_t i = 0; i < n; ++i) EXPECT_EQ(f->stats()[i].rx_bytes, size.v / n * 2 * (n - 1));
}

// As the ring's steps, a halving-doubling stage opens once its partner's
// data of the stage before has arrived, not once the ACKs are back: over
// the same slow host links, 6 stages over 8 ranks take more than 6 one-way
// trips and far less than 6 round trips (an MPI sendrecv's wait, until 7
// December: 6 round trips and more).
TEST(FabricRun, RcHalvingDoublingStagesOpenOnTheDataNotOnTheAcks) {
    const Topology topo = make(
        "topology: {kind: leaf_spine, leaves: 2, hosts_per_leaf: 4, spines: 2}\n"
        "links: {host: {speed_gbps: 100, delay_ns: 2000}, fabric: {speed_gbps: 100, delay_ns: 100}}\n"
        "switch: {profile: lossless-100g}\n");
    ASSERT_EQ(topo.nic_count(), 8u);
    const uint32_t stages = 6;
    const auto f = run_workload(topo, Pattern::HdAllReduce, Bytes{8 << 10});
    ASSERT_TRUE(f->all_done());
    const Nanos one_way = Nanos{2 * 2000};
    const Nanos took = completion(*f);
    EXPECT_GT(took, one_way * stages);
    EXPECT_LT(took, one_way * 2 * stages * 3 / 4) << took.us() << " us";
}

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

// A capture whose file cannot take the frames (a full disk) says so once
// the run has flushed it, rather than leaving a short pcap behind unnoticed.
TEST(FabricRun, ACaptureThatCannotBeWrittenIsReported) {
    const Topology topo = make(kLeafSpine);
    Fabric f(topo, 7);
    f.add_flow(FlowSpec{0, 2, Bytes{1 << 20}, Nanos{0}, 0xC000});
    std::string err;
    ASSERT_TRUE(f.capture("leaf0-spine1", "/dev/full", err)) << err;
    ASSERT_TRUE(f.capture("leaf0-spine0", ::testing::TempDir() + "/fabric_capture_ok.pcap", err)) << err;
    f.start();
    f.run(Nanos::from_ms(20));
    ASSERT_TRUE(f.all_done());
    EXPECT_NE(f.capture_error().find("No space left"), std::string::npos) << f.capture_error();
}

TEST(FabricRun, SameSeedGivesIdenticalCountersAndPcaps) {
    const Topology topo = make(std::string(kLeafSpine) + "nic: {spraying: true}\n");
    const std::string dir = ::testing::TempDir();
    Totals totals[2];
    std::string pcaps[2];
    for (int run = 0; run < 2; ++run) {
        Fabric f(topo, 7);
        for (uint32_t s = 0; s < 4; ++s)
            f.add_flow(FlowSpec{s, (s + 2) % 4, Bytes{1 << 20}, Nanos{0}, static_cast<uint16_t>(0xC000 + 17 * s)});
        const std::string path = dir + "/fabric_det_" + std::to_string(run) + ".pcap";
        std::string err;
        ASSERT_TRUE(f.capture("leaf0-spine1", path, err)) << err;
        f.start();
        f.run(Nanos::from_ms(20));
        totals[run] = f.totals();
        pcaps[run] = slurp(path);
    }
    EXPECT_EQ(totals[0], totals[1]);
    EXPECT_GT(pcaps[0].size(), 1000u);
    EXPECT_TRUE(pcaps[0] == pcaps[1]);
}

// A run calls its tick every kTickEvents events, with virtual time that
// never goes back, and changes nothing by it: same totals as without.
TEST(FabricRun, TicksEveryKTickEventsAndChangesNothing) {
    const Topology topo = make(std::string(kLeafSpine));
    Totals totals[2];
    uint64_t ticks = 0, events = 0;
    for (int run = 0; run < 2; ++run) {
        Fabric f(topo, 7);
        for (uint32_t s = 0; s < 4; ++s)
            f.add_flow(FlowSpec{s, (s + 2) % 4, Bytes{16 << 20}, Nanos{0}, static_cast<uint16_t>(0xC000 + 17 * s)});
        f.start();
        const uint64_t before = f.totals().sim_events;
        Nanos last{};
        if (run == 0) {
            f.run(Nanos::from_ms(20));
        } else {
            f.run(Nanos::from_ms(20), Nanos{0}, {}, [&](Nanos now) {
                EXPECT_GE(now, last);
                last = now;
                ++ticks;
                return false;
            });
        }
        totals[run] = f.totals();
        events = totals[run].sim_events - before;
    }
    EXPECT_EQ(totals[0], totals[1]);
    ASSERT_GT(events, 2 * uint64_t{Fabric::kTickEvents});
    EXPECT_EQ(ticks, events / Fabric::kTickEvents);
}

// A tick that returns true stops the run right there (a user's Ctrl-C): the
// third tick's event is the last one run, the flows are not done, and the
// virtual time reached is the third tick's.
TEST(FabricRun, ATickThatReturnsTrueStopsTheRun) {
    const Topology topo = make(std::string(kLeafSpine));
    Fabric f(topo, 7);
    for (uint32_t s = 0; s < 4; ++s)
        f.add_flow(FlowSpec{s, (s + 2) % 4, Bytes{32 << 20}, Nanos{0}, static_cast<uint16_t>(0xC000 + 17 * s)});
    f.start();
    const uint64_t before = f.totals().sim_events;
    int ticks = 0;
    Nanos third{};
    const Nanos reached = f.run(Nanos::from_ms(20), Nanos{0}, {}, [&](Nanos now) {
        third = now;
        return ++ticks == 3;
    });
    EXPECT_EQ(ticks, 3);
    EXPECT_EQ(f.totals().sim_events - before, 3 * uint64_t{Fabric::kTickEvents});
    EXPECT_EQ(reached, third);
    EXPECT_LT(reached, Nanos::from_ms(20));
    EXPECT_FALSE(f.all_done());
}

// The RC model counts a flow's receive side at its receiving QP: every data
// frame sent arrives once on a lossless fabric, and only spraying (per-packet
// source ports hashed over the spines) brings frames out of order.
TEST(FabricRun, RcFlowStatsCountTheReceiverSide) {
    // Three hosts a leaf over two spines: the spines' queues build unevenly.
    // One path per flow is flow-hash ECMP: the profile's per-packet adaptive
    // routing moves a flow's packets between the spines by queue depth and
    // can reorder them (on this fabric 14 frames with seed 5 and none with
    // seeds 1-4 and 6; how same-nanosecond departures and arrivals were
    // ordered decided it: 40-51 on every seed while they ran in scheduling
    // order, none before switch ports became timer events of their own).
    const std::string fabric =
        "topology: {kind: leaf_spine, leaves: 2, hosts_per_leaf: 3, spines: 2}\n"
        "links: {host: {speed_gbps: 100, delay_ns: 500}, fabric: {speed_gbps: 100, delay_ns: 1000}}\n";
    for (const bool spray : {false, true}) {
        SCOPED_TRACE(spray ? "spraying" : "one path per flow");
        Fabric f(make(fabric + (spray ? "nic: {spraying: true}\nswitch: {profile: lossless-100g}\n"
                                      : "nic: {spraying: false}\n"
                                        "switch: {profile: lossless-100g, adaptive_routing: \"off\"}\n")),
                 3);
        ASSERT_EQ(f.model(), NicModel::Rc);
        for (uint32_t s = 0; s < 3; ++s)
            f.add_flow(FlowSpec{s, s + 3, Bytes{2 << 20}, Nanos{0}, static_cast<uint16_t>(0xC000 + 17 * s)});
        f.start();
        // Bytes arrive no faster than the host link carries them: a flow's
        // received bytes count packets as the receiver executes them, not
        // 64 KiB WRITEs as their ACKs come back (bunched by the ACKs'
        // queueing, those showed 2-3x the line rate over one sample).
        const Nanos every = Nanos::from_us(10);
        const double most = 100e9 / 8 * every.seconds();
        std::vector<uint64_t> before(3, 0);
        double fastest = 0;
        f.run(Nanos::from_ms(20), every, [&](Nanos) {
            for (std::size_t i = 0; i < 3; ++i) {
                fastest = std::max(fastest, static_cast<double>(f.stats()[i].rx_bytes - before[i]));
                before[i] = f.stats()[i].rx_bytes;
            }
        });
        ASSERT_TRUE(f.all_done());
        ASSERT_EQ(f.totals().switch_drops, 0u);
        EXPECT_LE(fastest, most);
        EXPECT_GT(fastest, most / 2);
        uint64_t ooo = 0;
        for (const FlowStats& s : f.stats()) {
            EXPECT_GT(s.tx_pkts, 0u);
            EXPECT_EQ(s.rx_pkts, s.tx_pkts);
            EXPECT_EQ(s.rx_bytes, uint64_t{2} << 20);
            ooo += s.rx_out_of_order;
        }
        if (spray) {
            EXPECT_GT(ooo, 0u);
        } else {
            EXPECT_EQ(ooo, 0u);
        }
    }
}

// Two generator NICs joined by one cable whose a->b direction corrupts the
// ICRC of a fraction of the frames. The receiver skips reading payloads the
// frame pool knows to be zero; a frame the link wrote into is not one of
// them, so every corrupted frame is still dropped as a bad frame, and every
// other one is received.
struct CorruptedCable {
    uint64_t corrupted = 0, tx_pkts = 0, rx_pkts = 0, bad_frames = 0;
};
CorruptedCable run_corrupted_cable(double rate) {
    const Topology topo = make(std::string(kLeafSpine) + "nic: {cc: none, model: generator}\n");
    sim::Simulator sim(sim::SimConfig{5, 1u << 12});
    std::vector<FlowStats> stats(1);
    uint32_t done = 0;
    GenNic a(sim, topo, 0, stats, done), b(sim, topo, 1, stats, done);
    a.attach();
    b.attach();
    sim::LinkConfig ab = link_config(topo.cfg.host_link);
    ab.corrupt_rate = rate;
    ab.corrupt_as = sim::Corruption::BadIcrc;
    const sim::LinkId to_b = sim.add_link(a.node_id(), 0, b.node_id(), 0, ab);
    sim.add_link(b.node_id(), 0, a.node_id(), 0, link_config(topo.cfg.host_link));
    // Payloads of 4096 and a last one of 1001 bytes (with pad).
    const FlowSpec f{0, 1, Bytes{200 * 4096 + 1001}, Nanos{0}, 0xC001};
    a.add_tx_flow(0, f, topo.nics[1]);
    b.add_rx_flow(0, f);
    a.start();
    b.start();
    sim.run_until_idle();
    return {sim.link(to_b).counters().corrupted, stats[0].tx_pkts, stats[0].rx_pkts, b.counters().bad_frame_drops};
}

TEST(FabricRun, GeneratorDropsEveryFrameACorruptingLinkChangedAsABadIcrc) {
    const CorruptedCable clean = run_corrupted_cable(0.0);
    EXPECT_GT(clean.tx_pkts, 200u);
    EXPECT_EQ(clean.rx_pkts, clean.tx_pkts);
    EXPECT_EQ(clean.bad_frames, 0u);

    const CorruptedCable some = run_corrupted_cable(0.3);
    EXPECT_GT(some.corrupted, 20u);
    EXPECT_LT(some.corrupted, some.tx_pkts);
    EXPECT_EQ(some.bad_frames, some.corrupted);
    EXPECT_EQ(some.rx_pkts + some.bad_frames, some.tx_pkts);

    const CorruptedCable all = run_corrupted_cable(1.0);
    EXPECT_EQ(all.bad_frames, all.tx_pkts);
    EXPECT_EQ(all.rx_pkts, 0u);
}

// Every drop of the totals has a cause, and the causes add up to them: a
// lossy 8:1 incast of line-rate generators (DSCP 0: no PFC) overflows the
// bottleneck's queue.
TEST(FabricRun, DropReasonsNameEveryDropOfTheTotals) {
    Fabric f(make("topology: {kind: incast}\nnic: {cc: none, dscp: 0, model: generator}\n"), 3);
    for (uint32_t s = 0; s < 8; ++s)
        f.add_flow(FlowSpec{s, 8, Bytes{4 << 20}, Nanos{0}, static_cast<uint16_t>(0xC000 + s)});
    f.start();
    f.run(Nanos::from_ms(50));
    const Totals t = f.totals();
    const std::vector<DropCount> causes = f.drop_reasons();
    uint64_t sum = 0;
    bool switch_cause = false;
    for (const DropCount& c : causes) {
        EXPECT_GT(c.count, 0u) << c.cause;
        sum += c.count;
        switch_cause |= c.cause.starts_with("switch ");
    }
    EXPECT_GT(t.switch_drops, 0u);
    EXPECT_TRUE(switch_cause);
    EXPECT_EQ(sum, t.switch_drops + t.nic_drops);
}

TEST(FabricRun, UnknownCaptureLinkIsAnError) {
    Fabric f(make(kLeafSpine), 1);
    std::string err;
    EXPECT_FALSE(f.capture("nowhere", "/tmp/x.pcap", err));
    EXPECT_NE(err.find("'nowhere'"), std::string::npos);
}

}  // namespace
}  // namespace rocemu::fabric
