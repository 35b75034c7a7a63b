// `rocemu switch` and `rocemu switch gen`, with interfaces free of DPDK
// headers so the CLI can call them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "switch/dpdk/setup.hpp"

namespace rocemu::sw::live {

struct SwitchRunOptions {
    std::string config;        // SONiC-style YAML (configs/switch/*.yaml)
    LiveOptions live;          // ports, neighbors, routes, link faults
    std::string capture;       // pcapng of every port, RX and TX; empty: none
    double duration_s = 0;     // 0: until SIGINT or SIGTERM
    bool ttl_decrement = false;
    bool busy_poll = false;    // never sleep when idle
    // Print the forwarding cost at exit as testpmd's --record-core-cycles
    // does: TSC cycles of the turns that received or sent, per frame
    // received; turns longer than 500 us (preempted) are left out.
    bool record_cycles = false;
    double link_wait_s = 3;    // per port at start: how long to wait for the link to come up
    uint64_t seed = 1;         // the switch's and the links' randomness
    std::vector<std::string> eal_args;
};

// Runs until done; prints the counters at exit. 0 on a clean run, 2 on a setup error.
int run_switch(const SwitchRunOptions& o);

// A NIC-side traffic source: RoCEv2 UD SEND frames (UDP 4791, real ICRC) on
// one priority, paced at a rate, that honours the PFC pauses it receives for
// that priority: it stops starting frames until the pause ends.
struct GenOptions {
    std::string port;         // DPDK device string
    std::string src_mac = "02:00:00:00:00:01";
    std::string dst_mac = "02:00:00:00:00:02";  // the switch port's (a switch routes any MAC it receives)
    std::string src_ip = "10.0.0.1";
    std::string dst_ip;
    int dscp = 3;
    int prio = 3;             // PFC priority the frames belong to
    int size = 1024;          // frame bytes
    uint64_t count = 10000;
    int flows = 1;            // UDP source ports 0xC000.. (ECMP entropy)
    double rate_gbps = 0;     // 0: as fast as the port takes them
    double link_gbps = 100;   // converts pause quanta to time
    bool honour_pfc = true;
    double duration_s = 30;   // give up after this long
    std::vector<std::string> eal_args;
};

// 0 when every frame was sent, 1 if time ran out, 2 on a setup error.
int run_gen(const GenOptions& o);

}  // namespace rocemu::sw::live
