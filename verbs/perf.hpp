// `rocemu perf`: perftest-style bandwidth and latency runs on the verbs API,
// between two devices of this process over a net_ring pair (loopback), or
// between two processes, one NIC each, paired over TCP (run_remote).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "verbs/verbs.hpp"

namespace rocemu::oob {
class LineConn;
}

namespace rocemu::verbs {

enum class PerfOp : uint8_t { Write, Read, Send, Atomic };
const char* to_string(PerfOp op);

struct PerfOptions {
    PerfOp op = PerfOp::Write;
    uint32_t size = 65536;     // message bytes (atomics: always 8)
    uint64_t iters = 1000;     // messages per QP; ignored when duration_s > 0
    double duration_s = 0;     // run for this long instead of a message count
    uint32_t qps = 1;
    uint32_t tx_depth = 128;   // WRs in flight per QP (bandwidth runs)
    bool latency = false;      // one WR in flight; per-WR times
    bool verify = false;       // check every byte that arrived
    bool sleep_when_idle = false;  // sleep 20 us after 64 turns without work (two processes on shared cores)
    uint32_t port_mtu = 1500;  // of the net_ring ports (active MTU = the largest that fits in MTU - 80)
    dpdk::NicProfile nic;      // loopback: both NICs' congestion control, CNPs, PFC (DeviceOptions::nic)
    std::vector<std::string> eal_args;
};

struct PerfResult {
    uint32_t bytes = 0;        // message size
    uint64_t iterations = 0;   // messages completed, all QPs
    double bw_peak_gbps = 0;   // best 1 ms window
    double bw_avg_gbps = 0;
    double msg_rate_mpps = 0;
    // Latency runs: post to completion of one WR, in microseconds.
    double t_min = 0, t_typical = 0, t_avg = 0, t_99 = 0, t_999 = 0;
    uint64_t verify_errors = 0;  // messages whose bytes differed (with verify)
    // CPU time the driving thread used during the run (loopback: both NICs
    // and the application), so a loaded machine's figures can be compared.
    double cpu_s = 0;
};

// Opens the two devices once; runs as many PerfOptions as asked on them.
class LoopbackPerf {
public:
    // nullptr and `error` if the EAL, the ring ports or the devices fail.
    static std::unique_ptr<LoopbackPerf> open(const PerfOptions& base, std::string& error);
    ~LoopbackPerf();
    // 0 on success, else an errno value with `error` set.
    int run(const PerfOptions& o, PerfResult& out, std::string& error);
    // The non-zero port and engine counters of both devices, one per line.
    std::string counters();

    struct Impl;

private:
    explicit LoopbackPerf(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Two-process mode: this process's side of a run between two NICs.
struct PerfPeer {
    std::string server;              // the server's TCP address (client); empty: this side is the server
    uint16_t tcp_port = 18515;       // perftest's default
    int gid_index = 0;               // the local RoCEv2 GID index
    PathMtu mtu = PathMtu::Mtu1024;  // the local path MTU; the smaller of both sides' is used
    bool size_given = false;         // server: -s was given, so the client's size must match it
    Nanos wait = Nanos::from_s(60);  // for the client to come, and for either side to answer
    // Client: receives the TCP connection when the run is over, for the caller to close only after its device.
    // The server closes its port once that connection closes: a memif peer that disconnects while this side
    // still polls crashes DPDK's memif RX (rings unmapped under the poll). nullptr: closed on return.
    std::unique_ptr<oob::LineConn>* linger = nullptr;
};

// Runs one side on `ctx`, a device in App mode. The client drives the run
// and measures; with verify it checks the bytes READs brought back and every
// atomic's fetched value, and the server checks the bytes WRITEs and SENDs
// left in its memory. The server learns size, QPs, depth, latency and verify
// from the client (and writes them into `o`); its op must match the
// client's, and so must its size when size_given. Both sides print nothing
// and return the client's figures in `out`, and both return 0 only when the
// whole run (both sides' checks included) succeeded: else EINVAL (a setup or
// option mismatch), ETIMEDOUT (a missing peer or a stalled run) or EIO, with
// `error` saying what went wrong and on which side.
int run_remote(Context& ctx, PerfOptions& o, const PerfPeer& peer, PerfResult& out, std::string& error);

// CPU time the calling thread has used, in seconds (PerfResult::cpu_s).
double thread_cpu_seconds();

// perftest's column lines.
std::string perf_bw_header();
std::string perf_bw_line(const PerfResult& r);
std::string perf_lat_header();
std::string perf_lat_line(const PerfResult& r);

}  // namespace rocemu::verbs
