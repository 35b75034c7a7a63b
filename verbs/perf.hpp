// `rocemu perf`: perftest-style bandwidth and latency runs on the verbs API,
// between two devices of this process over a net_ring pair (loopback).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "verbs/verbs.hpp"

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
    uint32_t port_mtu = 1500;  // of the net_ring ports (active MTU = the largest that fits in MTU - 80)
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

// perftest's column lines.
std::string perf_bw_header();
std::string perf_bw_line(const PerfResult& r);
std::string perf_lat_header();
std::string perf_lat_line(const PerfResult& r);

}  // namespace rocemu::verbs
