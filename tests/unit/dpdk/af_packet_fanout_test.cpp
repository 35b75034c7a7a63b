// Two processes in one network namespace whose pid ^ ifindex agree for
// different interfaces ask DPDK's af_packet PMD for the same fanout group: the
// second port still opens (af_packet_fanout.hpp).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "dataplane/dpdk/af_packet_fanout.hpp"
#include "dataplane/dpdk/port.hpp"

namespace rocemu::dpdk {
namespace {

// The PMD's own argument for a port on ifindex: its group id and flags.
uint32_t pmd_fanout_arg(unsigned ifindex) {
    return ((static_cast<uint32_t>(getpid()) ^ ifindex) & 0xffffu) |
           static_cast<uint32_t>(PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_DEFRAG | PACKET_FANOUT_FLAG_ROLLOVER) << 16;
}

// The kernel's own setsockopt: this executable's would move a group it
// cannot have.
int kernel_setsockopt(int fd, int level, int name, const void* val, socklen_t len) {
    return static_cast<int>(syscall(SYS_setsockopt, fd, level, name, val, len));
}

// A packet socket on ifindex in fanout group arg, as another process's port
// on that interface would hold it.
int hold_group(unsigned ifindex, uint32_t arg) {
    const int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    if (fd < 0) return -1;
    sockaddr_ll sa{};
    sa.sll_family = AF_PACKET;
    sa.sll_protocol = htons(ETH_P_ALL);
    sa.sll_ifindex = static_cast<int>(ifindex);
    if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
        kernel_setsockopt(fd, SOL_PACKET, PACKET_FANOUT, &arg, sizeof arg) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

uint32_t group_of(int fd) {
    uint32_t v = 0;
    socklen_t len = sizeof v;
    return getsockopt(fd, SOL_PACKET, PACKET_FANOUT, &v, &len) == 0 ? v & 0xffffu : ~0u;
}

// This test's thread in a network namespace of its own with a veth pair
// rfa0-rfa1 (each test runs as its own process).
bool own_namespace_with_veths() {
    if (geteuid() != 0 || unshare(CLONE_NEWNET) != 0) return false;
    return std::system("ip link add rfa0 type veth peer name rfa1 && ip link set rfa0 up && ip link set rfa1 up") == 0;
}

PortConfig af_packet_config(const char* extra) {
    PortConfig cfg;
    cfg.devspec = std::string("net_af_packet7,iface=rfa0") + extra;
    cfg.mbufs = 1023;
    cfg.link_wait = Nanos{0};
    return cfg;
}

TEST(DpdkAfPacketFanout, APortOpensWhenItsGroupIsAnotherInterfaces) {
    if (!own_namespace_with_veths()) GTEST_SKIP() << "needs root to create a network namespace and a veth pair";
    const unsigned rfa0 = if_nametoindex("rfa0"), rfa1 = if_nametoindex("rfa1");
    ASSERT_NE(rfa0, 0u);
    ASSERT_NE(rfa1, 0u);
    const uint32_t arg = pmd_fanout_arg(rfa0);
    const int other = hold_group(rfa1, arg);
    ASSERT_GE(other, 0) << "cannot take fanout group " << (arg & 0xffff) << " on rfa1";
    // The kernel refuses the PMD's group on rfa0 as it is.
    const int probe = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    sockaddr_ll sa{};
    sa.sll_family = AF_PACKET;
    sa.sll_protocol = htons(ETH_P_ALL);
    sa.sll_ifindex = static_cast<int>(rfa0);
    ASSERT_EQ(bind(probe, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    uint32_t a = arg;
    ASSERT_EQ(kernel_setsockopt(probe, SOL_PACKET, PACKET_FANOUT, &a, sizeof a), -1);
    EXPECT_EQ(errno, EINVAL);
    close(probe);

    const unsigned before = af_packet_fanout_groups_moved();
    std::string error;
    // Two queue pairs: the second socket joins the group the first was given.
    auto port = Port::open(af_packet_config(",qpairs=2"), error);
    ASSERT_NE(port, nullptr) << error;
    EXPECT_EQ(af_packet_fanout_groups_moved(), before + 1);
    // The other interface's group is still its own, with one member.
    EXPECT_EQ(group_of(other), arg & 0xffffu);
    const int again = hold_group(rfa1, arg);
    EXPECT_GE(again, 0) << "rfa1's group no longer takes members on rfa1";
    if (again >= 0) close(again);
    close(other);
}

TEST(DpdkAfPacketFanout, AFreeGroupIsTheOneThePmdAskedFor) {
    if (!own_namespace_with_veths()) GTEST_SKIP() << "needs root to create a network namespace and a veth pair";
    const unsigned before = af_packet_fanout_groups_moved();
    std::string error;
    auto port = Port::open(af_packet_config(""), error);
    ASSERT_NE(port, nullptr) << error;
    EXPECT_EQ(af_packet_fanout_groups_moved(), before);
    // The PMD's group exists on rfa0: a socket on rfa1 cannot have its id.
    EXPECT_LT(hold_group(if_nametoindex("rfa1"), pmd_fanout_arg(if_nametoindex("rfa0"))), 0);
}

}  // namespace
}  // namespace rocemu::dpdk
