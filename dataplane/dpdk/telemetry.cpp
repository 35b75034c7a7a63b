#include "dataplane/dpdk/telemetry.hpp"

#include <rte_telemetry.h>

#include <charconv>
#include <cstring>
#include <mutex>

#include "dataplane/dpdk/telemetry_util.hpp"

namespace rocemu::dpdk {

namespace {

TelemetryBoards<CounterBoard> g_tel;

uint16_t board_id(const CounterBoard& b) { return b.port_id(); }

int cmd_ports(const char*, const char*, rte_tel_data* d) { return g_tel.ports(d, board_id); }

int cmd_port_stats(const char*, const char* params, rte_tel_data* d) {
    return g_tel.port_stats(params, d, board_id, [](const CounterBoard& b, rte_tel_data* dict) {
        rte_tel_data_add_dict_string(dict, "name", b.port_name().c_str());
        for (size_t i = 0; i < b.size(); ++i) rte_tel_data_add_dict_u64(dict, b.name(i).c_str(), b.value(i));
    });
}

// "<port>" or "<port>,<n>": the board of that port and n (0 when absent).
const CounterBoard* board_for(const char* params, unsigned& n) {
    if (!params) return nullptr;
    const char* end = params + std::strlen(params);
    unsigned id = 0;
    auto [p, ec] = std::from_chars(params, end, id);
    if (ec != std::errc{}) return nullptr;
    n = 0;
    if (p != end && (*p != ',' || std::from_chars(p + 1, end, n).ec != std::errc{})) return nullptr;
    for (const CounterBoard* b : g_tel.boards)
        if (b->port_id() == id) return b;
    return nullptr;
}

constexpr int kQueryTimeoutMs = 200;

int ask_upper(const char* params, CounterQuery::Kind kind, rte_tel_data* d) {
    std::lock_guard lock(g_tel.mutex);
    unsigned n = 0;
    const CounterBoard* b = board_for(params, n);
    if (!b || !b->answers_queries) return -1;
    CounterQuery q;
    q.kind = kind;
    q.qpn = n;
    if (!b->mailbox().ask(q, kQueryTimeoutMs) || !q.found) return -1;
    if (kind == CounterQuery::Kind::QpList) {
        rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
        for (const auto& [name, v] : q.values) rte_tel_data_add_array_int(d, static_cast<int>(v));
        return 0;
    }
    rte_tel_data_start_dict(d);
    for (const auto& [name, v] : q.values) rte_tel_data_add_dict_u64(d, name.c_str(), v);
    return 0;
}

int cmd_engine_stats(const char*, const char* params, rte_tel_data* d) {
    return ask_upper(params, CounterQuery::Kind::Engine, d);
}
int cmd_qps(const char*, const char* params, rte_tel_data* d) { return ask_upper(params, CounterQuery::Kind::QpList, d); }
int cmd_qp_stats(const char*, const char* params, rte_tel_data* d) {
    return ask_upper(params, CounterQuery::Kind::Qp, d);
}

}  // namespace

void telemetry_add(const CounterBoard* board) {
    static std::once_flag once;
    std::call_once(once, [] {
        rte_telemetry_register_cmd("/rocemu/ports", cmd_ports, "Returns the rocemu port ids. Takes no parameters");
        rte_telemetry_register_cmd("/rocemu/port_stats", cmd_port_stats,
                                   "Returns a rocemu port's counters. Parameters: int port_id");
        rte_telemetry_register_cmd("/rocemu/engine_stats", cmd_engine_stats,
                                   "Returns the transport engine's counters of a port. Parameters: int port_id");
        rte_telemetry_register_cmd("/rocemu/qps", cmd_qps, "Returns the QPNs of a port. Parameters: int port_id");
        rte_telemetry_register_cmd("/rocemu/qp_stats", cmd_qp_stats,
                                   "Returns one QP's counters. Parameters: int port_id, int qpn");
    });
    g_tel.add(board);
}

void telemetry_remove(const CounterBoard* board) { g_tel.remove(board); }

}  // namespace rocemu::dpdk
