#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "switch/config.hpp"

namespace rocemu::sw {
namespace {

TEST(SwitchConfig, SonicDefaults) {
    const SwitchConfig c = sonic_default_config(4, BitsPerSec::gbps(100));
    EXPECT_EQ(validate(c), "");
    EXPECT_EQ(c.dscp_to_tc[3], 3);
    EXPECT_EQ(c.dscp_to_tc[4], 4);
    EXPECT_EQ(c.dscp_to_tc[46], 5);
    EXPECT_EQ(c.dscp_to_tc[48], 6);
    EXPECT_EQ(c.dscp_to_tc[8], 0);
    EXPECT_EQ(c.dscp_to_tc[0], 1);
    EXPECT_EQ(c.dscp_to_tc[26], 1);
    EXPECT_EQ(c.pfc_enable, (1 << 3) | (1 << 4));
    EXPECT_TRUE(c.queue_lossless_at(3));
    EXPECT_FALSE(c.queue_lossless_at(1));
    EXPECT_EQ(c.wred[3].green_min_threshold, Bytes{1048576});
    EXPECT_EQ(c.wred[3].green_max_threshold, Bytes{2097152});
    EXPECT_EQ(c.wred[3].green_drop_probability, 5u);
    EXPECT_EQ(c.wred[3].ecn, EcnMode::All);
    EXPECT_FALSE(c.wred[1].active());
    EXPECT_EQ(c.pg_lossless.xoff, Bytes{160272});
    EXPECT_EQ(c.pfc_wd.detection_time, Nanos::from_ms(200));
    EXPECT_EQ(c.pfc_wd.restoration_time, Nanos::from_ms(200));
    EXPECT_EQ(c.pfc_wd.action, WdAction::Drop);
}

TEST(SwitchConfig, AFileThatNeverEndsOrIsMissingIsAnError) {
    EXPECT_EQ(load_switch_config("/dev/zero").error, "/dev/zero: larger than 16 MiB, not a switch config");
    EXPECT_EQ(load_switch_config("/nonexistent.yaml").error, "/nonexistent.yaml: cannot read the file");
    EXPECT_EQ(load_switch_config("/tmp").error, "/tmp: a folder, not a file");
}

TEST(SwitchConfig, ExampleFilesParseToWhatTheySay) {
    const ConfigResult d = load_switch_config(std::string(ROCEMU_SOURCE_DIR) + "/configs/switch/sonic-default.yaml");
    ASSERT_TRUE(d.config) << d.error;
    const SwitchConfig def = sonic_default_config(4, BitsPerSec::gbps(100));
    EXPECT_EQ(d.config->ports.size(), 4u);
    EXPECT_EQ(d.config->ports[3].name, "Ethernet12");
    EXPECT_EQ(d.config->ports[0].propagation_delay, Nanos{25});
    EXPECT_EQ(d.config->dscp_to_tc, def.dscp_to_tc);
    EXPECT_EQ(d.config->tc_to_pg, def.tc_to_pg);
    EXPECT_EQ(d.config->pfc_enable, def.pfc_enable);
    for (int q = 0; q < kNumTc; ++q) EXPECT_EQ(d.config->scheduler[q].weight, def.scheduler[q].weight);

    const ConfigResult l = load_switch_config(std::string(ROCEMU_SOURCE_DIR) + "/configs/switch/lossless-100g.yaml");
    ASSERT_TRUE(l.config) << l.error;
    const SwitchConfig& c = *l.config;
    EXPECT_EQ(c.ports.size(), 8u);
    EXPECT_EQ(c.ports[0].speed, BitsPerSec::gbps(100));
    EXPECT_EQ(c.pfc_enable, 1 << 3);
    EXPECT_TRUE(c.scheduler[6].strict);
    EXPECT_EQ(c.wred[3].green_min_threshold, Bytes{5120});
    EXPECT_FALSE(c.wred[3].wred_green_enable);
    EXPECT_TRUE(c.wred[4].active()) << "queues the file does not name keep SONiC's default";
    EXPECT_EQ(c.pg_lossless.th.dynamic_th, -2);
    EXPECT_EQ(c.wred_stage, WredStage::Dequeue);
    EXPECT_EQ(c.pfc_wd.detection_time, Nanos::from_ms(100));
    EXPECT_EQ(c.pfc_wd.restoration_time, Nanos::from_ms(400));
    EXPECT_EQ(c.routing.adaptive[3], ArMode::PerPacket);
    EXPECT_EQ(c.routing.adaptive[1], ArMode::Off);
}

// Each bad input must fail with a message naming the key and the bad value.
struct BadCase {
    const char* yaml;
    std::vector<std::string> must_mention;
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.yaml; }

class SwitchConfigErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(SwitchConfigErrors, NameKeyValueAndRange) {
    const BadCase& c = GetParam();
    const ConfigResult r = parse_switch_config(c.yaml);
    ASSERT_FALSE(r.config);
    for (const std::string& m : c.must_mention) EXPECT_NE(r.error.find(m), std::string::npos) << r.error;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SwitchConfigErrors,
    ::testing::Values(
        BadCase{"PORT: {Ethernet0: {speed: 900000}}", {"PORT.Ethernet0.speed", "900000", "[1, 800000]"}},
        BadCase{"PORT: {Ethernet0: {mtu: abc}}", {"PORT.Ethernet0.mtu", "abc"}},
        BadCase{"PORT: {Ethernet0: {sped: 1}}", {"PORT.Ethernet0.sped", "unknown key"}},
        BadCase{"PORT_QOS_MAP: {pfc_enable: \"3\"}", {"PORT", "missing"}},
        BadCase{"PORT: {E0: {}}\nPORT_QOS_MAP: {pfc_enable: \"3,9\"}", {"PORT_QOS_MAP.pfc_enable", "9", "[0, 7]"}},
        BadCase{"PORT: {E0: {}}\nDSCP_TO_TC_MAP: {\"64\": \"1\"}", {"DSCP_TO_TC_MAP.64", "[0, 63]"}},
        BadCase{"PORT: {E0: {}}\nDSCP_TO_TC_MAP: {\"5\": \"8\"}", {"DSCP_TO_TC_MAP.5", "8", "[0, 7]"}},
        BadCase{"PORT: {E0: {}}\nWRED_PROFILE: {P: {green_min_threshold: 10, green_max_threshold: 5}}",
                {"WRED_PROFILE.P.green_min_threshold", "10", "5"}},
        BadCase{"PORT: {E0: {}}\nWRED_PROFILE: {P: {green_drop_probability: 101}}",
                {"WRED_PROFILE.P.green_drop_probability", "101", "[0, 100]"}},
        BadCase{"PORT: {E0: {}}\nWRED_PROFILE: {P: {ecn: ecn_maybe}}", {"WRED_PROFILE.P.ecn", "ecn_maybe"}},
        BadCase{"PORT: {E0: {}}\nQUEUE: {\"3\": {wred_profile: NOPE}}", {"QUEUE.3.wred_profile", "NOPE"}},
        BadCase{"PORT: {E0: {}}\nBUFFER_PROFILE: {pg_lossless_profile: {dynamic_th: 9}}",
                {"BUFFER_PROFILE.pg_lossless_profile.dynamic_th", "9", "[-7, 7]"}},
        BadCase{"PORT: {E0: {}}\nBUFFER_PROFILE: {pg_lossless_profile: {xoff: 100}}",
                {"BUFFER_PROFILE.pg_lossless_profile.xoff", "100"}},
        BadCase{"PORT: {E0: {}}\nSCHEDULER: {\"1\": {type: WFQ}}", {"SCHEDULER.1.type", "WFQ"}},
        BadCase{"PORT: {E0: {}}\nSCHEDULER: {\"1\": {weight: 0}}", {"SCHEDULER.1.weight", "0", "[1, 100]"}},
        BadCase{"PORT: {E0: {}}\nSWITCH: {pfc_refresh_percent: 100}", {"SWITCH.pfc_refresh_percent", "100", "[1, 99]"}},
        BadCase{"PORT: {E0: {}}\nSWITCH: {ecn_marking: later}", {"SWITCH.ecn_marking", "later"}},
        BadCase{"PORT: {E0: {}}\nPFC_WD: {detection_time: 50}", {"PFC_WD.detection_time", "50", "[100, 5000]"}},
        BadCase{"PORT: {E0: {}}\nPFC_WD: {action: ignore}", {"PFC_WD.action", "ignore", "drop, forward, alert"}},
        BadCase{"PORT: {E0: {}}\nROUTING: {ecmp_hash: [SRC_MAC]}", {"ROUTING.ecmp_hash", "SRC_MAC"}},
        BadCase{"PORT: {E0: {}}\nROUTING: {adaptive_routing: {\"3\": sometimes}}",
                {"ROUTING.adaptive_routing.3", "sometimes"}},
        BadCase{"PORT: {E0: {}}\nPFC: {}", {"PFC", "unknown key"}},
        BadCase{"PORT: {E0: {speed: {fast: 1}}}", {"PORT.E0.speed", "expected a single value"}},
        BadCase{"PORT: {E0: {}}\nPFC_WD: {action: [drop]}", {"PFC_WD.action", "expected a single value"}},
        BadCase{"PORT: [", {"YAML syntax"}},
        // fuzz_config: a top-level key that is not a scalar threw out of the parser.
        BadCase{"{[a]: 1}", {"YAML structure", "bad conversion"}}));

TEST(SwitchConfig, ValidateCatchesProgrammaticMistakes) {
    SwitchConfig c = sonic_default_config(2, BitsPerSec::gbps(100));
    c.tc_to_queue[2] = 8;
    EXPECT_NE(validate(c).find("TC_TO_QUEUE_MAP.2"), std::string::npos);
    c = sonic_default_config(0, BitsPerSec::gbps(100));
    EXPECT_NE(validate(c).find("PORT"), std::string::npos);
    c = sonic_default_config(1, BitsPerSec::gbps(100));
    c.pause_quanta = 0;
    EXPECT_NE(validate(c).find("SWITCH.pause_quanta: 0"), std::string::npos);
}

}  // namespace
}  // namespace rocemu::sw

namespace rocemu::sw {
namespace {

using namespace rocemu::literals;

// The fields a packet reads sit in three lines from the struct's start
// (sw::Switch aligns its copy to a line), so that a switch whose config left
// L1 since its last packet misses on three lines, not seven (issue #8).
TEST(SwitchConfig, WhatEveryPacketReadsIsInItsFirstThreeLines) {
    const SwitchConfig c{};
    const auto at = [&c](const void* field) {
        return static_cast<std::size_t>(static_cast<const char*>(field) - reinterpret_cast<const char*>(&c));
    };
    const auto line = [&at](const void* field, std::size_t size) {
        const std::size_t first = at(field) / 64;
        EXPECT_EQ(first, (at(field) + size - 1) / 64) << "field at " << at(field) << " straddles two lines";
        return first;
    };
    // Admission: the lossless PG profile and the pool (Mmu::query_ingress,
    // should_xoff), the TC maps and PFC (route_packet, Mmu::profile).
    EXPECT_EQ(line(&c.pg_lossless, sizeof(c.pg_lossless)), 0u);
    EXPECT_EQ(line(&c.pool_size, sizeof(c.pool_size)), 0u);
    EXPECT_EQ(line(&c.tc_to_queue, sizeof(c.tc_to_queue)), 0u);
    EXPECT_EQ(line(&c.tc_to_pg, sizeof(c.tc_to_pg)), 1u);
    EXPECT_EQ(line(&c.pfc_enable, sizeof(c.pfc_enable)), 1u);
    EXPECT_EQ(line(&c.queue_lossy, sizeof(c.queue_lossy)), 1u);
    EXPECT_EQ(line(&c.dscp_to_tc, sizeof(c.dscp_to_tc)), 2u);
}

TEST(SwitchLinkConfig, ExampleFileParses) {
    std::ifstream in(std::string(ROCEMU_SOURCE_DIR) + "/configs/switch/link-faults.yaml");
    std::stringstream ss;
    ss << in.rdbuf();
    const LinkConfigResult r = parse_link_config(ss.str());
    ASSERT_TRUE(r.config) << r.error;
    const LinkConfig& c = *r.config;
    EXPECT_EQ(c.speed, BitsPerSec::gbps(100));
    EXPECT_EQ(c.propagation_delay, 500_ns);
    EXPECT_DOUBLE_EQ(c.loss_rate, 0.0001);
    EXPECT_DOUBLE_EQ(c.corrupt_rate, 0.00001);
    EXPECT_EQ(c.corrupt_as, Corruption::BadIcrc);
    EXPECT_DOUBLE_EQ(c.reorder_rate, 0.01);
    EXPECT_EQ(c.reorder_delay, 2_us);
    ASSERT_EQ(c.up_down.size(), 2u);
    EXPECT_EQ(c.up_down[0], std::make_pair(5_ms, false));
    EXPECT_EQ(c.up_down[1], std::make_pair(6_ms, true));
    ASSERT_TRUE(c.storm);
    EXPECT_EQ(c.storm->start, 10_ms);
    EXPECT_EQ(c.storm->stop, 20_ms);
    EXPECT_EQ(c.storm->period, 20_us);
    EXPECT_EQ(c.storm->frame.class_enable, 1 << 3);
    EXPECT_EQ(c.storm->frame.quanta[3], 65535);
    // The parsed link behaves as configured.
    Link link(c);
    Rng rng(3);
    EXPECT_EQ(link.transmit(Bytes{100}, 5500_us, rng).fate, LinkFate::LostLinkDown);
    EXPECT_TRUE(link.poll_storm(10_ms));
}

TEST(SwitchLinkConfig, VirtualTimeKeysParse) {
    const LinkConfigResult r = parse_link_config(
        "speed: 400000\nwire_overhead_bytes: 0\nqueue_limit_bytes: 65536\njitter_ns: 300\njitter_reorders: true\n"
        "duplicate_rate: 0.01\npaths_ns: [200, 900, 400]\n");
    ASSERT_TRUE(r.config) << r.error;
    const LinkConfig& c = *r.config;
    EXPECT_EQ(c.speed, BitsPerSec::gbps(400));
    EXPECT_EQ(c.wire_overhead, Bytes{0});
    EXPECT_EQ(c.queue_limit, Bytes{65536});
    EXPECT_EQ(c.jitter, 300_ns);
    EXPECT_TRUE(c.jitter_reorders);
    EXPECT_DOUBLE_EQ(c.duplicate_rate, 0.01);
    ASSERT_EQ(c.paths.size(), 3u);
    EXPECT_EQ(c.paths[0], 200_ns);
    EXPECT_EQ(c.paths[1], 900_ns);
    EXPECT_EQ(c.paths[2], 400_ns);
    // Left out, the switch's defaults: preamble and IFG count, no queue limit.
    const LinkConfigResult d = parse_link_config("loss_rate: 0");
    ASSERT_TRUE(d.config) << d.error;
    EXPECT_EQ(d.config->wire_overhead, kWireOverhead);
    EXPECT_EQ(d.config->queue_limit, Bytes{UINT64_MAX});
    EXPECT_TRUE(d.config->paths.empty());
}

TEST(SwitchLinkConfig, ErrorsNameTheKey) {
    struct Case {
        const char* yaml;
        const char* key;
    };
    for (const Case c : {Case{"loss_rate: 1.5", "LINK.loss_rate: 1.5 out of range"},
                         Case{"loss_rate: often", "LINK.loss_rate: 'often' is not a number"},
                         Case{"corrupt_as: crc", "LINK.corrupt_as: 'crc'"},
                         Case{"down_up: [{at_ns: 5}]", "LINK.down_up[0]: needs at_ns and up"},
                         Case{"pfc_storm: {period_ns: 0}", "LINK.pfc_storm.period_ns: 0"},
                         Case{"pfc_storm: {priorities: \"8\"}", "LINK.pfc_storm.priorities: 8"},
                         Case{"jitter: 5", "LINK.jitter: unknown key"},
                         Case{"paths_ns: 700", "LINK.paths_ns: expected a list"},
                         Case{"paths_ns: [700, -1]", "LINK.paths_ns[1]: -1 out of range"},
                         Case{"jitter_reorders: maybe", "LINK.jitter_reorders: 'maybe' is not a boolean"},
                         Case{"wire_overhead_bytes: 65", "LINK.wire_overhead_bytes: 65 out of range [0, 64]"},
                         Case{"propagation_delay_ns: 2000000000",
                              "LINK.propagation_delay_ns: 2000000000 out of range [0, 1000000000]"}}) {
        const LinkConfigResult r = parse_link_config(c.yaml);
        EXPECT_FALSE(r.config) << c.yaml;
        EXPECT_NE(r.error.find(c.key), std::string::npos) << r.error;
    }
}

}  // namespace
}  // namespace rocemu::sw
