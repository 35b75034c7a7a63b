// `rocemu perf write|read|send|atomic`: perftest-style bandwidth and latency
// between two emulated NICs of this process over a net_ring pair.
#include <fmt/format.h>

#include <memory>

#include "tools/rocemu/commands.hpp"
#include "verbs/perf.hpp"

namespace rocemu::cli {
namespace {

using namespace rocemu::verbs;

struct PerfCliOptions {
    PerfOptions perf;
    bool loopback = false;
    bool all_sizes = false;
};

int run_perf(PerfOp op, PerfCliOptions o) {
    if (!o.loopback) {
        fmt::print(stderr, "rocemu perf: only --loopback (two NICs in this process over net_ring) is implemented\n");
        return 2;
    }
    o.perf.op = op;
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

}  // namespace

void add_perf_command(CLI::App& app, int& status) {
    CLI::App* perf = app.add_subcommand(
        "perf", "perftest-style bandwidth and latency of RDMA WRITE, READ, SEND and atomics between two emulated NICs");
    perf->require_subcommand(1);
    const std::pair<const char*, PerfOp> ops[] = {
        {"write", PerfOp::Write}, {"read", PerfOp::Read}, {"send", PerfOp::Send}, {"atomic", PerfOp::Atomic}};
    for (const auto& [name, op] : ops) {
        auto o = std::make_shared<PerfCliOptions>();
        CLI::App* cmd = perf->add_subcommand(name, fmt::format("RDMA {} (atomic: FETCH_ADD of 8 bytes)", name));
        cmd->add_flag("--loopback", o->loopback, "two NICs in this process over a net_ring pair");
        cmd->add_option("-s,--size", o->perf.size, "message size in bytes")->capture_default_str();
        cmd->add_flag("-a,--all", o->all_sizes, "every power of two from 1 B to 1 MiB");
        cmd->add_option("-n,--iters", o->perf.iters, "messages per QP")->capture_default_str();
        cmd->add_option("-q,--qps", o->perf.qps, "number of QPs")->capture_default_str();
        cmd->add_option("-t,--tx-depth", o->perf.tx_depth, "WRs in flight per QP")->capture_default_str();
        cmd->add_option("-D,--duration", o->perf.duration_s, "seconds to run instead of -n");
        cmd->add_flag("--latency", o->perf.latency, "one WR in flight; print t_min, t_typical, t_avg, t_99, t_99.9");
        cmd->add_flag("--verify", o->perf.verify, "check every payload byte end to end");
        cmd->add_option("--port-mtu", o->perf.port_mtu, "MTU of the ring ports (9000 gives a 4096 path MTU)")
            ->capture_default_str();
        cmd->add_option("eal", o->perf.eal_args, "EAL arguments, after --");
        cmd->callback([o, op = op, &status] { status = run_perf(op, *o); });
    }
}

}  // namespace rocemu::cli
