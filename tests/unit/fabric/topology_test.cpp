#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "fabric/topology.hpp"

namespace rocemu::fabric {
namespace {

FabricConfig parse_ok(const std::string& yaml) {
    const ConfigResult r = parse_fabric_config(yaml, "test.yaml");
    EXPECT_TRUE(r.config.has_value()) << r.error;
    return r.config.value_or(FabricConfig{});
}

std::string parse_err(const std::string& yaml) {
    const ConfigResult r = parse_fabric_config(yaml, "bad.yaml");
    EXPECT_FALSE(r.config.has_value());
    return r.error;
}

sw::PacketDesc to(uint32_t ip, uint16_t sport = 0xC000) {
    sw::PacketDesc d;
    d.dst_v4 = ip;
    d.src_port = sport;
    d.dst_port = 4791;
    d.ip_proto = 17;
    return d;
}

TEST(FabricTopology, DefaultFabricParsesAndIsNonBlocking) {
    const ConfigResult r = default_fabric_config();
    ASSERT_TRUE(r.config) << r.error;
    const Topology t = generate(*r.config);
    EXPECT_EQ(t.nics.size(), 8u);
    EXPECT_EQ(t.switches.size(), 6u);  // 2 leaves + 4 spines
    EXPECT_DOUBLE_EQ(t.oversubscription, 1.0);
    for (const SwitchSpec& s : t.switches) EXPECT_EQ(sw::validate(s.cfg), "") << s.name;
}

TEST(FabricTopology, EveryShippedFabricFileLoads) {
    for (const char* f : {"default", "leaf-spine-400g", "rail-optimised", "rail-packed", "incast"}) {
        const ConfigResult r = load_fabric_config(std::string(ROCEMU_SOURCE_DIR) + "/configs/fabrics/" + f + ".yaml");
        ASSERT_TRUE(r.config) << r.error;
        EXPECT_NO_THROW(generate(*r.config)) << f;
        EXPECT_TRUE(config_warnings(*r.config).empty()) << f << ": " << config_warnings(*r.config).front();
    }
}

// rail-optimised.yaml and rail-packed.yaml once took lossless-100g's
// per-packet adaptive routing with non-spraying RC NICs: an all-to-all of
// 1 MiB took 67 ms instead of a few, every reordering NAKed and resent.
TEST(FabricTopology, PerPacketRoutingWithoutSprayingIsWarnedAbout) {
    const std::string base =
        "topology: {kind: leaf_spine, leaves: 2, hosts_per_leaf: 2, spines: 2}\n"
        "switch: {profile: lossless-100g";
    const auto warnings = [&](const std::string& nic, const std::string& sw_extra) {
        return config_warnings(parse_ok(base + sw_extra + "}\nnic: {" + nic + "}\n"));
    };
    const std::vector<std::string> w = warnings("spraying: false", "");
    ASSERT_EQ(w.size(), 1u);
    EXPECT_NE(w[0].find("traffic class 3"), std::string::npos) << w[0];
    EXPECT_NE(w[0].find("switch profile lossless-100g"), std::string::npos) << w[0];
    EXPECT_NE(w[0].find("set nic.spraying: true"), std::string::npos) << w[0];
    EXPECT_TRUE(warnings("spraying: true", "").empty());
    EXPECT_TRUE(warnings("spraying: false", ", adaptive_routing: flowlet").empty());
    EXPECT_TRUE(warnings("spraying: false", ", adaptive_routing: \"off\"").empty());
    EXPECT_TRUE(warnings("spraying: false, model: generator", "").empty());
    // Named as the fabric's own override when it is one.
    const std::vector<std::string> o = config_warnings(parse_ok(
        "topology: {kind: leaf_spine, leaves: 2, hosts_per_leaf: 2, spines: 2}\n"
        "switch: {profile: sonic-default, adaptive_routing: per_packet}\n"));
    ASSERT_EQ(o.size(), 1u);
    EXPECT_NE(o[0].find("switch.adaptive_routing: per_packet"), std::string::npos) << o[0];
    // One spine (or a dumbbell): one path, nothing to reorder.
    EXPECT_TRUE(config_warnings(parse_ok("topology: {kind: leaf_spine, leaves: 2, hosts_per_leaf: 2, spines: 1}\n"
                                         "switch: {profile: lossless-100g}\n"))
                    .empty());
}

TEST(FabricTopology, AddressesAndMacsAreUnique) {
    const Topology t = generate(parse_ok("topology: {kind: leaf_spine, leaves: 8, hosts_per_leaf: 32, spines: 16}"));
    ASSERT_EQ(t.nics.size(), 256u);
    std::set<uint32_t> ips;
    std::set<std::array<uint8_t, 6>> macs;
    for (const NicSpec& n : t.nics) {
        ips.insert(n.ip);
        macs.insert(n.mac);
    }
    for (const SwitchSpec& s : t.switches)
        for (const auto& m : s.port_mac) macs.insert(m);
    EXPECT_EQ(ips.size(), t.nics.size());
    std::size_t ports = 0;
    for (const SwitchSpec& s : t.switches) ports += s.cfg.ports.size();
    EXPECT_EQ(macs.size(), t.nics.size() + ports);
    // Each cable uses two ports, each port exactly one cable.
    EXPECT_EQ(ports + t.nics.size(), 2 * t.links.size());
}

TEST(FabricTopology, OversubscriptionFollowsPortCounts) {
    const Topology t =
        generate(parse_ok("topology: {kind: leaf_spine, leaves: 4, hosts_per_leaf: 8, spines: 2}\n"
                          "links: {host: {speed_gbps: 100}, fabric: {speed_gbps: 200}}"));
    EXPECT_DOUBLE_EQ(t.oversubscription, 2.0);  // 800 down / 400 up
}

TEST(FabricTopology, LeafRoutesLocalHostsDirectlyAndEcmpsTheRestOverAllSpines) {
    const Topology t = generate(parse_ok("topology: {kind: leaf_spine, leaves: 2, hosts_per_leaf: 3, spines: 4}"));
    sw::RouteTable rt;
    t.install_routes(0, rt);
    const NicSpec& local = t.nics[1];
    const auto g = rt.lookup(to(local.ip));
    ASSERT_TRUE(g && *g != sw::RouteTable::kUnresolved);
    ASSERT_EQ(rt.group(*g).size(), 1u);
    EXPECT_EQ(rt.neighbor(rt.group(*g)[0]).port, local.sw_port);
    EXPECT_EQ(rt.neighbor(rt.group(*g)[0]).mac, local.mac);

    const NicSpec& remote = t.nics[4];
    const auto gr = rt.lookup(to(remote.ip));
    ASSERT_TRUE(gr);
    std::set<uint16_t> ports;
    for (uint32_t nb : rt.group(*gr)) ports.insert(rt.neighbor(nb).port);
    EXPECT_EQ(ports.size(), 4u);
}

TEST(FabricTopology, SpineRoutesEachSubnetToItsLeaf) {
    const Topology t = generate(parse_ok("topology: {kind: leaf_spine, leaves: 3, hosts_per_leaf: 2, spines: 2}"));
    const uint32_t spine = 3;
    ASSERT_EQ(t.switches[spine].role, Role::Spine);
    sw::RouteTable rt;
    t.install_routes(spine, rt);
    for (const NicSpec& n : t.nics) {
        const auto g = rt.lookup(to(n.ip));
        ASSERT_TRUE(g && *g != sw::RouteTable::kUnresolved) << format_ipv4(n.ip);
        const sw::Neighbor& nb = rt.neighbor(rt.group(*g)[0]);
        // The neighbor's MAC belongs to the NIC's leaf.
        bool on_leaf = false;
        for (const auto& m : t.switches[n.sw].port_mac) on_leaf |= m == nb.mac;
        EXPECT_TRUE(on_leaf) << n.name;
    }
}

TEST(FabricTopology, RailOptimisedPutsNicIOnLeafI) {
    const Topology opt =
        generate(parse_ok("topology: {kind: rail, hosts: 4, nics_per_host: 4, spines: 2, rail_optimised: true}"));
    for (const NicSpec& n : opt.nics) EXPECT_EQ(opt.switches[n.sw].index, n.rail) << n.name;
    const Topology packed =
        generate(parse_ok("topology: {kind: rail, hosts: 4, nics_per_host: 4, spines: 2, rail_optimised: false}"));
    for (const NicSpec& n : packed.nics) EXPECT_EQ(packed.switches[n.sw].index, n.host) << n.name;
    EXPECT_EQ(opt.links.size(), packed.links.size());
}

TEST(FabricTopology, DumbbellHasOneBottleneck) {
    const Topology t = generate(parse_ok("topology: {kind: dumbbell, left_hosts: 6, right_hosts: 2}"));
    ASSERT_EQ(t.switches.size(), 2u);
    int fabric = 0;
    for (const LinkSpec& l : t.links) fabric += l.fabric;
    EXPECT_EQ(fabric, 1);
    EXPECT_DOUBLE_EQ(t.oversubscription, 6.0);
    sw::RouteTable rt;
    t.install_routes(0, rt);
    const auto g = rt.lookup(to(t.nics[7].ip));
    ASSERT_TRUE(g);
    const sw::Neighbor& nb = rt.neighbor(rt.group(*g)[0]);
    EXPECT_EQ(nb.port, 6);                         // after the six host ports
    EXPECT_EQ(nb.mac, t.switches[1].port_mac[2]);  // after the right side's two host ports
}

TEST(FabricTopology, PcapLinkErrorNamesTheFabricTheLinkAndWhatItCouldBe) {
    const Topology small = generate(parse_ok("topology: {kind: dumbbell, left_hosts: 2, right_hosts: 1}"));
    for (const LinkSpec& l : small.links) EXPECT_EQ(small.pcap_link_error(l.name), "") << l.name;
    EXPECT_EQ(small.pcap_link_error(""), "");  // no capture asked for
    const std::string e = small.pcap_link_error("h0-spine9");
    EXPECT_NE(e.find("no link 'h0-spine9'"), std::string::npos) << e;
    for (const LinkSpec& l : small.links) EXPECT_NE(e.find(l.name), std::string::npos) << e;  // all 4 listed
    EXPECT_EQ(e.find("..."), std::string::npos) << e;
    // A large fabric lists the first few and says how many there are.
    const Topology big = generate(parse_ok("topology: {kind: leaf_spine, leaves: 8, hosts_per_leaf: 16, spines: 4}"));
    const std::string b = big.pcap_link_error("nope");
    EXPECT_NE(b.find(big.links.front().name), std::string::npos) << b;
    EXPECT_EQ(b.find(big.links.back().name), std::string::npos) << b;
    EXPECT_NE(b.find(fmt::format("({} links;", big.links.size())), std::string::npos) << b;
}

TEST(FabricTopology, NicModelDefaultsToRc) {
    EXPECT_EQ(parse_ok("topology: {kind: incast}").nic.model, NicModel::Rc);
    EXPECT_EQ(parse_ok("topology: {kind: incast}\nnic: {model: generator}").nic.model, NicModel::Generator);
    EXPECT_EQ(parse_ok("topology: {kind: incast}\nnic: {model: rc}").nic.model, NicModel::Rc);
}

TEST(FabricTopology, NicProfileCarriesCcSprayingAndMtu) {
    const FabricConfig c = parse_ok(
        "topology: {kind: leaf_spine, leaves: 1, hosts_per_leaf: 2, spines: 0}\n"
        "nic: {cc: aggressive, spraying: true, mtu: 1500}");
    EXPECT_TRUE(c.nic.spraying);
    EXPECT_EQ(c.nic.rdma_mtu(), 1024u);
    EXPECT_EQ(c.nic.cc.dcqcn.rpg_time_reset, Nanos::from_us(75));
    EXPECT_EQ(parse_ok("topology: {kind: incast}\nnic: {mtu: 9000}").nic.rdma_mtu(), 4096u);
    EXPECT_EQ(parse_ok("topology: {kind: incast}\nnic: {cc: none}").nic.cc.algorithm, cc::CcAlgorithm::kNone);
}

TEST(FabricTopology, SwitchProfileAndAdaptiveOverrideApplyToEverySwitch) {
    const Topology t =
        generate(parse_ok("topology: {kind: leaf_spine, leaves: 2, hosts_per_leaf: 2, spines: 2}\n"
                          "switch: {profile: lossless-100g, adaptive_routing: per_packet}"));
    for (const SwitchSpec& s : t.switches) {
        EXPECT_EQ(s.cfg.routing.adaptive[3], sw::ArMode::PerPacket);
        EXPECT_EQ(s.cfg.pfc_enable, 1u << 3);  // from the profile
    }
}

// Found by fuzz_config: yaml-cpp threw out of the parser for a node of the
// wrong shape, and std::filesystem for a profile name too long for a path.
TEST(FabricTopology, MisshapenYamlAndOverlongNamesAreErrorsNotExceptions) {
    const std::string long_name(5000, 'a');
    const std::string cases[] = {
        "topology: {kind: incast}\nswitch: a scalar",  // switch.profile read from a scalar
        "{[a]: 1}",                                      // a list as a key
        "topology: {kind: incast}\nnic: {cc: " + long_name + "}",
        "topology: {kind: incast}\nswitch: {profile: " + long_name + "}",
    };
    for (const std::string& yaml : cases) {
        ConfigResult r;
        ASSERT_NO_THROW(r = parse_fabric_config(yaml, "bad.yaml")) << yaml.substr(0, 60);
        EXPECT_FALSE(r.config.has_value());
        EXPECT_EQ(r.error.rfind("bad.yaml: ", 0), 0u) << r.error;
    }
}

TEST(FabricTopology, ErrorsNameFileKeyAndProblem) {
    EXPECT_EQ(parse_err("topology: {kind: leaf_spine, leaves: 0}"),
              "bad.yaml: topology.leaves: 0 out of range [1, 256]");
    EXPECT_EQ(parse_err("topology: {kind: ring}"),
              "bad.yaml: topology.kind: 'ring' is not one of leaf_spine, rail, dumbbell, incast");
    EXPECT_NE(parse_err("topology: {kind: incast}\nlinks: {host: {speed_gbps: 1000}}")
                  .find("links.host.speed_gbps: 1000 out of range"),
              std::string::npos);
    EXPECT_NE(parse_err("topology: {kind: incast}\nnic: {cc: warp}").find("bad.yaml: nic.cc: 'warp'"),
              std::string::npos);
    EXPECT_EQ(parse_err("topology: {kind: incast}\nnic: {model: ud}"),
              "bad.yaml: nic.model: 'ud' is not one of rc, generator");
    EXPECT_NE(parse_err("topology: {kind: incast}\nswitch: {profile: nope}").find("bad.yaml: switch.profile:"),
              std::string::npos);
    EXPECT_NE(parse_err("topology: {kind: incast, colour: red}").find("bad.yaml: topology.colour: unknown key"),
              std::string::npos);
    EXPECT_NE(parse_err("topology: {kind: leaf_spine, leaves: 2, spines: 0}").find("topology.spines"),
              std::string::npos);
    EXPECT_NE(parse_err("topology: {kind: leaf_spine, hosts_per_leaf: 60, spines: 8}").find("exceed the switch"),
              std::string::npos);
    EXPECT_NE(parse_err("topology: {kind: incast}\nnic: {spraying: maybe}")
                  .find("nic.spraying: 'maybe' must be true or false"),
              std::string::npos);
    EXPECT_EQ(load_fabric_config("/nonexistent.yaml").error, "/nonexistent.yaml: cannot read the file");
    // A file that never ends is an error, not a loader reading forever.
    EXPECT_EQ(load_fabric_config("/dev/zero").error, "/dev/zero: larger than 16 MiB, not a fabric config");
}

// What yaml-cpp would let pass, or report in its own words, until 7
// December: a scalar where a mapping belongs ("operator[] call on a
// scalar"), a list as a key, a key given twice (the first won silently), a
// key of another topology kind (ignored), a list or nothing where a number
// belongs (''), a folder as a file (an empty config, or the NIC profile's
// defaults).
TEST(FabricTopology, WhatYamlWouldLetPassIsAnErrorNamingTheKey) {
    EXPECT_EQ(parse_err("topology: 5"), "bad.yaml: topology: must be a mapping");
    EXPECT_EQ(parse_err("topology: {kind: incast}\nlinks: 5"), "bad.yaml: links: must be a mapping");
    EXPECT_EQ(parse_err("topology: {kind: incast}\nlinks: {host: 5}"), "bad.yaml: links.host: must be a mapping");
    EXPECT_EQ(parse_err("? [a, b]\n: 1\ntopology: {kind: incast}"),
              "bad.yaml: (top level): a key must be a name, not a list or a mapping");
    EXPECT_EQ(parse_err("topology: {kind: leaf_spine, leaves: 2, leaves: 3, spines: 2}"),
              "bad.yaml: topology.leaves: given twice");
    EXPECT_EQ(parse_err("name: x\nname: y\ntopology: {kind: incast}"), "bad.yaml: name: given twice");
    EXPECT_EQ(parse_err("topology: {kind: leaf_spine, hosts: 4, spines: 2}"),
              "bad.yaml: topology.hosts: not a key of kind leaf_spine (its keys: kind, leaves, hosts_per_leaf, spines)");
    EXPECT_EQ(parse_err("topology: {kind: incast, spines: 4}"),
              "bad.yaml: topology.spines: not a key of kind incast (its keys: kind, left_hosts, right_hosts)");
    EXPECT_EQ(parse_err("topology: {kind: leaf_spine, leaves: [1], spines: 2}"),
              "bad.yaml: topology.leaves: must be a non-negative integer, not a list or a mapping");
    EXPECT_EQ(parse_err("topology: {kind: leaf_spine, leaves: ~, spines: 2}"),
              "bad.yaml: topology.leaves: has no value: give a non-negative integer");
    EXPECT_EQ(parse_err("topology: {kind: incast}\nnic: {spraying: [true]}"),
              "bad.yaml: nic.spraying: must be true or false, not a list, a mapping or nothing");
    // A binary file: a NUL is named, and a value's bytes are shown escaped.
    EXPECT_EQ(parse_err(std::string("topology: {kind: incast}\n\0more", 30)),
              "bad.yaml: byte 26 is a NUL: not a text file (YAML)");
    EXPECT_EQ(parse_err("topology: {kind: \"r\x87\x1b[2Jng\"}"),
              "bad.yaml: topology.kind: 'r\\x87\\x1b[2Jng' is not one of leaf_spine, rail, dumbbell, incast");
    EXPECT_EQ(parse_err("name: fabric-\xc3\xbc\ntopology: {kind: ring}"),
              "bad.yaml: topology.kind: 'ring' is not one of leaf_spine, rail, dumbbell, incast");
    const std::string dir = ::testing::TempDir();
    EXPECT_EQ(load_fabric_config(dir).error, dir + ": a folder, not a file");
    EXPECT_NE(parse_err("topology: {kind: incast}\nnic: {cc: " + dir + "}").find("a folder, not a file"),
              std::string::npos);
}

}  // namespace
}  // namespace rocemu::fabric
