// `rocemu host`: bring up one NIC's host identity (ARP, ping) on a DPDK port.
#include <memory>

#include "dataplane/dpdk/host_runner.hpp"
#include "tools/rocemu/commands.hpp"
#include "tools/rocemu/nic_cli.hpp"

namespace rocemu::cli {

void add_host_command(CLI::App& app, int& status) {
    struct Options {
        dpdk::HostRunOptions run;
        RxPfcCliOptions rx;
    };
    auto opts = std::make_shared<Options>();
    dpdk::HostRunOptions* o = &opts->run;
    CLI::App* cmd = app.add_subcommand(
        "host",
        "Run one emulated NIC's host identity on a DPDK port: it answers ARP and ICMP echo (so `ping` works), "
        "lists its GID table, and can ping a peer. EAL arguments go after `--`; the defaults are --no-huge -m 512 "
        "--no-pci --file-prefix rocemu-<pid>. Counters are printed at exit and served by DPDK telemetry "
        "(see `rocemu counters`).");
    cmd->add_option("--port", o->port,
                    "DPDK device string, e.g. net_af_packet0,iface=veth0 or net_memif0,role=server or a PCI address")
        ->required();
    cmd->add_option("--ip", o->host.ip, "IPv4 address and prefix, e.g. 10.0.0.1/24")->required();
    cmd->add_option("--mac", o->host.mac, "MAC address (default: the port's)");
    cmd->add_option("--gateway", o->host.gateway, "IPv4 next hop for destinations outside the subnet");
    cmd->add_option("--vlan", o->host.vlan, "802.1Q VLAN ID, 1-4094 (default: untagged)");
    cmd->add_option("--pcp", o->host.pcp, "802.1p priority of tagged frames, 0-7")->capture_default_str();
    cmd->add_option("--gid-layout", o->host.gid_layout, "connectx (RoCEv2 IPv4 GID at index 3) or rxe (index 1)")
        ->capture_default_str();
    cmd->add_option("--ecn", o->host.ecn, "ECN of data packets whose traffic class leaves it 0: ect0, ect1, off")
        ->capture_default_str();
    cmd->add_option("--mtu", o->host.port_mtu, "set the port MTU (default: the device's)")
        ->each([o](const std::string&) { o->mtu_set = true; });
    add_rx_pfc_options(cmd, opts->rx);
    cmd->add_option("--duration", o->duration_s, "seconds to run (default: until Ctrl-C)");
    cmd->add_option("--capture", o->capture, "write every frame received and sent to this pcapng file");
    cmd->add_option("--ping", o->ping, "IPv4 address to send ICMP echo requests to");
    cmd->add_option("-c,--count", o->count, "echo requests to send with --ping")->capture_default_str();
    cmd->add_option("-i,--interval", o->interval_s, "seconds between echo requests")->capture_default_str();
    cmd->add_option("-s,--size", o->size, "ICMP payload bytes, 0-64")->capture_default_str();
    cmd->add_flag("--busy-poll", o->busy_poll, "never sleep when idle (lowest latency, one core at 100%)");
    cmd->add_option("eal", o->eal_args, "EAL arguments, after --");
    cmd->callback([opts, &status] {
        if (const std::string e = make_rx_pfc(opts->rx, opts->run.pfc_rx); !e.empty()) {
            fmt::print(stderr, "rocemu host: {}\n", e);
            status = 2;
            return;
        }
        opts->run.rx_max_pps = opts->rx.rx_max_pps;
        status = dpdk::run_host(opts->run);
    });
}

}  // namespace rocemu::cli
