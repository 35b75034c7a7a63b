#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "fabric/live/live.hpp"

namespace rocemu::fabric::live {

namespace {

constexpr uint64_t kMinSpeedBps = 1000000;

BitsPerSec slower(BitsPerSec v, double s, const std::string& what) {
    const auto bps = static_cast<uint64_t>(static_cast<double>(v.v) / s);
    if (bps < kMinSpeedBps)
        throw std::invalid_argument(fmt::format("--scale {}: {} would run at {} bit/s, below 1 Mbit/s", s, what, bps));
    return BitsPerSec{bps};
}

Nanos longer(Nanos t, double s) { return Nanos{static_cast<int64_t>(std::llround(static_cast<double>(t.v) * s))}; }

// A DCQCN rate in the slowed-down fabric; 0 (line rate, or disabled) stays 0.
BitsPerSec slower_rate(BitsPerSec v, double s) {
    if (v.v == 0) return v;
    return BitsPerSec{std::max<uint64_t>(1, static_cast<uint64_t>(static_cast<double>(v.v) / s))};
}

// DCQCN runs in the same slowed-down time as the links: its rates divide and
// its timers multiply, so a flow goes through the same stages per RTT as at
// full speed. The byte counter stays in bytes: at 1/s of the rate it already
// takes s times as long to fill.
void scale_dcqcn(cc::DcqcnConfig& d, double s) {
    d.rpg_ai_rate = slower_rate(d.rpg_ai_rate, s);
    d.rpg_hai_rate = slower_rate(d.rpg_hai_rate, s);
    d.rpg_max_rate = slower_rate(d.rpg_max_rate, s);
    d.rpg_min_rate = slower_rate(d.rpg_min_rate, s);
    d.rate_to_set_on_first_cnp = slower_rate(d.rate_to_set_on_first_cnp, s);
    d.rpg_time_reset = longer(d.rpg_time_reset, s);
    d.rate_reduce_monitor_period = longer(d.rate_reduce_monitor_period, s);
    d.dce_tcp_rtt = longer(d.dce_tcp_rtt, s);
    d.min_time_between_cnps = longer(d.min_time_between_cnps, s);
}

}  // namespace

double default_scale(const Topology& t) {
    double gbps = 0;
    for (const NicSpec& n : t.nics) gbps += t.switches[n.sw].cfg.ports[n.sw_port].speed.as_gbps();
    return std::max(1.0, std::ceil(gbps / kCoreBudgetGbps));
}

Topology scale_topology(const Topology& in, double s, uint32_t headroom_frames) {
    if (!(s >= 1)) throw std::invalid_argument(fmt::format("--scale {}: must be at least 1", s));
    Topology t = in;
    t.cfg.host_link.speed = slower(t.cfg.host_link.speed, s, "the host links");
    t.cfg.host_link.delay = longer(t.cfg.host_link.delay, s);
    t.cfg.fabric_link.speed = slower(t.cfg.fabric_link.speed, s, "the fabric links");
    t.cfg.fabric_link.delay = longer(t.cfg.fabric_link.delay, s);
    for (LinkSpec& l : t.links) {
        l.cls.speed = slower(l.cls.speed, s, l.name);
        l.cls.delay = longer(l.cls.delay, s);
    }
    scale_dcqcn(t.cfg.nic.cc.dcqcn, s);
    // A frame of the NIC MTU with Ethernet header and FCS.
    const Bytes frame{t.cfg.nic.mtu + 18u};
    for (SwitchSpec& sw : t.switches) {
        sw::SwitchConfig& c = sw.cfg;
        for (sw::PortConfig& p : c.ports) {
            p.speed = slower(p.speed, s, sw.name + ":" + p.name);
            p.propagation_delay = longer(p.propagation_delay, s);
        }
        c.pfc_wd.detection_time = longer(c.pfc_wd.detection_time, s);
        c.pfc_wd.restoration_time = longer(c.pfc_wd.restoration_time, s);
        c.routing.flowlet_gap = longer(c.routing.flowlet_gap, s);
        c.pg_lossless.xoff = Bytes{std::max(c.pg_lossless.xoff.v, frame.v * headroom_frames)};
    }
    return t;
}

int pfc_priority(const Topology& t) {
    const sw::SwitchConfig& base = t.cfg.sw.base;
    return base.tc_to_pg[base.dscp_to_tc[t.cfg.nic.dscp & 63]];
}

namespace {

// Links on the longest shortest path between two NICs (breadth first from
// every NIC; nodes are the switches, then the NICs).
uint32_t nic_diameter(const Topology& t) {
    const size_t ns = t.switches.size(), n = ns + t.nics.size();
    const auto node = [&](const Endpoint& e) { return e.is_switch ? e.index : ns + e.index; };
    std::vector<std::vector<size_t>> adj(n);
    for (const LinkSpec& l : t.links) {
        adj[node(l.a)].push_back(node(l.b));
        adj[node(l.b)].push_back(node(l.a));
    }
    uint32_t longest = 0;
    std::vector<uint32_t> dist(n);
    std::vector<size_t> queue;
    for (size_t src = ns; src < n; ++src) {
        std::fill(dist.begin(), dist.end(), UINT32_MAX);
        dist[src] = 0;
        queue.assign(1, src);
        for (size_t i = 0; i < queue.size(); ++i)
            for (const size_t v : adj[queue[i]])
                if (dist[v] == UINT32_MAX) {
                    dist[v] = dist[queue[i]] + 1;
                    queue.push_back(v);
                }
        for (size_t d = ns; d < n; ++d)
            if (dist[d] != UINT32_MAX) longest = std::max(longest, dist[d]);
    }
    return longest;
}

}  // namespace

Nanos rtt_bound(const Topology& t, Bytes nic_window) {
    const Bytes frame{t.cfg.nic.mtu + 38u};  // with Ethernet header, FCS, preamble and IFG
    const uint32_t links = nic_diameter(t);
    Nanos link{}, queue{};
    for (const LinkSpec& l : t.links) link = std::max(link, l.cls.delay + l.cls.speed.serialise(frame));
    for (const SwitchSpec& sw : t.switches) {
        const sw::SwitchConfig& c = sw.cfg;
        BitsPerSec slowest = c.ports.front().speed;
        for (const sw::PortConfig& p : c.ports) slowest = std::min(slowest, p.speed);
        const Bytes per_port{c.pg_lossless.size.v + c.pg_lossless.xoff.v};
        queue = std::max(queue, slowest.serialise(Bytes{c.pool_size.v + per_port.v * c.ports.size()}));
    }
    BitsPerSec host = t.cfg.host_link.speed;
    for (const NicSpec& n : t.nics) host = std::min(host, t.switches[n.sw].cfg.ports[n.sw_port].speed);
    const Nanos one_way{link.v * links + queue.v * (links > 0 ? links - 1 : 0)};
    return Nanos{2 * one_way.v} + host.serialise(nic_window);
}

Nanos rc_timeout_time(uint8_t t) { return Nanos{static_cast<int64_t>(4096.0 * std::ldexp(1.0, t))}; }

uint8_t rc_timeout_for(Nanos bound) {
    const Nanos want{2 * bound.v + kSchedulingSlack.v};
    uint8_t t = 1;
    while (t < 31 && rc_timeout_time(t) < want) ++t;
    return t;
}

}  // namespace rocemu::fabric::live
