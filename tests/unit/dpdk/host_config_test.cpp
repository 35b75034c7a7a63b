#include <gtest/gtest.h>

#include "dataplane/dpdk/host/host_config.hpp"

namespace rocemu::host {
namespace {

const wire::MacAddr kPortMac{{0x02, 0, 0, 0, 0, 0x0a}};

std::string error_of(const HostOptions& o) {
    std::string err;
    EXPECT_FALSE(make_host_config(o, kPortMac, err));
    return err;
}

TEST(DpdkHostConfig, ParsesAFullSetOfOptions) {
    HostOptions o;
    o.ip = "192.168.7.9/16";
    o.mac = "52:54:00:ab:cd:ef";
    o.gateway = "192.168.0.1";
    o.vlan = 100;
    o.pcp = 3;
    o.gid_layout = "rxe";
    o.ecn = "off";
    o.port_mtu = 9000;
    std::string err;
    const auto c = make_host_config(o, kPortMac, err);
    ASSERT_TRUE(c) << err;
    EXPECT_EQ(c->ipv4, 0xC0A80709u);
    EXPECT_EQ(c->prefix_len, 16);
    EXPECT_EQ(c->mac, (wire::MacAddr{{0x52, 0x54, 0x00, 0xab, 0xcd, 0xef}}));
    EXPECT_EQ(c->gateway, 0xC0A80001u);
    EXPECT_EQ(c->vlan, 100);
    EXPECT_EQ(c->pcp, 3);
    EXPECT_EQ(c->gid_layout, GidLayout::Rxe);
    EXPECT_EQ(c->ecn, wire::ecn::kNotEct);
    EXPECT_EQ(c->port_mtu.v, 9000u);
}

TEST(DpdkHostConfig, DefaultsToThePortMacUntaggedAndEct0) {
    HostOptions o;
    o.ip = "10.0.0.1/24";
    std::string err;
    const auto c = make_host_config(o, kPortMac, err);
    ASSERT_TRUE(c) << err;
    EXPECT_EQ(c->mac, kPortMac);
    EXPECT_FALSE(c->vlan);
    EXPECT_FALSE(c->gateway);
    EXPECT_EQ(c->ecn, wire::ecn::kEct0);
    EXPECT_EQ(c->gid_layout, GidLayout::ConnectX);
}

TEST(DpdkHostConfig, BadValuesNameTheOptionTheValueAndTheRange) {
    HostOptions o;
    o.ip = "10.0.0.300/24";
    EXPECT_EQ(error_of(o), "--ip: '10.0.0.300/24' is not valid (expected A.B.C.D/P with a non-zero address and P in 1-32)");
    o.ip = "10.0.0.1";
    EXPECT_EQ(error_of(o), "--ip: '10.0.0.1' is not valid (expected A.B.C.D/P with a non-zero address and P in 1-32)");
    o.ip = "10.0.0.1/24";
    o.mac = "01:00:5e:00:00:01";
    EXPECT_EQ(error_of(o), "--mac: '01:00:5e:00:00:01' is not valid (expected a unicast, non-zero xx:xx:xx:xx:xx:xx)");
    o.mac = "";
    o.vlan = 4095;
    EXPECT_EQ(error_of(o), "--vlan: 4095 is out of range (allowed 1-4094)");
    o.vlan = -1;
    o.pcp = 8;
    EXPECT_EQ(error_of(o), "--pcp: 8 is out of range (allowed 0-7)");
    o.pcp = 0;
    o.gid_layout = "roce";
    EXPECT_EQ(error_of(o), "--gid-layout: 'roce' is not valid (allowed connectx, rxe)");
    o.gid_layout = "rxe";
    o.ecn = "ce";
    EXPECT_EQ(error_of(o), "--ecn: 'ce' is not valid (allowed ect0, ect1, off)");
    o.ecn = "ect1";
    o.port_mtu = 10000;
    EXPECT_EQ(error_of(o), "--mtu: 10000 is out of range (allowed 68-9600)");
}

TEST(DpdkHostConfig, AddressParsersRejectJunk) {
    EXPECT_EQ(parse_ipv4("1.2.3.4"), 0x01020304u);
    EXPECT_FALSE(parse_ipv4("1.2.3"));
    EXPECT_FALSE(parse_ipv4("1.2.3.4.5"));
    EXPECT_FALSE(parse_ipv4("1..3.4"));
    EXPECT_FALSE(parse_ipv4("a.b.c.d"));
    EXPECT_FALSE(parse_mac("52:54:00:ab:cd"));
    EXPECT_FALSE(parse_mac("52-54-00-ab-cd-ef"));
    EXPECT_TRUE(parse_mac("52:54:00:AB:CD:EF"));
}

}  // namespace
}  // namespace rocemu::host
