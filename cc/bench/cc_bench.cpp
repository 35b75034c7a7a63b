// Per-packet cost of the DCQCN cores, for comparison with the transport
// engine's per-packet budget (58 Mpps on net_ring is about 17 ns a packet).
#include <benchmark/benchmark.h>

#include <vector>

#include "cc/cc.hpp"
#include "cc/dcqcn_np.hpp"
#include "cc/dcqcn_rp.hpp"

namespace {

using namespace rocemu;
using namespace rocemu::cc;

constexpr BitsPerSec kLine = BitsPerSec::gbps(100);
constexpr Bytes kPkt{4096};

// A congested sender: every packet goes through on_tx and the pacing query,
// timers run when due, and a CNP arrives every 256 packets so the reaction
// point stays rate-limited (cuts, byte-counter and timer increases all run).
void BM_ReactionPointPerPacket(benchmark::State& st) {
    const DcqcnConfig cfg;
    DcqcnRp rp(cfg, kLine);
    Nanos now{0};
    uint32_t n = 0;
    for (auto _ : st) {
        if ((++n & 255) == 0) rp.on_cnp(now);
        if (rp.next_timer() <= now) rp.on_timer(now);
        rp.on_tx(kPkt, now);
        now = rp.next_send_time();
        benchmark::DoNotOptimize(now);
    }
    st.counters["decreases"] = static_cast<double>(rp.counters().rate_decreases);
}
BENCHMARK(BM_ReactionPointPerPacket);

// The same through the pluggable QpCc front (std::variant dispatch).
void BM_QpCcPerPacket(benchmark::State& st) {
    const CcConfig cfg;
    QpCc cc(cfg, kLine);
    Nanos now{0};
    uint32_t n = 0;
    for (auto _ : st) {
        if ((++n & 255) == 0) cc.on_cnp(now);
        if (cc.next_timer() <= now) cc.on_timer(now);
        cc.on_tx(kPkt, now);
        now = cc.next_send_time();
        benchmark::DoNotOptimize(now);
    }
}
BENCHMARK(BM_QpCcPerPacket);

// Worst case for the notification point: every received packet is CE-marked,
// spread over 1024 responder QPs.
void BM_NotificationPointPerCePacket(benchmark::State& st) {
    const DcqcnConfig cfg;
    DcqcnNp np(cfg);
    std::vector<NpQpState> qps(1024);
    for (std::size_t i = 0; i < qps.size(); ++i) qps[i].remote_qpn = Qpn{static_cast<uint32_t>(i)};
    Nanos now{0};
    std::size_t i = 0;
    for (auto _ : st) {
        auto cnp = np.on_ce_packet(qps[i], now);
        benchmark::DoNotOptimize(cnp);
        i = (i + 1) & 1023;
        now += Nanos{40};
    }
    st.counters["cnp_sent"] = static_cast<double>(np.counters().cnp_sent);
}
BENCHMARK(BM_NotificationPointPerCePacket);

// One packet's worth of both ends: the sender's RP work plus the receiver's
// NP work for a CE-marked packet, with the CNPs it generates fed back.
void BM_ReactionPlusNotificationPerPacket(benchmark::State& st) {
    const DcqcnConfig cfg;
    DcqcnRp rp(cfg, kLine);
    DcqcnNp np(cfg);
    NpQpState qp{Qpn{1}};
    Nanos now{0};
    for (auto _ : st) {
        if (rp.next_timer() <= now) rp.on_timer(now);
        rp.on_tx(kPkt, now);
        if (np.on_ce_packet(qp, now)) rp.on_cnp(now);
        now = rp.next_send_time();
        benchmark::DoNotOptimize(now);
    }
}
BENCHMARK(BM_ReactionPlusNotificationPerPacket);

}  // namespace

BENCHMARK_MAIN();
