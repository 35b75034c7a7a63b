#include "dataplane/dpdk/port.hpp"

#include <fmt/format.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_eal.h>
#include <rte_mbuf.h>
#include <rte_pci.h>
#include <rte_ring.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string_view>

namespace rocemu::dpdk {

std::string pci_probe_hint(std::string_view addr, bool pci_bus, bool iova_va, std::string_view kernel_driver,
                           bool iommu) {
    rte_pci_addr pa;
    if (rte_pci_addr_parse(std::string(addr).c_str(), &pa) != 0) return "";
    if (!pci_bus)
        return fmt::format("PCI devices are probed only when allowed: give -a {} after `--` (without -a or -b, "
                           "rocemu passes --no-pci)",
                           addr);
    if (kernel_driver.empty())
        return fmt::format("{} has no kernel driver: bind it to vfio-pci (or uio_pci_generic), e.g. dpdk-devbind.py "
                           "-b vfio-pci {}",
                           addr, addr);
    if (kernel_driver == "vfio-pci" || kernel_driver == "uio_pci_generic" || kernel_driver == "igb_uio") {
        if (iova_va && (kernel_driver != "vfio-pci" || !iommu))
            return fmt::format("{} is bound to {}{}, which needs physical addresses (IOVA as PA), so hugepages: "
                               "give them to the EAL after `--` (--huge-dir DIR, a hugetlbfs mount, or --in-memory)",
                               addr, kernel_driver, kernel_driver == "vfio-pci" ? " without an IOMMU" : "");
        return fmt::format("{} is bound to {}: the EAL's messages above say why its PMD did not take it", addr,
                           kernel_driver);
    }
    if (kernel_driver == "mlx5_core")
        return fmt::format("{} is an mlx5 NIC, which DPDK's mlx5 PMD drives beside mlx5_core: the EAL's messages "
                           "above say why it did not (is librte-net-mlx5 installed?)",
                           addr);
    return fmt::format("{} is bound to the kernel's {}: DPDK's PMD needs it bound to vfio-pci or uio_pci_generic "
                       "instead (e.g. dpdk-devbind.py -b vfio-pci {}), which takes it from the kernel",
                       addr, kernel_driver, addr);
}

namespace {

// pci_probe_hint for this process's EAL and the device's sysfs entry.
std::string probe_hint(const std::string& name) {
    rte_pci_addr pa;
    if (rte_pci_addr_parse(name.c_str(), &pa) != 0) return "";
    char full[PCI_PRI_STR_SIZE];
    rte_pci_device_name(&pa, full, sizeof full);
    namespace fs = std::filesystem;
    const fs::path dev = fs::path("/sys/bus/pci/devices") / full;
    std::error_code ec;
    if (!fs::exists(dev, ec)) return fmt::format("this machine has no PCI device {}", full);
    const fs::path drv = fs::read_symlink(dev / "driver", ec);
    const std::string driver = ec ? "" : drv.filename().string();
    return pci_probe_hint(name, rte_eal_has_pci() != 0, rte_eal_iova_mode() == RTE_IOVA_VA, driver,
                          fs::exists(dev / "iommu", ec));
}

}  // namespace

std::unique_ptr<Port> Port::open(const PortConfig& cfg, std::string& error) {
    const std::string name = cfg.devspec.substr(0, cfg.devspec.find(','));
    uint16_t id = 0;
    bool probed = false;
    if (rte_eth_dev_get_port_by_name(name.c_str(), &id) != 0) {
        const int rc = rte_dev_probe(cfg.devspec.c_str());
        if (rc < 0) {
            const std::string hint = probe_hint(name);
            error = fmt::format("--port {}: probing the device failed: {}{}{}", cfg.devspec, rte_strerror(-rc),
                                hint.empty() ? "" : ": ", hint);
            return nullptr;
        }
        if (rte_eth_dev_get_port_by_name(name.c_str(), &id) != 0) {
            error = fmt::format("--port {}: the device was probed but no ethdev port is named '{}'", cfg.devspec,
                                name);
            return nullptr;
        }
        probed = true;
    }
    return make(id, probed, cfg, error);
}

std::unique_ptr<Port> Port::attach(uint16_t port_id, const PortConfig& cfg, std::string& error) {
    return make(port_id, false, cfg, error);
}

std::unique_ptr<Port> Port::from_rings(const std::string& name, rte_ring* rx, rte_ring* tx, const PortConfig& cfg,
                                       std::string& error) {
    const int id = rte_eth_from_rings(name.c_str(), &rx, 1, &tx, 1, SOCKET_ID_ANY);
    if (id < 0) {
        error = fmt::format("{}: rte_eth_from_rings failed: {}", name, rte_strerror(rte_errno));
        return nullptr;
    }
    return attach(static_cast<uint16_t>(id), cfg, error);
}

std::unique_ptr<Port> Port::make(uint16_t port_id, bool probed, const PortConfig& cfg, std::string& error) {
    std::unique_ptr<Port> p(new Port);
    p->id_ = port_id;
    p->probed_ = probed;
    char name[RTE_ETH_NAME_MAX_LEN];
    if (rte_eth_dev_get_name_by_port(port_id, name) != 0) {
        error = fmt::format("port {} does not exist", port_id);
        return nullptr;
    }
    p->name_ = name;
    if (!p->start(cfg, error)) return nullptr;
    return p;
}

bool pmd_takes_chains(std::string_view driver, std::string_view devargs) {
    if (driver == "net_memif") return devargs.find("zero-copy=yes") == std::string_view::npos;
    return driver == "net_ring" || driver == "net_af_packet" || driver == "net_tap" || driver == "net_vhost";
}

bool Port::start(const PortConfig& cfg, std::string& error) {
    rte_eth_dev_info info;
    if (int rc = rte_eth_dev_info_get(id_, &info); rc != 0) {
        error = fmt::format("{}: cannot read device info: {}", name_, rte_strerror(-rc));
        return false;
    }
    device_ = info.device;
    const std::string_view drv = info.driver_name ? info.driver_name : "";
    const rte_devargs* da = rte_dev_devargs(info.device);
    const std::string_view args = da && da->args ? da->args : "";
    driver_ = drv;
    memif_ = drv == "net_memif";
    takes_chains_ = pmd_takes_chains(drv, args);
    // A jumbo MTU gets room for a whole 10 KB frame: some PMDs (af_packet
    // with framesz=9216) hand over their entire socket frame in one mbuf.
    constexpr uint32_t kJumboRoom = 10240;
    const uint32_t frame_max =
        std::max({std::max<uint32_t>(cfg.mtu ? cfg.mtu : 1500, 1500) + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN +
                      2 * RTE_VLAN_HLEN,
                  cfg.min_frame_room, cfg.mtu > 1500 ? kJumboRoom : 0u});
    const uint16_t data_room =
        static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM + std::max<uint32_t>(RTE_MBUF_DEFAULT_DATAROOM, frame_max));
    const std::string pool_name = fmt::format("rocemu_mp{}", id_);
    pool_ = rte_pktmbuf_pool_create(pool_name.c_str(), cfg.mbufs, 256, 0, data_room,
                                    static_cast<int>(rte_eth_dev_socket_id(id_)) < 0 ? SOCKET_ID_ANY
                                                                                     : rte_eth_dev_socket_id(id_));
    if (!pool_) {
        error = fmt::format("{}: cannot create a pool of {} mbufs of {} bytes: {}", name_, cfg.mbufs, data_room,
                            rte_strerror(rte_errno));
        return false;
    }
    rte_eth_conf conf;
    std::memset(&conf, 0, sizeof conf);
    if (int rc = rte_eth_dev_configure(id_, 1, 1, &conf); rc != 0) {
        error = fmt::format("{}: configure failed: {}", name_, rte_strerror(-rc));
        return false;
    }
    rte_eth_dev_get_mtu(id_, &mtu_);
    if (cfg.mtu) {
        if (int rc = rte_eth_dev_set_mtu(id_, cfg.mtu); rc == 0) {
            rte_eth_dev_get_mtu(id_, &mtu_);
        } else if (drv == "net_tap") {
            // net_tap's TX refuses every frame longer than its MTU + 22 and
            // leaves it with the caller: nothing larger than 1500 would leave.
            error = fmt::format("{}: net_tap cannot carry MTU {} ({}): use MTU 1500 on a tap, or net_af_packet "
                                "on a tap or veth whose MTU you set (ip link set DEV mtu {})",
                                name_, cfg.mtu, rte_strerror(-rc), cfg.mtu);
            return false;
        } else {
            // af_packet reports a 1518-byte limit yet carries whatever its netdev's MTU allows.
            spdlog::warn("{}: DPDK cannot set MTU {} ({}); assuming the link carries it (set the netdev's MTU "
                         "yourself, e.g. ip link set DEV mtu {})",
                         name_, cfg.mtu, rte_strerror(-rc), cfg.mtu);
            mtu_ = cfg.mtu;
        }
    }
    uint16_t rx_desc = cfg.rx_desc, tx_desc = cfg.tx_desc;
    rte_eth_dev_adjust_nb_rx_tx_desc(id_, &rx_desc, &tx_desc);
    const unsigned socket = rte_eth_dev_socket_id(id_) < 0 ? 0 : static_cast<unsigned>(rte_eth_dev_socket_id(id_));
    if (int rc = rte_eth_rx_queue_setup(id_, 0, rx_desc, socket, nullptr, pool_); rc != 0) {
        error = fmt::format("{}: RX queue setup failed: {}", name_, rte_strerror(-rc));
        return false;
    }
    if (int rc = rte_eth_tx_queue_setup(id_, 0, tx_desc, socket, nullptr); rc != 0) {
        error = fmt::format("{}: TX queue setup failed: {}", name_, rte_strerror(-rc));
        return false;
    }
    if (int rc = rte_eth_dev_start(id_); rc != 0) {
        error = fmt::format("{}: start failed: {}", name_, rte_strerror(-rc));
        return false;
    }
    started_ = true;
    // IPv6 neighbour solicitations and PFC frames go to multicast addresses.
    rte_eth_allmulticast_enable(id_);
    rte_ether_addr a;
    rte_eth_macaddr_get(id_, &a);
    std::memcpy(mac_.b.data(), a.addr_bytes, 6);
    const uint64_t deadline = rte_get_timer_cycles() + static_cast<uint64_t>(cfg.link_wait.seconds() * rte_get_timer_hz());
    while (!link_up() && rte_get_timer_cycles() < deadline) rte_delay_ms(10);
    if (!link_up()) spdlog::warn("{}: link still down after {} s; polling anyway", name_, cfg.link_wait.seconds());
    if (drv == "net_af_packet") {
        // Whatever the ring holds now was taken before the port started:
        // mostly other interfaces' frames (discarded_at_start()).
        rte_mbuf* rx[32];
        for (uint16_t n; (n = rte_eth_rx_burst(id_, 0, rx, 32)) > 0;) {
            rte_pktmbuf_free_bulk(rx, n);
            discarded_at_start_ += n;
        }
        if (discarded_at_start_)
            spdlog::info("{}: discarded {} frames taken before the port started (an af_packet socket sees every "
                         "interface until it is bound to its own)",
                         name_, discarded_at_start_);
    }
    return true;
}

bool Port::link_up() const {
    rte_eth_link link;
    std::memset(&link, 0, sizeof link);
    return rte_eth_link_get_nowait(id_, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

bool Port::set_promiscuous(bool on) {
    return (on ? rte_eth_promiscuous_enable(id_) : rte_eth_promiscuous_disable(id_)) == 0;
}

Port::~Port() {
    if (keep_open_) return;
    if (started_) rte_eth_dev_stop(id_);
    rte_eth_dev_close(id_);
    if (probed_ && device_) rte_dev_remove(device_);
    if (pool_) rte_mempool_free(pool_);
}

std::unique_ptr<RingPair> RingPair::create(const std::string& tag, unsigned size, std::string& error) {
    std::unique_ptr<RingPair> r(new RingPair);
    for (int i = 0; i < 2; ++i) {
        const std::string name = fmt::format("{}_to{}", tag, i);
        r->to_[i] = rte_ring_create(name.c_str(), size, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (!r->to_[i]) {
            error = fmt::format("{}: rte_ring_create failed: {}", name, rte_strerror(rte_errno));
            return nullptr;
        }
    }
    return r;
}

RingPair::~RingPair() {
    rte_ring_free(to_[0]);
    rte_ring_free(to_[1]);
}

std::unique_ptr<Port> RingPair::port(int side, const std::string& name, const PortConfig& cfg,
                                     std::string& error) const {
    return Port::from_rings(name, to_[side], to_[1 - side], cfg, error);
}

}  // namespace rocemu::dpdk
