#include "switch/dpdk/runner.hpp"

#include <fmt/format.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <csignal>
#include <cstring>
#include <ctime>

#include "dataplane/dpdk/capture.hpp"
#include "dataplane/dpdk/clock.hpp"
#include "dataplane/dpdk/eal.hpp"
#include "dataplane/dpdk/host/host_config.hpp"
#include "dataplane/dpdk/port.hpp"
#include "dataplane/wire/describe.hpp"
#include "dataplane/wire/l2.hpp"
#include "switch/dpdk/frame.hpp"
#include "switch/dpdk/runtime.hpp"

namespace rocemu::sw::live {

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

constexpr uint32_t kIdlePollsBeforeSleep = 64;
// A loop turn handles at most 32 frames per port: one that took longer than
// this lost the core to another process.
constexpr uint64_t kPreemptedTurnUs = 500;
constexpr uint32_t kMaxFrameRoom = 9216;

void idle_sleep() {
    const timespec ts{0, 20000};
    nanosleep(&ts, nullptr);
}

std::string human_ns(uint64_t ns) {
    if (ns >= 1000000000) return fmt::format("{:.3f} s", ns / 1e9);
    if (ns >= 1000000) return fmt::format("{:.3f} ms", ns / 1e6);
    return fmt::format("{:.3f} us", ns / 1e3);
}

void print_report(const Switch& sw, const SwitchRuntime& rt, Nanos now) {
    const auto& names = port_counter_names();
    std::vector<uint64_t> v(names.size());
    uint64_t lossless = 0;
    for (PortId p = 0; p < rt.num_ports(); ++p) {
        collect_port_counters(sw, p, now, rt.stats(p), rt.link(p).counters(), v);
        fmt::print("counters port={} ethdev={}\n", sw.config().ports[p].name, rt.board(p).ethdev());
        for (size_t i = 0; i < v.size(); ++i)
            if (v[i]) fmt::print("  {} {}\n", names[i], v[i]);
        const PortCounters& c = sw.port_counters(p);
        for (int q = 0; q < kNumTc; ++q) {
            const Nanos paused = sw.paused_time(p, q, now);
            if (paused > Nanos{0} || c.pfc_tx_xoff[static_cast<size_t>(q)])
                fmt::print("  pfc priority {}: paused {} by the peer, {} XOFF and {} XON sent\n", q,
                           human_ns(static_cast<uint64_t>(paused.v)), c.pfc_tx_xoff[static_cast<size_t>(q)],
                           c.pfc_tx_xon[static_cast<size_t>(q)]);
        }
        lossless += lossless_drops(sw, p);
    }
    for (const DroppedFrame& d : rt.first_drops())
        fmt::print("first frame dropped port={} {}: {}\n", sw.config().ports[d.port].name, to_string(d.why),
                   describe_head({d.head.data(), d.head_len}, d.len));
    fmt::print("rocemu switch: lossless_drops {}\n", lossless);
}

int run_switch_impl(const SwitchRunOptions& o) {
    std::string error;
    const ConfigResult cr = load_switch_config(o.config);
    if (!cr.config) {
        fmt::print(stderr, "rocemu switch: {}\n", cr.error);
        return 2;
    }
    const std::optional<LiveSetup> setup = make_live_setup(*cr.config, o.live, error);
    if (!setup) {
        fmt::print(stderr, "rocemu switch: {}\n", error);
        return 2;
    }
    if (!dpdk::Eal::init(o.eal_args, error)) {
        fmt::print(stderr, "rocemu switch: {}\n", error);
        return 2;
    }
    std::vector<std::unique_ptr<dpdk::Port>> ports;
    std::vector<dpdk::Port*> raw;
    for (size_t i = 0; i < setup->devspecs.size(); ++i) {
        dpdk::PortConfig pc;
        pc.devspec = setup->devspecs[i];
        pc.min_frame_room = std::min(setup->config.ports[i].mtu + 26, kMaxFrameRoom);
        pc.link_wait = Nanos::from_s(o.link_wait_s);
        ports.push_back(dpdk::Port::open(pc, error));
        if (!ports.back()) {
            fmt::print(stderr, "rocemu switch: {}: {}\n", setup->config.ports[i].name, error);
            return 2;
        }
        // A switch port takes frames to any MAC: hosts address their gateway, not the device.
        ports.back()->set_promiscuous(true);
        raw.push_back(ports.back().get());
    }
    std::unique_ptr<dpdk::Capture> capture;
    if (!o.capture.empty()) {
        capture = dpdk::Capture::open(o.capture, kMaxFrameRoom, error);
        if (!capture) {
            fmt::print(stderr, "rocemu switch: {}\n", error);
            return 2;
        }
    }
    {
        Switch sw(setup->config);
        install_routes(*setup, sw.routes());
        RuntimeOptions ro;
        ro.ttl_decrement = o.ttl_decrement;
        ro.seed = o.seed;
        SwitchRuntime rt(sw, raw, setup->links, capture.get(), ro);
        const dpdk::TscClock clock = dpdk::TscClock::starting_now();
        std::string plist;
        for (size_t i = 0; i < raw.size(); ++i)
            plist += fmt::format(" {}={}(port {}, mac {})", setup->config.ports[i].name, raw[i]->name(), raw[i]->id(),
                                 wire::format_mac(raw[i]->mac()));
        fmt::print("rocemu switch: ready{} file_prefix={}\n", plist,
                   dpdk::Eal::file_prefix().empty() ? "-" : dpdk::Eal::file_prefix());
        std::fflush(stdout);
        const Nanos end = o.duration_s > 0 ? Nanos::from_s(o.duration_s) : Nanos::max();
        uint32_t idle = 0;
        BusyCycles busy;
        busy.limit = rte_get_tsc_hz() / 1000000 * kPreemptedTurnUs;
        // One TSC read per turn (it costs tens of ns in a VM): the clock and
        // the cycle count share it.
        uint64_t tsc = rte_rdtsc();
        Nanos now = clock.to_nanos(tsc);
        while (!g_stop && now < end) {
            const uint64_t sent = rt.frames_sent();
            const uint32_t n = rt.poll(now);
            const uint64_t next = rte_rdtsc();
            if (o.record_cycles && (n || rt.frames_sent() != sent)) busy.turn(next - tsc, n);
            idle = n || rt.held() ? 0 : idle + 1;
            tsc = next;
            if (!o.busy_poll && idle > kIdlePollsBeforeSleep) {
                idle_sleep();
                tsc = rte_rdtsc();
            }
            now = clock.to_nanos(tsc);
        }
        rt.publish(now);
        print_report(sw, rt, now);
        if (o.record_cycles) fmt::print("rocemu switch: {}\n", busy.line(rte_get_tsc_hz()));
    }
    capture.reset();
    ports.clear();
    return 0;
}

// --- gen ----------------------------------------------------------------------

int run_gen_impl(const GenOptions& o) {
    std::string error;
    const auto smac = host::parse_mac(o.src_mac), dmac = host::parse_mac(o.dst_mac);
    const auto sip = host::parse_ipv4(o.src_ip), dip = host::parse_ipv4(o.dst_ip);
    constexpr int kHeaders = 14 + 20 + 8 + 12 + 8 + 4;  // Eth, IPv4, UDP, BTH, DETH, ICRC
    if (!smac || !dmac || !sip || !dip) {
        fmt::print(stderr, "rocemu switch gen: --src-mac/--dst-mac must be MACs, --src-ip/--dst-ip IPv4 addresses\n");
        return 2;
    }
    if (o.size < 64 || o.size > 9000 || o.dscp < 0 || o.dscp > 63 || o.prio < 0 || o.prio > 7 || o.flows < 1 ||
        o.flows > 1024 || o.rate_gbps < 0 || o.link_gbps <= 0) {
        fmt::print(stderr,
                   "rocemu switch gen: --size must be in [64, 9000], --dscp [0, 63], --prio [0, 7], --flows [1, 1024], "
                   "--rate-gbps >= 0, --link-gbps > 0\n");
        return 2;
    }
    std::vector<std::vector<uint8_t>> frames(static_cast<size_t>(o.flows));
    const std::vector<uint8_t> payload(static_cast<size_t>(o.size - kHeaders), 0x5A);
    for (int f = 0; f < o.flows; ++f) {
        wire::RocePacket p;
        p.l2.dst = *dmac;
        p.l2.src = *smac;
        p.l2.ethertype = wire::ethertype::kIpv4;
        p.l3.src = wire::IpAddr::from_v4(*sip);
        p.l3.dst = wire::IpAddr::from_v4(*dip);
        p.l3.dscp = static_cast<uint8_t>(o.dscp);
        p.l3.ecn = wire::ecn::kEct0;
        p.udp_sport = static_cast<uint16_t>(0xC000 + f);
        p.bth.opcode = 0x64;  // UD SEND_ONLY
        p.bth.dqpn = Qpn{0x11};
        p.deth.qkey = 0x11111111;
        p.deth.src_qp = Qpn{0x12};
        p.payload = payload.data();
        p.payload_len = static_cast<uint32_t>(payload.size());
        auto& buf = frames[static_cast<size_t>(f)];
        buf.resize(wire::roce_frame_len(p));
        if (encode_roce(p, buf) != buf.size()) {
            fmt::print(stderr, "rocemu switch gen: cannot build a {}-byte frame\n", o.size);
            return 2;
        }
    }
    if (!dpdk::Eal::init(o.eal_args, error)) {
        fmt::print(stderr, "rocemu switch gen: {}\n", error);
        return 2;
    }
    dpdk::PortConfig pc;
    pc.devspec = o.port;
    pc.min_frame_room = static_cast<uint32_t>(o.size);
    std::unique_ptr<dpdk::Port> port = dpdk::Port::open(pc, error);
    if (!port) {
        fmt::print(stderr, "rocemu switch gen: {}\n", error);
        return 2;
    }
    const dpdk::TscClock clock = dpdk::TscClock::starting_now();
    const BitsPerSec link = BitsPerSec::gbps(o.link_gbps);
    const BitsPerSec rate = BitsPerSec::gbps(o.rate_gbps);
    const Nanos gap = o.rate_gbps > 0 ? rate.serialise(Bytes{static_cast<uint64_t>(o.size)} + kWireOverhead) : Nanos{0};
    PauseState pauses;
    uint64_t sent = 0, pfc_rx = 0, rx_other = 0;
    Nanos paused_total{}, pause_seen_at{};
    bool was_paused = false;
    std::vector<rte_mbuf*> pending;  // built but not yet taken by the device
    pending.reserve(64);
    fmt::print("rocemu switch gen: ready port={} file_prefix={}\n", port->name(),
               dpdk::Eal::file_prefix().empty() ? "-" : dpdk::Eal::file_prefix());
    std::fflush(stdout);
    Nanos now = clock.now();
    Nanos next_tx = now;
    const Nanos end = now + Nanos::from_s(o.duration_s);
    // After the last frame, keep the port open a little: a memif peer loses
    // what is still in the ring when this side disconnects.
    const Nanos linger = Nanos::from_ms(200);
    Nanos done_at = Nanos::max();
    while (!g_stop && now < end && (done_at == Nanos::max() || now - done_at < linger)) {
        if (done_at == Nanos::max() && sent == o.count && pending.empty()) done_at = now;
        rte_mbuf* rx[32];
        const uint16_t n = rte_eth_rx_burst(port->id(), 0, rx, 32);
        for (uint16_t i = 0; i < n; ++i) {
            PacketDesc d;
            PfcFrameDesc pfc;
            const std::span<const uint8_t> f(rte_pktmbuf_mtod(rx[i], const uint8_t*), rte_pktmbuf_data_len(rx[i]));
            if (parse_frame(f, 0, 0, d, pfc) == RxKind::Pfc) {
                ++pfc_rx;
                if (o.honour_pfc) pauses.on_pfc(pfc, now, link);
            } else {
                ++rx_other;
            }
        }
        rte_pktmbuf_free_bulk(rx, n);
        const bool paused = pauses.paused(o.prio, now);
        if (paused && !was_paused) pause_seen_at = now;
        if (!paused && was_paused) paused_total += now - pause_seen_at;
        was_paused = paused;
        if (paused) {
            // Leave the core to the switch while paused; the pause lasts far longer than this.
            idle_sleep();
        } else {
            while (pending.size() < 32 && sent + pending.size() < o.count && next_tx <= now) {
                rte_mbuf* m = rte_pktmbuf_alloc(port->pool());
                if (!m) break;
                const auto& f = frames[(sent + pending.size()) % frames.size()];
                std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(f.size())), f.data(), f.size());
                pending.push_back(m);
                next_tx = gap > Nanos{0} ? std::max(next_tx + gap, now - gap * 32) : now;
            }
            const uint16_t took = rte_eth_tx_burst(port->id(), 0, pending.data(), static_cast<uint16_t>(pending.size()));
            pending.erase(pending.begin(), pending.begin() + took);
            sent += took;
        }
        now = clock.now();
    }
    if (was_paused) paused_total += now - pause_seen_at;
    rte_pktmbuf_free_bulk(pending.data(), static_cast<unsigned>(pending.size()));
    fmt::print("rocemu switch gen: sent {} of {} frames of {} bytes; pfc_rx {} (xoff {}, xon {} for priority {}); "
               "paused {:.3f} ms; other_rx {}\n",
               sent, o.count, o.size, pfc_rx, pauses.xoff_frames(o.prio), pauses.xon_frames(o.prio), o.prio,
               paused_total.ms(), rx_other);
    port.reset();
    return sent == o.count ? 0 : 1;
}

template <typename F>
int with_signals(F&& f) {
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    const int status = f();
    dpdk::Eal::cleanup();
    return status;
}

}  // namespace

int run_switch(const SwitchRunOptions& o) { return with_signals([&] { return run_switch_impl(o); }); }
int run_gen(const GenOptions& o) { return with_signals([&] { return run_gen_impl(o); }); }

}  // namespace rocemu::sw::live
