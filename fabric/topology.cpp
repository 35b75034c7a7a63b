#include "fabric/topology.hpp"

#include <filesystem>
#include <set>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "common/text_file.hpp"
#include "fabric/embedded.hpp"

namespace rocemu::fabric {

std::string_view shape_name(Shape s) {
    switch (s) {
        case Shape::LeafSpine: return "leaf_spine";
        case Shape::Rail: return "rail";
        case Shape::Dumbbell: return "dumbbell";
    }
    return "?";
}

uint32_t NicProfile::rdma_mtu() const {
    uint32_t best = 256;
    for (uint32_t m = 256; m <= 4096; m *= 2)
        if (m + 80 <= mtu) best = m;
    return best;
}

std::string format_ipv4(uint32_t ip) {
    return fmt::format("{}.{}.{}.{}", ip >> 24, (ip >> 16) & 255, (ip >> 8) & 255, ip & 255);
}

namespace {

// Host ports per switch are capped by the switch core; subnets are /24s.
constexpr uint32_t kMaxHostsPerSubnet = 250;

// Keeps the first error; every message is "<source>: <key>: <problem>".
class Reader {
public:
    explicit Reader(const std::string& source) : source_(source) {}
    std::string error;
    bool ok() const { return error.empty(); }
    void fail(const std::string& key, const std::string& problem) {
        if (error.empty()) error = fmt::format("{}: {}: {}", source_, key, problem);
    }

    // `what` names whose keys they are, when not the mapping's own
    // ("kind leaf_spine").
    void only(const YAML::Node& n, const std::string& key, std::initializer_list<std::string_view> allowed,
              std::string_view what = {}) {
        if (!n.IsMap()) {
            fail(key.empty() ? "(top level)" : key, "must be a mapping");
            return;
        }
        std::set<std::string> seen;
        for (const auto& kv : n) {
            if (!kv.first.IsScalar()) {
                fail(key.empty() ? "(top level)" : key, "a key must be a name, not a list or a mapping");
                return;
            }
            const std::string k = kv.first.as<std::string>();
            // yaml-cpp keeps the first of two equal keys without a word.
            if (!seen.insert(k).second) fail(key.empty() ? k : key + "." + k, "given twice");
            bool known = false;
            for (auto a : allowed) known |= a == k;
            if (!known) {
                std::string list;
                for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
                fail(key.empty() ? k : key + "." + k,
                     what.empty() ? fmt::format("unknown key (allowed: {})", list)
                                  : fmt::format("not a key of {} (its keys: {})", what, list));
            }
        }
    }

    template <typename T>
    void uint(const YAML::Node& parent, const char* name, const std::string& key, uint64_t lo, uint64_t hi, T& out) {
        const YAML::Node n = parent[name];
        if (!n) return;
        const std::string s = n.Scalar();
        uint64_t v = 0;
        std::size_t used = 0;
        try {
            v = std::stoull(s, &used);
        } catch (...) {
            used = 0;
        }
        if (!n.IsScalar()) {
            fail(key, n.IsNull() ? "has no value: give a non-negative integer"
                                 : "must be a non-negative integer, not a list or a mapping");
            return;
        }
        if (used != s.size() || s.empty() || s[0] == '-') {
            fail(key, fmt::format("'{}' is not a non-negative integer", s));
            return;
        }
        if (v < lo || v > hi) {
            fail(key, fmt::format("{} out of range [{}, {}]", v, lo, hi));
            return;
        }
        out = static_cast<T>(v);
    }

    void boolean(const YAML::Node& parent, const char* name, const std::string& key, bool& out) {
        const YAML::Node n = parent[name];
        if (!n) return;
        const std::string s = n.Scalar();
        if (!n.IsScalar())
            fail(key, "must be true or false, not a list, a mapping or nothing");
        else if (s == "true")
            out = true;
        else if (s == "false")
            out = false;
        else
            fail(key, fmt::format("'{}' must be true or false", s));
    }

    void string(const YAML::Node& parent, const char* name, const std::string& key, std::string& out) {
        const YAML::Node n = parent[name];
        if (!n) return;
        if (!n.IsScalar() || n.Scalar().empty()) {
            fail(key, "must be a non-empty string");
            return;
        }
        out = n.Scalar();
    }

    void link(const YAML::Node& parent, const char* name, const std::string& key, LinkClass& out) {
        const YAML::Node n = parent[name];
        if (!n) return;
        only(n, key, {"speed_gbps", "delay_ns"});
        if (!ok()) return;
        uint64_t gbps = out.speed.v / 1000000000;
        uint(n, "speed_gbps", key + ".speed_gbps", 1, 800, gbps);
        out.speed = BitsPerSec::gbps(static_cast<double>(gbps));
        uint64_t delay = static_cast<uint64_t>(out.delay.v);
        uint(n, "delay_ns", key + ".delay_ns", 0, 10000000, delay);
        out.delay = Nanos{static_cast<int64_t>(delay)};
    }

private:
    const std::string& source_;
};

sw::ConfigResult load_switch_profile(const std::string& name, const std::string& source) {
    for (std::size_t i = 0; i < detail::kEmbeddedSwitchProfileCount; ++i)
        if (detail::kEmbeddedSwitchProfiles[i].name == name)
            return sw::parse_switch_config(detail::kEmbeddedSwitchProfiles[i].yaml);
    std::filesystem::path p(name);
    if (p.is_relative() && !source.empty()) p = std::filesystem::path(source).parent_path() / p;
    std::error_code ec;  // a name too long for a path is not a file either, and must not throw
    if (!std::filesystem::exists(p, ec)) {
        std::string names;
        for (std::size_t i = 0; i < detail::kEmbeddedSwitchProfileCount; ++i)
            names += (names.empty() ? "" : ", ") + std::string(detail::kEmbeddedSwitchProfiles[i].name);
        return sw::ConfigResult{std::nullopt,
                                fmt::format("'{}' is neither a built-in profile ({}) nor a file", name, names)};
    }
    return sw::load_switch_config(p.string());
}

cc::CcConfigResult load_cc(const std::string& name, const std::string& source) {
    if (name == "none") {
        cc::CcConfigResult r;
        r.config.algorithm = cc::CcAlgorithm::kNone;
        return r;
    }
    for (const auto preset : cc::cc_preset_names())
        if (preset == name) return cc::load_cc_preset(name);
    std::filesystem::path p(name);
    if (p.is_relative() && !source.empty()) p = std::filesystem::path(source).parent_path() / p;
    std::error_code ec;  // a name too long for a path is not a file either, and must not throw
    if (!std::filesystem::exists(p, ec)) {
        std::string names = "none";
        for (const auto preset : cc::cc_preset_names()) names += ", " + std::string(preset);
        cc::CcConfigResult r;
        r.error = fmt::format("'{}' is neither a built-in preset ({}) nor a file", name, names);
        return r;
    }
    return cc::load_cc_config_file(p.string());
}

}  // namespace

std::string_view nic_model_name(NicModel m) { return m == NicModel::Rc ? "rc" : "generator"; }

namespace {

ConfigResult parse_fabric_text(std::string_view yaml_text, const std::string& source) {
    Reader r(source);
    YAML::Node root;
    try {
        root = YAML::Load(std::string(yaml_text));
    } catch (const YAML::Exception& e) {
        return ConfigResult{std::nullopt, fmt::format("{}: line {}: {}", source, e.mark.line + 1, e.msg)};
    }
    FabricConfig c;
    c.source = source;
    r.only(root, "", {"name", "topology", "links", "nic", "switch"});
    if (!r.ok()) return ConfigResult{std::nullopt, r.error};
    r.string(root, "name", "name", c.name);

    const YAML::Node topo = root["topology"];
    if (!topo) return ConfigResult{std::nullopt, fmt::format("{}: topology: missing", source)};
    r.only(topo, "topology",
           {"kind", "leaves", "hosts_per_leaf", "spines", "hosts", "nics_per_host", "rail_optimised", "left_hosts",
            "right_hosts"});
    if (!r.ok()) return ConfigResult{std::nullopt, r.error};
    std::string kind;
    r.string(topo, "kind", "topology.kind", kind);
    if (kind == "leaf_spine") {
        c.shape = Shape::LeafSpine;
        r.only(topo, "topology", {"kind", "leaves", "hosts_per_leaf", "spines"}, "kind leaf_spine");
    } else if (kind == "rail") {
        c.shape = Shape::Rail;
        r.only(topo, "topology", {"kind", "hosts", "nics_per_host", "rail_optimised", "spines"}, "kind rail");
    } else if (kind == "dumbbell" || kind == "incast") {
        c.shape = Shape::Dumbbell;
        r.only(topo, "topology", {"kind", "left_hosts", "right_hosts"}, fmt::format("kind {}", kind));
    } else {
        r.fail("topology.kind", fmt::format("'{}' is not one of leaf_spine, rail, dumbbell, incast", kind));
    }
    if (kind == "incast") {
        c.right_hosts = 1;
        c.left_hosts = 8;
    }
    r.uint(topo, "leaves", "topology.leaves", 1, 256, c.leaves);
    r.uint(topo, "hosts_per_leaf", "topology.hosts_per_leaf", 1, kMaxHostsPerSubnet, c.hosts_per_leaf);
    r.uint(topo, "spines", "topology.spines", 0, 64, c.spines);
    r.uint(topo, "hosts", "topology.hosts", 1, kMaxHostsPerSubnet, c.hosts);
    r.uint(topo, "nics_per_host", "topology.nics_per_host", 1, 16, c.nics_per_host);
    r.boolean(topo, "rail_optimised", "topology.rail_optimised", c.rail_optimised);
    r.uint(topo, "left_hosts", "topology.left_hosts", 1, kMaxHostsPerSubnet, c.left_hosts);
    r.uint(topo, "right_hosts", "topology.right_hosts", 1, kMaxHostsPerSubnet, c.right_hosts);
    if (r.ok() && c.shape == Shape::LeafSpine && c.leaves > 1 && c.spines == 0)
        r.fail("topology.spines", "0 with more than one leaf: leaves could not reach each other");
    if (r.ok() && c.shape == Shape::Rail && c.spines == 0 && c.nics_per_host > 1)
        r.fail("topology.spines", "0 with more than one rail: rails could not reach each other");
    if (r.ok() && c.shape != Shape::Dumbbell) {
        const uint32_t leaves = c.shape == Shape::Rail ? c.nics_per_host : c.leaves;
        const uint32_t down = c.shape == Shape::Rail ? c.hosts : c.hosts_per_leaf;
        if (down + c.spines > sw::kMaxPorts)
            r.fail(c.shape == Shape::Rail ? "topology.hosts" : "topology.hosts_per_leaf",
                   fmt::format("{} hosts + {} spines per leaf exceed the switch's {} ports", down, c.spines,
                               sw::kMaxPorts));
        if (leaves > sw::kMaxPorts && c.spines > 0)
            r.fail("topology.leaves", fmt::format("{} leaves exceed a spine's {} ports", leaves, sw::kMaxPorts));
    }
    if (r.ok() && c.shape == Shape::Dumbbell && (c.left_hosts + 1 > sw::kMaxPorts || c.right_hosts + 1 > sw::kMaxPorts))
        r.fail("topology.left_hosts", fmt::format("a side exceeds the switch's {} ports", sw::kMaxPorts));

    if (const YAML::Node links = root["links"]) {
        r.only(links, "links", {"host", "fabric"});
        if (!r.ok()) return ConfigResult{std::nullopt, r.error};
        r.link(links, "host", "links.host", c.host_link);
        r.link(links, "fabric", "links.fabric", c.fabric_link);
    }

    if (const YAML::Node nic = root["nic"]) {
        r.only(nic, "nic", {"model", "cc", "spraying", "mtu", "dscp"});
        if (!r.ok()) return ConfigResult{std::nullopt, r.error};
        if (nic["model"]) {
            std::string model;
            r.string(nic, "model", "nic.model", model);
            if (model == "rc")
                c.nic.model = NicModel::Rc;
            else if (model == "generator")
                c.nic.model = NicModel::Generator;
            else
                r.fail("nic.model", fmt::format("'{}' is not one of rc, generator", model));
        }
        r.string(nic, "cc", "nic.cc", c.nic.cc_name);
        r.boolean(nic, "spraying", "nic.spraying", c.nic.spraying);
        r.uint(nic, "mtu", "nic.mtu", 576, 9216, c.nic.mtu);
        r.uint(nic, "dscp", "nic.dscp", 0, 63, c.nic.dscp);
    }
    if (r.ok()) {
        const cc::CcConfigResult ccr = load_cc(c.nic.cc_name, source);
        if (!ccr.ok())
            r.fail("nic.cc", ccr.error);
        else
            c.nic.cc = ccr.config;
    }

    if (const YAML::Node s = root["switch"]) {
        r.only(s, "switch", {"profile", "adaptive_routing"});
        if (!r.ok()) return ConfigResult{std::nullopt, r.error};
        r.string(s, "profile", "switch.profile", c.sw.name);
        std::string ar;
        r.string(s, "adaptive_routing", "switch.adaptive_routing", ar);
        if (ar == "off")
            c.sw.adaptive = sw::ArMode::Off;
        else if (ar == "per_packet")
            c.sw.adaptive = sw::ArMode::PerPacket;
        else if (ar == "flowlet")
            c.sw.adaptive = sw::ArMode::Flowlet;
        else if (!ar.empty())
            r.fail("switch.adaptive_routing", fmt::format("'{}' is not one of off, per_packet, flowlet", ar));
    }
    if (r.ok()) {
        const sw::ConfigResult sr = load_switch_profile(c.sw.name, source);
        if (!sr.config)
            r.fail("switch.profile", sr.error);
        else
            c.sw.base = *sr.config;
    }
    if (!r.ok()) return ConfigResult{std::nullopt, r.error};
    if (c.name.empty()) c.name = std::filesystem::path(source).stem().string();
    return ConfigResult{std::move(c), {}};
}

}  // namespace

namespace {

ConfigResult parse_checked(std::string_view yaml_text, const std::string& source) {
    // YAML is text: a NUL (a binary file, a truncated copy) would end what
    // yaml-cpp reads there, without a word.
    if (const std::size_t nul = yaml_text.find('\0'); nul != std::string_view::npos)
        return ConfigResult{std::nullopt,
                            fmt::format("{}: byte {} is a NUL: not a text file (YAML)", source, nul + 1)};
    // A node of the wrong shape (a scalar where a mapping belongs, a list as
    // a key) makes yaml-cpp throw from the reads: an error like the others.
    try {
        return parse_fabric_text(yaml_text, source);
    } catch (const YAML::Exception& e) {
        if (e.mark.is_null()) return ConfigResult{std::nullopt, fmt::format("{}: {}", source, e.msg)};
        return ConfigResult{std::nullopt, fmt::format("{}: line {}: {}", source, e.mark.line + 1, e.msg)};
    }
}

}  // namespace

ConfigResult parse_fabric_config(std::string_view yaml_text, const std::string& source) {
    // Values quoted in the message may be any bytes the file held.
    ConfigResult r = parse_checked(yaml_text, source);
    r.error = printable(r.error);
    return r;
}

ConfigResult load_fabric_config(const std::string& path) {
    ReadTextError err;
    const std::optional<std::string> text = read_text_file(path, err);
    if (err == ReadTextError::TooLarge)
        return ConfigResult{std::nullopt, fmt::format("{}: larger than {} MiB, not a fabric config", path,
                                                      kMaxConfigFileBytes >> 20)};
    if (!text) return ConfigResult{std::nullopt, fmt::format("{}: {}", path, read_text_error(err))};
    return parse_fabric_config(*text, path);
}

std::string_view default_fabric_yaml() {
    for (std::size_t i = 0; i < detail::kEmbeddedFabricCount; ++i)
        if (detail::kEmbeddedFabrics[i].name == "default") return detail::kEmbeddedFabrics[i].yaml;
    return {};
}

std::vector<std::string> config_warnings(const FabricConfig& c) {
    std::vector<std::string> out;
    const uint8_t tc = c.sw.base.dscp_to_tc[c.nic.dscp & 63];
    const bool overridden = c.sw.adaptive && (tc == 3 || tc == 4);
    const sw::ArMode ar = overridden ? *c.sw.adaptive : c.sw.base.routing.adaptive[tc];
    const bool multipath = c.shape != Shape::Dumbbell && c.spines >= 2;
    if (c.nic.model == NicModel::Rc && !c.nic.spraying && ar == sw::ArMode::PerPacket && multipath)
        out.push_back(fmt::format(
            "the switches route traffic class {} (the NICs' DSCP {}) per packet ({}), but nic.spraying is false: "
            "RC QPs without a reorder buffer take each reordering as a loss and go back N, so flows crossing the "
            "spines run far below line rate; set nic.spraying: true, or switch.adaptive_routing: flowlet or off",
            tc, c.nic.dscp,
            overridden ? "switch.adaptive_routing: per_packet"
                       : fmt::format("ROUTING.adaptive_routing of switch profile {}", c.sw.name)));
    return out;
}

ConfigResult default_fabric_config() { return parse_fabric_config(default_fabric_yaml(), "default.yaml"); }

// --- Generation -----------------------------------------------------------------

namespace {

std::array<uint8_t, 6> nic_mac(uint32_t id) {
    return {0x02, 0x00, 0x00, static_cast<uint8_t>(id >> 16), static_cast<uint8_t>(id >> 8), static_cast<uint8_t>(id)};
}
std::array<uint8_t, 6> switch_mac(uint32_t sw, uint16_t port) {
    return {0x02,
            0x01,
            static_cast<uint8_t>(sw >> 8),
            static_cast<uint8_t>(sw),
            static_cast<uint8_t>(port >> 8),
            static_cast<uint8_t>(port)};
}
// 10.<subnet hi>.<subnet lo>.<slot + 1>/24: one subnet per host-facing switch.
uint32_t subnet_of(uint32_t subnet) { return (10u << 24) | ((subnet & 0xFFFF) << 8); }

class Builder {
public:
    explicit Builder(const FabricConfig& cfg) { t.cfg = cfg; }
    Topology t;

    uint32_t add_switch(std::string name, Role role, uint32_t index) {
        SwitchSpec s;
        s.name = std::move(name);
        s.role = role;
        s.index = index;
        s.cfg = t.cfg.sw.base;
        s.cfg.ports.clear();
        if (t.cfg.sw.adaptive) {
            s.cfg.routing.adaptive[3] = *t.cfg.sw.adaptive;
            s.cfg.routing.adaptive[4] = *t.cfg.sw.adaptive;
        }
        t.switches.push_back(std::move(s));
        return static_cast<uint32_t>(t.switches.size() - 1);
    }

    uint16_t add_port(uint32_t sw, const LinkClass& cls) {
        SwitchSpec& s = t.switches[sw];
        const auto port = static_cast<uint16_t>(s.cfg.ports.size());
        if (port >= sw::kMaxPorts)
            throw std::invalid_argument(
                fmt::format("{}: switch {} needs more than {} ports", t.cfg.source, s.name, sw::kMaxPorts));
        sw::PortConfig p;
        p.name = fmt::format("Ethernet{}", port * 4);
        p.speed = cls.speed;
        p.mtu = 9216;
        p.propagation_delay = cls.delay;
        s.cfg.ports.push_back(p);
        s.port_mac.push_back(switch_mac(sw, port));
        return port;
    }

    void add_nic(uint32_t host, uint32_t rail, uint32_t sw, uint32_t subnet, uint32_t slot) {
        NicSpec n;
        const auto id = static_cast<uint32_t>(t.nics.size());
        n.name = t.cfg.nics_per_host > 1 ? fmt::format("h{}n{}", host, rail) : fmt::format("h{}", host);
        n.host = host;
        n.rail = rail;
        n.mac = nic_mac(id);
        n.ip = subnet_of(subnet) | (slot + 1);
        n.sw = sw;
        n.sw_port = add_port(sw, t.cfg.host_link);
        LinkSpec l;
        l.name = fmt::format("{}-{}", n.name, t.switches[sw].name);
        l.a = Endpoint{false, id, 0};
        l.b = Endpoint{true, sw, n.sw_port};
        l.cls = t.cfg.host_link;
        t.links.push_back(l);
        t.nics.push_back(std::move(n));
    }

    void cable(uint32_t lower, uint32_t upper) {
        LinkSpec l;
        l.name = fmt::format("{}-{}", t.switches[lower].name, t.switches[upper].name);
        l.a = Endpoint{true, lower, add_port(lower, t.cfg.fabric_link)};
        l.b = Endpoint{true, upper, add_port(upper, t.cfg.fabric_link)};
        l.cls = t.cfg.fabric_link;
        l.fabric = true;
        t.links.push_back(l);
    }
};

}  // namespace

Topology generate(const FabricConfig& cfg) {
    Builder b(cfg);
    Topology& t = b.t;
    std::vector<uint32_t> leaves, spines;
    uint32_t down_per_leaf = 0;
    switch (cfg.shape) {
        case Shape::LeafSpine: {
            for (uint32_t l = 0; l < cfg.leaves; ++l)
                leaves.push_back(b.add_switch(fmt::format("leaf{}", l), Role::Leaf, l));
            for (uint32_t l = 0; l < cfg.leaves; ++l)
                for (uint32_t h = 0; h < cfg.hosts_per_leaf; ++h)
                    b.add_nic(l * cfg.hosts_per_leaf + h, 0, leaves[l], l, h);
            down_per_leaf = cfg.hosts_per_leaf;
            break;
        }
        case Shape::Rail: {
            for (uint32_t l = 0; l < cfg.nics_per_host; ++l)
                leaves.push_back(b.add_switch(fmt::format("leaf{}", l), Role::Leaf, l));
            // Rail-optimised: NIC i of every host on leaf i, so same-rail
            // traffic never leaves its leaf. Otherwise a host's NICs share a
            // leaf and the leaves fill up host by host.
            for (uint32_t h = 0; h < cfg.hosts; ++h)
                for (uint32_t i = 0; i < cfg.nics_per_host; ++i) {
                    const uint32_t k = h * cfg.nics_per_host + i;
                    const uint32_t leaf = cfg.rail_optimised ? i : k / cfg.hosts;
                    const uint32_t slot = cfg.rail_optimised ? h : k % cfg.hosts;
                    b.add_nic(h, i, leaves[leaf], leaf, slot);
                }
            down_per_leaf = cfg.hosts;
            break;
        }
        case Shape::Dumbbell: {
            leaves.push_back(b.add_switch("left", Role::Left, 0));
            leaves.push_back(b.add_switch("right", Role::Right, 0));
            for (uint32_t h = 0; h < cfg.left_hosts; ++h) b.add_nic(h, 0, leaves[0], 0, h);
            for (uint32_t h = 0; h < cfg.right_hosts; ++h) b.add_nic(cfg.left_hosts + h, 0, leaves[1], 1, h);
            b.cable(leaves[0], leaves[1]);
            const double left = cfg.left_hosts * cfg.host_link.speed.as_gbps();
            t.oversubscription = left / cfg.fabric_link.speed.as_gbps();
            return t;
        }
    }
    if (leaves.size() > 1 || cfg.spines > 0) {
        for (uint32_t s = 0; s < cfg.spines; ++s)
            spines.push_back(b.add_switch(fmt::format("spine{}", s), Role::Spine, s));
        for (const uint32_t leaf : leaves)
            for (const uint32_t spine : spines) b.cable(leaf, spine);
    }
    if (!spines.empty())
        t.oversubscription = (down_per_leaf * cfg.host_link.speed.as_gbps()) /
                             (static_cast<double>(spines.size()) * cfg.fabric_link.speed.as_gbps());
    return t;
}

std::array<uint8_t, 6> Topology::peer_mac(uint32_t sw_index, uint16_t port) const {
    for (const LinkSpec& l : links) {
        const Endpoint* far = nullptr;
        if (l.a.is_switch && l.a.index == sw_index && l.a.port == port)
            far = &l.b;
        else if (l.b.is_switch && l.b.index == sw_index && l.b.port == port)
            far = &l.a;
        if (!far) continue;
        return far->is_switch ? switches[far->index].port_mac[far->port] : nics[far->index].mac;
    }
    return {};
}

void Topology::install_routes(uint32_t sw_index, sw::RouteTable& rt) const {
    const SwitchSpec& me = switches[sw_index];
    // Subnets are numbered by the leaf (or dumbbell side) that owns them.
    auto subnet_index = [&](const SwitchSpec& s) { return s.role == Role::Right ? 1u : s.index; };
    if (me.role != Role::Spine) {
        rt.add_connected_v4(subnet_of(subnet_index(me)), 24);
        for (const NicSpec& n : nics)
            if (n.sw == sw_index) rt.learn_host_v4(n.ip, n.sw_port, n.mac);
    }
    // Every switch-to-switch cable out of this switch, by the switch it reaches.
    std::vector<std::pair<uint32_t, uint16_t>> up;  // (far switch, local port)
    for (const LinkSpec& l : links) {
        if (!l.fabric) continue;
        if (l.a.index == sw_index)
            up.emplace_back(l.b.index, l.a.port);
        else if (l.b.index == sw_index)
            up.emplace_back(l.a.index, l.b.port);
    }
    if (up.empty()) return;
    // A spine, or a dumbbell side (whose only neighbour is the other side: a
    // default route each way would send a frame for any other address back
    // and forth until its TTL ran out), routes each far subnet by itself.
    if (me.role == Role::Spine || me.role == Role::Left || me.role == Role::Right) {
        for (const auto& [far, port] : up) {
            const uint32_t nb = rt.add_neighbor(port, peer_mac(sw_index, port));
            rt.add_route_v4(subnet_of(subnet_index(switches[far])), 24, rt.add_group({nb}));
        }
        return;
    }
    std::vector<uint32_t> members;
    for (const auto& [far, port] : up) members.push_back(rt.add_neighbor(port, peer_mac(sw_index, port)));
    rt.add_route_v4(0, 0, rt.add_group(members));
}

std::optional<uint32_t> Topology::find_link(std::string_view name) const {
    for (std::size_t i = 0; i < links.size(); ++i)
        if (links[i].name == name) return static_cast<uint32_t>(i);
    return std::nullopt;
}

int Topology::data_queue() const {
    const sw::SwitchConfig& base = cfg.sw.base;
    return base.tc_to_queue[base.dscp_to_tc[cfg.nic.dscp & 63]];
}

std::string Topology::pcap_link_error(std::string_view name) const {
    if (name.empty() || find_link(name)) return {};
    constexpr std::size_t kShown = 20;
    std::string names;
    for (std::size_t i = 0; i < links.size() && i < kShown; ++i) names += (i ? ", " : "") + links[i].name;
    if (links.size() > kShown) names += fmt::format(", ... ({} links; `rocemu fabric show` lists them)", links.size());
    return fmt::format("--pcap: fabric '{}' has no link '{}'; its links: {}", cfg.name, name, names);
}

std::optional<uint32_t> Topology::find_nic(std::string_view name) const {
    for (std::size_t i = 0; i < nics.size(); ++i)
        if (nics[i].name == name) return static_cast<uint32_t>(i);
    return std::nullopt;
}

std::string Topology::summary() const {
    uint32_t nsw = 0, nsp = 0;
    for (const SwitchSpec& s : switches) (s.role == Role::Spine ? nsp : nsw)++;
    return fmt::format(
        "fabric '{}' ({}): {} NICs, {} leaf/edge switches, {} spines, {} links; host links {} Gbit/s {} ns, "
        "fabric links {} Gbit/s {} ns; oversubscription {:.2f}:1; NIC {} cc {} spraying {} MTU {} "
        "(RDMA {}); switch profile {}",
        cfg.name, shape_name(cfg.shape), nics.size(), nsw, nsp, links.size(), cfg.host_link.speed.as_gbps(),
        cfg.host_link.delay.v, cfg.fabric_link.speed.as_gbps(), cfg.fabric_link.delay.v, oversubscription,
        nic_model_name(cfg.nic.model), cfg.nic.cc_name, cfg.nic.spraying ? "on" : "off", cfg.nic.mtu, cfg.nic.rdma_mtu(), cfg.sw.name);
}

std::string format_drop_counts(const std::vector<DropCount>& drops) {
    std::string list;
    for (const DropCount& d : drops) list += fmt::format("{}{} {}", list.empty() ? "" : ", ", d.cause, d.count);
    return list;
}

}  // namespace rocemu::fabric
