#include "dataplane/dpdk/telemetry.hpp"

#include <rte_telemetry.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <mutex>
#include <vector>

namespace rocemu::dpdk {

namespace {

// Telemetry callbacks run on the EAL's telemetry thread; the mutex guards the
// list only, never the counters (those are atomics).
std::mutex g_mutex;
std::vector<const CounterBoard*> g_boards;

int cmd_ports(const char*, const char*, rte_tel_data* d) {
    std::lock_guard lock(g_mutex);
    rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
    for (const CounterBoard* b : g_boards) rte_tel_data_add_array_int(d, b->port_id());
    return 0;
}

int cmd_port_stats(const char*, const char* params, rte_tel_data* d) {
    if (!params) return -1;
    unsigned id = 0;
    const char* end = params + std::strlen(params);
    if (std::from_chars(params, end, id).ec != std::errc{}) return -1;
    std::lock_guard lock(g_mutex);
    for (const CounterBoard* b : g_boards) {
        if (b->port_id() != id) continue;
        rte_tel_data_start_dict(d);
        rte_tel_data_add_dict_string(d, "name", b->port_name().c_str());
        for (size_t i = 0; i < b->size(); ++i) rte_tel_data_add_dict_u64(d, b->name(i).c_str(), b->value(i));
        return 0;
    }
    return -1;
}

}  // namespace

void telemetry_add(const CounterBoard* board) {
    static std::once_flag once;
    std::call_once(once, [] {
        rte_telemetry_register_cmd("/rocemu/ports", cmd_ports, "Returns the rocemu port ids. Takes no parameters");
        rte_telemetry_register_cmd("/rocemu/port_stats", cmd_port_stats,
                                   "Returns a rocemu port's counters. Parameters: int port_id");
    });
    std::lock_guard lock(g_mutex);
    g_boards.push_back(board);
}

void telemetry_remove(const CounterBoard* board) {
    std::lock_guard lock(g_mutex);
    g_boards.erase(std::remove(g_boards.begin(), g_boards.end(), board), g_boards.end());
}

}  // namespace rocemu::dpdk
