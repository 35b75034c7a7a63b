// A switch of a split live fabric in its own process (node.hpp).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "dataplane/dpdk/eal.hpp"
#include "dataplane/dpdk/eal_args.hpp"
#include "dataplane/dpdk/port.hpp"
#include "dataplane/wire/l2.hpp"
#include "fabric/live/capture.hpp"
#include "fabric/live/control.hpp"
#include "fabric/live/monotonic.hpp"
#include "fabric/live/fabric_clock.hpp"
#include "fabric/live/live_switch.hpp"
#include "fabric/live/nic_wire.hpp"
#include "fabric/live/node.hpp"
#include "fabric/live/split.hpp"
#include "switch/dpdk/frame.hpp"
#include "switch/dpdk/runtime.hpp"
#include "switch/dpdk/stats.hpp"

namespace rocemu::fabric::live {

namespace {

constexpr uint32_t kRingSize = 8192;
constexpr uint16_t kBurst = 32;
// A cable port's pool: the frames of that cable that its rings, its MAC and
// the switch hold at once (4095, a power of two less one, as mempools
// prefer). Not sized for the rings' capacity (kRingSize) nor for the whole
// shared buffer: a pool that runs dry stops the cable's reception.
constexpr uint32_t kCableMbufs = 4095;
constexpr uint32_t kSwitchPortMbufs = 511;  // a net_ring switch port allocates PFC frames only
constexpr uint32_t kMbMemPerCablePort = 48;  // MB: kCableMbufs of 10 KiB jumbo mbufs, and slack
constexpr Nanos kPeerWait = Nanos::from_s(30);  // for the memif server of each client end

volatile std::sig_atomic_t g_stop = 0;
void on_stop_signal(int) { g_stop = 1; }

// Writes `text` to `path` through a temporary file, so that a reader sees
// the old snapshot or the new one, never half of one.
bool write_atomically(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream f(tmp, std::ios::trunc);
        f << text;
        if (!f) return false;
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    return !ec;
}

struct CableCounters {
    uint64_t arp_replied = 0;   // the NIC's ARP requests answered (proxy ARP)
    uint64_t arp_taken = 0;     // the NIC's other ARP frames (announcements, replies): not for the switch
    uint64_t tx_full_turns = 0; // turns the cable took fewer frames than offered (kept, never dropped)
};

// A NIC's cable at its leaf: the memif to the hosts node, the NIC's MAC
// (NicWire) and a net_ring port of the switch.
//
//   cable --rx--> from_nic [NicWire] to_switch --rx--> switch port
//   cable <--tx-- to_nic   [NicWire] from_switch <--tx-- switch port
struct NicCable {
    std::unique_ptr<dpdk::Port> cable;
    rte_ring *from_nic = nullptr, *to_switch = nullptr, *from_switch = nullptr, *to_nic = nullptr;
    std::unique_ptr<NicWire> wire;
    uint16_t port = 0;        // the switch port it is cabled to
    wire::MacAddr port_mac;   // the switch port's: the NIC's gateway
    std::array<rte_mbuf*, kBurst> tx{};
    uint16_t tx_n = 0, tx_off = 0;
    CableCounters c;
};

// An ARP request of the NIC becomes, in place, the reply from the switch
// port: the leaf is every NIC's next hop. True if the frame was ARP (and so
// is consumed here).
bool answer_arp(NicCable& nc, rte_mbuf* m) {
    auto* p = rte_pktmbuf_mtod(m, uint8_t*);
    wire::L2 l2;
    wire::Arp arp;
    if (!wire::parse_arp({p, rte_pktmbuf_data_len(m)}, l2, arp)) return false;
    if (arp.oper != wire::kArpRequest || arp.spa == arp.tpa || rte_ring_full(nc.to_nic)) {
        ++nc.c.arp_taken;
        rte_pktmbuf_free(m);
        return true;
    }
    wire::L2 out;
    out.dst = arp.sha;
    out.src = nc.port_mac;
    const wire::Arp reply = wire::arp_reply(arp, nc.port_mac, arp.tpa);
    const uint16_t len = std::max<uint16_t>(60, rte_pktmbuf_data_len(m));
    if (rte_pktmbuf_data_len(m) < len) rte_pktmbuf_append(m, len - rte_pktmbuf_data_len(m));
    std::memset(p, 0, rte_pktmbuf_data_len(m));
    wire::encode_arp(out, reply, {p, rte_pktmbuf_data_len(m)});
    rte_ring_enqueue(nc.to_nic, m);
    ++nc.c.arp_replied;
    return true;
}

// One turn of a NIC cable: the NIC's frames in, the MAC, frames out to the
// NIC. Returns the frames moved.
uint32_t pump(NicCable& nc, Nanos now) {
    uint32_t moved = 0;
    rte_mbuf* in[kBurst];
    const auto room = static_cast<uint16_t>(std::min<unsigned>(kBurst, rte_ring_free_count(nc.from_nic)));
    const uint16_t n = room ? rte_eth_rx_burst(nc.cable->id(), 0, in, room) : 0;
    for (uint16_t i = 0; i < n; ++i)
        if (!answer_arp(nc, in[i])) rte_ring_enqueue(nc.from_nic, in[i]);
    moved += n;
    nc.wire->poll(now);
    if (nc.tx_off == nc.tx_n) {
        nc.tx_off = 0;
        nc.tx_n = static_cast<uint16_t>(
            rte_ring_dequeue_burst(nc.to_nic, reinterpret_cast<void**>(nc.tx.data()), kBurst, nullptr));
    }
    if (nc.tx_off < nc.tx_n) {
        const uint16_t want = nc.tx_n - nc.tx_off;
        const uint16_t sent = rte_eth_tx_burst(nc.cable->id(), 0, nc.tx.data() + nc.tx_off, want);
        nc.tx_off += sent;
        moved += sent;
        if (sent < want) ++nc.c.tx_full_turns;
    }
    return moved + (nc.wire->idle() ? 0 : 1);
}

struct SwitchNode {
    Topology topo;
    uint32_t index = 0;
    std::string name;
    std::vector<rte_ring*> rings;
    std::vector<NicCable> nic_cables;
    std::vector<std::unique_ptr<dpdk::Port>> ports;  // switch port i
    std::unique_ptr<sw::Switch> core;
    std::unique_ptr<sw::live::SwitchRuntime> rt;
    std::vector<uint64_t> scratch;

    ~SwitchNode() {
        // The runtime and the MACs hold mbufs of every pool: free them while the pools exist.
        rt.reset();
        for (NicCable& nc : nic_cables) {
            nc.wire.reset();
            for (uint16_t i = nc.tx_off; i < nc.tx_n; ++i) rte_pktmbuf_free(nc.tx[i]);
        }
        for (rte_ring* r : rings) {
            void* m = nullptr;
            while (rte_ring_dequeue(r, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
        }
        nic_cables.clear();
        ports.clear();
        for (rte_ring* r : rings) rte_ring_free(r);
    }

    bool build(const std::vector<CableEnd>& ends, const std::string& link_dir, uint64_t seed, std::string& error);
    SwitchSnapshot snapshot(Nanos now);
    std::string identity;  // fabric_identity()
    bool ready = false;
};

bool SwitchNode::build(const std::vector<CableEnd>& ends, const std::string& link_dir, uint64_t seed,
                       std::string& error) {
    const SwitchSpec& spec = topo.switches[index];
    ports.resize(spec.cfg.ports.size());
    nic_cables.reserve(ends.size());
    const auto ring = [&](const std::string& n) {
        rte_ring* r = rte_ring_create(n.c_str(), kRingSize, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
        if (r) rings.push_back(r);
        return r;
    };
    dpdk::PortConfig cable_cfg;
    cable_cfg.mtu = static_cast<uint16_t>(topo.cfg.nic.mtu);
    cable_cfg.mbufs = kCableMbufs;
    cable_cfg.link_wait = Nanos{0};
    // Server ends first, then the mark, then client ends (split.hpp).
    std::vector<const CableEnd*> order;
    for (const bool clients : {false, true})
        for (const CableEnd& e : ends)
            if (is_memif_client(e) == clients) order.push_back(&e);
    bool marked = false;
    for (const CableEnd* ep : order) {
        const CableEnd& e = *ep;
        const LinkSpec& link = topo.links[e.link];
        const std::string& pname = spec.cfg.ports[e.end.port].name;
        cable_cfg.devspec = e.devspec;
        if (is_memif_client(e) && !marked) {
            marked = write_atomically(servers_path(link_dir, name), "");
            if (!marked) {
                error = fmt::format("cannot write {}", servers_path(link_dir, name));
                return false;
            }
        }
        if (is_memif_client(e) && !wait_for_file(servers_path(link_dir, e.peer_node), kPeerWait)) {
            error = fmt::format("{}:{} (cable {}): node {} did not open its memif servers within {:.0f} s", name,
                                pname, link.name, e.peer_node, kPeerWait.seconds());
            return false;
        }
        // The port's warning that memif cannot set the MTU is expected: its
        // buffers (kMemifBufferBytes) carry the frame anyway.
        const spdlog::level::level_enum level = spdlog::get_level();
        spdlog::set_level(spdlog::level::err);
        auto cable = dpdk::Port::open(cable_cfg, error);
        spdlog::set_level(level);
        if (!cable) {
            error = fmt::format("{}:{} (cable {}): {}", name, pname, link.name, error);
            return false;
        }
        cable->set_promiscuous(true);
        if (e.socket.empty()) {  // a device the user gave (--port)
            fmt::print("cable {}: {}:{} on {} ({})\n", link.name, name, pname, cable->name(), cable->driver());
            std::fflush(stdout);
        }
        if (link.fabric) {
            ports[e.end.port] = std::move(cable);
            continue;
        }
        NicCable& nc = nic_cables.emplace_back();
        nc.cable = std::move(cable);
        nc.port = e.end.port;
        nc.port_mac = wire::MacAddr{spec.port_mac[e.end.port]};
        nc.from_nic = ring(fmt::format("sn{}fn", e.link));
        nc.to_switch = ring(fmt::format("sn{}ts", e.link));
        nc.from_switch = ring(fmt::format("sn{}fs", e.link));
        nc.to_nic = ring(fmt::format("sn{}tn", e.link));
        rte_ring* rx = nc.to_switch;
        rte_ring* tx = nc.from_switch;
        const int id = nc.from_nic && nc.to_switch && nc.from_switch && nc.to_nic
                           ? rte_eth_from_rings(fmt::format("sn{}s", e.link).c_str(), &rx, 1, &tx, 1, SOCKET_ID_ANY)
                           : -1;
        if (id < 0) {
            error = fmt::format("{}:{} (cable {}): cannot make its rings and port", name, pname, link.name);
            return false;
        }
        if (!set_ring_port_mac(static_cast<uint16_t>(id), spec.port_mac[e.end.port], error)) {
            error = fmt::format("{}:{} (cable {}): {}", name, pname, link.name, error);
            return false;
        }
        dpdk::PortConfig pc;
        pc.mbufs = kSwitchPortMbufs;
        pc.link_wait = Nanos{0};
        ports[e.end.port] = dpdk::Port::attach(static_cast<uint16_t>(id), pc, error);
        if (!ports[e.end.port]) {
            error = fmt::format("{}:{}: {}", name, pname, error);
            return false;
        }
        nc.wire = std::make_unique<NicWire>(nc.from_nic, nc.to_switch, nc.from_switch, nc.to_nic,
                                            spec.cfg.ports[e.end.port].speed, link.cls.delay, pfc_priority(topo));
    }
    if (!marked && !write_atomically(servers_path(link_dir, name), "")) {
        error = fmt::format("cannot write {}", servers_path(link_dir, name));
        return false;
    }
    for (uint16_t p = 0; p < ports.size(); ++p)
        if (!ports[p]) {
            error = fmt::format("{}:{} has no cable", name, spec.cfg.ports[p].name);
            return false;
        }
    core = std::make_unique<sw::Switch>(spec.cfg);
    std::vector<dpdk::Port*> raw;
    for (const auto& p : ports) raw.push_back(p.get());
    rt = start_switch(topo, index, *core, std::move(raw), seed);
    scratch.resize(sw::live::port_counter_names().size());
    return true;
}

SwitchSnapshot SwitchNode::snapshot(Nanos now) {
    SwitchSnapshot s;
    s.at_ns = monotonic_ns();
    s.realtime_ns = realtime_ns();
    s.node = name;
    s.fabric = identity;
    s.ready = ready;
    append_port_rows(topo, index, *core, *rt, now, scratch, s.rows);
    // The NICs' MACs run here: their paused time, under their leaf port.
    const SwitchSpec& spec = topo.switches[index];
    for (const NicCable& nc : nic_cables)
        if (const Nanos t = nc.wire->paused_time(now); t > Nanos{0})
            s.rows.push_back(fmt::format("{},{},{},{}", spec.name, spec.cfg.ports[nc.port].name, kNicPausedRow, t.v));
    return s;
}

}  // namespace

uint32_t max_ethdevs_per_process() { return RTE_MAX_ETHPORTS; }

int run_switch_node(const Topology& t, const std::string& name, const NodeOptions& o) {
    const auto fail = [&](const std::string& why) {
        fmt::print(stderr, "rocemu fabric node --switch {}: {}\n", name, why);
        return 2;
    };
    SwitchNode node;
    node.name = name;
    std::vector<CableEnd> ends;
    try {
        const double scale = o.scale > 0 ? o.scale : default_scale(t);
        node.topo = scale_topology(t, scale, split_headroom_frames());
        node.identity = fabric_identity(t, scale, o.seed);
        node_names(t);  // refuses a switch named like the hosts node
        const auto overrides = parse_port_overrides(t, o.ports);
        ends = cable_ends(node.topo, name, o.link_dir, overrides);
        const std::vector<std::string> why =
            cables_without_port(t, name, nodes_elsewhere(parse_machines(t, o.machines), name), overrides);
        if (!why.empty()) return fail(fmt::format("{}", fmt::join(why, "\n  ")));
        if (const std::string e = t.pcap_link_error(o.pcap_link); !e.empty()) return fail(e);
    } catch (const std::invalid_argument& e) {
        return fail(e.what());
    }
    std::string error;
    if (!make_link_dir(o.link_dir, error)) return fail(error);
    std::unique_ptr<ControlServer> control;
    std::string control_host;  // its address; the port is control->port() (the kernel's pick for 0)
    if (!o.control_listen.empty()) {
        const std::optional<HostPort> at = parse_host_port(o.control_listen, true);
        std::string why;
        if (!at) return fail(fmt::format("--control-listen '{}': expected ADDR:PORT, e.g. 0.0.0.0:7700", o.control_listen));
        control_host = at->host;
        control = ControlServer::listen(*at, why);
        if (!control) return fail(fmt::format("--control-listen: {}", why));
    }
    for (uint32_t s = 0; s < t.switches.size(); ++s)
        if (t.switches[s].name == name) node.index = s;
    if (node.topo.switches[node.index].name != name || name == kHostsNode)
        return fail(fmt::format("fabric '{}' has no switch '{}'", t.cfg.name, name));
    const uint32_t ethdevs = ethdevs_needed(t, name);
    if (ethdevs > max_ethdevs_per_process())
        return fail(fmt::format("it needs {} DPDK ports (one per port, one more per NIC cable) and this DPDK build has "
                                "RTE_MAX_ETHPORTS = {}",
                                ethdevs, RTE_MAX_ETHPORTS));
    std::vector<std::string> eal = o.eal_args;
    if (!dpdk::has_memory_option(eal)) {
        eal.push_back("-m");
        eal.push_back(std::to_string(256 + kMbMemPerCablePort * ends.size()));
    }
    if (!dpdk::Eal::init(eal, error)) return fail(error);
    if (!node.build(ends, o.link_dir, o.seed, error)) return fail(error);
    std::unique_ptr<LinkCapture> capture;
    if (!o.pcap_link.empty()) {
        for (const CableEnd& e : ends) {
            if (t.links[e.link].name != o.pcap_link) continue;
            if (!capture) capture = LinkCapture::open(capture_path(o.link_dir, o.pcap_link, name), error);
            if (!capture || !capture->tap(node.ports[e.end.port]->id(), error)) return fail(error);
        }
    }

    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    std::unique_ptr<SharedClock> shared;
    if (!o.own_clock) {
        shared = open_node_clock(t, o.link_dir, name, error);
        if (!shared) return fail(error);
    }
    FabricClock clock(FabricClock::max_step_for(node.topo));
    // --clock fabric: the hosts node on another machine asks this node for
    // its machine's time on the control address's UDP port.
    std::shared_ptr<ClockRelay> relay;
    if (o.fabric_clock && shared && control) {
        relay = ClockRelay::for_hosts(HostPort{control_host, control->port()}, clock_fabric_id(node.identity), error);
        if (!relay) return fail(error);
        shared->attach(relay, relay_every(clock.max_step()));
    }
    clock.share(shared.get());
    const std::string counters = counters_path(o.link_dir, name);
    // `pcap LINK` on the control channel: this node's capture of the link so
    // far (the hosts node on another machine fetches it after the run and
    // merges the link's files).
    const auto on_request = [&](const std::string& request) {
        if (!capture || request != "pcap " + o.pcap_link)
            return fmt::format("error: switch node {} has no answer to '{}'\n", name, request);
        capture->flush();
        std::ifstream f(capture_path(o.link_dir, o.pcap_link, name), std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    };
    Nanos next_snapshot{}, next_control{};
    uint64_t turns = 0, sleeps = 0;
    uint32_t idle = 0;
    while (!g_stop) {
        const Nanos now = clock.advance();
        ++turns;
        uint32_t work = 0;
        for (NicCable& nc : node.nic_cables) work += pump(nc, now);
        work += node.rt->poll(now);
        if (node.rt->held()) ++work;
        if (clock.real() >= next_snapshot) {
            next_snapshot = clock.real() + kSnapshotEvery;
            if (!node.ready) {
                bool up = true;
                for (const auto& p : node.ports) up = up && p->link_up();
                for (const NicCable& nc : node.nic_cables) up = up && nc.cable->link_up();
                if (up) node.ready = write_atomically(ready_path(o.link_dir, name), fmt::format("{}\n", getpid()));
            }
            // The capture is flushed after the snapshot's time is taken, so a
            // snapshot newer than a moment means the file holds every frame
            // taken before it (the hosts node reads it so, merge_captures).
            const std::string snap = format_snapshot(node.snapshot(now));
            if (capture) capture->flush();
            write_atomically(counters, snap);
        }
        // A control request is answered within kControlEvery (one accept()
        // a millisecond), with a snapshot taken after the accept: never older
        // than the request, and its clock stamp falls between the client's
        // connect and its read of the reply, which bounds the clock offset
        // the hosts node derives from it.
        if (control && clock.real() >= next_control) {
            next_control = clock.real() + kControlEvery;
            if (control->accept_waiting()) control->answer(format_snapshot(node.snapshot(now)), on_request);
            else control->flush();
        }
        if (work) {
            idle = 0;
        } else if (!o.busy_poll && ++idle >= 64) {
            const timespec ts{0, static_cast<long>(kNodeIdleSleep.v)};
            nanosleep(&ts, nullptr);
            ++sleeps;
        }
    }
    const Nanos now = clock.advance();
    clock.share(nullptr);  // nobody waits for a node that stops
    const std::string last = format_snapshot(node.snapshot(now));
    if (!write_atomically(counters, last)) return fail(fmt::format("cannot write {}", counters));
    if (control && control->accept_waiting()) control->answer(last, on_request);
    CableCounters c;
    for (const NicCable& nc : node.nic_cables) {
        c.arp_replied += nc.c.arp_replied;
        c.arp_taken += nc.c.arp_taken;
        c.tx_full_turns += nc.c.tx_full_turns;
    }
    fmt::print("switch {}: {} turns, {} idle sleeps of {:.0f} us ({:.1f} s), fabric clock held back {:.1f} ms over {} "
               "gaps, {}{}; ARP requests answered {}, other ARP taken {}, turns a cable was full {}\n",
               name, turns, sleeps, kNodeIdleSleep.us(), static_cast<double>(sleeps) * kNodeIdleSleep.seconds(),
               clock.held_back().seconds() * 1e3, clock.held_back_turns(),
               shared ? fmt::format("{:.1f} ms waiting for other nodes", clock.waited().seconds() * 1e3)
                      : std::string("not shared with other nodes"),
               relay ? fmt::format(" (across machines: {} clock questions, {} answers, {} datagrams ignored, "
                                   "jumped {:.1f} ms to the others' time)",
                                   relay->received(), relay->sent(), relay->ignored(), clock.jumped().seconds() * 1e3)
                     : std::string(),
               c.arp_replied, c.arp_taken, c.tx_full_turns);
    for (const sw::live::DroppedFrame& d : node.rt->first_drops())
        fmt::print("switch {}: {}: first frame dropped as {}: {}\n", name, node.core->config().ports[d.port].name,
                   sw::live::to_string(d.why), sw::live::describe_head({d.head.data(), d.head_len}, d.len));
    std::fflush(stdout);
    capture.reset();
    // Closing a memif port whose peer has gone can block for seconds (seen:
    // more than the launcher's 5 s grace), and nothing is left to hand over:
    // the kernel closes the control sockets (the peer takes its link down on
    // their EOF, as on a close) and frees the shared rings. What it leaves is
    // on disk: the socket file of each server end, which a close would have
    // unlinked, and the EAL's per-pid runtime folder; both removed here.
    remove_server_sockets(ends);
    dpdk::Eal::remove_own_runtime_dir();
    std::_Exit(0);
}

}  // namespace rocemu::fabric::live
