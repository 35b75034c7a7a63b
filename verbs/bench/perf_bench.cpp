// rocemu_perf_bench: what `rocemu perf --loopback` achieves next to the
// ceiling a NIC that copies payload once cannot beat, measured in one run:
//   - 64 KiB RDMA WRITE over a net_ring pair vs single-core memcpy from cold
//     memory (buffers far larger than the last-level cache), as a ratio;
//   - 64 B SEND message rate.
// On a loaded machine the wall-clock figures measure the share of a core the
// process got, so each is also printed per CPU-second of the thread that ran
// it (both NICs and the application run on one thread; memcpy likewise).
// Not part of ctest.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "verbs/perf.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Rate {
    double wall_gbps = 0;
    double cpu_gbps = 0;  // per CPU-second of this thread
};

// Copies 64 KiB blocks through 256 MiB buffers, so no block is in cache.
Rate cold_memcpy() {
    constexpr size_t kBuf = 256u << 20, kBlock = 64u << 10;
    std::vector<uint8_t> src(kBuf, 1), dst(kBuf, 2);
    Rate best;
    for (int round = 0; round < 3; ++round) {
        const double c0 = rocemu::verbs::thread_cpu_seconds();
        const auto t0 = Clock::now();
        for (size_t off = 0; off < kBuf; off += kBlock) std::memcpy(dst.data() + off, src.data() + off, kBlock);
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        const double c = rocemu::verbs::thread_cpu_seconds() - c0;
        best.wall_gbps = std::max(best.wall_gbps, kBuf * 8 / s / 1e9);
        best.cpu_gbps = std::max(best.cpu_gbps, kBuf * 8 / c / 1e9);
    }
    if (dst[kBuf - 1] != 1) fmt::print("memcpy lost bytes\n");
    return best;
}

double per_cpu_second(const rocemu::verbs::PerfResult& r, double unit) {
    return r.cpu_s > 0 ? static_cast<double>(r.iterations) * unit / r.cpu_s : 0;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace rocemu::verbs;
    PerfOptions base;
    base.eal_args = {"--log-level", "lib.eal:error"};
    base.port_mtu = 9000;  // path MTU 4096, as a jumbo-frame RoCE fabric runs
    for (int i = 1; i < argc; ++i)
        if (std::strcmp(argv[i], "--counters") != 0) base.eal_args.emplace_back(argv[i]);
    std::string error;
    auto lp = LoopbackPerf::open(base, error);
    if (!lp) {
        fmt::print(stderr, "rocemu_perf_bench: {}\n", error);
        return 1;
    }
    PerfOptions w = base;
    w.op = PerfOp::Write;
    w.size = 64 << 10;
    w.duration_s = 3;
    PerfResult wr;
    if (lp->run(w, wr, error)) {
        fmt::print(stderr, "rocemu_perf_bench: write: {}\n", error);
        return 1;
    }
    PerfOptions s = base;
    s.op = PerfOp::Send;
    s.size = 64;
    s.duration_s = 3;
    PerfResult sr;
    if (lp->run(s, sr, error)) {
        fmt::print(stderr, "rocemu_perf_bench: send: {}\n", error);
        return 1;
    }
    if (argc > 1 && std::strcmp(argv[1], "--counters") == 0) fmt::print("counters after both runs:\n{}", lp->counters());
    // The same SEND run with one ACK per AckReq packet (as rxe answers), the
    // baseline of the NIC's ACK coalescing, measured in this run.
    lp.reset();
    PerfOptions each_ack = base;
    each_ack.nic.coalesce_acks = false;
    lp = LoopbackPerf::open(each_ack, error);
    PerfResult sr_each;
    if (!lp || lp->run(s, sr_each, error)) {
        fmt::print(stderr, "rocemu_perf_bench: send without ACK coalescing: {}\n", error);
        return 1;
    }
    const Rate mc = cold_memcpy();
    fmt::print("{}\n{}   (loopback 64 KiB WRITE, path MTU 4096, 3 s)\n{}   (loopback 64 B SEND, 3 s)\n", perf_bw_header(),
               perf_bw_line(wr), perf_bw_line(sr));
    const double wr_cpu = per_cpu_second(wr, wr.bytes * 8 / 1e9);
    fmt::print("single-core cold memcpy: {:.1f} Gbit/s ({:.1f} per CPU-second)\n", mc.wall_gbps, mc.cpu_gbps);
    fmt::print("ratio loopback 64 KiB WRITE / cold memcpy: {:.1f}% (target >= 40%)\n", 100 * wr.bw_avg_gbps / mc.wall_gbps);
    fmt::print("  per CPU-second: {:.2f} / {:.1f} Gbit/s = {:.1f}% (WRITE used {:.2f} CPU-s in {} s)\n", wr_cpu,
               mc.cpu_gbps, 100 * wr_cpu / mc.cpu_gbps, wr.cpu_s, w.duration_s);
    fmt::print("64 B SEND message rate: {:.3f} Mpps ({:.3f} per CPU-second)\n", sr.msg_rate_mpps,
               per_cpu_second(sr, 1e-6));
    fmt::print("  the same with one ACK per SEND (--no-ack-coalescing): {:.3f} Mpps ({:.3f} per CPU-second)\n",
               sr_each.msg_rate_mpps, per_cpu_second(sr_each, 1e-6));
    return 0;
}
