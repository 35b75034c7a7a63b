// Transport engine throughput on one core, no I/O: two engines in one thread
// hand frames to each other directly. Every frame is built with its ICRC,
// parsed and ICRC-checked on receipt, and its payload copied once on each
// side, so the figures are the engine's own cost per message and per byte.
// Printed next to single-core cold memcpy bandwidth (buffers far larger than
// the LLC), the ceiling for a NIC that copies payload once.
#include <fmt/format.h>
#include <x86intrin.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dataplane/transport/engine.hpp"
#include "dataplane/wire/wire.hpp"

using namespace rocemu;
using namespace rocemu::transport;

namespace {

// Thread CPU time, not wall time: on a shared machine the wall clock also
// counts other processes' turns on the core; CPU time is the engine's cost.
struct Clock {
    using time_point = double;
    static double now() {
        timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    }
};

double seconds_since(double t0) { return Clock::now() - t0; }

double cold_memcpy_gbps() {
    const size_t n = size_t{512} << 20;
    std::vector<uint8_t> a(n, 1), b(n, 2);
    const size_t chunk = 64 << 10;
    // One warm-up pass to fault the pages in, then timed passes.
    std::memcpy(b.data(), a.data(), n);
    const int passes = 3;
    const auto t0 = Clock::now();
    for (int p = 0; p < passes; ++p)
        for (size_t off = 0; off < n; off += chunk) std::memcpy(b.data() + off, a.data() + off, chunk);
    const double s = seconds_since(t0);
    volatile uint8_t sink = b[n / 2];
    (void)sink;
    return static_cast<double>(n) * passes * 8 / s / 1e9;
}

// Frames per tx_burst, as a DPDK runtime's burst.
constexpr size_t kBurst = 32;

struct Bench {
    std::unique_ptr<Engine> eng[2];
    Effects fx[2];
    Qpn qp[2];
    CqHandle cq[2];
    MrHandle mr[2];
    std::vector<uint8_t> mem[2];
    std::vector<std::vector<uint8_t>> bufs;
    Nanos now{0};
    bool reorder = false;
    // TSC ticks per side in tx_burst / on_frame, and in the whole run: the
    // split of the run's CPU time. A CPU-time clock read per burst is a
    // system call that would cost more than a burst of small messages.
    uint64_t tsc_tx[2] = {0, 0}, tsc_rx[2] = {0, 0}, tsc_run = 0;
    double cpu_run = 0;
    double cpu_tx(int side) const { return cpu_run * static_cast<double>(tsc_tx[side]) / static_cast<double>(tsc_run); }
    double cpu_rx(int side) const { return cpu_run * static_cast<double>(tsc_rx[side]) / static_cast<double>(tsc_run); }

    Bench(Reliability mode, PathMtu mtu, bool coalesce_acks = false) {
        for (int i = 0; i < 2; ++i) {
            EngineConfig c;
            c.coalesce_acks = coalesce_acks;
            c.mac = wire::MacAddr{{2, 0, 0, 0, 0, static_cast<uint8_t>(i + 1)}};
            c.gids = {wire::IpAddr::from_v4(0x0A000001u + i)};
            VerbsError e;
            eng[i] = Engine::create(c, e);
            auto pd = eng[i]->alloc_pd().value;
            cq[i] = eng[i]->create_cq(65536).value;
            mem[i].assign(size_t{64} << 20, static_cast<uint8_t>(i));
            mr[i] = eng[i]->reg_mr(pd, mem[i].data(), mem[i].size(), kLocalWrite | kRemoteWrite).value;
            QpInitAttr ia;
            ia.pd = pd;
            ia.send_cq = ia.recv_cq = cq[i];
            ia.cap.max_send_wr = 4096;
            ia.cap.max_recv_wr = 8192;
            ia.reliability = mode;
            ia.spray_paths = 4;
            ia.reorder_window = 256;
            qp[i] = eng[i]->create_qp(ia).value;
        }
        for (int i = 0; i < 2; ++i) {
            QpAttr a;
            a.qp_state = QpState::Init;
            a.qp_access_flags = kRemoteWrite;
            eng[i]->modify_qp(qp[i], a, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags, fx[i]);
            a.qp_state = QpState::Rtr;
            a.path_mtu = mtu;
            a.dest_qp_num = qp[1 - i];
            a.ah_attr.dgid = wire::IpAddr::from_v4(0x0A000001u + (1 - i));
            a.max_dest_rd_atomic = 16;
            eng[i]->modify_qp(qp[i], a,
                              kAttrState | kAttrAv | kAttrPathMtu | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic |
                                  kAttrMinRnrTimer,
                              fx[i]);
            a.qp_state = QpState::Rts;
            eng[i]->modify_qp(qp[i], a,
                              kAttrState | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrSqPsn | kAttrMaxQpRdAtomic,
                              fx[i]);
        }
        bufs.assign(kBurst, std::vector<uint8_t>(Engine::kMinTxBuf));
    }

    // Moves every ready frame from `from` to the other engine. With
    // `reorder`, each group of four frames is delivered reversed.
    uint32_t shuttle(int from) {
        TxFrame tx[kBurst];
        for (size_t i = 0; i < kBurst; ++i) tx[i].buf = bufs[i];
        const uint64_t t0 = __rdtsc();
        const uint32_t n = eng[from]->tx_burst(tx, now, fx[from]);
        const uint64_t t1 = __rdtsc();
        tsc_tx[from] += t1 - t0;
        for (uint32_t i = 0; i < n; ++i) {
            uint32_t k = i;
            if (reorder) {
                const uint32_t g = i & ~3u;
                k = g + 3 - (i & 3);
                if (k >= n) k = i;
            }
            eng[1 - from]->on_frame(std::span<const uint8_t>(bufs[k].data(), tx[k].len), now, fx[1 - from]);
        }
        tsc_rx[1 - from] += __rdtsc() - t1;
        fx[from].clear();
        return n;
    }

    uint64_t poll(int side) {
        Wc wc[64];
        uint64_t n = 0;
        for (uint32_t k; (k = eng[side]->poll_cq(cq[side], wc)) > 0;) n += k;
        return n;
    }

    // Posts `total` operations of `len` bytes in batches and runs both
    // engines until all completed; returns elapsed seconds.
    double run(WrOpcode op, uint32_t len, uint64_t total) {
        const uint32_t batch = 32, signal_every = 32;
        uint64_t posted = 0, completed = 0, recvs = 0;
        // Work requests are built once and only their varying fields
        // rewritten, as an application reusing its WR array does.
        std::vector<SendWr> wrs(batch);
        for (SendWr& w : wrs) {
            w.opcode = op;
            w.sg_list.push_back(Sge{0, len, mr[0].lkey});
            w.rkey = mr[1].rkey;
        }
        RecvWr r;
        r.sg_list.push_back(Sge{0, 64, mr[1].lkey});
        const auto t0 = Clock::now();
        const uint64_t tsc0 = __rdtsc();
        while (completed < total / signal_every) {
            if (op == WrOpcode::Send) {
                while (recvs < posted + 2048) {
                    r.wr_id = recvs;
                    r.sg_list[0].addr = reinterpret_cast<uint64_t>(mem[1].data() + (recvs % 4096) * 64);
                    if (eng[1]->post_recv(qp[1], std::span<const RecvWr>(&r, 1), fx[1])) break;
                    ++recvs;
                }
            }
            if (posted < total) {
                for (uint32_t i = 0; i < batch; ++i) {
                    SendWr& w = wrs[i];
                    w.wr_id = posted + i;
                    w.send_flags = (posted + i + 1) % signal_every == 0 ? uint32_t{kSendSignaled} : 0u;
                    const size_t off = ((posted + i) * len) % (mem[0].size() - len);
                    w.sg_list[0].addr = reinterpret_cast<uint64_t>(mem[0].data() + off);
                    w.remote_addr = reinterpret_cast<uint64_t>(mem[1].data() + off);
                }
                if (!eng[0]->post_send(qp[0], wrs, fx[0])) posted += batch;
            }
            now += Nanos{1000};
            while (shuttle(0) + shuttle(1) > 0) {
            }
            if (eng[0]->next_timer() <= now) eng[0]->on_timer(now, fx[0]);
            completed += poll(0);
            poll(1);
        }
        tsc_run = __rdtsc() - tsc0;
        cpu_run = seconds_since(t0);
        return cpu_run;
    }
};

}  // namespace

// With an argument (memcpy, send, write, spray) only that part runs, for
// profiling; a second one scales the message counts (0.01 for callgrind).
int main(int argc, char** argv) {
    const std::string only = argc > 1 ? argv[1] : "";
    const double scale = argc > 2 ? std::atof(argv[2]) : 1.0;
    if (!(scale > 0 && scale <= 1)) {
        fmt::print(stderr, "scale {} is outside (0, 1]\n", argc > 2 ? argv[2] : "");
        return 2;
    }
    auto count = [&](uint64_t n) { return std::max<uint64_t>(1024, static_cast<uint64_t>(n * scale)) / 32 * 32; };
    auto want = [&](const char* part) { return only.empty() || only == part; };
    const double memcpy_gbps = want("memcpy") ? cold_memcpy_gbps() : 1;
    fmt::print("single-core cold memcpy          {:8.1f} Gbit/s ({:.1f} GiB/s)\n", memcpy_gbps,
               memcpy_gbps * 1e9 / 8 / (1u << 30));

    if (want("send")) {
        for (bool coalesce : {false, true}) {
            Bench b(Reliability::Interop, PathMtu::Mtu1024, coalesce);
            const uint64_t n = count(2'000'000);
            const double s = b.run(WrOpcode::Send, 64, n);
            fmt::print("64 B SEND, interop, {}  {:8.2f} M msg/s  (target >= 5)\n",
                       coalesce ? "ACKs coalesced     " : "one ACK per message", n / s / 1e6);
        }
    }
    double write_gbps = 1;
    if (want("write")) {
        Bench b(Reliability::Interop, PathMtu::Mtu4096);
        const uint64_t n = count(100'000);
        const double s = b.run(WrOpcode::RdmaWrite, 64 * 1024, n);
        write_gbps = n * 64.0 * 1024 * 8 / s / 1e9;
        fmt::print("64 KiB WRITE, interop            {:8.1f} Gbit/s  = {:.0f}% of memcpy (target >= 50%)\n",
                   write_gbps, 100 * write_gbps / memcpy_gbps);
        const double bits = n * 64.0 * 1024 * 8;
        fmt::print("  per side: requester tx {:.1f} Gbit/s ({:.0f}%), responder rx {:.1f} Gbit/s ({:.0f}%)\n",
                   bits / b.cpu_tx(0) / 1e9, 100 * bits / b.cpu_tx(0) / 1e9 / memcpy_gbps, bits / b.cpu_rx(1) / 1e9,
                   100 * bits / b.cpu_rx(1) / 1e9 / memcpy_gbps);
    }
    if (want("spray")) {
        Bench b(Reliability::Spray, PathMtu::Mtu4096);
        b.reorder = true;
        const uint64_t n = count(100'000);
        const double s = b.run(WrOpcode::RdmaWrite, 64 * 1024, n);
        const double g = n * 64.0 * 1024 * 8 / s / 1e9;
        fmt::print("64 KiB WRITE, spray 4 paths, reordered {:6.1f} Gbit/s  = {:.0f}% of memcpy, {:.0f}% of interop\n",
                   g, 100 * g / memcpy_gbps, 100 * g / write_gbps);
        const double bits = n * 64.0 * 1024 * 8;
        fmt::print("  per side: requester tx {:.1f} Gbit/s, responder rx {:.1f} Gbit/s\n", bits / b.cpu_tx(0) / 1e9,
                   bits / b.cpu_rx(1) / 1e9);
        const Counters& c = *b.eng[1]->qp_counters(b.qp[1]);
        fmt::print("  (responder: {} out-of-order, {} placed directly, {} selective NAKs)\n", c.out_of_seq_request,
                   c.direct_placed, c.sack_sent);
    }
    return 0;
}
