// The shared part of rocemu's DPDK telemetry commands: the list of published
// counter boards and the "/ports" and "/port_stats,<id>" answers built from it.
// Callbacks run on the EAL's telemetry thread; the mutex guards the list only,
// never the counters (those are atomics).
#pragma once

#include <rte_telemetry.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <mutex>
#include <vector>

namespace rocemu::dpdk {

template <typename Board>
struct TelemetryBoards {
    std::mutex mutex;
    std::vector<const Board*> boards;

    void add(const Board* b) {
        std::lock_guard lock(mutex);
        boards.push_back(b);
    }
    void remove(const Board* b) {
        std::lock_guard lock(mutex);
        boards.erase(std::remove(boards.begin(), boards.end(), b), boards.end());
    }

    // An int array of every board's id(b).
    template <typename Id>
    int ports(rte_tel_data* d, Id id) {
        std::lock_guard lock(mutex);
        rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
        for (const Board* b : boards) rte_tel_data_add_array_int(d, static_cast<int>(id(*b)));
        return 0;
    }

    // params "<id>": a dict that fill(b, d) writes for the board with that
    // id(b); -1 for bad params or no such board.
    template <typename Id, typename Fill>
    int port_stats(const char* params, rte_tel_data* d, Id id, Fill fill) {
        if (!params) return -1;
        unsigned want = 0;
        const char* end = params + std::strlen(params);
        if (std::from_chars(params, end, want).ec != std::errc{}) return -1;
        std::lock_guard lock(mutex);
        for (const Board* b : boards) {
            if (id(*b) != want) continue;
            rte_tel_data_start_dict(d);
            fill(*b, d);
            return 0;
        }
        return -1;
    }
};

}  // namespace rocemu::dpdk
