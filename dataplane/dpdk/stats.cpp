#include "dataplane/dpdk/stats.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

namespace rocemu::dpdk {

const char* to_string(PortStat s) {
    switch (s) {
        case PortStat::RxPackets: return "rx_packets";
        case PortStat::RxBytes: return "rx_bytes";
        case PortStat::TxPackets: return "tx_packets";
        case PortStat::TxBytes: return "tx_bytes";
        case PortStat::RxBursts: return "rx_bursts";
        case PortStat::TxBursts: return "tx_bursts";
        case PortStat::TxPulls: return "tx_pulls";
        case PortStat::TxPoolShort: return "tx_pool_short";
        case PortStat::TxZeroCopy: return "tx_zero_copy";
        case PortStat::TxZeroCopyShort: return "tx_zero_copy_short";
        case PortStat::DropTxFull: return "drop_tx_full";
        case PortStat::DropTxOversize: return "drop_tx_oversize";
        case PortStat::DropTxTimeout: return "drop_tx_timeout";
        case PortStat::TxTimeouts: return "tx_timeouts";
        case PortStat::DropNoMbuf: return "drop_no_mbuf";
        case PortStat::DropMultiSegment: return "drop_multi_segment";
        case PortStat::DropNoTransport: return "drop_no_transport";
        case PortStat::CaptureLost: return "capture_lost";
        case PortStat::LabCeMarked: return "lab_ce_marked";
        case PortStat::RxBacklogMax: return "rx_backlog_max";
        case PortStat::kCount: break;
        default: break;
    }
    static constexpr const char* kPfc[] = {
        "tx_pfc_xoff_prio0", "tx_pfc_xoff_prio1", "tx_pfc_xoff_prio2", "tx_pfc_xoff_prio3",
        "tx_pfc_xoff_prio4", "tx_pfc_xoff_prio5", "tx_pfc_xoff_prio6", "tx_pfc_xoff_prio7",
        "tx_pfc_xon_prio0",  "tx_pfc_xon_prio1",  "tx_pfc_xon_prio2",  "tx_pfc_xon_prio3",
        "tx_pfc_xon_prio4",  "tx_pfc_xon_prio5",  "tx_pfc_xon_prio6",  "tx_pfc_xon_prio7",
    };
    const auto i = static_cast<size_t>(s) - static_cast<size_t>(PortStat::TxPfcXoffPrio0);
    return i < std::size(kPfc) ? kPfc[i] : "unknown";
}

void warn_tx_timeout(const std::string& port, Nanos refused_for, uint32_t dropped) {
    spdlog::warn("{}: the PMD refused every frame for {} ms (TX timeout); dropped the {} queued "
                 "(drop_tx_timeout), the transport retransmits. Is the peer draining its queue?",
                 port, refused_for.v / 1000000, dropped);
}

// Order: port stats, host events, host drops (without None).
CounterBoard::CounterBoard(uint16_t port_id, std::string port_name)
    : port_id_(port_id), port_name_(std::move(port_name)) {
    for (size_t i = 0; i < static_cast<size_t>(PortStat::kCount); ++i)
        names_.emplace_back(to_string(static_cast<PortStat>(i)));
    for (size_t i = 0; i < static_cast<size_t>(host::HostEvent::kCount); ++i)
        names_.emplace_back(to_string(static_cast<host::HostEvent>(i)));
    for (size_t i = 1; i < static_cast<size_t>(host::HostDrop::kCount); ++i)
        names_.push_back(std::string("drop_") + to_string(static_cast<host::HostDrop>(i)));
}

void CounterBoard::publish(const PortStats& port, const host::HostCounters& host) {
    size_t k = 0;
    for (uint64_t v : port.v) values_[k++].store(v, std::memory_order_relaxed);
    for (uint64_t v : host.events) values_[k++].store(v, std::memory_order_relaxed);
    for (size_t i = 1; i < host.drops.size(); ++i) values_[k++].store(host.drops[i], std::memory_order_relaxed);
}

uint64_t CounterBoard::value(std::string_view name) const {
    for (size_t i = 0; i < names_.size(); ++i)
        if (names_[i] == name) return value(i);
    return 0;
}

bool QueryMailbox::ask(CounterQuery& q, int timeout_ms) {
    std::lock_guard lock(askers_);
    query_ = q;
    state_.store(kAsked, std::memory_order_release);
    for (int waited = 0;; ++waited) {
        if (state_.load(std::memory_order_acquire) == kAnswered) break;
        if (waited >= timeout_ms) {
            int expected = kAsked;
            if (state_.compare_exchange_strong(expected, kIdle, std::memory_order_acq_rel)) return false;
            // The loop took the question just now: its answer is moments away.
            while (state_.load(std::memory_order_acquire) != kAnswered) std::this_thread::yield();
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    q = std::move(query_);
    state_.store(kIdle, std::memory_order_release);
    return true;
}

}  // namespace rocemu::dpdk
