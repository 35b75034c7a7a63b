// `rocemu switch`: the soft-switch on DPDK ports; `rocemu switch gen`: a
// NIC-side RoCEv2 source that honours PFC, to drive it.
#include <memory>

#include "switch/dpdk/runner.hpp"
#include "tools/rocemu/commands.hpp"

namespace rocemu::cli {

void add_switch_command(CLI::App& app, int& status) {
    auto o = std::make_shared<sw::live::SwitchRunOptions>();
    auto g = std::make_shared<sw::live::GenOptions>();
    CLI::App* cmd = app.add_subcommand(
        "switch",
        "Run the lossless soft-switch on DPDK ports, one lcore polling all of them: routing (static neighbors and "
        "ECMP routes), MMU with PFC XOFF/XON, ECN marking, scheduling, the PFC watchdog, and per-port link "
        "emulation (serialisation at the port speed, delay, loss, corruption, reordering, down/up, PFC storms). "
        "EAL arguments go after `--`. Counters are printed at exit and served by DPDK telemetry "
        "(/rocemu/switch/port_stats).");
    cmd->add_option("--config", o->config, "SONiC-style switch YAML, e.g. configs/switch/sonic-default.yaml");
    cmd->add_option("--port", o->live.ports,
                    "NAME=DEVSPEC: run config port NAME on this device, e.g. "
                    "Ethernet0=net_memif0,role=server,socket=/tmp/sw0.sock (repeat per port)");
    cmd->add_option("--neighbor", o->live.neighbors, "IP=MAC@NAME: a host behind port NAME (a /32 route)");
    cmd->add_option("--route", o->live.routes,
                    "A.B.C.D/LEN=IP[,IP...]: route a prefix to neighbors; several next hops form an ECMP group");
    cmd->add_option("--link", o->live.links,
                    "NAME:key=value,...: faults on port NAME's egress link (loss, corrupt, corrupt_as=fcs|icrc, "
                    "reorder, reorder_delay_us, down_ms, up_ms, storm_prio, storm_start_ms, storm_stop_ms, "
                    "storm_period_us, storm_quanta)");
    cmd->add_option("--link-file", o->live.link_files,
                    "NAME=FILE: port NAME's link from YAML (configs/switch/link-faults.yaml); speed stays the port's");
    cmd->add_option("--capture", o->capture, "write every frame received and sent, on every port, to this pcapng file");
    cmd->add_option("--duration", o->duration_s, "seconds to run (default: until Ctrl-C)");
    cmd->add_flag("--ttl", o->ttl_decrement, "decrement the IP TTL / hop limit (expired packets are dropped)");
    cmd->add_option("--seed", o->seed, "seed of the switch's and the links' randomness")
        ->check(kWholeNumber)
        ->capture_default_str();
    cmd->add_flag("--busy-poll", o->busy_poll, "never sleep when idle (one core at 100%)");
    cmd->add_flag("--record-cycles", o->record_cycles,
                  "print CPU cycles per packet at exit, counted as testpmd's --record-core-cycles counts them");
    cmd->add_option("eal", o->eal_args, "EAL arguments, after --");

    CLI::App* gen = cmd->add_subcommand(
        "gen",
        "Send RoCEv2 UD frames (UDP 4791, valid ICRC) on one priority from a DPDK port, at a rate, honouring the "
        "PFC pauses it receives: the NIC side of a switch test.");
    gen->add_option("--port", g->port, "DPDK device string")->required();
    gen->add_option("--dst-ip", g->dst_ip, "destination IPv4 address")->required();
    gen->add_option("--src-ip", g->src_ip, "source IPv4 address")->capture_default_str();
    gen->add_option("--src-mac", g->src_mac, "source MAC")->capture_default_str();
    gen->add_option("--dst-mac", g->dst_mac, "destination MAC (the switch port's)")->capture_default_str();
    gen->add_option("--dscp", g->dscp, "DSCP, 0-63 (3 is lossless TC3 under SONiC defaults)")->capture_default_str();
    gen->add_option("--prio", g->prio, "PFC priority the traffic belongs to, 0-7")->capture_default_str();
    gen->add_option("--size", g->size, "frame bytes, 64-9000")->capture_default_str();
    gen->add_option("--count", g->count, "frames to send")->capture_default_str();
    gen->add_option("--flows", g->flows, "UDP source ports to spread over, 1-1024")->capture_default_str();
    gen->add_option("--rate-gbps", g->rate_gbps, "offered rate; 0 sends as fast as the port takes")
        ->capture_default_str();
    gen->add_option("--link-gbps", g->link_gbps, "link speed that turns pause quanta into time")->capture_default_str();
    gen->add_flag("!--ignore-pfc", g->honour_pfc, "keep sending through pauses (to show what PFC prevents)");
    gen->add_option("--duration", g->duration_s, "give up after this many seconds")->capture_default_str();
    gen->add_option("eal", g->eal_args, "EAL arguments, after --");
    gen->callback([g, &status] { status = sw::live::run_gen(*g); });

    cmd->callback([o, cmd, gen, &status] {
        if (cmd->got_subcommand(gen)) return;
        if (o->config.empty()) throw CLI::RequiredError("--config");
        status = sw::live::run_switch(*o);
    });
}

}  // namespace rocemu::cli
