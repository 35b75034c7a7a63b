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

// A PCI device that failed to probe: the error says which of the usual
// reasons applies, from what the EAL and sysfs say.
TEST(DpdkPort, PciProbeHintNamesWhatToDo) {
    const std::string a = "0000:3b:00.0";
    EXPECT_EQ(pci_probe_hint("net_af_packet0", true, true, "", false), "");
    EXPECT_EQ(pci_probe_hint("net_memif0", false, true, "", false), "");
    std::string h = pci_probe_hint(a, false, true, "vfio-pci", true);
    EXPECT_NE(h.find("give -a 0000:3b:00.0 after `--`"), std::string::npos) << h;
    h = pci_probe_hint(a, true, true, "", false);
    EXPECT_NE(h.find("has no kernel driver: bind it to vfio-pci"), std::string::npos) << h;
    h = pci_probe_hint(a, true, true, "ixgbe", false);
    EXPECT_NE(h.find("bound to the kernel's ixgbe"), std::string::npos) << h;
    EXPECT_NE(h.find("dpdk-devbind.py -b vfio-pci 0000:3b:00.0"), std::string::npos) << h;
    // uio and vfio without an IOMMU need hugepages; vfio with one does not.
    for (const char* d : {"uio_pci_generic", "igb_uio"}) {
        h = pci_probe_hint(a, true, true, d, true);
        EXPECT_NE(h.find("needs physical addresses (IOVA as PA), so hugepages"), std::string::npos) << h;
        EXPECT_NE(h.find("--huge-dir"), std::string::npos) << h;
        h = pci_probe_hint(a, true, false, d, false);  // hugepages given: something else
        EXPECT_EQ(h.find("hugepages"), std::string::npos) << h;
        EXPECT_NE(h.find("EAL's messages above"), std::string::npos) << h;
    }
    h = pci_probe_hint(a, true, true, "vfio-pci", false);
    EXPECT_NE(h.find("vfio-pci without an IOMMU, which needs physical addresses"), std::string::npos) << h;
    h = pci_probe_hint(a, true, true, "vfio-pci", true);
    EXPECT_EQ(h.find("hugepages"), std::string::npos) << h;
    h = pci_probe_hint("3b:00.0", true, true, "mlx5_core", false);  // the short form is a PCI address too
    EXPECT_NE(h.find("mlx5 PMD drives beside mlx5_core"), std::string::npos) << h;
}

}  // namespace
}  // namespace rocemu::dpdk
