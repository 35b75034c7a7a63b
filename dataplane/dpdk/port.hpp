// One ethdev port with one RX and one TX queue and its own mbuf pool: any
// DPDK device, named by the same string `--vdev`/`-a` take (for example
// `net_af_packet0,iface=veth0`, `net_memif0,role=server`, `0000:3b:00.0`).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/units.hpp"
#include "dataplane/wire/packet.hpp"

struct rte_mempool;
struct rte_device;
struct rte_ring;

namespace rocemu::dpdk {

struct PortConfig {
    std::string devspec;                      // probed if not present yet
    uint16_t mtu = 0;                         // 0: keep the device's
    uint16_t rx_desc = 1024, tx_desc = 1024;
    uint32_t mbufs = 8191;                    // fits the 512 MB no-hugepage default twice over
    uint32_t min_frame_room = 0;              // bytes every mbuf must hold (e.g. the engine's TX buffer)
    Nanos link_wait = Nanos::from_s(3);       // bounded wait for link up at start
};

// Whether the PMD `driver` (with these devargs) sends an mbuf chain as one
// frame and is done with its segments when tx_burst returns, so the engine may
// lend it an MR's pages (read in DPDK 22.11's drivers, dataplane/dpdk/README.md
// "Chains on more port types"): net_ring hands the chain over (the receiver
// frees it); net_memif in copy mode (eth_memif_tx), net_af_packet
// (eth_af_packet_tx) and net_vhost (rte_vhost_enqueue_burst) copy every
// segment, following ->next, and free the chain before returning; net_tap
// writev()s one iovec per segment and frees it. Not: memif zero-copy=yes and
// net_virtio_user, which hand segment addresses to the peer (an MR is not in
// the DPDK memory the peer maps) and free them only later; any other PMD
// until read.
bool pmd_takes_chains(std::string_view driver, std::string_view devargs);

// What to do when probing the PCI device `addr` failed, as a sentence to add
// to the error ("" when `addr` is not a PCI address): `pci_bus` whether the
// EAL scans PCI (rocemu passes --no-pci unless -a/-b is among the EAL
// arguments), `iova_va` whether it runs with IOVA as VA (no hugepages, the
// default), `kernel_driver` the device's driver in sysfs ("" for none). uio
// drivers and vfio-pci without an IOMMU need IOVA as PA, so hugepages; any
// other kernel driver holds the device (mlx5 excepted: its PMD runs beside
// mlx5_core).
std::string pci_probe_hint(std::string_view addr, bool pci_bus, bool iova_va, std::string_view kernel_driver,
                           bool iommu);

class Port {
public:
    // Probes (if needed), configures and starts the device. nullptr and
    // `error` on failure.
    static std::unique_ptr<Port> open(const PortConfig& cfg, std::string& error);
    // Configures and starts a port that already exists (e.g. made by rte_eth_from_rings).
    static std::unique_ptr<Port> attach(uint16_t port_id, const PortConfig& cfg, std::string& error);
    // A port named `name` over two rte_rings (rte_eth_from_rings): it sends
    // into `tx` and receives from `rx`, so two ports over a crossed pair are
    // wired back to back. For tests, benchmarks and loopback runs; the rings
    // must outlive the port.
    static std::unique_ptr<Port> from_rings(const std::string& name, rte_ring* rx, rte_ring* tx,
                                            const PortConfig& cfg, std::string& error);
    ~Port();
    // For a process about to leave with _Exit: the destructor then stops and
    // closes nothing (the kernel closes a PMD's sockets and frees its memory).
    // Closing a memif port races the EAL's interrupt thread, which may still be
    // handling the peer's disconnect with the port's memory freed (a SIGSEGV at
    // exit, about 1 `rocemu pingpong` run in 8 over memif).
    void keep_open_at_exit() { keep_open_ = true; }
    Port(const Port&) = delete;
    Port& operator=(const Port&) = delete;

    uint16_t id() const { return id_; }
    const std::string& name() const { return name_; }
    const std::string& driver() const { return driver_; }  // the PMD, e.g. net_virtio, net_af_packet
    wire::MacAddr mac() const { return mac_; }
    uint16_t mtu() const { return mtu_; }
    bool link_up() const;
    rte_mempool* pool() const { return pool_; }
    // Whether its PMD sends an mbuf chain as the frame it holds, so the
    // engine may send payload from the MR's pages (zero copy): see
    // pmd_takes_chains.
    bool takes_chains() const { return takes_chains_; }
    // The zero-copy threshold where it pays (bench/nic/zero_copy_ab.sh, see
    // the README): 1024 on memif, whose TX copies the segments anyway, so
    // the engine's copy is saved; 0 (copy) on net_ring, where the receiver
    // then reads the sender's MR and the two extra mbufs per frame cost more
    // than the copy they save (loopback 64 KiB WRITE 16-29 % less per
    // CPU-second).
    uint32_t zero_copy_default() const { return takes_chains_ && memif_ ? 1024 : 0; }
    // Accept frames to any MAC: needed when the host's MAC is not the device's.
    bool set_promiscuous(bool on);
    // Frames discarded when the port started: an af_packet socket is opened
    // for every interface of its network namespace and bound to its own only
    // after its ring is set up (the PMD's order), so frames that crossed the
    // namespace's other interfaces meanwhile (a control connection's TCP, a
    // loopback flood) wait in its ring though none came in on this port.
    uint64_t discarded_at_start() const { return discarded_at_start_; }

private:
    Port() = default;
    static std::unique_ptr<Port> make(uint16_t port_id, bool probed, const PortConfig& cfg, std::string& error);
    bool start(const PortConfig& cfg, std::string& error);

    uint16_t id_ = 0;
    std::string name_;
    std::string driver_;
    bool probed_ = false;   // we probed it, so we remove it
    rte_device* device_ = nullptr;
    bool started_ = false;
    bool keep_open_ = false;
    wire::MacAddr mac_;
    uint16_t mtu_ = 1500;
    rte_mempool* pool_ = nullptr;
    bool takes_chains_ = false;
    bool memif_ = false;
    uint64_t discarded_at_start_ = 0;
};

// Two rte_rings crossed between two ports (side 0 sends into the ring side
// 1 receives from, and back): two NICs wired back to back in one process,
// for tests and benchmarks. The pair must outlive its ports.
class RingPair {
public:
    // `tag` makes the ring names unique; `size` is a power of two.
    static std::unique_ptr<RingPair> create(const std::string& tag, unsigned size, std::string& error);
    ~RingPair();
    RingPair(const RingPair&) = delete;
    RingPair& operator=(const RingPair&) = delete;

    // The port of `side` (0 or 1), named `name`.
    std::unique_ptr<Port> port(int side, const std::string& name, const PortConfig& cfg, std::string& error) const;

private:
    RingPair() = default;
    rte_ring* to_[2] = {nullptr, nullptr};  // to_[i]: what side i receives
};

}  // namespace rocemu::dpdk
