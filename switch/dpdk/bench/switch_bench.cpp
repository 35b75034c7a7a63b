// Forwarding rate of the soft-switch on one core against dpdk-testpmd io
// forwarding over the same ports, in one run, at 64 B and 4 KiB.
//
// memif (the comparison the target is judged on; README "Measured"): three
// processes, generator/sink -> forwarder -> generator/sink, the forwarder
// being either
//   testpmd: io forwarding, --port-topology=chained over three memif ports
//            (0 -> 1 -> 2 -> 0), its forwarding lcore on CPU 1;
//   rocemu:  `rocemu switch` (this binary re-executed as run_switch(), the
//            code behind the command) on three memif ports with
//            configs/switch/bench-800g.yaml: SONiC defaults (PFC on TC3/TC4,
//            WRED/ECN ecn_all on queues 3 and 4, DWRR, the watchdog), ECMP
//            over Ethernet4 and Ethernet8, L2 rewrite, a Link per port,
//            --busy-poll, its lcore on CPU 1.
// The generator/sink is this process on CPU 0 for both: it sends 64 flows of
// RoCEv2 frames (DSCP 3, ECT(0)) into port 0 as fast as the ring takes them
// and counts what comes back on ports 1 and 2. Every memif frame is copied
// twice by the forwarder (RX into an mbuf, TX into the ring), as in real use.
//
// net_ring (kept for reference): one process, rte_ring "wires", no copies.
//   testpmd: io forwarding between net_ring0 and net_ring1 (each a loopback
//            ring), 32 frames per port in flight, the sum of Rx-pps.
//   rocemu:  256 frames circulating Ethernet0 -> ECMP -> Ethernet4/8 -> back.
// testpmd io there moves pointers between rings and reads no header, so that
// line shows the cost of the switch's work, not a like-for-like rate.
#include <fmt/format.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "dataplane/dpdk/clock.hpp"
#include "dataplane/dpdk/eal.hpp"
#include "dataplane/dpdk/port.hpp"
#include "switch/dpdk/runner.hpp"
#include "switch/dpdk/runtime.hpp"

extern char** environ;

namespace {

using namespace rocemu;
using namespace rocemu::sw;

constexpr int kFlows = 64;

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }
constexpr const char* kForwardSwitch = "--forward-switch";
constexpr const char* kForwardIo = "--forward-io";
// As run_switch: a turn longer than this lost the core to another process.
constexpr uint64_t kPreemptedTurnUs = 500;

struct Rate {
    double mpps = 0;
    bool ok = false;
    double offered_full = 0;  // memif: share of the generator's bursts the ring did not fully take
    double cycles = 0;        // TSC cycles per packet in the forwarder's busy turns (0: not measured)
    double cpu_s = 0;         // memif: CPU time the forwarder process ran in the measured window
    double per_cpu_mpps = 0;  // memif: frames delivered per second of that CPU time
    std::string note;
};

// The EAL leaves its runtime directory behind; the benchmark's processes
// use per-run prefixes, so each is removed when its process is done.
void remove_runtime_dir(const std::string& prefix) {
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::path(rte_eal_get_runtime_dir()).parent_path() / prefix, ec);
}

// "CPU cycles/packet=N" as testpmd --record-core-cycles and rocemu switch --record-cycles print it.
double cycles_per_packet(const std::string& out) {
    const size_t at = out.rfind("CPU cycles/packet=");
    return at == std::string::npos ? 0 : std::strtod(out.c_str() + at + 18, nullptr);
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

// --- net_ring ---------------------------------------------------------------

// testpmd prints "Rx-pps: N" per port every stats period; a period's rate is
// the sum over the ports. The first period (start-up) is left out.
Rate run_testpmd_ring(const std::string& testpmd, uint32_t size, int seconds) {
    const std::string cmd = fmt::format(
        "timeout -s INT {} {} -l 0,1 --no-huge --no-pci -m 512 --file-prefix rocemu-swbench-tp-{} "
        "--vdev net_ring0 --vdev net_ring1 --log-level lib.eal:error -- --forward-mode=io --tx-first "
        "--stats-period 1 --nb-cores 1 --total-num-mbufs 8192 --mbuf-size {} --txpkts {} --record-core-cycles 2>&1",
        seconds + 3, testpmd, getpid(), size + 256, size);
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return {};
    std::vector<double> pps;
    std::string out;
    char line[512];
    while (std::fgets(line, sizeof line, p)) {
        if (const char* at = std::strstr(line, "Rx-pps:")) pps.push_back(std::strtod(at + 7, nullptr));
        if (std::strstr(line, "CPU cycles/packet=")) out += line;
    }
    pclose(p);
    remove_runtime_dir(fmt::format("rocemu-swbench-tp-{}", getpid()));
    if (pps.size() < 4) return {};
    double sum = 0;
    int periods = 0;
    for (size_t i = 2; i + 1 < pps.size(); i += 2, ++periods) sum += pps[i] + pps[i + 1];
    Rate r{sum / periods / 1e6, periods > 0};
    r.cycles = cycles_per_packet(out);
    return r;
}

rte_ring* ring(const std::string& name) {
    return rte_ring_create(name.c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
}

Rate run_switch_ring(uint32_t size, int seconds, int serial) {
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
    constexpr int kInFlight = 256;
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
        live::RuntimeOptions ro;
        ro.telemetry = false;
        live::SwitchRuntime rt(sw, {ports[0].get(), ports[1].get(), ports[2].get()}, links, nullptr, ro);
        const dpdk::TscClock clock = dpdk::TscClock::starting_now();
        const auto sent = [&] { return rt.stats(1)[live::RtStat::TxFrames] + rt.stats(2)[live::RtStat::TxFrames]; };
        const Nanos warm = Nanos::from_ms(300), end = warm + Nanos::from_s(seconds);
        Nanos now = clock.now();
        while (now < warm) now = (rt.poll(now), clock.now());
        const uint64_t before = sent();
        const Nanos start = now;
        live::BusyCycles busy;
        busy.limit = rte_get_tsc_hz() / 1000000 * kPreemptedTurnUs;
        while (now < end) {
            const uint64_t t0 = rte_rdtsc();
            const uint32_t n = rt.poll(now);
            if (n) busy.turn(rte_rdtsc() - t0, n);
            now = clock.now();
        }
        r = {static_cast<double>(sent() - before) / (now - start).seconds() / 1e6, true};
        r.cycles = busy.per_frame();
        r.note = fmt::format("{} frames out of Ethernet4, {} out of Ethernet8, lossless drops {}",
                             rt.stats(1)[live::RtStat::TxFrames], rt.stats(2)[live::RtStat::TxFrames],
                             live::lossless_drops(sw, 0) + live::lossless_drops(sw, 1) + live::lossless_drops(sw, 2));
    }
    for (auto& p : ports) p.reset();
    rte_mbuf* m;
    while (rte_ring_dequeue(in, reinterpret_cast<void**>(&m)) == 0) rte_pktmbuf_free(m);
    while (rte_ring_dequeue(sink, reinterpret_cast<void**>(&m)) == 0) rte_pktmbuf_free(m);
    return r;
}

// --- memif ------------------------------------------------------------------

// A forwarder process with stdout and stderr on a pipe.
struct Child {
    pid_t pid = -1;
    int out = -1;

    static Child spawn(const std::vector<std::string>& argv) {
        Child c;
        int fds[2];
        if (pipe(fds) != 0) return c;
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
        posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
        posix_spawn_file_actions_addclose(&fa, fds[0]);
        std::vector<char*> args;
        for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        if (posix_spawnp(&c.pid, args[0], &fa, nullptr, args.data(), environ) != 0) c.pid = -1;
        posix_spawn_file_actions_destroy(&fa);
        close(fds[1]);
        c.out = fds[0];
        return c;
    }
    std::string text;  // what it printed so far

    // Until it printed `line` (true), exited or `timeout` passed (false).
    bool wait_for(const std::string& line, Nanos timeout) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout.v);
        while (text.find(line) == std::string::npos) {
            if (std::chrono::steady_clock::now() >= deadline) return false;
            pollfd pfd{out, POLLIN, 0};
            if (poll(&pfd, 1, 100) <= 0) continue;
            char buf[4096];
            const ssize_t n = read(out, buf, sizeof buf);
            if (n <= 0) return false;
            text.append(buf, static_cast<size_t>(n));
        }
        return true;
    }
    // SIGINT, then everything it printed.
    std::string stop() {
        if (pid > 0) kill(pid, SIGINT);
        char buf[4096];
        for (ssize_t n; out >= 0 && (n = read(out, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
        if (out >= 0) close(out);
        if (pid > 0) waitpid(pid, nullptr, 0);
        pid = -1;
        out = -1;
        return text;
    }
};

enum class Fwd { Testpmd, Io, Switch };
const char* fwd_name(Fwd f) { return f == Fwd::Testpmd ? "testpmd" : f == Fwd::Io ? "io" : "switch"; }

// CPU time all threads of `pid` have run, from the scheduler's own account
// (/proc/PID/task/TID/schedstat, first field in ns): time other processes
// took from the core is not in it.
double cpu_seconds(pid_t pid) {
    uint64_t ns = 0;
    std::error_code ec;
    for (const auto& t : std::filesystem::directory_iterator(fmt::format("/proc/{}/task", pid), ec)) {
        FILE* f = std::fopen((t.path() / "schedstat").c_str(), "r");
        if (!f) continue;
        unsigned long long run = 0;
        if (std::fscanf(f, "%llu", &run) == 1) ns += run;
        std::fclose(f);
    }
    return static_cast<double>(ns) / 1e9;
}

struct MemifEnv {
    std::string testpmd;
    std::string self;
    std::string config;
    uint32_t mbuf_size = 0;  // testpmd's, set to what `rocemu switch` gives its ports for the config's MTU
};

std::string grep_lines(const std::string& text, const std::vector<std::string>& keys) {
    std::string out;
    size_t at = 0;
    while (at < text.size()) {
        const size_t end = std::min(text.find('\n', at), text.size());
        const std::string line = text.substr(at, end - at);
        for (const std::string& k : keys)
            if (line.find(k) != std::string::npos) {
                out += (out.empty() ? "" : "; ") + line.substr(line.find_first_not_of(' '));
                break;
            }
        at = end + 1;
    }
    return out;
}

Rate run_memif(Fwd fwd, const MemifEnv& env, uint32_t size, int seconds, int serial) {
    const std::string tag = fmt::format("{}-{}", getpid(), serial);
    std::vector<std::string> socks;
    for (int i = 0; i < 3; ++i) socks.push_back(fmt::format("/tmp/swbench-{}-{}.sock", tag, i));
    const auto server = [&](int i) {
        return fmt::format("net_memif{},role=server,socket={},socket-abstract=no", i, socks[static_cast<size_t>(i)]);
    };
    const std::string prefix = "rocemu-swbench-fwd-" + tag;
    std::vector<std::string> argv;
    if (fwd == Fwd::Testpmd) {
        argv = {env.testpmd, "-l", "0,1", "--no-huge", "--no-pci", "-m", "512", "--file-prefix", prefix,
                "--log-level", "lib.eal:error"};
        for (int i = 0; i < 3; ++i) argv.insert(argv.end(), {"--vdev", server(i)});
        argv.insert(argv.end(), {"--", "--forward-mode=io", "--port-topology=chained", "--stats-period", "1",
                                 "--nb-cores", "1", "--total-num-mbufs", std::to_string(3 * dpdk::PortConfig{}.mbufs),
                                 "--mbuf-size", std::to_string(env.mbuf_size), "--record-core-cycles"});
    } else {
        argv = {env.self, fwd == Fwd::Io ? kForwardIo : kForwardSwitch, env.config};
        for (int i = 0; i < 3; ++i) argv.push_back(server(i));
        argv.insert(argv.end(), {"--", "-l", "1", "--file-prefix", prefix, "--log-level", "lib.eal:error"});
    }
    Child child = Child::spawn(argv);
    Rate r;
    const auto fail = [&](const std::string& why) {
        const std::string out = child.stop();
        remove_runtime_dir(prefix);
        fmt::print(stderr, "  memif {}: {}\n{}\n", fwd_name(fwd), why, out);
        for (const auto& s : socks) std::filesystem::remove(s);
        return Rate{};
    };
    if (child.pid < 0) return fail("cannot start " + argv[0]);
    // A memif client that connects before the server's port is started is
    // refused and does not retry: wait until the forwarder says it runs.
    if (!child.wait_for(fwd == Fwd::Testpmd ? "start packet forwarding" : "ready", Nanos::from_s(20)))
        return fail("not ready after 20 s");

    std::vector<std::unique_ptr<dpdk::Port>> ports;
    std::string err;
    for (int i = 0; i < 3; ++i) {
        dpdk::PortConfig pc;
        pc.devspec = fmt::format("net_memif{},role=client,socket={},socket-abstract=no", 10 + serial * 3 + i,
                                 socks[static_cast<size_t>(i)]);
        pc.min_frame_room = size + 64;
        pc.mbufs = 4095;
        pc.link_wait = Nanos::from_s(10);
        ports.push_back(dpdk::Port::open(pc, err));
        if (!ports.back()) return fail(err);
    }
    // One mbuf per flow, sent over and over: memif copies the bytes into its
    // ring, so the generator only bumps a reference count per frame.
    rte_mempool* pool = rte_pktmbuf_pool_create(("swbm_pool" + std::to_string(serial)).c_str(), 127, 0, 0,
                                                static_cast<uint16_t>(size + 64 + RTE_PKTMBUF_HEADROOM), SOCKET_ID_ANY);
    if (!pool) return fail("cannot create the generator's pool");
    std::vector<rte_mbuf*> flows;
    for (int i = 0; i < kFlows; ++i) {
        const auto f = frame(size, static_cast<uint16_t>(0xC000 + i));
        rte_mbuf* m = rte_pktmbuf_alloc(pool);
        char* d = m ? rte_pktmbuf_append(m, static_cast<uint16_t>(f.size())) : nullptr;
        if (!d) return fail("cannot build the frames");
        std::memcpy(d, f.data(), f.size());
        flows.push_back(m);
    }

    const uint16_t tx_port = ports[0]->id(), rx1 = ports[1]->id(), rx2 = ports[2]->id();
    const dpdk::TscClock clock = dpdk::TscClock::starting_now();
    const Nanos warm = Nanos::from_ms(500), end = warm + Nanos::from_s(seconds);
    uint64_t received = 0, bursts = 0, short_bursts = 0, received_before = 0, next = 0;
    bool measuring = false;
    Nanos now = clock.now(), start{};
    double cpu_before = 0;
    rte_mbuf* tx[32];
    rte_mbuf* rx[32];
    while (now < end) {
        if (!measuring && now >= warm) {
            measuring = true;
            received_before = received;
            bursts = short_bursts = 0;
            start = now;
            cpu_before = cpu_seconds(child.pid);
        }
        for (int i = 0; i < 32; ++i) {
            tx[i] = flows[next++ % kFlows];
            rte_mbuf_refcnt_update(tx[i], 1);
        }
        const uint16_t took = rte_eth_tx_burst(tx_port, 0, tx, 32);
        for (uint16_t i = took; i < 32; ++i) rte_mbuf_refcnt_update(tx[i], -1);
        next -= 32 - took;
        ++bursts;
        short_bursts += took < 32;
        for (const uint16_t p : {rx1, rx2}) {
            const uint16_t n = rte_eth_rx_burst(p, 0, rx, 32);
            received += n;
            rte_pktmbuf_free_bulk(rx, n);
        }
        now = clock.now();
    }
    r.cpu_s = cpu_seconds(child.pid) - cpu_before;
    r.ok = measuring && received > received_before;
    r.mpps = static_cast<double>(received - received_before) / (now - start).seconds() / 1e6;
    r.offered_full = bursts ? 100.0 * static_cast<double>(short_bursts) / static_cast<double>(bursts) : 0;
    r.per_cpu_mpps = r.cpu_s > 0 ? static_cast<double>(received - received_before) / r.cpu_s / 1e6 : 0;
    const std::string out = child.stop();
    remove_runtime_dir(prefix);
    r.cycles = cycles_per_packet(out);
    r.note = fwd == Fwd::Testpmd ? "" : grep_lines(out, {"lossless_drops", "left out as preempted"});
    if (getenv("SWB_DEBUG")) fmt::print("{}\n", out);
    ports.clear();
    for (rte_mbuf* m : flows) rte_pktmbuf_free(m);
    rte_mempool_free(pool);
    for (const auto& s : socks) std::filesystem::remove(s);
    return r;
}

// The forwarder side of a memif run: what `rocemu switch --busy-poll` does.
int forward_switch(int argc, char** argv) {
    live::SwitchRunOptions o;
    o.config = argv[2];
    const char* names[] = {"Ethernet0", "Ethernet4", "Ethernet8"};
    int i = 3;
    for (int p = 0; p < 3 && i < argc; ++p, ++i) o.live.ports.push_back(fmt::format("{}={}", names[p], argv[i]));
    o.live.neighbors = {"10.0.1.2=02:00:00:00:01:01@Ethernet4", "10.0.2.2=02:00:00:00:02:01@Ethernet8"};
    o.live.routes = {"10.9.0.0/16=10.0.1.2,10.0.2.2"};
    o.busy_poll = true;
    o.record_cycles = true;
    o.link_wait_s = 0;
    if (i < argc && std::string(argv[i]) == "--") ++i;
    for (; i < argc; ++i) o.eal_args.push_back(argv[i]);
    return live::run_switch(o);
}

// testpmd's io forwarding loop (--port-topology=chained: RX of port i goes
// out of port i+1, what TX does not take is freed), on the ports `rocemu
// switch` would open, with the switch's cycle count.
int forward_io(int argc, char** argv) {
    const ConfigResult cr = load_switch_config(argv[2]);
    if (!cr.config) return 2;
    std::vector<std::string> eal;
    int i = 6;
    if (i < argc && std::string(argv[i]) == "--") ++i;
    for (; i < argc; ++i) eal.push_back(argv[i]);
    std::string err;
    if (!dpdk::Eal::init(eal, err)) {
        fmt::print(stderr, "{}\n", err);
        return 2;
    }
    std::signal(SIGINT, on_signal);
    std::vector<std::unique_ptr<dpdk::Port>> ports;
    for (int p = 0; p < 3; ++p) {
        dpdk::PortConfig pc;
        pc.devspec = argv[3 + p];
        pc.min_frame_room = cr.config->ports[0].mtu + 26;
        pc.link_wait = Nanos{0};
        ports.push_back(dpdk::Port::open(pc, err));
        if (!ports.back()) {
            fmt::print(stderr, "{}\n", err);
            return 2;
        }
    }
    fmt::print("io forward: ready\n");
    std::fflush(stdout);
    live::BusyCycles busy;
    busy.limit = rte_get_tsc_hz() / 1000000 * kPreemptedTurnUs;
    rte_mbuf* pkts[32];
    while (!g_stop) {
        for (int p = 0; p < 3; ++p) {
            const uint64_t t0 = rte_rdtsc();
            const uint16_t n = rte_eth_rx_burst(ports[static_cast<size_t>(p)]->id(), 0, pkts, 32);
            if (!n) continue;
            const uint16_t sent = rte_eth_tx_burst(ports[static_cast<size_t>((p + 1) % 3)]->id(), 0, pkts, n);
            if (sent < n) rte_pktmbuf_free_bulk(pkts + sent, n - sent);
            busy.turn(rte_rdtsc() - t0, n);
        }
    }
    fmt::print("io forward: {}\n", busy.line(rte_get_tsc_hz()));
    ports.clear();
    dpdk::Eal::cleanup();
    return 0;
}

std::string default_config() {
    for (const char* c : {"configs/switch/bench-800g.yaml", ROCEMU_SOURCE_DIR "/configs/switch/bench-800g.yaml"})
        if (std::filesystem::exists(c)) return c;
    return {};
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1 && (std::string(argv[1]) == kForwardSwitch || std::string(argv[1]) == kForwardIo)) {
        if (argc < 6) return 2;
        return std::string(argv[1]) == kForwardIo ? forward_io(argc, argv) : forward_switch(argc, argv);
    }
    int seconds = 3, rounds = 1;
    MemifEnv env{.testpmd = "dpdk-testpmd", .self = std::filesystem::read_symlink("/proc/self/exe").string(),
                 .config = default_config()};
    bool ring_ports = true, memif_ports = true;
    const auto usage = [] {
        fmt::print(stderr,
                   "usage: rocemu_switch_bench [--seconds N] [--rounds N] [--ports memif|ring|both] [--testpmd PATH] "
                   "[--config FILE]\n");
        return 2;
    };
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has = i + 1 < argc;
        if (a == "--seconds" && has) seconds = std::max(1, std::atoi(argv[++i]));
        else if (a == "--rounds" && has) rounds = std::max(1, std::atoi(argv[++i]));
        else if (a == "--testpmd" && has) env.testpmd = argv[++i];
        else if (a == "--config" && has) env.config = argv[++i];
        else if (a == "--ports" && has) {
            const std::string v = argv[++i];
            if (v != "memif" && v != "ring" && v != "both") return usage();
            ring_ports = v != "memif";
            memif_ports = v != "ring";
        } else {
            return usage();
        }
    }
    if (memif_ports && (env.config.empty() || !std::filesystem::exists(env.config))) {
        fmt::print(stderr, "rocemu_switch_bench: no switch config: pass --config configs/switch/bench-800g.yaml\n");
        return 2;
    }
    if (memif_ports) {
        const ConfigResult cr = load_switch_config(env.config);
        if (!cr.config) {
            fmt::print(stderr, "rocemu_switch_bench: {}\n", cr.error);
            return 2;
        }
        // As run_switch sizes them: room for an MTU frame with Ethernet, VLAN and FCS.
        env.mbuf_size = RTE_PKTMBUF_HEADROOM + std::max<uint32_t>(RTE_MBUF_DEFAULT_DATAROOM, cr.config->ports[0].mtu + 26);
    }
    std::string err;
    if (!dpdk::Eal::init({"-l", "0", "--log-level", "lib.eal:error", "--file-prefix",
                          fmt::format("rocemu-swbench-{}", getpid())},
                         err)) {
        fmt::print(stderr, "{}\n", err);
        return 2;
    }
    fmt::print("rocemu switch (PFC, ECN, ECMP on) vs dpdk-testpmd io forwarding, one forwarding core, {} s per run\n"
               "memif: generator/sink process on CPU 0 -> forwarder process on CPU 1 -> back; net_ring: one process\n",
               seconds);
    struct Row {
        std::string ports;
        int round;
        uint32_t size;
        Rate tp, io, sw;
    };
    std::vector<Row> rows;
    int serial = 0;
    for (int round = 1; round <= rounds; ++round) {
        for (const uint32_t size : {64u, 4096u}) {
            if (memif_ports) {
                Row row{"memif", round, size, {}, {}, {}};
                row.tp = run_memif(Fwd::Testpmd, env, size, seconds, serial++);
                row.io = run_memif(Fwd::Io, env, size, seconds, serial++);
                row.sw = run_memif(Fwd::Switch, env, size, seconds, serial++);
                for (const auto& [name, x] : {std::pair{"testpmd", row.tp}, std::pair{"io", row.io},
                                              std::pair{"switch", row.sw}})
                    fmt::print("  memif {} B round {}: {:7} {:.2f} Mpps delivered, forwarder ran {:.2f} CPU s, "
                               "{:.0f} cycles/packet, generator's bursts cut short {:.0f}%{}\n",
                               size, round, name, x.mpps, x.cpu_s, x.cycles, x.offered_full,
                               x.note.empty() ? "" : "; " + x.note);
                rows.push_back(row);
            }
            if (ring_ports) {
                Row row{"net_ring", round, size, run_testpmd_ring(env.testpmd, size, seconds), {},
                        run_switch_ring(size, seconds, serial++)};
                fmt::print("  net_ring {} B round {}: testpmd {:.2f} Mpps, {:.1f} cycles/packet; switch {:.2f} Mpps, "
                           "{:.1f} cycles/packet, {}\n",
                           size, round, row.tp.mpps, row.tp.cycles, row.sw.mpps, row.sw.cycles, row.sw.note);
                rows.push_back(row);
            }
        }
    }
    // Side by side: what each forwarder delivered with the generator on the
    // other core, on this machine as loaded when it ran. Cycles per packet:
    // the forwarder's own busy-turn count, which is the rate it would reach
    // on a core of its own; testpmd's own count (--record-core-cycles) keeps
    // turns in which the core was taken away, "io" (testpmd's loop in this
    // binary) and the switch leave those out, so "per core" compares them.
    fmt::print("\n{:>8} {:>5} {:>5} | {:>31} {:>21} | {:>33} {:>8}\n", "", "", "", "side by side, Mpps", "",
               "cycles/packet", "per core");
    fmt::print("{:>8} {:>5} {:>5} | {:>9} {:>9} {:>9} {:>8} {:>8} | {:>9} {:>9} {:>9} {:>8}\n", "ports", "frame",
               "round", "testpmd", "io", "switch", "Gbit/s", "ratio", "testpmd", "io", "switch", "ratio");
    bool all = true;
    for (const Row& r : rows) {
        const auto num = [](double v, int prec) { return v > 0 ? fmt::format("{:.{}f}", v, prec) : "n/a"; };
        const auto pct = [](double a, double b) { return a > 0 && b > 0 ? fmt::format("{:.1f}%", 100 * a / b) : "n/a"; };
        // The per-core baseline: testpmd's loop measured like the switch
        // where it ran (memif), else testpmd's own count (net_ring, one process).
        const double base = r.io.cycles > 0 ? r.io.cycles : r.tp.cycles;
        fmt::print("{:>8} {:>5} {:>5} | {:>9} {:>9} {:>9} {:>8.1f} {:>8} | {:>9} {:>9} {:>9} {:>8}\n", r.ports, r.size,
                   r.round, num(r.tp.mpps, 2), num(r.io.mpps, 2), num(r.sw.mpps, 2), r.sw.mpps * r.size * 8 / 1e3,
                   pct(r.sw.mpps, r.tp.mpps), num(r.tp.cycles, 0), num(r.io.cycles, 0), num(r.sw.cycles, 0),
                   pct(base, r.sw.cycles));
        all = all && r.sw.ok;
    }
    // The verdict: medians over the rounds, per frame size, on memif.
    const auto median = [](std::vector<double> v) {
        if (v.empty()) return 0.0;
        std::sort(v.begin(), v.end());
        return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    };
    for (const uint32_t size : {64u, 4096u}) {
        std::vector<double> side, core;
        for (const Row& r : rows) {
            if (r.ports != "memif" || r.size != size) continue;
            if (r.tp.mpps > 0 && r.sw.mpps > 0) side.push_back(r.sw.mpps / r.tp.mpps);
            if (r.io.cycles > 0 && r.sw.cycles > 0) core.push_back(r.io.cycles / r.sw.cycles);
        }
        if (!core.empty())
            fmt::print("memif {} B, median of {} rounds: switch/testpmd side by side {:.1f}%, per core (cycles, testpmd's "
                       "loop / switch) {:.1f}%\n",
                       size, core.size(), 100 * median(side), 100 * median(core));
    }
    fmt::print("target: switch >= 50% of testpmd's packet rate on memif{}\n",
               rows.empty() || rows[0].tp.ok ? "" : " (testpmd did not run: install dpdk-dev or pass --testpmd)");
    const std::string own_dir = rte_eal_get_runtime_dir();
    dpdk::Eal::cleanup();
    std::error_code ec;
    std::filesystem::remove_all(own_dir, ec);
    return all ? 0 : 1;
}
