// The switch core alone, as the DPDK loop drives it for 64-byte frames
// (issue #7): bursts of 32 RoCEv2 descriptors into port 0 (64 flows, DSCP 3,
// ECT(0), ECMP over ports 1 and 2 on the 5-tuple, SONiC defaults at 800G),
// then every port's frames out through dequeue_burst. No DPDK, no bytes: what
// it measures is the core's own work per frame, and under callgrind or
// cachegrind its instructions per frame, which the machine's load does not
// change. Each round runs the burst form and, as its baseline, the same
// frames through on_packet one by one.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "switch/switch.hpp"

namespace {

using namespace rocemu;
using namespace rocemu::sw;

constexpr std::size_t kBurst = 32;
constexpr int kFlows = 64;

// ns per frame forwarded.
double run(bool burst, uint64_t frames) {
    Switch sw(sonic_default_config(3, BitsPerSec::gbps(800)));
    const uint32_t a = sw.routes().add_neighbor(1, {0x02, 0, 0, 0, 1, 1});
    const uint32_t b = sw.routes().add_neighbor(2, {0x02, 0, 0, 0, 2, 1});
    sw.routes().add_route_v4(0x0A090000, 16, sw.routes().add_group({a, b}));
    std::vector<PacketDesc> descs(kBurst);
    for (std::size_t i = 0; i < kBurst; ++i) {
        PacketDesc& d = descs[i];
        d.frame_len = Bytes{64};
        d.dscp = 3;
        d.ecn = 2;
        d.ip_proto = 17;
        d.dst_port = 4791;
        d.src_v4 = 0x0A000001;
        d.dst_v4 = 0x0A090002;
    }
    Rng rng(1);
    Effects fx;
    std::vector<TxDesc> txs(kBurst);
    uint64_t sent = 0, flow = 0, handle = 0;
    Nanos now{};
    const auto t0 = std::chrono::steady_clock::now();
    while (sent < frames) {
        for (PacketDesc& d : descs) {
            d.handle = static_cast<uint32_t>(handle++);
            d.src_port = static_cast<uint16_t>(0xC000 + flow++ % kFlows);
        }
        if (burst) {
            sw.on_burst(descs.data(), kBurst, now, rng, fx);
        } else {
            for (const PacketDesc& d : descs) sw.on_packet(d, now, rng, fx);
        }
        fx.clear();
        // 32 frames of 84 wire bytes at 800G take 27 ns: every port drains.
        now = now + Nanos{40};
        for (PortId p = 1; p < 3; ++p) sent += sw.dequeue_burst(p, sw.tx_free_at(p), now, txs.data(), kBurst, rng, fx);
        fx.clear();
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    return ns / static_cast<double>(sent);
}

}  // namespace

// core_bench [FRAMES] [ROUNDS] [one|burst]: the last runs only that form
// (for instruction counts: Ir / FRAMES).
int main(int argc, char** argv) {
    const auto usage = [&] {
        std::fprintf(stderr, "usage: %s [FRAMES >= 1, default 20000000] [ROUNDS >= 1, default 3] [one|burst]\n", argv[0]);
        return 2;
    };
    if (argc > 4) return usage();
    char* end = nullptr;
    const uint64_t frames = argc > 1 ? std::strtoull(argv[1], &end, 10) : 20'000'000;
    if (argc > 1 && (*end != '\0' || frames == 0)) return usage();
    const long rounds = argc > 2 ? std::strtol(argv[2], &end, 10) : 3;
    if (argc > 2 && (*end != '\0' || rounds < 1)) return usage();
    const std::string_view only = argc > 3 ? argv[3] : "";
    if (!only.empty() && only != "one" && only != "burst") return usage();
    for (long r = 1; r <= rounds; ++r) {
        if (!only.empty()) {
            std::printf("round %ld: %llu frames of 64 B, %s: %.1f ns/frame\n", r,
                        static_cast<unsigned long long>(frames), argv[3], run(only == "burst", frames));
            continue;
        }
        const double one = run(false, frames);
        const double burst = run(true, frames);
        std::printf("round %ld: %llu frames of 64 B, on_packet one by one %.1f ns/frame (baseline), on_burst %.1f "
                    "ns/frame: %.2fx\n",
                    r, static_cast<unsigned long long>(frames), one, burst, one / burst);
    }
    return 0;
}
