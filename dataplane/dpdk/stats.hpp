// Per-port counters of the runtime, and the board that publishes them (with
// the host stack's) for readers on other threads: telemetry and `rocemu
// counters`. The poll loop alone writes; it publishes at most every
// millisecond with relaxed atomic stores, so readers never slow it down.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/units.hpp"
#include "dataplane/dpdk/host/host_stack.hpp"

namespace rocemu::dpdk {

enum class PortStat : uint8_t {
    RxPackets,
    RxBytes,
    TxPackets,
    TxBytes,
    RxBursts,
    TxBursts,  // PMD tx_burst calls that took frames
    TxPulls,   // turns in which the upper lent frames to send
    // Turns in which the pool could not refill the TX stash in bulk. Nothing
    // is lost: the upper keeps what it could not lend until mbufs return.
    TxPoolShort,
    TxZeroCopy,       // frames sent as a chain with their payload in the MR's pages
    TxZeroCopyShort,  // zero-copy frames made whole because the pool had no two mbufs for the chain
    DropTxFull,        // a frame found the TX buffer full of frames the PMD's queue would not take
    // Frames longer than the port carries (its MTU + 18 bytes of Ethernet
    // header and VLAN tag), dropped before the PMD: one would block the TX
    // queue's head forever (net_tap stops at the first such frame).
    DropTxOversize,
    // Frames dropped by the TX watchdog: the PMD had refused the queue's head
    // for longer than NicConfig::tx_timeout (a peer that stopped draining).
    DropTxTimeout,
    TxTimeouts,        // the watchdog's firings (each drops what the TX queue held)
    DropNoMbuf,        // no mbuf for a frame the NIC originates
    DropMultiSegment,  // received chains the upper cannot take (more than Nic::kMaxSegs segments)
    DropNoTransport,   // RoCEv2 frames with no transport engine attached
    CaptureLost,       // frames the capture could not copy
    LabCeMarked,       // received frames marked CE by --mark-ce-every
    RxBacklogMax,      // most frames the loop held unhandled (a peak, not a sum)
    // PFC frames the NIC sent from its receive backlog, per priority: pauses
    // (XOFF, refreshes included) and resumes (XON).
    TxPfcXoffPrio0,
    TxPfcXoffPrio7 = TxPfcXoffPrio0 + 7,
    TxPfcXonPrio0,
    TxPfcXonPrio7 = TxPfcXonPrio0 + 7,
    kCount,
};
const char* to_string(PortStat s);

// The TX watchdog's message, once per episode of refusals (out of line: the
// loop's header does not pull in the logger).
void warn_tx_timeout(const std::string& port, Nanos refused_for, uint32_t dropped);

struct PortStats {
    std::array<uint64_t, static_cast<size_t>(PortStat::kCount)> v{};
    void add(PortStat s, uint64_t n = 1) { v[static_cast<size_t>(s)] += n; }
    void set(PortStat s, uint64_t n) { v[static_cast<size_t>(s)] = n; }
    uint64_t operator[](PortStat s) const { return v[static_cast<size_t>(s)]; }
};

// A question for the layer above a NIC (the transport engine), whose state
// only the poll-loop thread may touch. Another thread (telemetry) posts the
// question and waits; the loop answers between bursts, at most every
// publish period. The loop never blocks on it.
struct CounterQuery {
    enum class Kind : uint8_t { Engine, QpList, Qp };
    Kind kind = Kind::Engine;
    uint32_t qpn = 0;
    bool found = false;  // set by the answerer: the QP (or engine) exists
    std::vector<std::pair<std::string, uint64_t>> values;  // QpList: ("qpn", n) per QP
};

class QueryMailbox {
public:
    // Asking thread: posts `q`, waits up to `timeout_ms` for the answer.
    // False if the loop did not answer in time (`q` is then unchanged).
    bool ask(CounterQuery& q, int timeout_ms);

    // Loop thread: answers a pending question with answer(CounterQuery&).
    template <typename F>
    void serve(F&& answer) {
        int expected = kAsked;
        if (state_.load(std::memory_order_acquire) != kAsked ||
            !state_.compare_exchange_strong(expected, kAnswering, std::memory_order_acq_rel))
            return;
        answer(query_);
        state_.store(kAnswered, std::memory_order_release);
    }

private:
    enum : int { kIdle, kAsked, kAnswering, kAnswered };
    std::mutex askers_;  // one question at a time
    std::atomic<int> state_{kIdle};
    CounterQuery query_;
};

class CounterBoard {
public:
    CounterBoard(uint16_t port_id, std::string port_name);

    uint16_t port_id() const { return port_id_; }
    const std::string& port_name() const { return port_name_; }

    void publish(const PortStats& port, const host::HostCounters& host);

    size_t size() const { return names_.size(); }
    const std::string& name(size_t i) const { return names_[i]; }
    uint64_t value(size_t i) const { return values_[i].load(std::memory_order_relaxed); }
    uint64_t value(std::string_view name) const;  // 0 for an unknown name

    // Set before the board is shared: whether the loop answers CounterQuery.
    bool answers_queries = false;
    QueryMailbox& mailbox() const { return mailbox_; }

private:
    static constexpr size_t kValues = static_cast<size_t>(PortStat::kCount) +
                                      static_cast<size_t>(host::HostEvent::kCount) +
                                      static_cast<size_t>(host::HostDrop::kCount) - 1;
    uint16_t port_id_;
    std::string port_name_;
    std::vector<std::string> names_;
    std::array<std::atomic<uint64_t>, kValues> values_{};
    mutable QueryMailbox mailbox_;
};

}  // namespace rocemu::dpdk
