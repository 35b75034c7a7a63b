// Simulation speed of whole fabrics in virtual time, on one core:
//  1. one simulated second of a 2:1 incast at 40 Gbit/s (DCQCN on), the
//     figure ns3-rdma quotes minutes for; target <= 10 s of wall time;
//  2. the cost per simulated packet on a 16-host and a 256-host leaf-spine
//     running a permutation, which should stay flat within 30%.
// A simulated packet is a frame delivered over one link (one hop).
#include <chrono>
#include <ctime>
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include "fabric/fabric.hpp"
#include "fabric/workload.hpp"

namespace {

using namespace rocemu;
using namespace rocemu::fabric;

Topology make(const std::string& yaml) {
    const ConfigResult r = parse_fabric_config(yaml, "bench.yaml");
    if (!r.config) {
        fmt::print(stderr, "{}\n", r.error);
        std::exit(2);
    }
    return generate(*r.config);
}

struct Figures {
    double wall_s = 0;
    double cpu_s = 0;  // on a shared machine the fairer figure
    uint64_t packets = 0;
    uint64_t events = 0;
};

Figures timed_run(Fabric& f, Nanos virtual_time) {
    f.start();
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    f.run(virtual_time);
    const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const Totals t = f.totals();
    return Figures{wall, cpu, t.frames_delivered, t.sim_events};
}

}  // namespace

int main(int argc, char** argv) {
    const double incast_s = argc > 1 ? std::stod(argv[1]) : 1.0;

    {
        const Topology topo = make(
            "topology: {kind: leaf_spine, leaves: 1, hosts_per_leaf: 3, spines: 0}\n"
            "links: {host: {speed_gbps: 40, delay_ns: 1000}}\n"
            "nic: {cc: connectx-default, mtu: 1500}\nswitch: {profile: lossless-100g}\n");
        Fabric f(topo, 1);
        f.add_flow(FlowSpec{0, 2, Bytes{1ull << 40}, Nanos{0}, 0xC001});
        f.add_flow(FlowSpec{1, 2, Bytes{1ull << 40}, Nanos{0}, 0xC002});
        const Figures r = timed_run(f, Nanos::from_s(incast_s));
        const Totals t = f.totals();
        fmt::print(
            "2:1 incast at 40 Gbit/s, MTU 1500, DCQCN: {:.2f} simulated s in {:.2f} s wall, {:.2f} s CPU "
            "(target <= 10 s per simulated s): {:.2f} M packet-hops per CPU s, {:.2f} M events per CPU s; "
            "{} CNPs, {} PFC frames\n",
            incast_s, r.wall_s, r.cpu_s, r.packets / r.cpu_s / 1e6, r.events / r.cpu_s / 1e6, t.cnps, t.pfc_frames);
    }

    double cost[2] = {};
    const int hosts[2] = {16, 256};
    for (int i = 0; i < 2; ++i) {
        const int leaves = i == 0 ? 2 : 16;
        const int per = hosts[i] / leaves;
        const int spines = i == 0 ? 4 : 16;
        const Topology topo =
            make(fmt::format("topology: {{kind: leaf_spine, leaves: {}, hosts_per_leaf: {}, spines: {}}}\n"
                             "links: {{host: {{speed_gbps: 100}}, fabric: {{speed_gbps: 100}}}}\n"
                             "nic: {{cc: connectx-default, mtu: 4200}}\nswitch: {{profile: lossless-100g}}\n",
                             leaves, per, spines));
        Fabric f(topo, 1);
        Rng rng(1);
        Workload w;
        w.pattern = Pattern::Permutation;
        w.size = Bytes{1ull << 40};
        for (const FlowSpec& fl : make_flows(topo, w, rng)) f.add_flow(fl);
        const Nanos span = Nanos::from_us(i == 0 ? 16000 : 1000);
        const Figures r = timed_run(f, span);
        cost[i] = r.cpu_s * 1e9 / static_cast<double>(r.packets);
        fmt::print(
            "{:>3} hosts ({} leaves, {} spines), permutation: {:.1f} simulated ms in {:.2f} s wall, "
            "{} packet-hops, {:.2f} events each, {:.0f} CPU ns per packet-hop\n",
            hosts[i], leaves, spines, span.ms(), r.wall_s, r.packets, static_cast<double>(r.events) / r.packets,
            cost[i], r.packets / r.wall_s / 1e6);
    }
    fmt::print("CPU cost per packet-hop, 256 vs 16 hosts: {:.2f}x (target within 1.30x)\n", cost[1] / cost[0]);
    return 0;
}
