#include "switch/dpdk/telemetry.hpp"

#include <rte_telemetry.h>

#include <algorithm>
#include <mutex>

#include "dataplane/dpdk/telemetry_util.hpp"
#include "switch/dpdk/stats.hpp"

namespace rocemu::sw::live {

SwitchBoard::SwitchBoard(uint16_t index, std::string name, std::string ethdev)
    : index_(index), name_(std::move(name)), ethdev_(std::move(ethdev)), size_(port_counter_names().size()),
      values_(new std::atomic<uint64_t>[size_]) {
    for (size_t i = 0; i < size_; ++i) values_[i].store(0, std::memory_order_relaxed);
}

uint64_t SwitchBoard::value(std::string_view counter) const {
    const auto& names = port_counter_names();
    for (size_t i = 0; i < size_; ++i)
        if (names[i] == counter) return value(i);
    return 0;
}

void SwitchBoard::publish(std::span<const uint64_t> values) {
    const size_t n = std::min(size_, values.size());
    for (size_t i = 0; i < n; ++i) values_[i].store(values[i], std::memory_order_relaxed);
}

namespace {

dpdk::TelemetryBoards<SwitchBoard> g_tel;

uint16_t board_id(const SwitchBoard& b) { return b.index(); }

int cmd_ports(const char*, const char*, rte_tel_data* d) { return g_tel.ports(d, board_id); }

int cmd_port_stats(const char*, const char* params, rte_tel_data* d) {
    return g_tel.port_stats(params, d, board_id, [](const SwitchBoard& b, rte_tel_data* dict) {
        rte_tel_data_add_dict_string(dict, "name", b.name().c_str());
        rte_tel_data_add_dict_string(dict, "ethdev", b.ethdev().c_str());
        const auto& names = port_counter_names();
        for (size_t i = 0; i < b.size(); ++i) rte_tel_data_add_dict_u64(dict, names[i].c_str(), b.value(i));
    });
}

}  // namespace

void telemetry_add(const SwitchBoard* board) {
    static std::once_flag once;
    std::call_once(once, [] {
        rte_telemetry_register_cmd("/rocemu/switch/ports", cmd_ports,
                                   "Returns the rocemu switch port indices. Takes no parameters");
        rte_telemetry_register_cmd("/rocemu/switch/port_stats", cmd_port_stats,
                                   "Returns a rocemu switch port's counters. Parameters: int port index");
    });
    g_tel.add(board);
}

void telemetry_remove(const SwitchBoard* board) { g_tel.remove(board); }

}  // namespace rocemu::sw::live
