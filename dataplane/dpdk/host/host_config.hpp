// Turns the user's host options (strings, as typed on the command line) into a
// validated HostConfig, once. A bad value is an error naming the option, the
// value and what is allowed.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "dataplane/dpdk/host/host_stack.hpp"

namespace rocemu::host {

struct HostOptions {
    std::string ip;                   // A.B.C.D/P, required
    std::string mac;                  // empty: the port's own MAC
    std::string gateway;              // empty: none
    int vlan = -1;                    // -1: untagged
    int pcp = 0;
    std::string gid_layout = "connectx";
    std::string ecn = "ect0";         // ect0, ect1 or off
    int port_mtu = 1500;
};

std::optional<uint32_t> parse_ipv4(std::string_view s);
std::optional<wire::MacAddr> parse_mac(std::string_view s);

// `port_mac` is used when o.mac is empty. On failure returns nullopt and sets `error`.
std::optional<HostConfig> make_host_config(const HostOptions& o, const wire::MacAddr& port_mac, std::string& error);

}  // namespace rocemu::host
