// `rocemu perf write|read|send|atomic`: perftest-style bandwidth and latency
// between two emulated NICs, in this process over a net_ring pair
// (--loopback), or in two processes (server: no address; client: the
// server's address) paired over TCP like perftest.
#include <fmt/format.h>

#include <cstdlib>
#include <ctime>
#include <memory>
#include <unistd.h>

#include "tools/rocemu/commands.hpp"
#include "tools/rocemu/nic_cli.hpp"
#include "tools/rocemu/oob.hpp"
#include "verbs/perf.hpp"

namespace rocemu::cli {
namespace {

using namespace rocemu::verbs;

struct PerfCliOptions {
    PerfOptions perf;
    NicCliOptions nic;
    bool loopback = false;
    bool all_sizes = false;
    bool size_given = false;
    bool counters = false;
    bool busy_poll = false;
    int tcp_port = 18515;
    double wait_s = 60;
};

void print_result(const PerfOptions& p, const PerfResult& r) {
    fmt::print("{}\n{}\n", p.latency ? perf_lat_header() : perf_bw_header(),
               p.latency ? perf_lat_line(r) : perf_bw_line(r));
}

int run_loopback(PerfOp op, PerfCliOptions o) {
    if (std::string e = check_nic_options(o.nic); !e.empty() || !o.nic.server.empty() || !o.nic.port.empty()) {
        fmt::print(stderr, "rocemu perf: {}\n",
                   e.empty() ? "--loopback runs both NICs here: give no --port and no server address" : e);
        return 2;
    }
    o.perf.op = op;
    o.perf.nic = o.nic.profile;
    o.perf.port_mtu = static_cast<uint32_t>(o.nic.host.port_mtu);
    o.perf.eal_args = o.nic.eal_args;
    std::string error;
    std::unique_ptr<LoopbackPerf> lp = LoopbackPerf::open(o.perf, error);
    if (!lp) {
        fmt::print(stderr, "rocemu perf: {}\n", error);
        return 2;
    }
    std::vector<uint32_t> sizes;
    if (o.all_sizes && op != PerfOp::Atomic)
        for (uint32_t s = 1; s <= (1u << 20); s <<= 1) sizes.push_back(s);
    else
        sizes.push_back(o.perf.size);
    fmt::print("rocemu perf {} {} loopback (net_ring pair), {} QP(s), {}\n", to_string(op),
               o.perf.latency ? "latency" : "bandwidth", o.perf.qps, o.perf.verify ? "payload verified" : "unverified");
    fmt::print("{}\n", o.perf.latency ? perf_lat_header() : perf_bw_header());
    int status = 0;
    for (uint32_t s : sizes) {
        PerfOptions p = o.perf;
        p.size = s;
        PerfResult r;
        if (const int e = lp->run(p, r, error)) {
            fmt::print(stderr, "rocemu perf: {} B: {}\n", s, error);
            return e == EINVAL ? 2 : 1;
        }
        fmt::print("{}\n", o.perf.latency ? perf_lat_line(r) : perf_bw_line(r));
        if (o.perf.verify && r.verify_errors) {
            fmt::print(stderr, "rocemu perf: {} B: {} messages arrived corrupted\n", s, r.verify_errors);
            status = 1;
        }
    }
    return status;
}

int run_two_process(PerfOp op, PerfCliOptions o) {
    if (std::string e = check_nic_options(o.nic); !e.empty()) {
        fmt::print(stderr, "rocemu perf: {}\n", e);
        return 2;
    }
    if (o.nic.port.empty() || o.nic.host.ip.empty()) {
        fmt::print(stderr, "rocemu perf: give --port DEVSPEC and --ip ADDR/PREFIX (two processes: a server without an "
                           "address, a client with the server's), or --loopback for two NICs in this process\n");
        return 2;
    }
    if (o.all_sizes) {
        fmt::print(stderr, "rocemu perf: -a runs with --loopback only; give -s in two-process mode\n");
        return 2;
    }
    if (o.tcp_port < 1 || o.tcp_port > 65535 || o.wait_s <= 0) {
        fmt::print(stderr, "rocemu perf: -p must be 1-65535 and --wait positive\n");
        return 2;
    }
    o.perf.op = op;
    o.perf.sleep_when_idle = !o.busy_poll;
    srand48(static_cast<long>(getpid()) * static_cast<long>(time(nullptr)));
    std::string error;
    int status = 0;
    std::unique_ptr<oob::LineConn> linger;  // the client's TCP connection, closed after its device (PerfPeer::linger)
    {
        DeviceOptions d = device_options(o.nic);  // --cc, --nic-profile, ... included
        d.progress = Progress::App;  // one thread per process: no poll thread competing for the core
        // The server waits for its client over TCP anyway; a memif server's link comes up only when the client's
        // port starts, which a server blocked here would delay.
        if (o.nic.server.empty()) d.link_wait = Nanos{0};
        std::unique_ptr<Context> ctx = Context::open(d, o.nic.eal_args, error);
        if (!ctx) {
            fmt::print(stderr, "rocemu perf: {}\n", error);
            return 2;
        }
        PerfPeer peer;
        peer.server = o.nic.server;
        peer.tcp_port = static_cast<uint16_t>(o.tcp_port);
        peer.size_given = o.size_given;
        peer.wait = Nanos::from_s(o.wait_s);
        peer.linger = &linger;
        if (std::string e = resolve_gid_and_mtu(*ctx, o.nic, peer.gid_index, peer.mtu); !e.empty()) {
            fmt::print(stderr, "rocemu perf: {}\n", e);
            return 1;
        }
        const bool client = !peer.server.empty();
        if (client)
            fmt::print("rocemu perf {} {} client of {} (TCP port {}), {} QP(s), {}\n", to_string(op),
                       o.perf.latency ? "latency" : "bandwidth", peer.server, peer.tcp_port, o.perf.qps,
                       o.perf.verify ? "payload verified" : "unverified");
        else
            fmt::print("rocemu perf {} server on TCP port {}: waiting for a client\n", to_string(op), peer.tcp_port);
        std::fflush(stdout);
        PerfResult r;
        const int e = run_remote(*ctx, o.perf, peer, r, error);
        if (e) {
            fmt::print(stderr, "rocemu perf: {}\n", error);
            status = 1;
        } else {
            if (!client)
                fmt::print("client: {} B, {} QP(s), {}, {}\n", o.perf.size, o.perf.qps,
                           o.perf.latency ? "latency" : "bandwidth", o.perf.verify ? "payload verified" : "unverified");
            print_result(o.perf, r);
            if (r.verify_errors) {
                fmt::print(stderr, "rocemu perf: {}\n", error);
                status = 1;
            } else if (o.perf.verify) {
                fmt::print("payload verified end to end: {} messages intact\n", r.iterations);
            }
        }
        if (o.counters) {
            for (const auto& [name, v] : ctx->port_counters())
                if (v) fmt::print("{} {}\n", name, v);
            Counters c;
            ctx->query_counters(c);
            transport::for_each_counter(c, [](const char* name, uint64_t v) {
                if (v) fmt::print("{} {}\n", name, v);
            });
        }
        ctx->keep_port_open_at_exit();  // main() leaves with _Exit
    }
    return status;
}

}  // namespace

void add_perf_command(CLI::App& app, int& status) {
    CLI::App* perf = app.add_subcommand(
        "perf",
        "perftest-style bandwidth and latency of RDMA WRITE, READ, SEND and atomics between two emulated NICs: "
        "--loopback (two NICs in this process over net_ring), or two processes: a server (no address) and a "
        "client (the server's address), each with --port and --ip");
    perf->require_subcommand(1);
    const std::pair<const char*, PerfOp> ops[] = {
        {"write", PerfOp::Write}, {"read", PerfOp::Read}, {"send", PerfOp::Send}, {"atomic", PerfOp::Atomic}};
    for (const auto& [name, op] : ops) {
        auto o = std::make_shared<PerfCliOptions>();
        CLI::App* cmd = perf->add_subcommand(name, fmt::format("RDMA {} (atomic: FETCH_ADD of 8 bytes)", name));
        cmd->add_flag("--loopback", o->loopback, "two NICs in this process over a net_ring pair");
        add_nic_options(cmd, o->nic);
        // Not needed with --loopback; run_two_process asks for them otherwise.
        cmd->get_option("--port")->required(false);
        cmd->get_option("--ip")->required(false);
        cmd->add_option("-s,--size", o->perf.size, "message size in bytes (server: taken from the client if not given)")
            ->capture_default_str()
            ->each([o](const std::string&) { o->size_given = true; });
        cmd->add_flag("-a,--all", o->all_sizes, "every power of two from 1 B to 1 MiB (--loopback)");
        cmd->add_option("-n,--iters", o->perf.iters, "messages per QP")->capture_default_str();
        cmd->add_option("-q,--qps", o->perf.qps, "number of QPs")->capture_default_str();
        cmd->add_option("-t,--tx-depth", o->perf.tx_depth, "WRs in flight per QP")->capture_default_str();
        cmd->add_option("-D,--duration", o->perf.duration_s, "seconds to run instead of -n");
        cmd->add_flag("--latency", o->perf.latency, "one WR in flight; print t_min, t_typical, t_avg, t_99, t_99.9");
        cmd->add_flag("--verify", o->perf.verify, "check every payload byte end to end");
        cmd->add_flag("--busy-poll", o->busy_poll,
                      "two processes: never sleep when idle (default: 20 us after 64 turns without work)");
        cmd->add_flag("--counters", o->counters, "print the NIC's non-zero counters at the end (two processes)");
        cmd->add_option("-p,--tcp-port", o->tcp_port, "TCP port of the exchange (two processes)")->capture_default_str();
        cmd->add_option("--wait", o->wait_s, "seconds to wait for the peer (two processes)")->capture_default_str();
        cmd->add_option("server", o->nic.server, "the server's address (client); none: this is the server");
        cmd->add_option("eal", o->nic.eal_args, "EAL arguments, after --");
        cmd->callback([o, op = op, &status] {
            status = o->loopback ? run_loopback(op, *o) : run_two_process(op, *o);
        });
    }
}

}  // namespace rocemu::cli
