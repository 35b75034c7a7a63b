#include "dataplane/dpdk/host_runner.hpp"

#include <fmt/format.h>

#include <csignal>
#include <ctime>
#include <map>

#include "dataplane/dpdk/capture.hpp"
#include "dataplane/dpdk/eal.hpp"
#include "dataplane/dpdk/nic.hpp"
#include "dataplane/wire/describe.hpp"

namespace rocemu::dpdk {

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

constexpr uint64_t kPingCookie = 1;
constexpr uint32_t kIdlePollsBeforeSleep = 64;

// The layer above the NIC: no RDMA, only the ping conversation.
struct PingApp : NoTransport {
    bool resolved = false;
    bool failed = false;
    std::vector<host::HostEffect> replies;
    void on_host_effect(const host::HostEffect& e, Nanos) {
        switch (e.kind) {
            case host::HostEffect::Kind::Resolved: resolved = resolved || e.cookie == kPingCookie; break;
            case host::HostEffect::Kind::ResolveFailed: failed = failed || e.cookie == kPingCookie; break;
            case host::HostEffect::Kind::EchoReply: replies.push_back(e); break;
            case host::HostEffect::Kind::SendFrame: break;
        }
    }
};

std::string describe_gids(const host::GidTable& t) {
    std::string s;
    for (size_t i = 0; i < t.size(); ++i)
        s += fmt::format("  gid[{}] {} {}\n", i, to_string(t[i].type), host::format_gid(t[i].gid));
    return s;
}

void idle_sleep() {
    const timespec ts{0, 20000};
    nanosleep(&ts, nullptr);
}

int run(const HostRunOptions& o) {
    std::string error;
    uint32_t ping_dst = 0;
    if (!o.ping.empty()) {
        const std::optional<uint32_t> dst = host::parse_ipv4(o.ping);
        if (!dst) {
            fmt::print(stderr, "rocemu host: --ping: '{}' is not an IPv4 address\n", o.ping);
            return 2;
        }
        ping_dst = *dst;
    }
    if (o.size < 0 || o.size > 64 || o.count < 1 || o.interval_s <= 0) {
        fmt::print(stderr, "rocemu host: --size must be 0-64, --count at least 1 and --interval positive\n");
        return 2;
    }
    // Validate before starting DPDK, so a typo costs nothing.
    if (!host::make_host_config(o.host, wire::MacAddr{{0x02, 0, 0, 0, 0, 1}}, error)) {
        fmt::print(stderr, "rocemu host: {}\n", error);
        return 2;
    }
    if (!Eal::init(o.eal_args, error)) {
        fmt::print(stderr, "rocemu host: {}\n", error);
        return 2;
    }
    PortConfig pc;
    pc.devspec = o.port;
    if (o.mtu_set) pc.mtu = static_cast<uint16_t>(o.host.port_mtu);
    std::unique_ptr<Port> port = Port::open(pc, error);
    if (!port) {
        fmt::print(stderr, "rocemu host: {}\n", error);
        return 2;
    }
    host::HostOptions ho = o.host;
    ho.port_mtu = port->mtu();
    const std::optional<host::HostConfig> cfg = host::make_host_config(ho, port->mac(), error);
    if (!cfg) {
        fmt::print(stderr, "rocemu host: {}\n", error);
        return 2;
    }
    if (cfg->mac != port->mac() && !port->set_promiscuous(true))
        fmt::print(stderr, "rocemu host: warning: {} cannot go promiscuous; frames to {} may not arrive\n",
                   port->name(), wire::format_mac(cfg->mac));
    std::unique_ptr<Capture> capture;
    if (!o.capture.empty()) {
        capture = Capture::open(o.capture, port->mtu() + 64u, error);
        if (!capture) {
            fmt::print(stderr, "rocemu host: {}\n", error);
            return 2;
        }
    }

    host::HostStack stack(*cfg);
    PingApp app;
    const TscClock clock = TscClock::starting_now();
    int status = 0;
    {
        NicConfig nc;
        nc.pfc_rx = o.pfc_rx;
        nc.rx_max_pps = o.rx_max_pps;
        Nic<PingApp> nic(*port, stack, app, clock, capture.get(), nc);
        nic.poll();
        nic.announce();
        fmt::print("rocemu host: ready port={} id={} mac={} ip={}/{} mtu={} active_mtu={} gid_layout={} "
                   "file_prefix={}\n{}",
                   port->name(), port->id(), wire::format_mac(cfg->mac), wire::format_ip(wire::IpAddr::from_v4(cfg->ipv4)),
                   cfg->prefix_len, port->mtu(), stack.active_mtu().v, to_string(cfg->gid_layout),
                   Eal::file_prefix().empty() ? "-" : Eal::file_prefix(), describe_gids(stack.gids()));
        std::fflush(stdout);

        const Nanos end = o.duration_s > 0 ? nic.now() + Nanos::from_s(o.duration_s) : Nanos::max();
        const Nanos interval = Nanos::from_s(o.interval_s);
        const uint16_t ping_id = static_cast<uint16_t>(getpid());
        std::map<uint16_t, Nanos> sent_at;
        int sent = 0;
        size_t reported = 0;
        Nanos next_ping = nic.now();
        Nanos ping_deadline = Nanos::max();  // after the last request: how long to wait for replies
        bool waiting_arp = false;
        uint32_t idle = 0;
        while (!g_stop && nic.now() < end) {
            const uint16_t n = nic.poll();
            const Nanos now = nic.now();
            if (ping_dst && sent < o.count && (waiting_arp ? app.resolved : now >= next_ping)) {
                const uint16_t seq = static_cast<uint16_t>(sent + 1);
                const host::PingStatus s =
                    nic.ping(ping_dst, ping_id, seq, static_cast<size_t>(o.size), kPingCookie);
                waiting_arp = s == host::PingStatus::Resolving;
                // The Resolved effect cannot come during the call; wait for the next one.
                if (waiting_arp) app.resolved = false;
                if (s == host::PingStatus::Sent) {
                    sent_at[seq] = now;
                    ++sent;
                    next_ping = now + interval;
                    if (sent == o.count) ping_deadline = now + std::max(interval, Nanos::from_s(1));
                } else if (s == host::PingStatus::NoRoute || s == host::PingStatus::Busy) {
                    fmt::print(stderr, "rocemu host: cannot ping {}: {}\n", o.ping,
                               s == host::PingStatus::NoRoute ? "no route (outside the subnet, no --gateway)"
                                                              : "ARP cache busy");
                    status = 1;
                    break;
                }
            }
            if (app.failed) {
                fmt::print("ARP for {} got no reply\n", o.ping);
                app.failed = false;
                waiting_arp = false;
                ++sent;
                next_ping = now + interval;
                if (sent == o.count) ping_deadline = now;
            }
            for (; reported < app.replies.size(); ++reported) {
                const host::HostEffect& r = app.replies[reported];
                const auto it = sent_at.find(r.echo_seq);
                if (r.echo_id != ping_id || it == sent_at.end()) continue;
                fmt::print("{} bytes from {}: icmp_seq={} time={:.3f} ms\n", o.size + 8,
                           wire::format_ip(wire::IpAddr::from_v4(r.ip)), r.echo_seq, (now - it->second).ms());
                sent_at.erase(it);
            }
            std::fflush(stdout);
            if (ping_dst && sent == o.count && (sent_at.empty() || now >= ping_deadline)) break;
            idle = n ? 0 : idle + 1;
            if (!o.busy_poll && idle > kIdlePollsBeforeSleep) idle_sleep();
        }
        nic.flush();
        if (ping_dst) {
            const int received = sent - static_cast<int>(sent_at.size());
            fmt::print("--- {} ping statistics ---\n{} transmitted, {} received\n", o.ping, sent, received);
            if (received < o.count) status = 1;
        }
        fmt::print("counters port={}\n", port->name());
        const PortStats& ps = nic.stats();
        for (size_t i = 0; i < ps.v.size(); ++i)
            if (ps.v[i]) fmt::print("  {} {}\n", to_string(static_cast<PortStat>(i)), ps.v[i]);
        const host::HostCounters& hc = stack.counters();
        for (size_t i = 0; i < hc.events.size(); ++i)
            if (hc.events[i]) fmt::print("  {} {}\n", to_string(static_cast<host::HostEvent>(i)), hc.events[i]);
        for (size_t i = 1; i < hc.drops.size(); ++i)
            if (hc.drops[i]) fmt::print("  drop_{} {}\n", to_string(static_cast<host::HostDrop>(i)), hc.drops[i]);
    }
    capture.reset();
    port.reset();
    return status;
}

}  // namespace

int run_host(const HostRunOptions& o) {
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    const int status = run(o);
    Eal::cleanup();
    return status;
}

}  // namespace rocemu::dpdk
