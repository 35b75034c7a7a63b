// `rocemu perf`'s engine on two devices over a net_ring pair: every op, sizes
// from 1 B to 1 MiB, payload checked end to end.
#include <gtest/gtest.h>

#include <chrono>

#include "verbs/perf.hpp"

namespace rocemu::verbs {
namespace {

class VerbsPerf : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        PerfOptions base;
        base.eal_args = {"--log-level", "lib.eal:error"};
        std::string error;
        lp_ = LoopbackPerf::open(base, error).release();
        ASSERT_TRUE(lp_) << error;
    }
    static void TearDownTestSuite() {
        delete lp_;
        lp_ = nullptr;
    }
    static LoopbackPerf* lp_;
};
LoopbackPerf* VerbsPerf::lp_ = nullptr;

TEST_F(VerbsPerf, EveryOpAndSizeArrivesIntact) {
    for (PerfOp op : {PerfOp::Write, PerfOp::Read, PerfOp::Send}) {
        for (uint32_t size : {1u, 63u, 1024u, 1025u, 4096u, 65536u, 1u << 20}) {
            PerfOptions o;
            o.op = op;
            o.size = size;
            o.iters = size >= 65536 ? 12 : 200;
            o.qps = size == 1025 ? 2 : 1;
            o.tx_depth = 16;
            o.verify = true;
            PerfResult r;
            std::string error;
            ASSERT_EQ(lp_->run(o, r, error), 0) << to_string(op) << " " << size << ": " << error;
            EXPECT_EQ(r.iterations, o.iters * o.qps) << to_string(op) << " " << size;
            EXPECT_EQ(r.verify_errors, 0u) << to_string(op) << " " << size;
            EXPECT_EQ(r.bytes, size);
            EXPECT_GT(r.bw_avg_gbps, 0);
            EXPECT_GE(r.bw_peak_gbps, r.bw_avg_gbps);
        }
    }
}

TEST_F(VerbsPerf, AtomicsAddUpExactly) {
    PerfOptions o;
    o.op = PerfOp::Atomic;
    o.iters = 500;
    o.qps = 2;
    o.verify = true;
    PerfResult r;
    std::string error;
    ASSERT_EQ(lp_->run(o, r, error), 0) << error;
    EXPECT_EQ(r.bytes, 8u);
    EXPECT_EQ(r.iterations, 1000u);
    EXPECT_EQ(r.verify_errors, 0u);  // the remote counter grew by exactly one per FETCH_ADD
}

TEST_F(VerbsPerf, LatencyPercentilesAreOrdered) {
    PerfOptions o;
    o.op = PerfOp::Write;
    o.size = 64;
    o.iters = 300;
    o.latency = true;
    PerfResult r;
    std::string error;
    ASSERT_EQ(lp_->run(o, r, error), 0) << error;
    EXPECT_EQ(r.iterations, 300u);
    EXPECT_GT(r.t_min, 0);
    EXPECT_LE(r.t_min, r.t_typical);
    EXPECT_LE(r.t_typical, r.t_99);
    EXPECT_LE(r.t_99, r.t_999);
    EXPECT_LE(r.t_min, r.t_avg);
}

TEST_F(VerbsPerf, ADurationRunStopsOnTime) {
    PerfOptions o;
    o.op = PerfOp::Send;
    o.size = 64;
    o.duration_s = 0.2;
    PerfResult r;
    std::string error;
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(lp_->run(o, r, error), 0) << error;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
    EXPECT_GT(r.iterations, 0u);
}

}  // namespace
}  // namespace rocemu::verbs
