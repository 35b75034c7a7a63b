#include "switch/dpdk/telemetry.hpp"

#include <rte_telemetry.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <mutex>
#include <vector>

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

// Callbacks run on the EAL's telemetry thread; the mutex guards the list only.
std::mutex g_mutex;
std::vector<const SwitchBoard*> g_boards;

int cmd_ports(const char*, const char*, rte_tel_data* d) {
    std::lock_guard lock(g_mutex);
    rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
    for (const SwitchBoard* b : g_boards) rte_tel_data_add_array_int(d, b->index());
    return 0;
}

int cmd_port_stats(const char*, const char* params, rte_tel_data* d) {
    if (!params) return -1;
    unsigned id = 0;
    const char* end = params + std::strlen(params);
    if (std::from_chars(params, end, id).ec != std::errc{}) return -1;
    std::lock_guard lock(g_mutex);
    for (const SwitchBoard* b : g_boards) {
        if (b->index() != id) continue;
        rte_tel_data_start_dict(d);
        rte_tel_data_add_dict_string(d, "name", b->name().c_str());
        rte_tel_data_add_dict_string(d, "ethdev", b->ethdev().c_str());
        const auto& names = port_counter_names();
        for (size_t i = 0; i < b->size(); ++i) rte_tel_data_add_dict_u64(d, names[i].c_str(), b->value(i));
        return 0;
    }
    return -1;
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
    std::lock_guard lock(g_mutex);
    g_boards.push_back(board);
}

void telemetry_remove(const SwitchBoard* board) {
    std::lock_guard lock(g_mutex);
    g_boards.erase(std::remove(g_boards.begin(), g_boards.end(), board), g_boards.end());
}

}  // namespace rocemu::sw::live
