#include "switch/dpdk/setup.hpp"

#include <fmt/format.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <map>

#include "dataplane/dpdk/host/host_config.hpp"

namespace rocemu::sw::live {

namespace {

std::optional<double> to_double(std::string_view s) {
    double v = 0;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc{} || p != s.data() + s.size()) return std::nullopt;
    return v;
}

std::optional<int> port_index(const SwitchConfig& cfg, std::string_view name) {
    for (size_t i = 0; i < cfg.ports.size(); ++i)
        if (cfg.ports[i].name == name) return static_cast<int>(i);
    return std::nullopt;
}

std::string port_names(const SwitchConfig& cfg) {
    std::string s;
    for (const PortConfig& p : cfg.ports) s += (s.empty() ? "" : ", ") + p.name;
    return s;
}

// key=value with value in [lo, hi]; `scale` turns the value into the unit stored.
bool ranged(std::string_view key, std::string_view value, double lo, double hi, double& out, std::string& error) {
    const auto v = to_double(value);
    if (!v || *v < lo || *v > hi) {
        error = fmt::format("--link {}: '{}' is not a number in [{}, {}]", key, value, lo, hi);
        return false;
    }
    out = *v;
    return true;
}

}  // namespace

bool apply_link_keys(std::string_view keys, LinkConfig& link, std::string& error) {
    PfcStorm storm = link.storm.value_or(PfcStorm{});
    bool storm_set = link.storm.has_value();
    int storm_prio = -1;
    for (size_t i = 0; i < storm.frame.quanta.size(); ++i)
        if ((storm.frame.class_enable >> i) & 1) storm_prio = static_cast<int>(i);
    uint16_t storm_quanta = 0xFFFF;
    constexpr double kHour = 3.6e6;  // ms: longer schedules are surely typos
    while (!keys.empty()) {
        const size_t comma = keys.find(',');
        const std::string_view kv = keys.substr(0, comma);
        keys = comma == std::string_view::npos ? std::string_view{} : keys.substr(comma + 1);
        const size_t eq = kv.find('=');
        if (eq == std::string_view::npos) {
            error = fmt::format("--link: '{}' is not key=value", kv);
            return false;
        }
        const std::string_view k = kv.substr(0, eq), v = kv.substr(eq + 1);
        double x = 0;
        if (k == "loss" || k == "corrupt" || k == "reorder") {
            if (!ranged(k, v, 0, 1, x, error)) return false;
            (k == "loss" ? link.loss_rate : k == "corrupt" ? link.corrupt_rate : link.reorder_rate) = x;
        } else if (k == "corrupt_as") {
            if (v == "fcs") link.corrupt_as = Corruption::BadFcs;
            else if (v == "icrc") link.corrupt_as = Corruption::BadIcrc;
            else {
                error = fmt::format("--link corrupt_as: '{}' is not one of fcs, icrc", v);
                return false;
            }
        } else if (k == "reorder_delay_us") {
            if (!ranged(k, v, 0, 1e6, x, error)) return false;
            link.reorder_delay = Nanos::from_us(x);
        } else if (k == "down_ms" || k == "up_ms") {
            if (!ranged(k, v, 0, kHour, x, error)) return false;
            link.up_down.emplace_back(Nanos::from_ms(x), k == "up_ms");
        } else if (k == "storm_prio") {
            if (!ranged(k, v, 0, kNumTc - 1, x, error)) return false;
            storm_prio = static_cast<int>(x);
            storm_set = true;
        } else if (k == "storm_start_ms" || k == "storm_stop_ms") {
            if (!ranged(k, v, 0, kHour, x, error)) return false;
            (k == "storm_start_ms" ? storm.start : storm.stop) = Nanos::from_ms(x);
            storm_set = true;
        } else if (k == "storm_period_us") {
            if (!ranged(k, v, 1, 1e6, x, error)) return false;
            storm.period = Nanos::from_us(x);
            storm_set = true;
        } else if (k == "storm_quanta") {
            if (!ranged(k, v, 1, 65535, x, error)) return false;
            storm_quanta = static_cast<uint16_t>(x);
            storm_set = true;
        } else {
            error = fmt::format(
                "--link: unknown key '{}' (loss, corrupt, corrupt_as, reorder, reorder_delay_us, down_ms, up_ms, "
                "storm_prio, storm_start_ms, storm_stop_ms, storm_period_us, storm_quanta)",
                k);
            return false;
        }
    }
    if (storm_set) {
        if (storm_prio < 0) {
            error = "--link: a PFC storm needs storm_prio (0-7)";
            return false;
        }
        if (storm.start == Nanos::max()) storm.start = Nanos{0};
        if (storm.period <= Nanos{0}) storm.period = Nanos::from_us(10);
        storm.frame = PfcFrameDesc{};
        storm.frame.class_enable = static_cast<uint8_t>(1u << storm_prio);
        storm.frame.quanta[static_cast<size_t>(storm_prio)] = storm_quanta;
        link.storm = storm;
    }
    return true;
}

std::optional<LiveSetup> make_live_setup(const SwitchConfig& cfg, const LiveOptions& o, std::string& error) {
    LiveSetup s;
    s.config = cfg;
    s.config.ports.clear();
    if (o.ports.empty()) {
        error = fmt::format("--port: at least one NAME=DEVSPEC is needed (NAME one of {})", port_names(cfg));
        return std::nullopt;
    }
    for (const std::string& b : o.ports) {
        const size_t eq = b.find('=');
        const auto idx = eq == std::string::npos ? std::nullopt : port_index(cfg, std::string_view(b).substr(0, eq));
        if (!idx || eq + 1 >= b.size()) {
            error = fmt::format("--port {}: expected NAME=DEVSPEC with NAME one of {}", b, port_names(cfg));
            return std::nullopt;
        }
        if (port_index(s.config, std::string_view(b).substr(0, eq))) {
            error = fmt::format("--port {}: {} is bound twice", b, b.substr(0, eq));
            return std::nullopt;
        }
        const PortConfig& pc = cfg.ports[static_cast<size_t>(*idx)];
        s.config.ports.push_back(pc);
        s.devspecs.push_back(b.substr(eq + 1));
        LinkConfig link;
        link.speed = pc.speed;
        link.propagation_delay = pc.propagation_delay;
        s.links.push_back(link);
    }
    for (const std::string& l : o.link_files) {
        const size_t eq = l.find('=');
        const auto idx = eq == std::string::npos ? std::nullopt : port_index(s.config, std::string_view(l).substr(0, eq));
        if (!idx) {
            error = fmt::format("--link-file {}: expected NAME=FILE with NAME a bound port ({})", l, port_names(s.config));
            return std::nullopt;
        }
        std::ifstream in(l.substr(eq + 1));
        std::stringstream text;
        text << in.rdbuf();
        if (!in) {
            error = fmt::format("--link-file {}: cannot read {}", l, l.substr(eq + 1));
            return std::nullopt;
        }
        const LinkConfigResult lr = parse_link_config(text.str());
        if (!lr.config) {
            error = fmt::format("--link-file {}: {}", l, lr.error);
            return std::nullopt;
        }
        LinkConfig& link = s.links[static_cast<size_t>(*idx)];
        const BitsPerSec speed = link.speed;
        link = *lr.config;
        link.speed = speed;  // the core paces the port at its configured speed; the link must agree
    }
    for (const std::string& l : o.links) {
        const size_t colon = l.find(':');
        const auto idx = colon == std::string::npos ? std::nullopt : port_index(s.config, std::string_view(l).substr(0, colon));
        if (!idx) {
            error = fmt::format("--link {}: expected NAME:key=value,... with NAME a bound port ({})", l,
                                port_names(s.config));
            return std::nullopt;
        }
        if (!apply_link_keys(std::string_view(l).substr(colon + 1), s.links[static_cast<size_t>(*idx)], error)) {
            error = fmt::format("{} (in --link {})", error, l);
            return std::nullopt;
        }
    }
    std::map<uint32_t, size_t> by_ip;
    for (const std::string& n : o.neighbors) {
        const size_t eq = n.find('='), at = n.find('@');
        const auto ip = eq == std::string::npos ? std::nullopt : host::parse_ipv4(std::string_view(n).substr(0, eq));
        const auto mac = at == std::string::npos || at < eq ? std::nullopt
                                                             : host::parse_mac(std::string_view(n).substr(eq + 1, at - eq - 1));
        const auto idx = mac ? port_index(s.config, std::string_view(n).substr(at + 1)) : std::nullopt;
        if (!ip || !mac || !idx) {
            error = fmt::format("--neighbor {}: expected IP=MAC@NAME with NAME a bound port ({})", n,
                                port_names(s.config));
            return std::nullopt;
        }
        const uint32_t addr = ip.value_or(0);
        by_ip[addr] = s.neighbors.size();
        s.neighbors.push_back(NeighborEntry{addr, mac->b, static_cast<PortId>(*idx)});
    }
    for (const std::string& r : o.routes) {
        const size_t slash = r.find('/'), eq = r.find('=');
        RouteEntry e;
        const auto prefix = slash == std::string::npos ? std::nullopt : host::parse_ipv4(std::string_view(r).substr(0, slash));
        int len = -1;
        if (prefix && eq != std::string::npos && eq > slash) {
            const std::string_view l = std::string_view(r).substr(slash + 1, eq - slash - 1);
            if (std::from_chars(l.data(), l.data() + l.size(), len).ptr != l.data() + l.size()) len = -1;
        }
        if (!prefix || len < 0 || len > 32) {
            error = fmt::format("--route {}: expected A.B.C.D/LEN=IP[,IP...] with LEN in [0, 32]", r);
            return std::nullopt;
        }
        e.prefix = *prefix;
        e.len = len;
        std::string_view via = std::string_view(r).substr(eq + 1);
        while (!via.empty()) {
            const size_t c = via.find(',');
            const std::string_view one = via.substr(0, c);
            via = c == std::string_view::npos ? std::string_view{} : via.substr(c + 1);
            const uint32_t ip = host::parse_ipv4(one).value_or(0);
            if (!by_ip.count(ip)) {
                error = fmt::format("--route {}: next hop '{}' is not a --neighbor", r, one);
                return std::nullopt;
            }
            e.via.push_back(ip);
        }
        if (e.via.empty()) {
            error = fmt::format("--route {}: no next hop", r);
            return std::nullopt;
        }
        s.routes.push_back(std::move(e));
    }
    if (const std::string v = validate(s.config); !v.empty()) {
        error = v;
        return std::nullopt;
    }
    return s;
}

void install_routes(const LiveSetup& s, RouteTable& rt) {
    std::map<uint32_t, uint32_t> nb_id;
    for (const NeighborEntry& n : s.neighbors) nb_id[n.ip] = rt.learn_host_v4(n.ip, n.port, n.mac);
    for (const RouteEntry& r : s.routes) {
        std::vector<uint32_t> members;
        for (uint32_t ip : r.via) members.push_back(nb_id.at(ip));
        rt.add_route_v4(r.prefix, r.len, rt.add_group(members));
    }
}

}  // namespace rocemu::sw::live
