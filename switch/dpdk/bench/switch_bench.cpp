// Forwarding rate of the soft-switch on one core, against dpdk-testpmd io
// forwarding over the same port type, in one run.
//
// Both sides use net_ring ports in one process, where a "wire" is an rte_ring
// of mbuf pointers, so neither pays for a copy and the comparison is of the
// per-packet work of the forwarding core:
//   testpmd: --vdev net_ring0 --vdev net_ring1, io forwarding on one lcore,
//            started with --tx-first (32 frames per port in flight), rate =
//            the sum of both ports' Rx-pps over the measured periods.
//   rocemu:  three switch ports; every frame enters Ethernet0, is routed by
//            ECMP (64 flows) to Ethernet4 or Ethernet8, whose TX ring is
//            Ethernet0's RX ring, so 256 frames circulate forever. SONiC
//            defaults: DSCP 3 -> lossless TC3 with PFC, WRED/ECN (ecn_all) on
//            queue 3, DWRR, the PFC watchdog, L2 rewrite, one Link per port;
//            ports at 800 Gbit/s so pacing never binds. Rate = frames the
//            egress ports sent per second.
#include <fmt/format.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dataplane/dpdk/clock.hpp"
#include "dataplane/dpdk/eal.hpp"
#include "dataplane/dpdk/port.hpp"
#include "switch/dpdk/runtime.hpp"

namespace {

using namespace rocemu;
using namespace rocemu::sw;

struct Rate {
    double mpps = 0;
    bool ok = false;
};

// testpmd prints "Rx-pps: N" per port every stats period; a period's rate is
// the sum over the ports. The first period (start-up) is left out.
Rate run_testpmd(const std::string& testpmd, uint32_t size, int seconds) {
    const std::string cmd = fmt::format(
        "timeout -s INT {} {} -l 0,1 --no-huge --no-pci -m 512 --file-prefix rocemu-swbench-tp-{} "
        "--vdev net_ring0 --vdev net_ring1 --log-level lib.eal:error -- --forward-mode=io --tx-first "
        "--stats-period 1 --nb-cores 1 --total-num-mbufs 8192 --mbuf-size {} --txpkts {} 2>&1",
        seconds + 3, testpmd, getpid(), size + 256, size);
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return {};
    std::vector<double> pps;
    char line[512];
    while (std::fgets(line, sizeof line, p)) {
        if (const char* at = std::strstr(line, "Rx-pps:")) pps.push_back(std::strtod(at + 7, nullptr));
    }
    pclose(p);
    if (pps.size() < 4) return {};
    double sum = 0;
    int periods = 0;
    for (size_t i = 2; i + 1 < pps.size(); i += 2, ++periods) sum += pps[i] + pps[i + 1];
    return {sum / periods / 1e6, periods > 0};
}

std::vector<uint8_t> frame(uint32_t size, uint16_t sport) {
    static const std::vector<uint8_t> payload(9000, 0x5A);
    wire::RocePacket p;
    p.l2.dst = wire::MacAddr{{0x02, 0, 0, 0, 0, 0xee}};
    p.l2.src = wire::MacAddr{{0x02, 0, 0, 0, 0, 0x0a}};
    p.l2.ethertype = wire::ethertype::kIpv4;
    p.l3.src = wire::IpAddr::from_v4(0x0A000001);
    p.l3.dst = wire::IpAddr::from_v4(0x0A090001);
    p.l3.dscp = 3;
    p.l3.ecn = wire::ecn::kEct0;
    p.udp_sport = sport;
    // A UD SEND needs 66 bytes of headers; a 64-byte frame is an RC
    // SEND_ONLY without payload (58 bytes) plus Ethernet padding.
    const bool ud = size >= 66;
    p.bth.opcode = ud ? 0x64 : 0x04;
    p.bth.dqpn = Qpn{0x11};
    p.deth.src_qp = Qpn{0x12};
    p.payload = payload.data();
    p.payload_len = ud ? (size - 66) & ~3u : 0;  // no BTH pad, so the frame is exactly `size`
    std::vector<uint8_t> f(wire::roce_frame_len(p));
    wire::encode_roce(p, f);
    f.resize(std::max<size_t>(f.size(), size), 0);
    return f;
}

rte_ring* ring(const std::string& name) {
    return rte_ring_create(name.c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
}

Rate run_switch(uint32_t size, int seconds, int serial) {
    const std::string s = std::to_string(serial);
    rte_ring* in = ring("swb_in" + s);
    rte_ring* sink = ring("swb_sink" + s);
    rte_ring* idle1 = ring("swb_i1" + s);
    rte_ring* idle2 = ring("swb_i2" + s);
    const int p0 = rte_eth_from_rings(("swb0_" + s).c_str(), &in, 1, &sink, 1, SOCKET_ID_ANY);
    const int p1 = rte_eth_from_rings(("swb1_" + s).c_str(), &idle1, 1, &in, 1, SOCKET_ID_ANY);
    const int p2 = rte_eth_from_rings(("swb2_" + s).c_str(), &idle2, 1, &in, 1, SOCKET_ID_ANY);
    if (p0 < 0 || p1 < 0 || p2 < 0) return {};
    dpdk::PortConfig pc;
    pc.link_wait = Nanos{0};
    pc.mbufs = 511;
    std::string err;
    std::vector<std::unique_ptr<dpdk::Port>> ports;
    for (int id : {p0, p1, p2}) {
        ports.push_back(dpdk::Port::attach(static_cast<uint16_t>(id), pc, err));
        if (!ports.back()) {
            fmt::print(stderr, "{}\n", err);
            return {};
        }
    }
    rte_mempool* pool =
        rte_pktmbuf_pool_create(("swb_pool" + s).c_str(), 1023, 0, 0, static_cast<uint16_t>(size + RTE_PKTMBUF_HEADROOM),
                                SOCKET_ID_ANY);
    if (!pool) return {};
    constexpr int kInFlight = 256, kFlows = 64;
    for (int i = 0; i < kInFlight; ++i) {
        const auto f = frame(size, static_cast<uint16_t>(0xC000 + i % kFlows));
        rte_mbuf* m = rte_pktmbuf_alloc(pool);
        char* d = m ? rte_pktmbuf_append(m, static_cast<uint16_t>(f.size())) : nullptr;
        if (!d) return {};
        std::memcpy(d, f.data(), f.size());
        rte_ring_enqueue(in, m);
    }

    SwitchConfig cfg = sonic_default_config(3, BitsPerSec::gbps(800));
    Rate r;
    {
        Switch sw(cfg);
        const uint32_t a = sw.routes().add_neighbor(1, {0x02, 0, 0, 0, 1, 1});
        const uint32_t b = sw.routes().add_neighbor(2, {0x02, 0, 0, 0, 2, 1});
        sw.routes().add_route_v4(0x0A090000, 16, sw.routes().add_group({a, b}));
        std::vector<LinkConfig> links(3, LinkConfig{.speed = cfg.ports[0].speed});
        live::SwitchRuntime rt(sw, {ports[0].get(), ports[1].get(), ports[2].get()}, links, nullptr);
        const dpdk::TscClock clock = dpdk::TscClock::starting_now();
        const auto sent = [&] { return rt.stats(1)[live::RtStat::TxFrames] + rt.stats(2)[live::RtStat::TxFrames]; };
        const Nanos warm = Nanos::from_ms(300), end = warm + Nanos::from_s(seconds);
        Nanos now = clock.now();
        while (now < warm) now = (rt.poll(now), clock.now());
        const uint64_t before = sent();
        const Nanos start = now;
        while (now < end) now = (rt.poll(now), clock.now());
        r = {static_cast<double>(sent() - before) / (now - start).seconds() / 1e6, true};
        const uint64_t marks = sw.queue_counters(1, 3).ecn_marks + sw.queue_counters(2, 3).ecn_marks;
        fmt::print("  switch {} B: {} frames out of Ethernet4, {} out of Ethernet8, lossless drops {}, ECN marks {}\n",
                   size, rt.stats(1)[live::RtStat::TxFrames], rt.stats(2)[live::RtStat::TxFrames],
                   live::lossless_drops(sw, 0), marks);
    }
    for (auto& p : ports) p.reset();
    rte_mbuf* m;
    while (rte_ring_dequeue(in, reinterpret_cast<void**>(&m)) == 0) rte_pktmbuf_free(m);
    while (rte_ring_dequeue(sink, reinterpret_cast<void**>(&m)) == 0) rte_pktmbuf_free(m);
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    int seconds = 3;
    std::string testpmd = "dpdk-testpmd";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--seconds" && i + 1 < argc) seconds = std::max(1, std::atoi(argv[++i]));
        else if (a == "--testpmd" && i + 1 < argc) testpmd = argv[++i];
        else {
            fmt::print(stderr, "usage: rocemu_switch_bench [--seconds N] [--testpmd PATH]\n");
            return 2;
        }
    }
    std::string err;
    if (!dpdk::Eal::init({"--log-level", "lib.eal:error", "--file-prefix", fmt::format("rocemu-swbench-{}", getpid())},
                         err)) {
        fmt::print(stderr, "{}\n", err);
        return 2;
    }
    fmt::print("rocemu switch vs dpdk-testpmd io forwarding, net_ring ports, one forwarding core, {} s each\n",
               seconds);
    struct Row {
        uint32_t size;
        Rate tp, sw;
    };
    std::vector<Row> rows;
    int serial = 0;
    for (const uint32_t size : {64u, 4096u}) {
        Row row{size, run_testpmd(testpmd, size, seconds), run_switch(size, seconds, serial++)};
        rows.push_back(row);
    }
    fmt::print("\n{:>6} {:>14} {:>14} {:>14} {:>14} {:>8}\n", "frame", "testpmd Mpps", "testpmd Gb/s", "switch Mpps",
               "switch Gb/s", "ratio");
    bool all = true;
    for (const Row& r : rows) {
        const auto gbps = [&](double mpps) { return mpps * 1e6 * r.size * 8 / 1e9; };
        fmt::print("{:>6} {:>14} {:>14} {:>14.2f} {:>14.1f} {:>8}\n", r.size,
                   r.tp.ok ? fmt::format("{:.2f}", r.tp.mpps) : "n/a", r.tp.ok ? fmt::format("{:.1f}", gbps(r.tp.mpps)) : "n/a",
                   r.sw.mpps, gbps(r.sw.mpps), r.tp.ok ? fmt::format("{:.1f}%", 100 * r.sw.mpps / r.tp.mpps) : "n/a");
        all = all && r.sw.ok;
    }
    fmt::print("target: switch >= 50% of testpmd's packet rate{}\n",
               rows[0].tp.ok ? "" : " (testpmd did not run: install dpdk-dev or pass --testpmd)");
    dpdk::Eal::cleanup();
    return all ? 0 : 1;
}
