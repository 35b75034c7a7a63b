// Per-port counters of the runtime, and the board that publishes them (with
// the host stack's) for readers on other threads: telemetry and `rocemu
// counters`. The poll loop alone writes; it publishes at most every
// millisecond with relaxed atomic stores, so readers never slow it down.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/dpdk/host/host_stack.hpp"

namespace rocemu::dpdk {

enum class PortStat : uint8_t {
    RxPackets,
    RxBytes,
    TxPackets,
    TxBytes,
    RxBursts,
    DropTxFull,        // the TX queue took fewer frames than offered
    DropNoMbuf,        // no mbuf for a frame the NIC originates
    DropMultiSegment,  // received frames spread over several mbufs
    DropNoTransport,   // RoCEv2 frames with no transport engine attached
    CaptureLost,       // frames the capture could not copy
    kCount,
};
const char* to_string(PortStat s);

struct PortStats {
    std::array<uint64_t, static_cast<size_t>(PortStat::kCount)> v{};
    void add(PortStat s, uint64_t n = 1) { v[static_cast<size_t>(s)] += n; }
    uint64_t operator[](PortStat s) const { return v[static_cast<size_t>(s)]; }
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
    std::vector<std::pair<std::string, uint64_t>> snapshot() const;

private:
    static constexpr size_t kValues = static_cast<size_t>(PortStat::kCount) +
                                      static_cast<size_t>(host::HostEvent::kCount) +
                                      static_cast<size_t>(host::HostDrop::kCount) - 1;
    uint16_t port_id_;
    std::string port_name_;
    std::vector<std::string> names_;
    std::array<std::atomic<uint64_t>, kValues> values_{};
};

}  // namespace rocemu::dpdk
