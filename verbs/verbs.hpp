// rocemu verbs: an ibverbs-shaped C++ API over one emulated RDMA device (a
// DPDK port, its host identity and a transport::Engine).
//
// Calls return 0 or an errno value (EINVAL, ENOMEM, ETIMEDOUT, ...) as
// libibverbs does; Context::last_error() says what was wrong, naming the
// attribute at fault. Completion statuses keep ibv_wc_status's values and
// wc_status_str() gives libibverbs' names.
//
// Two ways to run (DeviceOptions::progress):
//  - App: the application's one thread drives the NIC. poll_cq() (and every
//    blocking control call) turns the poll loop of every App-mode context of
//    the process, so two devices in one thread make progress together. No
//    locks and no threads.
//  - Lcore: a dedicated poll thread owns the engine. post_send/post_recv hand
//    WRs over through a lock-free MPSC queue, and the poll thread moves
//    completions into a lock-free SPSC queue per CQ that poll_cq() drains.
//    Each CQ must be polled by one application thread. Control calls (create,
//    modify, destroy, query) are executed by the poll thread between bursts.
//    A WR the engine refuses in this mode completes with LocQpOpErr.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dataplane/dpdk/host/host_config.hpp"
#include "dataplane/dpdk/nic_profile.hpp"
#include "dataplane/transport/types.hpp"

namespace rocemu::verbs {

using transport::AddressVector;
using transport::PathMtu;
using transport::QpAttr;
using transport::QpCap;
using transport::QpInitAttr;
using transport::QpState;
using transport::QpType;
using transport::RecvWr;
using transport::SendWr;
using transport::Sge;
using transport::Wc;
using transport::WcOpcode;
using transport::WcStatus;
using transport::WrOpcode;
using transport::PdHandle;
using transport::MrHandle;
using transport::CqHandle;
using transport::SrqHandle;
using transport::AhHandle;
using transport::Counters;

// libibverbs' ibv_wc_status_str() text.
const char* wc_status_str(WcStatus s);

enum class Progress : uint8_t { App, Lcore };

struct DeviceOptions {
    std::string devspec;     // a DPDK device string (Port::open); or
    int attach_port = -1;    // an ethdev that exists already (e.g. rte_eth_from_rings)
    host::HostOptions host;  // --ip, --mac, GID layout, ...; host.port_mtu is set on the port when mtu_set
    bool mtu_set = false;
    uint32_t mbufs = 8191;
    Progress progress = Progress::App;
    bool busy_poll = false;  // Lcore: never sleep when idle (else 20 us after 64 empty polls)
    // Longest a frame waits in the TX buffer for a fuller burst. The loop
    // pulls up to a burst from the engine per turn anyway, so waiting only
    // adds latency to ping-pong traffic.
    Nanos tx_drain{0};
    std::string capture;     // pcapng of everything the port sends and receives; empty: none
    // How long open() waits for the link to come up. A memif server's link
    // is down until its client connects, which may be after open() returns.
    Nanos link_wait = Nanos::from_s(3);
    uint32_t max_qp = 1024;
    uint32_t max_cqe = 65536;
    // Checked on every turn of a call that waits for the network (a QP's or
    // AH's address waiting for an ARP reply): true fails the call with EINTR,
    // so a stop (Ctrl-C) is not held up by a peer that never answers.
    std::function<bool()> interrupted;
    // A received PFC pause of `pfc_priority` holds the NIC's RoCE traffic for
    // quanta x 512 bit times at `link_speed` (a live fabric runs its links
    // slower than 100G).
    BitsPerSec link_speed = BitsPerSec::gbps(100);
    int pfc_priority = 3;
    // Congestion control (DCQCN by default), CNPs, PFC from the receive
    // backlog and the lab knobs (dataplane/dpdk/nic_profile.hpp). Its
    // port_speed and pfc_priority are taken from the two fields above. QPs
    // send CNPs when nic.cnp_enabled(), whatever QpInitAttr says.
    dpdk::NicProfile nic;
};

struct DeviceAttr {
    std::string fw_ver;
    uint64_t node_guid = 0;  // EUI-64 from the MAC, as mlx5/rxe
    uint32_t max_qp = 0;
    uint32_t max_qp_wr = 0;
    uint32_t max_sge = 0;
    uint32_t max_cq = 0;
    uint32_t max_cqe = 0;
    uint32_t max_mr = 0;
    uint32_t max_srq = 0;
    uint32_t max_ah = 0;
    uint32_t max_qp_rd_atom = 0;
    uint8_t phys_port_cnt = 1;
};

enum class PortState : uint8_t { Down = 1, Init, Armed, Active };
enum class LinkLayer : uint8_t { Infiniband = 1, Ethernet };

struct PortAttr {
    PortState state = PortState::Down;
    PathMtu max_mtu = PathMtu::Mtu4096;
    PathMtu active_mtu = PathMtu::Mtu1024;
    uint32_t gid_tbl_len = 0;
    uint16_t lid = 0;  // RoCE has no LIDs
    LinkLayer link_layer = LinkLayer::Ethernet;
};

using Gid = std::array<uint8_t, 16>;

// ibv_gid_type of a GID table entry.
enum class GidType : uint8_t { RoceV1, RoceV2 };

// A completion channel: CQs armed with req_notify_cq() report here once when
// they next receive an entry.
class CompChannel;

class Context {
public:
    // Starts the EAL if needed (with `eal_args`), opens the port and brings the
    // device up. nullptr and `error` on failure.
    static std::unique_ptr<Context> open(const DeviceOptions& opts, const std::vector<std::string>& eal_args,
                                         std::string& error);
    ~Context();
    // For a process that leaves with _Exit once the context is gone (rocemu's
    // commands do): the destructor writes the capture out but leaves the port
    // open (dpdk::Port::keep_open_at_exit says why).
    void keep_port_open_at_exit();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    const std::string& name() const;    // the ethdev name
    const std::string& driver() const;  // its DPDK driver, e.g. net_virtio
    const std::string& last_error() const;

    int query_device(DeviceAttr& out) const;
    int query_port(uint8_t port_num, PortAttr& out) const;
    int query_gid(uint8_t port_num, int index, Gid& out) const;
    int query_gid_type(uint8_t port_num, int index, GidType& out) const;
    // rocemu's own checks, the ones modify_qp makes before RTR: the index
    // exists and is RoCEv2, else EINVAL and a message naming the index to use.
    int check_gid_index(uint8_t port_num, int index) const;
    // The RoCEv2 index applications should use by default (3 in the connectx
    // layout, 1 in the rxe one).
    int default_gid_index() const;

    int alloc_pd(PdHandle& out);
    int dealloc_pd(PdHandle pd);
    int reg_mr(PdHandle pd, void* addr, size_t length, uint32_t access, MrHandle& out);
    // EBUSY if zero-copy frames still read the MR after up to 1 s of driving
    // the NIC for them to leave: the memory must not be freed then.
    int dereg_mr(MrHandle mr);
    int create_comp_channel(std::unique_ptr<CompChannel>& out);
    // `channel` may be null. The CQ holds at least `cqe` entries.
    int create_cq(uint32_t cqe, CompChannel* channel, CqHandle& out);
    int destroy_cq(CqHandle cq);
    int create_srq(PdHandle pd, uint32_t max_wr, uint32_t max_sge, SrqHandle& out);
    int destroy_srq(SrqHandle srq);
    // Resolves the path first (GID index check, ARP), like ibv_create_ah.
    int create_ah(PdHandle pd, AddressVector av, AhHandle& out);
    int destroy_ah(AhHandle ah);
    int create_qp(const QpInitAttr& init, Qpn& out);
    // With kAttrAv the address vector is completed first (GID index check,
    // then ARP, as fill_av does); a wrong GID index gives EINVAL and the
    // message names the index to use. ETIMEDOUT if ARP gets no answer.
    int modify_qp(Qpn qpn, const QpAttr& attr, uint32_t mask);
    int query_qp(Qpn qpn, QpAttr& attr, QpInitAttr& init);
    int destroy_qp(Qpn qpn);

    // Fast path. `bad_wr` (optional) gets the index of the first WR not posted.
    int post_send(Qpn qpn, std::span<const SendWr> wrs, size_t* bad_wr = nullptr);
    int post_recv(Qpn qpn, std::span<const RecvWr> wrs, size_t* bad_wr = nullptr);
    int post_srq_recv(SrqHandle srq, std::span<const RecvWr> wrs, size_t* bad_wr = nullptr);
    // Up to out.size() completions; returns how many (>= 0) or -EINVAL.
    int poll_cq(CqHandle cq, std::span<Wc> out);
    // Arms the CQ: its channel reports the next completion.
    int req_notify_cq(CqHandle cq);

    // App mode: one turn of every App-mode context's poll loop; returns the
    // frames received, plus one per engine with frames still to send (0: no
    // work now, so a caller may sleep). Lcore mode: nothing (the poll thread
    // runs), and 0.
    uint32_t progress();

    // Engine-wide (per port) and per-QP counters, named like rxe's and mlx5's
    // hw_counters. Also published through DPDK telemetry.
    int query_counters(Counters& port) ;
    int query_qp_counters(Qpn qpn, Counters& out);
    // The port's own counters (rx/tx packets and bytes, drops), by name.
    std::vector<std::pair<std::string, uint64_t>> port_counters() const;

    struct Impl;

private:
    explicit Context(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

class CompChannel {
public:
    ~CompChannel();
    CompChannel(const CompChannel&) = delete;
    CompChannel& operator=(const CompChannel&) = delete;
    // The CQ that completed since it was armed, or ETIMEDOUT after `timeout`.
    // In App mode this drives progress while it waits.
    int get_cq_event(Nanos timeout, CqHandle& out);
    // An eventfd, readable when an event is pending (for poll/epoll).
    int fd() const { return fd_; }

    struct State;

private:
    friend class Context;
    friend struct Context::Impl;
    CompChannel(Context::Impl& ctx, int fd, std::unique_ptr<State> st);
    Context::Impl& ctx_;
    int fd_;
    std::unique_ptr<State> st_;
};

// Every DPDK port the EAL knows (names as in rte_eth_dev_get_name_by_port);
// empty before the first Context::open starts the EAL.
std::vector<std::string> get_device_list();

// Keeps memory whose MR dereg_mr refused (zero-copy frames still read it
// after the drain) reachable until the process ends: never freed under the NIC.
void keep_pinned(std::vector<uint8_t>&& mem);

}  // namespace rocemu::verbs
