// DPDK telemetry commands for rocemu's counters, served on the EAL's
// telemetry socket (/var/run/dpdk/<file-prefix>/dpdk_telemetry.v2):
//   /rocemu/ports             the port ids with a published counter board
//   /rocemu/port_stats,<id>   that port's name and every counter
#pragma once

#include "dataplane/dpdk/stats.hpp"

namespace rocemu::dpdk {

// Registers the commands once (after the EAL is up) and lists `board`.
// A board must be removed before it is destroyed.
void telemetry_add(const CounterBoard* board);
void telemetry_remove(const CounterBoard* board);

}  // namespace rocemu::dpdk
