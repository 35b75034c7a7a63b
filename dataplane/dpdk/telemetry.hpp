// DPDK telemetry commands for rocemu's counters, served on the EAL's
// telemetry socket (/var/run/dpdk/<file-prefix>/dpdk_telemetry.v2):
//   /rocemu/ports             the port ids with a published counter board
//   /rocemu/port_stats,<id>   that port's name and every counter
//   /rocemu/engine_stats,<id> the transport engine's counters (when one is attached)
//   /rocemu/qps,<id>          the QPNs that exist on the port
//   /rocemu/qp_stats,<id>,<qpn>  one QP's counters
// Engine and QP counters are asked of the poll loop, which answers within a
// publish period; a loop that does not answer in 200 ms gives an error.
#pragma once

#include "dataplane/dpdk/stats.hpp"

namespace rocemu::dpdk {

// Registers the commands once (after the EAL is up) and lists `board`.
// A board must be removed before it is destroyed.
void telemetry_add(const CounterBoard* board);
void telemetry_remove(const CounterBoard* board);

}  // namespace rocemu::dpdk
