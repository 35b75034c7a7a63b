// rocemu_perf_bench: what `rocemu perf --loopback` achieves next to the
// ceiling a NIC that copies payload once cannot beat, measured in one run:
//   - 64 KiB RDMA WRITE over a net_ring pair vs single-core memcpy from cold
//     memory (buffers far larger than the last-level cache), as a ratio;
//   - 64 B SEND message rate.
// Not part of ctest: run it on an otherwise idle machine.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "verbs/perf.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// Copies 64 KiB blocks through 256 MiB buffers, so no block is in cache.
double cold_memcpy_gbps() {
    constexpr size_t kBuf = 256u << 20, kBlock = 64u << 10;
    std::vector<uint8_t> src(kBuf, 1), dst(kBuf, 2);
    double best = 0;
    for (int round = 0; round < 3; ++round) {
        const auto t0 = Clock::now();
        for (size_t off = 0; off < kBuf; off += kBlock) std::memcpy(dst.data() + off, src.data() + off, kBlock);
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        best = std::max(best, kBuf * 8 / s / 1e9);
    }
    if (dst[kBuf - 1] != 1) fmt::print("memcpy lost bytes\n");
    return best;
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
    const double mc = cold_memcpy_gbps();
    fmt::print("{}\n{}   (loopback 64 KiB WRITE, path MTU 4096, 3 s)\n{}   (loopback 64 B SEND, 3 s)\n", perf_bw_header(),
               perf_bw_line(wr), perf_bw_line(sr));
    fmt::print("single-core cold memcpy: {:.1f} Gbit/s\n", mc);
    fmt::print("ratio loopback 64 KiB WRITE / cold memcpy: {:.1f}% (target >= 40%)\n", 100 * wr.bw_avg_gbps / mc);
    fmt::print("64 B SEND message rate: {:.3f} Mpps\n", sr.msg_rate_mpps);
    return 0;
}
