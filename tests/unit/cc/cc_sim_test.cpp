// Validation of the DCQCN cores in virtual time on the cc/sim bottleneck
// model: fairness, utilisation and queue depth for 2-16 flows, and the
// presets compared (CSV time series plus a gnuplot script).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>

#include "cc/dcqcn_rp.hpp"
#include "cc/sim/bottleneck.hpp"

namespace rocemu::cc::sim {
namespace {

using namespace rocemu::literals;

BottleneckConfig scenario(const char* preset, int flows, uint64_t seed, Nanos duration) {
    BottleneckConfig c;
    const CcConfigResult r = load_cc_preset(preset);
    EXPECT_TRUE(r.ok()) << r.error;
    c.cc = r.config;
    c.flows = flows;
    c.seed = seed;
    c.flow_start_gap = 100_us;  // each newcomer starts at line rate against settled flows
    c.duration = duration;
    return c;
}

class CcSimFairness : public ::testing::TestWithParam<std::tuple<Fabric, int>> {};

TEST_P(CcSimFairness, ConvergesFairAndFullWithQueueInTheMarkingBand) {
    const auto [fabric, n] = GetParam();
    BottleneckConfig c = scenario("dcqcn-paper", n, 100 + n, 200_ms);
    c.fabric = fabric;
    const BottleneckResult r = Bottleneck(c).run();
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.fabric_drops, 0u);
    const Nanos from = c.duration / 2;
    const WindowStats w = window_stats(c, r, from, c.duration);
    EXPECT_GE(w.jain, 0.99);
    EXPECT_GE(w.utilisation, 0.95);
    EXPECT_LE(w.utilisation, 1.0);
    // Congestion control, not PFC, holds the queue: it reaches the marking
    // band, stays under Kmax, and no XOFF is sent after convergence.
    EXPECT_GE(w.max_queue_bytes, static_cast<double>(c.kmin.v));
    EXPECT_LT(w.frac_above_kmax, 0.01);
    EXPECT_LT(w.max_queue_bytes, static_cast<double>(c.pfc_xoff.v));
    EXPECT_TRUE(r.last_xoff == Nanos::max() || r.last_xoff < from) << "last XOFF at " << r.last_xoff.ms() << " ms";
    for (int i = 0; i < n; ++i) EXPECT_GT(r.flows[i].cnps_received, 0u) << "flow " << i;
}

INSTANTIATE_TEST_SUITE_P(Flows, CcSimFairness,
                         ::testing::Combine(::testing::Values(Fabric::kMarkingQueue, Fabric::kSoftSwitch),
                                            ::testing::Values(2, 4, 8, 16)),
                         [](const auto& info) {
                             return std::string(std::get<0>(info.param) == Fabric::kSoftSwitch ? "SoftSwitch"
                                                                                              : "MarkingQueue") +
                                    std::to_string(std::get<1>(info.param)) + "Flows";
                         });

TEST(CcSim, SameSeedSameRunDifferentSeedDifferentRun) {
    const BottleneckConfig a = scenario("dcqcn-paper", 4, 7, 5_ms);
    BottleneckConfig b = a;
    b.seed = 8;
    const BottleneckResult r1 = Bottleneck(a).run(), r2 = Bottleneck(a).run(), r3 = Bottleneck(b).run();
    ASSERT_EQ(r1.samples.size(), r2.samples.size());
    for (std::size_t i = 0; i < r1.samples.size(); ++i) {
        ASSERT_EQ(r1.samples[i].queue, r2.samples[i].queue) << i;
        ASSERT_EQ(r1.samples[i].rate_gbps, r2.samples[i].rate_gbps) << i;
    }
    EXPECT_EQ(r1.ce_marked, r2.ce_marked);
    EXPECT_NE(r1.ce_marked, r3.ce_marked);
}

TEST(CcSim, NoneAlgorithmLeavesCongestionToPfc) {
    for (Fabric fabric : {Fabric::kMarkingQueue, Fabric::kSoftSwitch}) {
        BottleneckConfig c = scenario("dcqcn-paper", 4, 1, 5_ms);
        c.cc.algorithm = CcAlgorithm::kNone;
        c.fabric = fabric;
        const BottleneckResult r = Bottleneck(c).run();
        ASSERT_TRUE(r.error.empty()) << r.error;
        EXPECT_EQ(r.cnps_sent, 0u);
        EXPECT_GT(r.ce_marked, 0u);
        EXPECT_GT(r.pfc_pauses, 10u);
        EXPECT_GT(r.time_paused, 1_ms);
        EXPECT_EQ(r.fabric_drops, 0u);
        // Without CC the link still runs full, held back only by PFC.
        EXPECT_GE(window_stats(c, r, 1_ms, c.duration).utilisation, 0.95);
    }
}

// Time for one backlogged flow, paced by its RP, to get back to 95% of line
// rate after a single CNP.
Nanos recovery_time(const DcqcnConfig& cfg) {
    const BitsPerSec line = BitsPerSec::gbps(100);
    DcqcnRp rp(cfg, line);
    const Nanos t_cnp = 10_us;
    Nanos now{0};
    rp.on_cnp(t_cnp);
    now = t_cnp;
    while (now < 100_ms) {
        if (rp.rate().v >= line.v / 100 * 95) return now - t_cnp;
        if (rp.next_timer() <= rp.next_send_time()) {
            now = rp.next_timer();
            rp.on_timer(now);
        } else {
            now = std::max(now, rp.next_send_time());
            rp.on_tx(Bytes{4096}, now);
        }
    }
    return Nanos::max();
}

std::string plot_dir() {
    if (const char* d = std::getenv("ROCEMU_CC_PLOT_DIR")) return d;
    return ::testing::TempDir() + "cc_presets";
}

void write_gnuplot(const std::string& dir, const std::vector<std::string>& presets, const BottleneckConfig& c) {
    std::ofstream gp(dir + "/presets.gp");
    gp << "# Renders <preset>.png (rate per flow and queue depth) from <preset>.csv.\n"
          "# Run from this directory: gnuplot presets.gp\n"
          "set datafile separator ','\n"
          "set terminal pngcairo size 1200,900 noenhanced\n"
          "set key outside right\n"
          "set xlabel 'time (us)'\n"
          "N = " << c.flows << "\n"
          "KMIN = " << c.kmin.v / 1024.0 << "\n"
          "KMAX = " << c.kmax.v / 1024.0 << "\n"
          "do for [p in \"";
    for (std::size_t i = 0; i < presets.size(); ++i) gp << (i ? " " : "") << presets[i];
    gp << "\"] {\n"
          "  set output p.'.png'\n"
          "  set multiplot layout 2,1 title p\n"
          "  set ylabel 'rate (Gb/s)'\n"
          "  plot for [i=3:2+N] p.'.csv' using 1:i with lines title columnheader(i)\n"
          "  set ylabel 'queue (KB)'\n"
          "  plot p.'.csv' using 1:2 with lines title 'queue', KMIN title 'Kmin', KMAX title 'Kmax'\n"
          "  unset multiplot\n"
          "}\n";
}

// On the soft switch, 4 flows joining 100 us apart.
TEST(CcSimPresets, CompareConvergenceUtilisationAndQueue) {
    const std::vector<std::string> presets{"dcqcn-paper", "connectx-default", "aggressive", "gentle"};
    const std::string dir = plot_dir();
    std::filesystem::create_directories(dir);
    std::ofstream summary(dir + "/summary.csv");
    summary << "preset,convergence_ms,utilisation,mean_queue_kb,max_queue_kb,frac_above_kmax,pfc_paused_ms,"
               "single_flow_recovery_us\n";
    std::map<std::string, Nanos> recovery;
    BottleneckConfig last;
    for (const std::string& p : presets) {
        BottleneckConfig c = scenario(p.c_str(), 4, 1, 100_ms);
        c.fabric = Fabric::kSoftSwitch;
        last = c;
        const BottleneckResult r = Bottleneck(c).run();
        ASSERT_TRUE(r.error.empty()) << r.error;
        const Nanos conv = convergence_time(c, r, 1_ms, 0.95, 0.90);
        EXPECT_LT(conv, c.duration / 2) << p << " did not converge";
        const WindowStats w = window_stats(c, r, c.duration / 2, c.duration);
        EXPECT_GE(w.utilisation, 0.9) << p;
        EXPECT_GE(w.jain, 0.95) << p;
        recovery[p] = recovery_time(c.cc.dcqcn);
        ASSERT_NE(recovery[p], Nanos::max()) << p;

        const std::string csv = dir + "/" + p + ".csv";
        ASSERT_TRUE(write_csv(r, csv));
        std::ifstream in(csv);
        std::string header, line;
        std::getline(in, header);
        EXPECT_EQ(header.rfind("time_us,queue_kb,rate0_gbps", 0), 0u);
        std::size_t rows = 0;
        while (std::getline(in, line)) ++rows;
        EXPECT_EQ(rows, r.samples.size());
        summary << p << ',' << conv.ms() << ',' << w.utilisation << ',' << w.mean_queue_bytes / 1024 << ','
                << w.max_queue_bytes / 1024 << ',' << w.frac_above_kmax << ',' << r.time_paused.ms() << ','
                << recovery[p].us() << '\n';
    }
    summary.close();
    write_gnuplot(dir, presets, last);
    // Shorter increase timers and larger steps recover faster.
    EXPECT_LT(recovery["aggressive"], recovery["connectx-default"]);
    EXPECT_LT(recovery["connectx-default"], recovery["gentle"]);

    if (std::getenv("ROCEMU_CC_PLOT_DIR") != nullptr) {
        const std::string cmd = "cd '" + dir + "' && gnuplot presets.gp";
        ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
        for (const std::string& p : presets) EXPECT_TRUE(std::filesystem::exists(dir + "/" + p + ".png")) << p;
    }
}

}  // namespace
}  // namespace rocemu::cc::sim
