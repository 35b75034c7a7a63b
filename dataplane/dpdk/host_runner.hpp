// `rocemu host`: one NIC's host identity on one DPDK port, answering ARP and
// ping, optionally pinging a peer. Its interface is free of DPDK headers so
// the CLI can call it.
#pragma once

#include <string>
#include <vector>

#include "dataplane/dpdk/host/host_config.hpp"
#include "dataplane/dpdk/rx_pfc.hpp"

namespace rocemu::dpdk {

struct HostRunOptions {
    std::string port;                   // DPDK device string
    host::HostOptions host;             // host.port_mtu is applied to the port when mtu_set
    bool mtu_set = false;
    double duration_s = 0;              // 0: until SIGINT or SIGTERM (or the pings are done)
    std::string capture;                // pcapng file; empty: no capture
    std::string ping;                   // IPv4 address to ping; empty: only answer
    int count = 4;                      // echo requests to send
    double interval_s = 1.0;
    int size = 56;                      // ICMP payload bytes, at most 64
    bool busy_poll = false;             // never sleep when idle
    RxPfcConfig pfc_rx;                 // PFC from the receive backlog (off while xoff is 0)
    uint64_t rx_max_pps = 0;            // lab: received frames handled per second at most; 0: no limit
    std::vector<std::string> eal_args;  // after `--`
};

// Runs until done and returns the exit status: 0 on success (with --ping:
// every request answered), 1 if pings went unanswered, 2 on a setup error.
int run_host(const HostRunOptions& o);

}  // namespace rocemu::dpdk
