// Opening ports: a PMD that cannot carry the MTU asked for fails at start,
// with an error that says what to do, instead of a port whose TX refuses
// every larger frame without a counter.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "dataplane/dpdk/port.hpp"

namespace rocemu::dpdk {
namespace {

bool can_create_taps() { return geteuid() == 0 && access("/dev/net/tun", R_OK | W_OK) == 0; }

// A tap port named after this process, so parallel runs do not collide.
PortConfig tap_config(const char* tag, uint16_t mtu) {
    PortConfig cfg;
    const std::string iface = "rt" + std::string(tag) + std::to_string(getpid() % 100000);
    cfg.devspec = "net_tap_" + std::string(tag) + ",iface=" + iface;
    cfg.mtu = mtu;
    cfg.mbufs = 1023;
    cfg.link_wait = Nanos{0};
    return cfg;
}

TEST(DpdkPort, TapRefusesAJumboMtuAtStart) {
    if (!can_create_taps()) GTEST_SKIP() << "needs root and /dev/net/tun to create a tap";
    std::string error;
    EXPECT_EQ(Port::open(tap_config("j", 9000), error), nullptr);
    EXPECT_NE(error.find("net_tap cannot carry MTU 9000"), std::string::npos) << error;
    EXPECT_NE(error.find("net_af_packet"), std::string::npos) << error;
}

TEST(DpdkPort, TapOpensAtMtu1500) {
    if (!can_create_taps()) GTEST_SKIP() << "needs root and /dev/net/tun to create a tap";
    std::string error;
    auto port = Port::open(tap_config("s", 1500), error);
    ASSERT_NE(port, nullptr) << error;
    EXPECT_EQ(port->mtu(), 1500);
}

}  // namespace
}  // namespace rocemu::dpdk
