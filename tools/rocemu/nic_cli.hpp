// What every rocemu command that runs one emulated NIC (pingpong, rdma-ops)
// takes on its command line, checks and opens the same way.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/transport/types.hpp"
#include "verbs/verbs.hpp"

namespace rocemu::cli {

struct NicCliOptions {
    std::string port;
    host::HostOptions host;
    bool mtu_set = false;
    int gidx = -1;  // -1: the port's default RoCEv2 IPv4 index
    int mtu = 0;    // path MTU in bytes; 0: the port's active MTU
    std::string capture;
    std::string server;
    std::vector<std::string> eal_args;
};

// Registers the NIC options on `cmd`; `o` must live as long as `cmd` does.
inline void add_nic_options(CLI::App* cmd, NicCliOptions& o) {
    cmd->add_option("--port", o.port, "DPDK device string, e.g. net_af_packet0,iface=veth0")->required();
    cmd->add_option("--ip", o.host.ip, "IPv4 address and prefix, e.g. 10.0.0.1/24")->required();
    cmd->add_option("--mac", o.host.mac, "MAC address (default: the port's)");
    cmd->add_option("--gid-layout", o.host.gid_layout, "connectx (RoCEv2 IPv4 GID at index 3) or rxe (index 1)")
        ->capture_default_str();
    cmd->add_option("--port-mtu", o.host.port_mtu, "set the port MTU (default: the device's)")
        ->each([&o](const std::string&) { o.mtu_set = true; });
    cmd->add_option("-g,--gid-idx", o.gidx, "local GID index (default: the port's RoCEv2 IPv4 GID)");
    cmd->add_option("-m,--mtu", o.mtu, "path MTU: 256, 512, 1024, 2048 or 4096 (default: the active MTU)");
    cmd->add_option("--capture", o.capture, "write every frame received and sent to this pcapng file");
}

// Moves an EAL argument that landed in SERVER_IP back (after `--` every word
// is positional) and checks the path MTU. Returns the error, or "".
inline std::string check_nic_options(NicCliOptions& o) {
    if (!o.server.empty() && o.server[0] == '-') {
        o.eal_args.insert(o.eal_args.begin(), o.server);
        o.server.clear();
    }
    if (o.mtu && !transport::path_mtu_from_bytes(o.mtu))
        return fmt::format("-m {}: the path MTU must be 256, 512, 1024, 2048 or 4096", o.mtu);
    return {};
}

// Opens the NIC in Lcore mode: its poll thread keeps answering ARP and ACKing
// while the command blocks in its TCP exchange.
inline std::unique_ptr<verbs::Context> open_nic(const NicCliOptions& o, std::string& error) {
    verbs::DeviceOptions d;
    d.devspec = o.port;
    d.host = o.host;
    d.mtu_set = o.mtu_set;
    d.capture = o.capture;
    d.progress = verbs::Progress::Lcore;
    return verbs::Context::open(d, o.eal_args, error);
}

// The local GID index and path MTU the options ask for. The GID index is
// checked before anything goes on the wire, so a wrong one fails at once.
// Returns the error, or "".
inline std::string resolve_gid_and_mtu(const verbs::Context& ctx, const NicCliOptions& o, int& gidx,
                                       transport::PathMtu& mtu) {
    gidx = o.gidx >= 0 ? o.gidx : ctx.default_gid_index();
    if (ctx.check_gid_index(1, gidx)) return ctx.last_error();
    verbs::PortAttr pa;
    ctx.query_port(1, pa);
    mtu = o.mtu ? *transport::path_mtu_from_bytes(o.mtu) : pa.active_mtu;
    return {};
}

}  // namespace rocemu::cli
