// A whole fabric described in YAML (configs/fabrics/*.yaml): its shape
// (leaf-spine Clos, rail-optimised or not, dumbbell), link speeds and delays,
// the NIC profile and the switch profile. The file is parsed and validated
// once into a const FabricConfig; generate() expands it into concrete NICs,
// switches, links, an addressing plan and per-switch routes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cc/config.hpp"
#include "common/units.hpp"
#include "switch/config.hpp"
#include "switch/route.hpp"

namespace rocemu::fabric {

enum class Shape : uint8_t { LeafSpine, Rail, Dumbbell };
std::string_view shape_name(Shape s);

struct LinkClass {
    BitsPerSec speed = BitsPerSec::gbps(100);
    Nanos delay{500};
};

// How Fabric models a host NIC: the RC transport (verbs, RC QPs, ACKs,
// retransmission; EngineNic) or a traffic generator without ACKs (GenNic).
enum class NicModel : uint8_t { Rc, Generator };
std::string_view nic_model_name(NicModel m);

struct NicProfile {
    NicModel model = NicModel::Rc;
    std::string cc_name = "connectx-default";  // a cc preset, a file, or "none"
    cc::CcConfig cc{};
    bool spraying = false;  // per-packet UDP source port entropy
    uint32_t mtu = 4200;    // netdev MTU; the RDMA MTU is derived from it
    uint8_t dscp = 3;       // data traffic class (lossless under SONiC maps)
    // Largest of 256..4096 that fits in mtu - 80, as Linux rxe and mlx5 pick.
    uint32_t rdma_mtu() const;
};

struct SwitchProfile {
    std::string name = "sonic-default";  // embedded name or a file
    sw::SwitchConfig base{};             // ports are replaced per switch
    std::optional<sw::ArMode> adaptive;  // overrides the profile for TCs 3 and 4
};

struct FabricConfig {
    std::string name;
    std::string source;  // the file it came from, for error messages
    Shape shape = Shape::LeafSpine;
    // leaf_spine: leaves x hosts_per_leaf single-NIC hosts, spines.
    // rail: hosts x nics_per_host; leaves = nics_per_host, each holding `hosts` NICs.
    // dumbbell: left_hosts and right_hosts on two switches joined by one link.
    uint32_t leaves = 2;
    uint32_t hosts_per_leaf = 4;
    uint32_t spines = 2;
    uint32_t hosts = 4;
    uint32_t nics_per_host = 1;
    bool rail_optimised = true;
    uint32_t left_hosts = 4;
    uint32_t right_hosts = 1;
    LinkClass host_link{};
    LinkClass fabric_link{BitsPerSec::gbps(100), Nanos{1000}};
    NicProfile nic{};
    SwitchProfile sw{};
};

struct ConfigResult {
    std::optional<FabricConfig> config;
    std::string error;  // "<file>: <key>: <problem>"
};

// `source` names the text in error messages and anchors relative profile paths.
ConfigResult parse_fabric_config(std::string_view yaml_text, const std::string& source);
ConfigResult load_fabric_config(const std::string& path);
// What a valid config does that its user may not mean, one line each: RC
// NICs without spraying (no reorder buffer) whose traffic class the
// switches route per packet over more than one spine, so every reordering
// is a loss to them.
std::vector<std::string> config_warnings(const FabricConfig& c);
// The compiled-in default fabric (configs/fabrics/default.yaml).
std::string_view default_fabric_yaml();
ConfigResult default_fabric_config();

// --- The expanded topology ---------------------------------------------------

enum class Role : uint8_t { Leaf, Spine, Left, Right };

struct NicSpec {
    std::string name;  // "h3" or "h3n1" for multi-NIC hosts
    uint32_t host = 0;
    uint32_t rail = 0;  // NIC index within its host
    std::array<uint8_t, 6> mac{};
    uint32_t ip = 0;  // host byte order
    uint32_t sw = 0;  // the switch it is cabled to
    uint16_t sw_port = 0;
};

struct SwitchSpec {
    std::string name;  // "leaf0", "spine1", "left", "right"
    Role role = Role::Leaf;
    uint32_t index = 0;  // within its role
    sw::SwitchConfig cfg;
    std::vector<std::array<uint8_t, 6>> port_mac;
};

// One end of a cable: a NIC (port 0) or a switch port.
struct Endpoint {
    bool is_switch = false;
    uint32_t index = 0;
    uint16_t port = 0;
};

struct LinkSpec {
    std::string name;  // "h0-leaf0", "leaf0-spine1"
    Endpoint a, b;
    LinkClass cls;
    bool fabric = false;  // switch-to-switch
};

struct Topology {
    FabricConfig cfg;
    std::vector<NicSpec> nics;
    std::vector<SwitchSpec> switches;
    std::vector<LinkSpec> links;
    // Host-facing over spine-facing capacity per leaf (1.0 = non-blocking).
    double oversubscription = 1.0;

    // Connected /24 with every attached NIC learned, plus routes to the other
    // subnets: ECMP over all spines from a leaf, the owning leaf from a spine.
    void install_routes(uint32_t sw_index, sw::RouteTable& rt) const;
    // The MAC at the far end of a switch port.
    std::array<uint8_t, 6> peer_mac(uint32_t sw_index, uint16_t port) const;
    std::optional<uint32_t> find_link(std::string_view name) const;
    // Why `--pcap name` cannot capture (no such link; the first few names it
    // could be), or empty (also when no link is named: nothing to capture).
    std::string pcap_link_error(std::string_view name) const;
    std::optional<uint32_t> find_nic(std::string_view name) const;
    uint32_t nic_count() const { return static_cast<uint32_t>(nics.size()); }
    // The switch queue RoCE data rides: the NICs' DSCP through the switch
    // profile's DSCP -> TC -> queue maps.
    int data_queue() const;
    // A one-paragraph human summary (counts, speeds, oversubscription).
    std::string summary() const;
};

// Expands a valid config. Throws std::invalid_argument if a switch ends up
// with more ports than the switch core supports (the message names the keys).
Topology generate(const FabricConfig& cfg);

std::string format_ipv4(uint32_t ip);

// One cause of drops and how many: "switch shared_pool_full", "nic
// drop_stale_response", ...; Fabric::drop_reasons() lists every cause with a
// count, and the counts add up to Totals::switch_drops + nic_drops.
struct DropCount {
    std::string cause;
    uint64_t count = 0;
    bool operator==(const DropCount&) const = default;
};
// "cause count, cause count, ...", as the lines under a sweep table list them.
std::string format_drop_counts(const std::vector<DropCount>& drops);

}  // namespace rocemu::fabric
