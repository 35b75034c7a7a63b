// What the processes of a split live fabric agree on from the topology
// alone: node names, memif roles and sockets, device overrides, ethdev
// budgets, and the counter snapshots they exchange. No DPDK ports needed.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <stdexcept>

#include <sys/stat.h>
#include <unistd.h>

#include "dataplane/pcap/pcap.hpp"
#include "fabric/embedded.hpp"
#include "fabric/live/live.hpp"
#include "fabric/live/node.hpp"
#include "fabric/live/split.hpp"

namespace rocemu::fabric::live {
namespace {

Topology embedded(std::string_view name) {
    for (std::size_t i = 0; i < detail::kEmbeddedFabricCount; ++i)
        if (detail::kEmbeddedFabrics[i].name == name) {
            const ConfigResult r = parse_fabric_config(detail::kEmbeddedFabrics[i].yaml, std::string(name));
            EXPECT_TRUE(r.config) << r.error;
            return generate(*r.config);
        }
    ADD_FAILURE() << "no embedded fabric " << name;
    return {};
}

TEST(FabricLiveSplit, NodesAreTheHostsThenEverySwitch) {
    const Topology t = embedded("default");
    const std::vector<std::string> n = node_names(t);
    ASSERT_EQ(n.size(), 1 + t.switches.size());
    EXPECT_EQ(n[0], "hosts");
    for (size_t i = 0; i < t.switches.size(); ++i) EXPECT_EQ(n[i + 1], t.switches[i].name);
}

TEST(FabricLiveSplit, ASwitchNamedHostsIsRefused) {
    Topology t = embedded("incast");
    t.switches[0].name = "hosts";
    EXPECT_THROW(node_names(t), std::invalid_argument);
}

TEST(FabricLiveSplit, EveryCableHasOneServerEndAndOneClientEndOnOneSocket) {
    const Topology t = embedded("default");
    std::map<uint32_t, std::vector<CableEnd>> by_link;
    for (const std::string& n : node_names(t))
        for (CableEnd& e : cable_ends(t, n, "/tmp/fab"))
            by_link[e.link].push_back(std::move(e));
    ASSERT_EQ(by_link.size(), t.links.size());
    for (const auto& [l, ends] : by_link) {
        ASSERT_EQ(ends.size(), 2u) << t.links[l].name;
        EXPECT_NE(ends[0].server, ends[1].server) << t.links[l].name;
        const std::string sock = "socket=/tmp/fab/" + t.links[l].name + ".sock,";
        const std::string rsize =
            ",rsize=" + std::to_string(t.links[l].fabric ? kMemifLog2Ring : kMemifLog2NicRing) + ",";
        for (const CableEnd& e : ends) {
            EXPECT_NE(e.devspec.find(sock), std::string::npos) << e.devspec;
            EXPECT_NE(e.devspec.find(rsize), std::string::npos) << e.devspec;
            EXPECT_EQ(is_memif_client(e), !e.server) << e.devspec;
            EXPECT_NE(e.devspec.find(e.server ? "role=server" : "role=client"), std::string::npos) << e.devspec;
        }
    }
}

TEST(FabricLiveSplit, TheLowerNodeNameIsTheServer) {
    const Topology t = embedded("default");
    for (const CableEnd& e : cable_ends(t, "leaf0", "/d")) {
        // "hosts" < "leaf0" < "spine*"
        EXPECT_EQ(e.server, e.peer_node != "hosts") << t.links[e.link].name;
        EXPECT_EQ(e.server, std::string("leaf0") < e.peer_node);
    }
}

TEST(FabricLiveSplit, VdevNamesAreUniqueWithinANodeAndCarryTheEndsMac) {
    const Topology t = embedded("default");
    const std::vector<CableEnd> ends = cable_ends(t, "hosts", "/d");
    ASSERT_EQ(ends.size(), t.nics.size());
    std::set<std::string> names;
    for (size_t i = 0; i < ends.size(); ++i) {
        const std::string& d = ends[i].devspec;
        names.insert(d.substr(0, d.find(',')));
        EXPECT_EQ(d.rfind("net_memif" + std::to_string(i) + ",", 0), 0u) << d;
        const auto& m = t.nics[ends[i].end.index].mac;
        char mac[18];
        std::snprintf(mac, sizeof mac, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
        EXPECT_NE(d.find(std::string("mac=") + mac), std::string::npos) << d;
        EXPECT_FALSE(ends[i].end.is_switch);
    }
    EXPECT_EQ(names.size(), ends.size());
}

TEST(FabricLiveSplit, NodeViewsAreDeterministic) {
    const Topology t = embedded("default");
    const std::vector<CableEnd> a = cable_ends(t, "spine2", "/d"), b = cable_ends(t, "spine2", "/d");
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].devspec, b[i].devspec);
}

TEST(FabricLiveSplit, AnOverrideReplacesOneEndOnly) {
    const Topology t = embedded("default");
    const std::string cable = t.links[0].name;
    const auto o = parse_port_overrides(t, {cable + "=net_af_packet0,iface=veth0"});
    ASSERT_EQ(o.size(), 1u);
    const std::string a = node_of(t, t.links[0].a), b = node_of(t, t.links[0].b);
    const std::vector<CableEnd> mine = cable_ends(t, a, "/d", o);
    EXPECT_EQ(mine.front().devspec, "net_af_packet0,iface=veth0");
    EXPECT_NE(cable_ends(t, b, "/d").front().devspec.find("net_memif"), std::string::npos);
}

TEST(FabricLiveSplit, BadOverridesAreRefusedWithTheValue) {
    const Topology t = embedded("default");
    try {
        parse_port_overrides(t, {"nocable=net_memif0"});
        FAIL();
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("no cable 'nocable'"), std::string::npos) << e.what();
    }
    EXPECT_THROW(parse_port_overrides(t, {"leaf0-spine0"}), std::invalid_argument);
    // A cable of another node.
    std::string foreign;
    for (const LinkSpec& l : t.links)
        if (l.fabric && node_of(t, l.a) != "leaf0" && node_of(t, l.b) != "leaf0") foreign = l.name;
    ASSERT_FALSE(foreign.empty());
    EXPECT_THROW(cable_ends(t, "leaf0", "/d", parse_port_overrides(t, {foreign + "=x"})), std::invalid_argument);
    EXPECT_THROW(cable_ends(t, "nosuchnode", "/d"), std::invalid_argument);
}

TEST(FabricLiveSplit, EthdevBudgets) {
    const Topology d = embedded("default");
    EXPECT_EQ(ethdevs_needed(d, "hosts"), 8u);
    EXPECT_EQ(ethdevs_needed(d, "leaf0"), 4u * 2 + 4);  // 4 NIC cables (memif + net_ring), 4 uplinks
    EXPECT_EQ(ethdevs_needed(d, "spine0"), 2u);
    // rail-optimised: 40 links, too many for one process (2 ports a link), but
    // every node of the split fits 32 ethdevs.
    const Topology r = embedded("rail-optimised");
    ASSERT_EQ(r.links.size(), 40u);
    EXPECT_EQ(ethdevs_needed(r, "hosts"), 32u);
    for (const std::string& n : node_names(r)) EXPECT_LE(ethdevs_needed(r, n), 32u) << n;
}

TEST(FabricLiveSplit, SnapshotsRoundTripAndTruncatedOnesAreRejected) {
    SwitchSnapshot s;
    s.at_ns = 123456789012;
    s.realtime_ns = 1796000000123456789;
    s.node = "leaf0";
    s.fabric = "default topology 0123456789abcdef scale 4 seed 1";
    s.ready = true;
    s.rows = {"leaf0,Ethernet0,tx_pfc_frames,7", "leaf0,Ethernet4,drop_ttl_expired,2"};
    const std::string text = format_snapshot(s);
    const auto back = parse_snapshot(text);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->at_ns, s.at_ns);
    EXPECT_EQ(back->realtime_ns, s.realtime_ns);
    EXPECT_EQ(back->node, s.node);
    EXPECT_EQ(back->fabric, s.fabric);
    EXPECT_TRUE(back->ready);
    EXPECT_EQ(back->rows, s.rows);
    s.ready = false;
    EXPECT_FALSE(parse_snapshot(format_snapshot(s))->ready);
    EXPECT_FALSE(parse_snapshot(text.substr(0, text.size() - 1)));
    // Cut at any line boundary (the end line or rows missing), or with a
    // row count that does not match, or with more after the end: refused.
    for (size_t cut = text.find('\n'); cut + 1 < text.size(); cut = text.find('\n', cut + 1))
        EXPECT_FALSE(parse_snapshot(text.substr(0, cut + 1))) << "cut after byte " << cut;
    const std::string no_row = text.substr(0, text.find("leaf0,Ethernet4"));
    EXPECT_FALSE(parse_snapshot(no_row + "# end 2\n"));
    const auto one = parse_snapshot(no_row + "# end 1\n");
    ASSERT_TRUE(one);
    EXPECT_EQ(one->rows.size(), 1u);
    EXPECT_FALSE(parse_snapshot(text + "leaf0,Ethernet8,ecn_marks,1\n"));
    EXPECT_FALSE(parse_snapshot("leaf0,Ethernet0,ecn_marks,1\n"));
    EXPECT_FALSE(parse_snapshot("# at_ns x\n"));
}

TEST(FabricLiveSplit, RowsSumAsTheOneProcessTotals) {
    const SwitchRowTotals t = sum_rows({"leaf0,Ethernet0,tx_pfc_frames,7", "leaf1,Ethernet0,tx_pfc_frames,3",
                                        "spine0,Ethernet0,ecn_marks,5", "leaf0,Ethernet4,drop_ttl_expired,2",
                                        "leaf0,Ethernet4,drop_link_loss,1", "leaf0,Ethernet4,lossless_drops,4",
                                        "leaf0,Ethernet4,rx_frames,1000"});
    EXPECT_EQ(t.pfc_frames, 10u);
    EXPECT_EQ(t.ecn_marks, 5u);
    EXPECT_EQ(t.drops, 3u);
    EXPECT_EQ(t.lossless_drops, 4u);
}

TEST(FabricLiveSplit, DropsBetweenSnapshotsNameWhereAndWhy) {
    const std::vector<std::string> before{"left,Ethernet0,drop_not_ip,2", "left,Ethernet0,rx_frames,10",
                                          "right,Ethernet4,drop_egress_queue_limit,5"};
    const std::vector<std::string> after{"left,Ethernet0,drop_not_ip,3", "left,Ethernet0,rx_frames,90",
                                         "right,Ethernet4,drop_egress_queue_limit,5",
                                         "right,Ethernet8,drop_no_route,4"};
    EXPECT_EQ(drops_between("switch", before, after),
              (std::vector<DropCount>{{"switch left:Ethernet0 not_ip", 1}, {"switch right:Ethernet8 no_route", 4}}));
    // NIC rows: ignored responses are not drops; a counter that fell (a
    // restarted node) is not a drop either.
    EXPECT_EQ(drops_between("nic", {"h0,drop_rnr,9"},
                            {"h0,drop_stale_response,7", "h0,drop_ghost_response,1", "h1,drop_bad_icrc,2", "h0,drop_rnr,3"}),
              (std::vector<DropCount>{{"nic h1 bad_icrc", 2}}));
    EXPECT_TRUE(drops_between("switch", after, after).empty());
    EXPECT_TRUE(drops_between("switch", {}, {"bad row", "x,drop_y,", "x,drop_y,z"}).empty());
}

TEST(FabricLiveSplit, HeadroomCoversAMemifRingAndTheRuntimesTxBuffer) {
    EXPECT_EQ(split_headroom_frames(), kLiveHeadroomFrames + (1u << kMemifLog2Ring) + 64);
    const Topology t = embedded("default");
    const Topology s = scale_topology(t, 200, split_headroom_frames());
    EXPECT_EQ(s.switches[0].cfg.pg_lossless.xoff.v, uint64_t{t.cfg.nic.mtu + 18u} * split_headroom_frames());
}

}  // namespace
}  // namespace rocemu::fabric::live

namespace rocemu::fabric::live {
namespace {

TEST(FabricLiveSplit, TheFabricIdentityChangesWithTheTopologyTheScaleAndTheSeed) {
    const Topology t = embedded("incast");
    const std::string id = fabric_identity(t, 225, 1);
    EXPECT_EQ(id.rfind("incast topology ", 0), 0u) << id;
    EXPECT_NE(id.find(" scale 225 seed 1"), std::string::npos) << id;
    EXPECT_EQ(fabric_identity(embedded("incast"), 225, 1), id);
    EXPECT_NE(fabric_identity(t, 100, 1), id);
    EXPECT_NE(fabric_identity(t, 225, 2), id);
    Topology slower = t;
    slower.links.back().cls.speed = BitsPerSec::gbps(40);
    EXPECT_NE(fabric_identity(slower, 225, 1), id);
    Topology renamed = t;
    renamed.switches[0].cfg.ports[0].name = "Ethernet99";
    EXPECT_NE(fabric_identity(renamed, 225, 1), id);
}

// A switch node started with another QoS or buffer profile, or a hosts node
// with another NIC MTU or DSCP, runs another fabric on the same cables: each
// setting the switch nodes use changes the identity, so the hosts node
// refuses it. The NIC settings only the hosts node uses do not.
TEST(FabricLiveSplit, TheFabricIdentityCoversWhatSwitchNodesUseAndNotTheNicModelOrCc) {
    const Topology t = embedded("incast");
    const std::string id = fabric_identity(t, 225, 1);
    const auto differs = [&](const char* what, const std::function<void(Topology&)>& change) {
        Topology o = t;
        change(o);
        EXPECT_NE(fabric_identity(o, 225, 1), id) << what;
    };
    differs("xoff", [](Topology& o) { o.switches[1].cfg.pg_lossless.xoff = Bytes{o.switches[1].cfg.pg_lossless.xoff.v + 1}; });
    differs("xon", [](Topology& o) { o.switches[0].cfg.pg_lossless.xon = Bytes{1}; });
    differs("alpha", [](Topology& o) { o.switches[0].cfg.pg_lossless.th.dynamic_th += 1; });
    differs("pool", [](Topology& o) { o.switches[0].cfg.pool_size = Bytes{1 << 20}; });
    differs("kmin", [](Topology& o) { o.switches[0].cfg.wred[3].green_min_threshold = Bytes{12345}; });
    differs("pfc_enable", [](Topology& o) { o.switches[0].cfg.pfc_enable ^= 1; });
    differs("dscp map", [](Topology& o) { o.switches[0].cfg.dscp_to_tc[3] = 1; });
    differs("dwrr", [](Topology& o) { o.switches[0].cfg.scheduler[3].weight += 1; });
    differs("watchdog", [](Topology& o) { o.switches[0].cfg.pfc_wd.enabled = !o.switches[0].cfg.pfc_wd.enabled; });
    differs("flowlet", [](Topology& o) { o.switches[0].cfg.routing.flowlet_gap = Nanos{1}; });
    differs("pause quanta", [](Topology& o) { o.switches[0].cfg.pause_quanta = 100; });
    differs("nic mtu", [](Topology& o) { o.cfg.nic.mtu = 1500; });
    differs("nic dscp", [](Topology& o) { o.cfg.nic.dscp = 4; });
    Topology hosts_only = t;
    hosts_only.cfg.nic.model = t.cfg.nic.model == NicModel::Rc ? NicModel::Generator : NicModel::Rc;
    hosts_only.cfg.nic.spraying = !t.cfg.nic.spraying;
    hosts_only.cfg.nic.cc.algorithm = cc::CcAlgorithm::kNone;
    hosts_only.cfg.nic.cc.dcqcn.rpg_ai_rate = BitsPerSec::mbps(6);
    hosts_only.cfg.nic.cc.dcqcn.min_time_between_cnps = Nanos{3000};
    EXPECT_EQ(fabric_identity(hosts_only, 225, 1), id);
}

TEST(FabricLiveSplit, MachinesPlaceEveryNodeOnce) {
    const Topology t = embedded("incast");  // hosts, left, right
    const auto on = parse_machines(t, {"a=left,right", "b=hosts"});
    EXPECT_EQ(on.at("left"), "a");
    EXPECT_EQ(on.at("right"), "a");
    EXPECT_EQ(on.at("hosts"), "b");
    EXPECT_EQ(nodes_elsewhere(on, "hosts"), (std::vector<std::string>{"left", "right"}));
    EXPECT_EQ(nodes_elsewhere(on, "left"), (std::vector<std::string>{"hosts"}));
    EXPECT_TRUE(parse_machines(t, {}).empty());
    EXPECT_TRUE(nodes_elsewhere({}, "hosts").empty());
    EXPECT_THROW(parse_machines(t, {"a=left", "b=hosts"}), std::invalid_argument);           // right on none
    EXPECT_THROW(parse_machines(t, {"a=left,right", "b=hosts,left"}), std::invalid_argument);  // left twice
    EXPECT_THROW(parse_machines(t, {"a=left,right,spine9", "b=hosts"}), std::invalid_argument);
    EXPECT_THROW(parse_machines(t, {"left,right,hosts"}), std::invalid_argument);
}

TEST(FabricLiveSplit, ACableToAnotherMachineNeedsAPortOverride) {
    const Topology t = embedded("incast");
    const auto on = parse_machines(t, {"a=left", "b=hosts,right"});
    // Every NIC cable of left joins it to hosts on machine b; left-right joins it to right there too.
    const auto left_why = cables_without_port(t, "left", nodes_elsewhere(on, "left"), {});
    EXPECT_EQ(left_why.size(), 9u);  // 8 NIC cables and left-right
    ASSERT_FALSE(left_why.empty());
    EXPECT_NE(left_why[0].find("cable h0-left joins left to hosts, which runs on another machine: give left --port "
                               "h0-left=DEVSPEC"),
              std::string::npos)
        << left_why[0];
    // right's only remote peer is left; its NIC cable stays on machine b.
    const auto right_why = cables_without_port(t, "right", nodes_elsewhere(on, "right"), {});
    ASSERT_EQ(right_why.size(), 1u);
    EXPECT_NE(right_why[0].find("cable left-right"), std::string::npos) << right_why[0];
    EXPECT_TRUE(cables_without_port(t, "right", nodes_elsewhere(on, "right"),
                                    parse_port_overrides(t, {"left-right=net_af_packet0,iface=eth1"}))
                    .empty());
    EXPECT_TRUE(cables_without_port(t, "left", {}, {}).empty());
}

TEST(FabricLiveSplit, PciAddressesAreTheFormsTheEalTakes) {
    for (const char* v : {"0000:3b:00.0", "3b:00.1", "0:00:04.0", "10000:ff:1f.7", "0000:AF:00.3"})
        EXPECT_TRUE(is_pci_address(v)) << v;
    for (const char* v : {"eth1", "3b:00", "3b:00.8", "0000:3b:0.0", "0000:3b:00.00", "000000000:3b:00.0",
                          "x000:3b:00.0", ":3b:00.0", "0000:3b:00.", "enp59s0f0", ""})
        EXPECT_FALSE(is_pci_address(v)) << v;
}

// `fabric plan --device`: an interface or a PCI NIC for one machine's end of
// a cable between two machines; everything else refused, naming the value.
TEST(FabricLiveSplit, PlanDevicesAreEndsOfCablesBetweenMachines) {
    const Topology t = embedded("incast");  // hosts, left, right; left-right between the switches
    const auto on = parse_machines(t, {"a=left,right", "b=hosts"});
    const auto d = parse_plan_devices(t, on, {"h0-left@a=eth1", "h0-left@b=0000:3b:00.0", "h1-left@b=enp59s0f1"});
    ASSERT_EQ(d.size(), 3u);
    EXPECT_EQ(d.at({"h0-left", "a"}).iface, "eth1");
    EXPECT_EQ(d.at({"h0-left", "a"}).pci, "");
    EXPECT_EQ(d.at({"h0-left", "b"}).pci, "0000:3b:00.0");
    EXPECT_EQ(d.at({"h0-left", "b"}).iface, "");
    EXPECT_EQ(d.at({"h1-left", "b"}).iface, "enp59s0f1");
    EXPECT_TRUE(parse_plan_devices(t, on, {}).empty());
    const auto refused = [&](std::vector<std::string> v, const std::string& why) {
        try {
            parse_plan_devices(t, on, v);
            ADD_FAILURE() << v.back() << " was taken";
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("--device '" + v.back() + "'"), std::string::npos) << e.what();
        }
    };
    refused({"h0-left=eth1"}, "expected CABLE@MACHINE=DEVICE");
    refused({"@a=eth1"}, "expected CABLE@MACHINE=DEVICE");
    refused({"h0-left@=eth1"}, "expected CABLE@MACHINE=DEVICE");
    refused({"h0-left@a="}, "expected CABLE@MACHINE=DEVICE");
    refused({"left-right@a=eth1"}, "cable left-right does not join two machines (cables between two machines: h0-left");
    refused({"h99-left@a=eth1"}, "has no cable 'h99-left'");
    refused({"h0-left@c=eth1"}, "joins machines");
    refused({"h0-left@a=eth/1"}, "neither a PCI address nor an interface name");
    refused({"h0-left@a=a-name-of-16-chars"}, "neither a PCI address nor an interface name");
    refused({"h0-left@a=eth1", "h0-left@a=eth2"}, "a's end of h0-left is given twice");
    refused({"h0-left@b=0000:3b:00.0", "h1-left@b=0000:3b:00.0"}, "0000:3b:00.0 already carries h0-left on machine b");
    // The same interface name on two machines is two devices.
    EXPECT_EQ(parse_plan_devices(t, on, {"h0-left@a=eth1", "h0-left@b=eth1"}).size(), 2u);
    // With left and right on machines of their own, left-right is between two machines.
    const auto on3 = parse_machines(t, {"a=left", "c=right", "b=hosts"});
    EXPECT_EQ(parse_plan_devices(t, on3, {"left-right@c=0000:00:06.0"}).at({"left-right", "c"}).pci, "0000:00:06.0");
}

// The hosts node gives up while a switch node still runs: the launcher
// stops the switch, and the error is the hosts node's, not the stopped one's.
TEST(FabricLiveSplit, LauncherReportsTheHostsNodeThatGaveUpNotTheNodesItStopped) {
    const std::vector<NodeCommand> nodes{{"hosts", {"/bin/sh", "-c", "exit 3"}, ""},
                                         {"leaf0", {"/bin/sh", "-c", "exec sleep 60"}, ""}};
    const LaunchResult r = launch_nodes(nodes, 30);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.error.find("node hosts"), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("exited with status 3"), std::string::npos) << r.error;
    EXPECT_EQ(r.error.find("leaf0"), std::string::npos) << r.error;
}

// A sweep that ran to its end with a failed size (1) is the hosts node's
// status, and a switch node that exits on its own before is still named.
TEST(FabricLiveSplit, LauncherPassesOnAFinishedSweepsStatusAndNamesASwitchThatDied) {
    const LaunchResult done = launch_nodes({{"hosts", {"/bin/sh", "-c", "exit 1"}, ""}}, 30);
    EXPECT_EQ(done.status, 1);
    EXPECT_TRUE(done.error.empty()) << done.error;
    const LaunchResult died = launch_nodes({{"hosts", {"/bin/sh", "-c", "exec sleep 60"}, ""},
                                            {"leaf0", {"/bin/sh", "-c", "exit 4"}, ""}},
                                           30);
    EXPECT_EQ(died.status, 2);
    EXPECT_NE(died.error.find("node leaf0"), std::string::npos) << died.error;
    EXPECT_NE(died.error.find("exited with status 4 before the run ended"), std::string::npos) << died.error;
}

// A node that ignores SIGTERM is ended with SIGKILL after the grace and
// named; one that stops on SIGTERM is not.
TEST(FabricLiveSplit, LauncherNamesANodeThatNeededSigkill) {
    // The hosts node gives up once leaf1 ignores SIGTERM (a FIFO orders them).
    const std::string fifo = fmt::format("/tmp/rocemu_launcher_test_{}.fifo", getpid());
    ::unlink(fifo.c_str());
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
    const LaunchResult r =
        launch_nodes({{"hosts", {"/bin/sh", "-c", "read x < " + fifo + "; exit 3"}, ""},
                      {"leaf0", {"/bin/sh", "-c", "exec sleep 60"}, ""},
                      {"leaf1", {"/bin/sh", "-c", "trap '' TERM; echo ready > " + fifo + "; exec sleep 60"}, ""}},
                     30);
    ::unlink(fifo.c_str());
    EXPECT_EQ(r.status, 2);
    ASSERT_EQ(r.killed_after_grace.size(), 1u);
    EXPECT_EQ(r.killed_after_grace[0].rfind("leaf1 (pid ", 0), 0u) << r.killed_after_grace[0];
}

// --pcap split: the files of the link's two owners are found by name and
// merge into one in time order, whatever order the nodes wrote them; another
// node's file of the link in a reused folder, or another link's, is left out.
TEST(FabricLiveSplit, CapturePartsAreTheOwnersFilesMergedInTimeOrder) {
    const Topology t = embedded("incast");
    const LinkSpec& link = t.links.front();
    ASSERT_FALSE(link.fabric);
    const std::string hosts = node_of(t, link.a), leaf = node_of(t, link.b);
    ASSERT_EQ(hosts, kHostsNode);
    std::string stranger;
    for (const std::string& n : node_names(t))
        if (n != hosts && n != leaf) stranger = n;
    ASSERT_FALSE(stranger.empty());
    const std::string dir = ::testing::TempDir() + "/fabric_live_pcap_merge";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    EXPECT_EQ(capture_path(dir, link.name, hosts), dir + "/" + link.name + "@hosts.pcap");
    const auto frame = [](uint8_t tag) { return std::vector<uint8_t>(60, tag); };
    {
        pcap::Writer a(capture_path(dir, link.name, hosts));
        pcap::Writer b(capture_path(dir, link.name, leaf));
        pcap::Writer stale(capture_path(dir, link.name, stranger));
        pcap::Writer other(capture_path(dir, t.links.back().name, leaf));
        ASSERT_TRUE(a.ok() && b.ok() && stale.ok() && other.ok());
        a.write(Nanos{10}, frame(1));
        a.write(Nanos{40}, frame(4));
        b.write(Nanos{20}, frame(2));
        b.write(Nanos{30}, frame(3));
        b.write(Nanos{50}, frame(5));
        stale.write(Nanos{15}, frame(8));
        other.write(Nanos{25}, frame(9));
    }
    const std::vector<std::string> parts = capture_parts(t, dir, link.name);
    ASSERT_EQ(parts, (std::vector<std::string>{capture_path(dir, link.name, hosts), capture_path(dir, link.name, leaf)}));
    EXPECT_TRUE(capture_parts(t, dir, "nosuch").empty());
    std::string error;
    std::vector<pcap::MergeInput> in;
    for (const std::string& part : parts) in.push_back({part, Nanos{0}});
    const std::optional<uint64_t> n = pcap::merge(in, dir + "/merged.pcap", error);
    ASSERT_TRUE(n) << error;
    EXPECT_EQ(*n, 5u);
    pcap::Reader r(dir + "/merged.pcap");
    ASSERT_TRUE(r.ok());
    pcap::Frame f;
    std::vector<int64_t> ts;
    std::vector<uint8_t> tags;
    while (r.next(f)) {
        ts.push_back(f.ts.v);
        tags.push_back(f.data.at(0));
    }
    EXPECT_EQ(ts, (std::vector<int64_t>{10, 20, 30, 40, 50}));
    EXPECT_EQ(tags, (std::vector<uint8_t>{1, 2, 3, 4, 5}));
    // The leaf's file taken on a machine whose clock is 15 ns ahead: shifted
    // by -15 its frames fall between the hosts node's in other places.
    in[1].shift = Nanos{-15};
    ASSERT_TRUE(pcap::merge(in, dir + "/shifted.pcap", error)) << error;
    pcap::Reader rs(dir + "/shifted.pcap");
    ASSERT_TRUE(rs.ok());
    ts.clear();
    tags.clear();
    while (rs.next(f)) {
        ts.push_back(f.ts.v);
        tags.push_back(f.data.at(0));
    }
    EXPECT_EQ(ts, (std::vector<int64_t>{5, 10, 15, 35, 40}));
    EXPECT_EQ(tags, (std::vector<uint8_t>{2, 1, 3, 5, 4}));
    const pcap::MergeInput none[] = {{dir + "/none.pcap", Nanos{0}}};
    EXPECT_FALSE(pcap::merge(none, dir + "/x.pcap", error));
    EXPECT_NE(error.find("none.pcap"), std::string::npos) << error;
    std::filesystem::remove_all(dir);
}

// A pcap record's seconds are unsigned 32 bits: a frame after 2038 (2^31 s)
// reads back as written, and a shift that would put a frame before 1970 or
// after 2106 is refused, naming the file, rather than written wrapped
// around (out of order, with a nanosecond field past 10^9).
TEST(FabricLiveSplit, MergeKeepsTimesWithinWhatAPcapHolds) {
    const std::string dir = ::testing::TempDir() + "/fabric_live_pcap_range";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const Nanos late{(int64_t{1} << 31) * 1000000000 + 5};
    {
        pcap::Writer w(dir + "/a.pcap");
        ASSERT_TRUE(w.ok());
        w.write(Nanos{1000000000}, std::vector<uint8_t>(60, 1));
        w.write(late, std::vector<uint8_t>(60, 2));
    }
    const auto times = [](const std::string& path) {
        pcap::Reader r(path);
        pcap::Frame f;
        std::vector<int64_t> ts;
        while (r.next(f)) ts.push_back(f.ts.v);
        return ts;
    };
    EXPECT_EQ(times(dir + "/a.pcap"), (std::vector<int64_t>{1000000000, late.v}));
    std::string error;
    std::vector<pcap::MergeInput> in{{dir + "/a.pcap", Nanos{1000000000}}};
    ASSERT_TRUE(pcap::merge(in, dir + "/m.pcap", error)) << error;
    EXPECT_EQ(times(dir + "/m.pcap"), (std::vector<int64_t>{2000000000, late.v + 1000000000}));
    for (const Nanos bad : {Nanos{-1000000001}, pcap::kMaxTime - late, Nanos{INT64_MAX}, Nanos{INT64_MIN}}) {
        SCOPED_TRACE(bad.v);
        in[0].shift = bad;
        error.clear();
        EXPECT_FALSE(pcap::merge(in, dir + "/bad.pcap", error));
        EXPECT_NE(error.find("a.pcap"), std::string::npos) << error;
        EXPECT_NE(error.find("2^32 s"), std::string::npos) << error;
    }
    std::filesystem::remove_all(dir);
}

// A user's --file-prefix given to a split run: each node gets its own,
// derived from it, so no two nodes share an EAL runtime folder.
TEST(FabricLiveSplit, EveryNodeGetsItsOwnFilePrefix) {
    const std::vector<std::string> eal{"--log-level", "lib.eal:error", "--file-prefix", "mine", "-m", "600"};
    EXPECT_EQ(node_eal_args(eal, "left"),
              (std::vector<std::string>{"--log-level", "lib.eal:error", "--file-prefix", "mine-left", "-m", "600"}));
    EXPECT_EQ(node_eal_args({"--file-prefix=run7"}, "hosts"), (std::vector<std::string>{"--file-prefix=run7-hosts"}));
    std::set<std::string> prefixes;
    for (const std::string& n : node_names(embedded("incast"))) prefixes.insert(node_eal_args(eal, n)[3]);
    EXPECT_EQ(prefixes.size(), 3u);
    EXPECT_EQ(node_eal_args({"--no-huge", "-m", "512"}, "left"), (std::vector<std::string>{"--no-huge", "-m", "512"}));
    EXPECT_EQ(node_eal_args({"--file-prefix"}, "left"), (std::vector<std::string>{"--file-prefix"}));
}

}  // namespace
}  // namespace rocemu::fabric::live
