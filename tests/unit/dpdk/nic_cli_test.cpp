// The NIC profile options every RDMA command takes (tools/rocemu/nic_cli.hpp):
// defaults, presets and files, and errors that name the option, the value and
// what is allowed.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "dataplane/dpdk/roce_nic.hpp"
#include "tools/rocemu/nic_cli.hpp"

namespace rocemu::cli {
namespace {

// Parses `args` as `test --port p --ip 10.0.0.1/24 ARGS`, then checks them.
// Returns the parse or check error, or "".
std::string parse(std::vector<std::string> args, NicCliOptions& o) {
    CLI::App app("test");
    add_nic_options(&app, o);
    args.insert(args.begin(), {"--port", "p", "--ip", "10.0.0.1/24"});
    std::vector<const char*> argv{"test"};
    for (const std::string& a : args) argv.push_back(a.c_str());
    try {
        app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
        return e.what();
    }
    return check_nic_options(o);
}

TEST(NicCli, DefaultsAreDcqcnWithConnectxKnobsCnpsOnAndNoPfcOrLabKnobs) {
    NicCliOptions o;
    ASSERT_EQ(parse({}, o), "");
    EXPECT_EQ(o.profile.cc, cc::load_cc_preset("connectx-default").config);
    EXPECT_TRUE(o.profile.cnp_enabled());
    EXPECT_EQ(o.profile.pfc_rx_xoff, 0u);
    EXPECT_EQ(o.profile.mark_ce_every, 0u);
    EXPECT_EQ(o.profile.rx_max_pps, 0u);
    EXPECT_TRUE(o.profile.coalesce_acks);
    EXPECT_EQ(device_options(o).nic.cc, o.profile.cc);
    NicCliOptions n;
    ASSERT_EQ(parse({"--no-ack-coalescing"}, n), "");
    EXPECT_FALSE(n.profile.coalesce_acks);
    EXPECT_FALSE(dpdk::engine_config(host::HostStack(host::HostConfig{}), n.profile).coalesce_acks);
    EXPECT_TRUE(dpdk::engine_config(host::HostStack(host::HostConfig{}), o.profile).coalesce_acks);
}

TEST(NicCli, ZeroCopyThePortsDefaultOffWithZeroAndTheRangeNamed) {
    NicCliOptions o;
    ASSERT_EQ(parse({}, o), "");
    EXPECT_FALSE(o.profile.zero_copy_min);  // the port's default
    NicCliOptions off;
    ASSERT_EQ(parse({"--zero-copy-min", "0"}, off), "");
    EXPECT_EQ(off.profile.zero_copy_min, 0u);
    NicCliOptions two;
    ASSERT_EQ(parse({"--zero-copy-min", "2048"}, two), "");
    EXPECT_EQ(two.profile.zero_copy_min, 2048u);
    NicCliOptions low;
    EXPECT_EQ(parse({"--zero-copy-min", "100"}, low),
              "--zero-copy-min 100 is out of range; allowed 0 (off) or [512, 4096]");
}

TEST(NicCli, TxTimeoutDefaultsToOneSecondZeroMeansNeverAndTheRangeNamed) {
    NicCliOptions o;
    ASSERT_EQ(parse({}, o), "");
    EXPECT_EQ(o.profile.tx_timeout, Nanos::from_s(1));
    EXPECT_EQ(dpdk::nic_config(o.profile).tx_timeout, Nanos::from_s(1));
    NicCliOptions fast;
    ASSERT_EQ(parse({"--tx-timeout-ms", "250"}, fast), "");
    EXPECT_EQ(dpdk::nic_config(fast.profile).tx_timeout, Nanos::from_ms(250));
    NicCliOptions never;
    ASSERT_EQ(parse({"--tx-timeout-ms", "0"}, never), "");
    EXPECT_EQ(dpdk::nic_config(never.profile).tx_timeout.v, 0);
    NicCliOptions big;
    EXPECT_EQ(parse({"--tx-timeout-ms", "3600001"}, big),
              "--tx-timeout-ms 3600001 is out of range; allowed [0, 3600000] (0: never)");
}

TEST(NicCli, PresetCcNoneNoCnpAndTheLabKnobs) {
    NicCliOptions o;
    ASSERT_EQ(parse({"--cc-preset", "gentle", "--no-cnp", "--mark-ce-every", "4", "--rx-max-pps", "1000",
                     "--pfc-rx-xoff", "64"},
                    o),
              "");
    EXPECT_EQ(o.profile.cc, cc::load_cc_preset("gentle").config);
    EXPECT_FALSE(o.profile.send_cnp);
    EXPECT_FALSE(o.profile.cnp_enabled());
    EXPECT_EQ(o.profile.mark_ce_every, 4u);
    EXPECT_EQ(o.profile.rx_max_pps, 1000u);
    EXPECT_EQ(o.profile.pfc_rx_xoff, 64u);
    EXPECT_EQ(o.profile.pfc_rx_xon, 32u) << "XON defaults to half of XOFF";
    NicCliOptions n;
    ASSERT_EQ(parse({"--cc", "none"}, n), "");
    EXPECT_EQ(n.profile.cc.algorithm, cc::CcAlgorithm::kNone);
    EXPECT_FALSE(n.profile.cnp_enabled()) << "no congestion control, no notification point";
}

TEST(NicCli, ProfileFileIsReadAndItsErrorsNameKeyValueAndRange) {
    const std::string good = ::testing::TempDir() + "nic_cli_good.yaml";
    std::ofstream(good) << "preset: aggressive\nRPG_AI_RATE: 10\nnp_min_time_between_cnps: 8\n";
    NicCliOptions o;
    ASSERT_EQ(parse({"--nic-profile", good}, o), "");
    EXPECT_EQ(o.profile.cc.dcqcn.rpg_ai_rate, BitsPerSec::mbps(10));
    EXPECT_EQ(o.profile.cc.dcqcn.rpg_time_reset, cc::load_cc_preset("aggressive").config.dcqcn.rpg_time_reset);
    EXPECT_EQ(o.profile.cc.dcqcn.min_time_between_cnps, Nanos::from_us(8));

    const std::string bad = ::testing::TempDir() + "nic_cli_bad.yaml";
    std::ofstream(bad) << "RPG_TIME_RESET: 0\n";
    NicCliOptions b;
    EXPECT_EQ(parse({"--nic-profile", bad}, b),
              "--nic-profile: cc config: key 'RPG_TIME_RESET' (rpg_time_reset) value '0' is out of range; "
              "allowed [1, 131071] us (in " + bad + ")");
    std::ofstream(bad) << "rpg_bogus: 3\n";
    NicCliOptions u;
    const std::string e = parse({"--nic-profile", bad}, u);
    EXPECT_NE(e.find("rpg_bogus"), std::string::npos) << e;
    std::remove(good.c_str());
    std::remove(bad.c_str());
}

TEST(NicCli, BadValuesAreRefusedWithWhatIsAllowed) {
    NicCliOptions a, b, c, d, e, f;
    EXPECT_NE(parse({"--cc", "timely"}, a).find("timely"), std::string::npos);
    EXPECT_NE(parse({"--cc-preset", "fast"}, b).find("--cc-preset fast: "), std::string::npos);
    EXPECT_NE(parse({"--cc-preset", "gentle", "--nic-profile", "x.yaml"}, c).find("excludes"), std::string::npos);
    EXPECT_EQ(parse({"--pfc-rx-xoff", "16", "--pfc-rx-xon", "16"}, d),
              "--pfc-rx-xon 16 is out of range; allowed [0, 15] (below --pfc-rx-xoff 16)");
    EXPECT_EQ(parse({"--pfc-rx-xoff", "5000"}, e), "--pfc-rx-xoff 5000 is out of range; allowed [1, 4096] frames");
    EXPECT_EQ(parse({"--pfc-rx-xon", "4"}, f), "--pfc-rx-xon needs --pfc-rx-xoff");
    NicCliOptions g, h, i, j, k;
    EXPECT_EQ(parse({"--pfc-rx-xoff", "16", "--pfc-pause-quanta", "0"}, g),
              "--pfc-pause-quanta 0 is out of range; allowed [1, 65535] (0 would be XON)");
    EXPECT_EQ(parse({"--pfc-rx-xoff", "16", "--pfc-pause-quanta", "65536"}, h),
              "--pfc-pause-quanta 65536 is out of range; allowed [1, 65535] (0 would be XON)");
    EXPECT_EQ(parse({"--pfc-rx-xoff", "16", "--pfc-refresh-percent", "100"}, i),
              "--pfc-refresh-percent 100 is out of range; allowed [1, 99] (a refresh must come before the pause "
              "runs out)");
    EXPECT_EQ(parse({"--pfc-pause-quanta", "100"}, j), "--pfc-pause-quanta needs --pfc-rx-xoff");
    EXPECT_EQ(parse({"--pfc-refresh-percent", "20"}, k), "--pfc-refresh-percent needs --pfc-rx-xoff");
}

TEST(NicCli, PauseQuantaAndRefreshReachTheLoopsConfigAndDefaultToTheLongestPauseAtHalf) {
    NicCliOptions d;
    ASSERT_EQ(parse({"--pfc-rx-xoff", "64"}, d), "");
    EXPECT_EQ(d.profile.pfc_pause_quanta, 0xFFFF);
    EXPECT_EQ(d.profile.pfc_refresh_percent, 50u);
    NicCliOptions o;
    ASSERT_EQ(parse({"--pfc-rx-xoff", "64", "--pfc-pause-quanta", "1000", "--pfc-refresh-percent", "25"}, o), "");
    const dpdk::NicConfig nc = dpdk::nic_config(o.profile);
    EXPECT_EQ(nc.pfc_rx.xoff, 64u);
    EXPECT_EQ(nc.pfc_rx.xon, 32u);
    EXPECT_EQ(nc.pfc_rx.pause_quanta, 1000);
    EXPECT_EQ(nc.pfc_rx.refresh_percent, 25u);
    EXPECT_EQ(nc.pfc_rx.priority, o.profile.pfc_priority);
}

// `rocemu host` registers the same receive-side options (add_rx_pfc_options)
// without the RDMA ones, and they check the same way.
TEST(NicCli, TheHostCommandsPfcOptionsAreTheSameOptions) {
    CLI::App app("host");
    RxPfcCliOptions o;
    add_rx_pfc_options(&app, o);
    EXPECT_EQ(app.get_option_no_throw("--cc"), nullptr);
    const std::vector<const char*> argv{"host", "--pfc-rx-xoff", "8", "--pfc-rx-xon", "2", "--pfc-pause-quanta", "300",
                                        "--pfc-refresh-percent", "10", "--rx-max-pps", "500"};
    app.parse(static_cast<int>(argv.size()), argv.data());
    dpdk::RxPfcConfig c;
    ASSERT_EQ(make_rx_pfc(o, c), "");
    EXPECT_EQ(c.xoff, 8u);
    EXPECT_EQ(c.xon, 2u);
    EXPECT_EQ(c.pause_quanta, 300);
    EXPECT_EQ(c.refresh_percent, 10u);
    EXPECT_EQ(o.rx_max_pps, 500u);
    o.pause_quanta = 0;
    EXPECT_EQ(make_rx_pfc(o, c), "--pfc-pause-quanta 0 is out of range; allowed [1, 65535] (0 would be XON)");
}

}  // namespace
}  // namespace rocemu::cli
