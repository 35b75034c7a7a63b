#include <gtest/gtest.h>

#include "dataplane/dpdk/host/gid.hpp"
#include "dataplane/dpdk/host/mtu.hpp"
#include "dataplane/wire/describe.hpp"

namespace rocemu::host {
namespace {

const wire::MacAddr kMac{{0x52, 0x54, 0x00, 0x12, 0x34, 0x56}};
constexpr uint32_t kIp = 0x0A000001;  // 10.0.0.1

TEST(DpdkGid, LinkLocalIsModifiedEui64OfTheMac) {
    EXPECT_EQ(format_gid(link_local_gid(kMac)), "fe80:0:0:0:5054:ff:fe12:3456");
    const auto back = mac_from_link_local(link_local_gid(kMac));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, kMac);
    EXPECT_FALSE(mac_from_link_local(wire::IpAddr::from_v4(kIp)));
}

TEST(DpdkGid, ConnectXLayoutListsEachAddressAsV1ThenV2) {
    const GidTable t(GidLayout::ConnectX, kMac, kIp);
    ASSERT_EQ(t.size(), 4u);
    EXPECT_EQ(t[0].type, GidType::RoceV1);
    EXPECT_EQ(t[1].type, GidType::RoceV2);
    EXPECT_EQ(t[0].gid, link_local_gid(kMac));
    EXPECT_EQ(t[1].gid, link_local_gid(kMac));
    EXPECT_EQ(t[2].type, GidType::RoceV1);
    EXPECT_EQ(t[3].type, GidType::RoceV2);
    EXPECT_EQ(format_gid(t[3].gid), "::ffff:10.0.0.1");
    EXPECT_EQ(t.default_v2_index(), 3);
    EXPECT_EQ(t.find_v2(wire::IpAddr::from_v4(kIp)), 3);
}

TEST(DpdkGid, RxeLayoutHasRoceV2Only) {
    const GidTable t(GidLayout::Rxe, kMac, kIp);
    ASSERT_EQ(t.size(), 2u);
    EXPECT_EQ(t[0].gid, link_local_gid(kMac));
    EXPECT_EQ(t[1].gid, wire::IpAddr::from_v4(kIp));
    EXPECT_EQ(t[0].type, GidType::RoceV2);
    EXPECT_EQ(t[1].type, GidType::RoceV2);
    EXPECT_EQ(t.default_v2_index(), 1);
}

TEST(DpdkGid, WithoutIpv4TheDefaultIsLinkLocal) {
    const GidTable t(GidLayout::ConnectX, kMac, std::nullopt);
    EXPECT_EQ(t.size(), 2u);
    EXPECT_EQ(t.default_v2_index(), 1);
}

TEST(DpdkGid, RoceV1IndexIsRefusedAndNamesItsV2Twin) {
    const GidTable t(GidLayout::ConnectX, kMac, kIp);
    const GidCheck c = t.check_sgid_index(2);
    EXPECT_FALSE(c.ok());
    EXPECT_EQ(c.error,
              "GID index 2 is a RoCEv1 GID (::ffff:10.0.0.1) and rocemu speaks RoCEv2 only; "
              "use GID index 3 (RoCEv2 ::ffff:10.0.0.1)");
    const GidCheck ll = t.check_sgid_index(0);
    EXPECT_EQ(ll.error,
              "GID index 0 is a RoCEv1 GID (fe80:0:0:0:5054:ff:fe12:3456) and rocemu speaks RoCEv2 only; "
              "use GID index 1 (RoCEv2 fe80:0:0:0:5054:ff:fe12:3456)");
}

TEST(DpdkGid, MissingIndexIsRefusedAndNamesTheDefault) {
    const GidTable cx(GidLayout::ConnectX, kMac, kIp);
    EXPECT_EQ(cx.check_sgid_index(4).error,
              "GID index 4 does not exist: this port's GID table (connectx layout) has indexes 0-3; "
              "use GID index 3 (RoCEv2 ::ffff:10.0.0.1)");
    const GidTable rxe(GidLayout::Rxe, kMac, kIp);
    EXPECT_EQ(rxe.check_sgid_index(3).error,
              "GID index 3 does not exist: this port's GID table (rxe layout) has indexes 0-1; "
              "use GID index 1 (RoCEv2 ::ffff:10.0.0.1)");
}

TEST(DpdkGid, RoceV2IndexPasses) {
    const GidTable t(GidLayout::ConnectX, kMac, kIp);
    const GidCheck c = t.check_sgid_index(3);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c.index, 3);
    EXPECT_EQ(c.entry->gid, wire::IpAddr::from_v4(kIp));
    EXPECT_TRUE(c.error.empty());
}

TEST(DpdkGid, LayoutNamesParse) {
    EXPECT_EQ(parse_gid_layout("connectx"), GidLayout::ConnectX);
    EXPECT_EQ(parse_gid_layout("rxe"), GidLayout::Rxe);
    EXPECT_FALSE(parse_gid_layout("mlx5"));
}

TEST(DpdkMtu, ActiveMtuFollowsPortMtuLikeRxe) {
    EXPECT_EQ(active_mtu(Bytes{1500}).v, 1024u);
    EXPECT_EQ(active_mtu(Bytes{9000}).v, 4096u);
    EXPECT_EQ(active_mtu(Bytes{4176}).v, 4096u);
    EXPECT_EQ(active_mtu(Bytes{4175}).v, 2048u);
    EXPECT_EQ(active_mtu(Bytes{1104}).v, 1024u);
    EXPECT_EQ(active_mtu(Bytes{1103}).v, 512u);
    EXPECT_EQ(active_mtu(Bytes{592}).v, 512u);
    EXPECT_EQ(active_mtu(Bytes{591}).v, 256u);
    EXPECT_EQ(active_mtu(Bytes{68}).v, 256u);
}

}  // namespace
}  // namespace rocemu::host
