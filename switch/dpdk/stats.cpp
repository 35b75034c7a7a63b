#include "switch/dpdk/stats.hpp"

#include <fmt/format.h>

namespace rocemu::sw::live {

const char* to_string(RtStat s) {
    switch (s) {
        case RtStat::RxFrames: return "rx_frames";
        case RtStat::RxBytes: return "rx_bytes";
        case RtStat::TxFrames: return "tx_frames";
        case RtStat::TxBytes: return "tx_bytes";
        case RtStat::TxPfc: return "tx_pfc_frames";
        case RtStat::RxPfc: return "rx_pfc_frames";
        case RtStat::RxPause: return "rx_pause_frames";
        case RtStat::DropNotIp: return "drop_not_ip";
        case RtStat::DropTruncated: return "drop_truncated";
        case RtStat::DropMultiSegment: return "drop_multi_segment";
        case RtStat::DropNoHandle: return "drop_no_handle";
        case RtStat::DropTtlExpired: return "drop_ttl_expired";
        case RtStat::DropLinkDown: return "drop_link_down";
        case RtStat::DropLinkLoss: return "drop_link_loss";
        case RtStat::DropLinkFcs: return "drop_link_fcs";
        case RtStat::CorruptIcrc: return "link_corrupt_icrc";
        case RtStat::PfcNoMbuf: return "pfc_tx_failed";
        case RtStat::kCount: break;
    }
    return "unknown";
}

namespace {
// Per-queue counter suffixes, in order.
constexpr const char* kQueueNames[] = {"tx_packets", "tx_bytes",    "drops",     "ecn_marks",
                                       "depth_bytes", "watermark_bytes", "paused_ns", "wd_storms"};
constexpr size_t kPerQueue = std::size(kQueueNames);
}  // namespace

const std::vector<std::string>& port_counter_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> n;
        for (size_t i = 0; i < static_cast<size_t>(RtStat::kCount); ++i) n.emplace_back(to_string(static_cast<RtStat>(i)));
        for (const char* s : {"sw_rx_packets", "sw_rx_bytes", "sw_tx_packets", "sw_tx_bytes", "ecn_marks",
                              "lossless_drops", "paused_ns"})
            n.emplace_back(s);
        for (size_t r = 0; r < static_cast<size_t>(DropReason::kCount); ++r)
            n.push_back(fmt::format("drop_{}", drop_reason_name(static_cast<DropReason>(r))));
        for (int p = 0; p < kNumTc; ++p) n.push_back(fmt::format("pfc_rx_p{}", p));
        for (int p = 0; p < kNumTc; ++p) n.push_back(fmt::format("pfc_tx_xoff_p{}", p));
        for (int p = 0; p < kNumTc; ++p) n.push_back(fmt::format("pfc_tx_xon_p{}", p));
        for (int q = 0; q < kNumTc; ++q)
            for (const char* s : kQueueNames) n.push_back(fmt::format("q{}_{}", q, s));
        for (const char* s : {"link_frames", "link_bytes", "link_reordered", "link_storm_frames"}) n.emplace_back(s);
        return n;
    }();
    return names;
}

uint64_t lossless_drops(const Switch& sw, PortId p) {
    uint64_t n = sw.port_counters(p).drops[static_cast<size_t>(DropReason::LosslessHeadroomFull)];
    for (int q = 0; q < kNumTc; ++q)
        if (sw.config().queue_lossless_at(q)) n += sw.queue_counters(p, q).drops;
    return n;
}

void collect_port_counters(const Switch& sw, PortId p, Nanos now, const RtPortStats& rt, const LinkCounters& link,
                           std::span<uint64_t> out) {
    size_t k = 0;
    for (uint64_t v : rt.v) out[k++] = v;
    const PortCounters& c = sw.port_counters(p);
    uint64_t marks = 0;
    for (int q = 0; q < kNumTc; ++q) marks += sw.queue_counters(p, q).ecn_marks;
    out[k++] = c.rx_pkts;
    out[k++] = c.rx_bytes;
    out[k++] = c.tx_pkts;
    out[k++] = c.tx_bytes;
    out[k++] = marks;
    out[k++] = lossless_drops(sw, p);
    out[k++] = static_cast<uint64_t>(sw.port_paused_time(p, now).v);
    for (uint64_t v : c.drops) out[k++] = v;
    for (uint64_t v : c.pfc_rx) out[k++] = v;
    for (uint64_t v : c.pfc_tx_xoff) out[k++] = v;
    for (uint64_t v : c.pfc_tx_xon) out[k++] = v;
    for (int q = 0; q < kNumTc; ++q) {
        const QueueCounters& qc = sw.queue_counters(p, q);
        out[k++] = qc.tx_pkts;
        out[k++] = qc.tx_bytes;
        out[k++] = qc.drops;
        out[k++] = qc.ecn_marks;
        out[k++] = sw.queue_depth(p, q).v;
        out[k++] = qc.watermark.v;
        out[k++] = static_cast<uint64_t>(sw.paused_time(p, q, now).v);
        out[k++] = qc.wd_storms;
    }
    static_assert(kPerQueue == 8);
    out[k++] = link.frames;
    out[k++] = link.bytes;
    out[k++] = link.reordered;
    out[k++] = link.storm_frames;
}

std::string BusyCycles::line(uint64_t tsc_hz) const {
    return fmt::format("CPU cycles/packet={:.2f} (busy cycles={} / received packets={} in {} turns, {} turns left out as "
                       "preempted) at {} MHz",
                       per_frame(), cycles, frames, turns, preempted_turns, tsc_hz / 1000000);
}

}  // namespace rocemu::sw::live
