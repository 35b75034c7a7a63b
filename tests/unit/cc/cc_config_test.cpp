#include <gtest/gtest.h>

#include <string>

#include "cc/config.hpp"

namespace rocemu::cc {
namespace {

using namespace rocemu::literals;

CcConfig must_parse(const std::string& yaml) {
    const CcConfigResult r = parse_cc_config(yaml);
    EXPECT_TRUE(r.ok()) << r.error;
    return r.config;
}

std::string must_fail(const std::string& yaml) {
    const CcConfigResult r = parse_cc_config(yaml);
    EXPECT_FALSE(r.ok()) << "accepted: " << yaml;
    return r.error;
}

TEST(CcConfig, ConnectxDefaultPresetIsTheStructDefault) {
    const CcConfigResult r = load_cc_preset("connectx-default");
    ASSERT_TRUE(r.ok()) << r.error;
    EXPECT_EQ(r.config, CcConfig{});
}

TEST(CcConfig, EmptyDocumentIsConnectxDefault) { EXPECT_EQ(must_parse(""), CcConfig{}); }

TEST(CcConfig, EveryEmbeddedPresetMatchesItsFileOnDisk) {
    ASSERT_EQ(cc_preset_names().size(), 4u);
    for (std::string_view name : cc_preset_names()) {
        const CcConfigResult embedded = load_cc_preset(name);
        const CcConfigResult file =
            load_cc_config_file(std::string(ROCEMU_SOURCE_DIR) + "/configs/nic/" + std::string(name) + ".yaml");
        ASSERT_TRUE(embedded.ok()) << embedded.error;
        ASSERT_TRUE(file.ok()) << file.error;
        EXPECT_EQ(embedded.config, file.config) << name;
    }
}

TEST(CcConfig, PresetsCarryTheReferenceNumbers) {
    const DcqcnConfig gentle = load_cc_preset("gentle").config.dcqcn;
    EXPECT_EQ(gentle.rpg_time_reset, 1200_us);
    EXPECT_EQ(gentle.rpg_ai_rate, BitsPerSec::mbps(1));
    EXPECT_EQ(gentle.rpg_hai_rate, BitsPerSec::mbps(10));
    EXPECT_EQ(gentle.dce_tcp_g, 1019u);  // inherited from connectx-default

    const DcqcnConfig aggressive = load_cc_preset("aggressive").config.dcqcn;
    EXPECT_EQ(aggressive.rpg_time_reset, 75_us);
    EXPECT_EQ(aggressive.rpg_ai_rate, BitsPerSec::mbps(50));
    EXPECT_EQ(aggressive.rpg_hai_rate, BitsPerSec::mbps(500));

    const DcqcnConfig paper = load_cc_preset("dcqcn-paper").config.dcqcn;
    EXPECT_EQ(paper.dce_tcp_g, 1024u - 1024u / 256u);  // g = 1/256
    EXPECT_EQ(paper.rpg_time_reset, 55_us);
    EXPECT_EQ(paper.dce_tcp_rtt, 55_us);
    EXPECT_EQ(paper.rpg_byte_reset, Bytes{10u << 20});
    EXPECT_EQ(paper.rpg_threshold, 5u);
    EXPECT_EQ(paper.rpg_ai_rate, BitsPerSec::mbps(40));
    EXPECT_EQ(paper.rpg_hai_rate, BitsPerSec::mbps(200));
    EXPECT_EQ(paper.min_time_between_cnps, 50_us);
}

TEST(CcConfig, AllThreeNamingSchemesSetTheSameKnob) {
    for (const char* key : {"rpg_ai_rate", "rp_ai_rate", "RPG_AI_RATE", "RPG_AI_RATE_P1", "RPG_AI_RATE_P2"}) {
        const CcConfig c = must_parse(std::string(key) + ": 7");
        EXPECT_EQ(c.dcqcn.rpg_ai_rate, BitsPerSec::mbps(7)) << key;
    }
}

TEST(CcConfig, TuningGuidePasteIsAccepted) {
    const CcConfig c = must_parse(
        "ROCE_ADAPTIVE_ROUTING_EN: 1\n"
        "CNP_802P_PRIO: 7\n"
        "CNP_DSCP: 26\n"
        "DCQCN_NI_ALPH_UPDATE_PERIOD: 10\n"
        "DCQCN_NI_BYTE_STAGES: 0\n"
        "np_min_time_between_cnps: 8\n"
        "RPG_TIME_RESET_P1: True(1)\n");
    EXPECT_TRUE(c.adaptive_routing);
    EXPECT_EQ(c.dcqcn.cnp_802p_prio, 7);
    EXPECT_EQ(c.dcqcn.cnp_dscp, 26);
    EXPECT_EQ(c.dcqcn.dce_tcp_rtt, 10_us);
    EXPECT_EQ(c.dcqcn.effective_byte_reset(), Bytes{0});
    EXPECT_EQ(c.dcqcn.rpg_byte_reset, Bytes{32767 * 64});
    EXPECT_EQ(c.dcqcn.min_time_between_cnps, 8_us);
    EXPECT_EQ(c.dcqcn.rpg_time_reset, 1_us);
}

TEST(CcConfig, MlxconfigSetAndQueryTextIsAccepted) {
    const CcConfig set = must_parse("RPG_AI_RATE_P1=10 RPG_HAI_RATE_P1=100\nCNP_DSCP_P1=26  # guide value\n");
    EXPECT_EQ(set.dcqcn.rpg_ai_rate, BitsPerSec::mbps(10));
    EXPECT_EQ(set.dcqcn.rpg_hai_rate, BitsPerSec::mbps(100));
    EXPECT_EQ(set.dcqcn.cnp_dscp, 26);

    const CcConfig query = must_parse(
        "        RPG_TIME_RESET_P1                           150\n"
        "        CLAMP_TGT_RATE_P1                           True(1)\n"
        "        CNP_802P_PRIO_P1                            5\n");
    EXPECT_EQ(query.dcqcn.rpg_time_reset, 150_us);
    EXPECT_TRUE(query.dcqcn.clamp_tgt_rate);
    EXPECT_EQ(query.dcqcn.cnp_802p_prio, 5);

    std::string e = must_fail("RPG_AI_RATE_P1=5 CNP_DSCP_P1=\n");
    EXPECT_NE(e.find("'CNP_DSCP_P1='"), std::string::npos) << e;
    e = must_fail("RPG_AI_RATE_P1 5 6\n");
    EXPECT_NE(e.find("line 1"), std::string::npos) << e;
    e = must_fail("RPG_AI_RATE_P1=0\n");
    EXPECT_NE(e.find("'RPG_AI_RATE_P1' (rpg_ai_rate)"), std::string::npos) << e;
}

TEST(CcConfig, PresetThenOverridesRegardlessOfOrder) {
    const CcConfig c = must_parse("rpg_hai_rate: 123\npreset: aggressive\nalgorithm: none\n");
    EXPECT_EQ(c.algorithm, CcAlgorithm::kNone);
    EXPECT_EQ(c.dcqcn.rpg_hai_rate, BitsPerSec::mbps(123));
    EXPECT_EQ(c.dcqcn.rpg_time_reset, 75_us);
}

TEST(CcConfig, ByteResetCountsSixtyFourByteUnits) {
    EXPECT_EQ(must_parse("rpg_byte_reset: 2").dcqcn.rpg_byte_reset, Bytes{128});
    EXPECT_EQ(must_parse("RPG_BYTE_RESET: 0").dcqcn.effective_byte_reset(), Bytes{0});
    const std::string e = must_fail("rp_byte_reset: 16777217");
    EXPECT_NE(e.find("[0, 16777216] x 64 bytes"), std::string::npos) << e;
}

TEST(CcConfig, HexAndBooleanSpellings) {
    const CcConfig c = must_parse("cnp_dscp: 0x1a\nclamp_tgt_rate: true\nrp_clamp_tgt_rate_ati: false\n");
    EXPECT_EQ(c.dcqcn.cnp_dscp, 26);
    EXPECT_TRUE(c.dcqcn.clamp_tgt_rate);
    EXPECT_FALSE(c.dcqcn.clamp_tgt_rate_after_time_inc);
}

TEST(CcConfig, UnknownKeyIsNamed) {
    const std::string e = must_fail("rpg_ai_rat: 5");
    EXPECT_NE(e.find("unknown key 'rpg_ai_rat'"), std::string::npos) << e;
}

TEST(CcConfig, OutOfRangeNamesKeyValueAndRange) {
    std::string e = must_fail("RPG_TIME_RESET: 0");
    EXPECT_NE(e.find("'RPG_TIME_RESET' (rpg_time_reset)"), std::string::npos) << e;
    EXPECT_NE(e.find("'0'"), std::string::npos) << e;
    EXPECT_NE(e.find("[1, 131071] us"), std::string::npos) << e;

    e = must_fail("cnp_802p_prio: 8");
    EXPECT_NE(e.find("'cnp_802p_prio'"), std::string::npos) << e;
    EXPECT_NE(e.find("[0, 7]"), std::string::npos) << e;

    e = must_fail("dce_tcp_g: 1024");
    EXPECT_NE(e.find("[0, 1023] /1024"), std::string::npos) << e;

    e = must_fail("rpg_min_dec_fac: -1");
    EXPECT_NE(e.find("'-1'"), std::string::npos) << e;
    EXPECT_NE(e.find("[0, 100] %"), std::string::npos) << e;
}

TEST(CcConfig, NonNumberIsRejectedWithRange) {
    const std::string e = must_fail("rp_ai_rate: fast");
    EXPECT_NE(e.find("'rp_ai_rate' (rpg_ai_rate)"), std::string::npos) << e;
    EXPECT_NE(e.find("'fast'"), std::string::npos) << e;
    EXPECT_NE(e.find("Mb/s"), std::string::npos) << e;
}

TEST(CcConfig, SameKnobUnderTwoNamesIsAnError) {
    const std::string e = must_fail("rp_ai_rate: 5\nRPG_AI_RATE: 6\n");
    EXPECT_NE(e.find("set twice"), std::string::npos) << e;
}

TEST(CcConfig, BadPresetAndAlgorithmListTheAllowedValues) {
    std::string e = must_fail("preset: turbo");
    EXPECT_NE(e.find("'turbo'"), std::string::npos) << e;
    EXPECT_NE(e.find("connectx-default"), std::string::npos) << e;
    e = must_fail("algorithm: timely");
    EXPECT_NE(e.find("'timely'"), std::string::npos) << e;
    EXPECT_NE(e.find("none, dcqcn"), std::string::npos) << e;
}

TEST(CcConfig, MinRateAboveMaxRateIsRejected) {
    const std::string e = must_fail("rpg_max_rate: 1000\nrpg_min_rate: 2000\n");
    EXPECT_NE(e.find("rpg_min_rate"), std::string::npos) << e;
}

TEST(CcConfig, MissingFileAndBadYamlAreErrors) {
    EXPECT_FALSE(load_cc_config_file("/nonexistent/cc.yaml").ok());
    const CcConfigResult z = load_cc_config_file("/dev/zero");  // never ends: refused, not read forever
    EXPECT_NE(z.error.find("'/dev/zero' is larger than 16 MiB, not a NIC profile"), std::string::npos) << z.error;
    EXPECT_FALSE(parse_cc_config("rpg_ai_rate: [").ok());
    EXPECT_FALSE(parse_cc_config("- 1\n- 2\n").ok());
}

}  // namespace
}  // namespace rocemu::cc
