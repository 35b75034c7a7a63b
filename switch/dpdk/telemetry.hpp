// The switch's counters on the EAL's telemetry socket
// (/var/run/dpdk/<file-prefix>/dpdk_telemetry.v2):
//   /rocemu/switch/ports            the switch port indices with a board
//   /rocemu/switch/port_stats,<i>   that port's name, ethdev and every counter
// The poll loop alone writes a board, publishing with relaxed atomic stores
// at most every millisecond, so readers never slow it down.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <string>

namespace rocemu::sw::live {

class SwitchBoard {
public:
    // Counter names are port_counter_names().
    SwitchBoard(uint16_t index, std::string name, std::string ethdev);

    uint16_t index() const { return index_; }
    const std::string& name() const { return name_; }
    const std::string& ethdev() const { return ethdev_; }
    size_t size() const { return size_; }
    uint64_t value(size_t i) const { return values_[i].load(std::memory_order_relaxed); }
    uint64_t value(std::string_view counter) const;  // 0 for an unknown name
    void publish(std::span<const uint64_t> values);

private:
    uint16_t index_;
    std::string name_;
    std::string ethdev_;
    size_t size_;
    std::unique_ptr<std::atomic<uint64_t>[]> values_;
};

// Registers the commands once (after the EAL is up) and lists `board`. A
// board must be removed before it is destroyed.
void telemetry_add(const SwitchBoard* board);
void telemetry_remove(const SwitchBoard* board);

}  // namespace rocemu::sw::live
