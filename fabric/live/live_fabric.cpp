#include "fabric/live/live_fabric.hpp"

#include "fabric/live/capture.hpp"
#include "fabric/live/nic_wire.hpp"
#include "fabric/live/fabric_clock.hpp"
#include "fabric/live/live_switch.hpp"
#include "fabric/live/split.hpp"

#include <fmt/format.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "dataplane/dpdk/clock.hpp"
#include "dataplane/dpdk/eal.hpp"
#include "dataplane/dpdk/eal_args.hpp"
#include "dataplane/dpdk/port.hpp"
#include "dataplane/wire/l2.hpp"
#include "switch/dpdk/runtime.hpp"
#include "switch/dpdk/stats.hpp"
#include "verbs/verbs.hpp"

namespace rocemu::fabric::live {

namespace {

using rocemu::Qpn;

constexpr uint32_t kRingSize = 8192;  // holds a NIC's whole mbuf pool
constexpr uint32_t kNicMbufs = 4095;  // per NIC, jumbo (about 38 MB)
// A NIC's TX queue, the frames its MAC has not taken: half its pool, so
// the NIC meets a full queue and holds its frames (back-pressure) before its
// pool runs dry. The other half is for what else holds the NIC's mbufs: the
// switches' queues and the receiver's backlog. A queue as deep as the pool
// let a window larger than the pool (incast.yaml, 64 MiB, --qps 64) take
// every mbuf: 383k failed refills a sender, each counted drop_no_mbuf with
// nothing lost. 2048 frames hold about a whole 8-QP window (8 x 16 x 64 KiB).
constexpr uint32_t kNicTxRing = 2048;
static_assert(kNicTxRing <= (kNicMbufs + 1) / 2);
constexpr uint64_t kChunk = 64 * 1024;     // bytes per WRITE, as the virtual-time RC NIC posts
constexpr uint32_t kChunksInFlight = 16;   // per QP
// RECVs each receiving QP of a flow that reports arrivals keeps posted: one is consumed by
// each WRITE with immediate (at most kChunksInFlight outstanding a QP) and
// posted again as its completion is handled.
constexpr uint32_t kRecvDepth = 2 * kChunksInFlight;
constexpr uint32_t kGatewayHost = 254;     // the leaf port's address in each /24 (hosts use .1 to .251)
constexpr uint32_t kSwitchPortMbufs = 511; // a switch port allocates PFC frames only
constexpr uint32_t kCqDepth = 16384;
constexpr uint32_t kPollBatch = 64;

uint32_t gateway_of(uint32_t ip) { return (ip & 0xFFFFFF00u) | kGatewayHost; }

std::string dotted(uint32_t ip) { return format_ipv4(ip); }

std::string mac_text(const std::array<uint8_t, 6>& m) {
    return fmt::format("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
}

// Byte i of flow f's source region: differs per flow and per offset.
uint8_t pattern(uint32_t flow, uint64_t i) { return static_cast<uint8_t>((i * 131 + flow * 29 + (i >> 8)) ^ 0x5A); }

struct Host {
    std::unique_ptr<verbs::Context> ctx;
    verbs::PdHandle pd;
    verbs::CqHandle cq;
    std::unique_ptr<verbs::CompChannel> ch;
    std::unique_ptr<NicWire> wire;
    rte_ring* to_nic = nullptr;    // the NIC's receive ring
    rte_ring* from_nic = nullptr;  // the NIC's transmit ring
    std::array<uint8_t, 6> gw_mac{};
    std::set<uint32_t> arp_primed;
    uint64_t outstanding = 0;
};

struct LiveSwitch {
    std::unique_ptr<sw::Switch> core;
    std::vector<std::unique_ptr<dpdk::Port>> ports;
    std::unique_ptr<sw::live::SwitchRuntime> rt;
};

// One flow's QPs and memory, kept across sizes.
struct Conn {
    uint32_t src = 0, dst = 0;
    bool reports = false;  // FlowSpec::reports_arrival: its receiving QPs keep kRecvDepth RECVs posted
    std::vector<Qpn> sq, dq;
    std::vector<uint8_t> from, to;  // kChunk each
    verbs::MrHandle from_mr, to_mr;
};

// One flow's progress in a run.
struct FlowRun {
    Conn* conn = nullptr;
    uint64_t size = 0;
    uint32_t steps = 1;
    uint32_t after = FlowSpec::kNoFlow;
    uint32_t gate = FlowSpec::kNoFlow, behind = FlowSpec::kNoFlow;
    uint32_t begun = 0;       // steps opened
    uint32_t posting = 0;     // the step being posted (< begun while one is open)
    uint32_t done_steps = 0;  // steps completed (their bytes' CQEs at the sender)
    uint64_t posted = 0;      // of step `posting`
    uint64_t completed = 0;   // of step `done_steps`
    uint64_t total_done = 0;
    StepArrivals arrivals;  // its receiver's, if it reports arrivals
    std::vector<uint32_t> in_flight;  // per QP
    uint32_t next_qp = 0;
    Nanos first_post = Nanos::max();
    Nanos last_cqe{};
    Nanos arrived{};  // its last step arrived whole at the receiver

    uint64_t step_bytes(uint32_t k) const { return fabric::step_bytes(size, steps, k); }
    bool open() const { return begun > posting; }
};

uint64_t wr_id(uint32_t flow, uint32_t qp, uint32_t len) {
    return uint64_t{flow} << 40 | uint64_t{qp} << 32 | len;
}

}  // namespace

LiveTotals LiveTotals::operator-(const LiveTotals& o) const {
    LiveTotals d;
    d.pfc_frames = pfc_frames - o.pfc_frames;
    d.ecn_marks = ecn_marks - o.ecn_marks;
    d.cnps = cnps - o.cnps;
    d.switch_drops = switch_drops - o.switch_drops;
    d.nic_drops = nic_drops - o.nic_drops;
    d.lossless_drops = lossless_drops - o.lossless_drops;
    d.ignored_responses = ignored_responses - o.ignored_responses;
    return d;
}

struct LiveFabric::Impl {
    Topology topo;
    LiveOptions opts;
    double scale = 1;
    uint8_t rc_timeout = 0;
    Nanos rtt_bound{};
    bool connected = false;  // connect() ran
    std::optional<FabricClock> clock;
    uint32_t idle_turns = 0;
    std::vector<rte_ring*> rings;
    std::vector<LiveSwitch> switches;
    std::vector<Host> hosts;
    std::map<std::tuple<uint32_t, uint32_t, uint16_t>, std::unique_ptr<Conn>> conns;
    std::vector<uint64_t> scratch;
    // Per link, the ethdevs of its ends in this process (--pcap taps them).
    std::vector<std::vector<uint16_t>> link_ports;
    std::unique_ptr<LinkCapture> capture;

    ~Impl() {
        capture.reset();
        // Runtimes hold mbufs of every pool: free them while the pools exist.
        for (LiveSwitch& s : switches) s.rt.reset();
        for (Host& h : hosts) h.wire.reset();
        drain_rings();
        hosts.clear();
        drain_rings();
        switches.clear();
        for (rte_ring* r : rings) rte_ring_free(r);
    }

    void drain_rings() {
        for (rte_ring* r : rings) {
            void* m = nullptr;
            while (rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
        }
    }

    bool split() const { return !opts.split.nic_devspecs.empty(); }
    // After 64 turns without work, sleeps opts.idle_sleep (if any).
    void idle(bool worked) {
        if (worked || opts.idle_sleep <= Nanos{}) {
            idle_turns = 0;
            return;
        }
        if (++idle_turns < 64) return;
        const timespec ts{0, static_cast<long>(opts.idle_sleep.v)};
        nanosleep(&ts, nullptr);
    }
    bool build(std::string& error);
    bool build_split(std::string& error);
    bool start_capture(std::string& error);
    bool open_nic(uint32_t n, int attach_port, const std::string& devspec, std::string& error);
    bool prime_arp(uint32_t nic, uint32_t ip, std::string& error);
    bool connect_qp(Host& h, Qpn qp, Qpn remote, const NicSpec& peer, uint16_t sport, std::string& error);
    int turn(std::vector<FlowRun>& runs, Nanos now);
    void post(std::vector<FlowRun>& runs, uint32_t f, Nanos now);
};

bool LiveFabric::Impl::build(std::string& error) {
    // Every cable end is an ethdev, and DPDK has a fixed number of them.
    const size_t needed = 2 * topo.links.size() + rte_eth_dev_count_total();
    if (needed > RTE_MAX_ETHPORTS) {
        error = fmt::format(
            "fabric '{}' has {} links: live it needs {} DPDK ports (two per link) and this DPDK build has "
            "RTE_MAX_ETHPORTS = {}{}; a fabric of at most {} links fits",
            topo.cfg.name, topo.links.size(), 2 * topo.links.size(), RTE_MAX_ETHPORTS,
            rte_eth_dev_count_total() ? fmt::format(" ({} in use)", rte_eth_dev_count_total()) : "",
            (RTE_MAX_ETHPORTS - rte_eth_dev_count_total()) / 2);
        return false;
    }
    static int serial = 0;
    const std::string tag = fmt::format("fl{}", serial++);
    // Ethdev ids of every cable end: NICs, and switch ports by (switch, port).
    std::vector<int> nic_port(topo.nics.size(), -1);
    std::vector<std::vector<int>> sw_port(topo.switches.size());
    for (uint32_t s = 0; s < topo.switches.size(); ++s) sw_port[s].assign(topo.switches[s].cfg.ports.size(), -1);
    struct NicCable {
        rte_ring *from_nic = nullptr, *to_switch = nullptr, *from_switch = nullptr, *to_nic = nullptr;
        Nanos delay{};
    };
    std::vector<NicCable> nic_cable(topo.nics.size());
    link_ports.assign(topo.links.size(), {});
    const auto ring = [&](const std::string& name, uint32_t size = kRingSize) {
        rte_ring* r = rte_ring_create(fmt::format("{}_{}", tag, name).c_str(), size, SOCKET_ID_ANY,
                                      RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (r) rings.push_back(r);
        return r;
    };
    const auto ethdev = [&](const std::string& name, rte_ring* rx, rte_ring* tx) {
        return rte_eth_from_rings(fmt::format("{}_{}", tag, name).c_str(), &rx, 1, &tx, 1, SOCKET_ID_ANY);
    };
    const auto switch_end = [&](const Endpoint& e, int id) {
        sw_port[e.index][e.port] = id;
        return set_ring_port_mac(static_cast<uint16_t>(id), topo.switches[e.index].port_mac[e.port], error);
    };
    for (uint32_t l = 0; l < topo.links.size(); ++l) {
        const LinkSpec& link = topo.links[l];
        if (link.a.is_switch && link.b.is_switch) {
            // Switch to switch: each end's runtime paces its own egress.
            rte_ring* ab = ring(fmt::format("{}ab", l));
            rte_ring* ba = ring(fmt::format("{}ba", l));
            const int ia = ab && ba ? ethdev(fmt::format("{}a", l), ba, ab) : -1;
            const int ib = ia >= 0 ? ethdev(fmt::format("{}b", l), ab, ba) : -1;
            if (ib < 0) {
                error = fmt::format("link {}: cannot make its rings and ports", link.name);
                return false;
            }
            if (!switch_end(link.a, ia) || !switch_end(link.b, ib)) return false;
            link_ports[l] = {static_cast<uint16_t>(ia), static_cast<uint16_t>(ib)};
            continue;
        }
        // A NIC's cable: the NIC's MAC (NicWire) sits between two ring pairs.
        const Endpoint& n = link.a.is_switch ? link.b : link.a;
        const Endpoint& s = link.a.is_switch ? link.a : link.b;
        NicCable& c = nic_cable[n.index];
        c.from_nic = ring(fmt::format("{}fn", l), kNicTxRing);
        c.to_switch = ring(fmt::format("{}ts", l));
        c.from_switch = ring(fmt::format("{}fs", l));
        c.to_nic = ring(fmt::format("{}tn", l));
        c.delay = link.cls.delay;
        const bool ok = c.from_nic && c.to_switch && c.from_switch && c.to_nic;
        const int in = ok ? ethdev(fmt::format("{}n", l), c.to_nic, c.from_nic) : -1;
        const int is = in >= 0 ? ethdev(fmt::format("{}s", l), c.to_switch, c.from_switch) : -1;
        if (is < 0) {
            error = fmt::format("link {}: cannot make its rings and ports", link.name);
            return false;
        }
        nic_port[n.index] = in;
        if (!switch_end(s, is)) return false;
        link_ports[l] = {static_cast<uint16_t>(in), static_cast<uint16_t>(is)};
    }

    switches.resize(topo.switches.size());
    for (uint32_t s = 0; s < topo.switches.size(); ++s) {
        const SwitchSpec& spec = topo.switches[s];
        LiveSwitch& ls = switches[s];
        for (uint16_t p = 0; p < spec.cfg.ports.size(); ++p) {
            if (sw_port[s][p] < 0) {
                error = fmt::format("{}:{} has no cable", spec.name, spec.cfg.ports[p].name);
                return false;
            }
            dpdk::PortConfig pc;
            pc.mbufs = kSwitchPortMbufs;
            pc.link_wait = Nanos{0};
            auto port = dpdk::Port::attach(static_cast<uint16_t>(sw_port[s][p]), pc, error);
            if (!port) {
                error = fmt::format("{}:{}: {}", spec.name, spec.cfg.ports[p].name, error);
                return false;
            }
            ls.ports.push_back(std::move(port));
        }
        ls.core = std::make_unique<sw::Switch>(spec.cfg);
        std::vector<dpdk::Port*> raw;
        for (const auto& p : ls.ports) raw.push_back(p.get());
        ls.rt = start_switch(topo, s, *ls.core, std::move(raw), opts.seed);
    }

    hosts.resize(topo.nics.size());
    for (uint32_t n = 0; n < topo.nics.size(); ++n) {
        if (!open_nic(n, nic_port[n], "", error)) return false;
        Host& h = hosts[n];
        const NicSpec& nic = topo.nics[n];
        h.gw_mac = topo.switches[nic.sw].port_mac[nic.sw_port];
        h.to_nic = nic_cable[n].to_nic;
        h.from_nic = nic_cable[n].from_nic;
        h.wire = std::make_unique<NicWire>(nic_cable[n].from_nic, nic_cable[n].to_switch, nic_cable[n].from_switch,
                                           nic_cable[n].to_nic, topo.switches[nic.sw].cfg.ports[nic.sw_port].speed,
                                           nic_cable[n].delay, pfc_priority(topo));
    }
    return true;
}

// A stop heard while the split fabric comes up (LiveOptions::stop).
static bool stopped(std::string& error) {
    error = "stopped while waiting for the switch nodes";
    return false;
}

// The hosts node of a split fabric: every NIC on its cable end's device,
// no switch and no MAC here (the switch nodes run them, and answer ARP).
// Returns once every NIC's link is up and every switch node is ready, so
// that no frame of the first QP meets a cable that is not there yet.
bool LiveFabric::Impl::build_split(std::string& error) {
    const SplitHosts& sp = opts.split;
    if (sp.nic_devspecs.size() != topo.nics.size() || sp.nic_peer_marks.size() != topo.nics.size()) {
        error = fmt::format("{} NIC device strings for {} NICs", sp.nic_devspecs.size(), topo.nics.size());
        return false;
    }
    if (topo.nics.size() > RTE_MAX_ETHPORTS) {
        error = fmt::format("fabric '{}' has {} NICs: its hosts process needs one DPDK port each and this DPDK build "
                            "has RTE_MAX_ETHPORTS = {}",
                            topo.cfg.name, topo.nics.size(), RTE_MAX_ETHPORTS);
        return false;
    }
    hosts.resize(topo.nics.size());
    for (uint32_t n = 0; n < topo.nics.size(); ++n)
        if (sp.nic_peer_marks[n].empty() && !open_nic(n, -1, sp.nic_devspecs[n], error)) return false;
    if (!std::ofstream(sp.servers_mark)) {
        error = fmt::format("cannot write {}", sp.servers_mark);
        return false;
    }
    for (uint32_t n = 0; n < topo.nics.size(); ++n) {
        if (sp.nic_peer_marks[n].empty()) continue;
        if (!wait_for_file(sp.nic_peer_marks[n], sp.link_wait, opts.stop)) {
            if (opts.stop && opts.stop()) return stopped(error);
            error = fmt::format("NIC {}: no {} within {:.0f} s: is its switch node running?", topo.nics[n].name,
                                sp.nic_peer_marks[n], sp.link_wait.seconds());
            return false;
        }
        if (!open_nic(n, -1, sp.nic_devspecs[n], error)) return false;
    }
    link_ports.assign(topo.links.size(), {});
    for (uint32_t l = 0; l < topo.links.size(); ++l) {
        const LinkSpec& link = topo.links[l];
        if (link.a.is_switch && link.b.is_switch) continue;
        uint16_t port = 0;
        const Endpoint& n = link.a.is_switch ? link.b : link.a;
        if (rte_eth_dev_get_port_by_name(hosts[n.index].ctx->name().c_str(), &port) == 0) link_ports[l] = {port};
    }
    // Real time: the fabric clock leaves out long gaps, and asking a switch
    // over the network may take one. The clock turns here, so it is shared
    // (the switch nodes that start meanwhile join at its time): on its own
    // it would run ahead of theirs, which their waits for each other hold
    // back, and on joining them for the first size it would stand still
    // until they caught up, while that size's frames went through (its time
    // read 0).
    const ClockSharing sharing(*clock, sp.clock.get());
    clock->advance();
    const Nanos deadline = clock->real() + sp.link_wait;
    for (;;) {
        std::vector<std::string> missing;
        for (uint32_t n = 0; n < hosts.size(); ++n) {
            verbs::PortAttr a;
            if (hosts[n].ctx->query_port(1, a) != 0 || a.state != verbs::PortState::Active)
                missing.push_back(fmt::format("the link of NIC {}", topo.nics[n].name));
        }
        if (sp.switches_waiting) {
            try {
                for (std::string& w : sp.switches_waiting()) missing.push_back(std::move(w));
            } catch (const std::runtime_error& e) {
                error = e.what();
                return false;
            }
        }
        if (missing.empty()) return true;
        if (opts.stop && opts.stop()) return stopped(error);
        clock->advance();
        if (clock->real() > deadline) {
            error = fmt::format("after {:.0f} s still waiting for {}{}", sp.link_wait.seconds(), missing.front(),
                                missing.size() > 1 ? fmt::format(" and {} more", missing.size() - 1) : "");
            return false;
        }
        hosts.front().ctx->progress();
        idle(false);
    }
}

// NIC n as a verbs device on the ethdev `attach_port`, or (-1) on the
// device `devspec` names.
bool LiveFabric::Impl::open_nic(uint32_t n, int attach_port, const std::string& devspec, std::string& error) {
    const NicSpec& nic = topo.nics[n];
    Host& h = hosts[n];
    verbs::DeviceOptions o;
    o.attach_port = attach_port;
    o.devspec = devspec;
    o.link_wait = Nanos{0};
    o.host.ip = fmt::format("{}/24", dotted(nic.ip));
    o.host.mac = mac_text(nic.mac);
    o.host.gateway = dotted(gateway_of(nic.ip));
    o.host.port_mtu = static_cast<int>(topo.cfg.nic.mtu);
    o.mtu_set = topo.cfg.nic.mtu != 1500;
    o.mbufs = kNicMbufs;
    o.progress = verbs::Progress::App;
    o.tx_drain = Nanos{0};
    o.link_speed = topo.switches[nic.sw].cfg.ports[nic.sw_port].speed;
    o.pfc_priority = pfc_priority(topo);
    o.nic.cc = topo.cfg.nic.cc;  // the fabric's NIC profile, already slowed down with the links
    // A lossless fabric stalls a NIC's TX for as long as PFC pauses it; the
    // switches' PFC watchdog bounds that, not a NIC TX timeout.
    o.nic.tx_timeout = Nanos{0};
    // Split, a QP's connect waits for ARP through the switch nodes, and
    // forever (5 s a QP) when one of them is gone: a stop ends that wait.
    o.interrupted = opts.stop;
    // net_ring cannot set an MTU and carries any frame: the port's
    // warning that it assumes the MTU is expected here.
    const spdlog::level::level_enum level = spdlog::get_level();
    spdlog::set_level(spdlog::level::err);
    h.ctx = verbs::Context::open(o, opts.eal_args, error);
    spdlog::set_level(level);
    if (!h.ctx) {
        error = fmt::format("NIC {}: {}", nic.name, error);
        return false;
    }
    if (h.ctx->alloc_pd(h.pd) || h.ctx->create_comp_channel(h.ch) || h.ctx->create_cq(kCqDepth, h.ch.get(), h.cq) ||
        h.ctx->req_notify_cq(h.cq)) {
        error = fmt::format("NIC {}: {}", nic.name, h.ctx->last_error());
        return false;
    }
    const std::vector<std::string>& cables = opts.split.nic_cables;
    if (n < cables.size() && !cables[n].empty()) {
        fmt::print("cable {}: NIC {} on {} ({})\n", cables[n], nic.name, h.ctx->name(), h.ctx->driver());
        std::fflush(stdout);
    }
    return true;
}

// An ARP request from `ip` at the NIC's gateway MAC, delivered to the NIC: its
// host stack learns that `ip` is reached through the leaf port, as every
// virtual-time NIC sends through it.
bool LiveFabric::Impl::prime_arp(uint32_t nic, uint32_t ip, std::string& error) {
    Host& h = hosts[nic];
    if (!h.arp_primed.insert(ip).second) return true;
    rte_mbuf* m = rte_pktmbuf_alloc(switches[topo.nics[nic].sw].ports[topo.nics[nic].sw_port]->pool());
    uint8_t* p = m ? reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, 60)) : nullptr;
    if (!p) {
        rte_pktmbuf_free(m);
        error = "no mbuf for an ARP request";
        return false;
    }
    std::memset(p, 0, 60);
    wire::L2 l2;
    l2.dst = wire::MacAddr::broadcast();
    l2.src = wire::MacAddr{h.gw_mac};
    wire::Arp arp;
    arp.oper = wire::kArpRequest;
    arp.sha = wire::MacAddr{h.gw_mac};
    arp.spa = ip;
    arp.tpa = topo.nics[nic].ip;
    wire::encode_arp(l2, arp, std::span(p, 60));
    if (rte_ring_enqueue(h.to_nic, m) != 0) {
        rte_pktmbuf_free(m);
        error = "the ring to a NIC is full";
        return false;
    }
    return true;
}

bool LiveFabric::Impl::connect_qp(Host& h, Qpn qp, Qpn remote, const NicSpec& peer, uint16_t sport,
                                  std::string& error) {
    using namespace transport;
    verbs::QpAttr a;
    a.qp_state = QpState::Init;
    a.port_num = 1;
    a.qp_access_flags = kLocalWrite | kRemoteWrite;
    const auto fail = [&] {
        error = h.ctx->last_error();
        return false;
    };
    if (h.ctx->modify_qp(qp, a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags)) return fail();
    a.qp_state = QpState::Rtr;
    a.path_mtu = *path_mtu_from_bytes(static_cast<int>(topo.cfg.nic.rdma_mtu()));
    a.dest_qp_num = remote;
    a.rq_psn = Psn{0};
    a.max_dest_rd_atomic = 16;
    a.min_rnr_timer = 1;
    a.ah_attr.dgid = wire::IpAddr::from_v4(peer.ip);
    a.ah_attr.sgid_index = static_cast<uint8_t>(h.ctx->default_gid_index());
    a.ah_attr.udp_sport = sport;
    a.ah_attr.traffic_class = static_cast<uint8_t>(topo.cfg.nic.dscp << 2 | wire::ecn::kEct0);
    if (h.ctx->modify_qp(qp, a,
                         kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic |
                             kAttrMinRnrTimer))
        return fail();
    a.qp_state = QpState::Rts;
    a.sq_psn = Psn{0};
    a.timeout = rc_timeout;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 16;
    if (h.ctx->modify_qp(qp, a,
                         kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxQpRdAtomic))
        return fail();
    return true;
}

bool LiveFabric::Impl::start_capture(std::string& error) {
    if (opts.pcap_link.empty()) return true;
    const std::optional<uint32_t> l = topo.find_link(opts.pcap_link);
    if (!l) {
        error = topo.pcap_link_error(opts.pcap_link);
        return false;
    }
    if (link_ports[*l].empty()) return true;
    capture = LinkCapture::open(opts.pcap_path, error);
    if (!capture) return false;
    for (const uint16_t port : link_ports[*l])
        if (!capture->tap(port, error)) return false;
    return true;
}

uint8_t LiveFabric::rc_timeout() const { return impl_->rc_timeout; }
Nanos LiveFabric::rtt_bound() const { return impl_->rtt_bound; }

Nanos LiveFabric::clock_jumped() const { return impl_->clock->jumped(); }

std::optional<uint64_t> LiveFabric::captured_frames() const {
    if (!impl_->capture) return std::nullopt;
    return impl_->capture->frames();
}

bool LiveFabric::flush_capture(std::string& error) {
    if (!impl_->capture || impl_->capture->flush()) return true;
    error = impl_->capture->error();
    return false;
}

LiveFabric::LiveFabric(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LiveFabric::~LiveFabric() = default;

std::unique_ptr<LiveFabric> LiveFabric::build(const Topology& topo, const LiveOptions& o, double scale,
                                              std::string& error) {
    std::vector<std::string> eal = o.eal_args;
    // Every NIC has its own pool of kNicMbufs jumbo mbufs.
    if (!dpdk::has_memory_option(eal)) {
        eal.push_back("-m");
        eal.push_back(std::to_string(512 + 40 * topo.nics.size()));
    }
    if (!dpdk::Eal::init(eal, error)) return nullptr;
    auto m = std::make_unique<Impl>();
    m->topo = topo;
    m->opts = o;
    m->opts.eal_args = eal;
    m->scale = scale;
    m->clock.emplace(FabricClock::max_step_for(topo));
    if (!(m->split() ? m->build_split(error) : m->build(error))) {
        // A split hosts node refused here (a switch of another fabric, a
        // timeout) has memif server ends whose clients, the switch nodes, may
        // still be connecting: closing the ports then made DPDK's interrupt
        // thread spin on the closed listener and crash (SIGSEGV in
        // rte_intr_fd_get, seen in the e2e's QoS refusal). A close hands
        // nothing over, so the ports stay open and the hosts node leaves with
        // _Exit, as switch nodes do (run_hosts_node_cli).
        if (m->split()) (void)m.release();
        return nullptr;
    }
    if (!m->start_capture(error)) return nullptr;
    m->scratch.resize(sw::live::port_counter_names().size());
    return std::unique_ptr<LiveFabric>(new LiveFabric(std::move(m)));
}

bool LiveFabric::connect(const std::vector<FlowSpec>& flows, std::string& error) {
    Impl& m = *impl_;
    if (m.connected) {
        error = "connect: the fabric's QPs were already made (one call with every flow of the run)";
        return false;
    }
    m.connected = true;
    const Topology& t = m.topo;
    const NicProfile& prof = t.cfg.nic;
    std::vector<std::tuple<uint32_t, uint32_t, uint16_t>> fresh;
    std::set<std::tuple<uint32_t, uint32_t, uint16_t>> reporting;
    for (const FlowSpec& f : flows)
        if (f.reports_arrival()) reporting.insert(std::make_tuple(f.src, f.dst, f.sport));
    for (const FlowSpec& f : flows) {
        const auto key = std::make_tuple(f.src, f.dst, f.sport);
        if (m.conns.count(key)) continue;
        m.conns.emplace(key, nullptr);
        fresh.push_back(key);
    }
    // The ACK timeout covers a round trip behind full queues and the busiest
    // NIC's whole window (every QP of it, kChunksInFlight each).
    std::vector<uint64_t> qps(t.nics.size());
    for (const auto& [key, conn] : m.conns) qps[std::get<0>(key)] += std::max(1u, m.opts.qps_per_flow);
    const Bytes window{*std::max_element(qps.begin(), qps.end()) * kChunksInFlight * kChunk};
    m.rtt_bound = m.opts.rc_timeout ? Nanos{} : fabric::live::rtt_bound(t, window);
    m.rc_timeout = m.opts.rc_timeout ? m.opts.rc_timeout : rc_timeout_for(m.rtt_bound);
    // Every NIC reaches everything through its gateway; peers in its own /24
    // are answered with the gateway MAC too. Split, the leaf's node answers
    // the NICs' ARP requests that way instead.
    if (!m.split()) {
        for (const auto& [src, dst, sport] : fresh) {
            for (const auto& [a, b] : {std::pair{src, dst}, std::pair{dst, src}}) {
                const uint32_t peer = t.nics[b].ip;
                const uint32_t via =
                    (peer & 0xFFFFFF00u) == (t.nics[a].ip & 0xFFFFFF00u) ? peer : gateway_of(t.nics[a].ip);
                if (!m.prime_arp(a, via, error)) return false;
            }
        }
    }
    if (!m.hosts.empty()) m.hosts.front().ctx->progress();
    for (const auto& key : fresh) {
        // Split, each QP's connect waits for ARP through the switch nodes:
        // seconds for a fabric's QPs, so a stop is heard between them (and
        // within one, through DeviceOptions::interrupted).
        if (m.opts.stop && m.opts.stop()) {
            error = "stopped while connecting the QPs";
            return false;
        }
        const auto& [src, dst, sport] = key;
        auto c = std::make_unique<Conn>();
        c->src = src;
        c->dst = dst;
        c->reports = reporting.count(key) != 0;
        Host& hs = m.hosts[src];
        Host& hd = m.hosts[dst];
        for (uint32_t q = 0; q < std::max(1u, m.opts.qps_per_flow); ++q) {
            transport::QpInitAttr ia;
            ia.qp_type = transport::QpType::Rc;
            ia.cap.max_send_wr = 4 * kChunksInFlight;
            ia.cap.max_recv_wr = c->reports ? kRecvDepth : 1;  // WRITEs with immediate take one each
            ia.peer_accepts_cnp = prof.cc.algorithm != cc::CcAlgorithm::kNone;
            ia.reliability = prof.spraying ? transport::Reliability::Spray : transport::Reliability::Interop;
            ia.spray_paths = 16;
            ia.spray_policy = transport::SprayPolicy::RoundRobin;
            Qpn sq, dq;
            ia.pd = hs.pd;
            ia.send_cq = ia.recv_cq = hs.cq;
            if (hs.ctx->create_qp(ia, sq)) {
                error = fmt::format("NIC {}: {}", t.nics[src].name, hs.ctx->last_error());
                return false;
            }
            ia.pd = hd.pd;
            ia.send_cq = ia.recv_cq = hd.cq;
            if (hd.ctx->create_qp(ia, dq)) {
                error = fmt::format("NIC {}: {}", t.nics[dst].name, hd.ctx->last_error());
                return false;
            }
            // Each QP of a flow has its own UDP source port: its own ECMP path.
            const auto port = static_cast<uint16_t>(0xC000 | ((sport + q) & 0x3FFF));
            if (!m.connect_qp(hs, sq, dq, t.nics[dst], port, error) || !m.connect_qp(hd, dq, sq, t.nics[src], port, error)) {
                error = fmt::format("flow {} -> {}: {}", t.nics[src].name, t.nics[dst].name, error);
                return false;
            }
            // No SGE: a WRITE with immediate places its payload by its RETH.
            const std::vector<transport::RecvWr> recvs(c->reports ? kRecvDepth : 0);
            if (!recvs.empty() && hd.ctx->post_recv(dq, recvs)) {
                error = fmt::format("NIC {}: posting RECVs: {}", t.nics[dst].name, hd.ctx->last_error());
                return false;
            }
            c->sq.push_back(sq);
            c->dq.push_back(dq);
        }
        c->from.resize(kChunk);
        c->to.resize(kChunk);
        if (hs.ctx->reg_mr(hs.pd, c->from.data(), kChunk, transport::kLocalWrite, c->from_mr) ||
            hd.ctx->reg_mr(hd.pd, c->to.data(), kChunk, transport::kLocalWrite | transport::kRemoteWrite, c->to_mr)) {
            error = fmt::format("flow {} -> {}: registering memory: {} {}", t.nics[src].name, t.nics[dst].name,
                                hs.ctx->last_error(), hd.ctx->last_error());
            return false;
        }
        m.conns[key] = std::move(c);
    }
    // The NICs' ARP replies and announcements wait on their cables; the
    // switches route IP only, so they are taken out here rather than counted
    // as drops in the first run.
    if (!fresh.empty() && !m.split()) {
        if (!m.hosts.empty()) m.hosts.front().ctx->progress();
        for (Host& h : m.hosts) {
            void* f = nullptr;
            while (rte_ring_dequeue(h.from_nic, &f) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(f));
        }
    }
    return true;
}

void LiveFabric::Impl::post(std::vector<FlowRun>& runs, uint32_t f, Nanos now) {
    FlowRun& r = runs[f];
    Conn& c = *r.conn;
    Host& h = hosts[c.src];
    const auto nq = static_cast<uint32_t>(c.sq.size());
    uint32_t tried = 0;
    while (r.open() && tried < nq) {
        const uint64_t step = r.step_bytes(r.posting);
        const uint32_t q = r.next_qp;
        if (r.in_flight[q] >= kChunksInFlight) {
            r.next_qp = (q + 1) % nq;
            ++tried;
            continue;
        }
        const auto len = static_cast<uint32_t>(std::min<uint64_t>(kChunk, step - r.posted));
        transport::SendWr w;
        w.wr_id = wr_id(f, q, len);
        // The receiver counts each step's bytes by the immediate.
        w.opcode = c.reports ? transport::WrOpcode::RdmaWriteWithImm : transport::WrOpcode::RdmaWrite;
        w.imm_data = r.posting;
        w.send_flags = transport::kSendSignaled;
        w.sg_list.push_back(transport::Sge{reinterpret_cast<uint64_t>(c.from.data()), len, c.from_mr.lkey});
        w.remote_addr = reinterpret_cast<uint64_t>(c.to.data());
        w.rkey = c.to_mr.rkey;
        if (h.ctx->post_send(c.sq[q], std::span(&w, 1))) {
            r.next_qp = (q + 1) % nq;
            ++tried;
            continue;
        }
        if (r.first_post == Nanos::max()) r.first_post = now;
        r.posted += len;
        ++r.in_flight[q];
        ++h.outstanding;
        if (c.reports) ++hosts[c.dst].outstanding;  // its RECV completion
        if (r.posted == step) {
            ++r.posting;
            r.posted = 0;
        }
        r.next_qp = (q + 1) % nq;
        tried = 0;
    }
}

WorkloadResult LiveFabric::run(const std::vector<FlowSpec>& flows, Nanos timeout, Nanos every,
                               const std::function<bool(Nanos, uint64_t, uint64_t)>& tick, Nanos sample_every,
                               std::vector<Sample>& samples) {
    Impl& m = *impl_;
    WorkloadResult res;
    std::vector<FlowRun> runs(flows.size());
    std::vector<std::vector<uint32_t>> followers(flows.size());
    std::vector<std::vector<uint32_t>> waiters(flows.size());
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> rx_flow;  // (receiving NIC, QPN) -> flow reporting arrivals
    uint64_t total = 0;
    for (uint32_t f = 0; f < flows.size(); ++f) {
        const FlowSpec& s = flows[f];
        FlowRun& r = runs[f];
        r.conn = m.conns.at(std::make_tuple(s.src, s.dst, s.sport)).get();
        r.size = s.size.v;
        r.steps = std::max(s.steps, 1u);
        r.after = s.after;
        r.in_flight.assign(r.conn->sq.size(), 0);
        if (s.reports_arrival() && !r.conn->reports) {
            res.error = fmt::format("flow {}: reports arrivals on QPs connected without RECVs (connect() was given "
                                    "other flows)", f);
            return res;
        }
        if (r.conn->reports) {
            r.arrivals = StepArrivals(r.size, r.steps);
            for (const Qpn q : r.conn->dq) rx_flow[{r.conn->dst, q.v}] = f;
        }
        for (uint64_t i = 0; i < kChunk; ++i) r.conn->from[i] = pattern(f, i);
        std::fill(r.conn->to.begin(), r.conn->to.end(), 0);
        if (s.after != FlowSpec::kNoFlow && s.after < flows.size() && s.after != f) followers[s.after].push_back(f);
        res.error = gate_problem(flows, f);
        if (!res.error.empty()) return res;
        for (const uint32_t w : {s.gate, s.behind})
            if (w != FlowSpec::kNoFlow) waiters[w].push_back(f);
        r.gate = s.gate;
        r.behind = s.behind;
        total += r.size;
    }
    const auto maybe_begin = [&](uint32_t f) {
        FlowRun& r = runs[f];
        if (r.begun == 0) {
            // A gated flow: its first step once its gate has arrived here
            // (completed, if it reports no arrivals) and the flow it is
            // behind has opened all its steps (as Fabric::open_waiters).
            const FlowRun& g = runs[r.gate];
            if (g.size > 0 && !(g.conn->reports ? g.arrivals.complete() : g.done_steps == g.steps)) return false;
            if (r.behind != FlowSpec::kNoFlow && runs[r.behind].begun < runs[r.behind].steps) return false;
            r.begun = 1;
            return true;
        }
        if (r.begun >= r.steps) return false;
        // Step k forwards what flow `after`'s step k-1 brought: it opens once
        // that has arrived, whatever its own earlier steps' ACKs; without an
        // `after`, once its own step k-1 has completed (as in virtual time,
        // Fabric::maybe_begin).
        if (r.after != FlowSpec::kNoFlow) {
            const FlowRun& a = runs[r.after];
            if ((a.conn->reports ? a.arrivals.arrived() : a.done_steps) < r.begun) return false;
        } else if (r.done_steps < r.begun) {
            return false;
        }
        ++r.begun;
        return true;
    };
    std::vector<uint32_t> touched;
    // Opens flow g's next step if it may (to be posted: `touched`); once
    // all its steps are open, the gated flows behind it may open too.
    const auto open = [&](uint32_t g, const auto& self) -> void {
        if (!maybe_begin(g)) return;
        touched.push_back(g);
        if (runs[g].begun < runs[g].steps) return;
        for (const uint32_t w : waiters[g])
            if (runs[w].begun == 0) self(w, self);
    };
    // Flow f has arrived (or opened all its steps): the gated flows waiting
    // for it that may open now.
    const auto open_waiters = [&](uint32_t f) {
        for (const uint32_t w : waiters[f])
            if (runs[w].begun == 0) open(w, open);
    };

    FabricClock& clk = *m.clock;
    // The switch nodes wait for this node's clock only while a size runs
    // (and while it waits for them to be ready): between sizes it does not
    // turn it (nor after a throw: a switch's counters that cannot be had),
    // so it joins behind them and starts at their time.
    const ClockSharing sharing(clk, m.opts.split.clock.get());
    const Nanos start = clk.advance();
    const Nanos real_start = clk.real();
    const uint64_t held_turns0 = clk.held_back_turns();
    const Nanos held0 = clk.held_back();
    const Nanos waited0 = clk.waited();
    for (uint32_t f = 0; f < runs.size(); ++f) {
        if (flows[f].gated()) continue;
        runs[f].begun = 1;
        m.post(runs, f, start);
    }
    // A gated flow whose gate is empty opens at once.
    for (uint32_t f = 0; f < runs.size(); ++f)
        if (!flows[f].gated() && runs[f].begun >= runs[f].steps) open_waiters(f);
    for (const uint32_t f : touched) m.post(runs, f, start);
    uint32_t done_flows = 0;
    for (const FlowRun& r : runs)
        if (r.size == 0) ++done_flows;
    // Flows whose receiver has seen every step arrive (or that count no
    // arrivals). A size ends only with these too: a step's RECV completion
    // is in the receiver's CQ before the sender's WRITE completes (the ACK
    // follows it), but it may not have been polled yet, and the next size,
    // on the same QPs, would count it as its own.
    uint32_t arrived_flows = 0;
    for (const FlowRun& r : runs)
        if (!r.conn->reports || r.size == 0) ++arrived_flows;
    uint64_t done_bytes = 0;
    // What each flow's receiving QPs executed (their counters count from the
    // QP's start, and the sizes of a sweep share QPs), from `base` on.
    const auto received = [&](uint32_t f) {
        uint64_t rx = 0;
        for (const Qpn q : runs[f].conn->dq) {
            transport::Counters c;
            if (m.hosts[flows[f].dst].ctx->query_qp_counters(q, c) == 0) rx += c.rcvd_bytes;
        }
        return rx;
    };
    std::vector<uint64_t> base(runs.size());
    for (uint32_t f = 0; f < runs.size(); ++f) base[f] = received(f);
    Nanos next_tick = real_start + every, next_sample = start;
    turns_ = 0;
    turn_sum_ = max_turn_ = Nanos{};
    std::vector<transport::Wc> wc(kPollBatch);
    for (;;) {
        const Nanos now = clk.advance();
        const Nanos real = clk.real();
        const Nanos dt = clk.last_dt();
        ++turns_;
        turn_sum_ += dt;
        max_turn_ = std::max(max_turn_, dt);
        if (now >= next_sample) {
            const std::vector<std::string> rows = switch_port_rows();
            Sample& s = samples.emplace_back(Sample{now - start, done_bytes, totals(rows), {}, data_queues(rows)});
            // What each flow's receiving QPs executed in this size:
            // completions come back a 64 KiB WRITE at a time, bunched by the
            // ACKs' queueing.
            for (uint32_t f = 0; f < runs.size(); ++f) s.flow_bytes.push_back(received(f) - base[f]);
            next_sample += sample_every;
        }
        if ((done_flows == runs.size() && arrived_flows == runs.size()) || res.bad_completions) break;
        if (real - real_start >= timeout) {
            res.error = fmt::format("timed out after {:.1f} s with {} of {} flows complete", timeout.seconds(),
                                    done_flows, runs.size());
            break;
        }
        if (real >= next_tick) {
            if (tick && tick(real - real_start, done_bytes, total)) {
                res.stopped = true;
                break;
            }
            next_tick = real + every;
        }
        for (Host& h : m.hosts)
            if (h.wire) h.wire->poll(now);
        for (LiveSwitch& s : m.switches) s.rt->poll(now);
        const uint32_t work = m.hosts.empty() ? 0 : m.hosts.front().ctx->progress();
        touched.clear();
        for (Host& h : m.hosts) {
            if (!h.outstanding) continue;
            verbs::CqHandle fired;
            if (h.ch->get_cq_event(Nanos{0}, fired) != 0) continue;
            int n;
            do {
                n = h.ctx->poll_cq(h.cq, wc);
                for (int i = 0; i < n; ++i) {
                    const transport::Wc& c = wc[static_cast<size_t>(i)];
                    --h.outstanding;
                    if (c.status != transport::WcStatus::Success) {
                        ++res.bad_completions;
                        if (res.error.empty())
                            res.error = fmt::format("a WRITE completed with '{}'", verbs::wc_status_str(c.status));
                        continue;
                    }
                    if (c.opcode == transport::WcOpcode::RecvRdmaWithImm) {
                        // A WRITE of a flow that reports arrivals has
                        // arrived: its RECV goes back, and a step arrived
                        // whole opens the next step of the flows that
                        // forward it, the flow whole the flows it gates.
                        const auto it = rx_flow.find({static_cast<uint32_t>(&h - m.hosts.data()), c.qp_num.v});
                        if (it == rx_flow.end()) continue;
                        const uint32_t f = it->second;
                        FlowRun& r = runs[f];
                        const transport::RecvWr again{};
                        if (h.ctx->post_recv(c.qp_num, std::span(&again, 1)) && res.error.empty())
                            res.error = fmt::format("posting a RECV: {}", h.ctx->last_error());
                        const uint32_t came = r.arrivals.add(c.imm_data, c.byte_len);
                        for (uint32_t k = 0; k < came; ++k)
                            for (const uint32_t g : followers[f]) open(g, open);
                        if (came > 0 && r.arrivals.complete()) {
                            if (r.size > 0) ++arrived_flows;
                            r.arrived = now;
                            open_waiters(f);
                        }
                        continue;
                    }
                    const auto f = static_cast<uint32_t>(c.wr_id >> 40);
                    const auto q = static_cast<uint32_t>(c.wr_id >> 32) & 0xFF;
                    const auto len = static_cast<uint32_t>(c.wr_id);
                    FlowRun& r = runs[f];
                    --r.in_flight[q];
                    r.completed += len;
                    r.total_done += len;
                    done_bytes += len;
                    r.last_cqe = now;
                    touched.push_back(f);
                    // A step is complete once CQEs cover its bytes (over
                    // several QPs, the bytes of any of its chunks).
                    while (r.done_steps < r.steps && r.completed >= r.step_bytes(r.done_steps)) {
                        r.completed -= r.step_bytes(r.done_steps);
                        ++r.done_steps;
                        if (r.done_steps == r.steps) ++done_flows;
                        open(f, open);
                        for (const uint32_t g : followers[f]) open(g, open);
                        if (r.done_steps == r.steps && !r.conn->reports) open_waiters(f);
                    }
                }
            } while (n == static_cast<int>(kPollBatch));
            h.ctx->req_notify_cq(h.cq);
        }
        for (const uint32_t f : touched) m.post(runs, f, now);
        m.idle(work > 0 || !touched.empty());
    }
    Nanos first = Nanos::max(), last{};
    for (uint32_t f = 0; f < runs.size(); ++f) {
        const FlowRun& r = runs[f];
        FlowResult fr;
        fr.src = r.conn->src;
        fr.dst = r.conn->dst;
        fr.bytes = r.total_done;
        fr.first_post = r.first_post == Nanos::max() ? r.first_post : r.first_post - start;
        fr.last_cqe = r.last_cqe > Nanos{} ? r.last_cqe - start : Nanos{};
        fr.arrived = r.arrived > Nanos{} ? r.arrived - start : Nanos{};
        fr.done = r.done_steps == r.steps;
        if (fr.done && r.size > 0) {
            const uint64_t n = std::min<uint64_t>(kChunk, r.step_bytes(0));
            fr.verified = std::memcmp(r.conn->from.data(), r.conn->to.data(), n) == 0 ? 1 : 0;
        }
        first = std::min(first, fr.first_post);
        last = std::max(last, fr.last_cqe);
        res.flows.push_back(fr);
    }
    res.complete = done_flows == runs.size() && res.bad_completions == 0;
    res.held_back_turns = clk.held_back_turns() - held_turns0;
    res.held_back = clk.held_back() - held0;
    res.waited = clk.waited() - waited0;
    res.time = first == Nanos::max() ? Nanos{} : last - first;
    return res;
}

LiveTotals LiveFabric::totals(bool fresh) { return totals(switch_port_rows(fresh)); }

LiveTotals LiveFabric::totals(const std::vector<std::string>& rows) {
    Impl& m = *impl_;
    LiveTotals t;
    const SwitchRowTotals r = sum_rows(rows);
    t.pfc_frames = r.pfc_frames;
    t.ecn_marks = r.ecn_marks;
    t.switch_drops = r.drops;
    t.lossless_drops = r.lossless_drops;
    for (Host& h : m.hosts) {
        transport::Counters c;
        h.ctx->query_counters(c);
        t.cnps += c.np_cnp_sent;
        // An ACK the requester ignores (a duplicate, or one for PSNs already
        // completed) loses nothing: counted apart.
        for (size_t i = 0; i < c.drops.size(); ++i) {
            const bool ignored = transport::is_ignored_response(static_cast<transport::DropReason>(i));
            (ignored ? t.ignored_responses : t.nic_drops) += c.drops[i];
        }
        for (const auto& [name, v] : h.ctx->port_counters())
            if (name.rfind("drop_", 0) == 0) t.nic_drops += v;
    }
    return t;
}

std::vector<std::string> LiveFabric::switch_port_rows(bool fresh) {
    Impl& m = *impl_;
    if (m.opts.split.switch_rows) return m.opts.split.switch_rows(fresh);
    std::vector<std::string> rows;
    for (uint32_t s = 0; s < m.switches.size(); ++s)
        append_port_rows(m.topo, s, *m.switches[s].core, *m.switches[s].rt, m.clock->now(), m.scratch, rows);
    return rows;
}

std::vector<QueueSample> LiveFabric::data_queues(const std::vector<std::string>& rows) {
    const std::string q = fmt::format("q{}_", impl_->topo.data_queue());
    std::vector<QueueSample> out, nics;
    for (const std::string& row : rows) {
        // switch,port,counter,value
        const size_t a = row.find(','), b = row.find(',', a + 1), c = row.find(',', b + 1);
        if (c == std::string::npos) continue;
        if (row.compare(b + 1, c - b - 1, kNicPausedRow) == 0) {  // a split fabric's NIC, from its leaf
            const std::string_view sw(row.data(), a), port(row.data() + a + 1, b - a - 1);
            for (const NicSpec& n : impl_->topo.nics) {
                const SwitchSpec& at = impl_->topo.switches[n.sw];
                if (at.name == sw && at.cfg.ports[n.sw_port].name == port)
                    nics.push_back(QueueSample{n.name, 0, std::strtoull(row.c_str() + c + 1, nullptr, 10)});
            }
            continue;
        }
        if (row.compare(b + 1, q.size(), q) != 0) continue;
        const std::string_view counter(row.data() + b + 1 + q.size(), c - b - 1 - q.size());
        if (counter != "depth_bytes" && counter != "paused_ns") continue;
        std::string port = row.substr(0, a) + ":" + row.substr(a + 1, b - a - 1);
        if (out.empty() || out.back().port != port) out.push_back(QueueSample{std::move(port)});
        (counter == "depth_bytes" ? out.back().depth_bytes : out.back().paused_ns) =
            std::strtoull(row.c_str() + c + 1, nullptr, 10);
    }
    // The NICs' own pause time, from their leaves' rows in a split fabric,
    // or from their MACs here.
    out.insert(out.end(), nics.begin(), nics.end());
    const Nanos now = impl_->clock->now();
    for (uint32_t n = 0; n < impl_->hosts.size(); ++n)
        if (const NicWire* w = impl_->hosts[n].wire.get())
            if (const Nanos t = w->paused_time(now); t > Nanos{0})
                out.push_back(QueueSample{impl_->topo.nics[n].name, 0, static_cast<uint64_t>(t.v)});
    return out;
}

std::vector<std::string> LiveFabric::nic_rows() {
    Impl& m = *impl_;
    std::vector<std::string> rows;
    for (uint32_t n = 0; n < m.hosts.size(); ++n) {
        Host& h = m.hosts[n];
        const std::string& name = m.topo.nics[n].name;
        const auto put = [&](std::string_view counter, uint64_t v) {
            if (v) rows.push_back(fmt::format("{},{},{}", name, counter, v));
        };
        transport::Counters c;
        h.ctx->query_counters(c);
        transport::for_each_counter(c, put);
        for (const auto& [counter, v] : h.ctx->port_counters()) put(counter, v);
        if (!h.wire) continue;  // split: the MAC runs in the switch node
        const NicWireCounters& w = h.wire->counters();
        put("mac_to_switch_frames", w.to_switch_frames);
        put("mac_to_nic_frames", w.to_nic_frames);
        put("mac_pfc_seen", w.pfc_seen);
        put("mac_paused_turns", w.held_turns);
        put("mac_paused_ns", static_cast<uint64_t>(h.wire->paused_time(m.clock->now()).v));
        put("mac_ring_full_turns", w.ring_full);
    }
    return rows;
}

}  // namespace rocemu::fabric::live
