// Which PMDs may be lent an MR's pages as an mbuf chain (Port::takes_chains),
// by driver name and devargs, as read in DPDK 22.11's TX paths
// (dataplane/dpdk/README.md, "Chains on more port types").
#include <gtest/gtest.h>

#include "dataplane/dpdk/port.hpp"

namespace rocemu::dpdk {
namespace {

TEST(PortChains, PmdsThatCopyOrHandOverEverySegmentAtTxTakeChains) {
    EXPECT_TRUE(pmd_takes_chains("net_ring", ""));
    EXPECT_TRUE(pmd_takes_chains("net_memif", "role=client,socket=/tmp/m.sock"));
    EXPECT_TRUE(pmd_takes_chains("net_af_packet", "iface=veth0,framesz=9216,blocksz=36864"));
    EXPECT_TRUE(pmd_takes_chains("net_tap", "iface=tap0"));
    EXPECT_TRUE(pmd_takes_chains("net_vhost", "iface=/tmp/vhost.sock"));
}

TEST(PortChains, PmdsThatPassSegmentAddressesOrAreUnreadDoNot) {
    // memif zero-copy and virtio_user give the peer the segments' addresses
    // (an MR is not in the memory the peer maps) and free them later.
    EXPECT_FALSE(pmd_takes_chains("net_memif", "role=client,socket=/tmp/m.sock,zero-copy=yes"));
    EXPECT_FALSE(pmd_takes_chains("net_virtio_user", "path=/tmp/vhost.sock"));
    EXPECT_FALSE(pmd_takes_chains("net_mlx5", ""));
    EXPECT_FALSE(pmd_takes_chains("net_ixgbe", ""));
    EXPECT_FALSE(pmd_takes_chains("", ""));
}

}  // namespace
}  // namespace rocemu::dpdk
