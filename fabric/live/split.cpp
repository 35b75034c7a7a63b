#include "fabric/live/split.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "dataplane/pcap/pcap.hpp"
#include "dataplane/transport/types.hpp"
#include "fabric/live/live.hpp"

namespace rocemu::fabric::live {

namespace {

constexpr uint32_t kRuntimeTxFrames = 64;  // sw::live::SwitchRuntime's TX buffer (2 bursts)

std::string path_in(const std::string& dir, std::string_view node, std::string_view ext) {
    return (std::filesystem::path(dir) / fmt::format("{}.{}", node, ext)).string();
}

bool known_node(const Topology& t, std::string_view node) {
    if (node == kHostsNode) return true;
    for (const SwitchSpec& s : t.switches)
        if (s.name == node) return true;
    return false;
}

}  // namespace

uint32_t split_headroom_frames() { return kLiveHeadroomFrames + (1u << kMemifLog2Ring) + kRuntimeTxFrames; }

std::vector<std::string> node_names(const Topology& t) {
    std::vector<std::string> names{std::string(kHostsNode)};
    for (const SwitchSpec& s : t.switches) {
        if (s.name == kHostsNode)
            throw std::invalid_argument(
                fmt::format("a switch is named '{}', the name of the NICs' process: rename it", kHostsNode));
        names.push_back(s.name);
    }
    return names;
}

std::string node_of(const Topology& t, const Endpoint& e) {
    return e.is_switch ? t.switches[e.index].name : std::string(kHostsNode);
}

void remove_server_sockets(const std::vector<CableEnd>& ends) {
    for (const CableEnd& e : ends)
        if (std::error_code ec; e.server && !e.socket.empty()) std::filesystem::remove(e.socket, ec);
}

std::vector<CableEnd> cable_ends(const Topology& t, std::string_view node, const std::string& link_dir,
                                 const std::map<std::string, std::string>& overrides) {
    if (!known_node(t, node))
        throw std::invalid_argument(fmt::format("no node '{}' in fabric '{}'", node, t.cfg.name));
    // memif refuses a relative socket path ("Invalid socket directory").
    std::error_code ec;
    std::filesystem::path dir = link_dir.empty() ? std::filesystem::path() : std::filesystem::absolute(link_dir, ec);
    if (ec) dir = link_dir;
    for (const auto& [cable, dev] : overrides) {
        const auto l = t.find_link(cable);
        if (!l || (node_of(t, t.links[*l].a) != node && node_of(t, t.links[*l].b) != node))
            throw std::invalid_argument(fmt::format("--port {}={}: node '{}' has no end of a cable '{}'", cable, dev,
                                                    node, cable));
    }
    std::vector<CableEnd> ends;
    for (uint32_t l = 0; l < t.links.size(); ++l) {
        const LinkSpec& link = t.links[l];
        const std::string na = node_of(t, link.a), nb = node_of(t, link.b);
        if (na == nb) throw std::invalid_argument(fmt::format("cable {} joins node {} to itself", link.name, na));
        if (na != node && nb != node) continue;
        CableEnd e;
        e.link = l;
        const bool at_a = na == node;
        e.end = at_a ? link.a : link.b;
        e.peer = at_a ? link.b : link.a;
        e.peer_node = at_a ? nb : na;
        e.server = node < e.peer_node;
        if (const auto o = overrides.find(link.name); o != overrides.end()) {
            e.devspec = o->second;
        } else {
            const std::array<uint8_t, 6>& m =
                e.end.is_switch ? t.switches[e.end.index].port_mac[e.end.port] : t.nics[e.end.index].mac;
            e.socket = (dir / (link.name + ".sock")).string();
            e.devspec = fmt::format(
                "net_memif{},role={},socket={},socket-abstract=no,id=0,rsize={},bsize={},mac={:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                ends.size(), e.server ? "server" : "client", e.socket,
                link.fabric ? kMemifLog2Ring : kMemifLog2NicRing,
                kMemifBufferBytes, m[0], m[1], m[2], m[3], m[4], m[5]);
        }
        ends.push_back(std::move(e));
    }
    return ends;
}

bool is_memif_client(const CableEnd& e) {
    return e.devspec.starts_with("net_memif") && e.devspec.find(",role=client") != std::string::npos;
}

std::string servers_path(const std::string& link_dir, std::string_view node) {
    return path_in(link_dir, node, "servers");
}

bool make_link_dir(const std::string& link_dir, std::string& error) {
    std::error_code ec;
    std::filesystem::create_directories(link_dir, ec);
    if (ec) error = fmt::format("--link-dir {}: {}", link_dir, ec.message());
    return !ec;
}

bool wait_for_file(const std::string& path, Nanos timeout, const std::function<bool()>& stop) {
    constexpr timespec kStep{0, 10000000};
    for (Nanos waited{}; waited <= timeout; waited += Nanos::from_ms(10)) {
        if (std::filesystem::exists(path)) return true;
        if (stop && stop()) return false;
        nanosleep(&kStep, nullptr);
    }
    return false;
}

std::optional<std::pair<std::string, std::string>> split_assignment(std::string_view v) {
    const size_t eq = v.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == v.size()) return std::nullopt;
    return std::pair{std::string(v.substr(0, eq)), std::string(v.substr(eq + 1))};
}

std::map<std::string, std::string> parse_port_overrides(const Topology& t, const std::vector<std::string>& values) {
    std::map<std::string, std::string> m;
    for (const std::string& v : values) {
        const auto kv = split_assignment(v);
        if (!kv)
            throw std::invalid_argument(fmt::format("--port '{}': expected CABLE=DEVSPEC, e.g. h0-leaf0=net_af_packet0,iface=veth0", v));
        if (!t.find_link(kv->first))
            throw std::invalid_argument(fmt::format("--port '{}': fabric '{}' has no cable '{}'", v, t.cfg.name, kv->first));
        m[kv->first] = kv->second;
    }
    return m;
}

bool is_pci_address(std::string_view v) {
    const auto hex = [](std::string_view h, std::size_t min, std::size_t max) {
        return h.size() >= min && h.size() <= max &&
               std::all_of(h.begin(), h.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
    };
    const std::size_t dot = v.rfind('.');
    if (dot == std::string_view::npos || v.size() != dot + 2 || v[dot + 1] < '0' || v[dot + 1] > '7') return false;
    std::string_view rest = v.substr(0, dot);  // [DOMAIN:]BUS:DEV
    const std::size_t c2 = rest.rfind(':');
    if (c2 == std::string_view::npos || !hex(rest.substr(c2 + 1), 2, 2)) return false;
    rest = rest.substr(0, c2);
    const std::size_t c1 = rest.rfind(':');
    if (c1 == std::string_view::npos) return hex(rest, 2, 2);
    return hex(rest.substr(c1 + 1), 2, 2) && hex(rest.substr(0, c1), 1, 8);
}

std::map<std::pair<std::string, std::string>, PlanDevice> parse_plan_devices(
    const Topology& t, const std::map<std::string, std::string>& machines, const std::vector<std::string>& values) {
    std::vector<std::string> crossing;
    for (const LinkSpec& l : t.links)
        if (machines.at(node_of(t, l.a)) != machines.at(node_of(t, l.b))) crossing.push_back(l.name);
    std::map<std::pair<std::string, std::string>, PlanDevice> m;
    for (const std::string& v : values) {
        const auto kv = split_assignment(v);
        const std::size_t at = kv ? kv->first.rfind('@') : std::string::npos;
        if (!kv || at == std::string::npos || at == 0 || at + 1 == kv->first.size())
            throw std::invalid_argument(fmt::format(
                "--device '{}': expected CABLE@MACHINE=DEVICE (an interface, e.g. h0-leaf0@a=eth1, or a PCI address, "
                "e.g. h0-leaf0@a=0000:3b:00.0)",
                v));
        const std::string cable = kv->first.substr(0, at), machine = kv->first.substr(at + 1), dev = kv->second;
        const auto link = t.find_link(cable);
        if (!link || std::find(crossing.begin(), crossing.end(), cable) == crossing.end())
            throw std::invalid_argument(
                fmt::format("--device '{}': {} (cables between two machines: {})", v,
                            link ? fmt::format("cable {} does not join two machines", cable)
                                 : fmt::format("fabric '{}' has no cable '{}'", t.cfg.name, cable),
                            crossing.empty() ? "none" : fmt::format("{}", fmt::join(crossing, ", "))));
        const LinkSpec& l = t.links[*link];
        const std::string ma = machines.at(node_of(t, l.a)), mb = machines.at(node_of(t, l.b));
        if (machine != ma && machine != mb)
            throw std::invalid_argument(fmt::format("--device '{}': cable {} joins machines {} and {}, not {}", v,
                                                    cable, ma, mb, machine));
        PlanDevice d;
        if (is_pci_address(dev)) {
            d.pci = dev;
        } else if (dev.size() <= 15 && dev != "." && dev != ".." &&
                   dev.find_first_of("/,=:'\" \t") == std::string::npos) {
            d.iface = dev;
        } else {
            throw std::invalid_argument(fmt::format(
                "--device '{}': '{}' is neither a PCI address nor an interface name (at most 15 characters, no "
                "'/', ',', '=', ':', quotes or spaces)",
                v, dev));
        }
        for (const auto& [end, other] : m)
            if (end.second == machine && end.first != cable && other.iface == d.iface && other.pci == d.pci)
                throw std::invalid_argument(fmt::format("--device '{}': {} already carries {} on machine {}", v, dev,
                                                        end.first, machine));
        if (!m.emplace(std::pair{cable, machine}, d).second)
            throw std::invalid_argument(fmt::format("--device '{}': {}'s end of {} is given twice", v, machine, cable));
    }
    return m;
}

uint32_t ethdevs_needed(const Topology& t, std::string_view node) {
    if (node == kHostsNode) return static_cast<uint32_t>(t.nics.size());
    uint32_t n = 0;
    for (const LinkSpec& l : t.links)
        for (const Endpoint* e : {&l.a, &l.b})
            if (e->is_switch && t.switches[e->index].name == node) n += l.fabric ? 1 : 2;
    return n;
}

std::string ready_path(const std::string& link_dir, std::string_view node) { return path_in(link_dir, node, "ready"); }

std::string clock_path(const std::string& link_dir) { return path_in(link_dir, "fabric", "clock"); }

std::unique_ptr<SharedClock> open_node_clock(const Topology& t, const std::string& link_dir, std::string_view node,
                                             std::string& error) {
    const std::vector<std::string> names = node_names(t);
    const auto slot = static_cast<uint32_t>(std::find(names.begin(), names.end(), node) - names.begin());
    return SharedClock::open(clock_path(link_dir), static_cast<uint32_t>(names.size()), slot, error);
}

std::string counters_path(const std::string& link_dir, std::string_view node) {
    return path_in(link_dir, node, "counters");
}

namespace {

std::string threshold_text(const sw::Threshold& t) {
    return fmt::format("{}/{}/{}", t.dynamic, t.dynamic_th, t.static_th.v);
}

std::string pg_text(const sw::PgProfile& p) {
    return fmt::format("{} {} {} {} {}", p.size.v, p.xon.v, p.xoff.v, p.xon_offset.v, threshold_text(p.th));
}

// What a switch node runs beyond its ports: QoS maps, scheduling, WRED/ECN,
// the shared buffer and PG profiles, PFC, the watchdog and routing.
std::string switch_settings_text(const sw::SwitchConfig& c) {
    std::string s = fmt::format(" maps {} | {} | {} pfc {:#x}\n", fmt::join(c.dscp_to_tc, ","),
                                fmt::join(c.tc_to_queue, ","), fmt::join(c.tc_to_pg, ","), c.pfc_enable);
    for (size_t q = 0; q < c.scheduler.size(); ++q) {
        const sw::WredProfile& w = c.wred[q];
        s += fmt::format(" q{} {} {} wred {} {} {} {} {}\n", q, c.scheduler[q].strict, c.scheduler[q].weight,
                         w.wred_green_enable, static_cast<int>(w.ecn), w.green_min_threshold.v,
                         w.green_max_threshold.v, w.green_drop_probability);
    }
    const sw::RoutingConfig& r = c.routing;
    std::string ar;
    for (const sw::ArMode m : r.adaptive) ar += static_cast<char>('0' + static_cast<int>(m));
    s += fmt::format(" wred_stage {} pool {} pg_lossless {} pg_lossy {} queue_lossy {} {} pause {} {}\n",
                     static_cast<int>(c.wred_stage), c.pool_size.v, pg_text(c.pg_lossless), pg_text(c.pg_lossy),
                     c.queue_lossy.size.v, threshold_text(c.queue_lossy.th), c.pause_quanta, c.refresh_percent);
    s += fmt::format(" wd {} {} {} {} routing {} {} {} {} {}\n", c.pfc_wd.enabled, c.pfc_wd.detection_time.v,
                     c.pfc_wd.restoration_time.v, static_cast<int>(c.pfc_wd.action), r.hash_fields, r.hash_seed, ar,
                     r.flowlet_gap.v, r.flowlet_table_size);
    return s;
}

// What a switch node reads of the NIC profile: the MTU (its NIC cables' MAC,
// the headroom in frames) and the DSCP (the lossless PG that headroom is
// for). The model, spraying and CC only the hosts node runs, so a switch
// node started without the hosts node's --nic-model is the same fabric.
std::string nic_settings_text(const NicProfile& n) { return fmt::format("nics mtu {} dscp {}\n", n.mtu, n.dscp); }

}  // namespace

std::string fabric_identity(const Topology& t, double scale, uint64_t seed) {
    std::string canon = t.cfg.name + '\n' + nic_settings_text(t.cfg.nic);
    const auto mac = [](const std::array<uint8_t, 6>& m) {
        return fmt::format("{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}", m[0], m[1], m[2], m[3], m[4], m[5]);
    };
    for (const NicSpec& n : t.nics)
        canon += fmt::format("nic {} {} {} {} {}\n", n.name, mac(n.mac), n.ip, n.sw, n.sw_port);
    for (const SwitchSpec& s : t.switches) {
        canon += fmt::format("switch {}\n", s.name);
        for (size_t p = 0; p < s.cfg.ports.size(); ++p)
            canon += fmt::format(" {} {} {} {}\n", s.cfg.ports[p].name, s.cfg.ports[p].speed.v, s.cfg.ports[p].mtu,
                                 mac(s.port_mac[p]));
        canon += switch_settings_text(s.cfg);
    }
    for (const LinkSpec& l : t.links)
        canon += fmt::format("link {} {}.{}.{} {}.{}.{} {} {} {}\n", l.name, l.a.is_switch, l.a.index, l.a.port,
                             l.b.is_switch, l.b.index, l.b.port, l.cls.speed.v, l.cls.delay.v, l.fabric);
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a: stable across builds and machines, unlike std::hash
    for (const char c : canon) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
    return fmt::format("{} topology {:016x} scale {:g} seed {}", t.cfg.name, h, scale, seed);
}

namespace {
constexpr std::string_view kSnapshotEnd = "# end ";
}  // namespace

std::string format_snapshot(const SwitchSnapshot& s) {
    std::string out = fmt::format("# at_ns {}\n# realtime_ns {}\n# node {}\n# fabric {}\n# ready {}\n", s.at_ns,
                                  s.realtime_ns, s.node, s.fabric, s.ready ? 1 : 0);
    for (const std::string& r : s.rows) out += r + '\n';
    return out + fmt::format("{}{}\n", kSnapshotEnd, s.rows.size());
}

std::optional<SwitchSnapshot> parse_snapshot(std::string_view text) {
    constexpr std::string_view kHead = "# at_ns ";
    if (!text.starts_with(kHead)) return std::nullopt;
    SwitchSnapshot s;
    const size_t eol = text.find('\n');
    if (eol == std::string_view::npos) return std::nullopt;
    const std::string_view num = text.substr(kHead.size(), eol - kHead.size());
    if (std::from_chars(num.data(), num.data() + num.size(), s.at_ns).ec != std::errc{}) return std::nullopt;
    // A reply or file cut short, even at a line boundary, lacks the end line
    // (or its row count): none of its rows is taken.
    size_t pos = eol + 1;
    while (pos < text.size()) {
        const size_t e = text.find('\n', pos);
        if (e == std::string_view::npos) return std::nullopt;
        const std::string_view line = text.substr(pos, e - pos);
        if (line.starts_with(kSnapshotEnd)) {
            const std::string_view n = line.substr(kSnapshotEnd.size());
            size_t rows = 0;
            const auto r = std::from_chars(n.data(), n.data() + n.size(), rows);
            if (r.ec != std::errc{} || r.ptr != n.data() + n.size() || rows != s.rows.size() || e + 1 != text.size())
                return std::nullopt;
            return s;
        }
        if (line.starts_with("# ")) {
            const std::string_view kv = line.substr(2);
            const size_t sp = kv.find(' ');
            const std::string_view key = kv.substr(0, sp), value = sp == std::string_view::npos ? "" : kv.substr(sp + 1);
            if (key == "node") s.node = value;
            else if (key == "realtime_ns") {
                if (std::from_chars(value.data(), value.data() + value.size(), s.realtime_ns).ec != std::errc{})
                    return std::nullopt;
            }
            else if (key == "fabric") s.fabric = value;
            else if (key == "ready") s.ready = value == "1";
        } else if (!line.empty()) {
            s.rows.emplace_back(line);
        }
        pos = e + 1;
    }
    return std::nullopt;
}

std::map<std::string, std::string> parse_machines(const Topology& t, const std::vector<std::string>& values) {
    std::map<std::string, std::string> on;
    for (const std::string& v : values) {
        const auto kv = split_assignment(v);
        if (!kv)
            throw std::invalid_argument(fmt::format("--machine '{}': expected MACHINE=NODE,NODE,..., e.g. a=hosts", v));
        const std::string& machine = kv->first;
        const std::string& list = kv->second;
        // A machine's name is also a folder's (--link-dir DIR/MACHINE).
        if (machine.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") !=
                std::string::npos ||
            machine == "." || machine == "..")
            throw std::invalid_argument(fmt::format(
                "--machine '{}': a machine's name is letters, digits, '_', '.' and '-' (not '.' or '..')", v));
        for (size_t b = 0; b <= list.size();) {
            const size_t e = std::min(list.find(',', b), list.size());
            const std::string node = list.substr(b, e - b);
            if (!known_node(t, node))
                throw std::invalid_argument(
                    fmt::format("--machine '{}': fabric '{}' has no node '{}' (nodes: {})", v, t.cfg.name, node,
                                fmt::join(node_names(t), ", ")));
            if (const auto it = on.find(node); it != on.end())
                throw std::invalid_argument(
                    fmt::format("--machine '{}': node {} is already on machine {}", v, node, it->second));
            on[node] = machine;
            b = e + 1;
        }
    }
    if (values.empty()) return on;
    for (const std::string& n : node_names(t))
        if (!on.contains(n))
            throw std::invalid_argument(fmt::format("--machine: node {} is on no machine", n));
    return on;
}

std::vector<std::string> nodes_elsewhere(const std::map<std::string, std::string>& machines, std::string_view node) {
    std::vector<std::string> out;
    const auto mine = machines.find(std::string(node));
    for (const auto& [n, m] : machines)
        if (mine != machines.end() && m != mine->second) out.push_back(n);
    return out;
}

std::vector<std::string> cables_without_port(const Topology& t, std::string_view node,
                                             const std::vector<std::string>& remote,
                                             const std::map<std::string, std::string>& overrides) {
    std::vector<std::string> why;
    for (const CableEnd& e : cable_ends(t, node, "", overrides)) {
        const std::string& cable = t.links[e.link].name;
        if (overrides.contains(cable) || std::find(remote.begin(), remote.end(), e.peer_node) == remote.end())
            continue;
        why.push_back(fmt::format("cable {} joins {} to {}, which runs on another machine: give {} --port "
                                  "{}=DEVSPEC (its end on a device that reaches the other machine, e.g. "
                                  "net_af_packet0,iface=eth1)",
                                  cable, node, e.peer_node, node, cable));
    }
    return why;
}

SwitchRowTotals sum_rows(const std::vector<std::string>& rows) {
    SwitchRowTotals t;
    for (const std::string& r : rows) {
        // switch,port,counter,value
        const size_t c2 = r.find(',', r.find(',') + 1);
        const size_t c3 = r.rfind(',');
        if (c2 == std::string::npos || c3 <= c2) continue;
        const std::string_view counter = std::string_view(r).substr(c2 + 1, c3 - c2 - 1);
        uint64_t v = 0;
        if (std::from_chars(r.data() + c3 + 1, r.data() + r.size(), v).ec != std::errc{}) continue;
        if (counter == "tx_pfc_frames") t.pfc_frames += v;
        else if (counter == "ecn_marks") t.ecn_marks += v;
        else if (counter == "lossless_drops") t.lossless_drops += v;
        else if (counter.starts_with("drop_")) t.drops += v;
    }
    return t;
}

std::vector<DropCount> drops_between(std::string_view side, const std::vector<std::string>& before,
                                     const std::vector<std::string>& after) {
    // A row's key (everything before the value) and its value.
    const auto split_row = [](std::string_view r) -> std::pair<std::string_view, uint64_t> {
        const size_t c = r.rfind(',');
        uint64_t v = 0;
        if (c == std::string_view::npos || std::from_chars(r.data() + c + 1, r.data() + r.size(), v).ec != std::errc{})
            return {{}, 0};
        return {r.substr(0, c), v};
    };
    std::map<std::string_view, uint64_t> was;
    for (const std::string& r : before) {
        const auto [key, v] = split_row(r);
        if (!key.empty()) was[key] = v;
    }
    std::vector<DropCount> out;
    for (const std::string& r : after) {
        const auto [key, v] = split_row(r);
        const size_t c = key.rfind(',');
        if (c == std::string_view::npos) continue;
        const std::string_view counter = key.substr(c + 1);
        if (!counter.starts_with("drop_") || transport::is_ignored_response(counter)) continue;
        const auto it = was.find(key);
        const uint64_t from = it == was.end() ? 0 : it->second;
        if (v <= from) continue;
        std::string where(key.substr(0, c));
        std::replace(where.begin(), where.end(), ',', ':');
        out.push_back({fmt::format("{} {} {}", side, where, counter.substr(5)), v - from});
    }
    return out;
}

std::vector<std::string> node_eal_args(const std::vector<std::string>& eal, std::string_view node) {
    constexpr std::string_view kOpt = "--file-prefix";
    std::vector<std::string> out = eal;
    for (size_t i = 0; i < out.size(); ++i) {
        if (out[i] == kOpt && i + 1 < out.size()) out[++i] += fmt::format("-{}", node);
        else if (out[i].starts_with(fmt::format("{}=", kOpt))) out[i] += fmt::format("-{}", node);
    }
    return out;
}

std::string capture_path(const std::string& link_dir, std::string_view link, std::string_view node) {
    return (std::filesystem::path(link_dir) / fmt::format("{}@{}.pcap", link, node)).string();
}

std::vector<std::string> capture_parts(const Topology& t, const std::string& link_dir, std::string_view link) {
    const std::optional<uint32_t> l = t.find_link(link);
    if (!l) return {};
    std::vector<std::string> parts{capture_path(link_dir, link, node_of(t, t.links[*l].a)),
                                   capture_path(link_dir, link, node_of(t, t.links[*l].b))};
    std::sort(parts.begin(), parts.end());
    parts.erase(std::unique(parts.begin(), parts.end()), parts.end());
    return parts;
}


}  // namespace rocemu::fabric::live
