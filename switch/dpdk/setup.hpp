// What `rocemu switch` is told on its command line, checked once before any
// DPDK resource exists: which config port runs on which ethdev, the static
// neighbors and routes, and each port's link faults. Free of DPDK.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "switch/config.hpp"
#include "switch/link.hpp"
#include "switch/route.hpp"

namespace rocemu::sw::live {

struct LiveOptions {
    std::vector<std::string> ports;      // NAME=DEVSPEC, NAME from the config's PORT section
    std::vector<std::string> neighbors;  // IP=MAC@NAME
    std::vector<std::string> routes;     // PREFIX/LEN=IP[,IP...] (IPs of neighbors: an ECMP group)
    std::vector<std::string> links;      // NAME:key=value[,key=value...]
    std::vector<std::string> link_files; // NAME=FILE.yaml, as parse_link_config() reads (speed: the port's)
};

struct NeighborEntry {
    uint32_t ip = 0;
    std::array<uint8_t, 6> mac{};
    PortId port = 0;
};

struct RouteEntry {
    uint32_t prefix = 0;
    int len = 0;
    std::vector<uint32_t> via;  // neighbor IPs
};

// The switch as it runs: the config reduced to the bound ports, in the order
// given (so PortId i is devspecs[i]), and one egress link per port.
struct LiveSetup {
    SwitchConfig config;
    std::vector<std::string> devspecs;
    std::vector<LinkConfig> links;
    std::vector<NeighborEntry> neighbors;
    std::vector<RouteEntry> routes;
};

// nullopt and one message naming the option, the value and what is allowed.
std::optional<LiveSetup> make_live_setup(const SwitchConfig& cfg, const LiveOptions& o, std::string& error);

// Applies the link keys of one --link value to `link`:
//   loss, corrupt, reorder          probabilities in [0, 1]
//   corrupt_as                      fcs (dropped at the MAC) or icrc (bad ICRC)
//   reorder_delay_us                extra delay of a reordered frame
//   down_ms, up_ms                  the link goes down / up at that time since start (repeatable)
//   storm_prio, storm_start_ms, storm_stop_ms, storm_period_us, storm_quanta
//                                   a PFC storm out of this port
bool apply_link_keys(std::string_view keys, LinkConfig& link, std::string& error);

// Neighbors (each a host route) and routes into the core's table.
void install_routes(const LiveSetup& s, RouteTable& rt);

}  // namespace rocemu::sw::live
