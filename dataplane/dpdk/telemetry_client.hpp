// Reads rocemu's counters from a running process through its DPDK telemetry
// socket (see telemetry.hpp for the commands). Free of DPDK: the socket speaks
// plain JSON over SOCK_SEQPACKET, so `rocemu counters` needs no EAL.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/dpdk/runtime_base.hpp"

namespace rocemu::dpdk {

using Fields = std::vector<std::pair<std::string, std::string>>;  // name, value as printed

struct QpReport {
    long qpn = 0;
    Fields counters;
};

struct PortReport {
    long id = 0;
    std::string name;
    Fields counters;              // port and host stack
    std::optional<Fields> engine; // when a transport engine is attached
    std::vector<QpReport> qps;
};

std::filesystem::path telemetry_socket(const std::string& file_prefix);

// Every port of the process with that file prefix. nullopt and `error` when
// the socket cannot be reached.
std::optional<std::vector<PortReport>> read_counters(const std::string& file_prefix, std::string& error);

// The raw JSON replies, in the order read_counters() asks.
std::optional<std::vector<std::string>> read_counters_json(const std::string& file_prefix, std::string& error);

}  // namespace rocemu::dpdk
